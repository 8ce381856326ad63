/*
 * collectives.c — the public collective and point-to-point calls: each
 * records its arguments as a loom_call, checks them (args.c) and issues
 * it (group.c).
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static loomResult_t submit(struct loom_call *c, const char *fn) {
  loomResult_t res = loom_call_check(c, fn);
  if (res != loomSuccess) {
    loom_call_free(c);
    return res;
  }
  return loom_issue(c, fn);
}

/* Every field is assigned (scalar is written by the check when it is
 * used): zero-filling the whole struct first cost a slow `rep stos` on
 * every call of a latency-bound path. */
static inline struct loom_call make(enum loom_coll coll, const void *sendbuff, void *recvbuff,
                                    size_t count, loomDataType_t datatype, loomRedOp_t op,
                                    int root, loomComm_t comm, loomStream_t stream) {
  struct loom_call c;
  c.coll = coll;
  c.comm = comm;
  c.stream = stream;
  c.sendbuff = sendbuff;
  c.recvbuff = recvbuff;
  c.count = count;
  c.datatype = datatype;
  c.op = op;
  c.root = root;
  c.is_send = 0;
  c.base_op = op;
  c.premul = 0;
  c.v = NULL;
  c.source = NULL;
  c.send_bytes = c.recv_bytes = 0;
  c.device = loomDeviceHost;
  return c;
}

loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                           loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1,
                            comm, stream);
  return submit(&c, "loomAllReduce");
}

loomResult_t loomAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           loomDataType_t datatype, loomComm_t comm, loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype,
                            loomSum, -1, comm, stream);
  return submit(&c, "loomAllGather");
}

loomResult_t loomReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                               loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype,
                            op, -1, comm, stream);
  return submit(&c, "loomReduceScatter");
}

loomResult_t loomBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           loomDataType_t datatype, int root, loomComm_t comm,
                           loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, loomSum,
                            root, comm, stream);
  return submit(&c, "loomBroadcast");
}

loomResult_t loomReduce(const void *sendbuff, void *recvbuff, size_t count,
                        loomDataType_t datatype, loomRedOp_t op, int root, loomComm_t comm,
                        loomStream_t stream) {
  struct loom_call c =
      make(LOOM_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  return submit(&c, "loomReduce");
}

loomResult_t loomAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                          loomDataType_t datatype, loomComm_t comm, loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, loomSum,
                            -1, comm, stream);
  return submit(&c, "loomAllToAll");
}

loomResult_t loomAllToAllv(const void *sendbuff, const size_t sendcounts[],
                           const size_t sdispls[], void *recvbuff, const size_t recvcounts[],
                           const size_t rdispls[], loomDataType_t datatype, loomComm_t comm,
                           loomStream_t stream) {
  static const char fn[] = "loomAllToAllv";
  LOOM_CHECK(loom_comm_check_usable(comm, fn));
  const size_t *arrays[4] = {sendcounts, sdispls, recvcounts, rdispls};
  static const char *const names[4] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
  for (int i = 0; i < 4; i++)
    if (arrays[i] == NULL)
      return loom_error(loomInvalidArgument, LOOM_LOG_COLL, "%s: %s is NULL", fn, names[i]);
  size_t n = (size_t)comm->nranks;
  struct loom_call c = make(LOOM_COLL_ALLTOALLV, sendbuff, recvbuff, 0, datatype, loomSum, -1,
                            comm, stream);
  c.v = malloc(4 * n * sizeof(size_t));
  if (c.v == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "%s: out of memory", fn);
  for (int i = 0; i < 4; i++)
    memcpy(c.v + (size_t)i * n, arrays[i], n * sizeof(size_t));
  return submit(&c, fn);
}

loomResult_t loomGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                        loomDataType_t datatype, int root, loomComm_t comm,
                        loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_GATHER, sendbuff, recvbuff, sendcount, datatype, loomSum,
                            root, comm, stream);
  return submit(&c, "loomGather");
}

loomResult_t loomScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                         loomDataType_t datatype, int root, loomComm_t comm,
                         loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_SCATTER, sendbuff, recvbuff, recvcount, datatype, loomSum,
                            root, comm, stream);
  return submit(&c, "loomScatter");
}

loomResult_t loomSend(const void *sendbuff, size_t count, loomDataType_t datatype, int peer,
                      loomComm_t comm, loomStream_t stream) {
  struct loom_call c =
      make(LOOM_COLL_SENDRECV, sendbuff, NULL, count, datatype, loomSum, peer, comm, stream);
  c.is_send = 1;
  return submit(&c, "loomSend");
}

loomResult_t loomRecv(void *recvbuff, size_t count, loomDataType_t datatype, int peer,
                      loomComm_t comm, loomStream_t stream) {
  struct loom_call c =
      make(LOOM_COLL_SENDRECV, NULL, recvbuff, count, datatype, loomSum, peer, comm, stream);
  return submit(&c, "loomRecv");
}

loomResult_t loomRecvAny(void *recvbuff, size_t count, loomDataType_t datatype, int *source,
                         loomComm_t comm, loomStream_t stream) {
  struct loom_call c = make(LOOM_COLL_SENDRECV, NULL, recvbuff, count, datatype, loomSum,
                            LOOM_PEER_ANY, comm, stream);
  c.source = source;
  return submit(&c, "loomRecvAny");
}

loomResult_t loomBarrier(loomComm_t comm, loomStream_t stream) {
  struct loom_call c =
      make(LOOM_COLL_BARRIER, NULL, NULL, 0, loomInt8, loomSum, -1, comm, stream);
  return submit(&c, "loomBarrier");
}
