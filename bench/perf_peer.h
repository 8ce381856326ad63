/*
 * perf_peer.h — `loom-perf --peer mpi`: MPI's collective matching each of
 * loom-perf's (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter, an
 * MPI_Sendrecv ring, MPI_Barrier), called on loom-perf's buffers so that it
 * is timed and checked as Loom's call is.  Built with MPI only when
 * configure found it (LOOM_PERF_MPI); otherwise every --peer mpi is refused.
 */
#ifndef PERF_PEER_H
#define PERF_PEER_H

#include <stddef.h>

#include "loom.h"
#include "perf_coll.h"

/* Whether loom-perf was built with MPI. */
int perf_peer_built(void);

/* NULL when --peer mpi can run `coll` with this type and op; else the
 * reason it cannot (no MPI built in, no MPI type or op for it). */
const char *perf_peer_unsupported(coll_t coll, loomDataType_t type, loomRedOp_t op);

/* One out-of-place call, with the arguments Loom's call gets.  MPI_Bcast
 * has one buffer: the root sends `send` and the others receive into
 * `recv`, so the root's recv is left as it was. */
struct perf_peer_call {
  coll_t coll;
  loomDataType_t type;
  loomRedOp_t op;
  int root, rank, nranks;
  size_t count; /* Loom's count (per rank for per-rank collectives) */
  const void *send;
  void *recv;
};

/* Runs the call on MPI_COMM_WORLD; exits with a message when the count
 * does not fit MPI's int.  Needs MPI initialised (perf_launch.c). */
void perf_peer_run(const struct perf_peer_call *c);

#endif /* PERF_PEER_H */
