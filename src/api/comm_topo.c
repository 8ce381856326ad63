/*
 * comm_topo.c — a communicator's topology: built at init from what the
 * ranks exchanged at rendezvous, and logged with what it means for the
 * choice of algorithms.
 */
#include "api/comm.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct topo_allgather {
  loomComm_t comm;
  loomResult_t res;
};

/* The records' all-gather, carrying behind each rank's record its shrink
 * port's address (kept in comm->shrink_addrs) and its transport address
 * blob (one pass round the ring for all three). */
static int topo_allgather(void *data, size_t size, void *arg) {
  struct topo_allgather *a = arg;
  loomComm_t comm = a->comm;
  size_t ab = comm->tp_addrs != NULL ? comm->tp_addr_bytes : 0;
  size_t sb = LOOM_SOCKADDR_BYTES, block = size + sb + ab;
  size_t n = (size_t)comm->nranks, me = (size_t)comm->rank;
  char *both = malloc(n * block);
  comm->shrink_addrs = malloc(n * sb);
  if (both == NULL || comm->shrink_addrs == NULL) {
    free(both);
    a->res = loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory");
    return -1;
  }
  memcpy(both + me * block, (char *)data + me * size, size);
  loom_sockaddr_encode(&comm->shrink_addr, (uint8_t *)both + me * block + size);
  if (ab != 0)
    memcpy(both + me * block + size + sb, comm->tp_addrs + me * ab, ab);
  a->res = loom_bootstrap_allgather(comm->bs, both, block);
  for (size_t r = 0; r < n && a->res == loomSuccess; r++) {
    memcpy((char *)data + r * size, both + r * block, size);
    memcpy(comm->shrink_addrs + r * sb, both + r * block + size, sb);
    if (ab != 0)
      memcpy(comm->tp_addrs + r * ab, both + r * block + size + sb, ab);
  }
  free(both);
  return a->res == loomSuccess ? 0 : -1;
}

/* Each rank discovers its node (or reads LOOM_TOPO_FILE); the records
 * (with the transport addresses) meet in one bootstrap allgather and the
 * ranks are grouped by host id. */
loomResult_t loom_comm_topo_setup(loomComm_t comm) {
  struct topo_allgather ag = {.comm = comm, .res = loomSuccess};
  char err[512];
  int rc = loom_topo_build(&comm->topo, comm->rank, comm->nranks,
                           loom_bootstrap_self(comm->bs)->hostid, topo_allgather,
                           &ag, err, sizeof err);
  if (rc == -2)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "rank %d: %s", comm->rank, err);
  if (rc != 0)
    return ag.res != loomSuccess ? ag.res /* the bootstrap said why */
                                 : loom_error(loomSystemError, LOOM_LOG_INIT, "rank %d: %s",
                                              comm->rank, err);
  const char *tune = loom_param_str(LOOM_PARAM_TUNE_FILE);
  if (tune != NULL && tune[0] != '\0') {
    if (loom_tune_load(&comm->tune, tune, comm->nranks, comm->topo.nnodes, err, sizeof err) != 0)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "rank %d: %s", comm->rank, err);
    if (comm->rank == 0)
      LOOM_INFO(LOOM_LOG_INIT, "LOOM_TUNE_FILE=%s: %d measured choice(s) for %d ranks on %d node(s)",
                tune, comm->tune.nentries, comm->nranks, comm->topo.nnodes);
  }
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
  /* What the tuner picks for all-reduce at a few sizes, as the planner
   * itself answers (LOOM_ALGO and LOOM_TUNE_FILE included). */
  static const size_t sizes[] = {8, 16u << 10, 1u << 20, 64u << 20};
  static const char *const size_names[] = {"8 B", "16 KiB", "1 MiB", "64 MiB"};
  char choice[256];
  size_t o = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    struct loom_schedule s;
    loom_sched_init(&s, comm->sched_steps, comm->sched_cap);
    struct loom_plan_args pa = {
        .coll = LOOM_COLL_ALLREDUCE,
        .rank = comm->rank,
        .nranks = comm->nranks,
        .count = sizes[i] / 4,
        .elem_size = 4,
        .allowed = comm->algo[LOOM_COLL_ALLREDUCE],
        .topo = t,
        .tune = comm->tune.nentries > 0 ? &comm->tune : NULL,
        .links = &comm->links,
        .proto_allowed = comm->proto[LOOM_COLL_ALLREDUCE],
        .chunk_bytes = comm->engine.chunk_bytes,
        .nchannels = comm->nchannels,
    };
    const char *name = loom_plan(&pa, &s);
    o += (size_t)snprintf(choice + o, sizeof choice - o, "%s%s %s%s", i ? ", " : "",
                          size_names[i], name != NULL ? name : "(none)", s.slice_bytes != 0 ? " (LL)" : "");
    if (o >= sizeof choice)
      break;
  }
  LOOM_INFO(LOOM_LOG_INIT, "topology: %s%s; all-reduce: %s", shape,
            t->nnodes > 1 ? "; rings visit each node's ranks in a row" : "", choice);
  for (int c = 0; c < LOOM_COLL_COUNT; c++) {
    unsigned allowed = comm->algo[c], runs = 0;
    if (allowed == 0)
      continue;
    for (int a = LOOM_ALGO_RING; a < LOOM_ALGO_COUNT; a++)
      if ((allowed & (1u << a)) && loom_algo_runs((enum loom_coll)c, (enum loom_algo)a,
                                                  comm->nranks, t))
        runs |= 1u << a;
    const char *cn = loom_coll_name((enum loom_coll)c);
    char names[96];
    loom_algo_mask_text(allowed, names, sizeof names);
    if (runs != 0) {
      char can[96];
      LOOM_INFO(LOOM_LOG_INIT, "LOOM_ALGO: %s limited to %s%s%s%s", cn,
                loom_algo_mask_text(runs, can, sizeof can), runs == allowed ? "" : " (of ",
                runs == allowed ? "" : names, runs == allowed ? "" : " allowed; the rest cannot run here)");
    } else if (allowed == 1u << LOOM_ALGO_RD) {
      LOOM_WARN(LOOM_LOG_INIT,
                "LOOM_ALGO: %s cannot use rd on %d ranks (not a power of two); the tuner "
                "chooses instead",
                cn, comm->nranks);
    } else {
      LOOM_WARN(LOOM_LOG_INIT,
                "LOOM_ALGO: %s cannot use %s on %s (rd needs a power-of-two rank count, tree "
                "several nodes, hier several nodes of equal size with more than one rank "
                "each); the tuner chooses instead",
                cn, names, shape);
    }
  }
}
