/*
 * plan.c — picks the schedule for a call.
 */
#include "plan/plan.h"

const char *loom_plan(enum loom_coll coll, int rank, int nranks, size_t count,
                      size_t elem_size, struct loom_schedule *s) {
  if (coll == LOOM_COLL_ALLGATHER) {
    loom_ring_allgather(rank, nranks, count, s);
    return "ring";
  }
  if (nranks == 2 && count * elem_size <= LOOM_PLAN_PAIR_MAX_BYTES) {
    loom_pair_allreduce(rank, count, s);
    return "pair";
  }
  loom_ring_allreduce(rank, nranks, count, s);
  return "ring";
}
