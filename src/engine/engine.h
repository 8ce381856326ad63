/*
 * engine.h — runs a schedule over a transport: slices every step's block,
 * posts sends and receives in the order both sides agree on, reduces what
 * arrives, and waits (spin, then poll) with a deadline, an abort flag and
 * failure notices from the bootstrap ring.
 *
 * A collective is a task: posted (loom_engine_post), progressed by
 * whoever polls (loom_engine_progress: one non-blocking turn), and driven
 * to its end by loom_engine_wait, or by loom_engine_wait_all for the
 * tasks of several communicators on one thread.  One task at a time per
 * engine (a communicator's collectives run in order).
 */
#ifndef LOOM_ENGINE_ENGINE_H
#define LOOM_ENGINE_ENGINE_H

#include "bootstrap/bootstrap.h"
#include "loom.h"
#include "sched/schedule.h"
#include "transport.h"

#include <stdatomic.h>

struct loom_engine_task; /* engine_task.h */
struct fifo_entry;

#define LOOM_ENGINE_CLOCK_TURNS 8u

struct loom_engine {
  int rank, nranks;
  const struct loom_transport *tp;
  void *tp_ctx;
  void **conns;                  /* per rank, NULL when not connected */
  /* NULL, or how to reduce straight from the transport's buffers */
  const struct loom_peek_ops *peek;
  struct loom_bootstrap *bs;     /* failure notices travel its ring */
  const atomic_int *abort_flag;  /* set by loomCommAbort from any thread */
  int wake_fd;                   /* eventfd written by loomCommAbort */
  int timeout_ms;                /* no progress for this long = loomTimeout */
  /* no progress for this long in a collective: a WARN naming the late
   * rank (straggler.c; 0 = never), also given to on_late when set */
  int straggler_warn_ms;
  void (*on_late)(void *arg, int late_rank, const char *text);
  void *on_late_arg;
  int spin_us;
  int busy_wait;                 /* the transport needs polling (shared memory) */
  /* engine_wait.c: the last wait ended after a yield that let another
   * thread run on this CPU (the peer, most likely: it shares our core), so
   * waits yield at once instead of spinning first; gave_cpu: the latest
   * yield of the wait in flight did */
  int yield_first, gave_cpu;
  /* engine_wait.c: the longest kernel sleep of the wait in flight (0: it
   * has not slept), and what the next wait may spin for, when more than
   * spin_us, because the last one slept: a peer that sleeps too answers
   * only when its own sleep ends */
  uint64_t slept_ns, next_spin_ns;
  /* still turns a wait on shared memory spins before its first clock
   * reading (a reading costs 20-30 ns on a VM, as much as such a turn, and
   * most waits of a small call end within a few turns);
   * LOOM_ENGINE_CLOCK_TURNS */
  unsigned clock_turns;
  size_t chunk_bytes;
  /* scratch, grown on demand */
  void *temp;                    /* reduce landing slots */
  size_t temp_slot_bytes;
  int temp_slots;
  struct loom_xfer *xfers;
  size_t xfers_cap;
  unsigned char *recv_done;
  size_t recv_done_cap;
  size_t *step_base; /* per step: its first slot; nsteps + 1 entries */
  /* the fingerprint of the last collective that completed here: a peer's
   * message left over from that call is reported against it */
  uint64_t last_fp[2];
  int blamed; /* the rank the last failed task blamed (-1: none), for the flight recorder */
  /* the task in flight still waited 1 ms or more after its first wait
   * began (ENGINE_LONG_WAIT_NS), so the flight recorder reads its end time */
  int waited;
  size_t step_base_cap;
  int probe_from;                /* where the next receive from any rank starts looking */
  struct loom_engine_task *task; /* the collective in flight (done when none) */
  struct fifo_entry *fifo;       /* its posted receives, in order */
};

/* What one collective call asks of the engine. */
struct loom_engine_op {
  const char *name; /* "allreduce", for messages */
  const struct loom_schedule *sched;
  /* indexed by enum loom_buf: SEND, RECV, SCRATCH (scratch_count elements
   * or more), then user buffers */
  void *const *bufs;
  int nbufs;
  loomDataType_t datatype;
  loomRedOp_t op;     /* a built-in op */
  uint64_t fp[2];     /* the call's fingerprint (engine/fingerprint.h) */
  /* A receive from any rank (loomRecvAny), or NULL: the engine first
   * waits until some connection's next message is a send/recv message,
   * then makes its sender this step's recv_peer (the step's other fields
   * are set, recv_peer is LOOM_PEER_ANY until then) and *source. */
  struct loom_step *any_step;
  int *source;
};

loomResult_t loom_engine_init(struct loom_engine *e);
void loom_engine_fini(struct loom_engine *e);

/* Starts op (the previous task must have ended).  op, its schedule and
 * buffers must stay alive until the task ends.  Returns loomSuccess, or
 * the error that ended it at once (reported). */
loomResult_t loom_engine_post(struct loom_engine *e, const struct loom_engine_op *op);

enum loom_engine_state {
  LOOM_ENGINE_DONE,  /* the task has ended; *res says how */
  LOOM_ENGINE_MOVED, /* data moved this turn */
  LOOM_ENGINE_STILL, /* nothing could move without waiting */
};
/* One turn of progress, never blocking. */
enum loom_engine_state loom_engine_progress(struct loom_engine *e, loomResult_t *res);

/* Drives the posted task to its end on this thread; its result. */
loomResult_t loom_engine_wait(struct loom_engine *e);
/* Drives the posted tasks of n engines to their ends on this thread, all
 * at once; each[i] (when not NULL) gets engine i's result.  Returns the
 * first failure, or loomSuccess. */
loomResult_t loom_engine_wait_all(struct loom_engine *const *es, int n, loomResult_t *each);

/* Called by loom_engine_drive for engine i: first with loomSuccess before
 * any task, then each time its task has ended, with that task's result.
 * Posts engine i's next task and returns 1, or returns 0 when engine i has
 * no more work (it is then not touched again). */
typedef int (*loom_engine_next_fn)(void *arg, int i, loomResult_t ended);
/* Runs chains of tasks on n engines on this thread, all at once: each
 * engine's tasks one after another as `next` posts them.  Returns
 * loomSuccess, or an error of the drive itself (the tasks' results reach
 * `next`). */
loomResult_t loom_engine_drive(struct loom_engine *const *es, int n, loom_engine_next_fn next,
                               void *arg);

/* Whether the task that ended failed without moving or consuming anything
 * (a receive from any rank that timed out or cannot be served), so that
 * the communicator is as it was before the call. */
int loom_engine_left_intact(const struct loom_engine *e);

/* post, then wait. */
loomResult_t loom_engine_run(struct loom_engine *e, const struct loom_engine_op *op);

#endif
