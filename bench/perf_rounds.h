/*
 * perf_rounds.h — `loom-perf --rounds N`: the statistics over the rounds
 * (median, min, max) and the folding of each size's rows, one per round,
 * into the one row that the table, --json, --csv and --plot show.
 */
#ifndef PERF_ROUNDS_H
#define PERF_ROUNDS_H

#include "perf_results.h"

/* --rounds takes 1 .. PERF_ROUNDS_MAX. */
#define PERF_ROUNDS_MAX 1000
#define PERF_ROUNDS_MAX_TEXT "1000"

typedef struct {
  double med, min, max; /* negative: none */
} perf_stat_t;

/* The median (of an even count, the mean of the two middle values), min
 * and max of the values of v[0..n) that are not negative ("none"); all
 * three -1 when every value is none.  n <= PERF_ROUNDS_MAX; v is left as
 * it was. */
perf_stat_t perf_stat(const double *v, int n);

/* The pct-th percentile (1..100) of v[0..n), n >= 1, sorting v: the
 * smallest value that at least pct % of them do not exceed. */
double perf_percentile(double *v, int n, int pct);

/* Folds rows[r * stride + i] for r in 0..nrounds-1 (one size measured in
 * every round) into *out: per measurement the median of each figure
 * (time, algbw, busbw each its own), the min and max of time and busbw,
 * and the wrong elements of all rounds together; the ceilings' medians;
 * with --percentiles the median of the rounds' p50s and of their p99s. */
void perf_rounds_fold(const perf_row_t *rows, int nrounds, int stride, int i, perf_row_t *out);

#endif /* PERF_ROUNDS_H */
