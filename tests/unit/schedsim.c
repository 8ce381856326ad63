/*
 * schedsim.c — the symbolic simulator behind check_sched.c: builds every
 * rank's schedule, runs them all the way the engine (src/engine/engine.c)
 * interprets them, and fails on a malformed schedule, a race, a deadlock or
 * a wrong result.
 *
 * Values.  Each element holds a symbolic value: the set of ranks whose
 * contribution it holds (a mask), how many contributions were combined (so
 * that a rank counted twice is seen), the source index it came from, the
 * number of times it was finalized, and a hash of the expression that made
 * it (operand order included: all-reduce ranks must end with the same bits).
 * Every rank has SEND, RECV and SCRATCH (scratch_count elements), laid out
 * in one memory so that in-place calls alias the way the API defines them.
 * SEND starts with the rank's contributions, RECV and SCRATCH with garbage.
 * Only the call's outputs (and SCRATCH) may be written; buffers a rank does
 * not use (non-root recvbuff of reduce/gather, non-root sendbuff of
 * broadcast/scatter) may not be touched at all.
 *
 * Execution, as engine.c does it.  Every step is cut into slices of `slice`
 * elements; slot (step, k) of a rank has send slice k and receive slice k.
 * Per rank: sends are posted in slot order, each once forward_ready (slice k
 * of wait_step's receive processed, or all of it with wait_all, or its last
 * slice when k is past it); receives are posted in slot order, at most 64
 * outstanding and 4 reduces in flight; received slices are processed in
 * posting order, a slice whose receive overlaps its own step's send slice k
 * only once that send is done; REDUCE computes dst = mine op data (data op
 * mine with recv_first) at processing, finalize counts a finalization; COPY
 * lands the data as it arrives.  The local copy is done before anything when
 * a step touches its destination, else at any time (done here at the end).
 * The fold (one-shot all-reduce) runs once every step of the rank is done.
 * The transport matches the i-th message of a to b with the i-th receive of
 * b from a; it is simulated as rendezvous (a send completes only when its
 * receive is posted), the least buffering any transport has, so that no
 * deadlock hides behind socket buffers.  Ranks run asynchronously: the
 * simulation repeatedly lets each rank do whatever is enabled and fails if
 * nothing is enabled before all are done (deadlock).
 *
 * Races.  One interleaving proves nothing about the others, so accesses are
 * checked against the happens-before order the engine guarantees, with
 * vector clocks over each rank's chain of processed receives: a send slice
 * happens after the receives its wait covers (and, through posting order,
 * those of earlier sends); a processed receive after its data arrived, after
 * every earlier processed receive and, in place, after its own step's send
 * slice left; a message arrives after its send was posted, and the sender's
 * read of it ends before it arrives; a COPY receive may write from the moment
 * both sides posted (receives are posted eagerly, so only the sender's
 * history orders it).  Two accesses to an element, one a write, must be
 * ordered: a receive overwriting data a send may still be reading (unless
 * that send's data came back round, as in the ring all-reduce), two writes
 * in either order, or a step touching the floating local copy's memory all
 * fail, in any interleaving.  A send must wait itself (wait_step/wait_all)
 * for the receives that wrote what it reads: that the engine posts sends in
 * order behind an earlier one that waited is not relied on.
 *
 * Structure: peers, buffers and ranges valid (SCRATCH within scratch_count);
 * wait_step an earlier step that receives; the i-th send of a to b and the
 * i-th receive of b from a have the same count (step level, empty ones
 * included); no step COPY-receives into memory it sends; a REDUCE's dst and
 * mine are the same memory or disjoint; nsteps <= LOOM_SCHED_MAX_STEPS and no
 * step written past nsteps.
 */
#include "sched/schedule.h"

#include <check.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedsim.h"

#define ENGINE_FIFO 64 /* ENGINE_RECV_FIFO in engine.c */
#define ENGINE_TEMP 4  /* ENGINE_TEMP_SLOTS in engine.c */
#define NBUF 3
#define NONE32 UINT32_MAX
#define BIG_SLICE ((size_t)1 << 40) /* one slice per step */

char ctx[256];        /* the case being run, for messages */
jmp_buf *expect_fail; /* set: a failure returns here (the simulator's self-test) */
char fail_msg[768];

__attribute__((format(printf, 1, 2), noreturn)) void failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fail_msg, sizeof fail_msg, fmt, ap);
  va_end(ap);
  if (expect_fail != NULL)
    longjmp(*expect_fail, 1);
  ck_abort_msg("%s: %s", ctx, fail_msg);
  abort();
}

/* ---- the symbolic simulator --------------------------------------------------------- */

static const char *const coll_fn[NCOLL] = {
    "loom_ring_allreduce",     "loom_rd_allreduce",    "loom_oneshot_allreduce",
    "loom_ring_allgather",     "loom_rd_allgather",    "loom_oneshot_allgather",
    "loom_ring_reducescatter", "loom_chain_broadcast", "loom_tree_broadcast",
    "loom_chain_reduce",       "loom_tree_reduce",     "loom_direct_alltoallv",
    "loom_direct_gather",      "loom_direct_scatter",
};
int is_rooted(enum coll c) {
  return c == CHAIN_BC || c == TREE_BC || c == CHAIN_RED || c == TREE_RED || c == GATHER ||
         c == SCATTER;
}

struct val {
  uint64_t mask;  /* ranks whose contribution is in */
  uint64_t hash;  /* of the expression, operand order included */
  uint32_t src;   /* sendbuff index the contributions came from */
  uint16_t terms; /* contributions combined (> popcount(mask) = double count) */
  uint8_t fin;    /* times finalized */
  uint8_t valid;  /* 0 = garbage (never written) */
};

/* Per element: its last writer and the reads since, for the race check.
 * All zero: written before everything, read by nobody, not writable. */
enum { SH_WRITABLE = 1, SH_COPY_SRC = 2, SH_COPY_DST = 4 };
#define PROC_READ 0x80000000u /* a reader that is a REDUCE's operand read */
struct shadow {
  uint32_t lw; /* processing index of the receive that last wrote it; 0 = before all */
  uint8_t flags, nread;
  uint32_t rd0; /* the first reader: a message id, or PROC_READ | processing index */
  uint32_t ovf; /* further readers: a chain in ovf[], 0 = none */
};
struct ovf {
  uint32_t rd[7], next;
};
static struct ovf *ovf;
static size_t novf, ovf_cap;

/* One message: a nonempty send slice and the receive slice it meets. */
struct msg {
  int from, to, sstep, rstep;
  size_t k, sslot, rslot, len, vals;
  uint32_t clob; /* sender's processing index that waits for this send (in place), or NONE32 */
  uint32_t ridx; /* receiver's processing index of the matched receive */
  uint32_t vc;   /* snapshot of the sender's clock when posted */
  int next;      /* next message between the same pair */
  unsigned char posted, done;
};

struct rank {
  struct loom_schedule s;
  struct loom_step *steps;
  size_t boff[NBUF], blen[NBUF];
  unsigned char na[NBUF]; /* buffer not used by this rank: no access */
  size_t alen, recv_len;
  struct val *mem, *expect; /* expect: recv_len; valid = 0: not an output */
  struct shadow *sh;
  int copy_float; /* the local copy is pending (floating) */
  size_t *base, nslots;
  uint32_t *proc;   /* per slot: processing index of its receive slice, 0 = none */
  int *proc_step;   /* per processing index: the step */
  int *smsg, *rmsg; /* per slot: message of its send / receive slice, -1 = none */
  unsigned char *rposted, *arrived;
  size_t next_send, next_recv;
  int send_step, recv_step;
  size_t fifo[ENGINE_FIFO];
  int fifo_head, fifo_count, reduce_inflight;
  size_t sends_total, sends_done, recvs_total, recvs_done;
  uint32_t *vc;     /* clock of the last processed receive */
  uint32_t *joined; /* per sender: the last snapshot joined into vc */
  uint32_t snap;    /* snapshot of vc, valid when !vc_dirty */
  int vc_dirty, done;
};

static struct {
  const struct call *c;
  int n;
  struct rank *r;
  struct msg *msg;
  size_t nmsg;
  int *pair_cur; /* per pair a*n+b: next message to transfer, -1 */
  int *dirty;
  int ndirty;
  unsigned char *is_dirty;
  struct val *vals;
  uint32_t *snaps;
  size_t nsnaps, snaps_cap;
  int progressed;
} S;

/* Per-run memory: a stack of blocks, merged into one between runs. */
struct blk {
  struct blk *prev;
  size_t cap, used, pad;
};
static struct blk *pool_top;

static void *palloc(size_t n, size_t size) { /* not cleared */
  EXPECT(size == 0 || n <= SIZE_MAX / size / 2, "allocation too large");
  size_t bytes = (n * size + 15) & ~(size_t)15;
  if (pool_top == NULL || pool_top->cap - pool_top->used < bytes) {
    size_t cap = pool_top != NULL ? pool_top->cap * 2 : (size_t)1 << 20;
    if (cap < bytes)
      cap = bytes;
    struct blk *b = malloc(sizeof *b + cap);
    EXPECT(b != NULL, "out of memory (%zu bytes)", cap);
    b->prev = pool_top;
    b->cap = cap;
    b->used = 0;
    pool_top = b;
  }
  void *p = (char *)(pool_top + 1) + pool_top->used;
  pool_top->used += bytes;
  return p;
}

static void *pcalloc(size_t n, size_t size) {
  void *p = palloc(n, size);
  memset(p, 0, n * size);
  return p;
}

static void pool_reset(void) {
  size_t total = 0;
  int nblk = 0;
  for (struct blk *b = pool_top; b != NULL; b = b->prev) {
    total += b->cap;
    nblk++;
  }
  if (nblk > 1) {
    while (pool_top != NULL) {
      struct blk *prev = pool_top->prev;
      free(pool_top);
      pool_top = prev;
    }
    pool_top = malloc(sizeof *pool_top + total);
    EXPECT(pool_top != NULL, "out of memory");
    pool_top->prev = NULL;
    pool_top->cap = total;
  }
  if (pool_top != NULL)
    pool_top->used = 0;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Rank `rank`'s contribution of sendbuff element idx.  Its hash only has to
 * be unique: combining mixes. */
static struct val leaf(int rank, size_t idx) {
  struct val v = {(uint64_t)1 << rank, ((uint64_t)(rank + 1) << 40) ^ idx, (uint32_t)idx, 1, 0, 1};
  return v;
}

static uint64_t all_ranks(int n) { return n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1; }

static const char *bufname(int b) {
  return b == LOOM_BUF_SEND      ? "SEND"
         : b == LOOM_BUF_RECV    ? "RECV"
         : b == LOOM_BUF_SCRATCH ? "SCRATCH"
                                 : "?";
}

/* k never exceeds a step's slices (< 2^22), so k * slice cannot overflow. */
static size_t slice_len(size_t count, size_t k) {
  size_t sl = S.c->slice, start = k == 0 ? 0 : k * sl;
  if (start >= count)
    return 0;
  return count - start < sl ? count - start : sl;
}
static size_t nslices(size_t count) { return count == 0 ? 0 : (count - 1) / S.c->slice + 1; }

static int ovl(size_t a, size_t alen, size_t b, size_t blen) {
  return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

static size_t at(const struct rank *R, int buf, size_t off) { return R->boff[buf] + off; }

/* ---- building and laying out --------------------------------------------------------- */

static void build(int r, struct loom_schedule *s) {
  const struct call *c = S.c;
  int n = c->n;
  size_t k = c->count;
  if (c->custom != NULL) {
    c->custom(r, n, k, c->root, s);
    return;
  }
  switch (c->coll) {
  case RING_AR:
    loom_ring_allreduce(r, n, k, s);
    break;
  case RD_AR:
    loom_rd_allreduce(r, n, k, s);
    break;
  case ONESHOT_AR:
    loom_oneshot_allreduce(r, n, k, s);
    break;
  case RING_AG:
    loom_ring_allgather(r, n, k, s);
    break;
  case RD_AG:
    loom_rd_allgather(r, n, k, s);
    break;
  case ONESHOT_AG:
    loom_oneshot_allgather(r, n, k, s);
    break;
  case RING_RS:
    loom_ring_reducescatter(r, n, k, s);
    break;
  case CHAIN_BC:
    loom_chain_broadcast(r, n, c->root, k, s);
    break;
  case TREE_BC:
    loom_tree_broadcast(r, n, c->root, k, s);
    break;
  case CHAIN_RED:
    loom_chain_reduce(r, n, c->root, k, s);
    break;
  case TREE_RED:
    loom_tree_reduce(r, n, c->root, k, s);
    break;
  case A2AV: {
    size_t o = (size_t)r * (size_t)n;
    loom_direct_alltoallv(r, n, c->sc + o, c->sd + o, c->rc + o, c->rd + o, s);
    break;
  }
  case GATHER:
    loom_direct_gather(r, n, c->root, k, s);
    break;
  case SCATTER:
    loom_direct_scatter(r, n, c->root, k, s);
    break;
  default:
    failf("bad collective");
  }
}

/* What rank r's RECV must hold at the end (valid = 0: not an output, must
 * not be written). */
static void expected(int r, struct val *e, size_t recv_len) {
  const struct call *c = S.c;
  int n = c->n;
  size_t cnt = c->count;
  /* a reduction of every rank, finalized once (one rank: a plain copy) */
#define RED(src)                                                                                   \
  (n == 1 ? leaf(0, (src)) : (struct val){all_ranks(n), 0, (uint32_t)(src), (uint16_t)n, 1, 1})
  switch (c->coll) {
  case RING_AR:
  case RD_AR:
  case ONESHOT_AR:
  case RING_RS:
    for (size_t i = 0; i < cnt; i++)
      e[i] = RED(c->coll == RING_RS ? (size_t)r * cnt + i : i);
    break;
  case CHAIN_RED:
  case TREE_RED:
    if (r == c->root)
      for (size_t i = 0; i < cnt; i++)
        e[i] = RED(i);
    break;
  case RING_AG:
  case RD_AG:
  case ONESHOT_AG:
    for (int j = 0; j < n; j++)
      for (size_t i = 0; i < cnt; i++)
        e[(size_t)j * cnt + i] = leaf(j, i);
    break;
  case GATHER:
    if (r == c->root)
      for (int j = 0; j < n; j++)
        for (size_t i = 0; i < cnt; i++)
          e[(size_t)j * cnt + i] = leaf(j, i);
    break;
  case CHAIN_BC:
  case TREE_BC:
    for (size_t i = 0; i < cnt; i++)
      e[i] = leaf(c->root, i);
    break;
  case SCATTER:
    for (size_t i = 0; i < cnt; i++)
      e[i] = leaf(c->root, (size_t)r * cnt + i);
    break;
  case A2AV:
    for (int j = 0; j < n; j++) {
      size_t rc = c->rc[(size_t)r * n + j], rd = c->rd[(size_t)r * n + j];
      size_t sd = c->sd[(size_t)j * n + r];
      EXPECT(rd + rc <= recv_len, "test bug: rdispls");
      for (size_t i = 0; i < rc; i++)
        e[rd + i] = leaf(j, sd + i);
    }
    break;
  default:
    break;
  }
#undef RED
}

/* Buffers of rank r as the API defines them, in place or not. */
static void lay_out(int r) {
  const struct call *c = S.c;
  struct rank *R = &S.r[r];
  int n = c->n, root = r == c->root;
  size_t cnt = c->count, all = (size_t)n * cnt, slen = cnt, rlen = cnt;
  int alias = 0; /* 1: SEND inside RECV at aoff; 2: RECV inside SEND at aoff */
  size_t aoff = 0;
  switch (c->coll) {
  case RING_AR:
  case RD_AR:
  case ONESHOT_AR:
    alias = c->inplace;
    break;
  case RING_AG:
  case RD_AG:
  case ONESHOT_AG:
    rlen = all;
    alias = c->inplace;
    aoff = (size_t)r * cnt;
    break;
  case RING_RS:
    slen = all;
    alias = c->inplace ? 2 : 0;
    aoff = (size_t)r * cnt;
    break;
  case CHAIN_BC:
  case TREE_BC:
    R->na[LOOM_BUF_SEND] = !root; /* sendbuff is read on root only */
    alias = c->inplace && root;
    break;
  case CHAIN_RED:
  case TREE_RED:
    R->na[LOOM_BUF_RECV] = !root; /* recvbuff is used on root only */
    alias = c->inplace && root;
    break;
  case GATHER:
    rlen = all;
    R->na[LOOM_BUF_RECV] = !root;
    alias = c->inplace && root;
    aoff = (size_t)r * cnt;
    break;
  case SCATTER:
    slen = all;
    R->na[LOOM_BUF_SEND] = !root;
    alias = c->inplace && root ? 2 : 0;
    aoff = (size_t)r * cnt;
    break;
  case A2AV:
    slen = rlen = 0;
    for (int j = 0; j < n; j++) {
      size_t o = (size_t)r * n + j;
      if (c->sd[o] + c->sc[o] > slen)
        slen = c->sd[o] + c->sc[o];
      if (c->rd[o] + c->rc[o] > rlen)
        rlen = c->rd[o] + c->rc[o];
    }
    rlen += 2; /* a tail nobody may write */
    break;
  default:
    break;
  }
  size_t scr = R->s.scratch_count;
  EXPECT(scr <= ((size_t)1 << 26), "rank %d: scratch_count %zu is absurd", r, scr);
  R->blen[LOOM_BUF_SEND] = slen;
  R->blen[LOOM_BUF_RECV] = rlen;
  R->blen[LOOM_BUF_SCRATCH] = scr;
  if (alias == 1) {
    R->boff[LOOM_BUF_RECV] = 0;
    R->boff[LOOM_BUF_SEND] = aoff;
    R->boff[LOOM_BUF_SCRATCH] = rlen;
    R->alen = rlen + scr;
  } else if (alias == 2) {
    R->boff[LOOM_BUF_SEND] = 0;
    R->boff[LOOM_BUF_RECV] = aoff;
    R->boff[LOOM_BUF_SCRATCH] = slen;
    R->alen = slen + scr;
  } else { /* a buffer the rank does not use gets no memory: check_range keeps steps out */
    size_t o = 0;
    for (int b = 0; b < NBUF; b++)
      if (!R->na[b]) {
        R->boff[b] = o;
        o += R->blen[b];
      }
    for (int b = 0; b < NBUF; b++)
      if (R->na[b])
        R->boff[b] = o;
    R->alen = o;
  }
  R->recv_len = rlen;
  R->mem = pcalloc(R->alen + 1, sizeof *R->mem);
  R->sh = pcalloc(R->alen + 1, sizeof *R->sh);
  R->expect = pcalloc(rlen + 1, sizeof *R->expect);
  expected(r, R->expect, rlen);
  if (!R->na[LOOM_BUF_SEND])
    for (size_t i = 0; i < slen; i++)
      R->mem[at(R, LOOM_BUF_SEND, i)] = leaf(r, i);
  if (!R->na[LOOM_BUF_RECV])
    for (size_t i = 0; i < rlen; i++)
      if (R->expect[i].valid)
        R->sh[at(R, LOOM_BUF_RECV, i)].flags = SH_WRITABLE;
  for (size_t i = 0; i < scr; i++)
    R->sh[at(R, LOOM_BUF_SCRATCH, i)].flags = SH_WRITABLE;
}

/* ---- structure --------------------------------------------------------------------- */

static void check_range(int p, int i, const char *what, int buf, size_t off, size_t count) {
  const struct rank *R = &S.r[p];
  EXPECT(buf >= 0 && buf < NBUF, "rank %d step %d: %s buffer %d is not SEND, RECV or SCRATCH", p, i,
         what, buf);
  if (count == 0)
    return;
  EXPECT(off <= R->blen[buf] && count <= R->blen[buf] - off,
         "rank %d step %d: %s [%zu, +%zu) of %s is outside its %zu elements%s", p, i, what, off,
         count, bufname(buf), R->blen[buf], buf == LOOM_BUF_SCRATCH ? " (scratch_count)" : "");
  EXPECT(!R->na[buf], "rank %d step %d: %s uses %s, which this rank's call does not have", p, i,
         what, bufname(buf));
}

static void check_steps(int p) {
  struct rank *R = &S.r[p];
  const struct loom_schedule *s = &R->s;
  int n = S.n;
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *x = &R->steps[i];
    EXPECT(x->send_peer >= -1 && x->send_peer < n && x->send_peer != p,
           "rank %d step %d: bad send_peer %d", p, i, x->send_peer);
    EXPECT(x->recv_peer >= -1 && x->recv_peer < n && x->recv_peer != p,
           "rank %d step %d: bad recv_peer %d", p, i, x->recv_peer);
    if (x->send_peer >= 0) {
      check_range(p, i, "send", x->send_buf, x->send_off, x->send_count);
      EXPECT(x->wait_step >= -1 && x->wait_step < i,
             "rank %d step %d: wait_step %d is not an earlier step", p, i, x->wait_step);
      EXPECT(x->wait_all <= 1, "rank %d step %d: bad wait_all %d", p, i, x->wait_all);
      EXPECT(x->wait_step < 0 || R->steps[x->wait_step].recv_peer >= 0,
             "rank %d step %d: waits on step %d, which receives nothing", p, i, x->wait_step);
    }
    if (x->recv_peer >= 0) {
      EXPECT(x->recv_op == LOOM_RECV_COPY || x->recv_op == LOOM_RECV_REDUCE,
             "rank %d step %d: bad recv_op %d", p, i, x->recv_op);
      check_range(p, i, "receive", x->recv_buf, x->recv_off, x->recv_count);
      EXPECT(x->recv_first <= 1 && x->finalize <= 1,
             "rank %d step %d: bad recv_first %d / finalize %d", p, i, x->recv_first, x->finalize);
      EXPECT(!x->finalize || x->recv_op == LOOM_RECV_REDUCE,
             "rank %d step %d: finalize on a COPY receive", p, i);
      if (x->recv_op == LOOM_RECV_REDUCE) {
        check_range(p, i, "reduce operand (mine)", x->mine_buf, x->mine_off, x->recv_count);
        size_t d = at(R, x->recv_buf, x->recv_off), m = at(R, x->mine_buf, x->mine_off);
        EXPECT(d == m || !ovl(d, x->recv_count, m, x->recv_count),
               "rank %d step %d: reduces into %s[%zu, +%zu), which partly overlaps its "
               "operand %s[%zu]",
               p, i, bufname(x->recv_buf), x->recv_off, x->recv_count, bufname(x->mine_buf),
               x->mine_off);
      } else if (x->send_peer >= 0) {
        EXPECT(!ovl(at(R, x->send_buf, x->send_off), x->send_count, at(R, x->recv_buf, x->recv_off),
                    x->recv_count),
               "rank %d step %d: COPY-receives into %s[%zu, +%zu), memory it sends (%s[%zu, "
               "+%zu))",
               p, i, bufname(x->recv_buf), x->recv_off, x->recv_count, bufname(x->send_buf),
               x->send_off, x->send_count);
      }
    } else {
      EXPECT(!x->finalize, "rank %d step %d: finalize without a receive", p, i);
    }
  }
  const struct loom_fold *f = &s->fold;
  if (f->count > 0) {
    EXPECT(f->nblocks == n && f->self == p && f->finalize <= 1,
           "rank %d: fold of %d blocks, own block %d (expected %d and %d)", p, f->nblocks, f->self,
           n, p);
    check_range(p, -1, "fold (own block)", LOOM_BUF_SEND, 0, f->count);
    check_range(p, -1, "fold (result)", LOOM_BUF_RECV, 0, f->count);
    check_range(p, -1, "fold (peers' blocks)", LOOM_BUF_SCRATCH, 0, (size_t)(n - 1) * f->count);
  }
  const struct loom_local_copy *cp = &s->copy;
  if (cp->count > 0) {
    check_range(p, -1, "local copy source", cp->from_buf, cp->from_off, cp->count);
    check_range(p, -1, "local copy destination", cp->to_buf, cp->to_off, cp->count);
    size_t a = at(R, cp->from_buf, cp->from_off), b = at(R, cp->to_buf, cp->to_off);
    EXPECT(a == b || !ovl(a, cp->count, b, cp->count),
           "rank %d: the local copy %s[%zu] -> %s[%zu] of %zu overlaps itself", p,
           bufname(cp->from_buf), cp->from_off, bufname(cp->to_buf), cp->to_off, cp->count);
  }
}

/* The i-th send of a to b and the i-th receive of b from a: same count. */
static void check_pairs(void) {
  int n = S.n;
  size_t np = (size_t)n * n, total = 0;
  for (int p = 0; p < n; p++)
    total += (size_t)S.r[p].s.nsteps;
  int *shead = pcalloc(np, sizeof(int)), *stail = pcalloc(np, sizeof(int));
  int *rhead = pcalloc(np, sizeof(int)), *rtail = pcalloc(np, sizeof(int));
  int *next = palloc(2 * total + 1, sizeof(int)), *stp = palloc(2 * total + 1, sizeof(int));
  for (size_t i = 0; i < np; i++)
    shead[i] = stail[i] = rhead[i] = rtail[i] = -1;
  int nn = 0;
  for (int p = 0; p < n; p++)
    for (int i = 0; i < S.r[p].s.nsteps; i++) {
      const struct loom_step *x = &S.r[p].steps[i];
      if (x->send_peer >= 0) {
        size_t pr = (size_t)p * n + x->send_peer;
        stp[nn] = i;
        next[nn] = -1;
        if (stail[pr] < 0)
          shead[pr] = nn;
        else
          next[stail[pr]] = nn;
        stail[pr] = nn++;
      }
      if (x->recv_peer >= 0) {
        size_t pr = (size_t)x->recv_peer * n + p;
        stp[nn] = i;
        next[nn] = -1;
        if (rtail[pr] < 0)
          rhead[pr] = nn;
        else
          next[rtail[pr]] = nn;
        rtail[pr] = nn++;
      }
    }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      size_t pr = (size_t)a * n + b;
      int sI = shead[pr], rI = rhead[pr];
      for (int idx = 0; sI >= 0 || rI >= 0; idx++, sI = next[sI], rI = next[rI]) {
        EXPECT(sI >= 0, "rank %d's receive #%d from rank %d (step %d) has no send", b, idx, a,
               stp[rI]);
        EXPECT(rI >= 0, "rank %d's send #%d to rank %d (step %d) has no receive", a, idx, b,
               stp[sI]);
        size_t sc = S.r[a].steps[stp[sI]].send_count, rc = S.r[b].steps[stp[rI]].recv_count;
        EXPECT(sc == rc,
               "rank %d's send #%d to rank %d (step %d) has %zu elements, the receive (rank "
               "%d step %d) %zu",
               a, idx, b, stp[sI], sc, b, stp[rI], rc);
      }
    }
}

/* Slots, processing indices and messages, as engine.c's prepare(). */
static int clobbers_own_send(const struct rank *R, const struct loom_step *x, size_t k) {
  if (x->send_peer < 0)
    return 0;
  size_t o = k * S.c->slice;
  return ovl(at(R, x->send_buf, x->send_off + o), slice_len(x->send_count, k),
             at(R, x->recv_buf, x->recv_off + o), slice_len(x->recv_count, k));
}

static void make_slots(void) {
  int n = S.n;
  size_t nmsg = 0, nvals = 0, nsnaps = 1;
  for (int p = 0; p < n; p++) {
    struct rank *R = &S.r[p];
    int ns = R->s.nsteps;
    R->base = pcalloc((size_t)ns + 1, sizeof(size_t));
    size_t total = 0;
    for (int i = 0; i < ns; i++) {
      const struct loom_step *x = &R->steps[i];
      size_t ks = x->send_peer >= 0 ? nslices(x->send_count) : 0;
      size_t kr = x->recv_peer >= 0 ? nslices(x->recv_count) : 0;
      R->base[i] = total;
      total += ks > kr ? ks : kr;
      R->sends_total += ks;
      R->recvs_total += kr;
      nvals += x->send_peer >= 0 ? x->send_count : 0;
    }
    R->base[ns] = total;
    R->nslots = total;
    EXPECT(total < (size_t)1 << 22, "too many slices");
    R->proc = pcalloc(total + 1, sizeof(uint32_t));
    R->proc_step = pcalloc(R->recvs_total + 1, sizeof(int));
    R->smsg = pcalloc(total + 1, sizeof(int));
    R->rmsg = pcalloc(total + 1, sizeof(int));
    R->rposted = pcalloc(total + 1, 1);
    R->arrived = pcalloc(total + 1, 1);
    R->vc = pcalloc((size_t)n, sizeof(uint32_t));
    R->joined = pcalloc((size_t)n, sizeof(uint32_t)); /* snapshot 0 is all zero */
    uint32_t np = 0;
    for (int i = 0; i < ns; i++) {
      const struct loom_step *x = &R->steps[i];
      size_t kr = x->recv_peer >= 0 ? nslices(x->recv_count) : 0;
      for (size_t id = R->base[i]; id < R->base[i + 1]; id++) {
        R->smsg[id] = R->rmsg[id] = -1;
        if (id - R->base[i] < kr) {
          R->proc[id] = ++np;
          R->proc_step[np] = i;
        }
      }
    }
    nmsg += R->sends_total;
    size_t snaps = R->sends_total < R->recvs_total + 1 ? R->sends_total : R->recvs_total + 1;
    nsnaps += snaps;
  }
  S.msg = palloc(nmsg + 1, sizeof *S.msg);
  S.vals = palloc(nvals + 1, sizeof *S.vals);
  S.snaps_cap = nsnaps;
  EXPECT(nsnaps * (size_t)n < ((size_t)1 << 28), "too many clock snapshots (%zu)", nsnaps);
  S.snaps = palloc(nsnaps * (size_t)n, sizeof(uint32_t));
  memset(S.snaps, 0, sizeof(uint32_t) * (size_t)n);
  S.nsnaps = 1; /* snapshot 0: all zero */
  size_t np2 = (size_t)n * n;
  int *tail = pcalloc(np2, sizeof(int));
  S.pair_cur = pcalloc(np2, sizeof(int));
  S.is_dirty = pcalloc(np2, 1);
  S.dirty = pcalloc(np2, sizeof(int));
  for (size_t i = 0; i < np2; i++)
    S.pair_cur[i] = tail[i] = -1;
  /* Messages: nonempty send slices in slot order. */
  size_t m = 0, v = 0;
  for (int p = 0; p < n; p++) {
    struct rank *R = &S.r[p];
    for (int i = 0; i < R->s.nsteps; i++) {
      const struct loom_step *x = &R->steps[i];
      if (x->send_peer < 0)
        continue;
      for (size_t id = R->base[i]; id < R->base[i + 1]; id++) {
        size_t k = id - R->base[i], len = slice_len(x->send_count, k);
        if (len == 0)
          continue;
        struct msg *g = &S.msg[m];
        g->from = p;
        g->to = x->send_peer;
        g->sstep = i;
        g->k = k;
        g->sslot = id;
        g->len = len;
        g->vals = v;
        v += len;
        g->clob = R->proc[id] != 0 && clobbers_own_send(R, x, k) ? R->proc[id] : NONE32;
        g->next = -1;
        g->rstep = -1;
        g->rslot = 0;
        g->ridx = 0;
        g->vc = 0;
        g->posted = g->done = 0;
        size_t pr = (size_t)p * n + x->send_peer;
        if (tail[pr] < 0)
          S.pair_cur[pr] = (int)m;
        else
          S.msg[tail[pr]].next = (int)m;
        tail[pr] = (int)m;
        R->smsg[id] = (int)m++;
      }
    }
  }
  S.nmsg = m;
  /* Receives: the i-th nonempty receive slice of b from a meets the i-th
   * message of a to b (the step-level check already matched the counts). */
  int *cur = tail;
  for (size_t i = 0; i < np2; i++)
    cur[i] = S.pair_cur[i];
  for (int b = 0; b < n; b++) {
    struct rank *R = &S.r[b];
    for (int i = 0; i < R->s.nsteps; i++) {
      const struct loom_step *x = &R->steps[i];
      if (x->recv_peer < 0)
        continue;
      size_t pr = (size_t)x->recv_peer * n + b;
      for (size_t id = R->base[i]; id < R->base[i + 1]; id++) {
        size_t k = id - R->base[i], len = slice_len(x->recv_count, k);
        if (len == 0)
          continue;
        EXPECT(cur[pr] >= 0, "rank %d step %d slice %zu: no message from rank %d left", b, i, k,
               x->recv_peer);
        struct msg *g = &S.msg[cur[pr]];
        EXPECT(g->len == len,
               "rank %d step %d slice %zu: a %zu-element slice meets rank %d's %zu (step "
               "%d)",
               b, i, k, len, g->from, g->len, g->sstep);
        g->rslot = id;
        g->rstep = i;
        g->ridx = R->proc[id];
        R->rmsg[id] = cur[pr];
        cur[pr] = g->next;
      }
    }
  }
  for (size_t i = 0; i < np2; i++)
    EXPECT(cur[i] < 0, "rank %zu's message to rank %zu (step %d) is never received", i / n, i % n,
           S.msg[cur[i]].sstep);
}

/* ---- accesses and the race check ---------------------------------------------------- */

/* Who accesses memory, described only when a check fails. */
enum who_kind { W_SEND, W_COPY_RECV, W_REDUCE, W_LOCAL_COPY, W_FOLD };
struct who {
  enum who_kind kind;
  int step, peer;
  size_t k;
};

static const char *who_text(const struct who *w) {
  static char buf[128];
  switch (w->kind) {
  case W_SEND:
    snprintf(buf, sizeof buf, "the send of step %d slice %zu to rank %d", w->step, w->k, w->peer);
    break;
  case W_COPY_RECV:
    snprintf(buf, sizeof buf, "the COPY receive of step %d slice %zu from rank %d", w->step, w->k,
             w->peer);
    break;
  case W_REDUCE:
    snprintf(buf, sizeof buf, "the reduce of step %d slice %zu from rank %d", w->step, w->k,
             w->peer);
    break;
  case W_FOLD:
    snprintf(buf, sizeof buf, "the fold");
    break;
  default:
    snprintf(buf, sizeof buf, "the local copy");
  }
  return buf;
}

/* Whether reader rd (of an element of rank p) happens before an event with
 * clock vc. */
static int reader_before(int p, uint32_t rd, const uint32_t *vc) {
  if (rd & PROC_READ)
    return vc[p] >= (rd & ~PROC_READ);
  const struct msg *g = &S.msg[rd];
  /* The send's read ends before its data arrives at the receiver (so
   * before the receiver processes it), and before this rank processes the
   * receive that waits for it in place. */
  return vc[g->to] >= g->ridx || (g->clob != NONE32 && vc[p] >= g->clob);
}

static void describe_reader(int p, uint32_t rd, char *buf, size_t len) {
  if (rd & PROC_READ) {
    snprintf(buf, len, "the reduce of step %d (as its operand)", S.r[p].proc_step[rd & ~PROC_READ]);
  } else {
    const struct msg *g = &S.msg[rd];
    snprintf(buf, len, "the send of step %d slice %zu to rank %d", g->sstep, g->k, g->to);
  }
}

static int writer_step(int p, uint32_t lw) { return lw == 0 ? -1 : S.r[p].proc_step[lw]; }

/* A read of element a of rank p; own: the processing index of this rank's
 * receives the read may rely on (a send relies on its own wait only, not on
 * the engine happening to post sends in order). */
static void check_read(int p, size_t a, uint32_t own, const struct who *who, int buf, size_t off) {
  const struct rank *R = &S.r[p];
  const struct shadow *h = &R->sh[a];
  if (__builtin_expect(!(h->flags & SH_COPY_DST) && own >= h->lw && R->mem[a].valid, 1))
    return;
  EXPECT(!(h->flags & SH_COPY_DST),
         "rank %d: %s reads %s[%zu], the destination of the local copy done at any time", p,
         who_text(who), bufname(buf), off);
  EXPECT(own >= h->lw,
         "rank %d: %s reads %s[%zu] without waiting for the receive of step %d that writes "
         "it (a race: the data may not be there yet)",
         p, who_text(who), bufname(buf), off, writer_step(p, h->lw));
  failf("rank %d: %s reads %s[%zu], which holds garbage", p, who_text(who), bufname(buf), off);
}

/* The i-th reader of h. */
static uint32_t reader(const struct shadow *h, int i) {
  if (i == 0)
    return h->rd0;
  uint32_t c = h->ovf;
  for (i--; i >= 7; i -= 7)
    c = ovf[c].next;
  return ovf[c].rd[i];
}

static void add_reader(int p, size_t a, uint32_t rd) {
  struct shadow *h = &S.r[p].sh[a];
  if (!(h->flags & SH_WRITABLE))
    return; /* never written: no race possible */
  EXPECT(h->nread < 255, "simulator limit: too many reads of one element");
  int i = h->nread++;
  if (i == 0) {
    h->rd0 = rd;
    return;
  }
  if (novf >= ovf_cap) { /* room for a new chunk, before pointing into ovf */
    ovf_cap = ovf_cap ? 2 * ovf_cap : 1024;
    ovf = realloc(ovf, ovf_cap * sizeof *ovf);
    EXPECT(ovf != NULL, "out of memory");
  }
  i--;
  uint32_t *link = &h->ovf;
  for (; i >= 7; i -= 7)
    link = &ovf[*link].next;
  if (i == 0) { /* a new chunk */
    *link = (uint32_t)novf;
    ovf[novf].next = 0;
    novf++;
  }
  ovf[*link].rd[i] = rd;
}

/* A write of element a of rank p by an event with clock vc (idx: its
 * processing index). */
static void check_write(int p, size_t a, const uint32_t *vc, const struct who *who, int buf,
                        size_t off) {
  const struct rank *R = &S.r[p];
  const struct shadow *h = &R->sh[a];
  EXPECT(h->flags & SH_WRITABLE, "rank %d: %s writes %s[%zu], which is not an output", p,
         who_text(who), bufname(buf), off);
  EXPECT(!(h->flags & (SH_COPY_DST | SH_COPY_SRC)),
         "rank %d: %s writes %s[%zu], which the local copy (done at any time) %s", p, who_text(who),
         bufname(buf), off, h->flags & SH_COPY_DST ? "writes" : "reads");
  EXPECT(vc[p] >= h->lw,
         "rank %d: %s writes %s[%zu] in a race with the receive of step %d that also "
         "writes it",
         p, who_text(who), bufname(buf), off, writer_step(p, h->lw));
  for (int i = 0; i < h->nread; i++)
    if (!reader_before(p, reader(h, i), vc)) {
      char d[128];
      describe_reader(p, reader(h, i), d, sizeof d);
      failf("rank %d: %s overwrites %s[%zu] while %s may still read it (a race)", p, who_text(who),
            bufname(buf), off, d);
    }
}

static void set_written(int p, size_t a, uint32_t idx, struct val v) {
  struct rank *R = &S.r[p];
  R->mem[a] = v;
  R->sh[a].lw = idx;
  R->sh[a].nread = 0;
}

/* ---- the engine, per rank ------------------------------------------------------------ */

static void mark_dirty(int a, int b) {
  size_t pr = (size_t)a * S.n + b;
  if (!S.is_dirty[pr]) {
    S.is_dirty[pr] = 1;
    S.dirty[S.ndirty++] = (int)pr;
  }
}

/* The processing index slice k of x's send waits for (0: none), as
 * engine.c's forward_ready: slice k of wait_step's receive, or its last
 * slice with wait_all or when k is past it; receives are processed in
 * order, so that covers every receive slice before it. */
static uint32_t wait_target(const struct rank *R, const struct loom_step *x, size_t k) {
  if (x->wait_step < 0)
    return 0;
  const struct loom_step *w = &R->steps[x->wait_step];
  size_t kr = w->recv_peer >= 0 ? nslices(w->recv_count) : 0;
  if (kr == 0)
    return 0;
  size_t j = x->wait_all || k >= kr ? kr - 1 : k;
  return R->proc[R->base[x->wait_step] + j];
}

/* Sends are posted as soon as they are ready (called after every processed
 * receive), so a send's clock is the clock of the last processed receive:
 * exactly what its wait (and the waits of the sends before it) covers. */
static void post_sends(int p) {
  struct rank *R = &S.r[p];
  while (R->next_send < R->nslots) {
    while (R->next_send >= R->base[R->send_step + 1])
      R->send_step++;
    size_t id = R->next_send, k = id - R->base[R->send_step];
    const struct loom_step *x = &R->steps[R->send_step];
    size_t len = x->send_peer >= 0 ? slice_len(x->send_count, k) : 0;
    if (len > 0) {
      uint32_t own = wait_target(R, x, k);
      if (R->recvs_done < own)
        return; /* not ready */
      struct msg *g = &S.msg[R->smsg[id]];
      if (R->vc_dirty) {
        EXPECT(S.nsnaps < S.snaps_cap, "simulator: snapshot pool exhausted");
        R->snap = (uint32_t)S.nsnaps++;
        memcpy(S.snaps + (size_t)R->snap * S.n, R->vc, sizeof(uint32_t) * (size_t)S.n);
        R->vc_dirty = 0;
      }
      g->vc = R->snap;
      struct who w = {W_SEND, R->send_step, x->send_peer, k}, *who = &w;
      size_t off = x->send_off + k * S.c->slice;
      for (size_t i = 0; i < len; i++) {
        size_t a = at(R, x->send_buf, off + i);
        check_read(p, a, own, who, x->send_buf, off + i);
        S.vals[g->vals + i] = R->mem[a];
        add_reader(p, a, (uint32_t)R->smsg[id]);
      }
      g->posted = 1;
      mark_dirty(p, x->send_peer);
      S.progressed = 1;
    }
    R->next_send++;
  }
}

static void post_recvs(int p) {
  struct rank *R = &S.r[p];
  while (R->next_recv < R->nslots && R->fifo_count < ENGINE_FIFO) {
    while (R->next_recv >= R->base[R->recv_step + 1])
      R->recv_step++;
    size_t id = R->next_recv, k = id - R->base[R->recv_step];
    const struct loom_step *x = &R->steps[R->recv_step];
    size_t len = x->recv_peer >= 0 ? slice_len(x->recv_count, k) : 0;
    if (len > 0) {
      if (x->recv_op == LOOM_RECV_REDUCE) {
        if (R->reduce_inflight == ENGINE_TEMP)
          return;
        R->reduce_inflight++;
      }
      R->rposted[id] = 1;
      R->fifo[(R->fifo_head + R->fifo_count) % ENGINE_FIFO] = id;
      R->fifo_count++;
      mark_dirty(x->recv_peer, p);
      S.progressed = 1;
    }
    R->next_recv++;
  }
}

/* Rendezvous: message g moves once its receive is posted; a COPY lands in
 * place now, a REDUCE waits in a temp slot until processed. */
static void transfer(struct msg *g) {
  struct rank *R = &S.r[g->to];
  const struct loom_step *x = &R->steps[g->rstep];
  if (x->recv_op == LOOM_RECV_COPY) {
    /* Its writes may start as soon as both sides posted: the clock is the
     * sender's at posting. */
    const uint32_t *vc = S.snaps + (size_t)g->vc * S.n;
    struct who w = {W_COPY_RECV, g->rstep, g->from, g->k}, *who = &w;
    size_t off = x->recv_off + g->k * S.c->slice;
    for (size_t i = 0; i < g->len; i++) {
      size_t a = at(R, x->recv_buf, off + i);
      check_write(g->to, a, vc, who, x->recv_buf, off + i);
      set_written(g->to, a, g->ridx, S.vals[g->vals + i]);
    }
  }
  R->arrived[g->rslot] = 1;
  g->done = 1;
  S.r[g->from].sends_done++;
  S.progressed = 1;
}

static void transport(void) {
  for (int i = 0; i < S.ndirty; i++) {
    int pr = S.dirty[i];
    S.is_dirty[pr] = 0;
    for (int m = S.pair_cur[pr]; m >= 0; m = S.pair_cur[pr]) {
      struct msg *g = &S.msg[m];
      if (!g->posted || !S.r[g->to].rposted[g->rslot])
        break;
      transfer(g);
      S.pair_cur[pr] = g->next;
    }
  }
  S.ndirty = 0;
}

static struct val combine(int p, int step, size_t elem, struct val mine, struct val data,
                          int recv_first) {
  EXPECT(data.valid, "rank %d step %d: reduces received garbage at element %zu", p, step, elem);
  EXPECT(mine.src == data.src,
         "rank %d step %d: element %zu combines source elements %u (mine) and %u (received)", p,
         step, elem, mine.src, data.src);
  EXPECT((mine.mask & data.mask) == 0, "rank %d step %d: element %zu counts ranks %#llx twice", p,
         step, elem, (unsigned long long)(mine.mask & data.mask));
  EXPECT(mine.fin == 0 && data.fin == 0, "rank %d step %d: element %zu reduces a finalized value",
         p, step, elem);
  struct val v = {mine.mask | data.mask,
                  recv_first ? mix64(data.hash * 31 + mine.hash)
                             : mix64(mine.hash * 31 + data.hash),
                  mine.src,
                  (uint16_t)(mine.terms + data.terms),
                  0,
                  1};
  return v;
}

static void process(int p, size_t id, const struct msg *g) {
  struct rank *R = &S.r[p];
  int st = g->rstep;
  const struct loom_step *x = &R->steps[st];
  uint32_t t = R->proc[id];
  /* Its clock: every earlier processed receive, and the data's arrival. */
  if (g->vc != R->joined[g->from]) { /* a sender's snapshots only grow */
    const uint32_t *restrict mv = S.snaps + (size_t)g->vc * S.n;
    uint32_t *restrict vc = R->vc;
    for (int q = 0, n = S.n; q < n; q++)
      vc[q] = mv[q] > vc[q] ? mv[q] : vc[q];
    R->joined[g->from] = g->vc;
  }
  EXPECT(R->vc[p] + 1 == t, "simulator: processing out of order");
  R->vc[p] = t;
  R->vc_dirty = 1;
  if (x->recv_op != LOOM_RECV_REDUCE)
    return;
  size_t o = g->k * S.c->slice, dst = at(R, x->recv_buf, x->recv_off + o);
  size_t mine = at(R, x->mine_buf, x->mine_off + o);
  struct who w = {W_REDUCE, st, g->from, g->k}, *who = &w;
  for (size_t i = 0; i < g->len; i++) {
    check_read(p, mine + i, t, who, x->mine_buf, x->mine_off + o + i);
    check_write(p, dst + i, R->vc, who, x->recv_buf, x->recv_off + o + i);
  }
  for (size_t i = 0; i < g->len; i++) {
    struct val v =
        combine(p, st, x->recv_off + o + i, R->mem[mine + i], S.vals[g->vals + i], x->recv_first);
    if (x->finalize) {
      EXPECT(v.mask == all_ranks(S.n),
             "rank %d step %d: finalizes %s[%zu] holding only ranks %#llx", p, st,
             bufname(x->recv_buf), x->recv_off + o + i, (unsigned long long)v.mask);
      v.fin = 1;
      v.hash = mix64(v.hash ^ 0xf1f1f1f1ull);
    }
    if (dst != mine)
      add_reader(p, mine + i, PROC_READ | t);
    set_written(p, dst + i, t, v);
  }
}

static void complete_recvs(int p) {
  struct rank *R = &S.r[p];
  while (R->fifo_count > 0) {
    size_t id = R->fifo[R->fifo_head];
    if (!R->arrived[id])
      return;
    const struct msg *g = &S.msg[R->rmsg[id]];
    const struct loom_step *x = &R->steps[g->rstep];
    if (clobbers_own_send(R, x, g->k) && !(R->next_send > id && S.msg[R->smsg[id]].done))
      return;
    process(p, id, g);
    if (x->recv_op == LOOM_RECV_REDUCE)
      R->reduce_inflight--;
    R->recvs_done++;
    R->fifo_head = (R->fifo_head + 1) % ENGINE_FIFO;
    R->fifo_count--;
    S.progressed = 1;
    post_sends(p); /* at once: its clock is this receive's */
  }
}

/* What a stuck rank waits for, for the deadlock message. */
static void describe_stuck(int p, char *buf, size_t len) {
  const struct rank *R = &S.r[p];
  int o = 0;
  if (R->fifo_count > 0) {
    size_t id = R->fifo[R->fifo_head];
    const struct msg *g = &S.msg[R->rmsg[id]];
    o += snprintf(buf + o, len - (size_t)o, "rank %d waits for step %d slice %zu from rank %d%s", p,
                  g->rstep, g->k, g->from,
                  R->arrived[id] ? " (arrived; its own send of that slice is not done)" : "");
  } else if (R->next_send < R->nslots) {
    o += snprintf(buf + o, len - (size_t)o, "rank %d cannot post its send of step %d", p,
                  R->send_step);
  } else {
    o += snprintf(buf + o, len - (size_t)o, "rank %d waits for its sends to complete", p);
  }
  (void)o;
}

static void run_engines(void) {
  int n = S.n;
  for (int p = 0; p < n; p++)
    post_sends(p);
  for (;;) {
    S.progressed = 0;
    for (int p = 0; p < n; p++)
      post_recvs(p);
    transport();
    for (int p = 0; p < n; p++)
      complete_recvs(p);
    int all = 1;
    for (int p = 0; p < n; p++) {
      struct rank *R = &S.r[p];
      R->done = R->recvs_done == R->recvs_total && R->sends_done == R->sends_total;
      all &= R->done;
    }
    if (all)
      return;
    if (!S.progressed) {
      char d[256] = "";
      for (int p = 0; p < n; p++)
        if (!S.r[p].done) {
          describe_stuck(p, d, sizeof d);
          break;
        }
      failf("deadlock: %s", d);
    }
  }
}

/* The local copy: before everything when a step touches its destination
 * (engine.c's copy_can_wait), else at any time. */
static int copy_can_wait(const struct rank *R) {
  const struct loom_local_copy *cp = &R->s.copy;
  size_t d = at(R, cp->to_buf, cp->to_off);
  for (int i = 0; i < R->s.nsteps; i++) {
    const struct loom_step *x = &R->steps[i];
    if ((x->send_peer >= 0 && ovl(d, cp->count, at(R, x->send_buf, x->send_off), x->send_count)) ||
        (x->recv_peer >= 0 && ovl(d, cp->count, at(R, x->recv_buf, x->recv_off), x->recv_count)) ||
        (x->recv_op == LOOM_RECV_REDUCE &&
         ovl(d, cp->count, at(R, x->mine_buf, x->mine_off), x->recv_count)))
      return 0;
  }
  return 1;
}

static void do_copy(int p) {
  struct rank *R = &S.r[p];
  const struct loom_local_copy *cp = &R->s.copy;
  size_t src = at(R, cp->from_buf, cp->from_off), dst = at(R, cp->to_buf, cp->to_off);
  static const uint32_t zero[MAX_RANKS];
  struct who w = {W_LOCAL_COPY, -1, -1, 0}, *who = &w;
  for (size_t i = 0; i < cp->count; i++) {
    R->sh[src + i].flags &= (uint8_t)~SH_COPY_SRC;
    R->sh[dst + i].flags &= (uint8_t)~SH_COPY_DST;
  }
  for (size_t i = 0; i < cp->count; i++) {
    check_read(p, src + i, 0, who, cp->from_buf, cp->from_off + i);
    check_write(p, dst + i, R->copy_float ? R->vc : zero, who, cp->to_buf, cp->to_off + i);
    R->mem[dst + i] = R->mem[src + i];
  }
}

static void start_copies(void) {
  for (int p = 0; p < S.n; p++) {
    struct rank *R = &S.r[p];
    const struct loom_local_copy *cp = &R->s.copy;
    if (cp->count == 0 || at(R, cp->from_buf, cp->from_off) == at(R, cp->to_buf, cp->to_off))
      continue; /* none, or in place */
    if (!copy_can_wait(R)) {
      do_copy(p);
      continue;
    }
    R->copy_float = 1;
    size_t src = at(R, cp->from_buf, cp->from_off), dst = at(R, cp->to_buf, cp->to_off);
    for (size_t i = 0; i < cp->count; i++) {
      R->sh[src + i].flags |= SH_COPY_SRC;
      R->sh[dst + i].flags |= SH_COPY_DST;
    }
  }
}

/* Block j of rank p's fold (struct loom_fold), element i. */
static size_t fold_block(const struct rank *R, int j, size_t i) {
  const struct loom_fold *f = &R->s.fold;
  if (j == f->self)
    return at(R, LOOM_BUF_SEND, i);
  return at(R, LOOM_BUF_SCRATCH, (size_t)(j < f->self ? j : j - 1) * f->count + i);
}

/* The engine folds only once every send of the rank is done, so reads by
 * the rank's own finished sends are over: they are dropped from element a's
 * readers (when all its readers are such sends or ordered reduces). */
static void retire_own_sends(int p, size_t a) {
  struct shadow *h = &S.r[p].sh[a];
  for (int i = 0; i < h->nread; i++) {
    uint32_t rd = reader(h, i);
    if (rd & PROC_READ ? !reader_before(p, rd, S.r[p].vc)
                       : S.msg[rd].from != p || !S.msg[rd].done)
      return; /* check_write judges */
  }
  h->nread = 0;
}

/* The fold as engine.c's fold_run does it, after every step: the running
 * value in SCRATCH block 0 while the own block is still to come (third or
 * later), else in RECV. */
static void do_fold(int p) {
  struct rank *R = &S.r[p];
  const struct loom_fold *f = &R->s.fold;
  struct who w = {W_FOLD, -1, -1, 0}, *who = &w;
  uint32_t t = R->vc[p];
  EXPECT(R->sends_done == R->sends_total, "simulator: rank %d folds before its sends are done", p);
  for (size_t i = 0; i < f->count; i++) {
    size_t recv = at(R, LOOM_BUF_RECV, i);
    size_t acc = f->self >= 2 ? fold_block(R, 0, i) : recv;
    size_t b0 = fold_block(R, 0, i), b1 = fold_block(R, 1, i);
    check_read(p, b0, t, who, f->self == 0 ? LOOM_BUF_SEND : LOOM_BUF_SCRATCH, i);
    check_read(p, b1, t, who, f->self == 1 ? LOOM_BUF_SEND : LOOM_BUF_SCRATCH, i);
    retire_own_sends(p, acc);
    check_write(p, acc, R->vc, who, acc == recv ? LOOM_BUF_RECV : LOOM_BUF_SCRATCH, i);
    struct val v = combine(p, -1, i, R->mem[b0], R->mem[b1], 0);
    R->mem[acc] = v;
    for (int j = 2; j < f->nblocks; j++) {
      size_t b = fold_block(R, j, i);
      check_read(p, b, t, who, j == f->self ? LOOM_BUF_SEND : LOOM_BUF_SCRATCH, i);
      if (j == f->self) {
        retire_own_sends(p, recv);
        check_write(p, recv, R->vc, who, LOOM_BUF_RECV, i);
        v = combine(p, -1, i, R->mem[acc], R->mem[b], 0);
        acc = recv;
      } else {
        v = combine(p, -1, i, R->mem[acc], R->mem[b], 0);
      }
      R->mem[acc] = v;
    }
    EXPECT(acc == recv, "rank %d: the fold ended outside RECV", p);
    if (f->finalize) {
      R->mem[recv].fin = 1;
      R->mem[recv].hash = mix64(R->mem[recv].hash ^ 0xf1f1f1f1ull);
    }
  }
}

static void check_results(void) {
  const struct call *c = S.c;
  int n = S.n;
  for (int p = 0; p < n; p++) {
    const struct rank *R = &S.r[p];
    if (R->na[LOOM_BUF_RECV])
      continue;
    for (size_t e = 0; e < R->recv_len; e++) {
      const struct val *w = &R->expect[e];
      if (!w->valid)
        continue; /* not written: the write check saw to that */
      const struct val *v = &R->mem[at(R, LOOM_BUF_RECV, e)];
      EXPECT(v->valid, "rank %d: RECV[%zu] never written", p, e);
      EXPECT(v->mask == w->mask && v->terms == w->terms && v->src == w->src,
             "rank %d: RECV[%zu] holds ranks %#llx (%u terms) of source element %u; expected "
             "ranks %#llx (%u terms) of element %u",
             p, e, (unsigned long long)v->mask, v->terms, v->src, (unsigned long long)w->mask,
             w->terms, w->src);
      EXPECT(v->fin == w->fin, "rank %d: RECV[%zu] finalized %d times, expected %d", p, e, v->fin,
             w->fin);
      if (w->terms == 1)
        EXPECT(v->hash == w->hash, "rank %d: RECV[%zu] is not the sent value", p, e);
    }
  }
  if (c->coll == RING_AR || c->coll == RD_AR || c->coll == ONESHOT_AR) /* every rank: the same bits */
    for (int p = 1; p < n; p++)
      for (size_t e = 0; e < c->count; e++)
        EXPECT(S.r[p].mem[at(&S.r[p], LOOM_BUF_RECV, e)].hash ==
                   S.r[0].mem[at(&S.r[0], LOOM_BUF_RECV, e)].hash,
               "rank %d's RECV[%zu] was reduced in another order than rank 0's", p, e);
}

static void format_ctx(const struct call *c) {
  char sl[32] = "whole steps", rt[32] = "";
  if (c->slice != BIG_SLICE)
    snprintf(sl, sizeof sl, "%zu", c->slice);
  if (is_rooted(c->coll))
    snprintf(rt, sizeof rt, " root=%d", c->root);
  snprintf(ctx, sizeof ctx, "%s nranks=%d count=%zu%s%s%s, %s, slice=%s", coll_fn[c->coll], c->n,
           c->count, c->variant ? " " : "", c->variant ? c->variant : "", rt,
           c->inplace ? "in place" : "out of place", sl);
}

/* The slice size of kind c->slice_kind given the largest step m; 0: skip
 * (a repeat, or as large as every step = whole steps, also run). */
static size_t resolve_slice(const struct call *c, size_t m) {
  int n = c->n;
  size_t sl[NSLICES] = {BIG_SLICE, m <= 24 && m * (size_t)n <= 256 ? 1 : BIG_SLICE,
                        m <= 24 ? 3 : BIG_SLICE, (m + 2) / 3,
                        m <= 64 && n <= 33 ? m - 1 : BIG_SLICE};
  for (int i = 1; i < NSLICES; i++) {
    if (sl[i] == 0 || sl[i] >= m)
      sl[i] = BIG_SLICE;
    for (int j = 0; j < i; j++)
      if (sl[j] == sl[i])
        sl[i] = 0;
  }
  if (c->slice_kind != SL_WHOLE && sl[c->slice_kind] == BIG_SLICE)
    return 0;
  return sl[c->slice_kind];
}

void simulate(struct call *c) {
  /* The largest step of the last schedules built (in place or not and the
   * slice size do not change them): skip before building again. */
  static struct call last;
  static size_t last_m;
  if (c->custom == NULL && last.custom == NULL && c->coll == last.coll && c->n == last.n &&
      c->count == last.count && c->root == last.root && c->sc == last.sc &&
      c->variant == last.variant && resolve_slice(c, last_m) == 0)
    return;
  c->slice = BIG_SLICE;
  format_ctx(c);
  pool_reset();
  novf = 1; /* chunk 0: none */
  memset(&S, 0, sizeof S);
  S.c = c;
  S.n = c->n;
  int n = c->n, cap = LOOM_SCHED_MAX_STEPS(n) + 8;
  S.r = pcalloc((size_t)n, sizeof *S.r);
  for (int p = 0; p < n; p++) {
    struct rank *R = &S.r[p];
    R->steps = pcalloc((size_t)cap, sizeof *R->steps);
    memset(R->steps, 0xa5, sizeof *R->steps * (size_t)cap);
    memset(&R->s.copy, 0xa5, sizeof R->s.copy);
    memset(&R->s.fold, 0xa5, sizeof R->s.fold);
    R->s.nsteps = -7;
    R->s.scratch_count = (size_t)0xa5a5a5a5;
    R->s.overflow = 0xa5; /* the builder must reset it */
    R->s.cap = cap;
    R->s.steps = R->steps;
    build(p, &R->s);
    EXPECT(R->s.steps == R->steps && R->s.cap == cap,
           "rank %d: the builder replaced the step storage", p);
    EXPECT(!R->s.overflow, "rank %d: the schedule overflowed its %d steps", p, cap);
    EXPECT(R->s.nsteps >= 0 && R->s.nsteps <= LOOM_SCHED_MAX_STEPS(n),
           "rank %d: %d steps, more than LOOM_SCHED_MAX_STEPS(%d) = %d", p, R->s.nsteps, n,
           LOOM_SCHED_MAX_STEPS(n));
    for (int i = R->s.nsteps; i < cap; i++)
      EXPECT(R->steps[i].send_peer == (int)0xa5a5a5a5 && R->steps[i].recv_peer == (int)0xa5a5a5a5,
             "rank %d: step %d written past nsteps", p, i);
  }
  size_t m = 0;
  for (int p = 0; p < n; p++)
    for (int i = 0; i < S.r[p].s.nsteps; i++) {
      const struct loom_step *x = &S.r[p].steps[i];
      if (x->send_peer >= 0 && x->send_count > m)
        m = x->send_count;
      if (x->recv_peer >= 0 && x->recv_count > m)
        m = x->recv_count;
    }
  last = *c;
  last_m = m;
  c->slice = resolve_slice(c, m);
  if (c->slice == 0)
    return;
  format_ctx(c);
  for (int p = 0; p < n; p++) {
    lay_out(p);
    check_steps(p);
  }
  check_pairs();
  make_slots();
  start_copies();
  run_engines();
  for (int p = 0; p < n; p++)
    if (S.r[p].copy_float)
      do_copy(p);
  for (int p = 0; p < n; p++)
    if (S.r[p].s.fold.count > 0)
      do_fold(p);
  check_results();
}
