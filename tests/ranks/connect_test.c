/*
 * connect_test — what a rank connects, and that everything still works
 * when connections are made on first use (test_connect.sh).  Each rank:
 *
 *   1. counts its open file descriptors after init;
 *   2. runs a verified all-reduce sweep (8 B to 256 KiB, float32 sum) and
 *      a verified all-gather, and counts again;
 *   3. with --p2p: sends to rank+1 and then receives from rank-1, outside
 *      any group (the lower rank of each pair must connect, the other
 *      accept, while both are inside blocking calls); and a receive from
 *      any source on rank 0, fed by every other rank;
 *   4. with --alltoall: a verified all-to-all, and counts again.
 *
 * Rank 0 prints the largest count over all ranks at each point:
 *   "fds: init MAX, sweep MAX[, alltoall MAX]"
 * and every rank prints "rank R: ok" when every check passed.
 */
#include "loom.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
#define TEST_NAME "connect_test"
#include "rankcheck.h"

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL)
    FAIL("cannot open /proc/self/fd");
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static int max_over_ranks(loomComm_t comm, int v) {
  int32_t mine = v, most = 0;
  CHECK_LOOM(loomAllReduce(&mine, &most, 1, loomInt32, loomMax, comm, NULL));
  return most;
}

static float value(int r, size_t i) { return (float)(r + 1) + (float)(i % 7); }

static void sweep(loomComm_t comm) {
  size_t max = (256u << 10) / sizeof(float);
  float *in = malloc(max * sizeof *in), *out = malloc(max * sizeof *out);
  if (in == NULL || out == NULL)
    FAIL("out of memory");
  for (size_t count = 2; count <= max; count *= 4) {
    for (size_t i = 0; i < count; i++)
      in[i] = value(rank, i);
    CHECK_LOOM(loomAllReduce(in, out, count, loomFloat32, loomSum, comm, NULL));
    for (size_t i = 0; i < count; i++) {
      float want = (float)nranks * (float)(nranks + 1) / 2 + (float)nranks * (float)(i % 7);
      if (out[i] != want)
        FAIL("all-reduce of %zu floats: element %zu is %g, expected %g", count, i,
             (double)out[i], (double)want);
    }
  }
  size_t per = 64;
  float *all = malloc(per * (size_t)nranks * sizeof *all);
  if (all == NULL)
    FAIL("out of memory");
  for (size_t i = 0; i < per; i++)
    in[i] = value(rank, i);
  CHECK_LOOM(loomAllGather(in, all, per, loomFloat32, comm, NULL));
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < per; i++)
      if (all[(size_t)r * per + i] != value(r, i))
        FAIL("all-gather: rank %d's element %zu is %g", r, i, (double)all[(size_t)r * per + i]);
  free(all);
  free(in);
  free(out);
}

static void p2p(loomComm_t comm) {
  int32_t msg[16], got[16];
  for (int i = 0; i < 16; i++)
    msg[i] = rank * 100 + i;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  CHECK_LOOM(loomSend(msg, 16, loomInt32, next, comm, NULL));
  CHECK_LOOM(loomRecv(got, 16, loomInt32, prev, comm, NULL));
  for (int i = 0; i < 16; i++)
    if (got[i] != prev * 100 + i)
      FAIL("ring send/recv: element %d from rank %d is %d", i, prev, (int)got[i]);
  if (rank != 0) {
    CHECK_LOOM(loomSend(msg, 16, loomInt32, 0, comm, NULL));
    return;
  }
  char *seen = calloc((size_t)nranks, 1);
  for (int k = 1; k < nranks; k++) {
    int source = -1;
    CHECK_LOOM(loomRecvAny(got, 16, loomInt32, &source, comm, NULL));
    if (source <= 0 || source >= nranks || seen[source] || got[0] != source * 100)
      FAIL("receive from any: source %d, first element %d", source, (int)got[0]);
    seen[source] = 1;
  }
  free(seen);
}

static void alltoall(loomComm_t comm) {
  size_t per = 8, n = per * (size_t)nranks;
  int32_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
  if (in == NULL || out == NULL)
    FAIL("out of memory");
  for (size_t i = 0; i < n; i++)
    in[i] = (int32_t)(rank * 100000 + (int)i);
  CHECK_LOOM(loomAllToAll(in, out, per, loomInt32, comm, NULL));
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < per; i++) {
      int32_t want = (int32_t)(r * 100000 + rank * (int)per + (int)i);
      if (out[(size_t)r * per + i] != want)
        FAIL("all-to-all: element %zu from rank %d is %d, expected %d", i, r,
             (int)out[(size_t)r * per + i], (int)want);
    }
  free(in);
  free(out);
}

int main(int argc, char **argv) {
  int with_p2p = 0, with_alltoall = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--p2p") == 0)
      with_p2p = 1;
    else if (strcmp(argv[i], "--alltoall") == 0)
      with_alltoall = 1;
    else {
      fprintf(stderr, "usage: connect_test [--p2p] [--alltoall]\n");
      return 2;
    }
  }
  rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomComm_t comm;
  CHECK_LOOM(loomCommInitRank(&comm, nranks, id, rank));
  int at_init = count_fds();
  sweep(comm);
  int at_sweep = count_fds();
  int most_init = max_over_ranks(comm, at_init), most_sweep = max_over_ranks(comm, at_sweep);
  if (with_p2p)
    p2p(comm);
  if (with_alltoall) {
    alltoall(comm);
    int most_a2a = max_over_ranks(comm, count_fds());
    if (rank == 0)
      printf("fds: init %d, sweep %d, alltoall %d\n", most_init, most_sweep, most_a2a);
  } else if (rank == 0) {
    printf("fds: init %d, sweep %d\n", most_init, most_sweep);
  }
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: ok\n", rank);
  return 0;
}
