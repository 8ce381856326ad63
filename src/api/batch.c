/*
 * batch.c — runs the calls of a communicator in order as engine tasks, and
 * the batches of several communicators at once on the calling thread (a
 * group, a loomCommInitAll clique): each call is planned and posted when
 * the previous one has ended, buckets of small calls fuse into one task
 * (unpacked when it ends), and sends and receives run last as one task.
 */
#include "api/comm.h"
#include "api/task.h"
#include "api/comm_trace.h"
#include "api/ipc_coll.h"
#include "core/error.h"
#include "device/stage.h"
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

/* Records the batch's failure and its text (the thread's text changes as
 * the other batches run). */
static void batch_fail(struct loom_batch *b, loomResult_t res) {
  if (b->res != loomSuccess)
    return;
  b->res = res;
  snprintf(b->error, sizeof b->error, "%s", loom_last_error());
}

/* Checks the communicator and the batch's sends and receives before
 * anything moves (a send to itself without its receive). */
static loomResult_t batch_open(struct loom_batch *b) {
  loomComm_t comm = b->comm;
  LOOM_CHECK(loom_comm_check_usable(comm, loom_coll_name(b->calls[0].coll)));
  LOOM_CHECK(loom_execute_ensure_steps(comm, LOOM_SCHED_MAX_STEPS(comm->nranks)));
  for (int i = 0; i < b->ncalls; i++)
    b->np2p += b->calls[i].coll == LOOM_COLL_SENDRECV;
  if (b->np2p > 0 && b->np2p <= LOOM_P2P_INLINE)
    b->p2p = b->p2p_inline;
  else if (b->np2p > 0 && (b->p2p = malloc(sizeof(int) * (size_t)b->np2p)) == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory");
  for (int i = 0, k = 0; i < b->ncalls && b->p2p != NULL; i++)
    if (b->calls[i].coll == LOOM_COLL_SENDRECV)
      b->p2p[k++] = i;
  return loom_self_exchange(comm, b->calls, b->p2p, b->np2p, 0);
}

/* Posts the batch's next task: the next collective or bucket, then the
 * sends and receives.  *posted = 0 when none is left. */
static loomResult_t batch_post_next(struct loom_batch *b, int *posted) {
  loomComm_t comm = b->comm;
  *posted = 1;
  while (b->next < b->ncalls && b->calls[b->next].coll == LOOM_COLL_SENDRECV)
    b->next++;
  if (b->next < b->ncalls) {
    const struct loom_call *c = &b->calls[b->next];
    if (loom_ipc_wants(c)) {
      b->next++;
      if ((b->ipc = malloc(sizeof *b->ipc)) == NULL)
        return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (device IPC)");
      b->ipc_call = (int)(c - b->calls);
      const char *path = c->device == loomDeviceHost ? "host IPC" : "device IPC";
      uint64_t plan = loom_trace_plan_add(comm->trace, path, 0, NULL, 0, NULL);
      loom_trace_started(comm->trace, c->trace_id, plan, 1);
      return loom_ipc_begin(comm, c, b->ipc, &b->posted);
    }
    int left = b->ncalls - b->next;
    int span = left > 1 ? loom_bucket_span(c, left, comm->bucket_bytes) : 1;
    b->next += span;
    b->task_first = (int)(c - b->calls);
    b->task_n = span;
    if (span == 1)
      return loom_post_call(comm, c, c->coll, &b->posted);
    struct loom_call fused;
    LOOM_CHECK(loom_bucket_pack(comm, c, span, &fused, &b->unpack));
    fused.trace_id = 0; /* its calls are recorded, not the bucket */
    fused.trace_at_plan = 0;
    b->bucket_first = (int)(c - b->calls);
    b->bucket_n = span;
    loomResult_t res = loom_post_call(comm, &fused, fused.coll, &b->posted);
    /* number calls, not tasks: a mismatch message's #N is the call's number
     * in the flight recorder */
    comm->coll_seq += (unsigned)span - 1;
    loom_calls_trace_started(comm, c, span, &b->posted);
    return res;
  }
  if (b->np2p > 0 && !b->p2p_posted) {
    b->p2p_posted = 1;
    b->task_p2p = 1;
    return loom_post_sendrecv(comm, b->calls, b->p2p, b->np2p, &b->posted);
  }
  *posted = 0;
  return loomSuccess;
}

/* The flight recorder: the calls of the task in flight ended with res. */
static void trace_task_ended(struct loom_batch *b, loomResult_t res) {
  /* several calls in one task: each lasts as long as all of them */
  int timed = b->comm->engine.waited || b->task_n + (b->task_p2p ? b->np2p : 0) > 1;
  if (b->task_p2p)
    loom_p2p_trace_ended(b->comm, b->calls, b->p2p, b->np2p, res, timed);
  loom_calls_trace_ended(b->comm, b->calls + b->task_first, b->task_n, res, timed);
  b->task_n = b->task_p2p = 0;
}

/* The task in flight ended with `res`: its bucket's results go out. */
static void batch_task_ended(struct loom_batch *b, loomResult_t res) {
  loom_posted_release(&b->posted);
  trace_task_ended(b, res);
  if (res != loomSuccess) {
    b->intact = b->res == loomSuccess && loom_engine_left_intact(&b->comm->engine);
    batch_fail(b, res);
  } else if (b->unpack)
    loom_bucket_unpack(b->comm, b->calls + b->bucket_first, b->bucket_n);
  b->unpack = 0;
}

/* The IPC call in flight, if any, is over (ended: it ran, or failed;
 * otherwise it is still to run the usual way). */
static void batch_ipc_done(struct loom_batch *b, int ended) {
  if (b->ipc == NULL)
    return;
  if (ended)
    loom_calls_trace_ended(b->comm, &b->calls[b->ipc_call], 1, b->res, 1);
  loom_ipc_end(b->ipc);
  free(b->ipc);
  b->ipc = NULL;
}

/* An IPC call in flight goes on to its next phase: *posted = 1 when it
 * posted a task, else it is over (done or failed). */
static void batch_ipc_next(struct loom_batch *b, int *posted) {
  *posted = 0;
  if (b->ipc == NULL)
    return;
  loomResult_t res = loomSuccess;
  if (b->res == loomSuccess &&
      (res = loom_ipc_continue(b->comm, b->ipc, &b->posted, posted)) != loomSuccess)
    batch_fail(b, res);
  if (*posted && res == loomSuccess)
    return;
  *posted = 0;
  int fallback = res == loomSuccess && b->res == loomSuccess && b->ipc->fallback;
  const struct loom_call *c = &b->calls[b->ipc_call];
  batch_ipc_done(b, !fallback);
  if (!fallback)
    return;
  /* host buffers some rank cannot share: every rank runs it as any call */
  b->task_first = (int)(c - b->calls);
  b->task_n = 1;
  if ((res = loom_post_call(b->comm, c, c->coll, &b->posted)) != loomSuccess)
    batch_fail(b, res);
  else
    *posted = 1;
}

/* Done with the communicator: an argument error found this late (a custom
 * op destroyed while queued), or a task that moved nothing (a receive from
 * any rank that timed out), leaves it usable; anything else broke it. */
static void batch_close(struct loom_batch *b) {
  loomComm_t comm = b->comm;
  if (b->res != loomSuccess && b->res != loomInvalidArgument && !b->intact &&
      atomic_load_explicit(&comm->async_error, memory_order_acquire) == loomSuccess) {
    loom_set_last_error(b->error);
    loom_comm_set_broken(comm, b->res);
  }
  if (b->p2p != b->p2p_inline)
    free(b->p2p);
  b->p2p = NULL;
  batch_ipc_done(b, 1);
  loom_oplock_unlock(&comm->op_lock);
  /* An Abort waiting for comm may free it now, while other batches run. */
  if (b->counted) {
    b->counted = 0;
    loom_comm_task_end(comm);
  }
}

/* loom_engine_drive's step for batch i: ends the task in flight, posts
 * the next, or closes the batch. */
static int batch_next(void *arg, int i, loomResult_t ended) {
  struct loom_batch *b = &((struct loom_batch *)arg)[i];
  if (loom_log_get_rank() != b->comm->rank)
    loom_log_set_rank(b->comm->rank);
  loomResult_t res = loomSuccess;
  if (b->started)
    batch_task_ended(b, ended);
  else if ((res = batch_open(b)) != loomSuccess)
    batch_fail(b, res);
  b->started = 1;
  int posted = 0;
  batch_ipc_next(b, &posted);
  if (!posted && b->res == loomSuccess && (res = batch_post_next(b, &posted)) != loomSuccess)
    batch_fail(b, res);
  if (posted && res == loomSuccess)
    return 1;
  trace_task_ended(b, b->res); /* a task that failed as it was posted */
  loom_posted_release(&b->posted);
  batch_close(b);
  return 0;
}

static int by_comm_address(const void *x, const void *y) {
  const struct loom_batch *a = *(struct loom_batch *const *)x;
  const struct loom_batch *b = *(struct loom_batch *const *)y;
  return (a->comm > b->comm) - (a->comm < b->comm);
}

/* Takes every batch's op_lock in one global order (the communicators'
 * addresses), so that two threads running groups over the same
 * communicators never wait on each other in a cycle. */
static loomResult_t lock_all(struct loom_batch *bs, int n) {
  if (n == 1) {
    loom_oplock_lock(&bs[0].comm->op_lock);
    return loomSuccess;
  }
  struct loom_batch **order = malloc(sizeof *order * (size_t)n);
  if (order == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (group of %d)", n);
  for (int i = 0; i < n; i++)
    order[i] = &bs[i];
  qsort(order, (size_t)n, sizeof *order, by_comm_address);
  for (int i = 0; i < n; i++)
    loom_oplock_lock(&order[i]->comm->op_lock);
  free(order);
  return loomSuccess;
}

/* Resets the run fields of a batch (the error text is written only on
 * failure: not cleared, as this runs on every call). */
static void batch_reset(struct loom_batch *b) {
  b->started = b->next = b->p2p_posted = 0;
  b->p2p = NULL;
  b->np2p = 0;
  b->unpack = b->bucket_first = b->bucket_n = 0;
  b->posted.user_bufs = NULL;
  b->ipc = NULL;
  b->task_n = b->task_p2p = 0;
  b->res = loomSuccess;
  b->intact = 0;
}

loomResult_t loom_execute_batches(struct loom_batch *bs, int n) {
  struct loom_engine *one[1], **es = n == 1 ? one : malloc(sizeof *es * (size_t)n);
  if (es == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (group of %d)", n);
  int caller_rank = loom_log_get_rank();
  loomResult_t res = lock_all(bs, n);
  if (res == loomSuccess) {
    for (int i = 0; i < n; i++) {
      batch_reset(&bs[i]);
      es[i] = &bs[i].comm->engine;
    }
    res = loom_engine_drive(es, n, batch_next, bs);
    for (int i = 0; i < n; i++)
      if (!bs[i].started) { /* the drive failed before it began: nothing ran */
        bs[i].started = 1;
        batch_close(&bs[i]);
      }
  }
  for (int i = 0; i < n && res == loomSuccess; i++)
    if (bs[i].res != loomSuccess) {
      res = bs[i].res;
      loom_set_last_error(bs[i].error);
    }
  if (loom_log_get_rank() != caller_rank)
    loom_log_set_rank(caller_rank);
  if (es != one)
    free(es);
  return res;
}

/* A run that holds comm's op_lock from its first use of the communicator
 * to its last (so it needs no in-flight count: Abort and Destroy take the
 * lock after waiting for the counted tasks): takes the lock and the
 * rank's log tag; returns the caller's tag for direct_leave. */
static int direct_enter(loomComm_t comm) {
  loom_oplock_lock(&comm->op_lock);
  int caller_rank = loom_log_get_rank();
  if (caller_rank != comm->rank)
    loom_log_set_rank(comm->rank);
  return caller_rank;
}

/* Ends such a run with res: a failure breaks the communicator, as
 * batch_close says, unless the task left it intact. */
static void direct_leave(loomComm_t comm, loomResult_t res, int intact, int caller_rank) {
  if (res != loomSuccess && res != loomInvalidArgument && !intact &&
      atomic_load_explicit(&comm->async_error, memory_order_acquire) == loomSuccess)
    loom_comm_set_broken(comm, res);
  if (caller_rank != comm->rank)
    loom_log_set_rank(caller_rank);
  loom_oplock_unlock(&comm->op_lock);
}

/* One call, not a send or receive (the path of every blocking collective):
 * posted and waited for here, without the batch's bookkeeping. */
loomResult_t loom_execute_single(loomComm_t comm, const struct loom_call *c) {
  int caller_rank = direct_enter(comm);
  struct loom_posted p;
  p.trace_id = 0;
  loomResult_t res = loom_comm_check_usable(comm, loom_coll_name(c->coll));
  if (res == loomSuccess)
    res = loom_execute_ensure_steps(comm, LOOM_SCHED_MAX_STEPS(comm->nranks));
  if (res == loomSuccess && (res = loom_post_call(comm, c, c->coll, &p)) == loomSuccess)
    res = loom_engine_wait(&comm->engine);
  uint64_t trace_id = c->trace_id != 0 ? c->trace_id : p.trace_id;
  if (trace_id == 0 && c->trace_at_plan && res != loomSuccess)
    trace_id = loom_call_trace_run(c, NULL); /* it failed before it was planned */
  if (trace_id != 0)
    loom_trace_ended(comm->trace, trace_id, res, comm->engine.blamed, comm->engine.waited);
  direct_leave(comm, res, 0, caller_rank);
  return res;
}

loomResult_t loom_execute_sendrecv(loomComm_t comm, struct loom_call *calls, int n) {
  if (n < 1 || n > LOOM_P2P_INLINE)
    return loom_error(loomInternalError, LOOM_LOG_COLL, "rank %d: %d sends and receives run "
                      "directly (1 to %d)", comm->rank, n, LOOM_P2P_INLINE);
  int caller_rank = direct_enter(comm);
  int idx[LOOM_P2P_INLINE];
  for (int i = 0; i < n; i++)
    idx[i] = i;
  struct loom_posted p;
  p.user_bufs = NULL; /* set once the calls are recorded started */
  loomResult_t res = loom_comm_check_usable(comm, loom_coll_name(LOOM_COLL_SENDRECV));
  if (res == loomSuccess) /* every send to itself has its receive, before anything moves */
    res = loom_self_exchange(comm, calls, idx, n, 0);
  int posted = res == loomSuccess &&
               (res = loom_post_sendrecv(comm, calls, idx, n, &p)) == loomSuccess;
  if (posted)
    res = loom_engine_wait(&comm->engine);
  if (p.user_bufs == NULL && res != loomSuccess) /* failed before they were posted */
    loom_p2p_trace_started(comm, calls, idx, n);
  /* the calls share one task and its times: a small one's end is its start
   * unless the task waited long (the next call's reading is later) */
  if (p.user_bufs != NULL || res != loomSuccess)
    loom_p2p_trace_ended(comm, calls, idx, n, res, comm->engine.waited);
  loom_posted_release(&p);
  direct_leave(comm, res, posted && loom_engine_left_intact(&comm->engine), caller_rank);
  return res;
}

int loom_execute_is_single(const struct loom_call *c) {
  return c->coll != LOOM_COLL_SENDRECV && !loom_ipc_wants(c);
}

loomResult_t loom_execute(loomComm_t comm, struct loom_call *calls, int ncalls) {
  if (ncalls == 1 && loom_execute_is_single(&calls[0]))
    return loom_execute_single(comm, &calls[0]);
  loom_calls_trace_queued(calls, ncalls);
  struct loom_batch b;
  b.comm = comm;
  b.calls = calls;
  b.ncalls = ncalls;
  b.counted = 0;
  return loom_execute_batches(&b, 1);
}

/* ---- streams ---- */

struct batch_task {
  struct loom_task task;
  loomComm_t comm;
  struct loom_call *calls;
  int ncalls;
};

static loomResult_t batch_run(struct loom_task *t) {
  struct batch_task *b = (struct batch_task *)t;
  return loom_execute(b->comm, b->calls, b->ncalls);
}

static void batch_release(struct loom_task *t) {
  struct batch_task *b = (struct batch_task *)t;
  for (int i = 0; i < b->ncalls; i++)
    loom_call_free(&b->calls[i]);
  free(b->calls);
  loom_comm_task_end(b->comm);
  free(b);
}

loomResult_t loom_execute_async(loomComm_t comm, loomStream_t stream, struct loom_call *calls,
                                int ncalls) {
  struct batch_task *b = malloc(sizeof *b);
  if (b == NULL) {
    for (int i = 0; i < ncalls; i++)
      loom_call_free(&calls[i]);
    free(calls);
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory queueing a call");
  }
  *b = (struct batch_task){.task = {.run = batch_run, .release = batch_release},
                           .comm = comm,
                           .calls = calls,
                           .ncalls = ncalls};
  loom_comm_task_begin(comm);
  struct loom_stage st = {0};
  loomResult_t res = loom_stage_calls(&st, calls, ncalls);
  if (res != loomSuccess) {
    loom_stage_free(&st);
    batch_release(&b->task);
    return res;
  }
  return loom_stream_submit_staged(stream, &b->task, &st);
}
