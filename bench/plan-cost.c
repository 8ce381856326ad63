/*
 * plan-cost.c — what planning a call costs against taking its schedule
 * from the communicator's cache (src/api/plan_cache.c): a small all-reduce
 * planned 200,000 times for rank 1 of 2, 8 and 64 ranks, then fetched as
 * many times from a cache holding it.  Nanoseconds per call, one thread.
 *
 *   build/bench/plan-cost
 */
#include "api/plan_cache.h"
#include "plan/plan.h"

#include <stdio.h>
#include <time.h>

#define CALLS 200000
#define MAX_RANKS 64

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(void) {
  static struct loom_step steps[LOOM_SCHED_MAX_STEPS(MAX_RANKS)];
  const int cap = LOOM_SCHED_MAX_STEPS(MAX_RANKS);
  const int sizes[] = {2, 8, MAX_RANKS};
  for (int i = 0; i < 3; i++) {
    struct loom_schedule s;
    struct loom_plan_cache pc = {0};
    struct loom_plan_args a = {.coll = LOOM_COLL_ALLREDUCE, .rank = 1, .nranks = sizes[i],
                               .root = -1, .count = 2, .elem_size = 4};
    const char *algo = NULL;
    double t0 = now_ns();
    for (int k = 0; k < CALLS; k++) {
      loom_sched_init(&s, steps, cap);
      algo = loom_plan(&a, &s);
    }
    double planned = (now_ns() - t0) / CALLS;
    struct loom_plan_key key = loom_plan_key_make(LOOM_COLL_ALLREDUCE, -1, 2, 4);
    loom_plan_cache_put(&pc, &key, algo, &s);
    t0 = now_ns();
    for (int k = 0; k < CALLS; k++) {
      loom_sched_init(&s, steps, cap);
      uint64_t *note;
      algo = loom_plan_cache_get(&pc, &key, &s, &note);
    }
    double cached = (now_ns() - t0) / CALLS;
    printf("%2d ranks, 8 B all-reduce (%s, %d steps): planned %.1f ns, from the cache %.1f ns\n",
           sizes[i], algo ? algo : "?", s.nsteps, planned, cached);
    loom_plan_cache_free(&pc);
  }
  return 0;
}
