/*
 * stream_internal.h — what stream.c, event.c and device_stream.c share,
 * and nothing else includes: the stream itself and the records behind
 * events.
 *
 * Each loomEventRecord on a stream makes a new record, completed by a
 * marker task on that stream; the event points at its latest record.  A
 * record is reference-counted so that whoever waits for it (a
 * loomEventSynchronize, or a stream blocked by loomStreamWaitEvent) keeps
 * it alive after the event is re-recorded or destroyed.  Waiting on a
 * record, rather than on "the event's generation N", stays exact when
 * records on different streams complete out of order.
 */
#ifndef LOOM_STREAM_STREAM_INTERNAL_H
#define LOOM_STREAM_STREAM_INTERNAL_H

#include "loom.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct loom_task;
struct loom_device_ops;
struct loom_device_work;

#define LOOM_STREAM_MAGIC 0x5354524du /* "STRM" */
#define LOOM_STREAM_ERROR_BYTES 1024

struct loomStream {
  uint32_t magic; /* first, so that a bad handle is caught by a read */
  pthread_mutex_t lock;
  pthread_cond_t work_cv; /* the worker: a task was queued, or stop */
  pthread_cond_t done_cv; /* synchronisers: `completed` grew */
  struct loom_task *head, *tail;
  /* tasks queued / run so far; submitted and stopping are also read
   * without the lock by a worker polling for work */
  _Atomic uint64_t submitted;
  uint64_t completed;
  atomic_int stopping; /* loomStreamDestroy has begun */
  uint64_t spin_ns;              /* how long an idle worker polls first */
  pthread_t worker;
  /* The first failure since the last synchronisation, and the number of
   * the task that failed (1-based, comparable with `completed`). */
  loomResult_t error;
  uint64_t error_seq;
  char error_text[LOOM_STREAM_ERROR_BYTES];
  /* A device stream (device_stream.c): the backend's stream, which orders
   * every copy, kernel, event and collective queued on it; the worker
   * above runs the collectives' host side.  dev == NULL: a host stream. */
  loomDevice_t device;
  const struct loom_device_ops *dev;
  void *native;
  int owns_native;                /* created here: destroyed with the stream */
  struct loom_device_work *retired; /* finished work whose resources wait to be freed */
  /* Holds (device_stream.c): the native stream waits on the device until
   * the word *hold_flag (the backend's pinned host memory) reaches a
   * hold's number; holds are numbered under hold_lock in the order they
   * reach the worker, which lets them go in that order. */
  uint32_t *hold_flag;
  uint32_t holds_queued;
  pthread_mutex_t hold_lock;
};

struct loom_event_record;

/* Checks an event handle (NULL is not an event here). */
loomResult_t loom_event_check(loomEvent_t event, const char *fn);

/* A new reference to the event's latest record, or NULL when there is
 * nothing to wait for (never recorded, recorded on no stream, or already
 * complete).  Release it with loom_event_record_put. */
struct loom_event_record *loom_event_record_get(loomEvent_t event);

/* Blocks until the record completes. */
void loom_event_record_wait(struct loom_event_record *rec);

/* Drops a reference taken by loom_event_record_get. */
void loom_event_record_put(struct loom_event_record *rec);

/* A device stream's wait for rec done on the device, when rec was
 * recorded on a stream of the same backend: 1 with the backend's result
 * in *res; 0 when it must be waited for on the host instead. */
int loom_event_record_wait_on_device(struct loom_event_record *rec, loomStream_t stream,
                                     const struct loom_device_ops *dev, void *native,
                                     loomResult_t *res);

/* ---- device streams (device_stream.c) ---- */

/* Queues fn(arg) in the stream's order: a task on a host stream's worker,
 * the backend's host function on a device stream.  On failure fn never
 * runs (the caller still owns arg). */
loomResult_t loom_stream_enqueue_fn(loomStream_t s, void (*fn)(void *), void *arg);
/* A device stream's part of loomStreamSynchronize, Query and Destroy:
 * the backend stream's work done and the finished work's resources
 * freed. */
loomResult_t loom_device_stream_sync(loomStream_t s);
/* Queues t on the device stream's worker and holds the native stream, at
 * this point of its order, until t has run (or the stream refused it):
 * work queued there afterwards waits for t on the device, with no host
 * thread blocked.  t is released in every case. */
loomResult_t loom_device_stream_hold(loomStream_t s, struct loom_task *t);
loomResult_t loom_device_stream_query(loomStream_t s);
void loom_device_stream_release(loomStream_t s);

#endif
