/*
 * switch-cost.c — what one internal switch costs or saves a small
 * all-reduce, measured inside one job: the same processes, on the same
 * cores, run blocks of calls with the switch one way and the other in
 * turn (A-B, then B-A, ...), so the machine's speed of the moment and
 * where the scheduler put the ranks are the same for both sides.  (A
 * whole run of this two-speed VM lands fast or slow; within a run the
 * blocks are a millisecond apart.)
 *
 *   loomrun -n 2 build/bench/switch-cost [-x trace|clock] [-b 8] [-e 1024] [-f 8]
 *                                        [-n 2000] [-k 100]
 *
 * Switches (A, then B):
 *   trace   the flight recorder off, then on (LOOM_TRACE_BUFFER's ring)
 *   clock   a wait's first clock reading at its first still turn, then
 *           after LOOM_ENGINE_CLOCK_TURNS turns (engine_wait.c)
 *
 * For each size, -k blocks a side of -n calls (after one block of each
 * side to warm up); rank 0 prints the median µs a call of A and of B,
 * their ratio, and the median [10th-90th percentile] of the ratio of each
 * B block to the A block next to it.
 */
#include "api/comm.h"
#include "loom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
  const char *what;
  size_t min_bytes, max_bytes;
  int factor, calls, blocks;
};

/* What the switch set to side b (0: A, 1: B) changes on the communicator. */
struct sw {
  struct loom_trace *rec; /* "trace": the communicator's recorder */
};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void check(loomResult_t r, const char *what) {
  if (r != loomSuccess) {
    fprintf(stderr, "switch-cost: %s: %s: %s\n", what, loomGetErrorString(r),
            loomGetLastError(NULL));
    exit(1);
  }
}

static void set_side(loomComm_t comm, const struct opts *o, const struct sw *sw, int b) {
  if (strcmp(o->what, "trace") == 0)
    comm->trace = b ? sw->rec : NULL;
  else
    comm->engine.clock_turns = b ? LOOM_ENGINE_CLOCK_TURNS : 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (sorted in place). */
static double quantile(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[(int)(q * (n - 1) + 0.5)];
}

/* µs a call over one block of `calls` all-reduces. */
static double block(loomComm_t comm, float *send, float *recv, size_t count, int calls) {
  double t0 = now_us();
  for (int i = 0; i < calls; i++)
    check(loomAllReduce(send, recv, count, loomFloat32, loomSum, comm, NULL), "loomAllReduce");
  return (now_us() - t0) / calls;
}

static void measure(loomComm_t comm, const struct sw *sw, size_t bytes, const struct opts *o,
                    int rank) {
  size_t count = bytes / sizeof(float);
  float *send = calloc(count ? count : 1, sizeof(float));
  float *recv = calloc(count ? count : 1, sizeof(float));
  double *t[2] = {malloc(sizeof(double) * (size_t)o->blocks),
                  malloc(sizeof(double) * (size_t)o->blocks)};
  double *pair = malloc(sizeof(double) * (size_t)o->blocks);
  if (send == NULL || recv == NULL || t[0] == NULL || t[1] == NULL || pair == NULL) {
    fprintf(stderr, "switch-cost: out of memory\n");
    exit(1);
  }
  for (int k = -1; k < o->blocks; k++) { /* k = -1: warm-up */
    int b_first = k % 2 != 0;            /* both ranks switch alike */
    for (int i = 0; i < 2; i++) {
      int b = i == 0 ? b_first : !b_first;
      set_side(comm, o, sw, b);
      double us = block(comm, send, recv, count, o->calls);
      if (k >= 0)
        t[b][k] = us;
    }
  }
  for (int k = 0; k < o->blocks; k++)
    pair[k] = t[1][k] / t[0][k];
  if (rank == 0) {
    double a = quantile(t[0], o->blocks, 0.5), b = quantile(t[1], o->blocks, 0.5);
    double p50 = quantile(pair, o->blocks, 0.5);
    printf("%8zu %10.4f %10.4f %8.4f %8.4f [%.3f-%.3f]\n", bytes, a, b, b / a, p50,
           quantile(pair, o->blocks, 0.1), quantile(pair, o->blocks, 0.9));
  }
  free(send);
  free(recv);
  free(t[0]);
  free(t[1]);
  free(pair);
}

static void usage(void) {
  fprintf(stderr, "usage: switch-cost [-x trace|clock] [-b bytes] [-e bytes] [-f factor] "
                  "[-n calls] [-k blocks]\n");
  exit(2);
}

static void parse(int argc, char **argv, struct opts *o) {
  *o = (struct opts){.what = "trace", .min_bytes = 8, .max_bytes = 1024, .factor = 8,
                     .calls = 2000, .blocks = 100};
  int c;
  while ((c = getopt(argc, argv, "x:b:e:f:n:k:")) != -1) {
    if (c == 'x') {
      o->what = optarg;
      continue;
    }
    long v = c == '?' ? 0 : atol(optarg);
    if (v <= 0)
      usage();
    switch (c) {
    case 'b': o->min_bytes = (size_t)v; break;
    case 'e': o->max_bytes = (size_t)v; break;
    case 'f': o->factor = (int)v; break;
    case 'n': o->calls = (int)v; break;
    case 'k': o->blocks = (int)v; break;
    default: usage();
    }
  }
  if (strcmp(o->what, "trace") != 0 && strcmp(o->what, "clock") != 0)
    usage();
  if (o->factor < 2)
    o->factor = 2;
}

int main(int argc, char **argv) {
  struct opts o;
  parse(argc, argv, &o);
  int rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  int nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  loomUniqueId id;
  check(loomGetUniqueId(&id), "loomGetUniqueId");
  loomComm_t comm;
  check(loomCommInitRank(&comm, nranks, id, rank), "loomCommInitRank");
  struct sw sw = {.rec = comm->trace};
  if (strcmp(o.what, "trace") == 0 && sw.rec == NULL) {
    fprintf(stderr, "switch-cost: the flight recorder is off (LOOM_TRACE_BUFFER=0)\n");
    return 1;
  }
  if (rank == 0)
    printf("# %d ranks, float32 sum all-reduce, switch %s, blocks of %d calls, %d blocks a "
           "side\n#  bytes       A_us       B_us      B/A  by pair [p10-p90]\n",
           nranks, o.what, o.calls, o.blocks);
  for (size_t b = o.min_bytes; b <= o.max_bytes; b *= (size_t)o.factor)
    measure(comm, &sw, b, &o, rank);
  set_side(comm, &o, &sw, 1); /* as it was */
  check(loomCommDestroy(comm), "loomCommDestroy");
  return 0;
}
