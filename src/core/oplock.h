/*
 * oplock.h — the lock a communicator's calls run under (comm.h's op_lock):
 * a mutex whose uncontended release is one plain store.
 *
 * A mutex's release is normally a locked instruction, which waits for
 * every store the call made to leave the core: a collective's last cells
 * sit in the peer's cache then, and the wait cost some small calls
 * 10-30 ns (docs/history/performance-log.md).  Here the releasing thread
 * stores 0 and then reads whether anyone sleeps; a thread about to sleep
 * counts itself and then makes every thread of the process pass a full
 * barrier (membarrier(2)), so that either it sees the release or the
 * releaser sees it and wakes it.  Where membarrier cannot be used, the
 * release is an atomic exchange and the sleeper issues a fence, and the
 * same holds.  A sleep is also bounded (LOOM_OPLOCK_NAP_US), a guard
 * against a wake lost to anything else.
 *
 * The count of sleepers is the process's, not the lock's: a release reads
 * it after its store, when another thread may already have taken the lock
 * and freed the communicator that holds it (Destroy, Abort).  While any
 * thread sleeps on any of these locks, every release makes a system call.
 *
 * Process-private: the lock lives in one process's memory.
 */
#ifndef LOOM_CORE_OPLOCK_H
#define LOOM_CORE_OPLOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct loom_oplock {
  _Atomic uint32_t held; /* 1 while a thread holds the lock (the futex word) */
};

/* What every release reads, on one cache line of its own (a variable
 * another thread writes must not share it). */
struct loom_oplock_process {
  _Atomic uint32_t sleepers; /* threads asleep on an oplock, or about to be */
  _Atomic int plain_release; /* releases are one plain store (membarrier registered) */
  char pad[64 - 2 * sizeof(uint32_t)];
};
extern _Alignas(64) struct loom_oplock_process loom_oplock_process;

/* Sets the lock free.  The first call in a process registers it for
 * membarrier's expedited barrier (or settles for fenced releases). */
void loom_oplock_init(struct loom_oplock *l);

void loom_oplock_lock_slow(struct loom_oplock *l);
void loom_oplock_wake(struct loom_oplock *l);

static inline void loom_oplock_lock(struct loom_oplock *l) {
  uint32_t free_word = 0;
  if (!atomic_compare_exchange_strong_explicit(&l->held, &free_word, 1, memory_order_acquire,
                                               memory_order_relaxed))
    loom_oplock_lock_slow(l);
}

/* After the release, l may be freed: only its address is used (a wake). */
static inline void loom_oplock_unlock(struct loom_oplock *l) {
  uint32_t sleepers;
  if (atomic_load_explicit(&loom_oplock_process.plain_release, memory_order_relaxed)) {
    atomic_store_explicit(&l->held, 0, memory_order_release);
    /* Keeps the compiler from reading the count before the store; the
     * processor's reordering is undone by the sleeper's membarrier. */
    atomic_signal_fence(memory_order_seq_cst);
    sleepers = atomic_load_explicit(&loom_oplock_process.sleepers, memory_order_relaxed);
  } else {
    atomic_exchange_explicit(&l->held, 0, memory_order_seq_cst);
    sleepers = atomic_load_explicit(&loom_oplock_process.sleepers, memory_order_seq_cst);
  }
  if (sleepers != 0)
    loom_oplock_wake(l);
}

/* Tests only: 0 makes later releases fenced exchanges, 1 restores plain
 * stores where membarrier is registered; returns whether releases are
 * plain now.  Call it while no thread uses an oplock. */
int loom_oplock_test_plain_release(int on);

#endif
