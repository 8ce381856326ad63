/*
 * tree.c — NCCL-style double binary tree all-reduce for small messages on
 * many nodes.  Tree 0 is a binary heap over the nodes in order, tree 1 the
 * same heap over the nodes in reverse order, so that a node that is a leaf
 * of one tree is (mostly) an inner node of the other; inside a node the
 * ranks hang below its first rank in a chain.  Each tree reduces half of
 * the data up to its root and broadcasts the result back down: 2 log2(N)
 * + 2(L-1) message latencies instead of the ring's 2(n-1).  Every element
 * is reduced once, at one place, so every rank gets the same bits.
 */
#include "sched/schedule.h"

void loom_dbtree_links(const struct loom_topo *t, int tree, int rank, int *parent,
                       int children[3], int *nchildren) {
  int m = t->nnodes, k = t->node_of[rank], l = t->local_of[rank];
  int size = loom_topo_node_size(t, k);
  *nchildren = 0;
  /* inside the node: a chain from its first rank */
  if (l + 1 < size)
    children[(*nchildren)++] = loom_topo_rank_at(t, k, l + 1);
  if (l > 0) {
    *parent = loom_topo_rank_at(t, k, l - 1);
    return;
  }
  /* the node's first rank: the heap over nodes (tree 1: reversed) */
  int pos = tree == 0 ? k : m - 1 - k;
  int pp = pos == 0 ? -1 : (pos - 1) / 2;
  *parent = pp < 0 ? -1 : loom_topo_rank_at(t, tree == 0 ? pp : m - 1 - pp, 0);
  for (int c = 2 * pos + 1; c <= 2 * pos + 2 && c < m; c++)
    children[(*nchildren)++] = loom_topo_rank_at(t, tree == 0 ? c : m - 1 - c, 0);
}

struct links {
  int parent, nchildren, children[3];
};

/* The reduce half of one tree on [off, off+count): reduce each child's
 * partial into RECV (the first with this rank's SEND), then send it up.
 * Returns the step of the last reduce (-1: none). */
static int reduce_up(const struct links *ln, size_t off, size_t count,
                     struct loom_schedule *s) {
  int last = -1;
  for (int i = 0; i < ln->nchildren; i++) {
    struct loom_step *p = loom_sched_add(s);
    p->recv_peer = ln->children[i];
    p->recv_op = LOOM_RECV_REDUCE;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = p->mine_off = off;
    p->recv_count = count;
    p->mine_buf = i == 0 ? LOOM_BUF_SEND : LOOM_BUF_RECV;
    p->finalize = ln->parent < 0 && i == ln->nchildren - 1; /* the root's last */
    last = s->nsteps - 1;
  }
  if (ln->parent >= 0) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = ln->parent;
    p->send_buf = last >= 0 ? LOOM_BUF_RECV : LOOM_BUF_SEND;
    p->send_off = off;
    p->send_count = count;
    p->wait_step = last;
  }
  return last;
}

/* The broadcast half: receive the result from the parent (the root has it
 * from its last reduce, step `last`), send it to each child. */
static void broadcast_down(const struct links *ln, int last, size_t off, size_t count,
                           struct loom_schedule *s) {
  int from = last;
  if (ln->parent >= 0) {
    struct loom_step *p = loom_sched_add(s);
    p->recv_peer = ln->parent;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = off;
    p->recv_count = count;
    from = s->nsteps - 1;
  }
  for (int i = 0; i < ln->nchildren; i++) {
    struct loom_step *p = loom_sched_add(s);
    p->send_peer = ln->children[i];
    p->send_buf = LOOM_BUF_RECV;
    p->send_off = off;
    p->send_count = count;
    p->wait_step = from;
  }
}

void loom_dbtree_allreduce(int rank, const struct loom_topo *t, size_t count,
                           struct loom_schedule *s) {
  loom_sched_reset(s);
  if (t->nranks == 1) {
    loom_sched_copy_whole(s, count);
    return;
  }
  size_t half = count / 2;
  size_t off[2] = {0, half}, cnt[2] = {half, count - half};
  struct links ln[2];
  for (int tr = 0; tr < 2; tr++)
    loom_dbtree_links(t, tr, rank, &ln[tr].parent, ln[tr].children, &ln[tr].nchildren);
  /* Large halves go up and down in segments: a rank takes in its
   * children's data in posting order, so with whole halves every level of
   * the tree would add a whole half-buffer time; with segments a level
   * forwards segment k while its children reduce segment k+1. */
  int nseg = cnt[0] >= LOOM_TREE_SEGMENT_MIN * LOOM_TREE_SEGMENTS ? LOOM_TREE_SEGMENTS : 1;
  int last[2][LOOM_TREE_SEGMENTS];
  /* All reduce steps (segment by segment, both trees), then all broadcast
   * steps, so that neither tree waits for the other.  Empty parts add no
   * steps. */
  for (int k = 0; k < nseg; k++)
    for (int tr = 0; tr < 2; tr++) {
      size_t so, sc;
      loom_sched_block(cnt[tr], nseg, k, &so, &sc);
      last[tr][k] = sc > 0 ? reduce_up(&ln[tr], off[tr] + so, sc, s) : -1;
    }
  for (int k = 0; k < nseg; k++)
    for (int tr = 0; tr < 2; tr++) {
      size_t so, sc;
      loom_sched_block(cnt[tr], nseg, k, &so, &sc);
      if (sc > 0)
        broadcast_down(&ln[tr], last[tr][k], off[tr] + so, sc, s);
    }
}
