/*
 * comm_trace.c — the communicator's side of the flight recorder
 * (trace/trace.h): opens it at init, records calls as they are issued,
 * started and ended, dumps it when the communicator fails or is aborted,
 * and loomCommDump.
 */
#include "api/comm_trace.h"
#include "core/config.h"
#include "core/error.h"
#include "device/reduce.h"
#include "trace/trace.h"

#include <errno.h>
#include <string.h>

void loom_comm_trace_open(loomComm_t comm) {
  const uint8_t *secret = loom_bootstrap_secret(comm->bs);
  comm->trace = loom_trace_create((int)loom_param_int(LOOM_PARAM_TRACE_BUFFER), secret,
                                  LOOM_SECRET_BYTES, comm->name, comm->rank, comm->nranks);
}

void loom_call_trace(struct loom_call *c) {
  struct loom_trace *t = c->comm->trace;
  if (t == NULL) {
    c->trace_id = 0;
    return;
  }
  struct loom_trace_call tc = loom_call_trace_of(c);
  c->trace_id = loom_trace_record(t, &tc, 0, 0);
}

void loom_calls_trace_queued(struct loom_call *calls, int n) {
  for (int i = 0; i < n; i++)
    if (calls[i].trace_at_plan) {
      calls[i].trace_at_plan = 0;
      loom_call_trace(&calls[i]);
    }
}

/* The calls of one task start and end together: one clock reading each
 * for all of them. */
void loom_calls_trace_started(loomComm_t comm, const struct loom_call *calls, int n,
                              const struct loom_posted *p) {
  uint64_t now = 0;
  for (int i = 0; i < n && comm->trace != NULL; i++)
    loom_trace_started_at(comm->trace, calls[i].trace_id, p->trace_plan, n, &now);
}

/* The time for the calls of calls[idx[0..m)) still to be recorded (run
 * directly), read or shared once for all of them: a reading of one taken
 * before another is recorded would not be after the earlier ones ended,
 * as the dump takes a shared reading's next own reading to be. */
static uint64_t p2p_record_clock(struct loom_trace *t, const struct loom_call *calls,
                                 const int *idx, int m, uint8_t *shared) {
  int quick = 1;
  for (int j = 0; j < m; j++)
    if (calls[idx[j]].trace_at_plan)
      quick &= loom_call_trace_small(&calls[idx[j]]);
  return loom_trace_issue_clock(t, quick, shared);
}

void loom_p2p_trace_started(loomComm_t comm, struct loom_call *calls, const int *idx, int m) {
  uint64_t now = 0, at = 0;
  uint8_t shared = 0;
  for (int j = 0; j < m && comm->trace != NULL; j++) {
    struct loom_call *c = &calls[idx[j]];
    /* this call alone: its peer and bytes */
    uint64_t plan = loom_trace_p2p_plan(comm->trace, c->root, c->is_send,
                                        c->count * loom_datatype_size(c->datatype));
    if (c->trace_at_plan) { /* run directly: recorded now, in one pass */
      if (at == 0)
        at = p2p_record_clock(comm->trace, calls, idx, m, &shared);
      struct loom_trace_call tc = loom_call_trace_of(c);
      c->trace_id = loom_trace_record_at(comm->trace, &tc, m, plan, at, shared);
      c->trace_at_plan = 0;
    } else {
      loom_trace_started_at(comm->trace, c->trace_id, plan, m, &now);
    }
  }
}

void loom_calls_trace_ended(loomComm_t comm, const struct loom_call *calls, int n,
                            loomResult_t res, int timed) {
  uint64_t now = 0;
  for (int i = 0; i < n && comm->trace != NULL; i++)
    loom_trace_ended_at(comm->trace, calls[i].trace_id, res, comm->engine.blamed, timed, &now);
}

void loom_p2p_trace_ended(loomComm_t comm, const struct loom_call *calls, const int *idx, int m,
                          loomResult_t res, int timed) {
  uint64_t now = 0;
  for (int j = 0; j < m && comm->trace != NULL; j++)
    loom_trace_ended_at(comm->trace, calls[idx[j]].trace_id, res, comm->engine.blamed, timed,
                        &now);
}

uint64_t loom_comm_trace_op(loomComm_t comm, int kind) {
  struct loom_trace_call tc = {.coll = (int16_t)kind, .datatype = -1, .op = -1, .root = -1};
  return loom_trace_record(comm->trace, &tc, 1, 0);
}

void loom_comm_trace_op_ended(loomComm_t comm, uint64_t id, loomResult_t res) {
  loom_trace_ended(comm->trace, id, res, comm->engine.blamed, 1);
}

static const char *reason_of(loomResult_t res) {
  switch (res) {
  case loomTimeout:
    return "timeout";
  case loomRemoteError:
    return "remote error";
  case loomInvalidUsage:
    return "invalid usage";
  default:
    return loomGetErrorString(res);
  }
}

/* Without a dump directory: the last few calls in the log. */
static void warn_recent(const struct loom_trace *t, const char *reason) {
  uint64_t total = loom_trace_recorded(t);
  char lines[1024] = "";
  size_t used = 0;
  for (uint64_t i = total > 4 ? total - 4 : 0; i < total && used < sizeof lines; i++) {
    const struct loom_trace_entry *en = &t->entries[i & t->mask];
    int k = snprintf(lines + used, sizeof lines - used, "\n  %s %s#%llu count %llu: %s",
                     loom_trace_coll_name(en->call.coll),
                     en->call.coll == LOOM_COLL_SENDRECV ? "p2p " : "",
                     (unsigned long long)en->seq, (unsigned long long)en->call.count,
                     loom_trace_state_name(atomic_load(&en->state)));
    used += k > 0 ? (size_t)k : 0;
  }
  LOOM_WARN(LOOM_LOG_COLL,
            "flight recorder (%s): comm %s rank %d, last calls:%s\n  (set LOOM_TRACE_DUMP_DIR for "
            "the whole record as JSON, and read every rank's with loom-trace)",
            reason, t->comm_id, t->rank, lines);
}

void loom_comm_trace_failed(loomComm_t comm, loomResult_t res, const char *reason) {
  struct loom_trace *t = comm->trace;
  if (t == NULL || loom_param_int(LOOM_PARAM_DUMP_ON_ERROR) == 0 ||
      atomic_exchange(&t->dumped, 1) != 0)
    return;
  if (reason == NULL)
    reason = reason_of(res);
  const char *dir = loom_param_str(LOOM_PARAM_TRACE_DUMP_DIR);
  if (dir == NULL || dir[0] == '\0') {
    warn_recent(t, reason);
    return;
  }
  char path[1200];
  if (loom_trace_dump(t, NULL, dir, reason, comm->async_text, path, sizeof path) != 0)
    LOOM_WARN(LOOM_LOG_COLL, "flight recorder: cannot write %s: %s", path, strerror(errno));
  else
    LOOM_INFO(LOOM_LOG_COLL, "flight recorder: %s written (%s)", path, reason);
}

loomResult_t loomCommDump(loomComm_t comm, const char *path) {
  static const char fn[] = "loomCommDump";
  if (comm == NULL || comm->magic != LOOM_COMM_MAGIC)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: comm is %s", fn, comm == NULL ? "NULL" : "not a live communicator");
  if (atomic_load(&comm->async_error) == loomInProgress)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL, "%s: rank %d: the communicator is still "
                      "initialising", fn, comm->rank);
  if (comm->trace == NULL)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: rank %d: the flight recorder is off (LOOM_TRACE_BUFFER=0)", fn,
                      comm->rank);
  const char *dir = loom_param_str(LOOM_PARAM_TRACE_DUMP_DIR);
  if (path == NULL && (dir == NULL || dir[0] == '\0'))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: path is NULL and LOOM_TRACE_DUMP_DIR is not set: give a file or a "
                      "directory to write to", fn);
  char written[1200];
  int broken = atomic_load(&comm->async_error) != loomSuccess;
  if (loom_trace_dump(comm->trace, path, dir, "request", broken ? comm->async_text : NULL,
                      written, sizeof written) != 0)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "%s: rank %d: cannot write %s: %s", fn,
                      comm->rank, written, strerror(errno));
  return loomSuccess;
}
