/*
 * api_test — the API beyond single collectives, one case per run:
 *
 *   --group-p2p     sends and receives in groups: a ring posted in opposite
 *                   orders by odd and even ranks (in nested groups); an
 *                   all-pairs exchange issued in a rank-dependent shuffled
 *                   order; several messages between one pair (10 types,
 *                   counts 0 .. 70000) matched in issue order; send/recv to
 *                   itself; a collective mixed in; a Send/Recv pair without
 *                   a group
 *   --group-fusion  1000 in-place and out-of-place all-reduces of 4 KB in one
 *                   group; 100 all-gathers of different counts; calls reading
 *                   an earlier call's output give the sequential result;
 *                   different collectives/types/ops in one group; prints
 *                   (never checks) timings of the fused group
 *   --streams       two communicators, one stream each: ordering that
 *                   deadlocks unless the streams progress at once; events,
 *                   loomStreamQuery, loomStreamWaitEvent; a group queued on a
 *                   stream; an error on a stream surfaces in
 *                   loomStreamSynchronize and loomCommGetAsyncError
 *   --split         loomCommSplit: colors, reversed keys, NOCOLOR, nested
 *   --initall       one process: loomCommInitAll, one thread drives all
 *                   ranks in groups, without a stream, on one shared stream
 *                   and on a stream each (run with one process)
 *   --abort         rank 1 aborts from a thread while blocked; the blocked
 *                   call returns at once, the others fail naming rank 1
 *   --mismatch      different collectives/counts/types/ops, and a group that
 *                   fuses on some ranks only (different aliasing):
 *                   loomInvalidUsage naming both calls on every rank, at that
 *                   call; a send/recv size mismatch: at that call or the next
 *   --mismatch-root, --mismatch-root-big
 *                   broadcasts with different roots (12-element tree, 4 MB
 *                   chain): loomInvalidUsage naming both calls on every rank,
 *                   at that call or, for a rank whose part was done, at its
 *                   next call
 *   --bad-args      invalid arguments of the newer calls: loomInvalidArgument
 *                   with a message, nothing moved
 * Every rank prints "rank R: <case> ok" when the case passed.
 */
#include "loom.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;

#define TEST_NAME "api_test"
#include "rankcheck.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL)
    FAIL("out of memory (%zu bytes)", bytes);
  return p;
}

static loomComm_t world_init(int timeout_ms) {
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  if (timeout_ms > 0)
    cfg.timeout_ms = timeout_ms;
  loomComm_t comm;
  CHECK_LOOM(loomCommInitRankConfig(&comm, nranks, id, rank, &cfg));
  return comm;
}

/* A communicator over the same ranks, in the same order. */
static loomComm_t dup_comm(loomComm_t parent, int timeout_ms, const char *name) {
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.timeout_ms = timeout_ms;
  cfg.commName = name;
  loomComm_t c = NULL;
  CHECK_LOOM(loomCommSplit(parent, 0, rank, &c, &cfg));
  if (c == NULL)
    FAIL("loomCommSplit(color 0) gave no communicator");
  return c;
}

static void close_comm(loomComm_t c) {
  CHECK_LOOM(loomCommFinalize(c));
  CHECK_LOOM(loomCommDestroy(c));
}

static size_t type_size(loomDataType_t t) {
  switch (t) {
  case loomInt8:
  case loomUint8:
    return 1;
  case loomFloat16:
  case loomBfloat16:
    return 2;
  case loomInt32:
  case loomUint32:
  case loomFloat32:
    return 4;
  default:
    return 8;
  }
}

/* ---- group-p2p ---------------------------------------------------------- */

/* Bytes of message k from src to dst. */
static unsigned char pat(int src, int dst, int k, size_t i) {
  return (unsigned char)(src * 37 + dst * 11 + k * 101 + i * 7 + (i >> 9) + 1);
}

static void fill_pat(void *buf, size_t bytes, int src, int dst, int k) {
  unsigned char *b = buf;
  for (size_t i = 0; i < bytes; i++)
    b[i] = pat(src, dst, k, i);
}

static void check_pat(const void *buf, size_t bytes, int src, int dst, int k, const char *what) {
  const unsigned char *b = buf;
  for (size_t i = 0; i < bytes; i++)
    if (b[i] != pat(src, dst, k, i))
      FAIL("%s: message %d from rank %d to rank %d: byte %zu of %zu is 0x%02x, expected "
           "0x%02x",
           what, k, src, dst, i, bytes, b[i], pat(src, dst, k, i));
}

/* Messages between one ordered pair (src, dst): first the all-pairs one
 * (k = 0), then, when dst is src's ring successor, the multi-message
 * series (k = 1 ..).  Both ends derive the same list. */
#define MULTI 6
static const loomDataType_t multi_type[MULTI] = {loomInt8,  loomFloat64, loomBfloat16,
                                                 loomInt32, loomFloat32, loomUint64};
static const size_t multi_count[MULTI] = {0, 1, 7, 4099, 70000, 3};

struct msg {
  int src, dst, k;
  loomDataType_t type;
  size_t count;
  void *buf;
};

static int pair_msgs(int src, int dst, struct msg *out) {
  static const loomDataType_t types[] = {loomInt8, loomUint8,  loomInt32,  loomUint32,
                                         loomInt64, loomUint64, loomFloat16, loomFloat32,
                                         loomFloat64, loomBfloat16};
  int m = 0;
  out[m++] = (struct msg){src, dst, 0, types[(src * 3 + dst) % 10],
                          (size_t)(17 * (src + 1) + 5 * dst + (src == dst ? 3 : 0)), NULL};
  if (dst == (src + 1) % nranks && src != dst)
    for (int k = 0; k < MULTI; k++)
      out[m++] = (struct msg){src, dst, k + 1, multi_type[k], multi_count[k], NULL};
  return m;
}

static uint64_t rng_state;
static unsigned rnd(unsigned n) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)((rng_state >> 33) % n);
}

static void group_p2p(void) {
  loomComm_t comm = world_init(20000);
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  /* 1. A ring: odd ranks send first, even ranks receive first. */
  {
    size_t scount = 1000 + 3 * (size_t)rank, rcount = 1000 + 3 * (size_t)prev;
    int32_t *s = xmalloc(scount * 4), *r = xmalloc(rcount * 4);
    fill_pat(s, scount * 4, rank, next, 50);
    memset(r, 0xee, rcount * 4);
    /* Nested: only the outermost loomGroupEnd issues the calls. */
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomGroupStart());
    if (rank % 2) {
      CHECK_LOOM(loomSend(s, scount, loomInt32, next, comm, NULL));
      CHECK_LOOM(loomRecv(r, rcount, loomInt32, prev, comm, NULL));
    } else {
      CHECK_LOOM(loomRecv(r, rcount, loomInt32, prev, comm, NULL));
      CHECK_LOOM(loomSend(s, scount, loomInt32, next, comm, NULL));
    }
    CHECK_LOOM(loomGroupEnd());
    for (size_t i = 0; i < rcount; i++)
      if (r[i] != (int32_t)0xeeeeeeee)
        FAIL("the inner loomGroupEnd of nested groups already ran the receive");
    CHECK_LOOM(loomGroupEnd());
    check_pat(r, rcount * 4, prev, rank, 50, "ring");
    check_pat(s, scount * 4, rank, next, 50, "ring (send buffer must be untouched)");
    free(s);
    free(r);
    printf("rank %d: ring of send/recv in nested groups (odd ranks send first) exact\n", rank);
  }

  /* 2. All pairs (self included) and several messages per pair, in one
   * group, issued in a shuffled order that keeps each pair's order. */
  {
    int maxm = 1 + MULTI;
    int nq = 2 * nranks; /* queue 2j: sends to j; 2j+1: receives from j */
    struct msg *q = xmalloc(sizeof *q * (size_t)(nq * maxm));
    int *qlen = calloc((size_t)nq, sizeof *qlen), *qpos = calloc((size_t)nq, sizeof *qpos);
    int total = 0;
    for (int j = 0; j < nranks; j++) {
      qlen[2 * j] = pair_msgs(rank, j, &q[2 * j * maxm]);
      qlen[2 * j + 1] = pair_msgs(j, rank, &q[(2 * j + 1) * maxm]);
      total += qlen[2 * j] + qlen[2 * j + 1];
    }
    for (int x = 0; x < nq; x++)
      for (int i = 0; i < qlen[x]; i++) {
        struct msg *m = &q[x * maxm + i];
        size_t bytes = m->count * type_size(m->type);
        /* count 0 travels with NULL buffers: nothing to move, nothing to check */
        m->buf = bytes ? xmalloc(bytes) : NULL;
        if (x % 2 == 0)
          fill_pat(m->buf, bytes, m->src, m->dst, m->k);
        else if (bytes)
          memset(m->buf, 0xee, bytes);
      }
    rng_state = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    int first_ops[4] = {-1, -1, -1, -1}, nfirst = 0;
    CHECK_LOOM(loomGroupStart());
    for (int issued = 0; issued < total; issued++) {
      unsigned pick = rnd((unsigned)(total - issued)), x = 0;
      /* the pick-th remaining message, taking queues as weights */
      for (;; x++) {
        unsigned left = (unsigned)(qlen[x] - qpos[x]);
        if (pick < left)
          break;
        pick -= left;
      }
      struct msg *m = &q[x * maxm + qpos[x]++];
      if (nfirst < 4)
        first_ops[nfirst++] = (int)x;
      if (x % 2 == 0)
        CHECK_LOOM(loomSend(m->buf, m->count, m->type, m->dst, comm, NULL));
      else
        CHECK_LOOM(loomRecv(m->buf, m->count, m->type, m->src, comm, NULL));
    }
    CHECK_LOOM(loomGroupEnd());
    for (int x = 0; x < nq; x++)
      for (int i = 0; i < qlen[x]; i++) {
        struct msg *m = &q[x * maxm + i];
        check_pat(m->buf, m->count * type_size(m->type), m->src, m->dst, m->k,
                  x % 2 ? "all-pairs receive" : "all-pairs send buffer untouched");
        free(m->buf);
      }
    printf("rank %d: %d sends/receives (all pairs, self, %d in order to rank %d, counts 0 .. "
           "70000, 10 types) in one shuffled group exact; first ops %s%d %s%d %s%d\n",
           rank, total, MULTI, next, first_ops[0] % 2 ? "recv<" : "send>", first_ops[0] / 2,
           first_ops[1] % 2 ? "recv<" : "send>", first_ops[1] / 2,
           first_ops[2] % 2 ? "recv<" : "send>", first_ops[2] / 2);
    free(q);
    free(qlen);
    free(qpos);
  }

  /* 3. A collective and sends/receives in one group. */
  {
    int64_t v[3] = {rank + 1, 10 * (rank + 1), -(int64_t)rank}, sum[3];
    double s[5], r[5];
    for (int i = 0; i < 5; i++) {
      s[i] = rank * 10 + i + 0.5;
      r[i] = -1;
    }
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomRecv(r, 5, loomFloat64, prev, comm, NULL));
    CHECK_LOOM(loomAllReduce(v, sum, 3, loomInt64, loomSum, comm, NULL));
    CHECK_LOOM(loomSend(s, 5, loomFloat64, next, comm, NULL));
    CHECK_LOOM(loomGroupEnd());
    int64_t n = nranks;
    if (sum[0] != n * (n + 1) / 2 || sum[1] != 10 * n * (n + 1) / 2 || sum[2] != -n * (n - 1) / 2)
      FAIL("all-reduce in a group with sends: %lld %lld %lld", (long long)sum[0],
           (long long)sum[1], (long long)sum[2]);
    for (int i = 0; i < 5; i++)
      if (r[i] != prev * 10 + i + 0.5)
        FAIL("receive in a group with an all-reduce: element %d is %g, expected %g", i, r[i],
             prev * 10 + i + 0.5);
  }

  /* 4. Send/recv to itself alone in a group. */
  {
    uint16_t a[33], b[33];
    fill_pat(a, sizeof a, rank, rank, 9);
    memset(b, 0, sizeof b);
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomRecv(b, 33, loomFloat16, rank, comm, NULL));
    CHECK_LOOM(loomSend(a, 33, loomFloat16, rank, comm, NULL));
    CHECK_LOOM(loomGroupEnd());
    check_pat(b, sizeof b, rank, rank, 9, "send/recv to itself");
  }

  /* 5. Without a group: a Send/Recv pair each way between ranks 0 and 1. */
  if (rank < 2) {
    size_t count = 5000;
    int32_t *buf = xmalloc(count * 4);
    for (int dir = 0; dir < 2; dir++) {
      int sender = dir, receiver = 1 - dir;
      if (rank == sender) {
        fill_pat(buf, count * 4, sender, receiver, 60 + dir);
        CHECK_LOOM(loomSend(buf, count, loomInt32, receiver, comm, NULL));
      } else {
        memset(buf, 0, count * 4);
        CHECK_LOOM(loomRecv(buf, count, loomInt32, sender, comm, NULL));
        check_pat(buf, count * 4, sender, receiver, 60 + dir, "send/recv without a group");
      }
    }
    free(buf);
    printf("rank %d: blocking loomSend/loomRecv between ranks 0 and 1 exact\n", rank);
  }
  close_comm(comm);
  printf("rank %d: group-p2p ok\n", rank);
}

/* ---- group-fusion -------------------------------------------------------- */

#define NT 1000
#define TC 1024

static float fval(int r, int i, int j) { return (float)((r + 1) * ((i * 7 + j) % 251)); }

/* The 1000-tensor group: even tensors in place, odd out of place. */
static void fused_allreduce_group(loomComm_t comm, float *in, float *out) {
  for (int i = 0; i < NT; i++)
    for (int j = 0; j < TC; j++) {
      float v = fval(rank, i, j);
      if (i % 2 == 0) {
        out[(size_t)i * TC + j] = v;
      } else {
        in[(size_t)i * TC + j] = v;
        out[(size_t)i * TC + j] = -1;
      }
    }
  CHECK_LOOM(loomGroupStart());
  for (int i = 0; i < NT; i++) {
    float *o = out + (size_t)i * TC;
    CHECK_LOOM(loomAllReduce(i % 2 ? in + (size_t)i * TC : o, o, TC, loomFloat32, loomSum,
                             comm, NULL));
  }
  CHECK_LOOM(loomGroupEnd());
}

static void check_fused_allreduce(const float *in, const float *out) {
  float s = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < NT; i++)
    for (int j = 0; j < TC; j++) {
      float want = s * (float)((i * 7 + j) % 251), got = out[(size_t)i * TC + j];
      if (got != want)
        FAIL("fused all-reduce: tensor %d (%s) element %d is %g, expected %g", i,
             i % 2 ? "out of place" : "in place", j, got, want);
      if (i % 2 && in[(size_t)i * TC + j] != fval(rank, i, j))
        FAIL("fused all-reduce changed the sendbuff of tensor %d", i);
    }
}

static void group_fusion(void) {
  if (nranks < 2)
    FAIL("--group-fusion needs 2 ranks or more");
  loomComm_t comm = world_init(30000);
  int n = nranks;
  float *in = xmalloc(sizeof(float) * NT * TC), *out = xmalloc(sizeof(float) * NT * TC);
  memset(in, 0, sizeof(float) * NT * TC);
  fused_allreduce_group(comm, in, out);
  check_fused_allreduce(in, out);
  printf("rank %d: %d all-reduces of %d floats (half in place) in one group exact\n", rank, NT,
         TC);

  /* 100 all-gathers of different counts, every third in place. */
  {
    enum { NG = 100 };
    int32_t *send[NG], *recv[NG];
    size_t cnt[NG];
    for (int i = 0; i < NG; i++) {
      cnt[i] = 1 + (size_t)(i * 13) % 37;
      recv[i] = xmalloc(cnt[i] * (size_t)n * 4);
      for (size_t k = 0; k < cnt[i] * (size_t)n; k++)
        recv[i][k] = -7;
      send[i] = i % 3 == 0 ? recv[i] + (size_t)rank * cnt[i] : xmalloc(cnt[i] * 4);
      for (size_t k = 0; k < cnt[i]; k++)
        send[i][k] = rank * 100000 + i * 100 + (int)k;
    }
    CHECK_LOOM(loomGroupStart());
    for (int i = 0; i < NG; i++)
      CHECK_LOOM(loomAllGather(send[i], recv[i], cnt[i], loomInt32, comm, NULL));
    CHECK_LOOM(loomGroupEnd());
    for (int i = 0; i < NG; i++) {
      for (int j = 0; j < n; j++)
        for (size_t k = 0; k < cnt[i]; k++) {
          int32_t want = j * 100000 + i * 100 + (int)k, got = recv[i][(size_t)j * cnt[i] + k];
          if (got != want)
            FAIL("fused all-gather %d (count %zu%s): rank %d's element %zu is %d, expected %d",
                 i, cnt[i], i % 3 == 0 ? ", in place" : "", j, k, got, want);
        }
      if (i % 3)
        free(send[i]);
      free(recv[i]);
    }
    printf("rank %d: 100 all-gathers (counts 1 .. 37, some in place) in one group exact\n",
           rank);
  }

  /* Calls reading an earlier call's output must see it (no fusion across
   * the dependency): a -> b, b -> c, c -> c in place, a partial overlap,
   * and all-gathers chained the same way. */
  {
    enum { C = 1024 };
    float a[C], b[2 * C], c[C], z[C];
    int32_t g[8], G1[8 * 64], G2[8 * 64];
    if (n > 64)
      FAIL("too many ranks");
    for (int j = 0; j < C; j++) {
      a[j] = (float)((rank + 1) * (j % 5 + 1));
      b[j] = -1;
      b[C + j] = (float)(3 * (rank + 1));
      c[j] = z[j] = -1;
    }
    for (int k = 0; k < 8; k++)
      g[k] = rank * 10 + k;
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomAllReduce(a, b, C, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllReduce(b, c, C, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllReduce(c, c, C, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllReduce(b + C / 2, z, C, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllGather(g, G1, 8, loomInt32, comm, NULL));
    CHECK_LOOM(loomAllGather(G1 + 8, G2, 8, loomInt32, comm, NULL));
    CHECK_LOOM(loomGroupEnd());
    float s = (float)(n * (n + 1) / 2), fn = (float)n;
    for (int j = 0; j < C; j++) {
      float sa = s * (float)(j % 5 + 1);
      if (b[j] != sa)
        FAIL("dependent group: b[%d] = %g, expected %g", j, b[j], sa);
      if (c[j] != fn * fn * sa)
        FAIL("dependent group: c[%d] = %g, expected %g (c = n * b, then c = n * c)", j, c[j],
             fn * fn * sa);
      float wz = j < C / 2 ? fn * s * (float)((j + C / 2) % 5 + 1) : 3 * s;
      if (z[j] != wz)
        FAIL("dependent group (partly overlapping b): z[%d] = %g, expected %g", j, z[j], wz);
    }
    for (int j = 0; j < n; j++)
      for (int k = 0; k < 8; k++) {
        if (G1[j * 8 + k] != j * 10 + k)
          FAIL("dependent all-gather: G1[%d] = %d, expected %d", j * 8 + k, G1[j * 8 + k],
               j * 10 + k);
        int want = 10 + k; /* rank 1's block of G1 */
        if (G2[j * 8 + k] != want)
          FAIL("dependent all-gather (reads G1's second block): G2[%d] = %d, expected %d",
               j * 8 + k, G2[j * 8 + k], want);
      }
    printf("rank %d: calls reading earlier calls' output in one group give the sequential "
           "result\n",
           rank);
  }

  /* Different collectives, types and ops in one group run in issue order
   * (only like neighbours fuse). */
  {
    enum { M = 100, RS = 30 };
    float f1[M], f2[M], rs_send[RS * 64], rs_recv[RS];
    int32_t i1[M], i2[M];
    double bc[50];
    for (int k = 0; k < M; k++) {
      f1[k] = (float)(rank + k);
      f2[k] = (float)(rank * 3 - k);
      i1[k] = rank * 1000 - k;
      i2[k] = -1;
    }
    for (int k = 0; k < 50; k++)
      bc[k] = rank == n - 1 ? k * 1.5 : -1;
    for (int k = 0; k < RS * n; k++)
      rs_send[k] = (float)(k + rank);
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomAllReduce(f1, f1, M, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllReduce(i1, i2, M, loomInt32, loomMax, comm, NULL));
    CHECK_LOOM(loomBroadcast(bc, bc, 50, loomFloat64, n - 1, comm, NULL));
    CHECK_LOOM(loomReduceScatter(rs_send, rs_recv, RS, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllReduce(f2, f2, M, loomFloat32, loomMin, comm, NULL));
    CHECK_LOOM(loomAllReduce(f1, f1, M, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomGroupEnd());
    for (int k = 0; k < M; k++) {
      float w1 = (float)n * (float)(n * (n - 1) / 2 + n * k);
      if (f1[k] != w1)
        FAIL("mixed group: twice-reduced f1[%d] = %g, expected %g", k, f1[k], w1);
      if (f2[k] != (float)-k)
        FAIL("mixed group: min f2[%d] = %g, expected %d", k, f2[k], -k);
      if (i2[k] != (n - 1) * 1000 - k)
        FAIL("mixed group: max i2[%d] = %d, expected %d", k, i2[k], (n - 1) * 1000 - k);
    }
    for (int k = 0; k < 50; k++)
      if (bc[k] != k * 1.5)
        FAIL("mixed group: broadcast element %d is %g", k, bc[k]);
    for (int k = 0; k < RS; k++) {
      float w = (float)(n * (rank * RS + k) + n * (n - 1) / 2);
      if (rs_recv[k] != w)
        FAIL("mixed group: reduce-scatter element %d is %g, expected %g", k, rs_recv[k], w);
    }
    printf("rank %d: a group of all-reduces (3 types/ops), broadcast and reduce-scatter "
           "exact\n",
           rank);
  }

  /* Timings, printed only. */
  {
    double t0, t_group = 1e9, t_one, t_sep;
    for (int rep = 0; rep < 3; rep++) {
      CHECK_LOOM(loomBarrier(comm, NULL));
      t0 = now_s();
      CHECK_LOOM(loomGroupStart());
      for (int i = 0; i < NT; i++)
        CHECK_LOOM(loomAllReduce(in + (size_t)i * TC, out + (size_t)i * TC, TC, loomFloat32,
                                 loomSum, comm, NULL));
      CHECK_LOOM(loomGroupEnd());
      double t = now_s() - t0;
      t_group = t < t_group ? t : t_group;
    }
    CHECK_LOOM(loomBarrier(comm, NULL));
    t0 = now_s();
    CHECK_LOOM(loomAllReduce(in, out, (size_t)NT * TC, loomFloat32, loomSum, comm, NULL));
    t_one = now_s() - t0;
    CHECK_LOOM(loomBarrier(comm, NULL));
    t0 = now_s();
    for (int i = 0; i < NT; i++)
      CHECK_LOOM(loomAllReduce(in + (size_t)i * TC, out + (size_t)i * TC, TC, loomFloat32,
                               loomSum, comm, NULL));
    t_sep = now_s() - t0;
    if (rank == 0)
      printf("rank 0: timing (%d ranks, not checked): %d x 4 KB all-reduces in one group "
             "%.1f ms, one 4 MB all-reduce %.1f ms, %d separate calls %.1f ms\n",
             n, NT, t_group * 1e3, t_one * 1e3, NT, t_sep * 1e3);
  }
  /* Each call disjoint, the calls back to back, but one call over the whole
   * range would overlap its own input (x[c..3c) -> x[0..2c)): the fusion
   * must not take the no-copy path.  Sequential: x[0..c) = sum x[c..2c),
   * then x[c..2c) = sum x[2c..3c).  200000 floats per call: the ring runs. */
  {
    enum { C3 = 200000 };
    float *x = xmalloc(sizeof(float) * 3 * C3);
    for (int i = 0; i < 3 * C3; i++)
      x[i] = (float)((rank + 1) * (i % 1000));
    CHECK_LOOM(loomGroupStart());
    CHECK_LOOM(loomAllReduce(x + C3, x, C3, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomAllReduce(x + 2 * C3, x + C3, C3, loomFloat32, loomSum, comm, NULL));
    CHECK_LOOM(loomGroupEnd());
    float ranks_sum = (float)(n * (n + 1) / 2);
    for (int i = 0; i < 2 * C3; i++) {
      float want = ranks_sum * (float)((i + C3) % 1000);
      if (x[i] != want)
        FAIL("back-to-back calls overlapping as a whole: x[%d] = %g, expected %g", i, x[i],
             want);
    }
    free(x);
  }
  free(in);
  free(out);
  close_comm(comm);
  printf("rank %d: group-fusion ok\n", rank);
}

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

static void streams(void) {
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

static void split(void) {
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

static void initall(void) {
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

static void abort_case(void) {
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
static void mismatch_calls(void) { mismatch(MM_COLL, MM_P2P, "--mismatch"); }
/* Different roots: a rank that is root in its own view only sends, so it
 * may finish before anyone sees the mismatch (then its next call must
 * report it). */
static void mismatch_root(void) { mismatch(MM_ROOT, MM_ROOT, "--mismatch-root"); }
static void mismatch_root_big(void) {
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

static void bad_args(void) {
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

int main(int argc, char **argv) {
  loomLaunchInfo_t li;
  if (loomGetLaunchInfo(&li) != loomSuccess) {
    fprintf(stderr, "api_test: %s\n", loomGetLastError(NULL));
    return 2;
  }
  rank = li.rank;
  nranks = li.nranks;
  setvbuf(stdout, NULL, _IOLBF, 0);
  static const struct {
    const char *flag;
    void (*fn)(void);
  } cases[] = {{"--group-p2p", group_p2p}, {"--group-fusion", group_fusion},
               {"--streams", streams},     {"--split", split},
               {"--initall", initall},     {"--abort", abort_case},
               {"--mismatch", mismatch_calls},
               {"--mismatch-root", mismatch_root}, {"--mismatch-root-big", mismatch_root_big},
               {"--bad-args", bad_args}};
  for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
    if (strcmp(argv[1], cases[i].flag) == 0) {
      cases[i].fn();
      return 0;
    }
  fprintf(stderr, "usage: api_test --group-p2p | --group-fusion | --streams | --split | "
                  "--initall | --abort | --mismatch | --mismatch-root | --mismatch-root-big | "
                  "--bad-args\n");
  return 2;
}
