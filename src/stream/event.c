/*
 * event.c — events: points in a stream's queue that other threads and
 * streams can wait for.
 *
 * loomEventRecord on a stream makes a new record and queues a marker task
 * that completes it; the record replaces the event's previous one (which
 * lives on for as long as something still waits for it).  Recording on no
 * stream leaves the event with nothing pending.  One lock guards every
 * event and record; each record has its own condition variable, so a
 * completion wakes only the waiters of that record.
 */
#include "stream/stream.h"
#include "stream/stream_internal.h"
#include "core/error.h"
#include "device/device.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define LOOM_EVENT_MAGIC 0x45564e54u /* "EVNT" */

struct loom_event_record {
  int done;
  int refs; /* the event, the marker task, and each waiter */
  pthread_cond_t cv;
  /* Recorded on a device stream: the backend's event too, so that device
   * streams wait for it on the device (stream_wait_event) rather than in
   * a blocking host function (CUDA may run the host functions of all
   * streams on one thread: a blocked one would stall the marker it waits
   * for). */
  const struct loom_device_ops *dev;
  void *dev_event;
  struct loom_event_record *next_dead; /* on `dead`, waiting for its event's destroy */
};

/* Records whose backend event must still be destroyed: the last reference
 * may go in a backend's host function, which must not call the backend;
 * they are freed by the next event call on a user's thread. */
static struct loom_event_record *dead;

struct loomEvent {
  uint32_t magic; /* first, so that a bad handle is caught by a read */
  struct loom_event_record *rec; /* the latest record; NULL: none pending */
};

static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;

loomResult_t loom_event_check(loomEvent_t event, const char *fn) {
  if (event == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: event is NULL", fn);
  if (event->magic != LOOM_EVENT_MAGIC)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: %p is not an event (destroyed, or not from loomEventCreate)",
                      fn, (void *)event);
  return loomSuccess;
}

struct loom_event_record *loom_event_record_get(loomEvent_t event) {
  pthread_mutex_lock(&event_lock);
  struct loom_event_record *rec = event->rec;
  if (rec != NULL && !rec->done)
    rec->refs++;
  else
    rec = NULL;
  pthread_mutex_unlock(&event_lock);
  return rec;
}

void loom_event_record_wait(struct loom_event_record *rec) {
  pthread_mutex_lock(&event_lock);
  while (!rec->done)
    pthread_cond_wait(&rec->cv, &event_lock);
  pthread_mutex_unlock(&event_lock);
}

static void free_record(struct loom_event_record *rec) {
  if (rec->dev_event != NULL)
    rec->dev->event_destroy(rec->dev_event);
  pthread_cond_destroy(&rec->cv);
  free(rec);
}

void loom_event_record_put(struct loom_event_record *rec) {
  if (rec == NULL)
    return;
  pthread_mutex_lock(&event_lock);
  int last = --rec->refs == 0;
  if (last && rec->dev_event != NULL) { /* maybe on a backend's thread: later */
    rec->next_dead = dead;
    dead = rec;
    last = 0;
  }
  pthread_mutex_unlock(&event_lock);
  if (last)
    free_record(rec);
}

/* Frees the dead records (on a user's thread). */
static void reap_dead(void) {
  pthread_mutex_lock(&event_lock);
  struct loom_event_record *rec = dead;
  dead = NULL;
  pthread_mutex_unlock(&event_lock);
  while (rec != NULL) {
    struct loom_event_record *next = rec->next_dead;
    free_record(rec);
    rec = next;
  }
}

int loom_event_record_wait_on_device(struct loom_event_record *rec, loomStream_t stream,
                                     const struct loom_device_ops *dev, void *native,
                                     loomResult_t *res) {
  (void)stream;
  if (rec->dev != dev || rec->dev_event == NULL || dev->stream_wait_event == NULL)
    return 0;
  *res = dev->stream_wait_event(native, rec->dev_event);
  return 1;
}

/* Makes `rec` (or nothing pending, when NULL) the event's latest record,
 * taking over the caller's reference. */
static void replace_record(loomEvent_t event, struct loom_event_record *rec) {
  pthread_mutex_lock(&event_lock);
  struct loom_event_record *old = event->rec;
  event->rec = rec;
  pthread_mutex_unlock(&event_lock);
  loom_event_record_put(old);
}

/* ---- the marker task ------------------------------------------------------------ */

struct marker_task {
  struct loom_task base;
  struct loom_event_record *rec;
};

static loomResult_t marker_run(struct loom_task *t) {
  struct loom_event_record *rec = ((struct marker_task *)t)->rec;
  pthread_mutex_lock(&event_lock);
  rec->done = 1;
  pthread_cond_broadcast(&rec->cv);
  pthread_mutex_unlock(&event_lock);
  return loomSuccess;
}

static void marker_release(struct loom_task *t) {
  struct marker_task *m = (struct marker_task *)t;
  loom_event_record_put(m->rec);
  free(m);
}

/* On a device stream the marker is a backend host function. */
static void marker_on_device(void *arg) {
  struct marker_task *m = arg;
  marker_run(&m->base);
  marker_release(&m->base);
}

/* ---- the API ----------------------------------------------------------------------- */

loomResult_t loomEventCreate(loomEvent_t *event) {
  if (event == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomEventCreate: event is NULL");
  loomEvent_t e = calloc(1, sizeof *e);
  if (e == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomEventCreate: out of memory");
  e->magic = LOOM_EVENT_MAGIC;
  *event = e;
  return loomSuccess;
}

loomResult_t loomEventRecord(loomEvent_t event, loomStream_t stream) {
  LOOM_CHECK(loom_event_check(event, "loomEventRecord"));
  if (stream == NULL) {
    replace_record(event, NULL); /* complete at once */
    return loomSuccess;
  }
  LOOM_CHECK(loom_stream_check(stream, "loomEventRecord"));
  struct loom_event_record *rec = calloc(1, sizeof *rec);
  struct marker_task *m = calloc(1, sizeof *m);
  if (rec == NULL || m == NULL) {
    free(rec);
    free(m);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomEventRecord: out of memory");
  }
  loomResult_t init = loom_check_errnum(pthread_cond_init(&rec->cv, NULL), LOOM_LOG_INIT,
                                        "loomEventRecord: creating its condition variable");
  if (init != loomSuccess) {
    free(rec);
    free(m);
    return init;
  }
  rec->refs = 2; /* the event's and the marker's */
  reap_dead();
  if (stream->dev != NULL && stream->dev->stream_wait_event != NULL) {
    loomResult_t dres = stream->dev->event_create(&rec->dev_event);
    if (dres == loomSuccess) {
      rec->dev = stream->dev;
      dres = rec->dev->event_record(rec->dev_event, stream->native);
    }
    if (dres != loomSuccess) {
      if (rec->dev_event != NULL)
        rec->dev->event_destroy(rec->dev_event);
      pthread_cond_destroy(&rec->cv);
      free(rec);
      free(m);
      return dres;
    }
  }
  m->base.run = marker_run;
  m->base.release = marker_release;
  m->rec = rec;
  loomResult_t res = stream->dev != NULL ? loom_stream_enqueue_fn(stream, marker_on_device, m)
                                         : loom_stream_submit(stream, &m->base);
  if (res != loomSuccess && stream->dev != NULL)
    marker_release(&m->base);
  if (res != loomSuccess) {
    loom_event_record_put(rec); /* the marker's went with its release */
    return res;
  }
  replace_record(event, rec);
  return loomSuccess;
}

loomResult_t loomEventSynchronize(loomEvent_t event) {
  LOOM_CHECK(loom_event_check(event, "loomEventSynchronize"));
  struct loom_event_record *rec = loom_event_record_get(event);
  if (rec != NULL) {
    loom_event_record_wait(rec);
    loom_event_record_put(rec);
  }
  return loomSuccess;
}

loomResult_t loomEventQuery(loomEvent_t event) {
  LOOM_CHECK(loom_event_check(event, "loomEventQuery"));
  struct loom_event_record *rec = loom_event_record_get(event);
  int pending = rec != NULL;
  loom_event_record_put(rec);
  return pending ? loomInProgress : loomSuccess;
}

loomResult_t loomEventDestroy(loomEvent_t event) {
  LOOM_CHECK(loom_event_check(event, "loomEventDestroy"));
  reap_dead();
  event->magic = 0;
  replace_record(event, NULL); /* a pending marker keeps its own reference */
  free(event);
  return loomSuccess;
}
