/*
 * model.c — the discrete-event model of one collective call.
 *
 * Every rank is one engine thread (src/engine/engine.c) and is modelled as
 * one resource, busy while it injects a message slice (overhead + bytes /
 * bw of the slice's level), takes one in (overhead, plus bytes / reduce_bw
 * when it reduces), copies locally (bytes / copy_bw) or folds (one-shot).
 * A slice arrives alpha after its injection ends.  An inter-node slice also holds the sending
 * node's NIC and the receiving node's NIC for bytes / nic_bw (the ranks of
 * a node share its NIC) and arrives when both the injection and the NIC
 * are done.  With more ranks per node than cores, every cost and latency
 * is multiplied by ranks / cores.
 *
 * As the engine does, by the same code (the pipeline rule in
 * sched/schedule.h): steps are cut into slices of chunk_bytes; a rank
 * injects its send slices in (step, slice) order, slice k of a step once
 * slice k (or, wait_all, all) of the receive it forwards has been
 * processed; receives are processed in posting order, a reducing one
 * taking the engine's time; a receive that overwrites what its own step
 * sends waits for that send; the i-th send slice of a to b meets the i-th
 * receive slice of b from a.  When an injection and a reduction are both
 * ready, the earlier-ready one goes first (a send on a tie, as the
 * engine's loop posts sends first).  What is not modelled: the engine's
 * limits on posted receives (64, 4 reduce slots) and the transports' flow
 * control (a sender never waits for buffer space at the receiver).
 */
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the model keeps of one step: its slice counts and where its
 * messages go.  Nothing is kept per slice: a slice's state is the rank's
 * position in its send and receive order, and a message in flight is an
 * entry of its channel's queue, so memory grows with steps and with
 * messages in flight, not with the slices of the whole call. */
struct step_aux {
  size_t ks, kr;  /* send and receive slices */
  int send_dst;   /* the simulated rank receiving the sends, -1 */
  int send_chan;  /*   the channel at send_dst that carries them */
  int recv_chan;  /* this rank's channel the receives come on, -1 */
};

/* A slice in flight: when it arrives and how many elements it carries. */
struct flight {
  double arr;
  size_t elems;
};

/* The messages from one simulated rank to another, in sending order: the
 * i-th slice a sends to b meets the i-th slice b receives from a. */
struct channel {
  int src;               /* the sending simulated rank */
  struct flight *q;      /* ring of cap entries (a power of two) */
  size_t head, len, cap;
};

/* A position in a rank's (step, slice) order. */
struct pos {
  int step;
  size_t k;
};

struct rstate {
  const struct loom_sim_rank *sr;
  struct step_aux *aux;     /* per step */
  struct channel *chan;     /* one per distinct source, sorted by src */
  int nchan;
  struct pos send, recv;    /* the next send and receive slices (step nsteps: none left) */
  double cpu_free, busy, last_proc;
};

/* A rank's pending action: at most one per rank is in the heap. */
struct event {
  double t;
  int rank;
};

struct model {
  const struct loom_sim_params *p;
  const struct loom_sim_job *job;
  struct rstate *rs;
  double *nic_tx, *nic_rx;
  double f; /* contention factor */
  double g; /* memory factor of byte costs */
  size_t slice;
  struct event *heap; /* nsim entries at most */
  int *hpos;          /* per simulated rank: its index in heap, -1: none */
  int nheap;
  long events;
  char *err;
  size_t errlen;
};

/* The engine's pipeline rule (sched/schedule.h): the same slices, the
 * same slots, the same forwarding wait. */
static size_t slice_len(size_t count, size_t slice, int k) {
  return loom_slice_len(count, slice, (size_t)k);
}

/* The later of two times (no NaN here; fmax is a libm call). */
static inline double later(double a, double b) {
  return a > b ? a : b;
}

/* ---- the event heap: one entry per rank, earliest first (the lower
 * rank on a tie).  Binary: four children a node measured slower at
 * 16,384 ranks ---- */

enum { HEAP_ARITY = 2 };

static int ev_less(const struct event *a, const struct event *b) {
  return a->t < b->t || (a->t == b->t && a->rank < b->rank);
}

static void heap_place(struct model *m, int i, struct event e) {
  m->heap[i] = e;
  m->hpos[e.rank] = i;
}

static void sift_up(struct model *m, int i, struct event e) {
  while (i > 0 && ev_less(&e, &m->heap[(i - 1) / HEAP_ARITY])) {
    heap_place(m, i, m->heap[(i - 1) / HEAP_ARITY]);
    i = (i - 1) / HEAP_ARITY;
  }
  heap_place(m, i, e);
}

static void sift_down(struct model *m, int i, struct event e) {
  for (;;) {
    int first = HEAP_ARITY * i + 1, c = first;
    if (first >= m->nheap)
      break;
    for (int j = first + 1; j < first + HEAP_ARITY && j < m->nheap; j++)
      if (ev_less(&m->heap[j], &m->heap[c]))
        c = j;
    if (!ev_less(&m->heap[c], &e))
      break;
    heap_place(m, i, m->heap[c]);
    i = c;
  }
  heap_place(m, i, e);
}

/* Sets the rank's pending action to time t (adds or moves its entry). */
static void heap_set(struct model *m, int rank, double t) {
  struct event e = {t, rank};
  int i = m->hpos[rank];
  if (i < 0) {
    sift_up(m, m->nheap++, e);
  } else if (ev_less(&e, &m->heap[i])) {
    sift_up(m, i, e);
  } else {
    sift_down(m, i, e);
  }
}

/* Removes the rank's pending action, if any. */
static void heap_remove(struct model *m, int rank) {
  int i = m->hpos[rank];
  if (i < 0)
    return;
  m->hpos[rank] = -1;
  struct event last = m->heap[--m->nheap];
  if (i == m->nheap)
    return;
  if (i > 0 && ev_less(&last, &m->heap[(i - 1) / HEAP_ARITY]))
    sift_up(m, i, last);
  else
    sift_down(m, i, last);
}

/* ---- per-rank set-up ---- */

static void rstate_free(struct rstate *s) {
  for (int c = 0; c < s->nchan; c++)
    free(s->chan[c].q);
  free(s->chan);
  free(s->aux);
}

/* The first position at or after step i (slice 0) with a slice to send
 * (send) or receive (!send). */
static struct pos first_from(const struct rstate *s, int i, int send) {
  while (i < s->sr->nsteps && (send ? s->aux[i].ks : s->aux[i].kr) == 0)
    i++;
  return (struct pos){i, 0};
}

static int int_cmp(const void *x, const void *y) {
  int a = *(const int *)x, b = *(const int *)y;
  return (a > b) - (a < b);
}

/* The channel of s carrying messages from src, or -1. */
static int chan_find(const struct rstate *s, int src) {
  int lo = 0, hi = s->nchan - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (s->chan[mid].src == src)
      return mid;
    if (s->chan[mid].src < src)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* Slice counts and receive channels: one channel per distinct source. */
static int rstate_init(struct rstate *s, const struct loom_sim_rank *sr, const int *sim_of,
                       size_t slice) {
  memset(s, 0, sizeof *s);
  s->sr = sr;
  size_t n = sr->nsteps > 0 ? (size_t)sr->nsteps : 1;
  s->aux = calloc(n, sizeof *s->aux);
  int *src = malloc(n * sizeof *src);
  if (s->aux == NULL || src == NULL) {
    free(src);
    return -1;
  }
  int nsrc = 0;
  for (int i = 0; i < sr->nsteps; i++) {
    const struct loom_sim_step *st = &sr->steps[i];
    s->aux[i] = (struct step_aux){loom_slices(st->send_peer, st->send_count, slice),
                                  loom_slices(st->recv_peer, st->recv_count, slice), -1, -1, -1};
    if (s->aux[i].kr > 0)
      src[nsrc++] = sim_of[st->recv_peer];
  }
  qsort(src, (size_t)nsrc, sizeof *src, int_cmp);
  s->chan = calloc(nsrc > 0 ? (size_t)nsrc : 1, sizeof *s->chan);
  if (s->chan == NULL) {
    free(src);
    return -1;
  }
  for (int i = 0; i < nsrc; i++)
    if (s->nchan == 0 || s->chan[s->nchan - 1].src != src[i])
      s->chan[s->nchan++].src = src[i];
  free(src);
  for (int i = 0; i < sr->nsteps; i++)
    if (s->aux[i].kr > 0)
      s->aux[i].recv_chan = chan_find(s, sim_of[sr->steps[i].recv_peer]);
  s->send = first_from(s, 0, 1);
  s->recv = first_from(s, 0, 0);
  return 0;
}

/* Where every step's sends go: the receiving rank's channel from this
 * one.  A rank sending to one that never receives from it is a mismatch. */
static int connect_sends(struct model *m, int r) {
  struct rstate *s = &m->rs[r];
  for (int i = 0; i < s->sr->nsteps; i++) {
    if (s->aux[i].ks == 0)
      continue;
    int dst = m->job->sim_of[s->sr->steps[i].send_peer];
    int c = chan_find(&m->rs[dst], r);
    if (c < 0) {
      snprintf(m->err, m->errlen,
               "mismatched messages: rank %d sends to rank %d in step %d, but rank %d "
               "receives nothing from it",
               s->sr->rank, s->sr->steps[i].send_peer, i, s->sr->steps[i].send_peer);
      return -1;
    }
    s->aux[i].send_dst = dst;
    s->aux[i].send_chan = c;
  }
  return 0;
}

/* ---- channels ---- */

static int chan_push(struct channel *c, double arr, size_t elems) {
  if (c->len == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 4;
    struct flight *q = malloc(cap * sizeof *q);
    if (q == NULL)
      return -1;
    for (size_t i = 0; i < c->len; i++)
      q[i] = c->q[(c->head + i) & (c->cap - 1)];
    free(c->q);
    c->q = q;
    c->head = 0;
    c->cap = cap;
  }
  c->q[(c->head + c->len++) & (c->cap - 1)] = (struct flight){arr, elems};
  return 0;
}

static const struct flight *chan_head(const struct channel *c) {
  return c->len > 0 ? &c->q[c->head] : NULL;
}

static void chan_pop(struct channel *c) {
  c->head = (c->head + 1) & (c->cap - 1);
  c->len--;
}

/* ---- positions ---- */

static int pos_before(struct pos a, int step, size_t k) {
  return a.step < step || (a.step == step && a.k <= k);
}

/* Moves p past one slice of its step (of n slices) to the next position. */
static void pos_advance(const struct rstate *s, struct pos *p, size_t n, int send) {
  if (++p->k < n)
    return;
  *p = first_from(s, p->step + 1, send);
}

/* ---- the rank's next action ---- */

enum { ACT_NONE, ACT_SEND, ACT_RECV };

static int is_inter(const struct model *m, int real_a, int real_b) {
  return m->job->node_of[real_a] != m->job->node_of[real_b];
}

/* When the next send can start (INFINITY: not known yet).  Slice k of a
 * step goes once the awaited slice of the receive it forwards is
 * processed; that was this rank's own work, done by cpu_free. */
static double send_ready(const struct model *m, int r, double now) {
  const struct rstate *s = &m->rs[r];
  if (s->send.step >= s->sr->nsteps)
    return INFINITY;
  const struct loom_sim_step *st = &s->sr->steps[s->send.step];
  if (st->wait >= 0) {
    size_t krw = s->aux[st->wait].kr;
    if (krw > 0 &&
        pos_before(s->recv, st->wait, loom_slice_awaited(krw, st->wait_all, s->send.k)))
      return INFINITY;
  }
  double ts = later(s->cpu_free, now);
  if (m->p->nic_bw > 0 && is_inter(m, s->sr->rank, st->send_peer)) {
    int dst = s->aux[s->send.step].send_dst;
    ts = later(ts, later(m->nic_tx[m->job->nic_of[r]], m->nic_rx[m->job->nic_of[dst]]));
  }
  return ts;
}

/* When the next receive can be processed (INFINITY: not arrived yet).  A
 * receive that overwrites what its own step sends waits for that send. */
static double recv_ready(const struct model *m, int r, double now) {
  const struct rstate *s = &m->rs[r];
  if (s->recv.step >= s->sr->nsteps)
    return INFINITY;
  const struct step_aux *a = &s->aux[s->recv.step];
  const struct flight *f = chan_head(&s->chan[a->recv_chan]);
  if (f == NULL)
    return INFINITY;
  if (s->sr->steps[s->recv.step].clobber && s->recv.k < a->ks &&
      pos_before(s->send, s->recv.step, s->recv.k))
    return INFINITY;
  return later(later(f->arr, now), s->cpu_free);
}

/* The rank's next action and when it can start (not before now); on a
 * tie the send goes first, as the engine's loop posts sends first. */
static int next_action(const struct model *m, int r, double now, double *when) {
  double ts = send_ready(m, r, now), tr = recv_ready(m, r, now);
  if (ts == INFINITY && tr == INFINITY)
    return ACT_NONE;
  *when = ts <= tr ? ts : tr;
  return ts <= tr ? ACT_SEND : ACT_RECV;
}

/* Replaces the rank's pending action with its next one. */
static void schedule_rank(struct model *m, int r, double now) {
  double t;
  if (next_action(m, r, now, &t) == ACT_NONE)
    heap_remove(m, r);
  else
    heap_set(m, r, t);
}

static void count_event(struct model *m) {
  if (++m->events % LOOM_SIM_PROGRESS_EVENTS == 0 && m->job->progress != NULL)
    m->job->progress(m->job->progress_arg, m->events);
}

static int do_send(struct model *m, int r, double t) {
  struct rstate *s = &m->rs[r];
  const struct loom_sim_step *st = &s->sr->steps[s->send.step];
  const struct step_aux *a = &s->aux[s->send.step];
  size_t elems = slice_len(st->send_count, m->slice, s->send.k);
  double bytes = (double)(elems * m->job->elem_size);
  int inter = is_inter(m, s->sr->rank, st->send_peer);
  const struct loom_sim_level *lv = inter ? &m->p->inter : &m->p->intra;
  double dur = (lv->overhead + (lv->bw > 0 ? bytes * m->g / lv->bw : 0.0)) * m->f;
  double wire = dur;
  int dst = a->send_dst;
  if (inter && m->p->nic_bw > 0) {
    double nic = bytes / m->p->nic_bw;
    m->nic_tx[m->job->nic_of[r]] = t + nic;
    m->nic_rx[m->job->nic_of[dst]] = t + nic;
    wire = later(wire, nic);
  }
  s->cpu_free = t + dur;
  s->busy += dur;
  if (chan_push(&m->rs[dst].chan[a->send_chan], t + wire + lv->alpha * m->f, elems) != 0) {
    snprintf(m->err, m->errlen, "out of memory for the model's messages in flight");
    return -1;
  }
  pos_advance(s, &s->send, a->ks, 1);
  count_event(m);
  schedule_rank(m, r, t);
  if (dst != r)
    schedule_rank(m, dst, t);
  return 0;
}

static int do_recv(struct model *m, int r, double t) {
  struct rstate *s = &m->rs[r];
  const struct loom_sim_step *st = &s->sr->steps[s->recv.step];
  const struct step_aux *a = &s->aux[s->recv.step];
  struct channel *c = &s->chan[a->recv_chan];
  size_t elems = slice_len(st->recv_count, m->slice, s->recv.k);
  if (chan_head(c)->elems != elems) {
    snprintf(m->err, m->errlen,
             "mismatched messages: rank %d's slice %zu of step %d receives %zu elements from "
             "rank %d, which sent %zu",
             s->sr->rank, s->recv.k, s->recv.step, elems, st->recv_peer, chan_head(c)->elems);
    return -1;
  }
  chan_pop(c);
  const struct loom_sim_level *lv =
      is_inter(m, s->sr->rank, st->recv_peer) ? &m->p->inter : &m->p->intra;
  double dur = lv->overhead;
  if (st->reduce && m->p->reduce_bw > 0)
    dur += (double)(elems * m->job->elem_size) * m->g / m->p->reduce_bw;
  dur *= m->f;
  double done = t + dur;
  s->cpu_free = done;
  s->busy += dur;
  s->last_proc = later(s->last_proc, done);
  pos_advance(s, &s->recv, a->kr, 0);
  count_event(m);
  schedule_rank(m, r, t);
  return 0;
}

/* The rank's end: its last action, then the fold; a local copy that could
 * wait fills the engine's idle time. */
static double rank_finish(const struct model *m, const struct rstate *s) {
  const struct loom_sim_rank *sr = s->sr;
  double esz = (double)m->job->elem_size;
  double end = later(s->cpu_free, s->last_proc), busy = s->busy;
  if (sr->fold_blocks > 1 && sr->fold_count > 0 && m->p->reduce_bw > 0) {
    double fold = (double)(sr->fold_blocks - 1) * (double)sr->fold_count * esz * m->f * m->g /
                  m->p->reduce_bw;
    end += fold;
    busy += fold;
  }
  if (sr->copy_count > 0 && !sr->copy_first && m->p->copy_bw > 0)
    end = later(end, busy + (double)sr->copy_count * esz * m->f * m->g / m->p->copy_bw);
  return end;
}

/* After the heap ran dry: a rank with work left waits for ever, or a
 * message was sent that nobody received. */
static int check_finished(const struct model *m) {
  for (int r = 0; r < m->job->nsim; r++) {
    const struct rstate *s = &m->rs[r];
    const struct loom_sim_step *steps = s->sr->steps;
    if (s->recv.step < s->sr->nsteps) {
      snprintf(m->err, m->errlen,
               "the model found rank %d waiting forever on slice %zu of step %d's receive "
               "from rank %d",
               s->sr->rank, s->recv.k, s->recv.step, steps[s->recv.step].recv_peer);
      return -1;
    }
    if (s->send.step < s->sr->nsteps) {
      snprintf(m->err, m->errlen,
               "the model found rank %d unable to send slice %zu of step %d (it waits on "
               "step %d)",
               s->sr->rank, s->send.k, s->send.step, steps[s->send.step].wait);
      return -1;
    }
  }
  for (int r = 0; r < m->job->nsim; r++)
    for (int c = 0; c < m->rs[r].nchan; c++)
      if (m->rs[r].chan[c].len > 0) {
        snprintf(m->err, m->errlen,
                 "mismatched messages: rank %d received %zu fewer slices than simulated "
                 "rank %d sent it",
                 m->rs[r].sr->rank, m->rs[r].chan[c].len, m->rs[m->rs[r].chan[c].src].sr->rank);
        return -1;
      }
  return 0;
}

static int model_setup(struct model *m) {
  const struct loom_sim_job *job = m->job;
  m->rs = calloc((size_t)job->nsim, sizeof *m->rs);
  m->nic_tx = calloc((size_t)job->nnics + 1, sizeof *m->nic_tx);
  m->nic_rx = calloc((size_t)job->nnics + 1, sizeof *m->nic_rx);
  m->heap = malloc((size_t)job->nsim * sizeof *m->heap);
  m->hpos = malloc((size_t)job->nsim * sizeof *m->hpos);
  if (m->rs == NULL || m->nic_tx == NULL || m->nic_rx == NULL || m->heap == NULL ||
      m->hpos == NULL) {
    snprintf(m->err, m->errlen, "out of memory for %d simulated ranks", job->nsim);
    return -1;
  }
  for (int r = 0; r < job->nsim; r++)
    m->hpos[r] = -1;
  for (int r = 0; r < job->nsim; r++) {
    if (rstate_init(&m->rs[r], &job->ranks[r], job->sim_of, m->slice) != 0) {
      snprintf(m->err, m->errlen, "out of memory for rank %d's steps", job->ranks[r].rank);
      return -1;
    }
  }
  for (int r = 0; r < job->nsim; r++)
    if (connect_sends(m, r) != 0)
      return -1;
  for (int r = 0; r < job->nsim; r++) {
    const struct loom_sim_rank *sr = &job->ranks[r];
    if (sr->copy_count > 0 && sr->copy_first && m->p->copy_bw > 0) {
      m->rs[r].cpu_free =
          (double)sr->copy_count * (double)job->elem_size * m->f * m->g / m->p->copy_bw;
      m->rs[r].busy = m->rs[r].cpu_free;
    }
  }
  return 0;
}

/* Runs the earliest pending action until none is left. */
static int model_loop(struct model *m) {
  for (int r = 0; r < m->job->nsim; r++)
    schedule_rank(m, r, 0.0);
  while (m->nheap > 0) {
    struct event ev = m->heap[0];
    double t;
    int act = next_action(m, ev.rank, ev.t, &t);
    if (act == ACT_NONE) {
      heap_remove(m, ev.rank);
      continue;
    }
    if (t > ev.t) { /* a NIC it needs was taken meanwhile */
      heap_set(m, ev.rank, t);
      continue;
    }
    /* the action reschedules the rank, moving its entry */
    if ((act == ACT_SEND ? do_send(m, ev.rank, t) : do_recv(m, ev.rank, t)) != 0)
      return -1;
  }
  return 0;
}

int loom_sim_model_run(const struct loom_sim_params *p, const struct loom_sim_job *job,
                       double *time, long *events, char *err, size_t errlen) {
  struct model m;
  memset(&m, 0, sizeof m);
  m.p = p;
  m.job = job;
  m.err = err;
  m.errlen = errlen;
  m.f = p->cores > 0 && job->local > p->cores ? (double)job->local / p->cores : 1.0;
  m.g = 1.0;
  if (p->llc_bytes > 0 && p->mem_factor > 1 && job->node_bytes > p->llc_bytes)
    m.g = 1.0 + (p->mem_factor - 1.0) * (1.0 - p->llc_bytes / job->node_bytes);
  m.slice = (job->slice_bytes != 0 ? job->slice_bytes : p->chunk_bytes) / job->elem_size;
  if (m.slice == 0)
    m.slice = 1;
  int rc = -1;
  if (model_setup(&m) != 0 || model_loop(&m) != 0 || check_finished(&m) != 0)
    goto out;
  double end = 0.0;
  for (int r = 0; r < job->nsim; r++)
    end = later(end, rank_finish(&m, &m.rs[r]));
  *time = end;
  *events = m.events;
  rc = 0;
out:
  if (m.rs != NULL)
    for (int r = 0; r < job->nsim; r++)
      rstate_free(&m.rs[r]);
  free(m.rs);
  free(m.nic_tx);
  free(m.nic_rx);
  free(m.heap);
  free(m.hpos);
  return rc;
}
