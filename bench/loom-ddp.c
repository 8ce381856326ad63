/*
 * loom-ddp.c — data-parallel training steps as PyTorch's
 * DistributedDataParallel runs them, over Loom: how much of linear scaling
 * a job keeps when its gradient all-reduces overlap its backward pass.
 *
 *   loomrun -n 4 loom-ddp -P 25M -B 25M -t 100 -s 10 -b 32
 *
 * A "model" of P float32 parameters keeps its gradients in one flat buffer
 * cut into buckets of B bytes (DDP's bucket_cap_mb).  A step is a fixed
 * compute phase, a deterministic integer kernel over a 64 KiB per-rank
 * buffer: a forward third, then a backward pass during which the buckets
 * become ready last bucket first.  As each becomes ready its gradients are
 * written (as DDP copies gradients into its bucket) and its
 * loomAllReduce(loomAvg) is queued on a Loom stream, so it runs while the
 * backward pass goes on; the step ends with loomStreamSynchronize.
 *
 * The compute phase, kernel and gradient writes, is calibrated once, on
 * rank 0, to about -t ms (or fixed with -W, so that runs at several rank
 * counts do the same work per rank).  Each timed step follows the same
 * step without communication, timed too ("compute-only"): on a machine
 * with fewer cores (or less memory bandwidth) than the ranks need, that is
 * what the machine allows without Loom, which separates oversubscription
 * from the cost of communication.  Gradients are small integers whose sum
 * over the ranks is exactly nranks times a known value, so the average is
 * exact in float32 and is checked element by element on every rank after
 * the first step and the last.  Uses the public API only.  Exit status: 0 on success, 1 on a
 * Loom error or a wrong gradient, 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include "loom_failure.h"
#include "bench_size.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom.h"

/* ---- Errors ------------------------------------------------------------------ */

static loomComm_t g_comm;
static int g_rank = -1;

static void die_loom(const char *what, loomResult_t res) {
  bench_report_loom_failure("loom-ddp", g_rank, what, res);
  if (g_comm != NULL)
    loomCommAbort(g_comm); /* the peers fail at once instead of waiting */
  exit(1);
}

#define LOOMCHECK(call)                                                        \
  do {                                                                         \
    loomResult_t res_ = (call);                                                \
    if (res_ != loomSuccess)                                                   \
      die_loom(#call, res_);                                                   \
  } while (0)

/* ---- Options ----------------------------------------------------------------- */

typedef struct {
  size_t params;       /* -P: float32 parameters */
  size_t bucket_bytes; /* -B */
  double compute_ms;   /* -t: the calibration target */
  uint64_t passes;     /* -W: kernel passes per step; 0 = calibrate */
  int steps, warmup;   /* -s, -w */
  int batch;           /* -b: samples per rank per step */
  double ref_samples;  /* --ref-samples: a 1-rank run's samples/s; 0 = none */
  const char *json;    /* --json FILE */
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: loomrun -n NRANKS loom-ddp [options]\n"
          "  -P params         float32 parameters of the model (default 25M = 26214400;\n"
          "                    K, M, G suffixes are powers of two)\n"
          "  -B bytes          gradient bucket size (default 25M, DDP's bucket_cap_mb=25)\n"
          "  -t ms             compute time per step (kernel and gradient writes) to\n"
          "                    calibrate the kernel to, on rank 0 (default 100)\n"
          "  -W passes         kernel passes per step instead of calibrating (loom-scaling\n"
          "                    --ddp passes the 1-rank run's, so that every run does the\n"
          "                    same work per rank)\n"
          "  -s steps          timed steps of each phase (default 10)\n"
          "  -w steps          warm-up steps with communication (default 2)\n"
          "  -b batch          samples per rank per step, for samples/s (default 32)\n"
          "  --ref-samples S   samples/s of a 1-rank run of the same options: prints the\n"
          "                    scaling efficiency samples/s / (nranks * S)\n"
          "  --json FILE       also write the results to FILE as JSON (rank 0)\n"
          "  -h, --help        this help\n"
          "Each step: a forward third of the compute, then the backward two thirds, in\n"
          "one slice per bucket; after each slice the next bucket (last first) gets its\n"
          "gradients and its loomAllReduce(float32, avg) is queued on a Loom stream; the\n"
          "step ends with loomStreamSynchronize.  Each timed step follows the same step\n"
          "without communication (compute-only), timed too.  The averaged gradients are\n"
          "checked exactly on every rank after the first and the last step.\n");
}

static void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "loom-ddp: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(loom-ddp -h lists the options)\n");
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

static int parse_positive(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno != 0 || !(v > 0) || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

static void parse_args(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.params = 25u << 20, .bucket_bytes = 25u << 20, .compute_ms = 100,
                .steps = 10, .warmup = 2, .batch = 32};
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    int is_long = strcmp(arg, "--ref-samples") == 0 || strcmp(arg, "--json") == 0;
    if (!is_long && (arg[0] != '-' || arg[1] == '\0' || arg[2] != '\0' ||
                     strchr("PBtWswb", arg[1]) == NULL))
      usage_error("unknown argument '%s'", arg);
    if (a + 1 >= argc)
      usage_error("option %s needs a value", arg);
    const char *val = argv[++a];
    if (strcmp(arg, "--ref-samples") == 0) {
      if (parse_positive(val, &o->ref_samples))
        usage_error("--ref-samples takes a positive number of samples/s, not '%s'", val);
      continue;
    }
    if (strcmp(arg, "--json") == 0) {
      o->json = val;
      continue;
    }
    size_t sz = 0;
    switch (arg[1]) {
    case 'P':
      if (bench_parse_size(val, SIZE_MAX / 2 / sizeof(float), &sz) || sz == 0)
        usage_error("-P takes a positive parameter count (K, M, G suffixes), not '%s'", val);
      o->params = sz;
      break;
    case 'B':
      if (bench_parse_size(val, SIZE_MAX / 2, &sz) || sz < sizeof(float))
        usage_error("-B takes a bucket size of at least 4 bytes (one float), not '%s'", val);
      o->bucket_bytes = sz;
      break;
    case 't':
      if (parse_positive(val, &o->compute_ms) || o->compute_ms > 3600e3)
        usage_error("-t takes milliseconds, more than 0 and at most an hour, not '%s'", val);
      break;
    case 'W':
      if (bench_parse_size(val, UINT32_MAX, &sz) || sz == 0)
        usage_error("-W takes a positive number of kernel passes, not '%s'", val);
      o->passes = sz;
      break;
    case 's':
      if (parse_int(val, 1, 1000000, &o->steps)) usage_error("bad step count '%s' (1 or more)", val);
      break;
    case 'w':
      if (parse_int(val, 0, 1000000, &o->warmup)) usage_error("bad warm-up count '%s'", val);
      break;
    case 'b':
      if (parse_int(val, 1, INT_MAX, &o->batch)) usage_error("bad batch size '%s' (1 or more)", val);
      break;
    }
  }
}

/* ---- The compute kernel -------------------------------------------------------- */

/* 64 KiB of 32-bit words, small enough to stay in a core's L2 cache, so
 * that one pass costs the same whatever the other ranks do to memory. */
#define KERNEL_WORDS 16384
static uint32_t kernel_words[KERNEL_WORDS];
static volatile uint32_t kernel_sink; /* keeps the work from being optimised away */

static void kernel_run(uint64_t passes) {
  for (uint64_t p = 0; p < passes; p++)
    for (size_t i = 0; i < KERNEL_WORDS; i++)
      kernel_words[i] = kernel_words[i] * 1664525u + 1013904223u;
  kernel_sink = kernel_words[passes % KERNEL_WORDS];
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds one kernel pass takes here: passes doubled until a run lasts
 * 20 ms, then the fastest of five runs of that many (the fastest: on a
 * shared machine the others only add other processes' time). */
static double kernel_pass_seconds(void) {
  uint64_t n = 16;
  kernel_run(n);
  for (;;) {
    double t0 = now_s();
    kernel_run(n);
    if (now_s() - t0 >= 0.02 || n >= (1ull << 40))
      break;
    n *= 2;
  }
  double best = 1e30;
  for (int k = 0; k < 5; k++) {
    double t0 = now_s();
    kernel_run(n);
    double t = now_s() - t0;
    best = t < best ? t : best;
  }
  return best / (double)n;
}

/* ---- Gradients ----------------------------------------------------------------- */

/* Gradient i of `rank` at `step`: base(i, step) plus +d on even ranks and -d
 * on odd ones, 0 on the last rank when the count is odd, so the sum over
 * the ranks is exactly nranks * base and the average exactly base.  Every
 * value is an integer of magnitude at most 66: every partial sum is exact. */
static int grad_base(size_t i, int step) {
  return 1 + (int)((i * 7 + (size_t)step * 5) & 63);
}

static void grad_fill(float *g, size_t first, size_t count, int rank, int nranks, int step) {
  int sign = (nranks & 1) && rank == nranks - 1 ? 0 : (rank & 1) ? -1 : 1;
  for (size_t k = 0; k < count; k++) {
    size_t i = first + k;
    int d = 1 + (int)(((i >> 6) + (size_t)step) & 1);
    g[k] = (float)(grad_base(i, step) + sign * d);
  }
}

/* Elements of g that are not the exact average; the first one is reported
 * on stderr. */
static size_t grad_check(const float *g, size_t count, int step) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float want = (float)grad_base(i, step);
    if (g[i] != want) {
      if (wrong == 0)
        fprintf(stderr, "loom-ddp: rank %d: step %d: gradient %zu is %g, expected %g\n", g_rank,
                step, i, (double)g[i], (double)want);
      wrong++;
    }
  }
  return wrong;
}

/* ---- One step ------------------------------------------------------------------ */

typedef struct {
  opts_t o;
  int rank, nranks;
  loomComm_t comm;
  loomStream_t stream;
  float *grads;      /* params floats, bucket k at k * bucket_elems */
  size_t bucket_elems, nbuckets;
  uint64_t passes;   /* kernel passes per step */
  double fill_s;     /* writing every gradient once, as calibrated (rank 0) */
} ddp_t;

/* Kernel passes for a compute phase of about -t ms in all: -t minus the
 * time writing the gradients takes (the fastest of three writes, after one
 * that maps the pages), at least one pass. */
static uint64_t calibrate_step(ddp_t *d) {
  grad_fill(d->grads, 0, d->o.params, d->rank, d->nranks, 0);
  d->fill_s = 1e30;
  for (int k = 0; k < 3; k++) {
    double t0 = now_s();
    grad_fill(d->grads, 0, d->o.params, d->rank, d->nranks, 0);
    double t = now_s() - t0;
    d->fill_s = t < d->fill_s ? t : d->fill_s;
  }
  double passes = (d->o.compute_ms * 1e-3 - d->fill_s) / kernel_pass_seconds();
  return passes < 1 ? 1 : passes > (double)UINT32_MAX ? UINT32_MAX : (uint64_t)passes;
}

typedef struct {
  double step_s; /* the whole step */
  double wait_s; /* in loomStreamSynchronize after the backward pass */
} step_time_t;

/* One step: forward, then backward with bucket k ready after slice
 * nbuckets-1-k; with `communicate`, each ready bucket's all-reduce is queued
 * at once and the step ends when the stream has run them all. */
static step_time_t ddp_step(ddp_t *d, int step, int communicate) {
  step_time_t t = {0, 0};
  double t0 = now_s();
  uint64_t forward = d->passes / 3, backward = d->passes - forward;
  kernel_run(forward);
  for (size_t j = 0; j < d->nbuckets; j++) {
    kernel_run(backward * (j + 1) / d->nbuckets - backward * j / d->nbuckets);
    size_t k = d->nbuckets - 1 - j;
    size_t first = k * d->bucket_elems;
    size_t count = d->o.params - first < d->bucket_elems ? d->o.params - first : d->bucket_elems;
    float *bucket = d->grads + first;
    grad_fill(bucket, first, count, d->rank, d->nranks, step);
    if (communicate)
      LOOMCHECK(loomAllReduce(bucket, bucket, count, loomFloat32, loomAvg, d->comm, d->stream));
  }
  double t1 = now_s();
  if (communicate)
    LOOMCHECK(loomStreamSynchronize(d->stream));
  t.step_s = now_s() - t0;
  t.wait_s = now_s() - t1;
  return t;
}

/* Checks the averaged gradients of `step` on every rank; returns the number
 * of wrong elements over all ranks (rank 0 prints the line). */
static long long check_step(ddp_t *d, int step) {
  double wrong = (double)grad_check(d->grads, d->o.params, step);
  LOOMCHECK(loomAllReduce(&wrong, &wrong, 1, loomFloat64, loomSum, d->comm, NULL));
  if (d->rank == 0) {
    if (wrong == 0)
      printf("check: step %d: %zu averaged gradients exact on all %d rank(s)\n", step,
             d->o.params, d->nranks);
    else
      printf("check: step %d: %.0f averaged gradients wrong over %d rank(s) (FAILED; each "
             "rank's first on stderr)\n", step, wrong, d->nranks);
    fflush(stdout);
  }
  return (long long)wrong;
}

/* Largest value of x over the ranks. */
static double max_over_ranks(ddp_t *d, double x) {
  LOOMCHECK(loomAllReduce(&x, &x, 1, loomFloat64, loomMax, d->comm, NULL));
  return x;
}

/* ---- Report -------------------------------------------------------------------- */

typedef struct {
  double compute_step_s, ddp_step_s, wait_s; /* per step, slowest rank */
  long long wrong;
  int first_checked, last_checked;
} results_t;

static void print_header(const ddp_t *d, const char *launcher, int calibrated) {
  const opts_t *o = &d->o;
  int lib = 0;
  LOOMCHECK(loomGetVersion(&lib));
  size_t last = o->params - (d->nbuckets - 1) * d->bucket_elems;
  printf("# loom-ddp: %d rank(s), launcher %s, Loom library %d.%d.%d\n", d->nranks, launcher,
         lib / 10000, lib / 100 % 100, lib % 100);
  printf("# model: %zu float32 parameters (%.1f MiB) in %zu bucket(s) of %zu bytes (the last "
         "%zu bytes); bucket %zu is ready first\n",
         o->params, (double)o->params * 4 / 1048576.0, d->nbuckets, d->bucket_elems * 4,
         last * 4, d->nbuckets - 1);
  if (calibrated)
    printf("# compute: %llu kernel passes per step and writing the gradients (%.1f ms), "
           "calibrated on rank 0 to %g ms in all (-W %llu repeats this work)\n",
           (unsigned long long)d->passes, d->fill_s * 1e3, o->compute_ms,
           (unsigned long long)d->passes);
  else
    printf("# compute: %llu kernel passes per step (-W, as given)\n",
           (unsigned long long)d->passes);
  printf("# %d warm-up step(s), then %d timed ddp steps, each after the same step without "
         "communication (compute-only); batch %d sample(s) per rank\n", o->warmup, o->steps,
         o->batch);
  fflush(stdout);
}

static void print_results(const ddp_t *d, const results_t *r) {
  const opts_t *o = &d->o;
  double c_sps = 1.0 / r->compute_step_s, sps = 1.0 / r->ddp_step_s;
  double samples = sps * o->batch * d->nranks;
  printf("compute-only: %.3f steps/s  %.2f ms/step  (the same steps, no communication)\n",
         c_sps, r->compute_step_s * 1e3);
  printf("ddp: %.3f steps/s  %.2f ms/step  samples/s %.1f  (%d rank(s) x batch %d); waiting "
         "for all-reduces after the backward pass %.2f ms/step\n",
         sps, r->ddp_step_s * 1e3, samples, d->nranks, o->batch, r->wait_s * 1e3);
  printf("overlap: ddp / compute-only steps/s = %.1f%%\n", 100.0 * sps / c_sps);
  if (o->ref_samples > 0)
    printf("efficiency vs 1 rank: %.1f%% = samples/s %.1f / (%d x %.6g)\n",
           100.0 * samples / (d->nranks * o->ref_samples), samples, d->nranks, o->ref_samples);
  else if (d->nranks == 1)
    printf("efficiency vs 1 rank: 100.0%% (this run is the 1-rank reference: samples/s %.1f)\n",
           samples);
  else
    printf("efficiency vs 1 rank: N/A (give --ref-samples from a 1-rank run, or use "
           "loom-scaling --ddp)\n");
  fflush(stdout);
}

static int write_json(const ddp_t *d, const results_t *r) {
  const opts_t *o = &d->o;
  FILE *f = fopen(o->json, "w");
  if (f == NULL) {
    fprintf(stderr, "loom-ddp: cannot write %s: %s\n", o->json, strerror(errno));
    return -1;
  }
  double sps = 1.0 / r->ddp_step_s, samples = sps * o->batch * d->nranks;
  fprintf(f,
          "{\"tool\":\"loom-ddp\",\"nranks\":%d,\"params\":%zu,\"bucket_bytes\":%zu,"
          "\"buckets\":%zu,\"kernel_passes\":%llu,\"batch\":%d,\"warmup\":%d,\"steps\":%d,\n"
          " \"compute_only\":{\"step_ms\":%.6g,\"steps_per_s\":%.6g,\"samples_per_s\":%.6g},\n"
          " \"ddp\":{\"step_ms\":%.6g,\"steps_per_s\":%.6g,\"samples_per_s\":%.6g,"
          "\"wait_ms\":%.6g},\n"
          " \"checked_steps\":[%d,%d],\"wrong\":%lld,",
          d->nranks, o->params, d->bucket_elems * 4, d->nbuckets,
          (unsigned long long)d->passes, o->batch, o->warmup, o->steps,
          r->compute_step_s * 1e3, 1.0 / r->compute_step_s,
          o->batch * d->nranks / r->compute_step_s, r->ddp_step_s * 1e3, sps, samples,
          r->wait_s * 1e3, r->first_checked, r->last_checked, r->wrong);
  if (o->ref_samples > 0)
    fprintf(f, "\"ref_samples_per_s\":%.6g,\"efficiency\":%.6g}\n", o->ref_samples,
            samples / (d->nranks * o->ref_samples));
  else
    fprintf(f, "\"ref_samples_per_s\":null,\"efficiency\":null}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "loom-ddp: cannot write %s: %s\n", o->json, strerror(errno));
    return -1;
  }
  return 0;
}

/* ---- Main ------------------------------------------------------------------------ */

/* Warm-up steps (the first checked), then the timed steps (the last
 * checked), each after the same step without communication: interleaved,
 * so that other load on the machine slows both alike. */
static results_t run(ddp_t *d) {
  const opts_t *o = &d->o;
  results_t r = {0, 0, 0, 0, 0, o->warmup + o->steps - 1};
  for (int s = 0; s < o->warmup; s++) {
    ddp_step(d, s, 1);
    if (s == 0)
      r.wrong += check_step(d, s);
  }
  LOOMCHECK(loomBarrier(d->comm, NULL));
  double compute = 0, total = 0, wait = 0;
  for (int s = o->warmup; s < o->warmup + o->steps; s++) {
    compute += ddp_step(d, s, 0).step_s;
    step_time_t t = ddp_step(d, s, 1);
    total += t.step_s;
    wait += t.wait_s;
    if (s == 0 || s == r.last_checked)
      r.wrong += check_step(d, s);
  }
  r.compute_step_s = max_over_ranks(d, compute) / o->steps;
  r.ddp_step_s = max_over_ranks(d, total) / o->steps;
  r.wait_s = max_over_ranks(d, wait) / o->steps;
  return r;
}

static void *alloc_or_die(size_t bytes) {
  size_t align = 4096, rounded = (bytes + align - 1) / align * align;
  void *p = aligned_alloc(align, rounded);
  if (p == NULL) {
    fprintf(stderr, "loom-ddp: rank %d: cannot allocate %zu bytes of gradients (-P)\n", g_rank,
            bytes);
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  ddp_t d = {0};
  parse_args(argc, argv, &d.o);
  const opts_t *o = &d.o;

  loomLaunchInfo_t li;
  loomResult_t res = loomGetLaunchInfo(&li);
  if (res != loomSuccess) {
    bench_report_loom_failure("loom-ddp", -1, "loomGetLaunchInfo", res);
    fprintf(stderr, "  Run under a launcher, e.g. 'loomrun -n 4 loom-ddp ...'.\n");
    return 1;
  }
  d.rank = g_rank = li.rank;
  d.nranks = li.nranks;
  const char *id_env = getenv("LOOM_COMM_ID");
  if (d.nranks > 1 && (id_env == NULL || *id_env == '\0')) {
    fprintf(stderr, "loom-ddp: rank %d: LOOM_COMM_ID is not set: run under loomrun, or set\n"
            "  LOOM_COMM_ID=host:port (the same on every rank; rank 0 listens there)\n",
            d.rank);
    return 1;
  }
  d.bucket_elems = o->bucket_bytes / sizeof(float);
  d.nbuckets = (o->params + d.bucket_elems - 1) / d.bucket_elems;
  if (d.nbuckets > 1000000)
    usage_error("%s: more than 1,000,000 buckets; give a larger -B or a smaller -P", "-B");

  loomUniqueId id;
  LOOMCHECK(loomGetUniqueId(&id));
  LOOMCHECK(loomCommInitRank(&d.comm, d.nranks, id, d.rank));
  g_comm = d.comm;
  LOOMCHECK(loomStreamCreate(&d.stream));
  d.grads = alloc_or_die(o->params * sizeof(float));

  /* Rank 0 alone calibrates (the others wait in the broadcast), so every
   * rank runs the same passes. */
  uint64_t passes = o->passes;
  if (passes == 0 && d.rank == 0)
    passes = calibrate_step(&d);
  LOOMCHECK(loomBroadcast(&passes, &passes, 1, loomUint64, 0, d.comm, NULL));
  d.passes = passes;
  if (d.rank == 0)
    print_header(&d, li.launcher ? li.launcher : "?", o->passes == 0);

  results_t r = run(&d);
  int status = r.wrong ? 1 : 0;
  if (d.rank == 0) {
    print_results(&d, &r);
    if (o->json != NULL && write_json(&d, &r) != 0)
      status = 1;
  }
  LOOMCHECK(loomStreamDestroy(d.stream));
  LOOMCHECK(loomCommFinalize(d.comm));
  LOOMCHECK(loomCommDestroy(d.comm));
  g_comm = NULL;
  free(d.grads);
  return status;
}
