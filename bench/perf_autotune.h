/*
 * perf_autotune.h — `loom-perf --autotune FILE`: times every algorithm a
 * collective can use on the live communicator, against the library's own
 * choice, and writes where one clearly beat it as a LOOM_TUNE_FILE (format:
 * src/plan/tune.c; docs/tuning.md).  loom-perf lends it the sweep's sizes
 * and its checked, timed measurement.
 */
#ifndef PERF_AUTOTUNE_H
#define PERF_AUTOTUNE_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* --autotune's rounds unless --rounds says otherwise.  With 3, candidates
 * that run the same schedule still got an entry now and then (about 1 size
 * in 100 on the 2-core development VM: 2 of 12 pairs of runs wrote
 * different files); with 5, none did in 12 pairs, for 1.6 times the run. */
#define PERF_AUTOTUNE_ROUNDS 5

/* One size of one collective, measured as loom-perf's sweep measures it. */
struct perf_sample {
  size_t bytes;  /* loom-perf's size column (count * element size, times the
                  * rank count for all-gather): what the tune file counts */
  double us;     /* the slowest rank's mean per call, out of place; the same
                  * value on every rank */
  int64_t wrong; /* wrong elements over all ranks; -1: not checked (-c 0) */
};

/* Measures collective `coll` (named as -C names it) at sweep size `bytes` on
 * `comm`.  Collective over comm.  Returns 0 with *s filled, or 1 when the
 * size gives a count of 0 (no call made). */
typedef int (*perf_measure_fn)(void *ctx, loomComm_t comm, const char *coll, size_t bytes,
                               struct perf_sample *s);

struct perf_autotune {
  const char *file; /* rank 0 writes it */
  unsigned colls;   /* from perf_autotune_parse_colls */
  loomComm_t comm;
  int rank, nranks;
  const size_t *sizes; /* the sweep (-b -e -f/-i), ascending */
  int nsizes;
  int iters, warmup;     /* for the table's and the file's header */
  int rounds;            /* each size this many times per candidate */
  int argc;              /* the command line, for the file's header */
  char *const *argv;
  perf_measure_fn measure;
  void *ctx;
};

/* -C's value under --autotune: a comma-separated list of collectives with a
 * choice of algorithm, or "all" (NULL: all) -> *mask.  -1 with a message in
 * err on an unknown name or one without a choice. */
int perf_autotune_parse_colls(const char *list, unsigned *mask, char *err, size_t errlen);

/* Collective over a->comm.  Returns the exit status for every rank: 0, or 1
 * when a result was wrong or FILE could not be written (it is then not
 * written or left as it was).  A Loom error exits with status 1. */
int perf_autotune_run(const struct perf_autotune *a);

#endif /* PERF_AUTOTUNE_H */
