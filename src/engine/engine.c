/*
 * engine.c — executes a schedule: pipelined slices over the transport.
 *
 * Messages on a connection are ordered by (step, slice), skipping empty
 * slices; both ends derive the same order from the same schedule, so no
 * tags are needed.  Receives that reduce are read in place from the
 * transport where it can (shared memory) and otherwise land in a few temp
 * slots; those that copy land straight in recvbuff.
 */
#include "engine/engine_task.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "device/reduce.h"
#include "engine/fingerprint.h"

#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

loomResult_t loom_engine_init(struct loom_engine *e) {
  e->temp = NULL;
  e->temp_slot_bytes = 0;
  e->temp_slots = ENGINE_TEMP_SLOTS;
  e->xfers = NULL;
  e->xfers_cap = 0;
  e->recv_done = NULL;
  e->recv_done_cap = 0;
  e->step_base = NULL;
  e->step_base_cap = 0;
  e->last_fp[0] = e->last_fp[1] = 0;
  e->blamed = -1;
  e->probe_from = 0;
  e->clock_turns = LOOM_ENGINE_CLOCK_TURNS;
  e->slept_ns = e->next_spin_ns = 0;
  e->task = calloc(1, sizeof *e->task);
  e->fifo = calloc(ENGINE_RECV_FIFO, sizeof *e->fifo);
  if (e->task == NULL || e->fifo == NULL) {
    loom_engine_fini(e);
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (engine)");
  }
  e->task->done = 1; /* nothing posted */
  return loomSuccess;
}

void loom_engine_fini(struct loom_engine *e) {
  free(e->task);
  free(e->fifo);
  e->task = NULL;
  e->fifo = NULL;
  free(e->temp);
  free(e->xfers);
  free(e->recv_done);
  free(e->step_base);
  e->temp = NULL;
  e->xfers = NULL;
  e->recv_done = NULL;
  e->step_base = NULL;
}

static char *buf_at(const struct loom_engine_task *r, int buf, size_t off) {
  return (char *)r->op->bufs[buf] + off * r->esize;
}

static int ranges_overlap(const char *a, size_t alen, const char *b, size_t blen) {
  return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

/* Whether the local copy may be done late: no step reads or writes its
 * destination. */
static int copy_can_wait(const struct loom_engine_task *r, const char *dst, size_t len) {
  const struct loom_schedule *s = r->s;
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    if ((st->send_peer >= 0 &&
         ranges_overlap(dst, len, buf_at(r, st->send_buf, st->send_off),
                        st->send_count * r->esize)) ||
        (st->recv_peer >= 0 &&
         ranges_overlap(dst, len, buf_at(r, st->recv_buf, st->recv_off),
                        st->recv_count * r->esize)) ||
        (st->recv_op == LOOM_RECV_REDUCE &&
         ranges_overlap(dst, len, buf_at(r, st->mine_buf, st->mine_off),
                        st->recv_count * r->esize)))
      return 0;
  }
  return 1;
}

/* The schedule's fold (struct loom_fold), once every step is done; a
 * slice at a time so that each slice's blocks stay in cache.  The running
 * value lives in RECV, except that a rank whose own block comes third or
 * later keeps it in SCRATCH block 0 until its own block is added: in place,
 * RECV is that block. */
static void fold_run(const struct loom_engine_task *r) {
  const struct loom_fold *f = &r->s->fold;
  loomDataType_t dt = r->op->datatype;
  loomRedOp_t op = r->op->op;
  for (size_t at = 0; at < f->count; at += r->slice_elems) {
    size_t len = loom_slice_len(f->count - at, r->slice_elems, 0);
    char *recv = buf_at(r, LOOM_BUF_RECV, at);
    char *blk[2];
    for (int j = 0; j < 2; j++)
      blk[j] = j == f->self ? buf_at(r, LOOM_BUF_SEND, at)
                            : buf_at(r, LOOM_BUF_SCRATCH,
                                     (size_t)(j < f->self ? j : j - 1) * f->count + at);
    char *acc = f->self >= 2 ? blk[0] : recv;
    loom_reduce(acc, blk[0], blk[1], len, dt, op);
    for (int j = 2; j < f->nblocks; j++) {
      if (j == f->self) {
        loom_reduce(recv, acc, buf_at(r, LOOM_BUF_SEND, at), len, dt, op);
        acc = recv;
      } else {
        loom_reduce(acc, acc,
                    buf_at(r, LOOM_BUF_SCRATCH, (size_t)(j < f->self ? j : j - 1) * f->count + at),
                    len, dt, op);
      }
    }
    if (f->finalize && op == loomAvg)
      loom_scale_avg(recv, len, dt, f->nblocks);
  }
}

/* Copies up to `max` bytes of the pending local copy. */
static void copy_some(struct loom_engine_task *r, size_t max) {
  size_t n = r->copy_left < max ? r->copy_left : max;
  if (n == 0)
    return;
  memcpy(r->copy_dst, r->copy_src, n);
  r->copy_dst += n;
  r->copy_src += n;
  r->copy_left -= n;
}

/* Elements in slice k of a range of `count` (the pipeline rule is
 * sched/schedule.h's, which loom-sim predicts with). */
static size_t slice_len(const struct loom_engine_task *r, size_t count, int k) {
  return loom_slice_len(count, r->slice_elems, (size_t)k);
}

static loomResult_t grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return loomSuccess;
  free(*p);
  *p = malloc(need * elem);
  if (*p == NULL) {
    *cap = 0;
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (engine)");
  }
  *cap = need;
  return loomSuccess;
}

/* Sizes the engine's scratch for this run and counts its messages. */
static loomResult_t prepare(struct loom_engine_task *r) {
  struct loom_engine *e = r->e;
  const struct loom_schedule *s = r->s;
  LOOM_CHECK(grow((void **)&e->step_base, &e->step_base_cap, (size_t)s->nsteps + 1,
                  sizeof(size_t)));
  r->base = e->step_base;
  size_t total = 0;
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    size_t ks = loom_slices(st->send_peer, st->send_count, r->slice_elems);
    size_t kr = loom_slices(st->recv_peer, st->recv_count, r->slice_elems);
    r->base[i] = total;
    total += loom_step_slots(ks, kr);
    r->sends_total += ks;
    r->recvs_total += kr;
  }
  r->base[s->nsteps] = total;
  r->nslots = total;
  size_t need = total * 2;
  if (need > e->xfers_cap) {
    free(e->xfers);
    e->xfers = malloc(need * (sizeof(struct loom_xfer) + sizeof(size_t)));
    if (e->xfers == NULL) {
      e->xfers_cap = 0;
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (engine)");
    }
    e->xfers_cap = need;
  }
  r->sx = e->xfers;
  r->rx = e->xfers + total;
  r->send_list = (size_t *)(e->xfers + need);
  LOOM_CHECK(grow((void **)&e->recv_done, &e->recv_done_cap, total, 1));
  r->recv_done = e->recv_done;
  /* Slots without a receive count as received. */
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    size_t kr = loom_slices(st->recv_peer, st->recv_count, r->slice_elems);
    memset(r->recv_done + r->base[i], 0, kr);
    memset(r->recv_done + r->base[i] + kr, 1, r->base[i + 1] - r->base[i] - kr);
  }
  /* Slots start 64-byte aligned whatever LOOM_CHUNK_BYTES is. */
  size_t slot_bytes = (r->slice_elems * r->esize + 63) & ~(size_t)63;
  if (slot_bytes > e->temp_slot_bytes) {
    free(e->temp);
    e->temp = malloc(slot_bytes * (size_t)e->temp_slots);
    if (e->temp == NULL) {
      e->temp_slot_bytes = 0;
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (reduce buffers)");
    }
    e->temp_slot_bytes = slot_bytes;
  }
  return loomSuccess;
}

/* Whether slice k of step st's send may go: the slice of the receive it
 * forwards that loom_slice_awaited names has been processed. */
static int forward_ready(const struct loom_engine_task *r, const struct loom_step *st, int k) {
  if (st->wait_step < 0)
    return 1;
  const struct loom_step *w = &r->s->steps[st->wait_step];
  size_t kr = loom_slices(w->recv_peer, w->recv_count, r->slice_elems);
  if (kr == 0)
    return 1;
  return r->recv_done[r->base[st->wait_step] + loom_slice_awaited(kr, st->wait_all, (size_t)k)];
}

static loomResult_t post_sends(struct loom_engine_task *r, int *progressed) {
  const struct loom_transport *tp = r->e->tp;
  while (r->next_send < r->nslots) {
    while (r->next_send >= r->base[r->send_step + 1])
      r->send_step++;
    size_t id = r->next_send;
    int k = (int)(id - r->base[r->send_step]);
    const struct loom_step *st = &r->s->steps[r->send_step];
    size_t n = st->send_peer >= 0 ? slice_len(r, st->send_count, k) : 0;
    if (n > 0) {
      if (!forward_ready(r, st, k))
        return loomSuccess; /* its data has not arrived yet */
      struct loom_xfer *x = &r->sx[id];
      x->buf = buf_at(r, st->send_buf, st->send_off + (size_t)k * r->slice_elems);
      x->len = n * r->esize;
      x->fp[0] = r->op->fp[0];
      x->fp[1] = r->op->fp[1];
      LOOM_CHECK(tp->isend(r->e->conns[st->send_peer], x));
      r->send_list[r->sends_posted++] = id;
      *progressed = 1;
    }
    r->next_send++;
  }
  return loomSuccess;
}

/* Whether slice k of step st's receive writes memory its own send of slice
 * k reads (in place): then the send must have left first. */
static int clobbers_own_send(const struct loom_engine_task *r, const struct loom_step *st, int k) {
  if (st->send_peer < 0)
    return 0;
  size_t at = (size_t)k * r->slice_elems;
  return ranges_overlap(buf_at(r, st->send_buf, st->send_off + at),
                        slice_len(r, st->send_count, k) * r->esize,
                        buf_at(r, st->recv_buf, st->recv_off + at),
                        slice_len(r, st->recv_count, k) * r->esize);
}

/* Whether slice k of step st's reduce-receive, of `bytes`, may be read in
 * place: the transport says so for its size, and it need not wait for its
 * own send to leave (in place, above): that send may need the very FIFO
 * cells the reading would free, and the two ranks of a pair would wait on
 * each other. */
static int may_read_in_place(const struct loom_engine_task *r, const struct loom_step *st, int k,
                             size_t bytes) {
  const struct loom_peek_ops *peek = r->e->peek;
  return peek != NULL && peek->can(r->e->conns[st->recv_peer], bytes) &&
         !clobbers_own_send(r, st, k);
}

static loomResult_t post_recvs(struct loom_engine_task *r, int *progressed) {
  const struct loom_transport *tp = r->e->tp;
  while (r->next_recv < r->nslots && r->fifo_count < ENGINE_RECV_FIFO) {
    while (r->next_recv >= r->base[r->recv_step + 1])
      r->recv_step++;
    size_t id = r->next_recv;
    int k = (int)(id - r->base[r->recv_step]);
    const struct loom_step *st = &r->s->steps[r->recv_step];
    size_t n = st->recv_peer >= 0 ? slice_len(r, st->recv_count, k) : 0;
    if (n > 0) {
      struct loom_xfer *x = &r->rx[id];
      if (st->recv_op == LOOM_RECV_REDUCE && may_read_in_place(r, st, k, n * r->esize)) {
        x->buf = NULL; /* complete_recvs reduces it from the transport's buffers */
      } else if (st->recv_op == LOOM_RECV_REDUCE) {
        if (r->reduce_inflight == r->e->temp_slots)
          return loomSuccess;
        x->buf = (char *)r->e->temp +
                 (r->reduce_posted % (size_t)r->e->temp_slots) * r->e->temp_slot_bytes;
        r->reduce_inflight++;
        r->reduce_posted++;
      } else {
        x->buf = buf_at(r, st->recv_buf, st->recv_off + (size_t)k * r->slice_elems);
      }
      x->len = n * r->esize;
      x->fp[0] = r->op->fp[0];
      x->fp[1] = r->op->fp[1];
      LOOM_CHECK(tp->irecv(r->e->conns[st->recv_peer], x));
      struct fifo_entry *f = &r->fifo[(r->fifo_head + r->fifo_count) % ENGINE_RECV_FIFO];
      f->id = id;
      f->step = r->recv_step;
      f->k = k;
      r->fifo_count++;
      *progressed = 1;
    }
    r->next_recv++;
  }
  return loomSuccess;
}

/* dst = mine op data (or data op mine) for n elements at element `off` of
 * step st's range, then the op's final step where the step says so. */
static void reduce_part(const struct loom_engine_task *r, const struct loom_step *st, size_t off,
                        const void *data, size_t n) {
  char *dst = buf_at(r, st->recv_buf, st->recv_off + off);
  const char *mine = buf_at(r, st->mine_buf, st->mine_off + off);
  if (st->recv_first)
    loom_reduce(dst, data, mine, n, r->op->datatype, r->op->op);
  else
    loom_reduce(dst, mine, data, n, r->op->datatype, r->op->op);
  if (st->finalize && r->op->op == loomAvg)
    loom_scale_avg(dst, n, r->op->datatype, r->e->nranks);
}

/* Reduces received slice x (slot f, step st) part by part as it arrives,
 * straight from the transport's buffers; 1 once all of it is done. */
static int reduce_in_place(struct loom_engine_task *r, const struct fifo_entry *f,
                           const struct loom_step *st, struct loom_xfer *x, int *progressed) {
  const struct loom_peek_ops *peek = r->e->peek;
  void *conn = r->e->conns[st->recv_peer];
  size_t at = (size_t)f->k * r->slice_elems;
  while (!x->done) {
    const void *data;
    size_t len = peek->peek(conn, x, &data);
    if (len == 0)
      return 0; /* not arrived yet (or the connection failed: progress says) */
    reduce_part(r, st, at + r->peek_off / r->esize, data, len / r->esize);
    r->peek_off += len;
    peek->consume(conn, x);
    *progressed = 1;
  }
  r->peek_off = 0;
  return 1;
}

/* Reduces/finishes received slices in posting order. */
static void complete_recvs(struct loom_engine_task *r, int *progressed) {
  while (r->fifo_count > 0) {
    const struct fifo_entry *f = &r->fifo[r->fifo_head];
    struct loom_xfer *x = &r->rx[f->id];
    const struct loom_step *st = &r->s->steps[f->step];
    int in_place = x->buf == NULL;
    if (!x->done && !in_place)
      return;
    if (clobbers_own_send(r, st, f->k) && !(r->next_send > f->id && r->sx[f->id].done))
      return;
    if (in_place) {
      if (!reduce_in_place(r, f, st, x, progressed))
        return;
    } else if (st->recv_op == LOOM_RECV_REDUCE) {
      reduce_part(r, st, (size_t)f->k * r->slice_elems, x->buf,
                  slice_len(r, st->recv_count, f->k));
      r->reduce_inflight--;
    }
    r->recv_done[f->id] = 1;
    r->recvs_processed++;
    r->fifo_head = (r->fifo_head + 1) % ENGINE_RECV_FIFO;
    r->fifo_count--;
    *progressed = 1;
  }
}

static void check_sends(struct loom_engine_task *r) {
  while (r->sends_checked < r->sends_posted && r->sx[r->send_list[r->sends_checked]].done)
    r->sends_checked++;
}

/* The step owning slot id (binary search over the step bases). */
static int step_of(const struct loom_engine_task *r, size_t id) {
  int lo = 0, hi = r->s->nsteps - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (r->base[mid] <= id)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The peer this rank is waiting on, for timeout messages. */
int loom_engine_waited_peer(const struct loom_engine_task *r) {
  if (r->fifo_count > 0)
    return r->s->steps[r->fifo[r->fifo_head].step].recv_peer;
  if (r->sends_checked < r->sends_posted)
    return r->s->steps[step_of(r, r->send_list[r->sends_checked])].send_peer;
  if (r->next_recv < r->nslots)
    return r->s->steps[step_of(r, r->next_recv)].recv_peer;
  return -1;
}

/* The posted receive from `peer` whose message carried another call's
 * fingerprint, if any. */
static const struct loom_xfer *mismatched_recv(const struct loom_engine_task *r, int peer) {
  for (int i = 0; i < r->fifo_count; i++) {
    const struct fifo_entry *f = &r->fifo[(r->fifo_head + i) % ENGINE_RECV_FIFO];
    if (r->s->steps[f->step].recv_peer == peer && r->rx[f->id].fp_mismatch)
      return &r->rx[f->id];
  }
  return NULL;
}

static void remember_call(struct loom_engine *e, const struct loom_engine_op *op) {
  if (!loom_fp_is_sendrecv(op->fp)) {
    e->last_fp[0] = op->fp[0];
    e->last_fp[1] = op->fp[1];
  }
}

void loom_engine_end(struct loom_engine_task *r, loomResult_t result) {
  r->done = 1;
  r->result = result;
}

/* Every message moved: the rest of the local copy, the fold, done. */
static void finish(struct loom_engine_task *r) {
  copy_some(r, r->copy_left);
  if (r->s->fold.count > 0)
    fold_run(r);
  remember_call(r->e, r->op);
  loom_engine_end(r, loomSuccess);
}

/* Starts the schedule's local copy, or leaves it for the waits when no
 * step touches its destination (posting the sends first lets the network
 * start while we copy). */
static void start_copy(struct loom_engine_task *r) {
  const struct loom_local_copy *c = &r->s->copy;
  if (c->count == 0)
    return;
  char *dst = buf_at(r, c->to_buf, c->to_off);
  const char *src = buf_at(r, c->from_buf, c->from_off);
  if (dst == src)
    return;
  r->copy_dst = dst;
  r->copy_src = src;
  r->copy_left = c->count * r->esize;
  if (!copy_can_wait(r, dst, r->copy_left))
    copy_some(r, r->copy_left);
}

/* Starts task r of op with every field set.  Assigned one by one, not
 * from a compound literal: zeroing the whole struct first (rep stos) cost
 * 8 ns of a 90 ns one-rank call (measured).  On LP64 the size check fails
 * the build when a field is added, until it is set here. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct loom_engine_task) == 296,
               "struct loom_engine_task changed: set the new field in task_start");
#endif
static void task_start(struct loom_engine_task *r, struct loom_engine *e,
                       const struct loom_engine_op *op, size_t slice_elems) {
  r->e = e;
  r->op = op;
  r->s = op->sched;
  r->esize = loom_datatype_size(op->datatype);
  r->slice_elems = slice_elems;
  r->nslots = 0;
  r->base = NULL;
  r->sx = r->rx = NULL;
  r->recv_done = NULL;
  r->send_list = NULL;
  r->sends_total = r->sends_posted = r->sends_checked = 0;
  r->recvs_total = r->recvs_processed = 0;
  r->next_send = r->next_recv = 0;
  r->send_step = r->recv_step = 0;
  r->fifo = e->fifo;
  r->fifo_head = r->fifo_count = 0;
  r->reduce_inflight = 0;
  r->reduce_posted = 0;
  r->peek_off = 0;
  r->copy_src = NULL;
  r->copy_dst = NULL;
  r->copy_left = 0;
  r->notice_fd_busy = 0;
  r->prev_gone_at = 0;
  r->prev_gone_rank = -1;
  r->idle_turns = 0;
  r->last_progress = r->now = r->first_wait = 0;
  r->notice_ready = 0;
  r->probing = 0;
  r->intact = 0;
  r->straggle = 0;
  r->heard_run = r->sent_run = 0;
  r->done = 0;
  r->result = loomInProgress;
}

static loomResult_t transport_failed(struct loom_engine_task *r, loomResult_t res,
                                     int failed_peer);

/* Starts the posted task's data movement; its result when it ended at
 * once. */
static loomResult_t begin(struct loom_engine_task *r) {
  start_copy(r);
  if (prepare(r) != loomSuccess) {
    struct loom_notice self = {.suspect = r->e->rank, .reporter = r->e->rank,
                               .kind = LOOM_NOTICE_DIED};
    loom_engine_end(r, loom_engine_fail(r, self, loom_last_error()));
    return r->result;
  }
  if (r->nslots == 0)
    finish(r);
  return loomSuccess;
}

/* Whether every peer's transport can look at a message before receiving
 * it, as a receive from any rank needs; if not, ends the task with
 * loomInvalidArgument naming the first peer that cannot be served (the
 * call is refused whoever sends first; nothing moved, so the
 * communicator stays usable). */
static int any_source_servable(struct loom_engine_task *r) {
  struct loom_engine *e = r->e;
  for (int p = 0; p < e->nranks; p++) {
    uint64_t fp[2], len;
    if (p == e->rank || e->conns[p] == NULL)
      continue;
    if (e->tp->probe == NULL || e->tp->probe(e->conns[p], fp, &len) == LOOM_PROBE_UNSUPPORTED) {
      char via[256];
      if (e->tp->probe == NULL)
        snprintf(via, sizeof via, "the \"%s\" transport", e->tp->name);
      else
        snprintf(via, sizeof via, "%s", loom_last_error());
      loom_engine_end(r, loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                                    "rank %d: %s from any rank cannot be served: rank %d is "
                                    "reached over %s, which cannot look at a message before "
                                    "receiving it (it has no probe); name the sender",
                                    e->rank, r->op->name, p, via));
      return 0;
    }
  }
  return 1;
}

/* The sender of a receive from any rank is known: its step gets it, the
 * caller learns it, and the next such receive looks at the peers after
 * it first (no sender starves the others). */
static void resolve_any(struct loom_engine_task *r, int peer) {
  struct loom_engine *e = r->e;
  r->op->any_step->recv_peer = peer;
  if (r->op->source != NULL)
    *r->op->source = peer;
  e->probe_from = (peer + 1) % e->nranks;
  r->probing = 0;
  begin(r);
}

/* One turn of a receive from any rank whose sender is not known yet:
 * moves the transport's bytes (a failure of any peer surfaces here), then
 * looks at the next message of each connection in turn.  A message of a
 * collective is left for that collective: only a send matches. */
static enum loom_engine_state probe_any(struct loom_engine_task *r) {
  struct loom_engine *e = r->e;
  int progressed = 0, failed_peer = -1;
  loomResult_t st = e->tp->progress(e->tp_ctx, &progressed, &failed_peer);
  if (st != loomSuccess) {
    loom_engine_end(r, transport_failed(r, st, failed_peer));
    return LOOM_ENGINE_DONE;
  }
  int failed = -1; /* a connection that failed: reported only if no sender is found */
  for (int i = 0; i < e->nranks; i++) {
    int p = (e->probe_from + i) % e->nranks;
    uint64_t fp[2], len;
    if (p == e->rank || e->conns[p] == NULL)
      continue;
    int got = e->tp->probe(e->conns[p], fp, &len);
    if (got < 0 && failed < 0)
      failed = p;
    if (got == 1 && loom_fp_is_sendrecv(fp)) {
      resolve_any(r, p);
      return r->done ? LOOM_ENGINE_DONE : LOOM_ENGINE_MOVED;
    }
  }
  if (failed >= 0) {
    loom_engine_end(r, transport_failed(r, loomRemoteError, failed));
    return LOOM_ENGINE_DONE;
  }
  return progressed ? LOOM_ENGINE_MOVED : LOOM_ENGINE_STILL;
}

loomResult_t loom_engine_post(struct loom_engine *e, const struct loom_engine_op *op) {
  if (op->sched->overflow) /* a builder ran out of steps: never run what is left */
    return loom_error(loomInternalError, LOOM_LOG_COLL,
                      "rank %d: %s: its schedule needed more than %d steps", e->rank, op->name,
                      op->sched->cap);
  struct loom_engine_task *r = e->task;
  e->blamed = -1;
  e->waited = 0;
  size_t esize = loom_datatype_size(op->datatype);
  size_t slice = (op->sched->slice_bytes != 0 ? op->sched->slice_bytes : e->chunk_bytes) / esize;
  task_start(r, e, op, slice > 0 ? slice : 1);
  if (op->any_step != NULL) {
    if (!any_source_servable(r))
      return r->result;
    r->probing = 1; /* begins once the sender is known (probe_any) */
    return loomSuccess;
  }
  return begin(r);
}

/* The transport failed a connection (or this rank): blame the peer, or
 * for a mismatch name both calls (a leftover of the call this rank
 * finished last is compared with that call: a rank that was root in its
 * own view only sent). */
static loomResult_t transport_failed(struct loom_engine_task *r, loomResult_t res,
                                     int failed_peer) {
  struct loom_engine *e = r->e;
  struct loom_notice nt = {.suspect = failed_peer >= 0 ? failed_peer : e->rank,
                           .reporter = e->rank,
                           .kind = res == loomInvalidUsage ? LOOM_NOTICE_MISMATCH
                                                           : LOOM_NOTICE_DIED};
  const struct loom_xfer *bad =
      res == loomInvalidUsage && failed_peer >= 0 ? mismatched_recv(r, failed_peer) : NULL;
  if (bad != NULL) {
    memcpy(nt.suspect_fp, bad->peer_fp, sizeof nt.suspect_fp);
    memcpy(nt.reporter_fp, r->op->fp, sizeof nt.reporter_fp);
    if (loom_fp_seq(bad->peer_fp) == loom_fp_seq(e->last_fp) && e->last_fp[0] != 0 &&
        (bad->peer_fp[0] != e->last_fp[0] || bad->peer_fp[1] != e->last_fp[1]))
      memcpy(nt.reporter_fp, e->last_fp, sizeof nt.reporter_fp);
  }
  return loom_engine_fail(r, nt, loom_last_error());
}

enum loom_engine_state loom_engine_progress(struct loom_engine *e, loomResult_t *res) {
  struct loom_engine_task *r = e->task;
  if (!r->done && r->probing) {
    enum loom_engine_state ps = probe_any(r);
    if (ps == LOOM_ENGINE_STILL || (ps == LOOM_ENGINE_MOVED && r->probing))
      return ps;
  }
  if (!r->done) {
    int progressed = 0, failed_peer = -1;
    loomResult_t st = post_sends(r, &progressed);
    if (st == loomSuccess)
      st = post_recvs(r, &progressed);
    if (st == loomSuccess)
      st = e->tp->progress(e->tp_ctx, &progressed, &failed_peer);
    if (st != loomSuccess) {
      loom_engine_end(r, transport_failed(r, st, failed_peer));
    } else {
      complete_recvs(r, &progressed);
      check_sends(r);
      if (r->recvs_processed == r->recvs_total && r->sends_checked == r->sends_total) {
        finish(r);
      } else {
        if (!progressed && r->copy_left > 0) {
          copy_some(r, e->chunk_bytes);
          progressed = 1;
        }
        return progressed ? LOOM_ENGINE_MOVED : LOOM_ENGINE_STILL;
      }
    }
  }
  *res = r->result;
  return LOOM_ENGINE_DONE;
}

int loom_engine_left_intact(const struct loom_engine *e) { return e->task->done && e->task->intact; }

loomResult_t loom_engine_run(struct loom_engine *e, const struct loom_engine_op *op) {
  loomResult_t res = loom_engine_post(e, op);
  if (res != loomSuccess)
    return res;
  return loom_engine_wait(e);
}
