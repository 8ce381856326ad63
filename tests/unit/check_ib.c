/*
 * check_ib.c — device-free unit tests of the ibverbs transport
 * (transports/ibverbs): the handshake encoding (ib_wire), the slot header,
 * CTS and immediates (ib_proto), credit accounting (ib_credit), the
 * memory-registration cache (ib_mr), LOOM_IB_HCA and GID parsing
 * (ib_select) and the slot FIFO (ib_fifo).  The data path (ib_ep) over a
 * fake NIC is in check_ib_ep.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ibverbs/ib_credit.h"
#include "common/fifo.h"
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

#include "check_expect.h"

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
  /* Big-endian on the wire (net/bytes.h, as every Loom record) whatever the
   * host: the rank's low byte last. */
  ck_assert_uint_eq(buf[4], 0);
  ck_assert_uint_eq(buf[7], 3);
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
  struct loom_fifo q;
  loom_fifo_init(&q, sizeof(int));
  int next_out = 0;
  for (int i = 0; i < 1000; i++) {
    ck_assert_int_eq(loom_fifo_push(&q, &i), 0);
    if (i % 3 == 0) {
      ck_assert_int_eq(*(int *)loom_fifo_at(&q, 0), next_out++);
      loom_fifo_pop(&q);
    }
  }
  ck_assert_uint_eq(q.count, 1000 - 334);
  for (size_t i = 0; i < q.count; i++)
    ck_assert_int_eq(*(int *)loom_fifo_at(&q, i), next_out + (int)i);
  ck_assert_ptr_null(loom_fifo_at(&q, q.count));
  loom_fifo_free(&q);
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
  tc = tcase_create("select");
  tcase_add_test(tc, hca_spec);
  tcase_add_test(tc, gid_addresses);
  tcase_add_test(tc, fifo_order_and_growth);
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
