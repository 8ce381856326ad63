/*
 * comm_transport.c — a communicator's transports at init, in two halves
 * around the topology exchange: the first starts them (each rank's shared
 * memory segment and listener, its address blob), the topology all-gather
 * carries every rank's blob along with its node record (comm_topo.c: one
 * ring all-gather for both, not two), and the second connects with them
 * (shared memory now, TCP on first use unless LOOM_CONNECT=eager).
 */
#include "api/comm.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <stdlib.h>
#include <string.h>

/* The ranks of this host, as the bootstrap root grouped the host ids (not
 * comm->topo: a LOOM_TOPO_FILE may describe another machine, but shared
 * memory needs the real one).  NULL when out of memory. */
static int *host_ranks(loomComm_t comm, int *nlocal) {
  const int32_t *ranks = loom_bootstrap_host_ranks(comm->bs, nlocal);
  int *local = malloc(sizeof(int) * (size_t)*nlocal);
  for (int i = 0; local != NULL && i < *nlocal; i++)
    local[i] = ranks[i];
  return local;
}

loomResult_t loom_comm_transport_start(loomComm_t comm) {
  if (loom_connect_lazy() < 0) /* checked on every rank, whatever carries its peers */
    return loomInvalidArgument;
  if (comm->nranks == 1)
    return loomSuccess;
  struct loom_engine *e = &comm->engine;
  e->tp = &loom_transport_mux;
  int nlocal;
  int *local = host_ranks(comm, &nlocal);
  comm->tp_addr_bytes = e->tp->addr_bytes;
  comm->tp_addrs = calloc((size_t)comm->nranks, comm->tp_addr_bytes);
  if (local == NULL || comm->tp_addrs == NULL) {
    free(local);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory");
  }
  struct loom_transport_comm info = {
      .rank = comm->rank,
      .nranks = comm->nranks,
      .secret = loom_bootstrap_secret(comm->bs),
      .local_sockaddr = loom_bootstrap_local_addr(comm->bs),
      .comm_name = comm->name,
      .local_ranks = local,
      .nlocal = nlocal,
  };
  loomResult_t res = e->tp->init(&info, &e->tp_ctx,
                                 comm->tp_addrs + (size_t)comm->rank * comm->tp_addr_bytes);
  free(local);
  return res;
}

/* The transport's report on the connection to `peer` (-1: none, left 0). */
static void read_link(const struct loom_engine *e, int peer, struct loom_cost_link *out) {
  struct loom_net_properties p = {0};
  if (peer >= 0)
    e->tp->properties(e->tp_ctx, peer, &p);
  *out = (struct loom_cost_link){.latency_us = p.latency_us,
                                 .bandwidth_gbps = p.bandwidth_gbps,
                                 .msg_overhead_us = p.msg_overhead_us};
}

/* What the transport reports of one peer inside this node and one outside
 * (where there are such peers), for the tuner's cost model. */
static void read_links(loomComm_t comm, const int *local, int nlocal) {
  const struct loom_engine *e = &comm->engine;
  if (e->tp->properties == NULL)
    return;
  int intra = -1, inter = -1;
  for (int i = 0; i < nlocal && intra < 0; i++)
    if (local[i] != comm->rank)
      intra = local[i];
  for (int r = 0, i = 0; r < comm->nranks && inter < 0; r++) {
    while (i < nlocal && local[i] < r)
      i++;
    if (i == nlocal || local[i] != r)
      inter = r;
  }
  read_link(e, intra, &comm->links.intra);
  read_link(e, inter, &comm->links.inter);
}

/* With several bootstrap roots, a root groups only its own block's ranks
 * by host, so a node whose ranks fall in two blocks has two groups that
 * reach each other over the network instead of shared memory.  Correct,
 * but slower than it looks: said once, by the node's first rank. */
static void warn_split_host(loomComm_t comm, int nlocal) {
  const char *file = loom_param_str(LOOM_PARAM_TOPO_FILE);
  if (comm->init_nids < 2 || (file != NULL && file[0] != '\0') ||
      loom_param_int(LOOM_PARAM_SHM_DISABLE))
    return;
  int node = comm->topo.node_of[comm->rank];
  int size = loom_topo_node_size(&comm->topo, node);
  if (size == nlocal || loom_topo_rank_at(&comm->topo, node, 0) != comm->rank)
    return;
  LOOM_WARN(LOOM_LOG_INIT,
            "rank %d: this node's %d ranks fall in more than one of the %d bootstrap roots' "
            "blocks (loomCommInitRankScalable), so only %d of them share memory with this "
            "rank and the rest use the network: choose nIds so that each node's ranks are "
            "in one block of nranks / nIds",
            comm->rank, size, comm->init_nids, nlocal);
}

/* Every other rank gets a connection object: point-to-point calls and
 * all-to-all need any pair, and the schedules pick peers per call (over
 * TCP it connects on first use unless LOOM_CONNECT=eager). */
loomResult_t loom_comm_transport_connect(loomComm_t comm) {
  if (comm->nranks == 1)
    return loomSuccess;
  struct loom_engine *e = &comm->engine;
  int nlocal;
  int *local = host_ranks(comm, &nlocal);
  int *peers = malloc(sizeof(int) * (size_t)comm->nranks);
  void **conns = malloc(sizeof(void *) * (size_t)comm->nranks);
  loomResult_t res = loomSuccess;
  if (local == NULL || peers == NULL || conns == NULL) {
    res = loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory");
    goto out;
  }
  int npeers = 0;
  for (int i = 1; i < comm->nranks; i++)
    peers[npeers++] = (comm->rank + i) % comm->nranks;
  uint64_t deadline = loom_deadline_ms(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT) * 1000);
  LOOM_CHECK_GOTO(e->tp->connect(e->tp_ctx, npeers, peers, comm->tp_addrs, deadline, conns), res,
                  out);
  for (int i = 0; i < npeers; i++)
    e->conns[peers[i]] = conns[i];
  read_links(comm, local, nlocal);
  warn_split_host(comm, nlocal);
out:
  free(comm->tp_addrs);
  comm->tp_addrs = NULL;
  free(peers);
  free(conns);
  free(local);
  return res;
}
