/*
 * api_comms.c — api_test's communicator cases: --split (loomCommSplit),
 * --initall (loomCommInitAll in one process) and --abort (loomCommAbort
 * from a thread).
 */
#include "api_test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- split --------------------------------------------------------------- */

static void expect_comm(loomComm_t c, int want_rank, int want_count, const char *what) {
  int r = -1, n = -1;
  CHECK_LOOM(loomCommUserRank(c, &r));
  CHECK_LOOM(loomCommCount(c, &n));
  if (r != want_rank || n != want_count)
    FAIL("%s: rank %d of %d, expected rank %d of %d", what, r, n, want_rank, want_count);
}

static void expect_sum(loomComm_t c, int64_t mine, int64_t want, const char *what) {
  int64_t got = -1;
  CHECK_LOOM(loomAllReduce(&mine, &got, 1, loomInt64, loomSum, c, NULL));
  if (got != want)
    FAIL("%s: all-reduce sum %lld, expected %lld", what, (long long)got, (long long)want);
}

void split(void) {
  if (nranks < 3)
    FAIL("--split needs 3 ranks or more");
  loomComm_t world = world_init(20000);
  int n = nranks, nocolor = n >= 5 ? 1 : n - 1;
  /* Colors rank % 2, keys reversing the order; the last rank opts out. */
  int color = rank == nocolor ? LOOM_SPLIT_NOCOLOR : rank % 2;
  loomComm_t sub = (loomComm_t)&sub; /* must be overwritten */
  CHECK_LOOM(loomCommSplit(world, color, n - rank, &sub, NULL));
  int sub_rank = -1, sub_n = 0;
  int64_t sum = 0;
  if (rank == nocolor) {
    if (sub != NULL)
      FAIL("LOOM_SPLIT_NOCOLOR gave a communicator");
  } else {
    for (int r = n - 1; r >= 0; r--)
      if (r % 2 == color && r != nocolor) {
        if (r == rank)
          sub_rank = sub_n;
        sub_n++;
        sum += r;
      }
    if (sub == NULL)
      FAIL("color %d gave no communicator", color);
    expect_comm(sub, sub_rank, sub_n, "split by rank % 2, keys reversed");
    expect_sum(sub, rank, sum, "split by rank % 2");
    /* new rank 0 is the highest parent rank of the color */
    int32_t v = rank, top = -1;
    CHECK_LOOM(loomBroadcast(&v, &top, 1, loomInt32, 0, sub, NULL));
    int want_top = -1;
    for (int r = 0; r < n; r++)
      if (r % 2 == color && r != nocolor)
        want_top = r;
    if (top != want_top)
      FAIL("broadcast from the split's rank 0 gave %d, expected parent rank %d", top,
           want_top);
    /* Nested: reverse again (parent order back), and singletons. */
    loomComm_t sub2 = NULL, single = NULL;
    CHECK_LOOM(loomCommSplit(sub, 0, -sub_rank, &sub2, NULL));
    expect_comm(sub2, sub_n - 1 - sub_rank, sub_n, "nested split with keys reversed again");
    int64_t maxr = -1, mine = rank;
    CHECK_LOOM(loomAllReduce(&mine, &maxr, 1, loomInt64, loomMax, sub2, NULL));
    expect_sum(sub2, rank, sum, "nested split");
    if (maxr != want_top)
      FAIL("nested split: max of parent ranks %lld, expected %d", (long long)maxr, want_top);
    CHECK_LOOM(loomCommSplit(sub2, sub_rank, 0, &single, NULL));
    expect_comm(single, 0, 1, "nested split into singletons");
    expect_sum(single, 1000 + rank, 1000 + rank, "singleton communicator");
    close_comm(single);
    close_comm(sub2);
    close_comm(sub);
  }
  /* Any negative color opts out; equal keys keep the parent order. */
  loomComm_t rest = (loomComm_t)&rest;
  CHECK_LOOM(loomCommSplit(world, rank == 0 ? -7 : 3, 0, &rest, NULL));
  if (rank == 0) {
    if (rest != NULL)
      FAIL("color -7 gave a communicator");
  } else {
    expect_comm(rest, rank - 1, n - 1, "split with equal keys, rank 0 out");
    expect_sum(rest, rank, (int64_t)n * (n - 1) / 2, "split without rank 0");
    close_comm(rest);
  }
  /* The parent still works. */
  expect_sum(world, rank, (int64_t)n * (n - 1) / 2, "parent after splits");
  close_comm(world);
  printf("rank %d: split: color %d, rank %d of %d; nested and NOCOLOR exact\n", rank, color,
         sub_rank, sub_n);
  printf("rank %d: split ok\n", rank);
}

/* ---- initall ------------------------------------------------------------- */

void initall(void) {
  enum { ND = 4, N = 3000 };
  loomComm_t comms[ND];
  CHECK_LOOM(loomCommInitAll(comms, ND, NULL));
  for (int i = 0; i < ND; i++)
    expect_comm(comms[i], i, ND, "loomCommInitAll");
  static int64_t send[ND][N], recv[ND][N];
  for (int round = 0; round < 2; round++) { /* out of place, then in place */
    for (int i = 0; i < ND; i++)
      for (int k = 0; k < N; k++) {
        send[i][k] = (int64_t)(i + 1) * 1000003 + k;
        recv[i][k] = round ? send[i][k] : -1;
      }
    CHECK_LOOM(loomGroupStart());
    for (int i = 0; i < ND; i++)
      CHECK_LOOM(loomAllReduce(round ? recv[i] : send[i], recv[i], N, loomInt64, loomSum,
                               comms[i], NULL));
    CHECK_LOOM(loomGroupEnd());
    for (int i = 0; i < ND; i++)
      for (int k = 0; k < N; k++) {
        int64_t want = (int64_t)(ND * (ND + 1) / 2) * 1000003 + (int64_t)ND * k;
        if (recv[i][k] != want)
          FAIL("%s all-reduce over loomCommInitAll comms: comm %d element %d is %lld, "
               "expected %lld",
               round ? "in-place" : "out-of-place", i, k, (long long)recv[i][k],
               (long long)want);
      }
  }
  /* Broadcast from rank 2, and all-gather, one thread, one group each. */
  static float bsend[N], bdst[ND][N];
  for (int k = 0; k < N; k++)
    bsend[k] = (float)k * 0.25f - 7;
  CHECK_LOOM(loomGroupStart());
  for (int i = 0; i < ND; i++)
    CHECK_LOOM(loomBroadcast(i == 2 ? bsend : NULL, bdst[i], N, loomFloat32, 2, comms[i], NULL));
  CHECK_LOOM(loomGroupEnd());
  for (int i = 0; i < ND; i++)
    for (int k = 0; k < N; k++)
      if (bdst[i][k] != bsend[k])
        FAIL("broadcast over loomCommInitAll comms: comm %d element %d is %g, expected %g", i,
             k, bdst[i][k], bsend[k]);
  static int32_t gs[ND][5], gr[ND][5 * ND];
  for (int i = 0; i < ND; i++)
    for (int k = 0; k < 5; k++)
      gs[i][k] = i * 10 + k;
  CHECK_LOOM(loomGroupStart());
  for (int i = 0; i < ND; i++)
    CHECK_LOOM(loomAllGather(gs[i], gr[i], 5, loomInt32, comms[i], NULL));
  CHECK_LOOM(loomGroupEnd());
  for (int i = 0; i < ND; i++)
    for (int j = 0; j < ND * 5; j++)
      if (gr[i][j] != (j / 5) * 10 + j % 5)
        FAIL("all-gather over loomCommInitAll comms: comm %d element %d is %d", i, j,
             gr[i][j]);
  /* A ring of sends and receives across the comms, from this one thread. */
  static int32_t rs[ND][100], rr[ND][100];
  for (int i = 0; i < ND; i++)
    for (int k = 0; k < 100; k++) {
      rs[i][k] = i * 1000 + k;
      rr[i][k] = -1;
    }
  CHECK_LOOM(loomGroupStart());
  for (int i = 0; i < ND; i++) {
    CHECK_LOOM(loomSend(rs[i], 100, loomInt32, (i + 1) % ND, comms[i], NULL));
    CHECK_LOOM(loomRecv(rr[i], 100, loomInt32, (i + ND - 1) % ND, comms[i], NULL));
  }
  CHECK_LOOM(loomGroupEnd());
  for (int i = 0; i < ND; i++)
    for (int k = 0; k < 100; k++)
      if (rr[i][k] != ((i + ND - 1) % ND) * 1000 + k)
        FAIL("send/recv ring over loomCommInitAll comms: comm %d element %d is %d", i, k,
             rr[i][k]);
  /* The same group queued on streams: one stream shared by all four comms
   * (their batches must still run at once), then a stream per comm. */
  loomStream_t st[ND];
  for (int i = 0; i < ND; i++)
    CHECK_LOOM(loomStreamCreate(&st[i]));
  for (int shared = 1; shared >= 0; shared--) {
    for (int i = 0; i < ND; i++)
      for (int k = 0; k < N; k++) {
        send[i][k] = (int64_t)(i + 1) * 7 - k * (shared + 1);
        recv[i][k] = -1;
      }
    CHECK_LOOM(loomGroupStart());
    for (int i = 0; i < ND; i++)
      CHECK_LOOM(loomAllReduce(send[i], recv[i], N, loomInt64, loomSum, comms[i],
                               st[shared ? 0 : i]));
    CHECK_LOOM(loomGroupEnd());
    for (int i = 0; i < ND; i++)
      CHECK_LOOM(loomStreamSynchronize(st[i]));
    for (int i = 0; i < ND; i++)
      for (int k = 0; k < N; k++) {
        int64_t want = (int64_t)(ND * (ND + 1) / 2) * 7 - (int64_t)ND * k * (shared + 1);
        if (recv[i][k] != want)
          FAIL("all-reduce over loomCommInitAll comms on %s: comm %d element %d is %lld, "
               "expected %lld",
               shared ? "one shared stream" : "a stream each", i, k, (long long)recv[i][k],
               (long long)want);
      }
  }
  for (int i = 0; i < ND; i++)
    CHECK_LOOM(loomStreamDestroy(st[i]));
  for (int i = 0; i < ND; i++)
    CHECK_LOOM(loomCommDestroy(comms[i]));
  printf("rank %d: loomCommInitAll(4): grouped all-reduce, broadcast, all-gather and "
         "send/recv from one thread, and groups on shared and separate streams exact\n",
         rank);
  printf("rank %d: initall ok\n", rank);
}

/* ---- abort --------------------------------------------------------------- */

struct abort_arg {
  loomComm_t comm;
  double t_abort;
  loomResult_t res;
};

static void *abort_thread(void *p) {
  struct abort_arg *a = p;
  usleep(500000);
  a->t_abort = now_s();
  a->res = loomCommAbort(a->comm);
  return NULL;
}

static void expect_names(const char *text, int who) {
  char want[64];
  snprintf(want, sizeof want, "failed: rank %d ", who);
  if (strstr(text, want) == NULL)
    FAIL("error text does not name rank %d as the culprit: \"%s\"", who, text);
}

void abort_case(void) {
  if (nranks < 3)
    FAIL("--abort needs 3 ranks or more");
  const int timeout_ms = 5000;
  loomComm_t world = world_init(20000);
  loomComm_t comm = dup_comm(world, timeout_ms, "victim");
  float x = 1, y = 0;
  CHECK_LOOM(loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, NULL));
  if (y != nranks)
    FAIL("first all-reduce gave %g", y);
  /* Rank 2 joins the second all-reduce only after rank 1 has aborted, so
   * every other rank is blocked in it when the abort comes.  It is large
   * enough for the ring (not recursive doubling): rank 1 must forward data
   * that depends on rank 2's, so its part cannot be complete at the abort.
   * (With one element rank 1 may have sent all it had to before blocking,
   * and the others rightly finish without it.) */
  enum { BIG = 1 << 16 };
  float *big = xmalloc(sizeof(float) * BIG);
  for (int i = 0; i < BIG; i++)
    big[i] = 1;
  if (rank == 1) {
    pthread_t t;
    struct abort_arg a = {comm, 0, loomSuccess};
    pthread_create(&t, NULL, abort_thread, &a);
    double t0 = now_s();
    loomResult_t res = loomAllReduce(big, big, BIG, loomFloat32, loomSum, comm, NULL);
    double t_ret = now_s();
    char text[1200];
    snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
    pthread_join(t, NULL);
    CHECK_LOOM(a.res);
    if (res != loomRemoteError)
      FAIL("the all-reduce blocked during loomCommAbort returned %s (expected "
           "loomRemoteError): %s",
           loomGetErrorString(res), text);
    if (t_ret < a.t_abort)
      FAIL("the all-reduce returned %.3f s before the abort: it was not blocked",
           a.t_abort - t_ret);
    if (t_ret - a.t_abort > 2.0)
      FAIL("the blocked all-reduce returned %.2f s after loomCommAbort (allowed 2 s)",
           t_ret - a.t_abort);
    printf("rank 1: blocked %.2f s, then returned %.3f s after loomCommAbort: %s\n",
           a.t_abort - t0, t_ret - a.t_abort, text);
  } else {
    if (rank == 2)
      usleep(1500000);
    double t0 = now_s();
    loomResult_t res = loomAllReduce(big, big, BIG, loomFloat32, loomSum, comm, NULL);
    double waited = now_s() - t0;
    char text[1200];
    snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
    if (res != loomRemoteError)
      FAIL("after rank 1 aborted, the all-reduce returned %s (expected loomRemoteError) "
           "after %.2f s: %s",
           loomGetErrorString(res), waited, text);
    expect_names(text, 1);
    if (strstr(text, "aborted its communicator") == NULL)
      FAIL("the error does not say rank 1 aborted: %s", text);
    if (waited >= timeout_ms / 1000.0)
      FAIL("took %.2f s to learn of rank 1's abort (timeout %d ms)", waited, timeout_ms);
    loomResult_t async = loomSuccess;
    CHECK_LOOM(loomCommGetAsyncError(comm, &async));
    if (async != loomRemoteError)
      FAIL("loomCommGetAsyncError after the failure: %s", loomGetErrorString(async));
    printf("rank %d: learned of rank 1's abort after %.2f s: %s\n", rank, waited, text);
  }
  free(big);
  CHECK_LOOM(loomBarrier(world, NULL)); /* everyone has seen it */
  if (rank != 1)
    CHECK_LOOM(loomCommAbort(comm));
  close_comm(world);
  printf("rank %d: abort ok\n", rank);
}
