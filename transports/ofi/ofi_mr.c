/*
 * ofi_mr.c — the registration cache: user buffers registered once and
 * reused while they stay among the most recently used (ofi.h says what it
 * cannot see).  The register and deregister calls are given, so that the
 * cache is tested without a fabric.
 */
#include "ofi/ofi.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uintptr_t page_bytes(void) {
  static uintptr_t page;
  if (page == 0) {
    long p = sysconf(_SC_PAGESIZE);
    page = p > 0 ? (uintptr_t)p : 4096;
  }
  return page;
}

int ofi_mr_cache_init(struct ofi_mr_cache *c, int cap, ofi_mr_reg_fn reg,
                      ofi_mr_dereg_fn dereg, void *arg) {
  memset(c, 0, sizeof *c);
  if (cap < 1)
    cap = 1;
  c->entries = calloc((size_t)cap, sizeof *c->entries);
  if (c->entries == NULL)
    return -1;
  c->cap = cap;
  c->reg = reg;
  c->dereg = dereg;
  c->arg = arg;
  return 0;
}

static void release(struct ofi_mr_cache *c, struct ofi_mr_entry *e) {
  c->dereg(c->arg, e->handle);
  free(e);
}

static void remove_at(struct ofi_mr_cache *c, int i) {
  c->entries[i] = c->entries[--c->count];
  c->entries[c->count] = NULL;
}

/* Evicts the least recently used idle entry; -1 when all are in use. */
static int evict_one(struct ofi_mr_cache *c) {
  int victim = -1;
  for (int i = 0; i < c->count; i++)
    if (c->entries[i]->refs == 0 &&
        (victim < 0 || c->entries[i]->last_use < c->entries[victim]->last_use))
      victim = i;
  if (victim < 0)
    return -1;
  struct ofi_mr_entry *e = c->entries[victim];
  remove_at(c, victim);
  release(c, e);
  c->evictions++;
  return 0;
}

struct ofi_mr_entry *ofi_mr_cache_get(struct ofi_mr_cache *c, const void *buf, size_t len) {
  uintptr_t lo = (uintptr_t)buf, hi = lo + (len ? len : 1);
  for (int i = 0; i < c->count; i++) {
    struct ofi_mr_entry *e = c->entries[i];
    if (e->start <= lo && hi <= e->end) {
      e->refs++;
      e->last_use = ++c->clock;
      c->hits++;
      return e;
    }
  }
  c->misses++;
  uintptr_t page = page_bytes();
  struct ofi_mr_entry *e = calloc(1, sizeof *e);
  if (e == NULL)
    return NULL;
  e->start = lo & ~(page - 1);
  e->end = (hi + page - 1) & ~(page - 1);
  if (c->reg(c->arg, (void *)e->start, e->end - e->start, &e->handle, &e->desc) != 0) {
    free(e);
    return NULL;
  }
  e->refs = 1;
  e->last_use = ++c->clock;
  if (c->count == c->cap && evict_one(c) != 0)
    return e; /* every entry in use: this one lives until its put */
  e->cached = 1;
  c->entries[c->count++] = e;
  return e;
}

void ofi_mr_cache_put(struct ofi_mr_cache *c, struct ofi_mr_entry *e) {
  if (e == NULL || --e->refs > 0)
    return;
  if (!e->cached || e->stale)
    release(c, e);
}

void ofi_mr_cache_invalidate(struct ofi_mr_cache *c, const void *buf, size_t len) {
  uintptr_t lo = (uintptr_t)buf, hi = lo + (len ? len : 1);
  for (int i = 0; i < c->count;) {
    struct ofi_mr_entry *e = c->entries[i];
    if (e->start < hi && lo < e->end) {
      remove_at(c, i);
      if (e->refs == 0) {
        release(c, e);
      } else {
        e->stale = 1; /* the operation using it still needs it */
        e->cached = 0;
      }
      continue;
    }
    i++;
  }
}

void ofi_mr_cache_fini(struct ofi_mr_cache *c) {
  for (int i = 0; i < c->count; i++)
    release(c, c->entries[i]);
  free(c->entries);
  memset(c, 0, sizeof *c);
}
