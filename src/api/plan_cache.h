/*
 * plan_cache.h — the schedules of a communicator's last call shapes, so a
 * training loop's repeated calls are not planned again each time.  A
 * schedule depends only on the shape (collective, count, element size,
 * root) and on what the communicator fixed at init (ranks, topology,
 * LOOM_ALGO/LOOM_PROTO, tune file, links, chunk size, channels), never on
 * the buffers, so a cached one is exactly what planning would give.
 * All-to-all(-v) calls, whose schedules depend on their count arrays, are
 * not cached.
 */
#ifndef LOOM_PLAN_CACHE_H
#define LOOM_PLAN_CACHE_H

#include <stddef.h>

#include "core/coll.h"
#include "sched/schedule.h"
#include <stdint.h>

#define LOOM_PLAN_CACHE_ENTRIES 4

/* The collective and the root share one word, written by one store (see
 * loom_plan_key_make): the lookup compares them with one 8-byte load,
 * which two 4-byte stores just before would stall (no store forwarding
 * from two stores into one load: 70 % of the lookup's samples in a
 * one-rank 8 B all-reduce). */
struct loom_plan_key {
  uint64_t shape; /* (uint32_t)coll << 32 | (uint32_t)root */
  size_t count, elem_size;
};

static inline struct loom_plan_key loom_plan_key_make(enum loom_coll coll, int root,
                                                      size_t count, size_t elem_size) {
  struct loom_plan_key k = {.shape = (uint64_t)(uint32_t)coll << 32 | (uint32_t)root,
                            .count = count, .elem_size = elem_size};
  return k;
}

struct loom_plan_entry {
  struct loom_plan_key key;
  const char *algo;              /* NULL: empty */
  struct loom_schedule sched;    /* its steps below, not the caller's */
  struct loom_step *steps;
  int steps_cap;
  uint64_t note; /* the caller's number for this plan (the flight recorder's), 0 until set */
};

struct loom_plan_cache {
  struct loom_plan_entry entry[LOOM_PLAN_CACHE_ENTRIES];
  int next; /* the entry replaced next */
};

/* On a hit, copies the cached schedule into *out (whose steps array, of
 * out->cap entries, receives the steps), points *note at the entry's note
 * (valid until the next put) and returns its algorithm's name; NULL on a
 * miss. */
const char *loom_plan_cache_get(struct loom_plan_cache *pc, const struct loom_plan_key *key,
                                struct loom_schedule *out, uint64_t **note);
/* Keeps a copy of schedule s planned for key and returns its note (0,
 * valid until the next put); best effort: out of memory keeps nothing
 * and returns NULL. */
uint64_t *loom_plan_cache_put(struct loom_plan_cache *pc, const struct loom_plan_key *key,
                              const char *algo, const struct loom_schedule *s);
void loom_plan_cache_free(struct loom_plan_cache *pc);

#endif /* LOOM_PLAN_CACHE_H */
