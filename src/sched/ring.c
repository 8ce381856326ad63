/*
 * ring.c — ring schedules.  Pure rank arithmetic: no I/O, no allocation.
 *
 * All-reduce: in step s < n-1 rank r sends block (r-s) and reduces the
 * block (r-s-1) it receives; after n-1 steps rank r owns the fully reduced
 * block (r+1).  Steps n-1 .. 2n-3 circulate the reduced blocks.
 */
#include "sched/schedule.h"

void loom_sched_split(size_t count, int n, size_t *off, size_t *cnt) {
  size_t base = count / (size_t)n, rem = count % (size_t)n, o = 0;
  for (int b = 0; b < n; b++) {
    cnt[b] = base + ((size_t)b < rem ? 1 : 0);
    off[b] = o;
    o += cnt[b];
  }
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

void loom_ring_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s) {
  int n = nranks, next = loom_ring_next(rank, n), prev = loom_ring_prev(rank, n);
  s->nblocks = n;
  s->send_origin = 0;
  s->copy_send_block = n == 1 ? 0 : -1;
  loom_sched_split(count, n, s->block_off, s->block_count);
  s->nsteps = 0;
  if (n == 1)
    return;
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = &s->steps[s->nsteps++];
    p->send_peer = next;
    p->send_block = mod(rank - st, n);
    p->send_from = st == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->send_waits = st > 0;
    p->recv_peer = prev;
    p->recv_block = mod(rank - st - 1, n);
    p->recv_op = LOOM_RECV_REDUCE;
    p->reduce_with = LOOM_BUF_SEND;
    p->recv_first = 0;
    p->finalize = st == n - 2;
  }
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = &s->steps[s->nsteps++];
    p->send_peer = next;
    p->send_block = mod(rank + 1 - st, n);
    p->send_from = LOOM_BUF_RECV;
    p->send_waits = 1;
    p->recv_peer = prev;
    p->recv_block = mod(rank - st, n);
    p->recv_op = LOOM_RECV_COPY;
    p->reduce_with = LOOM_BUF_SEND;
    p->recv_first = 0;
    p->finalize = 0;
  }
}

void loom_rd_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s) {
  s->nblocks = 1;
  s->block_off[0] = 0;
  s->block_count[0] = count;
  s->send_origin = 0;
  s->copy_send_block = nranks == 1 ? 0 : -1;
  s->nsteps = 0;
  for (int k = 0; (1 << k) < nranks; k++) {
    struct loom_step *p = &s->steps[s->nsteps++];
    p->send_peer = p->recv_peer = rank ^ (1 << k);
    p->send_block = p->recv_block = 0;
    p->send_from = k == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->send_waits = k > 0;
    p->recv_op = LOOM_RECV_REDUCE;
    p->reduce_with = k == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->recv_first = p->recv_peer < rank;
    p->finalize = (2 << k) >= nranks;
  }
}

void loom_ring_allgather(int rank, int nranks, size_t count, struct loom_schedule *s) {
  int n = nranks, next = loom_ring_next(rank, n), prev = loom_ring_prev(rank, n);
  s->nblocks = n;
  for (int b = 0; b < n; b++) {
    s->block_off[b] = (size_t)b * count;
    s->block_count[b] = count;
  }
  s->send_origin = (size_t)rank * count;
  s->copy_send_block = rank;
  s->nsteps = 0;
  for (int st = 0; st < n - 1; st++) {
    struct loom_step *p = &s->steps[s->nsteps++];
    p->send_peer = next;
    p->send_block = mod(rank - st, n);
    /* Step 0 sends straight from sendbuff, overlapping the local copy. */
    p->send_from = st == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->send_waits = st > 0;
    p->recv_peer = prev;
    p->recv_block = mod(rank - st - 1, n);
    p->recv_op = LOOM_RECV_COPY;
    p->reduce_with = LOOM_BUF_SEND;
    p->recv_first = 0;
    p->finalize = 0;
  }
}
