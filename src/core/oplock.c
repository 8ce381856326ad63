/*
 * oplock.c — the slow half of the operation lock (oplock.h): registering
 * for membarrier, spinning a little, then sleeping on the futex.
 */
#include "core/oplock.h"
#include "core/cpu.h"
#include "core/futex.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A sleep's bound: a wake is never lost by design, so this only limits
 * the damage of one lost to something unforeseen. */
#define LOOM_OPLOCK_NAP_US 100000L
/* The bound where this sleeper's barrier failed (then a release may not
 * see it: the nap is all that wakes it). */
#define LOOM_OPLOCK_SHORT_NAP_US 1000L
/* Tries before sleeping: a holder that is about to release (a queued
 * call handing over) costs no system call. */
#define LOOM_OPLOCK_SPINS 100

int loom_oplock_plain_release;
static int membarrier_registered;
static pthread_once_t register_once = PTHREAD_ONCE_INIT;

static long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

static void register_membarrier(void) {
  long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
      membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
    membarrier_registered = 1;
  loom_oplock_plain_release = membarrier_registered;
}

void loom_oplock_init(struct loom_oplock *l) {
  (void)pthread_once(&register_once, register_membarrier);
  atomic_init(&l->held, 0);
  atomic_init(&l->sleepers, 0);
}

void loom_oplock_test_plain_release(int on) {
  (void)pthread_once(&register_once, register_membarrier);
  loom_oplock_plain_release = on && membarrier_registered;
}

static int try_take(struct loom_oplock *l) {
  uint32_t free_word = 0;
  return atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
         atomic_compare_exchange_strong_explicit(&l->held, &free_word, 1, memory_order_acquire,
                                                 memory_order_relaxed);
}

void loom_oplock_lock_slow(struct loom_oplock *l) {
  for (int i = 0; i < LOOM_OPLOCK_SPINS; i++) {
    if (try_take(l))
      return;
    loom_cpu_relax();
  }
  /* Counted first (a full barrier), then every thread's barrier: a holder
   * releasing from now on reads the count, or its store is seen below. */
  atomic_fetch_add_explicit(&l->sleepers, 1, memory_order_seq_cst);
  long nap = LOOM_OPLOCK_NAP_US;
  if (loom_oplock_plain_release && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    nap = LOOM_OPLOCK_SHORT_NAP_US;
  while (!try_take(l))
    loom_futex_wait(&l->held, 1, 0, nap);
  atomic_fetch_sub_explicit(&l->sleepers, 1, memory_order_relaxed);
}

void loom_oplock_wake(struct loom_oplock *l) {
  (void)syscall(SYS_futex, &l->held, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
