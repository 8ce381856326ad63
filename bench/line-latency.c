/*
 * line-latency.c — how long one cache line takes to go from one CPU to
 * another and back: two threads, pinned to two CPUs, hand a counter back
 * and forth in one line (each waits for the other's value, then writes the
 * next).  No library, no system call in the loop: what it measures is the
 * machine's cross-core transfer, the floor under every shared-memory
 * hand-off (Loom's FIFO cells, Open MPI's fast boxes).
 *
 *   bench/line-latency [CPU_A CPU_B [ROUND_TRIPS [BLOCKS]]]
 *                                        (default 0 1 200000 5)
 *
 * Prints one line: the median, min and max over BLOCKS blocks of the mean
 * round trip in ns.  A VM whose two vCPUs sit sometimes on one core
 * complex (a shared L3) and sometimes on two shows two values here, run
 * to run, as every small-message benchmark does.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setaffinity_np */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct shared {
  _Alignas(64) _Atomic long ball; /* odd: A's turn to answer, even: B's */
  char pad[64 - sizeof(long)];
};

struct player {
  struct shared *s;
  int cpu, first; /* first: the one that serves (writes 1) */
  long trips;
  pthread_barrier_t *start;
};

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* B answers every odd value with the next even one. */
static void *answer(void *arg) {
  struct player *p = arg;
  if (pin(p->cpu) != 0)
    fprintf(stderr, "line-latency: cannot pin to CPU %d\n", p->cpu);
  pthread_barrier_wait(p->start);
  for (long v = 1; v < 2 * p->trips; v += 2) {
    while (atomic_load_explicit(&p->s->ball, memory_order_acquire) != v)
      relax();
    atomic_store_explicit(&p->s->ball, v + 1, memory_order_release);
  }
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One block: `trips` round trips from A's side; mean ns each. */
static double block(int cpu_a, int cpu_b, long trips) {
  struct shared *s = aligned_alloc(64, sizeof *s);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  atomic_store(&s->ball, 0);
  struct player b = {.s = s, .cpu = cpu_b, .trips = trips, .start = &start};
  pthread_t tb;
  if (pthread_create(&tb, NULL, answer, &b) != 0) {
    perror("line-latency: pthread_create");
    exit(1);
  }
  if (pin(cpu_a) != 0)
    fprintf(stderr, "line-latency: cannot pin to CPU %d\n", cpu_a);
  pthread_barrier_wait(&start);
  double t0 = now_ns();
  for (long v = 0; v < 2 * trips; v += 2) {
    atomic_store_explicit(&s->ball, v + 1, memory_order_release);
    while (atomic_load_explicit(&s->ball, memory_order_acquire) != v + 2)
      relax();
  }
  double ns = (now_ns() - t0) / (double)trips;
  pthread_join(tb, NULL);
  pthread_barrier_destroy(&start);
  free(s);
  return ns;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int cpu_a = argc > 1 ? atoi(argv[1]) : 0, cpu_b = argc > 2 ? atoi(argv[2]) : 1;
  long trips = argc > 3 ? atol(argv[3]) : 200000;
  int blocks = argc > 4 ? atoi(argv[4]) : 5;
  if (trips < 1 || blocks < 1 || blocks > 1000 || cpu_a == cpu_b) {
    fprintf(stderr, "usage: line-latency [CPU_A CPU_B [ROUND_TRIPS [BLOCKS]]] (two CPUs: "
                    "on one, each turn waits for a time slice)\n");
    return 2;
  }
  double ns[1000];
  for (int i = 0; i < blocks; i++)
    ns[i] = block(cpu_a, cpu_b, trips);
  qsort(ns, (size_t)blocks, sizeof ns[0], cmp_double);
  printf("line-latency: CPUs %d and %d, %ld round trips x %d blocks: %.1f ns a round trip "
         "[%.1f-%.1f]\n",
         cpu_a, cpu_b, trips, blocks, ns[blocks / 2], ns[0], ns[blocks - 1]);
  return 0;
}
