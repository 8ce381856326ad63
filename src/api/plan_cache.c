/*
 * plan_cache.c — the schedules of a communicator's last call shapes (see
 * plan_cache.h).  A few entries, replaced round robin: a loop alternates
 * between a handful of shapes (buckets, a barrier), and a miss costs one
 * planning plus a copy.
 */
#include "api/plan_cache.h"

#include <stdlib.h>
#include <stddef.h>
#include <string.h>

static int same_key(const struct loom_plan_key *a, const struct loom_plan_key *b) {
  return a->shape == b->shape && a->count == b->count && a->elem_size == b->elem_size;
}

const char *loom_plan_cache_get(struct loom_plan_cache *pc, const struct loom_plan_key *key,
                                struct loom_schedule *out, uint64_t **note) {
  for (int i = 0; i < LOOM_PLAN_CACHE_ENTRIES; i++) {
    struct loom_plan_entry *e = &pc->entry[i];
    if (e->algo == NULL || !same_key(&e->key, key) || e->sched.nsteps > out->cap)
      continue;
    struct loom_step *steps = out->steps;
    int cap = out->cap;
    /* all but the sink (schedule.c: the last member, cleared when used) */
    memcpy(out, &e->sched, offsetof(struct loom_schedule, sink));
    out->steps = steps;
    out->cap = cap;
    if (e->sched.nsteps > 0) /* a 1-rank call has none, and maybe no array */
      memcpy(steps, e->steps, sizeof *steps * (size_t)e->sched.nsteps);
    *note = &e->note;
    return e->algo;
  }
  return NULL;
}

uint64_t *loom_plan_cache_put(struct loom_plan_cache *pc, const struct loom_plan_key *key,
                              const char *algo, const struct loom_schedule *s) {
  struct loom_plan_entry *e = &pc->entry[pc->next];
  pc->next = (pc->next + 1) % LOOM_PLAN_CACHE_ENTRIES;
  e->algo = NULL;
  if (s->nsteps > e->steps_cap) {
    struct loom_step *grown = realloc(e->steps, sizeof *grown * (size_t)s->nsteps);
    if (grown == NULL)
      return NULL;
    e->steps = grown;
    e->steps_cap = s->nsteps;
  }
  if (s->nsteps > 0)
    memcpy(e->steps, s->steps, sizeof *e->steps * (size_t)s->nsteps);
  e->sched = *s;
  e->sched.steps = NULL;
  e->sched.cap = 0;
  e->key = *key;
  e->algo = algo;
  e->note = 0;
  return &e->note;
}

void loom_plan_cache_free(struct loom_plan_cache *pc) {
  for (int i = 0; i < LOOM_PLAN_CACHE_ENTRIES; i++)
    free(pc->entry[i].steps);
  memset(pc, 0, sizeof *pc);
}
