/*
 * bench_size.h — the size arguments the benchmarks share (loom-perf,
 * mpi-perf, ceiling): "8", "64K", "1M", "2G", an optional trailing B.
 */
#ifndef LOOM_BENCH_SIZE_H
#define LOOM_BENCH_SIZE_H

#include <stddef.h>

/* Parses s into *out (K, M, G: powers of two); -1 when it is not a size or
 * exceeds max. */
int bench_parse_size(const char *s, size_t max, size_t *out);

#endif
