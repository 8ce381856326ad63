/*
 * loom-perf.c — bandwidth benchmark for Loom collectives, in the style of
 * NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf, ..., sendrecv_perf).
 *
 *   loomrun -n 4 loom-perf [-C collective] [-r root] -b 8 -e 64M -f 2
 *   loomrun -n 2 loom-perf -G 1000 -b 4M -e 4M
 *
 * Uses the public API only.  Every rank sweeps the same message sizes; for
 * each size it checks every element of the result against a reference
 * computed from the known inputs, once out of place and once in place
 * (-c 1), then times -n iterations of each after -w warm-up iterations.
 * Sizes, counts and bandwidths follow nccl-tests (see usage()).  The time
 * reported is the slowest rank's average per iteration.  Rank 0 prints the
 * table.  -G T compares T grouped (fused) all-reduces with T separate ones
 * and one call of the whole size.  --autotune FILE times each algorithm a
 * collective can use and writes the fastest per size as a LOOM_TUNE_FILE
 * (perf_autotune.c).  Exit status: 0 on success, 1 on a Loom error or a
 * wrong result, 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_size.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"
#include "perf_autotune.h"
#include "perf_types.h"

/* ---- Error handling -------------------------------------------------------- */

static loomComm_t g_comm; /* set once the communicator exists */
static int g_rank = -1;

static void die_loom(const char *what, loomResult_t res, int line) {
  const char *detail = loomGetLastError(g_comm);
  fprintf(stderr, "loom-perf: rank %d: %s failed (line %d): %s (%d): %s\n",
          g_rank, what, line, loomGetErrorString(res), (int)res,
          detail && *detail ? detail : "(no further details)");
  if (g_comm != NULL)
    loomCommAbort(g_comm); /* make the peers fail fast instead of hanging */
  exit(1);
}

#define LOOMCHECK(call)                                                        \
  do {                                                                         \
    loomResult_t res_ = (call);                                                \
    if (res_ != loomSuccess)                                                   \
      die_loom(#call, res_, __LINE__);                                         \
  } while (0)

/* ---- Collectives ----------------------------------------------------------- */

typedef enum {
  COLL_ALLREDUCE,
  COLL_ALLGATHER,
  COLL_REDUCESCATTER,
  COLL_BROADCAST,
  COLL_REDUCE,
  COLL_ALLTOALL,
  COLL_GATHER,
  COLL_SCATTER,
  COLL_SENDRECV,
  COLL_BARRIER,
  COLL_COUNT
} coll_t;

/* How each collective is measured, as nccl-tests measures it.  A size of S
 * bytes is the largest buffer of the call; "per_rank" collectives move
 * S/nranks bytes per rank and pass count = S/nranks/elem.  algbw = S/time;
 * busbw = algbw * bus factor (see bus_factor()). */
static const struct {
  const char *name;
  int reduces;     /* takes -o */
  int rooted;      /* takes -r */
  int per_rank;    /* count = size/nranks/elem */
  int in_place;    /* 0: no in-place form (in-place columns print N/A) */
  int check_inplace; /* the in-place result is defined and checked */
} coll_info[COLL_COUNT] = {
    [COLL_ALLREDUCE] = {"allreduce", 1, 0, 0, 1, 1},
    [COLL_ALLGATHER] = {"allgather", 0, 0, 1, 1, 1},
    [COLL_REDUCESCATTER] = {"reducescatter", 1, 0, 1, 1, 1},
    [COLL_BROADCAST] = {"broadcast", 0, 1, 0, 1, 1},
    [COLL_REDUCE] = {"reduce", 1, 1, 0, 1, 1},
    [COLL_ALLTOALL] = {"alltoall", 0, 0, 1, 0, 0},
    [COLL_GATHER] = {"gather", 0, 1, 1, 1, 1},
    [COLL_SCATTER] = {"scatter", 0, 1, 1, 1, 1},
    /* in place (sendbuff == recvbuff) is timed but, as in nccl-tests, not
     * checked: NCCL does not define sending and receiving one buffer */
    [COLL_SENDRECV] = {"sendrecv", 0, 0, 0, 1, 0},
    [COLL_BARRIER] = {"barrier", 0, 0, 0, 0, 0},
};

/* nccl-tests' bus bandwidth factors. */
static double bus_factor(coll_t c, int n) {
  switch (c) {
  case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
  case COLL_ALLGATHER: case COLL_REDUCESCATTER: case COLL_ALLTOALL:
  case COLL_GATHER: case COLL_SCATTER:
    return (double)(n - 1) / n;
  default: return 1.0; /* broadcast, reduce, sendrecv */
  }
}

/* ---- Options --------------------------------------------------------------- */

typedef struct {
  size_t min_bytes, max_bytes, step_bytes;
  size_t step_factor; /* > 1: multiply; else add step_bytes */
  int iters, warmup, check;
  loomDataType_t type;
  loomRedOp_t op;
  coll_t coll;
  int root;
  int group;   /* -G T: T all-reduces per iteration (0: off) */
  int reverse; /* -R: issue the grouped calls last tensor first */
  const char *coll_arg; /* -C as given */
  const char *autotune; /* --autotune FILE (perf_autotune.c) */
  unsigned autotune_colls;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: loomrun -n NRANKS loom-perf [options]\n"
          "  -C collective    allreduce (default), allgather, reducescatter, broadcast,\n"
          "                   reduce, alltoall, gather, scatter, sendrecv or barrier\n"
          "  -b minbytes      smallest message (default 8); K, M, G suffixes\n"
          "  -e maxbytes      largest message (default 64M)\n"
          "  -i stepbytes     increment between sizes\n"
          "  -f stepfactor    multiplication factor between sizes (default 2)\n"
          "  -n iters         timed iterations per size (default 20)\n"
          "  -w warmup        warm-up iterations per size (default 5)\n"
          "  -c 0|1           check results (default 1)\n"
          "  -d datatype      int8 uint8 int32 uint32 int64 uint64 half|float16\n"
          "                   float|float32 double|float64 bfloat16 (default float)\n"
          "  -o op            sum prod min max avg (default sum; allreduce,\n"
          "                   reducescatter and reduce)\n"
          "  -r root          root rank of broadcast, reduce, gather, scatter (default 0)\n"
          "  -G T             bucket fusion (allreduce only): each iteration issues T\n"
          "                   all-reduces of size/T bytes inside one\n"
          "                   loomGroupStart/loomGroupEnd, which Loom fuses into buckets\n"
          "                   of LOOM_BUCKET_BYTES; each size's row shows that time next\n"
          "                   to T separate calls of size/T bytes and to one call of the\n"
          "                   whole size (T * size/T bytes), e.g. -G 1000 -b 4M -e 4M\n"
          "                   compares 1,000 tensors of 4 KB with one 4 MB call\n"
          "  -R               with -G: issue the grouped calls last tensor first (the\n"
          "                   tensors are then not contiguous in issue order, so the\n"
          "                   fusion copies them into its bucket and back)\n"
          "  --autotune FILE  time every algorithm that can run here for each collective\n"
          "                   of -C (a comma-separated list or all; default all:\n"
          "                   allreduce, allgather, broadcast, reduce), float32 sum out of\n"
          "                   place over the sweep; write the fastest per size to FILE\n"
          "                   for LOOM_TUNE_FILE (docs/tuning.md)\n"
          "  -h               this help\n"
          "Sizes are the largest buffer of a call, as in nccl-tests: allgather,\n"
          "alltoall and gather (on the root) receive size bytes, reducescatter,\n"
          "alltoall and scatter (on the root) send size bytes, in blocks of\n"
          "size/nranks bytes (count = size/nranks/element size, rounded down).\n"
          "algbw = size / time; busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for\n"
          "allgather, reducescatter, alltoall, gather and scatter, 1 for broadcast,\n"
          "reduce and sendrecv.  sendrecv: every rank sends to rank+1 and receives\n"
          "from rank-1 in one group.  barrier: latency only, one row, sizes ignored.\n"
          "alltoall has no in-place form (N/A); in-place sendrecv (one buffer sent\n"
          "and received) is timed, not checked, as in nccl-tests.\n"
          "The rendezvous comes from LOOM_COMM_ID (set by loomrun), or from\n"
          "MASTER_ADDR/MASTER_PORT (torchrun) as MASTER_ADDR:(MASTER_PORT+1).\n");
}

static void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "loom-perf: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(loom-perf -h lists the options)\n");
  exit(2);
}

/* "64M" -> 67108864; returns 0 on success. */
static int parse_size(const char *s, size_t *out) { return bench_parse_size(s, SIZE_MAX, out); }

static int parse_int(const char *s, int lo, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > INT_MAX)
    return -1;
  *out = (int)v;
  return 0;
}

static void parse_args(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.min_bytes = 8, .max_bytes = 64u << 20, .step_bytes = 1u << 20,
                .step_factor = 2, .iters = 20, .warmup = 5, .check = 1,
                .type = loomFloat32, .op = loomSum, .coll = COLL_ALLREDUCE};
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(arg, "-R") == 0) { /* the one flag without a value */
      o->reverse = 1;
      continue;
    }
    if (strcmp(arg, "--autotune") == 0) {
      if (a + 1 >= argc)
        usage_error("option %s needs a file name", arg);
      o->autotune = argv[++a];
      continue;
    }
    if (arg[0] != '-' || arg[1] == '\0' || arg[2] != '\0' ||
        strchr("CbeifnwcdorG", arg[1]) == NULL)
      usage_error("unknown argument '%s'", arg);
    if (a + 1 >= argc)
      usage_error("option %s needs a value", arg);
    const char *val = argv[++a];
    int iv = 0;
    switch (arg[1]) {
    case 'b': if (parse_size(val, &o->min_bytes)) usage_error("bad size '%s'", val); break;
    case 'e': if (parse_size(val, &o->max_bytes)) usage_error("bad size '%s'", val); break;
    case 'i':
      if (parse_size(val, &o->step_bytes) || o->step_bytes == 0)
        usage_error("bad step '%s'", val);
      o->step_factor = 1;
      break;
    case 'f':
      if (parse_int(val, 1, &iv)) usage_error("bad step factor '%s'", val);
      o->step_factor = (size_t)iv;
      break;
    case 'n': if (parse_int(val, 1, &o->iters)) usage_error("bad iteration count '%s'", val); break;
    case 'w': if (parse_int(val, 0, &o->warmup)) usage_error("bad warm-up count '%s'", val); break;
    case 'c':
      if (parse_int(val, 0, &o->check) || o->check > 1) usage_error("-c takes 0 or 1, not '%s'", val);
      break;
    case 'd': {
      if (!perf_type_by_name(val, &o->type))
        usage_error("unknown datatype '%s'", val);
      break;
    }
    case 'o': {
      int k;
      for (k = 0; k < loomNumOps && strcmp(op_names[k], val) != 0; k++)
        ;
      if (k == loomNumOps) usage_error("unknown op '%s'", val);
      o->op = (loomRedOp_t)k;
      break;
    }
    case 'r': if (parse_int(val, 0, &o->root)) usage_error("bad root '%s'", val); break;
    case 'G':
      if (parse_int(val, 1, &o->group) || o->group > 1000000)
        usage_error("-G takes a number of calls from 1 to 1000000, not '%s'", val);
      break;
    case 'C': o->coll_arg = val; break;
    }
  }
  char err[256];
  if (o->autotune != NULL) {
    if (perf_autotune_parse_colls(o->coll_arg, &o->autotune_colls, err, sizeof err) != 0)
      usage_error("%s", err);
    if (o->group > 0 || o->type != loomFloat32 || o->op != loomSum)
      usage_error("--autotune measures float32 sum one call at a time (no -G, -d, -o)%s", "");
  } else if (o->coll_arg != NULL) {
    int k;
    for (k = 0; k < COLL_COUNT && strcmp(coll_info[k].name, o->coll_arg) != 0; k++)
      ;
    if (k == COLL_COUNT)
      usage_error("unknown collective '%s' (allreduce allgather reducescatter broadcast "
                  "reduce alltoall gather scatter sendrecv barrier)", o->coll_arg);
    o->coll = (coll_t)k;
  }
  if (o->min_bytes > o->max_bytes)
    usage_error("minbytes is larger than maxbytes%s", "");
  if (o->reverse && o->group == 0)
    usage_error("-R only applies with -G%s", "");
  if (o->group > 0 && o->coll != COLL_ALLREDUCE)
    usage_error("-G measures all-reduces only, not %s", coll_info[o->coll].name);
}

/* ---- The benchmark --------------------------------------------------------- */

typedef struct {
  opts_t o;
  loomComm_t comm;
  int rank, nranks;
  size_t tsize;
  void *send, *recv, *expect; /* sized for max_bytes */
  int64_t sum_max;            /* input values for sum/avg stay in 0..sum_max */
  int reports;                /* mismatch lines printed by this rank */
  int same_clock;             /* every rank reads the same CLOCK_MONOTONIC */
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
 * in place (within recv). */
static void run_coll(bench_t *b, size_t c, int in_place) {
  const char *s = b->send;
  char *r = b->recv;
  if (in_place) {
    s = r + inplace_in_off(b, c) * b->tsize;
    r += inplace_out_off(b, c) * b->tsize;
  }
  loomDataType_t t = b->o.type;
  loomRedOp_t op = b->o.op;
  int root = b->o.root, n = b->nranks;
  loomComm_t comm = b->comm;
  switch (b->o.coll) {
  case COLL_ALLREDUCE: LOOMCHECK(loomAllReduce(s, r, c, t, op, comm, NULL)); break;
  case COLL_ALLGATHER: LOOMCHECK(loomAllGather(s, r, c, t, comm, NULL)); break;
  case COLL_REDUCESCATTER: LOOMCHECK(loomReduceScatter(s, r, c, t, op, comm, NULL)); break;
  case COLL_BROADCAST: LOOMCHECK(loomBroadcast(s, r, c, t, root, comm, NULL)); break;
  case COLL_REDUCE: LOOMCHECK(loomReduce(s, r, c, t, op, root, comm, NULL)); break;
  case COLL_ALLTOALL: LOOMCHECK(loomAllToAll(s, r, c, t, comm, NULL)); break;
  case COLL_GATHER: LOOMCHECK(loomGather(s, r, c, t, root, comm, NULL)); break;
  case COLL_SCATTER: LOOMCHECK(loomScatter(s, r, c, t, root, comm, NULL)); break;
  case COLL_SENDRECV:
    LOOMCHECK(loomGroupStart());
    LOOMCHECK(loomSend(s, c, t, (b->rank + 1) % n, comm, NULL));
    LOOMCHECK(loomRecv(r, c, t, (b->rank + n - 1) % n, comm, NULL));
    LOOMCHECK(loomGroupEnd());
    break;
  case COLL_BARRIER: LOOMCHECK(loomBarrier(comm, NULL)); break;
  default: break;
  }
}

/* -G: T all-reduces of c elements each (tensor k at element k*c of send
 * and recv), issued in one group or one by one, or one all-reduce of the
 * T*c elements. */
enum { FUSE_GROUPED, FUSE_SEPARATE, FUSE_SINGLE, FUSE_WAYS };
static const char *const fuse_names[FUSE_WAYS] = {"grouped", "separate", "single call"};

static void run_fused(bench_t *b, size_t c, int how) {
  const char *s = b->send;
  char *r = b->recv;
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

/* One checked run; returns the number of wrong elements over all ranks. */
static int64_t check_once(bench_t *b, size_t c, int in_place) {
  size_t ts = b->tsize, ns = send_elems(b, c), no = out_elems(b, c);
  size_t span = in_place && ns > no ? ns : no, out_off = 0;
  memset(b->recv, 0x7f, span * ts); /* poison: not a value any check expects */
  if (in_place) {
    memcpy((char *)b->recv + inplace_in_off(b, c) * ts, b->send, ns * ts);
    out_off = inplace_out_off(b, c);
  }
  run_coll(b, c, in_place);
  int64_t wrong = 0;
  if (has_output(b))
    wrong = count_wrong(b, (char *)b->recv + out_off * ts, no, c,
                        in_place ? "in place" : "out of place");
  return sum_over_ranks(b, wrong);
}

/* -G: one checked run of T calls of c elements (or of the single call). */
static int64_t check_fused(bench_t *b, size_t c, int how) {
  size_t nelem = c * (size_t)b->o.group;
  memset(b->recv, 0x7f, nelem * b->tsize);
  run_fused(b, c, how);
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
      struct timespec ts = {0, 2000000};
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

/* Average microseconds per iteration of the slowest rank. */
static double time_run(bench_t *b, run_fn fn, size_t c, int arg) {
  int32_t token = 0;
  LOOMCHECK(loomAllReduce(&token, &token, 1, loomInt32, loomSum, b->comm, NULL)); /* barrier */
  double t0 = now_s();
  for (int it = 0; it < b->o.iters; it++)
    fn(b, c, arg);
  double us = (now_s() - t0) * 1e6 / b->o.iters;
  LOOMCHECK(loomAllReduce(&us, &us, 1, loomFloat64, loomMax, b->comm, NULL));
  return us;
}

typedef struct {
  int64_t wrong; /* over every checked result */
  double bw_sum; /* busbw of every printed result */
  int bw_count;
} totals_t;

static void fmt_time(char *out, size_t len, double us) {
  snprintf(out, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

/* time algbw busbw [#wrong]; wrong < 0: N/A (not checked); bytes == 0: no
 * bandwidth (N/A) */
static void print_result(totals_t *tot, double us, size_t bytes, double factor, int64_t wrong,
                         int with_wrong) {
  char tstr[32], wstr[32];
  fmt_time(tstr, sizeof tstr, us);
  if (wrong >= 0)
    snprintf(wstr, sizeof wstr, "%lld", (long long)wrong);
  else
    snprintf(wstr, sizeof wstr, "N/A");
  if (bytes > 0) {
    double algbw = (double)bytes / (us * 1e3); /* bytes/us/1e3 = GB/s */
    double busbw = algbw * factor;
    tot->bw_sum += busbw;
    tot->bw_count++;
    printf("  %7s  %6.2f  %6.2f", tstr, algbw, busbw);
  } else {
    printf("  %7s  %6s  %6s", tstr, "N/A", "N/A");
  }
  if (with_wrong)
    printf("  %6s", wstr);
}

static void print_na(void) { printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A"); }

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

static void print_header(bench_t *b, const char *launcher) {
  /* Every rank contributes "Pid ... on host" and its clock's identity;
   * rank 0 prints the former. */
  enum { INFO = 128, CLOCK = 128 };
  char mine[INFO + CLOCK] = {0}, host[64] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(mine, INFO, "Pid %6ld on %s", (long)getpid(), host);
  clock_id(mine + INFO, CLOCK);
  char *all = calloc((size_t)b->nranks, INFO + CLOCK);
  if (all == NULL) {
    fprintf(stderr, "loom-perf: out of memory\n");
    exit(1);
  }
  LOOMCHECK(loomAllGather(mine, all, INFO + CLOCK, loomUint8, b->comm, NULL));
  b->same_clock = 1;
  for (int r = 1; r < b->nranks; r++)
    if (strncmp(all + INFO, all + (size_t)r * (INFO + CLOCK) + INFO, CLOCK) != 0)
      b->same_clock = 0;
  if (b->rank == 0) {
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
    printf("# loom-perf: %s, Loom library %d.%d.%d (header %d.%d.%d), launcher %s\n", what,
           lib / 10000, lib / 100 % 100, lib % 100, LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH,
           launcher);
    printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
           "validation: %d\n",
           b->nranks, o->min_bytes, o->max_bytes,
           o->step_factor > 1 ? o->step_factor : o->step_bytes,
           o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
    printf("#\n# Using ranks\n");
    for (int r = 0; r < b->nranks; r++)
      printf("#  Rank %2d %.*s\n", r, INFO - 1, all + (size_t)r * (INFO + CLOCK));
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
    } else {
      printf("#%54s%-33s%s\n", "", "out-of-place", "in-place");
      printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
             "count", "type", "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw",
             "busbw", "#wrong");
      printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
             "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
             "");
    }
    fflush(stdout);
  }
  free(all);
}

/* The size after `bytes` in the sweep; 0 when there is none. */
static int next_size(const opts_t *o, size_t *bytes) {
  if (o->step_factor > 1) {
    if (*bytes > SIZE_MAX / o->step_factor)
      return 0;
    *bytes = *bytes == 0 ? 1 : *bytes * o->step_factor;
  } else {
    if (*bytes > SIZE_MAX - o->step_bytes)
      return 0;
    *bytes += o->step_bytes;
  }
  return *bytes <= o->max_bytes;
}

static void print_row_start(const bench_t *b, size_t bytes, size_t count, const char *type) {
  const char *redop = coll_info[b->o.coll].reduces ? op_names[b->o.op] : "none";
  printf("%12zu  %12zu  %8s  %6s", bytes, count, type, redop);
}

/* The usual sweep: one row per size, out of place then in place. */
static void sweep(bench_t *b, totals_t *tot) {
  const opts_t *o = &b->o;
  const coll_t coll = o->coll;
  double factor = bus_factor(coll, b->nranks);
  unsigned seed = 0;
  if (coll == COLL_BARRIER) { /* latency only: one row */
    int64_t wrong = o->check ? check_barrier(b) : -1;
    tot->wrong += wrong > 0 ? wrong : 0;
    for (int w = 0; w < o->warmup; w++)
      run_coll(b, 0, 0);
    double us = time_run(b, run_coll, 0, 0);
    if (b->rank == 0) {
      printf("%12d  %12d  %8s  %6s", 0, 0, "none", "none");
      print_result(tot, us, 0, factor, wrong, 1);
      print_na();
      printf("\n");
      fflush(stdout);
    }
    return;
  }
  for (size_t bytes = o->min_bytes;;) {
    size_t count = bytes / b->tsize;
    if (coll_info[coll].per_rank)
      count /= (size_t)b->nranks;
    size_t total = count * b->tsize * (coll_info[coll].per_rank ? (size_t)b->nranks : 1);
    if (count > 0) {
      int64_t wrong_oop = -1, wrong_ip = -1;
      if (o->check) {
        prepare(b, count, seed++);
        wrong_oop = check_once(b, count, 0);
        tot->wrong += wrong_oop;
        if (coll_info[coll].check_inplace) {
          wrong_ip = check_once(b, count, 1);
          tot->wrong += wrong_ip;
        }
      }
      for (int w = 0; w < o->warmup; w++)
        run_coll(b, count, 0);
      double us_oop = time_run(b, run_coll, count, 0);
      double us_ip = coll_info[coll].in_place ? time_run(b, run_coll, count, 1) : 0;
      if (b->rank == 0) {
        print_row_start(b, total, count, type_info[o->type].name);
        print_result(tot, us_oop, total, factor, wrong_oop, 1);
        if (coll_info[coll].in_place)
          print_result(tot, us_ip, total, factor, wrong_ip, 1);
        else
          print_na();
        printf("\n");
        fflush(stdout);
      }
    }
    if (!next_size(o, &bytes))
      break;
  }
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
        us[how] = time_run(b, run_fused, count, how);
      }
      if (b->rank == 0) {
        print_row_start(b, total, count, type_info[o->type].name);
        for (int how = 0; how < FUSE_WAYS; how++)
          print_result(tot, us[how], total, factor, 0, 0);
        char wstr[32] = "N/A";
        if (wrong >= 0)
          snprintf(wstr, sizeof wstr, "%lld", (long long)wrong);
        printf("  %6s\n", wstr);
        fflush(stdout);
      }
    }
    if (!next_size(o, &bytes))
      break;
  }
}

/* --autotune's measurement (perf_sample in perf_autotune.h): checked like
 * the sweep, then timed out of place. */
static int autotune_measure(void *ctx, loomComm_t comm, const char *coll, size_t bytes,
                            struct perf_sample *s) {
  bench_t *b = ctx;
  static unsigned seed;
  int k = 0;
  while (k < COLL_COUNT - 1 && strcmp(coll_info[k].name, coll) != 0)
    k++;
  int per_rank = coll_info[k].per_rank;
  size_t count = bytes / b->tsize / (per_rank ? (size_t)b->nranks : 1);
  if (count == 0)
    return 1;
  loomComm_t parent = b->comm;
  b->comm = comm;
  b->o.coll = (coll_t)k;
  s->bytes = count * b->tsize * (per_rank ? (size_t)b->nranks : 1);
  s->wrong = -1;
  if (b->o.check) {
    prepare(b, count, seed++);
    s->wrong = check_once(b, count, 0) + check_once(b, count, 1);
  }
  for (int w = 0; w < b->o.warmup; w++)
    run_coll(b, count, 0);
  s->us = time_run(b, run_coll, count, 0);
  b->comm = parent;
  return 0;
}

/* --autotune FILE: the sweep's sizes and autotune_measure, lent to
 * perf_autotune_run; returns the exit status. */
static int autotune(bench_t *b, int argc, char **argv) {
  size_t *sizes = NULL, bytes = b->o.min_bytes;
  int n = 0;
  do {
    sizes = realloc(sizes, (size_t)(n + 1) * sizeof *sizes);
    if (sizes == NULL) {
      fprintf(stderr, "loom-perf: out of memory\n");
      exit(1);
    }
    sizes[n++] = bytes;
  } while (next_size(&b->o, &bytes));
  struct perf_autotune a = {b->o.autotune, b->o.autotune_colls, b->comm, b->rank, b->nranks,
                            sizes, n, b->o.iters, b->o.warmup, argc, argv, autotune_measure, b};
  int status = perf_autotune_run(&a);
  free(sizes);
  return status;
}

/* Chooses the rendezvous address; exits with a message when there is none. */
static void setup_comm_id(int rank, int nranks) {
  const char *id = getenv("LOOM_COMM_ID");
  if (id != NULL && *id != '\0')
    return;
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr != NULL && *addr != '\0' && port != NULL && *port != '\0') {
    int p;
    if (parse_int(port, 1, &p) || p >= 65535) {
      fprintf(stderr, "loom-perf: rank %d: bad MASTER_PORT '%s'\n", rank, port);
      exit(1);
    }
    char buf[300];
    int v6 = strchr(addr, ':') != NULL && addr[0] != '[';
    snprintf(buf, sizeof buf, v6 ? "[%s]:%d" : "%s:%d", addr, p + 1);
    if (setenv("LOOM_COMM_ID", buf, 1) != 0) {
      perror("loom-perf: setenv");
      exit(1);
    }
    if (rank == 0)
      printf("# LOOM_COMM_ID unset: using MASTER_ADDR:(MASTER_PORT+1) = %s\n", buf);
    return;
  }
  if (nranks == 1)
    return; /* a lone rank can host its own root */
  if (rank != 0) { /* rank 0 explains */
    fprintf(stderr, "loom-perf: rank %d: LOOM_COMM_ID is not set\n", rank);
    exit(1);
  }
  fprintf(stderr,
          "loom-perf: rank %d: no rendezvous address: LOOM_COMM_ID is not set.\n"
          "  Run under loomrun (e.g. 'loomrun -n %d loom-perf ...'), or set\n"
          "  LOOM_COMM_ID=host:port (the same on every rank; rank 0 listens there),\n"
          "  or MASTER_ADDR and MASTER_PORT as torchrun does.\n",
          rank, nranks);
  exit(1);
}

static void *alloc_buf(size_t bytes) {
  size_t align = 4096, rounded = (bytes + align - 1) / align * align;
  void *p = aligned_alloc(align, rounded ? rounded : align);
  if (p == NULL) {
    fprintf(stderr, "loom-perf: rank %d: cannot allocate %zu bytes\n", g_rank, bytes);
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  bench_t b = {0};
  parse_args(argc, argv, &b.o);
  const opts_t *o = &b.o;

  loomLaunchInfo_t li;
  loomResult_t res = loomGetLaunchInfo(&li);
  if (res != loomSuccess) {
    fprintf(stderr, "loom-perf: cannot tell this process's rank: %s: %s\n"
            "  Run under a launcher, e.g. 'loomrun -n 4 loom-perf ...'.\n",
            loomGetErrorString(res), loomGetLastError(NULL));
    return 1;
  }
  b.rank = g_rank = li.rank;
  b.nranks = li.nranks;
  if (o->autotune != NULL && b.nranks < 2)
    usage_error("--autotune needs 2 or more ranks (one rank has nothing to choose)%s", "");
  if ((coll_info[o->coll].rooted || o->autotune) && o->root >= b.nranks) { /* every rank says it */
    char msg[96];
    snprintf(msg, sizeof msg, "root %d is not a rank (there are %d)", o->root, b.nranks);
    usage_error("%s", msg);
  }
  setup_comm_id(b.rank, b.nranks);

  loomUniqueId id;
  LOOMCHECK(loomGetUniqueId(&id));
  LOOMCHECK(loomCommInitRank(&b.comm, b.nranks, id, b.rank));
  g_comm = b.comm;
  int n = 0, r = 0;
  LOOMCHECK(loomCommCount(b.comm, &n));
  LOOMCHECK(loomCommUserRank(b.comm, &r));
  if (n != b.nranks || r != b.rank) {
    fprintf(stderr, "loom-perf: rank %d: communicator says rank %d of %d, launcher says %d of %d\n",
            b.rank, r, n, b.rank, b.nranks);
    loomCommAbort(b.comm);
    return 1;
  }

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

  totals_t tot = {0, 0, 0};
  if (o->autotune != NULL) {
    tot.wrong = autotune(&b, argc, argv); /* prints its own table */
  } else {
    print_header(&b, li.launcher ? li.launcher : "?");
    if (o->group > 0)
      sweep_grouped(&b, &tot);
    else
      sweep(&b, &tot);
  }

  if (b.rank == 0 && o->autotune == NULL) {
    printf("# Out of bounds values : %lld %s\n", (long long)tot.wrong,
           tot.wrong ? "FAILED" : "OK");
    if (tot.bw_count > 0)
      printf("# Avg bus bandwidth    : %g \n", tot.bw_sum / tot.bw_count);
    else
      printf("# Avg bus bandwidth    : N/A \n");
    printf("#\n");
    fflush(stdout);
  }

  LOOMCHECK(loomCommFinalize(b.comm));
  LOOMCHECK(loomCommDestroy(b.comm));
  g_comm = NULL;
  free(b.send);
  free(b.recv);
  free(b.expect);
  return tot.wrong ? 1 : 0;
}
