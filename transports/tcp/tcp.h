/*
 * tcp.h — internals of the TCP transport shared by its files: a connection
 * to one peer is several non-blocking sockets; each message is cut into
 * parts striped over them, each part preceded by a small header that the
 * receiver checks against what it posted.
 */
#ifndef LOOM_TRANSPORT_TCP_H
#define LOOM_TRANSPORT_TCP_H

#include "common/fifo.h"
#include "transport.h"

#include <stddef.h>
#include <stdint.h>

#define TCP_PART_MAGIC 0x4c4d5432u /* "LMT2" */
#define TCP_PART_HDR_BYTES 32
/* Messages below this go whole over one socket; larger ones are striped. */
#define TCP_STRIPE_MIN (128u << 10)

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
};

/* tcp_stream.c */
loomResult_t tcp_post(struct tcp_conn *c, struct loom_xfer *x, int is_send);
loomResult_t tcp_progress_conn(struct tcp_conn *c, int *progressed);
/* struct loom_transport's probe. */
int tcp_probe(void *conn, uint64_t fp[2], uint64_t *len);
/* Splits len bytes into parts: returns their number and the size of all
 * but the last (exposed for tests). */
int tcp_split(size_t len, int nsocks, size_t *part_len);

#endif
