/*
 * task.h — a recorded collective call and how calls are issued: checked
 * at once (args.c), then run now, queued on a stream, or kept for the
 * group's end (group.c); execute.c runs them on a communicator.
 */
#ifndef LOOM_API_TASK_H
#define LOOM_API_TASK_H

#include "loom.h"
#include "plan/plan.h"
#include "stream/stream.h"

#include <stddef.h>

struct loom_call {
  enum loom_coll coll;
  loomComm_t comm;
  loomStream_t stream;
  const void *sendbuff;
  void *recvbuff;
  size_t count; /* per rank where NCCL says so; bytes moved by one send/recv */
  loomDataType_t datatype;
  loomRedOp_t op; /* as given: built-in or a loomRedOpCreatePreMulSum op */
  int root;       /* root, or the peer of a send/recv */
  int is_send;    /* SENDRECV: 1 send, 0 receive */
  /* reductions, resolved when the call is made (a custom op may be
   * destroyed once the call returns, as in NCCL) */
  loomRedOp_t base_op;      /* the built-in op to run */
  int premul;               /* PreMulSum: multiply the input by scalar first */
  unsigned char scalar[8];
  size_t *v;      /* ALLTOALLV: sendcounts, sdispls, recvcounts, rdispls (4*nranks, owned) */
};

/* Frees what a call owns (the all-to-all-v arrays). */
void loom_call_free(struct loom_call *c);

/* args.c: checks a call's arguments against its communicator; on success
 * the call may be issued.  Messages name `fn`. */
loomResult_t loom_call_check(struct loom_call *c, const char *fn);

/* group.c: issues a checked call (taking ownership of c->v): recorded in
 * an open group, queued on its stream, or run now. */
loomResult_t loom_issue(struct loom_call *c, const char *fn);

/* execute.c: runs calls of one communicator in order (a group's calls:
 * fused into buckets, sends and receives as one batch) on the calling
 * thread.  The communicator is marked broken on failure. */
loomResult_t loom_execute(loomComm_t comm, struct loom_call *calls, int ncalls);

/* Runs one call (not SENDRECV) on the communicator; the caller holds
 * op_lock and marks the communicator broken on failure. */
loomResult_t loom_execute_one(loomComm_t comm, const struct loom_call *c);

/* A barrier over the data connections that stands for a communicator
 * call (LOOM_FP_SPLIT, LOOM_FP_FINALIZE) in the fingerprint, so that a rank
 * in loomCommSplit and a rank in a collective name each other's calls
 * instead of waiting on different sockets.  Caller holds op_lock. */
loomResult_t loom_execute_fence(loomComm_t comm, int fp_kind);

/* Queues calls of one communicator on `stream` as one task (taking
 * ownership of the array and the calls' arrays). */
loomResult_t loom_execute_async(loomComm_t comm, loomStream_t stream, struct loom_call *calls,
                                int ncalls);

/* bucket.c: how many calls from calls[0] fuse into one bucket (1: none). */
int loom_bucket_span(const struct loom_call *calls, int ncalls, size_t bucket_bytes);
/* Runs calls[0..n) as one fused all-reduce or all-gather. */
loomResult_t loom_bucket_run(loomComm_t comm, const struct loom_call *calls, int n);

/* redop.c: resolves an op into the built-in op to run and, for a
 * PreMulSum op, its scalar (copied to scalar, *premul = 1). */
loomResult_t loom_redop_resolve(loomComm_t comm, loomRedOp_t op, loomDataType_t datatype,
                                loomRedOp_t *base, unsigned char scalar[8], int *premul,
                                const char *fn);
/* dst[i] = src[i] * scalar (one element of dt). */
void loom_premul(void *dst, const void *src, size_t count, loomDataType_t dt,
                 const void *scalar);

#endif
