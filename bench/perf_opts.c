/*
 * perf_opts.c — loom-perf's command line (see perf_opts.h): the usage text,
 * parsing, and the checks of options that do not go together.
 */
#include "perf_opts.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_size.h"
#include "perf_autotune.h"
#include "perf_peer.h"
#include "perf_rounds.h"
#include "perf_types.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: loomrun -n NRANKS loom-perf [options]\n"
          "       mpirun -np NRANKS loom-perf [options]   (also srun, torchrun: see below)\n"
          "  -C collective    allreduce (default), allgather, reducescatter, broadcast,\n"
          "                   reduce, alltoall, gather, scatter, sendrecv or barrier\n"
          "  -b minbytes      smallest message (default 8); K, M, G suffixes\n"
          "  -e maxbytes      largest message (default 64M)\n"
          "  -i stepbytes     increment between sizes\n"
          "  -f stepfactor    multiplication factor between sizes (default 2)\n"
          "  -n iters         timed iterations per size (default 20)\n"
          "  -w warmup        warm-up iterations per size (default 5)\n"
          "  -m agg_iters     calls per iteration, issued together in one\n"
          "                   loomGroupStart/loomGroupEnd (default 1); times are per call\n"
          "  -a 0|1|2|3       how the ranks' mean times per call are combined: 0 rank 0's,\n"
          "                   1 average, 2 minimum, 3 maximum (default 3, the slowest\n"
          "                   rank, as loom-perf always reported; nccl-tests' default is 1)\n"
          "  -z 0|1           queue the calls on a loomStream and synchronize it once per\n"
          "                   -n iterations (0) or after every call or -m group (1);\n"
          "                   without -z every call runs to completion on the calling\n"
          "                   thread (stream NULL), as the recorded figures were measured\n"
          "  -c 0|1           check results (default 1)\n"
          "  -d datatype      int8 uint8 int32 uint32 int64 uint64 half|float16\n"
          "                   float|float32 double|float64 bfloat16 (default float)\n"
          "  -o op            sum prod min max avg (default sum; allreduce,\n"
          "                   reducescatter and reduce)\n"
          "  -r root          root rank of broadcast, reduce, gather, scatter (default 0)\n"
          "  --json FILE      rank 0 writes the results as one JSON object (- : stdout)\n"
          "  --csv FILE       rank 0 writes the results as CSV, a header and one line per\n"
          "                   size (- : stdout; with -, the table goes to stderr)\n"
          "  --peer mpi       also time MPI's matching collective (MPI_Allreduce, ...,\n"
          "                   MPI_Sendrecv ring, MPI_Barrier) out of place on the same\n"
          "                   buffers, check its result, and add its time, busbw, #wrong\n"
          "                   and loom/mpi (Loom's busbw over MPI's) to the table; needs\n"
          "                   loom-perf built with MPI and launched by mpirun (or srun)\n"
          "  --ceiling        two ceilings per size, two more columns in GB/s: rank 0\n"
          "                   measures memory (bench/ceiling's ideal all-reduce for\n"
          "                   allreduce, its copy for the others; one thread per rank\n"
          "                   on its host, at most one per CPU, at least 2), ranks 0\n"
          "                   and 1 a TCP stream (rank 0 -> rank 1, -n messages of each\n"
          "                   size back to back, on LOOM_SOCKET_IFNAME's interface;\n"
          "                   unset: loopback when the two share a host)\n"
          "  --device D       host (default), sim or cuda: the send and receive buffers\n"
          "                   live in that device's memory (loomMemAlloc) and -z queues\n"
          "                   on a stream of it; results are checked on the device's data\n"
          "                   (copied to the host after each checked call); --peer mpi\n"
          "                   still runs on host buffers\n"
          "  --mem M          malloc (default) or loom: with loom, loomMemAlloc's host\n"
          "                   memory, which the node's other ranks can map, so calls of\n"
          "                   LOOM_HOST_IPC_MIN bytes or more on one node read and write\n"
          "                   the peers' buffers directly (docs/performance.md)\n"
          "  --percentiles    time each of the -n iterations on its own (the stream\n"
          "                   synchronised in each with -z 1) and add p50 and p99, the\n"
          "                   median and 99th percentile of the time per call, to each\n"
          "                   form (Loom's and the peer's; each rank's own, combined as\n"
          "                   -a says); with --rounds, the medians of the rounds' p50s\n"
          "                   and p99s.  Use -n 100 or more for a p99 that means much\n"
          "  --plot FILE.png  draw busbw against size with gnuplot (Loom out of place and\n"
          "                   in place, the peer and the ceilings when measured; with\n"
          "                   --rounds, bars from min to max)\n"
          "  --rounds N       repeat the sweep N times (1 to 1000; default 1, with\n"
          "                   --autotune 5): each round sweeps every size with Loom, then\n"
          "                   with the peer (--peer), so a change in the machine's speed\n"
          "                   hits both; the table shows per size the median over the\n"
          "                   rounds and busbw's min-max, --json the median, min, max\n"
          "                   and every round's figures, --csv the median, min and max;\n"
          "                   every round checks the results as one round does\n"
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
          "                   allreduce, allgather, broadcast, reduce) and the library's\n"
          "                   own choice (\"default\"), float32 sum out of place over the\n"
          "                   sweep, each size --rounds times (default 5) with the\n"
          "                   candidates taking turns; per size the lowest median wins,\n"
          "                   and FILE (for LOOM_TUNE_FILE, docs/tuning.md) names it only\n"
          "                   where its median beats the default's by more than the two\n"
          "                   spreads (max - min over the rounds) added together; other\n"
          "                   sizes keep the default (\"auto\").  Rows print as each size\n"
          "                   finishes\n"
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
          "Launchers: the rank and size come from loomrun (LOOM_RANK/LOOM_NRANKS),\n"
          "Open MPI's mpirun (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/PMI_SIZE),\n"
          "Slurm (SLURM_PROCID/SLURM_NTASKS) or torchrun (RANK/WORLD_SIZE).  Built with\n"
          "MPI and run by mpirun, loom-perf calls MPI_Init and rank 0 sends the Loom\n"
          "unique id to the others with MPI_Bcast.  Otherwise the rendezvous comes\n"
          "from LOOM_COMM_ID (set by loomrun), or from MASTER_ADDR/MASTER_PORT\n"
          "(torchrun) as MASTER_ADDR:(MASTER_PORT+1).\n");
}

void perf_usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "loom-perf: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(loom-perf -h lists the options)\n");
  exit(2);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

const char *perf_average_name(int average) {
  static const char *const names[] = {"0 (rank 0)", "1 (average)", "2 (minimum)",
                                      "3 (maximum)"};
  return average >= 0 && average <= 3 ? names[average] : "?";
}

/* Long options; returns 1 when argv[*a] was one. */
static int parse_long(int argc, char **argv, int *a, opts_t *o) {
  const char *arg = argv[*a];
  const char **file = NULL;
  if (strcmp(arg, "--autotune") == 0)
    file = &o->autotune;
  else if (strcmp(arg, "--json") == 0)
    file = &o->json;
  else if (strcmp(arg, "--csv") == 0)
    file = &o->csv;
  else if (strcmp(arg, "--plot") == 0)
    file = &o->plot;
  if (file != NULL) {
    if (*a + 1 >= argc || argv[*a + 1][0] == '\0')
      perf_usage_error("option %s needs a file name", arg);
    *file = argv[++*a];
    return 1;
  }
  if (strcmp(arg, "--peer") == 0) {
    if (*a + 1 >= argc)
      perf_usage_error("option %s needs a value (mpi)", arg);
    const char *peer = argv[++*a];
    if (strcmp(peer, "mpi") != 0)
      perf_usage_error("unknown peer '%s' (the one peer is mpi)", peer);
    o->peer_mpi = 1;
    return 1;
  }
  if (strcmp(arg, "--rounds") == 0) {
    if (*a + 1 >= argc || parse_int(argv[*a + 1], 1, PERF_ROUNDS_MAX, &o->rounds) != 0)
      perf_usage_error("--rounds takes a number of rounds from 1 to " PERF_ROUNDS_MAX_TEXT
                       ", not '%s'", *a + 1 < argc ? argv[*a + 1] : "");
    ++*a;
    return 1;
  }
  if (strcmp(arg, "--ceiling") == 0) {
    o->ceiling = 1;
    return 1;
  }
  if (strcmp(arg, "--percentiles") == 0) {
    o->percentiles = 1;
    return 1;
  }
  if (strcmp(arg, "--mem") == 0) {
    if (*a + 1 >= argc)
      perf_usage_error("option %s needs a value (malloc, loom)", arg);
    const char *m = argv[++*a];
    if (strcmp(m, "loom") != 0 && strcmp(m, "malloc") != 0)
      perf_usage_error("unknown memory '%s' (malloc, loom)", m);
    o->loom_mem = strcmp(m, "loom") == 0;
    return 1;
  }
  if (strcmp(arg, "--device") == 0) {
    if (*a + 1 >= argc)
      perf_usage_error("option %s needs a value (host, sim, cuda)", arg);
    const char *d = argv[++*a];
    if (strcmp(d, "host") == 0)
      o->device = loomDeviceHost;
    else if (strcmp(d, "sim") == 0)
      o->device = loomDeviceSim;
    else if (strcmp(d, "cuda") == 0)
      o->device = loomDeviceCuda;
    else
      perf_usage_error("unknown device '%s' (host, sim, cuda)", d);
    return 1;
  }
  return 0;
}

static void parse_short(char flag, const char *val, opts_t *o) {
  int iv = 0;
  switch (flag) {
  case 'b': if (bench_parse_size(val, SIZE_MAX, &o->min_bytes)) perf_usage_error("bad size '%s'", val); break;
  case 'e': if (bench_parse_size(val, SIZE_MAX, &o->max_bytes)) perf_usage_error("bad size '%s'", val); break;
  case 'i':
    if (bench_parse_size(val, SIZE_MAX, &o->step_bytes) || o->step_bytes == 0)
      perf_usage_error("bad step '%s'", val);
    o->step_factor = 1;
    break;
  case 'f':
    if (parse_int(val, 1, INT_MAX, &iv)) perf_usage_error("bad step factor '%s'", val);
    o->step_factor = (size_t)iv;
    break;
  case 'n': if (parse_int(val, 1, INT_MAX, &o->iters)) perf_usage_error("bad iteration count '%s'", val); break;
  case 'w': if (parse_int(val, 0, INT_MAX, &o->warmup)) perf_usage_error("bad warm-up count '%s'", val); break;
  case 'm':
    if (parse_int(val, 1, 1000000, &o->agg_iters))
      perf_usage_error("-m takes a number of calls per iteration from 1 to 1000000, not '%s'", val);
    break;
  case 'a':
    if (parse_int(val, 0, 3, &o->average))
      perf_usage_error("-a takes 0 (rank 0), 1 (average), 2 (min) or 3 (max), not '%s'", val);
    break;
  case 'z':
    if (parse_int(val, 0, 1, &o->blocking)) perf_usage_error("-z takes 0 or 1, not '%s'", val);
    break;
  case 'c': if (parse_int(val, 0, 1, &o->check)) perf_usage_error("-c takes 0 or 1, not '%s'", val); break;
  case 'd': if (!perf_type_by_name(val, &o->type)) perf_usage_error("unknown datatype '%s'", val); break;
  case 'o': {
    int k;
    for (k = 0; k < loomNumOps && strcmp(op_names[k], val) != 0; k++)
      ;
    if (k == loomNumOps) perf_usage_error("unknown op '%s'", val);
    o->op = (loomRedOp_t)k;
    break;
  }
  case 'r': if (parse_int(val, 0, INT_MAX, &o->root)) perf_usage_error("bad root '%s'", val); break;
  case 'G':
    if (parse_int(val, 1, 1000000, &o->group))
      perf_usage_error("-G takes a number of calls from 1 to 1000000, not '%s'", val);
    break;
  case 'C': o->coll_arg = val; break;
  }
}

/* Options that only the plain sweep has: the first one given, or NULL. */
static const char *sweep_only_option(const opts_t *o, const int *given) {
  if (o->json) return "--json";
  if (o->csv) return "--csv";
  if (o->plot) return "--plot";
  if (o->peer_mpi) return "--peer";
  if (o->ceiling) return "--ceiling";
  if (o->percentiles) return "--percentiles";
  if (given['m']) return "-m";
  if (given['z']) return "-z";
  return NULL;
}

static void check_combinations(opts_t *o, const int *given) {
  char err[256];
  const char *only = sweep_only_option(o, given);
  if (o->autotune != NULL) {
    if (perf_autotune_parse_colls(o->coll_arg, &o->autotune_colls, err, sizeof err) != 0)
      perf_usage_error("%s", err);
    if (o->group > 0 || o->type != loomFloat32 || o->op != loomSum)
      perf_usage_error("--autotune measures float32 sum one call at a time (no -G, -d, -o)%s", "");
    if (only != NULL || given['a'])
      perf_usage_error("--autotune writes a tune file and times the slowest rank; %s does "
                       "not apply to it", only ? only : "-a");
  } else if (o->coll_arg != NULL && !coll_by_name(o->coll_arg, &o->coll)) {
    perf_usage_error("unknown collective '%s' (allreduce allgather reducescatter broadcast "
                     "reduce alltoall gather scatter sendrecv barrier)", o->coll_arg);
  }
  if (o->min_bytes > o->max_bytes)
    perf_usage_error("minbytes is larger than maxbytes%s", "");
  if (o->reverse && o->group == 0)
    perf_usage_error("-R only applies with -G%s", "");
  if (o->group > 0 && o->coll != COLL_ALLREDUCE)
    perf_usage_error("-G measures all-reduces only, not %s", coll_info[o->coll].name);
  if (o->group > 0 && o->rounds > 0)
    perf_usage_error("-G prints its own comparison (grouped, separate, single); --rounds "
                     "applies to the plain sweep and --autotune%s", "");
  if (o->rounds == 0)
    o->rounds = o->autotune != NULL ? PERF_AUTOTUNE_ROUNDS : 1;
  if (o->group > 0 && only != NULL)
    perf_usage_error("-G prints its own comparison (grouped, separate, single); %s applies "
                     "to the plain sweep only", only);
  if (o->percentiles && o->blocking == 0)
    perf_usage_error("--percentiles times every iteration on its own, which -z 0 (one "
                     "synchronisation per -n iterations) does not allow; use -z 1 or no -z%s",
                     "");
  if (o->json && o->csv && strcmp(o->json, "-") == 0 && strcmp(o->csv, "-") == 0)
    perf_usage_error("--json and --csv cannot both write to stdout (-)%s", "");
  if (o->coll == COLL_BARRIER && (o->plot || o->ceiling))
    perf_usage_error("barrier has no sizes: %s needs a collective that moves data",
                     o->plot ? "--plot" : "--ceiling");
  if (o->peer_mpi) {
    const char *why = perf_peer_unsupported(o->coll, o->type, o->op);
    if (why != NULL)
      perf_usage_error("--peer mpi: %s", why);
  }
}

void perf_parse_args(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.min_bytes = 8, .max_bytes = 64u << 20, .step_bytes = 1u << 20,
                .step_factor = 2, .iters = 20, .warmup = 5, .check = 1, .agg_iters = 1,
                .average = AVG_MAX, .blocking = BLOCKING_NO_STREAM, .type = loomFloat32,
                .op = loomSum, .coll = COLL_ALLREDUCE};
  int given[128] = {0};
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(arg, "-R") == 0) { /* the one short flag without a value */
      o->reverse = 1;
      continue;
    }
    if (parse_long(argc, argv, &a, o))
      continue;
    if (arg[0] != '-' || arg[1] == '\0' || arg[2] != '\0' ||
        strchr("CbeifnwcdorGmaz", arg[1]) == NULL)
      perf_usage_error("unknown argument '%s'", arg);
    if (a + 1 >= argc)
      perf_usage_error("option %s needs a value", arg);
    given[(unsigned char)arg[1]] = 1;
    parse_short(arg[1], argv[++a], o);
  }
  check_combinations(o, given);
}

int perf_next_size(const opts_t *o, size_t *bytes) {
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
