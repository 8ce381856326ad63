/*
 * direct.c — schedules where ranks exchange with every peer directly:
 * all-to-all(v) as a pairwise exchange, gather and scatter through the
 * root, the one-shot all-reduce and all-gather.  No step waits on
 * another, so every message is posted at once.
 */
#include "sched/schedule.h"

/* Step d of the pairwise pattern: rank sends to rank+d and receives, as a
 * copy, from rank-d (*from); the caller says what moves. */
static struct loom_step *pair_step(struct loom_schedule *s, int rank, int n, int d, int *from) {
  struct loom_step *p = loom_sched_add(s);
  *from = (rank - d + n) % n;
  p->send_peer = (rank + d) % n;
  p->send_buf = LOOM_BUF_SEND;
  p->recv_peer = *from;
  p->recv_op = LOOM_RECV_COPY;
  return p;
}

void loom_direct_alltoallv(int rank, int nranks, const size_t *sendcounts,
                           const size_t *sdispls, const size_t *recvcounts,
                           const size_t *rdispls, struct loom_schedule *s) {
  int n = nranks;
  loom_sched_reset(s);
  s->copy.from_buf = LOOM_BUF_SEND;
  s->copy.to_buf = LOOM_BUF_RECV;
  s->copy.from_off = sdispls[rank];
  s->copy.to_off = rdispls[rank];
  s->copy.count = sendcounts[rank];
  /* Step d pairs rank r with r+d (send) and r-d (receive): at every step
   * each rank sends to one peer and receives from another, so no rank is
   * flooded by all the others at once. */
  for (int d = 1; d < n; d++) {
    int from;
    struct loom_step *p = pair_step(s, rank, n, d, &from);
    p->send_off = sdispls[p->send_peer];
    p->send_count = sendcounts[p->send_peer];
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = rdispls[from];
    p->recv_count = recvcounts[from];
  }
}

void loom_direct_gather(int rank, int nranks, int root, size_t count, struct loom_schedule *s) {
  loom_sched_reset(s);
  if (rank != root) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = root;
    p->send_buf = LOOM_BUF_SEND;
    p->send_count = count;
    return;
  }
  s->copy.from_buf = LOOM_BUF_SEND;
  s->copy.to_buf = LOOM_BUF_RECV;
  s->copy.to_off = (size_t)root * count;
  s->copy.count = count;
  for (int d = 1; d < nranks; d++) {
    int from = (root + d) % nranks;
    struct loom_step *p = loom_sched_add(s);
    p->recv_peer = from;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = (size_t)from * count;
    p->recv_count = count;
  }
}

void loom_direct_scatter(int rank, int nranks, int root, size_t count,
                         struct loom_schedule *s) {
  loom_sched_reset(s);
  if (rank != root) {
    struct loom_step *p = loom_sched_add(s);
    p->recv_peer = root;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_count = count;
    return;
  }
  s->copy.from_buf = LOOM_BUF_SEND;
  s->copy.to_buf = LOOM_BUF_RECV;
  s->copy.from_off = (size_t)root * count;
  s->copy.count = count;
  for (int d = 1; d < nranks; d++) {
    int to = (root + d) % nranks;
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = to;
    p->send_buf = LOOM_BUF_SEND;
    p->send_off = (size_t)to * count;
    p->send_count = count;
  }
}

void loom_oneshot_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s) {
  int n = nranks;
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  /* Peer `from` lands in SCRATCH block (from < rank ? from : from - 1). */
  for (int d = 1; d < n; d++) {
    int from;
    struct loom_step *p = pair_step(s, rank, n, d, &from);
    p->send_count = count;
    p->recv_buf = LOOM_BUF_SCRATCH;
    p->recv_off = (size_t)(from < rank ? from : from - 1) * count;
    p->recv_count = count;
  }
  s->scratch_count = (size_t)(n - 1) * count;
  s->fold.count = count;
  s->fold.nblocks = n;
  s->fold.self = rank;
  s->fold.finalize = 1;
}

void loom_oneshot_allgather(int rank, int nranks, size_t count, struct loom_schedule *s) {
  loom_sched_reset(s);
  s->copy.from_buf = LOOM_BUF_SEND;
  s->copy.to_buf = LOOM_BUF_RECV;
  s->copy.to_off = (size_t)rank * count;
  s->copy.count = count;
  /* The all-to-all's pairing: at step d, r sends to r+d, receives from r-d. */
  for (int d = 1; d < nranks; d++) {
    int from;
    struct loom_step *p = pair_step(s, rank, nranks, d, &from);
    p->send_count = count;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = (size_t)from * count;
    p->recv_count = count;
  }
}
