/*
 * scalable_test — loomCommInitRankScalable (test_scalable.sh).
 *
 *   scalable_test -k K DIR [--reverse-last]
 *       K roots: the first rank of each block (wire.h: i * n / K) makes an
 *       id (starting its root) and leaves it in DIR/id.I; every rank reads
 *       the K ids (bounded wait), inits with them and runs a verified
 *       all-reduce sweep, all-gather and ring send/recv, then prints
 *       "rank R: ok".  With --reverse-last the last rank passes the ids in
 *       reverse order: its init must fail at once saying so, the others'
 *       within LOOM_BOOTSTRAP_TIMEOUT naming it; each prints
 *       "rank R: init failed: TEXT".
 *   scalable_test --args
 *       One process: every bad argument returns loomInvalidArgument with a
 *       message ("args: ok").  Run once with LOOM_COMM_ID set, to check
 *       that ids from it are refused when there are several.
 */
#include "loom.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
#define TEST_NAME "scalable_test"
#include "rankcheck.h"

static void put_id(const char *dir, int i, const loomUniqueId *id) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/id.%d.tmp", dir, i);
  snprintf(path, sizeof path, "%s/id.%d", dir, i);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
    FAIL("cannot write %s: %s", path, strerror(errno));
}

static void get_id(const char *dir, int i, loomUniqueId *id) {
  char path[512];
  snprintf(path, sizeof path, "%s/id.%d", dir, i);
  for (int waited_ms = 0; waited_ms < 60000; waited_ms += 10) {
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
      size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1)
        return;
    }
    usleep(10000);
  }
  FAIL("no id in %s after 60 s", path);
}

static float value(int r, size_t i) { return (float)(r + 1) + (float)(i % 7); }

static void verify(loomComm_t comm) {
  int count = -1, me = -1;
  CHECK_LOOM(loomCommCount(comm, &count));
  CHECK_LOOM(loomCommUserRank(comm, &me));
  if (count != nranks || me != rank)
    FAIL("communicator says rank %d of %d", me, count);
  size_t max = (64u << 10) / sizeof(float);
  float *in = malloc(max * sizeof *in), *out = malloc(max * nranks * sizeof *out);
  if (in == NULL || out == NULL)
    FAIL("out of memory");
  for (size_t n = 1; n <= max; n *= 8) {
    for (size_t i = 0; i < n; i++)
      in[i] = value(rank, i);
    CHECK_LOOM(loomAllReduce(in, out, n, loomFloat32, loomSum, comm, NULL));
    for (size_t i = 0; i < n; i++) {
      float want = (float)nranks * (float)(nranks + 1) / 2 + (float)nranks * (float)(i % 7);
      if (out[i] != want)
        FAIL("all-reduce of %zu floats: element %zu is %g, expected %g", n, i, (double)out[i],
             (double)want);
    }
    CHECK_LOOM(loomAllGather(in, out, n, loomFloat32, comm, NULL));
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < n; i++)
        if (out[(size_t)r * n + i] != value(r, i))
          FAIL("all-gather of %zu: rank %d's element %zu is %g", n, r, i,
               (double)out[(size_t)r * n + i]);
  }
  int32_t msg = rank * 10 + 1, got = -1;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomSend(&msg, 1, loomInt32, next, comm, NULL));
  CHECK_LOOM(loomRecv(&got, 1, loomInt32, prev, comm, NULL));
  CHECK_LOOM(loomGroupEnd());
  if (got != prev * 10 + 1)
    FAIL("ring send/recv: got %d from rank %d", (int)got, prev);
  free(in);
  free(out);
}

static int run_job(int k, const char *dir, int reverse_last) {
  for (int g = 0; g < k; g++)
    if ((int)((int64_t)g * nranks / k) == rank) {
      loomUniqueId mine;
      CHECK_LOOM(loomGetUniqueId(&mine));
      put_id(dir, g, &mine);
    }
  loomUniqueId *ids = malloc(sizeof *ids * (size_t)k);
  if (ids == NULL)
    FAIL("out of memory");
  int reversed = reverse_last && rank == nranks - 1;
  for (int g = 0; g < k; g++)
    get_id(dir, reversed ? k - 1 - g : g, &ids[g]);
  if (reversed)
    sleep(1); /* the others reach their roots first, so each root knows its index */
  loomComm_t comm;
  loomResult_t res = loomCommInitRankScalable(&comm, nranks, rank, k, ids, NULL);
  free(ids);
  if (res != loomSuccess) {
    printf("rank %d: init failed: %s: %s\n", rank, loomGetErrorString(res),
           loomGetLastError(NULL));
    return reverse_last ? 0 : 1;
  }
  if (reverse_last)
    FAIL("init succeeded with the ids in another order on rank %d", nranks - 1);
  verify(comm);
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: ok\n", rank);
  return 0;
}

/* One bad call: loomInvalidArgument, a message containing `says`, fast. */
static void expect_invalid(const char *what, int n, int k, loomUniqueId *ids, const char *says) {
  loomComm_t comm = (loomComm_t)1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  loomResult_t res = loomCommInitRankScalable(&comm, n, 0, k, ids, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (res != loomInvalidArgument || comm != NULL || strstr(loomGetLastError(NULL), says) == NULL ||
      s > 1.0)
    FAIL("%s: %s after %.2f s, comm %p, message \"%s\" (expected loomInvalidArgument "
         "saying \"%s\")", what, loomGetErrorString(res), s, (void *)comm,
         loomGetLastError(NULL), says);
  printf("%s: %s\n", what, loomGetLastError(NULL));
}

static int check_args(void) {
  loomUniqueId ids[2];
  CHECK_LOOM(loomGetUniqueId(&ids[0]));
  if (getenv("LOOM_COMM_ID") != NULL) {
    ids[1] = ids[0];
    expect_invalid("an id from LOOM_COMM_ID among 2", 2, 2, ids, "LOOM_COMM_ID");
    printf("args: ok\n");
    return 0;
  }
  expect_invalid("commIds NULL", 2, 1, NULL, "commIds is NULL");
  expect_invalid("nIds 0", 2, 0, ids, "nIds=0");
  expect_invalid("nIds above nranks", 2, 3, ids, "nIds=3");
  expect_invalid("nranks 0", 0, 1, ids, "nranks=0");
  ids[1] = ids[0];
  expect_invalid("the same id twice", 2, 2, ids, "name the same root");
  memset(&ids[1], 0x5a, sizeof ids[1]);
  expect_invalid("a corrupt id", 2, 2, ids, "at index 1 is not a Loom id");
  if (loomCommInitRankScalable(NULL, 2, 0, 1, ids, NULL) != loomInvalidArgument)
    FAIL("comm NULL accepted");
  printf("args: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  if (argc == 2 && strcmp(argv[1], "--args") == 0)
    return check_args();
  if ((argc != 4 && argc != 5) || strcmp(argv[1], "-k") != 0 ||
      (argc == 5 && strcmp(argv[4], "--reverse-last") != 0)) {
    fprintf(stderr, "usage: scalable_test -k K DIR [--reverse-last] | --args\n");
    return 2;
  }
  /* loomrun's LOOM_COMM_ID names one root; each block leader makes its own */
  unsetenv("LOOM_COMM_ID");
  return run_job(atoi(argv[2]), argv[3], argc == 5);
}
