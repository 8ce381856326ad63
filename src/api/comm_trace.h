/*
 * comm_trace.h — the flight recorder's record of a call run at once
 * (comm_trace.c has the rest): inline, since every blocking collective
 * runs it.
 */
#ifndef LOOM_API_COMM_TRACE_H
#define LOOM_API_COMM_TRACE_H

#include "api/comm.h"
#include "api/task.h"
#include "core/coll.h"
#include "trace/trace.h"

/* Whether call c is small to the recorder (loom_trace_call's `small`). */
static inline int loom_call_trace_small(const struct loom_call *c) {
  return c->send_bytes + c->recv_bytes <= LOOM_TRACE_SMALL_BYTES;
}

/* What call c asks for, as the recorder keeps it. */
static inline struct loom_trace_call loom_call_trace_of(const struct loom_call *c) {
  return (struct loom_trace_call){
      .coll = (int16_t)c->coll,
      .datatype = (int8_t)(c->coll == LOOM_COLL_BARRIER ? -1 : (int)c->datatype),
      .op = (int16_t)(loom_coll_reduces(c->coll) ? (int)c->op : -1),
      .root = c->root,
      .is_send = (uint8_t)(c->is_send != 0),
      .count = c->coll == LOOM_COLL_BARRIER ? 0 : c->count,
      .device = (int8_t)c->device,
      .on_stream = c->stream != NULL,
      .small = (uint8_t)loom_call_trace_small(c),
  };
}

/* Records call c, run at once, with p's plan (p NULL: it failed before
 * it was planned); returns its id (0: recording is off). */
static inline uint64_t loom_call_trace_run(const struct loom_call *c,
                                           const struct loom_posted *p) {
  struct loom_trace *t = c->comm->trace;
  if (t == NULL)
    return 0;
  struct loom_trace_call tc = loom_call_trace_of(c);
  return loom_trace_record(t, &tc, 1, p != NULL ? p->trace_plan : 0);
}

#endif
