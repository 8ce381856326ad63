/*
 * schedule.h — collectives as data: a per-rank list of steps over element
 * ranges of a few buffers.  Schedules are made by pure functions (ring.c,
 * chain.c, direct.c) so that unit tests and the simulator can run exactly
 * what the engine runs.
 *
 * Each step sends one range to a peer and/or receives one range from a
 * peer.  Buffers are named by index: SEND, RECV, SCRATCH (engine-provided
 * work space of scratch_count elements) and, from LOOM_BUF_USER on, extra
 * user buffers (the sends and receives of a group).  A REDUCE receive
 * computes dst = mine op data slice by slice, waiting in a temp slot; when
 * dst overlaps what the same step sends, the engine writes slice k only
 * once slice k has left.  A COPY receive lands in dst as it arrives, so a
 * step must never copy into memory it sends.  The engine cuts every range
 * into pipeline slices; slice k of a step's send may wait for slice k of an
 * earlier step's receive (wait_step), or for all of it (wait_all), which is
 * what lets sending, receiving and reducing overlap.
 *
 * Messages between two ranks match in step order: the i-th send of rank a
 * to rank b meets the i-th receive of b from a, with the same count.
 */
#ifndef LOOM_SCHED_SCHEDULE_H
#define LOOM_SCHED_SCHEDULE_H

#include <stddef.h>

#include "topo/topo.h"

enum loom_buf {
  LOOM_BUF_SEND = 0,
  LOOM_BUF_RECV = 1,
  LOOM_BUF_SCRATCH = 2,
  LOOM_BUF_USER = 3, /* LOOM_BUF_USER + i: the i-th extra buffer */
};
enum loom_recv_op {
  LOOM_RECV_NONE = 0,
  LOOM_RECV_COPY = 1,   /* land the data in dst */
  LOOM_RECV_REDUCE = 2, /* dst = mine op data */
};

/* A receive whose sender the engine finds (loomRecvAny); a call's root
 * (its peer) has the same value. */
#define LOOM_PEER_ANY (-2)

struct loom_step {
  int send_peer; /* -1: no send */
  int send_buf;  /* enum loom_buf */
  size_t send_off, send_count;
  int wait_step;          /* -1, or the earlier step whose receive this send forwards */
  unsigned char wait_all; /* 1: wait for all of wait_step's receive, not slice k */
  int recv_peer;          /* -1: no receive; LOOM_PEER_ANY: see loom_engine_op */
  unsigned char recv_op;  /* enum loom_recv_op */
  int recv_buf;
  size_t recv_off, recv_count;
  int mine_buf;            /* REDUCE: this rank's operand ("mine") */
  size_t mine_off;
  unsigned char recv_first; /* 1: reduce as data op mine (operand order matters for
                               the bits of max/min of +0/-0 and of NaN payloads) */
  unsigned char finalize;   /* 1: apply the op's final step (avg: divide) after the reduce */
};

/* A local copy done alongside the steps (count 0: none).  Skipped when
 * source and destination are the same memory (in place). */
struct loom_local_copy {
  int from_buf, to_buf;
  size_t from_off, to_off, count;
};

/* A reduction done after every step (count 0: none), the one-shot
 * all-reduce's: RECV[0, count) = b_0 op b_1 op ... op b_{nblocks-1}, left
 * to right, where block j is SEND[0, count) for j == self and SCRATCH at
 * (j < self ? j : j - 1) * count otherwise.  Every rank combines the same
 * values in the same order, so all end with the same bits.  finalize:
 * apply the op's final step (avg: divide) at the end. */
struct loom_fold {
  size_t count;
  int nblocks, self;
  unsigned char finalize;
};

struct loom_schedule {
  int nsteps, cap;
  struct loom_step *steps; /* caller-provided, cap entries */
  struct loom_local_copy copy;
  size_t scratch_count; /* elements of SCRATCH the steps use */
  struct loom_fold fold;
  size_t slice_bytes; /* pipeline slice (the protocol's); 0: LOOM_CHUNK_BYTES */
  /* Set when a builder added more than cap steps: the extra ones went to
   * `sink`, so builders need not check every add, and nothing runs or
   * simulates a schedule with this set (loom_plan returns NULL, the
   * engine refuses it). */
  unsigned char overflow;
  struct loom_step sink;
};

/* The double binary tree sends halves of at least this many elements per
 * tree in LOOM_TREE_SEGMENTS segments (pipelined across its levels). */
#define LOOM_TREE_SEGMENTS 4
#define LOOM_TREE_SEGMENT_MIN 4096
/* Steps any builder below needs for nranks (p2p batches: one per call);
 * rings on several channels 2(n-1) per channel; the double binary tree
 * needs up to 16 per segment whatever the rank count. */
#define LOOM_SCHED_MAX_STEPS(nranks) (2 * (nranks) * LOOM_MAX_CHANNELS + 16 * LOOM_TREE_SEGMENTS + 32)

/* ---- schedule.c: construction ---- */
/* An empty schedule over caller-provided storage of cap steps. */
void loom_sched_init(struct loom_schedule *s, struct loom_step *steps, int cap);
/* Empties s (keeping its step storage). */
void loom_sched_reset(struct loom_schedule *s);
/* Appends a step with no send and no receive.  Never NULL: past cap it
 * returns s->sink and sets s->overflow, which every consumer checks. */
struct loom_step *loom_sched_add(struct loom_schedule *s);
/* The local copy of all of SEND into RECV (one rank's whole result). */
void loom_sched_copy_whole(struct loom_schedule *s, size_t count);
/* The last step so far that receives data, -1 if none: a send that waits
 * for all of it waits for every earlier receive too (they complete in
 * posting order), where an empty receive would cover nothing. */
int loom_sched_last_filled(const struct loom_schedule *s);

/* ---- the pipeline rule: how a step is cut into slices and when a
 * forwarding send may go.  The engine runs it and loom-sim predicts with
 * it, so the simulator models what the engine does by construction. ---- */
/* Slices of `slice` elements in a range of count (0 for no peer). */
static inline size_t loom_slices(int peer, size_t count, size_t slice) {
  return peer < 0 ? 0 : (count + slice - 1) / slice;
}
/* Elements in slice k of a range of count. */
static inline size_t loom_slice_len(size_t count, size_t slice, size_t k) {
  size_t start = k * slice;
  if (start >= count)
    return 0;
  return count - start < slice ? count - start : slice;
}
/* Message slots of a step: its sends and receives pair up slice by slice. */
static inline size_t loom_step_slots(size_t send_slices, size_t recv_slices) {
  return send_slices > recv_slices ? send_slices : recv_slices;
}
/* Which slice of the forwarded receive (of kr > 0 slices) must be done
 * before slice k of the send that forwards it may go: slice k, or the last
 * one when the send waits for all of it or is longer.  Receives complete
 * in posting order, so that slice stands for all before it. */
static inline size_t loom_slice_awaited(size_t kr, int wait_all, size_t k) {
  return wait_all || k >= kr ? kr - 1 : k;
}

/* Splits count into n near-equal blocks (the first count % n one larger). */
void loom_sched_split(size_t count, int n, size_t *off, size_t *cnt);
/* Block b of loom_sched_split(count, n, ...), without the arrays. */
void loom_sched_block(size_t count, int n, int b, size_t *off, size_t *cnt);

/* ---- ring.c ---- */
/* Ring all-reduce: reduce-scatter then all-gather, 2(n-1) steps. */
void loom_ring_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s);
/* Recursive doubling, for a power-of-two nranks: in step k rank r swaps its
 * whole partial result with rank r ^ 2^k and both reduce, log2(n) steps
 * instead of the ring's 2(n-1).  Both of a pair compute lower-rank's value
 * op higher-rank's value (recv_first), so they hold the same bits even where
 * commutativity stops at values (max(+0,-0), NaN payloads), and every rank
 * ends with the same bits. */
void loom_rd_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s);
/* The same rings in a given order: order[p] is the rank at ring position
 * p (NULL: rank order).  With the ranks of each node contiguous, data
 * crosses the network once per node boundary instead of at every step. */
void loom_ring_allreduce_ordered(int rank, int nranks, const int *order, size_t count,
                                 struct loom_schedule *s);
void loom_ring_allgather_ordered(int rank, int nranks, const int *order, size_t count,
                                 struct loom_schedule *s);
void loom_ring_reducescatter_ordered(int rank, int nranks, const int *order, size_t count,
                                     struct loom_schedule *s);
/* Ring all-gather of `count` elements per rank, n-1 steps. */
void loom_ring_allgather(int rank, int nranks, size_t count, struct loom_schedule *s);
/* Recursive-doubling all-gather (power-of-two nranks): step k swaps the
 * 2^k blocks gathered so far with rank r ^ 2^k; log2(n) steps. */
void loom_rd_allgather(int rank, int nranks, size_t count, struct loom_schedule *s);
/* Ring reduce-scatter: `count` elements per rank; rank r ends with block r
 * in RECV.  Partial sums travel through SCRATCH (nranks*count). */
void loom_ring_reducescatter(int rank, int nranks, size_t count, struct loom_schedule *s);

/* ---- channels.c: rings over parts of the data ---- */
#define LOOM_MAX_CHANNELS 4
/* Ring all-reduce with the data cut into nch parts (at most
 * LOOM_MAX_CHANNELS), part c on channel c's ring: ranks grouped by node
 * as t says (NULL: one node), each node's ranks rotated by c * size / nch
 * so that channels cross between nodes at different ranks, odd channels
 * backwards.  nch = 1 is loom_ring_allreduce_ordered by node.  2(n-1) * nch
 * steps, interleaved by channel. */
void loom_ring_allreduce_channels(int rank, int nranks, const struct loom_topo *t, int nch,
                                  size_t count, struct loom_schedule *s);
/* Channel c's ring (of nch) at `rank`: its position, next and previous rank. */
int loom_ring_channel_peers(const struct loom_topo *t, int nranks, int nch, int c, int rank,
                            int *next, int *prev);

/* ---- rhd.c ---- */
/* Recursive halving-doubling all-reduce (power-of-two nranks): reduce-
 * scatter by halving, all-gather by doubling; 2 log2(n) steps with the
 * ring's bandwidth. */
void loom_rhd_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s);

/* ---- hier.c: two levels (nodes of equal size) ---- */
/* Where a rank sits: node `node` of nnodes, local index local_index of
 * local_size, and the rank at (node, local index) of any other place. */
struct loom_hier {
  int nnodes, local_size, node, local_index;
  int (*rank_at)(int node, int local_index, const void *arg);
  const void *arg;
};
/* Hierarchical all-reduce (nnodes > 1, local_size > 1): ring
 * reduce-scatter inside the node (L-1 steps), ring all-reduce across the
 * nodes of the block this rank owns (2(N-1) steps, among the ranks of the
 * same local index), ring all-gather inside the node (L-1 steps).  Every
 * element is reduced in the same order everywhere its result is used, so
 * every rank ends with the same bits. */
void loom_hier_allreduce(int rank, const struct loom_hier *h, size_t count,
                         struct loom_schedule *s);

/* ---- tree.c: double binary tree (small messages on many nodes) ---- */
/* Rank's place in tree `tree` (0 or 1): its parent (-1: the root) and up
 * to 3 children (the next rank of its node's chain, and for a node's first
 * rank its node's heap children's first ranks). */
void loom_dbtree_links(const struct loom_topo *t, int tree, int rank, int *parent,
                       int children[3], int *nchildren);
/* All-reduce on the two trees of t, each carrying half of the data: reduce
 * up, broadcast down, in segments for large halves.  At most 16 steps per
 * segment. */
void loom_dbtree_allreduce(int rank, const struct loom_topo *t, size_t count,
                           struct loom_schedule *s);

/* ---- chain.c: rooted collectives ---- */
/* Pipelined chain root -> root+1 -> ... (large messages: every link carries
 * the data once). */
void loom_chain_broadcast(int rank, int nranks, int root, size_t count,
                          struct loom_schedule *s);
/* Binomial tree from root (small messages: log2(n) hops). */
void loom_tree_broadcast(int rank, int nranks, int root, size_t count,
                         struct loom_schedule *s);
/* Chain reduce toward root: root+1 -> root+2 -> ... -> root, each adding its
 * own; non-roots accumulate in SCRATCH (count elements). */
void loom_chain_reduce(int rank, int nranks, int root, size_t count, struct loom_schedule *s);
/* Binomial tree reduce toward root (small messages). */
void loom_tree_reduce(int rank, int nranks, int root, size_t count, struct loom_schedule *s);

/* ---- direct.c: every rank to every rank, or to/from a root ---- */
/* One-shot all-reduce: every rank sends its whole input to every peer at
 * once (n-1 steps, none waiting) and folds the n inputs in rank order
 * (struct loom_fold): one message latency instead of log2(n) or 2(n-1),
 * for (n-1) times the data; small messages only.  SCRATCH: (n-1)*count. */
void loom_oneshot_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s);
/* One-shot all-gather: every rank sends its block to every peer at once
 * (n-1 steps, none waiting), each received straight into its place in
 * RECV: one message latency instead of log2(n) or n-1, for the ring's
 * bytes per rank. */
void loom_oneshot_allgather(int rank, int nranks, size_t count, struct loom_schedule *s);
/* Pairwise exchange: step d sends block (r+d) to rank r+d and receives
 * block (r-d) from rank r-d.  counts/displs per peer, in elements. */
void loom_direct_alltoallv(int rank, int nranks, const size_t *sendcounts,
                           const size_t *sdispls, const size_t *recvcounts,
                           const size_t *rdispls, struct loom_schedule *s);
void loom_direct_gather(int rank, int nranks, int root, size_t count, struct loom_schedule *s);
void loom_direct_scatter(int rank, int nranks, int root, size_t count,
                         struct loom_schedule *s);

/* ---- agree.c: the agreement pass (why: see agree.c) ---- */
/* The steps loom_sched_add_agreement adds: ceil(log2 nranks) + 1. */
int loom_sched_agreement_rounds(int nranks);
/* Puts a header step first (every wait_step moves with its step) and
 * appends the dissemination rounds; one element each way per step, in two
 * elements of SCRATCH after scratch_count, which grows by 2.  -1 when s is
 * full. */
int loom_sched_add_agreement(int rank, int nranks, struct loom_schedule *s);

static inline int loom_is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
static inline int loom_ring_next(int rank, int nranks) { return (rank + 1) % nranks; }
static inline int loom_ring_prev(int rank, int nranks) {
  return (rank + nranks - 1) % nranks;
}

#endif
