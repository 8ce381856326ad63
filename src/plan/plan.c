/*
 * plan.c — picks the schedule for a call.
 */
#include "plan/plan.h"

#include <math.h>
#include <stddef.h>

/* Across nodes: all-reduce algorithms cheapest first by the alpha-beta
 * model (cost.c), those that cannot run here last. */
static int rank_by_cost(const struct loom_plan_args *a, size_t bytes, enum loom_algo *out) {
  /* ties go to the earlier: hierarchical before halving-doubling, whose
   * steps each wait for all of the previous one */
  static const enum loom_algo all[] = {LOOM_ALGO_ONESHOT, LOOM_ALGO_TREE, LOOM_ALGO_RD,
                                       LOOM_ALGO_HIER,    LOOM_ALGO_RHD,  LOOM_ALGO_RING};
  enum { NALL = sizeof all / sizeof all[0] };
  struct loom_cost_model m;
  loom_cost_seed(&m, a->topo, a->links);
  double cost[NALL];
  int k = 0;
  for (int i = 0; i < NALL; i++) {
    int runs = loom_algo_runs(a->coll, all[i], a->nranks, a->topo);
    cost[k] = runs ? loom_cost_allreduce(all[i], a->nranks, a->topo, bytes, &m) : INFINITY;
    /* insertion by cost, ties kept in the list's order */
    int j = k++;
    enum loom_algo x = all[i];
    double c = cost[j];
    while (j > 0 && cost[j - 1] > c) {
      cost[j] = cost[j - 1];
      out[j] = out[j - 1];
      j--;
    }
    cost[j] = c;
    out[j] = x;
  }
  return k;
}

/* Whether a node of the call's topology has more ranks than cores (the
 * ranks take turns on the cores). */
static int oversubscribed(const struct loom_topo *t) {
  return t != NULL && t->hw != NULL && t->hw[0].cores > 0 && t->max_node_size > t->hw[0].cores;
}

/* Whether the call's ranks share one node (no topology: as in tests). */
static int one_node(const struct loom_topo *t) { return t == NULL || t->nnodes == 1; }

/* The tuner's ranking for a call: its choice first, then the others in
 * the order they suit this size (small: latency first; large: bandwidth
 * first).  Fills up to LOOM_ALGO_COUNT entries; returns how many. */
static int rank_algos(const struct loom_plan_args *a, size_t bytes, enum loom_algo *out) {
  int n = a->nranks, k = 0;
  int pow2 = n > 1 && loom_is_pow2(n);
  switch (a->coll) {
  case LOOM_COLL_ALLREDUCE: {
    if (a->topo != NULL && a->topo->nnodes > 1)
      return rank_by_cost(a, bytes, out);
    int small = bytes <= LOOM_PLAN_RD_MAX_BYTES;
    /* the choice: one-shot for a few ranks and small messages, the
     * double binary tree for many ranks on several nodes, recursive
     * doubling up to 64 KiB on a power of two (halving-doubling on up to
     * 1 MiB where the ranks outnumber the cores), then hierarchical or
     * ring */
    if (n > 2 && n <= LOOM_PLAN_ONESHOT_MAX_RANKS && bytes <= LOOM_PLAN_ONESHOT_MAX_BYTES)
      out[k++] = LOOM_ALGO_ONESHOT;
    else if (n > LOOM_PLAN_ONESHOT_MAX_RANKS && small &&
             loom_algo_runs(a->coll, LOOM_ALGO_TREE, n, a->topo))
      out[k++] = LOOM_ALGO_TREE;
    else if (pow2 && small)
      out[k++] = LOOM_ALGO_RD;
    else if (pow2 && oversubscribed(a->topo) && bytes <= LOOM_PLAN_OVERSUB_MAX_BYTES)
      out[k++] = LOOM_ALGO_RHD;
    else if (loom_algo_runs(a->coll, LOOM_ALGO_HIER, n, a->topo))
      out[k++] = LOOM_ALGO_HIER;
    else
      out[k++] = LOOM_ALGO_RING;
    /* when LOOM_ALGO excludes it: latency first for small, bandwidth first
     * for large */
    static const enum loom_algo small_rest[] = {LOOM_ALGO_TREE, LOOM_ALGO_RD,   LOOM_ALGO_ONESHOT,
                                                LOOM_ALGO_RHD,  LOOM_ALGO_RING, LOOM_ALGO_HIER};
    static const enum loom_algo large_rest[] = {LOOM_ALGO_HIER, LOOM_ALGO_RING, LOOM_ALGO_RHD,
                                                LOOM_ALGO_TREE, LOOM_ALGO_RD,   LOOM_ALGO_ONESHOT};
    for (int i = 0; i < 6; i++) {
      enum loom_algo x = small ? small_rest[i] : large_rest[i];
      if (x != out[0])
        out[k++] = x;
    }
    return k;
  }
  case LOOM_COLL_ALLGATHER: {
    int oneshot = n > 2 && n <= LOOM_PLAN_ONESHOT_MAX_RANKS && one_node(a->topo) &&
                  bytes * (size_t)n <= LOOM_PLAN_ONESHOT_GATHER_MAX_BYTES;
    if (oneshot)
      out[k++] = LOOM_ALGO_ONESHOT;
    if (pow2 && (bytes * (size_t)n <= LOOM_PLAN_RD_MAX_BYTES ||
                 (oversubscribed(a->topo) && bytes * (size_t)n <= LOOM_PLAN_OVERSUB_MAX_BYTES))) {
      out[k++] = LOOM_ALGO_RD;
      out[k++] = LOOM_ALGO_RING;
    } else {
      out[k++] = LOOM_ALGO_RING;
      out[k++] = LOOM_ALGO_RD;
    }
    if (!oneshot)
      out[k++] = LOOM_ALGO_ONESHOT;
    return k;
  }
  case LOOM_COLL_BROADCAST:
  case LOOM_COLL_REDUCE:
    out[k++] = bytes <= LOOM_PLAN_RD_MAX_BYTES ? LOOM_ALGO_TREE : LOOM_ALGO_CHAIN;
    out[k++] = bytes <= LOOM_PLAN_RD_MAX_BYTES ? LOOM_ALGO_CHAIN : LOOM_ALGO_TREE;
    return k;
  default:
    out[k++] = LOOM_ALGO_RING;
    return k;
  }
}

/* The first of the tuner's ranking that LOOM_ALGO allows and that can run;
 * when none can, the tuner's own first choice that runs. */
static enum loom_algo choose(const struct loom_plan_args *a, size_t bytes) {
  enum loom_algo order[LOOM_ALGO_COUNT + 1];
  int k = 0;
  /* a measured choice (LOOM_TUNE_FILE) comes first */
  int per_rank = a->coll == LOOM_COLL_ALLGATHER || a->coll == LOOM_COLL_REDUCESCATTER;
  enum loom_algo measured =
      loom_tune_lookup(a->tune, a->coll, per_rank ? bytes * (size_t)a->nranks : bytes);
  if (measured != LOOM_ALGO_AUTO)
    order[k++] = measured;
  k += rank_algos(a, bytes, order + k);
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < k; i++)
      if ((pass == 1 || a->allowed == 0 || (a->allowed & (1u << order[i]))) &&
          loom_algo_runs(a->coll, order[i], a->nranks, a->topo))
        return order[i];
  return LOOM_ALGO_RING;
}

/* Hops a piece of data is forwarded through, and the bytes of each hop's
 * message, for the algorithms that forward whole blocks down a path
 * (chains and trees); 0 for the others, whose links stay busy whatever
 * the slice (rings, halving-doubling, one-shot, hierarchical). */
static int pipeline_depth(const struct loom_plan_args *a, enum loom_algo algo, size_t bytes,
                          size_t *part) {
  int n = a->nranks, depth = 0;
  *part = bytes;
  if (a->coll == LOOM_COLL_BROADCAST || a->coll == LOOM_COLL_REDUCE) {
    if (algo == LOOM_ALGO_CHAIN)
      return n - 1;
    while ((1 << depth) < n)
      depth++;
    return depth;
  }
  if (a->coll == LOOM_COLL_ALLREDUCE && algo == LOOM_ALGO_TREE && a->topo != NULL) {
    int N = a->topo->nnodes, L = a->topo->max_node_size;
    while ((2 << depth) <= N)
      depth++;
    *part = bytes / 2 >= (size_t)LOOM_TREE_SEGMENTS * LOOM_TREE_SEGMENT_MIN * a->elem_size
                ? bytes / 2 / LOOM_TREE_SEGMENTS
                : bytes / 2;
    return 2 * (depth + L - 1);
  }
  return 0;
}

/* LL or Simple: what LOOM_PROTO allows, else the cheaper by the pipeline
 * model; Simple where data is not forwarded down a path, and where a node
 * has more ranks than cores (the pipeline's ranks cannot all run at once:
 * 16 KiB slices made a 4-rank chain broadcast 1.3-1.6x slower on 2 cores). */
static enum loom_proto choose_proto(const struct loom_plan_args *a, enum loom_algo algo,
                                    size_t bytes) {
  unsigned ll = 1u << LOOM_PROTO_LL, simple = 1u << LOOM_PROTO_SIMPLE;
  if (a->proto_allowed == ll)
    return LOOM_PROTO_LL;
  if (a->proto_allowed == simple)
    return LOOM_PROTO_SIMPLE;
  size_t part, chunk = a->chunk_bytes != 0 ? a->chunk_bytes : (size_t)512 << 10;
  int depth = pipeline_depth(a, algo, bytes, &part);
  if (depth < 2 || part <= LOOM_PROTO_LL_SLICE_BYTES || chunk <= LOOM_PROTO_LL_SLICE_BYTES)
    return LOOM_PROTO_SIMPLE;
  const struct loom_topo *t = a->topo;
  if (oversubscribed(t))
    return LOOM_PROTO_SIMPLE;
  struct loom_cost_model m;
  loom_cost_seed(&m, t, a->links);
  double t_ll = loom_cost_pipeline(depth, part, LOOM_PROTO_LL_SLICE_BYTES, t, &m);
  double t_simple = loom_cost_pipeline(depth, part, chunk, t, &m);
  return t_ll < t_simple ? LOOM_PROTO_LL : LOOM_PROTO_SIMPLE;
}

static int topo_rank_at(int node, int local, const void *arg) {
  return loom_topo_rank_at(arg, node, local);
}

static const char *build(const struct loom_plan_args *a, enum loom_algo algo,
                         struct loom_schedule *s) {
  int r = a->rank, n = a->nranks;
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
    if (algo == LOOM_ALGO_RHD) {
      loom_rhd_allreduce(r, n, a->count, s);
      return "recursive halving-doubling";
    }
    if (algo == LOOM_ALGO_TREE) {
      loom_dbtree_allreduce(r, a->topo, a->count, s);
      return "double binary tree";
    }
    if (algo == LOOM_ALGO_HIER) {
      const struct loom_topo *t = a->topo;
      struct loom_hier h = {.nnodes = t->nnodes,
                            .local_size = loom_topo_node_size(t, 0),
                            .node = t->node_of[r],
                            .local_index = t->local_of[r],
                            .rank_at = topo_rank_at,
                            .arg = t};
      loom_hier_allreduce(r, &h, a->count, s);
      return "hierarchical";
    }
    if (a->nchannels > 1 && a->count / (size_t)a->nchannels >= (size_t)n) {
      loom_ring_allreduce_channels(r, n, order ? a->topo : NULL, a->nchannels, a->count, s);
      return order ? "ring (by node, channels)" : "ring (channels)";
    }
    loom_ring_allreduce_ordered(r, n, order, a->count, s);
    return order ? "ring (by node)" : "ring";
  case LOOM_COLL_ALLGATHER:
    if (algo == LOOM_ALGO_ONESHOT) {
      loom_oneshot_allgather(r, n, a->count, s);
      return "one-shot";
    }
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

/* Whether some rank's part of this call could complete without reading a
 * message from every rank (directly or through others): then the
 * agreement pass follows the data (sched/agree.c), so that no rank returns
 * success from a call its peers made differently. */
static int needs_agreement(const struct loom_plan_args *a) {
  if (a->nranks < 2)
    return 0;
  switch (a->coll) {
  case LOOM_COLL_BROADCAST:
  case LOOM_COLL_REDUCE:
  case LOOM_COLL_GATHER:
  case LOOM_COLL_SCATTER:
  case LOOM_COLL_ALLTOALLV: /* some pairs may exchange nothing */
    return 1;
  default:
    return a->count == 0;
  }
}

const char *loom_plan(const struct loom_plan_args *a, struct loom_schedule *s) {
  size_t bytes = a->count * a->elem_size;
  enum loom_algo algo = choose(a, bytes);
  const char *name = "agreement only";
  if (a->count > 0 || a->coll == LOOM_COLL_ALLTOALLV)
    name = build(a, algo, s);
  else
    loom_sched_reset(s);
  s->slice_bytes = choose_proto(a, algo, bytes) == LOOM_PROTO_LL ? LOOM_PROTO_LL_SLICE_BYTES : 0;
  if (needs_agreement(a) && loom_sched_add_agreement(a->rank, a->nranks, s) != 0)
    return NULL;
  return s->overflow ? NULL : name;
}
