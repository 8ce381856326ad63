/*
 * algo.c — algorithm names, which collective has which, and LOOM_ALGO.
 */
#include "plan/plan.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const algo_names[LOOM_ALGO_COUNT] = {
    "auto", "ring", "rd", "oneshot", "tree", "chain", "hier",
};

const char *loom_algo_name(enum loom_algo algo) {
  return (unsigned)algo < LOOM_ALGO_COUNT ? algo_names[algo] : "?";
}

int loom_algo_applies(enum loom_coll coll, enum loom_algo algo) {
  switch (coll) {
  case LOOM_COLL_ALLREDUCE:
    return algo == LOOM_ALGO_RING || algo == LOOM_ALGO_RD || algo == LOOM_ALGO_ONESHOT ||
           algo == LOOM_ALGO_HIER;
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
  if (algo == LOOM_ALGO_RD)
    return loom_is_pow2(nranks);
  if (algo == LOOM_ALGO_HIER)
    return topo != NULL && topo->nnodes > 1 && loom_topo_uniform(topo) &&
           loom_topo_node_size(topo, 0) > 1;
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

#define ALGO_LIST "ring, rd, oneshot, tree, chain, hier"
#define COLL_LIST "allreduce, allgather, reducescatter, broadcast, reduce"

int loom_algo_parse(const char *spec, unsigned char forced[LOOM_COLL_COUNT], char *err,
                    size_t errlen) {
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    forced[c] = LOOM_ALGO_AUTO;
  if (spec == NULL)
    return 0;
  const char *p = spec;
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    const char *an = colon ? colon + 1 : p;
    size_t alen = colon ? len - (size_t)(colon - p) - 1 : len;
    if (len == 0) {
      snprintf(err, errlen, "LOOM_ALGO=\"%s\": empty item", spec);
      return -1;
    }
    int a = find_algo(an, alen);
    if (a < 0) {
      snprintf(err, errlen, "LOOM_ALGO=\"%s\": unknown algorithm \"%.*s\" (known: " ALGO_LIST ")",
               spec, (int)alen, an);
      return -1;
    }
    if (colon != NULL) {
      int c = find_coll(p, (size_t)(colon - p));
      if (c < 0 || !loom_algo_applies((enum loom_coll)c, (enum loom_algo)a)) {
        snprintf(err, errlen,
                 c < 0 ? "LOOM_ALGO=\"%s\": \"%.*s\" is not a collective with a choice of "
                         "algorithm (" COLL_LIST ")"
                       : "LOOM_ALGO=\"%s\": %.*s has no algorithm %s",
                 spec, (int)(colon - p), p, algo_names[a]);
        return -1;
      }
      forced[c] = (unsigned char)a;
    } else {
      for (int c = 0; c < LOOM_COLL_COUNT; c++)
        if (loom_algo_applies((enum loom_coll)c, (enum loom_algo)a))
          forced[c] = (unsigned char)a;
    }
    p += len;
    if (*p == ',')
      p++;
  }
  return 0;
}
