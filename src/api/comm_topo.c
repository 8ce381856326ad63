/*
 * comm_topo.c — a communicator's topology: built at init from what the
 * ranks exchanged at rendezvous, and logged with what it means for the
 * choice of algorithms.
 */
#include "api/comm.h"
#include "core/error.h"
#include "core/log.h"

#include <stdio.h>

static const char *peer_hostid(int r, void *arg) {
  return loom_bootstrap_peer(arg, r)->hostid;
}

loomResult_t loom_comm_topo_setup(loomComm_t comm) {
  if (loom_topo_group(&comm->topo, comm->nranks, peer_hostid, comm->bs) != 0)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory (topology)");
  return loomSuccess;
}

/* "2 nodes x 4 ranks" or "3 nodes of 1-4 ranks". */
static void shape_text(const struct loom_topo *t, char *buf, size_t len) {
  int lo = t->nranks, hi = 0;
  for (int k = 0; k < t->nnodes; k++) {
    int m = loom_topo_node_size(t, k);
    lo = m < lo ? m : lo;
    hi = m > hi ? m : hi;
  }
  if (lo == hi)
    snprintf(buf, len, "%d node%s x %d rank%s", t->nnodes, t->nnodes == 1 ? "" : "s", lo,
             lo == 1 ? "" : "s");
  else
    snprintf(buf, len, "%d nodes of %d-%d ranks", t->nnodes, lo, hi);
}

void loom_comm_topo_report(loomComm_t comm) {
  const struct loom_topo *t = &comm->topo;
  if (comm->rank != 0)
    return;
  char shape[64];
  shape_text(t, shape, sizeof shape);
  if (t->nnodes > 1) {
    int hier = loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, comm->nranks, t);
    LOOM_INFO(LOOM_LOG_INIT,
              "topology: %s; rings visit each node's ranks in a row; all-reduce above %u "
              "bytes: %s",
              shape, LOOM_PLAN_RD_MAX_BYTES,
              hier ? "hierarchical (ring reduce-scatter in nodes, ring all-reduce across, "
                     "ring all-gather in nodes)"
                   : (loom_topo_uniform(t) ? "ring (one rank per node)"
                                           : "ring (nodes of unequal size: no hierarchical)"));
  } else {
    LOOM_INFO(LOOM_LOG_INIT, "topology: %s", shape);
  }
  for (int c = 0; c < LOOM_COLL_COUNT; c++) {
    enum loom_algo a = (enum loom_algo)comm->algo[c];
    if (a == LOOM_ALGO_AUTO)
      continue;
    const char *cn = loom_coll_name((enum loom_coll)c);
    if (loom_algo_runs((enum loom_coll)c, a, comm->nranks, t))
      LOOM_INFO(LOOM_LOG_INIT, "LOOM_ALGO: %s uses %s", cn, loom_algo_name(a));
    else if (a == LOOM_ALGO_RD)
      LOOM_WARN(LOOM_LOG_INIT,
                "LOOM_ALGO: %s cannot use rd on %d ranks (not a power of two); the tuner "
                "chooses instead",
                cn, comm->nranks);
    else
      LOOM_WARN(LOOM_LOG_INIT,
                "LOOM_ALGO: %s cannot use %s on %s (it needs several nodes of equal size, "
                "more than one rank each); the tuner chooses instead",
                cn, loom_algo_name(a), shape);
  }
}
