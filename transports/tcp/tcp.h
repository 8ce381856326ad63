/*
 * tcp.h — internals of the TCP transport shared by its files: a connection
 * to one peer is several non-blocking sockets; each message is cut into
 * parts striped over them, each part preceded by a small header that the
 * receiver checks against what it posted.  The lower rank of a pair opens
 * the sockets, the higher accepts them, each introduced by an
 * authenticated hello: all at init (LOOM_CONNECT=eager, tcp.c) or when a
 * message to that peer is first posted (lazy, the default: tcp_lazy.c).
 */
#ifndef LOOM_TRANSPORT_TCP_H
#define LOOM_TRANSPORT_TCP_H

#include "common/fifo.h"
#include "net/auth.h"
#include "transport.h"

#include <stddef.h>
#include <stdint.h>

#define TCP_PART_MAGIC 0x4c4d5432u /* "LMT2" */
#define TCP_PART_HDR_BYTES 32
/* Messages below this go whole over one socket; larger ones are striped. */
#define TCP_STRIPE_MIN (128u << 10)

/* rank, socket index, sockets per peer: sent inside the proof of the
 * communicator's secret (net/auth.h) */
#define TCP_HELLO_BYTES 12
#define TCP_AUTH_LABEL "loom/tcp"
#define TCP_ADDR_BYTES 20
/* How long an accepted socket may take to prove itself. */
#define TCP_PROOF_MS 5000
#define TCP_PROOF_TEXT "5000 ms"

struct tcp_part {
  struct loom_xfer *xfer;
  size_t offset, len; /* the slice of xfer->buf this part carries */
  size_t done;        /* header + payload bytes moved so far */
  uint8_t hdr[TCP_PART_HDR_BYTES];
};

struct tcp_sock {
  int fd;
  struct loom_fifo sendq, recvq; /* of struct tcp_part */
};

struct tcp_conn {
  int peer;
  int nsocks;
  struct tcp_sock *socks;
  uint64_t sent_msgs, recv_msgs; /* message counters choose the sockets */
  loomResult_t failed;           /* first error, kept for later calls */
  struct tcp_ctx *ctx;
  /* ctx->turn when probe last found no message: poll_fds then waits for
   * one on the socket of the next message (until the next progress) */
  uint64_t probe_turn;
  int listed; /* in ctx->open */
  int dialed; /* lazy: this rank (the lower) has opened its sockets */
  int waiting; /* lazy: counted in ctx->nwaiting */
};

/* One socket in its authenticated hello, lazy mode (tcp_lazy.c). */
struct tcp_shake {
  int fd;
  int peer, idx; /* the dialler knows them; the acceptor reads them in the hello */
  int step;      /* enum in tcp_lazy.c */
  size_t off;    /* bytes of this step's message moved */
  uint8_t buf[LOOM_AUTH_PROOF_BYTES + TCP_HELLO_BYTES];
  struct loom_auth_state st;
  uint64_t deadline; /* accepted sockets: the proof must come by then */
};

struct tcp_ctx {
  int rank, nranks;
  int nsocks;
  uint8_t secret[16];
  int listen_fd;
  struct tcp_conn **conns; /* per rank, NULL until connected */
  struct tcp_conn **open;  /* the non-NULL entries of conns: what progress walks */
  int nopen;
  const char *comm_name;
  uint64_t turn; /* progress calls so far, from 1 */
  int lazy;             /* LOOM_CONNECT=lazy */
  uint8_t *addrs;       /* lazy: every rank's address blob */
  struct tcp_shake *shakes; /* lazy: sockets in their hello */
  int nshakes, shakes_cap;
  /* lazy: connections in use (or begun by the peer) that still wait for
   * the peer's sockets; while 0 and no hello is under way, progress and
   * poll_fds leave the listener alone (no system call per turn) */
  int nwaiting;
  /* incoming connections dropped (strangers, other jobs, late halves): the
   * first TCP_DROPS_LOGGED are logged, the rest counted and summed up at
   * fini, so a flood cannot fill the log */
  unsigned long dropped;
};
#define TCP_DROPS_LOGGED 4

/* tcp.c */
/* An incoming connection was dropped for `why` (its socket is the
 * caller's to close): logged while few, counted always. */
void tcp_note_drop(struct tcp_ctx *ctx, const char *why);
void tcp_hello_encode(uint8_t hello[TCP_HELLO_BYTES], int rank, int idx, int nsocks);
/* Files a proven socket under its peer (or drops it: why says so), and
 * puts the connection on the list progress walks.  Returns
 * loomInvalidUsage when the peer's LOOM_SOCKET_NSOCKS differs. */
loomResult_t tcp_file_incoming(struct tcp_ctx *ctx, int fd, const uint8_t *hello,
                               const char *why);
void tcp_list_conn(struct tcp_ctx *ctx, struct tcp_conn *c);
int tcp_conn_complete(const struct tcp_conn *c);

/* tcp_lazy.c: connections made on first use */
/* Counts c in ctx->nwaiting while it awaits sockets from its (lower) peer. */
void tcp_note_waiting(struct tcp_conn *c);
/* The connection is wanted: the lower rank starts its sockets. */
loomResult_t tcp_want(struct tcp_conn *c);
/* Accepts and moves handshakes along; sets *progressed when one moved. */
loomResult_t tcp_lazy_progress(struct tcp_ctx *ctx, int *progressed, int *failed_peer);
int tcp_lazy_poll_fds(struct tcp_ctx *ctx, struct pollfd *fds, int max);
void tcp_lazy_fini(struct tcp_ctx *ctx);

/* tcp_stream.c */
loomResult_t tcp_fail_conn(struct tcp_conn *c, loomResult_t code, const char *what, int err);
loomResult_t tcp_post(struct tcp_conn *c, struct loom_xfer *x, int is_send);
loomResult_t tcp_progress_conn(struct tcp_conn *c, int *progressed);
/* struct loom_transport's probe. */
int tcp_probe(void *conn, uint64_t fp[2], uint64_t *len);
/* Splits len bytes into parts: returns their number and the size of all
 * but the last (exposed for tests). */
int tcp_split(size_t len, int nsocks, size_t *part_len);

#endif
