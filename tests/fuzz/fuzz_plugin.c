/*
 * fuzz_plugin.c — libFuzzer harness for the network-plugin handshake
 * (transports/net_plugin_check.c): the LOOM_NET_PLUGIN name, which becomes
 * part of a file name Loom dlopens, and the transport table a plugin
 * exports, which Loom checks and copies before it calls anything in it.
 *
 * Input: byte 0 is the name's length n (mod 96), then n name bytes; the
 * rest builds a table as a plugin of another build might: api_version and
 * struct_size (32 bits each, big-endian; struct_size up to the struct's
 * size + 64, a newer plugin's larger table), addr_bytes (32 bits), a 16-bit
 * mask of which members are set, then bytes for what lies past
 * sizeof(struct loom_transport) in a larger table.  Properties: an
 * accepted name is 1 to 64 of [A-Za-z0-9_.-], not starting with '.' or
 * '-', so "libloom-net-NAME.so" names no other directory; an accepted table
 * has this API version, a struct_size covering version 5's members, every
 * required member, and 1 to LOOM_NET_ADDR_MAX address bytes; Loom's copy
 * has the members the plugin's struct_size covers, NULL past it, peek NULL,
 * and its own struct_size.
 */
#include "core/error.h"
#include "select.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void member(void) {}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_name(const uint8_t *data, size_t n) {
  char name[128];
  memcpy(name, data, n);
  name[n] = '\0';
  if (!loom_net_plugin_name_ok(name))
    return;
  size_t len = strlen(name);
  if (len == 0 || len > LOOM_NET_PLUGIN_NAME_MAX || name[0] == '.' || name[0] == '-' ||
      strchr(name, '/') != NULL)
    abort();
  for (size_t i = 0; i < len; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
          (name[i] >= '0' && name[i] <= '9') || name[i] == '_' || name[i] == '-' ||
          name[i] == '.'))
      abort();
}

/* The table: a struct loom_transport, then up to 64 bytes a newer plugin
 * would have. */
struct plugin_table {
  struct loom_transport t;
  uint8_t newer[64];
};

#define SET(field, bit) (t->field = (mask >> (bit)) & 1 ? (__typeof__(t->field))member : NULL)

static void build(struct plugin_table *pt, const uint8_t *p, size_t n) {
  uint8_t head[14] = {0};
  memcpy(head, p, n < sizeof head ? n : sizeof head);
  memset(pt, 0, sizeof *pt);
  struct loom_transport *t = &pt->t;
  unsigned mask = (unsigned)head[12] << 8 | head[13];
  t->api_version = (int)be32(head);
  t->struct_size = be32(head + 4) % (sizeof pt->t + 65);
  t->addr_bytes = be32(head + 8);
  t->name = mask & 1 ? "fuzz" : NULL;
  SET(init, 1);
  SET(connect, 2);
  SET(isend, 3);
  SET(irecv, 4);
  SET(progress, 5);
  SET(poll_fds, 6);
  SET(fini, 7);
  SET(ctx_busy_wait, 8);
  SET(properties, 9);
  SET(ctx_name, 10);
  SET(probe, 11);
  t->peek = (mask >> 12) & 1 ? (const struct loom_peek_ops *)pt : NULL;
  if (n > sizeof head)
    memcpy(pt->newer, p + sizeof head,
           n - sizeof head < sizeof pt->newer ? n - sizeof head : sizeof pt->newer);
}

static void check_table(const uint8_t *p, size_t n) {
  struct plugin_table pt;
  build(&pt, p, n);
  const struct loom_transport *t = &pt.t;
  if (loom_net_plugin_check("libloom-net-fuzz.so", t) != loomSuccess)
    return;
  if (t->api_version != LOOM_TRANSPORT_API_VERSION ||
      t->struct_size < offsetof(struct loom_transport, properties) || t->name == NULL ||
      t->init == NULL || t->connect == NULL || t->isend == NULL || t->irecv == NULL ||
      t->progress == NULL || t->poll_fds == NULL || t->fini == NULL || t->addr_bytes == 0 ||
      t->addr_bytes > LOOM_NET_ADDR_MAX)
    abort();
  struct loom_transport *copy = loom_net_plugin_copy(t);
  if (copy == NULL)
    return;
  if (copy->struct_size != sizeof *copy || copy->peek != NULL || copy->init != t->init ||
      copy->fini != t->fini || copy->addr_bytes != t->addr_bytes)
    abort();
  /* members past the plugin's table are absent, not read from beyond it */
  if (t->struct_size <= offsetof(struct loom_transport, properties) && copy->properties != NULL)
    abort();
  if (t->struct_size <= offsetof(struct loom_transport, probe) && copy->probe != NULL)
    abort();
  free(copy);
}

/* Refusals are WARN lines; thousands a second would only slow the run. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("LOOM_DEBUG", "NONE", 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  size_t n = data[0] % 96;
  if (n > size - 1)
    n = size - 1;
  check_name(data + 1, n);
  check_table(data + 1 + n, size - 1 - n);
  return 0;
}
