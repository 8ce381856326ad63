/*
 * mr_cache.h — the memory-registration cache of the RDMA transports
 * (ibverbs and ofi share it; registration itself goes through callbacks).
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
 *   - loom_mr_invalidate(addr, len) drops every entry overlapping the range:
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
 * per large message).  loom_mr_invalidate_all() lets code that knows a
 * range is going away drop it from every cache of the process.
 *
 * Every function is thread-safe (one lock per cache).
 */
#ifndef LOOM_TRANSPORT_COMMON_MR_CACHE_H
#define LOOM_TRANSPORT_COMMON_MR_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct loom_mr_keys {
  void *handle; /* what dereg gets back (struct ibv_mr *, struct fid_mr *) */
  void *desc;   /* ofi: the local descriptor (fi_mr_desc); ibverbs: unused */
  uint32_t lkey, rkey;
  /* Set by reg when the registration follows the process's mapping (On-
   * Demand Paging): it cannot go stale, so it may stay cached while idle. */
  int follows_mapping;
};

struct loom_mr_ops {
  /* Registers [addr, addr+len); returns 0 or an errno value. */
  int (*reg)(void *arg, void *addr, size_t len, struct loom_mr_keys *out);
  void (*dereg)(void *arg, void *handle);
  /* Optional: told when a range enters the cache and when it leaves.
   * watch returns 0 when an unmapping of the range will be reported
   * (loom_mr_invalidate); otherwise the entry is deregistered as soon as it
   * is idle.  Without a watch callback every entry may stay idle (the
   * caller vouches for its memory: tests, the transport's own buffers). */
  int (*watch)(void *arg, void *addr, size_t len);
  void (*unwatch)(void *arg, void *addr, size_t len);
  void *arg;
};

struct loom_mr_entry {
  uintptr_t start, end; /* registered range, page-aligned */
  struct loom_mr_keys keys;
  int refs;
  int invalid; /* dropped from lookups; deregistered when refs reaches 0 */
  int keep_idle; /* may stay registered while idle (follows_mapping or watched) */
  int watched;   /* watch() accepted it: unwatch() when it goes */
  struct loom_mr_entry *prev, *next;
};

struct loom_mr_stats {
  uint64_t hits, misses, evictions, invalidations, failures;
};

struct loom_mr_cache {
  struct loom_mr_ops ops;
  size_t max_entries, max_bytes;
  size_t page;
  struct loom_mr_entry *head, *tail; /* valid entries, most recently used first */
  size_t nentries, bytes;
  struct loom_mr_entry *zombies; /* invalidated while in use */
  struct loom_mr_stats stats;
  pthread_mutex_t lock;
  struct loom_mr_cache *next_cache; /* the process-wide list */
};

/* 0, or an errno value.  The cache joins the process-wide list that
 * loom_mr_invalidate_all() walks. */
int loom_mr_cache_init(struct loom_mr_cache *c, const struct loom_mr_ops *ops,
                     size_t max_entries, size_t max_bytes);
/* Deregisters everything (no entry may be in use) and leaves the list. */
void loom_mr_cache_fini(struct loom_mr_cache *c);

/* An entry covering [addr, addr+len), its reference taken: 0, EINVAL
 * (len 0 or the range wraps), or the errno of the failed registration. */
int loom_mr_acquire(struct loom_mr_cache *c, const void *addr, size_t len,
                  struct loom_mr_entry **out);
void loom_mr_release(struct loom_mr_cache *c, struct loom_mr_entry *e);
/* Drops every entry overlapping [addr, addr+len); returns how many. */
size_t loom_mr_invalidate(struct loom_mr_cache *c, const void *addr, size_t len);
struct loom_mr_stats loom_mr_cache_stats(struct loom_mr_cache *c);
/* How many entries are in use (a transfer holds them), in this cache and
 * in every cache of the process: the locked-memory limit is the process's,
 * so when registration fails for want of it while some are, waiting for
 * them to be released can succeed; when none are, it cannot. */
size_t loom_mr_cache_in_use(struct loom_mr_cache *c);
size_t loom_mr_in_use_all(void);

/* loom_mr_invalidate on every cache of this process. */
size_t loom_mr_invalidate_all(const void *addr, size_t len);

#endif
