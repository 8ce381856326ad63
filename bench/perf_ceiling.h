/*
 * perf_ceiling.h — `loom-perf --ceiling`: for every size of the sweep, rank
 * 0 measures the memory ceiling (mem_ceiling.c: the ideal all-reduce for
 * allreduce, the ideal copy of all-gather for the other collectives, one
 * thread per rank of rank 0's host, no more than its CPUs, at least 2) and
 * ranks 0 and 1 the TCP stream ceiling (tcp_ceiling.c), while the other
 * ranks wait.  Both are in GB/s: the memory one as busbw, the TCP one as
 * bytes per second.
 */
#ifndef PERF_CEILING_H
#define PERF_CEILING_H

#include <stddef.h>

#include "loom.h"
#include "perf_coll.h"

struct perf_ceiling_cfg {
  loomComm_t comm;
  int rank, nranks;
  int host_ranks;     /* ranks on rank 0's host (threads of the memory ceiling) */
  int rank1_same_host; /* ranks 0 and 1 share a host: TCP over loopback */
  coll_t coll;
  size_t max_bytes;
  int iters, warmup, check;
};

struct perf_ceiling;

/* Collective over cfg->comm: sets up the memory ceiling on rank 0 and the
 * TCP connection between ranks 0 and 1.  A ceiling that cannot be had is
 * reported (rank 0: mem_what/tcp_what) and left out; Loom errors are
 * returned.  *out is NULL on error. */
loomResult_t perf_ceiling_open(const struct perf_ceiling_cfg *cfg, struct perf_ceiling **out);

/* Collective: both ceilings at this size in bytes.  On rank 0 *mem_gbs
 * and *tcp_gbs are the figures (negative: not measured) and *wrong the
 * memory ceiling's wrong elements (0 when unchecked); elsewhere -1, -1, 0. */
loomResult_t perf_ceiling_measure(struct perf_ceiling *c, size_t bytes, double *mem_gbs,
                                  double *tcp_gbs, long long *wrong);

/* What was measured, for the summary (valid until close). */
const char *perf_ceiling_mem_what(const struct perf_ceiling *c);
const char *perf_ceiling_tcp_what(const struct perf_ceiling *c);

void perf_ceiling_close(struct perf_ceiling *c);

#endif /* PERF_CEILING_H */
