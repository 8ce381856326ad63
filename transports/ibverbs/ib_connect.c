/*
 * ib_connect.c — connection set-up through rdma_cm.  The lower rank of a
 * pair connects (rdma_resolve_addr, rdma_resolve_route, rdma_connect), the
 * higher accepts on its listener; each side's handshake (ib_wire.h) rides
 * in the private data: the connect request carries the connector's, the
 * accept reply the acceptor's.  A request that does not prove membership
 * of the communicator, or names a rank this rank is not connecting to, is
 * rejected with the reason in the reject's private data.  Every attempt
 * runs under the caller's deadline; a peer not yet listening is retried.
 *
 * After set-up, rdma_cm reports a peer that went away (DISCONNECTED): the
 * connection fails with that reason.
 */
#include "ib.h"
#include "ib_wire.h"
#include "net/bytes.h"
#include "net/socket.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_PAUSE_NS 200000000ull /* 200 ms between attempts */
/* IB CM reject reason "consumer defined": the peer's rdma_reject. */
#define REJ_CONSUMER_DEFINED 28

static void conn_fail(struct ib_conn *c, loomResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_fail(struct ib_conn *c, loomResult_t code, const char *fmt, ...) {
  if (c->state == IB_CONN_FAILED)
    return;
  char detail[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  snprintf(c->err, sizeof c->err, "rank %d: ibverbs connection to rank %d failed: %s",
           c->ctx->rank, c->peer, detail);
  c->err_code = code;
  c->state = IB_CONN_FAILED;
}

/* conn_fail with the thread's last error as the detail, less the prefix
 * the endpoint may already have put there. */
static void conn_fail_recorded(struct ib_conn *c, loomResult_t code) {
  const char *text = loom_last_error();
  char prefix[96];
  snprintf(prefix, sizeof prefix, "rank %d: ibverbs connection to rank %d failed: ",
           c->ctx->rank, c->peer);
  size_t n = strlen(prefix);
  conn_fail(c, code, "%s", strncmp(text, prefix, n) == 0 ? text + n : text);
}

void ib_conn_free(struct ib_conn *c) {
  if (c == NULL)
    return;
  ib_conn_teardown_qp(c);
  if (c->id != NULL)
    rdma_destroy_id(c->id);
  if (c->in_mr != NULL)
    ibv_dereg_mr(c->in_mr);
  if (c->out_mr != NULL)
    ibv_dereg_mr(c->out_mr);
  free(c->in);
  free(c->out);
  free(c);
}

static void make_hello(const struct ib_conn *c, uint8_t out[IB_WIRE_BYTES]) {
  const struct ib_ctx *ctx = c->ctx;
  struct ib_hello h = {.rank = (uint32_t)ctx->rank,
                       .peer = (uint32_t)c->peer,
                       .comm_hash = ctx->comm_hash,
                       .qp_num = c->qp->qp_num,
                       .ring_addr = (uint64_t)(uintptr_t)c->in,
                       .ring_rkey = c->in_mr->rkey,
                       .slot_bytes = IB_EP_SLOT_BYTES,
                       .nslots = IB_EP_NSLOTS,
                       .credits = IB_EP_NSLOTS,
                       .rdv_slots = IB_EP_RDV_SLOTS};
  ib_wire_encode(&h, out);
}

/* Validates a peer's handshake.  0, or -1 with why; *fatal is set when the
 * sender is a rank of this communicator that cannot work with this one
 * (another version or ring geometry): waiting would not help. */
static int check_hello(const struct ib_ctx *ctx, const void *data, size_t len,
                       struct ib_hello *h, char *why, size_t why_len, int *fatal) {
  *fatal = 0;
  enum ib_wire_error e = ib_wire_decode(data, len, h);
  if (e == IB_WIRE_BAD_VERSION) {
    *fatal = 1;
    snprintf(why, why_len,
             "its handshake is version %d of Loom's ibverbs transport, this rank's %d (mixed "
             "Loom installations?)",
             ib_wire_peek_version(data, len), IB_WIRE_VERSION);
    return -1;
  }
  if (e != IB_WIRE_OK) {
    snprintf(why, why_len, "%s", ib_wire_strerror(e));
    return -1;
  }
  if (h->comm_hash != ctx->comm_hash) {
    snprintf(why, why_len, "rank %u of another communicator or job (secret differs)", h->rank);
    return -1;
  }
  if (h->rank >= (uint32_t)ctx->nranks || h->peer != (uint32_t)ctx->rank) {
    snprintf(why, why_len, "addressed from rank %u to rank %u", h->rank, h->peer);
    return -1;
  }
  if (h->nslots != IB_EP_NSLOTS || h->slot_bytes != IB_EP_SLOT_BYTES ||
      h->rdv_slots != IB_EP_RDV_SLOTS) {
    *fatal = 1;
    snprintf(why, why_len,
             "rank %u uses a ring of %u x %u bytes and %u rendezvous entries, this rank %u x "
             "%u and %u (mixed Loom builds?)",
             h->rank, h->nslots, h->slot_bytes, h->rdv_slots, IB_EP_NSLOTS, IB_EP_SLOT_BYTES,
             IB_EP_RDV_SLOTS);
    return -1;
  }
  return 0;
}

static void set_ack_timeout(struct ib_conn *c) {
  uint8_t t = c->ctx->timeout;
  if (rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t) != 0)
    LOOM_WARN(LOOM_LOG_NET,
              "ib: rank %d: cannot apply LOOM_IB_TIMEOUT=%d to the connection to rank %d "
              "(rdma_set_option: %s); rdma_cm's default applies",
              c->ctx->rank, (int)t, c->peer, strerror(errno));
}

static struct rdma_conn_param conn_param(const struct ib_ctx *ctx, const uint8_t *hello) {
  struct rdma_conn_param p;
  memset(&p, 0, sizeof p);
  p.private_data = hello;
  p.private_data_len = IB_WIRE_BYTES;
  p.retry_count = ctx->retry_cnt;
  p.rnr_retry_count = 7; /* receives are always posted ahead: 7 = retry for ever */
  return p;
}

/* Starts (or restarts) the connecting side's attempt. */
static void start_active(struct ib_conn *c) {
  struct ib_ctx *ctx = c->ctx;
  c->attempts++;
  if (rdma_create_id(ctx->cm, &c->id, c, RDMA_PS_TCP) != 0) {
    c->id = NULL;
    conn_fail(c, loomSystemError, "rdma_create_id: %s", strerror(errno));
    return;
  }
  union loom_sockaddr src = ctx->dev.addr;
  loom_sockaddr_set_port(&src, 0);
  if (rdma_resolve_addr(c->id, &src.sa, (struct sockaddr *)&c->peer_addr.sa, IB_RESOLVE_MS) != 0) {
    char text[LOOM_ADDR_STRLEN];
    loom_sockaddr_str(&c->peer_addr, text, sizeof text);
    conn_fail(c, loomSystemError, "rdma_resolve_addr(%s): %s", text, strerror(errno));
    return;
  }
  c->state = IB_CONN_RESOLVING_ADDR;
}

/* The attempt failed in a way a later one may not (the peer not listening
 * yet): tear it down and schedule another. */
static void retry_later(struct ib_conn *c, const char *what) {
  /* INFO for the first and then every 5 s: a late rank is normal. */
  if (c->attempts % 25 == 1)
    LOOM_INFO(LOOM_LOG_NET, "ib: rank %d: connection attempt %d to rank %d: %s; retrying",
              c->ctx->rank, c->attempts, c->peer, what);
  else
    LOOM_TRACE(LOOM_LOG_NET, "ib: rank %d: connection attempt %d to rank %d: %s; retrying",
               c->ctx->rank, c->attempts, c->peer, what);
  ib_conn_teardown_qp(c);
  if (c->id != NULL)
    rdma_destroy_id(c->id);
  c->id = NULL;
  c->retry_at = loom_now_ns() + RETRY_PAUSE_NS;
  c->state = IB_CONN_RESOLVING_ADDR;
}

/* A copy of what an event says, so that it can be acknowledged before
 * acting (destroying an id needs its events acknowledged). */
struct cm_event {
  enum rdma_cm_event_type type;
  int status;
  struct rdma_cm_id *id;
  int on_listener;
  uint8_t data[256];
  size_t len;
};

static void reject(struct ib_ctx *ctx, struct rdma_cm_id *id, const char *why) {
  LOOM_WARN(LOOM_LOG_NET, "ib: rank %d refused a connection request: %s", ctx->rank, why);
  /* The reason travels in the reject's private data (148 bytes on IB). */
  char text[140];
  snprintf(text, sizeof text, "%s", why);
  rdma_reject(id, text, (uint8_t)(strlen(text) + 1));
  rdma_destroy_id(id);
}

static void on_connect_request(struct ib_ctx *ctx, const struct cm_event *ev,
                               const uint8_t *expected) {
  struct ib_hello h = {.rank = UINT32_MAX}; /* decoded only when the handshake parses */
  char why[256];
  int fatal;
  if (check_hello(ctx, ev->data, ev->len, &h, why, sizeof why, &fatal) != 0) {
    /* A rank of this communicator that can never connect: say so there
     * and here, rather than time out. */
    if (fatal && h.rank < (uint32_t)ctx->nranks && ctx->conns[h.rank] != NULL)
      conn_fail(ctx->conns[h.rank], loomInvalidUsage, "%s", why);
    reject(ctx, ev->id, why);
    return;
  }
  struct ib_conn *c = ctx->conns[h.rank];
  if (expected == NULL || !expected[h.rank] || c == NULL || c->active ||
      c->state == IB_CONN_ESTABLISHED || c->state == IB_CONN_FAILED) {
    snprintf(why, sizeof why, "rank %u is not expected to connect to rank %d now", h.rank,
             ctx->rank);
    reject(ctx, ev->id, why);
    return;
  }
  if (c->id != NULL) {
    /* The peer gave up an attempt this side had accepted (its reply lost,
     * or late): the new request replaces it. */
    ib_conn_teardown_qp(c);
    rdma_destroy_id(c->id);
    c->id = NULL;
  }
  c->id = ev->id;
  c->id->context = c;
  loomResult_t res = ib_conn_setup_qp(c);
  if (res == loomSuccess)
    res = ib_ep_set_remote(&c->ep, h.ring_addr, h.ring_rkey, h.credits);
  if (res != loomSuccess) {
    conn_fail_recorded(c, res);
    rdma_reject(c->id, NULL, 0);
    return;
  }
  set_ack_timeout(c);
  uint8_t hello[IB_WIRE_BYTES];
  make_hello(c, hello);
  struct rdma_conn_param p = conn_param(ctx, hello);
  if (rdma_accept(c->id, &p) != 0) {
    conn_fail(c, loomSystemError, "rdma_accept: %s", strerror(errno));
    return;
  }
  c->state = IB_CONN_CONNECTING;
}

static void on_established(struct ib_conn *c, const struct cm_event *ev) {
  if (c->active) {
    struct ib_hello h;
    char why[256];
    int fatal;
    if (check_hello(c->ctx, ev->data, ev->len, &h, why, sizeof why, &fatal) != 0 ||
        (h.rank != (uint32_t)c->peer &&
         snprintf(why, sizeof why, "rank %u answered in its place", h.rank) > 0)) {
      conn_fail(c, fatal ? loomInvalidUsage : loomRemoteError, "its accept reply: %s", why);
      return;
    }
    if (ib_ep_set_remote(&c->ep, h.ring_addr, h.ring_rkey, h.credits) != loomSuccess) {
      conn_fail_recorded(c, loomRemoteError);
      return;
    }
  }
  c->state = IB_CONN_ESTABLISHED;
}

static void on_rejected(struct ib_conn *c, const struct cm_event *ev) {
  /* Our own rdma_reject carries a printable reason; anything else (no
   * listener on that port yet) may pass. */
  int has_reason = ev->status == REJ_CONSUMER_DEFINED && ev->len > 1 && ev->data[0] >= ' ';
  if (has_reason) {
    char text[160];
    snprintf(text, sizeof text, "%.*s", (int)(ev->len < 150 ? ev->len : 150),
             (const char *)ev->data);
    conn_fail(c, loomRemoteError, "rank %d refused it: %s", c->peer, text);
  } else {
    char what[64];
    snprintf(what, sizeof what, "rejected (status %d)", ev->status);
    retry_later(c, what);
  }
}

static void handle(struct ib_ctx *ctx, const struct cm_event *ev, const uint8_t *expected) {
  if (ev->on_listener && ev->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    on_connect_request(ctx, ev, expected);
    return;
  }
  struct ib_conn *c = ev->id->context;
  if (c == NULL || c->state == IB_CONN_FAILED)
    return;
  char text[LOOM_ADDR_STRLEN];
  loom_sockaddr_str(&c->peer_addr, text, sizeof text);
  switch (ev->type) {
  case RDMA_CM_EVENT_ADDR_RESOLVED:
    if (rdma_resolve_route(c->id, IB_RESOLVE_MS) != 0)
      conn_fail(c, loomSystemError, "rdma_resolve_route(%s): %s", text, strerror(errno));
    else
      c->state = IB_CONN_RESOLVING_ROUTE;
    return;
  case RDMA_CM_EVENT_ROUTE_RESOLVED: {
    loomResult_t res = ib_conn_setup_qp(c);
    if (res != loomSuccess) {
      conn_fail_recorded(c, res);
      return;
    }
    set_ack_timeout(c);
    uint8_t hello[IB_WIRE_BYTES];
    make_hello(c, hello);
    struct rdma_conn_param p = conn_param(ctx, hello);
    if (rdma_connect(c->id, &p) != 0)
      conn_fail(c, loomSystemError, "rdma_connect(%s): %s", text, strerror(errno));
    else
      c->state = IB_CONN_CONNECTING;
    return;
  }
  case RDMA_CM_EVENT_ESTABLISHED:
    on_established(c, ev);
    return;
  case RDMA_CM_EVENT_REJECTED:
    if (c->active)
      on_rejected(c, ev);
    else
      conn_fail(c, loomRemoteError, "rdma_accept: rejected (status %d)", ev->status);
    return;
  case RDMA_CM_EVENT_UNREACHABLE:
  case RDMA_CM_EVENT_CONNECT_ERROR:
    if (c->active && c->state != IB_CONN_ESTABLISHED) {
      retry_later(c, rdma_event_str(ev->type));
    } else if (!c->active && c->state == IB_CONN_CONNECTING) {
      /* The connecting side will retry: wait for its next request. */
      ib_conn_teardown_qp(c);
      rdma_destroy_id(c->id);
      c->id = NULL;
      c->state = IB_CONN_RESOLVING_ADDR;
    } else
      conn_fail(c, loomRemoteError, "rdma_cm %s (status %d)", rdma_event_str(ev->type),
                ev->status);
    return;
  case RDMA_CM_EVENT_ADDR_ERROR:
  case RDMA_CM_EVENT_ROUTE_ERROR:
    conn_fail(c, loomSystemError, "rdma_cm %s for %s (status %d: %s)", rdma_event_str(ev->type),
              text, ev->status, strerror(ev->status < 0 ? -ev->status : ev->status));
    return;
  case RDMA_CM_EVENT_DISCONNECTED:
    if (c->state == IB_CONN_ESTABLISHED && c->ep_ready)
      ib_ep_fail(&c->ep, loomRemoteError,
                 "rank %d closed the connection (rdma_cm DISCONNECTED: did the process exit?)",
                 c->peer);
    else
      conn_fail(c, loomRemoteError, "rank %d disconnected during set-up", c->peer);
    return;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    if (c->ep_ready)
      ib_ep_fail(&c->ep, loomSystemError, "RDMA device %s removed", ctx->dev.dev);
    conn_fail(c, loomSystemError, "RDMA device %s removed", ctx->dev.dev);
    return;
  default:
    return; /* TIMEWAIT_EXIT, ADDR_CHANGE ...: nothing to do */
  }
}

/* Takes every pending event (the channel's fd is non-blocking). */
static void drain_events(struct ib_ctx *ctx, const uint8_t *expected) {
  struct rdma_cm_event *raw;
  while (rdma_get_cm_event(ctx->cm, &raw) == 0) {
    struct cm_event ev = {.type = raw->event,
                          .status = raw->status,
                          .id = raw->id,
                          .on_listener = raw->listen_id == ctx->listen_id && ctx->listen_id};
    const void *pd = raw->param.conn.private_data;
    size_t len = raw->param.conn.private_data_len;
    if (pd != NULL && len > 0) {
      ev.len = len < sizeof ev.data ? len : sizeof ev.data;
      memcpy(ev.data, pd, ev.len);
    }
    rdma_ack_cm_event(raw);
    handle(ctx, &ev, expected);
  }
}

void ib_cm_poll_nowait(struct ib_ctx *ctx) { drain_events(ctx, NULL); }

static struct ib_conn *new_conn(struct ib_ctx *ctx, int peer, const union loom_sockaddr *addr) {
  struct ib_conn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->ctx = ctx;
  c->peer = peer;
  c->active = ctx->rank < peer;
  c->peer_addr = *addr;
  c->state = IB_CONN_RESOLVING_ADDR;
  return c;
}

/* "3, 5, 9" — the ranks still missing, for the timeout message. */
static void missing_ranks(struct ib_ctx *ctx, int npeers, const int *peers, char *out,
                          size_t len) {
  out[0] = '\0';
  for (int i = 0; i < npeers; i++) {
    struct ib_conn *c = ctx->conns[peers[i]];
    if (c->state == IB_CONN_ESTABLISHED)
      continue;
    size_t used = strlen(out);
    char how[64];
    if (!c->active)
      snprintf(how, sizeof how, "no connection request from it");
    else if (c->state == IB_CONN_CONNECTING)
      snprintf(how, sizeof how, "no answer to the handshake");
    else if (c->attempts > 1)
      snprintf(how, sizeof how, "not listening or unreachable, %d attempts", c->attempts);
    else
      snprintf(how, sizeof how, "resolving its %s",
               c->state == IB_CONN_RESOLVING_ROUTE ? "route" : "address");
    snprintf(out + used, len - used, "%s%d (%s)", used ? ", " : "", c->peer, how);
  }
}

loomResult_t ib_connect_peers(struct ib_ctx *ctx, int npeers, const int *peers,
                              const void *addrs, uint64_t deadline) {
  uint8_t *expected = calloc((size_t)ctx->nranks, 1);
  if (expected == NULL)
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  loomResult_t res = loomSuccess;
  for (int i = 0; i < npeers && res == loomSuccess; i++) {
    int p = peers[i];
    expected[p] = 1;
    if (ctx->conns[p] != NULL)
      continue;
    const uint8_t *blob = (const uint8_t *)addrs + (size_t)p * IB_ADDR_BYTES;
    union loom_sockaddr a;
    if (loom_get_u32(blob) != IB_ADDR_MAGIC || loom_sockaddr_decode(blob + 4, &a) != 0) {
      res = loom_error(loomInvalidUsage, LOOM_LOG_NET,
                       "rank %d: rank %d published no ibverbs address (no usable RDMA device "
                       "there?); use the same LOOM_NET everywhere",
                       ctx->rank, p);
      break;
    }
    if ((ctx->conns[p] = new_conn(ctx, p, &a)) == NULL) {
      res = loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
      break;
    }
    ctx->open[ctx->nopen++] = ctx->conns[p];
    if (ctx->conns[p]->active)
      start_active(ctx->conns[p]);
  }
  while (res == loomSuccess) {
    int pending = 0;
    uint64_t now = loom_now_ns();
    for (int i = 0; i < npeers; i++) {
      struct ib_conn *c = ctx->conns[peers[i]];
      if (c->state == IB_CONN_FAILED) {
        loom_set_last_error(c->err);
        res = loom_error(c->err_code, LOOM_LOG_NET, "%s", c->err);
        break;
      }
      if (c->state != IB_CONN_ESTABLISHED)
        pending = 1;
      if (c->active && c->id == NULL && c->retry_at <= now)
        start_active(c);
    }
    if (res != loomSuccess || !pending)
      break;
    if (now >= deadline) {
      char missing[512];
      missing_ranks(ctx, npeers, peers, missing, sizeof missing);
      res = loom_error(loomTimeout, LOOM_LOG_NET,
                       "rank %d: ibverbs connections not established before the deadline "
                       "(LOOM_BOOTSTRAP_TIMEOUT) with rank(s) %s",
                       ctx->rank, missing);
      break;
    }
    uint64_t wait_ms = (deadline - now) / 1000000u;
    struct pollfd pfd = {.fd = ctx->cm->fd, .events = POLLIN};
    poll(&pfd, 1, wait_ms > 100 ? 100 : (int)wait_ms + 1);
    drain_events(ctx, expected);
  }
  free(expected);
  return res;
}
