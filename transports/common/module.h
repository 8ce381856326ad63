/*
 * module.h — the internal ABI between libloom and its transport modules,
 * libloom-net-ofi.so (libfabric) and libloom-net-ib.so (libibverbs and
 * librdmacm).  Those libraries stay out of libloom itself: libfabric's PSM
 * providers pull in libinfinipath, whose constructor installs SIGSEGV,
 * SIGTERM, SIGINT... handlers that exit(), in every process that merely
 * links them.  A module is dlopen()ed only when its transport is chosen
 * (transports/module.c).
 *
 * A module carries its transport's code and the pure helpers it needs
 * (socket addresses, byte order), but none of libloom's state: errors, the
 * log and the LOOM_* table stay in libloom, reached through the host table
 * the loader binds (transports/common/module_shim.c forwards loom_error,
 * LOOM_INFO, loom_param_str... to it, so the transport sources compile
 * unchanged).  Module and library must come from the same Loom build: the
 * loader compares abi, version and param_count before touching the rest.
 */
#ifndef LOOM_TRANSPORT_MODULE_H
#define LOOM_TRANSPORT_MODULE_H

#include "loom.h"

#include <stddef.h>
#include <stdint.h>

/* Bump on any change to the two structs below. */
#define LOOM_MODULE_ABI 1
/* The one symbol a module exports: a const struct loom_transport_module. */
#define LOOM_MODULE_NAME loom_transport_module_v1
#define LOOM_MODULE_SYMBOL "loom_transport_module_v1"

struct loom_transport;
struct loom_topo_nic;

/* libloom's services, for the module (every text is already formatted). */
struct loom_module_host {
  int abi;
  const char *version; /* PACKAGE_VERSION */
  int param_count;     /* LOOM_PARAM_COUNT: both sides index one table */
  /* loom_error: logs a WARN line and makes text the thread's last error. */
  void (*error)(loomResult_t code, int subsys, const char *text);
  /* loom_set_last_error: the thread's last error, not logged. */
  void (*set_last_error)(const char *text);
  const char *(*last_error)(void);
  int (*log_enabled)(int level, int subsys);
  void (*log_text)(int level, int subsys, const char *file, int line, const char *text);
  int64_t (*param_int)(int id);
  const char *(*param_str)(int id);
  int (*param_is_set)(int id);
  /* The config table's parsers (core/config.h), used by socket.c. */
  int (*parse_int)(const char *text, int64_t *out);
  int (*parse_port_range)(const char *text, int *lo, int *hi);
};

/* What a module exports. */
struct loom_transport_module {
  /* The first three are read before anything else. */
  int abi;
  const char *version;
  int param_count;
  const char *name; /* "ofi", "ib" */
  /* Called once, right after loading, before anything below. */
  void (*bind)(const struct loom_module_host *host);
  const struct loom_transport *transport;
  /* The default selection's question (loom_ib_available,
   * loom_ofi_default_ok): 1 when the transport should carry the job, else
   * 0; why says what was found either way. */
  int (*available)(char *why, size_t len);
  /* Optional (NULL: none): what the library offers, for loom-topo
   * (libfabric's providers, kind "ofi"): fills at most max entries and
   * returns how many, or -1 with the reason in why. */
  int (*list_devices)(struct loom_topo_nic *out, int max, char *why, size_t len);
};

/* Defined by module_shim.c in every module: keeps the host table. */
void loom_module_bind(const struct loom_module_host *host);

#endif
