/*
 * api_straggler.c — api_test's --straggler case (run with
 * LOOM_STRAGGLER_WARN_MS=500): rank LATE_RANK (default the last) sleeps
 * 2.5 s before an
 * all-reduce; every other rank must warn once, naming it, and its
 * straggler callback must get the same.  A second all-reduce with no
 * sleep must not warn, and a bootstrap operation (split) must pass over
 * the warnings left in the ring.
 */
#include "api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int calls;

static void on_late(loomComm_t comm, int late_rank, const char *text, void *arg) {
  (void)comm;
  calls += arg == &calls;
  printf("rank %d: straggler callback: late rank %d: %s\n", rank, late_rank, text);
}

static void allreduce_check(loomComm_t comm, const char *what) {
  int x = rank + 1, sum = 0;
  CHECK_LOOM(loomAllReduce(&x, &sum, 1, loomInt32, loomSum, comm, NULL));
  if (sum != nranks * (nranks + 1) / 2)
    FAIL("%s: all-reduce gave %d, expected %d", what, sum, nranks * (nranks + 1) / 2);
}

void straggler(void) {
  const char *env = getenv("LATE_RANK");
  int late = env != NULL ? atoi(env) : nranks - 1;
  loomComm_t comm = world_init(30000);
  CHECK_LOOM(loomCommSetStragglerCallback(comm, on_late, &calls));
  allreduce_check(comm, "before");
  if (rank == late) {
    struct timespec ts = {2, 500000000L};
    nanosleep(&ts, NULL);
  }
  allreduce_check(comm, "with a late rank");
  int after_late = calls;
  allreduce_check(comm, "after");
  if (calls != after_late)
    FAIL("a call with no late rank warned");
  if (rank != late && after_late != 1)
    FAIL("the callback ran %d times for the late call, expected once", after_late);
  loomComm_t dup = dup_comm(comm, 30000, "after-straggler");
  allreduce_check(dup, "on a communicator split after the warnings");
  close_comm(dup);
  close_comm(comm);
  printf("rank %d: straggler ok\n", rank);
}
