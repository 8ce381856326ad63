/*
 * rankcheck.h — failing fast in the multi-rank test programs: FAIL prints
 * "<program> rank R: FAIL: ..." and exits 1 (loomrun then ends the job);
 * CHECK_LOOM fails on any Loom error with its text.  The including file
 * defines TEST_NAME and the `rank` variable.
 */
#ifndef LOOM_TESTS_RANKCHECK_H
#define LOOM_TESTS_RANKCHECK_H

#include "loom.h"

#include <stdio.h>
#include <stdlib.h>

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, TEST_NAME " rank %d: FAIL: ", rank);                       \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    exit(1);                                                                   \
  } while (0)

#define CHECK_LOOM(call)                                                       \
  do {                                                                         \
    loomResult_t r_ = (call);                                                  \
    if (r_ != loomSuccess)                                                     \
      FAIL("%s -> %s: %s", #call, loomGetErrorString(r_), loomGetLastError(NULL)); \
  } while (0)

/* A communicator of the launcher's job (LOOM_COMM_ID, as loomrun sets it)
 * with timeout_ms (0: the default). */
static inline loomComm_t rankcheck_init_comm(int nranks_, int timeout_ms) {
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  if (timeout_ms > 0)
    cfg.timeout_ms = timeout_ms;
  loomComm_t comm;
  CHECK_LOOM(loomCommInitRankConfig(&comm, nranks_, id, rank, &cfg));
  return comm;
}

#endif
