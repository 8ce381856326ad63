/*
 * ceiling.c — the memory ceiling of an intra-node all-reduce / all-gather:
 * threads stand in for ranks and do the ideal data movement with nothing
 * else (no copies into shared segments, no protocol, no wake-ups), so a
 * library's busbw can be read as a fraction of what memory allows.
 *
 *   ceiling -b 8 -e 256M -f 4            (2 threads, all-reduce)
 *   ceiling -C allgather -b 64K -e 256M
 *
 * Each thread ("rank") owns a send and a receive buffer of size bytes,
 * touched first by that thread.  One iteration, then a spin barrier:
 *   allreduce  thread i sums its 1/n slice of all send buffers, reading each
 *              input once and writing the sum to every receive buffer (the
 *              ideal reduce-then-copy: one pass); float32, sum
 *   allgather  thread i copies its send buffer into every receive buffer at
 *              offset i (memcpy)
 * In place, the inputs are the receive buffers (all-gather then skips the
 * copy of a block onto itself).  The barrier spins on an atomic rather than
 * sleeping in a futex, so small sizes show the cost of one synchronisation
 * and not of a wake-up.  Time: as loom-perf, the mean microseconds of -n
 * iterations after -w warm-ups, of the slowest thread; same table columns;
 * busbw factors of nccl-tests (allreduce 2(n-1)/n, allgather (n-1)/n).
 * Threads are pinned to distinct CPUs when the process may use several.
 * Exit status 1 when any element is wrong, 2 on a usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#endif

#include "bench_size.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { COLL_ALLREDUCE, COLL_ALLGATHER };
enum { MAX_THREADS = 64, BLOCK = 16 /* floats: one 64-byte line */ };

typedef struct {
  int coll, nthreads, iters, warmup, check;
  size_t min_bytes, max_bytes, step_bytes, factor;
} opts_t;

/* Sense-reversing barrier: the last arrival bumps the phase. */
typedef struct {
  atomic_uint arrived;
  atomic_uint phase;
  unsigned n;
} spin_barrier_t;

static opts_t opt = {.coll = COLL_ALLREDUCE, .nthreads = 2, .iters = 20, .warmup = 5,
                     .check = 1, .min_bytes = 8, .max_bytes = 64u << 20,
                     .step_bytes = 1u << 20, .factor = 2};
static spin_barrier_t barrier;
static float *sendbufs[MAX_THREADS], *recvbufs[MAX_THREADS];
static double thread_us[MAX_THREADS];
static atomic_llong wrong_count;
static atomic_int alloc_failed;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void barrier_wait(spin_barrier_t *b) {
  unsigned phase = atomic_load_explicit(&b->phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 == b->n) {
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&b->phase, phase + 1, memory_order_release);
    return;
  }
  /* A partner that lost its CPU (more threads than CPUs, or a busy machine)
   * gets it back sooner if we yield after spinning a while. */
  for (unsigned spins = 0; atomic_load_explicit(&b->phase, memory_order_acquire) == phase;)
    if (++spins < 4096)
      cpu_relax();
    else
      sched_yield();
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Two ranks, the case the targets are set for: plain loops over restrict
 * pointers, which gcc -O2 vectorises without alias checks.  Fixed-length
 * inner loops, because its "very cheap" cost model only vectorises loops
 * whose trip count is a multiple of the vector length. */
static void reduce2(float *restrict r0, float *restrict r1, const float *restrict a,
                    const float *restrict b, size_t lo, size_t hi) {
  size_t j = lo;
  for (; j + BLOCK <= hi; j += BLOCK)
    for (int e = 0; e < BLOCK; e++) {
      float v = a[j + e] + b[j + e];
      r0[j + e] = v;
      r1[j + e] = v;
    }
  for (; j < hi; j++) {
    float v = a[j] + b[j];
    r0[j] = v;
    r1[j] = v;
  }
}

/* The same in place: x and y are the inputs and the outputs. */
static void reduce2_in_place(float *restrict x, float *restrict y, size_t lo, size_t hi) {
  size_t j = lo;
  for (; j + BLOCK <= hi; j += BLOCK)
    for (int e = 0; e < BLOCK; e++) {
      float v = x[j + e] + y[j + e];
      x[j + e] = v;
      y[j + e] = v;
    }
  for (; j < hi; j++) {
    float v = x[j] + y[j];
    x[j] = v;
    y[j] = v;
  }
}

/* recv[r][lo..hi) = sum over r of in[r][lo..hi), for every r: every input
 * read once, every output written once (any number of ranks). */
static void reduce_slice(float *const *recv, const float *const *in, int n, size_t lo,
                         size_t hi) {
  if (n == 2 && in[0] == recv[0])
    reduce2_in_place(recv[0], recv[1], lo, hi);
  else if (n == 2)
    reduce2(recv[0], recv[1], in[0], in[1], lo, hi);
  if (n == 2)
    return;
  size_t j = lo;
  for (; j + BLOCK <= hi; j += BLOCK) {
    float acc[BLOCK];
    for (int e = 0; e < BLOCK; e++)
      acc[e] = in[0][j + e];
    for (int r = 1; r < n; r++)
      for (int e = 0; e < BLOCK; e++)
        acc[e] += in[r][j + e];
    for (int r = 0; r < n; r++)
      for (int e = 0; e < BLOCK; e++)
        recv[r][j + e] = acc[e];
  }
  for (; j < hi; j++) {
    float acc = in[0][j];
    for (int r = 1; r < n; r++)
      acc += in[r][j];
    for (int r = 0; r < n; r++)
      recv[r][j] = acc;
  }
}

/* One collective by thread `me`; count as in loom-perf (allgather: per rank). */
static void run_once(int me, size_t count, int in_place) {
  const int n = opt.nthreads;
  if (opt.coll == COLL_ALLREDUCE) {
    size_t per = ((count + (size_t)n - 1) / (size_t)n + BLOCK - 1) / BLOCK * BLOCK;
    size_t lo = (size_t)me * per < count ? (size_t)me * per : count;
    size_t hi = count - lo < per ? count : lo + per;
    reduce_slice(recvbufs, (const float *const *)(in_place ? recvbufs : sendbufs), n, lo, hi);
  } else {
    const float *src = in_place ? recvbufs[me] + (size_t)me * count : sendbufs[me];
    for (int r = 0; r < n; r++)
      if (!(in_place && r == me))
        memcpy(recvbufs[r] + (size_t)me * count, src, count * sizeof(float));
  }
  barrier_wait(&barrier);
}

/* Small integers: every sum is exact in float32, whatever the order. */
static float value(int r, size_t i, unsigned seed) {
  uint64_t k = i + seed;
  if (opt.coll == COLL_ALLGATHER)
    return (float)(((uint64_t)r * 31 + k * 7) % 97);
  return (float)((k * 7 + (uint64_t)r * 3) % 8);
}

/* Checked run; every thread checks its own receive buffer.  Returns the
 * number of wrong elements over all threads (in thread 0; 0 elsewhere). */
static long long check_once(int me, size_t count, int in_place, unsigned seed) {
  const int n = opt.nthreads;
  size_t nelem = opt.coll == COLL_ALLGATHER ? count * (size_t)n : count;
  float *recv = recvbufs[me];
  for (size_t i = 0; i < nelem; i++)
    recv[i] = -1.0f;
  float *in = in_place ? recv + (opt.coll == COLL_ALLGATHER ? (size_t)me * count : 0)
                       : sendbufs[me];
  for (size_t i = 0; i < count; i++)
    in[i] = value(me, i, seed);
  if (me == 0)
    atomic_store(&wrong_count, 0);
  barrier_wait(&barrier);
  run_once(me, count, in_place);
  long long wrong = 0;
  for (size_t i = 0; i < nelem; i++) {
    float expect = 0;
    if (opt.coll == COLL_ALLGATHER)
      expect = value((int)(i / count), i % count, seed);
    else
      for (int r = 0; r < n; r++)
        expect += value(r, i, seed);
    wrong += recv[i] != expect;
  }
  atomic_fetch_add(&wrong_count, wrong);
  barrier_wait(&barrier);
  return me == 0 ? atomic_load(&wrong_count) : 0;
}

/* Mean microseconds per iteration of the slowest thread (in thread 0). */
static double time_us(int me, size_t count, int in_place) {
  barrier_wait(&barrier);
  double t0 = now_s();
  for (int it = 0; it < opt.iters; it++)
    run_once(me, count, in_place);
  thread_us[me] = (now_s() - t0) * 1e6 / opt.iters;
  barrier_wait(&barrier);
  double us = 0;
  for (int t = 0; t < opt.nthreads; t++)
    us = thread_us[t] > us ? thread_us[t] : us;
  return us;
}

static double print_result(double us, size_t bytes, double bus_factor, long long wrong) {
  char tstr[32], wstr[32];
  snprintf(tstr, sizeof tstr, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  if (opt.check)
    snprintf(wstr, sizeof wstr, "%lld", wrong);
  else
    snprintf(wstr, sizeof wstr, "N/A");
  double algbw = (double)bytes / (us * 1e3), busbw = algbw * bus_factor;
  printf("  %7s  %6.2f  %6.2f  %6s", tstr, algbw, busbw, wstr);
  return busbw;
}

/* Pins thread `me` to the me-th CPU this process may use, when there are
 * at least two; failure only costs steadiness, so it is ignored. */
static void pin(int me) {
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2)
    return;
  int want = me % CPU_COUNT(&allowed);
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &allowed) || want-- > 0)
      continue;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)sched_setaffinity(0, sizeof one, &one);
    return;
  }
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

static void *rank_main(void *arg) {
  const int me = (int)(intptr_t)arg, n = opt.nthreads;
  pin(me);
  /* Own buffers, first touched here, so that they sit near this thread. */
  size_t cap = (opt.max_bytes / sizeof(float) + BLOCK) * sizeof(float);
  cap = (cap + 63) / 64 * 64;
  sendbufs[me] = aligned_alloc(64, cap);
  recvbufs[me] = aligned_alloc(64, cap);
  if (sendbufs[me] == NULL || recvbufs[me] == NULL)
    atomic_store(&alloc_failed, 1);
  else {
    memset(sendbufs[me], 0, cap);
    memset(recvbufs[me], 0, cap);
  }
  barrier_wait(&barrier);
  if (atomic_load(&alloc_failed)) {
    if (me == 0)
      fprintf(stderr, "ceiling: cannot allocate 2 x %zu bytes per thread\n", cap);
    return (void *)(intptr_t)1;
  }

  double bus_factor = opt.coll == COLL_ALLGATHER ? (double)(n - 1) / n : 2.0 * (n - 1) / n;
  long long total_wrong = 0;
  double bw_sum = 0;
  int bw_count = 0;
  unsigned seed = 0;
  for (size_t bytes = opt.min_bytes;;) {
    size_t count = bytes / sizeof(float) / (opt.coll == COLL_ALLGATHER ? (size_t)n : 1);
    size_t total = count * sizeof(float) * (opt.coll == COLL_ALLGATHER ? (size_t)n : 1);
    if (count > 0) {
      long long wrong_oop = 0, wrong_ip = 0;
      if (opt.check) {
        wrong_oop = check_once(me, count, 0, seed);
        wrong_ip = check_once(me, count, 1, seed++);
        total_wrong += wrong_oop + wrong_ip;
      }
      for (int w = 0; w < opt.warmup; w++)
        run_once(me, count, 0);
      double us_oop = time_us(me, count, 0);
      for (int w = 0; w < opt.warmup; w++)
        run_once(me, count, 1);
      double us_ip = time_us(me, count, 1);
      if (me == 0) {
        printf("%12zu  %12zu  %8s  %6s", total, count, "float",
               opt.coll == COLL_ALLGATHER ? "none" : "sum");
        bw_sum += print_result(us_oop, total, bus_factor, wrong_oop);
        bw_sum += print_result(us_ip, total, bus_factor, wrong_ip);
        printf("\n");
        fflush(stdout);
      }
      bw_count += 2;
    }
    if (!next_size(&bytes))
      break;
  }
  if (me == 0) {
    printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", bw_count ? bw_sum / bw_count : 0.0);
  }
  return (void *)(intptr_t)(total_wrong ? 1 : 0);
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
          MAX_THREADS);
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
      if (strcmp(v, "allreduce") == 0) opt.coll = COLL_ALLREDUCE;
      else if (strcmp(v, "allgather") == 0) opt.coll = COLL_ALLGATHER;
      else usage_error("unknown collective (allreduce or allgather)", v);
      break;
    case 't':
      opt.nthreads = (int)parse_size(v);
      if (opt.nthreads < 1 || opt.nthreads > MAX_THREADS) usage_error("bad thread count", v);
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
  printf("# ceiling: %d threads, ideal %s in memory (%s)\n", n,
         opt.coll == COLL_ALLGATHER ? "allgather" : "allreduce",
         opt.coll == COLL_ALLGATHER ? "memcpy of each block into every receive buffer"
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

  barrier.n = (unsigned)n;
  pthread_t tids[MAX_THREADS];
  for (int t = 1; t < n; t++) {
    int err = pthread_create(&tids[t], NULL, rank_main, (void *)(intptr_t)t);
    if (err != 0) {
      fprintf(stderr, "ceiling: pthread_create: %s\n", strerror(err));
      return 1;
    }
  }
  int status = (int)(intptr_t)rank_main((void *)(intptr_t)0);
  for (int t = 1; t < n; t++)
    pthread_join(tids[t], NULL);
  for (int t = 0; t < n; t++) {
    free(sendbufs[t]);
    free(recvbufs[t]);
  }
  return status;
}
