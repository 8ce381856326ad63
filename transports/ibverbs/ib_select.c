/*
 * ib_select.c — LOOM_IB_HCA parsing and matching, GID to IP address.
 */
#include "ib_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hca_spec {
  int exclude, exact;
  const char *items; /* after the '^' and '=' */
};

static void spec_split(const char *spec, struct hca_spec *s) {
  s->exclude = s->exact = 0;
  if (*spec == '^') {
    s->exclude = 1;
    spec++;
  }
  if (*spec == '=') {
    s->exact = 1;
    spec++;
  }
  s->items = spec;
}

/* Reads item [p, end) as name and port (0: any).  -1 when malformed. */
static int parse_item(const char *p, const char *end, char *name, size_t name_len, int *port) {
  const char *colon = memchr(p, ':', (size_t)(end - p));
  const char *name_end = colon ? colon : end;
  size_t n = (size_t)(name_end - p);
  if (n == 0 || n >= name_len)
    return -1;
  memcpy(name, p, n);
  name[n] = '\0';
  *port = 0;
  if (colon != NULL) {
    if (colon + 1 == end || end - colon > 4)
      return -1;
    int v = 0;
    for (const char *q = colon + 1; q < end; q++) {
      if (*q < '0' || *q > '9')
        return -1;
      v = v * 10 + (*q - '0');
    }
    if (v < 1 || v > 255)
      return -1;
    *port = v;
  }
  return 0;
}

int ib_hca_check(const char *spec, char *why, size_t len) {
  if (spec == NULL || *spec == '\0')
    return 0;
  struct hca_spec s;
  spec_split(spec, &s);
  const char *p = s.items;
  if (*p == '\0') {
    snprintf(why, len, "LOOM_IB_HCA=\"%s\" names no device", spec);
    return -1;
  }
  for (;;) {
    const char *end = strchr(p, ',');
    if (end == NULL)
      end = p + strlen(p);
    char name[64];
    int port;
    if (parse_item(p, end, name, sizeof name, &port) != 0) {
      snprintf(why, len,
               "LOOM_IB_HCA=\"%s\": \"%.*s\" is not device[:port] (port 1..255), e.g. "
               "mlx5_0:1",
               spec, (int)(end - p), p);
      return -1;
    }
    if (*end == '\0')
      return 0;
    p = end + 1;
  }
}

int ib_hca_match(const char *spec, const char *name, int port) {
  if (spec == NULL || *spec == '\0')
    return 1;
  char why[8];
  if (ib_hca_check(spec, why, sizeof why) != 0)
    return 0;
  struct hca_spec s;
  spec_split(spec, &s);
  int hit = 0;
  for (const char *p = s.items; !hit;) {
    const char *end = strchr(p, ',');
    if (end == NULL)
      end = p + strlen(p);
    char item[64];
    int item_port;
    parse_item(p, end, item, sizeof item, &item_port);
    int name_ok = s.exact ? strcmp(item, name) == 0 : strncmp(item, name, strlen(item)) == 0;
    hit = name_ok && (item_port == 0 || item_port == port);
    if (*end == '\0')
      break;
    p = end + 1;
  }
  return s.exclude ? !hit : hit;
}

int ib_gid_to_sockaddr(const uint8_t gid[16], union loom_sockaddr *out) {
  static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t zero[16];
  memset(out, 0, sizeof *out);
  if (memcmp(gid, v4_prefix, sizeof v4_prefix) == 0) {
    out->sin.sin_family = AF_INET;
    memcpy(&out->sin.sin_addr, gid + 12, 4);
    return out->sin.sin_addr.s_addr != 0 ? 0 : -1;
  }
  if (memcmp(gid, zero, 16) == 0 || (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80))
    return -1;
  out->sin6.sin6_family = AF_INET6;
  memcpy(&out->sin6.sin6_addr, gid, 16);
  return 0;
}
