/*
 * check_expect.h — EXPECT(cond, fmt, ...) for the Check suites: fails the
 * test with the message when cond is false.  Check's ck_assert records
 * every passing check through its IPC channel, which costs a system call;
 * loops over many elements use this instead.
 */
#ifndef LOOM_TESTS_CHECK_EXPECT_H
#define LOOM_TESTS_CHECK_EXPECT_H

#include <check.h>

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

#endif
