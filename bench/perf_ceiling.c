/*
 * perf_ceiling.c — loom-perf --ceiling (see perf_ceiling.h): the memory
 * ceiling on rank 0 and the TCP stream between ranks 0 and 1, kept in
 * step with the other ranks by small Loom collectives (a broadcast of rank
 * 1's address, and an agreement on whether the stream still works after
 * every size, so that one side's failure never leaves the other waiting).
 */
#define _POSIX_C_SOURCE 200809L

#include "perf_ceiling.h"


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem_ceiling.h"
#include "tcp_ceiling.h"

enum { ACCEPT_TIMEOUT_MS = 20000 };

struct perf_ceiling {
  struct perf_ceiling_cfg cfg;
  struct mem_ceiling *mem; /* rank 0; NULL when not measured */
  int tcp_fd;              /* ranks 0 and 1; -1 when none */
  int tcp_ok;              /* every rank agrees the stream works */
  void *tcp_buf;
  unsigned seed;
  char mem_what[200], tcp_what[200];
};

/* Every rank's flag, min-reduced: 1 only when all are 1. */
static loomResult_t agree(struct perf_ceiling *c, int mine, int *all) {
  int32_t v = mine;
  loomResult_t res = loomAllReduce(&v, &v, 1, loomInt32, loomMin, c->cfg.comm, NULL);
  *all = v;
  return res;
}

/* The machine's online CPUs (the ceiling's threads may use them all: see
 * mem_ceiling_any_cpu); 1 when unknown. */
static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 && n <= 4096 ? (int)n : 1;
}

/* One thread per rank of rank 0's host, but no more than its CPUs (more
 * threads than CPUs measure the spin barrier's lost turns, not memory),
 * and at least 2. */
static void open_memory(struct perf_ceiling *c) {
  const struct perf_ceiling_cfg *cfg = &c->cfg;
  int cpus = online_cpus(), threads = cfg->host_ranks;
  if (threads > cpus)
    threads = cpus;
  if (threads > MEM_CEILING_MAX_THREADS)
    threads = MEM_CEILING_MAX_THREADS;
  if (threads < 2)
    threads = 2;
  int reduce = cfg->coll == COLL_ALLREDUCE;
  c->mem = mem_ceiling_create(reduce ? MEM_CEILING_ALLREDUCE : MEM_CEILING_ALLGATHER, threads,
                              cfg->max_bytes);
  if (c->mem == NULL) {
    snprintf(c->mem_what, sizeof c->mem_what, "not measured: out of memory");
    return;
  }
  mem_ceiling_any_cpu(c->mem);
  snprintf(c->mem_what, sizeof c->mem_what,
           "%d threads on rank 0's host (its ranks, at most its %d CPUs, at least 2), "
           "ideal %s in memory (bench/ceiling), busbw", threads, cpus,
           reduce ? "all-reduce (one pass: read every input, write every output)"
                  : "all-gather (memcpy of each block into every receive buffer)");
}

/* Rank 1 listens, tells everyone where; rank 0 connects; rank 1 accepts. */
static loomResult_t open_tcp(struct perf_ceiling *c) {
  const struct perf_ceiling_cfg *cfg = &c->cfg;
  char where[256] = "", ifname[64] = "?", err[256] = "";
  int listener = -1, ok = 1, all = 0;
  if (cfg->rank <= 1) {
    c->tcp_buf = malloc(cfg->max_bytes ? cfg->max_bytes : 1);
    if (c->tcp_buf == NULL)
      snprintf(err, sizeof err, "rank %d: cannot allocate %zu bytes", cfg->rank,
               cfg->max_bytes);
    else
      memset(c->tcp_buf, 0, cfg->max_bytes);
  }
  if (cfg->rank == 1 && c->tcp_buf != NULL) {
    char addr[200];
    listener = tcp_ceiling_listen(cfg->rank1_same_host, addr, sizeof addr, ifname,
                                  sizeof ifname, err, sizeof err);
    if (listener >= 0)
      snprintf(where, sizeof where, "%.200s %.50s", addr, ifname);
  }
  loomResult_t res = loomBroadcast(where, where, sizeof where, loomUint8, 1, cfg->comm, NULL);
  if (res != loomSuccess)
    return res;
  where[sizeof where - 1] = '\0';
  if (cfg->rank <= 1 && where[0] == '\0')
    ok = 0;
  if (cfg->rank == 0 && ok && c->tcp_buf != NULL) {
    c->tcp_fd = tcp_ceiling_connect(where, err, sizeof err);
    ok = c->tcp_fd >= 0;
  }
  if (cfg->rank <= 1 && c->tcp_buf == NULL)
    ok = 0;
  if ((res = agree(c, ok, &all)) != loomSuccess)
    return res;
  if (all && cfg->rank == 1) {
    c->tcp_fd = tcp_ceiling_accept(listener, ACCEPT_TIMEOUT_MS, err, sizeof err);
    ok = c->tcp_fd >= 0;
    listener = -1;
  }
  if (all && (res = agree(c, ok, &all)) != loomSuccess)
    return res;
  if (listener >= 0)
    close(listener);
  if (err[0] != '\0')
    fprintf(stderr, "loom-perf: rank %d: --ceiling: TCP stream: %s\n", cfg->rank, err);
  c->tcp_ok = all;
  if (all) {
    char host[200] = "?", port[32] = "?", name[64] = "?";
    sscanf(where, "%199s %31s %63s", host, port, name);
    snprintf(c->tcp_what, sizeof c->tcp_what,
             "one TCP stream rank 0 -> rank 1 over %s (%s), -n messages of each size back "
             "to back, GB/s", host, name);
  } else {
    snprintf(c->tcp_what, sizeof c->tcp_what,
             "not measured: ranks 0 and 1 could not connect (see their messages)");
  }
  return loomSuccess;
}

loomResult_t perf_ceiling_open(const struct perf_ceiling_cfg *cfg, struct perf_ceiling **out) {
  *out = NULL;
  struct perf_ceiling *c = calloc(1, sizeof *c);
  if (c == NULL)
    return loomSystemError;
  c->cfg = *cfg;
  c->tcp_fd = -1;
  if (cfg->rank == 0)
    open_memory(c);
  loomResult_t res = loomSuccess;
  if (cfg->nranks < 2)
    snprintf(c->tcp_what, sizeof c->tcp_what, "not measured: needs 2 ranks");
  else
    res = open_tcp(c);
  if (res != loomSuccess) {
    perf_ceiling_close(c);
    return res;
  }
  *out = c;
  return loomSuccess;
}

static double memory_gbs(struct perf_ceiling *c, size_t bytes, long long *wrong) {
  size_t count = c->mem ? mem_ceiling_count(c->mem, bytes) : 0;
  if (count == 0)
    return -1;
  struct mem_ceiling_run run = {.count = count,
                                .in_place = 0,
                                .check = c->cfg.check,
                                .seed = c->seed++,
                                .warmup = c->cfg.warmup,
                                .iters = c->cfg.iters};
  double us;
  long long w;
  if (mem_ceiling_measure(c->mem, &run, &us, &w) != 0) {
    mem_ceiling_destroy(c->mem); /* it said why; no more sizes */
    c->mem = NULL;
    snprintf(c->mem_what, sizeof c->mem_what, "not measured: the threads failed");
    return -1;
  }
  if (w > 0) {
    fprintf(stderr, "loom-perf: --ceiling: the memory ceiling got %lld wrong elements at "
            "%zu bytes\n", w, bytes);
    *wrong += w;
  }
  size_t moved = mem_ceiling_bytes(c->mem, count);
  return (double)moved / (us * 1e3) * mem_ceiling_bus_factor(c->mem);
}

/* Ranks 0 and 1: warm-up messages, then -n timed ones.  Returns GB/s on
 * rank 0, 0 on rank 1, -1 on failure (said on stderr). */
static double tcp_gbs(struct perf_ceiling *c, size_t bytes) {
  char err[256];
  const struct perf_ceiling_cfg *cfg = &c->cfg;
  int warm = cfg->warmup > 0;
  if (cfg->rank == 1) {
    if ((warm && tcp_ceiling_receive(c->tcp_fd, c->tcp_buf, bytes, cfg->warmup, err,
                                     sizeof err) != 0) ||
        tcp_ceiling_receive(c->tcp_fd, c->tcp_buf, bytes, cfg->iters, err, sizeof err) != 0) {
      fprintf(stderr, "loom-perf: rank 1: --ceiling: %s\n", err);
      return -1;
    }
    return 0;
  }
  double s = 0;
  if (warm)
    s = tcp_ceiling_send(c->tcp_fd, c->tcp_buf, bytes, cfg->warmup, err, sizeof err);
  if (s >= 0)
    s = tcp_ceiling_send(c->tcp_fd, c->tcp_buf, bytes, cfg->iters, err, sizeof err);
  if (s < 0) {
    fprintf(stderr, "loom-perf: rank 0: --ceiling: %s\n", err);
    return -1;
  }
  return (double)bytes * cfg->iters / s / 1e9;
}

loomResult_t perf_ceiling_measure(struct perf_ceiling *c, size_t bytes, double *mem_gbs,
                                  double *tcp, long long *wrong) {
  *mem_gbs = *tcp = -1;
  *wrong = 0;
  if (c->cfg.rank == 0)
    *mem_gbs = memory_gbs(c, bytes, wrong);
  if (!c->tcp_ok)
    return loomSuccess;
  int ok = 1, all = 0;
  if (c->cfg.rank <= 1) {
    double gbs = tcp_gbs(c, bytes);
    ok = gbs >= 0;
    if (c->cfg.rank == 0)
      *tcp = gbs;
  }
  loomResult_t res = agree(c, ok, &all);
  if (res == loomSuccess && !all) {
    c->tcp_ok = 0; /* no more sizes: the stream is broken */
    snprintf(c->tcp_what, sizeof c->tcp_what, "stopped: the TCP stream failed at %zu bytes",
             bytes);
    *tcp = -1;
  }
  return res;
}

const char *perf_ceiling_mem_what(const struct perf_ceiling *c) { return c->mem_what; }
const char *perf_ceiling_tcp_what(const struct perf_ceiling *c) { return c->tcp_what; }

void perf_ceiling_close(struct perf_ceiling *c) {
  if (c == NULL)
    return;
  if (c->tcp_fd >= 0)
    close(c->tcp_fd);
  mem_ceiling_destroy(c->mem);
  free(c->tcp_buf);
  free(c);
}
