/*
 * device_test — device memory and device streams on several ranks
 * (docs/devices.md), on the simulated device (or -d cuda):
 *
 *   api      pointers are classified, foreign frees and overruns refused,
 *            mismatched streams refused with messages naming both sides;
 *   fault    host code touching simulated device memory dies of SIGSEGV;
 *   order    -i iterations of: upload, all-reduce, event, a second stream
 *            waiting for it, all-gather, download, with no host sync
 *            until the end of each iteration, checked exactly;
 *   hostfn   loomLaunchHostFunc on a device stream runs after the work
 *            queued before it;
 *   group    calls of one group that read what an earlier call of the
 *            group wrote (a -> b, then b -> c; two in place on c) see it,
 *            with stream NULL and on a device stream;
 *   clique   3 ranks of loomCommInitAll in this process, driven by one
 *            thread in groups: all-reduce and all-gather of device buffers
 *            (ranks of one process share device memory without IPC).
 *
 *   device_test [-d sim|cuda] [-i iterations] [-p api,fault,order,hostfn,group,clique]
 */
#include "loom.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank, nranks;
#define TEST_NAME "device_test"
#include "rankcheck.h"

static loomDevice_t dev = loomDeviceSim;

/* call must fail with `want` and a last error containing every needle. */
static void expect_error(const char *what, loomResult_t got, loomResult_t want,
                         const char *needle1, const char *needle2) {
  const char *msg = loomGetLastError(NULL);
  if (got != want)
    FAIL("%s: expected %s, got %s (%s)", what, loomGetErrorString(want),
         loomGetErrorString(got), msg);
  if ((needle1 && !strstr(msg, needle1)) || (needle2 && !strstr(msg, needle2)))
    FAIL("%s: message \"%s\" lacks \"%s\"/\"%s\"", what, msg, needle1 ? needle1 : "",
         needle2 ? needle2 : "");
}

static void test_api(loomComm_t comm) {
  loomDevice_t d;
  int *plain = calloc(16, sizeof(int));
  CHECK_LOOM(loomPointerGetDevice(plain, &d));
  if (d != loomDeviceHost)
    FAIL("malloc'd memory classified as device %d", (int)d);
  float *x;
  CHECK_LOOM(loomMemAlloc((void **)&x, 1024 * sizeof(float), dev));
  CHECK_LOOM(loomPointerGetDevice(x + 100, &d));
  if (d != dev)
    FAIL("an address inside a device allocation classified as %d", (int)d);
  expect_error("loomMemFree(malloc'd)", loomMemFree(plain), loomInvalidArgument, "loomMemFree",
               NULL);
  expect_error("loomMemFree(inside)", loomMemFree(x + 1), loomInvalidArgument, "loomMemFree",
               NULL);
  void *none;
  expect_error("loomMemAlloc(bad device)", loomMemAlloc(&none, 8, (loomDevice_t)7),
               loomInvalidArgument, "invalid device 7", NULL);
  loomStream_t host_stream;
  CHECK_LOOM(loomStreamCreate(&host_stream));
  expect_error("device buffers on a host stream",
               loomAllReduce(x, x, 1024, loomFloat32, loomSum, comm, host_stream),
               loomInvalidArgument, "host stream", "loomStreamCreateOnDevice");
  expect_error("all-reduce past the allocation",
               loomAllReduce(x, x, 1025, loomFloat32, loomSum, comm, NULL),
               loomInvalidArgument, "overruns", "by 4 bytes");
  size_t over = 1024 / (size_t)nranks + 1; /* in place, recvbuff 4 * nranks bytes too long */
  expect_error("all-gather past the allocation",
               loomAllGather(x + (size_t)rank * over, x, over, loomFloat32, comm, NULL),
               loomInvalidArgument, "overruns", "allocation of 4096 bytes");
  expect_error("copy past the allocation", loomMemcpyAsync(x + 1000, plain, 100, NULL),
               loomInvalidArgument, "dst", "overruns");
  expect_error("copy on a host stream", loomMemcpyAsync(x, plain, 16, host_stream),
               loomInvalidArgument, "host stream", NULL);
  expect_error("stream from a NULL native",
               loomStreamCreateFromNative(&host_stream, dev, NULL), loomInvalidArgument,
               "native is NULL", NULL);
  /* host sendbuff, device recvbuff: allowed, with NULL stream */
  float in[4] = {1, 2, 3, (float)rank}, out[4];
  CHECK_LOOM(loomAllReduce(in, x, 4, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomMemcpyAsync(out, x, sizeof out, NULL));
  float last = (float)(nranks * (nranks - 1) / 2);
  if (out[0] != nranks || out[2] != 3 * nranks || out[3] != last)
    FAIL("host-to-device all-reduce: got %g %g %g %g", out[0], out[1], out[2], out[3]);
  CHECK_LOOM(loomStreamDestroy(host_stream));
  CHECK_LOOM(loomMemFree(x));
  free(plain);
}

static void test_fault(void) {
  if (dev != loomDeviceSim)
    return;
  volatile int *p;
  CHECK_LOOM(loomMemAlloc((void **)&p, 4096, loomDeviceSim));
  for (int write = 0; write < 2; write++) {
    pid_t pid = fork();
    if (pid == 0) {
      signal(SIGSEGV, SIG_DFL);
      if (write)
        p[3] = 42;
      else
        fprintf(stderr, "read %d\n", p[3]);
      _exit(0); /* reached only when the access did not fault */
    }
    int status = 0;
    waitpid(pid, &status, 0);
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer takes the SIGSEGV, reports it and exits 1 */
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      continue;
#endif
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
      FAIL("host %s of simulated device memory did not fault (status 0x%x)",
           write ? "write" : "read", status);
  }
  CHECK_LOOM(loomMemFree((void *)p));
}

/* One iteration of the two-stream pipeline; `k` changes the data. */
static void order_once(loomComm_t comm, loomStream_t a, loomStream_t b, loomEvent_t ev,
                       int64_t *dx, int64_t *dall, int64_t *host_in, int64_t *host_out,
                       size_t count, int k) {
  for (size_t i = 0; i < count; i++)
    host_in[i] = (int64_t)rank * 1000003 + (int64_t)i * 7 + k;
  memset(host_out, 0xee, count * sizeof(int64_t) * (size_t)nranks);
  CHECK_LOOM(loomMemcpyAsync(dx, host_in, count * sizeof(int64_t), a));
  CHECK_LOOM(loomAllReduce(dx, dx, count, loomInt64, loomSum, comm, a));
  CHECK_LOOM(loomEventRecord(ev, a));
  CHECK_LOOM(loomStreamWaitEvent(b, ev));
  CHECK_LOOM(loomAllGather(dx, dall, count, loomInt64, comm, b));
  CHECK_LOOM(loomMemcpyAsync(host_out, dall, count * sizeof(int64_t) * (size_t)nranks, b));
  /* the next iteration's upload on a must not overtake b's gather */
  CHECK_LOOM(loomEventRecord(ev, b));
  CHECK_LOOM(loomStreamWaitEvent(a, ev));
  CHECK_LOOM(loomStreamSynchronize(b));
  int64_t base = (int64_t)1000003 * nranks * (nranks - 1) / 2;
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < count; i++) {
      int64_t want = base + (int64_t)nranks * ((int64_t)i * 7 + k);
      if (host_out[(size_t)r * count + i] != want)
        FAIL("iteration %d: block %d element %zu: expected %lld, got %lld", k, r, i,
             (long long)want, (long long)host_out[(size_t)r * count + i]);
    }
}

static void test_order(loomComm_t comm, int iterations) {
  const size_t count = 3001;
  loomStream_t a, b;
  loomEvent_t ev;
  CHECK_LOOM(loomStreamCreateOnDevice(&a, dev));
  CHECK_LOOM(loomStreamCreateOnDevice(&b, dev));
  CHECK_LOOM(loomEventCreate(&ev));
  int64_t *dx, *dall, *host_in, *host_out;
  CHECK_LOOM(loomMemAlloc((void **)&dx, count * sizeof(int64_t), dev));
  CHECK_LOOM(loomMemAlloc((void **)&dall, count * sizeof(int64_t) * (size_t)nranks, dev));
  CHECK_LOOM(loomMemAlloc((void **)&host_in, count * sizeof(int64_t), loomDeviceHost));
  host_out = malloc(count * sizeof(int64_t) * (size_t)nranks);
  for (int k = 0; k < iterations; k++)
    order_once(comm, a, b, ev, dx, dall, host_in, host_out, count, k);
  CHECK_LOOM(loomStreamSynchronize(a));
  CHECK_LOOM(loomEventDestroy(ev));
  CHECK_LOOM(loomStreamDestroy(a));
  CHECK_LOOM(loomStreamDestroy(b));
  CHECK_LOOM(loomMemFree(dx));
  CHECK_LOOM(loomMemFree(dall));
  CHECK_LOOM(loomMemFree(host_in));
  free(host_out);
}

struct seen {
  int64_t *host;
  int64_t value;
};

static void record_value(void *arg) {
  struct seen *s = arg;
  s->value = s->host[0];
}

static void test_hostfn(loomComm_t comm) {
  loomStream_t s;
  CHECK_LOOM(loomStreamCreateOnDevice(&s, dev));
  int64_t *d, one = 1;
  CHECK_LOOM(loomMemAlloc((void **)&d, sizeof(int64_t), dev));
  struct seen seen = {.host = malloc(sizeof(int64_t)), .value = -1};
  seen.host[0] = 0;
  CHECK_LOOM(loomMemcpyAsync(d, &one, sizeof one, s));
  CHECK_LOOM(loomAllReduce(d, d, 1, loomInt64, loomSum, comm, s));
  CHECK_LOOM(loomMemcpyAsync(seen.host, d, sizeof(int64_t), s));
  CHECK_LOOM(loomLaunchHostFunc(s, record_value, &seen));
  CHECK_LOOM(loomStreamSynchronize(s));
  if (seen.value != nranks)
    FAIL("a host function after an all-reduce and a download saw %lld, not %d",
         (long long)seen.value, nranks);
  CHECK_LOOM(loomMemFree(d));
  CHECK_LOOM(loomStreamDestroy(s));
  free(seen.host);
}

/* In one group: b = sum(a), c = sum(b), then c summed twice in place:
 * every rank's a is 1, so b = n, c = n * n, then n^3, then n^4. */
static void group_once(loomComm_t comm, loomStream_t s, int64_t *d, const char *how) {
  const size_t count = 1000;
  int64_t *a = d, *b = d + count, *c = d + 2 * count;
  int64_t *host = malloc(3 * count * sizeof(int64_t));
  for (size_t i = 0; i < 3 * count; i++)
    host[i] = i < count ? 1 : -7;
  CHECK_LOOM(loomMemcpyAsync(d, host, 3 * count * sizeof(int64_t), s));
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomAllReduce(a, b, count, loomInt64, loomSum, comm, s));
  CHECK_LOOM(loomAllReduce(b, c, count, loomInt64, loomSum, comm, s));
  CHECK_LOOM(loomAllReduce(c, c, count, loomInt64, loomSum, comm, s));
  CHECK_LOOM(loomAllReduce(c, c, count, loomInt64, loomSum, comm, s));
  CHECK_LOOM(loomGroupEnd());
  CHECK_LOOM(loomMemcpyAsync(host, d, 3 * count * sizeof(int64_t), s));
  if (s != NULL)
    CHECK_LOOM(loomStreamSynchronize(s));
  int64_t n = nranks, want[3] = {1, n, n * n * n * n};
  for (size_t i = 0; i < 3 * count; i++)
    if (host[i] != want[i / count])
      FAIL("group of dependent calls (%s): %c[%zu] = %lld, expected %lld", how,
           "abc"[i / count], i % count, (long long)host[i], (long long)want[i / count]);
  free(host);
}

static void test_group(loomComm_t comm) {
  int64_t *d;
  CHECK_LOOM(loomMemAlloc((void **)&d, 3000 * sizeof(int64_t), dev));
  group_once(comm, NULL, d, "stream NULL");
  loomStream_t s;
  CHECK_LOOM(loomStreamCreateOnDevice(&s, dev));
  group_once(comm, s, d, "device stream");
  CHECK_LOOM(loomStreamDestroy(s));
  CHECK_LOOM(loomMemFree(d));
}

/* A clique of K ranks in this process: rank k's input is k + 1 + i. */
static void test_clique(void) {
  enum { K = 3, COUNT = 4099 };
  loomComm_t comms[K];
  int64_t *in[K], *sum[K], *all[K];
  int64_t *host = malloc(K * COUNT * sizeof(int64_t));
  CHECK_LOOM(loomCommInitAll(comms, K, NULL));
  for (int k = 0; k < K; k++) {
    CHECK_LOOM(loomMemAlloc((void **)&in[k], COUNT * sizeof(int64_t), dev));
    CHECK_LOOM(loomMemAlloc((void **)&sum[k], COUNT * sizeof(int64_t), dev));
    CHECK_LOOM(loomMemAlloc((void **)&all[k], K * COUNT * sizeof(int64_t), dev));
    for (int i = 0; i < COUNT; i++)
      host[i] = k + 1 + i;
    CHECK_LOOM(loomMemcpyAsync(in[k], host, COUNT * sizeof(int64_t), NULL));
  }
  CHECK_LOOM(loomGroupStart());
  for (int k = 0; k < K; k++) {
    CHECK_LOOM(loomAllReduce(in[k], sum[k], COUNT, loomInt64, loomSum, comms[k], NULL));
    CHECK_LOOM(loomAllGather(in[k], all[k], COUNT, loomInt64, comms[k], NULL));
  }
  CHECK_LOOM(loomGroupEnd());
  for (int k = 0; k < K; k++) {
    CHECK_LOOM(loomMemcpyAsync(host, sum[k], COUNT * sizeof(int64_t), NULL));
    for (int i = 0; i < COUNT; i++)
      if (host[i] != K * (K + 1) / 2 + (int64_t)K * i)
        FAIL("clique rank %d: all-reduce [%d] = %lld, expected %lld", k, i, (long long)host[i],
             (long long)(K * (K + 1) / 2 + (int64_t)K * i));
    CHECK_LOOM(loomMemcpyAsync(host, all[k], K * COUNT * sizeof(int64_t), NULL));
    for (int i = 0; i < K * COUNT; i++)
      if (host[i] != i / COUNT + 1 + i % COUNT)
        FAIL("clique rank %d: all-gather [%d] = %lld, expected %lld", k, i, (long long)host[i],
             (long long)(i / COUNT + 1 + i % COUNT));
  }
  for (int k = 0; k < K; k++) {
    CHECK_LOOM(loomMemFree(in[k]));
    CHECK_LOOM(loomMemFree(sum[k]));
    CHECK_LOOM(loomMemFree(all[k]));
    CHECK_LOOM(loomCommDestroy(comms[k]));
  }
  free(host);
}

int main(int argc, char **argv) {
  int iterations = 100;
  const char *parts = "api,fault,order,hostfn,group,clique";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-d") == 0)
      dev = strcmp(argv[i + 1], "cuda") == 0 ? loomDeviceCuda : loomDeviceSim;
    else if (strcmp(argv[i], "-i") == 0)
      iterations = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-p") == 0)
      parts = argv[i + 1];
  }
  loomLaunchInfo_t li;
  CHECK_LOOM(loomGetLaunchInfo(&li));
  rank = li.rank;
  nranks = li.nranks;
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomComm_t comm;
  CHECK_LOOM(loomCommInitRank(&comm, nranks, id, rank));
  if (strstr(parts, "api"))
    test_api(comm);
  if (strstr(parts, "fault"))
    test_fault();
  if (strstr(parts, "order"))
    test_order(comm, iterations);
  if (strstr(parts, "hostfn"))
    test_hostfn(comm);
  if (strstr(parts, "group"))
    test_group(comm);
  if (strstr(parts, "clique"))
    test_clique();
  CHECK_LOOM(loomCommDestroy(comm));
  printf("device_test rank %d of %d: %s passed (%d ordering iterations)\n", rank, nranks, parts,
         iterations);
  return 0;
}
