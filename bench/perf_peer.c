/*
 * perf_peer.c — MPI's collectives for `loom-perf --peer mpi` (see
 * perf_peer.h).
 */
#include "perf_peer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef LOOM_PERF_MPI
#include <mpi.h>
#endif

int perf_peer_built(void) {
#ifdef LOOM_PERF_MPI
  return 1;
#else
  return 0;
#endif
}

const char *perf_peer_unsupported(coll_t coll, loomDataType_t type, loomRedOp_t op) {
  if (!perf_peer_built())
    return "this loom-perf was built without MPI (configure found no mpicc; install "
           "libopenmpi-dev and rerun configure)";
  if (!coll_info[coll].reduces)
    return NULL; /* data movement: half and bfloat16 travel as 16-bit words */
  if (type == loomFloat16 || type == loomBfloat16)
    return "MPI has no half or bfloat16 reduction; use -d float, double or an integer type";
  if (op == loomAvg)
    return "MPI has no average reduction; use -o sum, prod, min or max";
  return NULL;
}

#ifdef LOOM_PERF_MPI
static MPI_Datatype mpi_type(loomDataType_t t) {
  switch (t) {
  case loomInt8: return MPI_INT8_T;
  case loomUint8: return MPI_UINT8_T;
  case loomInt32: return MPI_INT32_T;
  case loomUint32: return MPI_UINT32_T;
  case loomInt64: return MPI_INT64_T;
  case loomUint64: return MPI_UINT64_T;
  case loomFloat32: return MPI_FLOAT;
  case loomFloat64: return MPI_DOUBLE;
  default: return MPI_UINT16_T; /* half, bfloat16: moved, never reduced */
  }
}

static MPI_Op mpi_op(loomRedOp_t op) {
  switch (op) {
  case loomProd: return MPI_PROD;
  case loomMax: return MPI_MAX;
  case loomMin: return MPI_MIN;
  default: return MPI_SUM;
  }
}

void perf_peer_run(const struct perf_peer_call *c) {
  if (c->count > INT_MAX) {
    fprintf(stderr, "loom-perf: rank %d: --peer mpi: count %zu does not fit MPI's int; "
            "use a smaller -e\n", c->rank, c->count);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int n = (int)c->count, next = (c->rank + 1) % c->nranks;
  int prev = (c->rank + c->nranks - 1) % c->nranks;
  MPI_Datatype t = mpi_type(c->type);
  MPI_Op op = mpi_op(c->op);
  MPI_Comm w = MPI_COMM_WORLD;
  void *send = (void *)c->send; /* MPI-3 takes const; older headers do not */
  switch (c->coll) {
  case COLL_ALLREDUCE: MPI_Allreduce(send, c->recv, n, t, op, w); break;
  case COLL_ALLGATHER: MPI_Allgather(send, n, t, c->recv, n, t, w); break;
  case COLL_REDUCESCATTER: MPI_Reduce_scatter_block(send, c->recv, n, t, op, w); break;
  case COLL_BROADCAST:
    MPI_Bcast(c->rank == c->root ? send : c->recv, n, t, c->root, w);
    break;
  case COLL_REDUCE: MPI_Reduce(send, c->recv, n, t, op, c->root, w); break;
  case COLL_ALLTOALL: MPI_Alltoall(send, n, t, c->recv, n, t, w); break;
  case COLL_GATHER: MPI_Gather(send, n, t, c->recv, n, t, c->root, w); break;
  case COLL_SCATTER: MPI_Scatter(send, n, t, c->recv, n, t, c->root, w); break;
  case COLL_SENDRECV:
    MPI_Sendrecv(send, n, t, next, 0, c->recv, n, t, prev, 0, w, MPI_STATUS_IGNORE);
    break;
  case COLL_BARRIER: MPI_Barrier(w); break;
  default: break;
  }
}
#else
void perf_peer_run(const struct perf_peer_call *c) {
  /* Unreachable: perf_peer_unsupported refuses --peer mpi in this build. */
  fprintf(stderr, "loom-perf: rank %d: --peer mpi: built without MPI\n", c->rank);
  exit(1);
}
#endif
