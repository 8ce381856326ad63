/*
 * check_ib_ep.c — the ibverbs transport's data path (transports/ibverbs/
 * ib_ep.c) between two endpoints over a loopback fake NIC that checks
 * every key, every range and every receive the protocol relies on: eager
 * and rendezvous sizes, many messages in flight, registration reuse, a
 * stalled peer, mismatches and protocol errors.  The device-free pieces
 * under it (handshake, credits, registration cache, LOOM_IB_HCA) are in
 * check_ib.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ibverbs/ib_credit.h"
#include "ibverbs/ib_ep.h"
#include "common/mr_cache.h"
#include "ibverbs/ib_proto.h"
#include "core/error.h"
#include "check_expect.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One side's registrations through its cache: a process of its own, with
 * its own locked-memory limit (RLIMIT_MEMLOCK's ENOMEM beyond it). */
struct side_reg {
  struct fake_nic *nic;
  size_t locked, limit; /* bytes registered; the most allowed (0: no limit) */
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

static int nic_reg(void *arg, void *addr, size_t len, struct loom_mr_keys *out) {
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

static int g_lock_refusals; /* registrations refused by a side's limit */

static int side_reg_reg(void *arg, void *addr, size_t len, struct loom_mr_keys *out) {
  struct side_reg *r = arg;
  if (r->limit != 0 && r->locked + len > r->limit) {
    g_lock_refusals++;
    return ENOMEM;
  }
  int rc = nic_reg(r->nic, addr, len, out);
  if (rc == 0)
    r->locked += len;
  return rc;
}

static void side_reg_dereg(void *arg, void *handle) {
  struct side_reg *r = arg;
  struct fake_mr *m = handle;
  r->locked -= m->end - m->start;
  nic_dereg(r->nic, handle);
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
  struct loom_mr_cache mrs;
  struct side_reg reg; /* what mrs registers through */
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
  struct loom_mr_keys k;
  ck_assert_int_eq(nic_reg(n, p, len, &k), 0);
  *handle = k.handle;
  return k.rkey;
}

/* Locked memory each side of the next pair may register beyond its rings
 * (0: no limit). */
static size_t g_lock_extra;

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
    s->reg = (struct side_reg){.nic = &p->nic, .limit = g_lock_extra};
    struct loom_mr_ops ops = {.reg = side_reg_reg, .dereg = side_reg_dereg, .arg = &s->reg};
    ck_assert_int_eq(loom_mr_cache_init(&s->mrs, &ops, 64, 1 << 30), 0);
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
    loom_mr_cache_fini(&s->mrs);
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
  struct loom_mr_stats s0 = loom_mr_cache_stats(&p.s[0].mrs), s1 = loom_mr_cache_stats(&p.s[1].mrs);
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

/* No locked memory at all: the receiver cannot register and nothing it
 * holds would give some back, so it fails, naming the call and the fix. */
START_TEST(ep_registration_failure_named) {
  struct pair p;
  pair_init(&p, 1 << 30);
  size_t len = EAGER_MAX + 100;
  uint8_t *a = calloc(1, len), *b = calloc(1, len);
  struct loom_xfer s = {.buf = a, .len = len, .fp = {1, 1}};
  struct loom_xfer r = {.buf = b, .len = len, .fp = {1, 1}};
  p.nic.reg_fail = ENOMEM;
  ck_assert_int_eq(ib_ep_isend(&p.s[0].ep, &s), loomSuccess);
  ck_assert_int_eq(ib_ep_irecv(&p.s[1].ep, &r), loomSuccess);
  loomResult_t res = loomSuccess;
  int side = -1;
  for (int turn = 0; turn < 1000 && res == loomSuccess; turn++)
    res = pair_turn(&p, &side);
  ck_assert_int_eq(res, loomSystemError);
  ck_assert_int_eq(side, 1);
  const char *e = loom_last_error();
  EXPECT(strstr(e, "rank 1: ibverbs connection to rank 0 failed: ibv_reg_mr of the") == e &&
             strstr(e, "Cannot allocate memory (raise the locked-memory limit: ulimit -l "
                       "unlimited)") != NULL,
         "%s", e);
  p.nic.reg_fail = 0;
  pair_fini(&p);
  free(a);
  free(b);
}
END_TEST

/* Locked memory for about one large buffer beyond the rings (Soft-RoCE as
 * a user under Debian's 8 MiB found it): receivers wait for registrations
 * in flight to be given back, senders short of it copy through staging
 * slots, and every message arrives intact, both ways, with no deadlock. */
START_TEST(ep_short_of_locked_memory) {
  static const size_t lens[] = {(1 << 20) + 13, EAGER_MAX + 1, 100000, 1 << 20, 300007};
  g_lock_extra = (1 << 20) + (1 << 16);
  g_lock_refusals = 0;
  run_messages(1 << 30, lens, 5, 1, 1);
  run_messages(1 << 30, lens, 5, 1, 0);
  run_messages(4096, lens, 5, 1, 0);
  g_lock_extra = 0;
  EXPECT(g_lock_refusals > 0, "the limit was never reached: the test shows nothing");
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


static Suite *ib_ep_suite(void) {
  Suite *s = suite_create("ib_ep");
  TCase *tc;
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
  tcase_add_test(tc, ep_short_of_locked_memory);
  tcase_add_test(tc, ep_protocol_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ib_ep_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
