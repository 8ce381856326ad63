/*
 * plan.c — picks the schedule for a call.
 */
#include "plan/plan.h"

static void add_peer(int *peers, int *n, int p) {
  for (int i = 0; i < *n; i++)
    if (peers[i] == p)
      return;
  peers[(*n)++] = p;
}

void loom_plan_peers(int rank, int nranks, int *peers, int *npeers) {
  *npeers = 0;
  if (nranks == 1)
    return;
  add_peer(peers, npeers, loom_ring_next(rank, nranks));
  add_peer(peers, npeers, loom_ring_prev(rank, nranks));
  if (loom_is_pow2(nranks))
    for (int k = 0; (1 << k) < nranks; k++)
      add_peer(peers, npeers, rank ^ (1 << k));
}

const char *loom_plan(enum loom_coll coll, int rank, int nranks, size_t count,
                      size_t elem_size, struct loom_schedule *s) {
  if (coll == LOOM_COLL_ALLGATHER) {
    loom_ring_allgather(rank, nranks, count, s);
    return "ring";
  }
  if (nranks > 1 && loom_is_pow2(nranks) && count * elem_size <= LOOM_PLAN_RD_MAX_BYTES) {
    loom_rd_allreduce(rank, nranks, count, s);
    return "recursive doubling";
  }
  loom_ring_allreduce(rank, nranks, count, s);
  return "ring";
}
