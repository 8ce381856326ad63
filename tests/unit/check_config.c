/*
 * check_config.c — unit tests of the LOOM_* parameter table and its parsers
 * (src/core/config.c) and of the log helpers exposed for tests
 * (src/core/log.h: loom_log_parse_subsys, loom_log_expand_path).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#endif
#include "loom.h"
#include "core/config.h"
#include "core/log.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unsets every variable of the table, silences the log (NONE, so that the
 * deliberate bad values below do not WARN) and reloads. */
static void setup(void) {
  const struct loom_param_info *t = loom_param_table();
  for (int i = 0; i < LOOM_PARAM_COUNT; i++)
    unsetenv(t[i].name);
  setenv("LOOM_DEBUG", "NONE", 1);
  loom_config_reload();
}

static void set_and_reload(const char *name, const char *value) {
  setenv(name, value, 1);
  loom_config_reload();
}

/* ---- loom_parse_size ------------------------------------------------------- */

static void expect_size(const char *text, int64_t want) {
  int64_t v = -12345;
  ck_assert_msg(loom_parse_size(text, &v) == 0, "loom_parse_size(\"%s\") failed", text);
  ck_assert_msg(v == want, "loom_parse_size(\"%s\") = %lld, expected %lld", text,
                (long long)v, (long long)want);
}

static void expect_size_rejected(const char *text) {
  int64_t v = -12345;
  ck_assert_msg(loom_parse_size(text, &v) == -1,
                "loom_parse_size(\"%s\") accepted (got %lld)", text ? text : "(null)",
                (long long)v);
  ck_assert_msg(v == -12345, "loom_parse_size(\"%s\") wrote %lld on failure",
                text ? text : "(null)", (long long)v);
}

START_TEST(parse_size_plain) {
  expect_size("0", 0);
  expect_size("1", 1);
  expect_size("4096", 4096);
  expect_size("007", 7);
  expect_size("9223372036854775807", INT64_MAX);
}
END_TEST

START_TEST(parse_size_suffixes) {
  expect_size("4K", 4096);
  expect_size("4k", 4096);
  expect_size("0K", 0);
  expect_size("64M", 64ll << 20);
  expect_size("64m", 64ll << 20);
  expect_size("1G", 1ll << 30);
  expect_size("3g", 3ll << 30);
  expect_size("2KiB", 2048);
  expect_size("2kib", 2048);
  expect_size("1KB", 1024);
  expect_size("1kb", 1024);
  expect_size("5MB", 5ll << 20);
  expect_size("7MiB", 7ll << 20);
  expect_size("2GB", 2ll << 30);
  expect_size("2GiB", 2ll << 30);
  /* The largest value that fits: (INT64_MAX >> 30) G. */
  expect_size("8589934591G", 8589934591ll << 30);
}
END_TEST

START_TEST(parse_size_rejects) {
  expect_size_rejected(NULL);
  expect_size_rejected("");
  expect_size_rejected("-1");
  expect_size_rejected("+1");
  expect_size_rejected(" 1");
  expect_size_rejected("12X");
  expect_size_rejected("K");
  expect_size_rejected("KiB");
  expect_size_rejected("4KK");
  expect_size_rejected("4Ki");
  expect_size_rejected("4KiBx");
  expect_size_rejected("4B");
  expect_size_rejected("4T");
  expect_size_rejected("4 K");
  expect_size_rejected("1.5M");
  expect_size_rejected("99999999999999999999");
  expect_size_rejected("9223372036854775808"); /* INT64_MAX + 1 */
  expect_size_rejected("9000000000G");
  expect_size_rejected("8589934592G"); /* 2^63 */
  expect_size_rejected("8796093022208M"); /* 2^63 */
  expect_size_rejected("9007199254740992K"); /* 2^63 */
}
END_TEST

/* ---- loom_parse_int -------------------------------------------------------- */

static void expect_int(const char *text, int64_t want) {
  int64_t v = -12345;
  ck_assert_msg(loom_parse_int(text, &v) == 0, "loom_parse_int(\"%s\") failed", text);
  ck_assert_msg(v == want, "loom_parse_int(\"%s\") = %lld, expected %lld", text,
                (long long)v, (long long)want);
}

static void expect_int_rejected(const char *text) {
  int64_t v = -12345;
  ck_assert_msg(loom_parse_int(text, &v) == -1, "loom_parse_int(\"%s\") accepted (%lld)",
                text ? text : "(null)", (long long)v);
}

START_TEST(parse_int_values) {
  expect_int("0", 0);
  expect_int("42", 42);
  expect_int("-17", -17);
  expect_int("+5", 5);
  expect_int("120", 120);
  expect_int("9223372036854775807", INT64_MAX);
  expect_int("-9223372036854775808", INT64_MIN);
  expect_int_rejected(NULL);
  expect_int_rejected("");
  expect_int_rejected("abc");
  expect_int_rejected("12abc");
  expect_int_rejected("1.5");
  expect_int_rejected("4K");
  expect_int_rejected("-");
  expect_int_rejected("9223372036854775808");
  expect_int_rejected("-9223372036854775809");
  expect_int_rejected("99999999999999999999");
}
END_TEST

/* ---- loom_parse_port_range ------------------------------------------------- */

static void expect_range(const char *text, int lo, int hi) {
  int a = -1, b = -1;
  ck_assert_msg(loom_parse_port_range(text, &a, &b) == 0,
                "loom_parse_port_range(\"%s\") failed", text);
  ck_assert_msg(a == lo && b == hi, "loom_parse_port_range(\"%s\") = %d-%d, expected %d-%d",
                text, a, b, lo, hi);
}

static void expect_range_rejected(const char *text) {
  int a = -1, b = -1;
  ck_assert_msg(loom_parse_port_range(text, &a, &b) == -1,
                "loom_parse_port_range(\"%s\") accepted (%d-%d)", text ? text : "(null)",
                a, b);
}

START_TEST(port_range) {
  expect_range("1000-2000", 1000, 2000);
  expect_range("1-65535", 1, 65535);
  expect_range("5000-5000", 5000, 5000);
  expect_range("65535-65535", 65535, 65535);
  expect_range_rejected(NULL);
  expect_range_rejected("");
  expect_range_rejected("2000-1000");
  expect_range_rejected("0-10");
  expect_range_rejected("0-0");
  expect_range_rejected("10-70000");
  expect_range_rejected("1-65536");
  expect_range_rejected("abc");
  expect_range_rejected("a-b");
  expect_range_rejected("1000");
  expect_range_rejected("10-");
  expect_range_rejected("-10");
  expect_range_rejected("-");
  expect_range_rejected("1000-2000x");
  expect_range_rejected("1-2-3");
  expect_range_rejected("100000000000000000-2");
}
END_TEST

/* ---- parameters through the environment ------------------------------------ */

START_TEST(param_defaults) {
  /* LOOM_DEBUG is left unset here (setup sets it to NONE). */
  unsetenv("LOOM_DEBUG");
  loom_config_reload();
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 120);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_TIMEOUT_MS), 300000);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 512 * 1024);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 50);
  ck_assert_str_eq(loom_param_str(LOOM_PARAM_BOOTSTRAP_TIMEOUT), "120");
  ck_assert_str_eq(loom_param_str(LOOM_PARAM_DEBUG), "WARN");
  ck_assert_str_eq(loom_param_str(LOOM_PARAM_DEBUG_SUBSYS), "ALL");
  ck_assert_ptr_null(loom_param_str(LOOM_PARAM_COMM_ID));
  ck_assert_ptr_null(loom_param_str(LOOM_PARAM_PORT_RANGE));
  ck_assert_ptr_null(loom_param_str(LOOM_PARAM_RANK));
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_RANK), 0);
  for (int id = 0; id < LOOM_PARAM_COUNT; id++)
    ck_assert_msg(!loom_param_is_set((loom_param_id)id), "%s reported set",
                  loom_param_table()[id].name);
}
END_TEST

START_TEST(param_set_values) {
  set_and_reload("LOOM_BOOTSTRAP_TIMEOUT", "30");
  set_and_reload("LOOM_SOCKET_NSOCKS", "4");
  set_and_reload("LOOM_CHUNK_BYTES", "1M");
  set_and_reload("LOOM_RANK", "3");
  set_and_reload("LOOM_PORT_RANGE", "1000-2000");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 30);
  ck_assert_str_eq(loom_param_str(LOOM_PARAM_BOOTSTRAP_TIMEOUT), "30");
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 1);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 4);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 1 << 20);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_RANK), 3);
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_RANK), 1);
  ck_assert_str_eq(loom_param_str(LOOM_PARAM_PORT_RANGE), "1000-2000");
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_PORT_RANGE), 1);
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_DEBUG), 1); /* set by setup */
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_SPIN_US), 0);
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 50);
  /* Bounds are inclusive. */
  set_and_reload("LOOM_SOCKET_NSOCKS", "16");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 16);
  set_and_reload("LOOM_SOCKET_NSOCKS", "1");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 1);
  set_and_reload("LOOM_BOOTSTRAP_TIMEOUT", "86400");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 86400);
  set_and_reload("LOOM_CHUNK_BYTES", "4K");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 4096);
  set_and_reload("LOOM_CHUNK_BYTES", "1G");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 1 << 30);
  set_and_reload("LOOM_TIMEOUT_MS", "0");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_TIMEOUT_MS), 0);
  /* Unsetting and reloading brings the default back. */
  unsetenv("LOOM_BOOTSTRAP_TIMEOUT");
  loom_config_reload();
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 120);
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 0);
}
END_TEST

START_TEST(param_invalid_falls_back) {
  set_and_reload("LOOM_SOCKET_NSOCKS", "abc");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_SOCKET_NSOCKS), 1);
  set_and_reload("LOOM_SOCKET_NSOCKS", "3x");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  set_and_reload("LOOM_SOCKET_NSOCKS", "");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  set_and_reload("LOOM_BOOTSTRAP_TIMEOUT", "1.5");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 120);
  set_and_reload("LOOM_CHUNK_BYTES", "12X");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 512 * 1024);
  set_and_reload("LOOM_CHUNK_BYTES", "-4096");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 512 * 1024);
  /* No default: the value is 0. */
  set_and_reload("LOOM_RANK", "seven");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_RANK), 0);
  ck_assert_int_eq(loom_param_is_set(LOOM_PARAM_RANK), 1);
}
END_TEST

START_TEST(param_out_of_range_falls_back) {
  set_and_reload("LOOM_SOCKET_NSOCKS", "17");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  set_and_reload("LOOM_SOCKET_NSOCKS", "0");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  set_and_reload("LOOM_SOCKET_NSOCKS", "-1");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), 2);
  set_and_reload("LOOM_BOOTSTRAP_TIMEOUT", "0");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 120);
  set_and_reload("LOOM_BOOTSTRAP_TIMEOUT", "86401");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 120);
  set_and_reload("LOOM_BOOTSTRAP_TIMEOUT", "99999999999999999999");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT), 120);
  set_and_reload("LOOM_CHUNK_BYTES", "4095");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 512 * 1024);
  set_and_reload("LOOM_CHUNK_BYTES", "2G");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_CHUNK_BYTES), 512 * 1024);
  set_and_reload("LOOM_SPIN_US", "1000001");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 50);
  set_and_reload("LOOM_NRANKS", "0"); /* min 1, no default */
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_NRANKS), 0);
  set_and_reload("LOOM_RANK", "-1");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_RANK), 0);
  set_and_reload("LOOM_RANK", "2147483648"); /* INT_MAX + 1 */
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_RANK), 0);
  set_and_reload("LOOM_RANK", "2147483647");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_RANK), 2147483647);
}
END_TEST

START_TEST(param_reload_rereads) {
  set_and_reload("LOOM_SPIN_US", "7");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 7);
  set_and_reload("LOOM_SPIN_US", "8");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 8);
  set_and_reload("LOOM_SPIN_US", "bad");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 50);
  set_and_reload("LOOM_SPIN_US", "9");
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SPIN_US), 9);
}
END_TEST

/* ---- the table ------------------------------------------------------------- */

START_TEST(table_entries) {
  const struct loom_param_info *t = loom_param_table();
  ck_assert_ptr_nonnull(t);
  for (int i = 0; i < LOOM_PARAM_COUNT; i++) {
    const struct loom_param_info *p = &t[i];
    ck_assert_msg(p->name != NULL, "entry %d has no name", i);
    ck_assert_msg(strncmp(p->name, "LOOM_", 5) == 0 && strlen(p->name) > 5,
                  "entry %d: bad name %s", i, p->name);
    ck_assert_msg(p->help != NULL && p->help[0] != '\0', "%s: no help", p->name);
    ck_assert_msg(p->type == LOOM_PARAM_T_INT || p->type == LOOM_PARAM_T_SIZE ||
                      p->type == LOOM_PARAM_T_STRING,
                  "%s: bad type %d", p->name, (int)p->type);
    for (int j = 0; j < i; j++)
      ck_assert_msg(strcmp(t[j].name, p->name) != 0, "%s appears twice (%d, %d)", p->name,
                    j, i);
    if (p->type == LOOM_PARAM_T_STRING)
      continue;
    ck_assert_msg(p->min <= p->max, "%s: min %lld > max %lld", p->name,
                  (long long)p->min, (long long)p->max);
    if (p->default_value == NULL)
      continue;
    int64_t v = 0;
    int rc = p->type == LOOM_PARAM_T_INT ? loom_parse_int(p->default_value, &v)
                                         : loom_parse_size(p->default_value, &v);
    ck_assert_msg(rc == 0, "%s: default \"%s\" does not parse", p->name, p->default_value);
    ck_assert_msg(v >= p->min && v <= p->max,
                  "%s: default %lld outside [%lld, %lld]", p->name, (long long)v,
                  (long long)p->min, (long long)p->max);
  }
}
END_TEST

/* Entries are in loom_param_id order. */
START_TEST(table_order) {
  static const struct {
    loom_param_id id;
    const char *name;
  } expect[] = {
      {LOOM_PARAM_DEBUG, "LOOM_DEBUG"},
      {LOOM_PARAM_DEBUG_SUBSYS, "LOOM_DEBUG_SUBSYS"},
      {LOOM_PARAM_DEBUG_FILE, "LOOM_DEBUG_FILE"},
      {LOOM_PARAM_COMM_ID, "LOOM_COMM_ID"},
      {LOOM_PARAM_COMM_SECRET, "LOOM_COMM_SECRET"},
      {LOOM_PARAM_RANK, "LOOM_RANK"},
      {LOOM_PARAM_NRANKS, "LOOM_NRANKS"},
      {LOOM_PARAM_LOCAL_RANK, "LOOM_LOCAL_RANK"},
      {LOOM_PARAM_SOCKET_IFNAME, "LOOM_SOCKET_IFNAME"},
      {LOOM_PARAM_SOCKET_FAMILY, "LOOM_SOCKET_FAMILY"},
      {LOOM_PARAM_PORT_RANGE, "LOOM_PORT_RANGE"},
      {LOOM_PARAM_BOOTSTRAP_TIMEOUT, "LOOM_BOOTSTRAP_TIMEOUT"},
      {LOOM_PARAM_TIMEOUT_MS, "LOOM_TIMEOUT_MS"},
      {LOOM_PARAM_SOCKET_NSOCKS, "LOOM_SOCKET_NSOCKS"},
      {LOOM_PARAM_CONNECT, "LOOM_CONNECT"},
      {LOOM_PARAM_CHUNK_BYTES, "LOOM_CHUNK_BYTES"},
      {LOOM_PARAM_SPIN_US, "LOOM_SPIN_US"},
      {LOOM_PARAM_BUCKET_BYTES, "LOOM_BUCKET_BYTES"},
      {LOOM_PARAM_SHM_DISABLE, "LOOM_SHM_DISABLE"},
      {LOOM_PARAM_SHM_CMA, "LOOM_SHM_CMA"},
      {LOOM_PARAM_SHM_DIRECT_REDUCE, "LOOM_SHM_DIRECT_REDUCE"},
      {LOOM_PARAM_SHM_NODE_BYTES, "LOOM_SHM_NODE_BYTES"},
      {LOOM_PARAM_ALGO, "LOOM_ALGO"},
      {LOOM_PARAM_PROTO, "LOOM_PROTO"},
      {LOOM_PARAM_NCHANNELS, "LOOM_NCHANNELS"},
      {LOOM_PARAM_HOSTID, "LOOM_HOSTID"},
      {LOOM_PARAM_TOPO_DUMP_FILE, "LOOM_TOPO_DUMP_FILE"},
      {LOOM_PARAM_TOPO_FILE, "LOOM_TOPO_FILE"},
      {LOOM_PARAM_TUNE_FILE, "LOOM_TUNE_FILE"},
      {LOOM_PARAM_NET, "LOOM_NET"},
      {LOOM_PARAM_NET_PLUGIN, "LOOM_NET_PLUGIN"},
      {LOOM_PARAM_MODULE_PATH, "LOOM_MODULE_PATH"},
      {LOOM_PARAM_OFI_PROVIDER, "LOOM_OFI_PROVIDER"},
      {LOOM_PARAM_OFI_DOMAIN, "LOOM_OFI_DOMAIN"},
      {LOOM_PARAM_IB_HCA, "LOOM_IB_HCA"},
      {LOOM_PARAM_IB_GID_INDEX, "LOOM_IB_GID_INDEX"},
      {LOOM_PARAM_IB_TIMEOUT, "LOOM_IB_TIMEOUT"},
      {LOOM_PARAM_IB_RETRY_CNT, "LOOM_IB_RETRY_CNT"},
      {LOOM_PARAM_SIM_DELAY_US, "LOOM_SIM_DELAY_US"},
      {LOOM_PARAM_DEVICE_IPC, "LOOM_DEVICE_IPC"},
      {LOOM_PARAM_HOST_IPC_MIN, "LOOM_HOST_IPC_MIN"},
      {LOOM_PARAM_STRAGGLER_WARN_MS, "LOOM_STRAGGLER_WARN_MS"},
      {LOOM_PARAM_TRACE_BUFFER, "LOOM_TRACE_BUFFER"},
      {LOOM_PARAM_TRACE_DUMP_DIR, "LOOM_TRACE_DUMP_DIR"},
      {LOOM_PARAM_DUMP_ON_ERROR, "LOOM_DUMP_ON_ERROR"},
      {LOOM_PARAM_DUMP_ON_SIGNAL, "LOOM_DUMP_ON_SIGNAL"},
  };
  ck_assert_int_eq(sizeof expect / sizeof expect[0], LOOM_PARAM_COUNT);
  const struct loom_param_info *t = loom_param_table();
  for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
    ck_assert_str_eq(t[expect[i].id].name, expect[i].name);
  ck_assert_int_eq(t[LOOM_PARAM_BOOTSTRAP_TIMEOUT].type, LOOM_PARAM_T_INT);
  ck_assert_int_eq(t[LOOM_PARAM_CHUNK_BYTES].type, LOOM_PARAM_T_SIZE);
  ck_assert_int_eq(t[LOOM_PARAM_COMM_ID].type, LOOM_PARAM_T_STRING);
}
END_TEST

/* Every INT/SIZE variable set to its own default reads back as that value,
 * and is_set follows the environment, for every entry of the table. */
START_TEST(table_roundtrip_through_env) {
  const struct loom_param_info *t = loom_param_table();
  for (int i = 0; i < LOOM_PARAM_COUNT; i++) {
    if (t[i].type == LOOM_PARAM_T_STRING || i == LOOM_PARAM_DEBUG)
      continue;
    unsetenv(t[i].name);
    loom_config_reload();
    ck_assert_msg(!loom_param_is_set((loom_param_id)i), "%s set", t[i].name);
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)t[i].max);
    set_and_reload(t[i].name, text);
    ck_assert_msg(loom_param_is_set((loom_param_id)i), "%s not set", t[i].name);
    ck_assert_msg(loom_param_int((loom_param_id)i) == t[i].max, "%s=%s read as %lld",
                  t[i].name, text, (long long)loom_param_int((loom_param_id)i));
    snprintf(text, sizeof text, "%lld", (long long)t[i].min);
    set_and_reload(t[i].name, text);
    ck_assert_msg(loom_param_int((loom_param_id)i) == t[i].min, "%s=%s read as %lld",
                  t[i].name, text, (long long)loom_param_int((loom_param_id)i));
    unsetenv(t[i].name);
  }
}
END_TEST

/* ---- log helpers ----------------------------------------------------------- */

START_TEST(log_parse_subsys) {
  ck_assert_int_eq(loom_log_parse_subsys("INIT,NET"), LOOM_LOG_INIT | LOOM_LOG_NET);
  ck_assert_int_eq(loom_log_parse_subsys("^COLL"), LOOM_LOG_ALL & ~LOOM_LOG_COLL);
  ck_assert_int_eq(loom_log_parse_subsys("^COLL,ENV"),
                   LOOM_LOG_ALL & ~(LOOM_LOG_COLL | LOOM_LOG_ENV));
  ck_assert_int_eq(loom_log_parse_subsys("ALL"), LOOM_LOG_ALL);
  ck_assert_int_eq(loom_log_parse_subsys(""), LOOM_LOG_ALL);
  ck_assert_int_eq(loom_log_parse_subsys(NULL), LOOM_LOG_ALL);
  ck_assert_int_eq(loom_log_parse_subsys("bootstrap"), LOOM_LOG_BOOTSTRAP);
  ck_assert_int_eq(loom_log_parse_subsys("COLL"), LOOM_LOG_COLL);
  ck_assert_int_eq(loom_log_parse_subsys("ENV"), LOOM_LOG_ENV);
  ck_assert_int_eq(loom_log_parse_subsys("INIT,,NET,"), LOOM_LOG_INIT | LOOM_LOG_NET);
  ck_assert_int_eq(loom_log_parse_subsys("NETWORK"), 0);
  ck_assert_int_eq(loom_log_parse_subsys("IN"), 0);
  ck_assert_int_eq(loom_log_parse_subsys("^ALL"), 0);
}
END_TEST

START_TEST(log_expand_path) {
  char out[256];
  loom_log_expand_path("/tmp/x.%h.%p", "host", 42, out, sizeof out);
  ck_assert_str_eq(out, "/tmp/x.host.42");
  loom_log_expand_path("/tmp/plain", "host", 42, out, sizeof out);
  ck_assert_str_eq(out, "/tmp/plain");
  loom_log_expand_path("%p%p-%h", "n1", 7, out, sizeof out);
  ck_assert_str_eq(out, "77-n1");
  loom_log_expand_path("a%xb%", "h", 1, out, sizeof out);
  ck_assert_str_eq(out, "a%xb%");
  loom_log_expand_path("", "h", 1, out, sizeof out);
  ck_assert_str_eq(out, "");
  /* Truncation keeps the NUL inside out_len. */
  memset(out, 'Z', sizeof out);
  loom_log_expand_path("/tmp/x.%h.%p", "host", 42, out, 8);
  ck_assert_str_eq(out, "/tmp/x.");
  ck_assert_int_eq(out[8], 'Z');
  memset(out, 'Z', sizeof out);
  loom_log_expand_path("/tmp/x.%h.%p", "hostname", 42, out, 10);
  ck_assert_str_eq(out, "/tmp/x.ho");
  ck_assert_int_eq(out[10], 'Z');
}
END_TEST

static Suite *config_suite(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("parsers");
  tcase_add_test(tc, parse_size_plain);
  tcase_add_test(tc, parse_size_suffixes);
  tcase_add_test(tc, parse_size_rejects);
  tcase_add_test(tc, parse_int_values);
  tcase_add_test(tc, port_range);
  suite_add_tcase(s, tc);

  tc = tcase_create("params");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, param_defaults);
  tcase_add_test(tc, param_set_values);
  tcase_add_test(tc, param_invalid_falls_back);
  tcase_add_test(tc, param_out_of_range_falls_back);
  tcase_add_test(tc, param_reload_rereads);
  tcase_add_test(tc, table_entries);
  tcase_add_test(tc, table_order);
  tcase_add_test(tc, table_roundtrip_through_env);
  suite_add_tcase(s, tc);

  tc = tcase_create("log");
  tcase_add_test(tc, log_parse_subsys);
  tcase_add_test(tc, log_expand_path);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(config_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
