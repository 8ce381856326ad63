/*
 * ib_pair.c — the ibverbs transport end to end on a real RDMA device (or
 * Soft-RoCE), without the rest of Loom: two "ranks" of one communicator
 * live in this process, set up through init, an in-memory address
 * exchange and connect (one thread each: connect is collective), then
 * exchange messages both ways across the eager/rendezvous boundary and far
 * beyond the ring's slots, reuse buffers (registration cache), refuse a
 * message of another call (fingerprint), refuse a connection from another
 * communicator, see the peer go away, and give up on a rank that does not
 * listen at the deadline.  On a real device (test_ib.sh), or linked with
 * tests/unit/fake_rdma.c instead of the libraries (ib_pair_fake).
 * Prints one PASS/FAIL line per check; exit 0 when all pass, 77 when no
 * device is usable (the reason printed), 1 otherwise.  Every wait is
 * bounded.
 */
#include "config.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "transport.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LOOM_HAVE_VERBS

static const struct loom_transport *tp = &loom_transport_ib;
static int failures;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  failures += !ok;
}

struct rank {
  int rank;
  void *ctx, *conn;
  const uint8_t *addrs;
  loomResult_t res;
  char err[512];
};

static void *connect_main(void *arg) {
  struct rank *r = arg;
  int peer = 1 - r->rank;
  r->res = tp->connect(r->ctx, 1, &peer, r->addrs, loom_deadline_ms(30000), &r->conn);
  snprintf(r->err, sizeof r->err, "%s", loom_last_error());
  return NULL;
}

/* Progresses both ranks until every transfer is done (1), a rank fails
 * (0: its result and peer in *res / *who), or 30 s pass (0). */
static int drive(struct rank *rk, struct loom_xfer **x, int n, loomResult_t *res, int *who) {
  uint64_t deadline = loom_deadline_ms(30000);
  *res = loomSuccess;
  *who = -1;
  while (loom_now_ns() < deadline) {
    int all = 1;
    for (int i = 0; i < n; i++)
      all &= x[i]->done;
    if (all)
      return 1;
    int progressed = 0;
    for (int r = 0; r < 2; r++) {
      int failed_peer = -1;
      if (rk[r].ctx == NULL)
        continue;
      loomResult_t e = tp->progress(rk[r].ctx, &progressed, &failed_peer);
      if (e != loomSuccess) {
        *res = e;
        *who = r;
        snprintf(rk[r].err, sizeof rk[r].err, "%s", loom_last_error());
        return 0;
      }
    }
    if (!progressed) { /* sleep in the kernel as the engine does */
      struct pollfd fds[16];
      int nf = 0;
      for (int r = 0; r < 2; r++)
        if (rk[r].ctx != NULL)
          nf += tp->poll_fds(rk[r].ctx, fds + nf, 8);
      poll(fds, (nfds_t)nf, 100);
    }
  }
  return 0;
}

static void fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(seed * 29 + i * 13 + (i >> 12));
}

/* Messages of every size below both ways, all posted at once, twice (the
 * second round reuses the buffers). */
static void exchange(struct rank *rk) {
  static const size_t sizes[] = {0, 1, 4096, 32736, 32737, 65536, 1 << 20, (8 << 20) + 3};
  enum { NS = sizeof sizes / sizeof sizes[0], REPEAT = 12 };
  /* REPEAT copies of each size per direction: more messages than ring slots. */
  enum { N = NS * REPEAT };
  static struct loom_xfer sx[2][N], rx[2][N];
  static uint8_t *sb[2][N], *rb[2][N];
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < N; i++) {
      size_t len = sizes[i % NS];
      sb[d][i] = malloc(len + 1);
      rb[d][i] = malloc(len + 1);
    }
  for (int round = 0; round < 2; round++) {
    struct loom_xfer *all[4 * N];
    int n = 0;
    for (int d = 0; d < 2; d++)
      for (int i = 0; i < N; i++) {
        size_t len = sizes[i % NS];
        fill(sb[d][i], len, (unsigned)(round * 1000 + d * 100 + i));
        memset(rb[d][i], 0xee, len + 1);
        sx[d][i] = (struct loom_xfer){.buf = sb[d][i], .len = len, .fp = {9, (uint64_t)i}};
        rx[d][i] = (struct loom_xfer){.buf = rb[d][i], .len = len, .fp = {9, (uint64_t)i}};
        /* Direction d: rank d sends to rank 1-d; receives posted first
         * in one direction, last in the other. */
        if (d == 0)
          tp->irecv(rk[1 - d].conn, &rx[d][i]);
        tp->isend(rk[d].conn, &sx[d][i]);
        if (d == 1)
          tp->irecv(rk[1 - d].conn, &rx[d][i]);
        all[n++] = &sx[d][i];
        all[n++] = &rx[d][i];
      }
    loomResult_t res;
    int who;
    int ok = drive(rk, all, n, &res, &who);
    char what[700];
    snprintf(what, sizeof what, "round %d: %d messages of 0 B .. 8 MiB both ways completed%s%s",
             round, 2 * N, ok ? "" : ": ", ok ? "" : who >= 0 ? rk[who].err : "timeout");
    check(ok, what);
    if (!ok)
      break;
    int bad = 0;
    for (int d = 0; d < 2; d++)
      for (int i = 0; i < N; i++) {
        size_t len = sizes[i % NS];
        bad += memcmp(sb[d][i], rb[d][i], len) != 0 || rb[d][i][len] != 0xee;
      }
    snprintf(what, sizeof what, "round %d: every byte arrived, none past the end", round);
    check(bad == 0, what);
  }
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < N; i++) {
      free(sb[d][i]);
      free(rb[d][i]);
    }
}

static void mismatch(struct rank *rk) {
  uint8_t a[100] = {1}, b[100] = {0};
  struct loom_xfer s = {.buf = a, .len = sizeof a, .fp = {5, 6}};
  struct loom_xfer r = {.buf = b, .len = sizeof b, .fp = {5, 7}};
  tp->isend(rk[0].conn, &s);
  tp->irecv(rk[1].conn, &r);
  struct loom_xfer *x[] = {&r};
  loomResult_t res;
  int who;
  drive(rk, x, 1, &res, &who);
  check(res == loomInvalidUsage && who == 1 && r.fp_mismatch && r.peer_fp[0] == 5 &&
            r.peer_fp[1] == 6 && strstr(rk[1].err, "belongs to another call") != NULL,
        "a message of another call is refused, naming the sender's fingerprint");
}

static void peer_gone(struct rank *rk) {
  uint8_t b[64];
  struct loom_xfer r = {.buf = b, .len = sizeof b, .fp = {1, 1}};
  tp->irecv(rk[0].conn, &r);
  tp->fini(rk[1].ctx); /* rank 1 goes away: its QP destroyed, rdma_cm disconnects */
  rk[1].ctx = NULL;
  struct loom_xfer *x[] = {&r};
  loomResult_t res;
  int who;
  uint64_t t0 = loom_now_ns();
  drive(rk, x, 1, &res, &who);
  double s = (double)(loom_now_ns() - t0) / 1e9;
  char what[700];
  snprintf(what, sizeof what, "a peer that went away is reported in %.2f s: %s", s, rk[0].err);
  check(res == loomRemoteError && who == 0 && strstr(rk[0].err, "rank 1") != NULL && s < 10,
        what);
}

int main(void) {
  char why[1024];
  if (!loom_ib_available(why, sizeof why)) {
    printf("SKIP: no usable RDMA device: %s\n", why);
    return 77;
  }
  printf("device: %s\n", why);
  static const uint8_t secret[LOOM_NET_SECRET_BYTES] = {7, 7, 7};
  struct rank rk[2] = {{.rank = 0}, {.rank = 1}};
  uint8_t *addrs = calloc(2, tp->addr_bytes);
  for (int r = 0; r < 2; r++) {
    struct loom_transport_comm info = {.rank = r, .nranks = 2, .secret = secret,
                                       .comm_name = "ib_pair"};
    loomResult_t res = tp->init(&info, &rk[r].ctx, addrs + (size_t)r * tp->addr_bytes);
    check(res == loomSuccess, r == 0 ? "rank 0: init" : "rank 1: init");
    if (res != loomSuccess) {
      printf("  %s\n", loom_last_error());
      return 1;
    }
  }
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    rk[r].addrs = addrs;
    pthread_create(&th[r], NULL, connect_main, &rk[r]);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  check(rk[0].res == loomSuccess && rk[1].res == loomSuccess, "connect (rdma_cm, both sides)");
  if (rk[0].res != loomSuccess || rk[1].res != loomSuccess) {
    printf("  rank 0: %s\n  rank 1: %s\n", rk[0].err, rk[1].err);
    return 1;
  }
  exchange(rk);
  mismatch(rk);
  /* The mismatch broke that connection for good: a fresh pair for the
   * last checks.  While rank 1 waits for rank 0, a rank 0 of another
   * communicator (another secret) knocks first: refused, with the reason. */
  for (int r = 0; r < 2; r++)
    tp->fini(rk[r].ctx);
  for (int r = 0; r < 2; r++) {
    struct loom_transport_comm info = {.rank = r, .nranks = 2, .secret = secret,
                                       .comm_name = "ib_pair"};
    tp->init(&info, &rk[r].ctx, addrs + (size_t)r * tp->addr_bytes);
  }
  static const uint8_t other_secret[LOOM_NET_SECRET_BYTES] = {8, 8, 8};
  struct loom_transport_comm rogue_info = {.rank = 0, .nranks = 2, .secret = other_secret,
                                           .comm_name = "other job"};
  uint8_t *rogue_addrs = calloc(2, tp->addr_bytes);
  struct rank rogue = {.rank = 0, .addrs = rogue_addrs};
  tp->init(&rogue_info, &rogue.ctx, rogue_addrs);
  memcpy(rogue_addrs + tp->addr_bytes, addrs + tp->addr_bytes, tp->addr_bytes);
  pthread_create(&th[1], NULL, connect_main, &rk[1]);
  connect_main(&rogue);
  check(rogue.res == loomRemoteError &&
            strstr(rogue.err, "refused it: rank 0 of another communicator or job (secret "
                              "differs)") != NULL,
        "a connection from another communicator is refused, saying why");
  if (rogue.res != loomRemoteError)
    printf("  %s\n", rogue.err);
  tp->fini(rogue.ctx);
  free(rogue_addrs);
  pthread_create(&th[0], NULL, connect_main, &rk[0]);
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  check(rk[0].res == loomSuccess && rk[1].res == loomSuccess,
        "second pair: connect (after the refused one)");
  if (rk[0].res == loomSuccess && rk[1].res == loomSuccess)
    peer_gone(rk);
  if (rk[0].ctx != NULL)
    tp->fini(rk[0].ctx);
  if (rk[1].ctx != NULL)
    tp->fini(rk[1].ctx);
  /* Rank 1 is gone, its listener too: a fresh rank 0 retries until its
   * deadline (2 s here), then names the rank that never answered. */
  struct loom_transport_comm info0 = {.rank = 0, .nranks = 2, .secret = secret,
                                      .comm_name = "ib_pair"};
  void *lone = NULL, *conn = NULL;
  if (tp->init(&info0, &lone, addrs) == loomSuccess) {
    int peer = 1;
    uint64_t t0 = loom_now_ns();
    loomResult_t res = tp->connect(lone, 1, &peer, addrs, loom_deadline_ms(2000), &conn);
    double s = (double)(loom_now_ns() - t0) / 1e9;
    char what[700];
    snprintf(what, sizeof what, "a rank that is not listening: retried for %.1f s, then: %s", s,
             loom_last_error());
    check(res == loomTimeout && s >= 1.5 && s < 10 &&
              strstr(loom_last_error(), "with rank(s) 1 (") != NULL,
          what);
    tp->fini(lone);
  }
  free(addrs);
  printf("%s\n", failures ? "some checks failed" : "all checks passed");
  return failures ? 1 : 0;
}

#else

int main(void) {
  printf("SKIP: this Loom was built without the ibverbs transport (configure found no "
         "libibverbs and librdmacm)\n");
  return 77;
}

#endif
