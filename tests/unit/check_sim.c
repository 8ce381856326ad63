/*
 * check_sim.c — unit tests of loom-sim's model (src/sim): cases with known
 * answers (one message, the ring's bandwidth term, NIC sharing, the
 * contention factor), the tree's logarithmic latency, folding one node
 * against simulating every rank, the 16,384-rank build (not timed), the
 * calibration file and the model's checks of inconsistent schedules.
 */
#include "sim/sim.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every cost off but what a case turns on: no latency, injection at 1 GB/s,
 * free reductions and copies, no NIC limit, no core limit, 512 KiB slices. */
static struct loom_sim_params base_params(void) {
  struct loom_sim_params p;
  memset(&p, 0, sizeof p);
  p.intra.bw = p.inter.bw = 1e9;
  p.chunk_bytes = 512u << 10;
  return p;
}

static double predict(const struct loom_sim_params *p, int nnodes, int local,
                      enum loom_coll coll, enum loom_algo algo, size_t count,
                      enum loom_sim_fold fold, struct loom_sim_result *out) {
  struct loom_topo t;
  ck_assert_int_eq(loom_sim_topo(&t, nnodes, local), 0);
  struct loom_sim_call c = {.coll = coll, .algo = algo, .count = count, .elem_size = 4, .fold = fold};
  struct loom_sim_result r;
  char err[512] = "";
  int rc = loom_sim_predict(p, &t, &c, &r, err, sizeof err);
  ck_assert_msg(rc == 0, "%d x %d, %s, %zu elements: rc %d: %s", nnodes, local,
                loom_algo_name(algo), count, rc, err);
  loom_topo_free(&t);
  if (out != NULL)
    *out = r;
  return r.time;
}

#define ck_assert_close(got, want, rel)                                                            \
  ck_assert_msg(fabs((got) - (want)) <= (rel) * fabs(want), "got %.9g, want %.9g (within %g)",   \
                (double)(got), (double)(want), (double)(rel))

/* ---- known answers ---- */

START_TEST(one_message_is_alpha_plus_bytes_over_bw) {
  /* 2-rank ring all-gather: each rank sends its block once */
  struct loom_sim_params p = base_params();
  p.intra.alpha = 3e-6;
  p.intra.bw = 2e9;
  size_t counts[] = {1, 1000, 131072, 1u << 20}; /* 1 slice ... 8 slices */
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    double S = (double)counts[i] * 4;
    double t = predict(&p, 1, 2, LOOM_COLL_ALLGATHER, LOOM_ALGO_RING, counts[i],
                       LOOM_SIM_FOLD_AUTO, NULL);
    ck_assert_close(t, 3e-6 + S / 2e9, 1e-12);
  }
  /* across two nodes the inter level's numbers apply */
  p.inter.alpha = 10e-6;
  p.inter.bw = 0.5e9;
  double t = predict(&p, 2, 1, LOOM_COLL_ALLGATHER, LOOM_ALGO_RING, 1000, LOOM_SIM_FOLD_NEVER,
                     NULL);
  ck_assert_close(t, 10e-6 + 4000 / 0.5e9, 1e-12);
}
END_TEST

START_TEST(ring_allreduce_bandwidth_term) {
  /* no latency, free reduction: every rank's engine injects 2(n-1) blocks
   * of S/n back to back, so T = 2(n-1)/n * S / bw exactly */
  struct loom_sim_params p = base_params();
  int ns[] = {2, 4, 8, 16};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int n = ns[i];
    size_t count = (size_t)n * 300000; /* several slices per block */
    double S = (double)count * 4;
    double want = 2.0 * (n - 1) / n * S / 1e9;
    double t = predict(&p, 1, n, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count, LOOM_SIM_FOLD_AUTO,
                       NULL);
    ck_assert_close(t, want, 1e-9);
    /* the same on n nodes of one rank (folded to one) and on 2 nodes */
    t = predict(&p, n, 1, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count, LOOM_SIM_FOLD_AUTO, NULL);
    ck_assert_close(t, want, 1e-9);
    if (n >= 4) {
      t = predict(&p, 2, n / 2, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count, LOOM_SIM_FOLD_AUTO,
                  NULL);
      ck_assert_close(t, want, 1e-9);
    }
  }
}
END_TEST

START_TEST(ring_latency_term) {
  /* 8 bytes on n ranks: 2(n-1) dependent hops of alpha */
  struct loom_sim_params p = base_params();
  p.intra.alpha = 1e-6;
  p.intra.bw = 1e15;
  double t = predict(&p, 1, 16, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, 2, LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(t, 30e-6, 1e-6);
}
END_TEST

START_TEST(tree_latency_grows_with_log_n) {
  struct loom_sim_params p = base_params();
  p.intra.alpha = p.inter.alpha = 1e-6;
  p.intra.bw = p.inter.bw = 1e15; /* latency only */
  double prev = 0;
  for (int nodes = 2; nodes <= 1024; nodes *= 2) {
    int depth = 0;
    while ((2 << depth) <= nodes)
      depth++;
    double t = predict(&p, nodes, 1, LOOM_COLL_ALLREDUCE, LOOM_ALGO_TREE, 2, LOOM_SIM_FOLD_AUTO,
                       NULL);
    ck_assert_msg(t > prev, "%d nodes: %g us, not above %g us", nodes, t * 1e6, prev * 1e6);
    /* at least up and down the deeper tree, at most twice that (the two
     * trees' steps are posted in order) plus a few hops */
    ck_assert_msg(t >= 2 * depth * 1e-6 - 1e-12 && t <= (4 * depth + 4) * 1e-6,
                  "%d nodes (depth %d): %g us", nodes, depth, t * 1e6);
    double ring = predict(&p, nodes, 1, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, 2,
                          LOOM_SIM_FOLD_NEVER, NULL);
    ck_assert_close(ring, 2.0 * (nodes - 1) * 1e-6, 1e-6);
    prev = t;
  }
}
END_TEST

START_TEST(nic_shared_by_a_nodes_ranks) {
  /* hierarchical on 2 nodes of L ranks, the node level free: each rank
   * sends S/L across in the cross-node ring (S/(2L) twice); alone it takes
   * S/(L bw), but the node's NIC carries S in all, taking S / nic_bw */
  struct loom_sim_params p = base_params();
  p.intra.bw = 1e15;
  int L = 4;
  size_t count = 8u << 20; /* 32 MiB */
  double S = (double)count * 4;
  double alone = predict(&p, 2, L, LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, count,
                         LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(alone, S / L / 1e9, 0.01);
  p.nic_bw = 1e9;
  double shared = predict(&p, 2, L, LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, count,
                          LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(shared, S / 1e9, 0.01);
  /* and the same with every rank simulated */
  double full = predict(&p, 2, L, LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, count,
                        LOOM_SIM_FOLD_NEVER, NULL);
  ck_assert_close(full, shared, 1e-9);
}
END_TEST

START_TEST(reduce_cost_and_contention) {
  /* 2-rank ring all-reduce, one slice per block: inject S/2, reduce S/2,
   * inject S/2 (it forwards the reduced block) */
  struct loom_sim_params p = base_params();
  p.reduce_bw = 4e9;
  size_t count = 65536; /* 256 KiB: one slice per block */
  double S = (double)count * 4;
  double t = predict(&p, 1, 2, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count, LOOM_SIM_FOLD_AUTO,
                     NULL);
  ck_assert_close(t, S / 2 / 1e9 + S / 2 / 4e9 + S / 2 / 1e9, 1e-9);
  /* 4 ranks on 2 cores: everything takes twice as long */
  p.intra.alpha = 2e-6;
  double free4 = predict(&p, 1, 4, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count,
                         LOOM_SIM_FOLD_AUTO, NULL);
  p.cores = 2;
  double busy4 = predict(&p, 1, 4, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count,
                         LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(busy4, 2 * free4, 1e-9);
  p.cores = 4;
  ck_assert_close(predict(&p, 1, 4, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, count,
                          LOOM_SIM_FOLD_AUTO, NULL),
                  free4, 1e-12);
}
END_TEST

START_TEST(overhead_per_message) {
  /* one-shot on n ranks, latency and bytes free: each engine spends the
   * overhead on n-1 sends (posted first, as the engine's loop does) and
   * then on n-1 receives: 2(n-1) overheads */
  struct loom_sim_params p = base_params();
  p.intra.bw = 1e15;
  p.intra.overhead = 1e-6;
  for (int n = 3; n <= 8; n++) {
    double t = predict(&p, 1, n, LOOM_COLL_ALLREDUCE, LOOM_ALGO_ONESHOT, 2, LOOM_SIM_FOLD_AUTO,
                       NULL);
    ck_assert_close(t, 2.0 * (n - 1) * 1e-6, 1e-6);
  }
  /* a message in slices pays it per slice at each end: 4 slices of
   * 512 KiB between 2 ranks (all-gather), the last one's receive ends at
   * 4 (overhead + slice / bw) + overhead */
  p.intra.bw = 1e9;
  double slice = 512.0 * 1024;
  double t = predict(&p, 1, 2, LOOM_COLL_ALLGATHER, LOOM_ALGO_RING, 4 * 131072,
                     LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(t, 4 * (1e-6 + slice / 1e9) + 4 * 1e-6, 1e-9);
}
END_TEST

START_TEST(memory_factor_beyond_the_cache) {
  /* 2-rank all-gather of c elements per rank: the node holds 2 x (4c sent
   * + 8c received) = 24c bytes; with a 12c-byte cache half of it comes
   * from memory, 3 times slower: byte costs double, latency does not */
  struct loom_sim_params p = base_params();
  p.intra.alpha = 5e-6;
  size_t c = 100000;
  double S = (double)c * 4;
  p.llc_bytes = 12.0 * (double)c;
  p.mem_factor = 3;
  double t = predict(&p, 1, 2, LOOM_COLL_ALLGATHER, LOOM_ALGO_RING, c, LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(t, 5e-6 + 2 * S / 1e9, 1e-9);
  p.llc_bytes = 24.0 * (double)c; /* all of it fits */
  t = predict(&p, 1, 2, LOOM_COLL_ALLGATHER, LOOM_ALGO_RING, c, LOOM_SIM_FOLD_AUTO, NULL);
  ck_assert_close(t, 5e-6 + S / 1e9, 1e-9);
}
END_TEST

/* ---- folding one node against every rank ---- */

START_TEST(folded_equals_full) {
  struct loom_sim_params p = base_params();
  p.intra.alpha = 1e-6;
  p.intra.bw = 5e9;
  p.inter.alpha = 20e-6;
  p.inter.bw = 1e9;
  p.nic_bw = 1.5e9;
  p.reduce_bw = 8e9;
  p.copy_bw = 10e9;
  p.cores = 2;
  p.intra.overhead = 0.2e-6;
  p.inter.overhead = 3e-6;
  p.llc_bytes = 1 << 20;
  p.mem_factor = 2;
  p.chunk_bytes = 64u << 10;
  static const struct {
    enum loom_coll coll;
    enum loom_algo algo;
  } cases[] = {{LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING}, {LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER},
               {LOOM_COLL_ALLREDUCE, LOOM_ALGO_ONESHOT}, {LOOM_COLL_ALLGATHER, LOOM_ALGO_RING}};
  size_t counts[] = {48, 4800, 480000};
  int shapes[][2] = {{4, 3}, {3, 4}, {2, 2}, {5, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], L = shapes[s][1];
        if (cases[c].algo == LOOM_ALGO_HIER && L < 2)
          continue;
        size_t count = counts[k] / 12 * (size_t)(N * L); /* a multiple of the ranks */
        struct loom_sim_result fr, ar;
        double folded = predict(&p, N, L, cases[c].coll, cases[c].algo, count,
                                LOOM_SIM_FOLD_AUTO, &fr);
        double full = predict(&p, N, L, cases[c].coll, cases[c].algo, count,
                              LOOM_SIM_FOLD_NEVER, &ar);
        ck_assert_msg(fr.folded && fr.nsim == L && !ar.folded && ar.nsim == N * L,
                      "%s %d x %d: folded %d (%d ranks), full %d (%d ranks)",
                      loom_algo_name(cases[c].algo), N, L, fr.folded, fr.nsim, ar.folded, ar.nsim);
        ck_assert_msg(fabs(folded - full) <= 1e-9 * full, "%s %s %d x %d, %zu: folded %.9g, full %.9g",
                      loom_coll_name(cases[c].coll), loom_algo_name(cases[c].algo), N, L, count,
                      folded, full);
      }
}
END_TEST

START_TEST(folded_rounding_is_small_for_latency) {
  /* 8 bytes on 32 ranks: the folded ring runs 32 elements (one per block),
   * the real one 2; both are 2(n-1) dependent hops, but the real blocks
   * start where their 62 hops cross 15 node boundaries, the worst block of
   * the folded run 16: it may be one inter-node latency slower */
  struct loom_sim_params p = base_params();
  p.intra.alpha = 1e-6;
  p.inter.alpha = 20e-6;
  p.inter.bw = 1e9;
  p.intra.bw = 5e9;
  struct loom_sim_result fr;
  double folded = predict(&p, 8, 4, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, 2, LOOM_SIM_FOLD_AUTO, &fr);
  double exact = predict(&p, 8, 4, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, 2, LOOM_SIM_FOLD_NEVER, NULL);
  ck_assert_uint_eq(fr.count, 32);
  ck_assert_msg(folded >= exact && folded <= exact + p.inter.alpha + 1e-6,
                "folded %.3f us, exact %.3f us", folded * 1e6, exact * 1e6);
}
END_TEST

START_TEST(builds_16384_ranks) {
  /* the schedules of 16,384 ranks (2,048 nodes of 8): every rank's tree,
   * node 0's ring; timed by loom-sim, only run here */
  struct loom_sim_params p = base_params();
  p.intra.alpha = 1e-6;
  p.inter.alpha = 10e-6;
  struct loom_sim_result r;
  predict(&p, 2048, 8, LOOM_COLL_ALLREDUCE, LOOM_ALGO_TREE, 2, LOOM_SIM_FOLD_AUTO, &r);
  ck_assert_int_eq(r.nsim, 16384);
  ck_assert(r.time > 0);
  double tree = r.time;
  predict(&p, 2048, 8, LOOM_COLL_ALLREDUCE, LOOM_ALGO_RING, 2, LOOM_SIM_FOLD_AUTO, &r);
  ck_assert_int_eq(r.nsim, 8);
  ck_assert_int_eq(r.folded, 1);
  ck_assert_int_eq(r.steps, 8L * 2 * 16383);
  ck_assert_msg(r.time > 20 * tree, "ring %g us, tree %g us", r.time * 1e6, tree * 1e6);
}
END_TEST

/* ---- the tuner and the model's checks ---- */

START_TEST(tuner_pick_matches_loom_plan) {
  struct loom_topo t;
  ck_assert_int_eq(loom_sim_topo(&t, 4, 2), 0);
  size_t counts[] = {2, 4096, 1u << 20};
  for (size_t i = 0; i < 3; i++) {
    enum loom_algo a = loom_sim_tuner_pick(&t, LOOM_COLL_ALLREDUCE, counts[i], 4);
    ck_assert_int_ne(a, LOOM_ALGO_AUTO);
    struct loom_step steps[64];
    struct loom_schedule s1;
    loom_sched_init(&s1, steps, 64);
    struct loom_plan_args pa = {.coll = LOOM_COLL_ALLREDUCE, .nranks = 8, .count = counts[i],
                                .elem_size = 4, .topo = &t};
    char name[64];
    snprintf(name, sizeof name, "%s", loom_plan(&pa, &s1));
    pa.allowed = 1u << a;
    ck_assert_str_eq(loom_plan(&pa, &s1), name);
  }
  loom_topo_free(&t);
}
END_TEST

START_TEST(model_rejects_inconsistent_schedules) {
  /* rank 0 sends 100 elements to rank 1, which expects 50 */
  struct loom_sim_step s0 = {1, -1, -1, 0, 0, 0, 100, 0};
  struct loom_sim_step s1 = {-1, 0, -1, 0, 0, 0, 0, 50};
  struct loom_sim_rank ranks[2] = {{0, 1, &s0, 0, 0, 0, 0}, {1, 1, &s1, 0, 0, 0, 0}};
  int node_of[2] = {0, 0}, sim_of[2] = {0, 1}, nic_of[2] = {0, 0};
  struct loom_sim_job job = {.nranks = 2, .nsim = 2, .node_of = node_of, .sim_of = sim_of,
                             .nic_of = nic_of, .nnics = 1, .local = 2, .elem_size = 4,
                             .ranks = ranks};
  struct loom_sim_params p = base_params();
  double t;
  long ev;
  char err[512] = "";
  ck_assert_int_eq(loom_sim_model_run(&p, &job, &t, &ev, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "mismatched") != NULL, "%s", err);
  /* equal sizes: alpha + S / bw */
  s1.recv_count = 100;
  p.intra.alpha = 1e-6;
  ck_assert_int_eq(loom_sim_model_run(&p, &job, &t, &ev, err, sizeof err), 0);
  ck_assert_close(t, 1e-6 + 400 / 1e9, 1e-12);
  ck_assert_int_eq(ev, 2);
  /* a send waiting on a receive that waits on that send: a deadlock */
  struct loom_sim_step d0[2] = {{-1, 1, -1, 0, 0, 0, 0, 10}, {1, -1, -1, 0, 0, 0, 10, 0}};
  struct loom_sim_step d1[2] = {{-1, 0, -1, 0, 0, 0, 0, 10}, {0, -1, -1, 0, 0, 0, 10, 0}};
  d0[1].wait = 0;
  d1[1].wait = 0;
  struct loom_sim_rank dr[2] = {{0, 2, d0, 0, 0, 0, 0}, {1, 2, d1, 0, 0, 0, 0}};
  job.ranks = dr;
  ck_assert_int_eq(loom_sim_model_run(&p, &job, &t, &ev, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "waiting forever") != NULL, "%s", err);
}
END_TEST

START_TEST(calibration_file) {
  char path[] = "/tmp/check_sim_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs("# a comment\nsource = test run\nshm.alpha_us = 1.5  # trailing\nshm.bw_gbps = 6\n"
        "ib.alpha_us = 2\nib.bw_gbps = 25\nreduce_gbps = 9\ncores = 4\ninter = ib\n",
        f);
  fclose(f);
  struct loom_sim_calibration c;
  loom_sim_calibration_default(&c);
  char err[256] = "";
  ck_assert_msg(loom_sim_calibration_read(&c, path, err, sizeof err) == 0, "%s", err);
  struct loom_sim_params p;
  ck_assert_int_eq(loom_sim_params_from(&c, NULL, NULL, &p, err, sizeof err), 0);
  ck_assert_close(p.intra.alpha, 1.5e-6, 1e-12);
  ck_assert_close(p.intra.bw, 6e9, 1e-12);
  ck_assert_close(p.inter.bw, 25e9, 1e-12);
  ck_assert_close(p.nic_bw, 25e9, 1e-12);
  ck_assert_close(p.reduce_bw, 9e9, 1e-12);
  ck_assert_int_eq(c.cores, 4);
  ck_assert_str_eq(c.source, "test run");
  /* what write prints, read takes back */
  f = fopen(path, "w");
  loom_sim_calibration_write(&c, f);
  fclose(f);
  struct loom_sim_calibration d;
  loom_sim_calibration_default(&d);
  ck_assert_msg(loom_sim_calibration_read(&d, path, err, sizeof err) == 0, "%s", err);
  ck_assert_str_eq(d.inter, "ib");
  ck_assert_close(loom_sim_transport_find(&d, "ib")->level.alpha, 2e-6, 1e-3);
  /* errors name the file and line */
  f = fopen(path, "w");
  fputs("shm.alpha_us = 1\nshm.speed = 3\n", f);
  fclose(f);
  ck_assert_int_eq(loom_sim_calibration_read(&d, path, err, sizeof err), -1);
  ck_assert_msg(strstr(err, ":2: unknown transport key") != NULL, "%s", err);
  ck_assert_int_eq(loom_sim_params_from(&d, "nvlink", NULL, &p, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "nvlink") != NULL, "%s", err);
  unlink(path);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim");
  TCase *tc = tcase_create("sim");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, one_message_is_alpha_plus_bytes_over_bw);
  tcase_add_test(tc, ring_allreduce_bandwidth_term);
  tcase_add_test(tc, ring_latency_term);
  tcase_add_test(tc, tree_latency_grows_with_log_n);
  tcase_add_test(tc, nic_shared_by_a_nodes_ranks);
  tcase_add_test(tc, reduce_cost_and_contention);
  tcase_add_test(tc, overhead_per_message);
  tcase_add_test(tc, memory_factor_beyond_the_cache);
  tcase_add_test(tc, folded_equals_full);
  tcase_add_test(tc, folded_rounding_is_small_for_latency);
  tcase_add_test(tc, builds_16384_ranks);
  tcase_add_test(tc, tuner_pick_matches_loom_plan);
  tcase_add_test(tc, model_rejects_inconsistent_schedules);
  tcase_add_test(tc, calibration_file);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
