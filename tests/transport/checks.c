/*
 * checks.c — the transport contract (transport.h), checked through the
 * ops table on a pair of ranks: messages of every size from 0 B to past
 * 8 MiB both ways, many outstanding, posted receive-first and send-first,
 * matched in posting order, twice over the same buffers; a message of
 * another call or of another length refused on the receiver with the
 * common text (transports/common/msg_check.c); a rank of another
 * communicator refused; a peer that went away reported, naming it; a peer
 * that never listens given up on at the deadline.
 */
#include "conformance.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(seed * 29 + i * 13 + (i >> 12));
}

static const size_t sizes[] = {0, 1, 4096, 32736, 32737, 65536, 1 << 20, (8 << 20) + 3};
enum { NSIZES = sizeof sizes / sizeof sizes[0], REPEAT = 12, NMSG = NSIZES * REPEAT };

struct traffic {
  struct loom_xfer sx[2][NMSG], rx[2][NMSG];
  uint8_t *sb[2][NMSG], *rb[2][NMSG];
};

/* Posts every message of one round: direction d is rank d to rank 1-d,
 * its receives posted before its sends for d = 0 and after for d = 1; the
 * fingerprint numbers the message, so one matched out of order fails. */
static int post_round(struct pair *p, struct traffic *t, int round, struct loom_xfer **all) {
  int n = 0;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < NMSG; i++) {
      size_t len = sizes[i % NSIZES];
      fill(t->sb[d][i], len, (unsigned)(round * 1000 + d * 100 + i));
      memset(t->rb[d][i], 0xee, len + 1);
      t->sx[d][i] = (struct loom_xfer){.buf = t->sb[d][i], .len = len, .fp = {9, (uint64_t)i}};
      t->rx[d][i] = (struct loom_xfer){.buf = t->rb[d][i], .len = len, .fp = {9, (uint64_t)i}};
      if (d == 0 && p->tp->irecv(p->rk[1 - d].conn, &t->rx[d][i]) != loomSuccess)
        return -1;
      if (p->tp->isend(p->rk[d].conn, &t->sx[d][i]) != loomSuccess)
        return -1;
      if (d == 1 && p->tp->irecv(p->rk[1 - d].conn, &t->rx[d][i]) != loomSuccess)
        return -1;
      all[n++] = &t->sx[d][i];
      all[n++] = &t->rx[d][i];
    }
  return n;
}

static int bytes_wrong(const struct traffic *t) {
  int bad = 0;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < NMSG; i++) {
      size_t len = sizes[i % NSIZES];
      bad += memcmp(t->sb[d][i], t->rb[d][i], len) != 0 || t->rb[d][i][len] != 0xee;
    }
  return bad;
}

void check_exchange(struct conformance *c) {
  struct pair p = {0};
  static struct traffic t;
  static struct loom_xfer *all[4 * NMSG];
  conformance_check(c, pair_open(&p, c->tp, pair_secret) == 0, "init and connect, both ranks");
  if (p.rk[0].ctx == NULL)
    return;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < NMSG; i++) {
      t.sb[d][i] = malloc(sizes[i % NSIZES] + 1);
      t.rb[d][i] = malloc(sizes[i % NSIZES] + 1);
    }
  for (int round = 0; round < 2; round++) {
    int n = post_round(&p, &t, round, all);
    loomResult_t res = loomSuccess;
    int who = -1;
    int ok = n > 0 && pair_drive(&p, all, n, 60000, &res, &who);
    conformance_check(c, ok, "round %d: %d messages of 0 B .. 8 MiB, all outstanding at once, "
                      "both ways%s%s", round, 2 * NMSG, ok ? "" : ": ",
                      ok ? "" : who >= 0 ? p.rk[who].err : n < 0 ? "post failed" : "timeout");
    if (!ok)
      break;
    conformance_check(c, bytes_wrong(&t) == 0, "round %d: every byte arrived in order, none "
                      "past the end", round);
  }
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < NMSG; i++) {
      free(t.sb[d][i]);
      free(t.rb[d][i]);
    }
  pair_close(&p);
  free(p.addrs);
}

/* Rank 0 sends (send_fp, send_len), rank 1 expects (recv_fp, 100 bytes):
 * rank 1's receive must fail with loomInvalidUsage; its text in *err. */
static loomResult_t refused(struct conformance *c, const uint64_t send_fp[2], size_t send_len,
                            const uint64_t recv_fp[2], struct loom_xfer *r, char *err,
                            size_t errlen) {
  struct pair p = {0};
  static uint8_t a[100] = {1}, b[100];
  if (pair_open(&p, c->tp, pair_secret) != 0)
    return loomSystemError;
  struct loom_xfer s = {.buf = a, .len = send_len, .fp = {send_fp[0], send_fp[1]}};
  *r = (struct loom_xfer){.buf = b, .len = sizeof b, .fp = {recv_fp[0], recv_fp[1]}};
  c->tp->isend(p.rk[0].conn, &s);
  c->tp->irecv(p.rk[1].conn, r);
  struct loom_xfer *x[] = {r};
  loomResult_t res;
  int who;
  pair_drive(&p, x, 1, 20000, &res, &who);
  snprintf(err, errlen, "%s", who == 1 ? p.rk[1].err : "(rank 1 did not fail)");
  pair_close(&p);
  free(p.addrs);
  return who == 1 ? res : loomSuccess;
}

void check_fingerprint_mismatch(struct conformance *c) {
  struct loom_xfer r;
  char err[512];
  loomResult_t res = refused(c, (uint64_t[]){5, 6}, 100, (uint64_t[]){5, 7}, &r, err, sizeof err);
  conformance_check(c, res == loomInvalidUsage && r.fp_mismatch && r.peer_fp[0] == 5 &&
                           r.peer_fp[1] == 6 && strstr(err, "belongs to another call") != NULL,
                    "a message of another call is refused, naming the sender's fingerprint: %s",
                    err);
}

void check_length_mismatch(struct conformance *c) {
  struct loom_xfer r;
  char err[512];
  loomResult_t res = refused(c, (uint64_t[]){5, 6}, 60, (uint64_t[]){5, 6}, &r, err, sizeof err);
  conformance_check(c, res == loomInvalidUsage && !r.fp_mismatch &&
                           strstr(err, "sent a message of 60 bytes where 100 were expected"),
                    "a message of another length is refused, naming both lengths: %s", err);
}

/* For a transport that connects on first use (tcp with LOOM_CONNECT=lazy):
 * sends one message from ctx over conn while the other rank (NULL: gone)
 * waits for one from its rank 0 on other_conn, both progressing for at
 * most 3 s; returns the sender's failure with its text in err (loomSuccess
 * if the message went through). */
static loomResult_t first_message(const struct loom_transport *tp, void *ctx, void *conn,
                                  void *other_ctx, void *other_conn, char *err, size_t len) {
  uint8_t b[16] = {0}, in[16];
  struct loom_xfer x = {.buf = b, .len = sizeof b, .fp = {3, 3}};
  struct loom_xfer rx = {.buf = in, .len = sizeof in, .fp = {3, 3}};
  struct pair mix = {.tp = tp};
  mix.rk[0] = (struct pair_rank){.rank = 0, .ctx = ctx};
  mix.rk[1] = (struct pair_rank){.rank = 1, .ctx = other_ctx};
  if (other_conn != NULL)
    tp->irecv(other_conn, &rx);
  loomResult_t res = tp->isend(conn, &x);
  int who = -1;
  struct loom_xfer *xs[] = {&x};
  if (res == loomSuccess)
    pair_drive(&mix, xs, 1, 3000, &res, &who);
  snprintf(err, len, "%s", who >= 0 ? mix.rk[who].err : "the message was not refused");
  return who == 0 ? res : loomSuccess;
}

static int says_foreign(const char *text) {
  return strstr(text, "another communicator") != NULL || strstr(text, "another job") != NULL;
}

void check_other_secret(struct conformance *c) {
  if (c->no_auth != NULL) {
    conformance_skip("a rank of another communicator is refused", c->no_auth);
    return;
  }
  static const uint8_t other[LOOM_NET_SECRET_BYTES] = {8, 8, 8};
  struct pair p = {0}, rogue = {0};
  if (pair_init(&p, c->tp, pair_secret) != 0 || pair_init(&rogue, c->tp, other) != 0) {
    conformance_check(c, 0, "init for the rogue check");
    return;
  }
  /* The rogue's rank 0 knocks on the real rank 1 (its blob copied in)
   * while rank 1 waits for its own rank 0, which never comes. */
  memcpy(rogue.addrs + c->tp->addr_bytes, p.addrs + c->tp->addr_bytes, c->tp->addr_bytes);
  pthread_t th;
  pair_connect_start(&p, 1, 4000, &th);
  int peer = 1;
  void *conn = NULL;
  loom_clear_last_error();
  loomResult_t res = c->tp->connect(rogue.rk[0].ctx, 1, &peer, rogue.addrs,
                                    loom_deadline_ms(3000), &conn);
  char err[512];
  snprintf(err, sizeof err, "%s", loom_last_error());
  pthread_join(th, NULL);
  int deferred = res == loomSuccess; /* connected on first use: the first message is refused */
  if (deferred)
    res = first_message(c->tp, rogue.rk[0].ctx, conn, p.rk[1].ctx, p.rk[1].conn, err,
                        sizeof err);
  /* Either side may say why: the refusing rank, or the refused one. */
  const char *why = says_foreign(err) ? err : says_foreign(p.rk[1].err) ? p.rk[1].err : NULL;
  /* Connecting at once, the real rank 1 fails too (its rank 0 never came);
   * on first use it only drops the stranger. */
  conformance_check(c, res != loomSuccess && (deferred || p.rk[1].res != loomSuccess) &&
                           why != NULL,
                    "a rank of another communicator (another secret) is refused, saying why: %s",
                    why != NULL ? why : err);
  pair_close(&rogue);
  pair_close(&p);
  free(rogue.addrs);
  free(p.addrs);
}

void check_peer_gone(struct conformance *c) {
  if (c->no_peer_gone != NULL) {
    conformance_skip("a peer that went away is reported", c->no_peer_gone);
    return;
  }
  struct pair p = {0};
  if (pair_open(&p, c->tp, pair_secret) != 0) {
    conformance_check(c, 0, "init and connect for the peer-gone check");
    return;
  }
  uint8_t b[64];
  struct loom_xfer r = {.buf = b, .len = sizeof b, .fp = {1, 1}};
  c->tp->irecv(p.rk[0].conn, &r);
  c->tp->fini(p.rk[1].ctx);
  p.rk[1].ctx = NULL;
  struct loom_xfer *x[] = {&r};
  loomResult_t res;
  int who;
  uint64_t t0 = loom_now_ns();
  pair_drive(&p, x, 1, 15000, &res, &who);
  double s = (double)(loom_now_ns() - t0) / 1e9;
  conformance_check(c, res == loomRemoteError && who == 0 && strstr(p.rk[0].err, "rank 1") &&
                           s < 10,
                    "a peer that went away is reported in %.2f s, naming it: %s", s,
                    who == 0 ? p.rk[0].err : "(not reported)");
  pair_close(&p);
  free(p.addrs);
}

void check_unlistened(struct conformance *c) {
  if (c->no_deadline != NULL) {
    conformance_skip("a peer that never listens is given up on by the deadline",
                     c->no_deadline);
    return;
  }
  struct pair p = {0};
  if (pair_init(&p, c->tp, pair_secret) != 0) {
    conformance_check(c, 0, "init for the deadline check");
    return;
  }
  c->tp->fini(p.rk[1].ctx); /* rank 1 is gone, its listener too */
  p.rk[1].ctx = NULL;
  int peer = 1;
  void *conn = NULL;
  uint64_t t0 = loom_now_ns();
  loom_clear_last_error();
  loomResult_t res = c->tp->connect(p.rk[0].ctx, 1, &peer, p.addrs, loom_deadline_ms(2000),
                                    &conn);
  char err[512];
  snprintf(err, sizeof err, "%s", loom_last_error());
  if (res == loomSuccess) /* connected on first use: the first message fails */
    res = first_message(c->tp, p.rk[0].ctx, conn, NULL, NULL, err, sizeof err);
  double s = (double)(loom_now_ns() - t0) / 1e9;
  conformance_check(c, (res == loomTimeout || res == loomRemoteError) && s < 10 &&
                           strstr(err, "rank") && strstr(err, "1") != NULL,
                    "a peer that never listens is given up on after %.1f s (deadline 2 s), "
                    "naming it: %s", s, err);
  pair_close(&p);
  free(p.addrs);
}
