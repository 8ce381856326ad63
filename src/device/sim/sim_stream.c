/*
 * sim_stream.c — the simulated device's streams and events (sim.h).
 *
 * A stream is a worker thread running its ops in order; before each copy
 * or kernel it sleeps a random 0..LOOM_SIM_DELAY_US microseconds (timer
 * slack 1 ns), so that host code or another stream reading results too
 * early sees old data.  An op whose pointers do not translate (freed, out
 * of bounds) is skipped and becomes the stream's error, returned by the
 * next stream_sync; host functions and event records run regardless.
 * An event counts its records and the records reached: it is complete
 * when the last record has been reached.
 */
#include "device/sim/sim.h"
#include "device/reduce.h"
#include "core/config.h"
#include "core/error.h"
#include "core/futex.h"
#include "core/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <time.h>

struct loom_sim_stream {
  pthread_mutex_t lock;
  pthread_cond_t work_cv, done_cv;
  struct loom_sim_op *head, *tail;
  uint64_t submitted, completed;
  int stopping;
  unsigned delay_us, seed;
  pthread_t worker;
  loomResult_t error; /* the first failure since the last sync */
  char error_text[512];
};

struct loom_sim_event {
  _Atomic uint64_t recorded, reached;
  atomic_int refs; /* its creator's, and each queued wait's */
};

/* Read-held while a host function runs, write-held by the calls CUDA
 * makes wait for running host functions (sim.h). */
static pthread_rwlock_t api_lock = PTHREAD_RWLOCK_INITIALIZER;

void loom_sim_api_exclusive(void) { pthread_rwlock_wrlock(&api_lock); }
void loom_sim_api_shared_end(void) { pthread_rwlock_unlock(&api_lock); }

static void run_host_func(const struct loom_sim_op *op) {
  pthread_rwlock_rdlock(&api_lock);
  op->fn(op->arg);
  pthread_rwlock_unlock(&api_lock);
}

/* Blocks this stream's worker until the host has set *flag to value or
 * past it, as cuStreamWaitValue32's GEQ does: asleep on the word (a
 * futex), woken by loom_sim_wake_value, and looking again every 1 ms in
 * case a store came without a wake. */
static void wait_value(const uint32_t *flag, uint32_t value) {
  for (;;) {
    uint32_t now = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
    if ((int32_t)(now - value) >= 0)
      return;
    loom_futex_wait(flag, now, 0, 1000);
  }
}

void loom_sim_wake_value(uint32_t *flag) {
  loom_futex_wake_all(flag, 0);
}

static void event_put(struct loom_sim_event *ev) {
  if (atomic_fetch_sub(&ev->refs, 1) == 1)
    free(ev);
}

/* Blocks this stream's worker until ev reached seq (napping 20 us). */
static void wait_reached(struct loom_sim_event *ev, uint64_t seq) {
  while (atomic_load(&ev->reached) < seq) {
    struct timespec nap = {.tv_nsec = 20000};
    nanosleep(&nap, NULL);
  }
  event_put(ev);
}

/* ---- running one op ---- */

static void random_delay(struct loom_sim_stream *s) {
  if (s->delay_us == 0)
    return;
  unsigned us = (unsigned)rand_r(&s->seed) % (s->delay_us + 1);
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void *xlate(const void *p, size_t bytes, const char *what, char *text, size_t len,
                   int *failed) {
  const char *why = "";
  void *out = loom_sim_translate(p, bytes, &why);
  if (out == NULL && !*failed) {
    snprintf(text, len, "simulated device: %s %p (%zu bytes) is %s", what, p, bytes, why);
    *failed = 1;
  }
  return out;
}

loomResult_t loom_sim_op_run(const struct loom_sim_op *op, char *text, size_t len) {
  size_t esize = loom_datatype_size(op->dt);
  size_t bytes = op->kind == LOOM_SIM_COPY ? op->count : op->count * esize;
  int failed = 0;
  void *dst = NULL;
  const void *a = NULL, *b = NULL;
  if (op->kind <= LOOM_SIM_SCALE) {
    dst = xlate(op->dst, bytes, "destination", text, len, &failed);
    a = op->kind == LOOM_SIM_SCALE ? dst : xlate(op->a, bytes, "source", text, len, &failed);
    b = op->kind == LOOM_SIM_REDUCE ? xlate(op->b, bytes, "source", text, len, &failed) : NULL;
  }
  if (failed)
    return loomInvalidArgument;
  switch (op->kind) {
  case LOOM_SIM_COPY:
    memmove(dst, a, bytes);
    break;
  case LOOM_SIM_REDUCE:
    loom_reduce(dst, a, b, op->count, op->dt, op->op);
    break;
  case LOOM_SIM_PREMUL:
    loom_premul(dst, a, op->count, op->dt, op->scalar);
    break;
  case LOOM_SIM_SCALE:
    loom_scale_avg(dst, op->count, op->dt, op->nranks);
    break;
  case LOOM_SIM_HOST_FUNC:
    run_host_func(op);
    break;
  case LOOM_SIM_EVENT:
    loom_sim_event_reached(op->event, op->event_seq);
    break;
  case LOOM_SIM_WAIT:
    wait_reached(op->event, op->event_seq);
    break;
  case LOOM_SIM_WAIT_VALUE:
    wait_value(op->flag, op->value);
    break;
  }
  return loomSuccess;
}

/* ---- the worker ---- */

static void run_one(struct loom_sim_stream *s, struct loom_sim_op *op) {
  char text[sizeof s->error_text];
  if (op->kind <= LOOM_SIM_SCALE)
    random_delay(s);
  loomResult_t res = loom_sim_op_run(op, text, sizeof text);
  pthread_mutex_lock(&s->lock);
  if (res != loomSuccess && s->error == loomSuccess) {
    s->error = res;
    memcpy(s->error_text, text, sizeof text);
  }
  s->completed++;
  pthread_cond_broadcast(&s->done_cv);
  pthread_mutex_unlock(&s->lock);
}

static void *worker_main(void *arg) {
  struct loom_sim_stream *s = arg;
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* delays of a few µs, not 50 */
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->head == NULL && !s->stopping)
      pthread_cond_wait(&s->work_cv, &s->lock);
    struct loom_sim_op *op = s->head;
    if (op == NULL)
      break;
    s->head = op->next;
    if (s->head == NULL)
      s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    run_one(s, op);
    free(op);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* Starts s's worker; on failure s is left for the caller to free. */
static loomResult_t start_stream(struct loom_sim_stream *s) {
  static atomic_uint seeds = 1;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  s->delay_us = (unsigned)loom_param_int(LOOM_PARAM_SIM_DELAY_US);
  s->seed = (unsigned)time(NULL) ^ (atomic_fetch_add(&seeds, 1) * 2654435761u);
  int err = pthread_create(&s->worker, NULL, worker_main, s);
  if (err != 0) {
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    return loom_check_errnum(err, LOOM_LOG_INIT, "simulated device: starting a stream's thread");
  }
  (void)pthread_setname_np(s->worker, "loom-sim-strm");
  return loomSuccess;
}

loomResult_t loom_sim_stream_create(void **native) {
  struct loom_sim_stream *s = calloc(1, sizeof *s);
  if (s == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "simulated device: out of memory");
  loom_sim_api_exclusive(); /* as cudaStreamCreate, it waits for running host functions */
  loomResult_t res = start_stream(s);
  loom_sim_api_shared_end();
  if (res != loomSuccess) {
    free(s);
    return res;
  }
  *native = s;
  return loomSuccess;
}

void loom_sim_stream_destroy(void *native) {
  struct loom_sim_stream *s = native;
  pthread_mutex_lock(&s->lock);
  s->stopping = 1; /* the worker drains the queue first */
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->worker, NULL);
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->work_cv);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

loomResult_t loom_sim_stream_push(void *native, const struct loom_sim_op *op) {
  struct loom_sim_stream *s = native;
  struct loom_sim_op *copy = malloc(sizeof *copy);
  if (copy == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "simulated device: out of memory");
  *copy = *op;
  copy->next = NULL;
  pthread_mutex_lock(&s->lock);
  if (s->tail != NULL)
    s->tail->next = copy;
  else
    s->head = copy;
  s->tail = copy;
  s->submitted++;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->lock);
  return loomSuccess;
}

loomResult_t loom_sim_stream_sync(void *native) {
  struct loom_sim_stream *s = native;
  if (s == NULL) /* the default stream: the simulator runs nothing there */
    return loomSuccess;
  char text[sizeof s->error_text];
  pthread_mutex_lock(&s->lock);
  uint64_t target = s->submitted;
  while (s->completed < target)
    pthread_cond_wait(&s->done_cv, &s->lock);
  loomResult_t res = s->error;
  memcpy(text, s->error_text, sizeof text);
  s->error = loomSuccess;
  pthread_mutex_unlock(&s->lock);
  if (res != loomSuccess)
    return loom_error(res, LOOM_LOG_INIT, "%s", text);
  return loomSuccess;
}

loomResult_t loom_sim_stream_query(void *native) {
  struct loom_sim_stream *s = native;
  pthread_mutex_lock(&s->lock);
  int idle = s->completed == s->submitted;
  pthread_mutex_unlock(&s->lock);
  return idle ? loomSuccess : loomInProgress;
}

/* ---- events ---- */

loomResult_t loom_sim_event_create(void **event) {
  struct loom_sim_event *ev = calloc(1, sizeof *ev);
  if (ev == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "simulated device: out of memory");
  atomic_init(&ev->refs, 1);
  *event = ev;
  return loomSuccess;
}

void loom_sim_event_destroy(void *event) { event_put(event); }

loomResult_t loom_sim_stream_wait_event(void *native, void *event) {
  struct loom_sim_event *ev = event;
  struct loom_sim_op op = {.kind = LOOM_SIM_WAIT, .event = ev,
                           .event_seq = atomic_load(&ev->recorded)};
  atomic_fetch_add(&ev->refs, 1);
  loomResult_t res = loom_sim_stream_push(native, &op);
  if (res != loomSuccess)
    event_put(ev);
  return res;
}

loomResult_t loom_sim_event_record(void *event, void *native) {
  struct loom_sim_event *ev = event;
  struct loom_sim_op op = {.kind = LOOM_SIM_EVENT, .event = ev};
  op.event_seq = atomic_fetch_add(&ev->recorded, 1) + 1;
  return loom_sim_stream_push(native, &op);
}

loomResult_t loom_sim_wait_value(void *native, const uint32_t *flag, uint32_t value) {
  struct loom_sim_op op = {.kind = LOOM_SIM_WAIT_VALUE, .flag = flag, .value = value};
  return loom_sim_stream_push(native, &op);
}

void loom_sim_event_reached(struct loom_sim_event *ev, uint64_t seq) {
  uint64_t cur = atomic_load(&ev->reached);
  while (cur < seq && !atomic_compare_exchange_weak(&ev->reached, &cur, seq))
    ;
}

loomResult_t loom_sim_event_query(void *event) {
  struct loom_sim_event *ev = event;
  return atomic_load(&ev->reached) >= atomic_load(&ev->recorded) ? loomSuccess
                                                                  : loomInProgress;
}
