/*
 * shm.c — the shared-memory transport between ranks of one host: set-up
 * (create this rank's segment, map the peers', unlink once all mapped),
 * moving messages through the FIFOs, and noticing a peer whose process is
 * gone (pid liveness) instead of waiting out the timeout.
 */
#include "shm.h"
#include "shm_layout.h"
#include "common/fifo.h"
#include "common/msg_check.h"
#include "core/error.h"
#include "core/futex.h"
#include "core/procid.h"
#include "core/timeutil.h"

#include "core/config.h"

#include <errno.h>
#include <sched.h>
#include <sys/uio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* blob: segment name, pid, spare, the address of this process's probe word */
#define SHM_ADDR_BYTES (SHM_NAME_BYTES + 16)
/* Messages from this size are read by the receiver straight from the
 * sender's buffer (process_vm_readv: one copy instead of two). */
#define SHM_CMA_MIN (64u << 10)
#define SHM_PROBE_MAGIC 0x4c6f6f6d434d4121ull

/* Peers read this word with process_vm_readv at connect to learn whether
 * the kernel lets them read this process (same user, no ptrace limits). */
static const volatile uint64_t shm_probe_word = SHM_PROBE_MAGIC;
#define SHM_PID_CHECK_NS 50000000ull /* look for dead peers every 50 ms of stillness */

struct shm_conn {
  struct shm_ctx *ctx;
  int peer;
  pid_t pid; /* 0: in another PID namespace, not ours to check or read */
  struct shm_seg peer_seg; /* the peer's segment, holding our FIFO to it */
  uint32_t out_fifo, in_fifo;
  /* resolved once at connect: the FIFOs' control lines and first cells */
  const struct shm_fifo_ctl *out_ctl;
  struct shm_fifo_ctl *in_ctl;
  char *out_cells, *in_cells;
  uint64_t ncells;    /* per FIFO (both directions) */
  size_t cell_bytes; /* a cell: its header line, then the data */
  uint64_t tail_seen; /* the consumer's tail as last read (a lower bound) */
  int tail_stale;     /* in ctx->stale: half the cells or more not known free */
  uint64_t next_write, next_read; /* cell indices */
  struct loom_fifo sendq, recvq; /* of struct loom_xfer * */
  size_t send_off, recv_off; /* bytes done of the front messages */
  loomResult_t failed;
  /* single copy: the peer reads our buffer itself and counts it done */
  int cma;
  uint64_t probe_addr;  /* the peer's probe word, in its address space */
  struct loom_fifo ackq; /* sends the peer has still to read */
  uint64_t cma_acked;   /* of those, how many we saw it finish */
  uint64_t cma_read;    /* single-copy messages we read from the peer */
  int peek_ok; /* receives may be read in place (loom_shm_peek) */
};

struct shm_ctx {
  int rank, nranks, my_local;
  struct shm_layout layout; /* per FIFO, the same on every rank of the host */
  int *local_index; /* per rank: index among this host's ranks, -1 elsewhere */
  struct shm_seg own;
  struct shm_conn **open;
  int nopen;
  struct shm_conn **stale; /* FIFOs whose tail the next wait reads (refresh_tails) */
  int nstale;
  uint64_t still_since; /* when progress began moving nothing (0: it just moved) */
  unsigned still_turns; /* progress calls in a row that moved nothing */
};

static int q_push(struct loom_fifo *q, struct loom_xfer *x) { return loom_fifo_push(q, &x); }

static struct loom_xfer *q_front(const struct loom_fifo *q) {
  struct loom_xfer **front = loom_fifo_at(q, 0);
  return front != NULL ? *front : NULL;
}

/* Frees ctx and its arrays (not its connections or segment). */
static void ctx_free(struct shm_ctx *ctx) {
  if (ctx == NULL)
    return;
  free(ctx->local_index);
  free(ctx->open);
  free(ctx->stale);
  free(ctx);
}

static loomResult_t shm_init(const struct loom_transport_comm *info, void **out, void *addr) {
  struct shm_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL || (ctx->local_index = malloc(sizeof(int) * (size_t)info->nranks)) == NULL ||
      (ctx->open = calloc((size_t)info->nranks, sizeof *ctx->open)) == NULL ||
      (ctx->stale = calloc((size_t)info->nranks, sizeof *ctx->stale)) == NULL) {
    ctx_free(ctx);
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  }
  ctx->rank = info->rank;
  ctx->nranks = info->nranks;
  for (int r = 0; r < info->nranks; r++)
    ctx->local_index[r] = -1;
  for (int i = 0; i < info->nlocal; i++)
    ctx->local_index[info->local_ranks[i]] = i;
  ctx->my_local = ctx->local_index[info->rank];
  shm_seg_remove_stale();
  uint64_t budget = shm_layout_budget((uint64_t)loom_param_int(LOOM_PARAM_SHM_NODE_BYTES),
                                      SHM_DIR);
  ctx->layout = shm_layout_for(info->nlocal, budget);
  loomResult_t res = shm_seg_create(&ctx->own, (uint32_t)info->nlocal, ctx->layout.cells,
                                    ctx->layout.cell_bytes, info->rank);
  if (res != loomSuccess) {
    ctx_free(ctx);
    return res;
  }
  memset(addr, 0, SHM_ADDR_BYTES);
  memcpy(addr, ctx->own.name, strlen(ctx->own.name));
  int32_t pid = (int32_t)getpid();
  memcpy((char *)addr + SHM_NAME_BYTES, &pid, sizeof pid);
  uint32_t pid_ns = loom_pid_namespace();
  memcpy((char *)addr + SHM_NAME_BYTES + 4, &pid_ns, sizeof pid_ns);
  uint64_t probe = (uint64_t)(uintptr_t)&shm_probe_word;
  memcpy((char *)addr + SHM_NAME_BYTES + 8, &probe, sizeof probe);
  LOOM_INFO(LOOM_LOG_NET,
            "shm: rank %d: segment %s, %u FIFOs of %u x %u bytes (the host's %d ranks: %llu "
            "bytes, allowed %llu: LOOM_SHM_NODE_BYTES, half of " SHM_DIR ")",
            info->rank, ctx->own.name, (unsigned)info->nlocal, ctx->layout.cells,
            ctx->layout.cell_bytes, info->nlocal, (unsigned long long)ctx->layout.node_bytes,
            (unsigned long long)ctx->layout.budget);
  *out = ctx;
  return loomSuccess;
}

static void free_conn(struct shm_conn *c) {
  if (c == NULL)
    return;
  shm_seg_close(&c->peer_seg);
  loom_fifo_free(&c->sendq);
  loom_fifo_free(&c->recvq);
  loom_fifo_free(&c->ackq);
  free(c);
}

/* How long the owner sleeps on its segment's count of mappers before
 * looking at the clock again (each mapper also wakes it). */
#define SHM_MAPPED_NAP_US 100000

/* Counts this rank among the mappers of a peer's segment and wakes the
 * peer if it sleeps on that count. */
static void note_mapped(struct shm_seg *peer) {
  struct shm_seg_hdr *h = peer->base;
  atomic_fetch_add_explicit(&h->mapped, 1, memory_order_release);
  loom_futex_wake_all(&h->mapped, 1);
}

/* Waits (bounded) until every local peer has mapped this rank's segment,
 * then unlinks it: from here on nothing is left in /dev/shm whatever
 * happens to the processes.  It sleeps on the count (a futex the mappers
 * wake): polling it every 100 us made 128 ranks on 2 vCPUs stall here until
 * the bootstrap timeout in 9 of 73 runs (history/performance-log.md). */
static loomResult_t unlink_when_mapped(struct shm_ctx *ctx, int expected, uint64_t deadline) {
  struct shm_seg_hdr *h = ctx->own.base;
  int32_t seen;
  while ((seen = atomic_load_explicit(&h->mapped, memory_order_acquire)) < expected) {
    int left_ms = loom_ms_left(deadline);
    if (left_ms <= 0) {
      shm_seg_unlink(&ctx->own);
      return loom_error(loomTimeout, LOOM_LOG_NET,
                        "shm: rank %d: only %d of %d local peers mapped its segment before "
                        "the bootstrap timeout",
                        ctx->rank, seen, expected);
    }
    long nap_us = left_ms < SHM_MAPPED_NAP_US / 1000 ? left_ms * 1000L : SHM_MAPPED_NAP_US;
    loom_futex_wait(&h->mapped, (uint32_t)seen, 1, nap_us);
  }
  shm_seg_unlink(&ctx->own);
  return loomSuccess;
}

/* Whether this process may read `pid`'s memory: reads its probe word. */
static int cma_probe(pid_t pid, uint64_t addr, char *why, size_t len) {
  if (!loom_param_int(LOOM_PARAM_SHM_CMA)) {
    snprintf(why, len, "LOOM_SHM_CMA=0");
    return 0;
  }
  if (pid == 0) {
    snprintf(why, len, "a peer in another PID namespace");
    return 0;
  }
  uint64_t word = 0;
  struct iovec local = {.iov_base = &word, .iov_len = sizeof word};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof word};
  ssize_t k = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (k != (ssize_t)sizeof word) {
    snprintf(why, len, "process_vm_readv: %s", k < 0 ? strerror(errno) : "short read");
    return 0;
  }
  if (word != SHM_PROBE_MAGIC) {
    snprintf(why, len, "the probe word read back wrong");
    return 0;
  }
  return 1;
}

static loomResult_t shm_connect(void *vctx, int npeers, const int *peers, const void *addrs,
                                uint64_t deadline, void **conns) {
  struct shm_ctx *ctx = vctx;
  loomResult_t res = loomSuccess;
  int made = 0;
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    const char *blob = (const char *)addrs + (size_t)p * SHM_ADDR_BYTES;
    struct shm_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
      res = loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
      break;
    }
    loom_fifo_init(&c->sendq, sizeof(struct loom_xfer *));
    loom_fifo_init(&c->recvq, sizeof(struct loom_xfer *));
    loom_fifo_init(&c->ackq, sizeof(struct loom_xfer *));
    char name[SHM_NAME_BYTES + 1];
    memcpy(name, blob, SHM_NAME_BYTES);
    name[SHM_NAME_BYTES] = '\0';
    int32_t pid;
    uint32_t pid_ns;
    memcpy(&pid, blob + SHM_NAME_BYTES, sizeof pid);
    memcpy(&pid_ns, blob + SHM_NAME_BYTES + 4, sizeof pid_ns);
    memcpy(&c->probe_addr, blob + SHM_NAME_BYTES + 8, sizeof c->probe_addr);
    c->ctx = ctx;
    c->peer = p;
    /* 0 where its pid is not ours to use (another PID namespace) */
    c->pid = loom_same_pid_namespace(pid_ns) ? (pid_t)pid : 0;
    c->out_fifo = (uint32_t)ctx->my_local;
    c->in_fifo = (uint32_t)ctx->local_index[p];
    c->ncells = ctx->layout.cells;
    c->cell_bytes = ctx->layout.cell_bytes;
    res = shm_seg_map(&c->peer_seg, name, ctx->rank, p);
    if (res != loomSuccess) {
      loom_error(res, LOOM_LOG_NET, "%s", loom_last_error());
      free(c);
      break;
    }
    const struct shm_seg_hdr *layout = c->peer_seg.base;
    if (layout->cells != ctx->layout.cells || layout->cell_bytes != ctx->layout.cell_bytes) {
      res = loom_error(loomSystemError, LOOM_LOG_NET,
                       "shm: rank %d: rank %d's segment has %u cells of %u bytes, this rank "
                       "expects %u of %u (a different LOOM_SHM_NODE_BYTES, or mixed Loom "
                       "versions?)",
                       ctx->rank, p, layout->cells, layout->cell_bytes, ctx->layout.cells,
                       ctx->layout.cell_bytes);
      shm_seg_close(&c->peer_seg);
      free(c);
      break;
    }
    c->out_ctl = shm_fifo_ctl(&c->peer_seg, c->out_fifo);
    c->out_cells = (char *)shm_cell(&c->peer_seg, c->out_fifo, 0);
    c->in_ctl = shm_fifo_ctl(&ctx->own, c->in_fifo);
    c->in_cells = (char *)shm_cell(&ctx->own, c->in_fifo, 0);
    shm_seg_prefault(c->out_cells, (size_t)c->ncells * c->cell_bytes);
    shm_seg_prefault(c->in_cells, (size_t)c->ncells * c->cell_bytes);
    note_mapped(&c->peer_seg);
    conns[i] = c;
    ctx->open[ctx->nopen++] = c;
    made++;
  }
  if (res == loomSuccess)
    res = unlink_when_mapped(ctx, npeers, deadline);
  else
    shm_seg_unlink(&ctx->own);
  int ncma = 0, npeek = 0;
  char why[128] = "";
  for (int i = 0; res == loomSuccess && i < ctx->nopen; i++) {
    struct shm_conn *c = ctx->open[i];
    c->cma = cma_probe(c->pid, c->probe_addr, why, sizeof why);
    ncma += c->cma;
    /* a single-copy message has no cell to read from */
    c->peek_ok = !c->cma && loom_param_int(LOOM_PARAM_SHM_DIRECT_REDUCE);
    npeek += c->peek_ok;
  }
  if (res == loomSuccess)
    LOOM_INFO(LOOM_LOG_NET,
              "shm: rank %d connected to %d local peer(s); segment unlinked; single copy "
              "(process_vm_readv) from %u KiB: %s%s%s; reductions read the FIFO in place: %s",
              ctx->rank, made, SHM_CMA_MIN >> 10,
              ncma == made ? "on" : ncma ? "on for some peers" : "off, two copies",
              why[0] ? " - " : "", why,
              npeek == made ? "on" : npeek ? "for some peers" : "off");
  return res;
}

static loomResult_t fail_conn(struct shm_conn *c, loomResult_t code, const char *fmt,
                              const char *detail) {
  if (c->failed == loomSuccess)
    c->failed = loom_error_record(code, fmt, c->ctx->rank, c->peer, detail);
  return c->failed;
}

static loomResult_t shm_isend(void *conn, struct loom_xfer *x) {
  struct shm_conn *c = conn;
  if (c->failed != loomSuccess)
    return c->failed;
  x->done = 0;
  x->fp_mismatch = 0;
  if (q_push(&c->sendq, x) != 0)
    return loom_error_record(loomSystemError, "out of memory queueing a message for rank %d",
                             c->peer);
  return loomSuccess;
}

static loomResult_t shm_irecv(void *conn, struct loom_xfer *x) {
  struct shm_conn *c = conn;
  if (c->failed != loomSuccess)
    return c->failed;
  x->done = 0;
  x->fp_mismatch = 0;
  if (q_push(&c->recvq, x) != 0)
    return loom_error_record(loomSystemError, "out of memory queueing a receive from rank %d",
                             c->peer);
  return loomSuccess;
}

_Static_assert(SHM_PAYLOAD_MAX < SHM_CELL_CMA, "a part's length leaves the CMA bit free");

/* Cell `index` of a FIFO of c whose first cell is at `cells` (both FIFOs
 * of a pair have c->ncells cells of c->cell_bytes). */
static inline struct shm_cell_hdr *cell_at(const struct shm_conn *c, char *cells,
                                           uint64_t index) {
  return (struct shm_cell_hdr *)(cells + (size_t)(index & (c->ncells - 1)) * c->cell_bytes);
}

/* Once half of c's cells or more are not known to be free, the first
 * still turn of the next wait reads the consumer's tail (refresh_tails). */
static inline void note_tail_stale(struct shm_conn *c) {
  if (!c->tail_stale && c->next_write - c->tail_seen >= c->ncells / 2) {
    c->tail_stale = 1;
    c->ctx->stale[c->ctx->nstale++] = c;
  }
}

/* Writes as many cells of the queued sends as the FIFO has room for.  The
 * consumer's tail is read only when the cells known to be free run out:
 * reading its line on every turn would pull it away from the consumer,
 * which writes it after every cell. */
static void push_sends(struct shm_conn *c, int *progressed) {
  struct loom_xfer *x;
  while ((x = q_front(&c->sendq)) != NULL) {
    if (c->next_write - c->tail_seen >= c->ncells) {
      c->tail_seen = atomic_load_explicit(&c->out_ctl->tail, memory_order_acquire);
      if (c->next_write - c->tail_seen >= c->ncells)
        return; /* full */
    }
    struct shm_cell_hdr *cell = cell_at(c, c->out_cells, c->next_write);
    if (c->cma && x->len >= SHM_CMA_MIN) {
      /* Single copy: announce the buffer; the peer reads it and counts it. */
      uint64_t where = (uint64_t)(uintptr_t)x->buf;
      memcpy(cell->inline_data, &where, sizeof where);
      cell->len = SHM_CELL_CMA;
      cell->total = x->len;
      cell->fp[0] = x->fp[0];
      cell->fp[1] = x->fp[1];
      if (q_push(&c->ackq, x) != 0) {
        fail_conn(c, loomSystemError, "rank %d: out of memory sending to rank %d%s", "");
        return;
      }
      atomic_store_explicit(&cell->seq, shm_cell_seq(c->next_write), memory_order_release);
      c->next_write++;
      note_tail_stale(c);
      loom_fifo_pop(&c->sendq);
      *progressed = 1;
      continue;
    }
    size_t left = x->len - c->send_off, room = c->cell_bytes - SHM_LINE;
    size_t part = left < room ? left : room;
    if (x->len <= SHM_INLINE_BYTES)
      memcpy(cell->inline_data, x->buf, x->len);
    else
      memcpy((char *)cell + SHM_LINE, (const char *)x->buf + c->send_off, part);
    cell->len = (uint32_t)part;
    cell->total = x->len;
    cell->fp[0] = x->fp[0];
    cell->fp[1] = x->fp[1];
    atomic_store_explicit(&cell->seq, shm_cell_seq(c->next_write), memory_order_release);
    c->next_write++;
    note_tail_stale(c);
    c->send_off += part;
    *progressed = 1;
    if (c->send_off == x->len) {
      c->send_off = 0;
      loom_fifo_pop(&c->sendq);
      x->done = 1;
    }
  }
}

/* Sends whose data the peer has read (single copy) are done. */
static void reap_acks(struct shm_conn *c, int *progressed) {
  if (c->ackq.count == 0)
    return;
  uint64_t done = atomic_load_explicit(&c->out_ctl->cma_done, memory_order_acquire);
  while (c->cma_acked < done && c->ackq.count) {
    q_front(&c->ackq)->done = 1;
    loom_fifo_pop(&c->ackq);
    c->cma_acked++;
    *progressed = 1;
  }
}

/* Reads a single-copy message straight from the sender's memory. */
static loomResult_t cma_read(struct shm_conn *c, struct loom_xfer *x, uint64_t where) {
  size_t done = 0;
  while (done < x->len) {
    struct iovec local = {.iov_base = (char *)x->buf + done, .iov_len = x->len - done};
    struct iovec remote = {.iov_base = (char *)(uintptr_t)where + done, .iov_len = x->len - done};
    ssize_t k = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
    if (k <= 0) {
      char detail[96];
      snprintf(detail, sizeof detail, " (process_vm_readv: %s)",
               k < 0 ? strerror(errno) : "nothing read");
      return fail_conn(c, loomRemoteError, "rank %d: cannot read rank %d's message%s", detail);
    }
    done += (size_t)k;
  }
  return loomSuccess;
}

/* While a small receive waits, its cell's data lines are fetched on every
 * poll along with the header line: once the sender writes them, the poll
 * that sees the flag finds the data on its way, and the reader pays one
 * cross-core transfer instead of two in a row (the flag, then the data).
 * Not for larger messages: polling their lines while the sender writes
 * them takes the lines from under it (1 KiB measured 2 % slower). */
static inline void prefetch_data_lines(const struct shm_conn *c, const struct loom_xfer *x,
                                       const struct shm_cell_hdr *cell) {
  if (x->len <= SHM_INLINE_BYTES || x->len > SHM_PREFETCH_BYTES ||
      x->len > c->cell_bytes - SHM_LINE)
    return;
  for (size_t at = 0; at < x->len; at += SHM_LINE)
    __builtin_prefetch((const char *)cell + SHM_LINE + at);
}

/* The next cell of receive x if it has arrived and belongs to it; NULL if
 * not yet, or on a mismatch (then the connection has failed). */
static struct shm_cell_hdr *arrived_cell(struct shm_conn *c, struct loom_xfer *x) {
  struct shm_cell_hdr *cell = cell_at(c, c->in_cells, c->next_read);
  if (atomic_load_explicit(&cell->seq, memory_order_acquire) != shm_cell_seq(c->next_read)) {
    prefetch_data_lines(c, x, cell);
    return NULL;
  }
  if (loom_msg_check(x, cell->fp[0], cell->fp[1], cell->total, c->ctx->rank, c->peer,
                     c->failed == loomSuccess) != loomSuccess) {
    if (c->failed == loomSuccess)
      c->failed = loomInvalidUsage;
    return NULL;
  }
  if (c->recv_off + shm_cell_len(cell) > x->len) { /* same call and length: a torn cell */
    fail_conn(c, loomRemoteError, "rank %d: corrupt cell from rank %d%s", "");
    return NULL;
  }
  return cell;
}

/* The next message's first cell, if it has arrived (struct
 * loom_transport's probe: no receive is posted on c). */
static int shm_probe(void *conn, uint64_t fp[2], uint64_t *len) {
  struct shm_conn *c = conn;
  if (c->failed != loomSuccess)
    return -1;
  const struct shm_cell_hdr *cell = cell_at(c, c->in_cells, c->next_read);
  if (atomic_load_explicit(&cell->seq, memory_order_acquire) != shm_cell_seq(c->next_read))
    return 0;
  fp[0] = cell->fp[0];
  fp[1] = cell->fp[1];
  *len = cell->total;
  return 1;
}

/* A small receive whose next cell has not arrived polls that cell's flag
 * this many more times before the engine's turn goes on: the turn
 * between two polls let the waiting rank see the data later than a rank
 * that found it there, so the two ranks of an exchange leapfrogged (short
 * call, long call, by turns) more than Open MPI's; 2-rank all-reduce of
 * 16-32 B in the VM's fast mode: p50 0.140 against 0.155 us, p99 0.205
 * against 0.25; of 128-512 B, p99 0.26-0.27 against 0.29-0.31
 * (docs/history/performance-log.md).  A receive read in place polls so
 * when the engine looks for it (loom_shm_peek); one copied out, at the
 * end of a progress turn that received nothing (shm_progress), so that
 * data already here is acted on and sends on other connections leave
 * first.  The polls read the flag's line only. */
#define SHM_AWAIT_SPINS 32
#define SHM_AWAIT_BYTES 1024 /* receives of at most this many bytes wait so */
_Static_assert(SHM_AWAIT_BYTES <= SHM_PAYLOAD_MIN, "a receive that awaits has one cell");

/* Whether receive x's next cell arrives within SHM_AWAIT_SPINS more polls
 * (a small receive's one cell). */
static struct shm_cell_hdr *await_cell(struct shm_conn *c, struct loom_xfer *x) {
  if (c->failed != loomSuccess || x->len > SHM_AWAIT_BYTES)
    return NULL;
  const struct shm_cell_hdr *next = cell_at(c, c->in_cells, c->next_read);
  uint32_t want = shm_cell_seq(c->next_read);
  for (int i = 0; i < SHM_AWAIT_SPINS; i++)
    if (atomic_load_explicit(&next->seq, memory_order_relaxed) == want)
      return arrived_cell(c, x);
  return NULL;
}

/* Whether c's front receive is a small one copied out whose cell has
 * not arrived (after pull_recvs): one await_cell may wait for. */
static int awaits_small_copy(const struct shm_conn *c) {
  const struct loom_xfer *x = q_front(&c->recvq);
  return c->failed == loomSuccess && x != NULL && x->buf != NULL && x->len <= SHM_AWAIT_BYTES;
}

/* Hands the front cell back to the sender; finishes x with its last part. */
static void release_cell(struct shm_conn *c, struct loom_xfer *x, size_t len) {
  c->recv_off += len;
  c->next_read++;
  atomic_store_explicit(&c->in_ctl->tail, c->next_read, memory_order_release);
  if (c->recv_off == x->len) {
    c->recv_off = 0;
    loom_fifo_pop(&c->recvq);
    x->done = 1;
  }
}

/* Copies arrived cells into the posted receives, in order.  A receive
 * posted without a buffer is read in place by its owner (shm_peek). */
static loomResult_t pull_recvs(struct shm_conn *c, int *progressed) {
  struct shm_fifo_ctl *ctl = c->in_ctl;
  struct loom_xfer *x;
  while ((x = q_front(&c->recvq)) != NULL && x->buf != NULL) {
    struct shm_cell_hdr *cell = arrived_cell(c, x);
    if (cell == NULL)
      return c->failed;
    if (cell->len & SHM_CELL_CMA) {
      uint64_t where;
      memcpy(&where, cell->inline_data, sizeof where);
      if (c->recv_off != 0)
        return fail_conn(c, loomRemoteError, "rank %d: rank %d's stream is corrupt%s",
                         " (a single-copy message inside another)");
      LOOM_CHECK(cma_read(c, x, where));
      release_cell(c, x, x->len); /* the whole message: x is done */
      atomic_store_explicit(&ctl->cma_done, ++c->cma_read, memory_order_release);
      *progressed = 1;
      continue;
    }
    if (x->len <= SHM_INLINE_BYTES)
      memcpy(x->buf, cell->inline_data, x->len);
    else
      memcpy((char *)x->buf + c->recv_off, (const char *)cell + SHM_LINE, shm_cell_len(cell));
    release_cell(c, x, shm_cell_len(cell));
    *progressed = 1;
  }
  return loomSuccess;
}

/* Whether a receive from c may be read in place: at every size, unless
 * single copy or LOOM_SHM_DIRECT_REDUCE=0 turned it off (peek_ok).
 * Messages of one data line (33-64 B) were copied out until 2026-12-07,
 * for the VM's slow mode (0.77x the time then); with await_cell's extra
 * polls, reading them in place took 2-rank all-reduce of 64 B from 0.190
 * to 0.160 us at p50 and 0.290 to 0.251 at p99 in the fast mode (25
 * interleaved rounds; Open MPI 0.200 and 0.270), for 1.08x and 1.02x the
 * time in the slow one (5 rounds; still 0.82x and 0.65x Open MPI's)
 * (docs/history/performance-log.md). */
int loom_shm_can_peek(void *conn, size_t bytes) {
  const struct shm_conn *c = conn;
  return c->peek_ok;
}

size_t loom_shm_peek(void *conn, struct loom_xfer *x, const void **data) {
  struct shm_conn *c = conn;
  if (c->failed != loomSuccess || q_front(&c->recvq) != x)
    return 0;
  struct shm_cell_hdr *cell = arrived_cell(c, x);
  if (cell == NULL)
    cell = await_cell(c, x);
  if (cell == NULL)
    return 0;
  if (cell->len & SHM_CELL_CMA) {
    fail_conn(c, loomRemoteError, "rank %d: rank %d's stream is corrupt%s",
              " (a single-copy message where one read in place was expected)");
    return 0;
  }
  *data = x->len <= SHM_INLINE_BYTES ? (const void *)cell->inline_data
                                     : (const void *)((const char *)cell + SHM_LINE);
  return shm_cell_len(cell);
}

void loom_shm_consume(void *conn, struct loom_xfer *x) {
  struct shm_conn *c = conn;
  const struct shm_cell_hdr *cell = cell_at(c, c->in_cells, c->next_read);
  release_cell(c, x, shm_cell_len(cell));
}

/* A peer with work pending whose process is gone has died. */
static void check_alive(struct shm_ctx *ctx) {
  for (int i = 0; i < ctx->nopen; i++) {
    struct shm_conn *c = ctx->open[i];
    if (c->failed == loomSuccess && c->pid != 0 &&
        (c->sendq.count || c->recvq.count || c->ackq.count) && kill(c->pid, 0) != 0 &&
        errno == ESRCH) {
      char detail[64];
      snprintf(detail, sizeof detail, " (pid %d no longer runs)", (int)c->pid);
      fail_conn(c, loomRemoteError, "rank %d: rank %d's process exited%s", detail);
    }
  }
}

/* On the first still turn of a wait, the consumers' tails of FIFOs at
 * least half full (as far as this rank knows) are read: the wait hides
 * the cross-core read that push_sends would otherwise make in the middle
 * of a send once the cells known to be free run out (every 16th small
 * message with two ranks' 16 cells; 55 or 200+ ns in the VM's two
 * modes).  A 2-rank all-reduce of 8-32 B: p50 0.94-0.95x the time in
 * both modes (2026-12-07).  Only the FIFOs listed as stale are read, so
 * a host of many ranks pays for the few that filled, not for every peer. */
static void refresh_tails(struct shm_ctx *ctx) {
  for (int i = 0; i < ctx->nstale; i++) {
    struct shm_conn *c = ctx->stale[i];
    c->tail_seen = atomic_load_explicit(&c->out_ctl->tail, memory_order_acquire);
    c->tail_stale = 0;
  }
  ctx->nstale = 0;
}

/* The first connection of the turn that awaits a small receive copied
 * out, polled once the turn has received nothing (SHM_AWAIT_SPINS). */
static void await_small_copy(struct shm_conn *c, int *moved) {
  if (await_cell(c, q_front(&c->recvq)) != NULL)
    pull_recvs(c, moved);
}

static loomResult_t shm_progress(void *vctx, int *progressed, int *failed_peer) {
  struct shm_ctx *ctx = vctx;
  int moved = 0, received = 0;
  struct shm_conn *waiting = NULL;
  for (int i = 0; i < ctx->nopen; i++) {
    struct shm_conn *c = ctx->open[i];
    if (c->failed == loomSuccess) {
      int got = 0;
      push_sends(c, &moved);
      pull_recvs(c, &got);
      reap_acks(c, &moved);
      received |= got;
      if (!got && waiting == NULL && awaits_small_copy(c))
        waiting = c;
    }
    if (c->failed != loomSuccess) {
      *failed_peer = c->peer;
      return c->failed;
    }
  }
  if (!received && waiting != NULL) {
    await_small_copy(waiting, &received);
    if (waiting->failed != loomSuccess) {
      *failed_peer = waiting->peer;
      return waiting->failed;
    }
  }
  moved |= received;
  if (moved) {
    *progressed = 1;
    ctx->still_since = 0;
    ctx->still_turns = 0;
    return loomSuccess;
  }
  /* The clock is read on every 64th still turn only, not the first: a
   * spinning caller turns in well under a microsecond, the check is every
   * 50 ms, and a reading (22 ns here) at the start of every wait would
   * delay the answer that arrives during it. */
  if (++ctx->still_turns == 1)
    refresh_tails(ctx);
  if (ctx->still_turns % 64 != 0)
    return loomSuccess;
  uint64_t now = loom_now_ns();
  if (ctx->still_since == 0) {
    ctx->still_since = now;
  } else if (now - ctx->still_since > SHM_PID_CHECK_NS) {
    ctx->still_since = now;
    check_alive(ctx);
  }
  return loomSuccess;
}

static int shm_poll_fds(void *vctx, struct pollfd *fds, int max) { return 0; }

static void shm_fini(void *vctx) {
  struct shm_ctx *ctx = vctx;
  for (int i = 0; i < ctx->nopen; i++)
    free_conn(ctx->open[i]);
  shm_seg_close(&ctx->own);
  ctx_free(ctx);
}

/* A FIFO in shared memory: a fraction of a microsecond a message, a
 * memory copy's bandwidth. */
static void shm_properties(void *ctx, int peer, struct loom_net_properties *p) {
  (void)ctx;
  (void)peer;
  p->latency_us = 0.25;
  p->bandwidth_gbps = 5.0;
  p->msg_overhead_us = 0.3;
}

const struct loom_transport loom_transport_shm = {
    .name = "shm",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .addr_bytes = SHM_ADDR_BYTES,
    .init = shm_init,
    .connect = shm_connect,
    .isend = shm_isend,
    .irecv = shm_irecv,
    .progress = shm_progress,
    .poll_fds = shm_poll_fds,
    .fini = shm_fini,
    .busy_wait = 1,
    .struct_size = sizeof(struct loom_transport),
    .properties = shm_properties,
    .probe = shm_probe,
};
