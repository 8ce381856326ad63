/*
 * probe.c — the conformance check of struct loom_transport's optional
 * probe (what loomRecvAny stands on): it sees the next message before a
 * receive is posted, consuming nothing; a receive then gets it whole; a
 * waiter that found nothing is woken through poll_fds when it comes.
 */
#include "conformance.h"
#include "loom_net.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROBE_WAIT_MS 10000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Progresses both ranks until rank 1's probe answers 1 (or fails, or the
 * wait runs out): its answer. */
static int probe_until(struct pair *p, uint64_t fp[2], uint64_t *len) {
  const struct loom_transport *tp = p->tp;
  double end = now_ms() + PROBE_WAIT_MS;
  for (;;) {
    int moved = 0, failed = -1;
    for (int r = 0; r < 2; r++)
      if (tp->progress(p->rk[r].ctx, &moved, &failed) != loomSuccess)
        return -1;
    int got = tp->probe(p->rk[1].conn, fp, len);
    if (got != 0 || now_ms() > end)
      return got;
  }
}

/* Rank 0 sends two messages of (len0, fp {7, 8}) and (len1, fp {7, 9});
 * rank 1 probes each before receiving it. */
static void probe_pair(struct conformance *c, size_t len0, size_t len1) {
  struct pair p = {0};
  if (pair_open(&p, c->tp, pair_secret) != 0) {
    conformance_check(c, 0, "probe: init and connect");
    return;
  }
  size_t lens[2] = {len0, len1};
  uint8_t *sb[2], *rb[2];
  struct loom_xfer s[2], r[2];
  for (int i = 0; i < 2; i++) {
    sb[i] = malloc(lens[i] + 1);
    rb[i] = calloc(1, lens[i] + 1);
    for (size_t j = 0; j < lens[i]; j++)
      sb[i][j] = (uint8_t)(j * 13 + i * 5 + 1);
    s[i] = (struct loom_xfer){.buf = sb[i], .len = lens[i], .fp = {7, 8 + (uint64_t)i}};
    r[i] = (struct loom_xfer){.buf = rb[i], .len = lens[i], .fp = {7, 8 + (uint64_t)i}};
  }
  uint64_t fp[2], len;
  int none = c->tp->probe(p.rk[1].conn, fp, &len) == 0;
  int ok = none && c->tp->isend(p.rk[0].conn, &s[0]) == loomSuccess &&
           c->tp->isend(p.rk[0].conn, &s[1]) == loomSuccess;
  for (int i = 0; i < 2 && ok; i++) {
    int got = probe_until(&p, fp, &len);
    int again = c->tp->probe(p.rk[1].conn, fp, &len); /* consumed nothing */
    ok = got == 1 && again == 1 && fp[0] == 7 && fp[1] == 8 + (uint64_t)i && len == lens[i];
    struct loom_xfer *x[] = {&r[i]};
    loomResult_t res;
    int who;
    ok = ok && c->tp->irecv(p.rk[1].conn, &r[i]) == loomSuccess &&
         pair_drive(&p, x, 1, PROBE_WAIT_MS, &res, &who) && memcmp(sb[i], rb[i], lens[i]) == 0;
  }
  struct loom_xfer *x[] = {&s[0], &s[1]};
  loomResult_t res;
  int who;
  ok = ok && pair_drive(&p, x, 2, PROBE_WAIT_MS, &res, &who) &&
       c->tp->probe(p.rk[1].conn, fp, &len) == 0;
  conformance_check(c, ok, "probe: nothing before the send; then messages of %zu and %zu bytes "
                    "seen with their fingerprint and length, each received whole after it; "
                    "nothing after", len0, len1);
  for (int i = 0; i < 2; i++) {
    free(sb[i]);
    free(rb[i]);
  }
  pair_close(&p);
  free(p.addrs);
}

/* A probe that found nothing, then poll on poll_fds: the message's
 * arrival must wake it (transports that need polling are exempt). */
static void probe_wakes(struct conformance *c) {
  if (c->tp->busy_wait) {
    conformance_skip("probe wakes poll", "the transport is polled (busy_wait): no fd to wake");
    return;
  }
  struct pair p = {0};
  if (pair_open(&p, c->tp, pair_secret) != 0)
    return;
  uint8_t a[64] = {3}, b[64];
  struct loom_xfer s = {.buf = a, .len = sizeof a, .fp = {1, 2}};
  struct loom_xfer r = {.buf = b, .len = sizeof b, .fp = {1, 2}};
  uint64_t fp[2], len;
  int moved = 0, failed = -1;
  c->tp->progress(p.rk[1].ctx, &moved, &failed);
  int none = c->tp->probe(p.rk[1].conn, fp, &len) == 0;
  struct pollfd fds[64];
  int n = c->tp->poll_fds(p.rk[1].ctx, fds, 64);
  struct loom_xfer *sx[] = {&s};
  loomResult_t res;
  int who;
  int sent = c->tp->isend(p.rk[0].conn, &s) == loomSuccess;
  /* only rank 0 moves: rank 1 must be woken, not find it by progress */
  double end = now_ms() + PROBE_WAIT_MS;
  while (sent && !s.done && now_ms() < end)
    c->tp->progress(p.rk[0].ctx, &moved, &failed);
  int woke = n > 0 && poll(fds, (nfds_t)n, PROBE_WAIT_MS) > 0;
  c->tp->irecv(p.rk[1].conn, &r);
  struct loom_xfer *rx[] = {&r};
  int ok = none && sent && woke && pair_drive(&p, rx, 1, PROBE_WAIT_MS, &res, &who) &&
           pair_drive(&p, sx, 1, PROBE_WAIT_MS, &res, &who);
  conformance_check(c, ok, "probe: a waiter that found nothing is woken by poll_fds when the "
                    "message arrives (%d fd(s))", n);
  pair_close(&p);
  free(p.addrs);
}

void check_probe(struct conformance *c) {
  if (c->tp->probe == NULL) {
    conformance_skip("probe", "the transport has no probe: loomRecvAny cannot take messages "
                              "from peers it carries");
    return;
  }
  probe_pair(c, 100, 1);
  probe_pair(c, (1u << 20) + 5, 40000); /* striped, or many cells / a rendezvous */
  probe_wakes(c);
}
