/*
 * loom-sim.c — predicts Loom's collectives on a synthetic cluster: runs
 * the real schedules (loom_plan's) of N nodes x L ranks through the model
 * of src/sim and prints time, algbw, busbw and efficiency per algorithm and
 * size, next to the algorithm Loom's tuner picks.  Also: sweeps over rank
 * counts, compares the model with measured runs, fits the calibration to
 * them and measures this host's reduce and copy bandwidth.
 * docs/simulator.md describes the model and its accuracy.
 */
#include "core/config.h"
#include "device/reduce.h"
#include "sim/sim.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 64
#define MAX_CASES 256
#define MAX_RUNS 32

struct opts {
  int nnodes, local;
  enum loom_coll coll;
  size_t minb, maxb;
  int factor;
  unsigned algos; /* 1 << algo; 0: every one the collective has */
  const char *dtname;
  size_t esize;
  int sweep_max, exact, measure_host;
  const char *compare, *fit, *calfile, *intra, *inter;
  /* overrides; negative: not given */
  double alpha_intra, bw_intra, alpha_inter, bw_inter, bw_nic, reduce_bw, copy_bw;
  double oh_intra, oh_inter, llc_mib, mem_factor;
  int cores;
  long long chunk;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: loom-sim [options]\n"
          "  -N nodes          nodes (default 2)\n"
          "  -L ranks          ranks per node (default 8)\n"
          "  -C collective     allreduce (default) or allgather\n"
          "  -b/-e bytes       smallest/largest size, K M G suffixes (default 8 / 256M);\n"
          "                    sizes as loom-perf's (all-gather: bytes received)\n"
          "  -f factor         size step factor (default 4)\n"
          "  -a algos          comma list of LOOM_ALGO names (ring,tree,hier,rd,oneshot,\n"
          "                    rhd) or all (default all the collective has)\n"
          "  -d datatype       int8 half bfloat16 float int32 double int64 (default float)\n"
          "  --sweep MAX       rank counts L x 1, 2, 4 ... nodes up to MAX ranks\n"
          "  --exact           simulate every rank (no folding to one node)\n"
          "  --calibration F   read a calibration file (format: src/sim/params.c)\n"
          "  --intra T --inter T  transports of the two levels (default shm, tcp)\n"
          "  --alpha-intra US --bw-intra GBPS --alpha-inter US --bw-inter GBPS\n"
          "  --overhead-intra US --overhead-inter US\n"
          "  --bw-nic GBPS --reduce-bw GBPS --copy-bw GBPS --llc-mib MIB --mem-factor X\n"
          "                    override the calibration (GB/s = 1e9 B/s)\n"
          "  --cores C         cores per node: more ranks slow every cost by ranks/C\n"
          "                    (default 0: no limit)\n"
          "  --chunk BYTES     pipeline slice (default LOOM_CHUNK_BYTES, 512K)\n"
          "  --compare FILE    model vs tools/loom-sim-measure.sh output (one node)\n"
          "  --fit FILE        fit alpha, bw and overhead per transport to FILE's 2-rank\n"
          "                    all-gathers that fit the cache, the memory factor to its\n"
          "                    2-rank runs beyond it; prints a calibration file\n"
          "  --measure-host    time this host's reduction and memcpy\n"
          "  -h                this help\n");
}

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "loom-sim: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (loom-sim -h for help)\n");
  exit(2);
}

static size_t parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mult = 1;
  switch (*end) {
  case 'k': case 'K': mult = 1ull << 10; end++; break;
  case 'm': case 'M': mult = 1ull << 20; end++; break;
  case 'g': case 'G': mult = 1ull << 30; end++; break;
  default: break;
  }
  if (errno != 0 || end == s || *end != '\0' || v > (1ull << 40) / mult)
    die("bad size '%s'", s);
  return (size_t)(v * mult);
}

static double parse_pos(const char *s, int zero_ok) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v > 0 || (zero_ok && v == 0)))
    die("bad number '%s'", s);
  return v;
}

static int parse_int(const char *s, int lo, int hi) {
  double v = parse_pos(s, 1);
  if (v != (int)v || v < lo || v > hi)
    die("bad count '%s'", s);
  return (int)v;
}

static unsigned parse_algos(const char *s) {
  if (strcmp(s, "all") == 0)
    return 0;
  unsigned m = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    int a;
    for (a = LOOM_ALGO_AUTO + 1; a < LOOM_ALGO_COUNT; a++)
      if (strcmp(tok, loom_algo_name((enum loom_algo)a)) == 0 &&
          (loom_algo_applies(LOOM_COLL_ALLREDUCE, (enum loom_algo)a) ||
           loom_algo_applies(LOOM_COLL_ALLGATHER, (enum loom_algo)a)))
        break;
    if (a == LOOM_ALGO_COUNT)
      die("unknown algorithm '%s' (those LOOM_ALGO names for allreduce or allgather)", tok);
    m |= 1u << a;
  }
  return m;
}

static size_t parse_dtype(const char *s) {
  static const struct {
    const char *name;
    size_t size;
  } types[] = {{"int8", 1}, {"uint8", 1}, {"half", 2}, {"float16", 2}, {"bfloat16", 2},
               {"float", 4}, {"float32", 4}, {"int32", 4}, {"uint32", 4}, {"double", 8},
               {"float64", 8}, {"int64", 8}, {"uint64", 8}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strcmp(s, types[i].name) == 0)
      return types[i].size;
  die("unknown datatype '%s'", s);
  return 0;
}

static void parse(int argc, char **argv, struct opts *o) {
  enum { O_SWEEP = 256, O_EXACT, O_CAL, O_INTRA, O_INTER, O_AI, O_BI, O_AE, O_BE, O_NIC,
         O_RED, O_COPY, O_CORES, O_CHUNK, O_COMPARE, O_FIT, O_HOST, O_OI, O_OE, O_LLC, O_MEM };
  static const struct option longs[] = {
      {"sweep", required_argument, 0, O_SWEEP}, {"exact", no_argument, 0, O_EXACT},
      {"calibration", required_argument, 0, O_CAL}, {"intra", required_argument, 0, O_INTRA},
      {"inter", required_argument, 0, O_INTER}, {"alpha-intra", required_argument, 0, O_AI},
      {"bw-intra", required_argument, 0, O_BI}, {"alpha-inter", required_argument, 0, O_AE},
      {"bw-inter", required_argument, 0, O_BE}, {"bw-nic", required_argument, 0, O_NIC},
      {"reduce-bw", required_argument, 0, O_RED}, {"copy-bw", required_argument, 0, O_COPY},
      {"cores", required_argument, 0, O_CORES}, {"chunk", required_argument, 0, O_CHUNK},
      {"compare", required_argument, 0, O_COMPARE}, {"fit", required_argument, 0, O_FIT},
      {"measure-host", no_argument, 0, O_HOST}, {"help", no_argument, 0, 'h'},
      {"overhead-intra", required_argument, 0, O_OI},
      {"overhead-inter", required_argument, 0, O_OE},
      {"llc-mib", required_argument, 0, O_LLC}, {"mem-factor", required_argument, 0, O_MEM},
      {0, 0, 0, 0}};
  *o = (struct opts){.nnodes = 2, .local = 8, .coll = LOOM_COLL_ALLREDUCE, .minb = 8,
                     .maxb = 256u << 20, .factor = 4, .dtname = "float", .esize = 4,
                     .alpha_intra = -1, .bw_intra = -1, .alpha_inter = -1, .bw_inter = -1,
                     .bw_nic = -1, .reduce_bw = -1, .copy_bw = -1, .oh_intra = -1, .oh_inter = -1, .llc_mib = -1, .mem_factor = -1,
                     .cores = -1, .chunk = -1};
  int c;
  while ((c = getopt_long(argc, argv, "N:L:C:b:e:f:a:d:h", longs, NULL)) != -1) {
    switch (c) {
    case 'N': o->nnodes = parse_int(optarg, 1, 1 << 20); break;
    case 'L': o->local = parse_int(optarg, 1, 1 << 16); break;
    case 'C':
      if (strcmp(optarg, "allreduce") == 0)
        o->coll = LOOM_COLL_ALLREDUCE;
      else if (strcmp(optarg, "allgather") == 0)
        o->coll = LOOM_COLL_ALLGATHER;
      else
        die("collective '%s': loom-sim models allreduce and allgather", optarg);
      break;
    case 'b': o->minb = parse_size(optarg); break;
    case 'e': o->maxb = parse_size(optarg); break;
    case 'f': o->factor = parse_int(optarg, 2, 1 << 20); break;
    case 'a': o->algos = parse_algos(optarg); break;
    case 'd': o->dtname = optarg; o->esize = parse_dtype(optarg); break;
    case O_SWEEP: o->sweep_max = parse_int(optarg, 2, 1 << 20); break;
    case O_EXACT: o->exact = 1; break;
    case O_CAL: o->calfile = optarg; break;
    case O_INTRA: o->intra = optarg; break;
    case O_INTER: o->inter = optarg; break;
    case O_AI: o->alpha_intra = parse_pos(optarg, 1); break;
    case O_BI: o->bw_intra = parse_pos(optarg, 0); break;
    case O_AE: o->alpha_inter = parse_pos(optarg, 1); break;
    case O_BE: o->bw_inter = parse_pos(optarg, 0); break;
    case O_NIC: o->bw_nic = parse_pos(optarg, 1); break;
    case O_RED: o->reduce_bw = parse_pos(optarg, 0); break;
    case O_COPY: o->copy_bw = parse_pos(optarg, 0); break;
    case O_CORES: o->cores = parse_int(optarg, 0, 1 << 20); break;
    case O_CHUNK: o->chunk = (long long)parse_size(optarg); break;
    case O_COMPARE: o->compare = optarg; break;
    case O_FIT: o->fit = optarg; break;
    case O_HOST: o->measure_host = 1; break;
    case O_OI: o->oh_intra = parse_pos(optarg, 1); break;
    case O_OE: o->oh_inter = parse_pos(optarg, 1); break;
    case O_LLC: o->llc_mib = parse_pos(optarg, 1); break;
    case O_MEM:
      o->mem_factor = parse_pos(optarg, 0);
      if (o->mem_factor < 1)
        die("--mem-factor '%s' is below 1", optarg);
      break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); exit(2);
    }
  }
  if (optind < argc)
    die("unexpected argument '%s'", argv[optind]);
  if (o->minb > o->maxb)
    die("-b is larger than -e%s", "");
  if ((long long)o->nnodes * o->local < 2 || (long long)o->nnodes * o->local > (1 << 24))
    die("-N x -L must be 2 to 16M ranks%s", "");
  if (o->chunk == 0 || (o->chunk > 0 && (size_t)o->chunk < o->esize))
    die("--chunk must hold an element%s", "");
}

/* The calibration, then the transports named, then the overrides. */
static void make_params(const struct opts *o, const struct loom_sim_calibration *cal,
                        struct loom_sim_params *p) {
  char err[256];
  if (loom_sim_params_from(cal, o->intra, o->inter, p, err, sizeof err) != 0) {
    fprintf(stderr, "loom-sim: %s\n", err);
    exit(2);
  }
  if (o->alpha_intra >= 0) p->intra.alpha = o->alpha_intra * 1e-6;
  if (o->bw_intra > 0) p->intra.bw = o->bw_intra * 1e9;
  if (o->alpha_inter >= 0) p->inter.alpha = o->alpha_inter * 1e-6;
  if (o->bw_inter > 0) p->inter.bw = p->nic_bw = o->bw_inter * 1e9;
  if (o->bw_nic >= 0) p->nic_bw = o->bw_nic * 1e9;
  if (o->oh_intra >= 0) p->intra.overhead = o->oh_intra * 1e-6;
  if (o->oh_inter >= 0) p->inter.overhead = o->oh_inter * 1e-6;
  if (o->llc_mib >= 0) p->llc_bytes = o->llc_mib * 1048576.0;
  if (o->mem_factor >= 1) p->mem_factor = o->mem_factor;
  if (o->reduce_bw > 0) p->reduce_bw = o->reduce_bw * 1e9;
  if (o->copy_bw > 0) p->copy_bw = o->copy_bw * 1e9;
  if (o->cores >= 0) p->cores = o->cores;
  p->chunk_bytes = o->chunk > 0 ? (size_t)o->chunk : (size_t)loom_param_int(LOOM_PARAM_CHUNK_BYTES);
}

static void print_params(const struct loom_sim_params *p, const struct opts *o,
                         const struct loom_sim_calibration *cal) {
  printf("# intra (%s): alpha %.2f us, %.2f GB/s, overhead %.2f us; inter (%s): alpha %.2f us, "
         "%.2f GB/s, overhead %.2f us; NIC ",
         o->intra ? o->intra : cal->intra, p->intra.alpha * 1e6, p->intra.bw / 1e9,
         p->intra.overhead * 1e6, o->inter ? o->inter : cal->inter, p->inter.alpha * 1e6,
         p->inter.bw / 1e9, p->inter.overhead * 1e6);
  if (p->nic_bw > 0)
    printf("%.2f GB/s", p->nic_bw / 1e9);
  else
    printf("unlimited");
  printf("; reduce %.2f GB/s; copy %.2f GB/s; LLC %.0f MiB, memory x%.2f; cores/node ",
         p->reduce_bw / 1e9, p->copy_bw / 1e9, p->llc_bytes / 1048576.0, p->mem_factor);
  if (p->cores > 0)
    printf("%d", p->cores);
  else
    printf("unlimited");
  printf("; slice %zu B\n# calibration: %s\n", p->chunk_bytes, cal->source);
}

/* The algorithms to show: those the collective has (LOOM_ALGO's names), in
 * enum order. */
static int algo_list(const struct opts *o, enum loom_algo *out) {
  int k = 0;
  for (int a = LOOM_ALGO_AUTO + 1; a < LOOM_ALGO_COUNT; a++)
    if (loom_algo_applies(o->coll, (enum loom_algo)a) && (o->algos == 0 || (o->algos & (1u << a))))
      out[k++] = (enum loom_algo)a;
  return k;
}

/* count per loom_plan from loom-perf's size; 0: too small. */
static size_t count_of(enum loom_coll coll, size_t bytes, int nranks, size_t esize) {
  return coll == LOOM_COLL_ALLGATHER ? bytes / (size_t)nranks / esize : bytes / esize;
}

static size_t bytes_of(enum loom_coll coll, size_t count, int nranks, size_t esize) {
  return coll == LOOM_COLL_ALLGATHER ? count * (size_t)nranks * esize : count * esize;
}

static double bus_factor(enum loom_coll coll, int n) {
  return coll == LOOM_COLL_ALLGATHER ? (double)(n - 1) / n : 2.0 * (n - 1) / n;
}

/* The bandwidth efficiency is measured against: one stream over the
 * slowest level the call crosses. */
static double ref_bw(const struct loom_sim_params *p, int nnodes) {
  if (nnodes < 2)
    return p->intra.bw;
  return p->nic_bw > 0 && p->nic_bw < p->inter.bw ? p->nic_bw : p->inter.bw;
}

/* ---- progress on stderr for long predictions ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct progress {
  int nranks;
  enum loom_algo algo;
  size_t count, esize;
  double start, last; /* when the prediction started, when a line was last printed */
};

enum { PROGRESS_EVERY_S = 5 };

/* Every PROGRESS_EVERY_S seconds of one prediction: how far the model got. */
static void report_progress(void *arg, long events) {
  struct progress *pr = arg;
  double now = now_s();
  if (now - pr->last < PROGRESS_EVERY_S)
    return;
  pr->last = now;
  fprintf(stderr, "loom-sim: %d ranks, %s, %zu B: %.1f million events in %.0f s so far\n",
          pr->nranks, loom_algo_name(pr->algo), pr->count * pr->esize, (double)events / 1e6,
          now - pr->start);
}

/* The most memory this process has held, in MiB (VmHWM); -1 unknown. */
static long peak_mib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
      break;
  fclose(f);
  return kib < 0 ? -1 : (kib + 1023) / 1024;
}

static int predict(const struct loom_sim_params *p, const struct loom_topo *t,
                   const struct opts *o, enum loom_algo algo, size_t count,
                   struct loom_sim_result *r) {
  double start = now_s();
  struct progress pr = {t->nranks, algo, count, o->esize, start, start};
  struct loom_sim_call c = {.coll = o->coll,
                            .algo = algo,
                            .count = count,
                            .elem_size = o->esize,
                            .fold = o->exact ? LOOM_SIM_FOLD_NEVER : LOOM_SIM_FOLD_AUTO,
                            .progress = report_progress,
                            .progress_arg = &pr};
  char err[512];
  int rc = loom_sim_predict(p, t, &c, r, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "loom-sim: %d ranks, %s, %s, %zu elements: %s\n", t->nranks,
            loom_coll_name(o->coll), loom_algo_name(algo), count, err);
    exit(1);
  }
  return rc;
}

static void topo_or_die(struct loom_topo *t, int nnodes, int local) {
  if (loom_sim_topo(t, nnodes, local) != 0) {
    fprintf(stderr, "loom-sim: out of memory for %d x %d ranks\n", nnodes, local);
    exit(1);
  }
}

static const char *simulated_text(const struct loom_sim_result *r, const struct loom_sim_call *c,
                                  char *buf, size_t len) {
  snprintf(buf, len, "%d%s%s", r->nsim, r->folded ? " (node 0)" : " (all)",
           r->count != c->count ? " ~" : "");
  return buf;
}

/* ---- one configuration: every algorithm at every size ---- */

static void run_table(const struct opts *o, const struct loom_sim_params *p) {
  struct loom_topo t;
  topo_or_die(&t, o->nnodes, o->local);
  int n = t.nranks;
  enum loom_algo algos[LOOM_ALGO_COUNT];
  int na = algo_list(o, algos);
  printf("# loom-sim: %d nodes x %d ranks = %d ranks, %s, %s (%zu B)\n", o->nnodes, o->local, n,
         loom_coll_name(o->coll), o->dtname, o->esize);
  printf("# eff = busbw / %.2f GB/s (one stream over the slowest level crossed); "
         "simulated: ranks run by the model (node 0: folded; ~ count rounded up to a "
         "multiple of the rank count)\n",
         ref_bw(p, o->nnodes) / 1e9);
  printf("#%11s %-9s %12s %8s %8s %6s %18s %9s %9s %10s\n", "size(B)", "algo", "time(us)",
         "algbw", "busbw", "eff", "simulated", "gen(ms)", "model(ms)", "events");
  for (size_t b = o->minb; b <= o->maxb; b *= (size_t)o->factor) {
    size_t count = count_of(o->coll, b, n, o->esize);
    if (count == 0)
      continue;
    size_t bytes = bytes_of(o->coll, count, n, o->esize);
    double best = INFINITY;
    enum loom_algo best_algo = LOOM_ALGO_AUTO;
    for (int i = 0; i < na; i++) {
      struct loom_sim_result r;
      if (predict(p, &t, o, algos[i], count, &r) != 0) {
        printf("%12zu %-9s %12s\n", bytes, loom_algo_name(algos[i]), "n/a");
        continue;
      }
      struct loom_sim_call c = {.coll = o->coll,
                                .algo = algos[i],
                                .count = count,
                                .elem_size = o->esize,
                                .fold = LOOM_SIM_FOLD_AUTO};
      char sim[32];
      double algbw = (double)bytes / r.time / 1e9, busbw = algbw * bus_factor(o->coll, n);
      printf("%12zu %-9s %12.2f %8.3f %8.3f %6.3f %18s %9.2f %9.2f %10ld\n", bytes,
             loom_algo_name(algos[i]), r.time * 1e6, algbw, busbw, busbw * 1e9 / ref_bw(p, o->nnodes),
             simulated_text(&r, &c, sim, sizeof sim), r.gen_s * 1e3, r.sim_s * 1e3, r.events);
      if (r.time < best) {
        best = r.time;
        best_algo = algos[i];
      }
    }
    enum loom_algo pick = loom_sim_tuner_pick(&t, o->coll, count, o->esize);
    printf("# %10zu tuner: %s; best predicted: %s (%.2f us)\n", bytes, loom_algo_name(pick),
           loom_algo_name(best_algo), best * 1e6);
  }
  loom_topo_free(&t);
}

/* ---- a sweep over rank counts ---- */

static void run_sweep(const struct opts *o, const struct loom_sim_params *p) {
  enum loom_algo algos[LOOM_ALGO_COUNT];
  int na = algo_list(o, algos);
  printf("# loom-sim sweep: %d ranks per node, 1, 2, 4 ... nodes up to %d ranks, %s, %s\n",
         o->local, o->sweep_max, loom_coll_name(o->coll), o->dtname);
  for (size_t b = o->minb; b <= o->maxb; b *= (size_t)o->factor) {
    printf("#\n# size %zu B: time in us, busbw in GB/s (eff = busbw / the stream rate of "
           "the slowest level); ~ count rounded up\n#%6s %6s", b, "ranks", "nodes");
    for (int i = 0; i < na; i++)
      printf(" %12s %7s %5s", loom_algo_name(algos[i]), "busbw", "eff");
    printf(" %8s %8s %9s %9s\n", "tuner", "best", "gen(ms)", "model(ms)");
    for (int nodes = 1; nodes * o->local <= o->sweep_max; nodes *= 2) {
      struct loom_topo t;
      topo_or_die(&t, nodes, o->local);
      int n = t.nranks;
      if (n < 2) {
        loom_topo_free(&t);
        continue;
      }
      size_t count = count_of(o->coll, b, n, o->esize);
      if (count == 0) {
        loom_topo_free(&t);
        continue;
      }
      printf(" %6d %6d", n, nodes);
      double best = INFINITY, gen = 0, sim = 0;
      enum loom_algo best_algo = LOOM_ALGO_AUTO;
      size_t bytes = bytes_of(o->coll, count, n, o->esize);
      for (int i = 0; i < na; i++) {
        struct loom_sim_result r;
        if (predict(p, &t, o, algos[i], count, &r) != 0) {
          printf(" %12s %7s %5s", "-", "-", "-");
          continue;
        }
        double busbw = (double)bytes / r.time * bus_factor(o->coll, n);
        printf(" %11.1f%s %7.3f %5.2f", r.time * 1e6, r.count != count ? "~" : " ", busbw / 1e9,
               busbw / ref_bw(p, nodes));
        gen += r.gen_s;
        sim += r.sim_s;
        if (r.time < best) {
          best = r.time;
          best_algo = algos[i];
        }
      }
      printf(" %8s %8s %9.1f %9.1f\n", loom_algo_name(loom_sim_tuner_pick(&t, o->coll, count, o->esize)),
             loom_algo_name(best_algo), gen * 1e3, sim * 1e3);
      fflush(stdout);
      loom_topo_free(&t);
    }
  }
}

/* ---- measured runs: tools/loom-sim-measure.sh output ---- */

struct mcase {
  char tp[16];
  enum loom_coll coll;
  int n;
  size_t bytes, chunk; /* chunk: LOOM_CHUNK_BYTES of the runs, 0 = the default */
  double us[MAX_RUNS];
  int nruns;
};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int read_measured(const char *path, struct mcase *cs) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "loom-sim: %s: %s\n", path, strerror(errno));
    exit(1);
  }
  char line[256], tp[16], coll[32];
  int n, rep, nc = 0, lineno = 0;
  size_t bytes, chunk;
  double us;
  while (fgets(line, sizeof line, f) != NULL) {
    lineno++;
    if (line[0] == '#' || line[0] == '\n')
      continue;
    chunk = 0;
    int got = sscanf(line, "%15s %31s %d %zu %lf %d %zu", tp, coll, &n, &bytes, &us, &rep, &chunk);
    if (got < 6 || n < 1 || (strcmp(coll, "allreduce") != 0 && strcmp(coll, "allgather") != 0)) {
      fprintf(stderr, "loom-sim: %s:%d: expected \"TRANSPORT allreduce|allgather NRANKS BYTES "
              "TIME_US REP [CHUNK]\"\n", path, lineno);
      exit(1);
    }
    enum loom_coll c = coll[3] == 'r' ? LOOM_COLL_ALLREDUCE : LOOM_COLL_ALLGATHER;
    int i;
    for (i = 0; i < nc; i++)
      if (strcmp(cs[i].tp, tp) == 0 && cs[i].coll == c && cs[i].n == n && cs[i].bytes == bytes &&
          cs[i].chunk == chunk)
        break;
    if (i == nc) {
      if (nc == MAX_CASES) {
        fprintf(stderr, "loom-sim: %s: more than %d cases\n", path, MAX_CASES);
        exit(1);
      }
      memset(&cs[nc], 0, sizeof cs[nc]);
      snprintf(cs[nc].tp, sizeof cs[nc].tp, "%s", tp);
      cs[nc].coll = c;
      cs[nc].n = n;
      cs[nc].bytes = bytes;
      cs[nc].chunk = chunk;
      nc++;
    }
    if (cs[i].nruns < MAX_RUNS)
      cs[i].us[cs[i].nruns++] = us;
  }
  fclose(f);
  return nc;
}

static int cmp_case(const void *a, const void *b) {
  const struct mcase *x = a, *y = b;
  int c = strcmp(x->tp, y->tp);
  if (c != 0)
    return c;
  if (x->coll != y->coll)
    return x->coll < y->coll ? -1 : 1;
  if (x->n != y->n)
    return x->n < y->n ? -1 : 1;
  if (x->chunk != y->chunk)
    return x->chunk < y->chunk ? -1 : 1;
  return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* The model's time (s) of a measured case: one node of n ranks whose
 * links are transport tp, the tuner's algorithm, cores as measured. */
static double model_case(const struct mcase *m, const struct loom_sim_params *base,
                         const struct loom_sim_calibration *cal, const struct opts *o,
                         const char **algo) {
  const struct loom_sim_transport *tp = loom_sim_transport_find(cal, m->tp);
  if (tp == NULL) {
    fprintf(stderr, "loom-sim: no transport \"%s\" in the calibration\n", m->tp);
    exit(1);
  }
  struct loom_sim_params p = *base;
  p.intra = tp->level;
  p.cores = o->cores >= 0 ? o->cores : cal->cores;
  p.llc_bytes = o->llc_mib >= 0 ? o->llc_mib * 1048576.0 : cal->llc_bytes;
  p.mem_factor = o->mem_factor >= 1 ? o->mem_factor : cal->mem_factor; /* --fit changes it */
  if (m->chunk > 0)
    p.chunk_bytes = m->chunk;
  struct loom_topo t;
  topo_or_die(&t, 1, m->n);
  struct opts oc = *o;
  oc.coll = m->coll;
  size_t count = count_of(m->coll, m->bytes, m->n, o->esize);
  struct loom_sim_result r;
  if (count == 0 || predict(&p, &t, &oc, LOOM_ALGO_AUTO, count, &r) != 0) {
    loom_topo_free(&t);
    *algo = "n/a";
    return NAN;
  }
  *algo = loom_algo_name(r.algo);
  loom_topo_free(&t);
  return r.time;
}

static void run_compare(const struct opts *o, const struct loom_sim_params *p,
                        const struct loom_sim_calibration *cal) {
  static struct mcase cs[MAX_CASES];
  int nc = read_measured(o->compare, cs);
  qsort(cs, (size_t)nc, sizeof cs[0], cmp_case);
  printf("# loom-sim --compare %s: one node, cores %d; measured = median of the runs "
         "[min, max]\n", o->compare, o->cores >= 0 ? o->cores : cal->cores);
  printf("#%-9s %-9s %5s %10s %7s %-8s %10s %22s %10s %7s\n", "transport", "coll", "ranks",
         "size(B)", "chunk", "algo", "meas(us)", "[min, max]", "model(us)", "error");
  printf("# (* after the error: the model is inside the measured [min, max])\n");
  double sum_abs = 0;
  int within = 0, total = 0, in_range = 0;
  for (int i = 0; i < nc; i++) {
    const char *algo;
    double pred = model_case(&cs[i], p, cal, o, &algo) * 1e6;
    double v[MAX_RUNS];
    memcpy(v, cs[i].us, sizeof v);
    double med = median(v, cs[i].nruns), lo = v[0], hi = v[cs[i].nruns - 1];
    double e = (pred - med) / med;
    char range[40];
    snprintf(range, sizeof range, "[%.1f, %.1f]", lo, hi);
    char chunk[24] = "-";
    if (cs[i].chunk > 0)
      snprintf(chunk, sizeof chunk, "%zuK", cs[i].chunk >> 10);
    printf(" %-9s %-9s %5d %10zu %7s %-8s %10.1f %22s %10.1f %+6.0f%%%s\n", cs[i].tp,
           loom_coll_name(cs[i].coll), cs[i].n, cs[i].bytes, chunk, algo, med, range, pred,
           e * 100, pred >= lo && pred <= hi ? " *" : "");
    if (!isnan(e)) {
      sum_abs += fabs(e);
      within += fabs(e) <= 0.25;
      in_range += pred >= lo && pred <= hi;
      total++;
    }
  }
  printf("# %d of %d cases within 25%%, %d inside the measured range; mean |error| %.0f%%\n",
         within, total, in_range, total ? 100 * sum_abs / total : 0.0);
}

/* ---- fitting a transport to the 2-rank all-gathers ---- */

struct fit {
  const struct mcase *cs;
  int nc, small;
  double small_s; /* the smallest all-gather's median, seconds */
  struct loom_sim_transport *tp;
  struct loom_sim_calibration *cal;
  const struct loom_sim_params *p;
  const struct opts *o;
};

/* The buffers of a measured call on its node (as build.c counts them,
 * less scratch). */
static double node_bytes(const struct mcase *m) {
  double out = (double)m->bytes, in = m->coll == LOOM_COLL_ALLGATHER ? out / m->n : out;
  return (in + out) * m->n;
}

/* The transport's 2-rank all-gathers whose buffers fit the cache. */
static int fit_uses(const struct fit *f, const struct mcase *m) {
  return strcmp(m->tp, f->tp->name) == 0 && m->n == 2 && m->coll == LOOM_COLL_ALLGATHER &&
         (f->cal->llc_bytes <= 0 || node_bytes(m) <= f->cal->llc_bytes);
}

/* With bw and overhead set: alpha from the smallest all-gather, then the
 * sum of squared log errors over the all-gathers of 64 KiB and more. */
static double fit_cost(const struct fit *f, double bw, double overhead) {
  const char *algo;
  f->tp->level.bw = bw;
  f->tp->level.overhead = overhead;
  f->tp->level.alpha = 0;
  double t0 = model_case(&f->cs[f->small], f->p, f->cal, f->o, &algo);
  f->tp->level.alpha = f->small_s > t0 ? f->small_s - t0 : 0;
  double cost = 0;
  for (int i = 0; i < f->nc; i++) {
    const struct mcase *m = &f->cs[i];
    if (!fit_uses(f, m) || m->bytes < (64u << 10))
      continue;
    double v[MAX_RUNS];
    memcpy(v, m->us, sizeof v);
    double d = log(model_case(m, f->p, f->cal, f->o, &algo) * 1e6 / median(v, m->nruns));
    cost += d * d;
  }
  return cost;
}

/* Golden-section search of x in [lo, hi] (on log x) for the least cost,
 * the other parameter held. */
static double golden(const struct fit *f, int which, double other, double lo, double hi) {
  double a = log(lo), b = log(hi), g = (sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 40; it++) {
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = which == 0 ? fit_cost(f, exp(x1), other) : fit_cost(f, other, exp(x1));
    double f2 = which == 0 ? fit_cost(f, exp(x2), other) : fit_cost(f, other, exp(x2));
    if (f1 < f2)
      b = x2;
    else
      a = x1;
  }
  return exp((a + b) / 2);
}

static void run_fit(const struct opts *o, const struct loom_sim_params *p,
                    struct loom_sim_calibration *cal) {
  static struct mcase cs[MAX_CASES];
  int nc = read_measured(o->fit, cs);
  for (int k = 0; k < cal->ntp; k++) {
    struct fit f = {.cs = cs,
                    .nc = nc,
                    .small = -1,
                    .small_s = 0,
                    .tp = &cal->tp[k],
                    .cal = cal,
                    .p = p,
                    .o = o};
    cal->mem_factor = 1; /* fitted last */
    for (int i = 0; i < nc; i++)
      if (fit_uses(&f, &cs[i]) && cs[i].chunk == 0 &&
          (f.small < 0 || cs[i].bytes < cs[f.small].bytes))
        f.small = i;
    if (f.small < 0) {
      fprintf(stderr, "loom-sim: %s: no 2-rank all-gather over %s; keeping its values\n",
              o->fit, f.tp->name);
      continue;
    }
    double v[MAX_RUNS];
    memcpy(v, cs[f.small].us, sizeof v);
    f.small_s = median(v, cs[f.small].nruns) * 1e-6;
    /* bw and overhead in turn (the overhead is what separates runs of
     * different LOOM_CHUNK_BYTES), alpha following from the smallest size */
    double bw = 1e9, oh = 1e-7;
    for (int round = 0; round < 6; round++) {
      bw = golden(&f, 0, oh, 0.01e9, 1000e9);
      oh = golden(&f, 1, bw, 1e-9, 100e-6);
    }
    double cost = fit_cost(&f, bw, oh);
    int npts = 0;
    for (int i = 0; i < nc; i++)
      npts += fit_uses(&f, &cs[i]) && cs[i].bytes >= (64u << 10);
    fprintf(stderr,
            "loom-sim: %s: alpha %.2f us (2-rank all-gather of %zu B), bw %.3f GB/s, overhead "
            "%.3f us (rms log error %.3f over %d sizes >= 64 KiB)\n",
            f.tp->name, f.tp->level.alpha * 1e6, cs[f.small].bytes, bw / 1e9, oh * 1e6,
            npts ? sqrt(cost / npts) : 0.0, npts);
  }
  /* then the memory factor, on every 2-rank run whose buffers outgrow the
   * cache */
  if (cal->llc_bytes > 0) {
    double a = 0, b = log(10.0), g = (sqrt(5.0) - 1) / 2;
    int npts = 0;
    for (int it = 0; it < 40; it++) {
      double xs[2] = {b - g * (b - a), a + g * (b - a)}, fs[2] = {0, 0};
      for (int j = 0; j < 2; j++) {
        cal->mem_factor = exp(xs[j]);
        npts = 0;
        for (int i = 0; i < nc; i++) {
          if (cs[i].n != 2 || node_bytes(&cs[i]) <= cal->llc_bytes)
            continue;
          double v[MAX_RUNS];
          memcpy(v, cs[i].us, sizeof v);
          const char *algo;
          double d = log(model_case(&cs[i], p, cal, o, &algo) * 1e6 / median(v, cs[i].nruns));
          fs[j] += d * d;
          npts++;
        }
      }
      if (fs[0] < fs[1])
        b = xs[1];
      else
        a = xs[0];
    }
    cal->mem_factor = exp((a + b) / 2);
    fprintf(stderr, "loom-sim: memory factor %.2f (%d 2-rank runs beyond the %.0f MiB cache)\n",
            cal->mem_factor, npts, cal->llc_bytes / 1048576.0);
  }
  snprintf(cal->source, sizeof cal->source, "loom-sim --fit %s", o->fit);
  loom_sim_calibration_write(cal, stdout);
}

/* ---- this host's reduce and copy bandwidth ---- */

static void run_measure_host(void) {
  static const size_t sizes[] = {512u << 10, 4u << 20, 16u << 20};
  printf("# this host, float32 sum, best of 5 runs: GB/s of one operand\n");
  printf("#%11s %12s %12s\n", "bytes", "reduce", "memcpy");
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    char *a = malloc(n), *b = malloc(n), *d = malloc(n);
    if (a == NULL || b == NULL || d == NULL) {
      fprintf(stderr, "loom-sim: out of memory\n");
      exit(1);
    }
    memset(a, 0, n);
    memset(b, 0, n);
    memset(d, 0, n);
    int reps = (int)((64u << 20) / n) + 1;
    double best_r = INFINITY, best_c = INFINITY;
    for (int run = 0; run < 5; run++) {
      double t0 = now_s();
      for (int k = 0; k < reps; k++)
        loom_reduce(d, a, b, n / 4, loomFloat32, loomSum);
      double t1 = now_s();
      for (int k = 0; k < reps; k++) {
        memcpy(d, a, n);
        __asm__ __volatile__("" ::"r"(d) : "memory");
      }
      double t2 = now_s();
      best_r = fmin(best_r, (t1 - t0) / reps);
      best_c = fmin(best_c, (t2 - t1) / reps);
    }
    printf("%12zu %12.2f %12.2f\n", n, (double)n / best_r / 1e9, (double)n / best_c / 1e9);
    free(a);
    free(b);
    free(d);
  }
}

int loom_sim_init_main(int argc, char **argv); /* loom-sim-init.c */

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they are made, piped too */
  if (argc > 1 && strcmp(argv[1], "--init") == 0)
    return loom_sim_init_main(argc - 1, argv + 1);
  struct opts o;
  parse(argc, argv, &o);
  if (o.measure_host) {
    run_measure_host();
    return 0;
  }
  struct loom_sim_calibration cal;
  loom_sim_calibration_default(&cal);
  char err[512];
  if (o.calfile != NULL && loom_sim_calibration_read(&cal, o.calfile, err, sizeof err) != 0) {
    fprintf(stderr, "loom-sim: %s\n", err);
    return 2;
  }
  struct loom_sim_params p;
  make_params(&o, &cal, &p);
  if (o.fit != NULL) {
    run_fit(&o, &p, &cal);
    return 0;
  }
  if (o.compare != NULL) {
    print_params(&p, &o, &cal);
    run_compare(&o, &p, &cal);
    return 0;
  }
  print_params(&p, &o, &cal);
  if (o.sweep_max > 0)
    run_sweep(&o, &p);
  else
    run_table(&o, &p);
  printf("# peak memory: %ld MiB\n", peak_mib());
  return 0;
}
