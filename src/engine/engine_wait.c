/*
 * engine_wait.c — driving posted tasks to their end on the calling thread:
 * progress while data moves; when nothing moves, spin for the first
 * microseconds (a peer on another core answers within them), then yield,
 * then sleep in the kernel on the transports' sockets, the failure-notice
 * socket and the abort eventfd.  On shared memory, a wait after one that
 * slept briefly yields for twice that sleep before sleeping.  A rank
 * whose peer shares its CPU (ranks outnumber cores, or the scheduler put
 * both on one) is not answered while it spins: once a wait ended after a
 * yield that let another thread run here, the next waits yield from their
 * first turn (until a wait ends without that).  Each task keeps its own
 * clock, so a timeout, an abort or a notice ends that task only.  One
 * thread can drive the tasks of several communicators at once
 * (loom_engine_wait_all).
 */
#include "engine/engine_task.h"
#include "core/error.h"
#include "core/cpu.h"
#include "core/timeutil.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_MAX_POLL_FDS 256
#define ENGINE_POLL_SLICE_MS 1000
/* Sleeps between checks of a busy-wait transport (shared memory) grow
 * from MIN to MAX microseconds, 1/8 of the time spent waiting so far. */
#define ENGINE_BUSY_MIN_US 20
#define ENGINE_BUSY_MAX_US 1000
/* How long a task moves nothing after its bootstrap predecessor's socket
 * closed before it fails naming that rank: a rank that finished and
 * exited closes it too, and what it sent is still to be read. */
#define ENGINE_PREV_GONE_GRACE_MS 250u
/* On a transport that wakes no sleeper (shared memory), a wait after one
 * that slept spins (yielding) for twice that sleep, when that is at most
 * this long: two ranks of one host that both slept could otherwise go on
 * taking turns to sleep, each waking to find its answer long there and
 * the other, spun out, asleep (an all-gather of 128 KiB: 145 us a call
 * instead of 2.5, for a dozen calls after one late one).  Longer sleeps
 * mean a peer busy elsewhere, not asleep in a wait: no extra spin. */
#define ENGINE_AFTER_SLEEP_SPIN_MAX_NS 1000000u
/* Within LOOM_SPIN_US, how long to poll before yielding at each turn. */
#define ENGINE_PURE_SPIN_NS 3000u
/* while purely spinning, read the clock every this many still turns */
#define ENGINE_CLOCK_TURNS 16u
/* A task still waiting this long after its first wait began has its end
 * time read by the flight recorder (e->waited). */
#define ENGINE_LONG_WAIT_NS 1000000u
/* A sched_yield that took longer than this ran another thread in between
 * (a bare one costs 0.5-1.5 us on a VM, a switch there and back more). */
#define ENGINE_YIELD_RAN_NS 2000u

enum idle_action { IDLE_SPIN, IDLE_YIELD, IDLE_SLEEP, IDLE_ENDED };

/* Whether notice nt only says that the predecessor's socket closed (read
 * by this rank, not passed on from upstream). */
static int prev_closed(const struct loom_engine_task *r, const struct loom_notice *nt) {
  return nt->kind == LOOM_NOTICE_DIED && nt->reporter == r->e->rank;
}

/* Nanoseconds left before the closed predecessor fails task r (UINT64_MAX:
 * it did not close): a rank that exited cleanly after its last send
 * closes it too, so the task goes on while data moves and fails once
 * nothing moved for ENGINE_PREV_GONE_GRACE_MS since the close. */
static uint64_t prev_gone_left_ns(const struct loom_engine_task *r) {
  if (r->prev_gone_at == 0)
    return UINT64_MAX;
  uint64_t since = r->prev_gone_at > r->last_progress ? r->prev_gone_at : r->last_progress;
  uint64_t still = r->now > since ? r->now - since : 0;
  uint64_t grace = ENGINE_PREV_GONE_GRACE_MS * 1000000ull;
  return still >= grace ? 0 : grace - still;
}

/* Reads the notices waiting on the predecessor's socket; returns 1 and
 * sets *nt for one that ends task r. */
static int notice_ends(struct loom_engine_task *r, struct loom_notice *nt) {
  int got;
  while ((got = loom_bootstrap_read_notice(r->e->bs, 0, nt)) > 0 && nt->kind == LOOM_NOTICE_LATE)
    loom_straggler_heard(r, nt);
  if (got > 0 && !prev_closed(r, nt))
    return 1;
  if (got > 0) {
    if (r->prev_gone_at == 0)
      r->prev_gone_at = r->now;
    r->prev_gone_rank = nt->suspect;
    r->notice_fd_busy = 1; /* a closed socket stays readable */
  } else {
    r->notice_fd_busy = got < 0;
  }
  return 0;
}

/* The abort flag, a notice from upstream, the predecessor gone, or the
 * timeout. */
static int idle_ends(struct loom_engine_task *r) {
  struct loom_engine *e = r->e;
  if (atomic_load_explicit(e->abort_flag, memory_order_acquire)) {
    loom_engine_end(r, loom_error(loomRemoteError, LOOM_LOG_COLL,
                                  "rank %d: %s interrupted: the communicator was aborted or "
                                  "revoked on this rank",
                                  e->rank, r->op->name));
    return 1;
  }
  struct loom_notice nt;
  if (r->notice_ready && notice_ends(r, &nt)) {
    loom_engine_end(r, loom_engine_fail(r, nt, NULL));
    return 1;
  }
  r->notice_ready = 0;
  if (prev_gone_left_ns(r) == 0) {
    nt = (struct loom_notice){.suspect = r->prev_gone_rank, .reporter = e->rank,
                              .kind = LOOM_NOTICE_DIED};
    loom_engine_end(r, loom_engine_fail(r, nt, NULL));
    return 1;
  }
  loom_straggler_check(r);
  uint64_t timeout_ns = e->timeout_ms > 0 ? (uint64_t)e->timeout_ms * 1000000ull : 0;
  if (timeout_ns && r->now - r->last_progress > timeout_ns && r->probing) {
    /* nothing was consumed and no peer waits on this rank: the
     * communicator stays usable, the other ranks are not told */
    r->intact = 1;
    loom_engine_end(r, loom_error(loomTimeout, LOOM_LOG_COLL,
                                  "rank %d: %s from any rank: no message arrived for %d ms "
                                  "(timeout_ms / LOOM_TIMEOUT_MS)",
                                  e->rank, r->op->name, e->timeout_ms));
    return 1;
  }
  if (timeout_ns && r->now - r->last_progress > timeout_ns) {
    struct loom_notice self = {.suspect = loom_engine_waited_peer(r), .reporter = e->rank,
                               .kind = LOOM_NOTICE_TIMEOUT};
    char detail[160];
    snprintf(detail, sizeof detail,
             "no data moved for %d ms (timeout_ms / LOOM_TIMEOUT_MS) while rank %d waited on "
             "rank %d",
             e->timeout_ms, e->rank, self.suspect);
    loom_engine_end(r, loom_engine_fail(r, self, detail));
    return 1;
  }
  return 0;
}

/* Shortens a sleep of *us microseconds to end just after ns nanoseconds
 * from now (UINT64_MAX: no bound), when something falls due then. */
static void wake_within(int *us, uint64_t ns) {
  if (ns / 1000u + 1 < (uint64_t)*us)
    *us = (int)(ns / 1000u) + 1;
}

/* One still turn of task r: what to do before the next progress, and for
 * IDLE_SLEEP for how long.  A wait on shared memory spins e->clock_turns
 * turns before the clock starts it (one that yields at once, or with
 * LOOM_SPIN_US=0, starts it at the first, as does a wait on sockets or
 * verbs), and the clock is then read every ENGINE_CLOCK_TURNS turns while
 * spinning (a read costs as much as a turn, and the first microseconds
 * are when data arrives). */
static enum idle_action idle_step(struct loom_engine_task *r, int *us) {
  struct loom_engine *e = r->e;
  uint64_t spin_ns = (uint64_t)e->spin_us * 1000u;
  if (e->spin_us > 0 && e->next_spin_ns > spin_ns)
    spin_ns = e->next_spin_ns;
  uint64_t pure_ns = e->yield_first ? 0 : ENGINE_PURE_SPIN_NS;
  unsigned turn = r->idle_turns++;
  if (turn == 0)
    e->gave_cpu = 0;
  /* only where a turn is a few loads (shared memory): a turn of a socket
   * or verbs transport costs more than the reading it would save */
  unsigned first = e->busy_wait && !e->yield_first && e->spin_us > 0 ? e->clock_turns : 0;
  if (turn < first)
    return IDLE_SPIN;
  if (turn == first) {
    r->now = r->last_progress = loom_now_ns();
    if (r->first_wait == 0)
      r->first_wait = r->now;
  } else if (r->idle_turns % ENGINE_CLOCK_TURNS != 0 &&
             r->now - r->last_progress < pure_ns &&
             r->now - r->last_progress < spin_ns) {
    return IDLE_SPIN;
  } else {
    r->now = loom_now_ns();
  }
  /* from the first wait on, however many short waits it was cut into */
  if (r->now - r->first_wait >= ENGINE_LONG_WAIT_NS)
    e->waited = 1;
  if (idle_ends(r))
    return IDLE_ENDED;
  uint64_t still = r->now - r->last_progress;
  if (still < spin_ns)
    return still < pure_ns ? IDLE_SPIN : IDLE_YIELD;
  *us = ENGINE_POLL_SLICE_MS * 1000;
  if (e->busy_wait) {
    /* Shared-memory data wakes no fd: sleep in growing steps, so that
     * ranks outnumbering cores still let their peers run. */
    *us = (int)((still - spin_ns) / 8000u) + ENGINE_BUSY_MIN_US;
    if (*us > ENGINE_BUSY_MAX_US)
      *us = ENGINE_BUSY_MAX_US;
  }
  uint64_t timeout_ns = e->timeout_ms > 0 ? (uint64_t)e->timeout_ms * 1000000ull : 0;
  if (timeout_ns)
    wake_within(us, r->last_progress + timeout_ns - r->now);
  wake_within(us, loom_straggler_due_ns(r));
  wake_within(us, prev_gone_left_ns(r));
  return IDLE_SLEEP;
}

/* Adds what task r waits on in the kernel to fds (at most max entries):
 * its transport's sockets, its notice socket (index in *notice_idx, -1
 * when not watched) and the abort eventfd.  Returns how many. */
static int task_fds(struct loom_engine_task *r, struct pollfd *fds, int max, int *notice_idx) {
  struct loom_engine *e = r->e;
  int n = max > 2 ? e->tp->poll_fds(e->tp_ctx, fds, max - 2) : 0;
  int notice_fd = loom_bootstrap_notice_fd(e->bs);
  *notice_idx = -1;
  if (notice_fd >= 0 && !r->notice_fd_busy) {
    *notice_idx = n;
    fds[n++] = (struct pollfd){.fd = notice_fd, .events = POLLIN};
  }
  if (e->wake_fd >= 0)
    fds[n++] = (struct pollfd){.fd = e->wake_fd, .events = POLLIN};
  return n;
}

/* Sleeps in the kernel until a socket, a notice or an abort of any of the
 * n tasks wakes us, at most us microseconds; marks whose notice socket
 * was readable (it is only looked at here: checking it while spinning
 * costs a system call per turn). */
static loomResult_t wait_kernel(struct loom_engine_task *const *rs, int n, int us,
                                struct pollfd *fds, int cap, int *notice_at) {
  int nfds = 0;
  for (int i = 0; i < n; i++) {
    int local;
    int k = task_fds(rs[i], fds + nfds, (cap - nfds) / (n - i), &local);
    notice_at[i] = local >= 0 ? nfds + local : -1;
    nfds += k;
  }
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
  if (ppoll(fds, (nfds_t)nfds, &ts, NULL) < 0 && errno != EINTR)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "poll: %s", strerror(errno));
  for (int i = 0; i < n; i++)
    rs[i]->notice_ready = notice_at[i] >= 0 && fds[notice_at[i]].revents != 0;
  return loomSuccess;
}

/* Where the tasks of one drive keep their kernel-wait bookkeeping. */
struct drive_space {
  struct loom_engine_task **still; /* the tasks that wait, this turn */
  struct pollfd *fds;
  int cap;
  int *notice_at;
};

/* Yields the CPU; notes on each still task's engine whether another
 * thread ran here meanwhile. */
static void yield_cpu(struct drive_space *d, int nstill) {
  uint64_t t0 = loom_now_ns();
  sched_yield();
  int ran = loom_now_ns() - t0 > ENGINE_YIELD_RAN_NS;
  for (int i = 0; i < nstill; i++)
    d->still[i]->e->gave_cpu = ran;
}

/* The still tasks wait together: spin, yield, or sleep on all their fds. */
static void wait_together(struct drive_space *d, int nstill, enum idle_action act, int us) {
  if (act == IDLE_SPIN) {
    loom_cpu_relax();
    return;
  }
  if (act == IDLE_YIELD) {
    yield_cpu(d, nstill);
    return;
  }
  if (act != IDLE_SLEEP)
    return;
  for (int i = 0; i < nstill; i++)
    d->still[i]->e->gave_cpu = 0; /* an answer after a sleep says nothing of our CPU */
  uint64_t t0 = loom_now_ns();
  loomResult_t res = wait_kernel(d->still, nstill, us, d->fds, d->cap, d->notice_at);
  uint64_t slept = loom_now_ns() - t0;
  for (int i = 0; i < nstill; i++) {
    struct loom_engine *e = d->still[i]->e;
    if (e->busy_wait && slept > e->slept_ns) /* a socket's answer would have woken it */
      e->slept_ns = slept;
  }
  if (res != loomSuccess) {
    const char *why = loom_last_error();
    for (int i = 0; i < nstill; i++) {
      struct loom_engine *e = d->still[i]->e;
      struct loom_notice self = {.suspect = e->rank, .reporter = e->rank,
                                 .kind = LOOM_NOTICE_DIED};
      loom_engine_end(d->still[i], loom_engine_fail(d->still[i], self, why));
    }
  }
}

/* What a drive calls when an engine's task ends (NULL: nothing). */
struct drive_next {
  loom_engine_next_fn fn;
  void *arg;
};

/* Task i has ended: asks for its engine's next task.  Returns whether one
 * was posted (else the engine is not touched again: its communicator may
 * be gone). */
static int next_task(const struct drive_next *nx, int i, struct loom_engine_task *r) {
  if (nx == NULL)
    return 0;
  int posted = nx->fn(nx->arg, i, r->result);
  r->idle_turns = 0;
  return posted;
}

/* What a wait that just ended says of the next: answered from our CPU
 * (yield at once), or after a sleep (spin longer). */
static void wait_ended(struct loom_engine *e) {
  e->yield_first = e->gave_cpu;
  uint64_t spin = 2 * e->slept_ns;
  e->next_spin_ns = spin <= ENGINE_AFTER_SLEEP_SPIN_MAX_NS ? spin : 0;
  e->slept_ns = 0;
}

/* Drives the n tasks until all have ended (and nx posts no more): progress
 * each; when none moved, the still ones spin, yield or sleep by the most
 * eager of their policies (one that is still spinning keeps the others
 * awake).  With several tasks each is progressed under its rank's log
 * tag. */
static void drive(struct loom_engine_task *const *rs, int n, struct drive_space *d,
                  const struct drive_next *nx, unsigned char *live) {
  for (;;) {
    int active = 0, moved = 0, nstill = 0, us = ENGINE_POLL_SLICE_MS * 1000;
    enum idle_action act = IDLE_ENDED;
    for (int i = 0; i < n; i++) {
      struct loom_engine_task *r = rs[i];
      loomResult_t res;
      if (!live[i])
        continue;
      if (n > 1)
        loom_log_set_rank(r->e->rank);
      enum loom_engine_state st = loom_engine_progress(r->e, &res);
      if (st != LOOM_ENGINE_STILL && r->idle_turns > 0) /* a wait ended */
        wait_ended(r->e);
      if (st == LOOM_ENGINE_DONE && !(live[i] = (unsigned char)next_task(nx, i, r)))
        continue;
      active++;
      if (st != LOOM_ENGINE_STILL) {
        moved = 1;
        r->idle_turns = 0;
        continue;
      }
      int task_us = us;
      enum idle_action a = idle_step(r, &task_us);
      if (a == IDLE_ENDED)
        continue;
      d->still[nstill++] = r;
      if (a < act)
        act = a;
      if (a == IDLE_SLEEP && task_us < us)
        us = task_us;
    }
    if (active == 0)
      return;
    if (!moved && nstill > 0)
      wait_together(d, nstill, act, us);
  }
}

loomResult_t loom_engine_wait(struct loom_engine *e) {
  struct loom_engine_task *r = e->task, *still[1];
  struct pollfd fds[ENGINE_MAX_POLL_FDS + 2];
  int notice_at[1];
  unsigned char live = 1;
  struct drive_space d = {
      .still = still, .fds = fds, .cap = ENGINE_MAX_POLL_FDS + 2, .notice_at = notice_at};
  drive(&r, 1, &d, NULL, &live);
  return r->result;
}

/* Drives n engines with the bookkeeping in d; with nx, each starts with
 * nx's first post. */
static void drive_with(struct loom_engine *const *es, int n, const struct drive_next *nx,
                       struct loom_engine_task **rs, unsigned char *live,
                       struct drive_space *d) {
  int caller_rank = loom_log_get_rank();
  for (int i = 0; i < n; i++) {
    rs[i] = es[i]->task;
    live[i] = nx == NULL || (unsigned char)nx->fn(nx->arg, i, loomSuccess);
  }
  drive(rs, n, d, nx, live);
  if (n > 1)
    loom_log_set_rank(caller_rank);
}

/* Drives n engines: one on the stack (the path of every blocking call),
 * several in allocated bookkeeping. */
static loomResult_t drive_engines(struct loom_engine *const *es, int n,
                                  const struct drive_next *nx) {
  if (n == 1) {
    struct loom_engine_task *r = NULL, *still[1]; /* (r: set by drive_with) */
    struct pollfd fds[ENGINE_MAX_POLL_FDS + 2];
    int notice_at[1];
    unsigned char live;
    struct drive_space d = {
      .still = still, .fds = fds, .cap = ENGINE_MAX_POLL_FDS + 2, .notice_at = notice_at};
    drive_with(es, 1, nx, &r, &live, &d);
    return loomSuccess;
  }
  int cap = n * (ENGINE_MAX_POLL_FDS + 2);
  struct loom_engine_task **rs = malloc(sizeof *rs * (size_t)n * 2);
  struct pollfd *fds = malloc(sizeof *fds * (size_t)cap);
  int *notice_at = malloc(sizeof *notice_at * (size_t)n);
  unsigned char *live = malloc((size_t)n);
  loomResult_t res = loomSuccess;
  if (rs == NULL || fds == NULL || notice_at == NULL || live == NULL) {
    res = loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (engine wait)");
  } else {
    struct drive_space d = {.still = rs + n, .fds = fds, .cap = cap, .notice_at = notice_at};
    drive_with(es, n, nx, rs, live, &d);
  }
  free(rs);
  free(fds);
  free(notice_at);
  free(live);
  return res;
}

loomResult_t loom_engine_wait_all(struct loom_engine *const *es, int n, loomResult_t *each) {
  loomResult_t first = drive_engines(es, n, NULL);
  if (first != loomSuccess)
    return first;
  for (int i = 0; i < n; i++) {
    loomResult_t res = es[i]->task->result;
    if (each != NULL)
      each[i] = res;
    if (res != loomSuccess && first == loomSuccess)
      first = res;
  }
  return first;
}

loomResult_t loom_engine_drive(struct loom_engine *const *es, int n, loom_engine_next_fn next,
                               void *arg) {
  struct drive_next nx = {.fn = next, .arg = arg};
  return drive_engines(es, n, &nx);
}
