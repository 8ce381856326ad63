/*
 * engine_task.h — inside the engine: one collective in flight (struct
 * loom_engine_task), shared by the data path (engine.c), the waiting
 * policy (engine_wait.c) and failure blame (blame.c).
 */
#ifndef LOOM_ENGINE_TASK_H
#define LOOM_ENGINE_TASK_H

#include "engine/engine.h"

#include <stddef.h>
#include <stdint.h>

#define ENGINE_TEMP_SLOTS 4
#define ENGINE_RECV_FIFO 64

/* A posted receive, in posting order. */
struct fifo_entry {
  size_t id;
  int step, k;
};

struct loom_engine_task {
  struct loom_engine *e;
  const struct loom_engine_op *op;
  const struct loom_schedule *s;
  size_t esize, slice_elems;
  size_t nslots;       /* slots: (step, slice) pairs, step-major */
  size_t *base;        /* per step: its first slot; base[nsteps] = nslots */
  struct loom_xfer *sx, *rx;
  unsigned char *recv_done;
  size_t *send_list;   /* slot ids of posted sends, in order */
  size_t sends_total, sends_posted, sends_checked;
  size_t recvs_total, recvs_processed;
  size_t next_send, next_recv; /* slot cursors */
  int send_step, recv_step;    /* the steps of those slots */
  struct fifo_entry *fifo;     /* ENGINE_RECV_FIFO entries, the engine's */
  int fifo_head, fifo_count;
  int reduce_inflight;
  size_t reduce_posted;
  size_t peek_off; /* bytes reduced so far of the front receive, read in place */
  /* the schedule's local copy, done a slice at a time while waiting */
  const char *copy_src;
  char *copy_dst;
  size_t copy_left;
  /* The notice socket stays readable, so stop polling it rather than
   * spin: the predecessor already sent data of a later bootstrap operation
   * (it finished this collective and called loomCommFinalize), or its
   * socket closed. */
  int notice_fd_busy;
  /* The predecessor's bootstrap socket closed at this clock (0: it did
   * not), and the rank it names.  A rank that finished its sends and exited
   * cleanly closes it too, with the data this task needs already in its
   * FIFO: the task fails only once it moved nothing for
   * ENGINE_PREV_GONE_GRACE_MS after (engine_wait.c). */
  uint64_t prev_gone_at;
  int prev_gone_rank;
  /* waiting (engine_wait.c): still turns since data last moved, the clock
   * at the first of them, the clock now, the clock when this task first
   * waited (0: not yet), and whether the notice socket was readable at the
   * last kernel wait */
  unsigned idle_turns;
  uint64_t last_progress, now, first_wait;
  int notice_ready;
  int probing;         /* a receive from any rank, its sender not known yet */
  int intact;          /* ended having moved nothing: the communicator is as before */
  int straggle;        /* straggler.c: 0, 1 once this rank announced it waits, 2 warned */
  int heard_run;       /* straggler.c: ranks in a row up to the predecessor that wait */
  int sent_run;        /* straggler.c: the run this rank last announced */
  int done;            /* ended; result says how */
  loomResult_t result;
};

/* engine.c: the peer this rank is waiting on, for timeout messages (-1:
 * none). */
int loom_engine_waited_peer(const struct loom_engine_task *r);
/* engine.c: ends the task with `result` (already reported). */
void loom_engine_end(struct loom_engine_task *r, loomResult_t result);

/* straggler.c: at each still turn of a waiting task (r->now set): sends
 * this rank's LATE notice, then warns, as the time passes. */
void loom_straggler_check(struct loom_engine_task *r);
/* straggler.c: a LATE notice read from the ring predecessor: taken when
 * it is about r's call (and r's own announcement follows), dropped
 * otherwise. */
void loom_straggler_heard(struct loom_engine_task *r, const struct loom_notice *nt);
/* straggler.c: nanoseconds until the next straggler step is due
 * (UINT64_MAX: none), to bound a sleep. */
uint64_t loom_straggler_due_ns(const struct loom_engine_task *r);

/* blame.c: ends the run with a failure blamed on nt.suspect, after
 * listening to the ring for a better diagnosis, and tells the ring.
 * Returns the error (logged once). */
loomResult_t loom_engine_fail(struct loom_engine_task *r, struct loom_notice nt,
                              const char *detail);

#endif
