/*
 * check_tcp.c — unit tests of the TCP transport (transports/tcp): the
 * striping arithmetic (tcp_split) and the transport vtable end to end over
 * loopback, with two "ranks" living in this one process: data in both
 * directions with 1, 2 and 3 sockets per peer, a size mismatch, and a peer
 * that goes away; and connections made on first use (LOOM_CONNECT=lazy):
 * who opens them, a wrong secret or socket count found on the first
 * message, a silent stranger that must not hold up the real peer.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "loom.h"
#include "net/socket.h"
#include "net/auth.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "tcp/tcp.h"
#include "transport.h"

#include <arpa/inet.h>
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_expect.h"

static const struct loom_transport *tp = &loom_transport_tcp;

/* ---- tcp_split ----------------------------------------------------------------- */

START_TEST(split_small_is_one_part) {
  static const size_t lens[] = {0, 1, 4095, 4096, 65536, TCP_STRIPE_MIN - 1};
  for (int nsocks = 1; nsocks <= 16; nsocks++)
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
      size_t part = 12345;
      int n = tcp_split(lens[i], nsocks, &part);
      EXPECT(n == 1 && part == lens[i], "tcp_split(%zu, %d) = %d parts of %zu", lens[i],
             nsocks, n, part);
    }
}
END_TEST

START_TEST(split_one_socket_is_one_part) {
  static const size_t lens[] = {TCP_STRIPE_MIN, TCP_STRIPE_MIN + 1, 1 << 20,
                                (3 << 20) + 7, (size_t)1 << 32};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    size_t part = 0;
    int n = tcp_split(lens[i], 1, &part);
    EXPECT(n == 1 && part == lens[i], "tcp_split(%zu, 1) = %d parts of %zu", lens[i], n,
           part);
  }
}
END_TEST

START_TEST(split_large_is_striped) {
  size_t lens[64];
  int k = 0;
  lens[k++] = TCP_STRIPE_MIN;
  lens[k++] = TCP_STRIPE_MIN + 1;
  lens[k++] = 2 * TCP_STRIPE_MIN - 1;
  lens[k++] = 1 << 20;
  lens[k++] = (1 << 20) + 1;
  lens[k++] = (3 << 20) + 7;
  lens[k++] = 10 * TCP_STRIPE_MIN - 3;
  lens[k++] = ((size_t)1 << 30) + 1;
  lens[k++] = ((size_t)5 << 32) + 12345;
  uint64_t x = 88172645463325252ull;
  while (k < 64) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    lens[k++] = TCP_STRIPE_MIN + (size_t)(x % (64u << 20));
  }
  for (int nsocks = 2; nsocks <= 16; nsocks++)
    for (int i = 0; i < k; i++) {
      size_t len = lens[i], part = 0;
      int n = tcp_split(len, nsocks, &part);
      EXPECT(n >= 2 && n <= nsocks, "tcp_split(%zu, %d) = %d parts", len, nsocks, n);
      EXPECT(part > 0 && part % 4096 == 0, "tcp_split(%zu, %d): part_len %zu not page-aligned",
             len, nsocks, part);
      /* n-1 full parts and a last one of 1..part bytes cover len exactly. */
      EXPECT((size_t)(n - 1) * part < len && len <= (size_t)n * part,
             "tcp_split(%zu, %d) = %d parts of %zu: do not cover the message", len, nsocks,
             n, part);
    }
  size_t part;
  ck_assert_int_eq(tcp_split(1 << 20, 2, &part), 2);
  ck_assert_uint_eq(part, 512 << 10);
  ck_assert_int_eq(tcp_split(1 << 20, 4, &part), 4);
  ck_assert_uint_eq(part, 256 << 10);
}
END_TEST

/* ---- a pair of ranks over loopback ---------------------------------------------- */

struct pair {
  void *ctx[2];
  void *conn[2];
  uint8_t addrs[2 * 20];
  uint8_t secret[2][LOOM_SECRET_BYTES];
};

struct connect_arg {
  void *ctx;
  int peer;
  const uint8_t *addrs;
  uint64_t deadline;
  void *conn;
  loomResult_t res;
  char err[1024];
};

static void *connect_thread(void *p) {
  struct connect_arg *a = p;
  a->res = tp->connect(a->ctx, 1, &a->peer, a->addrs, a->deadline, &a->conn);
  snprintf(a->err, sizeof a->err, "%s", loomGetLastError(NULL));
  return NULL;
}

/* LOOM_CONNECT for the next set_env: the tests of an established
 * connection connect at init; the lazy ones below set "lazy". */
static const char *connect_mode = "eager";

static void set_env(int nsocks) {
  setenv("LOOM_CONNECT", connect_mode, 1);
  unsetenv("LOOM_PORT_RANGE");
  unsetenv("LOOM_COMM_ID");
  unsetenv("LOOM_SOCKET_IFNAME");
  unsetenv("LOOM_SOCKET_FAMILY");
  setenv("LOOM_DEBUG", "NONE", 1); /* the failure cases would WARN */
  char text[16];
  snprintf(text, sizeof text, "%d", nsocks);
  setenv("LOOM_SOCKET_NSOCKS", text, 1);
  loom_config_reload();
  ck_assert_int_eq(loom_param_int(LOOM_PARAM_SOCKET_NSOCKS), nsocks);
}

static void pair_init_rank(struct pair *pr, int r) {
  union loom_sockaddr local;
  memset(&local, 0, sizeof local);
  local.sin.sin_family = AF_INET;
  local.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct loom_transport_comm info = {
      .rank = r, .nranks = 2, .secret = pr->secret[r], .local_sockaddr = &local,
      .comm_name = "check_tcp"};
  memset(pr->addrs + r * 20, 0, 20);
  loomResult_t res = tp->init(&info, &pr->ctx[r], pr->addrs + r * 20);
  ck_assert_msg(res == loomSuccess, "init rank %d: %s", r, loomGetLastError(NULL));
  union loom_sockaddr a;
  ck_assert_int_eq(loom_sockaddr_decode(pr->addrs + r * 20, &a), 0);
  ck_assert_int_eq(a.sa.sa_family, AF_INET);
  ck_assert_int_gt(loom_sockaddr_port(&a), 0);
  ck_assert_int_eq(loom_sockaddr_is_loopback(&a), 1);
}

/* Connects rank 0 (main thread) and rank 1 (another thread) concurrently.
 * Returns rank 1's result (rank 0's must succeed); err1 gets its text. */
static loomResult_t pair_connect(struct pair *pr, int deadline_ms, char *err1,
                                 size_t err1_len) {
  struct connect_arg a1 = {pr->ctx[1], 0, pr->addrs, loom_deadline_ms(deadline_ms), NULL,
                           loomInternalError, ""};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, connect_thread, &a1), 0);
  int peer1 = 1;
  loomResult_t r0 =
      tp->connect(pr->ctx[0], 1, &peer1, pr->addrs, loom_deadline_ms(deadline_ms), &pr->conn[0]);
  char err0[1024];
  snprintf(err0, sizeof err0, "%s", loomGetLastError(NULL));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_msg(r0 == loomSuccess, "rank 0 connect: %d %s", r0, err0);
  pr->conn[1] = a1.conn;
  if (err1)
    snprintf(err1, err1_len, "%s", a1.err);
  return a1.res;
}

static void pair_open(struct pair *pr, int nsocks) {
  memset(pr, 0, sizeof *pr);
  for (int i = 0; i < LOOM_SECRET_BYTES; i++)
    pr->secret[0][i] = pr->secret[1][i] = (uint8_t)(0x30 + 11 * i);
  set_env(nsocks);
  pair_init_rank(pr, 0);
  pair_init_rank(pr, 1);
  char err[1024];
  loomResult_t r1 = pair_connect(pr, 10000, err, sizeof err);
  ck_assert_msg(r1 == loomSuccess, "rank 1 connect: %d %s", r1, err);
  ck_assert_ptr_nonnull(pr->conn[0]);
  ck_assert_ptr_nonnull(pr->conn[1]);
}

static void pair_close(struct pair *pr) {
  for (int r = 0; r < 2; r++)
    if (pr->ctx[r] != NULL)
      tp->fini(pr->ctx[r]);
  pr->ctx[0] = pr->ctx[1] = NULL;
}

/* Progresses both ranks until every xfer is done, or one fails, or
 * timeout_ms passes.  On failure *failed_rank and *failed_peer say who; the
 * failing rank's error text is in this thread's last error. */
static loomResult_t run_until(struct pair *pr, struct loom_xfer **xs, int nx, int timeout_ms,
                              int *failed_rank, int *failed_peer) {
  uint64_t deadline = loom_deadline_ms(timeout_ms);
  for (;;) {
    int progressed = 0;
    for (int r = 0; r < 2; r++) {
      if (pr->ctx[r] == NULL)
        continue;
      int fp = -1;
      loomResult_t res = tp->progress(pr->ctx[r], &progressed, &fp);
      if (res != loomSuccess) {
        *failed_rank = r;
        *failed_peer = fp;
        return res;
      }
    }
    int all = 1;
    for (int i = 0; i < nx && all; i++)
      all = xs[i]->done;
    if (all)
      return loomSuccess;
    if (loom_ms_left(deadline) == 0)
      return loomTimeout;
    if (!progressed) {
      struct pollfd fds[64];
      int n = 0;
      for (int r = 0; r < 2; r++)
        if (pr->ctx[r] != NULL)
          n += tp->poll_fds(pr->ctx[r], fds + n, 32);
      poll(fds, (nfds_t)n, 5);
    }
  }
}

static void fill(uint8_t *buf, size_t len, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < len; i++) {
    if (i % 8 == 0) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    buf[i] = (uint8_t)(x >> (8 * (i % 8)));
  }
}

#define GUARD 64
struct msg {
  size_t len;
  uint8_t *sbuf, *rbuf, *want; /* rbuf has GUARD bytes of 0xEE after len */
  struct loom_xfer sx, rx;
};

static void msg_make(struct msg *m, size_t len, uint64_t seed) {
  m->len = len;
  m->sbuf = malloc(len + 1);
  m->want = malloc(len + 1);
  m->rbuf = malloc(len + GUARD);
  ck_assert(m->sbuf && m->want && m->rbuf);
  fill(m->sbuf, len, seed);
  memcpy(m->want, m->sbuf, len);
  memset(m->rbuf, 0xEE, len + GUARD);
  memset(&m->sx, 0, sizeof m->sx);
  memset(&m->rx, 0, sizeof m->rx);
  m->sx.buf = m->sbuf;
  m->sx.len = len;
  m->rx.buf = m->rbuf;
  m->rx.len = len;
}

static void msg_check(const struct msg *m, const char *what) {
  EXPECT(m->sx.done && m->rx.done, "%s (%zu bytes): not done", what, m->len);
  if (memcmp(m->rbuf, m->want, m->len) != 0) {
    size_t i = 0;
    while (m->rbuf[i] == m->want[i])
      i++;
    ck_abort_msg("%s (%zu bytes): first difference at byte %zu (got %#x, want %#x)", what,
                 m->len, i, m->rbuf[i], m->want[i]);
  }
  for (size_t i = 0; i < GUARD; i++)
    EXPECT(m->rbuf[m->len + i] == 0xEE, "%s (%zu bytes): wrote past the end (byte %zu)",
           what, m->len, m->len + i);
  EXPECT(memcmp(m->sbuf, m->want, m->len) == 0, "%s: send buffer modified", what);
}

static void msg_free(struct msg *m) {
  free(m->sbuf);
  free(m->rbuf);
  free(m->want);
}

static const size_t data_sizes[] = {0, 1, 1000, 1 << 20, (3 << 20) + 7};
#define NDATA (sizeof data_sizes / sizeof data_sizes[0])

/* Two rounds of every size in both directions on one connection: the
 * first posts sends first, the second posts the receives first and lets
 * them wait. */
static void data_test(int nsocks) {
  struct pair pr;
  pair_open(&pr, nsocks);
  for (int round = 0; round < 2; round++) {
    struct msg fwd[NDATA], bwd[NDATA]; /* 0 -> 1 and 1 -> 0 */
    struct loom_xfer *xs[4 * NDATA];
    int nx = 0;
    for (size_t i = 0; i < NDATA; i++) {
      msg_make(&fwd[i], data_sizes[i], 100 * round + 2 * i + 1);
      msg_make(&bwd[i], data_sizes[NDATA - 1 - i], 100 * round + 2 * i + 2);
    }
    for (size_t i = 0; i < NDATA; i++) {
      if (round == 0) {
        ck_assert_int_eq(tp->isend(pr.conn[0], &fwd[i].sx), loomSuccess);
        ck_assert_int_eq(tp->isend(pr.conn[1], &bwd[i].sx), loomSuccess);
        ck_assert_int_eq(tp->irecv(pr.conn[1], &fwd[i].rx), loomSuccess);
        ck_assert_int_eq(tp->irecv(pr.conn[0], &bwd[i].rx), loomSuccess);
      } else {
        ck_assert_int_eq(tp->irecv(pr.conn[1], &fwd[i].rx), loomSuccess);
        ck_assert_int_eq(tp->irecv(pr.conn[0], &bwd[i].rx), loomSuccess);
      }
      xs[nx++] = &fwd[i].sx;
      xs[nx++] = &fwd[i].rx;
      xs[nx++] = &bwd[i].sx;
      xs[nx++] = &bwd[i].rx;
    }
    int fr = -1, fp = -1;
    if (round == 1) {
      /* Nothing sent yet: progress moves nothing, receives stay pending and
       * poll_fds asks for POLLIN. */
      for (int k = 0; k < 3; k++)
        ck_assert_int_eq(run_until(&pr, xs, 1, 1, &fr, &fp), loomTimeout);
      for (size_t i = 0; i < NDATA; i++)
        ck_assert_int_eq(fwd[i].rx.done, 0);
      struct pollfd fds[32];
      int n = tp->poll_fds(pr.ctx[1], fds, 32);
      ck_assert_int_ge(n, 1);
      ck_assert_int_le(n, nsocks);
      for (int k = 0; k < n; k++)
        ck_assert(fds[k].events & POLLIN);
      for (size_t i = 0; i < NDATA; i++) {
        ck_assert_int_eq(tp->isend(pr.conn[0], &fwd[i].sx), loomSuccess);
        ck_assert_int_eq(tp->isend(pr.conn[1], &bwd[i].sx), loomSuccess);
      }
    }
    loomResult_t res = run_until(&pr, xs, nx, 10000, &fr, &fp);
    ck_assert_msg(res == loomSuccess, "nsocks %d round %d: %d (rank %d, peer %d): %s",
                  nsocks, round, res, fr, fp, loomGetLastError(NULL));
    for (size_t i = 0; i < NDATA; i++) {
      char what[64];
      snprintf(what, sizeof what, "nsocks %d round %d 0->1 #%zu", nsocks, round, i);
      msg_check(&fwd[i], what);
      snprintf(what, sizeof what, "nsocks %d round %d 1->0 #%zu", nsocks, round, i);
      msg_check(&bwd[i], what);
      msg_free(&fwd[i]);
      msg_free(&bwd[i]);
    }
    /* All queues drained: nothing to wait for. */
    struct pollfd fds[32];
    ck_assert_int_eq(tp->poll_fds(pr.ctx[0], fds, 32), 0);
    ck_assert_int_eq(tp->poll_fds(pr.ctx[1], fds, 32), 0);
  }
  pair_close(&pr);
}

START_TEST(data_1_socket) { data_test(1); }
END_TEST

START_TEST(data_2_sockets) { data_test(2); }
END_TEST

START_TEST(data_3_sockets) { data_test(3); }
END_TEST

/* Hundreds of small messages queued at once on one side (its part queues
 * grow while their heads are not at 0, earlier messages having moved them)
 * while the other side posts its matching calls a few at a time, so that
 * the two sides' queues are laid out differently; then checked in order. */
static void small_messages(int nsocks) {
  struct pair pr;
  pair_open(&pr, nsocks);
  enum { N1 = 40, N2 = 180, BATCH = 30 };
  static struct msg a[N1 + N2], b[N1 + N2]; /* a: 0 -> 1, b: 1 -> 0 */
  static struct loom_xfer *xs[4 * (N1 + N2)];
  int nx = 0, fr, fp;
  loomResult_t res;
  for (int i = 0; i < N1 + N2; i++) {
    msg_make(&a[i], (size_t)(i * 7) % 301, 1000 + i);
    msg_make(&b[i], (size_t)(i * 13) % 257, 5000 + i);
  }
  /* Phase 1: N1 each way, drained. */
  for (int i = 0; i < N1; i++) {
    ck_assert_int_eq(tp->isend(pr.conn[0], &a[i].sx), loomSuccess);
    ck_assert_int_eq(tp->irecv(pr.conn[1], &a[i].rx), loomSuccess);
    ck_assert_int_eq(tp->isend(pr.conn[1], &b[i].sx), loomSuccess);
    ck_assert_int_eq(tp->irecv(pr.conn[0], &b[i].rx), loomSuccess);
    xs[nx++] = &a[i].sx;
    xs[nx++] = &a[i].rx;
    xs[nx++] = &b[i].sx;
    xs[nx++] = &b[i].rx;
  }
  res = run_until(&pr, xs, nx, 10000, &fr, &fp);
  ck_assert_msg(res == loomSuccess, "%d: %s", res, loomGetLastError(NULL));
  /* Phase 2: rank 0 posts all its sends and receives at once... */
  for (int i = N1; i < N1 + N2; i++) {
    ck_assert_int_eq(tp->isend(pr.conn[0], &a[i].sx), loomSuccess);
    ck_assert_int_eq(tp->irecv(pr.conn[0], &b[i].rx), loomSuccess);
    xs[nx++] = &a[i].sx;
    xs[nx++] = &b[i].rx;
  }
  /* ...rank 1 a batch at a time, each batch finished before the next. */
  for (int i0 = N1; i0 < N1 + N2; i0 += BATCH) {
    struct loom_xfer *batch[2 * BATCH];
    int nb = 0;
    for (int i = i0; i < i0 + BATCH && i < N1 + N2; i++) {
      ck_assert_int_eq(tp->irecv(pr.conn[1], &a[i].rx), loomSuccess);
      ck_assert_int_eq(tp->isend(pr.conn[1], &b[i].sx), loomSuccess);
      xs[nx++] = batch[nb++] = &a[i].rx;
      xs[nx++] = batch[nb++] = &b[i].sx;
    }
    res = run_until(&pr, batch, nb, 10000, &fr, &fp);
    ck_assert_msg(res == loomSuccess, "batch at %d: %d (rank %d, peer %d): %s", i0, res, fr,
                  fp, loomGetLastError(NULL));
  }
  res = run_until(&pr, xs, nx, 10000, &fr, &fp);
  ck_assert_msg(res == loomSuccess, "%d (rank %d, peer %d): %s", res, fr, fp,
                loomGetLastError(NULL));
  for (int i = 0; i < N1 + N2; i++) {
    char what[32];
    snprintf(what, sizeof what, "0->1 message %d", i);
    msg_check(&a[i], what);
    snprintf(what, sizeof what, "1->0 message %d", i);
    msg_check(&b[i], what);
    msg_free(&a[i]);
    msg_free(&b[i]);
  }
  pair_close(&pr);
}

START_TEST(many_small_messages_1_socket) { small_messages(1); }
END_TEST

START_TEST(many_small_messages_2_sockets) { small_messages(2); }
END_TEST

/* ---- failures -------------------------------------------------------------------- */

static void mismatch_test(int nsocks, size_t sent, size_t posted) {
  struct pair pr;
  pair_open(&pr, nsocks);
  uint8_t *sbuf = calloc(1, sent + 1), *rbuf = calloc(1, posted + 1);
  struct loom_xfer sx = {.buf = sbuf, .len = sent}, rx = {.buf = rbuf, .len = posted};
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx), loomSuccess);
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  struct loom_xfer *xs[] = {&sx, &rx};
  int fr = -1, fp = -1;
  loom_clear_last_error();
  loomResult_t res = run_until(&pr, xs, 2, 10000, &fr, &fp);
  ck_assert_msg(res == loomInvalidUsage, "sent %zu, posted %zu: result %d (%s)", sent, posted,
                res, loomGetLastError(NULL));
  ck_assert_int_eq(fr, 1);
  ck_assert_int_eq(fp, 0);
  ck_assert_int_eq(rx.done, 0);
  const char *err = loomGetLastError(NULL);
  char a[32], b[32];
  snprintf(a, sizeof a, "%zu", sent);
  snprintf(b, sizeof b, "%zu", posted);
  ck_assert_msg(strstr(err, a) != NULL && strstr(err, b) != NULL,
                "error \"%s\" does not name both sizes %s and %s", err, a, b);
  /* The failure sticks to the connection. */
  int progressed = 0, fp2 = -1;
  ck_assert_int_eq(tp->progress(pr.ctx[1], &progressed, &fp2), loomInvalidUsage);
  ck_assert_int_eq(fp2, 0);
  struct loom_xfer rx2 = {.buf = rbuf, .len = 1};
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx2), loomInvalidUsage);
  pair_close(&pr);
  free(sbuf);
  free(rbuf);
}

/* Same length, another call's fingerprint: the receive fails and keeps the
 * sender's fingerprint for the engine's message. */
static void fingerprint_test(int nsocks, size_t len) {
  struct pair pr;
  pair_open(&pr, nsocks);
  uint8_t *sbuf = calloc(1, len), *rbuf = calloc(1, len);
  struct loom_xfer sx = {.buf = sbuf, .len = len, .fp = {0x1122334455667788ull, 42}};
  struct loom_xfer rx = {.buf = rbuf, .len = len, .fp = {0x1122334455667788ull, 43}};
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx), loomSuccess);
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  struct loom_xfer *xs[] = {&sx, &rx};
  int fr = -1, fp = -1;
  loomResult_t res = run_until(&pr, xs, 2, 10000, &fr, &fp);
  ck_assert_msg(res == loomInvalidUsage, "len %zu: result %d (%s)", len, res,
                loomGetLastError(NULL));
  ck_assert_int_eq(fr, 1);
  ck_assert_int_eq(fp, 0);
  ck_assert_int_eq(rx.done, 0);
  ck_assert_int_eq(rx.fp_mismatch, 1);
  ck_assert(rx.peer_fp[0] == 0x1122334455667788ull && rx.peer_fp[1] == 42);
  pair_close(&pr);
  free(sbuf);
  free(rbuf);
}

START_TEST(fingerprint_small) { fingerprint_test(2, 64); }
END_TEST

START_TEST(fingerprint_striped) { fingerprint_test(2, 1 << 20); }
END_TEST

START_TEST(mismatch_shorter_sent) { mismatch_test(2, 100, 200); }
END_TEST

START_TEST(mismatch_longer_sent) { mismatch_test(2, 100, 50); }
END_TEST

START_TEST(mismatch_one_socket) { mismatch_test(1, 100, 200); }
END_TEST

START_TEST(mismatch_striped) { mismatch_test(2, 1 << 20, (1 << 20) + 4096); }
END_TEST

/* Rank 0 goes away while rank 1 waits for a message from it. */
START_TEST(peer_close_during_recv) {
  struct pair pr;
  pair_open(&pr, 2);
  uint8_t buf[100];
  struct loom_xfer rx = {.buf = buf, .len = sizeof buf};
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  int fr = -1, fp = -1;
  struct loom_xfer *xs[] = {&rx};
  ck_assert_int_eq(run_until(&pr, xs, 1, 20, &fr, &fp), loomTimeout); /* just waiting */
  tp->fini(pr.ctx[0]);
  pr.ctx[0] = NULL;
  uint64_t t0 = loom_now_ns();
  loom_clear_last_error();
  loomResult_t res = run_until(&pr, xs, 1, 5000, &fr, &fp);
  ck_assert_msg(res == loomRemoteError, "result %d (%s)", res, loomGetLastError(NULL));
  ck_assert_int_eq(fr, 1);
  ck_assert_int_eq(fp, 0);
  ck_assert_int_eq(rx.done, 0);
  ck_assert_msg(loom_now_ns() - t0 < 3000000000ull, "took %.1f s",
                (double)(loom_now_ns() - t0) / 1e9);
  ck_assert_str_ne(loomGetLastError(NULL), "");
  pair_close(&pr);
}
END_TEST

/* Rank 0 goes away while rank 1 sends it more than the socket buffers hold. */
START_TEST(peer_close_during_send) {
  struct pair pr;
  pair_open(&pr, 2);
  tp->fini(pr.ctx[0]);
  pr.ctx[0] = NULL;
  size_t len = 64u << 20;
  uint8_t *buf = calloc(1, len);
  ck_assert_ptr_nonnull(buf);
  struct loom_xfer sx = {.buf = buf, .len = len};
  ck_assert_int_eq(tp->isend(pr.conn[1], &sx), loomSuccess);
  int fr = -1, fp = -1;
  struct loom_xfer *xs[] = {&sx};
  loomResult_t res = run_until(&pr, xs, 1, 5000, &fr, &fp);
  ck_assert_msg(res == loomRemoteError, "result %d (%s)", res, loomGetLastError(NULL));
  ck_assert_int_eq(fr, 1);
  ck_assert_int_eq(fp, 0);
  ck_assert_int_eq(sx.done, 0);
  pair_close(&pr);
  free(buf);
}
END_TEST

/* Different LOOM_SOCKET_NSOCKS on the two ranks is named at connect. */
START_TEST(nsocks_mismatch) {
  struct pair pr;
  memset(&pr, 0, sizeof pr);
  set_env(1);
  pair_init_rank(&pr, 0);
  set_env(2);
  pair_init_rank(&pr, 1);
  char err[1024];
  loomResult_t r1 = pair_connect(&pr, 5000, err, sizeof err);
  ck_assert_msg(r1 == loomInvalidUsage, "rank 1 connect: %d %s", r1, err);
  ck_assert_msg(strstr(err, "LOOM_SOCKET_NSOCKS") != NULL, "error \"%s\"", err);
  pair_close(&pr);
}
END_TEST

/* A connection with the wrong secret is dropped: the accepting rank keeps
 * waiting for the right one until its deadline. */
START_TEST(wrong_secret_is_dropped) {
  struct pair pr;
  memset(&pr, 0, sizeof pr);
  memset(pr.secret[0], 1, LOOM_SECRET_BYTES);
  memset(pr.secret[1], 1, LOOM_SECRET_BYTES);
  pr.secret[1][LOOM_SECRET_BYTES - 1] = 2;
  set_env(1);
  pair_init_rank(&pr, 0);
  pair_init_rank(&pr, 1);
  /* Rank 0 connects and must prove the secret; rank 1 refuses the proof,
   * so rank 0 fails at once and rank 1 waits for a rank 0 that proves. */
  uint64_t t0 = loom_now_ns();
  struct connect_arg a1 = {pr.ctx[1], 0, pr.addrs, loom_deadline_ms(500), NULL,
                           loomInternalError, ""};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, connect_thread, &a1), 0);
  int peer1 = 1;
  void *conn0 = NULL;
  loomResult_t r0 = tp->connect(pr.ctx[0], 1, &peer1, pr.addrs, loom_deadline_ms(500), &conn0);
  char err0[1024];
  snprintf(err0, sizeof err0, "%s", loomGetLastError(NULL));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_msg(r0 == loomRemoteError, "rank 0 connect: %d %s", r0, err0);
  ck_assert_msg(a1.res == loomTimeout, "rank 1 connect: %d %s", a1.res, a1.err);
  ck_assert_msg(loom_now_ns() - t0 >= 400000000ull, "gave up after %.3f s",
                (double)(loom_now_ns() - t0) / 1e9);
  ck_assert_ptr_nonnull(strstr(a1.err, "rank 0"));
  pair_close(&pr);
}
END_TEST

/* ---- connections on first use (tcp_lazy.c) ------------------------------------- */

/* A pair initialised and "connected" with LOOM_CONNECT=lazy: nothing open. */
static void lazy_pair(struct pair *pr, int nsocks0, int nsocks1, int same_secret) {
  memset(pr, 0, sizeof *pr);
  for (int i = 0; i < LOOM_SECRET_BYTES; i++)
    pr->secret[0][i] = pr->secret[1][i] = (uint8_t)(0x30 + 11 * i);
  if (!same_secret)
    pr->secret[0][0] ^= 1;
  connect_mode = "lazy";
  set_env(nsocks0);
  pair_init_rank(pr, 0);
  set_env(nsocks1);
  pair_init_rank(pr, 1);
  connect_mode = "eager";
  char err[1024];
  loomResult_t r1 = pair_connect(pr, 1000, err, sizeof err);
  ck_assert_msg(r1 == loomSuccess, "rank 1 lazy connect: %d %s", r1, err);
}

static int fds_polled(struct pair *pr, int r) {
  struct pollfd fds[32];
  return tp->poll_fds(pr->ctx[r], fds, 32);
}

/* Init opens nothing; the higher rank's send waits until the lower rank
 * posts too (the lower one connects); then both directions flow. */
START_TEST(lazy_connects_on_first_use) {
  struct pair pr;
  lazy_pair(&pr, 2, 2, 1);
  ck_assert_int_eq(fds_polled(&pr, 0), 0);
  ck_assert_int_eq(fds_polled(&pr, 1), 0);
  uint8_t out[100], in[100];
  fill(out, sizeof out, 7);
  memset(in, 0, sizeof in);
  struct loom_xfer sx = {.buf = out, .len = sizeof out, .fp = {1, 2}};
  struct loom_xfer rx = {.buf = in, .len = sizeof in, .fp = {1, 2}};
  ck_assert_int_eq(tp->isend(pr.conn[1], &sx), loomSuccess);
  int fr = -1, fp = -1;
  struct loom_xfer *xs[] = {&sx, &rx};
  ck_assert_int_eq(run_until(&pr, xs, 1, 50, &fr, &fp), loomTimeout);
  ck_assert_msg(fds_polled(&pr, 1) == 1, "rank 1 waits on its listener (%d fds)",
                fds_polled(&pr, 1));
  ck_assert_int_eq(tp->irecv(pr.conn[0], &rx), loomSuccess);
  ck_assert_int_eq(run_until(&pr, xs, 2, 5000, &fr, &fp), loomSuccess);
  ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
  /* and back, over the same sockets */
  struct loom_xfer sx2 = {.buf = out, .len = sizeof out, .fp = {1, 3}};
  struct loom_xfer rx2 = {.buf = in, .len = sizeof in, .fp = {1, 3}};
  memset(in, 0, sizeof in);
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx2), loomSuccess);
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx2), loomSuccess);
  struct loom_xfer *xs2[] = {&sx2, &rx2};
  ck_assert_int_eq(run_until(&pr, xs2, 2, 5000, &fr, &fp), loomSuccess);
  ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
  pair_close(&pr);
}
END_TEST

/* Rank 1 waits for a message from rank 0, rank 0 sends its first one;
 * returns the failure that ends it, with the failing rank, its peer and
 * the error text. */
static loomResult_t first_message_fails(struct pair *pr, int *fr, int *fp, const char **err) {
  uint8_t b[16] = {0}, in[16];
  struct loom_xfer sx = {.buf = b, .len = sizeof b, .fp = {1, 1}};
  struct loom_xfer rx = {.buf = in, .len = sizeof in, .fp = {1, 1}};
  ck_assert_int_eq(tp->irecv(pr->conn[1], &rx), loomSuccess);
  ck_assert_int_eq(tp->isend(pr->conn[0], &sx), loomSuccess);
  struct loom_xfer *xs[] = {&sx};
  loom_clear_last_error();
  loomResult_t res = run_until(pr, xs, 1, 5000, fr, fp);
  *err = loomGetLastError(NULL);
  return res;
}

/* The lower rank's first message with the wrong secret: the higher rank
 * drops the sockets and carries on; the lower one fails naming it. */
START_TEST(lazy_wrong_secret) {
  struct pair pr;
  lazy_pair(&pr, 2, 2, 0);
  int fr = -1, fp = -1;
  const char *err;
  loomResult_t res = first_message_fails(&pr, &fr, &fp, &err);
  ck_assert_msg(res == loomRemoteError && fr == 0 && fp == 1, "result %d on rank %d: %s", res,
                fr, err);
  ck_assert_msg(strstr(err, "rank 1") && strstr(err, "another job"), "error \"%s\"", err);
  pair_close(&pr);
}
END_TEST

/* Different LOOM_SOCKET_NSOCKS is found by the accepting rank at the first
 * message. */
START_TEST(lazy_nsocks_mismatch) {
  struct pair pr;
  lazy_pair(&pr, 1, 2, 1);
  int fr = -1, fp = -1;
  const char *err;
  loomResult_t res = first_message_fails(&pr, &fr, &fp, &err);
  ck_assert_msg(res == loomInvalidUsage && fr == 1 && fp == 0, "result %d on rank %d: %s", res,
                fr, err);
  ck_assert_msg(strstr(err, "LOOM_SOCKET_NSOCKS") != NULL, "error \"%s\"", err);
  pair_close(&pr);
}
END_TEST

/* A stranger connects to rank 1's port and says nothing: rank 0's own
 * connection must still be accepted at once, not after the stranger's 5 s. */
START_TEST(lazy_silent_stranger) {
  struct pair pr;
  lazy_pair(&pr, 2, 2, 1);
  union loom_sockaddr a1;
  ck_assert_int_eq(loom_sockaddr_decode(pr.addrs + 20, &a1), 0);
  int stranger = -1;
  ck_assert_int_eq(loom_socket_connect_quiet(&a1, loom_deadline_ms(2000), 0, &stranger), 0);
  uint8_t b[16] = {0}, in[16];
  struct loom_xfer sx = {.buf = b, .len = sizeof b, .fp = {1, 1}};
  struct loom_xfer rx = {.buf = in, .len = sizeof in, .fp = {1, 1}};
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx), loomSuccess);
  int fr = -1, fp = -1;
  struct loom_xfer *xs[] = {&sx, &rx};
  uint64_t t0 = loom_now_ns();
  ck_assert_int_eq(run_until(&pr, xs, 2, 4000, &fr, &fp), loomSuccess);
  ck_assert_msg(loom_now_ns() - t0 < 1000000000ull, "took %.2f s",
                (double)(loom_now_ns() - t0) / 1e9);
  close(stranger);
  pair_close(&pr);
}
END_TEST

static Suite *tcp_suite(void) {
  Suite *s = suite_create("tcp");
  TCase *tc = tcase_create("split");
  tcase_add_test(tc, split_small_is_one_part);
  tcase_add_test(tc, split_one_socket_is_one_part);
  tcase_add_test(tc, split_large_is_striped);
  suite_add_tcase(s, tc);

  tc = tcase_create("loopback");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, data_1_socket);
  tcase_add_test(tc, data_2_sockets);
  tcase_add_test(tc, data_3_sockets);
  tcase_add_test(tc, many_small_messages_1_socket);
  tcase_add_test(tc, many_small_messages_2_sockets);
  tcase_add_test(tc, mismatch_shorter_sent);
  tcase_add_test(tc, fingerprint_small);
  tcase_add_test(tc, fingerprint_striped);
  tcase_add_test(tc, mismatch_longer_sent);
  tcase_add_test(tc, mismatch_one_socket);
  tcase_add_test(tc, mismatch_striped);
  tcase_add_test(tc, peer_close_during_recv);
  tcase_add_test(tc, peer_close_during_send);
  tcase_add_test(tc, lazy_connects_on_first_use);
  tcase_add_test(tc, lazy_wrong_secret);
  tcase_add_test(tc, lazy_nsocks_mismatch);
  tcase_add_test(tc, lazy_silent_stranger);
  tcase_add_test(tc, nsocks_mismatch);
  tcase_add_test(tc, wrong_secret_is_dropped);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(tcp_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
