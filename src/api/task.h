/*
 * task.h — a recorded collective call and how calls are issued: checked
 * at once (args.c), then run now, queued on a stream, or kept for the
 * group's end (group.c); execute.c runs them on a communicator.
 */
#ifndef LOOM_API_TASK_H
#define LOOM_API_TASK_H

#include "loom.h"
#include "plan/plan.h"
#include "engine/engine.h"
#include "sched/schedule.h"
#include "stream/stream.h"
#include "trace/trace.h"

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
  int *source;    /* loomRecvAny (root LOOM_PEER_ANY): where the sender's rank goes */
  /* set by the check: the bytes this rank reads from sendbuff and writes
   * to recvbuff, and the device holding them (loomDeviceHost when none) */
  size_t send_bytes, recv_bytes;
  loomDevice_t device;
  uint64_t trace_id; /* its flight-recorder entry (comm_trace.c); 0: none */
  /* recorded when planned, not when issued: a call run at once on host
   * buffers with nothing queued before it (loom_call_trace_run), or a
   * call of a group, recorded at loomGroupEnd (loom_p2p_trace_started for
   * sends and receives run directly, else loom_calls_trace_queued) */
  unsigned char trace_at_plan;
};

struct loom_posted;
/* comm_trace.c: the flight recorder's view of calls.  loom_call_trace
 * records an issued call as queued (sets c->trace_id; a call run at once
 * is recorded by loom_call_trace_run, comm_trace.h); the others mark
 * queued calls whose task was posted (p's plan; a bucket's calls share
 * it; loom_p2p_trace_started records a send or receive still marked
 * trace_at_plan, started, in one pass) or calls that ended
 * (timed: read the clock for the end even of a small call,
 * loom_trace_ended). */
void loom_call_trace(struct loom_call *c);
/* Calls still marked trace_at_plan that go through a task of several
 * steps or calls, or a stream: recorded queued now (loom_call_trace), and
 * marked started when their task is posted. */
void loom_calls_trace_queued(struct loom_call *calls, int n);
void loom_calls_trace_started(loomComm_t comm, const struct loom_call *calls, int n,
                              const struct loom_posted *p);
void loom_p2p_trace_started(loomComm_t comm, struct loom_call *calls, const int *idx, int m);
void loom_calls_trace_ended(loomComm_t comm, const struct loom_call *calls, int n,
                            loomResult_t res, int timed);
void loom_p2p_trace_ended(loomComm_t comm, const struct loom_call *calls, const int *idx, int m,
                          loomResult_t res, int timed);

/* Frees what a call owns (the all-to-all-v arrays). */
void loom_call_free(struct loom_call *c);

/* args.c: checks a call's arguments against its communicator; on success
 * the call may be issued.  Messages name `fn`. */
loomResult_t loom_call_check(struct loom_call *c, const char *fn);

/* group.c: issues a checked call (taking ownership of c->v): recorded in
 * an open group, queued on its stream, or run now. */
loomResult_t loom_issue(struct loom_call *c, const char *fn);

/* Sends and receives of one batch whose buffers and indices need no
 * allocation (a pair, a halo exchange): two mallocs and frees were a
 * tenth of a one-rank send/receive group. */
#define LOOM_P2P_INLINE 8

/* What a posted call keeps alive for the engine until its task ends. */
struct loom_posted {
  struct loom_schedule sched;
  struct loom_engine_op eop;
  void *bufs[LOOM_BUF_USER];
  /* a send/recv batch's buffers: user_inline, or owned when larger */
  void **user_bufs;
  void *user_inline[LOOM_BUF_USER + LOOM_P2P_INLINE];
  unsigned char barrier_byte;  /* a barrier's one-byte all-reduce */
  const char *algo;     /* the plan's algorithm */
  uint64_t trace_plan;  /* its plan in the flight recorder (0: none) */
  uint64_t trace_id;    /* a call recorded when planned (loom_call_trace_run) */
};

/* execute.c: plans call c (not SENDRECV) and posts it on the
 * communicator's engine; fp_coll names it in the fingerprint (c->coll, or
 * the communicator call a barrier stands for).  Caller holds op_lock; p
 * stays alive until the task ends. */
loomResult_t loom_post_call(loomComm_t comm, const struct loom_call *c, int fp_coll,
                            struct loom_posted *p);
/* Posts the sends and receives calls[idx[0..m)) as one task (copies to
 * this rank itself are done here). */
loomResult_t loom_post_sendrecv(loomComm_t comm, struct loom_call *calls, const int *idx, int m,
                                struct loom_posted *p);
/* Frees what a posted call owned, once its task has ended. */
void loom_posted_release(struct loom_posted *p);
/* Checks the sends and receives of this rank to itself match in order
 * (copy == 0), or does their copies (copy == 1). */
loomResult_t loom_self_exchange(loomComm_t comm, const struct loom_call *calls, const int *idx,
                                int m, int copy);
/* Grows the communicator's schedule storage to nsteps. */
loomResult_t loom_execute_ensure_steps(loomComm_t comm, int nsteps);

/* A barrier over the data connections that stands for a communicator
 * call (LOOM_FP_SPLIT, LOOM_FP_FINALIZE) in the fingerprint, so that a rank
 * in loomCommSplit and a rank in a collective name each other's calls
 * instead of waiting on different sockets.  Caller holds op_lock. */
loomResult_t loom_execute_fence(loomComm_t comm, int fp_kind);
/* The same barrier, posted into p without waiting (api/ipc_coll.c's
 * phases end with it, as tasks of their batch). */
loomResult_t loom_post_fence(loomComm_t comm, int fp_kind, struct loom_posted *p);

/* batch.c: the calls of one communicator, run in order (fused into
 * buckets, sends and receives last as one task). */
struct loom_batch {
  loomComm_t comm;
  struct loom_call *calls;
  int ncalls;
  int counted; /* holds one of comm's in-flight counts: released when the batch ends */
  /* the run (set by loom_execute_batches) */
  int started, next, p2p_posted;
  int *p2p, np2p;                  /* indices of the sends and receives */
  int p2p_inline[LOOM_P2P_INLINE]; /* p2p's room when np2p fits */
  int unpack, bucket_first, bucket_n; /* the bucket in flight, copied out at its end */
  struct loom_ipc_run *ipc;           /* a call in flight through device IPC (ipc_coll.h) */
  int ipc_call;                       /* its index */
  /* the calls of the task in flight, for the flight recorder: [task_first,
   * task_first + task_n), or the sends and receives (task_p2p) */
  int task_first, task_n, task_p2p;
  struct loom_posted posted;
  loomResult_t res;
  int intact;       /* res came from a task that left the communicator as it was */
  char error[1024]; /* res's text */
};
/* Runs n batches of distinct communicators at once on this thread, each
 * under its communicator's op_lock; a communicator whose batch fails is
 * marked broken.  Returns the first failure (its text the last error). */
loomResult_t loom_execute_batches(struct loom_batch *bs, int n);
/* One batch of calls on comm. */
loomResult_t loom_execute(loomComm_t comm, struct loom_call *calls, int ncalls);
/* Whether loom_execute runs the one host call c under comm's op_lock from
 * its first use of the communicator to its last: not a send or receive,
 * not through host IPC (whose phases are separate tasks). */
int loom_execute_is_single(const struct loom_call *c);
/* Runs such a call (loom_execute does when it is alone). */
loomResult_t loom_execute_single(loomComm_t comm, const struct loom_call *c);
/* Runs n sends and receives on comm's host buffers (n <= LOOM_P2P_INLINE,
 * no stream, no receive from any rank) the same way: a send or receive
 * alone, or a group's pair or halo exchange, without a batch. */
loomResult_t loom_execute_sendrecv(loomComm_t comm, struct loom_call *calls, int n);

/* Queues calls of one communicator on `stream` as one task (taking
 * ownership of the array and the calls' arrays). */
loomResult_t loom_execute_async(loomComm_t comm, loomStream_t stream, struct loom_call *calls,
                                int ncalls);

/* bucket.c: how many calls from calls[0] fuse into one bucket (1: none). */
int loom_bucket_span(const struct loom_call *calls, int ncalls, size_t bucket_bytes);
/* The one call that runs calls[0..n) fused; *copied says whether their
 * inputs were copied into the bucket (else they are views of one buffer)
 * and their results must be copied out by loom_bucket_unpack. */
loomResult_t loom_bucket_pack(loomComm_t comm, const struct loom_call *calls, int n,
                              struct loom_call *fused, int *copied);
void loom_bucket_unpack(loomComm_t comm, const struct loom_call *calls, int n);

/* staging.c: stages the device buffers of calls[0..n) into st (host
 * blocks, device/stage.h), pointing the calls at the blocks. */
struct loom_stage;
loomResult_t loom_stage_calls(struct loom_stage *st, struct loom_call *calls, int n);
/* Runs calls (one communicator's, no stream) with their device buffers
 * staged through host memory: loom_execute between the copies. */
loomResult_t loom_execute_staged(loomComm_t comm, struct loom_call *calls, int ncalls);

/* redop.c: resolves an op into the built-in op to run and, for a
 * PreMulSum op, its scalar (copied to scalar, *premul = 1). */
loomResult_t loom_redop_resolve(loomComm_t comm, loomRedOp_t op, loomDataType_t datatype,
                                loomRedOp_t *base, unsigned char scalar[8], int *premul,
                                const char *fn);

#endif
