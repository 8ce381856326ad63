/*
 * futex.h — sleeping on a 32-bit word until another thread or process
 * changes it: no polling while nothing happens, one wake-up when
 * something does.  `shared` selects a futex that other processes mapping
 * the same memory (MAP_SHARED) can wake; private ones are cheaper.
 */
#ifndef LOOM_CORE_FUTEX_H
#define LOOM_CORE_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *word still reads `seen`, at most `us` microseconds; it
 * may return early (a wake, a signal, or *word already changed), so the
 * caller looks at the word again. */
static inline void loom_futex_wait(const void *word, uint32_t seen, int shared, long us) {
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
  (void)syscall(SYS_futex, word, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

/* Wakes one sleeper on a process-private word.  The word may already be
 * freed: the kernel only hashes its address, and a sleeper on memory
 * reused there wakes early and looks again, as every sleeper must. */
static inline void loom_futex_wake_one_private(void *word) {
  (void)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wakes every sleeper on word. */
static inline void loom_futex_wake_all(void *word, int shared) {
  (void)syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL,
                0);
}

#endif
