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

/* A send or receive slice in its rank's order. */
struct slot_ref {
  size_t slot;
  int step, k;
};

struct rstate {
  const struct loom_sim_rank *sr;
  size_t *base; /* per step: first slot; nsteps + 1 entries */
  size_t nslots;
  double *arr, *proc, *txd; /* per slot: arrival, processed, injected (-1: not yet) */
  int *dst_sim;             /* per slot with a send: the receiving simulated rank */
  size_t *dst_slot;         /*   and its slot there */
  struct slot_ref *sends, *recvs;
  size_t nsends, nrecvs, next_send, next_recv;
  double cpu_free, busy, last_proc;
  unsigned version; /* of its live heap entry */
};

/* A rank's pending action; only the latest one pushed per rank counts. */
struct event {
  double t;
  int rank;
  unsigned version;
};

struct model {
  const struct loom_sim_params *p;
  const struct loom_sim_job *job;
  struct rstate *rs;
  double *nic_tx, *nic_rx;
  double f; /* contention factor */
  double g; /* memory factor of byte costs */
  size_t slice;
  struct event *heap;
  size_t nheap, capheap;
  long events;
};

/* The engine's pipeline rule (sched/schedule.h): the same slices, the
 * same slots, the same forwarding wait. */
static size_t slice_len(size_t count, size_t slice, int k) {
  return loom_slice_len(count, slice, (size_t)k);
}

static size_t step_ks(const struct loom_sim_step *st, size_t slice) {
  return loom_slices(st->send_peer, st->send_count, slice);
}

static size_t step_kr(const struct loom_sim_step *st, size_t slice) {
  return loom_slices(st->recv_peer, st->recv_count, slice);
}

/* ---- the event heap ---- */

static int heap_push(struct model *m, double t, int rank, unsigned version) {
  if (m->nheap == m->capheap) {
    size_t cap = m->capheap ? 2 * m->capheap : 1024;
    struct event *h = realloc(m->heap, cap * sizeof *h);
    if (h == NULL)
      return -1;
    m->heap = h;
    m->capheap = cap;
  }
  size_t i = m->nheap++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (m->heap[up].t < t || (m->heap[up].t == t && m->heap[up].rank <= rank))
      break;
    m->heap[i] = m->heap[up];
    i = up;
  }
  m->heap[i].t = t;
  m->heap[i].rank = rank;
  m->heap[i].version = version;
  return 0;
}

static struct event heap_pop(struct model *m) {
  struct event top = m->heap[0], last = m->heap[--m->nheap];
  size_t i = 0, n = m->nheap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && (m->heap[c + 1].t < m->heap[c].t ||
                      (m->heap[c + 1].t == m->heap[c].t && m->heap[c + 1].rank < m->heap[c].rank)))
      c++;
    if (last.t < m->heap[c].t || (last.t == m->heap[c].t && last.rank <= m->heap[c].rank))
      break;
    m->heap[i] = m->heap[c];
    i = c;
  }
  if (n > 0)
    m->heap[i] = last;
  return top;
}

/* ---- per-rank set-up ---- */

static void rstate_free(struct rstate *s) {
  free(s->base);
  free(s->arr);
  free(s->proc);
  free(s->txd);
  free(s->dst_sim);
  free(s->dst_slot);
  free(s->sends);
  free(s->recvs);
}

static int rstate_init(struct rstate *s, const struct loom_sim_rank *sr, size_t slice) {
  memset(s, 0, sizeof *s);
  s->sr = sr;
  s->base = malloc(((size_t)sr->nsteps + 1) * sizeof *s->base);
  if (s->base == NULL)
    return -1;
  for (int i = 0; i < sr->nsteps; i++) {
    size_t ks = step_ks(&sr->steps[i], slice), kr = step_kr(&sr->steps[i], slice);
    s->base[i] = s->nslots;
    s->nslots += loom_step_slots(ks, kr);
    s->nsends += ks;
    s->nrecvs += kr;
  }
  s->base[sr->nsteps] = s->nslots;
  size_t n = s->nslots ? s->nslots : 1;
  s->arr = malloc(n * sizeof *s->arr);
  s->proc = malloc(n * sizeof *s->proc);
  s->txd = malloc(n * sizeof *s->txd);
  s->dst_sim = malloc(n * sizeof *s->dst_sim);
  s->dst_slot = malloc(n * sizeof *s->dst_slot);
  s->sends = malloc((s->nsends ? s->nsends : 1) * sizeof *s->sends);
  s->recvs = malloc((s->nrecvs ? s->nrecvs : 1) * sizeof *s->recvs);
  if (!s->arr || !s->proc || !s->txd || !s->dst_sim || !s->dst_slot || !s->sends || !s->recvs)
    return -1;
  size_t a = 0, b = 0;
  for (int i = 0; i < sr->nsteps; i++) {
    size_t ks = step_ks(&sr->steps[i], slice), kr = step_kr(&sr->steps[i], slice);
    for (size_t k = 0; k < ks; k++)
      s->sends[a++] = (struct slot_ref){.slot = s->base[i] + k, .step = i, .k = (int)k};
    for (size_t k = 0; k < kr; k++)
      s->recvs[b++] = (struct slot_ref){.slot = s->base[i] + k, .step = i, .k = (int)k};
  }
  for (size_t i = 0; i < s->nslots; i++)
    s->arr[i] = s->proc[i] = s->txd[i] = -1.0;
  return 0;
}

/* ---- matching: the i-th send slice of a to b meets b's i-th receive slice from a ---- */

struct end {
  int src, dst; /* simulated ranks */
  int owner;    /* the rank whose slot it is */
  size_t slot;
  size_t bytes;
};

static int end_cmp(const void *x, const void *y) {
  const struct end *a = x, *b = y;
  if (a->src != b->src)
    return a->src < b->src ? -1 : 1;
  if (a->dst != b->dst)
    return a->dst < b->dst ? -1 : 1;
  return a->slot < b->slot ? -1 : a->slot > b->slot;
}

static int match(struct model *m, char *err, size_t errlen) {
  const struct loom_sim_job *job = m->job;
  size_t ns = 0, nr = 0;
  for (int r = 0; r < job->nsim; r++) {
    ns += m->rs[r].nsends;
    nr += m->rs[r].nrecvs;
  }
  if (ns != nr) {
    snprintf(err, errlen, "the schedules send %zu slices but receive %zu", ns, nr);
    return -1;
  }
  struct end *se = malloc((ns ? ns : 1) * sizeof *se), *re = malloc((nr ? nr : 1) * sizeof *re);
  if (se == NULL || re == NULL) {
    free(se);
    free(re);
    snprintf(err, errlen, "out of memory matching %zu messages", ns);
    return -1;
  }
  size_t a = 0, b = 0;
  for (int r = 0; r < job->nsim; r++) {
    const struct rstate *s = &m->rs[r];
    for (size_t i = 0; i < s->nsends; i++) {
      const struct loom_sim_step *st = &s->sr->steps[s->sends[i].step];
      se[a++] = (struct end){.src = r,
                             .dst = job->sim_of[st->send_peer],
                             .owner = r,
                             .slot = s->sends[i].slot,
                             .bytes = slice_len(st->send_count, m->slice, s->sends[i].k)};
    }
    for (size_t i = 0; i < s->nrecvs; i++) {
      const struct loom_sim_step *st = &s->sr->steps[s->recvs[i].step];
      re[b++] = (struct end){.src = job->sim_of[st->recv_peer],
                             .dst = r,
                             .owner = r,
                             .slot = s->recvs[i].slot,
                             .bytes = slice_len(st->recv_count, m->slice, s->recvs[i].k)};
    }
  }
  qsort(se, ns, sizeof *se, end_cmp);
  qsort(re, nr, sizeof *re, end_cmp);
  int rc = 0;
  for (size_t i = 0; i < ns; i++) {
    if (se[i].src != re[i].src || se[i].dst != re[i].dst || se[i].bytes != re[i].bytes) {
      snprintf(err, errlen,
               "mismatched messages: the %zu-th slice sent is rank %d -> %d, %zu elements, "
               "but the matching receive is rank %d <- %d, %zu elements",
               i, job->ranks[se[i].src].rank, job->ranks[se[i].dst].rank, se[i].bytes,
               job->ranks[re[i].dst].rank, job->ranks[re[i].src].rank, re[i].bytes);
      rc = -1;
      break;
    }
    struct rstate *s = &m->rs[se[i].owner];
    s->dst_sim[se[i].slot] = re[i].owner;
    s->dst_slot[se[i].slot] = re[i].slot;
  }
  free(se);
  free(re);
  return rc;
}

/* ---- the rank's next action ---- */

enum { ACT_NONE, ACT_SEND, ACT_RECV };

static int is_inter(const struct model *m, int real_a, int real_b) {
  return m->job->node_of[real_a] != m->job->node_of[real_b];
}

/* The rank's next action and when it can start (not before now). */
static int next_action(const struct model *m, int r, double now, double *when) {
  const struct rstate *s = &m->rs[r];
  const struct loom_sim_rank *sr = s->sr;
  double ts = INFINITY, tr = INFINITY;
  if (s->next_send < s->nsends) {
    const struct slot_ref *e = &s->sends[s->next_send];
    const struct loom_sim_step *st = &sr->steps[e->step];
    double ready = 0.0;
    int known = 1;
    if (st->wait >= 0) {
      size_t krw = step_kr(&sr->steps[st->wait], m->slice);
      if (krw > 0) {
        ready = s->proc[s->base[st->wait] + loom_slice_awaited(krw, st->wait_all, (size_t)e->k)];
        known = ready >= 0.0;
      }
    }
    if (known) {
      ts = fmax(fmax(ready, s->cpu_free), now);
      if (m->p->nic_bw > 0 && is_inter(m, sr->rank, st->send_peer)) {
        int dst = s->dst_sim[e->slot];
        ts = fmax(ts, fmax(m->nic_tx[m->job->nic_of[r]], m->nic_rx[m->job->nic_of[dst]]));
      }
    }
  }
  if (s->next_recv < s->nrecvs) {
    const struct slot_ref *e = &s->recvs[s->next_recv];
    const struct loom_sim_step *st = &sr->steps[e->step];
    double ready = s->arr[e->slot];
    if (ready >= 0.0 && st->clobber && (size_t)e->k < step_ks(st, m->slice))
      ready = s->txd[e->slot] >= 0.0 ? fmax(ready, s->txd[e->slot]) : -1.0;
    if (ready >= 0.0)
      tr = fmax(fmax(ready, now), s->cpu_free);
  }
  if (ts == INFINITY && tr == INFINITY)
    return ACT_NONE;
  *when = ts <= tr ? ts : tr;
  return ts <= tr ? ACT_SEND : ACT_RECV;
}

/* Replaces the rank's pending action with its next one. */
static int schedule_rank(struct model *m, int r, double now) {
  double t;
  unsigned v = ++m->rs[r].version;
  if (next_action(m, r, now, &t) == ACT_NONE)
    return 0;
  return heap_push(m, t, r, v);
}

static int do_send(struct model *m, int r, double t) {
  struct rstate *s = &m->rs[r];
  const struct slot_ref *e = &s->sends[s->next_send++];
  const struct loom_sim_step *st = &s->sr->steps[e->step];
  double bytes = (double)(slice_len(st->send_count, m->slice, e->k) * m->job->elem_size);
  int inter = is_inter(m, s->sr->rank, st->send_peer);
  const struct loom_sim_level *lv = inter ? &m->p->inter : &m->p->intra;
  double dur = (lv->overhead + (lv->bw > 0 ? bytes * m->g / lv->bw : 0.0)) * m->f;
  double wire = dur;
  int dst = s->dst_sim[e->slot];
  if (inter && m->p->nic_bw > 0) {
    double nic = bytes / m->p->nic_bw;
    m->nic_tx[m->job->nic_of[r]] = t + nic;
    m->nic_rx[m->job->nic_of[dst]] = t + nic;
    wire = fmax(wire, nic);
  }
  s->cpu_free = t + dur;
  s->busy += dur;
  s->txd[e->slot] = t + dur;
  m->rs[dst].arr[s->dst_slot[e->slot]] = t + wire + lv->alpha * m->f;
  m->events++;
  if (schedule_rank(m, r, t) != 0)
    return -1;
  return dst != r ? schedule_rank(m, dst, t) : 0;
}

static int do_recv(struct model *m, int r, double t) {
  struct rstate *s = &m->rs[r];
  const struct slot_ref *e = &s->recvs[s->next_recv++];
  const struct loom_sim_step *st = &s->sr->steps[e->step];
  const struct loom_sim_level *lv =
      is_inter(m, s->sr->rank, st->recv_peer) ? &m->p->inter : &m->p->intra;
  double dur = lv->overhead;
  if (st->reduce && m->p->reduce_bw > 0)
    dur += (double)(slice_len(st->recv_count, m->slice, e->k) * m->job->elem_size) * m->g /
           m->p->reduce_bw;
  dur *= m->f;
  double done = t + dur;
  s->cpu_free = done;
  s->busy += dur;
  s->proc[e->slot] = done;
  s->last_proc = fmax(s->last_proc, done);
  m->events++;
  return schedule_rank(m, r, t);
}

/* The rank's end: its last action, then the fold; a local copy that could
 * wait fills the engine's idle time. */
static double rank_finish(const struct model *m, const struct rstate *s) {
  const struct loom_sim_rank *sr = s->sr;
  double esz = (double)m->job->elem_size;
  double end = fmax(s->cpu_free, s->last_proc), busy = s->busy;
  if (sr->fold_blocks > 1 && sr->fold_count > 0 && m->p->reduce_bw > 0) {
    double fold = (double)(sr->fold_blocks - 1) * (double)sr->fold_count * esz * m->f * m->g /
                  m->p->reduce_bw;
    end += fold;
    busy += fold;
  }
  if (sr->copy_count > 0 && !sr->copy_first && m->p->copy_bw > 0)
    end = fmax(end, busy + (double)sr->copy_count * esz * m->f * m->g / m->p->copy_bw);
  return end;
}

static void describe_stuck(const struct model *m, char *err, size_t errlen) {
  for (int r = 0; r < m->job->nsim; r++) {
    const struct rstate *s = &m->rs[r];
    if (s->next_recv < s->nrecvs) {
      const struct slot_ref *e = &s->recvs[s->next_recv];
      snprintf(err, errlen,
               "the model found rank %d waiting forever on slice %d of step %d's receive "
               "from rank %d",
               s->sr->rank, e->k, e->step, s->sr->steps[e->step].recv_peer);
      return;
    }
    if (s->next_send < s->nsends) {
      const struct slot_ref *e = &s->sends[s->next_send];
      snprintf(err, errlen,
               "the model found rank %d unable to send slice %d of step %d (it waits on "
               "step %d)",
               s->sr->rank, e->k, e->step, s->sr->steps[e->step].wait);
      return;
    }
  }
  snprintf(err, errlen, "the model stopped early");
}

int loom_sim_model_run(const struct loom_sim_params *p, const struct loom_sim_job *job,
                       double *time, long *events, char *err, size_t errlen) {
  struct model m;
  memset(&m, 0, sizeof m);
  m.p = p;
  m.job = job;
  m.f = p->cores > 0 && job->local > p->cores ? (double)job->local / p->cores : 1.0;
  m.g = 1.0;
  if (p->llc_bytes > 0 && p->mem_factor > 1 && job->node_bytes > p->llc_bytes)
    m.g = 1.0 + (p->mem_factor - 1.0) * (1.0 - p->llc_bytes / job->node_bytes);
  m.slice = (job->slice_bytes != 0 ? job->slice_bytes : p->chunk_bytes) / job->elem_size;
  if (m.slice == 0)
    m.slice = 1;
  int rc = -1;
  m.rs = calloc((size_t)job->nsim, sizeof *m.rs);
  m.nic_tx = calloc((size_t)job->nnics + 1, sizeof *m.nic_tx);
  m.nic_rx = calloc((size_t)job->nnics + 1, sizeof *m.nic_rx);
  if (m.rs == NULL || m.nic_tx == NULL || m.nic_rx == NULL) {
    snprintf(err, errlen, "out of memory for %d simulated ranks", job->nsim);
    goto out;
  }
  for (int r = 0; r < job->nsim; r++) {
    if (rstate_init(&m.rs[r], &job->ranks[r], m.slice) != 0) {
      snprintf(err, errlen, "out of memory for rank %d's slices", job->ranks[r].rank);
      goto out;
    }
  }
  if (match(&m, err, errlen) != 0)
    goto out;
  for (int r = 0; r < job->nsim; r++) {
    const struct loom_sim_rank *sr = &job->ranks[r];
    if (sr->copy_count > 0 && sr->copy_first && p->copy_bw > 0) {
      m.rs[r].cpu_free =
          (double)sr->copy_count * (double)job->elem_size * m.f * m.g / p->copy_bw;
      m.rs[r].busy = m.rs[r].cpu_free;
    }
    if (schedule_rank(&m, r, 0.0) != 0)
      goto oom;
  }
  while (m.nheap > 0) {
    struct event ev = heap_pop(&m);
    if (ev.version != m.rs[ev.rank].version)
      continue; /* superseded */
    double t;
    int act = next_action(&m, ev.rank, ev.t, &t);
    if (act == ACT_NONE)
      continue;
    if (t > ev.t) { /* a NIC it needs was taken meanwhile */
      if (heap_push(&m, t, ev.rank, ev.version) != 0)
        goto oom;
      continue;
    }
    if ((act == ACT_SEND ? do_send(&m, ev.rank, t) : do_recv(&m, ev.rank, t)) != 0)
      goto oom;
  }
  double end = 0.0;
  for (int r = 0; r < job->nsim; r++) {
    const struct rstate *s = &m.rs[r];
    if (s->next_send < s->nsends || s->next_recv < s->nrecvs) {
      describe_stuck(&m, err, errlen);
      goto out;
    }
    end = fmax(end, rank_finish(&m, s));
  }
  *time = end;
  *events = m.events;
  rc = 0;
  goto out;
oom:
  snprintf(err, errlen, "out of memory for the model's events");
out:
  if (m.rs != NULL)
    for (int r = 0; r < job->nsim; r++)
      rstate_free(&m.rs[r]);
  free(m.rs);
  free(m.nic_tx);
  free(m.nic_rx);
  free(m.heap);
  return rc;
}
