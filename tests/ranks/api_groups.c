/*
 * api_groups.c — api_test's group cases: --group-p2p (sends and receives
 * in groups) and --group-fusion (many collectives fused in one group).
 */
#include "api_test.h"
#include "device/reduce.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Groups of 1 and 3 sends to itself with their receives, run directly on
 * a thread of their own, which then exits: each thread keeps the array of
 * its last such group for the next (group.c), grown here from room for 4
 * calls to room for 8 (6 calls), and frees it when it exits (LeakSanitizer
 * in the ASan pass says so otherwise). */
static void *self_groups_thread(void *arg) {
  loomComm_t comm = arg;
  for (int k = 0; k < 3; k++) {
    int pairs = k == 2 ? 3 : 1;
    uint16_t a[3][17], b[3][17];
    CHECK_LOOM(loomGroupStart());
    for (int i = 0; i < pairs; i++) {
      fill_pat(a[i], sizeof a[i], rank, rank, 20 + 3 * k + i);
      memset(b[i], 0, sizeof b[i]);
      CHECK_LOOM(loomRecv(b[i], 17, loomFloat16, rank, comm, NULL));
      CHECK_LOOM(loomSend(a[i], 17, loomFloat16, rank, comm, NULL));
    }
    CHECK_LOOM(loomGroupEnd());
    for (int i = 0; i < pairs; i++)
      check_pat(b[i], sizeof b[i], rank, rank, 20 + 3 * k + i, "send/recv to itself, thread");
  }
  return NULL;
}

void group_p2p(void) {
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
        size_t bytes = m->count * loom_datatype_size(m->type);
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
        check_pat(m->buf, m->count * loom_datatype_size(m->type), m->src, m->dst, m->k,
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
    pthread_t t;
    if (pthread_create(&t, NULL, self_groups_thread, comm) != 0 || pthread_join(t, NULL) != 0)
      FAIL("pthread_create/join for the thread's groups");
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

void group_fusion(void) {
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
