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

#endif
