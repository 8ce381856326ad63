/*
 * timeutil.h — clocks in nanoseconds, and deadlines.
 */
#ifndef LOOM_CORE_TIMEUTIL_H
#define LOOM_CORE_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

/* Clock `id` in nanoseconds. */
static inline uint64_t loom_clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t loom_now_ns(void) { return loom_clock_ns(CLOCK_MONOTONIC); }

/* A deadline `ms` from now; ms <= 0 means none (UINT64_MAX). */
static inline uint64_t loom_deadline_ms(int64_t ms) {
  return ms > 0 ? loom_now_ns() + (uint64_t)ms * 1000000ull : UINT64_MAX;
}

/* Milliseconds left before `deadline` (0 when passed, capped at INT32_MAX). */
static inline int loom_ms_left(uint64_t deadline) {
  if (deadline == UINT64_MAX)
    return 0x7fffffff;
  uint64_t now = loom_now_ns();
  if (now >= deadline)
    return 0;
  uint64_t ms = (deadline - now + 999999ull) / 1000000ull;
  return ms > 0x7fffffffull ? 0x7fffffff : (int)ms;
}

#endif
