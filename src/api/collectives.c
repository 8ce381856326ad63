/*
 * collectives.c — loomAllReduce and loomAllGather: argument checks, then a
 * schedule for the engine.
 */
#include "api/comm.h"
#include "core/error.h"
#include "device/reduce.h"
#include "plan/plan.h"

#include <stdint.h>
#include <stdlib.h>

static loomResult_t check_type_op(const char *fn, loomDataType_t datatype, int check_op,
                                  loomRedOp_t op) {
  if ((int)datatype < 0 || datatype >= loomNumTypes)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: invalid datatype %d (use loomInt8 ... loomBfloat16)", fn,
                      (int)datatype);
  if (check_op && ((int)op < 0 || op >= loomNumOps))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: invalid reduction op %d (use loomSum, loomProd, loomMax, "
                      "loomMin or loomAvg)",
                      fn, (int)op);
  return loomSuccess;
}

/* bytes = count * esize * mult, refusing overflow. */
static loomResult_t byte_size(const char *fn, size_t count, size_t esize, size_t mult,
                              size_t *bytes) {
  if (count != 0 && (esize > SIZE_MAX / count || count * esize > SIZE_MAX / mult ||
                     count * esize * mult > (size_t)PTRDIFF_MAX))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: count %zu of %zu-byte elements (x%zu ranks) overflows the "
                      "address space",
                      fn, count, esize, mult);
  *bytes = count * esize * mult;
  return loomSuccess;
}

static int overlaps(const void *a, size_t alen, const void *b, size_t blen) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

static loomResult_t check_stream(const char *fn, loomStream_t stream) {
  if (stream != NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: stream must be NULL (run to completion on the calling "
                      "thread); this build has no stream objects",
                      fn);
  return loomSuccess;
}

/* Runs `sched` on the communicator, marking it broken on failure. */
static loomResult_t run_collective(loomComm_t comm, const char *name,
                                   const void *sendbuff, void *recvbuff, size_t count,
                                   loomDataType_t datatype, loomRedOp_t op, int allgather) {
  int n = comm->nranks;
  pthread_mutex_lock(&comm->op_lock); /* the schedule storage is the comm's */
  struct loom_schedule sched = {.steps = comm->sched_steps,
                                .block_off = comm->sched_blocks,
                                .block_count = comm->sched_blocks + n};
  loom_plan(allgather ? LOOM_COLL_ALLGATHER : LOOM_COLL_ALLREDUCE, comm->rank, n, count,
            loom_datatype_size(datatype), &sched);
  struct loom_engine_op eop = {name, &sched, sendbuff, recvbuff, datatype, op};
  loomResult_t res = loom_engine_run(&comm->engine, &eop);
  if (res != loomSuccess)
    loom_comm_set_broken(comm, res);
  pthread_mutex_unlock(&comm->op_lock);
  return res;
}

loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                           loomStream_t stream) {
  static const char fn[] = "loomAllReduce";
  LOOM_CHECK(loom_comm_check_usable(comm, fn));
  LOOM_CHECK(check_type_op(fn, datatype, 1, op));
  LOOM_CHECK(check_stream(fn, stream));
  size_t bytes;
  LOOM_CHECK(byte_size(fn, count, loom_datatype_size(datatype), 1, &bytes));
  if (count > 0 && (sendbuff == NULL || recvbuff == NULL))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL, "%s: %s is NULL with count %zu", fn,
                      sendbuff == NULL ? "sendbuff" : "recvbuff", count);
  if (sendbuff != recvbuff && overlaps(sendbuff, bytes, recvbuff, bytes))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: sendbuff and recvbuff overlap without being equal (in place "
                      "needs sendbuff == recvbuff)",
                      fn);
  if (count == 0)
    return loomSuccess;
  return run_collective(comm, "allreduce", sendbuff, recvbuff, count, datatype, op, 0);
}

loomResult_t loomAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           loomDataType_t datatype, loomComm_t comm, loomStream_t stream) {
  static const char fn[] = "loomAllGather";
  LOOM_CHECK(loom_comm_check_usable(comm, fn));
  LOOM_CHECK(check_type_op(fn, datatype, 0, loomSum));
  LOOM_CHECK(check_stream(fn, stream));
  size_t esize = loom_datatype_size(datatype), bytes, total;
  LOOM_CHECK(byte_size(fn, sendcount, esize, 1, &bytes));
  LOOM_CHECK(byte_size(fn, sendcount, esize, (size_t)comm->nranks, &total));
  if (sendcount > 0 && (sendbuff == NULL || recvbuff == NULL))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL, "%s: %s is NULL with count %zu", fn,
                      sendbuff == NULL ? "sendbuff" : "recvbuff", sendcount);
  const char *own = (const char *)recvbuff + (size_t)comm->rank * bytes;
  if (sendbuff != own && overlaps(sendbuff, bytes, recvbuff, total))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: sendbuff overlaps recvbuff without being this rank's slot "
                      "(in place needs sendbuff == recvbuff + rank*sendcount elements)",
                      fn);
  if (sendcount == 0)
    return loomSuccess;
  return run_collective(comm, "allgather", sendbuff, recvbuff, sendcount, datatype, loomSum,
                        1);
}
