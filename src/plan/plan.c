/*
 * plan.c — picks the schedule for a call.
 */
#include "plan/plan.h"

#include <stddef.h>

const char *loom_coll_name(enum loom_coll coll) {
  static const char *const names[LOOM_COLL_COUNT] = {
      "allreduce", "allgather", "reducescatter", "broadcast", "reduce",  "alltoall",
      "alltoallv", "gather",    "scatter",       "send/recv", "barrier",
  };
  return (unsigned)coll < LOOM_COLL_COUNT ? names[coll] : "?";
}

/* The tuner: what runs when LOOM_ALGO forces nothing (or something this
 * call cannot run). */
static enum loom_algo choose(const struct loom_plan_args *a, size_t bytes) {
  int n = a->nranks;
  if (a->algo != LOOM_ALGO_AUTO && loom_algo_runs(a->coll, a->algo, n, a->topo))
    return a->algo;
  int pow2 = n > 1 && loom_is_pow2(n);
  switch (a->coll) {
  case LOOM_COLL_ALLREDUCE:
    if (n > 2 && bytes <= LOOM_PLAN_ONESHOT_MAX_BYTES)
      return LOOM_ALGO_ONESHOT;
    if (pow2 && bytes <= LOOM_PLAN_RD_MAX_BYTES)
      return LOOM_ALGO_RD;
    return loom_algo_runs(a->coll, LOOM_ALGO_HIER, n, a->topo) ? LOOM_ALGO_HIER : LOOM_ALGO_RING;
  case LOOM_COLL_ALLGATHER:
    return pow2 && bytes * (size_t)n <= LOOM_PLAN_RD_MAX_BYTES ? LOOM_ALGO_RD : LOOM_ALGO_RING;
  case LOOM_COLL_BROADCAST:
  case LOOM_COLL_REDUCE:
    return bytes <= LOOM_PLAN_RD_MAX_BYTES ? LOOM_ALGO_TREE : LOOM_ALGO_CHAIN;
  default:
    return LOOM_ALGO_RING;
  }
}

static int topo_rank_at(int node, int local, const void *arg) {
  return loom_topo_rank_at(arg, node, local);
}

const char *loom_plan(const struct loom_plan_args *a, struct loom_schedule *s) {
  int r = a->rank, n = a->nranks;
  enum loom_algo algo = choose(a, a->count * a->elem_size);
  /* Rings visit each node's ranks in a row (one network hop per node). */
  const int *order = a->topo != NULL && a->topo->nnodes > 1 ? a->topo->by_node : NULL;
  switch (a->coll) {
  case LOOM_COLL_ALLREDUCE:
  case LOOM_COLL_BARRIER:
    if (algo == LOOM_ALGO_ONESHOT) {
      loom_oneshot_allreduce(r, n, a->count, s);
      return "one-shot";
    }
    if (algo == LOOM_ALGO_RD) {
      loom_rd_allreduce(r, n, a->count, s);
      return "recursive doubling";
    }
    if (algo == LOOM_ALGO_HIER) {
      const struct loom_topo *t = a->topo;
      struct loom_hier h = {t->nnodes,      loom_topo_node_size(t, 0), t->node_of[r],
                            t->local_of[r], topo_rank_at,              t};
      loom_hier_allreduce(r, &h, a->count, s);
      return "hierarchical";
    }
    loom_ring_allreduce_ordered(r, n, order, a->count, s);
    return order ? "ring (by node)" : "ring";
  case LOOM_COLL_ALLGATHER:
    if (algo == LOOM_ALGO_RD) {
      loom_rd_allgather(r, n, a->count, s);
      return "recursive doubling";
    }
    loom_ring_allgather_ordered(r, n, order, a->count, s);
    return order ? "ring (by node)" : "ring";
  case LOOM_COLL_REDUCESCATTER:
    loom_ring_reducescatter_ordered(r, n, order, a->count, s);
    return order ? "ring (by node)" : "ring";
  case LOOM_COLL_BROADCAST:
    if (algo == LOOM_ALGO_TREE) {
      loom_tree_broadcast(r, n, a->root, a->count, s);
      return "binomial tree";
    }
    loom_chain_broadcast(r, n, a->root, a->count, s);
    return "chain";
  case LOOM_COLL_REDUCE:
    if (algo == LOOM_ALGO_TREE) {
      loom_tree_reduce(r, n, a->root, a->count, s);
      return "binomial tree";
    }
    loom_chain_reduce(r, n, a->root, a->count, s);
    return "chain";
  case LOOM_COLL_ALLTOALLV:
    loom_direct_alltoallv(r, n, a->sendcounts, a->sdispls, a->recvcounts, a->rdispls, s);
    return "pairwise";
  case LOOM_COLL_GATHER:
    loom_direct_gather(r, n, a->root, a->count, s);
    return "direct";
  case LOOM_COLL_SCATTER:
    loom_direct_scatter(r, n, a->root, a->count, s);
    return "direct";
  default: /* ALLTOALL is turned into ALLTOALLV by the caller; SENDRECV is built there */
    loom_sched_reset(s);
    return "none";
  }
}
