/*
 * check_oplock.c — unit tests of the operation lock (src/core/oplock.h),
 * with its releases as plain stores (membarrier) and as fenced exchanges:
 * mutual exclusion under contention (an exact count), and a sleeper woken
 * by the release rather than by its nap's bound.  Two races are too
 * narrow to provoke here, so neither is tested: the one the barrier
 * closes (a release that reads the count of sleepers before a sleeper's
 * increment is seen), and a release reading the lock after another
 * thread took and freed it (why the count is the process's).
 */
#include "core/oplock.h"
#include "check_run.h"

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COUNT_THREADS 4
#define COUNT_EACH 100000
/* A woken sleeper takes well under this; one left to its nap's bound
 * (100 ms) does not. */
#define WAKE_BOUND_NS 80000000ull
#define WAKE_ROUNDS 20

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

struct counted {
  struct loom_oplock lock;
  uint64_t count; /* plain: only the lock keeps increments apart */
};

static void *count_under_lock(void *arg) {
  struct counted *c = arg;
  for (int i = 0; i < COUNT_EACH; i++) {
    loom_oplock_lock(&c->lock);
    uint64_t v = c->count;
    if (i % 64 == 0)
      sched_yield(); /* a holder that loses its core: the others sleep */
    c->count = v + 1;
    loom_oplock_unlock(&c->lock);
  }
  return NULL;
}

/* Sets the release kind; says so when plain stores are not available. */
static void set_release(int plain) {
  if (loom_oplock_test_plain_release(plain) != plain)
    fprintf(stderr, "check_oplock: membarrier is not available here: the plain-release "
                    "case runs with fenced releases\n");
}

static void check_counts(int plain) {
  set_release(plain);
  struct counted c = {.count = 0};
  loom_oplock_init(&c.lock);
  pthread_t t[COUNT_THREADS];
  for (int i = 0; i < COUNT_THREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, count_under_lock, &c), 0);
  for (int i = 0; i < COUNT_THREADS; i++)
    pthread_join(t[i], NULL);
  ck_assert_uint_eq(c.count, (uint64_t)COUNT_THREADS * COUNT_EACH);
  ck_assert_uint_eq(atomic_load(&c.lock.held), 0);
  ck_assert_uint_eq(atomic_load(&loom_oplock_process.sleepers), 0);
  loom_oplock_test_plain_release(1);
}

START_TEST(test_counts_plain_release) { check_counts(1); }
END_TEST

START_TEST(test_counts_fenced_release) { check_counts(0); }
END_TEST

struct handoff {
  struct loom_oplock lock;
  _Atomic uint64_t acquired_ns;
};

static void *take_once(void *arg) {
  struct handoff *h = arg;
  loom_oplock_lock(&h->lock);
  atomic_store(&h->acquired_ns, now_ns());
  loom_oplock_unlock(&h->lock);
  return NULL;
}

/* The main thread holds the lock until a helper sleeps on it, then
 * releases it: the helper must have it within WAKE_BOUND_NS. */
static void check_wake(int plain) {
  set_release(plain);
  for (int round = 0; round < WAKE_ROUNDS; round++) {
    struct handoff h;
    loom_oplock_init(&h.lock);
    atomic_init(&h.acquired_ns, 0);
    loom_oplock_lock(&h.lock);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, take_once, &h), 0);
    uint64_t give_up = now_ns() + 5000000000ull;
    while (atomic_load(&loom_oplock_process.sleepers) == 0 && now_ns() < give_up)
      sleep_ms(1);
    ck_assert_msg(atomic_load(&loom_oplock_process.sleepers) == 1, "round %d: the helper never slept",
                  round);
    sleep_ms(round % 3); /* asleep in the futex, or just about to be */
    uint64_t released = now_ns();
    loom_oplock_unlock(&h.lock);
    pthread_join(t, NULL);
    uint64_t took = atomic_load(&h.acquired_ns) - released;
    ck_assert_msg(took < WAKE_BOUND_NS, "round %d (%s release): woken after %.1f ms", round,
                  plain ? "plain" : "fenced", (double)took / 1e6);
  }
  loom_oplock_test_plain_release(1);
}

START_TEST(test_wake_plain_release) { check_wake(1); }
END_TEST

START_TEST(test_wake_fenced_release) { check_wake(0); }
END_TEST

static Suite *oplock_suite(void) {
  Suite *s = suite_create("oplock");
  TCase *tc = tcase_create("lock");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_counts_plain_release);
  tcase_add_test(tc, test_counts_fenced_release);
  tcase_add_test(tc, test_wake_plain_release);
  tcase_add_test(tc, test_wake_fenced_release);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(oplock_suite()) == 0 ? EXIT_SUCCESS : EXIT_FAILURE; }
