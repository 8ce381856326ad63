/*
 * ceiling.c — the memory ceiling of an intra-node all-reduce / all-gather
 * as a table like loom-perf's:
 *
 *   ceiling -b 8 -e 256M -f 4            (2 threads, all-reduce)
 *   ceiling -C allgather -b 64K -e 256M
 *
 * The measurement (threads standing in for ranks, doing the ideal data
 * movement with nothing else) is mem_ceiling.c's, which loom-perf
 * --ceiling shares.  Time: as loom-perf, the mean microseconds of -n
 * iterations after -w warm-ups, of the slowest thread; same table columns;
 * busbw factors of nccl-tests (allreduce 2(n-1)/n, allgather (n-1)/n).
 * Exit status 1 when any element is wrong or the measurement cannot run,
 * 2 on a usage error.
 */
#include "bench_size.h"
#include "mem_ceiling.h"
#include "perf_time.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int coll, nthreads, iters, warmup, check;
  size_t min_bytes, max_bytes, step_bytes, factor;
} opts_t;

static opts_t opt = {.coll = MEM_CEILING_ALLREDUCE, .nthreads = 2, .iters = 20, .warmup = 5,
                     .check = 1, .min_bytes = 8, .max_bytes = 64u << 20,
                     .step_bytes = 1u << 20, .factor = 2};

static double print_result(double us, size_t bytes, double bus_factor, long long wrong) {
  char tstr[32], wstr[32];
  perf_time_str(tstr, sizeof tstr, us);
  if (opt.check)
    snprintf(wstr, sizeof wstr, "%lld", wrong);
  else
    snprintf(wstr, sizeof wstr, "N/A");
  double algbw = (double)bytes / (us * 1e3), busbw = algbw * bus_factor;
  printf("  %7s  %6.2f  %6.2f  %6s", tstr, algbw, busbw, wstr);
  return busbw;
}

static int next_size(size_t *bytes) {
  if (opt.factor > 1) {
    if (*bytes == 0)
      *bytes = 1;
    else if (*bytes > SIZE_MAX / opt.factor)
      return 0;
    else
      *bytes *= opt.factor;
  } else {
    if (*bytes > SIZE_MAX - opt.step_bytes)
      return 0;
    *bytes += opt.step_bytes;
  }
  return *bytes <= opt.max_bytes;
}

/* The sweep; returns the exit status. */
static int sweep(struct mem_ceiling *m) {
  const int allgather = opt.coll == MEM_CEILING_ALLGATHER;
  double factor = mem_ceiling_bus_factor(m);
  long long total_wrong = 0;
  double bw_sum = 0;
  int bw_count = 0;
  unsigned seed = 0;
  for (size_t bytes = opt.min_bytes;;) {
    size_t count = mem_ceiling_count(m, bytes);
    if (count > 0) {
      struct mem_ceiling_run run = {.count = count,
                                    .in_place = 0,
                                    .check = opt.check,
                                    .seed = seed++,
                                    .warmup = opt.warmup,
                                    .iters = opt.iters};
      double us[2];
      long long wrong[2];
      for (int ip = 0; ip < 2; ip++) {
        run.in_place = ip;
        if (mem_ceiling_measure(m, &run, &us[ip], &wrong[ip]) != 0)
          return 1;
        total_wrong += wrong[ip] > 0 ? wrong[ip] : 0;
      }
      size_t total = mem_ceiling_bytes(m, count);
      printf("%12zu  %12zu  %8s  %6s", total, count, "float", allgather ? "none" : "sum");
      for (int ip = 0; ip < 2; ip++)
        bw_sum += print_result(us[ip], total, factor, wrong[ip]);
      printf("\n");
      fflush(stdout);
      bw_count += 2;
    }
    if (!next_size(&bytes))
      break;
  }
  printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g \n#\n", bw_count ? bw_sum / bw_count : 0.0);
  return total_wrong ? 1 : 0;
}

/* msg == NULL: -h, print the usage and exit 0. */
static void usage_error(const char *msg, const char *arg) {
  if (msg != NULL)
    fprintf(stderr, "ceiling: %s '%s'\n", msg, arg);
  fprintf(msg ? stderr : stdout,
          "usage: ceiling [-C allreduce|allgather] [-t threads] [-b minbytes] [-e maxbytes]\n"
          "               [-i stepbytes | -f stepfactor] [-n iters] [-w warmup] [-c 0|1]\n"
          "  -t threads   ranks simulated by threads (default 2, at most %d)\n"
          "  other flags as in loom-perf (sizes take K, M, G suffixes; -c checks results)\n",
          MEM_CEILING_MAX_THREADS);
  exit(msg ? 2 : 0);
}

static size_t parse_size(const char *s) {
  size_t v;
  if (bench_parse_size(s, INT_MAX, &v) != 0)
    usage_error("bad number (at most 2G-1)", s);
  return v;
}

int main(int argc, char **argv) {
  for (int a = 1; a < argc; a++) {
    const char *o = argv[a];
    if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
      usage_error(NULL, o);
    if (o[0] != '-' || !o[1] || o[2] || !strchr("Ctbeifnwc", o[1]))
      usage_error("unknown argument", o);
    if (++a >= argc)
      usage_error("missing value for", o);
    const char *v = argv[a];
    switch (o[1]) {
    case 'C':
      if (strcmp(v, "allreduce") == 0) opt.coll = MEM_CEILING_ALLREDUCE;
      else if (strcmp(v, "allgather") == 0) opt.coll = MEM_CEILING_ALLGATHER;
      else usage_error("unknown collective (allreduce or allgather)", v);
      break;
    case 't':
      opt.nthreads = (int)parse_size(v);
      if (opt.nthreads < 1 || opt.nthreads > MEM_CEILING_MAX_THREADS) usage_error("bad thread count", v);
      break;
    case 'b': opt.min_bytes = parse_size(v); break;
    case 'e': opt.max_bytes = parse_size(v); break;
    case 'i':
      opt.step_bytes = parse_size(v);
      opt.factor = 1;
      if (!opt.step_bytes) usage_error("bad step", v);
      break;
    case 'f': opt.factor = parse_size(v); if (!opt.factor) usage_error("bad factor", v); break;
    case 'n': opt.iters = (int)parse_size(v); if (!opt.iters) usage_error("bad iteration count", v); break;
    case 'w': opt.warmup = (int)parse_size(v); break;
    case 'c': opt.check = (int)parse_size(v); if (opt.check > 1) usage_error("-c takes 0 or 1, not", v); break;
    }
  }
  if (opt.min_bytes > opt.max_bytes)
    usage_error("minbytes is larger than maxbytes", argv[0]);

  const int n = opt.nthreads;
  const int allgather = opt.coll == MEM_CEILING_ALLGATHER;
  printf("# ceiling: %d threads, ideal %s in memory (%s)\n", n,
         allgather ? "allgather" : "allreduce",
         allgather ? "memcpy of each block into every receive buffer"
                   : "one pass: read every input, write every output");
  printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
         "validation: %d\n", n, opt.min_bytes, opt.max_bytes,
         opt.factor > 1 ? opt.factor : opt.step_bytes, opt.factor > 1 ? "factor" : "bytes",
         opt.warmup, opt.iters, opt.check);
  printf("#\n#%54s%-33s%s\n", "", "out-of-place", "in-place");
  printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
         "type", "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)",
         "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);

  struct mem_ceiling *m = mem_ceiling_create(opt.coll, n, opt.max_bytes);
  if (m == NULL) {
    fprintf(stderr, "ceiling: out of memory\n");
    return 1;
  }
  int status = sweep(m);
  mem_ceiling_destroy(m);
  return status;
}
