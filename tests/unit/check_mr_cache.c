/*
 * check_mr_cache — the registration cache the RDMA transports share
 * (transports/common/mr_cache.c), with registration through fake
 * callbacks: hits on covered ranges, LRU eviction by count and bytes,
 * entries in use never evicted, invalidation, failures, watching.
 */
#include "common/mr_cache.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the registration cache ------------------------------------------------- */

struct fake_reg {
  int regs, deregs, fail_next, fail_always, watch_fails, odp;
  int watches, unwatches;
  uint32_t next_key;
  void *last_addr;
  size_t last_len;
};

static int fake_reg_cb(void *arg, void *addr, size_t len, struct loom_mr_keys *out) {
  struct fake_reg *f = arg;
  if (f->fail_always || f->fail_next) {
    f->fail_next = 0;
    return ENOMEM;
  }
  f->regs++;
  f->last_addr = addr;
  f->last_len = len;
  out->handle = (void *)(uintptr_t)(++f->next_key);
  out->lkey = f->next_key;
  out->rkey = f->next_key | 0x80000000u;
  out->follows_mapping = f->odp;
  return 0;
}

static void fake_dereg_cb(void *arg, void *handle) {
  struct fake_reg *f = arg;
  (void)handle;
  f->deregs++;
}

static int fake_watch_cb(void *arg, void *addr, size_t len) {
  struct fake_reg *f = arg;
  (void)addr, (void)len;
  f->watches++;
  return f->watch_fails ? -1 : 0;
}

static void fake_unwatch_cb(void *arg, void *addr, size_t len) {
  struct fake_reg *f = arg;
  (void)addr, (void)len;
  f->unwatches++;
}

static void cache_new(struct loom_mr_cache *c, struct fake_reg *f, size_t max_entries,
                      size_t max_bytes) {
  memset(f, 0, sizeof *f);
  struct loom_mr_ops ops = {.reg = fake_reg_cb, .dereg = fake_dereg_cb, .arg = f};
  ck_assert_int_eq(loom_mr_cache_init(c, &ops, max_entries, max_bytes), 0);
}

#define PG 4096u
static char *page_base(void) {
  static char *mem;
  if (mem == NULL)
    ck_assert_int_eq(posix_memalign((void **)&mem, 1 << 20, 64 * PG), 0);
  return mem;
}

START_TEST(mr_hit_on_covered_subrange) {
  struct loom_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct loom_mr_entry *e1, *e2, *e3;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 100, 3 * PG, &e1), 0);
  ck_assert_int_eq(f.regs, 1);
  /* Registered page-aligned: [m, m + 4 pages). */
  ck_assert_ptr_eq(f.last_addr, m);
  ck_assert_uint_eq(f.last_len, 4 * PG);
  ck_assert_int_eq(loom_mr_acquire(&c, m + PG, 2 * PG, &e2), 0); /* inside */
  ck_assert_ptr_eq(e2, e1);
  ck_assert_int_eq(loom_mr_acquire(&c, m, 4 * PG, &e3), 0); /* exactly the range */
  ck_assert_ptr_eq(e3, e1);
  ck_assert_int_eq(f.regs, 1);
  ck_assert_int_eq(e1->refs, 3);
  struct loom_mr_stats s = loom_mr_cache_stats(&c);
  ck_assert(s.hits == 2 && s.misses == 1);
  loom_mr_release(&c, e1);
  loom_mr_release(&c, e2);
  loom_mr_release(&c, e3);
  ck_assert_int_eq(f.deregs, 0); /* kept idle */
  loom_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, 1);
}
END_TEST

START_TEST(mr_miss_on_partial_overlap) {
  struct loom_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct loom_mr_entry *a, *b, *z;
  ck_assert_int_eq(loom_mr_acquire(&c, m, 2 * PG, &a), 0);
  ck_assert_int_eq(loom_mr_acquire(&c, m + PG, 2 * PG, &b), 0); /* sticks out */
  ck_assert_ptr_ne(a, b);
  ck_assert_int_eq(f.regs, 2);
  ck_assert_int_eq(loom_mr_acquire(&c, m, 0, &z), EINVAL);
  ck_assert_int_eq(loom_mr_acquire(&c, (void *)(UINTPTR_MAX - 10), 100, &z), EINVAL);
  loom_mr_release(&c, a);
  loom_mr_release(&c, b);
  loom_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, 2);
}
END_TEST

START_TEST(mr_lru_eviction_order) {
  struct loom_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 3, 1 << 30);
  char *m = page_base();
  struct loom_mr_entry *e[5];
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(loom_mr_acquire(&c, m + (size_t)i * 2 * PG, PG, &e[i]), 0);
    loom_mr_release(&c, e[i]);
  }
  /* Touch entry 0: entry 1 becomes the least recently used. */
  struct loom_mr_entry *t;
  ck_assert_int_eq(loom_mr_acquire(&c, m, 10, &t), 0);
  ck_assert_ptr_eq(t, e[0]);
  loom_mr_release(&c, t);
  ck_assert_int_eq(loom_mr_acquire(&c, m + 6 * PG, PG, &e[3]), 0); /* a fourth: evicts 1 */
  loom_mr_release(&c, e[3]);
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_uint_eq(c.nentries, 3);
  ck_assert_int_eq(loom_mr_acquire(&c, m + 2 * PG, PG, &t), 0); /* entry 1's range: a miss */
  ck_assert_int_eq(f.regs, 5);
  loom_mr_release(&c, t); /* evicts entry 2, now the oldest */
  ck_assert_int_eq(loom_mr_acquire(&c, m, PG, &t), 0); /* entry 0 still there */
  ck_assert_int_eq(f.regs, 5);
  loom_mr_release(&c, t);
  ck_assert_int_eq(loom_mr_acquire(&c, m + 4 * PG, PG, &t), 0); /* entry 2: gone */
  ck_assert_int_eq(f.regs, 6);
  loom_mr_release(&c, t);
  ck_assert(loom_mr_cache_stats(&c).evictions == 3);
  loom_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, f.regs);
}
END_TEST

START_TEST(mr_eviction_by_bytes_spares_entries_in_use) {
  struct loom_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 100, 4 * PG);
  char *m = page_base();
  struct loom_mr_entry *a, *b, *d;
  ck_assert_int_eq(loom_mr_acquire(&c, m, 3 * PG, &a), 0);        /* 3 pages, held */
  ck_assert_int_eq(loom_mr_acquire(&c, m + 8 * PG, 3 * PG, &b), 0); /* 6 > 4: a and b held */
  ck_assert_int_eq(f.deregs, 0);
  ck_assert_uint_eq(c.bytes, 6 * PG);
  loom_mr_release(&c, a); /* idle now and over the bound: goes */
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_uint_eq(c.bytes, 3 * PG);
  ck_assert_int_eq(loom_mr_acquire(&c, m + 16 * PG, PG, &d), 0); /* 4 pages: fits */
  loom_mr_release(&c, d);
  loom_mr_release(&c, b);
  ck_assert_int_eq(f.deregs, 1);
  loom_mr_cache_fini(&c);
}
END_TEST

START_TEST(mr_invalidate_overlapping) {
  struct loom_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct loom_mr_entry *e[4];
  for (int i = 0; i < 4; i++) { /* [0,2) [4,6) [8,10) [12,14) pages */
    ck_assert_int_eq(loom_mr_acquire(&c, m + (size_t)i * 4 * PG, 2 * PG, &e[i]), 0);
    if (i != 2)
      loom_mr_release(&c, e[i]);
  }
  /* [5, 9) pages overlaps entries 1 and 2 (2 still in use), not 0 or 3; the
   * process-wide entry point reaches this cache too. */
  ck_assert_uint_eq(loom_mr_invalidate_all(m + 5 * PG, 4 * PG), 2);
  ck_assert_int_eq(f.deregs, 1); /* entry 1 now; entry 2 when released */
  struct loom_mr_entry *t;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 8 * PG, PG, &t), 0); /* a miss now */
  ck_assert_ptr_ne(t, e[2]);
  ck_assert_int_eq(f.regs, 5);
  loom_mr_release(&c, e[2]);
  ck_assert_int_eq(f.deregs, 2);
  loom_mr_release(&c, t);
  /* A range touching no entry, and the byte just past one, invalidate nothing. */
  ck_assert_uint_eq(loom_mr_invalidate(&c, m + 2 * PG, 2 * PG), 0);
  ck_assert_uint_eq(loom_mr_invalidate(&c, m + 14 * PG, 1), 0);
  ck_assert_uint_eq(loom_mr_invalidate(&c, m + 14 * PG - 1, 1), 1);
  ck_assert_uint_eq(loom_mr_invalidate(&c, m, 0), 0);
  ck_assert(loom_mr_cache_stats(&c).invalidations == 3);
  loom_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, f.regs);
}
END_TEST

START_TEST(mr_registration_failure) {
  struct loom_mr_cache c;
  struct fake_reg f;
  cache_new(&c, &f, 16, 1 << 30);
  char *m = page_base();
  struct loom_mr_entry *idle, *held, *t = NULL;
  ck_assert_int_eq(loom_mr_acquire(&c, m, PG, &idle), 0);
  loom_mr_release(&c, idle);
  ck_assert_int_eq(loom_mr_acquire(&c, m + 4 * PG, PG, &held), 0);
  /* The first attempt fails (pinned-memory limit): idle entries are
   * dropped, held ones kept, and the retry succeeds. */
  f.fail_next = 1;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 8 * PG, PG, &t), 0);
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_uint_eq(c.nentries, 2);
  loom_mr_release(&c, t);
  /* Failing for good: the errno comes back, nothing is cached or leaked. */
  f.fail_always = 1;
  t = NULL;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 12 * PG, PG, &t), ENOMEM);
  ck_assert_ptr_null(t);
  ck_assert_uint_eq(c.nentries, 1); /* the held one */
  ck_assert(loom_mr_cache_stats(&c).failures == 1);
  f.fail_always = 0;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 12 * PG, PG, &t), 0);
  loom_mr_release(&c, t);
  loom_mr_release(&c, held);
  loom_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, f.regs);
}
END_TEST

/* Without a watch on unmapping, an idle entry would go stale unseen: the
 * cache then deregisters each entry as soon as its transfer releases it. */
START_TEST(mr_unwatched_entries_not_kept) {
  struct loom_mr_cache c;
  struct fake_reg f;
  memset(&f, 0, sizeof f);
  struct loom_mr_ops ops = {.reg = fake_reg_cb, .dereg = fake_dereg_cb, .watch = fake_watch_cb,
                          .unwatch = fake_unwatch_cb, .arg = &f};
  ck_assert_int_eq(loom_mr_cache_init(&c, &ops, 16, 1 << 30), 0);
  char *m = page_base();
  struct loom_mr_entry *a, *b;
  ck_assert_int_eq(loom_mr_acquire(&c, m, PG, &a), 0); /* watched */
  f.watch_fails = 1;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 4 * PG, PG, &b), 0); /* not watched */
  ck_assert_int_eq(f.watches, 2);
  loom_mr_release(&c, a);
  loom_mr_release(&c, b);
  ck_assert_int_eq(f.deregs, 1); /* b, at once */
  ck_assert_int_eq(f.unwatches, 0);
  /* A registration that follows the mapping (On-Demand Paging) cannot go
   * stale: kept idle even without a watch. */
  f.odp = 1;
  struct loom_mr_entry *d;
  ck_assert_int_eq(loom_mr_acquire(&c, m + 8 * PG, PG, &d), 0);
  loom_mr_release(&c, d);
  ck_assert_int_eq(f.deregs, 1);
  ck_assert_int_eq(loom_mr_acquire(&c, m + 8 * PG, 100, &d), 0); /* a hit */
  ck_assert_int_eq(f.regs, 3);
  loom_mr_release(&c, d);
  loom_mr_cache_fini(&c);
  ck_assert_int_eq(f.deregs, 3);
  ck_assert_int_eq(f.unwatches, 1); /* a's watch ended with it */
}
END_TEST

static Suite *mr_suite(void) {
  Suite *s = suite_create("mr_cache");
  TCase *tc = tcase_create("mr");
  tcase_add_test(tc, mr_hit_on_covered_subrange);
  tcase_add_test(tc, mr_miss_on_partial_overlap);
  tcase_add_test(tc, mr_lru_eviction_order);
  tcase_add_test(tc, mr_eviction_by_bytes_spares_entries_in_use);
  tcase_add_test(tc, mr_invalidate_overlapping);
  tcase_add_test(tc, mr_registration_failure);
  tcase_add_test(tc, mr_unwatched_entries_not_kept);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(mr_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
