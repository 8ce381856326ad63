/*
 * alloc_table.c — live allocations sorted by address (alloc_table.h):
 * binary search to find, memmove to insert and remove.
 */
#include "device/alloc_table.h"

#include <stdlib.h>
#include <string.h>

int loom_alloc_find(const struct loom_alloc_table *t, uintptr_t p) {
  int lo = 0, hi = t->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    const struct loom_alloc *a = &t->v[mid];
    if (p < a->base)
      hi = mid - 1;
    else if (p - a->base >= a->span)
      lo = mid + 1;
    else
      return mid;
  }
  return -1;
}

int loom_alloc_slot(const struct loom_alloc_table *t, uintptr_t base) {
  int lo = 0, hi = t->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->v[mid].base < base)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int loom_alloc_insert(struct loom_alloc_table *t, const struct loom_alloc *a, int at) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 64;
    struct loom_alloc *v = realloc(t->v, sizeof *v * (size_t)cap);
    if (v == NULL)
      return -1;
    t->v = v;
    t->cap = cap;
  }
  memmove(&t->v[at + 1], &t->v[at], sizeof *a * (size_t)(t->n - at));
  t->v[at] = *a;
  t->n++;
  return 0;
}

int loom_alloc_take(struct loom_alloc_table *t, uintptr_t base, int imported,
                    struct loom_alloc *out) {
  pthread_mutex_lock(&t->lock);
  int i = loom_alloc_find(t, base);
  int found = i >= 0 && t->v[i].base == base && t->v[i].imported == imported;
  if (found) {
    *out = t->v[i];
    memmove(&t->v[i], &t->v[i + 1], sizeof *out * (size_t)(t->n - i - 1));
    t->n--;
  }
  pthread_mutex_unlock(&t->lock);
  return found ? 0 : -1;
}

int loom_alloc_bounds(struct loom_alloc_table *t, const void *p, uintptr_t *base,
                      size_t *bytes) {
  pthread_mutex_lock(&t->lock);
  int i = loom_alloc_find(t, (uintptr_t)p);
  if (i >= 0) {
    *base = t->v[i].base;
    *bytes = t->v[i].bytes;
  }
  pthread_mutex_unlock(&t->lock);
  return i >= 0;
}
