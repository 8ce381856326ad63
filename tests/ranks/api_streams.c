/*
 * api_streams.c — api_test's --streams case: two communicators on a stream
 * each, events, and errors surfacing on a stream.
 */
#include "api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- streams ------------------------------------------------------------ */

static void fill_f(float *x, size_t n, float base) {
  for (size_t i = 0; i < n; i++)
    x[i] = base + (float)(i % 97);
}

static void check_sum(const float *x, size_t n, float base_of_rank1, const char *what) {
  /* every rank r contributed (r + 1) * base_of_rank1 + i % 97 */
  float s = (float)(nranks * (nranks + 1) / 2) * base_of_rank1;
  for (size_t i = 0; i < n; i++) {
    float want = s + (float)nranks * (float)(i % 97);
    if (x[i] != want)
      FAIL("%s: element %zu is %g, expected %g", what, i, x[i], want);
  }
}

void streams(void) {
  if (nranks < 2)
    FAIL("--streams needs 2 ranks or more");
  loomComm_t world = world_init(20000);
  /* Short timeouts: a serialised stream makes the ordering below wait for
   * ever, which must show as a failure, not a hang. */
  loomComm_t A = dup_comm(world, 4000, "A"), B = dup_comm(world, 4000, "B");
  loomStream_t s1, s2;
  CHECK_LOOM(loomStreamCreate(&s1));
  CHECK_LOOM(loomStreamCreate(&s2));
  enum { N = 50000 };
  float *a = xmalloc(N * 4), *ar = xmalloc(N * 4), *b = xmalloc(N * 4), *br = xmalloc(N * 4);

  /* 1. Rank 0 queues A's all-reduce (stream 1) before B's (stream 2); the
   * others finish B before they start A.  Only concurrent streams on rank 0
   * let both complete. */
  for (int round = 0; round < 3; round++) {
    fill_f(a, N, (float)(rank + 1) * 2);
    fill_f(b, N, (float)(rank + 1) * 5);
    memset(ar, 0, N * 4);
    memset(br, 0, N * 4);
    double t0 = now_s();
    if (rank == 0) {
      CHECK_LOOM(loomAllReduce(a, ar, N, loomFloat32, loomSum, A, s1));
      CHECK_LOOM(loomAllReduce(b, br, N, loomFloat32, loomSum, B, s2));
      CHECK_LOOM(loomStreamSynchronize(s2));
      CHECK_LOOM(loomStreamSynchronize(s1));
    } else {
      CHECK_LOOM(loomAllReduce(b, br, N, loomFloat32, loomSum, B, s2));
      CHECK_LOOM(loomStreamSynchronize(s2));
      CHECK_LOOM(loomAllReduce(a, ar, N, loomFloat32, loomSum, A, s1));
      CHECK_LOOM(loomStreamSynchronize(s1));
    }
    check_sum(ar, N, 2, "comm A on stream 1");
    check_sum(br, N, 5, "comm B on stream 2");
    if (round == 0)
      printf("rank %d: A then B on rank 0, B then A elsewhere: both done in %.3f s (streams "
             "progress at once)\n",
             rank, now_s() - t0);
  }

  /* 2. Query and events while work is certainly pending: the other ranks
   * join A only after rank 0 joins a barrier on world, which it does after
   * queuing A's call and querying.  Stream 2 waits (loomStreamWaitEvent)
   * for A's result and reduces it on B. */
  {
    loomEvent_t ev, ev2;
    CHECK_LOOM(loomEventCreate(&ev));
    CHECK_LOOM(loomEventCreate(&ev2));
    if (loomEventQuery(ev) != loomSuccess)
      FAIL("loomEventQuery on a never-recorded event is not loomSuccess");
    CHECK_LOOM(loomEventSynchronize(ev)); /* never recorded: at once */
    fill_f(a, N, (float)(rank + 1) * 3);
    for (size_t i = 0; i < N; i++)
      ar[i] = br[i] = -1;
    if (rank == 0) {
      CHECK_LOOM(loomAllReduce(a, ar, N, loomFloat32, loomSum, A, s1));
      CHECK_LOOM(loomEventRecord(ev, s1));
      CHECK_LOOM(loomStreamWaitEvent(s2, ev));
      CHECK_LOOM(loomAllReduce(ar, br, N, loomFloat32, loomSum, B, s2));
      CHECK_LOOM(loomEventRecord(ev2, s2));
      loomResult_t q1 = loomStreamQuery(s1), q2 = loomStreamQuery(s2);
      loomResult_t e1 = loomEventQuery(ev), e2 = loomEventQuery(ev2);
      if (q1 != loomInProgress || q2 != loomInProgress || e1 != loomInProgress ||
          e2 != loomInProgress)
        FAIL("with work pending, loomStreamQuery gave %s/%s and loomEventQuery %s/%s "
             "(expected loomInProgress)",
             loomGetErrorString(q1), loomGetErrorString(q2), loomGetErrorString(e1),
             loomGetErrorString(e2));
      if (br[0] != -1)
        FAIL("stream 2 ran B's all-reduce before the event it waits for completed");
      CHECK_LOOM(loomBarrier(world, NULL));
      CHECK_LOOM(loomEventSynchronize(ev));
      check_sum(ar, N, 3, "comm A on stream 1, after loomEventSynchronize");
      CHECK_LOOM(loomEventSynchronize(ev2));
      if (loomEventQuery(ev) != loomSuccess || loomEventQuery(ev2) != loomSuccess)
        FAIL("loomEventQuery after loomEventSynchronize is not loomSuccess");
    } else {
      CHECK_LOOM(loomBarrier(world, NULL));
      CHECK_LOOM(loomAllReduce(a, ar, N, loomFloat32, loomSum, A, NULL));
      CHECK_LOOM(loomAllReduce(ar, br, N, loomFloat32, loomSum, B, s2));
      CHECK_LOOM(loomEventRecord(ev2, s2));
      CHECK_LOOM(loomEventSynchronize(ev2));
    }
    /* br = n * (A's result): stream 2 read A's output only once it existed */
    float s = (float)(nranks * (nranks + 1) / 2) * 3;
    for (size_t i = 0; i < N; i++) {
      float want = (float)nranks * (s + (float)nranks * (float)(i % 97));
      if (br[i] != want)
        FAIL("B's all-reduce of A's result (after loomStreamWaitEvent): element %zu is %g, "
             "expected %g",
             i, br[i], want);
    }
    CHECK_LOOM(loomStreamSynchronize(s1));
    CHECK_LOOM(loomStreamSynchronize(s2));
    if (loomStreamQuery(s1) != loomSuccess || loomStreamQuery(s2) != loomSuccess)
      FAIL("loomStreamQuery after loomStreamSynchronize is not loomSuccess");
    CHECK_LOOM(loomEventDestroy(ev));
    CHECK_LOOM(loomEventDestroy(ev2));
    printf("rank %d: loomStreamQuery/loomEventQuery in progress, then events and "
           "loomStreamWaitEvent ordered the data\n",
           rank);
  }

  /* 2b. A group on a stream is queued: rank 0's loomGroupEnd returns
   * before the others, held in a barrier, have even started. */
  {
    enum { G = 20, GC = 300 };
    static float gin[G][GC], gout[G][GC];
    for (int i = 0; i < G; i++)
      for (int k = 0; k < GC; k++) {
        gin[i][k] = (float)((rank + 1) * 2) + (float)(k % 97);
        gout[i][k] = -1;
      }
    if (rank != 0)
      CHECK_LOOM(loomBarrier(world, NULL));
    CHECK_LOOM(loomGroupStart());
    for (int i = 0; i < G; i++)
      CHECK_LOOM(loomAllReduce(i % 2 ? gin[i] : gout[i], gout[i], GC, loomFloat32, loomSum, A,
                               s1));
    CHECK_LOOM(loomGroupEnd());
    if (rank == 0) {
      if (loomStreamQuery(s1) != loomInProgress)
        FAIL("a group queued on a stream before the other ranks joined is not in progress");
      CHECK_LOOM(loomBarrier(world, NULL));
    }
    CHECK_LOOM(loomStreamSynchronize(s1));
    for (int i = 0; i < G; i++)
      if (i % 2)
        check_sum(gout[i], GC, 2, "a group of all-reduces on a stream");
    for (int i = 0; i < G; i += 2) /* in place: the initial -1 everywhere */
      for (int k = 0; k < GC; k++)
        if (gout[i][k] != (float)-nranks)
          FAIL("in-place all-reduce of a group on a stream: %g", gout[i][k]);
    printf("rank %d: a group on a stream was queued (loomGroupEnd did not wait) and is exact\n",
           rank);
  }

  /* 3. An error on a stream: counts 10 on rank 0, 12 elsewhere, on a
   * third communicator.  It surfaces in loomStreamSynchronize (once) and
   * loomCommGetAsyncError; the stream stays usable. */
  {
    loomComm_t C = dup_comm(world, 4000, "C");
    float x[12] = {0};
    size_t count = rank == 0 ? 10 : 12;
    CHECK_LOOM(loomAllReduce(x, x, count, loomFloat32, loomSum, C, s1));
    loomResult_t res = loomStreamSynchronize(s1);
    char text[1200];
    snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
    if (res != loomInvalidUsage)
      FAIL("mismatched counts on a stream: loomStreamSynchronize gave %s (expected "
           "loomInvalidUsage): %s",
           loomGetErrorString(res), text);
    if (strstr(text, "count 10") == NULL || strstr(text, "count 12") == NULL)
      FAIL("the stream's error does not name both calls: %s", text);
    loomResult_t async = loomSuccess;
    CHECK_LOOM(loomCommGetAsyncError(C, &async));
    if (async != loomInvalidUsage)
      FAIL("loomCommGetAsyncError after the failed stream work: %s",
           loomGetErrorString(async));
    if (strstr(loomGetLastError(NULL), "count 10") == NULL)
      FAIL("loomCommGetAsyncError did not give the error text: %s", loomGetLastError(NULL));
    res = loomStreamSynchronize(s1);
    if (res != loomSuccess)
      FAIL("the stream's error was reported twice: %s", loomGetErrorString(res));
    /* a later call on the broken communicator is refused */
    res = loomAllReduce(x, x, count, loomFloat32, loomSum, C, s1);
    if (res == loomSuccess)
      res = loomStreamSynchronize(s1);
    if (res == loomSuccess)
      FAIL("a broken communicator accepted more stream work");
    /* the stream itself still works */
    fill_f(a, N, (float)(rank + 1));
    CHECK_LOOM(loomAllReduce(a, ar, N, loomFloat32, loomSum, A, s1));
    CHECK_LOOM(loomStreamSynchronize(s1));
    check_sum(ar, N, 1, "comm A on stream 1 after another comm's error there");
    CHECK_LOOM(loomBarrier(world, NULL)); /* everyone has seen the error */
    CHECK_LOOM(loomCommAbort(C));
    printf("rank %d: stream error surfaced: %s\n", rank, text);
  }
  /* A PreMulSum op destroyed as soon as the queued call returns (as NCCL
   * allows) and its slot reused with another scalar: the queued call still
   * uses its own.  Then a NULL-stream call on the same communicator runs
   * after the queued one on every rank (the same call numbers). */
  {
    float one = (float)(rank + 1), other = 100.f, q[8], qr[8], z[8], zr[8];
    for (int i = 0; i < 8; i++) {
      q[i] = (float)i;
      z[i] = (float)(2 * i);
    }
    loomRedOp_t op1, op2;
    CHECK_LOOM(loomRedOpCreatePreMulSum(&op1, &one, loomFloat32, loomScalarHostImmediate, A));
    CHECK_LOOM(loomAllReduce(q, qr, 8, loomFloat32, op1, A, s1));
    CHECK_LOOM(loomRedOpDestroy(op1, A));
    CHECK_LOOM(loomRedOpCreatePreMulSum(&op2, &other, loomFloat32, loomScalarHostImmediate, A));
    CHECK_LOOM(loomAllReduce(z, zr, 8, loomFloat32, loomSum, A, NULL));
    CHECK_LOOM(loomStreamSynchronize(s1));
    CHECK_LOOM(loomRedOpDestroy(op2, A));
    float scal = 0;
    for (int r = 0; r < nranks; r++)
      scal += (float)(r + 1);
    for (int i = 0; i < 8; i++) {
      if (qr[i] != scal * (float)i)
        FAIL("queued PreMulSum call after its op was destroyed: %g at %d, expected %g", qr[i],
             i, scal * (float)i);
      if (zr[i] != (float)(2 * i * nranks))
        FAIL("NULL-stream call after queued work: %g at %d, expected %g", zr[i], i,
             (float)(2 * i * nranks));
    }
  }
  CHECK_LOOM(loomStreamDestroy(s1));
  CHECK_LOOM(loomStreamDestroy(s2));
  close_comm(A);
  close_comm(B);
  close_comm(world);
  free(a);
  free(ar);
  free(b);
  free(br);
  printf("rank %d: streams ok\n", rank);
}
