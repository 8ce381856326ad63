/*
 * ib.c — the ibverbs transport (libibverbs + librdmacm): the vtable.
 *
 *   init      choose device, port and address (ib_device.c), listen with
 *             rdma_cm, open the protection domain, the completion channel
 *             (its fd is what poll_fds waits on) and the registration cache;
 *             the address blob is the listener's IP address and port
 *   connect   RC queue pairs through rdma_cm (ib_connect.c)
 *   isend/irecv/progress  the data path of each connection (ib_ep.c) fed by
 *             its completion queue (ib_verbs.c)
 * Protocols and memory use: ib_ep.h; the registration cache: common/mr_cache.h.
 */
#include "config.h"
#include "ib.h"
#include "net/bytes.h"
#include "net/socket.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#define CM_CHECK_NS 10000000ull /* progress looks for rdma_cm events every 10 ms */

static int set_nonblock(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void ib_fini(void *vctx);

static loomResult_t init_fail(struct ib_ctx *ctx, loomResult_t code, const char *what,
                              const char *detail) {
  int rank = ctx->rank;
  ib_fini(ctx);
  return loom_error(code, LOOM_LOG_NET, "rank %d: ibverbs transport: %s%s%s", rank, what,
                    detail ? ": " : "", detail ? detail : "");
}

static loomResult_t ib_init(const struct loom_transport_comm *info, void **out, void *addr) {
  struct ib_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  ctx->rank = info->rank;
  ctx->nranks = info->nranks;
  ctx->comm_name = info->comm_name;
  ctx->kick_fd = -1;
  ctx->comm_hash = ib_wire_secret_hash(info->secret, LOOM_NET_SECRET_BYTES);
  ctx->timeout = (uint8_t)loom_param_int(LOOM_PARAM_IB_TIMEOUT);
  ctx->retry_cnt = (uint8_t)loom_param_int(LOOM_PARAM_IB_RETRY_CNT);
  ctx->conns = calloc((size_t)info->nranks, sizeof *ctx->conns);
  ctx->open = calloc((size_t)info->nranks, sizeof *ctx->open);
  if (ctx->conns == NULL || ctx->open == NULL)
    return init_fail(ctx, loomSystemError, "out of memory", NULL);
  char why[1024];
  if (ib_count_devices(why, sizeof why) == 0)
    return init_fail(ctx, loomSystemError, "no usable RDMA port", why);
  ctx->cm = rdma_create_event_channel();
  if (ctx->cm == NULL || set_nonblock(ctx->cm->fd) != 0)
    return init_fail(ctx, loomSystemError,
                     "rdma_create_event_channel failed (is the rdma_ucm module loaded?)",
                     strerror(errno));
  union loom_sockaddr preferred;
  int have_local = loom_sockaddr_copy(&preferred, info->local_sockaddr) == 0;
  if (ib_choose(ctx->cm, have_local ? &preferred : NULL, &ctx->dev, why, sizeof why) != 0)
    return init_fail(ctx, loomSystemError, "no usable RDMA port", why);
  ctx->listen_id = ctx->dev.id;
  ctx->verbs = ctx->listen_id->verbs;
  if (rdma_listen(ctx->listen_id, 128) != 0)
    return init_fail(ctx, loomSystemError, "rdma_listen", strerror(errno));
  const struct sockaddr *bound = rdma_get_local_addr(ctx->listen_id);
  memcpy(&ctx->dev.addr, bound,
         bound->sa_family == AF_INET6 ? sizeof ctx->dev.addr.sin6 : sizeof ctx->dev.addr.sin);
  ctx->pd = ibv_alloc_pd(ctx->verbs);
  if (ctx->pd == NULL)
    return init_fail(ctx, loomSystemError, "ibv_alloc_pd", strerror(errno));
  ctx->channel = ibv_create_comp_channel(ctx->verbs);
  if (ctx->channel == NULL || set_nonblock(ctx->channel->fd) != 0)
    return init_fail(ctx, loomSystemError, "ibv_create_comp_channel", strerror(errno));
  struct loom_mr_ops ops = ib_verbs_mr_ops_template;
  ops.arg = ctx;
  int rc = loom_mr_cache_init(&ctx->mrs, &ops, IB_MR_MAX_ENTRIES, IB_MR_MAX_BYTES);
  if (rc != 0)
    return init_fail(ctx, loomSystemError, "registration cache", strerror(rc));
  ctx->mrs_ready = 1;
  ctx->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ctx->kick_fd < 0)
    return init_fail(ctx, loomSystemError, "eventfd", strerror(errno));
  memset(addr, 0, IB_ADDR_BYTES);
  loom_put_u32(addr, IB_ADDR_MAGIC);
  loom_sockaddr_encode(&ctx->dev.addr, (uint8_t *)addr + 4);
  char text[LOOM_ADDR_STRLEN];
  loom_sockaddr_str(&ctx->dev.addr, text, sizeof text);
  LOOM_INFO(LOOM_LOG_NET,
            "ib: rank %d on %s port %d (%s), rdma_cm listening on %s; ring %u x %u KiB per "
            "peer, rendezvous above %u bytes; LOOM_IB_TIMEOUT=%d, LOOM_IB_RETRY_CNT=%d; "
            "registrations %s",
            ctx->rank, ctx->dev.dev, ctx->dev.port, ctx->dev.roce ? "RoCE" : "InfiniBand", text,
            IB_EP_NSLOTS, IB_EP_SLOT_BYTES >> 10, IB_EP_SLOT_BYTES - IB_HDR_BYTES,
            (int)ctx->timeout, (int)ctx->retry_cnt,
            ctx->dev.odp ? "cached (On-Demand Paging)"
                         : "per message (no On-Demand Paging: a cached one could go stale)");
  *out = ctx;
  return loomSuccess;
}

/* 1 when the process may lock any amount of memory (CAP_IPC_LOCK, as root
 * usually has), read from /proc/self/status. */
static int can_lock_any(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return 0;
  char line[256];
  unsigned long long caps = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "CapEff: %llx", &caps) == 1)
      break;
  fclose(f);
  return (caps >> 14) & 1; /* CAP_IPC_LOCK */
}

/* Registration pins memory against RLIMIT_MEMLOCK (Debian's default for
 * users: 8 MiB).  Seen on Soft-RoCE: with 8 MiB a 4 MiB all-gather between
 * two ranks failed with ENOMEM in ibv_reg_mr in the middle of the call.
 * The data path now copes (ib_ep.h: receivers wait for registrations to be
 * given back, senders copy through staging slots), at the price of copies
 * and waits; so say at connection time, once, when the limit is below what
 * the rings of npeers peers and their rendezvous transfers can pin. */
static void warn_memlock(const struct ib_ctx *ctx, int npeers) {
  struct rlimit rl;
  if (npeers == 0 || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      can_lock_any())
    return;
  const size_t slice = 512u << 10; /* LOOM_CHUNK_BYTES' default */
  size_t rings = (size_t)npeers * 2 * ib_ep_region_bytes(IB_EP_NSLOTS, IB_EP_SLOT_BYTES,
                                                         IB_EP_RDV_SLOTS);
  size_t rdv = (size_t)npeers * 2 * IB_EP_RDV_SLOTS * slice;
  if ((size_t)rl.rlim_cur >= rings + rdv)
    return;
  LOOM_WARN(LOOM_LOG_NET,
            "ib: rank %d: the locked-memory limit is %llu KiB (ulimit -l) but its rings to %d "
            "peer(s) pin %zu KiB and their rendezvous transfers up to %zu KiB more: large "
            "messages will be copied through staging slots or wait for registrations instead "
            "of going zero-copy; run with 'ulimit -l unlimited' (containers: --ulimit "
            "memlock=-1)",
            ctx->rank, (unsigned long long)rl.rlim_cur >> 10, npeers, rings >> 10, rdv >> 10);
}

static loomResult_t ib_connect(void *vctx, int npeers, const int *peers, const void *addrs,
                               uint64_t deadline, void **conns) {
  struct ib_ctx *ctx = vctx;
  LOOM_CHECK(ib_connect_peers(ctx, npeers, peers, addrs, deadline));
  for (int i = 0; i < npeers; i++)
    conns[i] = ctx->conns[peers[i]];
  LOOM_INFO(LOOM_LOG_NET, "ib: rank %d connected to %d peer(s) over %s port %d", ctx->rank,
            npeers, ctx->dev.dev, ctx->dev.port);
  warn_memlock(ctx, npeers);
  return loomSuccess;
}

static loomResult_t ib_isend(void *conn, struct loom_xfer *x) {
  return ib_ep_isend(&((struct ib_conn *)conn)->ep, x);
}

static loomResult_t ib_irecv(void *conn, struct loom_xfer *x) {
  return ib_ep_irecv(&((struct ib_conn *)conn)->ep, x);
}

static int ib_probe(void *conn, uint64_t fp[2], uint64_t *len) {
  struct ib_conn *c = conn;
  return c->ep_ready ? ib_ep_probe(&c->ep, fp, len) : 0;
}

static loomResult_t ib_progress(void *vctx, int *progressed, int *failed_peer) {
  struct ib_ctx *ctx = vctx;
  uint64_t now = loom_now_ns();
  if (now >= ctx->next_cm_check) {
    ib_cm_poll_nowait(ctx); /* a peer that went away */
    ctx->next_cm_check = now + CM_CHECK_NS;
  }
  if (ctx->kicked) {
    uint64_t v;
    if (read(ctx->kick_fd, &v, sizeof v) < 0 && errno != EAGAIN)
      return loom_error_record(loomSystemError, "rank %d: ibverbs: eventfd read: %s", ctx->rank,
                               strerror(errno));
    ctx->kicked = 0;
  }
  for (int i = 0; i < ctx->nopen; i++) {
    struct ib_conn *c = ctx->open[i];
    if (!c->ep_ready)
      continue;
    loomResult_t res = ib_conn_poll_cq(c, progressed);
    if (res == loomSuccess)
      res = ib_ep_progress(&c->ep, progressed);
    if (res != loomSuccess) {
      *failed_peer = c->peer;
      return res;
    }
  }
  return loomSuccess;
}

static int ib_poll_fds(void *vctx, struct pollfd *fds, int max) {
  struct ib_ctx *ctx = vctx;
  ib_cm_poll_nowait(ctx);
  int wake_now = ib_arm_cqs(ctx);
  for (int i = 0; i < ctx->nopen && !wake_now; i++)
    wake_now = ctx->open[i]->ep_ready && ctx->open[i]->ep.failed != loomSuccess;
  int n = 0;
  if (n < max)
    fds[n++] = (struct pollfd){.fd = ctx->channel->fd, .events = POLLIN};
  if (n < max)
    fds[n++] = (struct pollfd){.fd = ctx->cm->fd, .events = POLLIN};
  if (wake_now && n < max) {
    /* Completions already polled, or a failure to report: progress must
     * run at once. */
    if (!ctx->kicked) {
      uint64_t one = 1;
      if (write(ctx->kick_fd, &one, sizeof one) == sizeof one)
        ctx->kicked = 1;
    }
    fds[n++] = (struct pollfd){.fd = ctx->kick_fd, .events = POLLIN};
  }
  return n;
}

static void ib_fini(void *vctx) {
  struct ib_ctx *ctx = vctx;
  if (ctx == NULL)
    return;
  /* Destroying a connected id disconnects it: the peer learns at once. */
  for (int i = 0; i < ctx->nopen; i++)
    ib_conn_free(ctx->open[i]);
  if (ctx->mrs_ready)
    loom_mr_cache_fini(&ctx->mrs);
  if (ctx->channel != NULL)
    ibv_destroy_comp_channel(ctx->channel);
  if (ctx->pd != NULL)
    ibv_dealloc_pd(ctx->pd);
  if (ctx->listen_id != NULL)
    rdma_destroy_id(ctx->listen_id);
  if (ctx->cm != NULL)
    rdma_destroy_event_channel(ctx->cm);
  if (ctx->kick_fd >= 0)
    close(ctx->kick_fd);
  free(ctx->conns);
  free(ctx->open);
  free(ctx);
}

/* RDMA writes: a few microseconds a message, no system call per message;
 * the bandwidth is the port's (the topology reads its rate). */
static void ib_properties(void *ctx, int peer, struct loom_net_properties *p) {
  (void)ctx;
  (void)peer;
  p->latency_us = 3.0;
  p->msg_overhead_us = 0.5;
}

const struct loom_transport loom_transport_ib = {
    .name = "ib",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = IB_ADDR_BYTES,
    .init = ib_init,
    .connect = ib_connect,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .probe = ib_probe,
    .progress = ib_progress,
    .poll_fds = ib_poll_fds,
    .fini = ib_fini,
    .busy_wait = 0,
    .struct_size = sizeof(struct loom_transport),
    .properties = ib_properties,
};
