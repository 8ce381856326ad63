/*
 * ring.c — ring and recursive-doubling schedules.  Pure rank arithmetic:
 * no I/O, no allocation.
 *
 * All-reduce: in step s < n-1 rank r sends block (r-s) and reduces the
 * block (r-s-1) it receives; after n-1 steps rank r owns the fully reduced
 * block (r+1).  Steps n-1 .. 2n-3 circulate the reduced blocks.
 */
#include "sched/schedule.h"

#include <string.h>

static int mod(int a, int n) { return ((a % n) + n) % n; }

static void set_copy(struct loom_schedule *s, int from, size_t from_off, int to,
                     size_t to_off, size_t count) {
  s->copy.from_buf = from;
  s->copy.from_off = from_off;
  s->copy.to_buf = to;
  s->copy.to_off = to_off;
  s->copy.count = count;
}

static void send_block(struct loom_step *p, int peer, int buf, size_t count, int n, int b) {
  p->send_peer = peer;
  p->send_buf = buf;
  loom_sched_block(count, n, b, &p->send_off, &p->send_count);
}

static void recv_block(struct loom_step *p, int peer, int op, int buf, size_t count, int n,
                       int b) {
  p->recv_peer = peer;
  p->recv_op = (unsigned char)op;
  p->recv_buf = buf;
  loom_sched_block(count, n, b, &p->recv_off, &p->recv_count);
  p->mine_buf = LOOM_BUF_SEND;
  p->mine_off = p->recv_off;
}

/* Ring order: the rank at position p, and a rank's position (order NULL:
 * the identity). */
static int at_pos(const int *order, int p) { return order != NULL ? order[p] : p; }
static int pos_of(const int *order, int n, int rank) {
  if (order == NULL)
    return rank;
  for (int p = 0; p < n; p++)
    if (order[p] == rank)
      return p;
  return -1; /* not in the ring: the caller's bug */
}

void loom_ring_allreduce_ordered(int rank, int nranks, const int *order, size_t count,
                                 struct loom_schedule *s) {
  int n = nranks, me = pos_of(order, n, rank);
  int next = at_pos(order, loom_ring_next(me, n)), prev = at_pos(order, loom_ring_prev(me, n));
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  /* Blocks are numbered by ring position: any consistent numbering works. */
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    send_block(p, next, st == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV, count, n, mod(me - st, n));
    p->wait_step = st - 1;
    recv_block(p, prev, LOOM_RECV_REDUCE, LOOM_BUF_RECV, count, n, mod(me - st - 1, n));
    p->finalize = st == n - 2;
  }
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    send_block(p, next, LOOM_BUF_RECV, count, n, mod(me + 1 - st, n));
    p->wait_step = s->nsteps - 2;
    recv_block(p, prev, LOOM_RECV_COPY, LOOM_BUF_RECV, count, n, mod(me - st, n));
  }
}

void loom_ring_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s) {
  loom_ring_allreduce_ordered(rank, nranks, NULL, count, s);
}

void loom_rd_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s) {
  loom_sched_reset(s);
  if (nranks == 1)
    loom_sched_copy_whole(s, count);
  for (int k = 0; (1 << k) < nranks; k++) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = p->recv_peer = rank ^ (1 << k);
    p->send_buf = k == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->send_count = p->recv_count = count;
    p->wait_step = k - 1;
    p->recv_op = LOOM_RECV_REDUCE;
    p->recv_buf = LOOM_BUF_RECV;
    p->mine_buf = k == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->recv_first = p->recv_peer < rank;
    p->finalize = (2 << k) >= nranks;
  }
}

void loom_ring_allgather_ordered(int rank, int nranks, const int *order, size_t count,
                                 struct loom_schedule *s) {
  int n = nranks, me = pos_of(order, n, rank);
  int next = at_pos(order, loom_ring_next(me, n)), prev = at_pos(order, loom_ring_prev(me, n));
  loom_sched_reset(s);
  set_copy(s, LOOM_BUF_SEND, 0, LOOM_BUF_RECV, (size_t)rank * count, count);
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    /* the block of the rank st positions back travels on; blocks sit at
     * their owner's rank in recvbuff */
    int b = at_pos(order, mod(me - st, n));
    /* Step 0 sends straight from sendbuff, overlapping the local copy. */
    p->send_peer = next;
    p->send_buf = st == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->send_off = st == 0 ? 0 : (size_t)b * count;
    p->send_count = count;
    p->wait_step = st - 1;
    p->recv_peer = prev;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = (size_t)at_pos(order, mod(me - st - 1, n)) * count;
    p->recv_count = count;
  }
}

void loom_ring_allgather(int rank, int nranks, size_t count, struct loom_schedule *s) {
  loom_ring_allgather_ordered(rank, nranks, NULL, count, s);
}

void loom_rd_allgather(int rank, int nranks, size_t count, struct loom_schedule *s) {
  loom_sched_reset(s);
  set_copy(s, LOOM_BUF_SEND, 0, LOOM_BUF_RECV, (size_t)rank * count, count);
  for (int k = 0; (1 << k) < nranks; k++) {
    struct loom_step *p = loom_sched_add(s);
    int peer = rank ^ (1 << k);
    size_t have = (size_t)1 << k; /* blocks held: the aligned group around rank */
    p->send_peer = p->recv_peer = peer;
    p->send_buf = k == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->send_off = k == 0 ? 0 : (size_t)(rank >> k << k) * count;
    p->send_count = have * count;
    p->wait_step = k - 1;
    p->wait_all = 1; /* it forwards every block received so far */
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = (size_t)(peer >> k << k) * count;
    p->recv_count = have * count;
  }
}

void loom_ring_reducescatter_ordered(int rank, int nranks, const int *order, size_t count,
                                     struct loom_schedule *s) {
  int n = nranks, me = pos_of(order, n, rank);
  int next = at_pos(order, loom_ring_next(me, n)), prev = at_pos(order, loom_ring_prev(me, n));
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  s->scratch_count = (size_t)n * count;
  /* In step st the rank at position p sends the block of position p-st-1
   * and reduces that of p-st-2 into it; the last step (st = n-2) completes
   * its own block, straight into recvbuff.  Blocks are addressed by their
   * owner's rank. */
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    int sb = at_pos(order, mod(me - st - 1, n)), rb = at_pos(order, mod(me - st - 2, n));
    p->send_peer = next;
    p->send_buf = st == 0 ? LOOM_BUF_SEND : LOOM_BUF_SCRATCH;
    p->send_off = (size_t)sb * count;
    p->send_count = count;
    p->wait_step = st - 1;
    p->recv_peer = prev;
    p->recv_op = LOOM_RECV_REDUCE;
    p->recv_count = count;
    p->mine_buf = LOOM_BUF_SEND;
    p->mine_off = (size_t)rb * count;
    int last = st == n - 2;
    p->recv_buf = last ? LOOM_BUF_RECV : LOOM_BUF_SCRATCH;
    p->recv_off = last ? 0 : (size_t)rb * count;
    p->finalize = (unsigned char)last;
  }
}

void loom_ring_reducescatter(int rank, int nranks, size_t count, struct loom_schedule *s) {
  loom_ring_reducescatter_ordered(rank, nranks, NULL, count, s);
}
