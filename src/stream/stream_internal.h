/*
 * stream_internal.h — what stream.c and event.c share, and nothing else
 * includes: the records behind events.
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

#endif
