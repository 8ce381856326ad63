/*
 * mem_ceiling.h — the memory ceiling of an intra-node all-reduce or
 * all-gather: threads stand in for ranks and do the ideal data movement
 * with nothing else (no copies into shared segments, no protocol, no
 * wake-ups), so a library's busbw can be read as a fraction of what memory
 * allows.  Shared by bench/ceiling (its own table) and loom-perf --ceiling.
 *
 * Each thread ("rank") owns a send and a receive buffer, touched first by
 * that thread.  One iteration, then a spin barrier:
 *   ALLREDUCE  thread i sums its 1/n slice of all send buffers, reading
 *              each input once and writing the sum to every receive buffer
 *              (the ideal reduce-then-copy: one pass); float32, sum
 *   ALLGATHER  thread i copies its send buffer into every receive buffer
 *              at offset i (memcpy)
 * In place, the inputs are the receive buffers (all-gather then skips the
 * copy of a block onto itself).  The barrier spins on an atomic rather than
 * sleeping in a futex, so small sizes show the cost of one synchronisation
 * and not of a wake-up.  Threads are pinned to distinct CPUs when the
 * process may use several (see mem_ceiling_any_cpu); each measurement
 * starts them afresh (the caller's thread is never pinned), with the same
 * CPU per thread index.
 */
#ifndef MEM_CEILING_H
#define MEM_CEILING_H

#include <stddef.h>

enum { MEM_CEILING_ALLREDUCE, MEM_CEILING_ALLGATHER };
enum { MEM_CEILING_MAX_THREADS = 64 };

struct mem_ceiling;

/* A ceiling of `kind` with nthreads (1..MEM_CEILING_MAX_THREADS) threads
 * for sizes up to max_bytes (buffers are allocated at the first
 * measurement); NULL when out of memory. */
struct mem_ceiling *mem_ceiling_create(int kind, int nthreads, size_t max_bytes);
void mem_ceiling_destroy(struct mem_ceiling *m);

/* Pins the threads to the machine's online CPUs rather than to those the
 * process may use (loom-perf: a launcher such as mpirun binds each rank
 * to one core, but the ceiling is the host's); where the kernel refuses a
 * CPU, the process's own set is used. */
void mem_ceiling_any_cpu(struct mem_ceiling *m);

/* Floats per thread for a size in bytes, as loom-perf counts sizes
 * (all-gather: the received total, so size/nthreads per thread). */
size_t mem_ceiling_count(const struct mem_ceiling *m, size_t bytes);
/* The size in bytes of a count (the inverse, rounded down). */
size_t mem_ceiling_bytes(const struct mem_ceiling *m, size_t count);
/* nccl-tests' bus factor for the kind: 2(n-1)/n, or (n-1)/n. */
double mem_ceiling_bus_factor(const struct mem_ceiling *m);

struct mem_ceiling_run {
  size_t count; /* per thread, 1 .. mem_ceiling_count(max_bytes) */
  int in_place;
  int check;    /* run once and count the wrong elements first */
  unsigned seed; /* varies the checked values */
  int warmup, iters;
};

/* Runs one measurement: *us is the slowest thread's mean microseconds per
 * iteration, *wrong the wrong elements over all threads (-1: not checked).
 * Returns 0, or -1 with a message on stderr (no memory, no thread). */
int mem_ceiling_measure(struct mem_ceiling *m, const struct mem_ceiling_run *run, double *us,
                        long long *wrong);

#endif /* MEM_CEILING_H */
