/*
 * tcp.c — the TCP transport: listening, connection set-up at init
 * (LOOM_CONNECT=eager: the lower rank connects, the higher accepts, each
 * socket introduced by an authenticated hello; lazy set-up is in
 * tcp_lazy.c) and the vtable.
 */
#include "tcp.h"
#include "net/auth.h"
#include "net/socket.h"
#include "net/bytes.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static loomResult_t tcp_init(const struct loom_transport_comm *info, void **out,
                             void *addr) {
  int lazy = loom_connect_lazy();
  if (lazy < 0)
    return loomInvalidArgument;
  struct tcp_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  ctx->lazy = lazy;
  ctx->conns = calloc((size_t)info->nranks, sizeof *ctx->conns);
  ctx->open = calloc((size_t)info->nranks, sizeof *ctx->open);
  if (ctx->conns == NULL || ctx->open == NULL) {
    free(ctx->conns);
    free(ctx->open);
    free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  }
  ctx->rank = info->rank;
  ctx->nranks = info->nranks;
  ctx->turn = 1; /* a connection's probe_turn starts at 0: not probing */
  ctx->nsocks = (int)loom_param_int(LOOM_PARAM_SOCKET_NSOCKS);
  ctx->comm_name = info->comm_name;
  memcpy(ctx->secret, info->secret, LOOM_SECRET_BYTES);
  union loom_sockaddr local, bound;
  if (loom_sockaddr_copy(&local, info->local_sockaddr) != 0) {
    free(ctx->conns);
    free(ctx->open);
    free(ctx);
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "tcp: the local address is not an IPv4 or IPv6 address");
  }
  loom_sockaddr_set_port(&local, 0);
  loomResult_t res = loom_socket_listen(&local, &ctx->listen_fd, &bound);
  if (res != loomSuccess) {
    free(ctx->conns);
    free(ctx->open);
    free(ctx);
    return res;
  }
  loom_sockaddr_encode(&bound, addr);
  char text[LOOM_ADDR_STRLEN];
  loom_sockaddr_str(&bound, text, sizeof text);
  LOOM_INFO(LOOM_LOG_NET, "tcp: rank %d listening on %s, %d socket(s) per peer, connected %s",
            ctx->rank, text, ctx->nsocks, lazy ? "on first use" : "at init");
  *out = ctx;
  return loomSuccess;
}

static struct tcp_conn *new_conn(struct tcp_ctx *ctx, int peer) {
  struct tcp_conn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->socks = calloc((size_t)ctx->nsocks, sizeof *c->socks);
  if (c->socks == NULL) {
    free(c);
    return NULL;
  }
  for (int i = 0; i < ctx->nsocks; i++) {
    c->socks[i].fd = -1;
    loom_fifo_init(&c->socks[i].sendq, sizeof(struct tcp_part));
    loom_fifo_init(&c->socks[i].recvq, sizeof(struct tcp_part));
  }
  c->peer = peer;
  c->nsocks = ctx->nsocks;
  c->ctx = ctx;
  return c;
}

static void free_conn(struct tcp_conn *c) {
  if (c == NULL)
    return;
  for (int i = 0; i < c->nsocks; i++) {
    if (c->socks[i].fd >= 0)
      close(c->socks[i].fd);
    loom_fifo_free(&c->socks[i].sendq);
    loom_fifo_free(&c->socks[i].recvq);
  }
  free(c->socks);
  free(c);
}

void tcp_list_conn(struct tcp_ctx *ctx, struct tcp_conn *c) {
  if (!c->listed) {
    c->listed = 1;
    ctx->open[ctx->nopen++] = c;
  }
}

void tcp_note_drop(struct tcp_ctx *ctx, const char *why) {
  if (ctx->dropped++ < TCP_DROPS_LOGGED)
    LOOM_WARN(LOOM_LOG_NET, "tcp: rank %d dropped an incoming connection: %s%s", ctx->rank, why,
              ctx->dropped == TCP_DROPS_LOGGED ? " (further drops are counted, not logged)" : "");
}

void tcp_hello_encode(uint8_t hello[TCP_HELLO_BYTES], int rank, int idx, int nsocks) {
  loom_put_u32(hello, (uint32_t)rank);
  loom_put_u32(hello + 4, (uint32_t)idx);
  loom_put_u32(hello + 8, (uint32_t)nsocks);
}

int tcp_conn_complete(const struct tcp_conn *c) {
  for (int i = 0; i < c->nsocks; i++)
    if (c->socks[i].fd < 0)
      return 0;
  return 1;
}

loomResult_t tcp_file_incoming(struct tcp_ctx *ctx, int fd, const uint8_t *hello,
                                  const char *why) {
  int peer = (int)loom_get_u32(hello);
  int idx = (int)loom_get_u32(hello + 4);
  int nsocks = (int)loom_get_u32(hello + 8);
  struct tcp_conn *c = NULL;
  if (why == NULL) {
    if (peer < 0 || peer >= ctx->nranks || ctx->conns[peer] == NULL || peer >= ctx->rank)
      why = "a rank this rank is not connecting to";
    else if (nsocks != ctx->nsocks) {
      close(fd);
      return loom_error(loomInvalidUsage, LOOM_LOG_NET,
                        "rank %d uses LOOM_SOCKET_NSOCKS=%d but rank %d uses %d: "
                        "set the same value on every rank",
                        peer, nsocks, ctx->rank, ctx->nsocks);
    } else if (idx < 0 || idx >= nsocks || (c = ctx->conns[peer])->socks[idx].fd >= 0)
      why = "a duplicate or out-of-range socket index";
  }
  if (why != NULL) {
    tcp_note_drop(ctx, why);
    close(fd);
    return loomSuccess;
  }
  c->socks[idx].fd = fd;
  tcp_list_conn(ctx, c);
  tcp_note_waiting(c);
  return loomSuccess;
}

static uint64_t proof_deadline(uint64_t deadline) {
  uint64_t d = loom_deadline_ms(TCP_PROOF_MS);
  return d < deadline ? d : deadline;
}

/* Accepts one socket, challenges it and files it if it proves itself. */
static loomResult_t accept_one(struct tcp_ctx *ctx, const char *expecting, uint64_t deadline) {
  int fd;
  LOOM_CHECK(loom_socket_accept(ctx->listen_fd, deadline, expecting, &fd));
  uint8_t hello[TCP_HELLO_BYTES] = {0};
  const char *why = NULL;
  loom_auth_accept(fd, ctx->secret, TCP_AUTH_LABEL, hello, sizeof hello,
                   proof_deadline(deadline), &why);
  return tcp_file_incoming(ctx, fd, hello, why);
}

/* Opens and proves the sockets to one higher rank, one at a time. */
static loomResult_t connect_up(struct tcp_ctx *ctx, struct tcp_conn *c, const void *addrs,
                               uint64_t deadline) {
  union loom_sockaddr peer_addr;
  loom_sockaddr_decode((const uint8_t *)addrs + (size_t)c->peer * TCP_ADDR_BYTES, &peer_addr);
  char what[64];
  snprintf(what, sizeof what, "rank %d (tcp)", c->peer);
  for (int s = 0; s < ctx->nsocks; s++) {
    int fd;
    LOOM_CHECK(loom_socket_connect(&peer_addr, deadline, 0, what, &fd));
    uint8_t hello[TCP_HELLO_BYTES];
    tcp_hello_encode(hello, ctx->rank, s, ctx->nsocks);
    loomResult_t res =
        loom_auth_connect(fd, ctx->secret, TCP_AUTH_LABEL, hello, sizeof hello, deadline, what);
    if (res != loomSuccess) {
      close(fd);
      return res;
    }
    c->socks[s].fd = fd;
  }
  return loomSuccess;
}

/* The lower rank of each pair connects, the higher accepts, each socket
 * proving the secret both ways (net/auth.h).  A rank first connects
 * upward, then accepts: the waits all point to higher ranks, and the
 * highest only accepts, so they end from the top down.  Each connecting
 * rank has one socket in its handshake at a time, so a socket accepted is
 * one whose owner is waiting on exactly it.  (Handshakes of different
 * pairs do not overlap: init over tcp costs one round trip per socket in
 * sequence; lazy connection, issue 22, will change the shape anyway.) */
static loomResult_t tcp_connect(void *vctx, int npeers, const int *peers,
                                const void *addrs, uint64_t deadline, void **conns) {
  struct tcp_ctx *ctx = vctx;
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    if (ctx->conns[p] != NULL)
      continue;
    if ((ctx->conns[p] = new_conn(ctx, p)) == NULL)
      return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
    if (!ctx->lazy)
      tcp_list_conn(ctx, ctx->conns[p]);
  }
  if (ctx->lazy) { /* tcp_lazy.c connects on first use */
    if (ctx->addrs == NULL &&
        (ctx->addrs = malloc((size_t)ctx->nranks * TCP_ADDR_BYTES)) == NULL)
      return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
    memcpy(ctx->addrs, addrs, (size_t)ctx->nranks * TCP_ADDR_BYTES);
  }
  for (int i = 0; i < npeers && !ctx->lazy; i++)
    if (peers[i] > ctx->rank && !tcp_conn_complete(ctx->conns[peers[i]]))
      LOOM_CHECK(connect_up(ctx, ctx->conns[peers[i]], addrs, deadline));
  for (int i = 0; i < npeers && !ctx->lazy; i++)
    while (!tcp_conn_complete(ctx->conns[peers[i]])) {
      char what[64];
      snprintf(what, sizeof what, "rank %d (tcp connection)", peers[i]);
      LOOM_CHECK(accept_one(ctx, what, deadline));
    }
  for (int i = 0; i < npeers; i++)
    conns[i] = ctx->conns[peers[i]];
  return loomSuccess;
}

static loomResult_t tcp_isend(void *conn, struct loom_xfer *x) {
  return tcp_post(conn, x, 1);
}

static loomResult_t tcp_irecv(void *conn, struct loom_xfer *x) {
  return tcp_post(conn, x, 0);
}

static loomResult_t tcp_progress(void *vctx, int *progressed, int *failed_peer) {
  struct tcp_ctx *ctx = vctx;
  ctx->turn++; /* ends the wait of the probes made before */
  if (ctx->lazy)
    LOOM_CHECK(tcp_lazy_progress(ctx, progressed, failed_peer));
  for (int i = 0; i < ctx->nopen; i++) {
    loomResult_t res = tcp_progress_conn(ctx->open[i], progressed);
    if (res != loomSuccess) {
      *failed_peer = ctx->open[i]->peer;
      return res;
    }
  }
  return loomSuccess;
}

static int tcp_poll_fds(void *vctx, struct pollfd *fds, int max) {
  struct tcp_ctx *ctx = vctx;
  int n = ctx->lazy ? tcp_lazy_poll_fds(ctx, fds, max) : 0;
  for (int j = 0; j < ctx->nopen; j++) {
    struct tcp_conn *c = ctx->open[j];
    for (int i = 0; i < c->nsocks && n < max; i++) {
      int probed = c->probe_turn == ctx->turn && (uint64_t)i == c->recv_msgs % (uint64_t)c->nsocks;
      short events = (short)((c->socks[i].sendq.count ? POLLOUT : 0) |
                             (c->socks[i].recvq.count || probed ? POLLIN : 0));
      if (events && c->socks[i].fd >= 0) {
        fds[n].fd = c->socks[i].fd;
        fds[n].events = events;
        fds[n].revents = 0;
        n++;
      }
    }
  }
  return n;
}

static void tcp_fini(void *vctx) {
  struct tcp_ctx *ctx = vctx;
  if (ctx == NULL)
    return;
  tcp_lazy_fini(ctx);
  if (ctx->dropped > TCP_DROPS_LOGGED)
    LOOM_WARN(LOOM_LOG_NET, "tcp: rank %d dropped %lu incoming connections in all that did not "
              "prove the job's secret in time", ctx->rank, ctx->dropped);
  for (int r = 0; r < ctx->nranks; r++)
    free_conn(ctx->conns[r]);
  if (ctx->listen_fd >= 0)
    close(ctx->listen_fd);
  free(ctx->addrs);
  free(ctx->conns);
  free(ctx->open);
  free(ctx);
}

/* Kernel TCP: tens of microseconds a message and system calls at both
 * ends; the bandwidth is the NIC's (the topology knows it). */
static void tcp_properties(void *ctx, int peer, struct loom_net_properties *p) {
  (void)ctx;
  (void)peer;
  p->latency_us = 20.0;
  p->msg_overhead_us = 2.0;
}

const struct loom_transport loom_transport_tcp = {
    .name = "tcp",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = TCP_ADDR_BYTES,
    .init = tcp_init,
    .connect = tcp_connect,
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .progress = tcp_progress,
    .poll_fds = tcp_poll_fds,
    .fini = tcp_fini,
    .struct_size = sizeof(struct loom_transport),
    .properties = tcp_properties,
    .probe = tcp_probe,
};
