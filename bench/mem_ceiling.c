/*
 * mem_ceiling.c — the ideal in-memory all-reduce / all-gather run by
 * threads (see mem_ceiling.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#endif

#include "mem_ceiling.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BLOCK = 16 /* floats: one 64-byte line */ };

/* Sense-reversing barrier: the last arrival bumps the phase. */
typedef struct {
  atomic_uint arrived;
  atomic_uint phase;
  unsigned n;
} spin_barrier_t;

struct mem_ceiling {
  int kind, nthreads;
  int any_cpu; /* pin to the machine's CPUs, not only the process's */
  size_t cap; /* bytes of each buffer */
  float *sendbufs[MEM_CEILING_MAX_THREADS], *recvbufs[MEM_CEILING_MAX_THREADS];
  spin_barrier_t barrier;
  atomic_int alloc_failed;
  atomic_llong wrong_count;
  double thread_us[MEM_CEILING_MAX_THREADS];
  const struct mem_ceiling_run *run; /* the measurement in progress */
};

struct thread_arg {
  struct mem_ceiling *m;
  int me;
};

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

/* k arrivals at once: lets waiting threads through for threads that never
 * started. */
static void barrier_arrive_many(spin_barrier_t *b, unsigned k) {
  unsigned phase = atomic_load_explicit(&b->phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->arrived, k, memory_order_acq_rel) + k == b->n) {
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&b->phase, phase + 1, memory_order_release);
  }
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

/* One collective by thread `me`; count per rank for all-gather. */
static void run_once(struct mem_ceiling *m, int me, size_t count, int in_place) {
  const int n = m->nthreads;
  if (m->kind == MEM_CEILING_ALLREDUCE) {
    size_t per = ((count + (size_t)n - 1) / (size_t)n + BLOCK - 1) / BLOCK * BLOCK;
    size_t lo = (size_t)me * per < count ? (size_t)me * per : count;
    size_t hi = count - lo < per ? count : lo + per;
    reduce_slice(m->recvbufs, (const float *const *)(in_place ? m->recvbufs : m->sendbufs), n,
                 lo, hi);
  } else {
    const float *src = in_place ? m->recvbufs[me] + (size_t)me * count : m->sendbufs[me];
    for (int r = 0; r < n; r++)
      if (!(in_place && r == me))
        memcpy(m->recvbufs[r] + (size_t)me * count, src, count * sizeof(float));
  }
  barrier_wait(&m->barrier);
}

/* Small integers: every sum is exact in float32, whatever the order. */
static float value(const struct mem_ceiling *m, int r, size_t i, unsigned seed) {
  uint64_t k = i + seed;
  if (m->kind == MEM_CEILING_ALLGATHER)
    return (float)(((uint64_t)r * 31 + k * 7) % 97);
  return (float)((k * 7 + (uint64_t)r * 3) % 8);
}

/* Checked run; every thread checks its own receive buffer and adds its
 * wrong elements to m->wrong_count. */
static void check_once(struct mem_ceiling *m, int me, size_t count, int in_place,
                       unsigned seed) {
  const int n = m->nthreads;
  size_t nelem = m->kind == MEM_CEILING_ALLGATHER ? count * (size_t)n : count;
  float *recv = m->recvbufs[me];
  for (size_t i = 0; i < nelem; i++)
    recv[i] = -1.0f;
  float *in = in_place ? recv + (m->kind == MEM_CEILING_ALLGATHER ? (size_t)me * count : 0)
                       : m->sendbufs[me];
  for (size_t i = 0; i < count; i++)
    in[i] = value(m, me, i, seed);
  barrier_wait(&m->barrier);
  run_once(m, me, count, in_place);
  long long wrong = 0;
  for (size_t i = 0; i < nelem; i++) {
    float expect = 0;
    if (m->kind == MEM_CEILING_ALLGATHER)
      expect = value(m, (int)(i / count), i % count, seed);
    else
      for (int r = 0; r < n; r++)
        expect += value(m, r, i, seed);
    wrong += recv[i] != expect;
  }
  atomic_fetch_add(&m->wrong_count, wrong);
  barrier_wait(&m->barrier);
}

/* Pins the calling thread to the me-th CPU this process may use, when
 * there are at least two; failure only costs steadiness, so it is ignored.
 * With any_cpu, to the me-th online CPU of the machine first (a launcher
 * may have bound the process to fewer), else as without. */
static void pin(int me, int any_cpu) {
  cpu_set_t allowed, one;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (any_cpu && online >= 2 && online <= CPU_SETSIZE) {
    CPU_ZERO(&one);
    CPU_SET(me % (int)online, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0)
      return;
  }
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

void mem_ceiling_any_cpu(struct mem_ceiling *m) { m->any_cpu = 1; }

static void *thread_main(void *p) {
  struct thread_arg *a = p;
  struct mem_ceiling *m = a->m;
  const int me = a->me;
  const struct mem_ceiling_run *run = m->run;
  pin(me, m->any_cpu);
  /* Own buffers, first touched here, so that they sit near this thread. */
  if (m->sendbufs[me] == NULL) {
    m->sendbufs[me] = aligned_alloc(64, m->cap);
    m->recvbufs[me] = aligned_alloc(64, m->cap);
    if (m->sendbufs[me] == NULL || m->recvbufs[me] == NULL)
      atomic_store(&m->alloc_failed, 1);
    else {
      memset(m->sendbufs[me], 0, m->cap);
      memset(m->recvbufs[me], 0, m->cap);
    }
  }
  barrier_wait(&m->barrier);
  if (atomic_load(&m->alloc_failed))
    return NULL;
  if (run->check)
    check_once(m, me, run->count, run->in_place, run->seed);
  for (int w = 0; w < run->warmup; w++)
    run_once(m, me, run->count, run->in_place);
  barrier_wait(&m->barrier);
  double t0 = now_s();
  for (int it = 0; it < run->iters; it++)
    run_once(m, me, run->count, run->in_place);
  m->thread_us[me] = (now_s() - t0) * 1e6 / run->iters;
  return NULL;
}

struct mem_ceiling *mem_ceiling_create(int kind, int nthreads, size_t max_bytes) {
  if (nthreads < 1 || nthreads > MEM_CEILING_MAX_THREADS)
    return NULL;
  struct mem_ceiling *m = calloc(1, sizeof *m);
  if (m == NULL)
    return NULL;
  m->kind = kind;
  m->nthreads = nthreads;
  size_t cap = (max_bytes / sizeof(float) + BLOCK) * sizeof(float);
  m->cap = (cap + 63) / 64 * 64;
  m->barrier.n = (unsigned)nthreads;
  return m;
}

void mem_ceiling_destroy(struct mem_ceiling *m) {
  if (m == NULL)
    return;
  for (int t = 0; t < m->nthreads; t++) {
    free(m->sendbufs[t]);
    free(m->recvbufs[t]);
  }
  free(m);
}

size_t mem_ceiling_count(const struct mem_ceiling *m, size_t bytes) {
  size_t per = m->kind == MEM_CEILING_ALLGATHER ? (size_t)m->nthreads : 1;
  return bytes / sizeof(float) / per;
}

size_t mem_ceiling_bytes(const struct mem_ceiling *m, size_t count) {
  size_t per = m->kind == MEM_CEILING_ALLGATHER ? (size_t)m->nthreads : 1;
  return count * sizeof(float) * per;
}

double mem_ceiling_bus_factor(const struct mem_ceiling *m) {
  int n = m->nthreads;
  return m->kind == MEM_CEILING_ALLGATHER ? (double)(n - 1) / n : 2.0 * (n - 1) / n;
}

int mem_ceiling_measure(struct mem_ceiling *m, const struct mem_ceiling_run *run, double *us,
                        long long *wrong) {
  if (run->count == 0 || run->iters < 1 ||
      mem_ceiling_bytes(m, run->count) > m->cap - BLOCK * sizeof(float)) {
    fprintf(stderr, "mem_ceiling: count %zu is out of range\n", run->count);
    return -1;
  }
  pthread_t tids[MEM_CEILING_MAX_THREADS];
  struct thread_arg args[MEM_CEILING_MAX_THREADS];
  m->run = run;
  atomic_store(&m->wrong_count, 0);
  atomic_store(&m->alloc_failed, 0);
  int started = 0, err = 0;
  for (; started < m->nthreads; started++) {
    args[started] = (struct thread_arg){.m = m, .me = started};
    err = pthread_create(&tids[started], NULL, thread_main, &args[started]);
    if (err != 0)
      break;
  }
  if (err != 0) {
    /* The started threads wait at the first barrier for the missing ones:
     * let them through as if allocation had failed. */
    atomic_store(&m->alloc_failed, 1);
    barrier_arrive_many(&m->barrier, (unsigned)(m->nthreads - started));
  }
  for (int t = 0; t < started; t++)
    pthread_join(tids[t], NULL);
  if (err != 0) {
    fprintf(stderr, "mem_ceiling: pthread_create: %s\n", strerror(err));
    return -1;
  }
  if (atomic_load(&m->alloc_failed)) {
    fprintf(stderr, "mem_ceiling: cannot allocate 2 x %zu bytes per thread\n", m->cap);
    return -1;
  }
  double slowest = 0;
  for (int t = 0; t < m->nthreads; t++)
    slowest = m->thread_us[t] > slowest ? m->thread_us[t] : slowest;
  *us = slowest;
  *wrong = run->check ? atomic_load(&m->wrong_count) : -1;
  return 0;
}
