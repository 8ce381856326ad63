/*
 * check_launch_env.c — unit tests of loomGetLaunchInfo (src/api/launch_env.c).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#endif
#include "loom.h"
#include "core/config.h"
#include "core/error.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const char *all_vars[] = {
    "LOOM_RANK",        "LOOM_NRANKS",          "LOOM_LOCAL_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_PROCID",     "SLURM_NTASKS",         "SLURM_LOCALID",
    "RANK",             "WORLD_SIZE",           "LOCAL_RANK",
};

static void setup(void) {
  for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
    unsetenv(all_vars[i]);
  setenv("LOOM_DEBUG", "NONE", 1); /* the error cases would WARN */
  loom_config_reload();
  loom_clear_last_error();
}

/* Sets three variables (NULL value = leave unset) and reloads the config. */
static void set3(const char *rv, const char *r, const char *sv, const char *s,
                 const char *lv, const char *l) {
  if (r)
    setenv(rv, r, 1);
  if (s)
    setenv(sv, s, 1);
  if (l)
    setenv(lv, l, 1);
  loom_config_reload();
}
#define LOOMRUN(r, s, l) set3("LOOM_RANK", r, "LOOM_NRANKS", s, "LOOM_LOCAL_RANK", l)
#define MPIRUN(r, s, l)                                                        \
  set3("OMPI_COMM_WORLD_RANK", r, "OMPI_COMM_WORLD_SIZE", s,                  \
       "OMPI_COMM_WORLD_LOCAL_RANK", l)
#define SLURM(r, s, l) set3("SLURM_PROCID", r, "SLURM_NTASKS", s, "SLURM_LOCALID", l)
#define TORCHRUN(r, s, l) set3("RANK", r, "WORLD_SIZE", s, "LOCAL_RANK", l)

static void expect_ok(int rank, int nranks, int local, const char *launcher) {
  loomLaunchInfo_t info = {-7, -7, -7, NULL};
  ck_assert_int_eq(loomGetLaunchInfo(&info), loomSuccess);
  ck_assert_int_eq(info.rank, rank);
  ck_assert_int_eq(info.nranks, nranks);
  ck_assert_int_eq(info.localRank, local);
  ck_assert_ptr_nonnull(info.launcher);
  ck_assert_str_eq(info.launcher, launcher);
}

/* Fails with loomInvalidUsage, leaves `info` alone, and the message holds
 * each of the given fragments. */
static void expect_usage_error(const char *frag1, const char *frag2) {
  loomLaunchInfo_t info = {-7, -7, -7, NULL};
  ck_assert_int_eq(loomGetLaunchInfo(&info), loomInvalidUsage);
  ck_assert_int_eq(info.rank, -7);
  ck_assert_int_eq(info.nranks, -7);
  ck_assert_int_eq(info.localRank, -7);
  ck_assert_ptr_null(info.launcher);
  const char *msg = loomGetLastError(NULL);
  if (frag1)
    ck_assert_msg(strstr(msg, frag1) != NULL, "\"%s\" not in \"%s\"", frag1, msg);
  if (frag2)
    ck_assert_msg(strstr(msg, frag2) != NULL, "\"%s\" not in \"%s\"", frag2, msg);
}

START_TEST(null_info) {
  LOOMRUN("0", "1", "0");
  ck_assert_int_eq(loomGetLaunchInfo(NULL), loomInvalidArgument);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "NULL"));
}
END_TEST

START_TEST(nothing_set) {
  expect_usage_error("LOOM_RANK", "OMPI_COMM_WORLD_RANK");
  const char *msg = loomGetLastError(NULL);
  const char *needed[] = {"LOOM_NRANKS", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                          "SLURM_NTASKS", " RANK", "WORLD_SIZE"};
  for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
    ck_assert_msg(strstr(msg, needed[i]) != NULL, "%s not in \"%s\"", needed[i], msg);
}
END_TEST

/* Only the local-rank variable of each launcher does not select it. */
START_TEST(only_local_rank_set) {
  setenv("LOOM_LOCAL_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("SLURM_LOCALID", "0", 1);
  setenv("LOCAL_RANK", "0", 1);
  loom_config_reload();
  expect_usage_error("no launcher", NULL);
}
END_TEST

START_TEST(loomrun_full) {
  LOOMRUN("2", "4", "1");
  expect_ok(2, 4, 1, "loomrun");
}
END_TEST

START_TEST(loomrun_no_local) {
  LOOMRUN("3", "4", NULL);
  expect_ok(3, 4, -1, "loomrun");
}
END_TEST

START_TEST(loomrun_single) {
  LOOMRUN("0", "1", "0");
  expect_ok(0, 1, 0, "loomrun");
}
END_TEST

START_TEST(mpirun_full) {
  MPIRUN("5", "8", "1");
  expect_ok(5, 8, 1, "mpirun");
}
END_TEST

START_TEST(mpirun_no_local) {
  MPIRUN("0", "2", NULL);
  expect_ok(0, 2, -1, "mpirun");
}
END_TEST

START_TEST(slurm_full) {
  SLURM("7", "16", "3");
  expect_ok(7, 16, 3, "slurm");
}
END_TEST

START_TEST(slurm_no_local) {
  SLURM("1", "2", NULL);
  expect_ok(1, 2, -1, "slurm");
}
END_TEST

START_TEST(torchrun_full) {
  TORCHRUN("1", "3", "1");
  expect_ok(1, 3, 1, "torchrun");
}
END_TEST

START_TEST(torchrun_no_local) {
  TORCHRUN("2", "3", NULL);
  expect_ok(2, 3, -1, "torchrun");
}
END_TEST

START_TEST(precedence_loomrun_first) {
  TORCHRUN("3", "40", "3");
  SLURM("2", "30", "2");
  MPIRUN("1", "20", "1");
  LOOMRUN("0", "10", "0");
  expect_ok(0, 10, 0, "loomrun");
}
END_TEST

START_TEST(precedence_mpirun_over_slurm_torchrun) {
  TORCHRUN("3", "40", "3");
  SLURM("2", "30", "2");
  MPIRUN("1", "20", NULL);
  expect_ok(1, 20, -1, "mpirun");
}
END_TEST

START_TEST(precedence_slurm_over_torchrun) {
  TORCHRUN("3", "40", "3");
  SLURM("2", "30", NULL);
  expect_ok(2, 30, -1, "slurm");
}
END_TEST

/* The local rank of another launcher is not mixed in. */
START_TEST(local_rank_not_borrowed) {
  TORCHRUN(NULL, NULL, "3");
  MPIRUN("1", "20", NULL);
  expect_ok(1, 20, -1, "mpirun");
}
END_TEST

START_TEST(reload_sees_changes) {
  LOOMRUN("1", "2", "1");
  expect_ok(1, 2, 1, "loomrun");
  unsetenv("LOOM_RANK");
  unsetenv("LOOM_NRANKS");
  unsetenv("LOOM_LOCAL_RANK");
  TORCHRUN("0", "5", NULL);
  expect_ok(0, 5, -1, "torchrun");
}
END_TEST

/* ---- errors --------------------------------------------------------------- */

START_TEST(loomrun_rank_equals_nranks) {
  LOOMRUN("4", "4", NULL);
  expect_usage_error("LOOM_RANK=4", "LOOM_NRANKS=4");
}
END_TEST

START_TEST(loomrun_local_out_of_range) {
  LOOMRUN("0", "2", "2");
  expect_usage_error("LOOM_LOCAL_RANK=2", "LOOM_NRANKS=2");
}
END_TEST

START_TEST(loomrun_rank_not_numeric) {
  LOOMRUN("abc", "4", NULL);
  expect_usage_error("LOOM_RANK ", "not valid");
}
END_TEST

START_TEST(loomrun_rank_negative) {
  LOOMRUN("-1", "4", NULL);
  expect_usage_error("LOOM_RANK ", "not valid");
}
END_TEST

START_TEST(loomrun_nranks_zero) {
  LOOMRUN("0", "0", NULL);
  expect_usage_error("LOOM_NRANKS ", "not valid");
}
END_TEST

START_TEST(loomrun_local_not_numeric) {
  LOOMRUN("0", "2", "x");
  expect_usage_error("LOOM_LOCAL_RANK ", "not valid");
}
END_TEST

START_TEST(loomrun_missing_nranks) {
  LOOMRUN("1", NULL, NULL);
  MPIRUN("1", "2", NULL); /* a half-set loomrun does not fall through */
  expect_usage_error("LOOM_NRANKS is not", "LOOM_RANK is set");
}
END_TEST

START_TEST(loomrun_missing_rank) {
  LOOMRUN(NULL, "2", NULL);
  expect_usage_error("LOOM_RANK is not", "LOOM_NRANKS is set");
}
END_TEST

START_TEST(mpirun_rank_out_of_range) {
  MPIRUN("9", "8", NULL);
  expect_usage_error("OMPI_COMM_WORLD_RANK=9", "OMPI_COMM_WORLD_SIZE=8");
}
END_TEST

START_TEST(mpirun_rank_not_numeric) {
  MPIRUN("abc", "8", NULL);
  expect_usage_error("OMPI_COMM_WORLD_RANK=\"abc\"", "mpirun");
}
END_TEST

START_TEST(mpirun_size_trailing_garbage) {
  MPIRUN("0", "8x", NULL);
  expect_usage_error("OMPI_COMM_WORLD_SIZE=\"8x\"", NULL);
}
END_TEST

START_TEST(mpirun_local_empty) {
  MPIRUN("0", "8", "");
  expect_usage_error("OMPI_COMM_WORLD_LOCAL_RANK=\"\"", NULL);
}
END_TEST

START_TEST(slurm_missing_ntasks) {
  SLURM("0", NULL, NULL);
  TORCHRUN("0", "1", NULL);
  expect_usage_error("SLURM_NTASKS is not", "SLURM_PROCID is set");
}
END_TEST

START_TEST(slurm_local_out_of_range) {
  SLURM("0", "2", "5");
  expect_usage_error("SLURM_LOCALID=5", "SLURM_NTASKS=2");
}
END_TEST

START_TEST(torchrun_negative_rank) {
  TORCHRUN("-1", "4", NULL);
  expect_usage_error("RANK=\"-1\"", "torchrun");
}
END_TEST

START_TEST(torchrun_world_size_zero) {
  TORCHRUN("0", "0", NULL);
  expect_usage_error("WORLD_SIZE=\"0\"", NULL);
}
END_TEST

START_TEST(torchrun_missing_rank) {
  TORCHRUN(NULL, "4", NULL);
  expect_usage_error("RANK is not", "WORLD_SIZE is set");
}
END_TEST

START_TEST(torchrun_rank_overflow) {
  TORCHRUN("99999999999", "4", NULL);
  expect_usage_error("RANK=\"99999999999\"", NULL);
}
END_TEST

static Suite *launch_env_suite(void) {
  Suite *s = suite_create("launch_env");
  TCase *ok = tcase_create("launchers");
  tcase_add_checked_fixture(ok, setup, NULL);
  tcase_add_test(ok, null_info);
  tcase_add_test(ok, nothing_set);
  tcase_add_test(ok, only_local_rank_set);
  tcase_add_test(ok, loomrun_full);
  tcase_add_test(ok, loomrun_no_local);
  tcase_add_test(ok, loomrun_single);
  tcase_add_test(ok, mpirun_full);
  tcase_add_test(ok, mpirun_no_local);
  tcase_add_test(ok, slurm_full);
  tcase_add_test(ok, slurm_no_local);
  tcase_add_test(ok, torchrun_full);
  tcase_add_test(ok, torchrun_no_local);
  tcase_add_test(ok, precedence_loomrun_first);
  tcase_add_test(ok, precedence_mpirun_over_slurm_torchrun);
  tcase_add_test(ok, precedence_slurm_over_torchrun);
  tcase_add_test(ok, local_rank_not_borrowed);
  tcase_add_test(ok, reload_sees_changes);
  suite_add_tcase(s, ok);

  TCase *err = tcase_create("errors");
  tcase_add_checked_fixture(err, setup, NULL);
  tcase_add_test(err, loomrun_rank_equals_nranks);
  tcase_add_test(err, loomrun_local_out_of_range);
  tcase_add_test(err, loomrun_rank_not_numeric);
  tcase_add_test(err, loomrun_rank_negative);
  tcase_add_test(err, loomrun_nranks_zero);
  tcase_add_test(err, loomrun_local_not_numeric);
  tcase_add_test(err, loomrun_missing_nranks);
  tcase_add_test(err, loomrun_missing_rank);
  tcase_add_test(err, mpirun_rank_out_of_range);
  tcase_add_test(err, mpirun_rank_not_numeric);
  tcase_add_test(err, mpirun_size_trailing_garbage);
  tcase_add_test(err, mpirun_local_empty);
  tcase_add_test(err, slurm_missing_ntasks);
  tcase_add_test(err, slurm_local_out_of_range);
  tcase_add_test(err, torchrun_negative_rank);
  tcase_add_test(err, torchrun_world_size_zero);
  tcase_add_test(err, torchrun_missing_rank);
  tcase_add_test(err, torchrun_rank_overflow);
  suite_add_tcase(s, err);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(launch_env_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
