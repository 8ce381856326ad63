/*
 * plan.h — from a collective call to a schedule: which algorithm runs.
 * (The tuner of later releases lives here; today the choices are fixed
 * size thresholds.)
 */
#ifndef LOOM_PLAN_PLAN_H
#define LOOM_PLAN_PLAN_H

#include "sched/schedule.h"

#include <stddef.h>

/* Up to this size a power-of-two number of ranks uses recursive doubling
 * (log2 n latencies, whole buffers); above it the ring (2(n-1) latencies,
 * 2(n-1)/n of the buffer) wins.  Measured with 2 ranks on the development
 * machine: equal at 128 KiB, recursive doubling 30% faster at 32 KiB.
 * Rooted collectives use a binomial tree up to the same size, a chain
 * above it. */
#define LOOM_PLAN_RD_MAX_BYTES (64u << 10)

enum loom_coll {
  LOOM_COLL_ALLREDUCE,
  LOOM_COLL_ALLGATHER,
  LOOM_COLL_REDUCESCATTER,
  LOOM_COLL_BROADCAST,
  LOOM_COLL_REDUCE,
  LOOM_COLL_ALLTOALL,
  LOOM_COLL_ALLTOALLV,
  LOOM_COLL_GATHER,
  LOOM_COLL_SCATTER,
  LOOM_COLL_SENDRECV, /* a batch of loomSend/loomRecv */
  LOOM_COLL_BARRIER,
  LOOM_COLL_COUNT
};

/* "allreduce", ... for messages. */
const char *loom_coll_name(enum loom_coll coll);

/* What the planner needs of one call.  count is per rank where NCCL says
 * so (all-gather, reduce-scatter, all-to-all, gather, scatter). */
struct loom_plan_args {
  enum loom_coll coll;
  int rank, nranks, root;
  size_t count, elem_size;
  /* all-to-all-v: per peer, in elements */
  const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
};

/* Fills `s` (cap >= LOOM_SCHED_MAX_STEPS(nranks)) for every collective but
 * SENDRECV, and returns the algorithm's name for logs. */
const char *loom_plan(const struct loom_plan_args *a, struct loom_schedule *s);

#endif
