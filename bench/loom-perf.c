/*
 * loom-perf.c — bandwidth benchmark for Loom collectives, in the style of
 * NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf, ..., sendrecv_perf).
 *
 *   loomrun -n 4 loom-perf [-C collective] [-r root] -b 8 -e 64M -f 2
 *   mpirun -np 4 loom-perf --peer mpi --json out.json --plot out.png
 *   loomrun -n 2 loom-perf -G 1000 -b 4M -e 4M
 *
 * Uses the public API only.  Every rank sweeps the same message sizes; for
 * each size it checks every element of the result against a reference
 * computed from the known inputs, once out of place and once in place
 * (-c 1), then times -n iterations of each after -w warm-up iterations
 * (-m calls per iteration in one group; on a stream with -z).  Sizes,
 * counts and bandwidths follow nccl-tests (perf_opts.c's usage).  The time
 * reported is per call, the slowest rank's by default (-a).  Rank 0 prints
 * the table and keeps the rows for --json/--csv (perf_output.c) and --plot
 * (perf_plot.c); --peer mpi times MPI's collective alongside (perf_peer.c)
 * and --ceiling the memory and TCP ceilings (perf_ceiling.c); --rounds N
 * repeats the sweep and shows the medians and spreads (perf_rounds.c,
 * perf_table.c).  The launcher
 * and rendezvous are perf_launch.c's.  -G T compares T grouped (fused)
 * all-reduces with T separate ones and one call of the whole size.
 * --autotune FILE times each algorithm a collective can use and writes the
 * fastest per size as a LOOM_TUNE_FILE (perf_autotune.c).  Exit status: 0
 * on success, 1 on a Loom error, a wrong result or an output that could
 * not be written, 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom_failure.h"
#include "loom.h"
#include "perf_autotune.h"
#include "perf_ceiling.h"
#include "perf_coll.h"
#include "perf_device.h"
#include "perf_launch.h"
#include "perf_opts.h"
#include "perf_peer.h"
#include "perf_plot.h"
#include "perf_results.h"
#include "perf_rounds.h"
#include "perf_table.h"
#include "perf_types.h"

/* ---- Error handling -------------------------------------------------------- */

static loomComm_t g_comm; /* set once the communicator exists */
static int g_rank = -1;
static const perf_launch_t *g_launch; /* for MPI_Abort under MPI */

/* "loom-perf: rank 0: loomMemAlloc failed: invalid usage: <Loom's text>":
 * the call's name (not its source text) and what Loom said. */
static void die_loom(const char *what, loomResult_t res) {
  bench_report_loom_failure("loom-perf", g_rank, what, res);
  if (g_comm != NULL)
    loomCommAbort(g_comm); /* make the peers fail fast instead of hanging */
  perf_launch_abort(g_launch, 1);
}

#define LOOMCHECK(call)                                                        \
  do {                                                                         \
    loomResult_t res_ = (call);                                                \
    if (res_ != loomSuccess)                                                   \
      die_loom(#call, res_);                                                   \
  } while (0)

static void out_of_memory(void) {
  fprintf(stderr, "loom-perf: rank %d: out of memory\n", g_rank);
  if (g_comm != NULL)
    loomCommAbort(g_comm);
  perf_launch_abort(g_launch, 1);
}

/* ---- The benchmark --------------------------------------------------------- */

typedef struct {
  opts_t o;
  loomComm_t comm;
  loomStream_t stream; /* -z: the calls' stream; NULL without -z */
  int rank, nranks;
  size_t tsize;
  void *send, *recv, *expect; /* sized for max_bytes, host memory */
  void *dsend, *drecv;        /* what the calls get: --device memory, else send, recv */
  int64_t sum_max;            /* input values for sum/avg stay in 0..sum_max */
  int reports;                /* mismatch lines printed by this rank */
  int same_clock;             /* every rank reads the same CLOCK_MONOTONIC */
  int nodes;                  /* distinct node ids (LOOM_HOSTID, else host/boot id) */
  int host_ranks;             /* ranks on rank 0's host */
  int rank1_same_host;        /* ranks 0 and 1 share a host */
  perf_results_t res;         /* rank 0: the rows */
  struct perf_ceiling *ceiling; /* --ceiling */
} bench_t;

/* Input element i of rank r.  Every value is a small integer chosen so that
 * every partial result is exact in every type, whatever the reduction order:
 * sums stay within type_info.exact_max, products are powers of two <= 64,
 * and for avg each pair of ranks adds +d and -d to a common base, so the sum
 * is exactly nranks*base and the average exactly base.  Collectives that
 * only move data get values 0..96, different for every rank and index. */
static int64_t input_value(const bench_t *b, int r, size_t i, unsigned seed) {
  uint64_t k = (uint64_t)i + seed, ur = (uint64_t)r;
  if (!coll_info[b->o.coll].reduces)
    return (int64_t)((ur * 31 + k * 7) % 97);
  switch (b->o.op) {
  case loomSum:
    return (int64_t)((k * 7 + ur * 3) % (uint64_t)(b->sum_max + 1));
  case loomProd:
    return (r < 6 && ((k >> r) & 1)) ? 2 : 1;
  case loomAvg: {
    if (b->sum_max < 2)
      return b->sum_max;
    int64_t base = 1 + (int64_t)(k % (uint64_t)(b->sum_max - 1));
    if ((b->nranks & 1) && r == b->nranks - 1)
      return base; /* the unpaired last rank */
    int64_t d = ((k + ur / 2) & 1) ? 1 : -1;
    return (r & 1) ? base - d : base + d;
  }
  default: { /* min, max: signed types get negative values too */
    int64_t v = (int64_t)((k * 31 + ur * 17) % 97);
    return type_info[b->o.type].is_signed ? v - 48 : v;
  }
  }
}

/* The reduction over all ranks of input element i. */
static int64_t reduced_value(const bench_t *b, size_t i, unsigned seed) {
  int64_t acc = input_value(b, 0, i, seed);
  for (int r = 1; r < b->nranks; r++) {
    int64_t v = input_value(b, r, i, seed);
    switch (b->o.op) {
    case loomProd: acc *= v; break;
    case loomMax: acc = v > acc ? v : acc; break;
    case loomMin: acc = v < acc ? v : acc; break;
    default: acc += v; break; /* sum, avg */
    }
  }
  if (b->o.op == loomAvg)
    acc /= b->nranks; /* exact by construction; truncating for integers */
  return acc;
}

/* Elements of this rank's send buffer and of its result, for a call with
 * count c (the count the API takes). */
static size_t send_elems(const bench_t *b, size_t c) {
  switch (b->o.coll) {
  case COLL_REDUCESCATTER: case COLL_ALLTOALL: case COLL_SCATTER:
    return c * (size_t)b->nranks;
  case COLL_BARRIER: return 0;
  default: return c;
  }
}

static size_t out_elems(const bench_t *b, size_t c) {
  switch (b->o.coll) {
  case COLL_ALLGATHER: case COLL_ALLTOALL: case COLL_GATHER:
    return c * (size_t)b->nranks;
  case COLL_BARRIER: return 0;
  default: return c;
  }
}

/* Whether this rank gets a result (reduce and gather: the root only). */
static int has_output(const bench_t *b) {
  if (b->o.coll == COLL_REDUCE || b->o.coll == COLL_GATHER)
    return b->rank == b->o.root;
  return b->o.coll != COLL_BARRIER;
}

/* In place, input and output share recv: the element offsets of this rank's
 * input and of its result there (the NCCL in-place rules). */
static size_t inplace_in_off(const bench_t *b, size_t c) {
  int at_rank = b->o.coll == COLL_ALLGATHER || b->o.coll == COLL_GATHER;
  return at_rank ? (size_t)b->rank * c : 0;
}

static size_t inplace_out_off(const bench_t *b, size_t c) {
  int at_rank = b->o.coll == COLL_REDUCESCATTER || b->o.coll == COLL_SCATTER;
  return at_rank ? (size_t)b->rank * c : 0;
}

/* Fills b->send with this rank's input and b->expect with the result this
 * rank should get.  Non-root ranks fill their send buffers of broadcast and
 * scatter too (with their own values), so that a root's data taken from
 * the wrong rank shows. */
static void prepare(bench_t *b, size_t c, unsigned seed) {
  loomDataType_t t = b->o.type;
  size_t n = (size_t)b->nranks, me = (size_t)b->rank, root = (size_t)b->o.root;
  size_t ns = send_elems(b, c), no = out_elems(b, c);
  for (size_t i = 0; i < ns; i++)
    store_value(t, b->send, i, input_value(b, b->rank, i, seed));
  if (!has_output(b))
    return;
  for (size_t j = 0; j < no; j++) {
    int64_t v = 0;
    switch (b->o.coll) {
    case COLL_ALLREDUCE: case COLL_REDUCE: v = reduced_value(b, j, seed); break;
    case COLL_REDUCESCATTER: v = reduced_value(b, me * c + j, seed); break;
    case COLL_ALLGATHER: case COLL_GATHER: v = input_value(b, (int)(j / c), j % c, seed); break;
    case COLL_BROADCAST: v = input_value(b, (int)root, j, seed); break;
    case COLL_ALLTOALL: v = input_value(b, (int)(j / c), me * c + j % c, seed); break;
    case COLL_SCATTER: v = input_value(b, (int)root, me * c + j, seed); break;
    case COLL_SENDRECV: v = input_value(b, (int)((me + n - 1) % n), j, seed); break;
    default: break;
    }
    store_value(t, b->expect, j, v);
  }
}

/* One call of the collective with count c, out of place (send -> recv) or
 * in place (within recv), on b->stream. */
static void run_coll(bench_t *b, size_t c, int in_place) {
  const char *s = b->dsend;
  char *r = b->drecv;
  if (in_place) {
    s = r + inplace_in_off(b, c) * b->tsize;
    r += inplace_out_off(b, c) * b->tsize;
  }
  loomDataType_t t = b->o.type;
  loomRedOp_t op = b->o.op;
  int root = b->o.root, n = b->nranks;
  loomComm_t comm = b->comm;
  loomStream_t st = b->stream;
  switch (b->o.coll) {
  case COLL_ALLREDUCE: LOOMCHECK(loomAllReduce(s, r, c, t, op, comm, st)); break;
  case COLL_ALLGATHER: LOOMCHECK(loomAllGather(s, r, c, t, comm, st)); break;
  case COLL_REDUCESCATTER: LOOMCHECK(loomReduceScatter(s, r, c, t, op, comm, st)); break;
  case COLL_BROADCAST: LOOMCHECK(loomBroadcast(s, r, c, t, root, comm, st)); break;
  case COLL_REDUCE: LOOMCHECK(loomReduce(s, r, c, t, op, root, comm, st)); break;
  case COLL_ALLTOALL: LOOMCHECK(loomAllToAll(s, r, c, t, comm, st)); break;
  case COLL_GATHER: LOOMCHECK(loomGather(s, r, c, t, root, comm, st)); break;
  case COLL_SCATTER: LOOMCHECK(loomScatter(s, r, c, t, root, comm, st)); break;
  case COLL_SENDRECV:
    LOOMCHECK(loomGroupStart());
    LOOMCHECK(loomSend(s, c, t, (b->rank + 1) % n, comm, st));
    LOOMCHECK(loomRecv(r, c, t, (b->rank + n - 1) % n, comm, st));
    LOOMCHECK(loomGroupEnd());
    break;
  case COLL_BARRIER: LOOMCHECK(loomBarrier(comm, st)); break;
  default: break;
  }
}

/* Waits for the calls queued on b->stream (-z); an error among them ends
 * the run, as any Loom error does. */
static void complete(bench_t *b) {
  if (b->stream != NULL)
    LOOMCHECK(loomStreamSynchronize(b->stream));
}

/* One timed iteration: -m calls in one loomGroupStart/End (one call
 * without -m); with -z 1 the stream is synchronised after it. */
static void run_batch(bench_t *b, size_t c, int in_place) {
  int agg = b->o.agg_iters;
  if (agg > 1)
    LOOMCHECK(loomGroupStart());
  for (int k = 0; k < agg; k++)
    run_coll(b, c, in_place);
  if (agg > 1)
    LOOMCHECK(loomGroupEnd());
  if (b->o.blocking == 1)
    complete(b);
}

/* --peer mpi: `calls` out-of-place calls of MPI's matching collective. */
static void run_peer(bench_t *b, size_t c, int calls) {
  struct perf_peer_call pc = {.coll = b->o.coll,
                              .type = b->o.type,
                              .op = b->o.op,
                              .root = b->o.root,
                              .rank = b->rank,
                              .nranks = b->nranks,
                              .count = c,
                              .send = b->send,
                              .recv = b->recv};
  for (int k = 0; k < calls; k++)
    perf_peer_run(&pc);
}

/* -G: T all-reduces of c elements each (tensor k at element k*c of send
 * and recv), issued in one group or one by one, or one all-reduce of the
 * T*c elements. */
enum { FUSE_GROUPED, FUSE_SEPARATE, FUSE_SINGLE, FUSE_WAYS };
static const char *const fuse_names[FUSE_WAYS] = {"grouped", "separate", "single call"};

static void run_fused(bench_t *b, size_t c, int how) {
  const char *s = b->dsend;
  char *r = b->drecv;
  size_t step = c * b->tsize;
  if (how == FUSE_SINGLE) {
    LOOMCHECK(loomAllReduce(s, r, c * (size_t)b->o.group, b->o.type, b->o.op, b->comm, NULL));
    return;
  }
  if (how == FUSE_GROUPED)
    LOOMCHECK(loomGroupStart());
  for (int i = 0; i < b->o.group; i++) {
    /* In issue order the tensors follow each other in memory, which Loom
     * fuses without copies; -R reverses the order so fusion must copy. */
    int k = how == FUSE_GROUPED && b->o.reverse ? b->o.group - 1 - i : i;
    LOOMCHECK(loomAllReduce(s + (size_t)k * step, r + (size_t)k * step, c, b->o.type,
                            b->o.op, b->comm, NULL));
  }
  if (how == FUSE_GROUPED)
    LOOMCHECK(loomGroupEnd());
}

typedef void (*run_fn)(bench_t *b, size_t c, int arg);

static int64_t sum_over_ranks(bench_t *b, int64_t v) {
  LOOMCHECK(loomAllReduce(&v, &v, 1, loomInt64, loomSum, b->comm, NULL));
  return v;
}

/* The elements of out (nelem) that differ from b->expect; the first is
 * reported on stderr (at most 10 reports per rank). */
static int64_t count_wrong(bench_t *b, const void *out, size_t nelem, size_t c,
                           const char *how) {
  int64_t wrong = 0;
  for (size_t i = 0; i < nelem; i++) {
    if (elem_equal(b->o.type, out, b->expect, i))
      continue;
    if (wrong++ == 0 && b->reports < 10) {
      char got[64], want[64], root[32] = "";
      format_value(b->o.type, out, i, got, sizeof got);
      format_value(b->o.type, b->expect, i, want, sizeof want);
      if (coll_info[b->o.coll].rooted)
        snprintf(root, sizeof root, " root %d", b->o.root);
      fprintf(stderr,
              "loom-perf: rank %d: %s %s %s%s count %zu (%s): element %zu is %s, expected %s\n",
              b->rank, coll_info[b->o.coll].name, type_info[b->o.type].name,
              coll_info[b->o.coll].reduces ? op_names[b->o.op] : "-", root, c, how, i, got,
              want);
      b->reports++;
    }
  }
  return wrong;
}

enum { CHECK_OOP, CHECK_INPLACE, CHECK_PEER };

/* One checked run; returns the number of wrong elements over all ranks.
 * Out of place Loom runs a whole -m group (every call must give the same
 * result), in place one call (each call consumes its input); CHECK_PEER
 * runs MPI's call once. */
static int64_t check_once(bench_t *b, size_t c, int how) {
  int in_place = how == CHECK_INPLACE;
  size_t ts = b->tsize, ns = send_elems(b, c), no = out_elems(b, c);
  size_t span = in_place && ns > no ? ns : no, out_off = 0;
  memset(b->recv, 0x7f, span * ts); /* poison: not a value any check expects */
  if (in_place) {
    memcpy((char *)b->recv + inplace_in_off(b, c) * ts, b->send, ns * ts);
    out_off = inplace_out_off(b, c);
  }
  LOOMCHECK(perf_device_copy(b->dsend, b->send, ns * ts));
  LOOMCHECK(perf_device_copy(b->drecv, b->recv, span * ts));
  if (how == CHECK_PEER)
    run_peer(b, c, 1);
  else if (in_place)
    run_coll(b, c, 1);
  else
    run_batch(b, c, 0);
  complete(b);
  if (how != CHECK_PEER)
    LOOMCHECK(perf_device_copy(b->recv, b->drecv, span * ts));
  /* MPI_Bcast leaves the root's receive buffer alone (its data is sent
   * from the send buffer): nothing to check there. */
  int output = has_output(b) &&
               !(how == CHECK_PEER && b->o.coll == COLL_BROADCAST && b->rank == b->o.root);
  int64_t wrong = 0;
  if (output)
    wrong = count_wrong(b, (char *)b->recv + out_off * ts, no, c,
                        how == CHECK_PEER ? "MPI, out of place"
                        : in_place        ? "in place"
                                          : "out of place");
  return sum_over_ranks(b, wrong);
}

/* -G: one checked run of T calls of c elements (or of the single call). */
static int64_t check_fused(bench_t *b, size_t c, int how) {
  size_t nelem = c * (size_t)b->o.group;
  memset(b->recv, 0x7f, nelem * b->tsize);
  LOOMCHECK(perf_device_copy(b->dsend, b->send, nelem * b->tsize));
  LOOMCHECK(perf_device_copy(b->drecv, b->recv, nelem * b->tsize));
  run_fused(b, c, how);
  LOOMCHECK(perf_device_copy(b->recv, b->drecv, nelem * b->tsize));
  return sum_over_ranks(b, count_wrong(b, b->recv, nelem, c, fuse_names[how]));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The barrier's check: in every round one rank enters 2 ms late, and no
 * rank may leave before the last one entered.  Every rank stamps its entry
 * and exit on CLOCK_MONOTONIC, which ranks of one host share; elsewhere
 * the check is skipped (returns -1).  Returns the failed rounds. */
static int64_t check_barrier(bench_t *b) {
  if (!b->same_clock)
    return -1;
  int rounds = b->nranks < 4 ? b->nranks : 4;
  int64_t wrong = 0;
  for (int k = 0; k < rounds; k++) {
    int late = rounds > 1 ? k * (b->nranks - 1) / (rounds - 1) : 0;
    int32_t token = 0;
    LOOMCHECK(loomAllReduce(&token, &token, 1, loomInt32, loomSum, b->comm, NULL));
    if (b->rank == late) {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = 2000000};
      nanosleep(&ts, NULL);
    }
    double t[2];
    t[0] = now_s();
    LOOMCHECK(loomBarrier(b->comm, NULL));
    t[1] = -now_s();
    LOOMCHECK(loomAllReduce(t, t, 2, loomFloat64, loomMax, b->comm, NULL));
    if (-t[1] < t[0]) { /* the first exit came before the last entry */
      wrong++;
      if (b->rank == 0)
        fprintf(stderr, "loom-perf: barrier round %d: a rank left %.1f us before rank %d "
                "(or another) entered\n", k, (t[0] + t[1]) * 1e6, late);
    }
  }
  return wrong;
}

/* This rank's time per call, combined over the ranks as -a says. */
static double combine_time(bench_t *b, double us) {
  switch (b->o.average) {
  case AVG_RANK0:
    LOOMCHECK(loomBroadcast(&us, &us, 1, loomFloat64, 0, b->comm, NULL));
    return us;
  case AVG_MEAN:
    LOOMCHECK(loomAllReduce(&us, &us, 1, loomFloat64, loomSum, b->comm, NULL));
    return us / b->nranks;
  case AVG_MIN:
    LOOMCHECK(loomAllReduce(&us, &us, 1, loomFloat64, loomMin, b->comm, NULL));
    return us;
  default:
    LOOMCHECK(loomAllReduce(&us, &us, 1, loomFloat64, loomMax, b->comm, NULL));
    return us;
  }
}

/* Microseconds per call: -n iterations of fn (each `calls` calls), the
 * stream synchronised at the end, combined over the ranks (-a). */
static double time_run(bench_t *b, run_fn fn, size_t c, int arg, int calls) {
  int32_t token = 0;
  LOOMCHECK(loomAllReduce(&token, &token, 1, loomInt32, loomSum, b->comm, NULL)); /* barrier */
  double t0 = now_s();
  for (int it = 0; it < b->o.iters; it++)
    fn(b, c, arg);
  complete(b);
  double us = (now_s() - t0) * 1e6 / b->o.iters / calls;
  return combine_time(b, us);
}

/* --percentiles: each of the -n iterations timed on its own (the stream
 * synchronised in it), its time per call kept; this rank's median and
 * 99th percentile, each combined over the ranks (-a), in p[0] and p[1].
 * Returns the mean per call, combined. */
static double time_each(bench_t *b, run_fn fn, size_t c, int arg, int calls, double p[2]) {
  int n = b->o.iters;
  double *each = malloc(sizeof(double) * (size_t)n);
  if (each == NULL)
    out_of_memory();
  int32_t token = 0;
  LOOMCHECK(loomAllReduce(&token, &token, 1, loomInt32, loomSum, b->comm, NULL)); /* barrier */
  double total = 0;
  for (int it = 0; it < n; it++) {
    double t0 = now_s();
    fn(b, c, arg);
    complete(b);
    each[it] = (now_s() - t0) * 1e6 / calls;
    total += each[it];
  }
  p[0] = combine_time(b, perf_percentile(each, n, 50));
  p[1] = combine_time(b, perf_percentile(each, n, 99));
  free(each);
  return combine_time(b, total / n);
}

/* A measurement as the table and the outputs show it; bytes == 0: no
 * bandwidth (barrier).  p: --percentiles' p50 and p99, or NULL. */
static perf_meas_t measured(double us, size_t bytes, double factor, int64_t wrong,
                            const double *p) {
  perf_meas_t m = {us, -1, -1, wrong, us, us, -1, -1, -1, -1};
  if (bytes > 0) {
    m.algbw_gbs = (double)bytes / (us * 1e3); /* bytes/us/1e3 = GB/s */
    m.busbw_gbs = m.busbw_min_gbs = m.busbw_max_gbs = m.algbw_gbs * factor;
  }
  if (p != NULL) {
    m.p50_us = p[0];
    m.p99_us = p[1];
  }
  return m;
}

/* A timed run of -n iterations of fn as measured() makes it: the mean per
 * call, and with --percentiles its p50 and p99. */
static perf_meas_t timed(bench_t *b, run_fn fn, size_t c, int arg, int calls, size_t bytes,
                         double factor, int64_t wrong) {
  if (!b->o.percentiles)
    return measured(time_run(b, fn, c, arg, calls), bytes, factor, wrong, NULL);
  double p[2];
  double us = time_each(b, fn, c, arg, calls, p);
  return measured(us, bytes, factor, wrong, p);
}

/* Reads this host's boot id (its CLOCK_MONOTONIC) into out; "" if none. */
static void clock_id(char *out, size_t len) {
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (fgets(boot, sizeof boot, f) == NULL)
      boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  snprintf(out, len, "%s/%s", host, boot);
}

enum { INFO = 128, CLOCK = 128, NODE = 128, HOST_RECORD = INFO + CLOCK + NODE };

/* Every rank's "Pid ... on host", clock identity (host/boot id) and node
 * identity (LOOM_HOSTID when set, as Loom groups ranks; else the clock's):
 * from them, whether all share one clock, the number of nodes, the ranks
 * on rank 0's machine and whether rank 1 is there.  Returns the gathered
 * records (nranks x HOST_RECORD), to free. */
static char *gather_hosts(bench_t *b) {
  char mine[HOST_RECORD] = {0}, host[64] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(mine, INFO, "Pid %6ld on %s", (long)getpid(), host);
  clock_id(mine + INFO, CLOCK);
  const char *hostid = getenv("LOOM_HOSTID");
  const char *node = hostid && *hostid ? hostid : mine + INFO;
  memcpy(mine + INFO + CLOCK, node, strnlen(node, NODE - 1)); /* mine is zeroed */
  char *all = calloc((size_t)b->nranks, HOST_RECORD);
  if (all == NULL)
    out_of_memory();
  LOOMCHECK(loomAllGather(mine, all, HOST_RECORD, loomUint8, b->comm, NULL));
  b->same_clock = 1;
  b->nodes = 0;
  b->host_ranks = 0;
  for (int r = 0; r < b->nranks; r++) {
    const char *rec = all + (size_t)r * HOST_RECORD;
    int seen = 0;
    for (int q = 0; q < r && !seen; q++)
      seen = strncmp(rec + INFO + CLOCK, all + (size_t)q * HOST_RECORD + INFO + CLOCK, NODE) == 0;
    b->nodes += !seen;
    if (strncmp(rec + INFO, all + INFO, CLOCK) == 0)
      b->host_ranks++;
    else
      b->same_clock = 0;
  }
  b->rank1_same_host =
      b->nranks > 1 && strncmp(all + HOST_RECORD + INFO, all + INFO, CLOCK) == 0;
  return all;
}

static void print_header(bench_t *b, const char *hosts, const perf_launch_t *l) {
  if (b->rank != 0)
    return;
  const opts_t *o = &b->o;
  int lib = 0;
  LOOMCHECK(loomGetVersion(&lib));
  char what[160];
  if (o->group > 0)
    snprintf(what, sizeof what, "allreduce, -G %d: %d calls of size/%d bytes per iteration",
             o->group, o->group, o->group);
  else if (coll_info[o->coll].rooted)
    snprintf(what, sizeof what, "%s, root %d", coll_info[o->coll].name, o->root);
  else
    snprintf(what, sizeof what, "%s", coll_info[o->coll].name);
  printf("# loom-perf: %s, Loom library %d.%d.%d (header %d.%d.%d), launcher %s, "
         "rendezvous %s\n", what, lib / 10000, lib / 100 % 100, lib % 100, LOOM_MAJOR,
         LOOM_MINOR, LOOM_PATCH, l->launcher, l->rendezvous);
  printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
         "validation: %d\n",
         b->nranks, o->min_bytes, o->max_bytes,
         o->step_factor > 1 ? o->step_factor : o->step_bytes,
         o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
  printf("# agg iters: %d  time across ranks (-a): %s  blocking (-z): %s\n", o->agg_iters,
         perf_average_name(o->average),
         o->blocking < 0 ? "no stream (calls run on this thread)"
         : o->blocking ? "1 (stream synchronized after every call)"
                       : "0 (stream synchronized once per -n iterations)");
  if (o->device == loomDeviceHost && o->loom_mem)
    printf("# buffers: host memory of loomMemAlloc (--mem loom)%s\n",
           o->peer_mpi ? "; the MPI peer runs on malloc'd buffers" : "");
  if (o->device != loomDeviceHost)
    printf("# buffers: %s device memory (--device)%s\n",
           o->device == loomDeviceSim ? "sim" : "cuda",
           o->peer_mpi ? "; the MPI peer runs on host buffers" : "");
  printf("#\n# Using ranks\n");
  for (int r = 0; r < b->nranks; r++)
    printf("#  Rank %2d %.*s\n", r, INFO - 1, hosts + (size_t)r * HOST_RECORD);
  printf("#\n");
  if (o->group > 0) {
    printf("# size: the bytes of all %d calls together; count: elements per call;\n"
           "# grouped: %d calls in one loomGroupStart/End (fused into buckets of\n"
           "# LOOM_BUCKET_BYTES); separate: %d calls one by one; single: one call of\n"
           "# the whole size; #wrong counts all three\n#\n",
           o->group, o->group, o->group);
    printf("#%45s%-25s%-25s%s\n", "", "grouped", "separate", "single call");
    printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %7s  %6s  %6s  %7s  %6s  %6s  %6s\n",
           "size", "count", "type", "redop", "time", "algbw", "busbw", "time", "algbw",
           "busbw", "time", "algbw", "busbw", "#wrong");
    printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %7s  %6s  %6s  %7s  %6s  %6s  %6s\n",
           "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)", "(GB/s)",
           "(GB/s)", "(us)", "(GB/s)", "(GB/s)", "");
  } else if (o->rounds == 1) { /* with rounds, after the rounds' progress lines */
    perf_table_heads(o);
  }
  fflush(stdout);
}

static void record_row(bench_t *b, const perf_row_t *row) {
  if (b->rank == 0 && perf_results_add(&b->res, row) != 0)
    out_of_memory();
}

/* --peer mpi at count c: checked once, then -w warm-up and -n timed
 * iterations of -m calls each. */
static void measure_peer(bench_t *b, size_t c, double factor, size_t bytes, totals_t *tot,
                         perf_row_t *row) {
  int64_t wrong = -1;
  if (b->o.check && b->o.coll != COLL_BARRIER) {
    wrong = check_once(b, c, CHECK_PEER);
    tot->wrong += wrong;
  }
  for (int w = 0; w < b->o.warmup; w++)
    run_peer(b, c, b->o.agg_iters);
  row->peer = timed(b, run_peer, c, b->o.agg_iters, b->o.agg_iters, bytes, factor, wrong);
  row->has_peer = 1;
}

/* Rank 0: the row's line, kept for --json, --csv and --plot. */
static void print_row(bench_t *b, totals_t *tot, const perf_row_t *row) {
  if (b->rank != 0)
    return;
  const opts_t *o = &b->o;
  int barrier = o->coll == COLL_BARRIER;
  const char *redop = coll_info[o->coll].reduces ? op_names[o->op] : "none";
  perf_table_row(o, tot, row, barrier ? "none" : type_info[o->type].name, redop);
  record_row(b, row);
}

/* One size of the sweep: the size column and the count of a call. */
typedef struct {
  size_t bytes, count;
} sweep_size_t;

/* The sweep's sizes whose count is not 0 (barrier: one size, 0 bytes);
 * the count in *n. */
static sweep_size_t *sweep_sizes(bench_t *b, int *n) {
  const opts_t *o = &b->o;
  size_t per_rank = coll_info[o->coll].per_rank ? (size_t)b->nranks : 1;
  sweep_size_t *sizes = NULL;
  *n = 0;
  for (size_t bytes = o->min_bytes;;) {
    size_t count = o->coll == COLL_BARRIER ? 0 : bytes / b->tsize / per_rank;
    if (count > 0 || (o->coll == COLL_BARRIER && *n == 0)) {
      sweep_size_t *grown = realloc(sizes, (size_t)(*n + 1) * sizeof *sizes);
      if (grown == NULL)
        out_of_memory();
      sizes = grown;
      sizes[(*n)++] = (sweep_size_t){count * b->tsize * per_rank, count};
    }
    if (o->coll == COLL_BARRIER || !perf_next_size(o, &bytes))
      return sizes;
  }
}

/* Loom at one size: checked out of place and in place (-c 1), then -w
 * warm-up iterations and -n timed ones of each form.  Barrier: its own
 * check, latency only. */
static void measure_loom(bench_t *b, const sweep_size_t *sz, unsigned seed, totals_t *tot,
                         perf_row_t *row) {
  const opts_t *o = &b->o;
  const coll_t coll = o->coll;
  const int agg = o->agg_iters;
  double factor = bus_factor(coll, b->nranks);
  size_t count = sz->count;
  *row = (perf_row_t){.bytes = sz->bytes, .count = count, .mem_gbs = -1, .tcp_gbs = -1};
  int64_t wrong_oop = -1, wrong_ip = -1;
  if (coll == COLL_BARRIER) {
    wrong_oop = o->check ? check_barrier(b) : -1;
    tot->wrong += wrong_oop > 0 ? wrong_oop : 0;
  } else if (o->check) {
    prepare(b, count, seed);
    wrong_oop = check_once(b, count, CHECK_OOP);
    tot->wrong += wrong_oop;
    if (coll_info[coll].check_inplace) {
      wrong_ip = check_once(b, count, CHECK_INPLACE);
      tot->wrong += wrong_ip;
    }
  }
  for (int w = 0; w < o->warmup; w++)
    run_batch(b, count, 0);
  row->oop = timed(b, run_batch, count, 0, agg, sz->bytes, factor, wrong_oop);
  if (coll_info[coll].in_place) {
    row->ip = timed(b, run_batch, count, 1, agg, sz->bytes, factor, wrong_ip);
    row->has_ip = 1;
  }
}

/* --ceiling at the row's size. */
static void measure_ceiling(bench_t *b, totals_t *tot, perf_row_t *row) {
  if (b->ceiling == NULL)
    return;
  long long cw = 0;
  LOOMCHECK(perf_ceiling_measure(b->ceiling, row->bytes, &row->mem_gbs, &row->tcp_gbs, &cw));
  tot->wrong += cw;
}

/* --rounds N > 1: each round sweeps every size with Loom (and the
 * ceilings), then with the peer, so that a change in the machine's speed
 * during the run hits both alike; then one line per size of the rounds'
 * medians (perf_rounds.c).  Rank 0 keeps every round's rows for --json. */
static void sweep_rounds(bench_t *b, const sweep_size_t *sizes, int n, totals_t *tot) {
  const opts_t *o = &b->o;
  perf_row_t *all = calloc((size_t)o->rounds * (size_t)n, sizeof *all);
  if (all == NULL)
    out_of_memory();
  double factor = bus_factor(o->coll, b->nranks);
  unsigned seed = 0;
  for (int k = 0; k < o->rounds; k++) {
    perf_row_t *rows = all + (size_t)k * (size_t)n;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
      measure_loom(b, &sizes[i], seed++, tot, &rows[i]);
      measure_ceiling(b, tot, &rows[i]);
    }
    double t1 = now_s();
    for (int i = 0; o->peer_mpi && i < n; i++) {
      if (o->check && o->coll != COLL_BARRIER)
        prepare(b, sizes[i].count, seed++); /* the reference MPI's result is checked against */
      measure_peer(b, sizes[i].count, factor, sizes[i].bytes, tot, &rows[i]);
    }
    if (b->rank == 0) {
      printf("# round %d of %d: Loom%s %.2f s", k + 1, o->rounds, o->ceiling ? " and ceilings" : "",
             t1 - t0);
      if (o->peer_mpi)
        printf(", MPI %.2f s", now_s() - t1);
      printf("\n");
      fflush(stdout);
    }
  }
  if (b->rank == 0)
    perf_table_heads(o);
  for (int i = 0; i < n; i++) {
    perf_row_t row;
    perf_rounds_fold(all, o->rounds, n, i, &row);
    print_row(b, tot, &row);
  }
  if (b->rank == 0)
    b->res.round_rows = all;
  else
    free(all);
}

/* The usual sweep: one row per size, Loom out of place then in place,
 * then the peer and the ceilings when asked for; --rounds N > 1:
 * sweep_rounds. */
static void sweep(bench_t *b, totals_t *tot) {
  int n = 0;
  sweep_size_t *sizes = sweep_sizes(b, &n);
  double factor = bus_factor(b->o.coll, b->nranks);
  for (int i = 0; b->o.rounds == 1 && i < n; i++) {
    perf_row_t row;
    measure_loom(b, &sizes[i], (unsigned)i, tot, &row);
    if (b->o.peer_mpi)
      measure_peer(b, sizes[i].count, factor, sizes[i].bytes, tot, &row);
    measure_ceiling(b, tot, &row);
    print_row(b, tot, &row);
  }
  if (b->o.rounds > 1)
    sweep_rounds(b, sizes, n, tot);
  free(sizes);
}

/* -G T: one row per size: T grouped calls, T separate calls, one call. */
static void sweep_grouped(bench_t *b, totals_t *tot) {
  const opts_t *o = &b->o;
  size_t calls = (size_t)o->group;
  double factor = bus_factor(COLL_ALLREDUCE, b->nranks);
  unsigned seed = 0;
  for (size_t bytes = o->min_bytes;;) {
    size_t count = bytes / calls / b->tsize; /* per call */
    size_t total = count * calls * b->tsize;
    if (count > 0) {
      int64_t wrong = -1;
      if (o->check) {
        prepare(b, count * calls, seed++);
        wrong = 0;
        for (int how = 0; how < FUSE_WAYS; how++)
          wrong += check_fused(b, count, how);
        tot->wrong += wrong;
      }
      double us[FUSE_WAYS];
      for (int how = 0; how < FUSE_WAYS; how++) {
        for (int w = 0; w < o->warmup; w++)
          run_fused(b, count, how);
        us[how] = time_run(b, run_fused, count, how, 1);
      }
      if (b->rank == 0) {
        printf("%12zu  %12zu  %8s  %6s", total, count, type_info[o->type].name,
               op_names[o->op]);
        for (int how = 0; how < FUSE_WAYS; how++) {
          perf_meas_t m = measured(us[how], total, factor, 0, NULL);
          perf_table_result(tot, &m, 0);
        }
        char wstr[32];
        perf_fmt_wrong(wstr, sizeof wstr, wrong);
        printf("  %6s\n", wstr);
        fflush(stdout);
      }
    }
    if (!perf_next_size(o, &bytes))
      break;
  }
}

/* --autotune's measurement (perf_sample in perf_autotune.h): checked like
 * the sweep, then timed out of place. */
static int autotune_measure(void *ctx, loomComm_t comm, const char *coll, size_t bytes,
                            struct perf_sample *s) {
  bench_t *b = ctx;
  static unsigned seed;
  coll_t k = COLL_ALLREDUCE;
  (void)coll_by_name(coll, &k);
  int per_rank = coll_info[k].per_rank;
  size_t count = bytes / b->tsize / (per_rank ? (size_t)b->nranks : 1);
  if (count == 0)
    return 1;
  loomComm_t parent = b->comm;
  b->comm = comm;
  b->o.coll = k;
  s->bytes = count * b->tsize * (per_rank ? (size_t)b->nranks : 1);
  s->wrong = -1;
  if (b->o.check) {
    prepare(b, count, seed++);
    s->wrong = check_once(b, count, CHECK_OOP) + check_once(b, count, CHECK_INPLACE);
  }
  for (int w = 0; w < b->o.warmup; w++)
    run_coll(b, count, 0);
  s->us = time_run(b, run_coll, count, 0, 1);
  b->comm = parent;
  return 0;
}

/* --autotune FILE: the sweep's sizes and autotune_measure, lent to
 * perf_autotune_run; returns the exit status. */
static int autotune(bench_t *b, int argc, char **argv) {
  size_t *sizes = NULL, bytes = b->o.min_bytes;
  int n = 0;
  do {
    size_t *grown = realloc(sizes, (size_t)(n + 1) * sizeof *sizes);
    if (grown == NULL)
      out_of_memory();
    sizes = grown;
    sizes[n++] = bytes;
  } while (perf_next_size(&b->o, &bytes));
  struct perf_autotune a = {.file = b->o.autotune,
                            .colls = b->o.autotune_colls,
                            .comm = b->comm,
                            .rank = b->rank,
                            .nranks = b->nranks,
                            .sizes = sizes,
                            .nsizes = n,
                            .iters = b->o.iters,
                            .warmup = b->o.warmup,
                            .rounds = b->o.rounds,
                            .argc = argc,
                            .argv = argv,
                            .measure = autotune_measure,
                            .ctx = b};
  int status = perf_autotune_run(&a);
  free(sizes);
  return status;
}

static void *alloc_buf(size_t bytes) {
  size_t align = 4096, rounded = (bytes + align - 1) / align * align;
  void *p = aligned_alloc(align, rounded ? rounded : align);
  if (p == NULL) {
    fprintf(stderr, "loom-perf: rank %d: cannot allocate %zu bytes\n", g_rank, bytes);
    perf_launch_abort(g_launch, 1);
  }
  return p;
}

/* Rank 0 opens --json and --csv and finds gnuplot for --plot before the
 * sweep, and every rank learns whether that worked. */
static int open_outputs(bench_t *b, FILE **json, FILE **csv) {
  int32_t ok = 1;
  if (b->rank == 0) {
    if (b->o.json != NULL && (*json = perf_output_open(b->o.json)) == NULL)
      ok = 0;
    if (ok && b->o.csv != NULL && (*csv = perf_output_open(b->o.csv)) == NULL)
      ok = 0;
    if (ok && b->o.plot != NULL && !perf_plot_available())
      ok = 0;
  }
  LOOMCHECK(loomAllReduce(&ok, &ok, 1, loomInt32, loomMin, b->comm, NULL));
  return ok;
}

static void open_ceiling(bench_t *b) {
  struct perf_ceiling_cfg cfg = {.comm = b->comm,
                                 .rank = b->rank,
                                 .nranks = b->nranks,
                                 .host_ranks = b->host_ranks,
                                 .rank1_same_host = b->rank1_same_host,
                                 .coll = b->o.coll,
                                 .max_bytes = b->o.max_bytes,
                                 .iters = b->o.iters,
                                 .warmup = b->o.warmup,
                                 .check = b->o.check};
  LOOMCHECK(perf_ceiling_open(&cfg, &b->ceiling));
}

/* The peak of one ceiling column, for the summary. */
static void print_ceiling_peak(const perf_results_t *res, int tcp, const char *label,
                               const char *what) {
  double peak = -1;
  size_t at = 0;
  for (int i = 0; i < res->nrows; i++) {
    double v = tcp ? res->rows[i].tcp_gbs : res->rows[i].mem_gbs;
    if (v > peak) {
      peak = v;
      at = res->rows[i].bytes;
    }
  }
  if (peak >= 0)
    printf("# %s: %s; peak %.2f GB/s at %zu bytes\n", label, what, peak, at);
  else
    printf("# %s: %s\n", label, what);
}

static void print_summary(bench_t *b, const totals_t *tot) {
  printf("# Out of bounds values : %lld %s\n", (long long)tot->wrong,
         tot->wrong ? "FAILED" : "OK");
  if (tot->bw_count > 0)
    printf("# Avg bus bandwidth    : %g \n", tot->bw_sum / tot->bw_count);
  else
    printf("# Avg bus bandwidth    : N/A \n");
  if (b->ceiling != NULL) {
    print_ceiling_peak(&b->res, 0, "Memory ceiling", perf_ceiling_mem_what(b->ceiling));
    print_ceiling_peak(&b->res, 1, "TCP ceiling   ", perf_ceiling_tcp_what(b->ceiling));
  }
  printf("#\n");
  fflush(stdout);
}

/* Rank 0: the run's description, then --json and --csv; 0 or -1. */
static int write_outputs(bench_t *b, const totals_t *tot, const perf_launch_t *l, FILE *json,
                         FILE *csv) {
  perf_results_t *r = &b->res;
  const opts_t *o = &b->o;
  int lib = 0;
  LOOMCHECK(loomGetVersion(&lib));
  snprintf(r->version, sizeof r->version, "%d.%d.%d", lib / 10000, lib / 100 % 100, lib % 100);
  r->collective = coll_info[o->coll].name;
  r->datatype = type_info[o->type].name;
  r->op = coll_info[o->coll].reduces ? op_names[o->op] : "none";
  r->launcher = l->launcher;
  r->nranks = b->nranks;
  r->nodes = b->nodes;
  r->root = o->root;
  r->iters = o->iters;
  r->warmup = o->warmup;
  r->agg_iters = o->agg_iters;
  r->average = o->average;
  r->blocking = o->blocking;
  r->peer_mpi = o->peer_mpi;
  r->ceiling = o->ceiling;
  r->rounds = o->rounds;
  r->percentiles = o->percentiles;
  r->avg_busbw_gbs = tot->bw_count > 0 ? tot->bw_sum / tot->bw_count : -1;
  if (b->ceiling != NULL) {
    snprintf(r->mem_what, sizeof r->mem_what, "%s", perf_ceiling_mem_what(b->ceiling));
    snprintf(r->tcp_what, sizeof r->tcp_what, "%s", perf_ceiling_tcp_what(b->ceiling));
  }
  int status = 0;
  if (json != NULL && perf_write_json(r, json, o->json) != 0)
    status = -1;
  if (csv != NULL && perf_write_csv(r, csv, o->csv) != 0)
    status = -1;
  return status;
}

int main(int argc, char **argv) {
  bench_t b = {0};
  perf_parse_args(argc, argv, &b.o);
  const opts_t *o = &b.o;

  perf_launch_t launch;
  perf_launch_start(&argc, &argv, o->peer_mpi, &launch);
  g_launch = &launch;
  b.rank = g_rank = launch.rank;
  b.nranks = launch.nranks;
  const char *bad = NULL;
  char msg[96];
  if (o->autotune != NULL && b.nranks < 2)
    bad = "--autotune needs 2 or more ranks (one rank has nothing to choose)";
  if ((coll_info[o->coll].rooted || o->autotune) && o->root >= b.nranks) {
    snprintf(msg, sizeof msg, "root %d is not a rank (there are %d)", o->root, b.nranks);
    bad = msg;
  }
  if (bad != NULL) { /* every rank says it */
    fprintf(stderr, "loom-perf: %s\n(loom-perf -h lists the options)\n", bad);
    perf_launch_end(&launch);
    return 2;
  }

  loomUniqueId id;
  LOOMCHECK(perf_launch_unique_id(&launch, &id));
  LOOMCHECK(loomCommInitRank(&b.comm, b.nranks, id, b.rank));
  g_comm = b.comm;
  int n = 0, r = 0;
  LOOMCHECK(loomCommCount(b.comm, &n));
  LOOMCHECK(loomCommUserRank(b.comm, &r));
  if (n != b.nranks || r != b.rank) {
    fprintf(stderr, "loom-perf: rank %d: communicator says rank %d of %d, launcher says %d of %d\n",
            b.rank, r, n, b.rank, b.nranks);
    loomCommAbort(b.comm);
    perf_launch_abort(&launch, 1);
  }
  FILE *json = NULL, *csv = NULL;
  if (!open_outputs(&b, &json, &csv)) { /* rank 0 said why */
    LOOMCHECK(loomCommFinalize(b.comm));
    LOOMCHECK(loomCommDestroy(b.comm));
    perf_launch_end(&launch);
    return 1;
  }
  if (o->blocking != BLOCKING_NO_STREAM)
    LOOMCHECK(loomStreamCreateOnDevice(&b.stream, o->device));

  b.tsize = type_info[o->type].size;
  int64_t m = type_info[o->type].exact_max / b.nranks;
  b.sum_max = m < 7 ? m : 7;
  /* Every buffer of a call is at most the size (max_bytes); the send
   * buffers of allgather and gather hold one rank's share. */
  size_t max = o->coll == COLL_BARRIER ? 0 : o->max_bytes;
  size_t send_bytes = max;
  if (o->coll == COLL_ALLGATHER || o->coll == COLL_GATHER)
    send_bytes = max / (size_t)b.nranks;
  b.send = alloc_buf(send_bytes);
  b.recv = alloc_buf(max);
  b.expect = o->check ? alloc_buf(max) : NULL;
  memset(b.send, 0, send_bytes);
  memset(b.recv, 0, max);
  LOOMCHECK(perf_device_mirror(&b.dsend, b.send, send_bytes, o->device, o->loom_mem));
  LOOMCHECK(perf_device_mirror(&b.drecv, b.recv, max, o->device, o->loom_mem));

  totals_t tot = {0, 0, 0};
  int status = 0;
  if (o->autotune != NULL) {
    tot.wrong = autotune(&b, argc, argv); /* prints its own table */
  } else {
    char *hosts = gather_hosts(&b);
    print_header(&b, hosts, &launch);
    free(hosts);
    if (o->ceiling)
      open_ceiling(&b);
    if (o->group > 0)
      sweep_grouped(&b, &tot);
    else
      sweep(&b, &tot);
    if (b.rank == 0) {
      print_summary(&b, &tot);
      if (write_outputs(&b, &tot, &launch, json, csv) != 0)
        status = 1;
    }
    perf_ceiling_close(b.ceiling);
  }

  if (b.stream != NULL)
    LOOMCHECK(loomStreamDestroy(b.stream));
  LOOMCHECK(loomCommFinalize(b.comm));
  LOOMCHECK(loomCommDestroy(b.comm));
  g_comm = NULL;
  perf_launch_end(&launch);
  if (b.rank == 0 && o->plot != NULL && perf_plot(&b.res, o->plot) != 0)
    status = 1;
  perf_results_free(&b.res);
  LOOMCHECK(perf_device_unmirror(b.dsend, b.send));
  LOOMCHECK(perf_device_unmirror(b.drecv, b.recv));
  free(b.send);
  free(b.recv);
  free(b.expect);
  return tot.wrong ? 1 : status;
}
