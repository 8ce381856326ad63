/*
 * channels.c — ring all-reduce over several channels: the data is cut
 * into nch parts and part c travels its own ring, in its own order.
 * Rings in different orders cross between nodes at different ranks (each
 * node's ranks rotated) and odd channels run backwards, so with several
 * NICs or links per node the channels use different ones, and each link
 * carries traffic both ways.  Steps are interleaved (ring step j of
 * channel c is step j * nch + c), so the engine moves all channels at once.
 */
#include "sched/schedule.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Channel c's ring position -> rank, and back.  Nodes come in order with
 * their ranks in a row, each node's ranks rotated by c * size / nch;
 * odd channels reverse the whole ring.  t NULL or one node: rank order. */
static int ring_rank_at(const struct loom_topo *t, int n, int nch, int c, int p) {
  if (c % 2 == 1)
    p = n - 1 - p;
  if (t == NULL || t->nnodes <= 1)
    return mod(p + c * n / nch, n);
  int node = t->node_of[t->by_node[p]], size = loom_topo_node_size(t, node);
  int local = p - t->node_first[node];
  return loom_topo_rank_at(t, node, mod(local + c * size / nch, size));
}

static int ring_pos_of(const struct loom_topo *t, int n, int nch, int c, int rank) {
  int p;
  if (t == NULL || t->nnodes <= 1) {
    p = mod(rank - c * n / nch, n);
  } else {
    int node = t->node_of[rank], size = loom_topo_node_size(t, node);
    p = t->node_first[node] + mod(t->local_of[rank] - c * size / nch, size);
  }
  return c % 2 == 1 ? n - 1 - p : p;
}

int loom_ring_channel_peers(const struct loom_topo *t, int nranks, int nch, int c, int rank,
                            int *next, int *prev) {
  int me = ring_pos_of(t, nranks, nch, c, rank);
  *next = ring_rank_at(t, nranks, nch, c, loom_ring_next(me, nranks));
  *prev = ring_rank_at(t, nranks, nch, c, loom_ring_prev(me, nranks));
  return me;
}

void loom_ring_allreduce_channels(int rank, int nranks, const struct loom_topo *t, int nch,
                                  size_t count, struct loom_schedule *s) {
  int n = nranks;
  loom_sched_reset(s);
  if (n == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  if (nch < 1)
    nch = 1;
  if (nch > LOOM_MAX_CHANNELS)
    nch = LOOM_MAX_CHANNELS;
  int me[LOOM_MAX_CHANNELS], next[LOOM_MAX_CHANNELS], prev[LOOM_MAX_CHANNELS];
  size_t poff[LOOM_MAX_CHANNELS], pcnt[LOOM_MAX_CHANNELS];
  for (int c = 0; c < nch; c++) {
    me[c] = loom_ring_channel_peers(t, n, nch, c, rank, &next[c], &prev[c]);
    loom_sched_block(count, nch, c, &poff[c], &pcnt[c]);
  }
  /* as loom_ring_allreduce_ordered, per channel on its part: reduce-
   * scatter (n-1 steps), then all-gather (n-1 steps) */
  for (int st = 0; st < 2 * (n - 1); st++) {
    int gather = st >= n - 1, j = gather ? st - (n - 1) : st;
    for (int c = 0; c < nch; c++) {
      struct loom_step *p = loom_sched_add(s);
      if (p == NULL)
        return;
      int sb = gather ? mod(me[c] + 1 - j, n) : mod(me[c] - j, n);
      int rb = gather ? mod(me[c] - j, n) : mod(me[c] - j - 1, n);
      p->send_peer = next[c];
      p->send_buf = st == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
      loom_sched_block(pcnt[c], n, sb, &p->send_off, &p->send_count);
      p->send_off += poff[c];
      p->wait_step = st == 0 ? -1 : s->nsteps - 1 - nch; /* this channel's previous step */
      p->recv_peer = prev[c];
      p->recv_op = gather ? LOOM_RECV_COPY : LOOM_RECV_REDUCE;
      p->recv_buf = LOOM_BUF_RECV;
      loom_sched_block(pcnt[c], n, rb, &p->recv_off, &p->recv_count);
      p->recv_off += poff[c];
      p->mine_buf = LOOM_BUF_SEND;
      p->mine_off = p->recv_off;
      p->finalize = st == n - 2;
    }
  }
}
