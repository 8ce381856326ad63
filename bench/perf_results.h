/*
 * perf_results.h — loom-perf's results as rank 0 keeps them, one row per
 * size (with --rounds, each round's rows too), and their machine-readable
 * forms: one JSON object (--json) and CSV (--csv), written by
 * perf_output.c.  The JSON field names are an interface (a scaling tool
 * parses them): change them only together.
 */
#ifndef PERF_RESULTS_H
#define PERF_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One timed form of one size.  With --rounds N > 1, the figures are the
 * medians over the rounds (perf_rounds.c) and wrong counts every round. */
typedef struct {
  double time_us;   /* per call, combined over the ranks as -a says */
  double algbw_gbs; /* negative: none (barrier) */
  double busbw_gbs;
  int64_t wrong; /* wrong elements over all ranks; -1: not checked */
  double time_min_us, time_max_us;     /* over the rounds; one round: time_us */
  double busbw_min_gbs, busbw_max_gbs; /* over the rounds; one round: busbw_gbs */
  double p50_us, p99_us; /* --percentiles: per call, combined as -a says; negative: none */
} perf_meas_t;

typedef struct {
  size_t bytes, count;
  perf_meas_t oop;
  perf_meas_t ip;   /* valid when has_ip */
  perf_meas_t peer; /* MPI's call, out of place; valid when has_peer */
  int has_ip, has_peer;
  double mem_gbs; /* memory ceiling busbw; negative: not measured */
  double tcp_gbs; /* TCP stream ceiling; negative: not measured */
} perf_row_t;

typedef struct {
  /* the run */
  const char *collective, *datatype, *op, *launcher;
  char version[16]; /* the library's MAJOR.MINOR.PATCH */
  int nranks, nodes; /* nodes: distinct node ids (LOOM_HOSTID, else host/boot id) */
  int root, iters, warmup, agg_iters, average, blocking; /* blocking: -1 no stream */
  int peer_mpi, ceiling;
  int rounds; /* --rounds N: rows hold the medians when N > 1 */
  int percentiles; /* --percentiles: the measurements have p50_us and p99_us */
  /* the rows */
  perf_row_t *rows;
  int nrows, cap;
  perf_row_t *round_rows; /* rounds > 1: round k's row i at [k * nrows + i] */
  double avg_busbw_gbs; /* the table's "Avg bus bandwidth"; negative: none */
  /* what the ceilings measured, for the summary and the plot */
  char mem_what[200], tcp_what[200];
} perf_results_t;

/* Appends a copy of *row; -1 when out of memory. */
int perf_results_add(perf_results_t *r, const perf_row_t *row);
void perf_results_free(perf_results_t *r);

/* Opens FILE for writing ("-": stdout, whose human table then moves to
 * stderr); NULL with a message on stderr when it cannot. */
FILE *perf_output_open(const char *path);
/* Writes and closes f; -1 with a message on a write error. */
int perf_write_json(const perf_results_t *r, FILE *f, const char *path);
int perf_write_csv(const perf_results_t *r, FILE *f, const char *path);

#endif /* PERF_RESULTS_H */
