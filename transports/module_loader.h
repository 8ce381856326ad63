/*
 * module_loader.h — finding, loading and binding Loom's modules: the
 * transports libloom-net-ofi.so and libloom-net-ib.so (common/module.h)
 * and the device backend libloom-dev-cuda.so (device/device.h), searched in
 * LOOM_MODULE_PATH's directories when it is set, else in Loom's pkglibdir
 * (where make install puts them).  make check sets LOOM_MODULE_PATH to the
 * build tree's .libs.  A module is loaded on first use and stays loaded
 * for the life of the process.
 */
#ifndef LOOM_TRANSPORT_MODULE_LOADER_H
#define LOOM_TRANSPORT_MODULE_LOADER_H

#include "common/module.h"

#include <stddef.h>

struct loom_topo_hw;

/* What this Loom knows of a module. */
struct loom_module_info {
  const char *name;    /* "ofi", "ib": LOOM_NET's words */
  const char *file;    /* "libloom-net-ofi.so" */
  const char *library; /* what it links, for messages: "libfabric" */
  const char *install; /* the packages that provide it */
  int built;           /* configure built it (with the library found) */
  const char *symbol;  /* what it exports */
  int device;          /* 1: a device backend (device/device.h), 0: a transport */
};

/* The known modules, n of them; NULL past the end. */
const struct loom_module_info *loom_module_at(int i);
const struct loom_module_info *loom_module_find(const char *name);

/* The directories searched, ':'-separated, and where that list came from
 * ("LOOM_MODULE_PATH" or "Loom's pkglibdir"). */
const char *loom_module_search_path(const char **source);

/* The first file of that name in the search path: 0 with its path, or -1. */
int loom_module_locate(const struct loom_module_info *m, char *path, size_t len);

/* The module, loaded and bound (once per process): 0, or -1 with a message
 * for the user in err, e.g. "cannot load libloom-net-ofi.so
 * (libfabric.so.1: cannot open shared object file: No such file or
 * directory): install libfabric1 (Debian, Ubuntu) or libfabric (RPM)".
 * Sets IPATH_NO_BACKTRACE=1 and HFI_NO_BACKTRACE=1 first, unless set. */
int loom_module_get(const char *name, const struct loom_transport_module **out, char *err,
                    size_t errlen);

/* The same for a device module (libloom-dev-cuda.so). */
struct loom_device_module;
int loom_module_get_device(const char *name, const struct loom_device_module **out, char *err,
                           size_t errlen);

/* loom-topo: appends what the module lists (libfabric's providers, kind
 * "ofi") to hw, loading it; how many, or -1 with the reason in why. */
int loom_module_list_devices(const char *name, struct loom_topo_hw *hw, char *why, size_t len);

/* module_host.c: libloom's services for the modules. */
extern const struct loom_module_host loom_module_host_table;

#endif
