/*
 * algo.c — algorithm names, which collective has which, and LOOM_ALGO.
 */
#include "plan/plan.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const algo_names[LOOM_ALGO_COUNT] = {
    "auto", "ring", "rd", "oneshot", "tree", "chain", "hier", "rhd",
};

const char *loom_algo_name(enum loom_algo algo) {
  return (unsigned)algo < LOOM_ALGO_COUNT ? algo_names[algo] : "?";
}

int loom_algo_applies(enum loom_coll coll, enum loom_algo algo) {
  switch (coll) {
  case LOOM_COLL_ALLREDUCE:
    return algo == LOOM_ALGO_RING || algo == LOOM_ALGO_RD || algo == LOOM_ALGO_ONESHOT ||
           algo == LOOM_ALGO_HIER || algo == LOOM_ALGO_TREE || algo == LOOM_ALGO_RHD;
  case LOOM_COLL_ALLGATHER:
    return algo == LOOM_ALGO_RING || algo == LOOM_ALGO_RD;
  case LOOM_COLL_REDUCESCATTER:
    return algo == LOOM_ALGO_RING;
  case LOOM_COLL_BROADCAST:
  case LOOM_COLL_REDUCE:
    return algo == LOOM_ALGO_TREE || algo == LOOM_ALGO_CHAIN;
  default:
    return 0;
  }
}

int loom_algo_runs(enum loom_coll coll, enum loom_algo algo, int nranks,
                   const struct loom_topo *topo) {
  if (!loom_algo_applies(coll, algo))
    return 0;
  if (algo == LOOM_ALGO_RD || algo == LOOM_ALGO_RHD)
    return loom_is_pow2(nranks);
  if (algo == LOOM_ALGO_HIER)
    return topo != NULL && topo->nnodes > 1 && loom_topo_uniform(topo) &&
           loom_topo_node_size(topo, 0) > 1;
  if (algo == LOOM_ALGO_TREE && coll == LOOM_COLL_ALLREDUCE)
    return topo != NULL && topo->nnodes > 1; /* on one node the trees are one chain */
  return 1;
}

static int find_coll(const char *name, size_t len) {
  for (int c = 0; c < LOOM_COLL_COUNT; c++) {
    const char *cn = loom_coll_name((enum loom_coll)c);
    if (strlen(cn) == len && strncasecmp(cn, name, len) == 0)
      return c;
  }
  return -1;
}

static int find_algo(const char *name, size_t len) {
  for (int a = LOOM_ALGO_RING; a < LOOM_ALGO_COUNT; a++)
    if (strlen(algo_names[a]) == len && strncasecmp(algo_names[a], name, len) == 0)
      return a;
  return -1;
}

/* The algorithms `coll` has, as a mask. */
static unsigned coll_algos(int coll) {
  unsigned m = 0;
  for (int a = LOOM_ALGO_RING; a < LOOM_ALGO_COUNT; a++)
    if (loom_algo_applies((enum loom_coll)coll, (enum loom_algo)a))
      m |= 1u << a;
  return m;
}

const char *loom_algo_mask_text(unsigned mask, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int a = LOOM_ALGO_RING; a < LOOM_ALGO_COUNT && o < len; a++)
    if (mask & (1u << a))
      o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", algo_names[a]);
  return buf;
}

#define ALGO_LIST "ring, rd, oneshot, tree, chain, hier, rhd"
#define COLL_LIST "allreduce, allgather, reducescatter, broadcast, reduce"

/* One item's algorithm list ("tree,ring" or "^oneshot") as a mask. */
static int parse_list(const char *spec, const char *p, size_t len, unsigned *mask, int *exclude,
                      char *err, size_t errlen) {
  *exclude = len > 0 && *p == '^';
  if (*exclude) {
    p++;
    len--;
  }
  *mask = 0;
  if (len == 0) {
    snprintf(err, errlen, "LOOM_ALGO=\"%s\": an item lists no algorithm", spec);
    return -1;
  }
  const char *end = p + len;
  while (p <= end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    size_t n = (size_t)((comma ? comma : end) - p);
    int a = find_algo(p, n);
    if (a < 0) {
      snprintf(err, errlen,
               "LOOM_ALGO=\"%s\": unknown algorithm \"%.*s\" (known: " ALGO_LIST ")", spec,
               (int)n, p);
      return -1;
    }
    *mask |= 1u << a;
    if (comma == NULL)
      break;
    p = comma + 1;
  }
  return 0;
}

int loom_algo_parse(const char *spec, unsigned allowed[LOOM_COLL_COUNT], char *err,
                    size_t errlen) {
  unsigned plain[LOOM_COLL_COUNT], named[LOOM_COLL_COUNT];
  int has_named[LOOM_COLL_COUNT];
  for (int c = 0; c < LOOM_COLL_COUNT; c++) {
    plain[c] = named[c] = 0;
    has_named[c] = 0;
  }
  const char *p = spec != NULL ? spec : "";
  while (*p != '\0') {
    size_t len = strcspn(p, ";");
    if (len > 0) {
      const char *colon = memchr(p, ':', len);
      const char *lp = colon ? colon + 1 : p;
      size_t llen = colon ? len - (size_t)(colon - p) - 1 : len;
      unsigned mask;
      int exclude;
      if (parse_list(spec, lp, llen, &mask, &exclude, err, errlen) != 0)
        return -1;
      if (colon != NULL) {
        int c = find_coll(p, (size_t)(colon - p));
        if (c < 0 || coll_algos(c) == 0) {
          snprintf(err, errlen,
                   "LOOM_ALGO=\"%s\": \"%.*s\" is not a collective with a choice of "
                   "algorithm (" COLL_LIST ")",
                   spec, (int)(colon - p), p);
          return -1;
        }
        unsigned has = coll_algos(c), bad = mask & ~has;
        if (bad != 0) {
          char names[64];
          snprintf(err, errlen, "LOOM_ALGO=\"%s\": %s has no algorithm %s", spec,
                   loom_coll_name((enum loom_coll)c), loom_algo_mask_text(bad, names, sizeof names));
          return -1;
        }
        unsigned m = exclude ? has & ~mask : mask;
        if (m == 0) {
          snprintf(err, errlen, "LOOM_ALGO=\"%s\": excludes every algorithm %s has", spec,
                   loom_coll_name((enum loom_coll)c));
          return -1;
        }
        named[c] = m;
        has_named[c] = 1;
      } else {
        for (int c = 0; c < LOOM_COLL_COUNT; c++) {
          unsigned has = coll_algos(c);
          if ((has & mask) == 0)
            continue; /* names none of its algorithms: no limit */
          unsigned m = exclude ? has & ~mask : has & mask;
          plain[c] = m != 0 ? m : plain[c];
        }
      }
    }
    p += len;
    if (*p == ';')
      p++;
  }
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    allowed[c] = has_named[c] ? named[c] : plain[c];
  return 0;
}
