/*
 * api_mismatch.c — api_test --mismatch-matrix: every collective against
 * every argument that changes data movement (collective kind, count,
 * datatype, op, root, all-to-all-v counts, communicator calls), small and
 * large.  Rank 1 differs; every rank must return loomInvalidUsage AT that
 * call (never success, never a timeout), naming both calls, within the
 * communicator's timeout.
 */
#include "api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MX_BIG (1 << 20) /* elements: 4 MiB of float32, more than a socket buffer */

struct mx_bufs {
  float *a, *b; /* MX_BIG * nranks elements each */
  size_t v[4][64]; /* all-to-all-v: sendcounts, sdispls, recvcounts, rdispls */
};

struct mx_case {
  const char *name;
  const char *want1, *want2; /* both must appear in every rank's message */
  int big;                   /* 1: MX_BIG elements, else 12 */
  loomResult_t (*run)(struct mx_bufs *m, size_t n, int odd, loomComm_t c);
};

/* odd: 1 on the rank that calls differently (rank 1). */
static loomResult_t ar_count(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomAllReduce(m->a, m->b, odd ? n - 2 : n, loomFloat32, loomSum, c, NULL);
}
static loomResult_t ar_type(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomAllReduce(m->a, m->b, n, odd ? loomInt32 : loomFloat32, loomSum, c, NULL);
}
static loomResult_t ar_op(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomAllReduce(m->a, m->b, n, loomFloat32, odd ? loomMax : loomSum, c, NULL);
}
static loomResult_t ar_zero(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomAllReduce(m->a, m->b, odd ? 0 : n, loomFloat32, loomSum, c, NULL);
}
static loomResult_t ar_vs_ag(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  if (odd)
    return loomAllGather(m->a, m->b, n, loomFloat32, c, NULL);
  return loomAllReduce(m->a, m->b, n, loomFloat32, loomSum, c, NULL);
}
static loomResult_t ag_count(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomAllGather(m->a, m->b, odd ? n - 2 : n, loomFloat32, c, NULL);
}
static loomResult_t rs_op(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomReduceScatter(m->a, m->b, n, loomFloat32, odd ? loomMin : loomSum, c, NULL);
}
static loomResult_t bc_root(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomBroadcast(m->a, m->a, n, loomFloat32, odd ? 1 : 0, c, NULL);
}
static loomResult_t bc_count(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomBroadcast(m->a, m->a, odd ? n - 2 : n, loomFloat32, 0, c, NULL);
}
static loomResult_t bc_type(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomBroadcast(m->a, m->a, n, odd ? loomInt32 : loomFloat32, 0, c, NULL);
}
static loomResult_t red_root(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomReduce(m->a, m->b, n, loomFloat32, loomSum, odd ? 1 : 0, c, NULL);
}
static loomResult_t red_op(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomReduce(m->a, m->b, n, loomFloat32, odd ? loomProd : loomSum, 0, c, NULL);
}
static loomResult_t gat_root(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomGather(m->a, m->b, n, loomFloat32, odd ? 1 : 0, c, NULL);
}
static loomResult_t gat_root_last(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  (void)odd; /* ranks 0..n-2 say root 0, the last rank says root 1 */
  return loomGather(m->a, m->b, n, loomFloat32, rank == nranks - 1 ? 1 : 0, c, NULL);
}
static loomResult_t sca_root(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomScatter(m->a, m->b, n, loomFloat32, odd ? 1 : 0, c, NULL);
}
static loomResult_t sca_count(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomScatter(m->a, m->b, odd ? n - 2 : n, loomFloat32, 0, c, NULL);
}
static loomResult_t a2a_type(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  return loomAllToAll(m->a, m->b, n, odd ? loomInt32 : loomFloat32, c, NULL);
}
/* Rank 1 believes rank 0 sends it n elements; rank 0 sends it none. */
static loomResult_t a2av_counts(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  for (int j = 0; j < nranks; j++) {
    m->v[0][j] = m->v[2][j] = 0;
    m->v[1][j] = m->v[3][j] = (size_t)j * n;
  }
  if (odd)
    m->v[2][0] = n;
  return loomAllToAllv(m->a, m->v[0], m->v[1], m->b, m->v[2], m->v[3], loomFloat32, c, NULL);
}
static loomResult_t barrier_vs_ar(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  if (odd)
    return loomBarrier(c, NULL);
  return loomAllReduce(m->a, m->b, n, loomFloat32, loomSum, c, NULL);
}
static loomResult_t split_vs_ar(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  if (odd) {
    loomComm_t sub = NULL;
    loomResult_t res = loomCommSplit(c, 0, rank, &sub, NULL);
    if (sub != NULL)
      loomCommDestroy(sub);
    return res;
  }
  return loomAllReduce(m->a, m->b, n, loomFloat32, loomSum, c, NULL);
}
static loomResult_t fin_vs_bc(struct mx_bufs *m, size_t n, int odd, loomComm_t c) {
  if (odd)
    return loomCommFinalize(c);
  return loomBroadcast(m->a, m->a, n, loomFloat32, 0, c, NULL);
}

static const struct mx_case cases[] = {
    {"allreduce count", "count 10,", "count 12,", 0, ar_count},
    {"allreduce datatype", "int32, sum)", "float32, sum)", 0, ar_type},
    {"allreduce op", "float32, max)", "float32, sum)", 0, ar_op},
    {"allreduce count 0 vs 12", "count 0,", "count 12,", 0, ar_zero},
    {"allreduce vs allgather", "allreduce(", "allgather(", 0, ar_vs_ag},
    {"allgather count", "count 10,", "count 12,", 0, ag_count},
    {"reducescatter op", "float32, min)", "float32, sum)", 0, rs_op},
    {"broadcast root", "root 1)", "root 0)", 0, bc_root},
    {"broadcast count", "count 10,", "count 12,", 0, bc_count},
    {"broadcast datatype", "int32, root 0)", "float32, root 0)", 0, bc_type},
    {"reduce root", "sum, root 1)", "sum, root 0)", 0, red_root},
    {"reduce op", "prod, root 0)", "sum, root 0)", 0, red_op},
    {"gather root", "root 1)", "root 0)", 0, gat_root},
    {"gather root (last rank)", "root 1)", "root 0)", 0, gat_root_last},
    {"scatter root", "root 1)", "root 0)", 0, sca_root},
    {"scatter count", "count 10,", "count 12,", 0, sca_count},
    {"alltoall datatype", "int32)", "float32)", 0, a2a_type},
    {"alltoallv counts", "different sizes", "alltoallv", 0, a2av_counts},
    {"barrier vs allreduce", "barrier(", "allreduce(", 0, barrier_vs_ar},
    {"split vs allreduce", "loomCommSplit()", "allreduce(", 0, split_vs_ar},
    {"finalize vs broadcast", "loomCommFinalize()", "broadcast(", 0, fin_vs_bc},
    {"big allreduce count", "count 1048574,", "count 1048576,", 1, ar_count},
    {"big broadcast root", "root 1)", "root 0)", 1, bc_root},
    {"big reduce root", "root 1)", "root 0)", 1, red_root},
    {"big gather root", "root 1)", "root 0)", 1, gat_root},
    {"big scatter root", "root 1)", "root 0)", 1, sca_root},
    {"big allgather count", "count 1048574,", "count 1048576,", 1, ag_count},
};

static void run_case(loomComm_t world, struct mx_bufs *m, const struct mx_case *k) {
  const int timeout_ms = 5000;
  loomComm_t c = dup_comm(world, timeout_ms, "mismatch-matrix");
  size_t n = k->big ? MX_BIG : 12;
  for (size_t i = 0; i < n * (size_t)nranks; i++)
    m->a[i] = m->b[i] = (float)(rank + 1);
  double t0 = now_s();
  loomResult_t res = k->run(m, n, rank == 1, c);
  double waited = now_s() - t0;
  char text[1200];
  snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
  if (res != loomInvalidUsage)
    FAIL("%s: returned %s after %.2f s (expected loomInvalidUsage at the call): %s", k->name,
         loomGetErrorString(res), waited, text);
  if (strstr(text, k->want1) == NULL || strstr(text, k->want2) == NULL)
    FAIL("%s: the message does not name both calls (\"%s\" and \"%s\"): %s", k->name,
         k->want1, k->want2, text);
  if (waited >= timeout_ms / 1000.0)
    FAIL("%s: took %.2f s, past the %d ms timeout", k->name, waited, timeout_ms);
  printf("rank %d: mismatch-matrix %s: invalid usage after %.2f s: %s\n", rank, k->name,
         waited, text);
  CHECK_LOOM(loomBarrier(world, NULL));
  CHECK_LOOM(loomCommAbort(c));
}

void mismatch_matrix(void) {
  if (nranks < 2 || nranks > 64)
    FAIL("--mismatch-matrix needs 2 to 64 ranks");
  struct mx_bufs m;
  m.a = xmalloc(sizeof(float) * MX_BIG * (size_t)nranks);
  m.b = xmalloc(sizeof(float) * MX_BIG * (size_t)nranks);
  loomComm_t world = world_init(30000);
  const char *only = getenv("MX_ONLY"); /* one case by name, for debugging */
  int ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only != NULL && strcmp(only, cases[i].name) != 0)
      continue;
    if (cases[i].big && getenv("LOOM_TEST_LIGHT") != NULL)
      continue;
    run_case(world, &m, &cases[i]);
    ran++;
  }
  free(m.a);
  free(m.b);
  close_comm(world);
  printf("rank %d: mismatch-matrix ok (%d cases)\n", rank, ran);
}
