/*
 * select.c — choosing the transport between nodes (select.h).
 */
#include "config.h"
#include "select.h"
#include "core/config.h"
#include "core/error.h"

#ifdef LOOM_HAVE_FABRIC
#include "ofi/ofi.h"
#endif

#include <stdio.h>
#include <string.h>

/* The ibverbs transport (transports/ibverbs/: loom_transport_ib and
 * loom_ib_available, declared in transport.h) is built when configure
 * finds libibverbs and librdmacm (LOOM_HAVE_VERBS). */
#ifdef LOOM_HAVE_VERBS
#define SELECT_HAVE_IB 1
#else
#define SELECT_HAVE_IB 0
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
    set_name(out, LOOM_NET_OFI, "ofi");
  } else if (strcmp(net, "ib") == 0) {
    if (!f->ib_built) {
      snprintf(err, errlen,
               "LOOM_NET=ib, but this Loom was built without the ibverbs transport (%s); unset "
               "LOOM_NET or use tcp or ofi",
               f->ib_missing ? f->ib_missing : "not in this build");
      return loomInvalidArgument;
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

loomResult_t loom_net_select(struct loom_net_choice *out) {
  const char *net = loom_param_str(LOOM_PARAM_NET);
  const char *plugin = loom_param_str(LOOM_PARAM_NET_PLUGIN);
  int is_default = (net == NULL || *net == '\0') && (plugin == NULL || *plugin == '\0');
  struct loom_net_facts f = {0};
  (void)is_default; /* unused when neither verbs nor libfabric is built */
  f.ib_built = SELECT_HAVE_IB;
#if SELECT_HAVE_IB
  char ib_why[256] = "";
  if (is_default || (net != NULL && strcmp(net, "ib") == 0)) {
    f.ib_available = loom_ib_available(ib_why, sizeof ib_why);
    f.ib_why = ib_why;
  }
#else
  f.ib_missing = "configure found no libibverbs with librdmacm; Debian: libibverbs-dev "
                 "librdmacm-dev";
#endif
#ifdef LOOM_HAVE_FABRIC
  f.ofi_built = 1;
  char ofi_why[256] = "";
  if (is_default && !f.ib_available) {
    f.ofi_fabric = loom_ofi_default_ok(ofi_why, sizeof ofi_why);
    f.ofi_why = ofi_why;
  }
#endif
  char err[512];
  loomResult_t res = loom_net_decide(net, plugin, &f, out, err, sizeof err);
  if (res != loomSuccess)
    return loom_error(res, LOOM_LOG_NET, "%s", err);
  return loomSuccess;
}

loomResult_t loom_net_transport(const struct loom_net_choice *c,
                                const struct loom_transport **out) {
  switch (c->kind) {
  case LOOM_NET_TCP:
    *out = &loom_transport_tcp;
    return loomSuccess;
  case LOOM_NET_OFI:
#ifdef LOOM_HAVE_FABRIC
    *out = &loom_transport_ofi;
    return loomSuccess;
#else
    break;
#endif
  case LOOM_NET_IB:
#if SELECT_HAVE_IB
    *out = &loom_transport_ib;
    return loomSuccess;
#else
    break;
#endif
  case LOOM_NET_PLUGIN:
    return loom_net_plugin_load(c->plugin, out);
  }
  return loom_error(loomInternalError, LOOM_LOG_NET, "transport %s is not built in", c->name);
}
