/*
 * select.c — choosing the transport between nodes (select.h).
 */
#include "config.h"
#include "select.h"
#include "module_loader.h"
#include "core/config.h"
#include "core/error.h"

#include <stdio.h>
#include <string.h>

/* The ib and ofi modules are built when configure finds libibverbs with
 * librdmacm (LOOM_HAVE_VERBS) and libfabric (LOOM_HAVE_FABRIC). */
#ifdef LOOM_HAVE_VERBS
#define SELECT_HAVE_IB 1
#else
#define SELECT_HAVE_IB 0
#endif
#ifdef LOOM_HAVE_FABRIC
#define SELECT_HAVE_OFI 1
#else
#define SELECT_HAVE_OFI 0
#endif

static void set_name(struct loom_net_choice *c, enum loom_net_kind kind, const char *name) {
  c->kind = kind;
  snprintf(c->name, sizeof c->name, "%s", name);
}

static loomResult_t forced(const char *net, const struct loom_net_facts *f,
                           struct loom_net_choice *out, char *err, size_t errlen) {
  if (strcmp(net, "tcp") == 0) {
    set_name(out, LOOM_NET_TCP, "tcp");
  } else if (strcmp(net, "ofi") == 0) {
    if (!f->ofi_built) {
      snprintf(err, errlen,
               "LOOM_NET=ofi, but this Loom was built without libfabric (configure found no "
               "libfabric; install libfabric-dev and rebuild, or unset LOOM_NET)");
      return loomInvalidArgument;
    }
    if (f->ofi_load_error != NULL) {
      snprintf(err, errlen, "LOOM_NET=ofi: %s, or unset LOOM_NET", f->ofi_load_error);
      return loomSystemError;
    }
    set_name(out, LOOM_NET_OFI, "ofi");
  } else if (strcmp(net, "ib") == 0) {
    if (!f->ib_built) {
      snprintf(err, errlen,
               "LOOM_NET=ib, but this Loom was built without the ibverbs transport (%s); unset "
               "LOOM_NET or use tcp or ofi",
               f->ib_missing ? f->ib_missing : "not in this build");
      return loomInvalidArgument;
    }
    if (f->ib_load_error != NULL) {
      snprintf(err, errlen, "LOOM_NET=ib: %s, or unset LOOM_NET", f->ib_load_error);
      return loomSystemError;
    }
    if (!f->ib_available) {
      snprintf(err, errlen, "LOOM_NET=ib, but the ibverbs transport cannot run here: %s; unset "
               "LOOM_NET or use tcp",
               f->ib_why && *f->ib_why ? f->ib_why : "no RDMA device was found");
      return loomSystemError;
    }
    set_name(out, LOOM_NET_IB, "ib");
  } else {
    snprintf(err, errlen, "LOOM_NET=\"%s\": expected tcp, ofi or ib", net);
    return loomInvalidArgument;
  }
  snprintf(out->why, sizeof out->why, "LOOM_NET=%s", net);
  return loomSuccess;
}

loomResult_t loom_net_decide(const char *net, const char *plugin, const struct loom_net_facts *f,
                             struct loom_net_choice *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  err[0] = '\0';
  if (net != NULL && *net == '\0')
    net = NULL;
  if (plugin != NULL && *plugin == '\0')
    plugin = NULL;
  if (plugin != NULL) {
    if (net != NULL) {
      snprintf(err, errlen,
               "LOOM_NET=%s and LOOM_NET_PLUGIN=%s both choose the transport between nodes: "
               "unset one",
               net, plugin);
      return loomInvalidArgument;
    }
    out->kind = LOOM_NET_PLUGIN;
    out->plugin = plugin;
    snprintf(out->name, sizeof out->name, "plugin %.32s", plugin);
    snprintf(out->why, sizeof out->why, "LOOM_NET_PLUGIN=%s", plugin);
    return loomSuccess;
  }
  if (net != NULL)
    return forced(net, f, out, err, errlen);
  if (f->ib_built && f->ib_available) {
    set_name(out, LOOM_NET_IB, "ib");
    out->tcp_fallback = 1;
    snprintf(out->why, sizeof out->why, "default: ib > ofi > tcp; %s",
             f->ib_why && *f->ib_why ? f->ib_why : "an RDMA device exists");
  } else if (f->ofi_built && f->ofi_fabric) {
    set_name(out, LOOM_NET_OFI, "ofi");
    out->tcp_fallback = 1;
    snprintf(out->why, sizeof out->why, "default: %s", f->ofi_why ? f->ofi_why : "a fabric");
  } else {
    set_name(out, LOOM_NET_TCP, "tcp");
    snprintf(out->why, sizeof out->why, "default: %s; %s",
             !f->ib_built                    ? "ibverbs transport not built"
             : f->ib_why && *f->ib_why       ? f->ib_why
                                             : "no RDMA device for ibverbs",
             !f->ofi_built ? "built without libfabric"
                           : (f->ofi_why ? f->ofi_why : "libfabric offers no fabric"));
  }
  return loomSuccess;
}

/* Texts the facts point to. */
struct probe {
  char ib_why[512], ofi_why[512], ib_err[768], ofi_err[768];
};

/* Loads the ib module and asks it whether a usable RDMA port exists. */
static void probe_ib(struct loom_net_facts *f, struct probe *p) {
  const struct loom_transport_module *m;
  if (loom_module_get("ib", &m, p->ib_err, sizeof p->ib_err) != 0) {
    f->ib_load_error = p->ib_err;
    f->ib_why = p->ib_err;
    return;
  }
  f->ib_available = m->available(p->ib_why, sizeof p->ib_why);
  f->ib_why = p->ib_why;
}

/* Loads the ofi module; for the default, also asks it whether libfabric's
 * provider is a fabric. */
static void probe_ofi(struct loom_net_facts *f, struct probe *p, int ask) {
  const struct loom_transport_module *m;
  if (loom_module_get("ofi", &m, p->ofi_err, sizeof p->ofi_err) != 0) {
    f->ofi_load_error = p->ofi_err;
    f->ofi_why = p->ofi_err;
    return;
  }
  if (ask) {
    f->ofi_fabric = m->available(p->ofi_why, sizeof p->ofi_why);
    f->ofi_why = p->ofi_why;
  }
}

/* The default: a module is loaded only where the kernel shows the
 * hardware it drives; elsewhere neither libibverbs nor libfabric is. */
static void probe_default(struct loom_net_facts *f, struct probe *p) {
  char seen[128] = "";
  if (f->ib_built && loom_rdma_device_visible(seen, sizeof seen))
    probe_ib(f, p);
  else if (f->ib_built)
    f->ib_why = "no RDMA device (nothing in /sys/class/infiniband)";
  if (!f->ib_available && f->ofi_built) {
    if (loom_fabric_device_visible(seen, sizeof seen))
      probe_ofi(f, p, 1);
    else
      f->ofi_why = "no fabric device for libfabric (none in /sys/class/infiniband, "
                   "/sys/class/cxi, /dev/cxi*, /dev/hfi1_*)";
  }
  /* A module that does not load leaves the default on tcp, loudly. */
  const char *failed = f->ib_load_error ? f->ib_load_error : f->ofi_load_error;
  if (failed != NULL)
    LOOM_WARN(LOOM_LOG_NET, "%s found, but %s; using tcp between nodes", seen, failed);
}

loomResult_t loom_net_select(struct loom_net_choice *out) {
  const char *net = loom_param_str(LOOM_PARAM_NET);
  const char *plugin = loom_param_str(LOOM_PARAM_NET_PLUGIN);
  int has_net = net != NULL && *net != '\0', has_plugin = plugin != NULL && *plugin != '\0';
  struct loom_net_facts f = {.ib_built = SELECT_HAVE_IB, .ofi_built = SELECT_HAVE_OFI};
  struct probe p = {.ib_why = ""};
  if (!f.ib_built)
    f.ib_missing = "configure found no libibverbs with librdmacm; Debian: libibverbs-dev "
                   "librdmacm-dev";
  if (!has_net && !has_plugin)
    probe_default(&f, &p);
  else if (has_net && !has_plugin && f.ib_built && strcmp(net, "ib") == 0)
    probe_ib(&f, &p);
  else if (has_net && !has_plugin && f.ofi_built && strcmp(net, "ofi") == 0)
    probe_ofi(&f, &p, 0);
  char err[1024];
  loomResult_t res = loom_net_decide(net, plugin, &f, out, err, sizeof err);
  if (res != loomSuccess)
    return loom_error(res, LOOM_LOG_NET, "%s", err);
  return loomSuccess;
}

/* The transport inside a module that loom_net_select loaded. */
static loomResult_t module_transport(const char *name, const struct loom_transport **out) {
  const struct loom_transport_module *m;
  char err[768];
  if (loom_module_get(name, &m, err, sizeof err) != 0)
    return loom_error(loomSystemError, LOOM_LOG_NET, "LOOM_NET=%s: %s", name, err);
  *out = m->transport;
  return loomSuccess;
}

loomResult_t loom_net_transport(const struct loom_net_choice *c,
                                const struct loom_transport **out) {
  switch (c->kind) {
  case LOOM_NET_TCP:
    *out = &loom_transport_tcp;
    return loomSuccess;
  case LOOM_NET_OFI:
    return module_transport("ofi", out);
  case LOOM_NET_IB:
    return module_transport("ib", out);
  case LOOM_NET_PLUGIN:
    return loom_net_plugin_load(c->plugin, out);
  }
  return loom_error(loomInternalError, LOOM_LOG_NET, "transport %s is not built in", c->name);
}
