/*
 * stream.h — streams: a worker thread per stream runs queued tasks in
 * issue order.  The collective layer wraps each call (or group) in a task;
 * events mark points in a stream's queue.  A device stream also has the
 * backend's stream, which orders what the device sees (device_stream.c).
 */
#ifndef LOOM_STREAM_STREAM_H
#define LOOM_STREAM_STREAM_H

#include "loom.h"

struct loom_task {
  /* Runs on the stream's worker thread.  On failure it returns the error
   * code and leaves the message as the worker thread's last error
   * (loom_last_error), which the stream keeps for loomStreamSynchronize. */
  loomResult_t (*run)(struct loom_task *t);
  /* Frees the task; called exactly once, after run. */
  void (*release)(struct loom_task *t);
  struct loom_task *next; /* queue link, owned by the stream */
};

/* Checks a stream handle (NULL is not a stream here). */
loomResult_t loom_stream_check(loomStream_t stream, const char *fn);

/* Queues `t` on `stream`, which owns it from now on (release is called
 * even when queuing fails, in which case the error is returned). */
loomResult_t loom_stream_submit(loomStream_t stream, struct loom_task *t);

struct loom_stage;
/* The device a stream runs on (NULL: loomDeviceHost). */
loomDevice_t loom_stream_device(loomStream_t stream);
/* device_stream.c: queues `t` (a collective's host side) in the stream's
 * order, with its staged device buffers copied in before and out after
 * (device/stage.h); takes over t and the stage's contents either way. */
loomResult_t loom_stream_submit_staged(loomStream_t stream, struct loom_task *t,
                                       struct loom_stage *stage);

#endif
