/*
 * group.c — issuing calls: at once, on a stream, or recorded between
 * loomGroupStart and loomGroupEnd.  The group state is per thread.  At the
 * outermost loomGroupEnd a few sends and receives of one communicator on
 * host buffers run directly (batch.c); other groups' calls are split by
 * communicator, and each communicator's calls run as one batch
 * (execute.c), queued on their stream or, without one, run to completion
 * here.  The batches of several communicators run together on one thread
 * (the engine drives all their tasks at once), so that one thread can
 * drive every rank of a loomCommInitAll clique.
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/error.h"
#include "device/stage.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* initial-exec: read on every call (see log.c) */
#define GROUP_TLS __thread __attribute__((tls_model("initial-exec")))
static GROUP_TLS int group_depth;
static GROUP_TLS struct loom_call *group_calls;
static GROUP_TLS int group_n, group_cap;
/* The array of the thread's last group run directly, kept for its next
 * group: a send/receive pair then allocates nothing (with the self
 * exchange's skipped pairing, 0.945x the time of a 2-rank 8 B pair;
 * docs/performance.md).  Freed when the thread exits. */
static GROUP_TLS struct loom_call *group_spare;
static GROUP_TLS int group_spare_cap, group_spare_keyed;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_key_made;

static void spare_free(void *unused) {
  free(group_spare);
  group_spare = NULL;
  group_spare_keyed = 0; /* a group run by a later destructor keys it again */
}

static void spare_key_make(void) {
  spare_key_made = pthread_key_create(&spare_key, spare_free) == 0;
}

/* Unloaded (dlclose): no thread may call spare_free once its code is gone
 * (the spares of threads still running are left to them). */
__attribute__((destructor)) static void spare_key_drop(void) {
  if (spare_key_made)
    pthread_key_delete(spare_key);
}

/* Keeps calls (room for cap) as the thread's spare, or frees it. */
static void spare_keep(struct loom_call *calls, int cap) {
  if (!group_spare_keyed) { /* its key's destructor frees it at thread exit */
    pthread_once(&spare_once, spare_key_make);
    group_spare_keyed =
        spare_key_made && pthread_setspecific(spare_key, &group_spare_keyed) == 0;
  }
  if (group_spare != NULL || !group_spare_keyed) {
    free(calls);
    return;
  }
  group_spare = calls;
  group_spare_cap = cap;
}

/* Room for one more call in the group's array. */
static int group_grow(void) {
  if (group_cap == 0 && group_spare != NULL) {
    group_calls = group_spare;
    group_cap = group_spare_cap;
    group_spare = NULL;
    return 1;
  }
  /* small first: up to 4 calls (a send and a receive, a few buckets)
   * come from malloc's per-thread cache, where a "large" request of
   * 1 KiB or more makes it consolidate its fast bins first (9 % of a
   * 2-rank 8 B send/receive group with room for 64) */
  int cap = group_cap ? 2 * group_cap : 4;
  struct loom_call *calls = realloc(group_calls, sizeof *calls * (size_t)cap);
  if (calls == NULL)
    return 0;
  group_calls = calls;
  group_cap = cap;
  return 1;
}

loomResult_t loom_issue(struct loom_call *c, const char *fn) {
  if (c->coll == LOOM_COLL_SENDRECV && c->root == c->comm->rank && group_depth == 0) {
    loom_call_free(c);
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: peer %d is this rank: sending to or receiving from itself needs "
                      "the matching call in the same loomGroupStart/End",
                      fn, c->root);
  }
  if (c->coll == LOOM_COLL_SENDRECV && c->root == LOOM_PEER_ANY && group_depth > 0) {
    loom_call_free(c);
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: a receive from any rank cannot be part of a loomGroupStart/End "
                      "group (its sender must be known before the group's other calls run); "
                      "call it outside the group",
                      fn);
  }
  /* A call run here and now on host buffers, with nothing queued before it,
   * is recorded once planned, in one pass (execute.c), and so is a call of
   * a group, at loomGroupEnd (where NCCL's group issues its calls); the
   * others now, as queued. */
  c->trace_at_plan = group_depth > 0 ||
                     (c->stream == NULL && c->device == loomDeviceHost &&
                      atomic_load_explicit(&c->comm->inflight, memory_order_relaxed) == 0);
  if (c->trace_at_plan)
    c->trace_id = 0;
  else
    loom_call_trace(c);
  if (group_depth > 0) {
    if (group_n == group_cap && !group_grow()) {
      loom_call_free(c);
      return loom_error(loomSystemError, LOOM_LOG_COLL, "%s: out of memory recording the "
                                                        "call in the group", fn);
    }
    group_calls[group_n++] = *c;
    return loomSuccess;
  }
  if (c->stream != NULL) {
    struct loom_call *one = malloc(sizeof *one);
    if (one == NULL) {
      loom_call_free(c);
      return loom_error(loomSystemError, LOOM_LOG_COLL, "%s: out of memory", fn);
    }
    *one = *c;
    return loom_execute_async(c->comm, c->stream, one, 1);
  }
  /* Without a stream the call follows the communicator's queued work (as
   * CUDA's legacy default stream does), so every rank runs its calls in
   * issue order and their fingerprints carry the same call numbers. */
  loom_comm_wait_tasks(c->comm);
  loomResult_t res;
  if (c->device == loomDeviceHost && loom_execute_is_single(c)) {
    /* Abort and Destroy take op_lock after waiting for the counted tasks,
     * and this call holds it for as long as it uses the communicator: it
     * needs no count, whose two atomic operations were 15 % of a one-rank
     * 8-byte all-reduce. */
    res = loom_execute_single(c->comm, c);
  } else if (c->device == loomDeviceHost && c->coll == LOOM_COLL_SENDRECV &&
             c->root != LOOM_PEER_ANY) {
    res = loom_execute_sendrecv(c->comm, c, 1); /* likewise */
  } else {
    loom_comm_task_begin(c->comm); /* Abort waits for it to leave */
    res = c->device == loomDeviceHost ? loom_execute(c->comm, c, 1)
                                      : loom_execute_staged(c->comm, c, 1);
    loom_comm_task_end(c->comm);
  }
  loom_call_free(c);
  return res;
}

loomResult_t loomGroupStart(void) {
  group_depth++;
  return loomSuccess;
}

/* One communicator's share of a group. */
struct batch {
  loomComm_t comm;
  loomStream_t stream;
  struct loom_call *calls;
  int ncalls;
  int counted; /* holds one of comm's in-flight counts until it has run */
};

/* Several communicators' batches sharing one stream: one task that runs
 * them together, as a group without a stream would. */
struct shared_stream_task {
  struct loom_task task;
  struct batch *bs;
  int nb;
};

/* Batches run_together keeps on the stack: a group of one or two
 * communicators (the usual) allocates none.  A struct loom_batch is 1.4
 * KiB, a "large" request to glibc's malloc, which first consolidates its
 * fast bins: 12 % of a 2-rank 8 B send/receive group in perf. */
#define GROUP_STACK_BATCHES 2

/* Runs the batches together on this thread (loom_execute_batches); each
 * releases its in-flight count as soon as it has run. */
static loomResult_t run_together(struct batch *bs, int nb) {
  struct loom_batch on_stack[GROUP_STACK_BATCHES];
  struct loom_batch *run = nb <= GROUP_STACK_BATCHES ? on_stack : calloc((size_t)nb, sizeof *run);
  if (run == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "loomGroupEnd: out of memory");
  for (int b = 0; b < nb; b++) {
    /* all but the error text, 1 KiB, which is written where it is set */
    memset(&run[b], 0, offsetof(struct loom_batch, error));
    run[b].error[0] = '\0';
    run[b].comm = bs[b].comm;
    run[b].calls = bs[b].calls;
    run[b].ncalls = bs[b].ncalls;
    run[b].counted = bs[b].counted;
    bs[b].counted = 0; /* released by the run */
  }
  loomResult_t res = loom_execute_batches(run, nb);
  if (run != on_stack)
    free(run);
  return res;
}

/* run_together with the batches' device buffers staged through host
 * memory around it. */
static loomResult_t run_together_staged(struct batch *bs, int nb) {
  struct loom_stage st = {0};
  loomResult_t res = loomSuccess;
  for (int b = 0; b < nb && res == loomSuccess; b++)
    res = loom_stage_calls(&st, bs[b].calls, bs[b].ncalls);
  if (res == loomSuccess && st.dev != NULL)
    res = loom_stage_run_sync(&st, 1);
  if (res == loomSuccess)
    res = run_together(bs, nb);
  if (res == loomSuccess && st.dev != NULL)
    res = loom_stage_run_sync(&st, 0);
  loom_stage_free(&st);
  return res;
}

static loomResult_t shared_run(struct loom_task *t) {
  struct shared_stream_task *g = (struct shared_stream_task *)t;
  return run_together(g->bs, g->nb);
}

static void shared_release(struct loom_task *t) {
  struct shared_stream_task *g = (struct shared_stream_task *)t;
  for (int b = 0; b < g->nb; b++) {
    for (int i = 0; i < g->bs[b].ncalls; i++)
      loom_call_free(&g->bs[b].calls[i]);
    free(g->bs[b].calls);
    if (g->bs[b].counted)
      loom_comm_task_end(g->bs[b].comm);
  }
  free(g->bs);
  free(g);
}

/* Queues the batches of bs[] that use `stream` (marking them taken).  */
static loomResult_t queue_stream(struct batch *bs, int nb, loomStream_t stream) {
  int n = 0;
  for (int b = 0; b < nb; b++)
    n += bs[b].stream == stream && bs[b].calls != NULL;
  if (n == 1)
    for (int b = 0; b < nb; b++)
      if (bs[b].stream == stream && bs[b].calls != NULL) {
        loomResult_t res = loom_execute_async(bs[b].comm, stream, bs[b].calls, bs[b].ncalls);
        bs[b].calls = NULL; /* owned by the stream task now */
        return res;
      }
  struct shared_stream_task *g = calloc(1, sizeof *g);
  struct batch *mine = g ? calloc((size_t)n, sizeof *mine) : NULL;
  for (int b = 0; b < nb; b++) {
    if (bs[b].stream != stream || bs[b].calls == NULL)
      continue;
    if (mine != NULL) {
      mine[g->nb] = bs[b];
      mine[g->nb++].counted = 1;
      loom_comm_task_begin(bs[b].comm);
    } else {
      for (int i = 0; i < bs[b].ncalls; i++)
        loom_call_free(&bs[b].calls[i]);
      free(bs[b].calls);
    }
    bs[b].calls = NULL;
  }
  if (mine == NULL) {
    free(g);
    return loom_error(loomSystemError, LOOM_LOG_COLL, "loomGroupEnd: out of memory");
  }
  g->bs = mine;
  g->task.run = shared_run;
  g->task.release = shared_release;
  struct loom_stage st = {0};
  loomResult_t res = loomSuccess;
  for (int b = 0; b < g->nb && res == loomSuccess; b++)
    res = loom_stage_calls(&st, g->bs[b].calls, g->bs[b].ncalls);
  if (res != loomSuccess) {
    loom_stage_free(&st);
    shared_release(&g->task);
    return res;
  }
  return loom_stream_submit_staged(stream, &g->task, &st);
}

/* Groups of up to this many calls split into batches on the stack. */
#define GROUP_STACK_CALLS 8

/* Splits the recorded calls by communicator, keeping issue order, into
 * `space` (room for n batches) or, when it is NULL, an allocated array
 * (the caller frees *out unless it is space).  When the calls are all of
 * one communicator (the usual group) its batch takes the array itself
 * (*took = 1: the caller must not free it); else each batch gets a copy
 * of its calls. */
static loomResult_t split_batches(struct loom_call *calls, int n, struct batch *space,
                                  struct batch **out, int *nbatches, int *took) {
  /* (gcc turns a malloc and a memset into calloc, which glibc serves
   * without its per-thread cache: a small group's batches are on the
   * caller's stack) */
  struct batch *bs = space != NULL ? space : calloc((size_t)n, sizeof *bs);
  int nb = 0;
  *took = 0;
  if (bs == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "loomGroupEnd: out of memory");
  if (space != NULL)
    memset(bs, 0, sizeof *bs * (size_t)n);
  int one = 1;
  for (int i = 1; i < n && one; i++)
    one = calls[i].comm == calls[0].comm;
  if (one) {
    bs[0] = (struct batch){.comm = calls[0].comm, .stream = calls[0].stream, .calls = calls,
                           .ncalls = n};
    *out = bs;
    *nbatches = 1;
    *took = 1;
    return loomSuccess;
  }
  for (int i = 0; i < n; i++) {
    int b = 0;
    while (b < nb && bs[b].comm != calls[i].comm)
      b++;
    if (b == nb) {
      bs[nb].comm = calls[i].comm;
      bs[nb].stream = calls[i].stream;
      bs[nb].calls = malloc(sizeof(struct loom_call) * (size_t)n);
      if (bs[nb++].calls == NULL) {
        for (int j = 0; j < nb; j++)
          free(bs[j].calls);
        if (bs != space)
          free(bs);
        return loom_error(loomSystemError, LOOM_LOG_COLL, "loomGroupEnd: out of memory");
      }
    }
    bs[b].calls[bs[b].ncalls++] = calls[i];
  }
  *out = bs;
  *nbatches = nb;
  return loomSuccess;
}

static loomResult_t check_streams(const struct batch *bs, int nb) {
  for (int b = 0; b < nb; b++)
    for (int i = 0; i < bs[b].ncalls; i++)
      if (bs[b].calls[i].stream != bs[b].stream)
        return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                          "loomGroupEnd: the calls of one communicator in a group must use "
                          "one stream (rank %d used two)",
                          bs[b].comm->rank);
  return loomSuccess;
}

static void free_calls(struct loom_call *calls, int n) {
  for (int i = 0; i < n; i++)
    loom_call_free(&calls[i]);
}

/* Whether a group runs directly (loom_execute_sendrecv): a few sends and
 * receives on host buffers, of one communicator, without a stream. */
static int runs_direct(const struct loom_call *calls, int n) {
  if (n > LOOM_P2P_INLINE)
    return 0;
  for (int i = 0; i < n; i++)
    if (calls[i].coll != LOOM_COLL_SENDRECV || calls[i].device != loomDeviceHost ||
        calls[i].root == LOOM_PEER_ANY || calls[i].comm != calls[0].comm ||
        calls[i].stream != NULL)
      return 0;
  return 1;
}

/* Runs such a group (and frees its calls); they are recorded started once
 * planned, or now, as queued, when they wait for queued work first. */
static loomResult_t run_direct(struct loom_call *calls, int n, int cap) {
  loomComm_t comm = calls[0].comm;
  if (atomic_load_explicit(&comm->inflight, memory_order_relaxed) != 0)
    loom_calls_trace_queued(calls, n);
  loom_comm_wait_tasks(comm); /* as a call outside a group */
  loomResult_t res = loom_execute_sendrecv(comm, calls, n);
  free_calls(calls, n);
  spare_keep(calls, cap);
  return res;
}

loomResult_t loomGroupEnd(void) {
  if (group_depth == 0)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "loomGroupEnd: no loomGroupStart is open on this thread");
  if (--group_depth > 0 || group_n == 0)
    return loomSuccess;
  struct loom_call *calls = group_calls;
  int n = group_n, cap = group_cap;
  group_calls = NULL;
  group_n = group_cap = 0;
  if (runs_direct(calls, n))
    return run_direct(calls, n, cap);
  struct batch *bs = NULL, small[GROUP_STACK_CALLS];
  struct batch *space = n <= GROUP_STACK_CALLS ? small : NULL;
  int nb = 0, took = 0;
  loomResult_t res = split_batches(calls, n, space, &bs, &nb, &took);
  if (res == loomSuccess && (res = check_streams(bs, nb)) != loomSuccess) {
    for (int b = 0; b < nb && !took; b++)
      free(bs[b].calls); /* copies of the entries of calls */
    if (bs != space)
      free(bs);
  }
  if (res != loomSuccess) {
    free_calls(calls, n);
    free(calls);
    return res;
  }
  for (int b = 0; b < nb; b++) /* in issue order within each communicator */
    loom_calls_trace_queued(bs[b].calls, bs[b].ncalls);
  if (!took)
    free(calls); /* the batches hold copies of its entries */
  /* Queue the stream batches; run the host batches in parallel. */
  res = loomSuccess;
  for (int b = 0; b < nb; b++)
    if (bs[b].stream != NULL && bs[b].calls != NULL) {
      loomResult_t qres = queue_stream(bs, nb, bs[b].stream);
      if (qres != loomSuccess && res == loomSuccess)
        res = qres;
    }
  const char *error = NULL;
  char qerror[1024];
  if (res != loomSuccess) {
    snprintf(qerror, sizeof qerror, "%s", loom_last_error());
    error = qerror;
  }
  int nhost = 0;
  for (int b = 0; b < nb; b++)
    if (bs[b].stream == NULL)
      bs[nhost++] = bs[b]; /* the stream batches' calls are owned by their tasks */
  for (int b = 0; b < nhost; b++) { /* as a call outside a group */
    loom_comm_wait_tasks(bs[b].comm);
    loom_comm_task_begin(bs[b].comm);
    bs[b].counted = 1;
  }
  if (nhost > 0) {
    loomResult_t hres = run_together_staged(bs, nhost);
    if (hres != loomSuccess && res == loomSuccess) {
      res = hres;
      error = NULL; /* run_together set the text */
    }
    for (int b = 0; b < nhost; b++) {
      free_calls(bs[b].calls, bs[b].ncalls);
      free(bs[b].calls);
      if (bs[b].counted) /* the run never took it (out of memory) */
        loom_comm_task_end(bs[b].comm);
    }
  }
  if (error != NULL)
    loom_set_last_error(error);
  if (bs != space)
    free(bs);
  return res;
}
