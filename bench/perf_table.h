/*
 * perf_table.h — loom-perf's human table on rank 0's stdout: the notes and
 * column heads above it and one line per size, of one round's figures or,
 * with --rounds N, of the rounds' medians next to busbw's min-max.
 */
#ifndef PERF_TABLE_H
#define PERF_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "perf_opts.h"
#include "perf_results.h"

/* What the summary line adds up. */
typedef struct {
  int64_t wrong; /* over every checked result */
  double bw_sum; /* busbw of every printed result */
  int bw_count;
} totals_t;

/* The count, or N/A (-1: not checked). */
void perf_fmt_wrong(char *out, size_t len, int64_t wrong);

/* The notes on --peer, --ceiling and --rounds, and the column heads of the
 * plain sweep. */
void perf_table_heads(const opts_t *o);

/* One size's line; adds the printed busbw to tot. */
void perf_table_row(const opts_t *o, totals_t *tot, const perf_row_t *row, const char *type,
                    const char *redop);

/* One form's "time algbw busbw [#wrong]" cells (N/A where none), as -G's
 * lines show them; adds the busbw to tot. */
void perf_table_result(totals_t *tot, const perf_meas_t *m, int with_wrong);

#endif /* PERF_TABLE_H */
