/*
 * ofi.c — the libfabric transport's vtable: init (open the provider,
 * publish the endpoint's name), connect (address vector entries and an
 * authenticated hello to every peer), posting, progress, what to poll,
 * fini.
 */
#include "ofi/ofi_fabric.h"
#include "core/error.h"
#include "core/hmac.h"
#include "core/timeutil.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rdma/fi_cm.h>

static int mr_cache_reg(void *arg, void *start, size_t len, struct loom_mr_keys *out) {
  struct fid_mr *mr = NULL;
  if (ofi_mr_register(arg, start, len, &mr) != 0)
    return EIO;
  *out = (struct loom_mr_keys){.handle = mr, .desc = fi_mr_desc(mr)};
  return 0;
}

static void mr_cache_dereg(void *arg, void *handle) {
  (void)arg;
  fi_close(&((struct fid_mr *)handle)->fid);
}

/* Whether the CQ's wait fd will announce the next completion (else the
 * provider has work to do first: progress again before sleeping). */
static int may_sleep(struct ofi_ctx *ctx) {
  struct fid *fids[1] = {&ctx->cq->fid};
  return fi_trywait(ctx->fabric, fids, 1) == FI_SUCCESS;
}

int ofi_registration_on(struct ofi_ctx *ctx) {
  struct loom_mr_ops ops = {.reg = mr_cache_reg, .dereg = mr_cache_dereg, .arg = ctx};
  if (loom_mr_cache_init(&ctx->mr, &ops, OFI_MR_CACHE_ENTRIES, OFI_MR_CACHE_BYTES) != 0)
    return -1;
  ctx->mr_local = 1;
  return 0;
}

static void ctx_free(struct ofi_ctx *ctx) {
  ofi_close(ctx);
  if (ctx->conns != NULL)
    for (int r = 0; r < ctx->nranks; r++)
      free(ctx->conns[r]);
  free(ctx->conns);
  if (ctx->ready_fd >= 0)
    close(ctx->ready_fd);
  free(ctx);
}

static loomResult_t ofi_init(const struct loom_transport_comm *info, void **out, void *addr) {
  if (info->nranks > OFI_MAX_RANKS)
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "ofi: %d ranks, the transport's tags hold at most %d (use LOOM_NET=tcp)",
                      info->nranks, OFI_MAX_RANKS);
  struct ofi_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  ctx->rank = info->rank;
  ctx->nranks = info->nranks;
  ctx->wait_fd = -1;
  ctx->ready_fd = -1;
  uint8_t token[LOOM_SHA256_BYTES];
  const struct loom_bytes label = {.p = "loom/ofi-hello", .len = 14};
  loom_hmac_sha256(info->secret, LOOM_NET_SECRET_BYTES, &label, 1, token);
  memcpy(ctx->hello_token, token, sizeof ctx->hello_token);
  ctx->conns = calloc((size_t)info->nranks, sizeof *ctx->conns);
  if (ctx->conns == NULL) {
    free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  }
  /* Always readable: poll_fds hands it out when progress must come back
   * at once (the provider's trywait said so, or posts wait for retry). */
  ctx->ready_fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ctx->ready_fd < 0) {
    int err = errno;
    ctx_free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "ofi: eventfd: %s", strerror(err));
  }
  loomResult_t res = ofi_open(ctx, info->local_sockaddr);
  if (res != loomSuccess) {
    ctx_free(ctx);
    return res;
  }
  if (ctx->mr_local && ofi_registration_on(ctx) != 0) {
    ctx_free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  }
  struct ofi_addr a;
  memset(&a, 0, sizeof a);
  a.max_msg_size = ctx->info->ep_attr->max_msg_size;
  snprintf(a.prov, sizeof a.prov, "%s", ctx->prov);
  a.name_len = sizeof a.name;
  int rc = fi_getname(&ctx->ep->fid, a.name, &a.name_len);
  if (rc != 0 || ofi_addr_encode(addr, &a) != 0) {
    ctx_free(ctx);
    if (rc == -FI_ETOOSMALL || rc == 0)
      return loom_error(loomSystemError, LOOM_LOG_NET,
                        "ofi: rank %d: provider %s's endpoint name (%zu bytes) or name does not "
                        "fit Loom's address blob (%d bytes of name, %d of provider name)",
                        info->rank, a.prov, a.name_len, OFI_EP_NAME_MAX, OFI_PROV_NAME_BYTES - 1);
    return loom_error(loomSystemError, LOOM_LOG_NET, "ofi: rank %d: fi_getname failed: %s",
                      info->rank, fi_strerror(-rc));
  }
  *out = ctx;
  return loomSuccess;
}

/* Waits until every peer's hello arrived and ours were sent. */
static loomResult_t wait_hellos(struct ofi_ctx *ctx, int npeers, const int *peers,
                                uint64_t deadline) {
  for (;;) {
    int progressed = 0, failed_peer = -1, missing = -1;
    loomResult_t res = ofi_progress_cq(ctx, &progressed, &failed_peer);
    if (res != loomSuccess)
      return res; /* reported where it was seen */
    for (int i = 0; i < npeers && missing < 0; i++) {
      const struct ofi_conn *c = ctx->conns[peers[i]];
      if (!c->hello_received || !c->hello_sent)
        missing = peers[i];
    }
    if (missing < 0)
      return loomSuccess;
    if (loom_now_ns() > deadline)
      return loom_error(loomTimeout, LOOM_LOG_NET,
                        "ofi: rank %d: no hello exchanged with rank %d over provider %s (domain "
                        "%s) before LOOM_BOOTSTRAP_TIMEOUT: is that rank alive and its address "
                        "reachable? (LOOM_OFI_PROVIDER, LOOM_OFI_DOMAIN; LOOM_NET=tcp avoids "
                        "libfabric)",
                        ctx->rank, missing, ctx->prov, ctx->domain_name);
    if (progressed)
      continue;
    if (ctx->wait_fd >= 0 && may_sleep(ctx)) {
      struct pollfd p = {.fd = ctx->wait_fd, .events = POLLIN};
      poll(&p, 1, 10);
    } else {
      usleep(50);
    }
  }
}

static loomResult_t ofi_connect(void *vctx, int npeers, const int *peers, const void *addrs,
                                uint64_t deadline, void **conns) {
  struct ofi_ctx *ctx = vctx;
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    if (ctx->conns[p] != NULL)
      return loom_error(loomInternalError, LOOM_LOG_NET, "ofi: rank %d: connected to rank %d twice",
                        ctx->rank, p);
    struct ofi_addr a;
    if (ofi_addr_decode((const uint8_t *)addrs + (size_t)p * OFI_ADDR_BYTES, &a) != 0)
      return loom_error(loomInternalError, LOOM_LOG_NET,
                        "ofi: rank %d: rank %d published no ofi address", ctx->rank, p);
    if (strcmp(a.prov, ctx->prov) != 0)
      return loom_error(loomInvalidUsage, LOOM_LOG_NET,
                        "ofi: rank %d uses libfabric provider %s but rank %d uses %s: set the same "
                        "LOOM_OFI_PROVIDER on every rank",
                        ctx->rank, ctx->prov, p, a.prov);
    struct ofi_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
      return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
    c->peer = p;
    c->ctx = ctx;
    size_t theirs = ofi_part_bytes(a.max_msg_size);
    c->part_bytes = theirs < ctx->part_bytes ? theirs : ctx->part_bytes;
    int rc = fi_av_insert(ctx->av, a.name, 1, &c->addr, 0, NULL);
    if (rc != 1) {
      free(c);
      return loom_error(loomSystemError, LOOM_LOG_NET,
                        "ofi: rank %d: fi_av_insert of rank %d's address failed (provider %s): %s",
                        ctx->rank, p, ctx->prov, rc < 0 ? fi_strerror(-rc) : "not inserted");
    }
    ctx->conns[p] = c;
  }
  /* Receives first, so that no hello waits as an unexpected message. */
  for (int i = 0; i < npeers; i++)
    if (ofi_post_hello(ctx->conns[peers[i]], 0) != loomSuccess)
      return loom_error(loomSystemError, LOOM_LOG_NET, "ofi: connecting: %s", loom_last_error());
  for (int i = 0; i < npeers; i++)
    if (ofi_post_hello(ctx->conns[peers[i]], 1) != loomSuccess)
      return loom_error(loomSystemError, LOOM_LOG_NET, "ofi: connecting: %s", loom_last_error());
  LOOM_CHECK(wait_hellos(ctx, npeers, peers, deadline));
  for (int i = 0; i < npeers; i++)
    conns[i] = ctx->conns[peers[i]];
  return loomSuccess;
}

static loomResult_t ofi_isend(void *conn, struct loom_xfer *x) { return ofi_post(conn, x, 1); }

static loomResult_t ofi_irecv(void *conn, struct loom_xfer *x) { return ofi_post(conn, x, 0); }

static loomResult_t ofi_progress(void *vctx, int *progressed, int *failed_peer) {
  return ofi_progress_cq(vctx, progressed, failed_peer);
}

static int ofi_poll_fds(void *vctx, struct pollfd *fds, int max) {
  struct ofi_ctx *ctx = vctx;
  if (max < 1 || ctx->wait_fd < 0)
    return 0;
  /* fi_trywait: may we sleep on the fd, or is there work the fd would not
   * announce? */
  int sleep_ok = !ofi_posts_ready(ctx) && ctx->failed == loomSuccess && may_sleep(ctx);
  fds[0].fd = sleep_ok ? ctx->wait_fd : ctx->ready_fd;
  fds[0].events = POLLIN;
  fds[0].revents = 0;
  return 1;
}

static int ofi_ctx_busy_wait(void *vctx) {
  const struct ofi_ctx *ctx = vctx;
  return ctx->wait_fd < 0;
}

static void ofi_fini(void *vctx) {
  if (vctx != NULL)
    ctx_free(vctx);
}

/* A fabric provider (verbs, efa, psm3, ...) bypasses the kernel; the tcp,
 * udp and sockets providers cost what kernel TCP does. */
static void ofi_properties(void *vctx, int peer, struct loom_net_properties *p) {
  const struct ofi_ctx *ctx = vctx;
  (void)peer;
  int fabric = ofi_prov_is_fabric(ctx->prov);
  p->latency_us = fabric ? 3.0 : 20.0;
  p->msg_overhead_us = fabric ? 0.5 : 2.0;
}

const struct loom_transport loom_transport_ofi = {
    .name = "ofi",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = OFI_ADDR_BYTES,
    .init = ofi_init,
    .connect = ofi_connect,
    .isend = ofi_isend,
    .irecv = ofi_irecv,
    .progress = ofi_progress,
    .poll_fds = ofi_poll_fds,
    .fini = ofi_fini,
    .busy_wait = 0,
    .ctx_busy_wait = ofi_ctx_busy_wait,
    .struct_size = sizeof(struct loom_transport),
    .properties = ofi_properties,
};
