/*
 * execute.c — turns a call into an engine task: plans its schedule,
 * prepares its buffers (premultiplied copies, scratch) and posts it on the
 * communicator's engine.  Sends and receives of one batch become one
 * schedule, so any order of them completes.  batch.c runs a
 * communicator's calls one task after another.
 */
#include "api/comm.h"
#include "api/task.h"
#include "api/comm_trace.h"
#include "core/config.h"
#include "core/error.h"
#include "device/reduce.h"
#include "engine/fingerprint.h"

#include <stdlib.h>
#include <string.h>

loomResult_t loom_execute_ensure_steps(loomComm_t comm, int nsteps) {
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

/* The plan arguments of call c (all-to-all-v arrays set by the caller). */
static struct loom_plan_args plan_args(loomComm_t comm, enum loom_coll coll, int root,
                                       size_t count, size_t esize) {
  return (struct loom_plan_args){
      .coll = coll,
      .rank = comm->rank,
      .nranks = comm->nranks,
      .root = root,
      .count = count,
      .elem_size = esize,
      .allowed = comm->algo[coll],
      .topo = comm->topo.nnodes > 0 ? &comm->topo : NULL,
      .tune = comm->tune.nentries > 0 ? &comm->tune : NULL,
      .links = &comm->links,
      .proto_allowed = comm->proto[coll],
      .chunk_bytes = comm->engine.chunk_bytes,
      .nchannels = comm->nchannels,
  };
}

/* The flight recorder's plan for a call planned as p (its algorithm
 * algo): the one kept for the cache entry `note` (NULL: not cached), kept
 * in the recorder when the entry has none there yet. */
static void trace_plan(loomComm_t comm, uint64_t *note, const char *algo, size_t esize,
                       struct loom_posted *p) {
  struct loom_trace *t = comm->trace;
  p->trace_plan = 0;
  if (t == NULL)
    return;
  if (note != NULL && *note != 0 && loom_trace_plan_kept(t, *note)) {
    p->trace_plan = *note;
    return;
  }
  p->trace_plan = loom_trace_plan_add(t, algo, p->sched.slice_bytes != 0, &p->sched, esize, NULL);
  if (note != NULL)
    *note = p->trace_plan;
}

/* Plans call c into p->sched, or takes the schedule of the same shape
 * from the cache; returns the algorithm's name, NULL on failure
 * (reported).  Sets p->trace_plan for the flight recorder. */
static const char *plan_call(loomComm_t comm, const struct loom_call *c, enum loom_coll coll,
                             size_t count, size_t esize, struct loom_posted *p) {
  int n = comm->nranks;
  loom_sched_init(&p->sched, comm->sched_steps, comm->sched_cap);
  struct loom_plan_key key = loom_plan_key_make(coll, c->root, count, esize);
  int cacheable = c->v == NULL && c->coll != LOOM_COLL_ALLTOALL;
  uint64_t *note = NULL;
  const char *cached =
      cacheable ? loom_plan_cache_get(&comm->plans, &key, &p->sched, &note) : NULL;
  if (cached != NULL) {
    trace_plan(comm, note, cached, esize, p);
    return cached;
  }
  struct loom_plan_args pa = plan_args(comm, coll, c->root, count, esize);
  size_t *v = c->v, *owned = NULL;
  if (c->coll == LOOM_COLL_ALLTOALL) {
    v = owned = alltoall_arrays(n, count);
    if (v == NULL) {
      loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (all-to-all)");
      return NULL;
    }
    pa.coll = LOOM_COLL_ALLTOALLV;
  }
  if (v != NULL) {
    pa.sendcounts = v;
    pa.sdispls = v + n;
    pa.recvcounts = v + 2 * n;
    pa.rdispls = v + 3 * n;
  }
  const char *algo = loom_plan(&pa, &p->sched);
  free(owned);
  if (algo == NULL) {
    loom_error(loomInternalError, LOOM_LOG_COLL, "rank %d: %s: the schedule does not fit in %d steps",
               comm->rank, loom_coll_name(c->coll), comm->sched_cap);
    return NULL;
  }
  if (cacheable)
    note = loom_plan_cache_put(&comm->plans, &key, algo, &p->sched);
  trace_plan(comm, note, algo, esize, p);
  return algo;
}

loomResult_t loom_post_call(loomComm_t comm, const struct loom_call *c, int fp_coll,
                            struct loom_posted *p) {
  int n = comm->nranks;
  p->trace_id = 0;
  unsigned seq = comm->coll_seq++; /* every rank counts every collective, even empty ones */
  loomDataType_t dt = c->datatype;
  const void *sendbuff = c->sendbuff;
  void *recvbuff = c->recvbuff;
  size_t count = c->count;
  if (c->coll == LOOM_COLL_BARRIER) { /* a one-byte all-reduce */
    dt = loomUint8;
    count = 1;
    p->barrier_byte = 0;
    sendbuff = recvbuff = &p->barrier_byte;
  }
  /* count 0 still runs: its agreement pass (sched/agree.c) makes a rank
   * whose peers called with a count fail instead of returning at once. */
  size_t esize = loom_datatype_size(dt);
  int reduction = loom_coll_reduces(c->coll);
  if (reduction && c->premul) { /* PreMulSum: reduce a premultiplied copy */
    size_t elems = c->coll == LOOM_COLL_REDUCESCATTER ? count * (size_t)n : count;
    LOOM_CHECK(loom_comm_grow(&comm->premul, &comm->premul_bytes, elems * esize));
    loom_premul(comm->premul, sendbuff, elems, dt, c->scalar);
    sendbuff = comm->premul;
  }
  enum loom_coll coll = c->coll == LOOM_COLL_BARRIER ? LOOM_COLL_ALLREDUCE : c->coll;
  const char *algo = plan_call(comm, c, coll, count, esize, p);
  if (algo == NULL)
    return loomInternalError;
  LOOM_CHECK(loom_comm_grow(&comm->scratch, &comm->scratch_bytes, p->sched.scratch_count * esize));
  p->bufs[LOOM_BUF_SEND] = (void *)sendbuff;
  p->bufs[LOOM_BUF_RECV] = recvbuff;
  p->bufs[LOOM_BUF_SCRATCH] = comm->scratch;
  p->eop = (struct loom_engine_op){.name = fp_coll == LOOM_FP_DEVICE_IPC
                                               ? "collective through device IPC"
                                           : fp_coll == LOOM_FP_HOST_IPC
                                               ? "collective through host IPC"
                                               : loom_coll_name(c->coll),
                                   .sched = &p->sched,
                                   .bufs = p->bufs,
                                   .nbufs = 3,
                                   .datatype = dt,
                                   .op = reduction ? c->base_op : loomMax};
  loom_fp_make(p->eop.fp, fp_coll, dt,
               reduction ? (c->op < loomNumOps ? (int)c->op : (int)loomNumOps) : LOOM_FP_NO_OP,
               is_rooted(c->coll) ? c->root : LOOM_FP_NO_ROOT,
               c->coll == LOOM_COLL_ALLTOALLV || c->coll == LOOM_COLL_BARRIER ? 0 : count, seq);
  LOOM_TRACE(LOOM_LOG_COLL, "%s count %zu %s: %s%s, %d steps", p->eop.name, count,
             loom_datatype_name(dt), algo, p->sched.slice_bytes != 0 ? " (LL)" : "",
             p->sched.nsteps);
  p->algo = algo;
  if (c->trace_at_plan) /* (a bucket's calls are marked by batch.c) */
    p->trace_id = loom_call_trace_run(c, p);
  else if (c->trace_id != 0)
    loom_calls_trace_started(comm, c, 1, p);
  return loom_engine_post(&comm->engine, &p->eop);
}

loomResult_t loom_post_fence(loomComm_t comm, int fp_kind, struct loom_posted *p) {
  struct loom_call c = {.coll = LOOM_COLL_BARRIER, .comm = comm, .datatype = loomUint8,
                        .op = loomMax, .base_op = loomMax, .root = -1};
  return loom_post_call(comm, &c, fp_kind, p);
}

loomResult_t loom_execute_fence(loomComm_t comm, int fp_kind) {
  struct loom_posted p;
  LOOM_CHECK(loom_post_fence(comm, fp_kind, &p));
  return loom_engine_wait(&comm->engine);
}

loomResult_t loom_self_exchange(loomComm_t comm, const struct loom_call *calls, const int *idx,
                                int m, int copy) {
  int self = 0; /* the usual group has none: one pass says so */
  for (int j = 0; j < m; j++)
    self |= calls[idx[j]].root == comm->rank;
  if (!self)
    return loomSuccess;
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

loomResult_t loom_post_sendrecv(loomComm_t comm, struct loom_call *calls, const int *idx, int m,
                                struct loom_posted *p) {
  LOOM_CHECK(loom_self_exchange(comm, calls, idx, m, 1));
  LOOM_CHECK(loom_execute_ensure_steps(comm, m));
  void **bufs = m <= LOOM_P2P_INLINE ? p->user_inline
                                     : malloc(sizeof(void *) * (size_t)(LOOM_BUF_USER + m));
  if (bufs == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (send/recv batch)");
  bufs[LOOM_BUF_SEND] = bufs[LOOM_BUF_RECV] = bufs[LOOM_BUF_SCRATCH] = NULL;
  p->user_bufs = bufs;
  loom_sched_init(&p->sched, comm->sched_steps, comm->sched_cap);
  struct loom_step *any_step = NULL;
  int *source = NULL;
  for (int j = 0; j < m; j++) {
    const struct loom_call *c = &calls[idx[j]];
    size_t bytes = c->count * loom_datatype_size(c->datatype);
    bufs[LOOM_BUF_USER + j] = c->is_send ? (void *)c->sendbuff : c->recvbuff;
    if (c->root == comm->rank || bytes == 0)
      continue;
    struct loom_step *st = loom_sched_add(&p->sched);
    if (c->is_send) {
      st->send_peer = c->root;
      st->send_buf = LOOM_BUF_USER + j;
      st->send_count = bytes;
    } else {
      st->recv_peer = c->root;
      st->recv_op = LOOM_RECV_COPY;
      st->recv_buf = LOOM_BUF_USER + j;
      st->recv_count = bytes;
      if (c->root == LOOM_PEER_ANY) { /* alone in its batch (group.c) */
        any_step = st;
        source = c->source;
      }
    }
  }
  p->eop = (struct loom_engine_op){.name = any_step != NULL ? "recv" : "send/recv",
                                   .sched = &p->sched,
                                   .bufs = bufs,
                                   .nbufs = LOOM_BUF_USER + m,
                                   .datatype = loomUint8,
                                   .op = loomSum,
                                   .any_step = any_step,
                                   .source = source};
  loom_fp_make(p->eop.fp, LOOM_COLL_SENDRECV, loomUint8, LOOM_FP_NO_OP, LOOM_FP_NO_ROOT, 0, 0);
  p->algo = "p2p";
  p->trace_plan = 0; /* each call its own (loom_p2p_trace_started) */
  loom_p2p_trace_started(comm, calls, idx, m);
  return loom_engine_post(&comm->engine, &p->eop);
}

void loom_posted_release(struct loom_posted *p) {
  if (p->user_bufs != p->user_inline)
    free(p->user_bufs);
  p->user_bufs = NULL;
}
