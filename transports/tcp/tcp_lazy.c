/*
 * tcp_lazy.c — connections made on first use (LOOM_CONNECT=lazy, the
 * default).  Init only listens and exchanges addresses.  The first message
 * posted to a peer (or a receive from any source probing it) makes the
 * lower rank of the pair open its sockets; the higher rank accepts them
 * whenever it progresses, so a connection that arrives before this rank
 * needs it is kept for later.  Every step of the hello (net/auth.h) is
 * non-blocking and driven by progress: no rank waits inside a connect for
 * another, and a peer that never answers is found by the wait that needed
 * it, which names it, like any silent peer.
 */
#include "tcp.h"
#include "net/bytes.h"
#include "net/socket.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Accepted sockets still proving themselves, at most: more wait in the
 * listen backlog (a stranger flooding the port cannot grow our memory). */
#define TCP_MAX_ACCEPTING 256

enum tcp_shake_step {
  /* the dialler (lower rank) */
  SHAKE_DIAL,          /* non-blocking connect under way */
  SHAKE_GET_CHALLENGE, /* the acceptor's nonce */
  SHAKE_PUT_PROOF,     /* our nonce, tag and hello */
  SHAKE_GET_ANSWER,    /* the acceptor's tag */
  /* the acceptor (higher rank) */
  SHAKE_PUT_CHALLENGE,
  SHAKE_GET_PROOF,
  SHAKE_PUT_ANSWER,
};

static size_t step_bytes(int step) {
  switch (step) {
  case SHAKE_GET_CHALLENGE:
  case SHAKE_PUT_CHALLENGE:
    return LOOM_AUTH_CHALLENGE_BYTES;
  case SHAKE_PUT_PROOF:
  case SHAKE_GET_PROOF:
    return LOOM_AUTH_PROOF_BYTES + TCP_HELLO_BYTES;
  case SHAKE_GET_ANSWER:
  case SHAKE_PUT_ANSWER:
    return LOOM_AUTH_TAG_BYTES;
  default:
    return 0;
  }
}

static int step_sends(int step) {
  return step == SHAKE_PUT_PROOF || step == SHAKE_PUT_CHALLENGE || step == SHAKE_PUT_ANSWER;
}

static short step_events(int step) {
  return step == SHAKE_DIAL || step_sends(step) ? POLLOUT : POLLIN;
}

static struct tcp_shake *add_shake(struct tcp_ctx *ctx, int fd, int step) {
  if (ctx->nshakes == ctx->shakes_cap) {
    int cap = ctx->shakes_cap ? 2 * ctx->shakes_cap : 8;
    struct tcp_shake *grown = realloc(ctx->shakes, sizeof *grown * (size_t)cap);
    if (grown == NULL)
      return NULL;
    ctx->shakes = grown;
    ctx->shakes_cap = cap;
  }
  struct tcp_shake *sh = &ctx->shakes[ctx->nshakes++];
  memset(sh, 0, sizeof *sh);
  sh->fd = fd;
  sh->step = step;
  sh->peer = -1;
  return sh;
}

/* Forgets handshake i (its socket closed unless it was filed: fd -1). */
static void drop_shake(struct tcp_ctx *ctx, int i) {
  if (ctx->shakes[i].fd >= 0)
    close(ctx->shakes[i].fd);
  ctx->shakes[i] = ctx->shakes[--ctx->nshakes];
}

/* Opens this rank's sockets to the higher rank c->peer. */
static loomResult_t dial(struct tcp_conn *c) {
  struct tcp_ctx *ctx = c->ctx;
  union loom_sockaddr addr;
  loom_sockaddr_decode(ctx->addrs + (size_t)c->peer * TCP_ADDR_BYTES, &addr);
  c->dialed = 1;
  for (int s = 0; s < ctx->nsocks; s++) {
    int fd = -1;
    int err = loom_socket_connect_start(&addr, &fd);
    if (err != 0 && err != EINPROGRESS)
      return tcp_fail_conn(c, loomRemoteError, "cannot connect to its address", err);
    struct tcp_shake *sh = add_shake(ctx, fd, err == 0 ? SHAKE_GET_CHALLENGE : SHAKE_DIAL);
    if (sh == NULL) {
      close(fd);
      return tcp_fail_conn(c, loomSystemError, "out of memory", 0);
    }
    sh->peer = c->peer;
    sh->idx = s;
  }
  return loomSuccess;
}

void tcp_note_waiting(struct tcp_conn *c) {
  if (!c->ctx->lazy || c->peer > c->ctx->rank)
    return;
  int waiting = !tcp_conn_complete(c);
  if (waiting != c->waiting) {
    c->waiting = waiting;
    c->ctx->nwaiting += waiting ? 1 : -1;
  }
}

loomResult_t tcp_want(struct tcp_conn *c) {
  if (c->listed && (c->dialed || c->peer < c->ctx->rank)) /* the common case: nothing to do */
    return loomSuccess;
  tcp_list_conn(c->ctx, c);
  if (c->peer < c->ctx->rank) {
    tcp_note_waiting(c);
    return loomSuccess;
  }
  return tcp_conn_complete(c) ? loomSuccess : dial(c);
}

/* Moves this step's bytes: 1 when they are all through, 0 when the socket
 * would block, -1 when it closed or failed (errno; 0 for a close). */
static int shake_io(struct tcp_shake *sh) {
  size_t want = step_bytes(sh->step);
  while (sh->off < want) {
    ssize_t k = step_sends(sh->step)
                    ? send(sh->fd, sh->buf + sh->off, want - sh->off, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : recv(sh->fd, sh->buf + sh->off, want - sh->off, MSG_DONTWAIT);
    if (k > 0) {
      sh->off += (size_t)k;
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return 0;
    if (k == 0)
      errno = 0;
    return -1;
  }
  return 1;
}

/* A connect under way has finished (either way) once its socket is
 * writable. */
static int writable(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  return poll(&p, 1, 0) > 0;
}

static void next_step(struct tcp_shake *sh, int step) {
  sh->step = step;
  sh->off = 0;
}

/* The dialler's steps after one completed: 0 go on, 1 done (filed), -1
 * failed (the connection is marked failed). */
static int dialler_step(struct tcp_ctx *ctx, struct tcp_shake *sh) {
  struct tcp_conn *c = ctx->conns[sh->peer];
  switch (sh->step) {
  case SHAKE_DIAL: {
    int err = loom_socket_connect_result(sh->fd);
    if (err != 0) {
      tcp_fail_conn(c, loomRemoteError, "cannot connect to its address", err);
      return -1;
    }
    next_step(sh, SHAKE_GET_CHALLENGE);
    return 0;
  }
  case SHAKE_GET_CHALLENGE: {
    if (loom_auth_challenge_decode(sh->buf, sh->st.challenge) != 0) {
      tcp_fail_conn(c, loomRemoteError,
                    "its port answered without a Loom challenge (another program?)", 0);
      return -1;
    }
    if (loom_auth_nonce(sh->st.nonce) != loomSuccess) {
      tcp_fail_conn(c, loomSystemError, "no random nonce", 0);
      return -1;
    }
    uint8_t *hello = sh->buf + LOOM_AUTH_PROOF_BYTES;
    tcp_hello_encode(hello, ctx->rank, sh->idx, ctx->nsocks);
    memcpy(sh->buf, sh->st.nonce, LOOM_AUTH_NONCE_BYTES);
    loom_auth_tag(ctx->secret, TCP_AUTH_LABEL, 'c', sh->st.challenge, sh->st.nonce, hello,
                  TCP_HELLO_BYTES, sh->buf + LOOM_AUTH_NONCE_BYTES);
    next_step(sh, SHAKE_PUT_PROOF);
    return 0;
  }
  case SHAKE_PUT_PROOF:
    next_step(sh, SHAKE_GET_ANSWER);
    return 0;
  default: { /* SHAKE_GET_ANSWER */
    uint8_t hello[TCP_HELLO_BYTES];
    tcp_hello_encode(hello, ctx->rank, sh->idx, ctx->nsocks);
    if (!loom_auth_check(ctx->secret, TCP_AUTH_LABEL, 'a', sh->st.challenge, sh->st.nonce,
                         hello, sizeof hello, sh->buf)) {
      tcp_fail_conn(c, loomRemoteError,
                    "it did not prove it knows this job's secret (a process of another job "
                    "at its address?)",
                    0);
      return -1;
    }
    c->socks[sh->idx].fd = sh->fd;
    sh->fd = -1;
    return 1;
  }
  }
}

/* The acceptor's steps after one completed: 0 go on, 1 done (filed or
 * dropped), -1 a fatal mismatch (*failed_peer set). */
static int acceptor_step(struct tcp_ctx *ctx, struct tcp_shake *sh, loomResult_t *res,
                         int *failed_peer) {
  switch (sh->step) {
  case SHAKE_PUT_CHALLENGE:
    next_step(sh, SHAKE_GET_PROOF);
    return 0;
  case SHAKE_GET_PROOF: {
    uint8_t *hello = sh->buf + LOOM_AUTH_PROOF_BYTES;
    memcpy(sh->st.nonce, sh->buf, LOOM_AUTH_NONCE_BYTES);
    if (!loom_auth_check(ctx->secret, TCP_AUTH_LABEL, 'c', sh->st.challenge, sh->st.nonce,
                         hello, TCP_HELLO_BYTES, sh->buf + LOOM_AUTH_NONCE_BYTES)) {
      tcp_note_drop(ctx, "wrong proof of the job's secret (another job, or a stranger)");
      return 1;
    }
    /* the answer goes where the nonce and tag were; the hello stays put */
    loom_auth_tag(ctx->secret, TCP_AUTH_LABEL, 'a', sh->st.challenge, sh->st.nonce, hello,
                  TCP_HELLO_BYTES, sh->buf);
    next_step(sh, SHAKE_PUT_ANSWER);
    return 0;
  }
  default: { /* SHAKE_PUT_ANSWER */
    const uint8_t *hello = sh->buf + LOOM_AUTH_PROOF_BYTES;
    int peer = (int)loom_get_u32(hello);
    int fd = sh->fd;
    sh->fd = -1; /* filed or closed by tcp_file_incoming */
    *res = tcp_file_incoming(ctx, fd, hello, NULL);
    if (*res != loomSuccess) {
      *failed_peer = peer;
      return -1;
    }
    return 1;
  }
  }
}

/* The acceptor handshake that has waited longest (-1: none). */
static int oldest_acceptor(const struct tcp_ctx *ctx) {
  int oldest = -1;
  for (int i = 0; i < ctx->nshakes; i++)
    if (ctx->shakes[i].step >= SHAKE_PUT_CHALLENGE &&
        (oldest < 0 || ctx->shakes[i].deadline < ctx->shakes[oldest].deadline))
      oldest = i;
  return oldest;
}

/* Takes the sockets waiting in the listen backlog, at most
 * TCP_MAX_ACCEPTING a turn.  When that many are already proving
 * themselves, the oldest is dropped to make room: strangers holding every
 * slot (connecting, then trickling or saying nothing) cannot keep a peer's
 * connection in the backlog, since a peer proves itself within a round
 * trip of being accepted while they never do. */
static void accept_new(struct tcp_ctx *ctx, int *progressed) {
  int accepting = 0;
  for (int i = 0; i < ctx->nshakes; i++)
    accepting += ctx->shakes[i].step >= SHAKE_PUT_CHALLENGE;
  for (int taken = 0; taken < TCP_MAX_ACCEPTING; taken++) {
    int fd = accept4(ctx->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
      return; /* EAGAIN, or a connection reset before we took it */
    if (accepting >= TCP_MAX_ACCEPTING) {
      tcp_note_drop(ctx, "the oldest unproven connection, dropped to make room");
      drop_shake(ctx, oldest_acceptor(ctx));
      accepting--;
    }
    loom_socket_set_nodelay(fd);
    struct tcp_shake *sh = add_shake(ctx, fd, SHAKE_PUT_CHALLENGE);
    if (sh == NULL || loom_auth_nonce(sh->st.challenge) != loomSuccess) {
      if (sh != NULL)
        ctx->nshakes--;
      close(fd);
      return;
    }
    loom_auth_challenge_encode(sh->st.challenge, sh->buf);
    sh->deadline = loom_deadline_ms(TCP_PROOF_MS);
    accepting++;
    *progressed = 1;
  }
}

/* Moves handshake i along: 1 when it is over (to be dropped), else 0;
 * fills *res and *failed_peer on a failure that ends the progress. */
static int advance(struct tcp_ctx *ctx, int i, int *progressed, loomResult_t *res,
                   int *failed_peer) {
  struct tcp_shake *sh = &ctx->shakes[i];
  int dialler = sh->step < SHAKE_PUT_CHALLENGE;
  for (;;) {
    int io = sh->step == SHAKE_DIAL ? writable(sh->fd) : shake_io(sh);
    if (io == 0) {
      if (!dialler && loom_ms_left(sh->deadline) == 0) {
        tcp_note_drop(ctx, "no complete hello within " TCP_PROOF_TEXT);
        return 1;
      }
      return 0;
    }
    if (io < 0) {
      if (!dialler)
        return 1; /* a stranger or a peer gone before its hello: nothing to report */
      struct tcp_conn *c = ctx->conns[sh->peer];
      int closed = errno == 0 || errno == ECONNRESET || errno == EPIPE;
      tcp_fail_conn(c, loomRemoteError,
                    closed ? "it closed the connection during the hello (the process exited, "
                             "or it holds another job's secret)"
                           : "the hello failed",
                    closed ? 0 : errno);
      *res = c->failed;
      *failed_peer = sh->peer;
      return 1;
    }
    *progressed = 1;
    int r = dialler ? dialler_step(ctx, sh) : acceptor_step(ctx, sh, res, failed_peer);
    if (r < 0 && dialler) {
      *res = ctx->conns[sh->peer]->failed;
      *failed_peer = sh->peer;
    }
    if (r != 0)
      return 1;
  }
}

loomResult_t tcp_lazy_progress(struct tcp_ctx *ctx, int *progressed, int *failed_peer) {
  if (ctx->nshakes == 0 && ctx->nwaiting == 0)
    return loomSuccess;
  if (ctx->nwaiting > 0)
    accept_new(ctx, progressed);
  loomResult_t res = loomSuccess;
  for (int i = 0; i < ctx->nshakes;) {
    if (!advance(ctx, i, progressed, &res, failed_peer)) {
      i++;
      continue;
    }
    drop_shake(ctx, i);
    if (res != loomSuccess)
      return res;
  }
  return loomSuccess;
}

int tcp_lazy_poll_fds(struct tcp_ctx *ctx, struct pollfd *fds, int max) {
  int n = 0;
  if (n < max && ctx->nwaiting > 0)
    fds[n++] = (struct pollfd){.fd = ctx->listen_fd, .events = POLLIN};
  for (int i = 0; i < ctx->nshakes && n < max; i++)
    fds[n++] = (struct pollfd){.fd = ctx->shakes[i].fd, .events = step_events(ctx->shakes[i].step)};
  return n;
}

void tcp_lazy_fini(struct tcp_ctx *ctx) {
  while (ctx->nshakes > 0)
    drop_shake(ctx, ctx->nshakes - 1);
  free(ctx->shakes);
}
