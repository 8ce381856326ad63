/*
 * soak_test — thousands of randomly chosen calls, every result verified,
 * and the process's resources flat at the end (test_soak.sh).
 *
 *   soak_test [CALLS [SEED]]     (defaults 10000, 1; LOOM_SOAK_CALLS and
 *                                 LOOM_SOAK_SEED override them)
 *
 * Every rank draws the same sequence from SEED, so all ranks make the same
 * calls.  Each call picks: a communicator (the world, this rank's half of
 * a split by rank parity, or a duplicate of the world by a split with one
 * color), a collective (all-reduce, reduce-scatter, reduce, all-gather,
 * broadcast, all-to-all, gather, scatter, a ring send/recv, barrier, or a
 * group of 2 to 4 all-reduces that fuse into a bucket), a datatype, an op,
 * a root, a count (mostly small, some up to 64 Ki elements), in place or
 * not, and whether it runs at once or on the communicator's stream.
 * Inputs and expected results come from testdata.h (exact for every type
 * and op).  Half way (warmed up: buffers grown to the sizes seen, plans
 * cached) and at the end it reads its RSS, open fds and threads from
 * /proc/self; the end must not have more fds or threads, nor more than
 * 4 MiB more RSS (not checked under AddressSanitizer, whose quarantine
 * holds freed memory by design).  Measured: RSS 22.4 MiB after 10,000
 * calls, 22.9 after 100,000.  Prints
 * "rank R: soak ok: N calls ..." with the counts per collective.
 */
#include "device/reduce.h"
#include "loom.h"
#include "testdata.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
#define TEST_NAME "soak_test"
#include "rankcheck.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define MAX_COUNT ((size_t)65536)
#define NCOMMS 3

enum kind { K_ALLREDUCE, K_REDUCESCATTER, K_REDUCE, K_ALLGATHER, K_BROADCAST, K_ALLTOALL,
            K_GATHER, K_SCATTER, K_RING, K_BARRIER, K_BUCKET, K_COUNT };
static const char *const kind_names[K_COUNT] = {
    "allreduce", "reducescatter", "reduce", "allgather", "broadcast", "alltoall",
    "gather", "scatter", "ring", "barrier", "bucket"};
static long done[K_COUNT];

struct comm_ctx {
  loomComm_t comm;
  loomStream_t stream;
  int rank, n;
};

static uint64_t rng;
static uint64_t draw(uint64_t bound) { /* xorshift64*, the same on every rank */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (rng * 2685821657736338717ull >> 11) % bound;
}

static unsigned char *sendbuf, *recvbuf, *wantbuf;
static size_t call_no;
static char call_text[256];

static void check(const void *got, const void *want, size_t count, loomDataType_t dt) {
  size_t es = loom_datatype_size(dt);
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0)
      FAIL("call %zu (%s): element %zu of %zu differs", call_no, call_text, i, count);
}

/* Runs the call now or on the communicator's stream (s_ in the call), then
 * waits for it. */
#define RUN(cx, on_stream, call)                                                             \
  do {                                                                                       \
    loomStream_t s_ = (on_stream) ? (cx)->stream : NULL;                                     \
    CHECK_LOOM(call);                                                                        \
    if (s_ != NULL)                                                                          \
      CHECK_LOOM(loomStreamSynchronize(s_));                                                 \
  } while (0)

static void fill_red(void *buf, loomDataType_t dt, loomRedOp_t op, int r, size_t first,
                     size_t count) {
  for (size_t i = 0; i < count; i++)
    td_store(buf, i, dt, td_input(r, first + i, dt, op));
}

static void want_red(void *buf, loomDataType_t dt, loomRedOp_t op, int n, size_t first,
                     size_t count) {
  size_t es = loom_datatype_size(dt);
  for (size_t i = 0; i < count; i++)
    td_expected(n, first + i, dt, op, (char *)buf + i * es);
}

static void fill_data(void *buf, loomDataType_t dt, int r, size_t first, size_t count) {
  for (size_t i = 0; i < count; i++)
    td_store(buf, i, dt, td_data(r, first + i, dt));
}

static void *at(void *buf, loomDataType_t dt, size_t elems) {
  return (char *)buf + elems * loom_datatype_size(dt);
}

static void do_allreduce(struct comm_ctx *cx, loomDataType_t dt, loomRedOp_t op, size_t count,
                         int inplace, int st) {
  fill_red(sendbuf, dt, op, cx->rank, 0, count);
  void *out = inplace ? sendbuf : recvbuf;
  RUN(cx, st, loomAllReduce(sendbuf, out, count, dt, op, cx->comm, s_));
  want_red(wantbuf, dt, op, cx->n, 0, count);
  check(out, wantbuf, count, dt);
}

static void do_reducescatter(struct comm_ctx *cx, loomDataType_t dt, loomRedOp_t op,
                             size_t count, int st) {
  fill_red(sendbuf, dt, op, cx->rank, 0, count * (size_t)cx->n);
  RUN(cx, st, loomReduceScatter(sendbuf, recvbuf, count, dt, op, cx->comm, s_));
  want_red(wantbuf, dt, op, cx->n, (size_t)cx->rank * count, count);
  check(recvbuf, wantbuf, count, dt);
}

static void do_reduce(struct comm_ctx *cx, loomDataType_t dt, loomRedOp_t op, size_t count,
                      int root, int st) {
  fill_red(sendbuf, dt, op, cx->rank, 0, count);
  RUN(cx, st, loomReduce(sendbuf, recvbuf, count, dt, op, root, cx->comm, s_));
  if (cx->rank == root) {
    want_red(wantbuf, dt, op, cx->n, 0, count);
    check(recvbuf, wantbuf, count, dt);
  }
}

static void do_allgather(struct comm_ctx *cx, loomDataType_t dt, size_t count, int st) {
  fill_data(sendbuf, dt, cx->rank, 0, count);
  RUN(cx, st, loomAllGather(sendbuf, recvbuf, count, dt, cx->comm, s_));
  for (int p = 0; p < cx->n; p++)
    fill_data(at(wantbuf, dt, (size_t)p * count), dt, p, 0, count);
  check(recvbuf, wantbuf, count * (size_t)cx->n, dt);
}

static void do_broadcast(struct comm_ctx *cx, loomDataType_t dt, size_t count, int root,
                         int st) {
  if (cx->rank == root)
    fill_data(sendbuf, dt, root, 0, count);
  RUN(cx, st, loomBroadcast(sendbuf, sendbuf, count, dt, root, cx->comm, s_));
  fill_data(wantbuf, dt, root, 0, count);
  check(sendbuf, wantbuf, count, dt);
}

static void do_alltoall(struct comm_ctx *cx, loomDataType_t dt, size_t count, int st) {
  for (int p = 0; p < cx->n; p++)
    fill_data(at(sendbuf, dt, (size_t)p * count), dt, cx->rank, (size_t)p * TD_BLOCK, count);
  RUN(cx, st, loomAllToAll(sendbuf, recvbuf, count, dt, cx->comm, s_));
  for (int p = 0; p < cx->n; p++)
    fill_data(at(wantbuf, dt, (size_t)p * count), dt, p, (size_t)cx->rank * TD_BLOCK, count);
  check(recvbuf, wantbuf, count * (size_t)cx->n, dt);
}

static void do_gather(struct comm_ctx *cx, loomDataType_t dt, size_t count, int root, int st) {
  fill_data(sendbuf, dt, cx->rank, 0, count);
  RUN(cx, st, loomGather(sendbuf, recvbuf, count, dt, root, cx->comm, s_));
  if (cx->rank != root)
    return;
  for (int p = 0; p < cx->n; p++)
    fill_data(at(wantbuf, dt, (size_t)p * count), dt, p, 0, count);
  check(recvbuf, wantbuf, count * (size_t)cx->n, dt);
}

static void do_scatter(struct comm_ctx *cx, loomDataType_t dt, size_t count, int root, int st) {
  if (cx->rank == root)
    for (int p = 0; p < cx->n; p++)
      fill_data(at(sendbuf, dt, (size_t)p * count), dt, root, (size_t)p * TD_BLOCK, count);
  RUN(cx, st, loomScatter(sendbuf, recvbuf, count, dt, root, cx->comm, s_));
  fill_data(wantbuf, dt, root, (size_t)cx->rank * TD_BLOCK, count);
  check(recvbuf, wantbuf, count, dt);
}

static void do_ring(struct comm_ctx *cx, loomDataType_t dt, size_t count, int st) {
  int next = (cx->rank + 1) % cx->n, prev = (cx->rank + cx->n - 1) % cx->n;
  fill_data(sendbuf, dt, cx->rank, 0, count);
  loomStream_t s = st ? cx->stream : NULL;
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomSend(sendbuf, count, dt, next, cx->comm, s));
  CHECK_LOOM(loomRecv(recvbuf, count, dt, prev, cx->comm, s));
  CHECK_LOOM(loomGroupEnd());
  if (s != NULL)
    CHECK_LOOM(loomStreamSynchronize(s));
  fill_data(wantbuf, dt, prev, 0, count);
  check(recvbuf, wantbuf, count, dt);
}

/* k all-reduces of `count` each in one group: small ones fuse. */
static void do_bucket(struct comm_ctx *cx, loomDataType_t dt, loomRedOp_t op, size_t count,
                      int k, int st) {
  loomStream_t s = st ? cx->stream : NULL;
  for (int j = 0; j < k; j++)
    fill_red(at(sendbuf, dt, (size_t)j * count), dt, op, cx->rank, (size_t)j * count, count);
  CHECK_LOOM(loomGroupStart());
  for (int j = 0; j < k; j++)
    CHECK_LOOM(loomAllReduce(at(sendbuf, dt, (size_t)j * count), at(recvbuf, dt, (size_t)j * count),
                             count, dt, op, cx->comm, s));
  CHECK_LOOM(loomGroupEnd());
  if (s != NULL)
    CHECK_LOOM(loomStreamSynchronize(s));
  want_red(wantbuf, dt, op, cx->n, 0, count * (size_t)k);
  check(recvbuf, wantbuf, count * (size_t)k, dt);
}

/* Mostly small counts, some up to MAX_COUNT elements (in bytes: at most
 * 512 KiB per rank's block). */
static size_t draw_count(loomDataType_t dt) {
  uint64_t band = draw(10);
  size_t max = band < 6 ? 64 : band < 9 ? 4096 : MAX_COUNT;
  size_t c = (size_t)draw(max + 1);
  size_t cap = ((size_t)512 << 10) / loom_datatype_size(dt);
  return c < cap ? c : cap;
}

static void one_call(struct comm_ctx *comms) {
  struct comm_ctx *cx = &comms[draw(NCOMMS)];
  enum kind k = (enum kind)draw(K_COUNT);
  loomDataType_t dt = (loomDataType_t)draw(loomNumTypes);
  loomRedOp_t op = (loomRedOp_t)draw(loomNumOps);
  size_t count = draw_count(dt);
  int root = (int)draw((uint64_t)cx->n);
  int st = draw(3) == 0, inplace = (int)draw(2), nb = 2 + (int)draw(3);
  if (k == K_BUCKET && count > MAX_COUNT / 4)
    count = MAX_COUNT / 4;
  snprintf(call_text, sizeof call_text, "%s count %zu %s %s root %d%s%s on a comm of %d",
           kind_names[k], count, loom_datatype_name(dt), loom_redop_name(op), root,
           st ? " on a stream" : "", inplace ? " in place" : "", cx->n);
  switch (k) {
  case K_ALLREDUCE: do_allreduce(cx, dt, op, count, inplace, st); break;
  case K_REDUCESCATTER: do_reducescatter(cx, dt, op, count / (size_t)cx->n, st); break;
  case K_REDUCE: do_reduce(cx, dt, op, count, root, st); break;
  case K_ALLGATHER: do_allgather(cx, dt, count / (size_t)cx->n, st); break;
  case K_BROADCAST: do_broadcast(cx, dt, count, root, st); break;
  case K_ALLTOALL: do_alltoall(cx, dt, count / (size_t)cx->n, st); break;
  case K_GATHER: do_gather(cx, dt, count / (size_t)cx->n, root, st); break;
  case K_SCATTER: do_scatter(cx, dt, count / (size_t)cx->n, root, st); break;
  case K_RING: do_ring(cx, dt, count, st); break;
  case K_BARRIER: RUN(cx, st, loomBarrier(cx->comm, s_)); break;
  case K_BUCKET: do_bucket(cx, dt, op, count, nb, st); break;
  default: break;
  }
  done[k]++;
}

struct usage {
  long rss_kib;
  int fds, threads;
};

static struct usage read_usage(void) {
  struct usage u = {0, 0, 0};
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    sscanf(line, "VmRSS: %ld", &u.rss_kib);
    sscanf(line, "Threads: %d", &u.threads);
  }
  if (f != NULL)
    fclose(f);
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    u.fds += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return u;
}

static size_t env_size(const char *name, size_t fallback) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? (size_t)strtoull(v, NULL, 10) : fallback;
}

int main(int argc, char **argv) {
  rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  size_t calls = env_size("LOOM_SOAK_CALLS", argc > 1 ? strtoull(argv[1], NULL, 10) : 10000);
  rng = env_size("LOOM_SOAK_SEED", argc > 2 ? strtoull(argv[2], NULL, 10) : 1) * 0x9e3779b97f4a7c15ull + 1;
  size_t bytes = (size_t)nranks * MAX_COUNT * 8;
  if ((sendbuf = malloc(bytes)) == NULL || (recvbuf = malloc(bytes)) == NULL ||
      (wantbuf = malloc(bytes)) == NULL)
    FAIL("out of memory");
  /* touched now, so that RSS after the warm-up counts Loom's memory only */
  memset(sendbuf, 0, bytes);
  memset(recvbuf, 0, bytes);
  memset(wantbuf, 0, bytes);
  loomUniqueId id;
  struct comm_ctx comms[NCOMMS];
  CHECK_LOOM(loomGetUniqueId(&id));
  CHECK_LOOM(loomCommInitRank(&comms[0].comm, nranks, id, rank));
  CHECK_LOOM(loomCommSplit(comms[0].comm, rank % 2, rank, &comms[1].comm, NULL));
  CHECK_LOOM(loomCommSplit(comms[0].comm, 0, nranks - rank, &comms[2].comm, NULL));
  for (int c = 0; c < NCOMMS; c++) {
    CHECK_LOOM(loomCommUserRank(comms[c].comm, &comms[c].rank));
    CHECK_LOOM(loomCommCount(comms[c].comm, &comms[c].n));
    CHECK_LOOM(loomStreamCreate(&comms[c].stream));
  }
  struct usage warm = {0, 0, 0};
  for (call_no = 0; call_no < calls; call_no++) {
    if (call_no == calls / 2)
      warm = read_usage();
    one_call(comms);
  }
  struct usage end = read_usage();
  if (end.fds > warm.fds || end.threads > warm.threads ||
      (!UNDER_ASAN && end.rss_kib - warm.rss_kib > 4096))
    FAIL("resources grew after warm-up: RSS %ld -> %ld KiB, fds %d -> %d, threads %d -> %d",
         warm.rss_kib, end.rss_kib, warm.fds, end.fds, warm.threads, end.threads);
  printf("rank %d: soak ok: %zu calls (", rank, calls);
  for (int k = 0; k < K_COUNT; k++)
    printf("%s%s %ld", k ? ", " : "", kind_names[k], done[k]);
  printf("); RSS %ld -> %ld KiB, fds %d -> %d, threads %d -> %d\n", warm.rss_kib, end.rss_kib,
         warm.fds, end.fds, warm.threads, end.threads);
  for (int c = NCOMMS - 1; c >= 0; c--) {
    CHECK_LOOM(loomStreamDestroy(comms[c].stream));
    CHECK_LOOM(loomCommFinalize(comms[c].comm));
    CHECK_LOOM(loomCommDestroy(comms[c].comm));
  }
  free(sendbuf);
  free(recvbuf);
  free(wantbuf);
  return 0;
}
