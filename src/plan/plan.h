/*
 * plan.h — from a collective call to a schedule: which algorithm runs.
 * (The tuner of later releases lives here; today the choice is fixed.)
 */
#ifndef LOOM_PLAN_PLAN_H
#define LOOM_PLAN_PLAN_H

#include "sched/schedule.h"

#include <stddef.h>

/* Up to this size a power-of-two number of ranks uses recursive doubling
 * (log2 n latencies, whole buffers); above it the ring (2(n-1) latencies,
 * 2(n-1)/n of the buffer) wins.  Measured with 2 ranks on the development
 * machine: equal at 128 KiB, recursive doubling 30% faster at 32 KiB. */
#define LOOM_PLAN_RD_MAX_BYTES (64u << 10)

enum loom_coll { LOOM_COLL_ALLREDUCE, LOOM_COLL_ALLGATHER };

/* The peers the schedules of loom_plan exchange data with (ring neighbours
 * and recursive-doubling partners), each once; at most 2 + 31 entries. */
void loom_plan_peers(int rank, int nranks, int *peers, int *npeers);

/* Fills `s` (arrays sized for LOOM_SCHED_MAX_STEPS_PER_RANK and nranks
 * blocks) and returns the algorithm's name for logs. */
const char *loom_plan(enum loom_coll coll, int rank, int nranks, size_t count,
                      size_t elem_size, struct loom_schedule *s);

#endif
