/*
 * common/mr_cache.c — the memory-registration cache (behaviour in common/mr_cache.h): lookup
 * by covering range, LRU eviction of idle entries by count and bytes,
 * invalidation of overlapping ranges, and the process-wide list of caches.
 *
 * Lookups scan the LRU list: the cache holds a few hundred entries at
 * most, and the most recently used (the engine's buffers) come first.
 */
#include "common/mr_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loom_mr_cache *caches;

int loom_mr_cache_init(struct loom_mr_cache *c, const struct loom_mr_ops *ops,
                     size_t max_entries, size_t max_bytes) {
  if (ops == NULL || ops->reg == NULL || ops->dereg == NULL)
    return EINVAL;
  *c = (struct loom_mr_cache){.ops = *ops, .max_entries = max_entries, .max_bytes = max_bytes};
  long page = sysconf(_SC_PAGESIZE);
  c->page = page > 0 ? (size_t)page : 4096;
  int rc = pthread_mutex_init(&c->lock, NULL);
  if (rc != 0)
    return rc;
  pthread_mutex_lock(&caches_lock);
  c->next_cache = caches;
  caches = c;
  pthread_mutex_unlock(&caches_lock);
  return 0;
}

static void lru_unlink(struct loom_mr_cache *c, struct loom_mr_entry *e) {
  if (e->prev != NULL)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next != NULL)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
  c->nentries--;
  c->bytes -= e->end - e->start;
}

static void lru_push_front(struct loom_mr_cache *c, struct loom_mr_entry *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head != NULL)
    c->head->prev = e;
  else
    c->tail = e;
  c->head = e;
  c->nentries++;
  c->bytes += e->end - e->start;
}

static void destroy_entry(struct loom_mr_cache *c, struct loom_mr_entry *e) {
  if (e->watched && c->ops.unwatch != NULL)
    c->ops.unwatch(c->ops.arg, (void *)e->start, e->end - e->start);
  c->ops.dereg(c->ops.arg, e->keys.handle);
  free(e);
}

/* Deregisters idle entries, least recently used first, while the cache
 * is over its bounds (all of them with force). */
static void trim(struct loom_mr_cache *c, int force) {
  struct loom_mr_entry *e = c->tail;
  while (e != NULL && (force || c->nentries > c->max_entries || c->bytes > c->max_bytes)) {
    struct loom_mr_entry *prev = e->prev;
    if (e->refs == 0) {
      lru_unlink(c, e);
      destroy_entry(c, e);
      c->stats.evictions++;
    }
    e = prev;
  }
}

static struct loom_mr_entry *lookup(struct loom_mr_cache *c, uintptr_t a, uintptr_t b) {
  for (struct loom_mr_entry *e = c->head; e != NULL; e = e->next)
    if (e->start <= a && b <= e->end)
      return e;
  return NULL;
}

int loom_mr_acquire(struct loom_mr_cache *c, const void *addr, size_t len,
                  struct loom_mr_entry **out) {
  uintptr_t a = (uintptr_t)addr;
  if (len == 0 || a + len < a)
    return EINVAL;
  uintptr_t b = a + len;
  pthread_mutex_lock(&c->lock);
  struct loom_mr_entry *e = lookup(c, a, b);
  if (e != NULL) {
    c->stats.hits++;
    if (e != c->head) { /* most recently used first */
      lru_unlink(c, e);
      lru_push_front(c, e);
    }
    e->refs++;
    *out = e;
    pthread_mutex_unlock(&c->lock);
    return 0;
  }
  c->stats.misses++;
  e = calloc(1, sizeof *e);
  if (e == NULL) {
    pthread_mutex_unlock(&c->lock);
    return ENOMEM;
  }
  e->start = a & ~(uintptr_t)(c->page - 1);
  e->end = (b + c->page - 1) & ~(uintptr_t)(c->page - 1);
  if (e->end < b) { /* rounding up wrapped */
    free(e);
    pthread_mutex_unlock(&c->lock);
    return EINVAL;
  }
  int rc = c->ops.reg(c->ops.arg, (void *)e->start, e->end - e->start, &e->keys);
  if (rc != 0 && c->nentries > 0) {
    /* Pinned memory is limited: give back what no transfer uses, retry. */
    trim(c, 1);
    rc = c->ops.reg(c->ops.arg, (void *)e->start, e->end - e->start, &e->keys);
  }
  if (rc != 0) {
    c->stats.failures++;
    free(e);
    pthread_mutex_unlock(&c->lock);
    return rc;
  }
  if (c->ops.watch != NULL)
    e->watched = c->ops.watch(c->ops.arg, (void *)e->start, e->end - e->start) == 0;
  e->keep_idle = e->keys.follows_mapping || c->ops.watch == NULL || e->watched;
  e->refs = 1;
  lru_push_front(c, e);
  trim(c, 0);
  *out = e;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

static void zombie_remove(struct loom_mr_cache *c, struct loom_mr_entry *e) {
  for (struct loom_mr_entry **p = &c->zombies; *p != NULL; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      return;
    }
}

void loom_mr_release(struct loom_mr_cache *c, struct loom_mr_entry *e) {
  pthread_mutex_lock(&c->lock);
  if (--e->refs == 0) {
    if (e->invalid) {
      zombie_remove(c, e);
      destroy_entry(c, e);
    } else if (!e->keep_idle) {
      lru_unlink(c, e); /* an unmapping would go unseen: never kept idle */
      destroy_entry(c, e);
      c->stats.evictions++;
    } else {
      trim(c, 0);
    }
  }
  pthread_mutex_unlock(&c->lock);
}

size_t loom_mr_invalidate(struct loom_mr_cache *c, const void *addr, size_t len) {
  uintptr_t a = (uintptr_t)addr, b = a + len;
  if (len == 0)
    return 0;
  if (b < a)
    b = UINTPTR_MAX;
  size_t n = 0;
  pthread_mutex_lock(&c->lock);
  struct loom_mr_entry *e = c->head;
  while (e != NULL) {
    struct loom_mr_entry *next = e->next;
    if (e->start < b && a < e->end) { /* overlaps */
      lru_unlink(c, e);
      n++;
      c->stats.invalidations++;
      if (e->refs == 0) {
        destroy_entry(c, e);
      } else {
        e->invalid = 1;
        e->next = c->zombies;
        c->zombies = e;
      }
    }
    e = next;
  }
  pthread_mutex_unlock(&c->lock);
  return n;
}

struct loom_mr_stats loom_mr_cache_stats(struct loom_mr_cache *c) {
  pthread_mutex_lock(&c->lock);
  struct loom_mr_stats s = c->stats;
  pthread_mutex_unlock(&c->lock);
  return s;
}

size_t loom_mr_cache_in_use(struct loom_mr_cache *c) {
  size_t n = 0;
  pthread_mutex_lock(&c->lock);
  for (struct loom_mr_entry *e = c->head; e != NULL; e = e->next)
    n += e->refs > 0;
  for (struct loom_mr_entry *e = c->zombies; e != NULL; e = e->next)
    n++; /* invalidated while in use */
  pthread_mutex_unlock(&c->lock);
  return n;
}

void loom_mr_cache_fini(struct loom_mr_cache *c) {
  pthread_mutex_lock(&caches_lock);
  for (struct loom_mr_cache **p = &caches; *p != NULL; p = &(*p)->next_cache)
    if (*p == c) {
      *p = c->next_cache;
      break;
    }
  pthread_mutex_unlock(&caches_lock);
  pthread_mutex_lock(&c->lock);
  while (c->head != NULL) {
    struct loom_mr_entry *e = c->head;
    lru_unlink(c, e);
    destroy_entry(c, e);
  }
  while (c->zombies != NULL) {
    struct loom_mr_entry *e = c->zombies;
    c->zombies = e->next;
    destroy_entry(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_destroy(&c->lock);
}

size_t loom_mr_in_use_all(void) {
  size_t n = 0;
  pthread_mutex_lock(&caches_lock);
  for (struct loom_mr_cache *c = caches; c != NULL; c = c->next_cache)
    n += loom_mr_cache_in_use(c);
  pthread_mutex_unlock(&caches_lock);
  return n;
}

size_t loom_mr_invalidate_all(const void *addr, size_t len) {
  size_t n = 0;
  pthread_mutex_lock(&caches_lock);
  for (struct loom_mr_cache *c = caches; c != NULL; c = c->next_cache)
    n += loom_mr_invalidate(c, addr, len);
  pthread_mutex_unlock(&caches_lock);
  return n;
}
