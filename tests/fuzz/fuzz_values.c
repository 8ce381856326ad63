/*
 * fuzz_values.c — libFuzzer harness for the config table's value parsers
 * (src/core/config.c: sizes, integers, LOOM_PORT_RANGE), the
 * LOOM_DEBUG_SUBSYS list (src/core/log.c) and LOOM_SOCKET_IFNAME's
 * matcher (src/net/socket.c).  Properties: a port range that parses is
 * 1 <= lo <= hi <= 65535; an integer that parses prints back to a text
 * that parses to the same value; a size is never negative.
 */
#include "core/config.h"
#include "core/log.h"
#include "net/socket.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_int(const char *text) {
  int64_t v, again;
  if (loom_parse_int(text, &v) != 0)
    return;
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, v);
  if (loom_parse_int(buf, &again) != 0 || again != v)
    abort();
}

static void check_port_range(const char *text) {
  int lo = -1, hi = -1;
  if (loom_parse_port_range(text, &lo, &hi) == 0 && !(1 <= lo && lo <= hi && hi <= 65535))
    abort();
}

static void check_size(const char *text) {
  int64_t v;
  if (loom_parse_size(text, &v) == 0 && v < 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  check_int(text);
  check_port_range(text);
  check_size(text);
  (void)loom_log_parse_subsys(text);
  /* the first line as a LOOM_SOCKET_IFNAME spec, the rest as an interface */
  char *nl = strchr(text, '\n');
  if (nl != NULL) {
    *nl = '\0';
    (void)loom_ifname_match(text, nl + 1);
  }
  free(text);
  return 0;
}
