/*
 * stream.c — host streams: one worker thread per stream runs the queued
 * tasks in issue order, sleeping on a condition variable when idle.
 *
 * Progress is counted, not flagged: `submitted` and `completed` only grow,
 * so loomStreamSynchronize waits for the count at the time of its call and
 * is not held up by work that other threads queue afterwards.  A task
 * failing on the worker leaves its code and message as the stream's
 * pending error (the first one only), which the next synchronisation
 * hands to its caller.  loomLaunchHostFunc queues a user function that
 * sees that pending error as its last error, without collecting it.
 *
 * An idle worker polls for LOOM_SPIN_US microseconds (yielding the CPU)
 * before it sleeps: the next call of a caller issuing small calls one
 * after another then starts without a thread wake-up, which costs more
 * than the call itself.  `submitted` and `stopping` are written
 * atomically (under the lock) so that the poll may read them without it.
 */
#include "stream/stream.h"
#include "stream/stream_internal.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

loomResult_t loom_stream_check(loomStream_t stream, const char *fn) {
  if (stream == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: stream is NULL", fn);
  if (stream->magic != LOOM_STREAM_MAGIC)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: %p is not a stream (destroyed, or not from loomStreamCreate)",
                      fn, (void *)stream);
  return loomSuccess;
}

/* Fails when called from the stream's own worker (a task waiting for its
 * own stream would wait for itself). */
static loomResult_t not_on_worker(loomStream_t s, const char *fn) {
  if (pthread_equal(pthread_self(), s->worker))
    return loom_error(loomInvalidUsage, LOOM_LOG_INIT,
                      "%s: called from a task running on that stream", fn);
  return loomSuccess;
}

/* Called with the lock held and the queue empty: polls (without the lock)
 * until work is queued, Destroy begins or spin_ns pass. */
static void poll_for_work(loomStream_t s) {
  uint64_t seen = atomic_load_explicit(&s->submitted, memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  uint64_t deadline = loom_now_ns() + s->spin_ns;
  while (atomic_load_explicit(&s->submitted, memory_order_acquire) == seen &&
         !atomic_load_explicit(&s->stopping, memory_order_acquire) && loom_now_ns() < deadline)
    sched_yield();
  pthread_mutex_lock(&s->lock);
}

static void *worker_main(void *arg) {
  loomStream_t s = arg;
  char text[LOOM_STREAM_ERROR_BYTES];
  pthread_mutex_lock(&s->lock);
  for (;;) {
    if (s->head == NULL && !atomic_load_explicit(&s->stopping, memory_order_relaxed) && s->spin_ns > 0)
      poll_for_work(s);
    while (s->head == NULL && !atomic_load_explicit(&s->stopping, memory_order_relaxed))
      pthread_cond_wait(&s->work_cv, &s->lock);
    struct loom_task *t = s->head;
    if (t == NULL)
      break; /* stopping, and nothing left */
    s->head = t->next;
    if (s->head == NULL)
      s->tail = NULL;
    pthread_mutex_unlock(&s->lock);

    loom_clear_last_error();
    loomResult_t res = t->run(t);
    if (res != loomSuccess) {
      const char *msg = loom_last_error();
      if (*msg == '\0')
        snprintf(text, sizeof text, "a task on stream %p failed: %s", (void *)s,
                 loomGetErrorString(res));
      else
        snprintf(text, sizeof text, "%s", msg);
    }
    t->release(t);

    pthread_mutex_lock(&s->lock);
    s->completed++;
    if (res != loomSuccess && s->error == loomSuccess) {
      s->error = res;
      s->error_seq = s->completed;
      memcpy(s->error_text, text, sizeof text);
    }
    pthread_cond_broadcast(&s->done_cv);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

loomResult_t loomStreamCreate(loomStream_t *stream) {
  if (stream == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomStreamCreate: stream is NULL");
  loomStream_t s = calloc(1, sizeof *s);
  if (s == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomStreamCreate: out of memory");
  const char *what = "loomStreamCreate: creating the stream's lock";
  loomResult_t res = loom_check_errnum(pthread_mutex_init(&s->lock, NULL), LOOM_LOG_INIT, what);
  if (res == loomSuccess)
    res = loom_check_errnum(pthread_cond_init(&s->work_cv, NULL), LOOM_LOG_INIT, what);
  if (res == loomSuccess)
    res = loom_check_errnum(pthread_cond_init(&s->done_cv, NULL), LOOM_LOG_INIT, what);
  s->magic = LOOM_STREAM_MAGIC;
  s->spin_ns = (uint64_t)loom_param_int(LOOM_PARAM_SPIN_US) * 1000u;
  int err = res == loomSuccess ? pthread_create(&s->worker, NULL, worker_main, s) : 0;
  if (res != loomSuccess || err != 0) {
    s->magic = 0;
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return res != loomSuccess ? res
                              : loom_check_errnum(err, LOOM_LOG_INIT,
                                                  "loomStreamCreate: cannot start the stream's "
                                                  "thread");
  }
  (void)pthread_setname_np(s->worker, "loom-stream"); /* a name for debuggers only */
  *stream = s;
  return loomSuccess;
}

loomResult_t loom_stream_submit(loomStream_t stream, struct loom_task *t) {
  if (t == NULL)
    return loom_error(loomInternalError, LOOM_LOG_INIT, "loom_stream_submit: task is NULL");
  loomResult_t res = loom_stream_check(stream, "loom_stream_submit");
  if (res != loomSuccess) {
    t->release(t);
    return res;
  }
  pthread_mutex_lock(&stream->lock);
  if (atomic_load_explicit(&stream->stopping, memory_order_relaxed)) {
    pthread_mutex_unlock(&stream->lock);
    t->release(t);
    return loom_error(loomInvalidUsage, LOOM_LOG_INIT,
                      "work queued on stream %p while it is being destroyed",
                      (void *)stream);
  }
  t->next = NULL;
  if (stream->tail != NULL)
    stream->tail->next = t;
  else
    stream->head = t;
  stream->tail = t;
  atomic_fetch_add_explicit(&stream->submitted, 1, memory_order_release);
  pthread_cond_signal(&stream->work_cv);
  pthread_mutex_unlock(&stream->lock);
  return loomSuccess;
}

loomResult_t loomStreamDestroy(loomStream_t stream) {
  LOOM_CHECK(loom_stream_check(stream, "loomStreamDestroy"));
  LOOM_CHECK(not_on_worker(stream, "loomStreamDestroy"));
  pthread_mutex_lock(&stream->lock);
  atomic_store_explicit(&stream->stopping, 1, memory_order_release);
  pthread_cond_signal(&stream->work_cv);
  pthread_mutex_unlock(&stream->lock);
  /* it drains the queue first */
  loom_check_errnum(pthread_join(stream->worker, NULL), LOOM_LOG_INIT,
                    "loomStreamDestroy: joining the stream's thread");
  if (stream->dev != NULL)
    loom_device_stream_release(stream);
  if (stream->error != loomSuccess)
    LOOM_INFO(LOOM_LOG_INIT, "stream %p destroyed with an unsynchronised error: %s",
              (void *)stream, stream->error_text);
  stream->magic = 0;
  pthread_cond_destroy(&stream->done_cv);
  pthread_cond_destroy(&stream->work_cv);
  pthread_mutex_destroy(&stream->lock);
  free(stream);
  return loomSuccess;
}

loomResult_t loomStreamSynchronize(loomStream_t stream) {
  LOOM_CHECK(loom_stream_check(stream, "loomStreamSynchronize"));
  LOOM_CHECK(not_on_worker(stream, "loomStreamSynchronize"));
  char text[LOOM_STREAM_ERROR_BYTES];
  pthread_mutex_lock(&stream->lock);
  uint64_t target = atomic_load_explicit(&stream->submitted, memory_order_relaxed);
  while (stream->completed < target)
    pthread_cond_wait(&stream->done_cv, &stream->lock);
  /* An error of work queued after our call is left for the next one. */
  loomResult_t res = loomSuccess;
  if (stream->error != loomSuccess && stream->error_seq <= target) {
    res = stream->error;
    memcpy(text, stream->error_text, sizeof text);
    stream->error = loomSuccess;
    stream->error_seq = 0;
    stream->error_text[0] = '\0';
  }
  pthread_mutex_unlock(&stream->lock);
  if (res != loomSuccess)
    loom_set_last_error(text); /* logged already, by the failing task */
  if (stream->dev != NULL) {
    loomResult_t dres = loom_device_stream_sync(stream); /* logged by the backend */
    if (res == loomSuccess)
      res = dres;
  }
  return res;
}

loomResult_t loomStreamQuery(loomStream_t stream) {
  LOOM_CHECK(loom_stream_check(stream, "loomStreamQuery"));
  pthread_mutex_lock(&stream->lock);
  int idle = stream->completed == atomic_load_explicit(&stream->submitted, memory_order_relaxed);
  pthread_mutex_unlock(&stream->lock);
  if (idle && stream->dev != NULL)
    return loom_device_stream_query(stream);
  return idle ? loomSuccess : loomInProgress;
}

/* ---- loomStreamWaitEvent ------------------------------------------------------ */

/* Blocks the worker until one event record completes. */
struct wait_task {
  struct loom_task base;
  struct loom_event_record *rec;
};

static loomResult_t wait_task_run(struct loom_task *t) {
  struct wait_task *w = (struct wait_task *)t;
  loom_event_record_wait(w->rec);
  return loomSuccess;
}

static void wait_task_release(struct loom_task *t) {
  struct wait_task *w = (struct wait_task *)t;
  loom_event_record_put(w->rec);
  free(w);
}

loomResult_t loomStreamWaitEvent(loomStream_t stream, loomEvent_t event) {
  LOOM_CHECK(loom_stream_check(stream, "loomStreamWaitEvent"));
  LOOM_CHECK(loom_event_check(event, "loomStreamWaitEvent"));
  struct loom_event_record *rec = loom_event_record_get(event);
  if (rec == NULL)
    return loomSuccess; /* nothing pending: no need to wait */
  loomResult_t dres;
  if (stream->dev != NULL &&
      loom_event_record_wait_on_device(rec, stream, stream->dev, stream->native, &dres)) {
    loom_event_record_put(rec);
    return dres;
  }
  struct wait_task *w = calloc(1, sizeof *w);
  if (w == NULL) {
    loom_event_record_put(rec);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomStreamWaitEvent: out of memory");
  }
  w->base.run = wait_task_run;
  w->base.release = wait_task_release;
  w->rec = rec;
  if (stream->dev != NULL) /* the device stream holds until the record completes */
    return loom_device_stream_hold(stream, &w->base);
  return loom_stream_submit(stream, &w->base);
}

/* ---- loomLaunchHostFunc ----------------------------------------------------------- */

/* Calls a user function on the worker.  It runs whether or not earlier
 * work failed; the stream's pending error (not collected: a later
 * loomStreamSynchronize still returns it) is its last error meanwhile. */
struct host_func_task {
  struct loom_task base;
  loomStream_t stream;
  void (*fn)(void *);
  void *arg;
};

static loomResult_t host_func_run(struct loom_task *t) {
  struct host_func_task *h = (struct host_func_task *)t;
  loomStream_t s = h->stream;
  pthread_mutex_lock(&s->lock);
  int failed = s->error != loomSuccess;
  if (failed)
    loom_set_last_error(s->error_text);
  pthread_mutex_unlock(&s->lock);
  if (!failed)
    loom_clear_last_error();
  h->fn(h->arg);
  loom_clear_last_error(); /* fn's own errors are not the stream's */
  return loomSuccess;
}

static void host_func_release(struct loom_task *t) { free(t); }

static void host_func_on_device(void *arg) {
  struct host_func_task *h = arg;
  host_func_run(&h->base);
  free(h);
}

loomResult_t loomLaunchHostFunc(loomStream_t stream, void (*fn)(void *), void *arg) {
  if (fn == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomLaunchHostFunc: fn is NULL");
  LOOM_CHECK(loom_stream_check(stream, "loomLaunchHostFunc"));
  struct host_func_task *h = calloc(1, sizeof *h);
  if (h == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomLaunchHostFunc: out of memory");
  h->base.run = host_func_run;
  h->base.release = host_func_release;
  h->stream = stream;
  h->fn = fn;
  h->arg = arg;
  if (stream->dev != NULL) {
    loomResult_t res = loom_stream_enqueue_fn(stream, host_func_on_device, h);
    if (res != loomSuccess)
      free(h);
    return res;
  }
  return loom_stream_submit(stream, &h->base);
}
