/*
 * engine.c — executes a schedule: pipelined slices over the transport.
 *
 * Messages on a connection are ordered by (step, slice), skipping empty
 * slices; both ends derive the same order from the same schedule, so no
 * tags are needed.  Receives that reduce are read in place from the
 * transport where it can (shared memory) and otherwise land in a few temp
 * slots; those that copy land straight in recvbuff.
 */
#include "engine/engine.h"
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

#define ENGINE_TEMP_SLOTS 4
#define ENGINE_RECV_FIFO 64
#define ENGINE_MAX_POLL_FDS 256
#define ENGINE_POLL_SLICE_MS 1000
/* Sleeps between checks of a busy-wait transport (shared memory) grow
 * from MIN to MAX microseconds, 1/8 of the time spent waiting so far. */
#define ENGINE_BUSY_MIN_US 20
/* Within LOOM_SPIN_US, how long to poll before yielding at each turn. */
#define ENGINE_PURE_SPIN_NS 3000u
/* while purely spinning, read the clock every this many still turns */
#define ENGINE_CLOCK_TURNS 16u
#define ENGINE_BUSY_MAX_US 1000
/* After a timeout, how long to listen for upstream notices naming the rank
 * that is really stuck. */
#define ENGINE_BLAME_GRACE_MS 1000
/* After a mismatch, how long to listen for a lower pair of ranks. */
#define ENGINE_MISMATCH_GRACE_MS 300

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
  return loomSuccess;
}

void loom_engine_fini(struct loom_engine *e) {
  free(e->temp);
  free(e->xfers);
  free(e->recv_done);
  free(e->step_base);
  e->temp = NULL;
  e->xfers = NULL;
  e->recv_done = NULL;
  e->step_base = NULL;
}

/* A posted receive, in posting order. */
struct fifo_entry {
  size_t id;
  int step, k;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

struct run {
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
  int fifo_head, fifo_count;
  int reduce_inflight;
  size_t reduce_posted;
  size_t peek_off; /* bytes reduced so far of the front receive, read in place */
  /* the schedule's local copy, done a slice at a time while waiting */
  const char *copy_src;
  char *copy_dst;
  size_t copy_left;
  /* The predecessor already sent data of a later bootstrap operation (it
   * finished this collective and called loomCommFinalize): the notice
   * socket stays readable, so stop polling it rather than spin. */
  int notice_fd_busy;
  /* not cleared per call (fifo_head/fifo_count say what is valid); every
   * other field is set one by one in loom_engine_run: add new ones there */
  struct fifo_entry fifo[ENGINE_RECV_FIFO];
};

static char *buf_at(const struct run *r, int buf, size_t off) {
  return (char *)r->op->bufs[buf] + off * r->esize;
}

static int ranges_overlap(const char *a, size_t alen, const char *b, size_t blen) {
  return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

/* Whether the local copy may be done late: no step reads or writes its
 * destination. */
static int copy_can_wait(const struct run *r, const char *dst, size_t len) {
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
static void fold_run(const struct run *r) {
  const struct loom_fold *f = &r->s->fold;
  loomDataType_t dt = r->op->datatype;
  loomRedOp_t op = r->op->op;
  for (size_t at = 0; at < f->count; at += r->slice_elems) {
    size_t len = f->count - at < r->slice_elems ? f->count - at : r->slice_elems;
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
static void copy_some(struct run *r, size_t max) {
  size_t n = r->copy_left < max ? r->copy_left : max;
  if (n == 0)
    return;
  memcpy(r->copy_dst, r->copy_src, n);
  r->copy_dst += n;
  r->copy_src += n;
  r->copy_left -= n;
}

/* Elements in slice k of a range of `count`. */
static size_t slice_len(const struct run *r, size_t count, int k) {
  size_t start = (size_t)k * r->slice_elems;
  if (start >= count)
    return 0;
  return count - start < r->slice_elems ? count - start : r->slice_elems;
}

static size_t nslices(const struct run *r, size_t count) {
  return (count + r->slice_elems - 1) / r->slice_elems;
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
static loomResult_t prepare(struct run *r) {
  struct loom_engine *e = r->e;
  const struct loom_schedule *s = r->s;
  LOOM_CHECK(grow((void **)&e->step_base, &e->step_base_cap, (size_t)s->nsteps + 1,
                  sizeof(size_t)));
  r->base = e->step_base;
  size_t total = 0;
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    size_t ks = st->send_peer >= 0 ? nslices(r, st->send_count) : 0;
    size_t kr = st->recv_peer >= 0 ? nslices(r, st->recv_count) : 0;
    r->base[i] = total;
    total += ks > kr ? ks : kr;
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
    size_t kr = st->recv_peer >= 0 ? nslices(r, st->recv_count) : 0;
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

/* Whether slice k of step st's send may go: the receive it forwards (all
 * of it, or its slice k) has been processed.  Receives complete in posting
 * order, so the last slice needed stands for all before it. */
static int forward_ready(const struct run *r, const struct loom_step *st, int k) {
  if (st->wait_step < 0)
    return 1;
  const struct loom_step *w = &r->s->steps[st->wait_step];
  size_t kr = w->recv_peer >= 0 ? nslices(r, w->recv_count) : 0;
  if (kr == 0)
    return 1;
  size_t j = st->wait_all || (size_t)k >= kr ? kr - 1 : (size_t)k;
  return r->recv_done[r->base[st->wait_step] + j];
}

static loomResult_t post_sends(struct run *r, int *progressed) {
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
static int clobbers_own_send(const struct run *r, const struct loom_step *st, int k) {
  if (st->send_peer < 0)
    return 0;
  size_t at = (size_t)k * r->slice_elems;
  return ranges_overlap(buf_at(r, st->send_buf, st->send_off + at),
                        slice_len(r, st->send_count, k) * r->esize,
                        buf_at(r, st->recv_buf, st->recv_off + at),
                        slice_len(r, st->recv_count, k) * r->esize);
}

/* Whether slice k of step st's reduce-receive may be read in place.  Not
 * when it must wait for its own send to leave (in place, above): that send
 * may need the very FIFO cells the reading would free, and the two ranks
 * of a pair would wait on each other. */
static int may_read_in_place(const struct run *r, const struct loom_step *st, int k) {
  const struct loom_peek_ops *peek = r->e->peek;
  return peek != NULL && peek->can(r->e->conns[st->recv_peer]) && !clobbers_own_send(r, st, k);
}

static loomResult_t post_recvs(struct run *r, int *progressed) {
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
      if (st->recv_op == LOOM_RECV_REDUCE && may_read_in_place(r, st, k)) {
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

/* Reduces received slice x (slot f, step st) part by part as it arrives,
 * straight from the transport's buffers; 1 once all of it is done. */
static int reduce_in_place(struct run *r, const struct fifo_entry *f,
                           const struct loom_step *st, struct loom_xfer *x, int *progressed) {
  const struct loom_peek_ops *peek = r->e->peek;
  void *conn = r->e->conns[st->recv_peer];
  size_t at = (size_t)f->k * r->slice_elems;
  while (!x->done) {
    const void *data;
    size_t len = peek->peek(conn, x, &data);
    if (len == 0)
      return 0; /* not arrived yet (or the connection failed: progress says) */
    size_t off = at + r->peek_off / r->esize, n = len / r->esize;
    char *dst = buf_at(r, st->recv_buf, st->recv_off + off);
    const char *mine = buf_at(r, st->mine_buf, st->mine_off + off);
    if (st->recv_first)
      loom_reduce(dst, data, mine, n, r->op->datatype, r->op->op);
    else
      loom_reduce(dst, mine, data, n, r->op->datatype, r->op->op);
    if (st->finalize && r->op->op == loomAvg)
      loom_scale_avg(dst, n, r->op->datatype, r->e->nranks);
    r->peek_off += len;
    peek->consume(conn, x);
    *progressed = 1;
  }
  r->peek_off = 0;
  return 1;
}

/* Reduces/finishes received slices in posting order. */
static void complete_recvs(struct run *r, int *progressed) {
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
      size_t at = (size_t)f->k * r->slice_elems, n = slice_len(r, st->recv_count, f->k);
      char *dst = buf_at(r, st->recv_buf, st->recv_off + at);
      const char *mine = buf_at(r, st->mine_buf, st->mine_off + at);
      if (st->recv_first)
        loom_reduce(dst, x->buf, mine, n, r->op->datatype, r->op->op);
      else
        loom_reduce(dst, mine, x->buf, n, r->op->datatype, r->op->op);
      if (st->finalize && r->op->op == loomAvg)
        loom_scale_avg(dst, n, r->op->datatype, r->e->nranks);
      r->reduce_inflight--;
    }
    r->recv_done[f->id] = 1;
    r->recvs_processed++;
    r->fifo_head = (r->fifo_head + 1) % ENGINE_RECV_FIFO;
    r->fifo_count--;
    *progressed = 1;
  }
}

static void check_sends(struct run *r) {
  while (r->sends_checked < r->sends_posted && r->sx[r->send_list[r->sends_checked]].done)
    r->sends_checked++;
}

/* The step owning slot id (binary search over the step bases). */
static int step_of(const struct run *r, size_t id) {
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
static int waited_peer(const struct run *r) {
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
static const struct loom_xfer *mismatched_recv(const struct run *r, int peer) {
  for (int i = 0; i < r->fifo_count; i++) {
    const struct fifo_entry *f = &r->fifo[(r->fifo_head + i) % ENGINE_RECV_FIFO];
    if (r->s->steps[f->step].recv_peer == peer && r->rx[f->id].fp_mismatch)
      return &r->rx[f->id];
  }
  return NULL;
}

/* Whether `in` (not a timeout), just read from the ring predecessor,
 * should replace the diagnosis `nt`.  This rank's own diagnoses are
 * guesses: a timeout names the peer it waited on, which may itself be
 * waiting; a closed connection may belong to a peer that failed for another
 * reason.  A death or a mismatch seen upstream is certain; an abort is news
 * unless the predecessor already told us of a failure (then it is the
 * aftermath). */
static int better_diagnosis(const struct loom_notice *nt, const struct loom_notice *in,
                            int me, int heard_before) {
  if (nt->kind == LOOM_NOTICE_MISMATCH && in->kind == LOOM_NOTICE_MISMATCH) {
    /* Two calls at the same position that differ explain more than a
     * message left over from an earlier call; then the lowest pair. */
    int in_same = loom_fp_seq(in->suspect_fp) == loom_fp_seq(in->reporter_fp);
    int nt_same = loom_fp_seq(nt->suspect_fp) == loom_fp_seq(nt->reporter_fp);
    if (in_same != nt_same)
      return in_same;
    return in->reporter < nt->reporter ||
           (in->reporter == nt->reporter && in->suspect < nt->suspect);
  }
  int nt_guess = nt->reporter == me && nt->kind != LOOM_NOTICE_MISMATCH;
  if (in->kind == LOOM_NOTICE_MISMATCH) /* certain, even when it names this rank */
    return nt->kind != LOOM_NOTICE_MISMATCH;
  if (in->suspect == me || (in->suspect == nt->suspect && in->kind == nt->kind))
    return 0;
  if (in->reporter == me) /* our predecessor's socket closed: a guess too */
    return !heard_before && nt_guess && nt->kind == LOOM_NOTICE_TIMEOUT;
  switch (in->kind) {
  case LOOM_NOTICE_MISMATCH:
    return nt->kind != LOOM_NOTICE_MISMATCH;
  case LOOM_NOTICE_DIED:
    return nt_guess || nt->kind == LOOM_NOTICE_TIMEOUT || nt->kind == LOOM_NOTICE_ABORT;
  default: /* abort */
    return !heard_before && (nt_guess || nt->kind == LOOM_NOTICE_TIMEOUT);
  }
}

/* A mismatch is seen by both ranks of a pair, and by several pairs when
 * several ranks differ.  Every rank reports the lowest pair it hears of,
 * lower rank first as the reference ("rank S called X but rank R called
 * Y", R < S), so all ranks name the same first mismatching rank. */
static void orient_mismatch(struct loom_notice *nt) {
  if (nt->kind != LOOM_NOTICE_MISMATCH || nt->suspect > nt->reporter)
    return;
  int32_t r = nt->reporter;
  nt->reporter = nt->suspect;
  nt->suspect = r;
  uint64_t fp[2] = {nt->reporter_fp[0], nt->reporter_fp[1]};
  memcpy(nt->reporter_fp, nt->suspect_fp, sizeof fp);
  memcpy(nt->suspect_fp, fp, sizeof fp);
}

/* Timeouts are diagnosed from wait-for edges: every rank that times out
 * sends "I wait on X" to its ring successor and forwards the edges it
 * hears.  A rank that is not in the collective sends nothing and forwards
 * nothing, so each rank hears from an unbroken run of ranks just before it
 * on the ring: the first silent rank walking back from the predecessor is
 * the one that stopped.  The chain of edges from this rank explains it. */
struct wait_graph {
  int *waits_on; /* per rank, -1 = unknown */
  int n, me;
};

/* Follows the chain from this rank; writes it as text and returns its end. */
static int wait_chain_end(const struct wait_graph *g, char *text, size_t len, int *reporter) {
  int at = g->me, steps = 0;
  size_t o = (size_t)snprintf(text, len, "wait chain %d", at);
  *reporter = g->me;
  while (g->waits_on[at] >= 0 && steps++ < g->n) {
    *reporter = at;
    at = g->waits_on[at];
    if (o < len)
      o += (size_t)snprintf(text + o, len - o, " -> %d", at);
  }
  if (steps > g->n && o < len) /* a cycle: ranks waiting on each other */
    snprintf(text + o, len - o, " (a cycle: did ranks call collectives in different orders?)");
  return at;
}

/* Records an edge heard from upstream and passes it on (unless it came
 * from our successor, i.e. went all the way round).  Returns 1 if new. */
static int learn_edge(struct loom_engine *e, struct wait_graph *g, const struct loom_notice *in) {
  if (in->reporter == g->me || in->reporter >= g->n || g->waits_on[in->reporter] == in->suspect)
    return 0;
  g->waits_on[in->reporter] = in->suspect;
  if (in->reporter != loom_ring_next(e->rank, e->nranks))
    loom_bootstrap_send_notice(e->bs, in);
  return 1;
}

/* Ends the run with a failure blamed on nt.suspect and tells the ring.
 * Notices only come from the ring predecessor and are forwarded to the
 * successor, so every rank learns what upstream ranks found. */
static loomResult_t fail_run(struct run *r, struct loom_notice nt, const char *detail_in) {
  struct loom_engine *e = r->e;
  char detail[512] = "";
  if (detail_in != NULL) /* it may be the last-error buffer we overwrite below */
    snprintf(detail, sizeof detail, "%s", detail_in);
  int own = nt.reporter == e->rank;
  struct wait_graph g = {malloc(sizeof(int) * (size_t)e->nranks), e->nranks, e->rank};
  int timeout_mode = nt.kind == LOOM_NOTICE_TIMEOUT && g.waits_on != NULL;
  if (timeout_mode) {
    for (int i = 0; i < e->nranks; i++)
      g.waits_on[i] = -1;
    struct loom_notice mine = {waited_peer(r), e->rank, LOOM_NOTICE_TIMEOUT, {0, 0}, {0, 0}};
    if (mine.suspect >= 0) {
      g.waits_on[e->rank] = mine.suspect;
      loom_bootstrap_send_notice(e->bs, &mine);
    }
    if (!own)
      learn_edge(e, &g, &nt);
  }
  /* A closed connection may be explained by upstream: wait briefly before
   * telling others; a timeout collects edges for a while. */
  int certain = !own || nt.kind == LOOM_NOTICE_MISMATCH;
  orient_mismatch(&nt);
  int grace_ms = timeout_mode                        ? ENGINE_BLAME_GRACE_MS
                 : nt.kind == LOOM_NOTICE_MISMATCH ? ENGINE_MISMATCH_GRACE_MS
                 : certain                           ? 0
                                                     : 200;
  int sent = timeout_mode;
  if (certain && !timeout_mode) {
    loom_bootstrap_send_notice(e->bs, &nt);
    sent = 1;
  }
  uint64_t grace_end = loom_deadline_ms(grace_ms);
  int heard = !own;
  struct loom_notice in;
  while (grace_ms > 0 && loom_ms_left(grace_end) > 0 &&
         loom_bootstrap_read_notice(e->bs, loom_ms_left(grace_end), &in) > 0) {
    /* its socket closed (or our own notice came round): nothing more comes */
    int prev_gone = in.kind == LOOM_NOTICE_DIED && in.reporter == e->rank;
    if (in.kind == LOOM_NOTICE_TIMEOUT && !prev_gone) {
      if (timeout_mode)
        learn_edge(e, &g, &in);
    } else {
      orient_mismatch(&in);
      if (better_diagnosis(&nt, &in, e->rank, heard)) {
        int was_mismatch = nt.kind == LOOM_NOTICE_MISMATCH;
        nt = in;
        timeout_mode = 0;
        sent = 0;
        if (was_mismatch) { /* pass the lower pair on while still listening */
          loom_bootstrap_send_notice(e->bs, &nt);
          sent = 1;
        }
      }
    }
    heard = 1;
    if (prev_gone)
      break;
  }
  if (timeout_mode) {
    char chain[200];
    int reporter, silent = -1;
    nt.suspect = wait_chain_end(&g, chain, sizeof chain, &reporter);
    nt.reporter = reporter;
    for (int i = 1; i < e->nranks && silent < 0; i++) {
      int q = (e->rank - i + e->nranks) % e->nranks;
      if (g.waits_on[q] < 0)
        silent = q;
    }
    if (silent >= 0 && silent != nt.suspect) {
      snprintf(chain + strlen(chain), sizeof chain - strlen(chain),
               "; rank %d, upstream on the ring, reported no wait of its own", silent);
      nt.suspect = silent;
      nt.reporter = e->rank;
    }
    snprintf(detail + strlen(detail), sizeof detail - strlen(detail), "%s%s",
             detail[0] ? "; " : "", chain);
  }
  free(g.waits_on);
  if (!sent)
    loom_bootstrap_send_notice(e->bs, &nt);
  if (nt.kind == LOOM_NOTICE_TIMEOUT && nt.suspect == e->rank) /* never blame ourselves */
    return loom_error(loomTimeout, LOOM_LOG_COLL,
                      "rank %d: %s timed out waiting on rank %d, and no rank is stalled on "
                      "its own: the ranks wait on each other, so they are probably in "
                      "different calls (different roots or peers, or collectives in "
                      "different orders)%s%s",
                      e->rank, r->op->name, waited_peer(r), detail[0] ? "; here: " : "",
                      detail);
  if (nt.kind == LOOM_NOTICE_MISMATCH && (nt.suspect_fp[0] | nt.reporter_fp[0]) != 0 &&
      (nt.suspect_fp[0] != nt.reporter_fp[0] || nt.suspect_fp[1] != nt.reporter_fp[1])) {
    char theirs[128], ours[128];
    loom_fp_text(nt.suspect_fp, theirs, sizeof theirs);
    loom_fp_text(nt.reporter_fp, ours, sizeof ours);
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "rank %d: %s failed: mismatched calls: rank %d called %s but rank %d "
                      "called %s (every rank must make the same collective calls in the "
                      "same order)",
                      e->rank, r->op->name, nt.suspect, theirs, nt.reporter, ours);
  }
  if (nt.kind == LOOM_NOTICE_MISMATCH) /* same call, different message sizes */
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "rank %d: %s failed: ranks %d and %d exchanged messages of different "
                      "sizes (mismatched counts, send/recv sizes or all-to-all-v counts)%s%s",
                      e->rank, r->op->name, nt.reporter, nt.suspect,
                      detail[0] ? "; here: " : "", detail);
  return loom_error(loom_notice_result(nt.kind), LOOM_LOG_COLL,
                    "rank %d: %s failed: rank %d %s (reported by rank %d)%s%s", e->rank,
                    r->op->name, nt.suspect, loom_notice_text(nt.kind), nt.reporter,
                    detail[0] ? "; here: " : "", detail);
}

/* Blocks in the kernel until a socket, a notice or an abort wakes us;
 * *notice_ready tells whether the bootstrap notice socket is readable (it
 * is only looked at here: checking it while spinning costs a syscall per
 * turn). */
static loomResult_t wait_kernel(struct run *r, int us, int *notice_ready) {
  struct loom_engine *e = r->e;
  struct pollfd fds[ENGINE_MAX_POLL_FDS + 2];
  int n = e->tp->poll_fds(e->tp_ctx, fds, ENGINE_MAX_POLL_FDS);
  int notice_fd = loom_bootstrap_notice_fd(e->bs), notice_idx = -1;
  if (notice_fd >= 0 && !r->notice_fd_busy) {
    notice_idx = n;
    fds[n].fd = notice_fd;
    fds[n].events = POLLIN;
    fds[n].revents = 0;
    n++;
  }
  if (e->wake_fd >= 0) {
    fds[n].fd = e->wake_fd;
    fds[n].events = POLLIN;
    fds[n].revents = 0;
    n++;
  }
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  if (ppoll(fds, (nfds_t)n, &ts, NULL) < 0 && errno != EINTR)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "poll: %s", strerror(errno));
  *notice_ready = notice_idx >= 0 && fds[notice_idx].revents != 0;
  return loomSuccess;
}

static void remember_call(struct loom_engine *e, const struct loom_engine_op *op) {
  if (!loom_fp_is_sendrecv(op->fp)) {
    e->last_fp[0] = op->fp[0];
    e->last_fp[1] = op->fp[1];
  }
}

loomResult_t loom_engine_run(struct loom_engine *e, const struct loom_engine_op *op) {
  const struct loom_schedule *s = op->sched;
  /* Field by field: zero-filling the struct cost a slow `rep stos` per
   * call, and the fifo (1 KiB) needs no clearing.  prepare() sets the
   * pointers into the engine's storage. */
  struct run r;
  r.e = e;
  r.op = op;
  r.s = s;
  r.nslots = 0;
  r.base = NULL;
  r.sx = r.rx = NULL;
  r.recv_done = NULL;
  r.send_list = NULL;
  r.sends_total = r.sends_posted = r.sends_checked = 0;
  r.recvs_total = r.recvs_processed = 0;
  r.next_send = r.next_recv = 0;
  r.send_step = r.recv_step = 0;
  r.fifo_head = r.fifo_count = 0;
  r.reduce_inflight = 0;
  r.reduce_posted = 0;
  r.peek_off = 0;
  r.copy_src = NULL;
  r.copy_dst = NULL;
  r.copy_left = 0;
  r.notice_fd_busy = 0;
  r.esize = loom_datatype_size(op->datatype);
  r.slice_elems = (s->slice_bytes != 0 ? s->slice_bytes : e->chunk_bytes) / r.esize;
  if (r.slice_elems == 0)
    r.slice_elems = 1;
  const struct loom_local_copy *c = &s->copy;
  if (c->count > 0) {
    char *dst = buf_at(&r, c->to_buf, c->to_off);
    const char *src = buf_at(&r, c->from_buf, c->from_off);
    if (dst != src) {
      r.copy_dst = dst;
      r.copy_src = src;
      r.copy_left = c->count * r.esize;
      /* Posting the sends first lets the network start while we copy. */
      if (!copy_can_wait(&r, dst, r.copy_left))
        copy_some(&r, r.copy_left);
    }
  }
  if (prepare(&r) != loomSuccess) {
    struct loom_notice self = {e->rank, e->rank, LOOM_NOTICE_DIED, {0, 0}, {0, 0}};
    return fail_run(&r, self, loom_last_error());
  }
  if (r.nslots == 0) {
    copy_some(&r, r.copy_left);
    if (s->fold.count > 0)
      fold_run(&r);
    remember_call(e, op);
    return loomSuccess;
  }

  uint64_t spin_ns = (uint64_t)e->spin_us * 1000u;
  uint64_t now = loom_now_ns(), last_progress = now;
  unsigned idle_turns = 0;
  uint64_t timeout_ns = e->timeout_ms > 0 ? (uint64_t)e->timeout_ms * 1000000ull : 0;
  int notice_ready = 0;
  for (;;) {
    int progressed = 0, failed_peer = -1;
    loomResult_t res = post_sends(&r, &progressed);
    if (res == loomSuccess)
      res = post_recvs(&r, &progressed);
    if (res == loomSuccess)
      res = e->tp->progress(e->tp_ctx, &progressed, &failed_peer);
    if (res != loomSuccess) {
      /* No failed peer: this rank itself failed (out of memory). */
      struct loom_notice nt = {failed_peer >= 0 ? failed_peer : e->rank, e->rank,
                               res == loomInvalidUsage ? LOOM_NOTICE_MISMATCH
                                                       : LOOM_NOTICE_DIED,
                               {0, 0}, {0, 0}};
      const struct loom_xfer *bad = res == loomInvalidUsage && failed_peer >= 0
                                        ? mismatched_recv(&r, failed_peer)
                                        : NULL;
      if (bad != NULL) {
        memcpy(nt.suspect_fp, bad->peer_fp, sizeof nt.suspect_fp);
        memcpy(nt.reporter_fp, op->fp, sizeof nt.reporter_fp);
        /* A leftover of the call this rank finished last: compare with that
         * call (a rank that was root in its own view only sent). */
        if (loom_fp_seq(bad->peer_fp) == loom_fp_seq(e->last_fp) && e->last_fp[0] != 0 &&
            (bad->peer_fp[0] != e->last_fp[0] || bad->peer_fp[1] != e->last_fp[1]))
          memcpy(nt.reporter_fp, e->last_fp, sizeof nt.reporter_fp);
      }
      return fail_run(&r, nt, loom_last_error());
    }
    complete_recvs(&r, &progressed);
    check_sends(&r);
    if (r.recvs_processed == r.recvs_total && r.sends_checked == r.sends_total) {
      copy_some(&r, r.copy_left);
      if (s->fold.count > 0)
        fold_run(&r);
      remember_call(e, op);
      return loomSuccess;
    }
    if (!progressed && r.copy_left > 0) {
      copy_some(&r, e->chunk_bytes);
      progressed = 1;
    }
    if (progressed) {
      idle_turns = 0;
      continue;
    }
    /* Still: the clock starts the wait at the first still turn and is then
     * read every ENGINE_CLOCK_TURNS turns while spinning (a read costs as
     * much as a turn, and the first microseconds are when data arrives). */
    if (idle_turns++ == 0) {
      now = last_progress = loom_now_ns();
    } else if (idle_turns % ENGINE_CLOCK_TURNS != 0 && now - last_progress < ENGINE_PURE_SPIN_NS &&
               now - last_progress < spin_ns) {
      cpu_relax();
      continue;
    } else {
      now = loom_now_ns();
    }
    if (*e->abort_flag)
      return loom_error(loomRemoteError, LOOM_LOG_COLL,
                        "rank %d: %s interrupted: the communicator was aborted", e->rank,
                        op->name);
    struct loom_notice nt;
    if (notice_ready) {
      int got = loom_bootstrap_read_notice(e->bs, 0, &nt);
      if (got > 0)
        return fail_run(&r, nt, NULL);
      r.notice_fd_busy = got < 0;
    }
    notice_ready = 0;
    if (timeout_ns && now - last_progress > timeout_ns) {
      struct loom_notice self = {waited_peer(&r), e->rank, LOOM_NOTICE_TIMEOUT, {0, 0}, {0, 0}};
      char detail[160];
      snprintf(detail, sizeof detail,
               "no data moved for %d ms (timeout_ms / LOOM_TIMEOUT_MS) while rank %d "
               "waited on rank %d",
               e->timeout_ms, e->rank, self.suspect);
      return fail_run(&r, self, detail);
    }
    if (now - last_progress < spin_ns) {
      /* The first microseconds poll without a system call (a peer on
       * another core answers within them); then yield the core. */
      if (now - last_progress < ENGINE_PURE_SPIN_NS)
        cpu_relax();
      else
        sched_yield();
      continue;
    }
    int us = ENGINE_POLL_SLICE_MS * 1000;
    if (e->busy_wait) {
      /* Shared-memory data wakes no fd: sleep in growing steps, so that
       * ranks outnumbering cores still let their peers run. */
      us = (int)((now - last_progress - spin_ns) / 8000u) + ENGINE_BUSY_MIN_US;
      if (us > ENGINE_BUSY_MAX_US)
        us = ENGINE_BUSY_MAX_US;
    }
    if (timeout_ns) {
      uint64_t left = last_progress + timeout_ns - now;
      if (left / 1000u + 1 < (uint64_t)us)
        us = (int)(left / 1000u) + 1;
    }
    loomResult_t wres = wait_kernel(&r, us, &notice_ready);
    if (wres != loomSuccess) {
      struct loom_notice self = {e->rank, e->rank, LOOM_NOTICE_DIED, {0, 0}, {0, 0}};
      return fail_run(&r, self, loom_last_error());
    }
  }
}
