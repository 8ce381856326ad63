/*
 * execute.c — runs recorded calls on a communicator: plans each call's
 * schedule, prepares its buffers (premultiplied copies, scratch) and hands
 * it to the engine.  Sends and receives of one batch become one schedule,
 * so any order of them completes.
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/config.h"
#include "core/error.h"
#include "device/reduce.h"
#include "engine/fingerprint.h"

#include <stdlib.h>
#include <string.h>

static loomResult_t ensure_steps(loomComm_t comm, int nsteps) {
  if (nsteps <= comm->sched_cap)
    return loomSuccess;
  struct loom_step *steps = realloc(comm->sched_steps, sizeof *steps * (size_t)nsteps);
  if (steps == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (schedule of %d steps)",
                      nsteps);
  comm->sched_steps = steps;
  comm->sched_cap = nsteps;
  return loomSuccess;
}

static int is_rooted(enum loom_coll coll) {
  return coll == LOOM_COLL_BROADCAST || coll == LOOM_COLL_REDUCE ||
         coll == LOOM_COLL_GATHER || coll == LOOM_COLL_SCATTER;
}

static int is_reduction(enum loom_coll coll) {
  return coll == LOOM_COLL_ALLREDUCE || coll == LOOM_COLL_REDUCE ||
         coll == LOOM_COLL_REDUCESCATTER;
}

/* The all-to-all of `count` per peer as all-to-all-v arrays. */
static size_t *alltoall_arrays(int n, size_t count) {
  size_t *v = malloc(4 * (size_t)n * sizeof(size_t));
  if (v == NULL)
    return NULL;
  for (int j = 0; j < n; j++) {
    v[j] = v[2 * n + j] = count;
    v[n + j] = v[3 * n + j] = (size_t)j * count;
  }
  return v;
}

/* Runs call c; fp_coll names it in the fingerprint (c->coll, or the
 * communicator call a barrier stands for). */
static loomResult_t execute_call(loomComm_t comm, const struct loom_call *c, int fp_coll) {
  int n = comm->nranks;
  unsigned seq = comm->coll_seq++; /* every rank counts every collective, even empty ones */
  loomDataType_t dt = c->datatype;
  const void *sendbuff = c->sendbuff;
  void *recvbuff = c->recvbuff;
  size_t count = c->count;
  unsigned char barrier_byte = 0;
  if (c->coll == LOOM_COLL_BARRIER) { /* a one-byte all-reduce */
    dt = loomUint8;
    count = 1;
    sendbuff = recvbuff = &barrier_byte;
  }
  /* count 0 still runs: its agreement pass (sched/agree.c) makes a rank
   * whose peers called with a count fail instead of returning at once. */
  size_t esize = loom_datatype_size(dt);
  loomRedOp_t op = is_reduction(c->coll) ? c->base_op : loomMax;
  if (is_reduction(c->coll) && c->premul) { /* PreMulSum: reduce a premultiplied copy */
    size_t elems = c->coll == LOOM_COLL_REDUCESCATTER ? count * (size_t)n : count;
    LOOM_CHECK(loom_comm_grow(&comm->premul, &comm->premul_bytes, elems * esize));
    loom_premul(comm->premul, sendbuff, elems, dt, c->scalar);
    sendbuff = comm->premul;
  }
  enum loom_coll coll = c->coll == LOOM_COLL_BARRIER ? LOOM_COLL_ALLREDUCE : c->coll;
  struct loom_plan_args pa = {coll,    comm->rank,
                              n,       c->root,
                              count,   esize,
                              comm->algo[coll],
                              comm->topo.nnodes > 0 ? &comm->topo : NULL,
                              comm->tune.nentries > 0 ? &comm->tune : NULL,
                              NULL,    NULL,
                              NULL,    NULL,
                              comm->proto[coll],
                              comm->engine.chunk_bytes,
                              comm->nchannels};
  size_t *v = c->v, *owned = NULL;
  if (c->coll == LOOM_COLL_ALLTOALL) {
    v = owned = alltoall_arrays(n, count);
    if (v == NULL)
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (all-to-all)");
    pa.coll = LOOM_COLL_ALLTOALLV;
  }
  if (v != NULL) {
    pa.sendcounts = v;
    pa.sdispls = v + n;
    pa.recvcounts = v + 2 * n;
    pa.rdispls = v + 3 * n;
  }
  struct loom_schedule s = {0, comm->sched_cap, comm->sched_steps, {0, 0, 0, 0, 0}, 0, {0, 0, 0, 0}, 0};
  const char *algo = loom_plan(&pa, &s);
  free(owned);
  if (algo == NULL)
    return loom_error(loomInternalError, LOOM_LOG_COLL,
                      "rank %d: %s: the schedule does not fit in %d steps", comm->rank,
                      loom_coll_name(c->coll), comm->sched_cap);
  LOOM_CHECK(loom_comm_grow(&comm->scratch, &comm->scratch_bytes, s.scratch_count * esize));
  void *bufs[3] = {(void *)sendbuff, recvbuff, comm->scratch};
  struct loom_engine_op eop = {loom_coll_name(c->coll), &s, bufs, 3, dt, op, {0, 0}};
  loom_fp_make(eop.fp, fp_coll, dt,
               is_reduction(c->coll) ? (c->op < loomNumOps ? (int)c->op : (int)loomNumOps)
                                     : LOOM_FP_NO_OP,
               is_rooted(c->coll) ? c->root : LOOM_FP_NO_ROOT,
               c->coll == LOOM_COLL_ALLTOALLV || c->coll == LOOM_COLL_BARRIER ? 0 : count, seq);
  LOOM_TRACE(LOOM_LOG_COLL, "%s count %zu %s: %s%s, %d steps", eop.name, count,
             loom_datatype_name(dt), algo, s.slice_bytes != 0 ? " (LL)" : "", s.nsteps);
  return loom_engine_run(&comm->engine, &eop);
}

loomResult_t loom_execute_one(loomComm_t comm, const struct loom_call *c) {
  return execute_call(comm, c, c->coll);
}

loomResult_t loom_execute_fence(loomComm_t comm, int fp_kind) {
  struct loom_call c = {.coll = LOOM_COLL_BARRIER, .comm = comm, .datatype = loomUint8,
                        .op = loomMax, .base_op = loomMax, .root = -1};
  return execute_call(comm, &c, fp_kind);
}

/* Sends and receives to/from this rank itself, matched in order: checks
 * them (copy == 0) or does the copies (copy == 1). */
static loomResult_t self_exchange(loomComm_t comm, struct loom_call *calls, const int *idx,
                                  int m, int copy) {
  int si = 0, ri = 0;
  for (;;) {
    while (si < m && !(calls[idx[si]].is_send && calls[idx[si]].root == comm->rank))
      si++;
    while (ri < m && !(!calls[idx[ri]].is_send && calls[idx[ri]].root == comm->rank))
      ri++;
    if (si == m && ri == m)
      return loomSuccess;
    if (si == m || ri == m)
      return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                        "rank %d: a %s to itself has no matching %s in the same group",
                        comm->rank, si < m ? "loomSend" : "loomRecv",
                        si < m ? "loomRecv" : "loomSend");
    const struct loom_call *snd = &calls[idx[si]], *rcv = &calls[idx[ri]];
    size_t sbytes = snd->count * loom_datatype_size(snd->datatype);
    size_t rbytes = rcv->count * loom_datatype_size(rcv->datatype);
    if (sbytes != rbytes)
      return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                        "rank %d: loomSend of %zu bytes to itself meets a loomRecv of %zu "
                        "bytes",
                        comm->rank, sbytes, rbytes);
    if (copy && snd->sendbuff != rcv->recvbuff)
      memmove(rcv->recvbuff, snd->sendbuff, sbytes);
    si++;
    ri++;
  }
}

/* One schedule for all sends and receives: a step per call, in issue
 * order, data counted in bytes. */
static loomResult_t run_sendrecv(loomComm_t comm, struct loom_call *calls, const int *idx,
                                 int m) {
  LOOM_CHECK(self_exchange(comm, calls, idx, m, 1));
  LOOM_CHECK(ensure_steps(comm, m));
  void **bufs = malloc(sizeof(void *) * (size_t)(LOOM_BUF_USER + m));
  if (bufs == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (send/recv batch)");
  bufs[LOOM_BUF_SEND] = bufs[LOOM_BUF_RECV] = bufs[LOOM_BUF_SCRATCH] = NULL;
  struct loom_schedule s = {0, comm->sched_cap, comm->sched_steps, {0, 0, 0, 0, 0}, 0, {0, 0, 0, 0}, 0};
  for (int j = 0; j < m; j++) {
    const struct loom_call *c = &calls[idx[j]];
    size_t bytes = c->count * loom_datatype_size(c->datatype);
    bufs[LOOM_BUF_USER + j] = c->is_send ? (void *)c->sendbuff : c->recvbuff;
    if (c->root == comm->rank || bytes == 0)
      continue;
    struct loom_step *p = loom_sched_add(&s);
    if (c->is_send) {
      p->send_peer = c->root;
      p->send_buf = LOOM_BUF_USER + j;
      p->send_count = bytes;
    } else {
      p->recv_peer = c->root;
      p->recv_op = LOOM_RECV_COPY;
      p->recv_buf = LOOM_BUF_USER + j;
      p->recv_count = bytes;
    }
  }
  struct loom_engine_op eop = {"send/recv", &s,    bufs,   LOOM_BUF_USER + m,
                               loomUint8,   loomSum, {0, 0}};
  loom_fp_make(eop.fp, LOOM_COLL_SENDRECV, loomUint8, LOOM_FP_NO_OP, LOOM_FP_NO_ROOT, 0, 0);
  loomResult_t res = loom_engine_run(&comm->engine, &eop);
  free(bufs);
  return res;
}

static loomResult_t execute_locked(loomComm_t comm, struct loom_call *calls, int ncalls) {
  LOOM_CHECK(loom_comm_check_usable(comm, loom_coll_name(calls[0].coll)));
  LOOM_CHECK(ensure_steps(comm, LOOM_SCHED_MAX_STEPS(comm->nranks)));
  int *p2p = NULL, np2p = 0;
  for (int i = 0; i < ncalls; i++)
    np2p += calls[i].coll == LOOM_COLL_SENDRECV;
  if (np2p > 0 && (p2p = calloc((size_t)np2p, sizeof(int))) == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory");
  np2p = 0;
  for (int i = 0; i < ncalls && p2p != NULL; i++)
    if (calls[i].coll == LOOM_COLL_SENDRECV)
      p2p[np2p++] = i;
  /* A send to itself without its receive is found before anything moves. */
  loomResult_t res = self_exchange(comm, calls, p2p, np2p, 0);
  for (int i = 0; i < ncalls && res == loomSuccess;) {
    if (calls[i].coll == LOOM_COLL_SENDRECV) {
      i++;
      continue;
    }
    int span = ncalls - i > 1 ? loom_bucket_span(calls + i, ncalls - i, comm->bucket_bytes) : 1;
    res = span > 1 ? loom_bucket_run(comm, calls + i, span) : loom_execute_one(comm, &calls[i]);
    i += span;
  }
  if (res == loomSuccess && np2p > 0)
    res = run_sendrecv(comm, calls, p2p, np2p);
  free(p2p);
  return res;
}

loomResult_t loom_execute(loomComm_t comm, struct loom_call *calls, int ncalls) {
  pthread_mutex_lock(&comm->op_lock);
  int caller_rank = loom_log_get_rank();
  if (caller_rank != comm->rank)
    loom_log_set_rank(comm->rank);
  loomResult_t res = execute_locked(comm, calls, ncalls);
  /* An argument error found this late (a custom op destroyed while queued)
   * leaves the communicator usable; anything else broke it. */
  if (res != loomSuccess && res != loomInvalidArgument && comm->async_error == loomSuccess)
    loom_comm_set_broken(comm, res);
  if (caller_rank != comm->rank)
    loom_log_set_rank(caller_rank);
  pthread_mutex_unlock(&comm->op_lock);
  return res;
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
  b->task.run = batch_run;
  b->task.release = batch_release;
  b->task.next = NULL;
  b->comm = comm;
  b->calls = calls;
  b->ncalls = ncalls;
  loom_comm_task_begin(comm);
  return loom_stream_submit(stream, &b->task);
}
