/*
 * check_stream.c — unit tests of host streams, events and host functions
 * (src/stream/stream.c, src/stream/event.c).
 *
 * Ordering is proven by ordering, not timing: a task that must run after
 * another blocks on a gate that only the other opens.  Every wait on a gate
 * has a deadline, so a broken stream fails the test instead of hanging it.
 */
#include "loom.h"
#include "core/config.h"
#include "core/error.h"
#include "stream/stream.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GATE_MS 5000 /* how long a task waits for a gate before failing */

/* ---- gates -------------------------------------------------------------------- */

struct gate {
  pthread_mutex_t lock;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC */
  int open;
};

static void gate_init(struct gate *g) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->cv, &attr);
  pthread_condattr_destroy(&attr);
  g->open = 0;
}

static void gate_destroy(struct gate *g) {
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->lock);
}

static void gate_open(struct gate *g) {
  pthread_mutex_lock(&g->lock);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->lock);
}

/* 1 once the gate is open, 0 when `ms` passed first. */
static int gate_wait(struct gate *g, int ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += ms / 1000;
  dl.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&g->lock);
  int err = 0;
  while (!g->open && err != ETIMEDOUT)
    err = pthread_cond_timedwait(&g->cv, &g->lock, &dl);
  int open = g->open;
  pthread_mutex_unlock(&g->lock);
  return open;
}

/* ---- test tasks: a function, an argument, an int ------------------------------- */

typedef loomResult_t (*task_fn)(void *arg, int i);

struct test_task {
  struct loom_task base;
  task_fn fn;
  void *arg;
  int i;
};

static int tasks_ran, tasks_released; /* atomics */

static loomResult_t test_task_run(struct loom_task *t) {
  struct test_task *tt = (struct test_task *)t;
  __atomic_add_fetch(&tasks_ran, 1, __ATOMIC_SEQ_CST);
  return tt->fn(tt->arg, tt->i);
}

static void test_task_release(struct loom_task *t) {
  __atomic_add_fetch(&tasks_released, 1, __ATOMIC_SEQ_CST);
  free(t);
}

static struct loom_task *make_task(task_fn fn, void *arg, int i) {
  struct test_task *t = calloc(1, sizeof *t);
  ck_assert_ptr_nonnull(t);
  t->base.run = test_task_run;
  t->base.release = test_task_release;
  t->fn = fn;
  t->arg = arg;
  t->i = i;
  return &t->base;
}

static void submit(loomStream_t s, task_fn fn, void *arg, int i) {
  ck_assert_int_eq(loom_stream_submit(s, make_task(fn, arg, i)), loomSuccess);
}

/* Appends i to an order log. */
struct order {
  pthread_mutex_t lock;
  int n;
  int ids[1024];
};
static struct order order = {.lock = PTHREAD_MUTEX_INITIALIZER};

static loomResult_t append_fn(void *arg, int i) {
  struct order *o = arg;
  pthread_mutex_lock(&o->lock);
  if (o->n < (int)(sizeof o->ids / sizeof o->ids[0]))
    o->ids[o->n++] = i;
  pthread_mutex_unlock(&o->lock);
  return loomSuccess;
}

/* Waits (bounded) for a gate; loomTimeout when it stays shut. */
static loomResult_t wait_gate_fn(void *arg, int i) {
  if (!gate_wait(arg, GATE_MS))
    return loom_error_record(loomTimeout, "test gate not opened within %d ms", GATE_MS);
  return loomSuccess;
}

static loomResult_t open_gate_fn(void *arg, int i) {
  if (i > 0) /* a head start for a broken Destroy to show itself */
    nanosleep(&(struct timespec){0, (long)i * 1000000L}, NULL);
  gate_open(arg);
  return loomSuccess;
}

/* Fails with code i and message arg (none when arg is NULL). */
static loomResult_t fail_fn(void *arg, int i) {
  if (arg == NULL)
    return (loomResult_t)i;
  return loom_error((loomResult_t)i, LOOM_LOG_INIT, "%s", (const char *)arg);
}

/* Waits up to i ms for a gate, and succeeds either way: a pause that
 * another task can cut short. */
static loomResult_t pause_fn(void *arg, int i) {
  gate_wait(arg, i);
  return loomSuccess;
}

/* A flag one task sets and another reads: seen is 0 (never read), 1 (read
 * unset) or 2 (read set).  The reader then opens `gate`, if any. */
struct probe {
  int flag, seen;
  struct gate *gate;
};

static loomResult_t probe_set_fn(void *arg, int i) {
  __atomic_store_n(&((struct probe *)arg)->flag, 1, __ATOMIC_SEQ_CST);
  return loomSuccess;
}

static loomResult_t probe_read_fn(void *arg, int i) {
  struct probe *p = arg;
  __atomic_store_n(&p->seen, __atomic_load_n(&p->flag, __ATOMIC_SEQ_CST) + 1,
                   __ATOMIC_SEQ_CST);
  if (p->gate != NULL)
    gate_open(p->gate);
  return loomSuccess;
}

static void setup(void) {
  __atomic_store_n(&tasks_ran, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&tasks_released, 0, __ATOMIC_SEQ_CST);
  order.n = 0;
  loom_clear_last_error();
}

static int released(void) { return __atomic_load_n(&tasks_released, __ATOMIC_SEQ_CST); }

/* ---- tests ------------------------------------------------------------------------ */

START_TEST(bad_handles) {
  loomStream_t s;
  loomEvent_t e;
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  ck_assert_int_eq(loomEventCreate(&e), loomSuccess);
  static uint64_t zeros[32];
  loomStream_t bogus_s = (loomStream_t)(void *)zeros;
  loomEvent_t bogus_e = (loomEvent_t)(void *)zeros;

  ck_assert_int_eq(loomStreamCreate(NULL), loomInvalidArgument);
  ck_assert_int_eq(loomStreamSynchronize(NULL), loomInvalidArgument);
  ck_assert_str_eq(loomGetLastError(NULL), "loomStreamSynchronize: stream is NULL");
  ck_assert_int_eq(loomStreamDestroy(NULL), loomInvalidArgument);
  ck_assert_int_eq(loomStreamQuery(NULL), loomInvalidArgument);
  ck_assert_int_eq(loomStreamWaitEvent(NULL, e), loomInvalidArgument);
  ck_assert_int_eq(loomStreamWaitEvent(s, NULL), loomInvalidArgument);
  ck_assert_int_eq(loomEventCreate(NULL), loomInvalidArgument);
  ck_assert_int_eq(loomEventRecord(NULL, s), loomInvalidArgument);
  ck_assert_int_eq(loomEventSynchronize(NULL), loomInvalidArgument);
  ck_assert_int_eq(loomEventQuery(NULL), loomInvalidArgument);
  ck_assert_int_eq(loomEventDestroy(NULL), loomInvalidArgument);

  /* Zeroed memory, and an event passed as a stream and back. */
  ck_assert_int_eq(loomStreamSynchronize(bogus_s), loomInvalidArgument);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "is not a stream"));
  ck_assert_int_eq(loomStreamQuery(bogus_s), loomInvalidArgument);
  ck_assert_int_eq(loomStreamDestroy(bogus_s), loomInvalidArgument);
  ck_assert_int_eq(loomStreamSynchronize((loomStream_t)(void *)e), loomInvalidArgument);
  ck_assert_int_eq(loomStreamWaitEvent(s, bogus_e), loomInvalidArgument);
  ck_assert_int_eq(loomStreamWaitEvent(s, (loomEvent_t)(void *)s), loomInvalidArgument);
  ck_assert_int_eq(loomEventRecord(e, bogus_s), loomInvalidArgument);
  ck_assert_int_eq(loomEventRecord(e, (loomStream_t)(void *)e), loomInvalidArgument);
  ck_assert_int_eq(loomEventQuery(bogus_e), loomInvalidArgument);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "is not an event"));
  ck_assert_int_eq(loomEventSynchronize((loomEvent_t)(void *)s), loomInvalidArgument);
  ck_assert_int_eq(loomEventDestroy(bogus_e), loomInvalidArgument);

  /* A task given to no stream is still released, and never run. */
  ck_assert_int_eq(loom_stream_submit(NULL, make_task(append_fn, &order, 0)),
                   loomInvalidArgument);
  ck_assert_int_eq(loom_stream_submit(bogus_s, make_task(append_fn, &order, 0)),
                   loomInvalidArgument);
  ck_assert_int_eq(released(), 2);
  ck_assert_int_eq(__atomic_load_n(&tasks_ran, __ATOMIC_SEQ_CST), 0);

  /* The failed record left the event as it was. */
  ck_assert_int_eq(loomEventQuery(e), loomSuccess);
  ck_assert_int_eq(loomEventDestroy(e), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
}
END_TEST

START_TEST(fifo_order) {
  loomStream_t s;
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  ck_assert_int_eq(loomStreamQuery(s), loomSuccess);
  for (int i = 0; i < 1000; i++)
    submit(s, append_fn, &order, i);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(order.n, 1000);
  for (int i = 0; i < 1000; i++)
    ck_assert_int_eq(order.ids[i], i);
  ck_assert_int_eq(released(), 1000);
  ck_assert_int_eq(loomStreamQuery(s), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
}
END_TEST

/* A's first task waits for a gate that only B's task opens: with the
 * streams run one after the other, A would time out. */
START_TEST(streams_run_concurrently) {
  loomStream_t a, b;
  struct gate g;
  gate_init(&g);
  ck_assert_int_eq(loomStreamCreate(&a), loomSuccess);
  ck_assert_int_eq(loomStreamCreate(&b), loomSuccess);
  submit(a, wait_gate_fn, &g, 0);
  submit(a, append_fn, &order, 2);
  submit(b, append_fn, &order, 1);
  submit(b, open_gate_fn, &g, 0);
  ck_assert_int_eq(loomStreamSynchronize(a), loomSuccess);
  ck_assert_int_eq(loomStreamSynchronize(b), loomSuccess);
  ck_assert_int_eq(order.n, 2);
  ck_assert_int_eq(order.ids[0], 1);
  ck_assert_int_eq(order.ids[1], 2);
  ck_assert_int_eq(loomStreamDestroy(a), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(b), loomSuccess);
  gate_destroy(&g);
}
END_TEST

START_TEST(synchronize_reports_first_error) {
  loomStream_t s;
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  submit(s, fail_fn, (void *)"peer 3 hung up", loomRemoteError);
  submit(s, append_fn, &order, 7); /* later work still runs */
  submit(s, fail_fn, (void *)"second failure", loomTimeout);
  loom_clear_last_error();
  ck_assert_int_eq(loomStreamSynchronize(s), loomRemoteError);
  ck_assert_str_eq(loomGetLastError(NULL), "peer 3 hung up");
  ck_assert_int_eq(order.n, 1);
  /* Reported once: the second failure came before that synchronisation. */
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(loomStreamQuery(s), loomSuccess);

  submit(s, fail_fn, (void *)"later failure", loomInvalidUsage);
  ck_assert_int_eq(loomStreamSynchronize(s), loomInvalidUsage);
  ck_assert_str_eq(loomGetLastError(NULL), "later failure");

  /* A task failing without a message still gets one. */
  submit(s, fail_fn, NULL, loomSystemError);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSystemError);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "failed"));
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
  ck_assert_int_eq(released(), 5);
}
END_TEST

static loomResult_t sync_own_stream_fn(void *arg, int i) {
  loomStream_t *s = arg;
  return loomStreamSynchronize(*s) == loomInvalidUsage ? loomSuccess : loomInternalError;
}

/* Synchronising a stream from its own task fails instead of deadlocking. */
START_TEST(synchronize_from_own_task) {
  loomStream_t s;
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  submit(s, sync_own_stream_fn, &s, 0);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
}
END_TEST

START_TEST(query_in_progress_then_done) {
  loomStream_t s;
  struct gate g;
  gate_init(&g);
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  ck_assert_int_eq(loomStreamQuery(s), loomSuccess);
  submit(s, wait_gate_fn, &g, 0);
  submit(s, append_fn, &order, 0);
  ck_assert_int_eq(loomStreamQuery(s), loomInProgress);
  ck_assert_int_eq(order.n, 0);
  gate_open(&g);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(loomStreamQuery(s), loomSuccess);
  ck_assert_int_eq(order.n, 1);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
  gate_destroy(&g);
}
END_TEST

START_TEST(event_record_query_synchronize) {
  loomStream_t s;
  loomEvent_t e;
  struct gate g;
  gate_init(&g);
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  ck_assert_int_eq(loomEventCreate(&e), loomSuccess);

  /* Never recorded: complete. */
  ck_assert_int_eq(loomEventQuery(e), loomSuccess);
  ck_assert_int_eq(loomEventSynchronize(e), loomSuccess);

  /* Recorded behind a blocked task. */
  struct probe p = {0, 0, NULL};
  submit(s, wait_gate_fn, &g, 0);
  submit(s, probe_set_fn, &p, 0);
  ck_assert_int_eq(loomEventRecord(e, s), loomSuccess);
  ck_assert_int_eq(loomEventQuery(e), loomInProgress);
  gate_open(&g);
  ck_assert_int_eq(loomEventSynchronize(e), loomSuccess);
  ck_assert_int_eq(p.flag, 1); /* the work before the record has run */
  ck_assert_int_eq(loomEventQuery(e), loomSuccess);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);

  /* Recorded on no stream: complete at once. */
  ck_assert_int_eq(loomEventRecord(e, NULL), loomSuccess);
  ck_assert_int_eq(loomEventQuery(e), loomSuccess);
  ck_assert_int_eq(loomEventDestroy(e), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
  gate_destroy(&g);
}
END_TEST

/* A new record replaces the last; an event may be destroyed while its
 * record is still queued. */
START_TEST(event_rerecord_and_destroy_pending) {
  loomStream_t s;
  loomEvent_t e, f;
  struct gate g;
  gate_init(&g);
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  ck_assert_int_eq(loomEventCreate(&e), loomSuccess);
  ck_assert_int_eq(loomEventCreate(&f), loomSuccess);
  submit(s, wait_gate_fn, &g, 0);
  ck_assert_int_eq(loomEventRecord(e, s), loomSuccess);
  ck_assert_int_eq(loomEventRecord(f, s), loomSuccess);
  ck_assert_int_eq(loomEventQuery(e), loomInProgress);
  ck_assert_int_eq(loomEventRecord(e, NULL), loomSuccess);
  ck_assert_int_eq(loomEventQuery(e), loomSuccess);
  ck_assert_int_eq(loomEventSynchronize(e), loomSuccess); /* must not wait */
  ck_assert_int_eq(loomEventQuery(f), loomInProgress);
  ck_assert_int_eq(loomEventDestroy(f), loomSuccess);
  gate_open(&g);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(loomEventDestroy(e), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
  gate_destroy(&g);
}
END_TEST

/* B waits for an event recorded on A after a task that sets a flag: B's
 * later task must see it set.  A is held first by a gate the test opens,
 * then by a pause that B's task cuts short: a B that does not wait reads
 * the flag unset and lets A go on; a B that waits finds it set after the
 * pause. */
START_TEST(stream_wait_event_orders_streams) {
  loomStream_t a, b;
  loomEvent_t e, never;
  struct gate g, cut;
  gate_init(&g);
  gate_init(&cut);
  struct probe p = {0, 0, &cut};
  ck_assert_int_eq(loomStreamCreate(&a), loomSuccess);
  ck_assert_int_eq(loomStreamCreate(&b), loomSuccess);
  ck_assert_int_eq(loomEventCreate(&e), loomSuccess);
  ck_assert_int_eq(loomEventCreate(&never), loomSuccess);

  submit(a, wait_gate_fn, &g, 0);
  submit(a, pause_fn, &cut, 300);
  submit(a, probe_set_fn, &p, 0);
  ck_assert_int_eq(loomEventRecord(e, a), loomSuccess);
  ck_assert_int_eq(loomStreamWaitEvent(b, e), loomSuccess);
  submit(b, probe_read_fn, &p, 0);
  /* The wait holds on to the record: the event itself may go. */
  ck_assert_int_eq(loomEventDestroy(e), loomSuccess);
  ck_assert_int_eq(loomStreamQuery(b), loomInProgress);
  ck_assert_int_eq(__atomic_load_n(&p.seen, __ATOMIC_SEQ_CST), 0);
  gate_open(&g);
  ck_assert_int_eq(loomStreamSynchronize(b), loomSuccess);
  ck_assert_int_eq(p.seen, 2);
  ck_assert_int_eq(loomStreamSynchronize(a), loomSuccess);

  /* Waiting for an event never recorded does not block. */
  ck_assert_int_eq(loomStreamWaitEvent(b, never), loomSuccess);
  submit(b, append_fn, &order, 1);
  ck_assert_int_eq(loomStreamSynchronize(b), loomSuccess);
  ck_assert_int_eq(order.n, 1);

  ck_assert_int_eq(loomEventDestroy(never), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(a), loomSuccess);
  ck_assert_int_eq(loomStreamDestroy(b), loomSuccess);
  gate_destroy(&cut);
  gate_destroy(&g);
}
END_TEST

/* Destroy returns only after the queued work ran, including a task that
 * is blocked when Destroy is called. */
START_TEST(destroy_waits_for_queued_work) {
  loomStream_t a, b;
  struct gate g;
  struct probe p = {0, 0, NULL};
  gate_init(&g);
  ck_assert_int_eq(loomStreamCreate(&a), loomSuccess);
  ck_assert_int_eq(loomStreamCreate(&b), loomSuccess);
  submit(a, wait_gate_fn, &g, 0);
  for (int i = 0; i < 10; i++)
    submit(a, append_fn, &order, i);
  submit(a, probe_set_fn, &p, 0);
  submit(b, open_gate_fn, &g, 20);
  ck_assert_int_eq(loomStreamDestroy(a), loomSuccess);
  ck_assert_int_eq(__atomic_load_n(&p.flag, __ATOMIC_SEQ_CST), 1);
  ck_assert_int_eq(order.n, 10);
  ck_assert_int_eq(loomStreamDestroy(b), loomSuccess);
  ck_assert_int_eq(released(), 13);
  ck_assert_int_eq(__atomic_load_n(&tasks_ran, __ATOMIC_SEQ_CST), 13);
  gate_destroy(&g);
}
END_TEST

/* ---- loomLaunchHostFunc ------------------------------------------------------------- */

/* What a host function saw: the thread it ran on and its last error. */
struct host_seen {
  int calls;
  pthread_t thread;
  char last_error[256];
  struct order *order;
  int id;
};

static void host_record_fn(void *arg) {
  struct host_seen *h = arg;
  h->calls++;
  h->thread = pthread_self();
  snprintf(h->last_error, sizeof h->last_error, "%s", loomGetLastError(NULL));
  if (h->order != NULL)
    append_fn(h->order, h->id);
}

/* The function runs on the worker, after the work queued before it (which
 * is blocked on a gate, so it cannot have run early), before later work. */
START_TEST(host_func_runs_in_order) {
  loomStream_t s;
  struct gate g;
  struct host_seen h = {0};
  h.order = &order;
  h.id = 100;
  gate_init(&g);
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  submit(s, wait_gate_fn, &g, 0);
  for (int i = 0; i < 3; i++)
    submit(s, append_fn, &order, i);
  ck_assert_int_eq(loomLaunchHostFunc(s, host_record_fn, &h), loomSuccess);
  submit(s, append_fn, &order, 3);
  ck_assert_int_eq(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 0);
  ck_assert_int_eq(loomStreamQuery(s), loomInProgress);
  gate_open(&g);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(h.calls, 1);
  ck_assert(!pthread_equal(h.thread, pthread_self()));
  ck_assert_str_eq(h.last_error, "");
  ck_assert_int_eq(order.n, 5);
  const int want[5] = {0, 1, 2, 100, 3};
  for (int i = 0; i < 5; i++)
    ck_assert_int_eq(order.ids[i], want[i]);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
  gate_destroy(&g);
}
END_TEST

/* After a failure the function still runs and sees the failure's text;
 * it does not collect it: synchronisation still returns it, and once
 * collected a later function sees no error. */
START_TEST(host_func_sees_pending_error) {
  loomStream_t s;
  struct host_seen first = {0}, second = {0};
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  submit(s, fail_fn, (void *)"rank 2 stopped making progress (timeout)", loomTimeout);
  submit(s, append_fn, &order, 1);
  ck_assert_int_eq(loomLaunchHostFunc(s, host_record_fn, &first), loomSuccess);
  loom_clear_last_error();
  ck_assert_int_eq(loomStreamSynchronize(s), loomTimeout);
  ck_assert_str_eq(loomGetLastError(NULL), "rank 2 stopped making progress (timeout)");
  ck_assert_int_eq(first.calls, 1);
  ck_assert_str_eq(first.last_error, "rank 2 stopped making progress (timeout)");
  ck_assert_int_eq(loomLaunchHostFunc(s, host_record_fn, &second), loomSuccess);
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(second.calls, 1);
  ck_assert_str_eq(second.last_error, "");
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
}
END_TEST

START_TEST(host_func_bad_arguments) {
  loomStream_t s;
  struct host_seen h = {0};
  static uint64_t zeros[32];
  ck_assert_int_eq(loomStreamCreate(&s), loomSuccess);
  ck_assert_int_eq(loomLaunchHostFunc(NULL, host_record_fn, &h), loomInvalidArgument);
  ck_assert_str_eq(loomGetLastError(NULL), "loomLaunchHostFunc: stream is NULL");
  ck_assert_int_eq(loomLaunchHostFunc((loomStream_t)(void *)zeros, host_record_fn, &h),
                   loomInvalidArgument);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "is not a stream"));
  ck_assert_int_eq(loomLaunchHostFunc(s, NULL, &h), loomInvalidArgument);
  ck_assert_str_eq(loomGetLastError(NULL), "loomLaunchHostFunc: fn is NULL");
  ck_assert_int_eq(loomStreamSynchronize(s), loomSuccess);
  ck_assert_int_eq(h.calls, 0);
  ck_assert_int_eq(loomStreamDestroy(s), loomSuccess);
}
END_TEST

static Suite *stream_suite(void) {
  Suite *s = suite_create("stream");
  TCase *tc = tcase_create("streams");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, bad_handles);
  tcase_add_test(tc, fifo_order);
  tcase_add_test(tc, streams_run_concurrently);
  tcase_add_test(tc, synchronize_reports_first_error);
  tcase_add_test(tc, synchronize_from_own_task);
  tcase_add_test(tc, query_in_progress_then_done);
  tcase_add_test(tc, destroy_waits_for_queued_work);
  suite_add_tcase(s, tc);

  tc = tcase_create("events");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, event_record_query_synchronize);
  tcase_add_test(tc, event_rerecord_and_destroy_pending);
  tcase_add_test(tc, stream_wait_event_orders_streams);
  suite_add_tcase(s, tc);

  tc = tcase_create("host functions");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, host_func_runs_in_order);
  tcase_add_test(tc, host_func_sees_pending_error);
  tcase_add_test(tc, host_func_bad_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  /* The bad-handle tests and failing tasks would WARN on every call. */
  setenv("LOOM_DEBUG", "NONE", 1);
  loom_config_reload();
  SRunner *sr = srunner_create(stream_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
