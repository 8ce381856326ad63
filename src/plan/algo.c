/*
 * algo.c — algorithm names, which collective has which, and LOOM_ALGO
 * (parsed by choice.c).
 */
#include "plan/plan.h"

#include <stdio.h>

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
    return algo == LOOM_ALGO_RING || algo == LOOM_ALGO_RD || algo == LOOM_ALGO_ONESHOT;
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

static const struct loom_choice_kind algo_kind = {
    .var = "LOOM_ALGO",
    .what = "algorithm",
    .names = algo_names,
    .first = LOOM_ALGO_RING,
    .count = LOOM_ALGO_COUNT,
    .coll_mask = coll_algos,
    .list = "ring, rd, oneshot, tree, chain, hier, rhd",
};

int loom_algo_parse(const char *spec, unsigned allowed[LOOM_COLL_COUNT], char *err,
                    size_t errlen) {
  return loom_choice_parse(&algo_kind, spec, allowed, err, errlen);
}
