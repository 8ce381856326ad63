/*
 * sim_mem.c — the simulated device's memory (sim.h): an address range
 * reserved PROT_NONE once per process, carved into page-aligned
 * allocations (first fit), each backed by its own memfd mapped read-write
 * elsewhere.  The allocations are a device/alloc_table.h table (storage
 * and fd kept in each entry); translation looks an address up in it.
 */
#include "device/sim/sim.h"
#include "device/alloc_table.h"
#include "device/memfd_ipc.h"
#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIM_RESERVE_BYTES (64ull << 30) /* address space only: nothing is committed */

static struct {
  struct loom_alloc_table t;
  pthread_once_t once;
  uintptr_t base; /* 0: the reservation failed */
} mem = {.t = LOOM_ALLOC_TABLE_INIT, .once = PTHREAD_ONCE_INIT};

static void reserve_range(void) {
  void *p = mmap(NULL, SIM_RESERVE_BYTES, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  mem.base = p == MAP_FAILED ? 0 : (uintptr_t)p;
}

int loom_sim_in_range(const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  return mem.base != 0 && p >= mem.base && p < mem.base + SIM_RESERVE_BYTES;
}

/* The first gap of `span` bytes in the range, and the index to insert at
 * (lock held); 0 when the range is full. */
static uintptr_t first_fit(size_t span, int *at) {
  uintptr_t next = mem.base;
  for (int i = 0; i < mem.t.n; i++) {
    if (mem.t.v[i].base - next >= span) {
      *at = i;
      return next;
    }
    next = mem.t.v[i].base + mem.t.v[i].span;
  }
  *at = mem.t.n;
  return mem.base + SIM_RESERVE_BYTES - next >= span ? next : 0;
}

static loomResult_t make_storage(struct loom_alloc *a) {
  return loom_memfd_create("loom-sim-device", a->span, "loomMemAlloc(sim)", &a->fd);
}

loomResult_t loom_sim_map_and_place(struct loom_alloc *a, const char *fn, void **ptr) {
  a->storage = mmap(NULL, a->span, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
  if (a->storage == MAP_FAILED) {
    loomResult_t res = loom_error(loomSystemError, LOOM_LOG_INIT, "%s(sim): mapping %zu bytes: %s",
                                  fn, a->span, strerror(errno));
    close(a->fd);
    return res;
  }
  loomResult_t res = loom_sim_place(a, fn);
  if (res != loomSuccess) {
    loom_sim_release(a);
    return res;
  }
  *ptr = (void *)a->base;
  return loomSuccess;
}

void loom_sim_release(const struct loom_alloc *a) {
  munmap(a->storage, a->span);
  close(a->fd);
}

static loomResult_t reserve(const char *fn) {
  pthread_once(&mem.once, reserve_range);
  if (mem.base == 0)
    return loom_error(loomSystemError, LOOM_LOG_INIT,
                      "%s(sim): cannot reserve the simulated device's %llu GiB of address "
                      "space (ulimit -v?)", fn, SIM_RESERVE_BYTES >> 30);
  return loomSuccess;
}

loomResult_t loom_sim_place(struct loom_alloc *a, const char *fn) {
  LOOM_CHECK(reserve(fn));
  pthread_mutex_lock(&mem.t.lock);
  int at = 0;
  a->base = first_fit(a->span, &at);
  if (a->base != 0 && loom_alloc_insert(&mem.t, a, at) != 0)
    a->base = 0;
  pthread_mutex_unlock(&mem.t.lock);
  if (a->base == 0)
    return loom_error(loomSystemError, LOOM_LOG_INIT,
                      "%s(sim): %zu bytes do not fit in the simulated device", fn, a->bytes);
  return loomSuccess;
}

int loom_sim_unplace(uintptr_t base, int imported, struct loom_alloc *out) {
  return loom_sim_in_range((void *)base) ? loom_alloc_take(&mem.t, base, imported, out) : -1;
}

int loom_sim_lookup(const void *ptr, struct loom_alloc *out) {
  pthread_mutex_lock(&mem.t.lock);
  int i = loom_sim_in_range(ptr) ? loom_alloc_find(&mem.t, (uintptr_t)ptr) : -1;
  if (i >= 0)
    *out = mem.t.v[i];
  pthread_mutex_unlock(&mem.t.lock);
  return i >= 0;
}

loomResult_t loom_sim_alloc(void **ptr, size_t bytes) {
  LOOM_CHECK(reserve("loomMemAlloc"));
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  struct loom_alloc a = {.bytes = bytes, .span = (bytes + page - 1) / page * page};
  if (a.span < bytes || a.span == 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomMemAlloc(sim): %zu bytes", bytes);
  LOOM_CHECK(make_storage(&a));
  return loom_sim_map_and_place(&a, "loomMemAlloc", ptr);
}

loomResult_t loom_sim_free(void *ptr) {
  struct loom_alloc a;
  if (loom_sim_unplace((uintptr_t)ptr, 0, &a) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomMemFree: %p is not the start of a live simulated-device allocation",
                      ptr);
  loom_sim_release(&a);
  return loomSuccess;
}

int loom_sim_classify(const void *ptr, uintptr_t *base, size_t *size) {
  if (!loom_sim_in_range(ptr))
    return 0;
  if (!loom_alloc_bounds(&mem.t, ptr, base, size)) {
    *base = (uintptr_t)ptr;
    *size = 0;
  }
  return 1;
}

void *loom_sim_translate(const void *ptr, size_t bytes, const char **why) {
  if (!loom_sim_in_range(ptr))
    return (void *)ptr;
  void *out = NULL;
  pthread_mutex_lock(&mem.t.lock);
  int i = loom_alloc_find(&mem.t, (uintptr_t)ptr);
  if (i < 0) {
    *why = "not in a live allocation (freed, or never allocated)";
  } else {
    const struct loom_alloc *a = &mem.t.v[i];
    size_t off = (uintptr_t)ptr - a->base;
    if (off > a->bytes || bytes > a->bytes - off)
      *why = "past the end of its allocation";
    else
      out = (char *)a->storage + off;
  }
  pthread_mutex_unlock(&mem.t.lock);
  return out;
}
