/*
 * schedule.h — collectives as data: a per-rank list of steps over blocks of
 * the buffer.  Schedules are made by pure functions (ring.c, ...) so that
 * unit tests and the simulator can run exactly what the engine runs.
 *
 * Each step sends one block to a peer and/or receives one block from a
 * peer.  A step may reduce into the block it sends (in place, the same
 * memory): the engine reduces slice k only once slice k has been sent, the
 * data waiting in a temp slot meanwhile.  A COPY receive lands in recvbuff
 * as it arrives, so a step must never copy into the block it sends.  The engine cuts every block into pipeline slices; slice k of a
 * step's send may wait for slice k of the previous step's receive, which is
 * what lets sending, receiving and reducing overlap.
 */
#ifndef LOOM_SCHED_SCHEDULE_H
#define LOOM_SCHED_SCHEDULE_H

#include <stddef.h>

enum loom_buf { LOOM_BUF_SEND = 0, LOOM_BUF_RECV = 1 };
enum loom_recv_op {
  LOOM_RECV_NONE = 0,
  LOOM_RECV_COPY = 1,   /* land the data in recvbuff's block */
  LOOM_RECV_REDUCE = 2, /* recvbuff[block] = mine[block] op data */
};

struct loom_step {
  int send_peer;            /* -1: no send */
  int send_block;
  unsigned char send_from;  /* enum loom_buf */
  unsigned char send_waits; /* 1: slice k waits for the previous step's receive of slice k */
  int recv_peer;            /* -1: no receive */
  int recv_block;
  unsigned char recv_op;    /* enum loom_recv_op */
  unsigned char reduce_with; /* enum loom_buf holding this rank's operand ("mine") */
  unsigned char recv_first;  /* 1: reduce as data op mine (operand order matters for
                                the bits of max/min of +0/-0 and of NaN payloads) */
  unsigned char finalize;   /* 1: apply the op's final step (avg: divide) after the reduce */
};

/* Blocks are element ranges of recvbuff: block b is [off[b], off[b]+count[b]).
 * sendbuff element 0 corresponds to recvbuff element `send_origin`. */
#define LOOM_SCHED_MAX_STEPS_PER_RANK(nranks) (2 * (nranks))
struct loom_schedule {
  int nsteps;
  struct loom_step *steps;     /* caller-provided, LOOM_SCHED_MAX_STEPS_PER_RANK */
  int nblocks;
  size_t *block_off, *block_count; /* caller-provided, nranks entries */
  size_t send_origin;
  int copy_send_block;         /* >= 0: copy sendbuff to this block first (unless in place) */
};

/* Splits count into n near-equal blocks (the first count % n one larger). */
void loom_sched_split(size_t count, int n, size_t *off, size_t *cnt);

/* Ring all-reduce: reduce-scatter then all-gather, 2(n-1) steps. */
void loom_ring_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s);
/* Recursive doubling, for a power-of-two nranks: in step k rank r swaps its
 * whole partial result with rank r ^ 2^k and both reduce, log2(n) steps
 * instead of the ring's 2(n-1).  Both of a pair compute lower-rank's value
 * op higher-rank's value (recv_first), so they hold the same bits even where
 * commutativity stops at values (max(+0,-0), NaN payloads), and every rank
 * ends with the same bits. */
void loom_rd_allreduce(int rank, int nranks, size_t count, struct loom_schedule *s);
static inline int loom_is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
/* Ring all-gather of `count` elements per rank, n-1 steps. */
void loom_ring_allgather(int rank, int nranks, size_t count, struct loom_schedule *s);

static inline int loom_ring_next(int rank, int nranks) { return (rank + 1) % nranks; }
static inline int loom_ring_prev(int rank, int nranks) {
  return (rank + nranks - 1) % nranks;
}

#endif
