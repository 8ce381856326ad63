/*
 * pair.h — two ranks of one communicator in this process, joined by a
 * transport through its ops table only: init, an in-memory address
 * exchange, connect (a thread per rank: connect is collective), progress
 * of both until posted transfers end, fini.  What the conformance checks
 * stand on.  Every wait is bounded.
 */
#ifndef LOOM_TESTS_TRANSPORT_PAIR_H
#define LOOM_TESTS_TRANSPORT_PAIR_H

#include "loom_net.h"

#include <pthread.h>
#include <stdint.h>

struct pair_rank {
  int rank;
  void *ctx, *conn;
  loomResult_t res;
  char err[512];
};

struct pair {
  const struct loom_transport *tp;
  struct pair_rank rk[2];
  uint8_t *addrs; /* both ranks' address blobs */
};

/* init of both ranks with `secret`; 0, or -1 with the reason printed. */
int pair_init(struct pair *p, const struct loom_transport *tp, const uint8_t *secret);
/* connect of both ranks within deadline_ms; 0 when both succeeded. */
int pair_connect(struct pair *p, int deadline_ms);
/* init and connect; 0 on success. */
int pair_open(struct pair *p, const struct loom_transport *tp, const uint8_t *secret);
/* fini of the ranks still there. */
void pair_close(struct pair *p);
/* Starts rank r's connect in thread *th (deadline_ms); join it, then read
 * p->rk[r].res and .err. */
void pair_connect_start(struct pair *p, int r, int deadline_ms, pthread_t *th);

/* Progresses both ranks until every transfer of x is done (1), a rank
 * fails (0: its result in *res, the rank in *who, its text in rk[who].err),
 * or timeout_ms pass (0, *who = -1). */
int pair_drive(struct pair *p, struct loom_xfer **x, int n, int timeout_ms, loomResult_t *res,
               int *who);

/* The secret every check's pair uses. */
extern const uint8_t pair_secret[LOOM_NET_SECRET_BYTES];

#endif
