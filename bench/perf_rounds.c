/*
 * perf_rounds.c — median, min and max over loom-perf's rounds (see
 * perf_rounds.h).
 */
#include "perf_rounds.h"

#include <stddef.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double perf_percentile(double *v, int n, int pct) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  int k = (pct * n + 99) / 100 - 1;
  return v[k < 0 ? 0 : k];
}

perf_stat_t perf_stat(const double *v, int n) {
  double sorted[PERF_ROUNDS_MAX];
  int k = 0;
  for (int i = 0; i < n && i < PERF_ROUNDS_MAX; i++)
    if (v[i] >= 0)
      sorted[k++] = v[i];
  if (k == 0)
    return (perf_stat_t){-1, -1, -1};
  qsort(sorted, (size_t)k, sizeof sorted[0], cmp_double);
  double med = k % 2 ? sorted[k / 2] : (sorted[k / 2 - 1] + sorted[k / 2]) / 2;
  return (perf_stat_t){med, sorted[0], sorted[k - 1]};
}

/* The measurement at byte offset `off` of round r's row. */
static const perf_meas_t *meas_at(const perf_row_t *rows, int stride, int i, int r, size_t off) {
  return (const perf_meas_t *)((const char *)&rows[(size_t)r * (size_t)stride + (size_t)i] + off);
}

static perf_meas_t fold_meas(const perf_row_t *rows, int nrounds, int stride, int i, size_t off) {
  double t[PERF_ROUNDS_MAX], alg[PERF_ROUNDS_MAX], bus[PERF_ROUNDS_MAX];
  double p50[PERF_ROUNDS_MAX], p99[PERF_ROUNDS_MAX];
  int64_t wrong = -1;
  for (int r = 0; r < nrounds; r++) {
    const perf_meas_t *m = meas_at(rows, stride, i, r, off);
    t[r] = m->time_us;
    alg[r] = m->algbw_gbs;
    bus[r] = m->busbw_gbs;
    p50[r] = m->p50_us;
    p99[r] = m->p99_us;
    if (m->wrong >= 0)
      wrong = (wrong < 0 ? 0 : wrong) + m->wrong;
  }
  perf_stat_t ts = perf_stat(t, nrounds), as = perf_stat(alg, nrounds);
  perf_stat_t bs = perf_stat(bus, nrounds);
  return (perf_meas_t){.time_us = ts.med,
                       .algbw_gbs = as.med,
                       .busbw_gbs = bs.med,
                       .wrong = wrong,
                       .time_min_us = ts.min,
                       .time_max_us = ts.max,
                       .busbw_min_gbs = bs.min,
                       .busbw_max_gbs = bs.max,
                       .p50_us = perf_stat(p50, nrounds).med,
                       .p99_us = perf_stat(p99, nrounds).med};
}

static double fold_ceiling(const perf_row_t *rows, int nrounds, int stride, int i, int tcp) {
  double v[PERF_ROUNDS_MAX];
  for (int r = 0; r < nrounds; r++) {
    const perf_row_t *row = &rows[(size_t)r * (size_t)stride + (size_t)i];
    v[r] = tcp ? row->tcp_gbs : row->mem_gbs;
  }
  return perf_stat(v, nrounds).med;
}

void perf_rounds_fold(const perf_row_t *rows, int nrounds, int stride, int i, perf_row_t *out) {
  if (nrounds > PERF_ROUNDS_MAX)
    nrounds = PERF_ROUNDS_MAX;
  *out = rows[i];
  out->oop = fold_meas(rows, nrounds, stride, i, offsetof(perf_row_t, oop));
  if (out->has_ip)
    out->ip = fold_meas(rows, nrounds, stride, i, offsetof(perf_row_t, ip));
  if (out->has_peer)
    out->peer = fold_meas(rows, nrounds, stride, i, offsetof(perf_row_t, peer));
  out->mem_gbs = fold_ceiling(rows, nrounds, stride, i, 0);
  out->tcp_gbs = fold_ceiling(rows, nrounds, stride, i, 1);
}
