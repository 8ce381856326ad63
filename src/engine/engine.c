/*
 * engine.c — executes a schedule: pipelined slices over the transport.
 *
 * Messages on a connection are ordered by (step, slice), skipping empty
 * slices; both ends derive the same order from the same schedule, so no
 * tags are needed.  Receives that reduce land in a few temp slots; those
 * that copy land straight in recvbuff.
 */
#include "engine/engine.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "device/reduce.h"

#include <errno.h>
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
/* After a timeout, how long to listen for upstream notices naming the rank
 * that is really stuck. */
#define ENGINE_BLAME_GRACE_MS 1000

loomResult_t loom_engine_init(struct loom_engine *e) {
  e->temp = NULL;
  e->temp_slot_bytes = 0;
  e->temp_slots = ENGINE_TEMP_SLOTS;
  e->xfers = NULL;
  e->xfers_cap = 0;
  e->recv_done = NULL;
  e->recv_done_cap = 0;
  return loomSuccess;
}

void loom_engine_fini(struct loom_engine *e) {
  free(e->temp);
  free(e->xfers);
  free(e->recv_done);
  e->temp = NULL;
  e->xfers = NULL;
  e->recv_done = NULL;
}

struct run {
  struct loom_engine *e;
  const struct loom_engine_op *op;
  const struct loom_schedule *s;
  size_t esize, slice_elems;
  int K;               /* slices per step */
  size_t nslots;       /* nsteps * K */
  struct loom_xfer *sx, *rx;
  unsigned char *recv_done;
  int *send_list;      /* slot ids of posted sends, in order */
  size_t sends_total, sends_posted, sends_checked;
  size_t recvs_total, recvs_processed;
  size_t next_send, next_recv; /* slot cursors (step*K + slice) */
  int fifo[ENGINE_RECV_FIFO];
  int fifo_head, fifo_count;
  int reduce_inflight;
  size_t reduce_posted;
  /* copy_send_block, done a slice at a time while waiting on the network */
  const char *copy_src;
  char *copy_dst;
  size_t copy_left;
  /* The predecessor already sent data of a later bootstrap operation (it
   * finished this collective and called loomCommFinalize): the notice
   * socket stays readable, so stop polling it rather than spin. */
  int notice_fd_busy;
};

/* Whether the local copy of block b may wait: no step touches b in recvbuff. */
static int copy_can_wait(const struct loom_schedule *s, int b) {
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    if ((st->recv_peer >= 0 && st->recv_block == b) ||
        (st->send_peer >= 0 && st->send_block == b && st->send_from == LOOM_BUF_RECV) ||
        (st->recv_op == LOOM_RECV_REDUCE && st->reduce_with == LOOM_BUF_RECV))
      return 0;
  }
  return 1;
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

static void slice_range(const struct run *r, int block, int k, size_t *off, size_t *n) {
  size_t start = (size_t)k * r->slice_elems, count = r->s->block_count[block];
  *off = r->s->block_off[block] + start;
  *n = start >= count ? 0 : (count - start < r->slice_elems ? count - start
                                                            : r->slice_elems);
}

static const char *send_ptr(const struct run *r, const struct loom_step *st, size_t off) {
  if (st->send_from == LOOM_BUF_SEND)
    return (const char *)r->op->sendbuff + (off - r->s->send_origin) * r->esize;
  return (const char *)r->op->recvbuff + off * r->esize;
}

/* Grows the engine's scratch for this run. */
static loomResult_t prepare(struct run *r) {
  struct loom_engine *e = r->e;
  size_t need = r->nslots * 2;
  if (need > e->xfers_cap) {
    free(e->xfers);
    e->xfers = malloc(need * (sizeof(struct loom_xfer) + sizeof(int)));
    if (e->xfers == NULL) {
      e->xfers_cap = 0;
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (engine)");
    }
    e->xfers_cap = need;
  }
  r->sx = e->xfers;
  r->rx = e->xfers + r->nslots;
  r->send_list = (int *)(e->xfers + need);
  if (r->nslots > e->recv_done_cap) {
    free(e->recv_done);
    e->recv_done = malloc(r->nslots);
    if (e->recv_done == NULL) {
      e->recv_done_cap = 0;
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (engine)");
    }
    e->recv_done_cap = r->nslots;
  }
  r->recv_done = e->recv_done;
  memset(r->recv_done, 0, r->nslots);
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
  /* Count the non-empty messages; mark empty receives done. */
  for (size_t id = 0; id < r->nslots; id++) {
    const struct loom_step *st = &r->s->steps[id / (size_t)r->K];
    int k = (int)(id % (size_t)r->K);
    size_t off, n;
    if (st->send_peer >= 0) {
      slice_range(r, st->send_block, k, &off, &n);
      r->sends_total += n > 0;
    }
    if (st->recv_peer >= 0) {
      slice_range(r, st->recv_block, k, &off, &n);
      if (n > 0)
        r->recvs_total++;
      else
        r->recv_done[id] = 1;
    } else {
      r->recv_done[id] = 1;
    }
  }
  return loomSuccess;
}

static loomResult_t post_sends(struct run *r, int *progressed) {
  const struct loom_transport *tp = r->e->tp;
  while (r->next_send < r->nslots) {
    size_t id = r->next_send;
    int step = (int)(id / (size_t)r->K), k = (int)(id % (size_t)r->K);
    const struct loom_step *st = &r->s->steps[step];
    size_t off, n = 0;
    if (st->send_peer >= 0)
      slice_range(r, st->send_block, k, &off, &n);
    if (n > 0) {
      if (st->send_waits && step > 0 && !r->recv_done[id - (size_t)r->K])
        return loomSuccess; /* its data has not arrived yet */
      struct loom_xfer *x = &r->sx[id];
      x->buf = (void *)send_ptr(r, st, off);
      x->len = n * r->esize;
      LOOM_CHECK(tp->isend(r->e->conns[st->send_peer], x));
      r->send_list[r->sends_posted++] = (int)id;
      *progressed = 1;
    }
    r->next_send++;
  }
  return loomSuccess;
}

static loomResult_t post_recvs(struct run *r, int *progressed) {
  const struct loom_transport *tp = r->e->tp;
  while (r->next_recv < r->nslots && r->fifo_count < ENGINE_RECV_FIFO) {
    size_t id = r->next_recv;
    const struct loom_step *st = &r->s->steps[id / (size_t)r->K];
    int k = (int)(id % (size_t)r->K);
    size_t off, n = 0;
    if (st->recv_peer >= 0)
      slice_range(r, st->recv_block, k, &off, &n);
    if (n > 0) {
      struct loom_xfer *x = &r->rx[id];
      if (st->recv_op == LOOM_RECV_REDUCE) {
        if (r->reduce_inflight == r->e->temp_slots)
          return loomSuccess;
        x->buf = (char *)r->e->temp +
                 (r->reduce_posted % (size_t)r->e->temp_slots) * r->e->temp_slot_bytes;
        r->reduce_inflight++;
        r->reduce_posted++;
      } else {
        x->buf = (char *)r->op->recvbuff + off * r->esize;
      }
      x->len = n * r->esize;
      LOOM_CHECK(tp->irecv(r->e->conns[st->recv_peer], x));
      r->fifo[(r->fifo_head + r->fifo_count) % ENGINE_RECV_FIFO] = (int)id;
      r->fifo_count++;
      *progressed = 1;
    }
    r->next_recv++;
  }
  return loomSuccess;
}

/* Reduces/finishes received slices in posting order. */
static void complete_recvs(struct run *r, int *progressed) {
  while (r->fifo_count > 0) {
    int id = r->fifo[r->fifo_head];
    struct loom_xfer *x = &r->rx[id];
    if (!x->done)
      return;
    const struct loom_step *st = &r->s->steps[id / r->K];
    /* A step receiving into the block it sends: in place that is the same
     * memory, so the slice must have left before it is overwritten. */
    if (st->send_peer >= 0 && st->send_block == st->recv_block &&
        !(r->next_send > (size_t)id && r->sx[id].done))
      return;
    if (st->recv_op == LOOM_RECV_REDUCE) {
      size_t off, n;
      slice_range(r, st->recv_block, id % r->K, &off, &n);
      char *dst = (char *)r->op->recvbuff + off * r->esize;
      const char *mine = st->reduce_with == LOOM_BUF_RECV
                             ? dst
                             : (const char *)r->op->sendbuff + (off - r->s->send_origin) * r->esize;
      if (st->recv_first)
        loom_reduce(dst, x->buf, mine, n, r->op->datatype, r->op->op);
      else
        loom_reduce(dst, mine, x->buf, n, r->op->datatype, r->op->op);
      if (st->finalize && r->op->op == loomAvg)
        loom_scale_avg(dst, n, r->op->datatype, r->e->nranks);
      r->reduce_inflight--;
    }
    r->recv_done[id] = 1;
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

/* The peer this rank is waiting on, for timeout messages. */
static int waited_peer(const struct run *r) {
  if (r->fifo_count > 0)
    return r->s->steps[r->fifo[r->fifo_head] / r->K].recv_peer;
  if (r->sends_checked < r->sends_posted)
    return r->s->steps[r->send_list[r->sends_checked] / r->K].send_peer;
  if (r->next_recv < r->nslots)
    return r->s->steps[r->next_recv / (size_t)r->K].recv_peer;
  return -1;
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
  int nt_guess = nt->reporter == me && nt->kind != LOOM_NOTICE_MISMATCH;
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
    struct loom_notice mine = {waited_peer(r), e->rank, LOOM_NOTICE_TIMEOUT};
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
  int grace_ms = timeout_mode ? ENGINE_BLAME_GRACE_MS : certain ? 0 : 200;
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
    int prev_gone = in.reporter == e->rank; /* its socket closed: nothing more comes */
    if (in.kind == LOOM_NOTICE_TIMEOUT && !prev_gone) {
      if (timeout_mode)
        learn_edge(e, &g, &in);
    } else if (better_diagnosis(&nt, &in, e->rank, heard)) {
      nt = in;
      timeout_mode = 0;
      sent = 0;
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
  return loom_error(loom_notice_result(nt.kind), LOOM_LOG_COLL,
                    "rank %d: %s failed: rank %d %s (reported by rank %d)%s%s", e->rank,
                    r->op->name, nt.suspect, loom_notice_text(nt.kind), nt.reporter,
                    detail[0] ? "; here: " : "", detail);
}

/* Blocks in the kernel until a socket, a notice or an abort wakes us;
 * *notice_ready tells whether the bootstrap notice socket is readable (it
 * is only looked at here: checking it while spinning costs a syscall per
 * turn). */
static loomResult_t wait_kernel(struct run *r, int ms, int *notice_ready) {
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
  if (poll(fds, (nfds_t)n, ms) < 0 && errno != EINTR)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "poll: %s", strerror(errno));
  *notice_ready = notice_idx >= 0 && fds[notice_idx].revents != 0;
  return loomSuccess;
}

loomResult_t loom_engine_run(struct loom_engine *e, const struct loom_engine_op *op) {
  const struct loom_schedule *s = op->sched;
  struct run r;
  memset(&r, 0, sizeof r);
  r.e = e;
  r.op = op;
  r.s = s;
  r.esize = loom_datatype_size(op->datatype);
  size_t max_block = 0;
  for (int b = 0; b < s->nblocks; b++)
    if (s->block_count[b] > max_block)
      max_block = s->block_count[b];
  if (s->copy_send_block >= 0) {
    int b = s->copy_send_block;
    char *dst = (char *)op->recvbuff + s->block_off[b] * r.esize;
    const char *src = (const char *)op->sendbuff + (s->block_off[b] - s->send_origin) * r.esize;
    if (dst != src && s->block_count[b] > 0) {
      r.copy_dst = dst;
      r.copy_src = src;
      r.copy_left = s->block_count[b] * r.esize;
      /* Posting the sends first lets the network start while we copy. */
      if (!copy_can_wait(s, b))
        copy_some(&r, r.copy_left);
    }
  }
  if (s->nsteps == 0 || max_block == 0) {
    copy_some(&r, r.copy_left);
    return loomSuccess;
  }
  r.slice_elems = e->chunk_bytes / r.esize;
  if (r.slice_elems == 0)
    r.slice_elems = 1;
  r.K = (int)((max_block + r.slice_elems - 1) / r.slice_elems);
  r.nslots = (size_t)s->nsteps * (size_t)r.K;
  if (prepare(&r) != loomSuccess) {
    struct loom_notice self = {e->rank, e->rank, LOOM_NOTICE_DIED};
    return fail_run(&r, self, loom_last_error());
  }

  uint64_t spin_ns = (uint64_t)e->spin_us * 1000u;
  uint64_t now = loom_now_ns(), last_progress = now;
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
                                                       : LOOM_NOTICE_DIED};
      return fail_run(&r, nt, loom_last_error());
    }
    complete_recvs(&r, &progressed);
    check_sends(&r);
    if (r.recvs_processed == r.recvs_total && r.sends_checked == r.sends_total) {
      copy_some(&r, r.copy_left);
      return loomSuccess;
    }
    if (!progressed && r.copy_left > 0) {
      copy_some(&r, e->chunk_bytes);
      progressed = 1;
    }
    now = loom_now_ns();
    if (progressed) {
      last_progress = now;
      continue;
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
      struct loom_notice self = {waited_peer(&r), e->rank, LOOM_NOTICE_TIMEOUT};
      char detail[160];
      snprintf(detail, sizeof detail,
               "no data moved for %d ms (timeout_ms / LOOM_TIMEOUT_MS) while rank %d "
               "waited on rank %d",
               e->timeout_ms, e->rank, self.suspect);
      return fail_run(&r, self, detail);
    }
    if (now - last_progress < spin_ns) {
      sched_yield();
      continue;
    }
    int ms = ENGINE_POLL_SLICE_MS;
    if (timeout_ns) {
      uint64_t left = last_progress + timeout_ns - now;
      if (left / 1000000u + 1 < (uint64_t)ms)
        ms = (int)(left / 1000000u) + 1;
    }
    loomResult_t wres = wait_kernel(&r, ms, &notice_ready);
    if (wres != loomSuccess) {
      struct loom_notice self = {e->rank, e->rank, LOOM_NOTICE_DIED};
      return fail_run(&r, self, loom_last_error());
    }
  }
}
