/*
 * perf_time.h — how the bench tables (loom-perf, mpi-perf, ceiling) print
 * a time in microseconds: 7 columns; 3 decimals under 1 us, where a small
 * call takes 0.15-0.5 us and 10 ns would be 2-6 % of it; 2 decimals to
 * 100 us, 1 to 10 ms, none above.
 */
#ifndef LOOM_BENCH_PERF_TIME_H
#define LOOM_BENCH_PERF_TIME_H

#include <stddef.h>
#include <stdio.h>

static inline void perf_time_str(char *out, size_t len, double us) {
  const char *fmt = us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : us >= 1.0 ? "%7.2f" : "%7.3f";
  snprintf(out, len, fmt, us);
}

#endif
