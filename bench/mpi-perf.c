/*
 * mpi-perf.c — the loom-perf sweep timed with MPI_Allreduce / MPI_Allgather,
 * so that Loom can be put side by side with the local MPI:
 *
 *   mpirun -np 2 mpi-perf -b 8 -e 64M -f 4
 *   loomrun -n 2 loom-perf -b 8 -e 64M -f 4
 *
 * float32, sum.  Same table columns as loom-perf; the in-place columns use
 * MPI_IN_PLACE; --percentiles adds loom-perf's p50 and p99 columns (each
 * iteration timed on its own; the slowest rank's percentile).  Results are
 * checked once per size and variant (-c 1); exit status 1 when any element
 * is wrong, 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_size.h"
#include "perf_rounds.h"
#include "perf_time.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

enum { COLL_ALLREDUCE, COLL_ALLGATHER };

static int rank, nranks, coll = COLL_ALLREDUCE, iters = 20, warmup = 5, check = 1, percentiles;
static float *sendbuf, *recvbuf, *expect;

/* msg == NULL: -h, print the usage and exit 0. */
static void usage_error(const char *msg, const char *arg) {
  if (rank == 0 && msg != NULL)
    fprintf(stderr, "mpi-perf: %s '%s'\n", msg, arg);
  if (rank == 0)
    fprintf(msg ? stderr : stdout,
            "usage: mpirun -np N mpi-perf [-C allreduce|allgather] [-b minbytes] [-e maxbytes]\n"
            "                [-i stepbytes | -f stepfactor] [-n iters] [-w warmup] [-c 0|1]\n"
            "                [--percentiles]\n");
  MPI_Finalize();
  exit(msg ? 2 : 0);
}

static size_t parse_size(const char *s) {
  size_t v;
  if (bench_parse_size(s, INT_MAX, &v) != 0)
    usage_error("bad number (at most 2G-1)", s);
  return v;
}

static void run(size_t count, int in_place) {
  int n = (int)count;
  if (coll == COLL_ALLREDUCE)
    MPI_Allreduce(in_place ? MPI_IN_PLACE : sendbuf, recvbuf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (in_place)
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvbuf, n, MPI_FLOAT, MPI_COMM_WORLD);
  else
    MPI_Allgather(sendbuf, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, MPI_COMM_WORLD);
}

/* Small integers: every sum is exact in float32, whatever the order. */
static float value(int r, size_t i, unsigned seed) {
  uint64_t k = i + seed;
  if (coll == COLL_ALLGATHER)
    return (float)(((uint64_t)r * 31 + k * 7) % 97);
  return (float)((k * 7 + (uint64_t)r * 3) % 8);
}

/* Checked run; returns the number of wrong elements over all ranks. */
static long long check_once(size_t count, int in_place, unsigned seed) {
  size_t nelem = coll == COLL_ALLGATHER ? count * (size_t)nranks : count;
  for (size_t i = 0; i < count; i++)
    sendbuf[i] = value(rank, i, seed);
  for (size_t i = 0; i < nelem; i++) {
    recvbuf[i] = -1.0f;
    if (coll == COLL_ALLGATHER) {
      expect[i] = value((int)(i / count), i % count, seed);
    } else {
      expect[i] = 0;
      for (int r = 0; r < nranks; r++)
        expect[i] += value(r, i, seed);
    }
  }
  if (in_place)
    memcpy(recvbuf + (coll == COLL_ALLGATHER ? (size_t)rank * count : 0), sendbuf,
           count * sizeof(float));
  run(count, in_place);
  long long wrong = 0;
  for (size_t i = 0; i < nelem; i++)
    wrong += recvbuf[i] != expect[i];
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return wrong;
}

/* A measurement: microseconds per iteration, and with --percentiles the
 * median and 99th percentile of the iterations' times; each the slowest
 * rank's. */
typedef struct {
  double us, p50, p99;
} timing_t;

static double slowest(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

/* --percentiles: each iteration timed on its own. */
static timing_t time_each(size_t count, int in_place) {
  double *each = malloc(sizeof(double) * (size_t)iters), total = 0;
  if (each == NULL) {
    fprintf(stderr, "mpi-perf: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int it = 0; it < iters; it++) {
    double t0 = MPI_Wtime();
    run(count, in_place);
    each[it] = (MPI_Wtime() - t0) * 1e6;
    total += each[it];
  }
  timing_t t = {slowest(total / iters), slowest(perf_percentile(each, iters, 50)),
                slowest(perf_percentile(each, iters, 99))};
  free(each);
  return t;
}

static timing_t time_us(size_t count, int in_place) {
  if (percentiles)
    return time_each(count, in_place);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; it++)
    run(count, in_place);
  return (timing_t){slowest((MPI_Wtime() - t0) * 1e6 / iters), -1, -1};
}

/* The table's two heading lines: names (units 0), then units. */
static void print_heads(int units) {
  printf("#%11s  %12s  %8s  %6s", units ? "(B)" : "size", units ? "(elements)" : "count",
         units ? "" : "type", units ? "" : "redop");
  for (int form = 0; form < 2; form++) {
    printf("  %7s  %6s  %6s  %6s", units ? "(us)" : "time", units ? "(GB/s)" : "algbw",
           units ? "(GB/s)" : "busbw", units ? "" : "#wrong");
    if (percentiles)
      printf("  %7s  %7s", units ? "(us)" : "p50", units ? "(us)" : "p99");
  }
  printf("\n");
}

/* "  <us>" in 7 columns, as loom-perf prints times. */
static void print_time(double us) {
  char s[32];
  perf_time_str(s, sizeof s, us);
  printf("  %s", s);
}

static double print_result(timing_t t, size_t bytes, double bus_factor, long long wrong) {
  char wstr[32];
  if (check)
    snprintf(wstr, sizeof wstr, "%lld", wrong);
  else
    snprintf(wstr, sizeof wstr, "N/A");
  double algbw = (double)bytes / (t.us * 1e3), busbw = algbw * bus_factor;
  print_time(t.us);
  printf("  %6.2f  %6.2f  %6s", algbw, busbw, wstr);
  if (percentiles) {
    print_time(t.p50);
    print_time(t.p99);
  }
  return busbw;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  size_t min_bytes = 8, max_bytes = 64u << 20, step_bytes = 1u << 20, factor = 2;
  for (int a = 1; a < argc; a++) {
    const char *opt = argv[a];
    if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0)
      usage_error(NULL, opt);
    if (strcmp(opt, "--percentiles") == 0) {
      percentiles = 1;
      continue;
    }
    if (opt[0] != '-' || !opt[1] || opt[2] || !strchr("Cbeifnwc", opt[1]))
      usage_error("unknown argument", opt);
    if (++a >= argc)
      usage_error("missing value for", opt);
    const char *v = argv[a];
    switch (opt[1]) {
    case 'C':
      if (strcmp(v, "allreduce") == 0) coll = COLL_ALLREDUCE;
      else if (strcmp(v, "allgather") == 0) coll = COLL_ALLGATHER;
      else usage_error("unknown collective", v);
      break;
    case 'b': min_bytes = parse_size(v); break;
    case 'e': max_bytes = parse_size(v); break;
    case 'i': step_bytes = parse_size(v); factor = 1; if (!step_bytes) usage_error("bad step", v); break;
    case 'f': factor = parse_size(v); if (!factor) usage_error("bad factor", v); break;
    case 'n': iters = (int)parse_size(v); if (!iters) usage_error("bad iteration count", v); break;
    case 'w': warmup = (int)parse_size(v); break;
    case 'c': check = (int)parse_size(v); if (check > 1) usage_error("-c takes 0 or 1, not", v); break;
    }
  }
  if (min_bytes > max_bytes)
    usage_error("minbytes is larger than maxbytes", argv[0]);

  size_t maxelem = max_bytes / sizeof(float) + 1;
  sendbuf = malloc(maxelem * sizeof(float));
  recvbuf = malloc(maxelem * sizeof(float));
  expect = malloc(maxelem * sizeof(float));
  if (!sendbuf || !recvbuf || !expect) {
    fprintf(stderr, "mpi-perf: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sendbuf, 0, maxelem * sizeof(float));
  memset(recvbuf, 0, maxelem * sizeof(float));

  /* Header: ranks and pids. */
  char mine[128] = {0}, host[64] = "?", *all = malloc((size_t)nranks * 128);
  gethostname(host, sizeof host - 1);
  snprintf(mine, sizeof mine, "Pid %6ld on %s", (long)getpid(), host);
  MPI_Gather(mine, 128, MPI_CHAR, all, 128, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n,")] = '\0';
    printf("# mpi-perf: %s, %s\n", coll == COLL_ALLGATHER ? "MPI_Allgather" : "MPI_Allreduce", lib);
    printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
           "validation: %d\n", nranks, min_bytes, max_bytes, factor > 1 ? factor : step_bytes,
           factor > 1 ? "factor" : "bytes", warmup, iters, check);
    printf("#\n# Using ranks\n");
    for (int r = 0; r < nranks; r++)
      printf("#  Rank %2d %.127s\n", r, all + (size_t)r * 128);
    printf("#\n#%54s%-*s%s\n", "", percentiles ? 51 : 33, "out-of-place", "in-place");
    print_heads(0);
    print_heads(1);
    fflush(stdout);
  }
  free(all);

  double bus_factor = coll == COLL_ALLGATHER ? (double)(nranks - 1) / nranks
                                             : 2.0 * (nranks - 1) / nranks;
  long long total_wrong = 0;
  double bw_sum = 0;
  int bw_count = 0;
  unsigned seed = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes;
       bytes = factor > 1 ? (bytes ? bytes * factor : 1) : bytes + step_bytes) {
    size_t count = bytes / sizeof(float) / (coll == COLL_ALLGATHER ? (size_t)nranks : 1);
    size_t total = count * sizeof(float) * (coll == COLL_ALLGATHER ? (size_t)nranks : 1);
    if (count == 0)
      continue;
    long long wrong_oop = 0, wrong_ip = 0;
    if (check) {
      wrong_oop = check_once(count, 0, seed);
      wrong_ip = check_once(count, 1, seed++);
      total_wrong += wrong_oop + wrong_ip;
    }
    for (int w = 0; w < warmup; w++)
      run(count, 0);
    timing_t us_oop = time_us(count, 0), us_ip = time_us(count, 1);
    if (rank == 0) {
      printf("%12zu  %12zu  %8s  %6s", total, count, "float",
             coll == COLL_ALLGATHER ? "none" : "sum");
      bw_sum += print_result(us_oop, total, bus_factor, wrong_oop);
      bw_sum += print_result(us_ip, total, bus_factor, wrong_ip);
      printf("\n");
      fflush(stdout);
    }
    bw_count += 2;
  }
  if (rank == 0) {
    printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", bw_count ? bw_sum / bw_count : 0.0);
  }
  free(sendbuf);
  free(recvbuf);
  free(expect);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
