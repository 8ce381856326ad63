/*
 * hier.c — hierarchical all-reduce for nodes of equal size: a ring
 * reduce-scatter inside each node, a ring all-reduce across nodes among the
 * ranks with the same local index (each on the block it owns), and a ring
 * all-gather inside each node.  Each byte crosses the network 2(N-1)/N
 * times per node instead of per rank, and the network rings are L
 * independent ones (one per local index), so L NICs or links can carry
 * them side by side.
 */
#include "sched/schedule.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

static void set_range(size_t count, int n, int b, size_t base, size_t *off, size_t *cnt) {
  loom_sched_block(count, n, b, off, cnt);
  *off += base;
}

void loom_hier_allreduce(int rank, const struct loom_hier *h, size_t count,
                         struct loom_schedule *s) {
  int L = h->local_size, N = h->nnodes, l = h->local_index, k = h->node;
  loom_sched_reset(s);
  int lnext = h->rank_at(k, mod(l + 1, L), h->arg), lprev = h->rank_at(k, mod(l - 1, L), h->arg);
  int nnext = h->rank_at(mod(k + 1, N), l, h->arg), nprev = h->rank_at(mod(k - 1, N), l, h->arg);
  (void)rank;
  /* 1: reduce-scatter inside the node over L blocks; local rank l ends with
   * the node's sum of block (l+1) mod L in RECV. */
  for (int st = 0; st < L - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = lnext;
    p->send_buf = st == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    set_range(count, L, mod(l - st, L), 0, &p->send_off, &p->send_count);
    p->wait_step = st - 1;
    p->recv_peer = lprev;
    p->recv_op = LOOM_RECV_REDUCE;
    p->recv_buf = LOOM_BUF_RECV;
    set_range(count, L, mod(l - st - 1, L), 0, &p->recv_off, &p->recv_count);
    p->mine_buf = LOOM_BUF_SEND;
    p->mine_off = p->recv_off;
  }
  int phase1_last = loom_sched_last_filled(s);
  /* 2: all-reduce of that block across the nodes, a ring over the N ranks
   * with local index l, in place in RECV (sub-blocks by node position). */
  size_t boff, bcnt;
  loom_sched_block(count, L, mod(l + 1, L), &boff, &bcnt);
  for (int st = 0; st < N - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = nnext;
    p->send_buf = LOOM_BUF_RECV;
    set_range(bcnt, N, mod(k - st, N), boff, &p->send_off, &p->send_count);
    p->wait_step = st == 0 ? phase1_last : s->nsteps - 2;
    p->wait_all = st == 0 && phase1_last >= 0; /* phase 1 sliced another range: all of it */
    p->recv_peer = nprev;
    p->recv_op = LOOM_RECV_REDUCE;
    p->recv_buf = LOOM_BUF_RECV;
    set_range(bcnt, N, mod(k - st - 1, N), boff, &p->recv_off, &p->recv_count);
    p->mine_buf = LOOM_BUF_RECV;
    p->mine_off = p->recv_off;
    p->finalize = st == N - 2;
  }
  for (int st = 0; st < N - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = nnext;
    p->send_buf = LOOM_BUF_RECV;
    set_range(bcnt, N, mod(k + 1 - st, N), boff, &p->send_off, &p->send_count);
    p->wait_step = s->nsteps - 2;
    p->recv_peer = nprev;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    set_range(bcnt, N, mod(k - st, N), boff, &p->recv_off, &p->recv_count);
  }
  int phase2_last = loom_sched_last_filled(s);
  /* 3: all-gather of the L blocks inside the node. */
  for (int st = 0; st < L - 1; st++) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = lnext;
    p->send_buf = LOOM_BUF_RECV;
    set_range(count, L, mod(l + 1 - st, L), 0, &p->send_off, &p->send_count);
    p->wait_step = st == 0 ? phase2_last : s->nsteps - 2;
    p->wait_all = st == 0 && phase2_last >= 0;
    p->recv_peer = lprev;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    set_range(count, L, mod(l - st, L), 0, &p->recv_off, &p->recv_count);
  }
}
