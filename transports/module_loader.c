/*
 * module_loader.c — loads a transport module (module_loader.h): finds its
 * file in the search path, dlopen()s it (RTLD_NOW | RTLD_LOCAL, after
 * keeping PSM's signal handlers out), refuses one of another Loom build,
 * binds libloom's host table and keeps it for the life of the process:
 * libfabric and its providers do not take dlclose() well, and a
 * transport's code must outlive every communicator that used it.
 */
#include "config.h"
#include "module_loader.h"
#include "core/config.h"
#include "core/error.h"
#include "topo/topo.h"
#include "device/device.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef LOOM_PKGLIBDIR
#define LOOM_PKGLIBDIR "/usr/local/lib/loom"
#endif
#ifdef LOOM_HAVE_FABRIC
#define MODULE_OFI_BUILT 1
#else
#define MODULE_OFI_BUILT 0
#endif
#ifdef LOOM_HAVE_VERBS
#define MODULE_IB_BUILT 1
#else
#define MODULE_IB_BUILT 0
#endif
#ifdef LOOM_HAVE_CUDA
#define MODULE_CUDA_BUILT 1
#else
#define MODULE_CUDA_BUILT 0
#endif

static const struct loom_module_info modules[] = {
    {.name = "ofi", .file = "libloom-net-ofi.so", .library = "libfabric",
     .install = "libfabric1 (Debian, Ubuntu) or libfabric (RPM)", .built = MODULE_OFI_BUILT,
     .symbol = LOOM_MODULE_SYMBOL},
    {.name = "ib", .file = "libloom-net-ib.so", .library = "libibverbs and librdmacm",
     .install = "libibverbs1, librdmacm1 and ibverbs-providers (Debian, Ubuntu) or "
                "rdma-core (RPM)",
     .built = MODULE_IB_BUILT, .symbol = LOOM_MODULE_SYMBOL},
    {.name = "cuda", .file = "libloom-dev-cuda.so", .library = "the CUDA runtime (libcudart)",
     .install = "the NVIDIA driver and the CUDA runtime (cuda-cudart)",
     .built = MODULE_CUDA_BUILT, .symbol = LOOM_DEVICE_MODULE_SYMBOL, .device = 1},
};
#define NMODULES ((int)(sizeof modules / sizeof modules[0]))

static const void *loaded[NMODULES]; /* the module's exported struct */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

const struct loom_module_info *loom_module_at(int i) {
  return i >= 0 && i < NMODULES ? &modules[i] : NULL;
}

const struct loom_module_info *loom_module_find(const char *name) {
  for (int i = 0; i < NMODULES; i++)
    if (name != NULL && strcmp(modules[i].name, name) == 0)
      return &modules[i];
  return NULL;
}

const char *loom_module_search_path(const char **source) {
  const char *set = loom_param_str(LOOM_PARAM_MODULE_PATH);
  int use_set = set != NULL && *set != '\0';
  if (source != NULL)
    *source = use_set ? "LOOM_MODULE_PATH" : "Loom's pkglibdir";
  return use_set ? set : LOOM_PKGLIBDIR;
}

int loom_module_locate(const struct loom_module_info *m, char *path, size_t len) {
  const char *dirs = loom_module_search_path(NULL);
  for (const char *d = dirs; *d != '\0';) {
    size_t n = strcspn(d, ":");
    if (n > 0 && (size_t)snprintf(path, len, "%.*s/%s", (int)n, d, m->file) < len &&
        access(path, F_OK) == 0)
      return 0;
    d += n + (d[n] == ':');
  }
  return -1;
}

/* libinfinipath (PSM, which libfabric's psm provider links) and libpsm2
 * install handlers for SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT, SIGTERM...
 * at load that print a backtrace and exit(), unless these are set: a crash
 * would exit 1, SIGTERM would not end the process as the shell expects.
 * Open MPI's opal_init sets the same two.  A value the user set stays. */
static void keep_psm_handlers_out(void) {
  setenv("IPATH_NO_BACKTRACE", "1", 0);
  setenv("HFI_NO_BACKTRACE", "1", 0);
}

static void *open_file(const struct loom_module_info *m, const char *path, char *err,
                       size_t errlen) {
  keep_psm_handlers_out();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL)
    return h;
  const char *e = dlerror();
  if (e == NULL)
    e = "dlopen failed";
  if (strncmp(e, path, strlen(path)) == 0) /* the file itself, not a library it needs */
    snprintf(err, errlen, "cannot load %s (%s): the file is damaged or not a module of this "
             "machine; reinstall Loom", m->file, e);
  else
    snprintf(err, errlen, "cannot load %s (%s): install %s", m->file, e, m->install);
  return NULL;
}

/* What every module's exported struct starts with (common/module.h,
 * device/device.h). */
struct module_header {
  int abi;
  const char *version;
  int param_count;
  const char *name;
};

/* 0 when the module comes from this very build of Loom.  abi, version and
 * param_count lead the struct in every ABI, so they are safe to read from
 * a module of any build. */
static int check_header(const struct loom_module_info *info, const char *path,
                        const struct module_header *m, char *err, size_t errlen) {
  if (m == NULL) {
    snprintf(err, errlen, "cannot load %s: %s exports no %s: not a Loom module", info->file,
             path, info->symbol);
    return -1;
  }
  if (m->abi != LOOM_MODULE_ABI || m->version == NULL ||
      strcmp(m->version, PACKAGE_VERSION) != 0 || m->param_count != LOOM_PARAM_COUNT) {
    snprintf(err, errlen,
             "cannot load %s: %s comes from another build of Loom (Loom %.32s, module ABI %d, "
             "%d settings; this library: Loom %s, ABI %d, %d settings): install the module "
             "built with this Loom, or point LOOM_MODULE_PATH at it",
             info->file, path, m->version ? m->version : "?", m->abi, m->param_count,
             PACKAGE_VERSION, LOOM_MODULE_ABI, LOOM_PARAM_COUNT);
    return -1;
  }
  if (m->name == NULL || strcmp(m->name, info->name) != 0) {
    snprintf(err, errlen, "cannot load %s: %s is not Loom's %s module", info->file, path,
             info->name);
    return -1;
  }
  return 0;
}

/* The kind-specific fields a module must fill; binds it when they are. */
static int check_and_bind(const struct loom_module_info *info, const char *path,
                          const void *sym, char *err, size_t errlen) {
  int ok;
  if (info->device) {
    const struct loom_device_module *d = sym;
    ok = d->bind != NULL && d->ops != NULL && d->available != NULL &&
         d->ops->struct_size >= sizeof(struct loom_device_ops);
    if (ok)
      d->bind(&loom_module_host_table);
  } else {
    const struct loom_transport_module *t = sym;
    ok = t->bind != NULL && t->transport != NULL && t->available != NULL;
    if (ok)
      t->bind(&loom_module_host_table);
  }
  if (!ok)
    snprintf(err, errlen, "cannot load %s: %s is not Loom's %s module", info->file, path,
             info->name);
  return ok ? 0 : -1;
}

static const void *load(const struct loom_module_info *info, char *err, size_t errlen) {
  char path[PATH_MAX];
  const char *source;
  const char *dirs = loom_module_search_path(&source);
  if (loom_module_locate(info, path, sizeof path) != 0) {
    snprintf(err, errlen, "cannot load %s: it is in none of %s (%s): install Loom's %s module "
             "there, or set LOOM_MODULE_PATH to its directory", info->file, dirs, source,
             info->name);
    return NULL;
  }
  void *h = open_file(info, path, err, errlen);
  if (h == NULL)
    return NULL;
  const void *sym = dlsym(h, info->symbol);
  if (check_header(info, path, sym, err, errlen) != 0 ||
      check_and_bind(info, path, sym, err, errlen) != 0)
    return NULL; /* left mapped: unloading libfabric is not worth the risk */
  LOOM_INFO(LOOM_LOG_NET | LOOM_LOG_INIT, "loaded %s module %s (%s, Loom %s)",
            info->device ? "device" : "transport", path, info->name, PACKAGE_VERSION);
  return sym;
}

/* The module's exported struct, loaded once per process. */
static const void *get(const char *name, int device, char *err, size_t errlen) {
  const struct loom_module_info *info = loom_module_find(name);
  if (info == NULL || !info->built || info->device != device) {
    snprintf(err, errlen, "this Loom was built without the %s module", name ? name : "?");
    return NULL;
  }
  int i = (int)(info - modules);
  pthread_mutex_lock(&load_lock);
  if (loaded[i] == NULL)
    loaded[i] = load(info, err, errlen);
  const void *m = loaded[i];
  pthread_mutex_unlock(&load_lock);
  return m;
}

int loom_module_get(const char *name, const struct loom_transport_module **out, char *err,
                    size_t errlen) {
  const struct loom_transport_module *m = get(name, 0, err, errlen);
  if (m == NULL)
    return -1;
  *out = m;
  return 0;
}

int loom_module_get_device(const char *name, const struct loom_device_module **out, char *err,
                           size_t errlen) {
  const struct loom_device_module *m = get(name, 1, err, errlen);
  if (m == NULL)
    return -1;
  *out = m;
  return 0;
}

int loom_module_list_devices(const char *name, struct loom_topo_hw *hw, char *why, size_t len) {
  const struct loom_transport_module *m;
  if (loom_module_get(name, &m, why, len) != 0)
    return -1;
  if (m->list_devices == NULL) {
    snprintf(why, len, "the %s module lists no devices", name);
    return -1;
  }
  int room = LOOM_TOPO_MAX_NICS - hw->nnics;
  int n = room > 0 ? m->list_devices(&hw->nics[hw->nnics], room, why, len) : 0;
  if (n > 0)
    hw->nnics += n > room ? room : n;
  return n;
}
