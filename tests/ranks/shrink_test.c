/*
 * shrink_test — carrying on without failed ranks (loomCommShrink,
 * loomCommRevoke), one scenario per run:
 *
 *   --kill K      rank K dies (SIGKILL) in the middle of an all-reduce
 *                 sweep; every survivor fails naming it, shrinks with
 *                 LOOM_SHRINK_ABORT, and runs a verified sweep on the new
 *                 communicator (ranks in order, without K)
 *   --healthy     no failure: the last rank leaves without calling; the
 *                 others shrink without it (LOOM_SHRINK_DEFAULT), shrink
 *                 the same parent again without rank 1 as well, non-
 *                 blocking (rank 1 calls too and gets NULL), and shrink the result without
 *                 its rank 0 (a root at a rank other than 0); each verified
 *   --revoke      rank 0 revokes the communicator from a second thread
 *                 while its main thread waits in an all-reduce the others
 *                 join late: the blocked call ends at once, rank 0's next
 *                 call is refused, and the others' first call that waits
 *                 on rank 0 fails at once naming it; then all shrink
 *                 excluding no one and verify
 *   --die-in-shrink D  rank 3 is killed; the survivors shrink, but rank D
 *                 dies instead of calling: every other survivor fails
 *                 within the bootstrap timeout, naming where they met
 *   --bad-args    invalid arguments give loomInvalidArgument with a message
 *                 and leave the communicator working
 *   --disagree    rank 0 excludes the last rank, the others exclude no one:
 *                 every rank fails within the bootstrap timeout, saying
 *                 the survivors must agree
 * Each prints one "rank R: <scenario> ok" line when it behaved.
 */
#include "core/timeutil.h"
#include "device/reduce.h"
#include "loom.h"
#include "testdata.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
#define TEST_NAME "shrink_test"
#include "rankcheck.h"

static double elapsed_s(uint64_t since) { return (double)(loom_now_ns() - since) / 1e9; }

static loomComm_t init_comm(int timeout_ms) { return rankcheck_init_comm(nranks, timeout_ms); }

/* An all-reduce of `count` elements of (dt, op) on comm, checked element
 * by element against testdata.h. */
static void verified_allreduce(loomComm_t comm, size_t count, loomDataType_t dt,
                               loomRedOp_t op) {
  int me, n;
  CHECK_LOOM(loomCommUserRank(comm, &me));
  CHECK_LOOM(loomCommCount(comm, &n));
  size_t es = loom_datatype_size(dt);
  unsigned char *buf = malloc(count * es), want[8];
  if (buf == NULL)
    FAIL("out of memory");
  for (size_t i = 0; i < count; i++)
    td_store(buf, i, dt, td_input(me, i, dt, op));
  CHECK_LOOM(loomAllReduce(buf, buf, count, dt, op, comm, NULL));
  for (size_t i = 0; i < count; i++) {
    td_expected(n, i, dt, op, want);
    if (memcmp(buf + i * es, want, es) != 0)
      FAIL("all-reduce of %zu elements (type %d, op %d) over %d ranks: element %zu is wrong",
           count, (int)dt, (int)op, n, i);
  }
  free(buf);
}

/* A sweep on comm, which must hold exactly the parent ranks `members` in
 * order: an all-gather of parent ranks (the order), then all-reduces of
 * several sizes, types and ops.  Returns the number of calls. */
static int verified_sweep(loomComm_t comm, const int *members, int nmembers) {
  int me, n;
  CHECK_LOOM(loomCommUserRank(comm, &me));
  CHECK_LOOM(loomCommCount(comm, &n));
  if (n != nmembers || members[me] != rank)
    FAIL("new communicator: rank %d of %d, expected rank of parent rank %d among %d", me, n,
         rank, nmembers);
  int32_t mine = rank, all[64];
  CHECK_LOOM(loomAllGather(&mine, all, 1, loomInt32, comm, NULL));
  for (int i = 0; i < n; i++)
    if (all[i] != members[i])
      FAIL("new rank %d is parent rank %d, expected %d", i, all[i], members[i]);
  static const size_t counts[] = {1, 7, 1000, 65536, 1 << 20};
  static const struct { loomDataType_t dt; loomRedOp_t op; } kinds[] = {
      {loomFloat32, loomSum}, {loomInt64, loomMax}, {loomBfloat16, loomSum}, {loomInt8, loomProd}};
  int calls = 1;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++, calls++)
      verified_allreduce(comm, counts[c], kinds[k].dt, kinds[k].op);
  return calls;
}

/* The parent ranks other than the `nx` in `excluded`, in order. */
static int survivors(const int *excluded, int nx, int *out) {
  int m = 0;
  for (int r = 0; r < nranks; r++) {
    int gone = 0;
    for (int i = 0; i < nx; i++)
      gone |= excluded[i] == r;
    if (!gone)
      out[m++] = r;
  }
  return m;
}

static void expect_names(const char *text, int who) {
  char want[64];
  snprintf(want, sizeof want, "failed: rank %d ", who);
  if (strstr(text, want) == NULL)
    FAIL("error text does not name rank %d: \"%s\"", who, text);
}

static void kill_and_shrink(int victim) {
  loomComm_t comm = init_comm(20000);
  size_t count = 1 << 18;
  float *a = calloc(count, sizeof *a);
  loomResult_t res = loomSuccess;
  for (int it = 0; res == loomSuccess && it < 100000; it++) {
    if (rank == victim && it == 3) {
      usleep(200000); /* die while the others wait in the next all-reduce */
      raise(SIGKILL);
    }
    res = loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL);
  }
  free(a);
  if (res != loomRemoteError && res != loomTimeout)
    FAIL("the sweep ended with %s, expected loomRemoteError", loomGetErrorString(res));
  expect_names(loomGetLastError(NULL), victim);
  uint64_t t0 = loom_now_ns();
  loomComm_t small;
  CHECK_LOOM(loomCommShrink(comm, &victim, 1, &small, NULL, LOOM_SHRINK_ABORT));
  double shrink_s = elapsed_s(t0);
  int members[64];
  int m = survivors(&victim, 1, members);
  int calls = verified_sweep(small, members, m);
  CHECK_LOOM(loomCommFinalize(small));
  CHECK_LOOM(loomCommDestroy(small));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: kill ok: rank %d died, shrank to %d ranks in %.3f s, %d verified calls\n",
         rank, victim, m, shrink_s, calls);
}

static void die_in_shrink(int deserter) {
  loomComm_t comm = init_comm(20000), out;
  int victim = 3;
  verified_allreduce(comm, 1000, loomFloat32, loomSum);
  if (rank == victim)
    raise(SIGKILL);
  float x[100] = {0};
  loomResult_t res = loomSuccess;
  for (int it = 0; res == loomSuccess && it < 1000; it++)
    res = loomAllReduce(x, x, 100, loomFloat32, loomSum, comm, NULL);
  if (res == loomSuccess)
    FAIL("no error although rank %d was killed", victim);
  if (rank == deserter)
    raise(SIGKILL);
  uint64_t t0 = loom_now_ns();
  res = loomCommShrink(comm, &victim, 1, &out, NULL, LOOM_SHRINK_ABORT);
  double waited = elapsed_s(t0);
  if (res == loomSuccess)
    FAIL("the shrink succeeded without rank %d", deserter);
  if (strstr(loomGetLastError(NULL), "meet at parent rank 0") == NULL)
    FAIL("the error does not say where the survivors meet: %s", loomGetLastError(NULL));
  if (waited > 4.0 + 5.0)
    FAIL("failing took %.1f s (LOOM_BOOTSTRAP_TIMEOUT 4 s)", waited);
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: die-in-shrink ok after %.1f s: %s\n", rank, waited, loomGetLastError(NULL));
}

static void healthy(void) {
  loomComm_t comm = init_comm(20000);
  int last = nranks - 1;
  verified_allreduce(comm, 1000, loomFloat32, loomSum);
  if (rank == last) { /* leaves without a word */
    CHECK_LOOM(loomCommDestroy(comm));
    printf("rank %d: healthy ok (left)\n", rank);
    return;
  }
  int members[64], calls = 0;
  loomComm_t a, b;
  CHECK_LOOM(loomCommShrink(comm, &last, 1, &a, NULL, LOOM_SHRINK_DEFAULT));
  calls += verified_sweep(a, members, survivors(&last, 1, members));
  /* The same parent again, rank 1 excluded too (it calls, and gets NULL). */
  int two[2] = {1, last};
  /* ... non-blocking: loomInProgress, then ready within 10 s */
  loomConfig_t nb = LOOM_CONFIG_INITIALIZER;
  nb.blocking = 0;
  loomResult_t res = loomCommShrink(comm, two, 2, &b, &nb, LOOM_SHRINK_DEFAULT);
  if (rank == 1 && (res != loomSuccess || b != NULL))
    FAIL("an excluded rank got %s and a communicator %p", loomGetErrorString(res), (void *)b);
  if (rank != 1 && res != loomInProgress)
    FAIL("a non-blocking shrink returned %s: %s", loomGetErrorString(res), loomGetLastError(NULL));
  uint64_t t0 = loom_now_ns();
  for (loomResult_t state = loomInProgress; b != NULL && state == loomInProgress;) {
    CHECK_LOOM(loomCommGetAsyncError(b, &state));
    if (state != loomSuccess && state != loomInProgress)
      FAIL("the non-blocking shrink failed: %s", loomGetLastError(NULL));
    if (elapsed_s(t0) > 10.0)
      FAIL("the non-blocking shrink was not ready in 10 s");
    usleep(1000);
  }
  if (b != NULL) {
    calls += verified_sweep(b, members, survivors(two, 2, members));
    CHECK_LOOM(loomCommDestroy(b));
  }
  /* The first shrink's communicator without its rank 0: its root is served
   * by parent rank 1. */
  if (nranks >= 4) {
    int zero = 0;
    loomComm_t c;
    CHECK_LOOM(loomCommShrink(a, &zero, 1, &c, NULL, LOOM_SHRINK_DEFAULT));
    if ((rank == 0) != (c == NULL))
      FAIL("shrinking away new rank 0 gave parent rank %d %s", rank,
           c == NULL ? "nothing" : "a communicator");
    if (c != NULL) {
      int nx[2] = {0, last};
      calls += verified_sweep(c, members, survivors(nx, 2, members));
      CHECK_LOOM(loomCommDestroy(c));
    }
  }
  CHECK_LOOM(loomCommDestroy(a));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: healthy ok: %d verified calls on three shrunk communicators\n", rank, calls);
}

struct revoker {
  loomComm_t comm;
  loomResult_t res;
};

static void *revoke_later(void *arg) {
  struct revoker *r = arg;
  usleep(300000);
  r->res = loomCommRevoke(r->comm);
  return NULL;
}

static void revoke_case(void) {
  loomComm_t comm = init_comm(30000);
  verified_allreduce(comm, 1000, loomFloat32, loomSum);
  float x[1000] = {0};
  if (rank == 0) {
    struct revoker r = {.comm = comm, .res = loomInternalError};
    pthread_t t;
    if (pthread_create(&t, NULL, revoke_later, &r) != 0)
      FAIL("cannot start the revoking thread");
    uint64_t t0 = loom_now_ns();
    loomResult_t res = loomAllReduce(x, x, 1000, loomFloat32, loomSum, comm, NULL);
    double waited = elapsed_s(t0);
    pthread_join(t, NULL);
    CHECK_LOOM(r.res);
    if (res != loomRemoteError)
      FAIL("the blocked all-reduce returned %s, expected loomRemoteError",
           loomGetErrorString(res));
    if (waited > 3.0)
      FAIL("the blocked all-reduce took %.1f s to end after the revoke", waited);
    res = loomAllReduce(x, x, 1000, loomFloat32, loomSum, comm, NULL);
    if (res != loomInvalidUsage || strstr(loomGetLastError(NULL), "revoked") == NULL)
      FAIL("a call on the revoked communicator returned %s: %s", loomGetErrorString(res),
           loomGetLastError(NULL));
    CHECK_LOOM(loomCommRevoke(comm)); /* twice is harmless */
  } else {
    usleep(1500000); /* join after the revoke */
    /* The first call may complete: rank 0 sent its part before it was
     * revoked, and some algorithms need nothing more from it.  The next
     * one waits on rank 0 and must hear of the revoke at once. */
    loomResult_t res = loomAllReduce(x, x, 1000, loomFloat32, loomSum, comm, NULL);
    uint64_t t0 = loom_now_ns();
    if (res == loomSuccess)
      res = loomAllReduce(x, x, 1000, loomFloat32, loomSum, comm, NULL);
    if (res != loomRemoteError)
      FAIL("the all-reduce after rank 0's revoke returned %s, expected loomRemoteError",
           loomGetErrorString(res));
    if (elapsed_s(t0) > 3.0)
      FAIL("hearing of the revoke took %.1f s (timeout 30 s)", elapsed_s(t0));
    expect_names(loomGetLastError(NULL), 0);
    if (strstr(loomGetLastError(NULL), "revoked") == NULL)
      FAIL("the error does not say rank 0 revoked: %s", loomGetLastError(NULL));
  }
  loomComm_t fresh;
  CHECK_LOOM(loomCommShrink(comm, NULL, 0, &fresh, NULL, LOOM_SHRINK_DEFAULT));
  int members[64];
  int calls = verified_sweep(fresh, members, survivors(NULL, 0, members));
  CHECK_LOOM(loomCommDestroy(fresh));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: revoke ok: %d verified calls after the shrink\n", rank, calls);
}

static void expect_invalid(loomResult_t res, const char *what) {
  if (res != loomInvalidArgument)
    FAIL("%s returned %s, expected loomInvalidArgument", what, loomGetErrorString(res));
  if (strlen(loomGetLastError(NULL)) < 20)
    FAIL("%s gave no useful message: \"%s\"", what, loomGetLastError(NULL));
  printf("rank %d: %s -> %s\n", rank, what, loomGetLastError(NULL));
}

static void bad_args(void) {
  loomComm_t comm = init_comm(20000), out = (loomComm_t)&out;
  int one = 1, dup2[2] = {1, 1}, far = nranks, neg = -1;
  expect_invalid(loomCommShrink(comm, &one, 1, NULL, NULL, 0), "newcomm NULL");
  expect_invalid(loomCommShrink(NULL, &one, 1, &out, NULL, 0), "comm NULL");
  if (out != NULL)
    FAIL("*newcomm was not set to NULL on error");
  expect_invalid(loomCommShrink(comm, &one, -1, &out, NULL, 0), "nExclude -1");
  expect_invalid(loomCommShrink(comm, &one, nranks, &out, NULL, 0), "nExclude = nranks");
  expect_invalid(loomCommShrink(comm, NULL, 1, &out, NULL, 0), "excludeRanks NULL");
  expect_invalid(loomCommShrink(comm, &far, 1, &out, NULL, 0), "rank nranks excluded");
  expect_invalid(loomCommShrink(comm, &neg, 1, &out, NULL, 0), "rank -1 excluded");
  expect_invalid(loomCommShrink(comm, dup2, 2, &out, NULL, 0), "a rank excluded twice");
  expect_invalid(loomCommShrink(comm, &one, 1, &out, NULL, 2), "flags 2");
  loomConfig_t bad = LOOM_CONFIG_INITIALIZER;
  bad.blocking = 5;
  expect_invalid(loomCommShrink(comm, &one, 1, &out, &bad, 0), "config.blocking 5");
  expect_invalid(loomCommRevoke(NULL), "revoke NULL");
  verified_allreduce(comm, 65536, loomFloat32, loomSum); /* nothing was lost */
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: bad-args ok\n", rank);
}

static void disagree(void) {
  loomComm_t comm = init_comm(20000), out;
  int last = nranks - 1;
  verified_allreduce(comm, 1000, loomFloat32, loomSum);
  uint64_t t0 = loom_now_ns();
  loomResult_t res = loomCommShrink(comm, &last, rank == 0 ? 1 : 0, &out, NULL, 0);
  double waited = elapsed_s(t0);
  if (res == loomSuccess)
    FAIL("ranks that disagree on the excluded set made a communicator");
  if (strstr(loomGetLastError(NULL), "same excludeRanks") == NULL)
    FAIL("the error does not say the survivors must agree: %s", loomGetLastError(NULL));
  if (waited > 20.0)
    FAIL("failing took %.1f s", waited);
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: disagree ok after %.1f s: %s\n", rank, waited, loomGetLastError(NULL));
}

int main(int argc, char **argv) {
  rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  if (nranks > 64)
    FAIL("at most 64 ranks");
  if (argc >= 3 && strcmp(argv[1], "--kill") == 0)
    kill_and_shrink(atoi(argv[2]));
  else if (argc >= 3 && strcmp(argv[1], "--die-in-shrink") == 0)
    die_in_shrink(atoi(argv[2]));
  else if (argc >= 2 && strcmp(argv[1], "--healthy") == 0)
    healthy();
  else if (argc >= 2 && strcmp(argv[1], "--revoke") == 0)
    revoke_case();
  else if (argc >= 2 && strcmp(argv[1], "--bad-args") == 0)
    bad_args();
  else if (argc >= 2 && strcmp(argv[1], "--disagree") == 0)
    disagree();
  else
    FAIL("usage: shrink_test --kill K | --die-in-shrink D | --healthy | --revoke | --bad-args | --disagree");
  return 0;
}
