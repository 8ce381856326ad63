/*
 * schedule.c — building schedules: storage, steps, blocks.  The builders
 * (ring.c, tree.c, ...) add steps without checking for room; a schedule
 * that ran out of it says so in its overflow flag, which loom_plan, the
 * engine and loom-sim refuse, so a truncated schedule never runs.
 */
#include "sched/schedule.h"

#include <stddef.h>
#include <string.h>

/* The sink is cleared when used, so only what precedes it is reset, by a
 * copy of an empty schedule, which the compiler inlines as a few vector
 * moves: a memset of the whole struct became a `rep stos` that cost about
 * 10 % of a one-rank 8-byte all-reduce (every call plans). */
_Static_assert(offsetof(struct loom_schedule, sink) + sizeof(struct loom_step) ==
                   sizeof(struct loom_schedule),
               "the sink must be the schedule's last member");
static const struct loom_schedule empty_schedule;

void loom_sched_init(struct loom_schedule *s, struct loom_step *steps, int cap) {
  memcpy(s, &empty_schedule, offsetof(struct loom_schedule, sink));
  s->steps = steps;
  s->cap = cap;
}

void loom_sched_reset(struct loom_schedule *s) {
  s->nsteps = 0;
  memset(&s->copy, 0, sizeof s->copy);
  memset(&s->fold, 0, sizeof s->fold);
  s->scratch_count = 0;
  s->slice_bytes = 0;
  s->overflow = 0;
}

static void step_clear(struct loom_step *p) {
  memset(p, 0, sizeof *p);
  p->send_peer = p->recv_peer = p->wait_step = -1;
}

struct loom_step *loom_sched_add(struct loom_schedule *s) {
  if (s->nsteps >= s->cap) {
    s->overflow = 1;
    step_clear(&s->sink);
    return &s->sink;
  }
  struct loom_step *p = &s->steps[s->nsteps++];
  step_clear(p);
  return p;
}

void loom_sched_copy_whole(struct loom_schedule *s, size_t count) {
  s->copy.from_buf = LOOM_BUF_SEND;
  s->copy.to_buf = LOOM_BUF_RECV;
  s->copy.from_off = s->copy.to_off = 0;
  s->copy.count = count;
}

int loom_sched_last_filled(const struct loom_schedule *s) {
  for (int i = s->nsteps - 1; i >= 0; i--)
    if (s->steps[i].recv_peer >= 0 && s->steps[i].recv_count > 0)
      return i;
  return -1;
}

void loom_sched_block(size_t count, int n, int b, size_t *off, size_t *cnt) {
  size_t base = count / (size_t)n, rem = count % (size_t)n, ub = (size_t)b;
  *cnt = base + (ub < rem ? 1 : 0);
  *off = ub * base + (ub < rem ? ub : rem);
}

void loom_sched_split(size_t count, int n, size_t *off, size_t *cnt) {
  for (int b = 0; b < n; b++)
    loom_sched_block(count, n, b, &off[b], &cnt[b]);
}
