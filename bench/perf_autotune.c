/*
 * perf_autotune.c — loom-perf --autotune FILE: the warm-up sweep people do
 * by hand, automated.
 *
 * For each collective with a choice, each algorithm that can run here gets
 * a child communicator of its own (loomCommSplit with config.algo =
 * "COLL:ALGO"), is timed over the sweep, and the child is destroyed.  Per
 * size the fastest algorithm wins.  The times are max-reduced over the
 * ranks (the slowest rank's mean), so every rank holds the same numbers
 * and picks the same winners without a further exchange.  Consecutive
 * sizes with one winner make one entry; the last entry of a collective
 * covers every larger size ("max").  Rank 0 writes FILE in the format of
 * LOOM_TUNE_FILE (src/plan/tune.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "perf_autotune.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* One collective's measurements. */
struct coll_result {
  int ncand;
  const char *cand[MAX_CANDS];
  const char *skipped[MAX_CANDS]; /* cannot run here ... */
  const char *why[MAX_CANDS];     /* ... and why */
  int nskipped;
  size_t *bytes; /* per sweep size; 0: not measured (count 0, or a repeat) */
  double *us;    /* [candidate * nsizes + size] */
  int *winner;   /* per sweep size: an index into cand */
};

/* ---- Errors ------------------------------------------------------------------ */

static int g_rank;
static loomComm_t g_parent, g_child;

static void die_loom(const char *what, loomResult_t res, int line) {
  loomComm_t c = g_child != NULL ? g_child : g_parent;
  const char *detail = loomGetLastError(c);
  fprintf(stderr, "loom-perf --autotune: rank %d: %s failed (perf_autotune.c:%d): %s (%d): %s\n",
          g_rank, what, line, loomGetErrorString(res), (int)res,
          detail && *detail ? detail : "(no further details)");
  if (g_child != NULL)
    loomCommAbort(g_child); /* make the peers fail fast instead of hanging */
  loomCommAbort(g_parent);
  exit(1);
}

#define CHECK(call)                                                            \
  do {                                                                         \
    loomResult_t res_ = (call);                                                \
    if (res_ != loomSuccess)                                                   \
      die_loom(#call, res_, __LINE__);                                         \
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

/* Times every candidate of collective k over the sweep; adds wrong
 * elements to *wrong. */
static void measure_coll(const struct perf_autotune *a, int k, struct coll_result *res,
                         int64_t *wrong) {
  const char *coll = tune_colls[k].name;
  int n = a->nsizes;
  res->bytes = xcalloc((size_t)n, sizeof *res->bytes);
  res->us = xcalloc((size_t)(res->ncand * n), sizeof *res->us);
  res->winner = xcalloc((size_t)n, sizeof *res->winner);
  for (int c = 0; c < res->ncand; c++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:%s", coll, res->cand[c]);
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.algo = spec;
    config.commName = spec;
    CHECK(loomCommSplit(a->comm, 0, a->rank, &g_child, &config));
    size_t last = 0;
    for (int i = 0; i < n; i++) {
      struct perf_sample s;
      if (a->measure(a->ctx, g_child, coll, a->sizes[i], &s) != 0 || s.bytes == last)
        continue; /* count 0, or the per-rank count rounded to the last size's */
      last = res->bytes[i] = s.bytes;
      res->us[c * n + i] = s.us;
      *wrong += s.wrong > 0 ? s.wrong : 0;
    }
    CHECK(loomCommFinalize(g_child));
    CHECK(loomCommDestroy(g_child));
    g_child = NULL;
  }
  /* the earlier candidate wins a tie; every rank sees the same times */
  for (int i = 0; i < n; i++)
    for (int c = 1; c < res->ncand; c++)
      if (res->us[c * n + i] < res->us[res->winner[i] * n + i])
        res->winner[i] = c;
}

static void print_table(const struct perf_autotune *a, int k, const struct coll_result *res) {
  int n = a->nsizes;
  printf("#\n# %s: timing", tune_colls[k].name);
  for (int c = 0; c < res->ncand; c++)
    printf("%s %s", c ? "," : "", res->cand[c]);
  for (int c = 0; c < res->nskipped; c++)
    printf("%s %s (%s)", c ? "," : "; cannot run here:", res->skipped[c], res->why[c]);
  printf("\n#%11s", "size");
  for (int c = 0; c < res->ncand; c++)
    printf("  %9s", res->cand[c]);
  printf("  fastest\n#%11s", "(B)");
  for (int c = 0; c < res->ncand; c++)
    printf("  %9s", "(us)");
  printf("\n");
  for (int i = 0; i < n; i++) {
    if (res->bytes[i] == 0)
      continue;
    printf("%12zu", res->bytes[i]);
    for (int c = 0; c < res->ncand; c++) {
      char t[32];
      fmt_time(t, sizeof t, res->us[c * n + i]);
      printf("  %9s", t);
    }
    printf("  %s\n", res->cand[res->winner[i]]);
  }
  fflush(stdout);
}

/* ---- The file ------------------------------------------------------------------ */

/* Writes collective k's entries ("COLL RANKS NODES MAX_BYTES|max ALGO"):
 * one per run of sizes with the same winner; returns how many. */
static int put_entries(FILE *f, int k, const struct coll_result *res, const struct perf_autotune *a,
                       const struct shape *s) {
  int count = 0, prev = -1; /* the previous measured size */
  for (int i = 0; i <= a->nsizes; i++) {
    if (i < a->nsizes && res->bytes[i] == 0)
      continue;
    if (prev >= 0 && (i == a->nsizes || res->winner[i] != res->winner[prev])) {
      char max[32] = "max";
      if (i < a->nsizes)
        snprintf(max, sizeof max, "%zu", res->bytes[prev]);
      fprintf(f, "%s %d %d %s %s\n", tune_colls[k].name, s->nranks, s->nnodes, max,
              res->cand[res->winner[prev]]);
      count++;
    }
    prev = i;
  }
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
             "# slowest rank's mean of %d calls after %d warm-up calls; fastest written\n",
          host, date, cmd, s->nranks, s->nnodes, a->iters, a->warmup);
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
           "# sizes %zu .. %zu B; per size and algorithm: %d warm-up calls, then the slowest\n"
           "# rank's mean of %d calls (us)\n",
           a->file, s.nranks, s.nnodes, a->sizes[0], a->sizes[a->nsizes - 1], a->warmup,
           a->iters);
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
    if (a->rank == 0)
      print_table(a, k, r);
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
    free(res[k].us);
    free(res[k].winner);
  }
  return status;
}
