/*
 * blame.c — who is to blame when a collective fails, agreed over the
 * bootstrap ring: a rank that sees a failure tells its successor, every
 * rank forwards what it hears, and a rank that times out first collects
 * "who waits on whom" edges to name the rank that really stopped, never
 * itself.  A mismatch names both calls; the lowest pair of ranks wins, so
 * every rank reports the same one.
 */
#include "engine/engine_task.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "engine/fingerprint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After a timeout, how long to listen for upstream notices naming the rank
 * that is really stuck. */
#define ENGINE_BLAME_GRACE_MS 1000
/* After a mismatch, how long to listen for a lower pair of ranks. */
#define ENGINE_MISMATCH_GRACE_MS 300

/* Whether `in` (not a timeout), just read from the ring predecessor,
 * should replace the diagnosis `nt`.  This rank's own diagnoses are
 * guesses: a timeout names the peer it waited on, which may itself be
 * waiting; a closed connection may belong to a peer that failed for another
 * reason.  A death or a mismatch seen upstream is certain; an abort is news
 * unless the predecessor already told us of a failure (then it is the
 * aftermath). */
static int better_diagnosis(const struct loom_notice *nt, const struct loom_notice *in,
                            int me, int heard_before) {
  if (nt->kind == LOOM_NOTICE_MISMATCH && in->kind == LOOM_NOTICE_MISMATCH) {
    /* Two calls at the same position that differ explain more than a
     * message left over from an earlier call; then the lowest pair. */
    int in_same = loom_fp_seq(in->suspect_fp) == loom_fp_seq(in->reporter_fp);
    int nt_same = loom_fp_seq(nt->suspect_fp) == loom_fp_seq(nt->reporter_fp);
    if (in_same != nt_same)
      return in_same;
    return in->reporter < nt->reporter ||
           (in->reporter == nt->reporter && in->suspect < nt->suspect);
  }
  int nt_guess = nt->reporter == me && nt->kind != LOOM_NOTICE_MISMATCH;
  if (in->kind == LOOM_NOTICE_MISMATCH) /* certain, even when it names this rank */
    return nt->kind != LOOM_NOTICE_MISMATCH;
  if (in->suspect == me || (in->suspect == nt->suspect && in->kind == nt->kind))
    return 0;
  if (in->reporter == me) /* our predecessor's socket closed: a guess too */
    return !heard_before && nt_guess && nt->kind == LOOM_NOTICE_TIMEOUT;
  switch (in->kind) {
  case LOOM_NOTICE_MISMATCH:
    return nt->kind != LOOM_NOTICE_MISMATCH;
  case LOOM_NOTICE_DIED:
    return nt_guess || nt->kind == LOOM_NOTICE_TIMEOUT || nt->kind == LOOM_NOTICE_ABORT ||
           nt->kind == LOOM_NOTICE_REVOKE;
  default: /* abort, revoke */
    return !heard_before && (nt_guess || nt->kind == LOOM_NOTICE_TIMEOUT);
  }
}

/* A mismatch is seen by both ranks of a pair, and by several pairs when
 * several ranks differ.  Every rank reports the lowest pair it hears of,
 * lower rank first as the reference ("rank S called X but rank R called
 * Y", R < S), so all ranks name the same first mismatching rank. */
static void orient_mismatch(struct loom_notice *nt) {
  if (nt->kind != LOOM_NOTICE_MISMATCH || nt->suspect > nt->reporter)
    return;
  int32_t r = nt->reporter;
  nt->reporter = nt->suspect;
  nt->suspect = r;
  uint64_t fp[2] = {nt->reporter_fp[0], nt->reporter_fp[1]};
  memcpy(nt->reporter_fp, nt->suspect_fp, sizeof fp);
  memcpy(nt->suspect_fp, fp, sizeof fp);
}

/* Timeouts are diagnosed from wait-for edges: every rank that times out
 * sends "I wait on X" to its ring successor and forwards the edges it
 * hears.  A rank that is not in the collective sends nothing and forwards
 * nothing, so each rank hears from an unbroken run of ranks just before it
 * on the ring: the first silent rank walking back from the predecessor is
 * the one that stopped.  The chain of edges from this rank explains it. */
struct wait_graph {
  int *waits_on; /* per rank, -1 = unknown */
  int n, me;
};

/* Follows the chain from this rank; writes it as text and returns its end. */
static int wait_chain_end(const struct wait_graph *g, char *text, size_t len, int *reporter) {
  int at = g->me, steps = 0;
  size_t o = (size_t)snprintf(text, len, "wait chain %d", at);
  *reporter = g->me;
  while (g->waits_on[at] >= 0 && steps++ < g->n) {
    *reporter = at;
    at = g->waits_on[at];
    if (o < len)
      o += (size_t)snprintf(text + o, len - o, " -> %d", at);
  }
  if (steps > g->n && o < len) /* a cycle: ranks waiting on each other */
    snprintf(text + o, len - o, " (a cycle: did ranks call collectives in different orders?)");
  return at;
}

/* Records an edge heard from upstream and passes it on (unless it came
 * from our successor, i.e. went all the way round).  Returns 1 if new. */
static int learn_edge(struct loom_engine *e, struct wait_graph *g, const struct loom_notice *in) {
  if (in->reporter == g->me || in->reporter >= g->n || g->waits_on[in->reporter] == in->suspect)
    return 0;
  g->waits_on[in->reporter] = in->suspect;
  if (in->reporter != loom_ring_next(e->rank, e->nranks))
    loom_bootstrap_send_notice(e->bs, in);
  return 1;
}

/* Names the rank at the end of the wait chain (or the first silent one
 * upstream) as the suspect of a timeout, and adds the chain to detail. */
static void timeout_verdict(struct loom_engine *e, const struct wait_graph *g,
                            struct loom_notice *nt, char *detail, size_t len) {
  char chain[200];
  int reporter, silent = -1;
  nt->suspect = wait_chain_end(g, chain, sizeof chain, &reporter);
  nt->reporter = reporter;
  for (int i = 1; i < e->nranks && silent < 0; i++) {
    int q = (e->rank - i + e->nranks) % e->nranks;
    if (g->waits_on[q] < 0)
      silent = q;
  }
  if (silent >= 0 && silent != nt->suspect) {
    snprintf(chain + strlen(chain), sizeof chain - strlen(chain),
             "; rank %d, upstream on the ring, reported no wait of its own", silent);
    nt->suspect = silent;
    nt->reporter = e->rank;
  }
  snprintf(detail + strlen(detail), len - strlen(detail), "%s%s", detail[0] ? "; " : "",
           chain);
}

/* The error the user sees, logged once. */
static loomResult_t report(const struct loom_engine_task *r, const struct loom_notice *nt,
                           const char *detail) {
  const struct loom_engine *e = r->e;
  const char *here = detail[0] ? "; here: " : "";
  if (nt->kind == LOOM_NOTICE_TIMEOUT && nt->suspect == e->rank) /* never blame ourselves */
    return loom_error(loomTimeout, LOOM_LOG_COLL,
                      "rank %d: %s timed out waiting on rank %d, and no rank is stalled on "
                      "its own: the ranks wait on each other, so they are probably in "
                      "different calls (different roots or peers, or collectives in "
                      "different orders)%s%s",
                      e->rank, r->op->name, loom_engine_waited_peer(r), here, detail);
  if (nt->kind == LOOM_NOTICE_MISMATCH && (nt->suspect_fp[0] | nt->reporter_fp[0]) != 0 &&
      (nt->suspect_fp[0] != nt->reporter_fp[0] || nt->suspect_fp[1] != nt->reporter_fp[1])) {
    char theirs[128], ours[128];
    loom_fp_text(nt->suspect_fp, theirs, sizeof theirs);
    loom_fp_text(nt->reporter_fp, ours, sizeof ours);
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "rank %d: %s failed: mismatched calls: rank %d called %s but rank %d "
                      "called %s (every rank must make the same collective calls in the "
                      "same order)",
                      e->rank, r->op->name, nt->suspect, theirs, nt->reporter, ours);
  }
  if (nt->kind == LOOM_NOTICE_MISMATCH) /* same call, different message sizes */
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "rank %d: %s failed: ranks %d and %d exchanged messages of different "
                      "sizes (mismatched counts, send/recv sizes or all-to-all-v counts)%s%s",
                      e->rank, r->op->name, nt->reporter, nt->suspect, here, detail);
  return loom_error(loom_notice_result(nt->kind), LOOM_LOG_COLL,
                    "rank %d: %s failed: rank %d %s (reported by rank %d)%s%s", e->rank,
                    r->op->name, nt->suspect, loom_notice_text(nt->kind), nt->reporter, here,
                    detail);
}

/* A rank that failed because another died exits, and closes its
 * connections too.  So when this rank's ring predecessor closed its
 * bootstrap connection earlier in this task than the connection of the
 * rank this one suspects, the predecessor's close is the first failure;
 * its own notice, sent to it, cannot come round (the ring breaks there).
 * Seen with 8 ranks: rank 5 killed, rank 4 names it and exits, and rank
 * 6, whose predecessor is 5, then sees rank 4's connection close. */
static void prefer_closed_predecessor(const struct loom_engine_task *r,
                                      struct loom_notice *nt, char *detail, size_t len) {
  const struct loom_engine *e = r->e;
  int pred = r->prev_gone_rank;
  if (nt->kind != LOOM_NOTICE_DIED || nt->reporter != e->rank || r->prev_gone_at == 0 ||
      pred < 0 || pred == nt->suspect || pred == e->rank)
    return;
  size_t o = strlen(detail);
  snprintf(detail + o, len - o,
           "%srank %d's connection closed after rank %d's bootstrap connection had, so rank "
           "%d is taken as the first to fail",
           o ? "; " : "", nt->suspect, pred, pred);
  nt->suspect = pred;
}

/* Ends the run with a failure blamed on nt.suspect and tells the ring.
 * Notices only come from the ring predecessor and are forwarded to the
 * successor, so every rank learns what upstream ranks found. */
loomResult_t loom_engine_fail(struct loom_engine_task *r, struct loom_notice nt,
                              const char *detail_in) {
  struct loom_engine *e = r->e;
  char detail[512] = "";
  if (detail_in != NULL) /* it may be the last-error buffer we overwrite below */
    snprintf(detail, sizeof detail, "%s", detail_in);
  prefer_closed_predecessor(r, &nt, detail, sizeof detail);
  int own = nt.reporter == e->rank;
  struct wait_graph g = {
      .waits_on = malloc(sizeof(int) * (size_t)e->nranks), .n = e->nranks, .me = e->rank};
  int timeout_mode = nt.kind == LOOM_NOTICE_TIMEOUT && g.waits_on != NULL;
  if (timeout_mode) {
    for (int i = 0; i < e->nranks; i++)
      g.waits_on[i] = -1;
    struct loom_notice mine = {.suspect = loom_engine_waited_peer(r), .reporter = e->rank,
                               .kind = LOOM_NOTICE_TIMEOUT};
    if (mine.suspect >= 0) {
      g.waits_on[e->rank] = mine.suspect;
      loom_bootstrap_send_notice(e->bs, &mine);
    }
    if (!own)
      learn_edge(e, &g, &nt);
  }
  /* A closed connection may be explained by upstream: wait briefly before
   * telling others; a timeout collects edges for a while. */
  int certain = !own || nt.kind == LOOM_NOTICE_MISMATCH;
  orient_mismatch(&nt);
  int grace_ms = timeout_mode                        ? ENGINE_BLAME_GRACE_MS
                 : nt.kind == LOOM_NOTICE_MISMATCH ? ENGINE_MISMATCH_GRACE_MS
                 : certain                           ? 0
                                                     : 200;
  int sent = timeout_mode;
  if (certain && !timeout_mode) {
    loom_bootstrap_send_notice(e->bs, &nt);
    sent = 1;
  }
  uint64_t grace_end = loom_deadline_ms(grace_ms);
  int heard = !own;
  struct loom_notice in;
  while (grace_ms > 0 && loom_ms_left(grace_end) > 0 &&
         loom_bootstrap_read_notice(e->bs, loom_ms_left(grace_end), &in) > 0) {
    /* its socket closed (or our own notice came round): nothing more comes */
    int prev_gone = in.kind == LOOM_NOTICE_DIED && in.reporter == e->rank;
    if (in.kind == LOOM_NOTICE_LATE)
      continue; /* a warning, not a diagnosis */
    if (in.kind == LOOM_NOTICE_TIMEOUT && !prev_gone) {
      if (timeout_mode)
        learn_edge(e, &g, &in);
    } else {
      orient_mismatch(&in);
      if (better_diagnosis(&nt, &in, e->rank, heard)) {
        int was_mismatch = nt.kind == LOOM_NOTICE_MISMATCH;
        nt = in;
        timeout_mode = 0;
        sent = 0;
        if (was_mismatch) { /* pass the lower pair on while still listening */
          loom_bootstrap_send_notice(e->bs, &nt);
          sent = 1;
        }
      }
    }
    heard = 1;
    if (prev_gone)
      break;
  }
  if (timeout_mode)
    timeout_verdict(e, &g, &nt, detail, sizeof detail);
  free(g.waits_on);
  if (!sent)
    loom_bootstrap_send_notice(e->bs, &nt);
  e->blamed = nt.suspect;
  return report(r, &nt, detail);
}
