/*
 * api_errors.c — api_test's error cases: --mismatch, --mismatch-root and
 * --mismatch-root-big (calls that differ between ranks) and --bad-args
 * (invalid arguments).
 */
#include "api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mismatch ------------------------------------------------------------ */

enum { MM_COLL, MM_COUNT, MM_TYPE, MM_OP, MM_FUSION, MM_P2P, MM_ROOT_BIG, MM_ROOT, MM_N };
#define MM_BIG (1 << 20) /* a chain broadcast, more than the sockets buffer */

static loomResult_t mismatch_call(int kind, loomComm_t c, float *buf, float *out,
                                  float *big) {
  switch (kind) {
  case MM_COLL: /* rank 2 gathers while the others reduce */
    if (rank == 2)
      return loomAllGather(buf, out, 12, loomFloat32, c, NULL);
    return loomAllReduce(buf, out, 12, loomFloat32, loomSum, c, NULL);
  case MM_COUNT:
    return loomAllReduce(buf, out, rank == 1 ? 10 : 12, loomFloat32, loomSum, c, NULL);
  case MM_TYPE:
    return loomAllReduce(buf, out, 12, rank == 1 ? loomInt32 : loomFloat32, loomSum, c, NULL);
  case MM_OP:
    return loomAllReduce(buf, out, 12, loomFloat32, rank == 1 ? loomMax : loomSum, c, NULL);
  case MM_FUSION: { /* two 6-element all-reduces; rank 1's second reads the first's output,
                     so only its pair cannot fuse */
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomAllReduce(buf, out, 6, loomFloat32, loomSum, c, NULL));
    CHECK_LOOM(loomAllReduce(rank == 1 ? out : buf + 6, out + 6, 6, loomFloat32, loomSum, c,
                             NULL));
    return loomGroupEnd();
  }
  case MM_P2P: { /* rank 0 sends 10 elements, rank 1 expects 12; the rest idle */
    loomResult_t res;
    CHECK_LOOM(loomGroupStart());
    if (rank == 0)
      CHECK_LOOM(loomSend(buf, 10, loomFloat32, 1, c, NULL));
    if (rank == 1)
      CHECK_LOOM(loomRecv(out, 12, loomFloat32, 0, c, NULL));
    res = loomGroupEnd();
    return res;
  }
  case MM_ROOT_BIG:
    return loomBroadcast(big, big, MM_BIG, loomFloat32, rank == 1 ? 1 : 0, c, NULL);
  default: /* MM_ROOT: a small broadcast (binomial tree) */
    return loomBroadcast(buf, out, 12, loomFloat32, rank == 1 ? 1 : 0, c, NULL);
  }
}

/* Runs the mismatch kinds first .. last, each on a fresh communicator. */
static void mismatch(int first, int last, const char *label) {
  if (nranks < 3)
    FAIL("%s needs 3 ranks or more", label);
  static const char *const name[MM_N] = {"allreduce vs allgather",
                                         "count 10 vs 12",
                                         "int32 vs float32",
                                         "max vs sum",
                                         "fused group vs one that cannot fuse",
                                         "send 10 vs recv 12 elements",
                                         "4 MB broadcast root 1 vs 0",
                                         "12-element broadcast root 1 vs 0"};
  static const char *const want1[MM_N] = {"allreduce(",    "count 10,",     "int32, sum)",
                                          "float32, max)", "count 12,",     "ranks 0 and 1",
                                          "root 1)",       "root 1)"};
  static const char *const want2[MM_N] = {"allgather(",    "count 12,",       "float32, sum)",
                                          "float32, sum)", "count 6,",        "different sizes",
                                          "root 0)",       "root 0)"};
  float *big = xmalloc(sizeof(float) * MM_BIG);
  const int timeout_ms = 4000;
  loomComm_t world = world_init(30000);
  for (int kind = first; kind <= last; kind++) {
    loomComm_t c = dup_comm(world, timeout_ms, "mismatch");
    float buf[12], out[12 * 64];
    for (int i = 0; i < 12; i++)
      buf[i] = (float)(rank + i);
    double t0 = now_s();
    for (int i = 0; i < MM_BIG; i++)
      big[i] = (float)rank;
    loomResult_t res = mismatch_call(kind, c, buf, out, big);
    const char *where = "at the mismatched call";
    if (res == loomSuccess) {
      /* This rank's part ended before anyone saw the mismatch: the next
       * call must report it. */
      float x = 1, y;
      res = loomAllReduce(&x, &y, 1, loomFloat32, loomSum, c, NULL);
      where = "at the next call";
    }
    double waited = now_s() - t0;
    char text[1200];
    snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
    if (res != loomInvalidUsage)
      FAIL("%s: %s returned %s after %.2f s (expected loomInvalidUsage): %s", name[kind], where,
           loomGetErrorString(res), waited, text);
    if (strstr(text, want1[kind]) == NULL || strstr(text, want2[kind]) == NULL)
      FAIL("%s: the message (%s) does not name both calls (\"%s\" and \"%s\"): %s",
           name[kind], where, want1[kind], want2[kind], text);
    if (waited >= timeout_ms / 1000.0)
      FAIL("%s: took %.2f s, past the timeout", name[kind], waited);
    printf("rank %d: mismatch %s: invalid usage %s after %.2f s: %s\n", rank, name[kind],
           where, waited, text);
    CHECK_LOOM(loomBarrier(world, NULL)); /* everyone has seen it before any abort */
    CHECK_LOOM(loomCommAbort(c));
  }
  free(big);
  close_comm(world);
  printf("rank %d: %s ok\n", rank, label + 2);
}

/* A send/recv size mismatch is seen by the receiver; the sender and the
 * ranks not involved learn of it at their next call. */
void mismatch_calls(void) { mismatch(MM_COLL, MM_P2P, "--mismatch"); }
/* Different roots: a rank that is root in its own view only sends, so it
 * may finish before anyone sees the mismatch (then its next call must
 * report it). */
void mismatch_root(void) { mismatch(MM_ROOT, MM_ROOT, "--mismatch-root"); }
void mismatch_root_big(void) {
  mismatch(MM_ROOT_BIG, MM_ROOT_BIG, "--mismatch-root-big");
}

/* ---- bad-args ------------------------------------------------------------ */

static int n_invalid;

static void expect_code(loomResult_t res, loomResult_t want, const char *what) {
  if (res != want)
    FAIL("%s returned %s, expected %s: %s", what, loomGetErrorString(res),
         loomGetErrorString(want), loomGetLastError(NULL));
  if (strlen(loomGetLastError(NULL)) < 10)
    FAIL("%s gave no useful message: \"%s\"", what, loomGetLastError(NULL));
  n_invalid++;
  printf("rank %d: %s -> %s: %s\n", rank, what,
         want == loomInvalidArgument ? "invalid argument" : "invalid usage",
         loomGetLastError(NULL));
}
#define BAD_ARG(call, what) expect_code((call), loomInvalidArgument, what)

void bad_args(void) {
  loomComm_t comm = world_init(20000);
  int n = nranks, me = rank;
  enum { N = 64 };
  size_t bytes = sizeof(float) * N * (size_t)n;
  float *s = xmalloc(bytes), *r = xmalloc(bytes);
  for (size_t i = 0; i < N * (size_t)n; i++) {
    s[i] = (float)i;
    r[i] = -3;
  }
  /* NULL buffers with count > 0 */
  BAD_ARG(loomSend(NULL, 4, loomFloat32, 0, comm, NULL), "loomSend NULL sendbuff");
  BAD_ARG(loomRecv(NULL, 4, loomFloat32, 0, comm, NULL), "loomRecv NULL recvbuff");
  BAD_ARG(loomBroadcast(s, NULL, 4, loomFloat32, 0, comm, NULL), "loomBroadcast NULL recvbuff");
  BAD_ARG(loomReduceScatter(NULL, r, 4, loomFloat32, loomSum, comm, NULL),
          "loomReduceScatter NULL sendbuff");
  BAD_ARG(loomAllToAll(s, NULL, 4, loomFloat32, comm, NULL), "loomAllToAll NULL recvbuff");
  BAD_ARG(loomReduce(NULL, r, 4, loomFloat32, loomSum, 0, comm, NULL),
          "loomReduce NULL sendbuff");
  BAD_ARG(loomGather(s, NULL, 4, loomFloat32, me, comm, NULL),
          "loomGather NULL recvbuff on the root");
  BAD_ARG(loomScatter(NULL, r, 4, loomFloat32, me, comm, NULL),
          "loomScatter NULL sendbuff on the root");
  /* root and peer out of range */
  BAD_ARG(loomBroadcast(s, r, 4, loomFloat32, n, comm, NULL), "loomBroadcast root == nranks");
  BAD_ARG(loomBroadcast(s, r, 4, loomFloat32, -1, comm, NULL), "loomBroadcast root -1");
  BAD_ARG(loomReduce(s, r, 4, loomFloat32, loomSum, n + 5, comm, NULL),
          "loomReduce root nranks+5");
  BAD_ARG(loomGather(s, r, 4, loomFloat32, -2, comm, NULL), "loomGather root -2");
  BAD_ARG(loomScatter(s, r, 4, loomFloat32, n, comm, NULL), "loomScatter root == nranks");
  BAD_ARG(loomSend(s, 4, loomFloat32, n, comm, NULL), "loomSend peer == nranks");
  BAD_ARG(loomRecv(r, 4, loomFloat32, -1, comm, NULL), "loomRecv peer -1");
  /* overlapping buffers that are not the in-place form */
  BAD_ARG(loomAllGather(r + 1, r, 4, loomFloat32, comm, NULL),
          "loomAllGather sendbuff inside recvbuff, not at rank*count");
  BAD_ARG(loomReduceScatter(s, s + 1, 4, loomFloat32, loomSum, comm, NULL),
          "loomReduceScatter recvbuff inside sendbuff, not at rank*count");
  BAD_ARG(loomAllToAll(s, s, 4, loomFloat32, comm, NULL), "loomAllToAll in place");
  BAD_ARG(loomBroadcast(s, s + 2, 4, loomFloat32, me, comm, NULL),
          "loomBroadcast overlapping buffers on the root");
  BAD_ARG(loomReduce(s, s + 1, 4, loomFloat32, loomSum, me, comm, NULL),
          "loomReduce overlapping buffers on the root");
  /* invalid datatype and op */
  BAD_ARG(loomSend(s, 4, (loomDataType_t)42, 0, comm, NULL), "loomSend datatype 42");
  BAD_ARG(loomBroadcast(s, r, 4, (loomDataType_t)-1, 0, comm, NULL),
          "loomBroadcast datatype -1");
  BAD_ARG(loomReduce(s, r, 4, loomFloat32, (loomRedOp_t)99, 0, comm, NULL), "loomReduce op 99");
  BAD_ARG(loomReduceScatter(s, r, 4, loomFloat32, (loomRedOp_t)-1, comm, NULL),
          "loomReduceScatter op -1");
  /* custom ops: destroyed, and used with another type */
  float scalar = 2;
  loomRedOp_t op;
  CHECK_LOOM(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, loomScalarHostImmediate, comm));
  BAD_ARG(loomAllReduce(s, r, 4, loomInt32, op, comm, NULL),
          "loomAllReduce with a float32 custom op on int32");
  CHECK_LOOM(loomRedOpDestroy(op, comm));
  BAD_ARG(loomAllReduce(s, r, 4, loomFloat32, op, comm, NULL),
          "loomAllReduce with a destroyed custom op");
  BAD_ARG(loomRedOpDestroy(op, comm), "loomRedOpDestroy twice");
  /* all-to-all-v with NULL arrays */
  size_t *cnts = calloc((size_t)n, sizeof(size_t)), *displ = calloc((size_t)n, sizeof(size_t));
  BAD_ARG(loomAllToAllv(s, NULL, displ, r, cnts, displ, loomFloat32, comm, NULL),
          "loomAllToAllv NULL sendcounts");
  BAD_ARG(loomAllToAllv(s, cnts, NULL, r, cnts, displ, loomFloat32, comm, NULL),
          "loomAllToAllv NULL sdispls");
  BAD_ARG(loomAllToAllv(s, cnts, displ, r, NULL, displ, loomFloat32, comm, NULL),
          "loomAllToAllv NULL recvcounts");
  BAD_ARG(loomAllToAllv(s, cnts, displ, r, cnts, NULL, loomFloat32, comm, NULL),
          "loomAllToAllv NULL rdispls");
  /* to itself outside a group; unmatched to itself inside one (found before
   * anything moves, the communicator stays usable) */
  BAD_ARG(loomSend(s, 4, loomFloat32, me, comm, NULL), "loomSend to itself outside a group");
  BAD_ARG(loomRecv(r, 4, loomFloat32, me, comm, NULL), "loomRecv from itself outside a group");
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomSend(s, 4, loomFloat32, me, comm, NULL));
  BAD_ARG(loomGroupEnd(), "loomSend to itself without its loomRecv in the group");
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomSend(s, 4, loomFloat32, me, comm, NULL));
  CHECK_LOOM(loomRecv(r, 5, loomFloat32, me, comm, NULL));
  BAD_ARG(loomGroupEnd(), "loomSend of 4 to itself meeting a loomRecv of 5");
  /* group misuse */
  expect_code(loomGroupEnd(), loomInvalidUsage, "loomGroupEnd without loomGroupStart");
  /* NULL stream and event handles */
  loomStream_t st;
  loomEvent_t ev;
  CHECK_LOOM(loomStreamCreate(&st));
  CHECK_LOOM(loomEventCreate(&ev));
  BAD_ARG(loomStreamCreate(NULL), "loomStreamCreate(NULL)");
  BAD_ARG(loomStreamSynchronize(NULL), "loomStreamSynchronize(NULL)");
  BAD_ARG(loomStreamQuery(NULL), "loomStreamQuery(NULL)");
  BAD_ARG(loomStreamDestroy(NULL), "loomStreamDestroy(NULL)");
  BAD_ARG(loomStreamWaitEvent(NULL, ev), "loomStreamWaitEvent(NULL stream)");
  BAD_ARG(loomStreamWaitEvent(st, NULL), "loomStreamWaitEvent(NULL event)");
  BAD_ARG(loomEventCreate(NULL), "loomEventCreate(NULL)");
  BAD_ARG(loomEventRecord(NULL, st), "loomEventRecord(NULL event)");
  BAD_ARG(loomEventSynchronize(NULL), "loomEventSynchronize(NULL)");
  BAD_ARG(loomEventQuery(NULL), "loomEventQuery(NULL)");
  BAD_ARG(loomEventDestroy(NULL), "loomEventDestroy(NULL)");
  BAD_ARG(loomAllReduce(s, r, 4, loomFloat32, loomSum, comm, (loomStream_t)s),
          "loomAllReduce on a bogus stream");
  /* loomCommSplit without newcomm (not collective: fails before agreeing) */
  BAD_ARG(loomCommSplit(comm, 0, 0, NULL, NULL), "loomCommSplit(newcomm NULL)");
  /* One communicator, two streams in one group: refused, nothing runs. */
  {
    float hx[4] = {1, 2, 3, 4}, hy[4] = {-5, -5, -5, -5}, hz[4] = {-5, -5, -5, -5};
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomAllReduce(hx, hy, 4, loomFloat32, loomSum, comm, st));
    CHECK_LOOM(loomAllReduce(hx, hz, 4, loomFloat32, loomSum, comm, NULL));
    expect_code(loomGroupEnd(), loomInvalidUsage, "a group using two streams on one comm");
    CHECK_LOOM(loomStreamSynchronize(st));
    for (int i = 0; i < 4; i++)
      if (hy[i] != -5 || hz[i] != -5)
        FAIL("a refused group wrote its buffers");
  }
  /* A bad call inside a group fails at once; the group's good calls still run. */
  float gx[4] = {1, 2, 3, 4}, gy[4] = {0};
  CHECK_LOOM(loomGroupStart());
  BAD_ARG(loomAllReduce(gx, gy, 4, loomFloat32, (loomRedOp_t)77, comm, NULL),
          "loomAllReduce op 77 inside a group");
  CHECK_LOOM(loomAllReduce(gx, gy, 4, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomGroupEnd());
  for (int i = 0; i < 4; i++)
    if (gy[i] != (float)((i + 1) * n))
      FAIL("the good call of a group with a rejected one gave %g at %d", gy[i], i);
  /* Nothing moved: the buffers are as they were, and the communicator
   * still gives exact results (a stray message would mismatch). */
  for (size_t i = 0; i < N * (size_t)n; i++)
    if (s[i] != (float)i || r[i] != -3)
      FAIL("a rejected call wrote its buffers: s[%zu] = %g, r[%zu] = %g", i, s[i], i, r[i]);
  CHECK_LOOM(loomAllReduce(s, r, N, loomFloat32, loomSum, comm, st));
  CHECK_LOOM(loomStreamSynchronize(st));
  for (int i = 0; i < N; i++)
    if (r[i] != (float)(i * n))
      FAIL("after the rejected calls, element %d is %g, expected %g", i, r[i], (float)(i * n));
  CHECK_LOOM(loomEventDestroy(ev));
  CHECK_LOOM(loomStreamDestroy(st));
  free(cnts);
  free(displ);
  free(s);
  free(r);
  close_comm(comm);
  printf("rank %d: %d invalid calls rejected, nothing moved\n", rank, n_invalid);
  printf("rank %d: bad-args ok\n", rank);
}
