/*
 * ib_mr.h — the memory-registration cache of the ibverbs transport.
 *
 * Registering memory with the NIC pins it and costs tens of microseconds
 * per megabyte, so user buffers that a rendezvous reads or writes are
 * registered once and looked up afterwards:
 *   - a lookup hits when one registered range covers [addr, addr+len);
 *     a miss registers the page-aligned range through a callback (so the
 *     cache runs without a device in the unit tests);
 *   - idle entries (no transfer using them) are kept in LRU order and the
 *     least recently used are deregistered when the cache holds more than
 *     max_entries entries or max_bytes bytes; entries in use never are;
 *   - when registration fails (typically ENOMEM: the locked-memory limit),
 *     every idle entry is dropped and the registration tried once more;
 *   - ib_mr_invalidate(addr, len) drops every entry overlapping the range:
 *     call it before memory is unmapped or reused for another mapping.
 *     Entries still in use are deregistered when their transfer releases
 *     them.
 *
 * Limitation: the cache cannot see free()/munmap() by itself.  A buffer
 * freed and a new one mapped at the same address would hit a stale entry
 * whose pages are the old ones, and the NIC would move data to or from
 * memory the process no longer sees.  So an entry stays cached while idle
 * only when that cannot happen: its registration follows the mapping
 * (the device's On-Demand Paging, keys.follows_mapping), or a watch
 * callback promises to report unmapping.  Otherwise it is deregistered as
 * soon as its last transfer releases it (always correct; a registration
 * per large message).  loom_ib_mr_invalidate() lets code that knows a
 * range is going away drop it from every cache of the process.
 *
 * Every function is thread-safe (one lock per cache).
 */
#ifndef LOOM_TRANSPORT_IB_MR_H
#define LOOM_TRANSPORT_IB_MR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct ib_mr_keys {
  void *handle; /* what dereg gets back (struct ibv_mr * on a device) */
  uint32_t lkey, rkey;
  /* Set by reg when the registration follows the process's mapping (On-
   * Demand Paging): it cannot go stale, so it may stay cached while idle. */
  int follows_mapping;
};

struct ib_mr_ops {
  /* Registers [addr, addr+len); returns 0 or an errno value. */
  int (*reg)(void *arg, void *addr, size_t len, struct ib_mr_keys *out);
  void (*dereg)(void *arg, void *handle);
  /* Optional: told when a range enters the cache and when it leaves.
   * watch returns 0 when an unmapping of the range will be reported
   * (ib_mr_invalidate); otherwise the entry is deregistered as soon as it
   * is idle.  Without a watch callback every entry may stay idle (the
   * caller vouches for its memory: tests, the transport's own buffers). */
  int (*watch)(void *arg, void *addr, size_t len);
  void (*unwatch)(void *arg, void *addr, size_t len);
  void *arg;
};

struct ib_mr_entry {
  uintptr_t start, end; /* registered range, page-aligned */
  struct ib_mr_keys keys;
  int refs;
  int invalid; /* dropped from lookups; deregistered when refs reaches 0 */
  int keep_idle; /* may stay registered while idle (follows_mapping or watched) */
  int watched;   /* watch() accepted it: unwatch() when it goes */
  struct ib_mr_entry *prev, *next;
};

struct ib_mr_stats {
  uint64_t hits, misses, evictions, invalidations, failures;
};

struct ib_mr_cache {
  struct ib_mr_ops ops;
  size_t max_entries, max_bytes;
  size_t page;
  struct ib_mr_entry *head, *tail; /* valid entries, most recently used first */
  size_t nentries, bytes;
  struct ib_mr_entry *zombies; /* invalidated while in use */
  struct ib_mr_stats stats;
  pthread_mutex_t lock;
  struct ib_mr_cache *next_cache; /* the process-wide list */
};

/* 0, or an errno value.  The cache joins the process-wide list that
 * loom_ib_mr_invalidate() walks. */
int ib_mr_cache_init(struct ib_mr_cache *c, const struct ib_mr_ops *ops,
                     size_t max_entries, size_t max_bytes);
/* Deregisters everything (no entry may be in use) and leaves the list. */
void ib_mr_cache_fini(struct ib_mr_cache *c);

/* An entry covering [addr, addr+len), its reference taken: 0, EINVAL
 * (len 0 or the range wraps), or the errno of the failed registration. */
int ib_mr_acquire(struct ib_mr_cache *c, const void *addr, size_t len,
                  struct ib_mr_entry **out);
void ib_mr_release(struct ib_mr_cache *c, struct ib_mr_entry *e);
/* Drops every entry overlapping [addr, addr+len); returns how many. */
size_t ib_mr_invalidate(struct ib_mr_cache *c, const void *addr, size_t len);
struct ib_mr_stats ib_mr_cache_stats(struct ib_mr_cache *c);

/* ib_mr_invalidate on every cache of this process. */
size_t loom_ib_mr_invalidate(const void *addr, size_t len);

#endif
