/*
 * pair.c — the two-rank harness of pair.h.
 */
#include "pair.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint8_t pair_secret[LOOM_NET_SECRET_BYTES] = {7, 7, 7};
static const int local_ranks[2] = {0, 1};

static void record_error(const char *text) { loom_set_last_error(text); }

int pair_init(struct pair *p, const struct loom_transport *tp, const uint8_t *secret) {
  struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  p->tp = tp;
  if (p->addrs == NULL && (p->addrs = calloc(2, tp->addr_bytes)) == NULL)
    return -1;
  for (int r = 0; r < 2; r++) {
    p->rk[r] = (struct pair_rank){.rank = r};
    struct loom_transport_comm info = {.rank = r, .nranks = 2, .secret = secret,
                                       .local_sockaddr = &lo, .comm_name = "conformance",
                                       .local_ranks = local_ranks, .nlocal = 2,
                                       .record_error = record_error};
    if (tp->init(&info, &p->rk[r].ctx, p->addrs + (size_t)r * tp->addr_bytes) != loomSuccess) {
      printf("  rank %d: init: %s\n", r, loom_last_error());
      p->rk[r].ctx = NULL;
      pair_close(p);
      return -1;
    }
  }
  return 0;
}

/* What a connecting thread is given. */
struct connect_job {
  struct pair *p;
  int r, deadline_ms;
};

static void *connect_main(void *arg) {
  struct connect_job *job = arg;
  struct pair *p = job->p;
  struct pair_rank *r = &p->rk[job->r];
  int peer = 1 - r->rank;
  r->res = p->tp->connect(r->ctx, 1, &peer, p->addrs, loom_deadline_ms(job->deadline_ms),
                          &r->conn);
  snprintf(r->err, sizeof r->err, "%s", r->res == loomSuccess ? "" : loom_last_error());
  return NULL;
}

void pair_connect_start(struct pair *p, int r, int deadline_ms, pthread_t *th) {
  static struct connect_job jobs[2];
  jobs[r] = (struct connect_job){.p = p, .r = r, .deadline_ms = deadline_ms};
  if (pthread_create(th, NULL, connect_main, &jobs[r]) != 0) {
    p->rk[r].res = loomSystemError;
    snprintf(p->rk[r].err, sizeof p->rk[r].err, "cannot start a thread");
    *th = pthread_self();
  }
}

int pair_connect(struct pair *p, int deadline_ms) {
  pthread_t th[2];
  for (int r = 0; r < 2; r++)
    pair_connect_start(p, r, deadline_ms, &th[r]);
  for (int r = 0; r < 2; r++)
    if (!pthread_equal(th[r], pthread_self()))
      pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++)
    if (p->rk[r].res != loomSuccess)
      printf("  rank %d: connect: %s\n", r, p->rk[r].err);
  return p->rk[0].res == loomSuccess && p->rk[1].res == loomSuccess ? 0 : -1;
}

int pair_open(struct pair *p, const struct loom_transport *tp, const uint8_t *secret) {
  if (pair_init(p, tp, secret) != 0)
    return -1;
  if (pair_connect(p, 30000) != 0) {
    pair_close(p);
    return -1;
  }
  return 0;
}

void pair_close(struct pair *p) {
  for (int r = 0; r < 2; r++) {
    if (p->rk[r].ctx != NULL)
      p->tp->fini(p->rk[r].ctx);
    p->rk[r].ctx = p->rk[r].conn = NULL;
  }
}

/* Sleeps in the kernel on both ranks' fds when nothing moved, at most a
 * millisecond (a busy-wait transport wakes no fd). */
static void wait_kernel(struct pair *p) {
  struct pollfd fds[32];
  int nf = 0;
  for (int r = 0; r < 2; r++)
    if (p->rk[r].ctx != NULL)
      nf += p->tp->poll_fds(p->rk[r].ctx, fds + nf, 16);
  poll(fds, (nfds_t)nf, 1);
}

int pair_drive(struct pair *p, struct loom_xfer **x, int n, int timeout_ms, loomResult_t *res,
               int *who) {
  uint64_t deadline = loom_deadline_ms(timeout_ms);
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
      if (p->rk[r].ctx == NULL)
        continue;
      loomResult_t e = p->tp->progress(p->rk[r].ctx, &progressed, &failed_peer);
      if (e != loomSuccess) {
        *res = e;
        *who = r;
        snprintf(p->rk[r].err, sizeof p->rk[r].err, "%s", loom_last_error());
        return 0;
      }
    }
    if (!progressed)
      wait_kernel(p);
  }
  return 0;
}
