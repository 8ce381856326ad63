/*
 * select.h — which transport carries the peers on other nodes: LOOM_NET
 * and LOOM_NET_PLUGIN when set, else ib > ofi > tcp by what this build and
 * machine offer (ofi only over a real fabric).  The mux (mux.c) applies
 * the choice per peer; shared memory inside a node is its business.
 */
#ifndef LOOM_TRANSPORT_SELECT_H
#define LOOM_TRANSPORT_SELECT_H

#include "transport.h"

#include <stddef.h>

enum loom_net_kind { LOOM_NET_TCP, LOOM_NET_OFI, LOOM_NET_IB, LOOM_NET_PLUGIN };

/* What the build and the machine offer.  ofi and ib live in modules
 * (libloom-net-ofi.so, libloom-net-ib.so: module_loader.h), loaded only to
 * answer these questions when their transport is forced or, by default,
 * when the kernel shows RDMA or fabric hardware. */
struct loom_net_facts {
  int ofi_built;
  int ofi_fabric; /* libfabric's provider (LOOM_OFI_PROVIDER or best) is a fabric */
  const char *ofi_why;
  const char *ofi_load_error; /* the module was needed but did not load: why */
  int ib_built;
  const char *ib_missing; /* why not built, when not */
  int ib_available; /* an RDMA device exists */
  const char *ib_why; /* what loom_ib_available found, either way */
  const char *ib_load_error; /* the module was needed but did not load: why */
};

#define LOOM_NET_NAME_BYTES 40

struct loom_net_choice {
  enum loom_net_kind kind;
  /* Default choices of ib or ofi also listen on tcp, for peers whose own
   * default differs (a node without the device): such a pair uses tcp. */
  int tcp_fallback;
  char name[LOOM_NET_NAME_BYTES]; /* "tcp", "ofi", "ib", "plugin NAME": compared between ranks */
  const char *plugin;             /* LOOM_NET_PLUGIN's NAME */
  char why[320];
};

/* The decision, pure: net and plugin are LOOM_NET's and LOOM_NET_PLUGIN's
 * values (NULL: unset).  Returns loomSuccess, or loomInvalidArgument /
 * loomSystemError with the reason in err. */
loomResult_t loom_net_decide(const char *net, const char *plugin, const struct loom_net_facts *f,
                             struct loom_net_choice *out, char *err, size_t errlen);

/* Reads the environment, probes what the decision needs and decides; an
 * error is reported (loom_error) and returned.  LOOM_NET=ib or ofi loads
 * that module; unset, the ib module is loaded only when the kernel shows
 * an RDMA device and the ofi module only when it shows fabric hardware
 * (devices.c), so a plain host loads neither. */
loomResult_t loom_net_select(struct loom_net_choice *out);

/* The transport for a choice: built in, from its module, or a plugin
 * (net_plugin.c). */
loomResult_t loom_net_transport(const struct loom_net_choice *c, const struct loom_transport **out);

/* net_plugin.c: loads libloom-net-NAME.so once per process (it stays
 * loaded) and checks its vtable. */
loomResult_t loom_net_plugin_load(const char *name, const struct loom_transport **out);
/* net_plugin_check.c: a plugin name is 1 to LOOM_NET_PLUGIN_NAME_MAX
 * letters, digits, '_', '-' or '.', not starting with '.' or '-' (so no
 * path); 1 when `name` is one. */
#define LOOM_NET_PLUGIN_NAME_MAX 64
int loom_net_plugin_name_ok(const char *name);
/* The exported table (`file` names it in errors): this API version, a
 * struct_size covering version 5's members, and every required member;
 * loomInvalidArgument saying what is wrong. */
loomResult_t loom_net_plugin_check(const char *file, const struct loom_transport *t);
/* Loom's copy of a checked table: the members the plugin's struct_size
 * covers, the rest NULL, peek NULL; NULL when out of memory. */
struct loom_transport *loom_net_plugin_copy(const struct loom_transport *t);

/* devices.c: whether the kernel shows an RDMA device (/sys/class/infiniband)
 * or, for libfabric, any fabric hardware (that, /sys/class/cxi, /dev/cxi*,
 * /dev/hfi1_*); 1 with what was seen in `what`, else 0.  No library is
 * loaded to answer. */
int loom_rdma_device_visible(char *what, size_t len);
int loom_fabric_device_visible(char *what, size_t len);

#endif
