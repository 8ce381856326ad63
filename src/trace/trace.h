/*
 * trace.h — the flight recorder: per communicator, a ring of its last
 * LOOM_TRACE_BUFFER calls (what was asked, the algorithm and peers the
 * plan chose, and when each call was queued, started and ended), dumped
 * as JSON when the communicator fails, is aborted, on loomCommDump, and
 * (LOOM_DUMP_ON_SIGNAL) on a fatal signal.  tools/loom-trace merges every
 * rank's dump into a verdict (docs/debugging.md).
 *
 * Cost: a few stores per call and at most one or two reads of the coarse
 * real-time clock (a few ns each; its resolution, a few ms, is in the
 * dump): small calls in a quick run share readings (trace_record.h).
 * docs/performance.md has the measured cost.  Real time, not
 * monotonic: dumps of several nodes are compared.
 *
 * Calls are recorded by the thread that issues them and updated by the
 * thread that runs them (a stream's); a dump may read the ring while both
 * write, so an entry is published by its id (written last, release) and a
 * reader keeps a copy only if the id is the same after copying.
 */
#ifndef LOOM_TRACE_TRACE_H
#define LOOM_TRACE_TRACE_H

#include "loom.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LOOM_TRACE_PEERS 4    /* peers recorded per call (the rest are summed) */
#define LOOM_TRACE_SMALL_BYTES (64u << 10)
#define LOOM_TRACE_MAX (1 << 20)

enum loom_trace_state {
  LOOM_TRACE_QUEUED = 0,   /* issued, waiting for earlier work (stream, group) */
  LOOM_TRACE_STARTED = 1,  /* its task is posted on the engine */
  LOOM_TRACE_FINISHED = 2,
  LOOM_TRACE_FAILED = 3,
};

/* What a call asks for, as recorded at issue (small: the ring's entries
 * are 2 cache lines). */
struct loom_trace_call {
  int16_t coll;      /* enum loom_coll; LOOM_TRACE_SPLIT/FINALIZE for communicator calls */
  int16_t op;        /* loomRedOp_t as given (-1: none) */
  int8_t datatype;   /* loomDataType_t (-1: none) */
  int8_t device;     /* loomDevice_t of the buffers */
  uint8_t is_send;
  uint8_t on_stream; /* queued on a stream rather than run at once */
  /* it reads and writes at most LOOM_TRACE_SMALL_BYTES of this rank's
   * buffers: alone in its task (or in a group run directly) and never
   * waiting long, it ends a moment after it starts */
  uint8_t small;
  int32_t root;      /* root or send/recv peer; -1 none */
  uint64_t count;
};
#define LOOM_TRACE_SPLIT 100
#define LOOM_TRACE_FINALIZE 101
#define LOOM_TRACE_SHRINK 102

/* The plan's bytes to and from its first LOOM_TRACE_PEERS peers, and to
 * and from the others together. */
struct loom_trace_peers {
  int32_t n;
  int32_t peer[LOOM_TRACE_PEERS];
  uint64_t sent[LOOM_TRACE_PEERS], received[LOOM_TRACE_PEERS];
  uint64_t other_sent, other_received;
};

/* What planning chose for a call: its algorithm, protocol and bytes per
 * peer.  A plan depends only on the call's shape, and a shape is planned
 * once while the plan cache holds it (api/plan_cache.c), so plans are
 * kept in a ring of their own, numbered, and a call's entry names its
 * plan by number: one store a call.  A dump shows a call's plan while the
 * plan ring still holds that number. */
struct loom_trace_plan {
  _Atomic uint64_t id; /* 1 + plan number; 0 while written or empty */
  const char *algo;    /* static text */
  uint8_t ll;          /* the low-latency protocol */
  struct loom_trace_peers peers;
} __attribute__((aligned(64)));

/* One call, 128 bytes, cache-line aligned: a record touches 2 lines, and
 * the next entry's are prefetched, so a call on a ring larger than the
 * caches does not wait for them.  Which fields hold a value depends on
 * the state: t_started, plan and fused from STARTED on; t_ended once
 * FINISHED or FAILED, and result and blamed once FAILED (each is written
 * before the state that shows it). */
struct loom_trace_entry {
  _Atomic uint64_t id; /* 1 + record number; 0 while written or empty */
  struct loom_trace_call call;
  uint32_t seq;        /* collective number on the communicator (p2p: its own count) */
  uint16_t fused;      /* calls sharing this call's task (a bucket), 1 when alone */
  /* its times are an earlier call's clock reading (loom_trace_record):
   * it ran between that reading and the next entry's */
  uint8_t clock_shared;
  _Atomic int state;
  _Atomic int result;  /* loomResult_t */
  _Atomic int blamed;  /* the rank a failure was blamed on, -1 */
  uint64_t plan;       /* its plan's id in the plan ring; 0: none (a communicator call) */
  _Atomic uint64_t t_queued, t_started, t_ended; /* ns of real time (coarse) */
} __attribute__((aligned(64)));

/* A send's or receive's plan kept for the next call of the same shape
 * (loom_trace_p2p_plan). */
#define LOOM_TRACE_P2P_MEMO 8
struct loom_trace_p2p_memo {
  uint64_t plan; /* 0: none */
  uint64_t bytes;
  int32_t peer;
  int32_t is_send;
};

struct loom_trace {
  int cap;       /* calls kept (LOOM_TRACE_BUFFER) */
  uint64_t mask; /* slots - 1: the ring has a power of two >= cap slots (no division per call) */
  /* records so far: collectives in the low 32 bits, sends/receives above;
   * written by the issuing thread only */
  _Atomic uint64_t counts;
  /* the issuing thread's last clock reading, and the calls that took it
   * since (loom_trace_issue_clock) */
  uint64_t clock_ns;
  unsigned clock_shares;
  /* the plan ring, as many slots as the call ring; plans so far, written
   * under the communicator's op_lock (where calls are planned) */
  struct loom_trace_plan *plans;
  uint64_t nplans;
  /* the last sends' and receives' plans, by peer and direction (written
   * where plans are) */
  struct loom_trace_p2p_memo p2p_memo[LOOM_TRACE_P2P_MEMO];
  _Atomic int dumped; /* dumps written on error (one per communicator) */
  char comm_id[17];   /* the same on every rank of the communicator */
  char name[64];
  int rank, nranks;
  struct loom_trace_entry *entries;
};

/* Calls recorded so far (collectives and sends/receives). */
static inline uint64_t loom_trace_recorded(const struct loom_trace *t) {
  uint64_t counts = atomic_load_explicit(&t->counts, memory_order_relaxed);
  return (counts & 0xffffffffu) + (counts >> 32);
}

/* dump.c: "allreduce", "commSplit", ... for a recorded call's coll, and
 * "queued", "started", "finished", "failed" for a state. */
const char *loom_trace_coll_name(int coll);
const char *loom_trace_state_name(int state);

/* A recorder of `cap` calls (0: NULL, recording off).  NULL also on out of
 * memory (logged: the communicator works without one). */
struct loom_trace *loom_trace_create(int cap, const uint8_t *secret, size_t secret_len,
                                     const char *name, int rank, int nranks);
void loom_trace_free(struct loom_trace *t);

struct loom_schedule;
/* The bytes per peer of schedule s, whose elements are esize bytes. */
void loom_trace_peers_of(const struct loom_schedule *s, size_t esize,
                         struct loom_trace_peers *out);
/* Keeps a plan in the plan ring: algorithm algo (static text), protocol,
 * and the bytes per peer of schedule s (elements of esize bytes) or, s
 * NULL, `peers` (NULL: none).  Returns its id for loom_trace_record and
 * loom_trace_started (0: t is NULL). */
uint64_t loom_trace_plan_add(struct loom_trace *t, const char *algo, int ll,
                             const struct loom_schedule *s, size_t esize,
                             const struct loom_trace_peers *peers);
/* The plan of one send (is_send) or receive of `bytes` with `peer` (-1:
 * any rank): the last one of that shape while the plan ring still holds
 * it (the usual repeated exchange adds none), else a new one.  0 when t
 * is NULL. */
uint64_t loom_trace_p2p_plan(struct loom_trace *t, int peer, int is_send, uint64_t bytes);
/* The plan ring's slot for plan `id` (> 0), and whether it still holds it. */
static inline struct loom_trace_plan *loom_trace_plan_slot(const struct loom_trace *t,
                                                           uint64_t id) {
  return &t->plans[(id - 1) & t->mask];
}
static inline int loom_trace_plan_kept(const struct loom_trace *t, uint64_t id) {
  return atomic_load_explicit(&loom_trace_plan_slot(t, id)->id, memory_order_relaxed) == id;
}

/* The calls below run on every collective: inline, and the clock read
 * only where it tells something (trace_record.h). */
#include "trace/trace_record.h"

/* dump.c: writes the ring as one JSON document to fd, oldest call first.
 * reason: "timeout", "abort", "request", ...; error: the failure's text or
 * NULL.  Uses no allocation and no stdio (a fatal signal's handler calls
 * it).  0 on success, -1 when a write failed. */
int loom_trace_write(const struct loom_trace *t, int fd, const char *reason, const char *error);
/* Writes the dump to `path`, or (path NULL) into directory dir as
 * loom-trace.<comm id>.<rank>.json; `written` (len bytes) gets the path
 * used.  Returns 0, or -1 with errno set.  Safe in a signal handler. */
int loom_trace_dump(const struct loom_trace *t, const char *path, const char *dir,
                    const char *reason, const char *error, char *written, size_t len);

/* signal.c: with LOOM_DUMP_ON_SIGNAL=1, installs handlers (once) for
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT that dump every live
 * recorder into LOOM_TRACE_DUMP_DIR, then hand the signal to the handler
 * that was there before.  Recorders register while alive. */
void loom_trace_register(struct loom_trace *t);
void loom_trace_unregister(struct loom_trace *t);

#endif
