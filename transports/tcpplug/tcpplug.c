/*
 * tcpplug.c — a network plugin made of Loom's own TCP transport, to test
 * the plugin path (LOOM_NET_PLUGIN=tcpplug) end to end: this file plus
 * the TCP transport and the few core files it needs are linked into
 * libloom-net-tcpplug.so, which exports only loom_net_plugin_v<N>.
 *
 * The plugin carries its own copy of Loom's error and log code, so an
 * error its TCP code records lives in the plugin's thread-local text; the
 * wrappers hand it to Loom through info->record_error, as any plugin must.
 */
#include "loom_net.h"
#include "core/error.h"
#include "core/log.h"
#include "transport.h"

#include <stdlib.h>

extern const struct loom_transport LOOM_NET_PLUGIN_NAME;

struct plug_ctx {
  void *tcp;
};

/* Set at the first init; the same Loom calls every communicator's. */
static void (*host_record_error)(const char *text);
static void (*host_log)(int level, const char *text);

static loomResult_t forward(loomResult_t res) {
  if (res != loomSuccess && host_record_error != NULL)
    host_record_error(loom_last_error());
  return res;
}

static loomResult_t plug_init(const struct loom_transport_comm *info, void **out, void *addr) {
  host_record_error = info->record_error;
  host_log = info->log;
  if (loom_transport_tcp.addr_bytes != LOOM_NET_PLUGIN_NAME.addr_bytes) {
    if (host_record_error != NULL)
      host_record_error("tcpplug: built with another TCP address size");
    return loomInternalError;
  }
  struct plug_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    if (host_record_error != NULL)
      host_record_error("tcpplug: out of memory");
    return loomSystemError;
  }
  loomResult_t res = forward(loom_transport_tcp.init(info, &ctx->tcp, addr));
  if (res != loomSuccess) {
    free(ctx);
    return res;
  }
  if (host_log != NULL)
    host_log(LOOM_NET_LOG_INFO, "tcpplug: Loom's TCP transport, loaded as a plugin");
  *out = ctx;
  return loomSuccess;
}

static loomResult_t plug_connect(void *vctx, int npeers, const int *peers, const void *addrs,
                                 uint64_t deadline, void **conns) {
  struct plug_ctx *ctx = vctx;
  return forward(loom_transport_tcp.connect(ctx->tcp, npeers, peers, addrs, deadline, conns));
}

static loomResult_t plug_isend(void *conn, struct loom_xfer *x) {
  return forward(loom_transport_tcp.isend(conn, x));
}

static loomResult_t plug_irecv(void *conn, struct loom_xfer *x) {
  return forward(loom_transport_tcp.irecv(conn, x));
}

static loomResult_t plug_progress(void *vctx, int *progressed, int *failed_peer) {
  struct plug_ctx *ctx = vctx;
  return forward(loom_transport_tcp.progress(ctx->tcp, progressed, failed_peer));
}

static int plug_poll_fds(void *vctx, struct pollfd *fds, int max) {
  struct plug_ctx *ctx = vctx;
  return loom_transport_tcp.poll_fds(ctx->tcp, fds, max);
}

static void plug_fini(void *vctx) {
  struct plug_ctx *ctx = vctx;
  if (ctx == NULL)
    return;
  loom_transport_tcp.fini(ctx->tcp);
  free(ctx);
}

static void plug_properties(void *vctx, int peer, struct loom_net_properties *p) {
  struct plug_ctx *ctx = vctx;
  loom_transport_tcp.properties(ctx->tcp, peer, p);
}

const struct loom_transport LOOM_NET_PLUGIN_NAME = {
    .name = "tcpplug",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = 20, /* tcp's */
    .init = plug_init,
    .connect = plug_connect,
    .isend = plug_isend,
    .irecv = plug_irecv,
    .progress = plug_progress,
    .poll_fds = plug_poll_fds,
    .fini = plug_fini,
    .busy_wait = 0,
    .struct_size = sizeof(struct loom_transport),
    .properties = plug_properties,
};
