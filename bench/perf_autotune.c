/*
 * perf_autotune.c — loom-perf --autotune FILE: the warm-up sweep people do
 * by hand, automated.
 *
 * For each collective with a choice, each algorithm that can run here gets
 * a child communicator of its own (loomCommSplit with config.algo =
 * "COLL:ALGO"), and one more child may use every algorithm: "default",
 * the library's own choice.  Each size is measured in --rounds rounds,
 * every candidate once per round in turn, so that a change in the
 * machine's speed hits them alike.  The times are max-reduced over the
 * ranks (the slowest rank's mean), so every rank holds the same numbers
 * and makes the same decisions without a further exchange.  Per size the
 * lowest median wins, and it is written only when it beats the default's
 * median by more than the two spreads (max - min over the rounds) added:
 * a lead within the noise would flip from run to run.  Other sizes keep
 * the default ("auto").  Consecutive sizes with one decision make one
 * entry; the last written entry of a collective covers every larger size
 * ("max").  Rank 0 prints each size's row as it finishes and writes FILE
 * in the format of LOOM_TUNE_FILE (src/plan/tune.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "loom_failure.h"
#include "perf_autotune.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_rounds.h"

/* The collectives with a choice of algorithm, and their algorithms: the
 * library's table (loom_algo_applies, src/plan/algo.c), repeated because
 * loom-perf uses the public API only.  Keep the two in step. */
enum { MAX_CANDS = 6 };
static const struct {
  const char *name;
  const char *algos[MAX_CANDS]; /* NULL after the last */
} tune_colls[] = {
    {"allreduce", {"ring", "rd", "oneshot", "tree", "hier", "rhd"}},
    {"allgather", {"ring", "rd"}},
    {"broadcast", {"tree", "chain"}},
    {"reduce", {"tree", "chain"}},
};
enum { NCOLLS = sizeof tune_colls / sizeof tune_colls[0] };

/* What decides which algorithms can run: ranks and their nodes. */
struct shape {
  int nranks, nnodes;
  int uniform;   /* every node has the same number of ranks */
  int node_size; /* ranks on rank 0's node */
};

/* One collective's measurements.  The candidates are cand[0..ncand); index
 * ncand is "default": a child that may use every algorithm, so that the
 * library's tuner chooses as it does without a tune file. */
struct coll_result {
  int ncand;
  const char *cand[MAX_CANDS];
  const char *skipped[MAX_CANDS]; /* cannot run here ... */
  const char *why[MAX_CANDS];     /* ... and why */
  int nskipped;
  size_t *bytes;     /* per sweep size; 0: not measured (count 0, or a repeat) */
  perf_stat_t *stat; /* [candidate * nsizes + size]: over the rounds, us */
  int *winner;       /* per sweep size: an index into cand */
  int *written;      /* per sweep size: the winner beat the default (else auto) */
};

/* ---- Errors ------------------------------------------------------------------ */

static int g_rank;
static loomComm_t g_parent, g_child[MAX_CANDS + 1]; /* the children alive */

static void die_loom(const char *what, loomResult_t res) {
  bench_report_loom_failure("loom-perf --autotune", g_rank, what, res);
  for (int c = 0; c <= MAX_CANDS; c++) /* make the peers fail fast instead of hanging */
    if (g_child[c] != NULL)
      loomCommAbort(g_child[c]);
  loomCommAbort(g_parent);
  exit(1);
}

#define CHECK(call)                                                            \
  do {                                                                         \
    loomResult_t res_ = (call);                                                \
    if (res_ != loomSuccess)                                                   \
      die_loom(#call, res_);                                                   \
  } while (0)

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (p == NULL) {
    fprintf(stderr, "loom-perf --autotune: rank %d: out of memory\n", g_rank);
    exit(1);
  }
  return p;
}

/* ---- Which algorithms can run ------------------------------------------------ */

enum { HOSTID_BYTES = 64 };

/* This rank's node identity, formed as Loom forms it (fill_host_identity in
 * src/bootstrap/bootstrap.c, loom_topo_local_hostid in src/topo/discover.c):
 * hostname "/" boot id, or LOOM_HOSTID when set.  Keep them in step. */
static void local_hostid(char out[HOSTID_BYTES]) {
  char host[64] = "", boot[40] = "";
  gethostname(host, sizeof host - 1);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (fgets(boot, sizeof boot, f) == NULL)
      boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  memset(out, 0, HOSTID_BYTES);
  snprintf(out, HOSTID_BYTES, "%.26s/%.36s", host, boot);
  const char *forced = getenv("LOOM_HOSTID");
  if (forced != NULL && forced[0] != '\0') {
    memset(out, 0, HOSTID_BYTES);
    snprintf(out, HOSTID_BYTES, "%.63s", forced);
  }
}

/* Groups the ranks into nodes by host id, as the library does at init (one
 * all-gather of every rank's id over comm). */
static void get_shape(const struct perf_autotune *a, struct shape *s) {
  char mine[HOSTID_BYTES];
  local_hostid(mine);
  char *all = xcalloc((size_t)a->nranks, HOSTID_BYTES);
  CHECK(loomAllGather(mine, all, HOSTID_BYTES, loomUint8, a->comm, NULL));
  int *size = xcalloc((size_t)a->nranks, sizeof *size); /* ranks per node, by first rank */
  s->nranks = a->nranks;
  s->nnodes = 0;
  for (int r = 0; r < a->nranks; r++) {
    int first = 0;
    while (memcmp(all + (size_t)first * HOSTID_BYTES, all + (size_t)r * HOSTID_BYTES,
                  HOSTID_BYTES) != 0)
      first++;
    s->nnodes += first == r;
    size[first]++;
  }
  s->node_size = size[0];
  s->uniform = 1;
  for (int r = 0; r < a->nranks; r++)
    if (size[r] != 0 && size[r] != size[0])
      s->uniform = 0;
  free(size);
  free(all);
}

/* Why `algo` cannot run on this communicator, or NULL when it can: the
 * rules of loom_algo_runs (src/plan/algo.c), repeated because the public
 * API cannot ask.  A child limited to an algorithm that cannot run falls
 * back to the tuner's choice, whose time would be written under the wrong
 * name.  Keep the two in step.  (With LOOM_TOPO_FILE the library takes
 * its nodes from that file instead of the host ids.) */
static const char *cannot_run(const char *coll, const char *algo, const struct shape *s) {
  int pow2 = s->nranks > 0 && (s->nranks & (s->nranks - 1)) == 0;
  if ((strcmp(algo, "rd") == 0 || strcmp(algo, "rhd") == 0) && !pow2)
    return "needs a power-of-two rank count";
  if (strcmp(algo, "hier") == 0) {
    if (s->nnodes < 2)
      return "needs several nodes";
    if (!s->uniform)
      return "needs nodes of equal size";
    if (s->node_size < 2)
      return "needs more than one rank per node";
  }
  if (strcmp(algo, "tree") == 0 && strcmp(coll, "allreduce") == 0 && s->nnodes < 2)
    return "needs several nodes";
  return NULL;
}

int perf_autotune_parse_colls(const char *list, unsigned *mask, char *err, size_t errlen) {
  *mask = 0;
  if (list == NULL || strcmp(list, "all") == 0) {
    *mask = (1u << NCOLLS) - 1;
    return 0;
  }
  for (const char *p = list;; p++) {
    size_t n = strcspn(p, ",");
    int k = 0;
    while (k < NCOLLS &&
           !(strlen(tune_colls[k].name) == n && strncmp(tune_colls[k].name, p, n) == 0))
      k++;
    if (k == NCOLLS) {
      snprintf(err, errlen,
               "--autotune: \"%.*s\" is not a collective with a choice of algorithm "
               "(-C takes a comma-separated list of allreduce, allgather, broadcast, reduce, "
               "or all)",
               (int)n, p);
      return -1;
    }
    *mask |= 1u << k;
    p += n;
    if (*p == '\0')
      return 0;
  }
}

/* ---- Measuring ----------------------------------------------------------------- */

static void fmt_time(char *out, size_t len, double us) {
  snprintf(out, len, us >= 10000.0 ? "%.0f" : us >= 100.0 ? "%.1f" : "%.2f", us);
}

/* One child per candidate and one for the default, alive together so that
 * the candidates can take turns at each size. */
static void open_children(const struct perf_autotune *a, int k, const struct coll_result *res) {
  const char *coll = tune_colls[k].name;
  for (int c = 0; c <= res->ncand; c++) {
    char spec[128];
    size_t o = (size_t)snprintf(spec, sizeof spec, "%s:", coll);
    if (c < res->ncand)
      snprintf(spec + o, sizeof spec - o, "%s", res->cand[c]);
    else /* every algorithm the collective has: LOOM_ALGO limits no one */
      for (int x = 0; x < MAX_CANDS && tune_colls[k].algos[x] != NULL; x++)
        o += (size_t)snprintf(spec + o, sizeof spec - o, "%s%s", x ? "," : "",
                              tune_colls[k].algos[x]);
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.algo = spec; /* read at init: spec may go */
    config.commName = c < res->ncand ? spec : "autotune-default";
    CHECK(loomCommSplit(a->comm, 0, a->rank, &g_child[c], &config));
  }
}

static void close_children(const struct coll_result *res) {
  for (int c = 0; c <= res->ncand; c++) {
    CHECK(loomCommFinalize(g_child[c]));
    CHECK(loomCommDestroy(g_child[c]));
    g_child[c] = NULL;
  }
}

/* Size i of collective k: -r rounds, in each every candidate and the
 * default once, each round starting one candidate later so that no one
 * always goes first.  Returns 0 when the size is not measured (count 0, or
 * the per-rank count rounded to the last size's); else fills res's stat. */
static int measure_size(const struct perf_autotune *a, int k, struct coll_result *res, int i,
                        size_t last, int64_t *wrong) {
  int nc = res->ncand + 1, n = a->nsizes;
  double *us = xcalloc((size_t)(nc * a->rounds), sizeof *us); /* [c * rounds + round] */
  int measured = 1;
  for (int r = 0; r < a->rounds && measured; r++)
    for (int j = 0; j < nc; j++) {
      int c = (j + r) % nc;
      struct perf_sample s;
      if (a->measure(a->ctx, g_child[c], tune_colls[k].name, a->sizes[i], &s) != 0 ||
          s.bytes == last) {
        measured = 0; /* the same for every candidate and rank */
        break;
      }
      res->bytes[i] = s.bytes;
      us[c * a->rounds + r] = s.us;
      *wrong += s.wrong > 0 ? s.wrong : 0;
    }
  for (int c = 0; measured && c < nc; c++)
    res->stat[c * n + i] = perf_stat(us + c * a->rounds, a->rounds);
  free(us);
  if (!measured)
    res->bytes[i] = 0;
  return measured;
}

/* The rule: the lowest median wins (the earlier candidate on a tie); it is
 * written only when its median beats the default's by more than the two
 * spreads (max - min over the rounds) added, else the size keeps the
 * tuner's choice.  Every rank holds the same times and decides alike. */
static void decide(const struct perf_autotune *a, struct coll_result *res, int i, double *lead,
                   double *spread) {
  int n = a->nsizes, w = 0;
  for (int c = 1; c < res->ncand; c++)
    if (res->stat[c * n + i].med < res->stat[w * n + i].med)
      w = c;
  perf_stat_t win = res->stat[w * n + i], def = res->stat[res->ncand * n + i];
  *lead = def.med - win.med;
  *spread = (def.max - def.min) + (win.max - win.min);
  res->winner[i] = w;
  res->written[i] = *lead > *spread;
}

static void print_heads(int k, const struct coll_result *res) {
  printf("#\n# %s: timing", tune_colls[k].name);
  for (int c = 0; c < res->ncand; c++)
    printf("%s %s", c ? "," : "", res->cand[c]);
  printf(" and default");
  for (int c = 0; c < res->nskipped; c++)
    printf("%s %s (%s)", c ? "," : "; cannot run here:", res->skipped[c], res->why[c]);
  printf("\n#%11s", "size");
  for (int c = 0; c < res->ncand; c++)
    printf("  %9s", res->cand[c]);
  printf("  %9s  %-9s  %9s  %9s  %s\n#%11s", "default", "fastest", "lead", "spread", "entry",
         "(B)");
  for (int c = 0; c <= res->ncand; c++)
    printf("  %9s", "(us)");
  printf("  %-9s  %9s  %9s\n", "", "(us)", "(us)");
  fflush(stdout);
}

static void print_row(const struct perf_autotune *a, const struct coll_result *res, int i,
                      double lead, double spread) {
  char t[32];
  printf("%12zu", res->bytes[i]);
  for (int c = 0; c <= res->ncand; c++) {
    fmt_time(t, sizeof t, res->stat[c * a->nsizes + i].med);
    printf("  %9s", t);
  }
  printf("  %-9s", res->cand[res->winner[i]]);
  fmt_time(t, sizeof t, lead);
  printf("  %9s", t);
  fmt_time(t, sizeof t, spread);
  printf("  %9s  %s\n", t, res->written[i] ? res->cand[res->winner[i]] : "auto");
  fflush(stdout);
}

/* Times every candidate of collective k and the default over the sweep,
 * printing each size's row as it finishes; adds wrong elements to *wrong. */
static void measure_coll(const struct perf_autotune *a, int k, struct coll_result *res,
                         int64_t *wrong) {
  int n = a->nsizes;
  res->bytes = xcalloc((size_t)n, sizeof *res->bytes);
  res->stat = xcalloc((size_t)((res->ncand + 1) * n), sizeof *res->stat);
  res->winner = xcalloc((size_t)n, sizeof *res->winner);
  res->written = xcalloc((size_t)n, sizeof *res->written);
  if (a->rank == 0)
    print_heads(k, res);
  open_children(a, k, res);
  size_t last = 0;
  for (int i = 0; i < n; i++) {
    if (!measure_size(a, k, res, i, last, wrong))
      continue;
    last = res->bytes[i];
    double lead, spread;
    decide(a, res, i, &lead, &spread);
    if (a->rank == 0)
      print_row(a, res, i, lead, spread);
  }
  close_children(res);
}

/* ---- The file ------------------------------------------------------------------ */

/* Measured size i's entry: its winner's index, or -1: auto. */
static int decision(const struct coll_result *res, int i) {
  return res->written[i] ? res->winner[i] : -1;
}

/* Writes collective k's entries ("COLL RANKS NODES MAX_BYTES|max ALGO"):
 * one per run of sizes with the same decision, "auto" where the default
 * was kept.  The last run covers every larger size ("max"), unless it is
 * auto, which larger sizes get without an entry.  Returns how many. */
static int put_entries(FILE *f, int k, const struct coll_result *res, const struct perf_autotune *a,
                       const struct shape *s) {
  int count = 0, prev = -1; /* the previous measured size */
  for (int i = 0; i <= a->nsizes; i++) {
    if (i < a->nsizes && res->bytes[i] == 0)
      continue;
    int end = i == a->nsizes, d = prev >= 0 ? decision(res, prev) : -1;
    if (prev >= 0 && (end ? d >= 0 : decision(res, i) != d)) {
      char max[32] = "max";
      if (!end)
        snprintf(max, sizeof max, "%zu", res->bytes[prev]);
      fprintf(f, "%s %d %d %s %s\n", tune_colls[k].name, s->nranks, s->nnodes, max,
              d >= 0 ? res->cand[d] : "auto");
      count++;
    }
    prev = i;
  }
  if (count == 0)
    fprintf(f, "# %s: no candidate beat the default by more than the spread: no entry\n",
            tune_colls[k].name);
  return count;
}

/* The command line for the header; short, as tune.c reads lines of up to
 * 511 bytes and would take the rest of a longer comment for an entry. */
static void command_line(const struct perf_autotune *a, char *out, size_t len) {
  size_t o = 0;
  out[0] = '\0';
  for (int i = 0; i < a->argc && o < len; i++) {
    const char *arg = a->argv[i], *slash = strrchr(arg, '/');
    if (i == 0 && slash != NULL) /* the program's name, not libtool's .libs path */
      arg = slash + 1;
    o += (size_t)snprintf(out + o, len - o, "%s%s", i ? " " : "", arg);
  }
  if (o >= len)
    memcpy(out + len - 4, "...", 4);
}

/* Rank 0: FILE, written whole or not at all; returns 0 or 1. */
static int write_file(const struct perf_autotune *a, const struct shape *s,
                      const struct coll_result *res, int *nentries) {
  char tmp[4096], host[64] = "?", date[64] = "?", cmd[300];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", a->file, (long)getpid()) >= sizeof tmp) {
    fprintf(stderr, "loom-perf --autotune: the file name is too long: %s\n", a->file);
    return 1;
  }
  gethostname(host, sizeof host - 1);
  time_t now = time(NULL);
  struct tm tm;
  if (localtime_r(&now, &tm) != NULL)
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %z", &tm);
  command_line(a, cmd, sizeof cmd);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) {
    fprintf(stderr, "loom-perf --autotune: cannot write %s: %s\n", tmp, strerror(errno));
    return 1;
  }
  fprintf(f, "# loom tune file 1: LOOM_TUNE_FILE (format: src/plan/tune.c, docs/tuning.md)\n"
             "# written by loom-perf --autotune on %s, %s\n"
             "# command: %s\n"
             "# %d ranks on %d node(s); float32 sum, out of place; per size and algorithm the\n"
             "# median over %d round(s) of the slowest rank's mean of %d calls after %d warm-up\n"
             "# calls; an entry names the fastest where its median beat the library's own\n"
             "# choice by more than the two spreads (max - min) added, else auto\n",
          host, date, cmd, s->nranks, s->nnodes, a->rounds, a->iters, a->warmup);
  *nentries = 0;
  for (int k = 0; k < NCOLLS; k++) {
    const struct coll_result *r = &res[k];
    if (r->ncand + r->nskipped == 0)
      continue; /* not asked for */
    if (r->ncand < 2) {
      fprintf(f, "# %s: only %s can run here: no entry\n", tune_colls[k].name,
              r->ncand ? r->cand[0] : "the tuner's choice");
      continue;
    }
    fprintf(f, "# %s:", tune_colls[k].name);
    for (int c = 0; c < r->ncand; c++)
      fprintf(f, "%s %s", c ? "," : " measured", r->cand[c]);
    fprintf(f, " and the default");
    for (int c = 0; c < r->nskipped; c++)
      fprintf(f, "%s %s", c ? "," : "; cannot run here:", r->skipped[c]);
    fprintf(f, "\n");
    *nentries += put_entries(f, k, r, a, s);
  }
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, a->file) != 0) {
    fprintf(stderr, "loom-perf --autotune: cannot write %s: %s\n", a->file, strerror(errno));
    unlink(tmp);
    return 1;
  }
  return 0;
}

/* ---- The run ------------------------------------------------------------------- */

int perf_autotune_run(const struct perf_autotune *a) {
  g_rank = a->rank;
  g_parent = a->comm;
  struct shape s;
  get_shape(a, &s);
  if (a->rank == 0) {
    printf("# loom-perf --autotune %s: %d ranks on %d node(s), float32 sum, out of place\n"
           "# sizes %zu .. %zu B; per size, %d round(s), in each every candidate in turn:\n"
           "# %d warm-up calls, then the slowest rank's mean of %d calls; the table shows\n"
           "# the medians.  default: the library's own choice (a child that may use every\n"
           "# algorithm); lead: the default's median minus the fastest's; spread: the\n"
           "# two's max - min over the rounds, added; entry: the fastest where lead >\n"
           "# spread, else auto (the size keeps the default)%s\n",
           a->file, s.nranks, s.nnodes, a->sizes[0], a->sizes[a->nsizes - 1], a->rounds,
           a->warmup, a->iters, a->rounds == 1 ? "; one round has no spread" : "");
    const char *tune_file = getenv("LOOM_TUNE_FILE");
    if (tune_file != NULL && tune_file[0] != '\0')
      printf("# note: LOOM_TUNE_FILE is set: the default follows that file; unset it to\n"
             "# compare the candidates with the tuner's own rules\n");
    const char *topo_file = getenv("LOOM_TOPO_FILE");
    if (topo_file != NULL && topo_file[0] != '\0')
      printf("# note: LOOM_TOPO_FILE is set: the library takes its nodes from that file and\n"
             "# autotune from the host ids; where the node counts differ, the entries are\n"
             "# ignored and candidates may fall back to the tuner's choice\n");
    fflush(stdout);
  }
  struct coll_result res[NCOLLS];
  memset(res, 0, sizeof res);
  int64_t wrong = 0;
  for (int k = 0; k < NCOLLS; k++) {
    if (!(a->colls & (1u << k)))
      continue;
    struct coll_result *r = &res[k];
    for (int c = 0; c < MAX_CANDS && tune_colls[k].algos[c] != NULL; c++) {
      const char *algo = tune_colls[k].algos[c], *why = cannot_run(tune_colls[k].name, algo, &s);
      if (why == NULL) {
        r->cand[r->ncand++] = algo;
      } else {
        r->skipped[r->nskipped] = algo;
        r->why[r->nskipped++] = why;
      }
    }
    if (r->ncand < 2) { /* nothing to choose: the tuner takes the one that runs */
      if (a->rank == 0)
        printf("#\n# %s: only %s can run here: nothing to measure\n", tune_colls[k].name,
               r->ncand ? r->cand[0] : "(none)");
      continue;
    }
    measure_coll(a, k, r, &wrong);
  }
  int32_t status = wrong != 0;
  if (a->rank == 0) {
    printf("#\n# Out of bounds values : %lld %s\n", (long long)wrong, wrong ? "FAILED" : "OK");
    int nentries = 0;
    if (wrong != 0)
      printf("# %s not written: a result was wrong\n", a->file);
    else if ((status = write_file(a, &s, res, &nentries)) == 0)
      printf("# wrote %s: %d entr%s for %d ranks on %d node(s); use it with "
             "LOOM_TUNE_FILE=%s\n",
             a->file, nentries, nentries == 1 ? "y" : "ies", s.nranks, s.nnodes, a->file);
    printf("#\n");
    fflush(stdout);
  }
  /* every rank exits with rank 0's status */
  CHECK(loomBroadcast(&status, &status, 1, loomInt32, 0, a->comm, NULL));
  for (int k = 0; k < NCOLLS; k++) {
    free(res[k].bytes);
    free(res[k].stat);
    free(res[k].winner);
    free(res[k].written);
  }
  return status;
}
