/*
 * oplock.c — the slow half of the operation lock (oplock.h): registering
 * for membarrier, spinning a little, then sleeping on the futex.
 */
#include <config.h> /* the build's (src/core/config.h is the parameter table) */
#include "core/oplock.h"
#include "core/cpu.h"
#include "core/futex.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#if HAVE_DECL_MEMBARRIER_CMD_PRIVATE_EXPEDITED
#include <linux/membarrier.h>
#endif

/* A sleep's bound: a wake is never lost by design, so this only limits
 * the damage of one lost to something unforeseen. */
#define LOOM_OPLOCK_NAP_US 100000L
/* The bound where this sleeper's barrier failed (then a release may not
 * see it: the nap is all that wakes it). */
#define LOOM_OPLOCK_SHORT_NAP_US 1000L
/* Tries before sleeping: a holder that is about to release (a queued
 * call handing over) costs no system call. */
#define LOOM_OPLOCK_SPINS 100

_Alignas(64) struct loom_oplock_process loom_oplock_process;
static int membarrier_registered;
static pthread_once_t register_once = PTHREAD_ONCE_INIT;

#if HAVE_DECL_MEMBARRIER_CMD_PRIVATE_EXPEDITED
static long sys_membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

static int register_expedited(void) {
  long cmds = sys_membarrier(MEMBARRIER_CMD_QUERY);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

/* Every running thread of the process passes a full barrier. */
static int barrier_all_threads(void) {
  return sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}
#else
static int register_expedited(void) { return 0; }
static int barrier_all_threads(void) { return 0; }
#endif

static void register_membarrier(void) {
  membarrier_registered = register_expedited();
  atomic_store(&loom_oplock_process.plain_release, membarrier_registered);
}

void loom_oplock_init(struct loom_oplock *l) {
  (void)pthread_once(&register_once, register_membarrier);
  atomic_init(&l->held, 0);
}

int loom_oplock_test_plain_release(int on) {
  (void)pthread_once(&register_once, register_membarrier);
  atomic_store(&loom_oplock_process.plain_release, on && membarrier_registered);
  return atomic_load(&loom_oplock_process.plain_release);
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
  /* Counted first, then a barrier on every thread (or, with fenced
   * releases, here): a holder releasing from now on reads the count, or
   * its store is seen below. */
  atomic_fetch_add_explicit(&loom_oplock_process.sleepers, 1, memory_order_seq_cst);
  long nap = LOOM_OPLOCK_NAP_US;
  if (!atomic_load_explicit(&loom_oplock_process.plain_release, memory_order_relaxed))
    atomic_thread_fence(memory_order_seq_cst);
  else if (!barrier_all_threads())
    nap = LOOM_OPLOCK_SHORT_NAP_US;
  while (!try_take(l))
    loom_futex_wait(&l->held, 1, 0, nap);
  atomic_fetch_sub_explicit(&loom_oplock_process.sleepers, 1, memory_order_relaxed);
}

void loom_oplock_wake(struct loom_oplock *l) { loom_futex_wake_one_private(&l->held); }
