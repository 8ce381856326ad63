/*
 * plan.h — from a collective call to a schedule: which algorithm runs.
 * (The tuner of later releases lives here; today the choice is fixed.)
 */
#ifndef LOOM_PLAN_PLAN_H
#define LOOM_PLAN_PLAN_H

#include "sched/schedule.h"

#include <stddef.h>

/* Two ranks exchange whole buffers up to this size (one latency instead of
 * two); above it the ring's halved reduction work wins.  Measured on the
 * development machine: equal at 128 KiB, pair 30% faster at 32 KiB. */
#define LOOM_PLAN_PAIR_MAX_BYTES (64u << 10)

enum loom_coll { LOOM_COLL_ALLREDUCE, LOOM_COLL_ALLGATHER };

/* Fills `s` (arrays sized for LOOM_SCHED_MAX_STEPS_PER_RANK and nranks
 * blocks) and returns the algorithm's name for logs. */
const char *loom_plan(enum loom_coll coll, int rank, int nranks, size_t count,
                      size_t elem_size, struct loom_schedule *s);

#endif
