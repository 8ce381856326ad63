/*
 * check_run.h — a unit test's main: runs its suite and gives the exit
 * status (0 when every test passed).
 */
#ifndef LOOM_TESTS_CHECK_RUN_H
#define LOOM_TESTS_CHECK_RUN_H

#include <check.h>

static inline int check_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}

#endif
