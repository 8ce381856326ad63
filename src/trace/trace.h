/*
 * trace.h — the flight recorder: per communicator, a ring of its last
 * LOOM_TRACE_BUFFER calls (what was asked, the algorithm and peers the
 * plan chose, and when each call was queued, started and ended), dumped
 * as JSON when the communicator fails, is aborted, on loomCommDump, and
 * (LOOM_DUMP_ON_SIGNAL) on a fatal signal.  tools/loom-trace merges every
 * rank's dump into a verdict (docs/debugging.md).
 *
 * Cost: one atomic add and a few stores per call, timestamps from the
 * coarse real-time clock (a few ns; its resolution, a few ms, is in the
 * dump).  Real time, not monotonic: dumps of several nodes are compared.
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
#define LOOM_TRACE_MAX (1 << 20)

enum loom_trace_state {
  LOOM_TRACE_QUEUED = 0,   /* issued, waiting for earlier work (stream, group) */
  LOOM_TRACE_STARTED = 1,  /* its task is posted on the engine */
  LOOM_TRACE_FINISHED = 2,
  LOOM_TRACE_FAILED = 3,
};

/* What a call asks for, as recorded at issue. */
struct loom_trace_call {
  int coll;          /* enum loom_coll; LOOM_TRACE_SPLIT/FINALIZE for communicator calls */
  int datatype, op;  /* loomDataType_t, loomRedOp_t as given (-1: none) */
  int root;          /* root or send/recv peer; -1 none */
  int is_send;
  uint64_t count;
  int device;        /* loomDevice_t of the buffers */
  int on_stream;     /* queued on a stream (or in a group) rather than run at once */
};
#define LOOM_TRACE_SPLIT 100
#define LOOM_TRACE_FINALIZE 101

struct loom_trace_peer {
  int rank;
  uint64_t sent, received; /* bytes the plan moves to and from it */
};

struct loom_trace_entry {
  _Atomic uint64_t id; /* 1 + record number; 0 while written or empty */
  uint64_t seq;        /* collective number on the communicator (p2p: its own count) */
  struct loom_trace_call call;
  const char *algo;    /* static text, NULL until started */
  int ll;              /* the low-latency protocol */
  int fused;           /* calls sharing this call's task (a bucket), 1 when alone */
  int npeers;
  struct loom_trace_peer peers[LOOM_TRACE_PEERS];
  uint64_t other_sent, other_received; /* to and from the peers not listed */
  _Atomic int state;
  _Atomic int result;  /* loomResult_t once ended */
  _Atomic int blamed;  /* the rank a failure was blamed on, -1 */
  _Atomic uint64_t t_queued, t_started, t_ended; /* ns of real time (coarse), 0: not yet */
};

struct loom_trace {
  int cap;
  /* records so far: collectives in the low 32 bits, sends/receives above */
  _Atomic uint64_t counts;
  _Atomic int dumped; /* dumps written on error (one per communicator) */
  char comm_id[17];   /* the same on every rank of the communicator */
  char name[64];
  int rank, nranks;
  struct loom_trace_entry *entries;
};

/* A recorder of `cap` calls (0: NULL, recording off).  NULL also on out of
 * memory (logged: the communicator works without one). */
struct loom_trace *loom_trace_create(int cap, const uint8_t *secret, size_t secret_len,
                                     const char *name, int rank, int nranks);
void loom_trace_free(struct loom_trace *t);

/* Records an issued call (state QUEUED, or STARTED when started != 0);
 * returns its id for the updates below (0: t is NULL). */
uint64_t loom_trace_record(struct loom_trace *t, const struct loom_trace_call *c, int started);

struct loom_schedule;
/* The call's task was posted: algo and the plan's bytes per peer
 * (elements of esize bytes; s NULL: none known). */
void loom_trace_started(struct loom_trace *t, uint64_t id, const char *algo, int ll, int fused,
                        const struct loom_schedule *s, size_t esize);
/* The call's task ended with res (blamed: the rank a failure names, -1). */
void loom_trace_ended(struct loom_trace *t, uint64_t id, loomResult_t res, int blamed);

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
