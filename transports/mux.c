/*
 * mux.c — the transport the engine uses: routes every peer on this host to
 * shared memory (unless LOOM_SHM_DISABLE=1) and every other peer to the
 * network transport select.c chooses (tcp, ofi, ib or a plugin).  When
 * that choice is a default ib or ofi, tcp listens too, so that a pair of
 * ranks whose defaults differ (one node has the device, the other not)
 * still connects, over tcp.
 *
 * Address blob, the same size for every choice:
 *   [0, 40)    the network transport's name ("tcp", "ofi", "plugin X")
 *   [40, 44)   flags: MUX_HAS_TCP (a tcp blob follows the network blob)
 *   [44, 48)   the network transport's addr_bytes
 *   [48, +256) the network transport's blob
 *   then tcp's blob (20 bytes, the fallback) and shm's (64, zeros when
 *   this rank has no local peer)
 */
#include "select.h"
#include "shm/shm.h"
#include "net/bytes.h"
#include "core/config.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MUX_NET, MUX_TCP, MUX_SHM, MUX_N };

#define MUX_HAS_TCP 1u
#define MUX_NAME_BYTES LOOM_NET_NAME_BYTES
#define MUX_NET_MAX 256
#define MUX_HDR_BYTES (MUX_NAME_BYTES + 8)
#define MUX_TCP_OFF (MUX_HDR_BYTES + MUX_NET_MAX)
#define MUX_SHM_OFF (MUX_TCP_OFF + 20)
#define MUX_ADDR_BYTES (MUX_SHM_OFF + 64)

struct mux_conn {
  const struct loom_transport *tp;
  void *conn;
};

struct mux_ctx {
  const struct loom_transport *tp[MUX_N];
  void *sub[MUX_N]; /* NULL: not in use */
  int count[MUX_N]; /* peers routed over each */
  int nranks, rank;
  int *is_local;
  struct mux_conn *conns; /* per rank */
  struct loom_net_choice choice;
  char name[64];
};

static void net_log(int level, const char *text) {
  if (level < LOOM_LOG_LEVEL_WARN)
    level = LOOM_LOG_LEVEL_WARN;
  if (level > LOOM_LOG_LEVEL_TRACE)
    level = LOOM_LOG_LEVEL_TRACE;
  LOOM_LOG_(level, LOOM_LOG_NET, "%s", text);
}

static void mux_free(struct mux_ctx *ctx) {
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL)
      ctx->tp[t]->fini(ctx->sub[t]);
  free(ctx->is_local);
  free(ctx->conns);
  free(ctx);
}

static loomResult_t mux_init(const struct loom_transport_comm *info, void **out, void *addr) {
  if (loom_transport_tcp.addr_bytes != MUX_SHM_OFF - MUX_TCP_OFF ||
      loom_transport_shm.addr_bytes != MUX_ADDR_BYTES - MUX_SHM_OFF ||
      loom_transport_mux.addr_bytes != MUX_ADDR_BYTES)
    return loom_error(loomInternalError, LOOM_LOG_NET, "mux: the address layout is out of date");
  struct mux_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL || (ctx->is_local = calloc((size_t)info->nranks, sizeof(int))) == NULL ||
      (ctx->conns = calloc((size_t)info->nranks, sizeof *ctx->conns)) == NULL) {
    if (ctx != NULL)
      free(ctx->is_local);
    free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  }
  ctx->nranks = info->nranks;
  ctx->rank = info->rank;
  memset(addr, 0, MUX_ADDR_BYTES);
  struct loom_transport_comm sub_info = *info;
  sub_info.record_error = loom_set_last_error;
  sub_info.log = net_log;
  loomResult_t res = loom_net_select(&ctx->choice);
  if (res == loomSuccess)
    res = loom_net_transport(&ctx->choice, &ctx->tp[MUX_NET]);
  if (res == loomSuccess && ctx->tp[MUX_NET]->addr_bytes > MUX_NET_MAX)
    res = loom_error(loomInvalidArgument, LOOM_LOG_NET,
                     "%s: transport %s has %zu-byte addresses; Loom carries at most %d",
                     ctx->choice.why, ctx->tp[MUX_NET]->name, ctx->tp[MUX_NET]->addr_bytes,
                     MUX_NET_MAX);
  uint8_t *blob = addr;
  if (res == loomSuccess) {
    loom_clear_last_error();
    res = ctx->tp[MUX_NET]->init(&sub_info, &ctx->sub[MUX_NET], blob + MUX_HDR_BYTES);
    /* Built-in transports log their init errors; a plugin only records them. */
    if (res != loomSuccess && ctx->choice.kind == LOOM_NET_PLUGIN)
      loom_error(res, LOOM_LOG_NET, "LOOM_NET_PLUGIN=%s: the plugin's init failed: %s",
                 ctx->choice.plugin,
                 loom_last_error()[0] ? loom_last_error() : "(it gave no reason)");
  }
  if (res == loomSuccess && ctx->choice.tcp_fallback && ctx->choice.kind != LOOM_NET_TCP) {
    ctx->tp[MUX_TCP] = &loom_transport_tcp;
    res = loom_transport_tcp.init(&sub_info, &ctx->sub[MUX_TCP], blob + MUX_TCP_OFF);
  }
  if (res == loomSuccess && info->nlocal > 1 && !loom_param_int(LOOM_PARAM_SHM_DISABLE)) {
    for (int i = 0; i < info->nlocal; i++)
      ctx->is_local[info->local_ranks[i]] = 1;
    ctx->tp[MUX_SHM] = &loom_transport_shm;
    res = loom_transport_shm.init(&sub_info, &ctx->sub[MUX_SHM], blob + MUX_SHM_OFF);
  }
  if (res != loomSuccess) {
    mux_free(ctx);
    return res;
  }
  memcpy(blob, ctx->choice.name, strnlen(ctx->choice.name, MUX_NAME_BYTES - 1));
  loom_put_u32(blob + MUX_NAME_BYTES, ctx->sub[MUX_TCP] != NULL ? MUX_HAS_TCP : 0);
  loom_put_u32(blob + MUX_NAME_BYTES + 4, (uint32_t)ctx->tp[MUX_NET]->addr_bytes);
  *out = ctx;
  return loomSuccess;
}

/* A rank's tcp blob: its network blob when that is tcp, else its fallback
 * (NULL when it has none). */
static const uint8_t *tcp_blob(const uint8_t *blob) {
  if (strncmp((const char *)blob, "tcp", MUX_NAME_BYTES) == 0)
    return blob + MUX_HDR_BYTES;
  if (loom_get_u32(blob + MUX_NAME_BYTES) & MUX_HAS_TCP)
    return blob + MUX_TCP_OFF;
  return NULL;
}

/* Which of this rank's transports carries peer p; -1 (error reported)
 * when the two ranks share none. */
static int route(struct mux_ctx *ctx, int p, const uint8_t *mine, const uint8_t *theirs) {
  if (ctx->sub[MUX_SHM] != NULL && ctx->is_local[p])
    return MUX_SHM;
  if (strncmp((const char *)mine, (const char *)theirs, MUX_NAME_BYTES) == 0)
    return MUX_NET;
  if (tcp_blob(mine) != NULL && tcp_blob(theirs) != NULL)
    return ctx->choice.kind == LOOM_NET_TCP ? MUX_NET : MUX_TCP;
  char their_name[MUX_NAME_BYTES + 1] = "";
  memcpy(their_name, theirs, MUX_NAME_BYTES);
  loom_error(loomInvalidUsage, LOOM_LOG_NET,
             "rank %d uses the transport %s between nodes (%s) but rank %d uses %s: set "
             "LOOM_NET / LOOM_NET_PLUGIN alike on every rank",
             ctx->rank, ctx->choice.name, ctx->choice.why, p,
             their_name[0] ? their_name : "none");
  return -1;
}

/* Rank r's blob for this rank's transport t. */
static const uint8_t *sub_blob(struct mux_ctx *ctx, int t, const uint8_t *blob) {
  if (t == MUX_SHM)
    return blob + MUX_SHM_OFF;
  if (t == MUX_TCP || ctx->choice.kind == LOOM_NET_TCP)
    return tcp_blob(blob);
  return blob + MUX_HDR_BYTES;
}

static void log_routes(const struct mux_ctx *ctx, int npeers) {
  char extra[96] = "";
  if (ctx->count[MUX_TCP] > 0)
    snprintf(extra, sizeof extra, ", %d over tcp (their default differs)", ctx->count[MUX_TCP]);
  LOOM_INFO(LOOM_LOG_NET, "rank %d: %d peer(s) over shm, %d over %s%s (%s%s)", ctx->rank,
            ctx->count[MUX_SHM], npeers - ctx->count[MUX_SHM] - ctx->count[MUX_TCP],
            ctx->choice.name, extra, ctx->choice.why,
            ctx->count[MUX_SHM] > 0 ? "; shm inside the node" : "");
}

static void make_name(struct mux_ctx *ctx) {
  static const char *const label[MUX_N] = {NULL, "tcp", "shm"};
  size_t len = 0;
  ctx->name[0] = '\0';
  int order[MUX_N] = {MUX_SHM, MUX_NET, MUX_TCP};
  for (int k = 0; k < MUX_N; k++) {
    int t = order[k];
    if (ctx->count[t] == 0)
      continue;
    const char *n = t == MUX_NET ? ctx->choice.name : label[t];
    int w = snprintf(ctx->name + len, sizeof ctx->name - len, "%s%s", len ? "+" : "", n);
    if (w > 0 && (size_t)w < sizeof ctx->name - len)
      len += (size_t)w;
  }
  if (len == 0)
    snprintf(ctx->name, sizeof ctx->name, "none");
}

static loomResult_t mux_connect(void *vctx, int npeers, const int *peers, const void *addrs,
                                uint64_t deadline, void **conns) {
  struct mux_ctx *ctx = vctx;
  const uint8_t *all = addrs, *mine = all + (size_t)ctx->rank * MUX_ADDR_BYTES;
  loomResult_t res = loomSuccess;
  int *via = malloc(sizeof(int) * (size_t)(npeers + 1));
  int *sub_peers = malloc(sizeof(int) * (size_t)(npeers + 1));
  void **sub_conns = malloc(sizeof(void *) * (size_t)(npeers + 1));
  uint8_t *sub_addrs = malloc((MUX_NET_MAX + 1) * (size_t)ctx->nranks);
  if (via == NULL || sub_peers == NULL || sub_conns == NULL || sub_addrs == NULL) {
    res = loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
    goto out;
  }
  for (int i = 0; i < npeers; i++) {
    via[i] = route(ctx, peers[i], mine, all + (size_t)peers[i] * MUX_ADDR_BYTES);
    if (via[i] < 0) {
      res = loomInvalidUsage;
      goto out;
    }
  }
  /* Every rank connects its transports in the same order, each among the
   * peers routed over it, so no two ranks wait on each other crosswise. */
  for (int t = 0; t < MUX_N && res == loomSuccess; t++) {
    int n = 0;
    for (int i = 0; i < npeers; i++)
      if (via[i] == t)
        sub_peers[n++] = peers[i];
    if (n == 0)
      continue;
    size_t ab = ctx->tp[t]->addr_bytes;
    memset(sub_addrs, 0, ab * (size_t)ctx->nranks);
    for (int r = 0; r < ctx->nranks; r++) {
      const uint8_t *b = sub_blob(ctx, t, all + (size_t)r * MUX_ADDR_BYTES);
      if (b != NULL)
        memcpy(sub_addrs + (size_t)r * ab, b, ab);
    }
    res = ctx->tp[t]->connect(ctx->sub[t], n, sub_peers, sub_addrs, deadline, sub_conns);
    for (int i = 0; res == loomSuccess && i < n; i++) {
      ctx->conns[sub_peers[i]].tp = ctx->tp[t];
      ctx->conns[sub_peers[i]].conn = sub_conns[i];
    }
    if (res == loomSuccess)
      ctx->count[t] = n;
  }
  if (res != loomSuccess)
    goto out;
  for (int i = 0; i < npeers; i++)
    conns[i] = &ctx->conns[peers[i]];
  make_name(ctx);
  log_routes(ctx, npeers);
out:
  free(via);
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

static int mux_probe(void *conn, uint64_t fp[2], uint64_t *len) {
  struct mux_conn *c = conn;
  if (c->tp->probe == NULL) {
    loom_error_record(loomInvalidArgument, "the \"%s\" transport", c->tp->name);
    return LOOM_PROBE_UNSUPPORTED;
  }
  return c->tp->probe(c->conn, fp, len);
}

/* Only the transports that carry a peer: on one node the network
 * transport's turn was 4 % of a 2-rank 8 B send/receive. */
static loomResult_t mux_progress(void *vctx, int *progressed, int *failed_peer) {
  struct mux_ctx *ctx = vctx;
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL && ctx->count[t] > 0)
      LOOM_CHECK(ctx->tp[t]->progress(ctx->sub[t], progressed, failed_peer));
  return loomSuccess;
}

static int mux_can_peek(void *conn, size_t bytes) {
  struct mux_conn *c = conn;
  return c->tp == &loom_transport_shm && loom_shm_can_peek(c->conn, bytes);
}

static size_t mux_peek(void *conn, struct loom_xfer *x, const void **data) {
  struct mux_conn *c = conn;
  return loom_shm_peek(c->conn, x, data);
}

static void mux_consume(void *conn, struct loom_xfer *x) {
  struct mux_conn *c = conn;
  loom_shm_consume(c->conn, x);
}

static const struct loom_peek_ops mux_peek_ops = {
    .can = mux_can_peek,
    .peek = mux_peek,
    .consume = mux_consume,
};

static int mux_poll_fds(void *vctx, struct pollfd *fds, int max) {
  struct mux_ctx *ctx = vctx;
  int n = 0;
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL && ctx->count[t] > 0)
      n += ctx->tp[t]->poll_fds(ctx->sub[t], fds + n, max - n);
  return n;
}

static void mux_fini(void *vctx) { mux_free(vctx); }

/* Busy-wait when any transport that carries a peer must. */
static int mux_busy_wait(void *vctx) {
  const struct mux_ctx *ctx = vctx;
  if (ctx == NULL)
    return 0;
  for (int t = 0; t < MUX_N; t++)
    if (ctx->sub[t] != NULL && ctx->count[t] > 0 &&
        loom_transport_busy_wait(ctx->tp[t], ctx->sub[t]))
      return 1;
  return 0;
}

static const char *mux_name(void *vctx) {
  const struct mux_ctx *ctx = vctx;
  return ctx != NULL && ctx->name[0] ? ctx->name : "none";
}

/* The peer's connection as the transport that carries it describes it. */
static void mux_properties(void *vctx, int peer, struct loom_net_properties *p) {
  const struct mux_ctx *ctx = vctx;
  if (ctx == NULL || peer < 0 || peer >= ctx->nranks || peer == ctx->rank)
    return;
  const struct mux_conn *c = &ctx->conns[peer];
  for (int t = 0; t < MUX_N; t++)
    if (c->tp == ctx->tp[t] && ctx->sub[t] != NULL && c->tp->properties != NULL)
      c->tp->properties(ctx->sub[t], peer, p);
}

const struct loom_transport loom_transport_mux = {
    .name = "mux",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = MUX_ADDR_BYTES, /* checked against tcp's and shm's by mux_init */
    .init = mux_init,
    .connect = mux_connect,
    .isend = mux_isend,
    .irecv = mux_irecv,
    .probe = mux_probe,
    .progress = mux_progress,
    .poll_fds = mux_poll_fds,
    .fini = mux_fini,
    .busy_wait = 0,
    .ctx_busy_wait = mux_busy_wait,
    .struct_size = sizeof(struct loom_transport),
    .properties = mux_properties,
    .ctx_name = mux_name,
    .peek = &mux_peek_ops,
};
