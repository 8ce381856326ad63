/*
 * check_sched.c — unit tests of the schedules (src/sched/ring.c).
 *
 * loom_sched_split is checked directly.  The ring schedules are proved
 * correct by a symbolic simulator that runs every rank's schedule the way
 * the engine (src/engine/engine.c) interprets it, for every nranks 1..64
 * and several counts:
 *   - copy_send_block first: recvbuff[block] = sendbuff[block_off - send_origin]
 *   - step s of every rank runs in lockstep; a send of block b reads
 *     sendbuff[off - send_origin] (send_from SEND) or recvbuff[off] (RECV);
 *     the peer named by send_peer must name this rank as recv_peer in the
 *     same step, with a block of the same size;
 *   - RECV_COPY lands the data in recvbuff[block]; RECV_REDUCE makes
 *     recvbuff[block] = sendbuff[block] op data; finalize marks the element
 *     as scaled (loomAvg's division).
 * Each element is a symbolic value: the set of ranks whose contribution it
 * holds (a mask), how many contributions were combined (so that a rank
 * counted twice is seen), the sum of the contributors' rank ids, the
 * sendbuff index the contributions came from, and the number of times it was
 * finalized.  The engine's only ordering guarantee for a send from recvbuff
 * is send_waits (slice k waits for the previous step's receive of slice k,
 * and receives complete in posting order), so a send from recvbuff of a
 * block that a receive wrote must have send_waits set, and the previous
 * step's receive must have a slice wherever the sent block has one.
 */
#include "sched/schedule.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ck_assert costs a system call per passing check; loops use this. */
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

#define MAX_RANKS 64
#define POISON ((size_t)0xa5a5a5a5a5a5a5a5ull)

/* ---- loom_sched_split ------------------------------------------------------------ */

static void check_split(size_t count, int n) {
  size_t off[MAX_RANKS + 1], cnt[MAX_RANKS + 1];
  off[n] = cnt[n] = (size_t)0xdeadbeef; /* must not be written */
  loom_sched_split(count, n, off, cnt);
  EXPECT(off[n] == (size_t)0xdeadbeef && cnt[n] == (size_t)0xdeadbeef,
         "split(%zu, %d) wrote past n entries", count, n);
  size_t sum = 0, lo = SIZE_MAX, hi = 0;
  for (int b = 0; b < n; b++) {
    EXPECT(off[b] == sum, "split(%zu, %d): block %d at %zu, expected %zu", count, n, b,
           off[b], sum);
    sum += cnt[b];
    if (cnt[b] < lo)
      lo = cnt[b];
    if (cnt[b] > hi)
      hi = cnt[b];
    /* Documented: the first count % n blocks are the larger ones. */
    size_t want = count / (size_t)n + ((size_t)b < count % (size_t)n ? 1 : 0);
    EXPECT(cnt[b] == want, "split(%zu, %d): block %d has %zu, expected %zu", count, n, b,
           cnt[b], want);
  }
  EXPECT(sum == count, "split(%zu, %d): blocks sum to %zu", count, n, sum);
  EXPECT(hi - lo <= 1, "split(%zu, %d): sizes %zu..%zu differ by more than one", count, n,
         lo, hi);
}

START_TEST(split_many) {
  for (int n = 1; n <= MAX_RANKS; n++) {
    for (size_t count = 0; count <= 300; count++)
      check_split(count, n);
    static const size_t big[] = {1000, 1009, 4096, 65535, 65536, 1000003, (size_t)1 << 33,
                                 ((size_t)1 << 40) + 7};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
      check_split(big[i], n);
  }
  size_t off[4], cnt[4];
  loom_sched_split(10, 4, off, cnt); /* 3 3 2 2 */
  ck_assert_uint_eq(cnt[0], 3);
  ck_assert_uint_eq(cnt[1], 3);
  ck_assert_uint_eq(cnt[2], 2);
  ck_assert_uint_eq(cnt[3], 2);
  ck_assert_uint_eq(off[3], 8);
}
END_TEST

/* ---- the symbolic simulator ---------------------------------------------------- */

/* 16 bytes: the largest case (64 ranks x 64 x 1009 elements) stays small. */
struct val {
  uint64_t mask;  /* ranks whose contribution is in */
  uint16_t src;   /* sendbuff index the contributions came from */
  uint16_t idsum; /* sum of contributors' rank ids, counted with multiplicity */
  uint8_t terms;  /* contributions combined (> popcount(mask) = double count) */
  uint8_t fin;    /* times finalized */
  uint8_t valid;  /* 0 = never written */
};
#define MAX_COUNT 65535 /* src fits in 16 bits */

enum coll { ALLREDUCE, ALLGATHER, RD };

struct rank_state {
  struct loom_schedule s;
  struct loom_step steps[2 * MAX_RANKS + 1];
  size_t off[MAX_RANKS + 1], cnt[MAX_RANKS + 1];
  struct val *recv;
  int *last_write;  /* per block: step of the last receive into it, -1 = none */
  struct val *msg;  /* what this rank sends in the current step */
  size_t msg_len;
};

static struct val contribution(int rank, size_t idx) {
  struct val v = {(uint64_t)1 << rank, (uint16_t)idx, (uint16_t)rank, 1, 0, 1};
  return v;
}

/* Combines a (this rank's sendbuff) with b (received): dst = a op b. */
static struct val combine(struct val a, struct val b, int rank, int step, size_t elem) {
  EXPECT(b.valid, "rank %d step %d: reduced garbage at element %zu", rank, step, elem);
  EXPECT(a.src == b.src, "rank %d step %d: element %zu combines sendbuff[%u] with [%u]",
         rank, step, elem, a.src, b.src);
  EXPECT((a.mask & b.mask) == 0,
         "rank %d step %d: element %zu counts ranks %#llx twice", rank, step, elem,
         (unsigned long long)(a.mask & b.mask));
  EXPECT(a.fin == 0 && b.fin == 0, "rank %d step %d: element %zu reduces a finalized value",
         rank, step, elem);
  struct val v = {a.mask | b.mask, a.src, (uint16_t)(a.idsum + b.idsum),
                  (uint8_t)(a.terms + b.terms), 0, 1};
  return v;
}

/* Checks one step's fields for sanity. */
static void check_step_fields(const struct rank_state *st, int rank, int n, int i) {
  const struct loom_step *p = &st->s.steps[i];
  EXPECT(p->send_peer >= -1 && p->send_peer < n && p->send_peer != rank,
         "rank %d step %d: bad send_peer %d", rank, i, p->send_peer);
  EXPECT(p->recv_peer >= -1 && p->recv_peer < n && p->recv_peer != rank,
         "rank %d step %d: bad recv_peer %d", rank, i, p->recv_peer);
  if (p->send_peer >= 0) {
    EXPECT(p->send_block >= 0 && p->send_block < st->s.nblocks,
           "rank %d step %d: bad send_block %d", rank, i, p->send_block);
    EXPECT(p->send_from == LOOM_BUF_SEND || p->send_from == LOOM_BUF_RECV,
           "rank %d step %d: bad send_from %d", rank, i, p->send_from);
    EXPECT(p->send_waits <= 1, "rank %d step %d: bad send_waits %d", rank, i, p->send_waits);
  }
  if (p->recv_peer >= 0) {
    EXPECT(p->recv_block >= 0 && p->recv_block < st->s.nblocks,
           "rank %d step %d: bad recv_block %d", rank, i, p->recv_block);
    EXPECT(p->recv_op == LOOM_RECV_COPY || p->recv_op == LOOM_RECV_REDUCE,
           "rank %d step %d: bad recv_op %d", rank, i, p->recv_op);
    EXPECT(p->reduce_with == LOOM_BUF_SEND || p->reduce_with == LOOM_BUF_RECV,
           "rank %d step %d: bad reduce_with %d", rank, i, p->reduce_with);
    EXPECT(p->recv_first <= 1, "rank %d step %d: bad recv_first %d", rank, i, p->recv_first);
  }
  EXPECT(p->finalize <= 1, "rank %d step %d: bad finalize %d", rank, i, p->finalize);
}

/* Every rank's recvbuff, reused between runs (fresh pages cost more than
 * clearing them). */
static struct val *pool_mem;
static size_t pool_cap;

static struct val *pool_get(size_t n) {
  if (n == 0)
    n = 1;
  if (n > pool_cap) {
    free(pool_mem);
    pool_mem = malloc(n * sizeof *pool_mem);
    EXPECT(pool_mem != NULL, "out of memory");
    pool_cap = n;
  }
  memset(pool_mem, 0, n * sizeof *pool_mem);
  return pool_mem;
}

/* What sendbuff element idx of rank r holds now: its contribution, or in
 * place (sendbuff aliases recvbuff + send_origin) whatever recvbuff holds. */
static struct val send_read(const struct rank_state *st, int r, size_t idx, int inplace) {
  return inplace ? st->recv[st->s.send_origin + idx] : contribution(r, idx);
}

/* Runs coll for n ranks and count elements (per rank for all-gather);
 * inplace: sendbuff == recvbuff (all-reduce) or recvbuff + rank*count
 * (all-gather), as the API allows. */
static int rd_steps(int n) {
  int k = 0;
  while ((1 << k) < n)
    k++;
  return k;
}

static void simulate(enum coll coll, int n, size_t count, int inplace) {
  EXPECT(count <= MAX_COUNT, "count %zu too large for the simulator", count);
  struct rank_state *rs = calloc((size_t)n, sizeof *rs);
  EXPECT(rs != NULL, "out of memory");
  size_t recv_len = coll != ALLGATHER ? count : count * (size_t)n;
  struct val *pool = pool_get((size_t)n * recv_len);
  size_t send_len = count;
  for (int r = 0; r < n; r++) {
    struct rank_state *st = &rs[r];
    /* Poison everything the schedule should write. */
    memset(st->steps, 0xa5, sizeof st->steps);
    memset(st->off, 0xa5, sizeof st->off);
    memset(st->cnt, 0xa5, sizeof st->cnt);
    st->s.nsteps = -7;
    st->s.nblocks = -7;
    st->s.send_origin = (size_t)0xa5a5a5a5;
    st->s.copy_send_block = -7;
    st->s.steps = st->steps;
    st->s.block_off = st->off;
    st->s.block_count = st->cnt;
    if (coll == RD)
      loom_rd_allreduce(r, n, count, &st->s);
    else if (coll == ALLREDUCE)
      loom_ring_allreduce(r, n, count, &st->s);
    else
      loom_ring_allgather(r, n, count, &st->s);

    /* Shape. */
    int nb = coll == RD ? 1 : n;
    EXPECT(st->s.nblocks == nb, "n=%d rank %d: nblocks %d", n, r, st->s.nblocks);
    EXPECT(st->off[nb] == POISON && st->cnt[nb] == POISON,
           "n=%d rank %d: block arrays written past nranks entries", n, r);
    int want_steps = coll == RD ? rd_steps(n) : coll == ALLREDUCE ? (n == 1 ? 0 : 2 * (n - 1)) : n - 1;
    EXPECT(st->s.nsteps == want_steps, "n=%d rank %d: %d steps, expected %d", n, r,
           st->s.nsteps, want_steps);
    EXPECT(st->s.nsteps <= LOOM_SCHED_MAX_STEPS_PER_RANK(n), "n=%d: too many steps", n);
    EXPECT(st->steps[st->s.nsteps].send_peer == (int)0xa5a5a5a5,
           "n=%d rank %d: steps written past nsteps", n, r);
    size_t o = 0;
    for (int b = 0; b < nb; b++) {
      EXPECT(st->off[b] == o, "n=%d rank %d: block %d at %zu, expected %zu", n, r, b,
             st->off[b], o);
      if (coll == ALLGATHER)
        EXPECT(st->cnt[b] == count, "n=%d rank %d: all-gather block %d has %zu", n, r, b,
               st->cnt[b]);
      o += st->cnt[b];
    }
    EXPECT(o == recv_len, "n=%d rank %d: blocks cover %zu of %zu", n, r, o, recv_len);
    if (r > 0) /* every rank cuts the buffer the same way */
      for (int b = 0; b < nb; b++)
        EXPECT(st->off[b] == rs[0].off[b] && st->cnt[b] == rs[0].cnt[b],
               "n=%d: rank %d's block %d differs from rank 0's", n, r, b);
    /* Documented copy and origin. */
    if (coll != ALLGATHER) {
      EXPECT(st->s.send_origin == 0, "n=%d rank %d: all-reduce send_origin %zu", n, r,
             st->s.send_origin);
      EXPECT(st->s.copy_send_block == (n == 1 ? 0 : -1),
             "n=%d rank %d: all-reduce copy_send_block %d", n, r, st->s.copy_send_block);
    } else {
      EXPECT(st->s.send_origin == (size_t)r * count, "n=%d rank %d: send_origin %zu", n, r,
             st->s.send_origin);
      EXPECT(st->s.copy_send_block == r, "n=%d rank %d: all-gather copy_send_block %d", n,
             r, st->s.copy_send_block);
    }
    for (int i = 0; i < st->s.nsteps; i++)
      check_step_fields(st, r, n, i);
    if (coll != ALLGATHER && n > 1) {
      int fin = 0;
      for (int i = 0; i < st->s.nsteps; i++)
        if (st->steps[i].finalize) {
          fin++;
          EXPECT(st->steps[i].recv_peer >= 0 && st->steps[i].recv_op == LOOM_RECV_REDUCE,
                 "n=%d rank %d step %d: finalize without a reduce", n, r, i);
        }
      EXPECT(fin == 1, "n=%d rank %d: finalize set on %d steps", n, r, fin);
    } else {
      for (int i = 0; i < st->s.nsteps; i++)
        EXPECT(st->steps[i].finalize == 0, "n=%d rank %d step %d: finalize set", n, r, i);
    }

    st->recv = pool + (size_t)r * recv_len;
    size_t max_block = 1;
    for (int b = 0; b < nb; b++)
      if (st->cnt[b] > max_block)
        max_block = st->cnt[b];
    st->msg = calloc(max_block, sizeof *st->msg);
    st->last_write = malloc((size_t)n * sizeof *st->last_write);
    EXPECT(st->recv && st->msg && st->last_write, "out of memory");
    for (int b = 0; b < nb; b++)
      st->last_write[b] = -1;

    /* In place, sendbuff's data is already in recvbuff. */
    if (inplace)
      for (size_t i = 0; i < send_len; i++)
        st->recv[st->s.send_origin + i] = contribution(r, i);
    /* copy_send_block (the engine skips it when in place: dst == src) */
    int cb = st->s.copy_send_block;
    if (cb >= 0 && !inplace) {
      EXPECT(cb < nb, "n=%d rank %d: copy_send_block %d", n, r, cb);
      for (size_t i = 0; i < st->cnt[cb]; i++) {
        size_t e = st->off[cb] + i;
        EXPECT(e >= st->s.send_origin && e - st->s.send_origin < send_len,
               "n=%d rank %d: copy reads outside sendbuff", n, r);
        st->recv[e] = contribution(r, e - st->s.send_origin);
      }
    }
  }

  int nsteps = rs[0].s.nsteps;
  for (int step = 0; step < nsteps; step++) {
    /* Every rank builds its message from the state before the step. */
    for (int r = 0; r < n; r++) {
      struct rank_state *st = &rs[r];
      const struct loom_step *p = &st->steps[step];
      st->msg_len = 0;
      if (p->send_peer < 0)
        continue;
      int b = p->send_block;
      /* Reading recvbuff memory (send_from RECV, or SEND in place). */
      int reads_recvbuff = p->send_from == LOOM_BUF_RECV || inplace;
      if (reads_recvbuff && st->last_write[b] >= 0)
        EXPECT(p->send_waits && step > 0,
               "n=%d rank %d step %d: sends block %d from recvbuff, written by the "
               "receive of step %d, without send_waits",
               n, r, step, b, st->last_write[b]);
      if (reads_recvbuff && st->last_write[b] >= 0) {
        /* send_waits waits for slice k of the previous step's receive; an
         * empty slice there counts as done at once, so that receive must
         * have a slice wherever this block has one. */
        const struct loom_step *prev = &st->steps[step - 1];
        EXPECT(prev->recv_peer >= 0 && st->cnt[prev->recv_block] >= st->cnt[b],
               "n=%d rank %d step %d: send of block %d waits on a receive with fewer "
               "slices",
               n, r, step, b);
      }
      /* Receiving into the block being sent is allowed: the engine lands
       * slice k only after slice k's send completed (schedule.h), which is
       * what this lockstep simulation does too. */
      for (size_t i = 0; i < st->cnt[b]; i++) {
        size_t e = st->off[b] + i;
        if (p->send_from == LOOM_BUF_SEND) {
          EXPECT(e >= st->s.send_origin && e - st->s.send_origin < send_len,
                 "n=%d rank %d step %d: send reads outside sendbuff (element %zu)", n, r,
                 step, e);
          st->msg[i] = send_read(st, r, e - st->s.send_origin, inplace);
          EXPECT(st->msg[i].valid,
                 "n=%d rank %d step %d: sends unwritten sendbuff element %zu", n, r, step,
                 e - st->s.send_origin);
        } else {
          EXPECT(st->recv[e].valid,
                 "n=%d rank %d step %d: sends unwritten recvbuff element %zu", n, r, step,
                 e);
          st->msg[i] = st->recv[e];
        }
      }
      st->msg_len = st->cnt[b];
    }
    /* Matching: every send has its receive and vice versa, same size. */
    for (int r = 0; r < n; r++) {
      const struct loom_step *p = &rs[r].steps[step];
      if (p->send_peer >= 0) {
        const struct loom_step *q = &rs[p->send_peer].steps[step];
        EXPECT(q->recv_peer == r,
               "n=%d step %d: rank %d sends to %d, which receives from %d", n, step, r,
               p->send_peer, q->recv_peer);
        EXPECT(rs[r].cnt[p->send_block] == rs[p->send_peer].cnt[q->recv_block],
               "n=%d step %d: rank %d sends %zu elements, rank %d expects %zu", n, step, r,
               rs[r].cnt[p->send_block], p->send_peer, rs[p->send_peer].cnt[q->recv_block]);
      }
      if (p->recv_peer >= 0) {
        const struct loom_step *q = &rs[p->recv_peer].steps[step];
        EXPECT(q->send_peer == r,
               "n=%d step %d: rank %d receives from %d, which sends to %d", n, step, r,
               p->recv_peer, q->send_peer);
      }
    }
    /* Deliver. */
    for (int r = 0; r < n; r++) {
      struct rank_state *st = &rs[r];
      const struct loom_step *p = &st->steps[step];
      if (p->recv_peer < 0)
        continue;
      const struct rank_state *from = &rs[p->recv_peer];
      int b = p->recv_block;
      for (size_t i = 0; i < st->cnt[b]; i++) {
        size_t e = st->off[b] + i;
        struct val in = from->msg[i];
        if (p->recv_op == LOOM_RECV_COPY) {
          st->recv[e] = in;
        } else {
          EXPECT(e >= st->s.send_origin && e - st->s.send_origin < send_len,
                 "n=%d rank %d step %d: reduce reads outside sendbuff", n, r, step);
          struct val mine = p->reduce_with == LOOM_BUF_RECV
                                ? st->recv[e]
                                : send_read(st, r, e - st->s.send_origin, inplace);
          EXPECT(mine.valid, "n=%d rank %d step %d: reduces with unwritten sendbuff", n, r,
                 step);
          struct val v = combine(mine, in, r, step, e);
          if (p->finalize) {
            EXPECT(v.mask == (n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)),
                   "n=%d rank %d step %d: finalizes element %zu with only %#llx", n, r,
                   step, e, (unsigned long long)v.mask);
            v.fin = 1;
          }
          st->recv[e] = v;
        }
      }
      st->last_write[b] = step;
    }
  }

  /* Results. */
  uint64_t all = n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
  uint32_t idsum = (uint32_t)(n * (n - 1) / 2);
  for (int r = 0; r < n; r++) {
    const struct rank_state *st = &rs[r];
    for (size_t e = 0; e < recv_len; e++) {
      const struct val *v = &st->recv[e];
      EXPECT(v->valid, "n=%d count=%zu: rank %d element %zu never written", n, count, r, e);
      if (coll != ALLGATHER) {
        EXPECT(v->mask == all && v->terms == n && v->idsum == idsum && v->src == e,
               "n=%d count=%zu: rank %d element %zu holds mask %#llx (%d terms, id sum "
               "%u, from element %u)",
               n, count, r, e, (unsigned long long)v->mask, v->terms, v->idsum, v->src);
        EXPECT(v->fin == (n > 1 ? 1 : 0), "n=%d count=%zu: rank %d element %zu finalized %d times",
               n, count, r, e, v->fin);
      } else {
        size_t b = e / count, i = e % count;
        EXPECT(v->mask == (uint64_t)1 << b && v->terms == 1 && v->src == i && v->fin == 0,
               "n=%d count=%zu: rank %d element %zu holds mask %#llx element %u, expected "
               "rank %zu's element %zu",
               n, count, r, e, (unsigned long long)v->mask, v->src, b, i);
      }
    }
  }
  for (int r = 0; r < n; r++) {
    free(rs[r].msg);
    free(rs[r].last_write);
  }
  free(rs);
}

static void counts_for(int n, size_t *out, int *k) {
  size_t c[] = {0, 1, (size_t)(n - 1), (size_t)n, (size_t)n + 1, 2 * (size_t)n - 1,
                1000, 1009};
  *k = (int)(sizeof c / sizeof c[0]);
  memcpy(out, c, sizeof c);
}

/* _i = nranks (1..64) */
START_TEST(ring_allreduce_correct) {
  size_t counts[8];
  int k;
  counts_for(_i, counts, &k);
  for (int j = 0; j < k; j++) {
    simulate(ALLREDUCE, _i, counts[j], 0);
    simulate(ALLREDUCE, _i, counts[j], 1);
  }
}
END_TEST

START_TEST(ring_allgather_correct) {
  size_t counts[8];
  int k;
  counts_for(_i, counts, &k);
  for (int j = 0; j < k; j++) {
    simulate(ALLGATHER, _i, counts[j], 0);
    simulate(ALLGATHER, _i, counts[j], 1);
  }
}
END_TEST

/* Recursive doubling on 1, 2, 4, ..., 64 ranks. */
START_TEST(rd_operand_order) {
  /* Both of a pair must compute lower rank's value op higher rank's. */
  struct loom_step steps[8];
  size_t off[1], cnt[1];
  struct loom_schedule s = {.steps = steps, .block_off = off, .block_count = cnt};
  for (int r = 0; r < 8; r++) {
    loom_rd_allreduce(r, 8, 100, &s);
    ck_assert_int_eq(s.nsteps, 3);
    for (int k = 0; k < 3; k++) {
      ck_assert_int_eq(steps[k].recv_peer, r ^ (1 << k));
      ck_assert_int_eq(steps[k].recv_first, steps[k].recv_peer < r);
    }
  }
}
END_TEST

START_TEST(rd_allreduce_correct) {
  size_t counts[] = {0, 1, 2, 3, 1000, 1009};
  for (int n = 1; n <= MAX_RANKS; n *= 2)
    for (size_t j = 0; j < sizeof counts / sizeof counts[0]; j++) {
      simulate(RD, n, counts[j], 0);
      simulate(RD, n, counts[j], 1);
    }
}
END_TEST

/* A few steps spelled out, as the comment in ring.c describes them. */
START_TEST(ring_allreduce_shape) {
  struct loom_step steps[8];
  size_t off[4], cnt[4];
  struct loom_schedule s = {0, steps, 0, off, cnt, 0, 0};
  loom_ring_allreduce(1, 4, 10, &s);
  ck_assert_int_eq(s.nsteps, 6);
  /* step 0: send own block 1 from sendbuff to 2; reduce block 0 from 0 */
  ck_assert_int_eq(steps[0].send_peer, 2);
  ck_assert_int_eq(steps[0].send_block, 1);
  ck_assert_int_eq(steps[0].send_from, LOOM_BUF_SEND);
  ck_assert_int_eq(steps[0].send_waits, 0);
  ck_assert_int_eq(steps[0].recv_peer, 0);
  ck_assert_int_eq(steps[0].recv_block, 0);
  ck_assert_int_eq(steps[0].recv_op, LOOM_RECV_REDUCE);
  ck_assert_int_eq(steps[0].finalize, 0);
  /* step 2 (last reduce): rank 1 then owns block 2 */
  ck_assert_int_eq(steps[2].recv_block, 2);
  ck_assert_int_eq(steps[2].finalize, 1);
  ck_assert_int_eq(steps[2].send_from, LOOM_BUF_RECV);
  ck_assert_int_eq(steps[2].send_waits, 1);
  /* step 3: all-gather starts by sending block 2 */
  ck_assert_int_eq(steps[3].send_block, 2);
  ck_assert_int_eq(steps[3].recv_op, LOOM_RECV_COPY);
  ck_assert_int_eq(steps[3].recv_block, 1);

  loom_ring_allreduce(0, 1, 10, &s);
  ck_assert_int_eq(s.nsteps, 0);
  ck_assert_int_eq(s.copy_send_block, 0);
  ck_assert_uint_eq(cnt[0], 10);
  ck_assert_uint_eq(off[0], 0);

  loom_ring_allgather(3, 4, 5, &s);
  ck_assert_int_eq(s.nsteps, 3);
  ck_assert_uint_eq(s.send_origin, 15);
  ck_assert_int_eq(s.copy_send_block, 3);
  ck_assert_uint_eq(off[2], 10);
  ck_assert_int_eq(steps[0].send_block, 3);
  ck_assert_int_eq(steps[0].send_from, LOOM_BUF_SEND);
  ck_assert_int_eq(steps[0].send_peer, 0);
  ck_assert_int_eq(steps[0].recv_peer, 2);
  ck_assert_int_eq(steps[0].recv_block, 2);
}
END_TEST

static Suite *sched_suite(void) {
  Suite *s = suite_create("sched");
  TCase *tc = tcase_create("split");
  tcase_add_test(tc, split_many);
  tcase_add_test(tc, ring_allreduce_shape);
  tcase_add_test(tc, rd_allreduce_correct);
  tcase_add_test(tc, rd_operand_order);
  suite_add_tcase(s, tc);

  tc = tcase_create("ring");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, ring_allreduce_correct, 1, MAX_RANKS + 1);
  tcase_add_loop_test(tc, ring_allgather_correct, 1, MAX_RANKS + 1);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(sched_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
