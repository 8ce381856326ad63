/*
 * init-time.c — how long a communicator takes to start, per rank: the
 * call to loomCommInitRank, the first 8-byte all-reduce after it (which
 * makes the connections a lazy start left out) and the second (a warm
 * call, for scale).  Rank 0 prints one line of each over all ranks, in
 * milliseconds:
 *
 *   init-time: ranks N  init min A max B  first min C max D  second max E  fds max F
 *
 * The init's max includes waiting for the last process to start (loomrun
 * spawns them one by one); its min is the last arrival's, close to the
 * bootstrap's own cost.  bench/init-scaling.sh runs it from 2 to 256 ranks.
 *
 *   loomrun -n 16 build/bench/init-time
 *   loomrun -n 16 build/bench/init-time --roots K DIR
 *
 * With --roots, loomCommInitRankScalable over K roots: the first rank of
 * each block makes an id and leaves it in DIR (which must be empty), every
 * rank reads them all before its clock starts.
 */
#include "loom.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = -1; /* the directory's own descriptor */
  if (d == NULL)
    return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void check(loomResult_t r, const char *what) {
  if (r != loomSuccess) {
    fprintf(stderr, "init-time: %s: %s: %s\n", what, loomGetErrorString(r),
            loomGetLastError(NULL));
    exit(1);
  }
}

/* The K ids, through files in dir: block leaders write, everyone reads. */
static loomUniqueId *share_ids(int rank, int nranks, int k, const char *dir) {
  loomUniqueId *ids = calloc((size_t)k, sizeof *ids);
  char path[512], tmp[520];
  for (int g = 0; g < k && ids != NULL; g++) {
    if ((int)((int64_t)g * nranks / k) != rank)
      continue;
    check(loomGetUniqueId(&ids[g]), "loomGetUniqueId");
    snprintf(path, sizeof path, "%s/id.%d", dir, g);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(&ids[g], sizeof ids[g], 1, f) != 1 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
      fprintf(stderr, "init-time: cannot write %s\n", path);
      exit(1);
    }
  }
  for (int g = 0; g < k && ids != NULL; g++) {
    snprintf(path, sizeof path, "%s/id.%d", dir, g);
    int got = 0;
    for (int waited = 0; !got && waited < 120000; waited += 5) {
      FILE *f = fopen(path, "rb");
      if (f != NULL) {
        got = fread(&ids[g], sizeof ids[g], 1, f) == 1;
        fclose(f);
      }
      if (!got)
        usleep(5000);
    }
    if (!got) {
      fprintf(stderr, "init-time: rank %d: no %s after 120 s\n", rank, path);
      exit(1);
    }
  }
  return ids;
}

int main(int argc, char **argv) {
  int rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  int nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  int roots = 0;
  if (argc == 4 && strcmp(argv[1], "--roots") == 0 && (roots = atoi(argv[2])) >= 1) {
    unsetenv("LOOM_COMM_ID"); /* each block leader makes its own root */
  } else if (argc != 1) {
    fprintf(stderr, "usage: init-time [--roots K DIR]\n");
    return 2;
  }
  loomUniqueId id, *ids = roots > 0 ? share_ids(rank, nranks, roots, argv[3]) : NULL;
  if (roots == 0)
    check(loomGetUniqueId(&id), "loomGetUniqueId");
  loomComm_t comm;
  double t0 = now_ms();
  if (roots > 0)
    check(loomCommInitRankScalable(&comm, nranks, rank, roots, ids, NULL),
          "loomCommInitRankScalable");
  else
    check(loomCommInitRank(&comm, nranks, id, rank), "loomCommInitRank");
  double t1 = now_ms();
  free(ids);
  double x = 1, y = 0;
  check(loomAllReduce(&x, &y, 1, loomFloat64, loomSum, comm, NULL), "first all-reduce");
  double t2 = now_ms();
  check(loomAllReduce(&x, &y, 1, loomFloat64, loomSum, comm, NULL), "second all-reduce");
  double t3 = now_ms();
  if (y != nranks) {
    fprintf(stderr, "init-time: rank %d: the all-reduce gave %g, expected %d\n", rank, y, nranks);
    return 1;
  }
  /* min and max of each through two all-reduces (min = -max of the negation) */
  double mine[5] = {t1 - t0, -(t1 - t0), t2 - t1, -(t2 - t1), t3 - t2}, most[5];
  double fds = count_fds(), most_fds = 0;
  check(loomAllReduce(mine, most, 5, loomFloat64, loomMax, comm, NULL), "max");
  check(loomAllReduce(&fds, &most_fds, 1, loomFloat64, loomMax, comm, NULL), "fds");
  if (rank == 0)
    printf("init-time: ranks %d  init min %.1f max %.1f  first min %.2f max %.2f  second max "
           "%.3f  fds max %.0f\n",
           nranks, -most[1], most[0], -most[3], most[2], most[4], most_fds);
  check(loomCommFinalize(comm), "loomCommFinalize");
  check(loomCommDestroy(comm), "loomCommDestroy");
  return 0;
}
