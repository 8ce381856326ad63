/*
 * net_plugin_check.c — what Loom checks before it trusts a network
 * plugin (net_plugin.c loads it): the name in LOOM_NET_PLUGIN (it becomes
 * part of a file name), the transport table the plugin exports, and the
 * copy Loom keeps of it.  Apart from the loader so that the fuzzer
 * (tests/fuzz/fuzz_plugin.c) drives them without dlopen.
 */
#include "select.h"
#include "core/error.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int loom_net_plugin_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > LOOM_NET_PLUGIN_NAME_MAX || name[0] == '.' || name[0] == '-')
    return 0;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.')
      return 0;
  return 1;
}

loomResult_t loom_net_plugin_check(const char *file, const struct loom_transport *t) {
  if (t->api_version != LOOM_TRANSPORT_API_VERSION)
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN: %s: %s says API version %d, this Loom speaks version %d "
                      "(rebuild the plugin against this Loom's loom_net.h)",
                      file, LOOM_NET_PLUGIN_SYMBOL, t->api_version, LOOM_TRANSPORT_API_VERSION);
  /* every member up to ctx_busy_wait is version 5's own */
  size_t base = offsetof(struct loom_transport, properties);
  if (t->struct_size < base)
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN: %s: %s has struct_size %zu, less than version %d's %zu "
                      "bytes (set .struct_size = sizeof(struct loom_transport))",
                      file, LOOM_NET_PLUGIN_SYMBOL, t->struct_size, LOOM_TRANSPORT_API_VERSION,
                      base);
  const char *missing = t->name == NULL              ? "name"
                        : t->init == NULL            ? "init"
                        : t->connect == NULL         ? "connect"
                        : t->isend == NULL           ? "isend"
                        : t->irecv == NULL           ? "irecv"
                        : t->progress == NULL        ? "progress"
                        : t->poll_fds == NULL        ? "poll_fds"
                        : t->fini == NULL            ? "fini"
                        : t->addr_bytes == 0         ? "addr_bytes"
                                                     : NULL;
  if (missing != NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN: %s: the transport %s has no %s", file,
                      LOOM_NET_PLUGIN_SYMBOL, missing);
  if (t->addr_bytes > LOOM_NET_ADDR_MAX)
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN: %s: the transport %s has addr_bytes %zu, more than "
                      "LOOM_NET_ADDR_MAX (%d): every rank's address travels to every rank at "
                      "init",
                      file, LOOM_NET_PLUGIN_SYMBOL, t->addr_bytes, LOOM_NET_ADDR_MAX);
  return loomSuccess;
}

struct loom_transport *loom_net_plugin_copy(const struct loom_transport *t) {
  struct loom_transport *copy = calloc(1, sizeof *copy);
  if (copy == NULL)
    return NULL;
  memcpy(copy, t, t->struct_size < sizeof *copy ? t->struct_size : sizeof *copy);
  copy->struct_size = sizeof *copy;
  copy->peek = NULL; /* Loom's own, never a plugin's */
  return copy;
}
