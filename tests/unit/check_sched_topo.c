/*
 * check_sched_topo.c — the schedules that follow the machine's shape
 * (src/sched/hier.c, the ordered rings of ring.c), proved by the symbolic
 * simulator (schedsim.c) on many node shapes: every rank count up to 64,
 * nodes of equal and unequal size, ranks of a node contiguous or
 * interleaved (rank r on node r mod N), in place and out of place, whole
 * steps and pipeline slices.
 */
#include "sched/schedule.h"
#include "topo/topo.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedsim.h"

/* The shape the custom builders below read (one simulation at a time). */
static struct loom_topo shape;

static int rank_at(int node, int local, const void *arg) {
  return loom_topo_rank_at(arg, node, local);
}

static void hier_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)n;
  (void)root;
  struct loom_hier h = {shape.nnodes, loom_topo_node_size(&shape, 0), shape.node_of[r],
                        shape.local_of[r], rank_at, &shape};
  loom_hier_allreduce(r, &h, count, s);
}
static void dbtree_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)n;
  (void)root;
  loom_dbtree_allreduce(r, &shape, count, s);
}
static void rhd_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)root;
  loom_rhd_allreduce(r, n, count, s);
}
static void ring_ar_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)root;
  loom_ring_allreduce_ordered(r, n, shape.by_node, count, s);
}
static void ring_ag_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)root;
  loom_ring_allgather_ordered(r, n, shape.by_node, count, s);
}
static void ring_rs_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)root;
  loom_ring_reducescatter_ordered(r, n, shape.by_node, count, s);
}

static int channels = 2; /* for channels_builder */
static void channels_builder(int r, int n, size_t count, int root, struct loom_schedule *s) {
  (void)root;
  loom_ring_allreduce_channels(r, n, shape.nnodes > 1 ? &shape : NULL, channels, count, s);
}

static void set_shape(int n, const int *node_id) {
  loom_topo_free(&shape);
  ck_assert_int_eq(loom_topo_from_nodes(&shape, n, node_id), 0);
}

/* Nodes of `per` ranks: contiguous (rank r on node r / per) or
 * interleaved (rank r on node r mod (n / per)). */
static void uniform_shape(int nodes, int per, int interleaved) {
  int n = nodes * per, id[MAX_RANKS];
  for (int r = 0; r < n; r++)
    id[r] = interleaved ? r % nodes : r / per;
  set_shape(n, id);
}

static void run(enum coll coll, int n, size_t count, int slice_kind, int inplace,
                void (*b)(int, int, size_t, int, struct loom_schedule *), const char *what) {
  struct call c = {coll, n, 0, inplace, count, slice_kind, 0, NULL, NULL, NULL, NULL, what, b};
  simulate(&c);
}

static void run_counts(enum coll coll, int n, void (*b)(int, int, size_t, int, struct loom_schedule *),
                       const char *what, int full) {
  size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 3 * (size_t)n + 2};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
    for (int sk = 0; sk < NSLICES; sk++)
      for (int ip = 0; ip < 2; ip++) {
        if (!full && sk != SL_WHOLE && sk != SL_THIRD)
          continue;
        run(coll, n, counts[ci], sk, ip, b, what);
      }
}

START_TEST(hier_allreduce_every_shape) {
  /* every nodes x ranks-per-node with both above 1 and at most 64 ranks */
  for (int nodes = 2; nodes <= sim_ranks(MAX_RANKS) / 2; nodes++)
    for (int per = 2; nodes * per <= sim_ranks(MAX_RANKS); per++)
      for (int il = 0; il < 2; il++) {
        uniform_shape(nodes, per, il);
        char what[64];
        snprintf(what, sizeof what, "hierarchical, %d nodes x %d%s", nodes, per,
                 il ? " interleaved" : "");
        run_counts(RING_AR, nodes * per, hier_builder, what, nodes * per <= 16);
      }
}
END_TEST

/* Odd shapes for the ordered rings: nodes of unequal size, interleaved. */
static void odd_shape(int n, int variant) {
  int id[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    switch (variant) {
    case 0: /* sizes 1, 2, 3, 1, 2, 3 ... contiguous */
      id[r] = 0;
      for (int acc = 0, k = 0; acc <= r; k++) {
        acc += k % 3 + 1;
        id[r] = k;
      }
      break;
    case 1: /* three nodes, interleaved unevenly */
      id[r] = (r * 7 + r / 3) % 3;
      break;
    default: /* one node of all but the last rank */
      id[r] = r == n - 1;
    }
  }
  set_shape(n, id);
}

START_TEST(ordered_rings_every_count) {
  for (int n = 1; n <= sim_ranks(MAX_RANKS); n++)
    for (int v = 0; v < 3; v++) {
      odd_shape(n, v);
      char what[64];
      snprintf(what, sizeof what, "ordered ring, %d nodes (shape %d)", shape.nnodes, v);
      run_counts(RING_AR, n, ring_ar_builder, what, n <= 12);
      if (n <= 33) {
        run_counts(RING_AG, n, ring_ag_builder, what, n <= 12);
        run_counts(RING_RS, n, ring_rs_builder, what, n <= 12);
      }
    }
}
END_TEST

START_TEST(dbtree_allreduce_every_shape) {
  for (int n = 1; n <= sim_ranks(MAX_RANKS); n++) {
    for (int v = 0; v < 3; v++) {
      odd_shape(n, v);
      char what[64];
      snprintf(what, sizeof what, "double binary tree, %d nodes (shape %d)", shape.nnodes, v);
      run_counts(RING_AR, n, dbtree_builder, what, n <= 12);
    }
    int id[MAX_RANKS]; /* one rank per node: the pure tree */
    for (int r = 0; r < n; r++)
      id[r] = r;
    set_shape(n, id);
    run_counts(RING_AR, n, dbtree_builder, "double binary tree, one rank per node", n <= 12);
  }
  for (int nodes = 2; nodes <= 16; nodes++)
    for (int per = 2; nodes * per <= sim_ranks(MAX_RANKS); per += 3) {
      uniform_shape(nodes, per, 1);
      run_counts(RING_AR, nodes * per, dbtree_builder, "double binary tree, interleaved", 0);
    }
}
END_TEST

START_TEST(rhd_allreduce_powers_of_two) {
  for (int n = 1; n <= sim_ranks(MAX_RANKS); n *= 2)
    run_counts(RING_AR, n, rhd_builder, "recursive halving-doubling", 1);
}
END_TEST

/* Large halves go in LOOM_TREE_SEGMENTS segments: shapes with inner
 * ranks of 1-3 children, counts just at and above the threshold. */
START_TEST(dbtree_segments) {
  size_t big = (size_t)2 * LOOM_TREE_SEGMENT_MIN * LOOM_TREE_SEGMENTS;
  size_t counts[] = {big, big + 7};
  int shapes[][2] = {{2, 1}, {3, 2}, {5, 1}, {4, 2}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uniform_shape(shapes[si][0], shapes[si][1], si % 2);
    int n = shapes[si][0] * shapes[si][1];
    for (size_t ci = 0; ci < 2; ci++)
      for (int ip = 0; ip < 2; ip++) {
        run(RING_AR, n, counts[ci], SL_WHOLE, ip, dbtree_builder, "double binary tree, segments");
        run(RING_AR, n, counts[ci], SL_THIRD, ip, dbtree_builder, "double binary tree, segments");
      }
  }
  /* the segments are really there: 4 per tree on a leaf of both trees' chain */
  uniform_shape(2, 1, 0);
  struct loom_step steps[LOOM_SCHED_MAX_STEPS(2)];
  struct loom_schedule sch;
  loom_sched_init(&sch, steps, LOOM_SCHED_MAX_STEPS(2));
  loom_dbtree_allreduce(1, &shape, big, &sch);
  ck_assert_int_eq(sch.nsteps, 4 * LOOM_TREE_SEGMENTS); /* up+down per tree per segment */
  loom_dbtree_allreduce(1, &shape, big - 2, &sch);
  ck_assert_int_eq(sch.nsteps, 4); /* below the threshold: whole halves */
}
END_TEST

/* A node's first rank is an inner node of at most one tree when there are
 * enough nodes, and the two trees have different roots. */
START_TEST(dbtree_shape) {
  int id[15];
  for (int r = 0; r < 15; r++)
    id[r] = r;
  set_shape(15, id);
  int inner_both = 0, roots[2] = {-1, -1};
  for (int r = 0; r < 15; r++) {
    int inner = 0;
    for (int t = 0; t < 2; t++) {
      int parent, ch[3], nch;
      loom_dbtree_links(&shape, t, r, &parent, ch, &nch);
      ck_assert_int_le(nch, 2);
      inner += nch > 0;
      if (parent < 0)
        roots[t] = r;
    }
    inner_both += inner == 2;
  }
  ck_assert_int_eq(roots[0], 0);
  ck_assert_int_eq(roots[1], 14);
  ck_assert_int_le(inner_both, 1); /* 15 = 7 inner + 8 leaves: one overlap at most */
}
END_TEST

/* The ordered ring crosses nodes once per node: the number of steps whose
 * peer is on another node, on the busiest rank, is at most 2 (in and out
 * of its node) per phase, whatever the interleaving. */
START_TEST(channel_rings_every_count) {
  for (channels = 2; channels <= LOOM_MAX_CHANNELS; channels++)
    for (int n = 1; n <= sim_ranks(channels == 2 ? MAX_RANKS : 24); n++)
      for (int v = 0; v < 4; v++) {
        if (v == 3) {
          int id[MAX_RANKS] = {0};
          set_shape(n, id); /* one node */
        } else {
          odd_shape(n, v);
        }
        char what[64];
        snprintf(what, sizeof what, "%d channel rings, %d nodes (shape %d)", channels,
                 shape.nnodes, v);
        run_counts(RING_AR, n, channels_builder, what, n <= 8 && channels == 2);
      }
}
END_TEST

/* Every channel's ring visits all ranks once, crosses between nodes once
 * per node, and leaves each node from a different rank than channel 0. */
START_TEST(channel_rings_cross_at_other_ranks) {
  uniform_shape(4, 4, 1);
  for (int nch = 2; nch <= 4; nch++)
    for (int c = 0; c < nch; c++) {
      int seen[16] = {0}, crossings = 0, same_exit = 0;
      for (int r = 0; r < 16; r++) {
        int next, prev, next0, prev0;
        int pos = loom_ring_channel_peers(&shape, 16, nch, c, r, &next, &prev);
        ck_assert_int_ge(pos, 0);
        ck_assert_int_lt(pos, 16);
        seen[pos]++;
        int n2, p2;
        loom_ring_channel_peers(&shape, 16, nch, c, next, &n2, &p2);
        ck_assert_int_eq(p2, r); /* next's previous is r */
        loom_ring_channel_peers(&shape, 16, nch, 0, r, &next0, &prev0);
        int out = shape.node_of[next] != shape.node_of[r];
        int out0 = shape.node_of[next0] != shape.node_of[r];
        int in0 = shape.node_of[prev0] != shape.node_of[r];
        crossings += out;
        /* forward channels leave where channel 0 leaves, backward ones
         * where channel 0 enters: either way the same rank is "same" */
        same_exit += out && (c % 2 == 0 ? out0 : in0);
      }
      for (int p = 0; p < 16; p++)
        ck_assert_int_eq(seen[p], 1);
      ck_assert_int_eq(crossings, 4);
      if (c > 0)
        ck_assert_msg(same_exit == 0, "channel %d of %d leaves nodes where channel 0 does", c,
                      nch);
    }
}
END_TEST

START_TEST(ordered_ring_crosses_nodes_rarely) {
  uniform_shape(4, 4, 1); /* rank r on node r mod 4 */
  struct loom_step steps[LOOM_SCHED_MAX_STEPS(16)];
  int crossings = 0, identity_crossings = 0;
  for (int r = 0; r < 16; r++) {
    struct loom_schedule s;
    loom_sched_init(&s, steps, LOOM_SCHED_MAX_STEPS(16));
    loom_ring_allreduce_ordered(r, 16, shape.by_node, 1000, &s);
    crossings += shape.node_of[steps[0].send_peer] != shape.node_of[r];
    loom_ring_allreduce(r, 16, 1000, &s);
    identity_crossings += shape.node_of[steps[0].send_peer] != shape.node_of[r];
  }
  ck_assert_int_eq(crossings, 4);           /* one link out of each node */
  ck_assert_int_eq(identity_crossings, 16); /* rank order: every link crosses */
}
END_TEST

int main(void) {
  Suite *s = suite_create("sched_topo");
  TCase *tc = tcase_create("shapes");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, ordered_ring_crosses_nodes_rarely);
  tcase_add_test(tc, hier_allreduce_every_shape);
  tcase_add_test(tc, dbtree_shape);
  tcase_add_test(tc, dbtree_segments);
  tcase_add_test(tc, rhd_allreduce_powers_of_two);
  tcase_add_test(tc, dbtree_allreduce_every_shape);
  tcase_add_test(tc, ordered_rings_every_count);
  tcase_add_test(tc, channel_rings_cross_at_other_ranks);
  tcase_add_test(tc, channel_rings_every_count);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  loom_topo_free(&shape);
  return failed == 0 ? 0 : 1;
}
