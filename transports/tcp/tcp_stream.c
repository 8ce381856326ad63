/*
 * tcp_stream.c — moving parts over a connection's sockets: posting a
 * message (cut into parts, queued per socket) and progressing the queues
 * with non-blocking writev/readv.
 */
#include "tcp.h"
#include "net/bytes.h"
#include "common/msg_check.h"
#include "core/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

int tcp_split(size_t len, int nsocks, size_t *part_len) {
  if (len < TCP_STRIPE_MIN || nsocks <= 1) {
    *part_len = len;
    return 1;
  }
  size_t per = (len + (size_t)nsocks - 1) / (size_t)nsocks;
  per = (per + 4095) & ~(size_t)4095; /* page-aligned parts */
  *part_len = per;
  return (int)((len + per - 1) / per);
}

static struct tcp_part *queue_front(struct loom_fifo *q) { return loom_fifo_at(q, 0); }

/* Header: magic, part length, message length (64 bits), fingerprint. */
static void encode_hdr(uint8_t *h, size_t part_len, const struct loom_xfer *x) {
  loom_put_u32(h, TCP_PART_MAGIC);
  loom_put_u32(h + 4, (uint32_t)part_len);
  loom_put_u64(h + 8, (uint64_t)x->len);
  loom_put_u64(h + 16, x->fp[0]);
  loom_put_u64(h + 24, x->fp[1]);
}

loomResult_t tcp_post(struct tcp_conn *c, struct loom_xfer *x, int is_send) {
  if (c->failed != loomSuccess)
    return c->failed;
  if (c->ctx->lazy)
    LOOM_CHECK(tcp_want(c));
  size_t part_len;
  int nparts = tcp_split(x->len, c->nsocks, &part_len);
  uint64_t msg = is_send ? c->sent_msgs++ : c->recv_msgs++;
  x->done = 0;
  x->fp_mismatch = 0;
  x->parts_left = nparts;
  for (int j = 0; j < nparts; j++) {
    struct tcp_part p = {.xfer = x, .offset = (size_t)j * part_len, .done = 0};
    p.len = j == nparts - 1 ? x->len - p.offset : part_len;
    if (is_send)
      encode_hdr(p.hdr, p.len, x);
    struct tcp_sock *s = &c->socks[(msg + (uint64_t)j) % (uint64_t)c->nsocks];
    if (loom_fifo_push(is_send ? &s->sendq : &s->recvq, &p) != 0)
      return loom_error_record(loomSystemError,
                        "out of memory queueing a message for rank %d", c->peer);
  }
  return loomSuccess;
}

loomResult_t tcp_fail_conn(struct tcp_conn *c, loomResult_t code, const char *what, int err) {
  if (c->failed == loomSuccess)
    c->failed = loom_error_record(code,
                           "rank %d: connection to rank %d failed: %s%s%s",
                           c->ctx->rank, c->peer, what, err ? ": " : "",
                           err ? strerror(err) : "");
  return c->failed;
}

/* What is left to move of part p, header then payload: fills iov, returns
 * its entries. */
static int part_iov(struct tcp_part *p, struct iovec iov[2]) {
  int n = 0;
  if (p->done < TCP_PART_HDR_BYTES)
    iov[n++] = (struct iovec){.iov_base = p->hdr + p->done,
                              .iov_len = TCP_PART_HDR_BYTES - p->done};
  size_t payload_done = p->done > TCP_PART_HDR_BYTES ? p->done - TCP_PART_HDR_BYTES : 0;
  if (p->len > payload_done)
    iov[n++] = (struct iovec){.iov_base = (char *)p->xfer->buf + p->offset + payload_done,
                              .iov_len = p->len - payload_done};
  return n;
}

static void part_finished(struct loom_fifo *q) {
  struct tcp_part *p = queue_front(q);
  if (--p->xfer->parts_left == 0)
    p->xfer->done = 1;
  loom_fifo_pop(q);
}

static loomResult_t progress_send(struct tcp_conn *c, struct tcp_sock *s, int *progressed) {
  struct tcp_part *p;
  while ((p = queue_front(&s->sendq)) != NULL) {
    struct iovec iov[2];
    int n = part_iov(p, iov);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t k = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return loomSuccess;
      return tcp_fail_conn(c, loomRemoteError, "send failed (did the process exit?)", errno);
    }
    *progressed = 1;
    p->done += (size_t)k;
    if (p->done < TCP_PART_HDR_BYTES + p->len)
      return loomSuccess; /* socket buffer full */
    part_finished(&s->sendq);
  }
  return loomSuccess;
}

static loomResult_t check_hdr(struct tcp_conn *c, const struct tcp_part *p) {
  if (loom_get_u32(p->hdr) != TCP_PART_MAGIC)
    return tcp_fail_conn(c, loomRemoteError, "corrupt stream (bad part header)", 0);
  struct loom_xfer *x = p->xfer;
  loomResult_t res = loom_msg_check(x, loom_get_u64(p->hdr + 16), loom_get_u64(p->hdr + 24),
                                    loom_get_u64(p->hdr + 8), c->ctx->rank, c->peer,
                                    c->failed == loomSuccess);
  if (res != loomSuccess) {
    if (c->failed == loomSuccess)
      c->failed = res;
    return c->failed;
  }
  /* same call and length, so both sides cut the same parts */
  if (loom_get_u32(p->hdr + 4) != p->len)
    return tcp_fail_conn(c, loomRemoteError, "corrupt stream (bad part length)", 0);
  return loomSuccess;
}

static loomResult_t progress_recv(struct tcp_conn *c, struct tcp_sock *s, int *progressed) {
  struct tcp_part *p;
  while ((p = queue_front(&s->recvq)) != NULL) {
    /* Header and payload in one readv: the part's size is known. */
    struct iovec iov[2];
    int n = part_iov(p, iov);
    ssize_t k = readv(s->fd, iov, n);
    if (k == 0)
      return tcp_fail_conn(c, loomRemoteError,
                       "the peer closed the connection (did the process exit?)", 0);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return loomSuccess;
      return tcp_fail_conn(c, loomRemoteError, "receive failed", errno);
    }
    *progressed = 1;
    size_t before = p->done;
    p->done += (size_t)k;
    if (before < TCP_PART_HDR_BYTES && p->done >= TCP_PART_HDR_BYTES)
      LOOM_CHECK(check_hdr(c, p));
    if (p->done < TCP_PART_HDR_BYTES + p->len)
      return loomSuccess;
    part_finished(&s->recvq);
  }
  return loomSuccess;
}

loomResult_t tcp_progress_conn(struct tcp_conn *c, int *progressed) {
  if (c->failed != loomSuccess)
    return c->failed;
  for (int i = 0; i < c->nsocks; i++) {
    struct tcp_sock *s = &c->socks[i];
    if (s->fd < 0) /* lazy: not connected yet; its parts wait */
      continue;
    if (s->sendq.count)
      LOOM_CHECK(progress_send(c, s, progressed));
    if (s->recvq.count)
      LOOM_CHECK(progress_recv(c, s, progressed));
  }
  return loomSuccess;
}

int tcp_probe(void *conn, uint64_t fp[2], uint64_t *len) {
  struct tcp_conn *c = conn;
  if (c->failed != loomSuccess)
    return -1;
  if (!tcp_conn_complete(c)) { /* lazy: a receive from anyone may need it */
    if (tcp_want(c) != loomSuccess)
      return -1;
    return 0;
  }
  /* message m's first part travels on socket m mod nsocks */
  struct tcp_sock *s = &c->socks[c->recv_msgs % (uint64_t)c->nsocks];
  uint8_t h[TCP_PART_HDR_BYTES];
  ssize_t k = recv(s->fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k == 0) {
    tcp_fail_conn(c, loomRemoteError, "the peer closed the connection (did the process exit?)", 0);
    return -1;
  }
  if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    tcp_fail_conn(c, loomRemoteError, "receive failed", errno);
    return -1;
  }
  if (k < (ssize_t)sizeof h) {
    c->probe_turn = c->ctx->turn; /* poll_fds waits for the rest */
    return 0;
  }
  if (loom_get_u32(h) != TCP_PART_MAGIC) {
    tcp_fail_conn(c, loomRemoteError, "corrupt stream (bad part header)", 0);
    return -1;
  }
  *len = loom_get_u64(h + 8);
  fp[0] = loom_get_u64(h + 16);
  fp[1] = loom_get_u64(h + 24);
  return 1;
}
