/*
 * schedsim.h — the interface of the symbolic schedule simulator (schedsim.c)
 * to the Check suite (check_sched.c): the calls to simulate, how a failure
 * is reported, and the hash the test cases share with it.
 */
#ifndef LOOM_TESTS_SCHEDSIM_H
#define LOOM_TESTS_SCHEDSIM_H

#include "sched/schedule.h"

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_RANKS 64

/* The largest rank count a loop proves: `full` (at most MAX_RANKS), or
 * under LOOM_TEST_LIGHT=1 (the sanitizer pass of scripts/test.sh, which
 * looks for memory errors, not for the proof the plain pass gives) at
 * most 16. */
static inline int sim_ranks(int full) {
  const char *light = getenv("LOOM_TEST_LIGHT");
  return light != NULL && light[0] == '1' && full > 16 ? 16 : full;
}

extern char ctx[256];        /* the case being run, for messages */
extern jmp_buf *expect_fail; /* set: a failure returns here (the simulator's self-test) */
extern char fail_msg[768];

/* Fails the case with ctx and the message, or (expect_fail set) stores the
 * message in fail_msg and longjmps there. */
__attribute__((format(printf, 1, 2), noreturn)) void failf(const char *fmt, ...);

/* ck_assert costs a system call per passing check; loops use this. */
#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      failf(__VA_ARGS__);                                                                          \
  } while (0)

/* ---- the calls ---------------------------------------------------------------------- */

enum coll {
  RING_AR,
  RD_AR,
  ONESHOT_AR,
  RING_AG,
  RD_AG,
  ONESHOT_AG,
  RING_RS,
  CHAIN_BC,
  TREE_BC,
  CHAIN_RED,
  TREE_RED,
  A2AV,
  GATHER,
  SCATTER,
  NCOLL
};
int is_rooted(enum coll c); /* whether c's builder takes a root */

/* Slice sizes, relative to the largest step m: whole steps; single
 * elements (every slice boundary; where m * nranks <= 256); 3 (m <= 24);
 * about m/3 (three slices); m - 1 (a last slice of one element; m <= 64,
 * nranks <= 33).  A size that repeats an earlier one or is at least m
 * (= whole steps) is skipped. */
enum { SL_WHOLE, SL_ONE, SL_THREE, SL_THIRD, SL_MOST, NSLICES };

struct call {
  enum coll coll;
  int n, root, inplace;
  size_t count;
  int slice_kind;
  size_t slice; /* resolved from slice_kind */
  /* A2AV: n*n each, row r holding rank r's arrays */
  const size_t *sc, *sd, *rc, *rd;
  const char *variant; /* for messages */
  /* instead of coll's builder (coll still gives buffers and results) */
  void (*custom)(int rank, int n, size_t count, int root, struct loom_schedule *s);
};

/* Builds every rank's schedule for c, checks its structure, runs the ranks
 * asynchronously and checks the results; fails (failf) on the first error.
 * Resolves c->slice from c->slice_kind, and returns at once when that size
 * repeats another or covers every step (whole steps, run on their own). */
void simulate(struct call *c);

/* splitmix64: hashes the values' expressions; the cases make irregular
 * data with it. */
uint64_t mix64(uint64_t x);

#endif
