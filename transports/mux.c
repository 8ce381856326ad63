/*
 * mux.c — the transport the engine uses: routes every peer to the shared-
 * memory transport when it runs on this host (and LOOM_SHM_DISABLE is not
 * set) and to TCP otherwise.  Its address blob is the TCP blob followed by
 * the shm blob (zeros when this rank has no local peer).
 */
#include "transport.h"
#include "core/config.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

enum { MUX_TCP, MUX_SHM, MUX_N };

struct mux_conn {
  const struct loom_transport *tp;
  void *conn;
};

struct mux_ctx {
  const struct loom_transport *tp[MUX_N];
  void *sub[MUX_N]; /* NULL: not in use */
  int nranks, rank;
  int *is_local;
  struct mux_conn *conns; /* per rank */
  int nshm;               /* peers routed over shm */
};

#define MUX_ADDR_BYTES (loom_transport_tcp.addr_bytes + loom_transport_shm.addr_bytes)

static loomResult_t mux_init(const struct loom_transport_comm *info, void **out, void *addr) {
  struct mux_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL || (ctx->is_local = calloc((size_t)info->nranks, sizeof(int))) == NULL ||
      (ctx->conns = calloc((size_t)info->nranks, sizeof *ctx->conns)) == NULL) {
    if (ctx != NULL)
      free(ctx->is_local);
    free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  }
  if (MUX_ADDR_BYTES != loom_transport_mux.addr_bytes) {
    free(ctx->is_local);
    free(ctx->conns);
    free(ctx);
    return loom_error(loomInternalError, LOOM_LOG_NET, "mux: address size %zu, expected %zu",
                      (size_t)loom_transport_mux.addr_bytes, (size_t)MUX_ADDR_BYTES);
  }
  ctx->tp[MUX_TCP] = &loom_transport_tcp;
  ctx->tp[MUX_SHM] = &loom_transport_shm;
  ctx->nranks = info->nranks;
  ctx->rank = info->rank;
  memset(addr, 0, MUX_ADDR_BYTES);
  loomResult_t res = ctx->tp[MUX_TCP]->init(info, &ctx->sub[MUX_TCP], addr);
  int use_shm = info->nlocal > 1 && !loom_param_int(LOOM_PARAM_SHM_DISABLE);
  if (res == loomSuccess && use_shm) {
    for (int i = 0; i < info->nlocal; i++)
      ctx->is_local[info->local_ranks[i]] = 1;
    res = ctx->tp[MUX_SHM]->init(info, &ctx->sub[MUX_SHM],
                                 (char *)addr + loom_transport_tcp.addr_bytes);
  }
  if (res != loomSuccess) {
    if (ctx->sub[MUX_TCP] != NULL)
      ctx->tp[MUX_TCP]->fini(ctx->sub[MUX_TCP]);
    free(ctx->is_local);
    free(ctx->conns);
    free(ctx);
    return res;
  }
  *out = ctx;
  return loomSuccess;
}

static loomResult_t mux_connect(void *vctx, int npeers, const int *peers, const void *addrs,
                                uint64_t deadline, void **conns) {
  struct mux_ctx *ctx = vctx;
  loomResult_t res = loomSuccess;
  int *sub_peers = malloc(sizeof(int) * (size_t)(npeers + 1));
  void **sub_conns = malloc(sizeof(void *) * (size_t)(npeers + 1));
  char *sub_addrs = NULL;
  if (sub_peers == NULL || sub_conns == NULL) {
    res = loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
    goto out;
  }
  for (int t = 0; t < MUX_N && res == loomSuccess; t++) {
    if (ctx->sub[t] == NULL)
      continue;
    size_t ab = ctx->tp[t]->addr_bytes, off = t == MUX_TCP ? 0 : loom_transport_tcp.addr_bytes;
    free(sub_addrs);
    sub_addrs = malloc(ab * (size_t)ctx->nranks);
    if (sub_addrs == NULL) {
      res = loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
      break;
    }
    for (int r = 0; r < ctx->nranks; r++)
      memcpy(sub_addrs + (size_t)r * ab, (const char *)addrs + (size_t)r * MUX_ADDR_BYTES + off,
             ab);
    int n = 0;
    for (int i = 0; i < npeers; i++)
      if ((ctx->sub[MUX_SHM] != NULL && ctx->is_local[peers[i]]) == (t == MUX_SHM))
        sub_peers[n++] = peers[i];
    if (n == 0)
      continue;
    res = ctx->tp[t]->connect(ctx->sub[t], n, sub_peers, sub_addrs, deadline, sub_conns);
    for (int i = 0; res == loomSuccess && i < n; i++) {
      ctx->conns[sub_peers[i]].tp = ctx->tp[t];
      ctx->conns[sub_peers[i]].conn = sub_conns[i];
    }
    if (t == MUX_SHM)
      ctx->nshm = n;
  }
  for (int i = 0; res == loomSuccess && i < npeers; i++)
    conns[i] = &ctx->conns[peers[i]];
  if (res == loomSuccess)
    LOOM_INFO(LOOM_LOG_NET, "rank %d: %d peer(s) over shm, %d over tcp", ctx->rank, ctx->nshm,
              npeers - ctx->nshm);
out:
  free(sub_peers);
  free(sub_conns);
  free(sub_addrs);
  return res;
}

static loomResult_t mux_isend(void *conn, struct loom_xfer *x) {
  struct mux_conn *c = conn;
  return c->tp->isend(c->conn, x);
}

static loomResult_t mux_irecv(void *conn, struct loom_xfer *x) {
  struct mux_conn *c = conn;
  return c->tp->irecv(c->conn, x);
}

static loomResult_t mux_progress(void *vctx, int *progressed, int *failed_peer) {
  struct mux_ctx *ctx = vctx;
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL)
      LOOM_CHECK(ctx->tp[t]->progress(ctx->sub[t], progressed, failed_peer));
  return loomSuccess;
}

static int mux_poll_fds(void *vctx, struct pollfd *fds, int max) {
  struct mux_ctx *ctx = vctx;
  int n = 0;
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL)
      n += ctx->tp[t]->poll_fds(ctx->sub[t], fds + n, max - n);
  return n;
}

static void mux_fini(void *vctx) {
  struct mux_ctx *ctx = vctx;
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL)
      ctx->tp[t]->fini(ctx->sub[t]);
  free(ctx->is_local);
  free(ctx->conns);
  free(ctx);
}

int loom_mux_busy_wait(void *vctx) {
  const struct mux_ctx *ctx = vctx;
  return ctx != NULL && ctx->nshm > 0;
}

const struct loom_transport loom_transport_mux = {
    .name = "tcp+shm",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = 20 + 64, /* tcp's, then shm's: checked by mux_init */
    .init = mux_init,
    .connect = mux_connect,
    .isend = mux_isend,
    .irecv = mux_irecv,
    .progress = mux_progress,
    .poll_fds = mux_poll_fds,
    .fini = mux_fini,
    .busy_wait = 0,
};
