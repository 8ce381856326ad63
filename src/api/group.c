/*
 * group.c — issuing calls: at once, on a stream, or recorded between
 * loomGroupStart and loomGroupEnd.  The group state is per thread.  At the
 * outermost loomGroupEnd the recorded calls are split by communicator;
 * each communicator's calls run as one batch (execute.c), queued on their
 * stream or, without one, run to completion here.  Batches of several
 * communicators run in parallel threads, so that one thread can drive
 * every rank of a loomCommInitAll clique.
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static __thread int group_depth;
static __thread struct loom_call *group_calls;
static __thread int group_n, group_cap;

loomResult_t loom_issue(struct loom_call *c, const char *fn) {
  if (group_depth > 0) {
    if (group_n == group_cap) {
      int cap = group_cap ? 2 * group_cap : 64;
      struct loom_call *calls = realloc(group_calls, sizeof *calls * (size_t)cap);
      if (calls == NULL) {
        loom_call_free(c);
        return loom_error(loomSystemError, LOOM_LOG_COLL, "%s: out of memory recording the "
                                                          "call in the group", fn);
      }
      group_calls = calls;
      group_cap = cap;
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
  loomResult_t res = loom_execute(c->comm, c, 1);
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
  loomResult_t res;
  char error[1024]; /* the failure's text, from the thread that ran it */
  pthread_t thread;
  int threaded;
};

static void *batch_thread(void *arg) {
  struct batch *b = arg;
  b->res = loom_execute(b->comm, b->calls, b->ncalls);
  if (b->res != loomSuccess)
    strncpy(b->error, loom_last_error(), sizeof b->error - 1);
  return NULL;
}

/* Splits the recorded calls by communicator, keeping issue order. */
static loomResult_t split_batches(struct loom_call *calls, int n, struct batch **out,
                                  int *nbatches) {
  struct batch *bs = calloc((size_t)n, sizeof *bs);
  int nb = 0;
  if (bs == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "loomGroupEnd: out of memory");
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

loomResult_t loomGroupEnd(void) {
  if (group_depth == 0)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "loomGroupEnd: no loomGroupStart is open on this thread");
  if (--group_depth > 0 || group_n == 0)
    return loomSuccess;
  struct loom_call *calls = group_calls;
  int n = group_n;
  group_calls = NULL;
  group_n = group_cap = 0;
  struct batch *bs = NULL;
  int nb = 0;
  loomResult_t res = split_batches(calls, n, &bs, &nb);
  if (res == loomSuccess && (res = check_streams(bs, nb)) != loomSuccess) {
    free_calls(calls, n);
    for (int b = 0; b < nb; b++)
      free(bs[b].calls);
    free(bs);
  }
  if (res != loomSuccess) {
    free(calls);
    return res;
  }
  free(calls);
  /* Queue the stream batches; start a thread per extra host batch. */
  struct batch *here = NULL;
  for (int b = 0; b < nb; b++) {
    struct batch *x = &bs[b];
    if (x->stream != NULL) {
      x->res = loom_execute_async(x->comm, x->stream, x->calls, x->ncalls);
      x->calls = NULL; /* owned by the stream task now */
      if (x->res != loomSuccess)
        strncpy(x->error, loom_last_error(), sizeof x->error - 1);
    } else if (here == NULL) {
      here = x;
    } else if (pthread_create(&x->thread, NULL, batch_thread, x) == 0) {
      x->threaded = 1;
    } else {
      batch_thread(x); /* no thread: run it here (may wait on the others) */
    }
  }
  if (here != NULL)
    batch_thread(here);
  res = loomSuccess;
  const char *error = NULL;
  for (int b = 0; b < nb; b++) {
    if (bs[b].threaded)
      pthread_join(bs[b].thread, NULL);
    if (bs[b].calls != NULL) {
      free_calls(bs[b].calls, bs[b].ncalls);
      free(bs[b].calls);
    }
    if (bs[b].res != loomSuccess && res == loomSuccess) {
      res = bs[b].res;
      error = bs[b].error;
    }
  }
  if (error != NULL)
    loom_set_last_error(error);
  free(bs);
  return res;
}
