/*
 * net_plugin.c — loading a transport from libloom-net-NAME.so
 * (LOOM_NET_PLUGIN=NAME): the dlopen search path first, then Loom's
 * pkglibdir; the symbol LOOM_NET_PLUGIN_SYMBOL (loom_net_plugin_v<N>) must
 * be a struct loom_transport of this API version; Loom keeps a copy in
 * which the members past the plugin's struct_size are NULL (added after
 * the plugin was built).  A loaded plugin stays
 * loaded for the life of the process (communicators come and go; its code
 * must not).
 */
#include "select.h"
#include "core/error.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef LOOM_PKGLIBDIR
#define LOOM_PKGLIBDIR "/usr/local/lib/loom"
#endif

#define PLUGIN_NAME_MAX 64
#define PLUGIN_CACHE 8

struct loaded_plugin {
  char name[PLUGIN_NAME_MAX + 1];
  const struct loom_transport *tp;
};

static struct loaded_plugin loaded[PLUGIN_CACHE];
static int nloaded;
static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;

static int name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > PLUGIN_NAME_MAX || name[0] == '.' || name[0] == '-')
    return 0;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.')
      return 0;
  return 1;
}

/* Names the API version a plugin was built for, when it exports another. */
static int other_version(void *handle) {
  for (int v = 1; v <= 64; v++) {
    char sym[40];
    snprintf(sym, sizeof sym, "loom_net_plugin_v%d", v);
    if (v != LOOM_TRANSPORT_API_VERSION && dlsym(handle, sym) != NULL)
      return v;
  }
  return 0;
}

static loomResult_t check_vtable(const char *file, const struct loom_transport *t) {
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
  return loomSuccess;
}

static loomResult_t load(const char *name, const struct loom_transport **out) {
  char file[PLUGIN_NAME_MAX + 32], path[sizeof LOOM_PKGLIBDIR + sizeof file + 1];
  snprintf(file, sizeof file, "libloom-net-%s.so", name);
  void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  char first_error[512] = "";
  if (handle == NULL) {
    snprintf(first_error, sizeof first_error, "%s", dlerror());
    snprintf(path, sizeof path, "%s/%s", LOOM_PKGLIBDIR, file);
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL)
      return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                        "LOOM_NET_PLUGIN=%s: cannot load %s: not on the library search path "
                        "(%s) nor in %s (%s); set LD_LIBRARY_PATH to the plugin's directory or "
                        "unset LOOM_NET_PLUGIN",
                        name, file, first_error, LOOM_PKGLIBDIR, dlerror());
  }
  const struct loom_transport *t = dlsym(handle, LOOM_NET_PLUGIN_SYMBOL);
  if (t == NULL) {
    int v = other_version(handle);
    dlclose(handle);
    if (v != 0)
      return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                        "LOOM_NET_PLUGIN=%s: %s was built for transport API version %d "
                        "(loom_net_plugin_v%d), this Loom speaks version %d (%s): rebuild the "
                        "plugin against this Loom's loom_net.h",
                        name, file, v, v, LOOM_TRANSPORT_API_VERSION, LOOM_NET_PLUGIN_SYMBOL);
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN=%s: %s exports no %s: not a Loom network plugin", name,
                      file, LOOM_NET_PLUGIN_SYMBOL);
  }
  loomResult_t res = check_vtable(file, t);
  if (res != loomSuccess) {
    dlclose(handle);
    return res;
  }
  /* the members it knows; later ones (and peek, Loom's own) absent */
  struct loom_transport *copy = calloc(1, sizeof *copy);
  if (copy == NULL) {
    dlclose(handle);
    return loom_error(loomSystemError, LOOM_LOG_NET, "LOOM_NET_PLUGIN=%s: out of memory", name);
  }
  memcpy(copy, t, t->struct_size < sizeof *copy ? t->struct_size : sizeof *copy);
  copy->struct_size = sizeof *copy;
  copy->peek = NULL;
  LOOM_INFO(LOOM_LOG_NET, "LOOM_NET_PLUGIN=%s: loaded %s, transport \"%s\" (API version %d)",
            name, file, t->name, t->api_version);
  *out = copy; /* kept, like the library, for the life of the process */
  return loomSuccess;
}

loomResult_t loom_net_plugin_load(const char *name, const struct loom_transport **out) {
  if (name == NULL || !name_ok(name))
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN=\"%s\": a plugin name is 1 to %d letters, digits, '_', "
                      "'-' or '.' (Loom loads libloom-net-NAME.so)",
                      name ? name : "", PLUGIN_NAME_MAX);
  pthread_mutex_lock(&plugin_lock);
  loomResult_t res = loomSuccess;
  const struct loom_transport *t = NULL;
  for (int i = 0; i < nloaded && t == NULL; i++)
    if (strcmp(loaded[i].name, name) == 0)
      t = loaded[i].tp;
  if (t == NULL) {
    res = load(name, &t);
    if (res == loomSuccess && nloaded < PLUGIN_CACHE) {
      snprintf(loaded[nloaded].name, sizeof loaded[nloaded].name, "%s", name);
      loaded[nloaded++].tp = t;
    }
  }
  pthread_mutex_unlock(&plugin_lock);
  if (res == loomSuccess)
    *out = t;
  return res;
}
