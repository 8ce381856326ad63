/*
 * chain.c — rooted schedules: broadcast and reduce as a pipelined chain
 * (large messages: each link carries the data once) or a binomial tree
 * (small messages: log2(n) hops).  Ranks are numbered relative to the root
 * (v = rank - root mod n) so the root is always v = 0.
 */
#include "sched/schedule.h"

static int rel(int rank, int root, int n) { return (rank - root + n) % n; }
static int abs_rank(int v, int root, int n) { return (v + root) % n; }

/* Binomial tree over relative ranks: the parent of v > 0 is v without its
 * highest set bit; the children of v are v + 2^k for 2^k > v. */
static int tree_parent(int v) {
  int hb = 1;
  while (hb * 2 <= v)
    hb *= 2;
  return v - hb;
}
static int tree_first_k(int v) { /* smallest k with 2^k > v */
  int k = 0;
  while ((1 << k) <= v)
    k++;
  return k;
}

static struct loom_step *add_recv(struct loom_schedule *s, int peer, int op, int buf,
                                  size_t count) {
  struct loom_step *p = loom_sched_add(s);
  p->recv_peer = peer;
  p->recv_op = (unsigned char)op;
  p->recv_buf = buf;
  p->recv_count = count;
  p->mine_buf = LOOM_BUF_SEND;
  return p;
}

static struct loom_step *add_send(struct loom_schedule *s, int peer, int buf, size_t count,
                                  int wait_step) {
  struct loom_step *p = loom_sched_add(s);
  p->send_peer = peer;
  p->send_buf = buf;
  p->send_count = count;
  p->wait_step = wait_step;
  return p;
}

void loom_chain_broadcast(int rank, int nranks, int root, size_t count,
                          struct loom_schedule *s) {
  int n = nranks, v = rel(rank, root, n);
  loom_sched_reset(s);
  if (v == 0) {
    loom_sched_copy_whole(s, count);
    if (n > 1)
      add_send(s, abs_rank(1, root, n), LOOM_BUF_SEND, count, -1);
    return;
  }
  add_recv(s, abs_rank(v - 1, root, n), LOOM_RECV_COPY, LOOM_BUF_RECV, count);
  if (v + 1 < n)
    add_send(s, abs_rank(v + 1, root, n), LOOM_BUF_RECV, count, 0);
}

void loom_tree_broadcast(int rank, int nranks, int root, size_t count,
                         struct loom_schedule *s) {
  int n = nranks, v = rel(rank, root, n), from = v == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
  loom_sched_reset(s);
  if (v == 0)
    loom_sched_copy_whole(s, count);
  else
    add_recv(s, abs_rank(tree_parent(v), root, n), LOOM_RECV_COPY, LOOM_BUF_RECV, count);
  /* The largest subtree first: it has the most hops still to go. */
  int k = tree_first_k(v);
  while (v + (1 << k) < n)
    k++;
  for (k--; k >= 0 && (1 << k) > v; k--)
    add_send(s, abs_rank(v + (1 << k), root, n), from, count, v == 0 ? -1 : 0);
}

void loom_chain_reduce(int rank, int nranks, int root, size_t count, struct loom_schedule *s) {
  int n = nranks, v = rel(rank, root, n);
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  if (v == n - 1) { /* the chain's start sends its own data */
    add_send(s, abs_rank(v - 1, root, n), LOOM_BUF_SEND, count, -1);
    return;
  }
  int acc = v == 0 ? LOOM_BUF_RECV : LOOM_BUF_SCRATCH;
  struct loom_step *p = add_recv(s, abs_rank(v + 1, root, n), LOOM_RECV_REDUCE, acc, count);
  p->finalize = v == 0;
  if (v > 0) {
    s->scratch_count = count;
    add_send(s, abs_rank(v - 1, root, n), LOOM_BUF_SCRATCH, count, 0);
  }
}

void loom_tree_reduce(int rank, int nranks, int root, size_t count, struct loom_schedule *s) {
  int n = nranks, v = rel(rank, root, n);
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  int acc = v == 0 ? LOOM_BUF_RECV : LOOM_BUF_SCRATCH, nchildren = 0;
  /* The nearest subtree first: it finishes first. */
  for (int k = tree_first_k(v); v + (1 << k) < n; k++) {
    struct loom_step *p =
        add_recv(s, abs_rank(v + (1 << k), root, n), LOOM_RECV_REDUCE, acc, count);
    if (nchildren++ > 0)
      p->mine_buf = acc;
  }
  if (v == 0) {
    if (nchildren > 0)
      s->steps[s->nsteps - 1].finalize = 1;
    return;
  }
  if (nchildren > 0)
    s->scratch_count = count;
  add_send(s, abs_rank(tree_parent(v), root, n), nchildren ? acc : LOOM_BUF_SEND, count,
           nchildren ? s->nsteps - 1 : -1);
}
