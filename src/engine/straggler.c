/*
 * straggler.c — warning of a late rank before the timeout
 * (LOOM_STRAGGLER_WARN_MS; the field lesson: barrier timeouts caused by
 * uneven data loading).
 *
 * A rank whose collective has moved nothing for that long tells its
 * bootstrap-ring successor "k ranks in a row, ending with me, wait in call
 * #S" (a LATE notice; k = 1 + what its predecessor told it), and a waiting
 * rank that hears a larger k from its predecessor says so at once.  A rank
 * not in the call says nothing, so after a short grace each waiting rank
 * names the rank k + 1 back on the ring: the one that has not joined (as
 * blame.c finds a stalled rank at a timeout).  Each rank sends a notice
 * only when its k grows, so an event costs a few frames per link, not
 * one per rank per link.  Nothing fails: the call goes on waiting, up to the
 * timeout.  Notices of another call are dropped, and bootstrap operations
 * skip any left over.
 */
#include "engine/engine_task.h"
#include "core/log.h"
#include "engine/fingerprint.h"
#include "sched/schedule.h"

#include <stdio.h>

/* The grace after this rank's own warning time before it warns: a
 * quarter of the warning time, at most 1 s (announcements cross the ring
 * in microseconds; ranks that entered the call a little later reach their
 * own warning time a little later). */
static uint64_t grace_ns(const struct loom_engine *e) {
  uint64_t g = (uint64_t)e->straggler_warn_ms * 250000u;
  return g < 1000000000u ? g : 1000000000u;
}

static int watched(const struct loom_engine_task *r) {
  const struct loom_engine *e = r->e;
  return e->straggler_warn_ms > 0 && e->nranks > 1 && !r->probing &&
         !loom_fp_is_sendrecv(r->op->fp);
}

/* Tells the successor how many ranks in a row, ending with this one, wait
 * in this call, when that is more than it was last told. */
static void announce(struct loom_engine_task *r) {
  struct loom_engine *e = r->e;
  int run = r->heard_run + 1;
  if (run > e->nranks)
    run = e->nranks;
  if (run <= r->sent_run)
    return;
  struct loom_notice mine = {.suspect = run, .reporter = e->rank, .kind = LOOM_NOTICE_LATE,
                             .reporter_fp = {r->op->fp[0], r->op->fp[1]}};
  loom_bootstrap_send_notice(e->bs, &mine);
  r->sent_run = run;
}

void loom_straggler_heard(struct loom_engine_task *r, const struct loom_notice *nt) {
  struct loom_engine *e = r->e;
  if (r->done || !watched(r) || nt->reporter != loom_ring_prev(e->rank, e->nranks) ||
      nt->reporter_fp[0] != r->op->fp[0] || nt->reporter_fp[1] != r->op->fp[1] ||
      nt->suspect <= r->heard_run)
    return; /* about another call, or nothing new */
  r->heard_run = nt->suspect < e->nranks ? nt->suspect : e->nranks;
  if (r->straggle == 0)
    r->straggle = 1; /* waiting here too: say so at once, not at our own time */
  announce(r);
}

static void warn_now(struct loom_engine_task *r, uint64_t still_ns) {
  struct loom_engine *e = r->e;
  char call[128], text[400];
  loom_fp_text(r->op->fp, call, sizeof call);
  /* the ranks just upstream that wait: heard_run of them; the next one
   * back has not joined */
  int late = r->heard_run >= e->nranks - 1 ? -1
                                           : (e->rank - r->heard_run - 1 + e->nranks) % e->nranks;
  int waited_ms = (int)(still_ns / 1000000u);
  if (late >= 0)
    snprintf(text, sizeof text,
             "rank %d: %s has waited %d ms for rank %d, which has not joined it "
             "(LOOM_STRAGGLER_WARN_MS=%d; a warning: the call goes on waiting up to the "
             "timeout)",
             e->rank, call, waited_ms, late, e->straggler_warn_ms);
  else
    snprintf(text, sizeof text,
             "rank %d: %s has waited %d ms; every rank has joined it, and rank %d, which "
             "this rank waits on, has sent nothing since (LOOM_STRAGGLER_WARN_MS=%d)",
             e->rank, call, waited_ms, loom_engine_waited_peer(r), e->straggler_warn_ms);
  LOOM_WARN(LOOM_LOG_COLL, "%s", text);
  if (e->on_late != NULL)
    e->on_late(e->on_late_arg, late, text);
}

void loom_straggler_check(struct loom_engine_task *r) {
  struct loom_engine *e = r->e;
  if (r->straggle == 2 || !watched(r))
    return;
  uint64_t still = r->now - r->last_progress;
  uint64_t warn = (uint64_t)e->straggler_warn_ms * 1000000u;
  if (r->straggle == 0 && still >= warn) {
    r->straggle = 1;
    announce(r);
  }
  if (r->straggle == 1 && still >= warn + grace_ns(e)) {
    warn_now(r, still);
    r->straggle = 2;
  }
}

uint64_t loom_straggler_due_ns(const struct loom_engine_task *r) {
  if (r->straggle == 2 || !watched(r))
    return UINT64_MAX;
  uint64_t due = (uint64_t)r->e->straggler_warn_ms * 1000000u + grace_ns(r->e);
  if (r->straggle == 0)
    due -= grace_ns(r->e);
  uint64_t still = r->now - r->last_progress;
  return still >= due ? 0 : due - still;
}
