/*
 * agree.c — the agreement pass: a few one-element messages added to a
 * schedule so that no rank completes a call unless every rank made the
 * same call (the same fingerprint, engine/fingerprint.h).
 *
 * A rank whose part of a collective only sends (the root of a broadcast or
 * scatter, a leaf of a reduce or gather, a rank whose all-to-all-v counts
 * are all zero) would otherwise return success without reading anything
 * its peers sent: two ranks naming different roots both "succeeded" with
 * different data.  Two parts fix that:
 *
 *  - a header, first in the schedule and waiting for nothing: each rank
 *    sends one element to its ring successor and receives one from its
 *    predecessor.  If any two ranks' fingerprints differ, some pair of ring
 *    neighbours differs, and that receiver sees it at once (even where two
 *    ranks would otherwise both wait to receive, as two self-declared roots
 *    of a reduce do).
 *  - dissemination rounds after the data: in round k a rank sends to
 *    rank+2^k and receives from rank-2^k; the first send waits for all of
 *    the rank's receives (header and data), each later one for the round
 *    before.  A rank's last receive thus depends on every rank having
 *    received all it expected, with the size it expected (all-to-all-v
 *    counts, which no single fingerprint can hold, are checked there).
 *
 * A rank that sees a mismatch stops; the ranks waiting on it learn why from
 * the failure notice on the bootstrap ring, not from a timeout.
 */
#include "sched/schedule.h"

#include <string.h>

int loom_sched_agreement_rounds(int nranks) {
  int rounds = 0;
  for (int reach = 1; reach < nranks; reach *= 2)
    rounds++;
  return rounds + 1; /* and the header */
}

static void one_element(struct loom_step *p, int to, int from, size_t out, size_t in) {
  p->send_peer = to;
  p->send_buf = LOOM_BUF_SCRATCH;
  p->send_off = out;
  p->send_count = 1;
  p->recv_peer = from;
  p->recv_op = LOOM_RECV_COPY;
  p->recv_buf = LOOM_BUF_SCRATCH;
  p->recv_off = in;
  p->recv_count = 1;
}

/* Moves every step one place on and puts the header first. */
static int prepend_header(int rank, int nranks, size_t out, size_t in, struct loom_schedule *s) {
  loom_sched_add(s);
  if (s->overflow)
    return -1;
  memmove(&s->steps[1], &s->steps[0], sizeof s->steps[0] * (size_t)(s->nsteps - 1));
  for (int i = 1; i < s->nsteps; i++)
    if (s->steps[i].wait_step >= 0)
      s->steps[i].wait_step++;
  struct loom_step *h = &s->steps[0];
  memset(h, 0, sizeof *h);
  h->wait_step = -1;
  one_element(h, (rank + 1) % nranks, (rank + nranks - 1) % nranks, out, in);
  return 0;
}

int loom_sched_add_agreement(int rank, int nranks, struct loom_schedule *s) {
  size_t out = s->scratch_count, in = out + 1;
  if (prepend_header(rank, nranks, out, in, s) != 0)
    return -1;
  int wait = loom_sched_last_filled(s);
  for (int dist = 1; dist < nranks; dist *= 2) {
    struct loom_step *p = loom_sched_add(s);
    one_element(p, (rank + dist) % nranks, (rank - dist + nranks) % nranks, out, in);
    p->wait_step = wait;
    p->wait_all = 1;
    wait = s->nsteps - 1;
  }
  s->scratch_count += 2;
  return s->overflow ? -1 : 0;
}
