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

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef LOOM_PKGLIBDIR
#define LOOM_PKGLIBDIR "/usr/local/lib/loom"
#endif

#define PLUGIN_CACHE 8

struct loaded_plugin {
  char name[LOOM_NET_PLUGIN_NAME_MAX + 1];
  const struct loom_transport *tp;
};

static struct loaded_plugin loaded[PLUGIN_CACHE];
static int nloaded;
static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;

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

static loomResult_t load(const char *name, const struct loom_transport **out) {
  char file[LOOM_NET_PLUGIN_NAME_MAX + 32], path[sizeof LOOM_PKGLIBDIR + sizeof file + 1];
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
  loomResult_t res = loom_net_plugin_check(file, t);
  if (res != loomSuccess) {
    dlclose(handle);
    return res;
  }
  /* the members it knows; later ones (and peek, Loom's own) absent */
  struct loom_transport *copy = loom_net_plugin_copy(t);
  if (copy == NULL) {
    dlclose(handle);
    return loom_error(loomSystemError, LOOM_LOG_NET, "LOOM_NET_PLUGIN=%s: out of memory", name);
  }
  LOOM_INFO(LOOM_LOG_NET, "LOOM_NET_PLUGIN=%s: loaded %s, transport \"%s\" (API version %d)",
            name, file, t->name, t->api_version);
  *out = copy; /* kept, like the library, for the life of the process */
  return loomSuccess;
}

loomResult_t loom_net_plugin_load(const char *name, const struct loom_transport **out) {
  if (name == NULL || !loom_net_plugin_name_ok(name))
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "LOOM_NET_PLUGIN=\"%s\": a plugin name is 1 to %d letters, digits, '_', "
                      "'-' or '.' (Loom loads libloom-net-NAME.so)",
                      name ? name : "", LOOM_NET_PLUGIN_NAME_MAX);
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
