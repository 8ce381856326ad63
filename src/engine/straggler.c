/*
 * straggler.c — warning of a late rank before the timeout
 * (LOOM_STRAGGLER_WARN_MS; the field lesson: barrier timeouts caused by
 * uneven data loading).
 *
 * A rank whose collective has moved nothing for that long tells its
 * bootstrap-ring successor "I wait in call #S" (a LATE notice), and every
 * rank waiting in that call passes on what it hears.  A rank not in the
 * call yet says nothing and passes nothing on, so each waiting rank hears
 * from an unbroken run of ranks just before it on the ring: after a short
 * grace, it logs one WARN naming the first silent rank walking back from
 * its predecessor, the one that has not joined (as blame.c finds a stalled
 * rank at a timeout).  Nothing fails: the call goes on waiting, up to the
 * timeout.  Notices of another call are dropped, and bootstrap operations
 * skip any left over.
 */
#include "engine/engine_task.h"
#include "core/log.h"
#include "engine/fingerprint.h"
#include "sched/schedule.h"

#include <stdio.h>
#include <stdlib.h>

/* The grace after this rank's own notice: a quarter of the warning time,
 * at most 1 s (notices cross the ring in microseconds; ranks that entered
 * the call a little later send theirs a little later). */
static uint64_t grace_ns(const struct loom_engine *e) {
  uint64_t g = (uint64_t)e->straggler_warn_ms * 250000u;
  return g < 1000000000u ? g : 1000000000u;
}

static int watched(const struct loom_engine_task *r) {
  const struct loom_engine *e = r->e;
  return e->straggler_warn_ms > 0 && e->late_gen != NULL && e->nranks > 1 && !r->probing &&
         !loom_fp_is_sendrecv(r->op->fp);
}

void loom_straggler_heard(struct loom_engine_task *r, const struct loom_notice *nt) {
  struct loom_engine *e = r->e;
  if (r->done || !watched(r) || nt->reporter < 0 || nt->reporter >= e->nranks ||
      nt->reporter == e->rank || nt->reporter_fp[0] != r->op->fp[0] ||
      nt->reporter_fp[1] != r->op->fp[1] || e->late_gen[nt->reporter] == r->gen)
    return;
  e->late_gen[nt->reporter] = r->gen;
  if (nt->reporter != loom_ring_next(e->rank, e->nranks)) /* not all the way round */
    loom_bootstrap_send_notice(e->bs, nt);
}

/* The first rank upstream on the ring that has not said it waits in this
 * call; -1 when every other rank has. */
static int first_silent(const struct loom_engine_task *r) {
  const struct loom_engine *e = r->e;
  for (int i = 1; i < e->nranks; i++) {
    int q = (e->rank - i + e->nranks) % e->nranks;
    if (e->late_gen[q] != r->gen)
      return q;
  }
  return -1;
}

static void warn_now(struct loom_engine_task *r, uint64_t still_ns) {
  struct loom_engine *e = r->e;
  char call[128], text[400];
  loom_fp_text(r->op->fp, call, sizeof call);
  int late = first_silent(r);
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
    struct loom_notice mine = {.suspect = loom_engine_waited_peer(r), .reporter = e->rank,
                               .kind = LOOM_NOTICE_LATE,
                               .reporter_fp = {r->op->fp[0], r->op->fp[1]}};
    if (mine.suspect < 0)
      mine.suspect = e->rank;
    loom_bootstrap_send_notice(e->bs, &mine);
    e->late_gen[e->rank] = r->gen;
    r->straggle = 1;
  }
  if (r->straggle == 1 && still >= warn + grace_ns(e)) {
    warn_now(r, still);
    r->straggle = 2;
  }
}

uint64_t loom_straggler_due_ns(const struct loom_engine_task *r) {
  if (r->straggle == 2 || !watched(r))
    return UINT64_MAX;
  uint64_t due = (uint64_t)r->e->straggler_warn_ms * 1000000u +
                 (r->straggle == 1 ? grace_ns(r->e) : 0);
  uint64_t still = r->now - r->last_progress;
  return still >= due ? 0 : due - still;
}
