/*
 * check_sched.c — unit tests of the schedules (src/sched/ring.c, chain.c,
 * direct.c): the Check suite, its test cases and main.
 *
 * loom_sched_split/loom_sched_block are checked directly.  Every builder is
 * proved correct by a symbolic simulator (schedsim.c) that runs every rank's
 * schedule the way the engine (src/engine/engine.c) interprets it, for many
 * rank counts, counts, roots, in place and out of place, and pipeline slice
 * sizes.
 *
 * The simulator's own checks are tested too (simulator_rejects): broken
 * schedules are rejected for the right reason, tricky right ones pass.
 */
#include "sched/schedule.h"
#include "plan/plan.h"

#include <check.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedsim.h"

/* ---- loom_sched_split / loom_sched_block ------------------------------------------ */

static void check_split(size_t count, int n) {
  size_t off[MAX_RANKS + 1], cnt[MAX_RANKS + 1];
  off[n] = cnt[n] = (size_t)0xdeadbeef; /* must not be written */
  loom_sched_split(count, n, off, cnt);
  EXPECT(off[n] == (size_t)0xdeadbeef && cnt[n] == (size_t)0xdeadbeef,
         "split(%zu, %d) wrote past n entries", count, n);
  size_t sum = 0, lo = SIZE_MAX, hi = 0;
  for (int b = 0; b < n; b++) {
    EXPECT(off[b] == sum, "split(%zu, %d): block %d at %zu, expected %zu", count, n, b, off[b],
           sum);
    sum += cnt[b];
    if (cnt[b] < lo)
      lo = cnt[b];
    if (cnt[b] > hi)
      hi = cnt[b];
    /* Documented: the first count % n blocks are the larger ones. */
    size_t want = count / (size_t)n + ((size_t)b < count % (size_t)n ? 1 : 0);
    EXPECT(cnt[b] == want, "split(%zu, %d): block %d has %zu, expected %zu", count, n, b, cnt[b],
           want);
    size_t bo = 7, bc = 7;
    loom_sched_block(count, n, b, &bo, &bc);
    EXPECT(bo == off[b] && bc == cnt[b],
           "block(%zu, %d, %d) = (%zu, %zu) but split says (%zu, %zu)", count, n, b, bo, bc, off[b],
           cnt[b]);
  }
  EXPECT(sum == count, "split(%zu, %d): blocks sum to %zu", count, n, sum);
  EXPECT(hi - lo <= 1, "split(%zu, %d): sizes %zu..%zu differ by more than one", count, n, lo, hi);
}

START_TEST(split_many) {
  snprintf(ctx, sizeof ctx, "split");
  for (int n = 1; n <= sim_ranks(MAX_RANKS); n++) {
    for (size_t count = 0; count <= 300; count++)
      check_split(count, n);
    static const size_t big[] = {
        1000,         1009,    4096, 65535, 65536, 1000003, (size_t)1 << 33, ((size_t)1 << 40) + 7,
        SIZE_MAX / 2, SIZE_MAX};
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
  size_t o, c;
  loom_sched_block(SIZE_MAX, 2, 1, &o, &c); /* no overflow at the top */
  ck_assert_uint_eq(o, SIZE_MAX / 2 + 1);
  ck_assert_uint_eq(c, SIZE_MAX / 2);
}
END_TEST

START_TEST(add_and_reset) {
  struct loom_step steps[3];
  struct loom_schedule s;
  memset(&s, 0x5a, sizeof s);
  s.steps = steps;
  s.cap = 2;
  loom_sched_reset(&s);
  ck_assert_int_eq(s.nsteps, 0);
  ck_assert_uint_eq(s.copy.count, 0);
  ck_assert_uint_eq(s.scratch_count, 0);
  ck_assert_ptr_eq(s.steps, steps);
  ck_assert_int_eq(s.cap, 2);
  memset(steps, 0x5a, sizeof steps);
  struct loom_step *p = loom_sched_add(&s);
  ck_assert_ptr_eq(p, &steps[0]);
  ck_assert_int_eq(p->send_peer, -1);
  ck_assert_int_eq(p->recv_peer, -1);
  ck_assert_int_eq(p->wait_step, -1);
  ck_assert_uint_eq(p->send_count, 0);
  ck_assert_uint_eq(p->recv_count, 0);
  ck_assert_int_eq(p->recv_op, LOOM_RECV_NONE);
  ck_assert_int_eq(p->finalize, 0);
  ck_assert_int_eq(p->wait_all, 0);
  ck_assert_ptr_eq(loom_sched_add(&s), &steps[1]);
  ck_assert_int_eq(s.overflow, 0);
  /* Full: the step lands in the sink, writable, and the schedule says so. */
  p = loom_sched_add(&s);
  ck_assert_ptr_eq(p, &s.sink);
  p->send_peer = 7;
  ck_assert_int_eq(s.overflow, 1);
  ck_assert_int_eq(s.nsteps, 2);
  ck_assert_int_eq(steps[2].send_peer, 0x5a5a5a5a); /* untouched */
  loom_sched_reset(&s);
  ck_assert_int_eq(s.overflow, 0);
}
END_TEST

/* A builder that runs out of room leaves a schedule nothing will run: the
 * agreement pass and loom_plan both say so. */
START_TEST(overflow_refused) {
  struct loom_step steps[4];
  struct loom_schedule s;
  loom_sched_init(&s, steps, 4);
  loom_ring_allreduce(0, 4, 1000, &s); /* 6 steps */
  ck_assert_int_eq(s.overflow, 1);
  ck_assert_int_eq(s.nsteps, 4);
  ck_assert_int_eq(loom_sched_add_agreement(0, 4, &s), -1);
  struct loom_plan_args a = {.coll = LOOM_COLL_ALLREDUCE, .rank = 0, .nranks = 4,
                             .count = 1 << 20, .elem_size = 4}; /* a ring: 6 steps */
  ck_assert_ptr_null(loom_plan(&a, &s));
  struct loom_step big[LOOM_SCHED_MAX_STEPS(4)];
  loom_sched_init(&s, big, LOOM_SCHED_MAX_STEPS(4));
  ck_assert_ptr_nonnull(loom_plan(&a, &s));
  ck_assert_int_eq(s.overflow, 0);
}
END_TEST

/* ---- the cases ----------------------------------------------------------------------- */

static int counts_for(int n, size_t *out) {
  size_t c[] = {
      0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 2 * (size_t)n - 1, 7 * (size_t)n + 3};
  int k = 0;
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    int dup = 0;
    for (int j = 0; j < k; j++)
      dup |= out[j] == c[i];
    if (!dup)
      out[k++] = c[i];
  }
  return k;
}

/* Collectives whose data grows as nranks * count (all-to-all(v) too): run
 * up to 33 ranks, and (rd_allgather, at 64) only up to this many elements
 * per rank. */
#define QUADRATIC_RANKS 33
#define QUADRATIC_ELEMS 8192

static int quadratic(enum coll c) {
  return c == RING_AG || c == RD_AG || c == ONESHOT_AG || c == RING_RS || c == GATHER ||
         c == SCATTER;
}

/* Every root gets the large count, whole steps and three slices, in and
 * out of place, and count 1; roots 0, 1, n/2 and n-1 get every count and
 * slice size. */
static void run_n(enum coll coll, int n) {
  size_t counts[8];
  int nc = counts_for(n, counts);
  int nroots = is_rooted(coll) ? n : 1;
  for (int root = 0; root < nroots; root++) {
    int full = root <= 1 || root == n / 2 || root == n - 1;
    for (int ci = 0; ci < nc; ci++) {
      if (quadratic(coll) && (size_t)n * counts[ci] > QUADRATIC_ELEMS)
        continue;
      for (int sk = 0; sk < NSLICES; sk++)
        for (int ip = 0; ip < 2; ip++) {
          if (!full && !(ci == nc - 1 && (sk == SL_WHOLE || sk == SL_THIRD)) &&
              !(counts[ci] == 1 && sk == SL_WHOLE && !ip))
            continue;
          struct call c = {coll, n,    root, ip,   counts[ci], sk,  0,
                           NULL, NULL, NULL, NULL, NULL,       NULL};
          simulate(&c);
        }
    }
  }
}

static void run_coll(enum coll coll) {
  int pow2 = coll == RD_AR || coll == RD_AG;
  int top = coll == RING_AR || coll == RD_AR || coll == RD_AG ? MAX_RANKS : QUADRATIC_RANKS;
  if (!quadratic(coll) && is_rooted(coll))
    top = QUADRATIC_RANKS; /* every root of every rank count: n^2 runs */
  for (int n = 1; n <= sim_ranks(top); n = pow2 ? 2 * n : n + 1)
    run_n(coll, n);
}

START_TEST(ring_allreduce) { run_coll(RING_AR); }
END_TEST
START_TEST(rd_allreduce) { run_coll(RD_AR); }
END_TEST
START_TEST(oneshot_allreduce) { run_coll(ONESHOT_AR); }
END_TEST
START_TEST(ring_allgather) { run_coll(RING_AG); }
END_TEST
START_TEST(rd_allgather) { run_coll(RD_AG); }
END_TEST
START_TEST(oneshot_allgather) { run_coll(ONESHOT_AG); }
END_TEST
START_TEST(ring_reducescatter) { run_coll(RING_RS); }
END_TEST
START_TEST(chain_broadcast) { run_coll(CHAIN_BC); }
END_TEST
START_TEST(tree_broadcast) { run_coll(TREE_BC); }
END_TEST
START_TEST(chain_reduce) { run_coll(CHAIN_RED); }
END_TEST
START_TEST(tree_reduce) { run_coll(TREE_RED); }
END_TEST
START_TEST(direct_gather) { run_coll(GATHER); }
END_TEST
START_TEST(direct_scatter) { run_coll(SCATTER); }
END_TEST

/* All-to-all(v): regular (loomAllToAll's arrays) and irregular counts with
 * gaps and displacements out of rank order. */
static void run_alltoallv(int n) {
  size_t nn = (size_t)n * n;
  size_t *v = malloc(4 * nn * sizeof *v);
  ck_assert_ptr_nonnull(v);
  size_t *sc = v, *sd = v + nn, *rc = v + 2 * nn, *rd = v + 3 * nn;
  size_t counts[8];
  int nc = counts_for(n, counts);
  for (int irregular = 0; irregular < 2; irregular++)
    for (int ci = 0; ci < nc; ci++) {
      size_t cnt = counts[ci];
      if (irregular && cnt == 0)
        continue;
        /* C(i, j): what rank i sends rank j */
#define C(i, j)                                                                                    \
  (irregular ? (size_t)(mix64((uint64_t)(i)*1000003u + (uint64_t)(j)*7919u + cnt) % (cnt + 1))     \
             : cnt)
      for (int r = 0; r < n; r++) {
        size_t so = 0, ro = 0;
        for (int t = 0; t < n; t++) {
          /* peers in a rank-dependent order, with gaps */
          int j = irregular ? (int)(((size_t)t * 5 + (size_t)r) % (size_t)n) : t;
          if (irregular && n % 5 == 0)
            j = (n - 1 - t + r) % n;
          size_t gs = irregular ? mix64((uint64_t)r * 31 + (uint64_t)t) % 3 : 0;
          size_t gr = irregular ? mix64((uint64_t)r * 37 + (uint64_t)t + 1) % 3 : 0;
          so += gs;
          ro += gr;
          sc[(size_t)r * n + j] = C(r, j);
          sd[(size_t)r * n + j] = so;
          so += C(r, j);
          rc[(size_t)r * n + j] = C(j, r);
          rd[(size_t)r * n + j] = ro;
          ro += C(j, r);
        }
      }
#undef C
      for (int sk = 0; sk < NSLICES; sk++) {
        struct call c = {A2AV, n,  0,  0,  cnt, sk,
                         0,    sc, sd, rc, rd,  irregular ? "(irregular)" : "(regular)",
                         NULL};
        simulate(&c);
      }
    }
  free(v);
}

START_TEST(direct_alltoallv) {
  for (int n = 1; n <= sim_ranks(QUADRATIC_RANKS); n++)
    run_alltoallv(n);
}
END_TEST

/* ---- the simulator's self-test: broken schedules are rejected ------------------------ */

/* Runs c and expects a rejection whose message contains `why`. */
static void expect_rejected(struct call *c, const char *why) {
  jmp_buf jb;
  fail_msg[0] = '\0';
  if (setjmp(jb) == 0) {
    expect_fail = &jb;
    simulate(c);
    expect_fail = NULL;
    ck_abort_msg("%s (%s): accepted; expected a rejection for \"%s\"", ctx, c->variant, why);
  }
  expect_fail = NULL;
  ck_assert_msg(strstr(fail_msg, why) != NULL, "%s (%s): rejected for \"%s\"; expected \"%s\"", ctx,
                c->variant, fail_msg, why);
}

static struct call custom(enum coll coll, int n, size_t count, int inplace, int slice_kind,
                          const char *what,
                          void (*b)(int, int, size_t, int, struct loom_schedule *)) {
  struct call c = {coll, n, 0, inplace, count, slice_kind, 0, NULL, NULL, NULL, NULL, what, b};
  return c;
}

/* Ring all-reduce whose reduce-scatter sends do not wait for the partial
 * sums they forward. */
static void bad_nowait(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_allreduce(r, n, count, s);
  for (int i = 1; i < n - 1; i++)
    s->steps[i].wait_step = -1;
}
/* ... whose all-gather sends wait for the wrong slice: all of the previous
 * step would be right, slice k is not (the blocks differ in size). */
static void bad_wait_slice(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_allreduce(r, n, count, s);
  for (int i = n - 1; i < s->nsteps; i++)
    s->steps[i].wait_step = i - 2 >= n - 1 ? i - 2 : s->steps[i].wait_step;
}
/* Both ranks receive before they send, and the send waits for it. */
static void bad_deadlock(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_sched_reset(s);
  struct loom_step *p = loom_sched_add(s);
  p->recv_peer = 1 - r;
  p->recv_op = LOOM_RECV_REDUCE;
  p->recv_buf = LOOM_BUF_RECV;
  p->recv_count = count;
  p->mine_buf = LOOM_BUF_SEND;
  p->recv_first = r == 1;
  p->finalize = 1;
  p = loom_sched_add(s);
  p->send_peer = 1 - r;
  p->send_buf = LOOM_BUF_SEND;
  p->send_count = count;
  p->wait_step = 0;
}
/* Two ranks reduce twice: each counts the other's contribution twice. */
static void bad_twice(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_rd_allreduce(r, n, count, s);
  struct loom_step *p = loom_sched_add(s);
  *p = s->steps[0];
  p->send_buf = p->mine_buf = LOOM_BUF_RECV;
  p->wait_step = 0;
}
static void bad_nofinalize(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_rd_allreduce(r, n, count, s);
  s->steps[s->nsteps - 1].finalize = 0;
}
static void bad_scratch(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_reducescatter(r, n, count, s);
  s->scratch_count -= count;
}
static void bad_copy_into_send(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_allgather(r, n, count, s);
  s->steps[1].recv_off = s->steps[1].send_off;
}
static void bad_count(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_allgather(r, n, count, s);
  if (r == 0)
    s->steps[0].send_count--;
}
/* The result written into sendbuff. */
static void bad_output(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_reducescatter(r, n, count, s);
  struct loom_step *p = &s->steps[s->nsteps - 1];
  p->recv_buf = LOOM_BUF_SEND;
  p->recv_off = p->mine_off;
}
/* Gather whose root lands rank 1's block where rank 2's goes... */
static void bad_same_place(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_direct_gather(r, n, root, count, s);
  if (r == root)
    for (int i = 0; i < s->nsteps; i++)
      if (s->steps[i].recv_peer == 1)
        s->steps[i].recv_off = 2 * count;
}
/* ... and rank 2's where rank 1's goes. */
static void bad_swapped(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_direct_gather(r, n, root, count, s);
  if (r == root)
    for (int i = 0; i < s->nsteps; i++)
      if (s->steps[i].recv_peer == 1 || s->steps[i].recv_peer == 2)
        s->steps[i].recv_off = (size_t)(3 - s->steps[i].recv_peer) * count;
}
/* Broadcast on 3 ranks: rank 1 forwards the root's data to rank 2 and acks
 * it to the root, which then sends it again; the second copy may land
 * while the forward to rank 2 still reads it (nothing orders them: the
 * root heard from rank 1, not from rank 2). */
static void bad_overwrite(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_sched_reset(s);
  struct loom_step *p;
  if (r == 0) {
    s->copy = (struct loom_local_copy){LOOM_BUF_SEND, LOOM_BUF_RECV, 0, 0, count};
    s->scratch_count = count;
    p = loom_sched_add(s);
    p->send_peer = 1;
    p->send_buf = LOOM_BUF_SEND;
    p->send_count = count;
    p = loom_sched_add(s);
    p->recv_peer = 1;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_SCRATCH;
    p->recv_count = count;
    p = loom_sched_add(s);
    p->send_peer = 1;
    p->send_buf = LOOM_BUF_SEND;
    p->send_count = count;
    p->wait_step = 1;
    p->wait_all = 1;
  } else if (r == 1) {
    p = loom_sched_add(s);
    p->recv_peer = 0;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_count = count;
    p = loom_sched_add(s); /* the ack */
    p->send_peer = 0;
    p->send_buf = LOOM_BUF_RECV;
    p->send_count = count;
    p->wait_step = 0;
    p->wait_all = 1;
    p = loom_sched_add(s);
    p->send_peer = 2;
    p->send_buf = LOOM_BUF_RECV;
    p->send_count = count;
    p->wait_step = 0;
    p->wait_all = 1;
    p = loom_sched_add(s);
    p->recv_peer = 0;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_count = count;
  } else {
    p = loom_sched_add(s);
    p->recv_peer = 1;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_count = count;
  }
}
/* Broadcast on 3 ranks: rank 1 forwards the second half of what it got
 * from the root; rank 2 gets the first half from the root.  Waiting for
 * slice k of the receive is wrong once there are slices (the second half
 * arrives in later ones); waiting for all of it (wait_all) is right. */
static void half_forward(int r, int n, size_t count, int root, struct loom_schedule *s,
                         int wait_all) {
  loom_sched_reset(s);
  size_t h = count / 2;
  struct loom_step *p;
  if (r == 0) {
    s->copy = (struct loom_local_copy){LOOM_BUF_SEND, LOOM_BUF_RECV, 0, 0, count};
    p = loom_sched_add(s);
    p->send_peer = 1;
    p->send_buf = LOOM_BUF_SEND;
    p->send_count = count;
    p = loom_sched_add(s);
    p->send_peer = 2;
    p->send_buf = LOOM_BUF_SEND;
    p->send_count = h;
  } else if (r == 1) {
    p = loom_sched_add(s);
    p->recv_peer = 0;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_count = count;
    p = loom_sched_add(s);
    p->send_peer = 2;
    p->send_buf = LOOM_BUF_RECV;
    p->send_off = h;
    p->send_count = count - h;
    p->wait_step = 0;
    p->wait_all = (unsigned char)wait_all;
  } else {
    p = loom_sched_add(s);
    p->recv_peer = 0;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_count = h;
    p = loom_sched_add(s);
    p->recv_peer = 1;
    p->recv_op = LOOM_RECV_COPY;
    p->recv_buf = LOOM_BUF_RECV;
    p->recv_off = h;
    p->recv_count = count - h;
  }
}
static void half_forward_slice(int r, int n, size_t count, int root, struct loom_schedule *s) {
  half_forward(r, n, count, root, s, 0);
}
static void half_forward_all(int r, int n, size_t count, int root, struct loom_schedule *s) {
  half_forward(r, n, count, root, s, 1);
}
/* Tree broadcast whose later forwards do not wait, relying on the engine
 * posting sends in order behind the first (which does). */
static void bad_posting_order(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_tree_broadcast(r, n, root, count, s);
  if (r != root && s->nsteps > 2)
    s->steps[2].wait_step = -1;
}
/* Legitimate: reduce-scatter through one SCRATCH block, each step reducing
 * into the block it sends (the engine lands slice k after slice k left). */
static void one_scratch_block(int r, int n, size_t count, int root, struct loom_schedule *s) {
  loom_ring_reducescatter(r, n, count, s);
  if (n > 1)
    s->scratch_count = count;
  for (int i = 0; i < s->nsteps; i++) {
    if (s->steps[i].send_buf == LOOM_BUF_SCRATCH)
      s->steps[i].send_off = 0;
    if (s->steps[i].recv_buf == LOOM_BUF_SCRATCH)
      s->steps[i].recv_off = 0;
  }
}

START_TEST(simulator_rejects) {
  struct call c;
  c = custom(RING_AR, 3, 9, 0, SL_WHOLE, "unwaited forward, out of place", bad_nowait);
  expect_rejected(&c, "garbage");
  c = custom(RING_AR, 3, 9, 1, SL_WHOLE, "unwaited forward, in place", bad_nowait);
  expect_rejected(&c, "may still read it");
  c = custom(RING_AR, 4, 7 * 4 + 3, 0, SL_ONE, "wait on an older step", bad_wait_slice);
  expect_rejected(&c, "race");
  c = custom(RD_AR, 2, 5, 0, SL_WHOLE, "receive before send", bad_deadlock);
  expect_rejected(&c, "deadlock");
  c = custom(RD_AR, 2, 5, 0, SL_WHOLE, "reduce twice", bad_twice);
  expect_rejected(&c, "twice");
  c = custom(RD_AR, 4, 5, 1, SL_WHOLE, "no finalize", bad_nofinalize);
  expect_rejected(&c, "finalized 0 times");
  c = custom(RING_RS, 3, 4, 0, SL_WHOLE, "scratch too small", bad_scratch);
  expect_rejected(&c, "scratch_count");
  c = custom(RING_AG, 3, 4, 0, SL_WHOLE, "copy into the sent block", bad_copy_into_send);
  expect_rejected(&c, "COPY-receives into");
  c = custom(RING_AG, 3, 4, 0, SL_WHOLE, "count mismatch", bad_count);
  expect_rejected(&c, "elements, the receive");
  c = custom(RING_RS, 3, 4, 0, SL_WHOLE, "result into sendbuff", bad_output);
  expect_rejected(&c, "not an output");
  c = custom(GATHER, 3, 4, 0, SL_WHOLE, "two blocks in one place", bad_same_place);
  expect_rejected(&c, "in a race with the receive of step 0 that also writes it");
  c = custom(GATHER, 3, 4, 0, SL_WHOLE, "blocks swapped", bad_swapped);
  expect_rejected(&c, "expected ranks");
  c = custom(CHAIN_BC, 3, 4, 0, SL_WHOLE, "overwrite while forwarding", bad_overwrite);
  expect_rejected(&c, "while the send of step 2 slice 0 to rank 2 may still read it");
  c = custom(CHAIN_BC, 3, 8, 0, SL_ONE, "half forwarded, slice wait", half_forward_slice);
  expect_rejected(&c, "without waiting for the receive of step 0");
  c = custom(TREE_BC, 8, 4, 0, SL_WHOLE, "forward relying on posting order", bad_posting_order);
  expect_rejected(&c, "without waiting for the receive of step 0");
  /* and what is right passes */
  for (int sk = 0; sk < NSLICES; sk++)
    for (int ip = 0; ip < 2; ip++) {
      c = custom(CHAIN_BC, 3, 8, ip, sk, "half forwarded, wait_all", half_forward_all);
      simulate(&c);
      c = custom(CHAIN_BC, 3, 8, ip, SL_WHOLE, "half forwarded, whole steps", half_forward_slice);
      simulate(&c);
    }
  for (int n = 1; n <= 6; n++)
    for (int sk = 0; sk < NSLICES; sk++)
      for (int ip = 0; ip < 2; ip++) {
        c = custom(RING_RS, n, 7, ip, sk, "one scratch block", one_scratch_block);
        simulate(&c);
      }
}
END_TEST

/* ---- a few schedules spelled out ------------------------------------------------------ */

START_TEST(ring_allreduce_shape) {
  struct loom_step steps[LOOM_SCHED_MAX_STEPS(4)];
  struct loom_schedule s;
  loom_sched_init(&s, steps, LOOM_SCHED_MAX_STEPS(4));
  loom_ring_allreduce(1, 4, 10, &s); /* blocks 3 3 2 2 at 0 3 6 8 */
  ck_assert_int_eq(s.nsteps, 6);
  ck_assert_uint_eq(s.copy.count, 0);
  /* step 0: send own block 1 from SEND to 2; reduce block 0 from 0 */
  ck_assert_int_eq(steps[0].send_peer, 2);
  ck_assert_int_eq(steps[0].send_buf, LOOM_BUF_SEND);
  ck_assert_uint_eq(steps[0].send_off, 3);
  ck_assert_uint_eq(steps[0].send_count, 3);
  ck_assert_int_eq(steps[0].wait_step, -1);
  ck_assert_int_eq(steps[0].recv_peer, 0);
  ck_assert_int_eq(steps[0].recv_op, LOOM_RECV_REDUCE);
  ck_assert_int_eq(steps[0].recv_buf, LOOM_BUF_RECV);
  ck_assert_uint_eq(steps[0].recv_off, 0);
  ck_assert_uint_eq(steps[0].recv_count, 3);
  ck_assert_int_eq(steps[0].mine_buf, LOOM_BUF_SEND);
  ck_assert_uint_eq(steps[0].mine_off, 0);
  ck_assert_int_eq(steps[0].finalize, 0);
  /* step 2 (last reduce): forwards block 3, completes block 2 */
  ck_assert_int_eq(steps[2].send_buf, LOOM_BUF_RECV);
  ck_assert_uint_eq(steps[2].send_off, 8);
  ck_assert_int_eq(steps[2].wait_step, 1);
  ck_assert_uint_eq(steps[2].recv_off, 6);
  ck_assert_uint_eq(steps[2].recv_count, 2);
  ck_assert_int_eq(steps[2].finalize, 1);
  /* step 3: the all-gather half starts by sending block 2 */
  ck_assert_uint_eq(steps[3].send_off, 6);
  ck_assert_int_eq(steps[3].wait_step, 2);
  ck_assert_int_eq(steps[3].recv_op, LOOM_RECV_COPY);
  ck_assert_uint_eq(steps[3].recv_off, 3);

  loom_ring_allreduce(0, 1, 10, &s);
  ck_assert_int_eq(s.nsteps, 0);
  ck_assert_int_eq(s.copy.from_buf, LOOM_BUF_SEND);
  ck_assert_int_eq(s.copy.to_buf, LOOM_BUF_RECV);
  ck_assert_uint_eq(s.copy.count, 10);

  loom_ring_allgather(3, 4, 5, &s);
  ck_assert_int_eq(s.nsteps, 3);
  ck_assert_uint_eq(s.copy.to_off, 15);
  ck_assert_uint_eq(s.copy.count, 5);
  ck_assert_int_eq(steps[0].send_buf, LOOM_BUF_SEND);
  ck_assert_int_eq(steps[0].send_peer, 0);
  ck_assert_int_eq(steps[0].recv_peer, 2);
  ck_assert_uint_eq(steps[0].recv_off, 10);
}
END_TEST

START_TEST(rd_operand_order) {
  /* Both of a pair compute lower rank's value op higher rank's. */
  struct loom_step steps[LOOM_SCHED_MAX_STEPS(8)];
  struct loom_schedule s;
  loom_sched_init(&s, steps, LOOM_SCHED_MAX_STEPS(8));
  for (int r = 0; r < 8; r++) {
    loom_rd_allreduce(r, 8, 100, &s);
    ck_assert_int_eq(s.nsteps, 3);
    for (int k = 0; k < 3; k++) {
      ck_assert_int_eq(steps[k].recv_peer, r ^ (1 << k));
      ck_assert_int_eq(steps[k].send_peer, r ^ (1 << k));
      ck_assert_int_eq(steps[k].recv_first, steps[k].recv_peer < r);
      ck_assert_int_eq(steps[k].finalize, k == 2);
    }
  }
}
END_TEST

static Suite *sched_suite(void) {
  Suite *s = suite_create("sched");
  TCase *tc = tcase_create("basics");
  tcase_add_test(tc, split_many);
  tcase_add_test(tc, add_and_reset);
  tcase_add_test(tc, overflow_refused);
  tcase_add_test(tc, ring_allreduce_shape);
  tcase_add_test(tc, rd_operand_order);
  tcase_add_test(tc, simulator_rejects);
  suite_add_tcase(s, tc);

  tc = tcase_create("simulated");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, ring_allreduce);
  tcase_add_test(tc, rd_allreduce);
  tcase_add_test(tc, oneshot_allreduce);
  tcase_add_test(tc, ring_allgather);
  tcase_add_test(tc, rd_allgather);
  tcase_add_test(tc, oneshot_allgather);
  tcase_add_test(tc, ring_reducescatter);
  tcase_add_test(tc, chain_broadcast);
  tcase_add_test(tc, tree_broadcast);
  tcase_add_test(tc, chain_reduce);
  tcase_add_test(tc, tree_reduce);
  tcase_add_test(tc, direct_alltoallv);
  tcase_add_test(tc, direct_gather);
  tcase_add_test(tc, direct_scatter);
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