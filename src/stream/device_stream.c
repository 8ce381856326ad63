/*
 * device_stream.c — streams on a device (loomStreamCreateOnDevice,
 * loomStreamCreateFromNative) and what is queued on them.
 *
 * A device stream pairs the backend's stream (`native`), which orders
 * everything the device sees, with the worker of a host stream, which
 * runs the host side of collectives.  A collective queued on it puts, on
 * the native stream and at the time of the call:
 *
 *   copies of its device inputs into host blocks -> event `in` ->
 *   a hold: a wait, on the device, for the stream's hold word to reach
 *   the collective's number -> copies of its results back into device
 *   memory -> a host function that drops the native side's reference
 *
 * and queues a task on the worker that waits (polling, never blocking on
 * the device) for `in`, runs the collective on the host blocks and sets
 * the hold word.  Work the caller queues afterwards, on the native stream
 * directly too, waits for the results as it would for a kernel.
 *
 * Holds are numbered in the order queued and let go in that order by the
 * worker, which runs its tasks in order; the word lives in the backend's
 * pinned host memory.  No host function blocks: while one runs, CUDA
 * makes other threads' stream creation and IPC opens wait, so a host
 * function waiting for a collective that opens an IPC handle deadlocks
 * (seen on an H200; the simulator now behaves alike).
 *
 * Finished work is retired to a list and freed by the caller's thread
 * (its next call, sync or destroy): a backend's host function may not
 * call the backend (cudaFreeHost).
 */
#include "stream/stream.h"
#include "stream/stream_internal.h"
#include "device/device.h"
#include "device/stage.h"
#include "core/error.h"
#include "core/log.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct loom_device_work {
  struct loom_task base; /* runs on the worker */
  struct loom_task *inner;
  loomStream_t s;
  struct loom_stage stage;
  void *ev_in;
  uint32_t hold; /* its number: the native stream waits for the word to reach it */
  int held;      /* the hold is queued: it must be let go */
  int skip; /* queuing failed: the collective must not run (the call said so) */
  atomic_int refs; /* the worker's task and the native stream's */
  struct loom_device_work *next; /* on s->retired */
};

loomDevice_t loom_stream_device(loomStream_t s) {
  return s == NULL || s->dev == NULL ? loomDeviceHost : s->device;
}

/* ---- creating ---- */

static loomResult_t create_on(loomStream_t *stream, loomDevice_t device, void *native,
                              const char *fn) {
  if (stream == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: stream is NULL", fn);
  const struct loom_device_ops *dev;
  LOOM_CHECK(loom_device_get(device, &dev, fn));
  if (device == loomDeviceHost) {
    if (native != NULL)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                        "%s: host streams have no native handle (use loomStreamCreate)", fn);
    return loomStreamCreate(stream);
  }
  int owns = native == NULL;
  if (owns)
    LOOM_CHECK(dev->stream_create(&native));
  loomStream_t s;
  loomResult_t res = loomStreamCreate(&s);
  if (res != loomSuccess) {
    if (owns)
      dev->stream_destroy(native);
    return res;
  }
  s->device = device;
  s->dev = dev;
  s->native = native;
  s->owns_native = owns;
  void *word = NULL;
  res = dev->host_alloc(&word, 64);
  if (res != loomSuccess) {
    (void)loomStreamDestroy(s); /* frees native too when it owns it */
    return res;
  }
  s->hold_flag = word;
  __atomic_store_n(s->hold_flag, 0, __ATOMIC_RELEASE);
  pthread_mutex_init(&s->hold_lock, NULL);
  *stream = s;
  return loomSuccess;
}

loomResult_t loomStreamCreateOnDevice(loomStream_t *stream, loomDevice_t device) {
  return create_on(stream, device, NULL, "loomStreamCreateOnDevice");
}

loomResult_t loomStreamCreateFromNative(loomStream_t *stream, loomDevice_t device,
                                        void *native) {
  static const char fn[] = "loomStreamCreateFromNative";
  if (native == NULL && device != loomDeviceHost)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: native is NULL (pass the backend's stream, e.g. a cudaStream_t; "
                      "loomStreamCreateOnDevice makes one)", fn);
  if (device == loomDeviceHost)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: host streams have no native handle (use loomStreamCreate)", fn);
  return create_on(stream, device, native, fn);
}

loomResult_t loomStreamGetDevice(loomStream_t stream, loomDevice_t *device) {
  LOOM_CHECK(loom_stream_check(stream, "loomStreamGetDevice"));
  if (device == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomStreamGetDevice: device is NULL");
  *device = loom_stream_device(stream);
  return loomSuccess;
}

/* ---- functions in the stream's order ---- */

struct fn_task {
  struct loom_task base;
  void (*fn)(void *);
  void *arg;
};

static loomResult_t fn_task_run(struct loom_task *t) {
  struct fn_task *f = (struct fn_task *)t;
  f->fn(f->arg);
  return loomSuccess;
}

static void fn_task_release(struct loom_task *t) { free(t); }

loomResult_t loom_stream_enqueue_fn(loomStream_t s, void (*fn)(void *), void *arg) {
  if (s->dev != NULL)
    return s->dev->host_func(s->native, fn, arg);
  struct fn_task *f = malloc(sizeof *f);
  if (f == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory queueing on a stream");
  *f = (struct fn_task){.base = {.run = fn_task_run, .release = fn_task_release},
                        .fn = fn, .arg = arg};
  return loom_stream_submit(s, &f->base);
}

/* ---- finished work ---- */

static void free_work(struct loom_device_work *w) {
  loom_stage_free(&w->stage);
  if (w->ev_in != NULL)
    w->s->dev->event_destroy(w->ev_in);
  free(w);
}

static void put_work(struct loom_device_work *w) {
  if (atomic_fetch_sub(&w->refs, 1) != 1)
    return;
  loomStream_t s = w->s;
  pthread_mutex_lock(&s->lock);
  w->next = s->retired;
  s->retired = w;
  pthread_mutex_unlock(&s->lock);
}

static void reap(loomStream_t s) {
  pthread_mutex_lock(&s->lock);
  struct loom_device_work *w = s->retired;
  s->retired = NULL;
  pthread_mutex_unlock(&s->lock);
  while (w != NULL) {
    struct loom_device_work *next = w->next;
    free_work(w);
    w = next;
  }
}

/* ---- holds on the native stream ---- */

/* With hold_lock held: queues on the native stream a wait for the next
 * hold's number, *seq. */
static loomResult_t hold_queue(loomStream_t s, uint32_t *seq) {
  uint32_t next = s->holds_queued + 1;
  LOOM_CHECK(s->dev->wait_value_async(s->native, s->hold_flag, next));
  s->holds_queued = next;
  *seq = next;
  return loomSuccess;
}

/* Lets the native stream past hold seq once every earlier hold is let
 * go: at once on the worker, which runs them in order; a caller whose
 * task the stream refused waits here for the worker to reach it. */
static void hold_let_go(loomStream_t s, uint32_t seq) {
  while ((int32_t)(__atomic_load_n(s->hold_flag, __ATOMIC_ACQUIRE) - (seq - 1)) < 0) {
    struct timespec nap = {.tv_nsec = 20000};
    nanosleep(&nap, NULL);
  }
  __atomic_store_n(s->hold_flag, seq, __ATOMIC_RELEASE);
  if (s->dev->wait_value_wake != NULL)
    s->dev->wait_value_wake(s->hold_flag);
}

struct hold_task {
  struct loom_task base;
  struct loom_task *inner;
  loomStream_t s;
  uint32_t seq;
};

static loomResult_t hold_task_run(struct loom_task *t) {
  struct hold_task *h = (struct hold_task *)t;
  return h->inner->run(h->inner);
}

static void hold_task_release(struct loom_task *t) {
  struct hold_task *h = (struct hold_task *)t;
  h->inner->release(h->inner);
  hold_let_go(h->s, h->seq);
  free(h);
}

loomResult_t loom_device_stream_hold(loomStream_t s, struct loom_task *t) {
  struct hold_task *h = malloc(sizeof *h);
  if (h == NULL) {
    t->release(t);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory queueing on a device stream");
  }
  *h = (struct hold_task){.base = {.run = hold_task_run, .release = hold_task_release},
                          .inner = t, .s = s};
  pthread_mutex_lock(&s->hold_lock);
  loomResult_t res = hold_queue(s, &h->seq);
  if (res == loomSuccess)
    res = loom_stream_submit(s, &h->base); /* refused: released at once, so let go */
  else {                                    /* no hold queued: nothing to let go */
    t->release(t);
    free(h);
  }
  pthread_mutex_unlock(&s->hold_lock);
  return res;
}

static void native_release(void *arg) { put_work(arg); }

/* ---- the worker's side ---- */

/* Polls the device for `in` (yielding, then napping 20 µs at a time). */
static loomResult_t wait_inputs(struct loom_device_work *w) {
  const struct loom_device_ops *dev = w->s->dev;
  loomResult_t res;
  for (unsigned spins = 0; (res = dev->event_query(w->ev_in)) == loomInProgress; spins++) {
    if (spins < 1000) {
      sched_yield();
    } else {
      struct timespec nap = {.tv_nsec = 20000};
      nanosleep(&nap, NULL);
    }
  }
  return res;
}

static loomResult_t work_run(struct loom_task *t) {
  struct loom_device_work *w = (struct loom_device_work *)t;
  loomResult_t res = w->skip ? loomSuccess : wait_inputs(w);
  if (res == loomSuccess && !w->skip)
    res = w->inner->run(w->inner);
  return res;
}

/* After work_run, or when the stream refused w: the native stream goes
 * on, also after a failure. */
static void work_release(struct loom_task *t) {
  struct loom_device_work *w = (struct loom_device_work *)t;
  w->inner->release(w->inner);
  if (w->held)
    hold_let_go(w->s, w->hold);
  put_work(w);
}

/* What of w's native side got queued. */
struct queued {
  int any;     /* something: from then on only the native stream may free w */
  int release; /* the native side's own release */
};

static loomResult_t queue_native(struct loom_device_work *w, struct queued *q) {
  loomStream_t s = w->s;
  int before = w->stage.nin;
  for (int i = 0; i < before; i++) {
    LOOM_CHECK(s->dev->memcpy_async(w->stage.in[i].dst, w->stage.in[i].src,
                                    w->stage.in[i].bytes, s->native));
    q->any = 1;
  }
  LOOM_CHECK(s->dev->event_record(w->ev_in, s->native));
  q->any = 1;
  LOOM_CHECK(hold_queue(s, &w->hold));
  w->held = 1;
  if (w->stage.dev != NULL)
    LOOM_CHECK(loom_stage_run_async(&w->stage, 0, s->native));
  LOOM_CHECK(s->dev->host_func(s->native, native_release, w));
  q->release = 1;
  return loomSuccess;
}

/* Hands w to the worker; a refused submit releases w at once, which
 * lets the native stream go on. */
static loomResult_t submit_work(struct loom_device_work *w) {
  atomic_fetch_add(&w->refs, 1); /* w outlives a refused submit */
  loomResult_t sub = loom_stream_submit(w->s, &w->base);
  put_work(w);
  return sub;
}

/* Queuing failed after part of it reached the native stream: the
 * collective is skipped (the call returns the error) but still handed to
 * the worker, in its hold's order, so that its hold is let go. */
static void abandon(struct loom_device_work *w) {
  w->skip = 1;
  (void)submit_work(w);
}

/* Then, without hold_lock (the stream may wait for earlier holds): the
 * native stream drained so that no queued copy still uses w's blocks, and
 * the native side's reference dropped if its release never got queued. */
static void drain_abandoned(struct loom_device_work *w, const struct queued *q) {
  (void)w->s->dev->stream_sync(w->s->native);
  if (!q->release)
    put_work(w);
}

loomResult_t loom_stream_submit_staged(loomStream_t s, struct loom_task *t,
                                       struct loom_stage *stage) {
  if (s->dev == NULL) {
    if (stage->dev != NULL) {
      loom_stage_free(stage);
      t->release(t);
      return loom_error(loomInternalError, LOOM_LOG_COLL,
                        "device buffers reached a host stream unchecked");
    }
    return loom_stream_submit(s, t);
  }
  reap(s);
  struct loom_device_work *w = calloc(1, sizeof *w);
  if (w == NULL) {
    loom_stage_free(stage);
    t->release(t);
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory queueing on a device stream");
  }
  *w = (struct loom_device_work){.base = {.run = work_run, .release = work_release},
                                 .inner = t, .s = s, .stage = *stage};
  *stage = (struct loom_stage){0};
  atomic_init(&w->refs, 2);
  loomResult_t res = s->dev->event_create(&w->ev_in);
  struct queued q = {0};
  pthread_mutex_lock(&s->hold_lock); /* holds reach the worker in their order */
  if (res == loomSuccess)
    res = queue_native(w, &q);
  int abandoned = 0;
  if (res == loomSuccess)
    res = submit_work(w);
  else if (q.any) {
    abandon(w);
    abandoned = 1;
  }
  pthread_mutex_unlock(&s->hold_lock);
  if (abandoned)
    drain_abandoned(w, &q);
  if (res == loomSuccess || q.any)
    return res;
  t->release(t);
  free_work(w);
  return res;
}

/* ---- sync, query, destroy ---- */

loomResult_t loom_device_stream_sync(loomStream_t s) {
  loomResult_t res = s->dev->stream_sync(s->native);
  reap(s);
  return res;
}

loomResult_t loom_device_stream_query(loomStream_t s) { return s->dev->stream_query(s->native); }

void loom_device_stream_release(loomStream_t s) {
  if (s->owns_native)
    s->dev->stream_destroy(s->native); /* waits for its work */
  else
    (void)s->dev->stream_sync(s->native);
  reap(s);
  if (s->hold_flag != NULL) {
    s->dev->host_free(s->hold_flag);
    pthread_mutex_destroy(&s->hold_lock);
  }
}

/* ---- loomMemcpyAsync ---- */

struct copy_arg {
  void *dst;
  const void *src;
  size_t bytes;
};

static void host_copy(void *arg) {
  struct copy_arg *c = arg;
  memmove(c->dst, c->src, c->bytes);
  free(c);
}

/* The device of a copy between dst and src (host when both are). */
static loomResult_t copy_device(void *dst, const void *src, size_t bytes,
                                const struct loom_device_ops **ops, const char *fn) {
  const struct loom_device_ops *dops, *sops;
  uintptr_t base;
  size_t size;
  loomDevice_t dd = loom_device_of(dst, &dops, &base, &size);
  loomDevice_t sd = loom_device_of(src, &sops, &base, &size);
  if (dd != loomDeviceHost && sd != loomDeviceHost && dd != sd)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: dst is %s memory and src is %s memory: copy through host memory",
                      fn, loom_device_name(dd), loom_device_name(sd));
  LOOM_CHECK(loom_device_check_span(dst, bytes, "dst", fn));
  LOOM_CHECK(loom_device_check_span(src, bytes, "src", fn));
  *ops = dd != loomDeviceHost ? dops : sops;
  return loomSuccess;
}

loomResult_t loomMemcpyAsync(void *dst, const void *src, size_t bytes, loomStream_t stream) {
  static const char fn[] = "loomMemcpyAsync";
  if (bytes == 0)
    return loomSuccess;
  if (dst == NULL || src == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: %s is NULL with %zu bytes to "
                      "copy", fn, dst == NULL ? "dst" : "src", bytes);
  const struct loom_device_ops *ops = NULL;
  LOOM_CHECK(copy_device(dst, src, bytes, &ops, fn));
  if (stream == NULL)
    return ops->memcpy_sync(dst, src, bytes);
  LOOM_CHECK(loom_stream_check(stream, fn));
  loomDevice_t sdev = loom_stream_device(stream);
  if (ops->device != loomDeviceHost && ops->device != sdev)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: %s memory cannot be copied on a %s stream (make the stream with "
                      "loomStreamCreateOnDevice(&s, %s))", fn, ops->name,
                      loom_device_name(sdev), ops->device == loomDeviceSim ? "loomDeviceSim"
                                                                           : "loomDeviceCuda");
  if (stream->dev != NULL && ops->device != loomDeviceHost)
    return stream->dev->memcpy_async(dst, src, bytes, stream->native);
  /* host to host: a host function in the stream's order (a backend's
   * async copy of two host buffers may run at once, as CUDA's does) */
  struct copy_arg *c = malloc(sizeof *c);
  if (c == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "%s: out of memory", fn);
  *c = (struct copy_arg){.dst = dst, .src = src, .bytes = bytes};
  loomResult_t res = loom_stream_enqueue_fn(stream, host_copy, c);
  if (res != loomSuccess)
    free(c);
  return res;
}
