/*
 * trace_record.h — the flight recorder's per-call updates (included by
 * trace.h, which says who writes what): inline, since every collective
 * runs them, and reading the clock only where the time is news.
 */
#ifndef LOOM_TRACE_RECORD_H
#define LOOM_TRACE_RECORD_H

#include "core/coll.h"
#include "core/timeutil.h"
#include "trace/trace.h" /* the types (it includes this file at its end) */

/* Real time, coarse: a few ns a reading; its tick is in the dump. */
static inline uint64_t loom_trace_clock(void) { return loom_clock_ns(CLOCK_REALTIME_COARSE); }

/* Calls run at once that move little (a small call recorded as started)
 * share clock readings while they come faster than the clock ticks: up
 * to this many in a row take the last reading, for as long as the last
 * two readings were the same.  A shared reading is before the call
 * started, and the next entry's own reading after it ended (the calls
 * are issued one after another by one thread, and each returns when
 * done): the dump gives both. */
#define LOOM_TRACE_CLOCK_SHARES 15u

/* The time for a call being recorded (quick: a small call run at once);
 * *shared says whether it is an earlier call's reading. */
static inline uint64_t loom_trace_issue_clock(struct loom_trace *t, int quick, uint8_t *shared) {
  if (quick && t->clock_shares < LOOM_TRACE_CLOCK_SHARES) {
    t->clock_shares++;
    *shared = 1;
    return t->clock_ns;
  }
  uint64_t now = loom_trace_clock();
  /* the clock ticked since the last reading: calls may be far apart, so
   * the next one reads it too */
  t->clock_shares = now == t->clock_ns ? 0 : LOOM_TRACE_CLOCK_SHARES;
  t->clock_ns = now;
  *shared = 0;
  return now;
}

/* The slot of record id, or NULL when the ring has moved past it. */
static inline struct loom_trace_entry *loom_trace_slot(struct loom_trace *t, uint64_t id) {
  if (t == NULL || id == 0)
    return NULL;
  struct loom_trace_entry *en = &t->entries[(id - 1) & t->mask];
  return atomic_load_explicit(&en->id, memory_order_relaxed) == id ? en : NULL;
}

/* Records a call: queued (started == 0: issued, to start later on a
 * stream or in a group's batch), or started with its plan (an id from
 * loom_trace_plan_add; 0: none) as one of `started` calls sharing a task:
 * a communicator call, or a call run at once (a send and a receive of a
 * group run directly share one), recorded once planned, so in one pass.
 * `now` is its time, from loom_trace_issue_clock (`shared` as it says).
 * Returns its id for the updates below (0: t is NULL). */
static inline uint64_t loom_trace_record_at(struct loom_trace *t, const struct loom_trace_call *c,
                                            int started, uint64_t plan, uint64_t now,
                                            uint8_t shared) {
  if (t == NULL)
    return 0;
  int p2p = c->coll == LOOM_COLL_SENDRECV;
  /* A communicator's calls are issued by one thread at a time (loom.h), so
   * a plain add: a dump reading it at the same time sees one value or the
   * other. */
  uint64_t before = atomic_load_explicit(&t->counts, memory_order_relaxed);
  atomic_store_explicit(&t->counts, before + (p2p ? 1ull << 32 : 1ull), memory_order_relaxed);
  uint64_t id = (before & 0xffffffffu) + (before >> 32) + 1;
  struct loom_trace_entry *en = &t->entries[(id - 1) & t->mask];
  atomic_store_explicit(&en->id, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* a reader that sees the new fields sees 0 */
  en->seq = (uint32_t)(p2p ? before >> 32 : before & 0xffffffffu);
  en->call = *c;
  en->clock_shared = shared;
  atomic_store_explicit(&en->t_queued, now, memory_order_relaxed);
  if (started) {
    en->plan = plan;
    en->fused = (uint16_t)(started < UINT16_MAX ? started : UINT16_MAX);
    atomic_store_explicit(&en->t_started, now, memory_order_relaxed);
  }
  atomic_store_explicit(&en->state, started ? LOOM_TRACE_STARTED : LOOM_TRACE_QUEUED,
                        memory_order_relaxed);
  atomic_store_explicit(&en->id, id, memory_order_release);
  /* the next call's entry, into the cache while this call runs */
  const char *next = (const char *)&t->entries[id & t->mask];
  __builtin_prefetch(next, 1, 3);
  __builtin_prefetch(next + 64, 1, 3);
  return id;
}

/* loom_trace_record_at with the call's own time: shared with earlier
 * calls when it is small and started (run at once). */
static inline uint64_t loom_trace_record(struct loom_trace *t, const struct loom_trace_call *c,
                                         int started, uint64_t plan) {
  if (t == NULL)
    return 0;
  uint8_t shared;
  uint64_t now = loom_trace_issue_clock(t, started && c->small, &shared);
  return loom_trace_record_at(t, c, started, plan, now, shared);
}

/* The clock for the calls of one task, read at most once: *now is 0
 * until the first of them needs it. */
static inline uint64_t loom_trace_task_clock(uint64_t *now) {
  if (*now == 0)
    *now = loom_trace_clock();
  return *now;
}

/* A queued call's task was posted: its plan, and the calls sharing the
 * task; *now (0: not read yet) is the task's start time, shared by its
 * calls. */
static inline void loom_trace_started_at(struct loom_trace *t, uint64_t id, uint64_t plan,
                                         int fused, uint64_t *now) {
  struct loom_trace_entry *en = loom_trace_slot(t, id);
  if (en == NULL)
    return;
  en->plan = plan;
  en->fused = (uint16_t)(fused < UINT16_MAX ? fused : UINT16_MAX);
  atomic_store_explicit(&en->t_started, loom_trace_task_clock(now), memory_order_relaxed);
  atomic_store_explicit(&en->state, LOOM_TRACE_STARTED, memory_order_release);
}

static inline void loom_trace_started(struct loom_trace *t, uint64_t id, uint64_t plan,
                                      int fused) {
  uint64_t now = 0;
  loom_trace_started_at(t, id, plan, fused, &now);
}

/* The call's task ended with res (blamed: the rank a failure names, -1).
 * The clock is read for a failure, for a call that is not small, and
 * when `timed` (its task waited long, or a batch's task held other calls
 * too; a group run directly is one quick task); otherwise
 * the call ended a moment after it started, and its start time, at the
 * coarse clock's resolution, is its end time.  *now (0: not read yet) is
 * the task's end, shared by its calls. */
static inline void loom_trace_ended_at(struct loom_trace *t, uint64_t id, loomResult_t res,
                                       int blamed, int timed, uint64_t *now) {
  struct loom_trace_entry *en = loom_trace_slot(t, id);
  if (en == NULL)
    return;
  int ok = res == loomSuccess;
  if (!ok) { /* the dump shows these for a failure only */
    atomic_store_explicit(&en->result, res, memory_order_relaxed);
    atomic_store_explicit(&en->blamed, blamed, memory_order_relaxed);
  }
  uint64_t end = timed || !ok || !en->call.small
                     ? loom_trace_task_clock(now)
                     : atomic_load_explicit(&en->t_started, memory_order_relaxed);
  atomic_store_explicit(&en->t_ended, end, memory_order_relaxed);
  atomic_store_explicit(&en->state, ok ? LOOM_TRACE_FINISHED : LOOM_TRACE_FAILED,
                        memory_order_release);
}

static inline void loom_trace_ended(struct loom_trace *t, uint64_t id, loomResult_t res,
                                    int blamed, int timed) {
  uint64_t now = 0;
  loom_trace_ended_at(t, id, res, blamed, timed, &now);
}

#endif
