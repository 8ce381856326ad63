/*
 * perf_opts.h — loom-perf's command line: nccl-tests' flags and loom-perf's
 * own (-G, -R, --autotune, --json, --csv, --plot, --peer, --ceiling,
 * --device, --rounds).
 */
#ifndef PERF_OPTS_H
#define PERF_OPTS_H

#include <stddef.h>
#include <stdio.h>

#include "loom.h"
#include "perf_coll.h"

/* -a: how each rank's mean time per call becomes the reported one. */
enum { AVG_RANK0 = 0, AVG_MEAN = 1, AVG_MIN = 2, AVG_MAX = 3 };
/* -z unset: calls run on the calling thread (stream NULL). */
enum { BLOCKING_NO_STREAM = -1 };

typedef struct {
  size_t min_bytes, max_bytes, step_bytes;
  size_t step_factor; /* > 1: multiply; else add step_bytes */
  int iters, warmup, check;
  int agg_iters; /* -m: calls per timed iteration, in one group */
  int average;   /* -a: AVG_* (default AVG_MAX, the slowest rank) */
  int blocking;  /* -z: 0 or 1 on a loomStream; BLOCKING_NO_STREAM */
  loomDataType_t type;
  loomRedOp_t op;
  coll_t coll;
  int root;
  int group;   /* -G T: T all-reduces per iteration (0: off) */
  int reverse; /* -R: issue the grouped calls last tensor first */
  const char *coll_arg; /* -C as given */
  const char *autotune; /* --autotune FILE (perf_autotune.c) */
  unsigned autotune_colls;
  const char *json, *csv; /* --json FILE, --csv FILE ("-": stdout) */
  const char *plot;       /* --plot FILE.png */
  int peer_mpi;           /* --peer mpi */
  int ceiling;            /* --ceiling */
  loomDevice_t device;    /* --device: where the send/receive buffers live */
  int loom_mem;           /* --mem loom: host buffers from loomMemAlloc */
  int rounds;             /* --rounds N: default 1, with --autotune 3 */
  int percentiles;        /* --percentiles: time every iteration, report p50/p99 */
} opts_t;

/* Parses the command line into *o; prints the usage and exits 0 on -h,
 * exits 2 with a message on a usage error. */
void perf_parse_args(int argc, char **argv, opts_t *o);

/* Prints "loom-perf: <fmt with arg>" and the hint to -h; exits 2. */
void perf_usage_error(const char *fmt, const char *arg) __attribute__((noreturn));

/* The size after *bytes in the sweep; 0 when there is none. */
int perf_next_size(const opts_t *o, size_t *bytes);

/* "0 (rank 0)", "1 (average)", ... for the header. */
const char *perf_average_name(int average);

#endif /* PERF_OPTS_H */
