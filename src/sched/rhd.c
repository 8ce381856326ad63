/*
 * rhd.c — recursive halving-doubling all-reduce (Rabenseifner) for a
 * power-of-two number of ranks: reduce-scatter by recursive halving (at
 * step k a rank swaps half of its current range with rank r ^ (n >> (k+1))
 * and reduces the half it keeps), then all-gather by recursive doubling.
 * log2(n) message latencies per phase instead of the ring's n-1, with the
 * ring's bandwidth (each rank sends 2(n-1)/n of the buffer).  Rank r ends
 * the reduce-scatter owning block r; every element is reduced once, so
 * every rank gets the same bits.
 */
#include "sched/schedule.h"

/* Elements [off, off + cnt) of blocks [lo, hi) of count split n ways. */
static void blocks(size_t count, int n, int lo, int hi, size_t *off, size_t *cnt) {
  size_t o1, c1, o2, c2;
  loom_sched_block(count, n, lo, &o1, &c1);
  loom_sched_block(count, n, hi - 1, &o2, &c2);
  *off = o1;
  *cnt = o2 + c2 - o1;
}

void loom_rhd_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s) {
  int n = nranks;
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  /* the range of blocks this rank holds before each step: halving keeps
   * the lower or upper half by bit k of the rank */
  int lo_at[32], hi_at[32], steps = 0;
  int lo = 0, hi = n;
  for (int d = 1; d < n; d *= 2, steps++) {
    int peer = rank ^ d, mid = lo + (hi - lo) / 2;
    int upper = (rank & d) != 0;
    int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
    int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
    int first = d == 1;
    lo_at[steps] = lo;
    hi_at[steps] = hi;
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = peer;
    p->send_buf = first ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    blocks(count, n, give_lo, give_hi, &p->send_off, &p->send_count);
    p->wait_step = first ? -1 : loom_sched_last_filled(s);
    p->wait_all = p->wait_step >= 0; /* it forwards part of what the last step reduced */
    p->recv_peer = peer;
    p->recv_op = LOOM_RECV_REDUCE;
    p->recv_buf = LOOM_BUF_RECV;
    blocks(count, n, keep_lo, keep_hi, &p->recv_off, &p->recv_count);
    p->mine_buf = first ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->mine_off = p->recv_off;
    p->recv_first = peer < rank;
    p->finalize = 2 * d == n;
    lo = keep_lo;
    hi = keep_hi;
  }
  /* one block left; gather back, the same pairs in reverse: the partner
   * holds the other half of the range both held before that step */
  for (int k = steps - 1; k >= 0; k--) {
    int d = 1 << k, peer = rank ^ d;
    int plo = lo == lo_at[k] ? hi : lo_at[k], phi = lo == lo_at[k] ? hi_at[k] : lo;
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = peer;
    p->send_buf = LOOM_BUF_RECV;
    blocks(count, n, lo, hi, &p->send_off, &p->send_count);
    p->wait_step = loom_sched_last_filled(s);
    p->wait_all = p->wait_step >= 0;
    p->recv_peer = peer;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    blocks(count, n, plo, phi, &p->recv_off, &p->recv_count);
    lo = lo_at[k];
    hi = hi_at[k];
  }
}
