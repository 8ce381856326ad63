/*
 * tune.c — LOOM_TUNE_FILE: measured algorithm choices (written by
 * `loom-perf --autotune`) that take precedence over the tuner's rules.
 *
 * Format: text, one entry per line, '#' starts a comment:
 *
 *     # loom tune file 1
 *     allreduce 2 1 65536 rd
 *     allreduce 2 1 max ring
 *
 * fields: collective, ranks, nodes, the largest size in bytes the entry
 * covers ("max": no limit; sizes as loom-perf and nccl-tests count them:
 * count * element size, times the rank count for all-gather and
 * reduce-scatter), algorithm.  An entry covers the
 * sizes above the previous entry of the same collective, ranks and nodes;
 * a size given twice for those is refused (naming both lines).
 * Only entries for the communicator's own rank and node counts are kept.
 * The algorithm "auto" keeps the tuner's own choice for the sizes the
 * entry covers: autotune writes it where no candidate beat the default by
 * more than the noise, between sizes where one did.
 */
#include "plan/plan.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int find_coll_name(const char *name) {
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    if (strcasecmp(loom_coll_name((enum loom_coll)c), name) == 0)
      return c;
  return -1;
}

static int find_algo_name(const char *name) {
  for (int a = LOOM_ALGO_AUTO; a < LOOM_ALGO_COUNT; a++)
    if (strcasecmp(loom_algo_name((enum loom_algo)a), name) == 0)
      return a;
  return -1;
}

/* The line number of coll's entry for exactly max_bytes, or 0. */
static int entry_line(const struct loom_tune_list *l, uint64_t max_bytes) {
  for (int i = 0; i < l->n; i++)
    if (l->entries[i].max_bytes == max_bytes)
      return l->entries[i].line;
  return 0;
}

/* 0, or -1 out of memory. */
static int add_entry(struct loom_tune *t, int coll, uint64_t max_bytes, int algo, int line) {
  struct loom_tune_list *l = &t->colls[coll];
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    struct loom_tune_entry *e = realloc(l->entries, sizeof *e * (size_t)cap);
    if (e == NULL)
      return -1;
    l->entries = e;
    l->cap = cap;
  }
  /* kept sorted by max_bytes (files are short) */
  int i = l->n++;
  while (i > 0 && l->entries[i - 1].max_bytes > max_bytes) {
    l->entries[i] = l->entries[i - 1];
    i--;
  }
  l->entries[i].max_bytes = max_bytes;
  l->entries[i].algo = (enum loom_algo)algo;
  l->entries[i].line = line;
  t->nentries++;
  return 0;
}

int loom_tune_load(struct loom_tune *t, const char *path, int nranks, int nnodes, char *err,
                   size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "LOOM_TUNE_FILE=%s: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  int lineno = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
    lineno++;
    if (strchr(line, '\n') == NULL && !feof(f)) { /* longer than the buffer */
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n')
        ;
      if (line[strspn(line, " \t")] != '#') {
        snprintf(err, errlen, "LOOM_TUNE_FILE=%s:%d: line longer than %zu bytes", path,
                 lineno, sizeof line - 1);
        rc = -1;
        break;
      }
    }
    line[strcspn(line, "#\n")] = '\0';
    char coll[32], algo[32], maxb[32], extra[2];
    int r, k;
    int got = sscanf(line, "%31s %d %d %31s %31s %1s", coll, &r, &k, maxb, algo, extra);
    if (got <= 0)
      continue; /* blank or comment */
    int c = got == 5 ? find_coll_name(coll) : -1;
    int a = got == 5 ? find_algo_name(algo) : -1;
    char *end = NULL;
    uint64_t mb = strcasecmp(maxb, "max") == 0 ? UINT64_MAX : strtoull(maxb, &end, 10);
    if (got != 5 || c < 0 || a < 0 || r < 1 || k < 1 || (end != NULL && *end != '\0') ||
        (a != LOOM_ALGO_AUTO && !loom_algo_applies((enum loom_coll)c, (enum loom_algo)a))) {
      snprintf(err, errlen,
               "LOOM_TUNE_FILE=%s:%d: expected \"COLLECTIVE RANKS NODES MAX_BYTES|max "
               "ALGORITHM\" with an algorithm the collective has, e.g. \"allreduce 2 1 65536 rd\"",
               path, lineno);
      rc = -1;
      break;
    }
    if (r != nranks || k != nnodes)
      continue; /* another job's entry */
    int first = entry_line(&t->colls[c], mb);
    if (first != 0) { /* two choices for one size: which would rank 0 take? */
      snprintf(err, errlen, "LOOM_TUNE_FILE=%s:%d: %s %d %d %s repeats the size of line %d "
               "(give each size once)", path, lineno, coll, r, k, maxb, first);
      rc = -1;
    } else if (add_entry(t, c, mb, a, lineno) != 0) {
      snprintf(err, errlen, "LOOM_TUNE_FILE=%s: out of memory", path);
      rc = -1;
    }
  }
  fclose(f);
  if (rc != 0)
    loom_tune_free(t);
  return rc;
}

enum loom_algo loom_tune_lookup(const struct loom_tune *t, enum loom_coll coll, size_t bytes) {
  if (t == NULL || (unsigned)coll >= LOOM_COLL_COUNT)
    return LOOM_ALGO_AUTO;
  const struct loom_tune_list *l = &t->colls[coll];
  for (int i = 0; i < l->n; i++)
    if ((uint64_t)bytes <= l->entries[i].max_bytes)
      return l->entries[i].algo;
  return LOOM_ALGO_AUTO;
}

void loom_tune_free(struct loom_tune *t) {
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    free(t->colls[c].entries);
  memset(t, 0, sizeof *t);
}
