/*
 * alloc_table.h — a table of live allocations sorted by address, for the
 * backends that must say which allocation holds a pointer (bounds for the
 * argument checks, loomMemFree refusing foreign pointers).  Callers hold
 * the table's lock around find/insert; take and bounds lock themselves.
 */
#ifndef LOOM_DEVICE_ALLOC_TABLE_H
#define LOOM_DEVICE_ALLOC_TABLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct loom_alloc {
  uintptr_t base; /* the address handed out */
  size_t bytes;   /* as asked: the bounds checked */
  size_t span;    /* the address range it takes (>= bytes) */
  void *storage;  /* backend's: where the bytes live (sim), or NULL */
  int fd;         /* backend's: the file behind storage, or -1 */
  int imported;   /* opened from another process's IPC handle: not loomMemFree's */
};

struct loom_alloc_table {
  pthread_mutex_t lock;
  struct loom_alloc *v;
  int n, cap;
};

#define LOOM_ALLOC_TABLE_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* Index of the allocation whose span holds p, or -1. */
int loom_alloc_find(const struct loom_alloc_table *t, uintptr_t p);
/* Inserts a at index `at` (keeping the order): 0, or -1 out of memory. */
int loom_alloc_insert(struct loom_alloc_table *t, const struct loom_alloc *a, int at);
/* Index where an allocation at `base` belongs. */
int loom_alloc_slot(const struct loom_alloc_table *t, uintptr_t base);
/* Locks, and removes the allocation starting exactly at base into *out
 * when its `imported` flag is `imported`: 0, or -1 when there is none
 * such (so loomMemFree never frees an opened IPC handle, nor IPC close a
 * loomMemAlloc allocation). */
int loom_alloc_take(struct loom_alloc_table *t, uintptr_t base, int imported,
                    struct loom_alloc *out);
/* Locks, looks p up and fills base/bytes: 1 when found, else 0. */
int loom_alloc_bounds(struct loom_alloc_table *t, const void *p, uintptr_t *base,
                      size_t *bytes);

#endif
