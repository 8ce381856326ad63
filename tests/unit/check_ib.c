/*
 * check_ib.c — device-free unit tests of the ibverbs transport
 * (transports/ibverbs): the handshake encoding (ib_wire), the slot header,
 * CTS and immediates (ib_proto), credit accounting (ib_credit), the
 * memory-registration cache (ib_mr), LOOM_IB_HCA and GID parsing
 * (ib_select), and the data path itself (ib_ep) between two endpoints
 * over a loopback fake NIC that checks every key, every range and every
 * receive the protocol relies on.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ibverbs/ib_credit.h"
#include "ibverbs/ib_ep.h"
#include "ibverbs/ib_fifo.h"
#include "ibverbs/ib_mr.h"
#include "ibverbs/ib_proto.h"
#include "ibverbs/ib_select.h"
#include "ibverbs/ib_wire.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

/* ---- ib_wire: the handshake ---------------------------------------------------- */

static struct ib_hello sample_hello(void) {
  return (struct ib_hello){.rank = 3,
                           .peer = 7,
                           .comm_hash = 0x0123456789abcdefull,
                           .qp_num = 0xabcdef,
                           .ring_addr = 0x7f0012345000ull,
                           .ring_rkey = 0xdeadbeef,
                           .slot_bytes = 32768,
                           .nslots = 16,
                           .credits = 16,
                           .rdv_slots = 8};
}

START_TEST(wire_round_trip) {
  struct ib_hello h = sample_hello(), got;
  uint8_t buf[IB_WIRE_BYTES + 4] = {0};
  ck_assert_int_le(IB_WIRE_BYTES, 56); /* an IB connect request's private data */
  ib_wire_encode(&h, buf);
  memset(&got, 0x55, sizeof got);
  ck_assert_int_eq(ib_wire_decode(buf, IB_WIRE_BYTES, &got), IB_WIRE_OK);
  ck_assert_int_eq(got.version, IB_WIRE_VERSION);
  ck_assert_uint_eq(got.rank, 3);
  ck_assert_uint_eq(got.peer, 7);
  ck_assert(got.comm_hash == 0x0123456789abcdefull);
  ck_assert_uint_eq(got.qp_num, 0xabcdef);
  ck_assert(got.ring_addr == 0x7f0012345000ull);
  ck_assert_uint_eq(got.ring_rkey, 0xdeadbeef);
  ck_assert_uint_eq(got.slot_bytes, 32768);
  ck_assert_uint_eq(got.nslots, 16);
  ck_assert_uint_eq(got.credits, 16);
  ck_assert_uint_eq(got.rdv_slots, 8);
  /* Transports may pad private data: a longer buffer still decodes. */
  ck_assert_int_eq(ib_wire_decode(buf, sizeof buf, &got), IB_WIRE_OK);
  /* Little-endian on the wire whatever the host: the rank's low byte first. */
  ck_assert_uint_eq(buf[4], 3);
  ck_assert_uint_eq(buf[5], 0);
}
END_TEST

START_TEST(wire_truncated_rejected) {
  struct ib_hello h = sample_hello(), got = {.rank = 99};
  uint8_t buf[IB_WIRE_BYTES];
  ib_wire_encode(&h, buf);
  for (size_t len = 0; len < IB_WIRE_BYTES; len++)
    EXPECT(ib_wire_decode(buf, len, &got) == IB_WIRE_TRUNCATED, "%zu bytes accepted", len);
  ck_assert_int_eq(ib_wire_decode(NULL, 100, &got), IB_WIRE_TRUNCATED);
  ck_assert_uint_eq(got.rank, 99); /* untouched on failure */
}
END_TEST

START_TEST(wire_every_corrupt_byte_rejected) {
  struct ib_hello h = sample_hello(), got;
  uint8_t good[IB_WIRE_BYTES];
  ib_wire_encode(&h, good);
  for (size_t i = 0; i < IB_WIRE_BYTES; i++)
    for (int bit = 0; bit < 8; bit++) {
      uint8_t buf[IB_WIRE_BYTES];
      memcpy(buf, good, sizeof buf);
      buf[i] ^= (uint8_t)(1u << bit);
      enum ib_wire_error e = ib_wire_decode(buf, sizeof buf, &got);
      EXPECT(e != IB_WIRE_OK, "byte %zu bit %d flipped: accepted", i, bit);
      if (i < 2)
        EXPECT(e == IB_WIRE_BAD_MAGIC, "byte %zu: %s", i, ib_wire_strerror(e));
      else if (i == 2)
        EXPECT(e == IB_WIRE_BAD_VERSION, "version byte: %s", ib_wire_strerror(e));
      else
        EXPECT(e == IB_WIRE_BAD_CHECKSUM, "byte %zu bit %d: %s", i, bit, ib_wire_strerror(e));
    }
}
END_TEST

START_TEST(wire_version_mismatch_rejected) {
  struct ib_hello h = sample_hello(), got;
  uint8_t buf[IB_WIRE_BYTES];
  ib_wire_encode(&h, buf);
  buf[2] = IB_WIRE_VERSION + 1; /* a newer Loom: refused before the checksum */
  ck_assert_int_eq(ib_wire_decode(buf, sizeof buf, &got), IB_WIRE_BAD_VERSION);
  ck_assert_int_eq(ib_wire_peek_version(buf, sizeof buf), IB_WIRE_VERSION + 1);
  ck_assert_str_eq(ib_wire_strerror(IB_WIRE_BAD_VERSION),
                   "another version of Loom's ibverbs transport");
  memset(buf, 0, sizeof buf); /* all zeros: not a Loom handshake at all */
  ck_assert_int_eq(ib_wire_decode(buf, sizeof buf, &got), IB_WIRE_BAD_MAGIC);
}
END_TEST

START_TEST(wire_bad_geometry_rejected) {
  struct ib_hello bad[] = {sample_hello(), sample_hello(), sample_hello(), sample_hello(),
                           sample_hello(), sample_hello(), sample_hello(), sample_hello()};
  bad[0].nslots = 12;               /* not a power of two */
  bad[1].nslots = 0;
  bad[2].slot_bytes = 100;          /* below the minimum */
  bad[3].slot_bytes = 32768 + 8;    /* not a multiple of 64 */
  bad[4].credits = 17;              /* more than the slots */
  bad[5].credits = 0;
  bad[6].rdv_slots = 3;
  bad[7].ring_addr = 0;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t buf[IB_WIRE_BYTES];
    struct ib_hello got;
    ib_wire_encode(&bad[i], buf); /* checksum valid: geometry is checked on its own */
    EXPECT(ib_wire_decode(buf, sizeof buf, &got) == IB_WIRE_BAD_GEOMETRY, "case %zu accepted", i);
  }
}
END_TEST

START_TEST(wire_secret_hash) {
  uint8_t a[16] = {1, 2, 3}, b[16] = {1, 2, 3};
  ck_assert(ib_wire_secret_hash(a, 16) == ib_wire_secret_hash(b, 16));
  b[15] = 1;
  ck_assert(ib_wire_secret_hash(a, 16) != ib_wire_secret_hash(b, 16));
  uint64_t h = ib_wire_secret_hash(a, 16);
  ck_assert(memcmp(&h, a, 8) != 0); /* a digest, not the secret */
}
END_TEST

/* ---- ib_proto: headers, CTS, immediates ------------------------------------------ */

START_TEST(proto_hdr_and_cts) {
  struct ib_msg_hdr h = {.kind = IB_MSG_RTS, .credits = 5, .seq = 0xfffffffe,
                         .len = (1ull << 33) + 7, .fp = {0x1111222233334444ull, 42}};
  uint8_t buf[IB_HDR_BYTES];
  ib_hdr_encode(&h, buf);
  struct ib_msg_hdr g;
  ck_assert_int_eq(ib_hdr_decode(buf, &g), 0);
  ck_assert_uint_eq(g.kind, IB_MSG_RTS);
  ck_assert_uint_eq(g.credits, 5);
  ck_assert_uint_eq(g.seq, 0xfffffffe);
  ck_assert(g.len == (1ull << 33) + 7 && g.fp[0] == 0x1111222233334444ull && g.fp[1] == 42);
  buf[1] = 9; /* unknown kind */
  ck_assert_int_eq(ib_hdr_decode(buf, &g), -1);
  memset(buf, 0, sizeof buf); /* a slot never written */
  ck_assert_int_eq(ib_hdr_decode(buf, &g), -1);

  struct ib_cts c = {.credits = 3, .rdv = 0x12345678, .addr = 0x7fff00001000ull,
                     .len = 1 << 20, .rkey = 0xcafe};
  uint8_t cb[IB_CTS_BYTES];
  ib_cts_encode(&c, cb);
  struct ib_cts d;
  ck_assert_int_eq(ib_cts_decode(cb, &d), 0);
  ck_assert(d.credits == 3 && d.rdv == 0x12345678 && d.addr == 0x7fff00001000ull &&
            d.len == 1 << 20 && d.rkey == 0xcafe);
  cb[0] ^= 1;
  ck_assert_int_eq(ib_cts_decode(cb, &d), -1);
}
END_TEST

START_TEST(proto_immediates) {
  uint32_t imm = ib_imm_make(IB_IMM_DONE, 0x12345678);
  ck_assert_int_eq(ib_imm_type_of(imm), IB_IMM_DONE);
  ck_assert_uint_eq(ib_imm_value(imm), 0x02345678); /* low 28 bits */
  ck_assert_int_eq(ib_imm_type_of(ib_imm_make(IB_IMM_SLOT, 15)), IB_IMM_SLOT);
  ck_assert_uint_eq(ib_imm_value(ib_imm_make(IB_IMM_CREDIT, 16)), 16);
  ck_assert_int_eq(ib_imm_type_of(ib_imm_make(IB_IMM_CTS, 0)), IB_IMM_CTS);
}
END_TEST

/* ---- ib_credit ------------------------------------------------------------------- */

START_TEST(credit_sender_never_overcommits) {
  struct ib_credit_tx tx;
  ck_assert_int_eq(ib_credit_tx_init(&tx, 12, 12), -1); /* not a power of two */
  ck_assert_int_eq(ib_credit_tx_init(&tx, 8, 9), -1);
  ck_assert_int_eq(ib_credit_tx_init(&tx, 8, 8), 0);
  uint32_t slot;
  for (uint32_t i = 0; i < 8; i++) {
    ck_assert_int_eq(ib_credit_tx_take(&tx, &slot), 0);
    ck_assert_uint_eq(slot, i);
  }
  ck_assert_int_eq(ib_credit_tx_take(&tx, &slot), -1);
  ck_assert_uint_eq(tx.credits, 0);
  ck_assert_int_eq(ib_credit_tx_give(&tx, 9), -1); /* more than lent */
  ck_assert_uint_eq(tx.credits, 0);
  ck_assert_int_eq(ib_credit_tx_give(&tx, 3), 0);
  ck_assert_int_eq(ib_credit_tx_give(&tx, 6), -1); /* 3 + 6 > 8 */
  ck_assert_int_eq(ib_credit_tx_give(&tx, 5), 0);
  ck_assert_int_eq(ib_credit_tx_take(&tx, &slot), 0);
  ck_assert_uint_eq(slot, 0); /* wrapped to the first slot */
}
END_TEST

START_TEST(credit_receiver_rejects_overrun) {
  struct ib_credit_rx rx;
  ck_assert_int_eq(ib_credit_rx_init(&rx, 4, 0), -1);
  ck_assert_int_eq(ib_credit_rx_init(&rx, 4, 5), -1);
  ck_assert_int_eq(ib_credit_rx_init(&rx, 4, 2), 0);
  ck_assert_int_eq(ib_credit_rx_arrive(&rx, 1), -1); /* out of ring order */
  for (uint32_t s = 0; s < 4; s++)
    ck_assert_int_eq(ib_credit_rx_arrive(&rx, s), 0);
  /* A fifth slot without a credit returned: the ring would overflow. */
  ck_assert_int_eq(ib_credit_rx_arrive(&rx, 0), -1);
  /* Released but not yet returned still blocks: the sender has no credit. */
  ck_assert_int_eq(ib_credit_rx_release(&rx), 0);
  ck_assert_int_eq(ib_credit_rx_arrive(&rx, 0), -1);
  ck_assert_uint_eq(ib_credit_rx_due(&rx, 0), 0); /* 1 < batch 2 */
  ck_assert_uint_eq(ib_credit_rx_due(&rx, 1), 1); /* forced: piggyback */
  ck_assert_int_eq(ib_credit_rx_returned(&rx, 2), -1);
  ck_assert_int_eq(ib_credit_rx_returned(&rx, 1), 0);
  ck_assert_int_eq(ib_credit_rx_arrive(&rx, 0), 0);
}
END_TEST

START_TEST(credit_batch_return) {
  struct ib_credit_rx rx;
  ck_assert_int_eq(ib_credit_rx_init(&rx, 16, 4), 0);
  for (uint32_t s = 0; s < 10; s++)
    ck_assert_int_eq(ib_credit_rx_arrive(&rx, s), 0);
  uint32_t oldest;
  ck_assert_uint_eq(ib_credit_rx_pending(&rx, &oldest), 10);
  ck_assert_uint_eq(oldest, 0);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ib_credit_rx_release(&rx), 0);
    ck_assert_uint_eq(ib_credit_rx_due(&rx, 0), 0);
  }
  ck_assert_int_eq(ib_credit_rx_release(&rx), 0);
  ck_assert_uint_eq(ib_credit_rx_due(&rx, 0), 4); /* the batch */
  ck_assert_uint_eq(ib_credit_rx_due(&rx, 0), 4); /* nothing committed yet */
  ck_assert_int_eq(ib_credit_rx_returned(&rx, 4), 0);
  ck_assert_uint_eq(ib_credit_rx_due(&rx, 1), 0);
  ck_assert_uint_eq(ib_credit_rx_pending(&rx, &oldest), 6);
  ck_assert_uint_eq(oldest, 4);
  for (int i = 0; i < 6; i++)
    ck_assert_int_eq(ib_credit_rx_release(&rx), 0);
  ck_assert_int_eq(ib_credit_rx_release(&rx), -1); /* nothing left arrived */
  ck_assert_uint_eq(ib_credit_rx_due(&rx, 0), 6);  /* all pending at once */
}
END_TEST

/* Sender and receiver state machines driven together across the 2^32
 * counter wrap: the slot sequence stays in ring order and the sender is
 * never ahead of the receiver's ring. */
START_TEST(credit_wrap_around) {
  struct ib_credit_tx tx;
  struct ib_credit_rx rx;
  ck_assert_int_eq(ib_credit_tx_init(&tx, 8, 8), 0);
  ck_assert_int_eq(ib_credit_rx_init(&rx, 8, 3), 0);
  uint32_t start = UINT32_MAX - 20;
  ib_credit_tx_init_at(&tx, start);
  ib_credit_rx_init_at(&rx, start);
  uint32_t expect_slot = start & 7, in_flight = 0, sent = 0;
  for (int round = 0; round < 200; round++) {
    uint32_t slot;
    while (round % 7 != 3 && ib_credit_tx_take(&tx, &slot) == 0) {
      ck_assert_uint_eq(slot, expect_slot);
      expect_slot = (expect_slot + 1) & 7;
      ck_assert_int_eq(ib_credit_rx_arrive(&rx, slot), 0);
      in_flight++;
      sent++;
      ck_assert_uint_le(in_flight, 8);
    }
    for (int k = 0; k < round % 4 && ib_credit_rx_release(&rx) == 0; k++)
      in_flight--;
    uint32_t due = ib_credit_rx_due(&rx, round % 5 == 0);
    if (due) {
      ck_assert_int_eq(ib_credit_rx_returned(&rx, due), 0);
      ck_assert_int_eq(ib_credit_tx_give(&tx, due), 0);
    }
    ck_assert_uint_eq(tx.credits + (rx.arrived - rx.returned), 8); /* conservation */
  }
  ck_assert_uint_gt(sent, 100);
  ck_assert_uint_lt(tx.next, start); /* the counters did wrap */
}
END_TEST

/* ---- ib_mr: the registration cache ------------------------------------------------- */

struct fake_reg {
  int regs, deregs, fail_next, fail_always, watch_fails, odp;
  int watches, unwatches;
  uint32_t next_key;
  void *last_addr;
  size_t last_len;
};

static int fake_reg_cb(void *arg, void *addr, size_t len, struct ib_mr_keys *out) {
  struct fake_reg *f = arg;
  if (f->fail_always || f->fail_next) {
    f->fail_next = 0;
    return ENOMEM;
  }
  f->regs++;
  f->last_addr = addr;
  f->last_len = len;
  out->handle = (void *)(uintptr_t)(++f->next_key);
  out->lkey = f->next_key;
  out->rkey = f->next_key | 0x80000000u;
  out->follows_mapping = f->odp;
  return 0;
}

static void fake_dereg_cb(void *arg, void *handle) {
  struct fake_reg *f = arg;
  (void)handle;
  f->deregs++;
}

static int fake_watch_cb(void *arg, void *addr, size_t len) {
  struct fake_reg *f = arg;
  (void)addr, (void)len;
  f->watches++;
  return f->watch_fails ? -1 : 0;
}

static void fake_unwatch_cb(void *arg, void *addr, size_t len) {
  struct fake_reg *f = arg;
  (void)addr, (void)len;
  f->unwatches++;
}

static void cache_new(struct ib_mr_cache *c, struct fake_reg *f, size_t max_entries,
                      size_t max_bytes) {
  memset(f, 0, sizeof *f);
  struct ib_mr_ops ops = {.reg = fake_reg_cb, .dereg = fake_dereg_cb, .arg = f};
  ck_assert_int_eq(ib_mr_cache_init(c, &ops, max_entries, max_bytes), 0);
}

#define PG 4096u
static char *page_base(void) {
  static char *mem;
  if (mem == NULL)
    ck_assert_int_eq(posix_memalign((void **)&mem, 1 << 20, 64 * PG), 0);
  return mem;
}

START_TEST(mr_hit_on_covered_subrange) {
  struct ib_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct ib_mr_entry *e1, *e2, *e3;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 100, 3 * PG, &e1), 0);
  ck_assert_int_eq(f.regs, 1);
  /* Registered page-aligned: [m, m + 4 pages). */
  ck_assert_ptr_eq(f.last_addr, m);
  ck_assert_uint_eq(f.last_len, 4 * PG);
  ck_assert_int_eq(ib_mr_acquire(&c, m + PG, 2 * PG, &e2), 0); /* inside */
  ck_assert_ptr_eq(e2, e1);
  ck_assert_int_eq(ib_mr_acquire(&c, m, 4 * PG, &e3), 0); /* exactly the range */
  ck_assert_ptr_eq(e3, e1);
  ck_assert_int_eq(f.regs, 1);
  ck_assert_int_eq(e1->refs, 3);
  struct ib_mr_stats s = ib_mr_cache_stats(&c);
  ck_assert(s.hits == 2 && s.misses == 1);
  ib_mr_release(&c, e1);
  ib_mr_release(&c, e2);
  ib_mr_release(&c, e3);
  ck_assert_int_eq(f.deregs, 0); /* kept idle */
  ib_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, 1);
}
END_TEST

START_TEST(mr_miss_on_partial_overlap) {
  struct ib_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct ib_mr_entry *a, *b, *z;
  ck_assert_int_eq(ib_mr_acquire(&c, m, 2 * PG, &a), 0);
  ck_assert_int_eq(ib_mr_acquire(&c, m + PG, 2 * PG, &b), 0); /* sticks out */
  ck_assert_ptr_ne(a, b);
  ck_assert_int_eq(f.regs, 2);
  ck_assert_int_eq(ib_mr_acquire(&c, m, 0, &z), EINVAL);
  ck_assert_int_eq(ib_mr_acquire(&c, (void *)(UINTPTR_MAX - 10), 100, &z), EINVAL);
  ib_mr_release(&c, a);
  ib_mr_release(&c, b);
  ib_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, 2);
}
END_TEST

START_TEST(mr_lru_eviction_order) {
  struct ib_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 3, 1 << 30);
  char *m = page_base();
  struct ib_mr_entry *e[5];
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ib_mr_acquire(&c, m + (size_t)i * 2 * PG, PG, &e[i]), 0);
    ib_mr_release(&c, e[i]);
  }
  /* Touch entry 0: entry 1 becomes the least recently used. */
  struct ib_mr_entry *t;
  ck_assert_int_eq(ib_mr_acquire(&c, m, 10, &t), 0);
  ck_assert_ptr_eq(t, e[0]);
  ib_mr_release(&c, t);
  ck_assert_int_eq(ib_mr_acquire(&c, m + 6 * PG, PG, &e[3]), 0); /* a fourth: evicts 1 */
  ib_mr_release(&c, e[3]);
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_uint_eq(c.nentries, 3);
  ck_assert_int_eq(ib_mr_acquire(&c, m + 2 * PG, PG, &t), 0); /* entry 1's range: a miss */
  ck_assert_int_eq(f.regs, 5);
  ib_mr_release(&c, t); /* evicts entry 2, now the oldest */
  ck_assert_int_eq(ib_mr_acquire(&c, m, PG, &t), 0); /* entry 0 still there */
  ck_assert_int_eq(f.regs, 5);
  ib_mr_release(&c, t);
  ck_assert_int_eq(ib_mr_acquire(&c, m + 4 * PG, PG, &t), 0); /* entry 2: gone */
  ck_assert_int_eq(f.regs, 6);
  ib_mr_release(&c, t);
  ck_assert(ib_mr_cache_stats(&c).evictions == 3);
  ib_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, f.regs);
}
END_TEST

START_TEST(mr_eviction_by_bytes_spares_entries_in_use) {
  struct ib_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 100, 4 * PG);
  char *m = page_base();
  struct ib_mr_entry *a, *b, *d;
  ck_assert_int_eq(ib_mr_acquire(&c, m, 3 * PG, &a), 0);        /* 3 pages, held */
  ck_assert_int_eq(ib_mr_acquire(&c, m + 8 * PG, 3 * PG, &b), 0); /* 6 > 4: a and b held */
  ck_assert_int_eq(f.deregs, 0);
  ck_assert_uint_eq(c.bytes, 6 * PG);
  ib_mr_release(&c, a); /* idle now and over the bound: goes */
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_uint_eq(c.bytes, 3 * PG);
  ck_assert_int_eq(ib_mr_acquire(&c, m + 16 * PG, PG, &d), 0); /* 4 pages: fits */
  ib_mr_release(&c, d);
  ib_mr_release(&c, b);
  ck_assert_int_eq(f.deregs, 1);
  ib_mr_cache_fini(&c);
}
END_TEST

START_TEST(mr_invalidate_overlapping) {
  struct ib_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct ib_mr_entry *e[4];
  for (int i = 0; i < 4; i++) { /* [0,2) [4,6) [8,10) [12,14) pages */
    ck_assert_int_eq(ib_mr_acquire(&c, m + (size_t)i * 4 * PG, 2 * PG, &e[i]), 0);
    if (i != 2)
      ib_mr_release(&c, e[i]);
  }
  /* [5, 9) pages overlaps entries 1 and 2 (2 still in use), not 0 or 3; the
   * process-wide entry point reaches this cache too. */
  ck_assert_uint_eq(loom_ib_mr_invalidate(m + 5 * PG, 4 * PG), 2);
  ck_assert_int_eq(f.deregs, 1); /* entry 1 now; entry 2 when released */
  struct ib_mr_entry *t;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 8 * PG, PG, &t), 0); /* a miss now */
  ck_assert_ptr_ne(t, e[2]);
  ck_assert_int_eq(f.regs, 5);
  ib_mr_release(&c, e[2]);
  ck_assert_int_eq(f.deregs, 2);
  ib_mr_release(&c, t);
  /* A range touching no entry, and the byte just past one, invalidate nothing. */
  ck_assert_uint_eq(ib_mr_invalidate(&c, m + 2 * PG, 2 * PG), 0);
  ck_assert_uint_eq(ib_mr_invalidate(&c, m + 14 * PG, 1), 0);
  ck_assert_uint_eq(ib_mr_invalidate(&c, m + 14 * PG - 1, 1), 1);
  ck_assert_uint_eq(ib_mr_invalidate(&c, m, 0), 0);
  ck_assert(ib_mr_cache_stats(&c).invalidations == 3);
  ib_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, f.regs);
}
END_TEST

START_TEST(mr_registration_failure) {
  struct ib_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct ib_mr_entry *idle, *held, *t = NULL;
  ck_assert_int_eq(ib_mr_acquire(&c, m, PG, &idle), 0);
  ib_mr_release(&c, idle);
  ck_assert_int_eq(ib_mr_acquire(&c, m + 4 * PG, PG, &held), 0);
  /* The first attempt fails (pinned-memory limit): idle entries are
   * dropped, held ones kept, and the retry succeeds. */
  f.fail_next = 1;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 8 * PG, PG, &t), 0);
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_uint_eq(c.nentries, 2);
  ib_mr_release(&c, t);
  /* Failing for good: the errno comes back, nothing is cached or leaked. */
  f.fail_always = 1;
  t = NULL;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 12 * PG, PG, &t), ENOMEM);
  ck_assert_ptr_null(t);
  ck_assert_uint_eq(c.nentries, 1); /* the held one */
  ck_assert(ib_mr_cache_stats(&c).failures == 1);
  f.fail_always = 0;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 12 * PG, PG, &t), 0);
  ib_mr_release(&c, t);
  ib_mr_release(&c, held);
  ib_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, f.regs);
}
END_TEST

/* Without a watch on unmapping, an idle entry would go stale unseen: the
 * cache then deregisters each entry as soon as its transfer releases it. */
START_TEST(mr_unwatched_entries_not_kept) {
  struct ib_mr_cache c;
  struct fake_reg f;
  memset(&f, 0, sizeof f);
  struct ib_mr_ops ops = {.reg = fake_reg_cb, .dereg = fake_dereg_cb, .watch = fake_watch_cb,
                          .unwatch = fake_unwatch_cb, .arg = &f};
  ck_assert_int_eq(ib_mr_cache_init(&c, &ops, 16, 1 << 30), 0);
  char *m = page_base();
  struct ib_mr_entry *a, *b;
  ck_assert_int_eq(ib_mr_acquire(&c, m, PG, &a), 0); /* watched */
  f.watch_fails = 1;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 4 * PG, PG, &b), 0); /* not watched */
  ck_assert_int_eq(f.watches, 2);
  ib_mr_release(&c, a);
  ib_mr_release(&c, b);
  ck_assert_int_eq(f.deregs, 1); /* b, at once */
  ck_assert_int_eq(f.unwatches, 0);
  /* A registration that follows the mapping (On-Demand Paging) cannot go
   * stale: kept idle even without a watch. */
  f.odp = 1;
  struct ib_mr_entry *d;
  ck_assert_int_eq(ib_mr_acquire(&c, m + 8 * PG, PG, &d), 0);
  ib_mr_release(&c, d);
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_int_eq(ib_mr_acquire(&c, m + 8 * PG, 100, &d), 0); /* a hit */
  ck_assert_int_eq(f.regs, 3);
  ib_mr_release(&c, d);
  ib_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, 3);
  ck_assert_int_eq(f.unwatches, 1); /* a's watch ended with it */
}
END_TEST

/* ---- ib_select: LOOM_IB_HCA and GIDs ---------------------------------------------------- */

START_TEST(hca_spec) {
  char why[200];
  ck_assert(ib_hca_match(NULL, "mlx5_0", 1));
  ck_assert(ib_hca_match("", "mlx5_0", 1));
  ck_assert(ib_hca_match("mlx5_0:1", "mlx5_0", 1));
  ck_assert(!ib_hca_match("mlx5_0:1", "mlx5_0", 2));
  ck_assert(ib_hca_match("mlx5", "mlx5_3", 2)); /* prefix */
  ck_assert(!ib_hca_match("=mlx5", "mlx5_3", 2));
  ck_assert(ib_hca_match("=mlx5_3", "mlx5_3", 2));
  ck_assert(ib_hca_match("mlx4_0,mlx5_1:2", "mlx5_1", 2));
  ck_assert(!ib_hca_match("mlx4_0,mlx5_1:2", "mlx5_1", 1));
  ck_assert(!ib_hca_match("^mlx5_1", "mlx5_1", 1));
  ck_assert(ib_hca_match("^mlx5_1", "mlx5_0", 1));
  ck_assert(ib_hca_match("^=mlx5", "mlx5_0", 1));
  ck_assert(!ib_hca_match("^mlx5_0:1", "mlx5_0", 1));
  ck_assert(ib_hca_match("^mlx5_0:1", "mlx5_0", 2));
  ck_assert(ib_hca_match("rxe", "rxe0", 1));
  ck_assert_int_eq(ib_hca_check("mlx5_0:1,rxe0", why, sizeof why), 0);
  static const char *bad[] = {"mlx5_0:", ":1", "mlx5_0:0", "mlx5_0:256", "mlx5_0:x",
                              "a,,b", "^", "=", "mlx5_0:1:2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    EXPECT(ib_hca_check(bad[i], why, sizeof why) == -1, "\"%s\" accepted", bad[i]);
    EXPECT(strstr(why, "LOOM_IB_HCA") != NULL, "\"%s\": %s", bad[i], why);
    EXPECT(!ib_hca_match(bad[i], "mlx5_0", 1), "\"%s\" matched", bad[i]);
  }
}
END_TEST

START_TEST(gid_addresses) {
  uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3};
  union loom_sockaddr a;
  ck_assert_int_eq(ib_gid_to_sockaddr(gid, &a), 0);
  ck_assert_int_eq(a.sa.sa_family, AF_INET);
  ck_assert_uint_eq(ntohl(a.sin.sin_addr.s_addr), 0x0a010203);
  ck_assert_int_eq(a.sin.sin_port, 0);
  uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  ck_assert_int_eq(ib_gid_to_sockaddr(v6, &a), 0);
  ck_assert_int_eq(a.sa.sa_family, AF_INET6);
  ck_assert_int_eq(memcmp(&a.sin6.sin6_addr, v6, 16), 0);
  uint8_t link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0, 0, 1};
  ck_assert_int_eq(ib_gid_to_sockaddr(link_local, &a), -1); /* RoCE v1 / IB default GID */
  uint8_t zero[16] = {0};
  ck_assert_int_eq(ib_gid_to_sockaddr(zero, &a), -1);
}
END_TEST

/* ---- ib_fifo ------------------------------------------------------------------------- */

START_TEST(fifo_order_and_growth) {
  struct ib_fifo q;
  ib_fifo_init(&q, sizeof(int));
  int next_out = 0;
  for (int i = 0; i < 1000; i++) {
    ck_assert_int_eq(ib_fifo_push(&q, &i), 0);
    if (i % 3 == 0) {
      ck_assert_int_eq(*(int *)ib_fifo_at(&q, 0), next_out++);
      ib_fifo_pop(&q);
    }
  }
  ck_assert_uint_eq(q.count, 1000 - 334);
  for (size_t i = 0; i < q.count; i++)
    ck_assert_int_eq(*(int *)ib_fifo_at(&q, i), next_out + (int)i);
  ck_assert_ptr_null(ib_fifo_at(&q, q.count));
  ib_fifo_free(&q);
}
END_TEST

/* ---- ib_ep: the data path over a loopback fake NIC ----------------------------------------
 *
 * Memory regions are registered with the fake (keys -> ranges); every
 * write checks its local key covers the source and its remote key covers
 * the target (a stale or wrong key fails the test), is carried out later
 * (the NIC reads the source then, as a real one does), in posting order
 * per QP, and consumes one of the receiver's posted receives when it
 * carries an immediate (none posted: the test fails, as RNR would).
 * Completions are delivered in order. */

#define MAX_KEYS 256
#define MAX_OPS 4096

struct fake_mr {
  uintptr_t start, end;
  uint32_t key;
  int live;
};

struct fake_nic {
  struct fake_mr mrs[MAX_KEYS];
  uint32_t next_key;
  int regs, deregs, reg_fail;
};

struct fake_op {
  uint64_t wr_id;
  const void *local;
  size_t len;
  uint64_t raddr;
  int with_imm;
  uint32_t imm;
  uint64_t sum; /* of the source when carried out: it must not change
                   before the completion (a NIC may read it again to
                   retransmit) */
};

static uint64_t checksum(const void *p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
  return h;
}

struct fake_qp {
  struct fake_nic *nic;
  struct fake_qp *peer;
  struct ib_ep *ep;
  struct fake_op ops[MAX_OPS]; /* posted, not yet carried out */
  size_t head, count;
  struct fake_op cq[MAX_OPS]; /* carried out, completion not yet delivered */
  size_t cq_head, cq_count;
  uint32_t rcq[MAX_OPS]; /* immediates received, not yet delivered */
  size_t rcq_head, rcq_count;
  int recvs_posted, rq_depth, rq_max_used; /* receives: posted, at start, most in use */
  uint32_t max_outstanding;
  char fail[256]; /* first violation seen */
};

static struct fake_mr *fake_find(struct fake_nic *n, uint32_t key, uintptr_t a, size_t len) {
  for (int i = 0; i < MAX_KEYS; i++) {
    struct fake_mr *m = &n->mrs[i];
    if (m->live && m->key == key && m->start <= a && a + len <= m->end)
      return m;
  }
  return NULL;
}

static int nic_reg(void *arg, void *addr, size_t len, struct ib_mr_keys *out) {
  struct fake_nic *n = arg;
  if (n->reg_fail)
    return n->reg_fail;
  for (int i = 0; i < MAX_KEYS; i++)
    if (!n->mrs[i].live) {
      n->mrs[i] = (struct fake_mr){(uintptr_t)addr, (uintptr_t)addr + len, ++n->next_key, 1};
      out->handle = &n->mrs[i];
      out->lkey = out->rkey = n->next_key;
      n->regs++;
      return 0;
    }
  return ENOMEM;
}

static void nic_dereg(void *arg, void *handle) {
  struct fake_nic *n = arg;
  ((struct fake_mr *)handle)->live = 0;
  n->deregs++;
}

static int nic_write(void *qpv, uint64_t wr_id, const void *local, size_t len, uint32_t lkey,
                     uint64_t raddr, uint32_t rkey, int with_imm, uint32_t imm) {
  struct fake_qp *qp = qpv;
  if (len > 0 && fake_find(qp->nic, lkey, (uintptr_t)local, len) == NULL)
    snprintf(qp->fail, sizeof qp->fail, "write: local key %u does not cover %zu bytes", lkey, len);
  if (fake_find(qp->nic, rkey, (uintptr_t)raddr, len) == NULL)
    snprintf(qp->fail, sizeof qp->fail, "write: remote key %u does not cover %zu bytes at %llx",
             rkey, len, (unsigned long long)raddr);
  if (qp->count == MAX_OPS)
    return ENOMEM;
  qp->ops[(qp->head + qp->count++) % MAX_OPS] = (struct fake_op){
      .wr_id = wr_id, .local = local, .len = len, .raddr = raddr, .with_imm = with_imm,
      .imm = imm};
  if (qp->count > qp->max_outstanding)
    qp->max_outstanding = (uint32_t)qp->count;
  return 0;
}

static int nic_post_recvs(void *qpv, int n) {
  ((struct fake_qp *)qpv)->recvs_posted += n;
  return 0;
}

static const struct ib_nic_ops fake_ops = {.write = nic_write, .post_recvs = nic_post_recvs};

/* Carries out the oldest posted write of qp: the data lands, the
 * receiver's completion is delivered, the sender's is queued (a real
 * sender learns of it later than the receiver, from the ACK). */
static void fake_carry_one(struct fake_qp *qp) {
  struct fake_op op = qp->ops[qp->head];
  qp->head = (qp->head + 1) % MAX_OPS;
  qp->count--;
  if (op.len > 0)
    memcpy((void *)(uintptr_t)op.raddr, op.local, op.len);
  if (op.with_imm) {
    struct fake_qp *peer = qp->peer;
    if (peer->recvs_posted == 0)
      snprintf(qp->fail, sizeof qp->fail, "receiver not ready (no receive posted): RNR");
    peer->recvs_posted--;
    if (peer->rq_depth - peer->recvs_posted > peer->rq_max_used)
      peer->rq_max_used = peer->rq_depth - peer->recvs_posted;
    peer->rcq[(peer->rcq_head + peer->rcq_count++) % MAX_OPS] = op.imm;
  }
  op.sum = op.len > 0 ? checksum(op.local, op.len) : 0;
  qp->cq[(qp->cq_head + qp->cq_count++) % MAX_OPS] = op;
}

static void fake_complete_one(struct fake_qp *qp) {
  struct fake_op op = qp->cq[qp->cq_head];
  qp->cq_head = (qp->cq_head + 1) % MAX_OPS;
  qp->cq_count--;
  if (op.len > 0 && checksum(op.local, op.len) != op.sum)
    snprintf(qp->fail, sizeof qp->fail,
             "the source of write 0x%llx changed before its completion",
             (unsigned long long)op.wr_id);
  ib_ep_send_done(qp->ep, op.wr_id);
}

struct side {
  struct ib_ep ep;
  struct fake_qp qp;
  struct ib_mr_cache mrs;
  uint8_t *in, *out;
  uint32_t in_key, out_key;
  void *in_mr, *out_mr;
};

struct pair {
  struct fake_nic nic;
  struct side s[2];
  unsigned rng;
  int stall[2];   /* turns a side still skips polling and progress */
  int cq_hold[2]; /* turns a side still gets no send completion */
  int random_stalls;
};

static uint32_t reg_region(struct fake_nic *n, void *p, size_t len, void **handle) {
  struct ib_mr_keys k;
  ck_assert_int_eq(nic_reg(n, p, len, &k), 0);
  *handle = k.handle;
  return k.rkey;
}

static void pair_init(struct pair *p, size_t max_write) {
  memset(p, 0, sizeof *p);
  p->rng = 12345;
  p->random_stalls = 1;
  size_t region = ib_ep_region_bytes(IB_EP_NSLOTS, IB_EP_SLOT_BYTES, IB_EP_RDV_SLOTS);
  for (int i = 0; i < 2; i++) {
    struct side *s = &p->s[i];
    s->in = calloc(1, region);
    s->out = calloc(1, region);
    s->in_key = reg_region(&p->nic, s->in, region, &s->in_mr);
    s->out_key = reg_region(&p->nic, s->out, region, &s->out_mr);
    struct ib_mr_ops ops = {.reg = nic_reg, .dereg = nic_dereg, .arg = &p->nic};
    ck_assert_int_eq(ib_mr_cache_init(&s->mrs, &ops, 64, 1 << 30), 0);
    s->qp.nic = &p->nic;
    s->qp.peer = &p->s[1 - i].qp;
    s->qp.ep = &s->ep;
  }
  for (int i = 0; i < 2; i++) {
    struct side *s = &p->s[i], *o = &p->s[1 - i];
    struct ib_ep_config cfg = {.rank = i, .peer = 1 - i, .nslots = IB_EP_NSLOTS,
                               .slot_bytes = IB_EP_SLOT_BYTES, .rdv_slots = IB_EP_RDV_SLOTS,
                               .in = s->in, .out = s->out, .out_lkey = s->out_key,
                               .remote_addr = (uint64_t)(uintptr_t)o->in,
                               .remote_rkey = o->in_key, .credits = IB_EP_NSLOTS,
                               .max_write = max_write, .nic = &fake_ops, .qp = &s->qp,
                               .mrs = &s->mrs};
    ck_assert_int_eq(ib_ep_init(&s->ep, &cfg), loomSuccess);
  }
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(ib_ep_start(&p->s[i].ep), loomSuccess);
    p->s[i].qp.rq_depth = p->s[i].qp.recvs_posted;
  }
}

static void pair_fini(struct pair *p) {
  for (int i = 0; i < 2; i++) {
    struct side *s = &p->s[i];
    ib_ep_fini(&s->ep);
    ib_mr_cache_fini(&s->mrs);
    nic_dereg(&p->nic, s->in_mr);
    nic_dereg(&p->nic, s->out_mr);
    free(s->in);
    free(s->out);
  }
}

static unsigned next_rand(struct pair *p) {
  p->rng = p->rng * 1103515245u + 12345u;
  return p->rng >> 16;
}

/* One turn: each side's NIC carries out a few of its writes (a random
 * number, so that the sides interleave differently); then each side that
 * is not stalled polls its completions (all received immediates, a random
 * few send completions: they lag, as ACKs do) and progresses.  Now and
 * then a side stalls for a while (a slow rank): it neither polls nor
 * reposts, and its peer may still send all that credits allow. */
static loomResult_t pair_turn(struct pair *p, int *failed_side) {
  for (int i = 0; i < 2; i++) {
    struct fake_qp *qp = &p->s[i].qp;
    unsigned n = next_rand(p) % 4;
    while (n-- > 0 && qp->count > 0)
      fake_carry_one(qp);
  }
  for (int i = 0; i < 2; i++) {
    struct fake_qp *qp = &p->s[i].qp;
    EXPECT(p->s[0].qp.fail[0] == '\0', "side 0: %s", p->s[0].qp.fail);
    EXPECT(p->s[1].qp.fail[0] == '\0', "side 1: %s", p->s[1].qp.fail);
    EXPECT(p->s[i].ep.sq_used <= p->s[i].ep.sq_depth, "side %d: send queue overflow", i);
    if (p->stall[i] > 0) {
      p->stall[i]--;
      continue;
    }
    if (p->random_stalls && next_rand(p) % 64 == 0)
      p->stall[i] = 20 + (int)(next_rand(p) % 80);
    while (qp->rcq_count > 0) {
      uint32_t imm = qp->rcq[qp->rcq_head];
      qp->rcq_head = (qp->rcq_head + 1) % MAX_OPS;
      qp->rcq_count--;
      ib_ep_recv_imm(qp->ep, imm);
    }
    /* Send completions trickle in, and now and then none come for a
     * while (ACKs delayed): staging must not be reused meanwhile. */
    if (p->random_stalls && p->cq_hold[i] == 0 && next_rand(p) % 32 == 0)
      p->cq_hold[i] = 10 + (int)(next_rand(p) % 60);
    unsigned n = p->cq_hold[i] > 0 ? (p->cq_hold[i]--, 0) : next_rand(p) % 3;
    while (n-- > 0 && qp->cq_count > 0)
      fake_complete_one(qp);
    int progressed = 0;
    loomResult_t res = ib_ep_progress(&p->s[i].ep, &progressed);
    if (res != loomSuccess) {
      *failed_side = i;
      return res;
    }
  }
  return loomSuccess;
}

static int all_done(struct loom_xfer *x, int n) {
  for (int i = 0; i < n; i++)
    if (!x[i].done)
      return 0;
  return 1;
}

/* Runs turns until every transfer is done; fails the test on a hang. */
static void pair_run(struct pair *p, struct loom_xfer *x, int n) {
  for (int turn = 0; turn < 200000 && !all_done(x, n); turn++) {
    int side = -1;
    loomResult_t res = pair_turn(p, &side);
    EXPECT(res == loomSuccess, "side %d failed: %s", side, loom_last_error());
  }
  EXPECT(all_done(x, n), "transfers still pending after 200000 turns");
  /* Drain: writes still in flight (a last credit return) complete cleanly. */
  for (int turn = 0; turn < 1000; turn++) {
    int side = -1;
    EXPECT(pair_turn(p, &side) == loomSuccess, "drain: side %d: %s", side, loom_last_error());
  }
}

static void fill(uint8_t *b, size_t len, unsigned seed) {
  for (size_t i = 0; i < len; i++)
    b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static int check_fill(const uint8_t *b, size_t len, unsigned seed) {
  for (size_t i = 0; i < len; i++)
    if (b[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 8)))
      return (int)i;
  return -1;
}

/* n messages of the given lengths from side 0 to side 1 (and, with both,
 * as many from 1 to 0), receives posted before or after the sends. */
static void run_messages(size_t max_write, const size_t *lens, int n, int both,
                         int recv_first) {
  struct pair p;
  pair_init(&p, max_write);
  int dirs = both ? 2 : 1, total = n * dirs;
  struct loom_xfer *sx = calloc((size_t)total, sizeof *sx);
  struct loom_xfer *rx = calloc((size_t)total, sizeof *rx);
  uint8_t **sb = calloc((size_t)total, sizeof *sb), **rb = calloc((size_t)total, sizeof *rb);
  for (int d = 0; d < dirs; d++)
    for (int i = 0; i < n; i++) {
      int k = d * n + i;
      sb[k] = malloc(lens[i] + 1);
      rb[k] = calloc(1, lens[i] + 1);
      fill(sb[k], lens[i], (unsigned)k);
      sx[k] = (struct loom_xfer){.buf = sb[k], .len = lens[i], .fp = {7, (uint64_t)k}};
      rx[k] = (struct loom_xfer){.buf = rb[k], .len = lens[i], .fp = {7, (uint64_t)k}};
    }
  for (int phase = 0; phase < 2; phase++)
    for (int d = 0; d < dirs; d++)
      for (int i = 0; i < n; i++) {
        int k = d * n + i;
        if (phase == (recv_first ? 0 : 1))
          ck_assert_int_eq(ib_ep_irecv(&p.s[1 - d].ep, &rx[k]), loomSuccess);
        else
          ck_assert_int_eq(ib_ep_isend(&p.s[d].ep, &sx[k]), loomSuccess);
      }
  pair_run(&p, rx, total);
  for (int k = 0; k < total; k++) {
    EXPECT(sx[k].done, "send %d not done", k);
    int bad = check_fill(rb[k], rx[k].len, (unsigned)k);
    EXPECT(bad < 0, "message %d (%zu bytes): wrong byte at %d", k, rx[k].len, bad);
    EXPECT(rb[k][rx[k].len] == 0, "message %d: written past its end", k);
  }
  for (int i = 0; i < 2; i++) {
    EXPECT(p.s[i].ep.recvq.count == 0 && p.s[i].ep.sendq.count == 0, "queues not empty");
    EXPECT(p.s[i].ep.rdv_in.count == 0 && p.s[i].ep.rdv_out.count == 0, "rendezvous open");
    /* Every credit is with the sender or owed by the receiver (returned
     * lazily, below a batch), and every arrived slot was released. */
    const struct ib_credit_rx *peer_rx = &p.s[1 - i].ep.rx;
    EXPECT(peer_rx->arrived == peer_rx->released, "side %d: slots still held", 1 - i);
    EXPECT(p.s[i].ep.tx.credits + (peer_rx->released - peer_rx->returned) == IB_EP_NSLOTS,
           "side %d: %u credits + %u owed != %u", i, p.s[i].ep.tx.credits,
           peer_rx->released - peer_rx->returned, IB_EP_NSLOTS);
    EXPECT(peer_rx->released - peer_rx->returned < peer_rx->batch, "side %d owes a batch", 1 - i);
    EXPECT(p.s[i].qp.recvs_posted == (int)p.s[i].ep.rq_depth, "side %d: receives not replenished",
           i);
  }
  pair_fini(&p);
  ck_assert_int_eq(p.nic.regs, p.nic.deregs);
  for (int k = 0; k < total; k++) {
    free(sb[k]);
    free(rb[k]);
  }
  free(sb);
  free(rb);
  free(sx);
  free(rx);
}

#define EAGER_MAX (IB_EP_SLOT_BYTES - IB_HDR_BYTES)

START_TEST(ep_eager_sizes) {
  static const size_t lens[] = {0, 1, 7, 4096, EAGER_MAX - 1, EAGER_MAX};
  run_messages(1 << 30, lens, 6, 1, 1);
  run_messages(1 << 30, lens, 6, 1, 0);
}
END_TEST

START_TEST(ep_rendezvous_sizes) {
  static const size_t lens[] = {EAGER_MAX + 1, 100000, 1 << 20, (1 << 20) + 13};
  run_messages(1 << 30, lens, 4, 1, 1);
  run_messages(1 << 30, lens, 4, 0, 0);
  /* Writes limited to 4 KiB: each rendezvous is many writes, the last
   * carrying DONE. */
  run_messages(4096, lens, 4, 1, 0);
}
END_TEST

/* Far more messages than ring slots and rendezvous entries, mixed sizes,
 * receives posted after all sends: credits must flow back, and no write
 * may find the peer without a posted receive. */
START_TEST(ep_many_messages_mixed) {
  enum { N = 150 };
  size_t lens[N];
  for (int i = 0; i < N; i++)
    lens[i] = i % 5 == 4 ? EAGER_MAX + 1 + (size_t)i * 977 : (size_t)(i * 131) % EAGER_MAX;
  run_messages(1 << 30, lens, N, 1, 0);
  run_messages(65536, lens, N, 1, 1);
}
END_TEST

/* The same buffer sent again: the registration cache serves it. */
START_TEST(ep_rendezvous_reuses_registration) {
  struct pair p;
  pair_init(&p, 1 << 30);
  size_t len = 1 << 20;
  uint8_t *src = malloc(len), *dst = malloc(len);
  for (int round = 0; round < 5; round++) {
    fill(src, len, (unsigned)round);
    memset(dst, 0, len);
    struct loom_xfer s = {.buf = src, .len = len, .fp = {1, 2}};
    struct loom_xfer r = {.buf = dst, .len = len, .fp = {1, 2}};
    ck_assert_int_eq(ib_ep_isend(&p.s[0].ep, &s), loomSuccess);
    ck_assert_int_eq(ib_ep_irecv(&p.s[1].ep, &r), loomSuccess);
    pair_run(&p, &r, 1);
    ck_assert(s.done);
    ck_assert_int_eq(check_fill(dst, len, (unsigned)round), -1);
  }
  struct ib_mr_stats s0 = ib_mr_cache_stats(&p.s[0].mrs), s1 = ib_mr_cache_stats(&p.s[1].mrs);
  ck_assert(s0.misses == 1 && s0.hits == 4);
  ck_assert(s1.misses == 1 && s1.hits == 4);
  pair_fini(&p);
  ck_assert_int_eq(p.nic.regs, p.nic.deregs);
  free(src);
  free(dst);
}
END_TEST

/* A side stalls (polls nothing, reposts nothing) after announcing 12
 * large and 4 small messages and answering the peer's 12 RTS; meanwhile
 * the peer delivers every CTS, DONE and slot the protocol allows.  No
 * write may find the stalled side without a receive posted; at most
 * IB_EP_RDV_SLOTS CTS may be outstanding (more would overwrite the
 * peer's CTS table); all data arrives once it resumes. */
START_TEST(ep_stalled_peer) {
  enum { NL = 12, NS = 16, LARGE = EAGER_MAX + 5000, SMALL = 100 };
  struct pair p;
  pair_init(&p, 1 << 30);
  p.random_stalls = 0;
  struct loom_xfer x[2 * (NL + NS)][2]; /* [message][send, recv] */
  uint8_t *bufs[2 * (NL + NS)][2];
  int n = 0;
  /* Messages 0..NL-1: A->B large; NL..2NL-1: B->A large; then B->A small
   * (4) and A->B small (NS). */
  struct { int from; size_t len; } plan[2 * (NL + NS)];
  for (int i = 0; i < NL; i++)
    plan[n++] = (typeof(plan[0])){0, LARGE + (size_t)i};
  for (int i = 0; i < NL; i++)
    plan[n++] = (typeof(plan[0])){1, LARGE + 7 * (size_t)i};
  for (int i = 0; i < 4; i++)
    plan[n++] = (typeof(plan[0])){1, SMALL + (size_t)i};
  for (int i = 0; i < NS; i++)
    plan[n++] = (typeof(plan[0])){0, SMALL * (size_t)i};
  for (int k = 0; k < n; k++) {
    for (int j = 0; j < 2; j++)
      bufs[k][j] = calloc(1, plan[k].len + 1);
    fill(bufs[k][0], plan[k].len, (unsigned)k);
    for (int j = 0; j < 2; j++)
      x[k][j] = (struct loom_xfer){.buf = bufs[k][j], .len = plan[k].len, .fp = {3, (uint64_t)k}};
  }
  /* Everything but A's small sends is posted now. */
  for (int k = 0; k < n - NS; k++) {
    ck_assert_int_eq(ib_ep_isend(&p.s[plan[k].from].ep, &x[k][0]), loomSuccess);
    ck_assert_int_eq(ib_ep_irecv(&p.s[1 - plan[k].from].ep, &x[k][1]), loomSuccess);
  }
  for (int k = n - NS; k < n; k++)
    ck_assert_int_eq(ib_ep_irecv(&p.s[1].ep, &x[k][1]), loomSuccess);
  /* A announces its 12 RTS (B stalled); B answers 8 of them and announces
   * its own messages (A stalled); then B stalls. */
  int side = -1, progressed = 0;
  p.stall[1] = 1 << 30;
  for (int turn = 0; turn < 100; turn++)
    ck_assert_int_eq(pair_turn(&p, &side), loomSuccess);
  p.stall[0] = 1 << 30;
  p.stall[1] = 0;
  for (int turn = 0; turn < 100; turn++)
    ck_assert_int_eq(pair_turn(&p, &side), loomSuccess);
  ck_assert_uint_eq(p.s[1].ep.rdv_in.count, IB_EP_RDV_SLOTS); /* 8 CTS, 4 RTS waiting */
  p.stall[0] = 0;
  p.stall[1] = 1 << 30;
  for (int k = n - NS; k < n; k++)
    ck_assert_int_eq(ib_ep_isend(&p.s[0].ep, &x[k][0]), loomSuccess);
  for (int turn = 0; turn < 3000; turn++)
    ck_assert_int_eq(pair_turn(&p, &side), loomSuccess);
  /* Stalled B received immediates far beyond one per ring slot. */
  EXPECT(p.s[1].qp.rq_max_used > (int)(IB_EP_NSLOTS + IB_EP_RDV_SLOTS),
         "only %d receives used", p.s[1].qp.rq_max_used);
  ck_assert_int_le(p.s[1].qp.rq_max_used, (int)p.s[1].ep.rq_depth);
  p.stall[1] = 0;
  struct loom_xfer *recvs[2 * (NL + NS)];
  for (int k = 0; k < n; k++)
    recvs[k] = &x[k][1];
  for (int turn = 0; turn < 100000; turn++) {
    int done = 1;
    for (int k = 0; k < n; k++)
      done &= recvs[k]->done && x[k][0].done;
    if (done)
      break;
    EXPECT(pair_turn(&p, &side) == loomSuccess, "side %d: %s", side, loom_last_error());
  }
  (void)progressed;
  for (int k = 0; k < n; k++) {
    EXPECT(x[k][0].done && x[k][1].done, "message %d not done", k);
    EXPECT(check_fill(bufs[k][1], plan[k].len, (unsigned)k) < 0, "message %d corrupt", k);
    free(bufs[k][0]);
    free(bufs[k][1]);
  }
  pair_fini(&p);
}
END_TEST

static void expect_fp_mismatch(size_t len) {
  struct pair p;
  pair_init(&p, 1 << 30);
  uint8_t *a = calloc(1, len + 1), *b = calloc(1, len + 1);
  struct loom_xfer s = {.buf = a, .len = len, .fp = {0xaaaa, 0xbbbb}};
  struct loom_xfer r = {.buf = b, .len = len, .fp = {0xaaaa, 0xcccc}};
  ck_assert_int_eq(ib_ep_isend(&p.s[0].ep, &s), loomSuccess);
  ck_assert_int_eq(ib_ep_irecv(&p.s[1].ep, &r), loomSuccess);
  loomResult_t res = loomSuccess;
  int side = -1;
  for (int turn = 0; turn < 1000 && res == loomSuccess; turn++)
    res = pair_turn(&p, &side);
  ck_assert_int_eq(res, loomInvalidUsage);
  ck_assert_int_eq(side, 1);
  ck_assert_int_eq(r.fp_mismatch, 1);
  ck_assert(r.peer_fp[0] == 0xaaaa && r.peer_fp[1] == 0xbbbb);
  ck_assert(!r.done);
  ck_assert_str_eq(loom_last_error(), "rank 1: rank 0's message belongs to another call");
  /* The connection stays failed. */
  ck_assert_int_eq(ib_ep_irecv(&p.s[1].ep, &r), loomInvalidUsage);
  pair_fini(&p);
  free(a);
  free(b);
}

START_TEST(ep_fingerprint_mismatch) {
  expect_fp_mismatch(100);           /* eager */
  expect_fp_mismatch(EAGER_MAX + 1); /* rendezvous: refused at the RTS */
}
END_TEST

START_TEST(ep_length_mismatch) {
  struct pair p;
  pair_init(&p, 1 << 30);
  uint8_t a[64] = {0}, b[64] = {0};
  struct loom_xfer s = {.buf = a, .len = 40, .fp = {1, 1}};
  struct loom_xfer r = {.buf = b, .len = 48, .fp = {1, 1}};
  ck_assert_int_eq(ib_ep_isend(&p.s[0].ep, &s), loomSuccess);
  ck_assert_int_eq(ib_ep_irecv(&p.s[1].ep, &r), loomSuccess);
  loomResult_t res = loomSuccess;
  int side = -1;
  for (int turn = 0; turn < 1000 && res == loomSuccess; turn++)
    res = pair_turn(&p, &side);
  ck_assert_int_eq(res, loomInvalidUsage);
  ck_assert_int_eq(side, 1);
  ck_assert_str_eq(loom_last_error(),
                   "rank 1: rank 0 sent a message of 40 bytes where 48 were expected (did the "
                   "ranks call different collectives or counts?)");
  ck_assert_int_eq(b[0], 0);
  pair_fini(&p);
}
END_TEST

START_TEST(ep_registration_failure_named) {
  struct pair p;
  pair_init(&p, 1 << 30);
  size_t len = EAGER_MAX + 100;
  uint8_t *a = calloc(1, len);
  struct loom_xfer s = {.buf = a, .len = len, .fp = {1, 1}};
  p.nic.reg_fail = ENOMEM;
  ck_assert_int_eq(ib_ep_isend(&p.s[0].ep, &s), loomSuccess);
  int progressed = 0;
  ck_assert_int_eq(ib_ep_progress(&p.s[0].ep, &progressed), loomSystemError);
  const char *e = loom_last_error();
  EXPECT(strstr(e, "rank 0: ibverbs connection to rank 1 failed: ibv_reg_mr of the") == e &&
             strstr(e, "Cannot allocate memory (raise the locked-memory limit: ulimit -l "
                       "unlimited)") != NULL,
         "%s", e);
  p.nic.reg_fail = 0;
  pair_fini(&p);
  free(a);
}
END_TEST

START_TEST(ep_protocol_errors) {
  struct pair p;
  pair_init(&p, 1 << 30);
  /* A slot that is not the next in ring order. */
  ck_assert_int_eq(ib_ep_recv_imm(&p.s[1].ep, ib_imm_make(IB_IMM_SLOT, 3)), loomRemoteError);
  EXPECT(strstr(loom_last_error(), "rank 1: ibverbs connection to rank 0 failed: protocol error "
                                   "(ring slot 3 written out of order or without credit)") != NULL,
         "%s", loom_last_error());
  /* A slot whose header is garbage. */
  ck_assert_int_eq(ib_ep_recv_imm(&p.s[0].ep, ib_imm_make(IB_IMM_SLOT, 0)), loomRemoteError);
  EXPECT(strstr(loom_last_error(), "corrupt stream (bad header in ring slot 0)") != NULL, "%s",
         loom_last_error());
  pair_fini(&p);
  pair_init(&p, 1 << 30);
  /* Credits beyond what was lent, a CTS and a DONE for no rendezvous. */
  ck_assert_int_eq(ib_ep_recv_imm(&p.s[0].ep, ib_imm_make(IB_IMM_CREDIT, 1)), loomRemoteError);
  ck_assert_int_eq(ib_ep_recv_imm(&p.s[1].ep, ib_imm_make(IB_IMM_DONE, 0)), loomRemoteError);
  pair_fini(&p);
  pair_init(&p, 1 << 30);
  ck_assert_int_eq(ib_ep_recv_imm(&p.s[1].ep, ib_imm_make(IB_IMM_CTS, 0)), loomRemoteError);
  ck_assert_int_eq(ib_ep_recv_imm(&p.s[0].ep, 0xf0000000u), loomRemoteError);
  pair_fini(&p);
}
END_TEST

static Suite *ib_suite(void) {
  Suite *s = suite_create("ib");
  TCase *tc = tcase_create("wire");
  tcase_add_test(tc, wire_round_trip);
  tcase_add_test(tc, wire_truncated_rejected);
  tcase_add_test(tc, wire_every_corrupt_byte_rejected);
  tcase_add_test(tc, wire_version_mismatch_rejected);
  tcase_add_test(tc, wire_bad_geometry_rejected);
  tcase_add_test(tc, wire_secret_hash);
  tcase_add_test(tc, proto_hdr_and_cts);
  tcase_add_test(tc, proto_immediates);
  suite_add_tcase(s, tc);
  tc = tcase_create("credit");
  tcase_add_test(tc, credit_sender_never_overcommits);
  tcase_add_test(tc, credit_receiver_rejects_overrun);
  tcase_add_test(tc, credit_batch_return);
  tcase_add_test(tc, credit_wrap_around);
  suite_add_tcase(s, tc);
  tc = tcase_create("mr");
  tcase_add_test(tc, mr_hit_on_covered_subrange);
  tcase_add_test(tc, mr_miss_on_partial_overlap);
  tcase_add_test(tc, mr_lru_eviction_order);
  tcase_add_test(tc, mr_eviction_by_bytes_spares_entries_in_use);
  tcase_add_test(tc, mr_invalidate_overlapping);
  tcase_add_test(tc, mr_registration_failure);
  tcase_add_test(tc, mr_unwatched_entries_not_kept);
  suite_add_tcase(s, tc);
  tc = tcase_create("select");
  tcase_add_test(tc, hca_spec);
  tcase_add_test(tc, gid_addresses);
  tcase_add_test(tc, fifo_order_and_growth);
  suite_add_tcase(s, tc);
  tc = tcase_create("ep");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, ep_eager_sizes);
  tcase_add_test(tc, ep_rendezvous_sizes);
  tcase_add_test(tc, ep_many_messages_mixed);
  tcase_add_test(tc, ep_rendezvous_reuses_registration);
  tcase_add_test(tc, ep_stalled_peer);
  tcase_add_test(tc, ep_fingerprint_mismatch);
  tcase_add_test(tc, ep_length_mismatch);
  tcase_add_test(tc, ep_registration_failure_named);
  tcase_add_test(tc, ep_protocol_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ib_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
