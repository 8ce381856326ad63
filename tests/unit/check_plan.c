/*
 * check_plan.c — unit tests of the tuner (src/plan/plan.c) and of LOOM_ALGO
 * parsing (src/plan/algo.c): which algorithm each size and rank count gets,
 * what forcing does, and the messages for bad specs; the cache of
 * planned schedules (src/api/plan_cache.c).
 */
#include "plan/plan.h"
#include "api/plan_cache.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"

/* ---- loom_algo_parse ------------------------------------------------------- */

static void parse_ok(const char *spec, unsigned allowed[LOOM_COLL_COUNT]) {
  char err[256] = "";
  ck_assert_msg(loom_algo_parse(spec, allowed, err, sizeof err) == 0, "\"%s\": %s",
                spec ? spec : "(null)", err);
}

static void parse_bad(const char *spec, const char *want_in_message) {
  unsigned allowed[LOOM_COLL_COUNT];
  char err[256] = "";
  ck_assert_msg(loom_algo_parse(spec, allowed, err, sizeof err) == -1, "\"%s\" was accepted",
                spec);
  ck_assert_msg(strstr(err, want_in_message) != NULL, "\"%s\": message \"%s\" lacks \"%s\"",
                spec, err, want_in_message);
}

#define B(a) (1u << (a))

START_TEST(parse_empty) {
  unsigned f[LOOM_COLL_COUNT];
  memset(f, 0xee, sizeof f);
  parse_ok(NULL, f);
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    ck_assert_uint_eq(f[c], 0);
  memset(f, 0xee, sizeof f);
  parse_ok("", f);
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    ck_assert_uint_eq(f[c], 0);
}
END_TEST

START_TEST(parse_plain_applies_where_it_can) {
  unsigned f[LOOM_COLL_COUNT];
  parse_ok("ring", f);
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE], B(LOOM_ALGO_RING));
  ck_assert_uint_eq(f[LOOM_COLL_ALLGATHER], B(LOOM_ALGO_RING));
  ck_assert_uint_eq(f[LOOM_COLL_REDUCESCATTER], B(LOOM_ALGO_RING));
  ck_assert_uint_eq(f[LOOM_COLL_BROADCAST], 0);
  ck_assert_uint_eq(f[LOOM_COLL_GATHER], 0);
  parse_ok("TREE,Ring", f); /* case-insensitive; a list */
  ck_assert_uint_eq(f[LOOM_COLL_BROADCAST], B(LOOM_ALGO_TREE));
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE], B(LOOM_ALGO_TREE) | B(LOOM_ALGO_RING));
  ck_assert_uint_eq(f[LOOM_COLL_ALLGATHER], B(LOOM_ALGO_RING));
  parse_ok("^oneshot,rd", f); /* exclusion */
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE],
                    B(LOOM_ALGO_RING) | B(LOOM_ALGO_TREE) | B(LOOM_ALGO_HIER) | B(LOOM_ALGO_RHD));
  ck_assert_uint_eq(f[LOOM_COLL_ALLGATHER], B(LOOM_ALGO_RING));
  ck_assert_uint_eq(f[LOOM_COLL_BROADCAST], 0);
  parse_ok("^oneshot", f); /* the two collectives that have it */
  ck_assert_uint_eq(f[LOOM_COLL_ALLGATHER], B(LOOM_ALGO_RING) | B(LOOM_ALGO_RD));
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE] & B(LOOM_ALGO_ONESHOT), 0);
  ck_assert_uint_eq(f[LOOM_COLL_REDUCESCATTER], 0);
}
END_TEST

START_TEST(parse_per_collective_and_override) {
  unsigned f[LOOM_COLL_COUNT];
  /* a named collective wins over plain items in any order */
  parse_ok("allreduce:oneshot;ring;Broadcast:chain", f);
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE], B(LOOM_ALGO_ONESHOT));
  ck_assert_uint_eq(f[LOOM_COLL_ALLGATHER], B(LOOM_ALGO_RING));
  ck_assert_uint_eq(f[LOOM_COLL_BROADCAST], B(LOOM_ALGO_CHAIN));
  ck_assert_uint_eq(f[LOOM_COLL_REDUCE], 0);
  parse_ok("allreduce:tree;ring", f); /* the example */
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE], B(LOOM_ALGO_TREE));
  ck_assert_uint_eq(f[LOOM_COLL_REDUCESCATTER], B(LOOM_ALGO_RING));
  parse_ok("allgather:rd;allgather:ring;", f); /* the later one wins */
  ck_assert_uint_eq(f[LOOM_COLL_ALLGATHER], B(LOOM_ALGO_RING));
  parse_ok("allreduce:^ring,hier", f);
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE],
                    B(LOOM_ALGO_RD) | B(LOOM_ALGO_ONESHOT) | B(LOOM_ALGO_TREE) | B(LOOM_ALGO_RHD));
}
END_TEST

START_TEST(parse_errors) {
  parse_bad("bogus", "unknown algorithm \"bogus\"");
  parse_bad("allreduce:", "lists no algorithm");
  parse_bad("ring,,rd", "unknown algorithm \"\"");
  parse_bad("^", "lists no algorithm");
  parse_bad("reducescatter:tree", "reducescatter has no algorithm tree");
  parse_bad("allgather:hier,ring", "allgather has no algorithm hier");
  parse_bad("broadcast:oneshot", "broadcast has no algorithm oneshot");
  parse_bad("alltoall:ring", "\"alltoall\" is not a collective with a choice");
  parse_bad("allreduc:ring", "\"allreduc\" is not a collective");
  parse_bad("reducescatter:^ring", "excludes every algorithm reducescatter has");
}
END_TEST

START_TEST(mask_text) {
  char buf[64];
  ck_assert_str_eq(loom_algo_mask_text(B(LOOM_ALGO_TREE) | B(LOOM_ALGO_RING), buf, sizeof buf),
                   "ring, tree");
  ck_assert_str_eq(loom_algo_mask_text(0, buf, sizeof buf), "");
}
END_TEST

/* ---- loom_plan: the tuner ---------------------------------------------------- */

static const char *plan_on(enum loom_coll coll, int nranks, size_t bytes, enum loom_algo algo,
                           const struct loom_topo *topo) {
  static struct loom_step steps[LOOM_SCHED_MAX_STEPS(1024)];
  struct loom_schedule s;
  loom_sched_init(&s, steps, LOOM_SCHED_MAX_STEPS(1024));
  unsigned allowed = algo == LOOM_ALGO_AUTO ? 0 : 1u << algo;
  struct loom_plan_args a = {.coll = coll, .nranks = nranks, .count = bytes / 4, .elem_size = 4,
                             .allowed = allowed, .topo = topo};
  return loom_plan(&a, &s);
}

static const char *plan(enum loom_coll coll, int nranks, size_t bytes, enum loom_algo algo) {
  return plan_on(coll, nranks, bytes, algo, NULL);
}

START_TEST(tuner_allreduce) {
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 2, 8, LOOM_ALGO_AUTO), "recursive doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 2, 64 << 10, LOOM_ALGO_AUTO), "recursive doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 2, (64 << 10) + 4, LOOM_ALGO_AUTO), "ring");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 3, 8 << 10, LOOM_ALGO_AUTO), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 8, 8, LOOM_ALGO_AUTO), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 3, (8 << 10) + 4, LOOM_ALGO_AUTO), "ring");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 4, (8 << 10) + 4, LOOM_ALGO_AUTO),
                   "recursive doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 4, 1 << 20, LOOM_ALGO_AUTO), "ring");
}
END_TEST

/* 4 ranks on one node of `cores` cores. */
static const char *plan_cores(enum loom_coll coll, size_t bytes, int cores) {
  struct loom_topo t;
  int node[4] = {0, 0, 0, 0};
  ck_assert_int_eq(loom_topo_from_nodes(&t, 4, node), 0);
  struct loom_topo_hw hw;
  memset(&hw, 0, sizeof hw);
  hw.cores = cores;
  t.hw = &hw;
  const char *name = plan_on(coll, 4, bytes, LOOM_ALGO_AUTO, &t);
  t.hw = NULL;
  loom_topo_free(&t);
  return name;
}

/* More ranks than cores: fewer steps up to 1 MiB (halving-doubling for
 * all-reduce, recursive doubling for all-gather's total); enough cores:
 * the rings as before. */
START_TEST(tuner_oversubscribed) {
  const char *rhd = "recursive halving-doubling", *rd = "recursive doubling";
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, 8, 2), "one-shot");
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, 64 << 10, 2), rd);
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, (64 << 10) + 4, 2), rhd);
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, 1 << 20, 2), rhd);
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, (1 << 20) + 4, 2), "ring");
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, 128 << 10, 4), "ring");
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLREDUCE, 128 << 10, 0), "ring"); /* cores unknown */
  /* all-gather: bytes per rank, 4 ranks: 256 KiB is 1 MiB in all; up
   * to 256 KiB in all one-shot, with or without enough cores */
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLGATHER, 256 << 10, 2), rd);
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLGATHER, (256 << 10) + 4, 2), "ring");
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLGATHER, (64 << 10) + 4, 2), rd);
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLGATHER, 64 << 10, 2), "one-shot");
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLGATHER, 64 << 10, 4), "one-shot");
  ck_assert_str_eq(plan_cores(LOOM_COLL_ALLGATHER, (64 << 10) + 4, 4), "ring");
}
END_TEST

START_TEST(tuner_forced_and_fallback) {
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 2, 8, LOOM_ALGO_RING), "ring");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 4, 64 << 20, LOOM_ALGO_ONESHOT), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 4, 64 << 20, LOOM_ALGO_RD), "recursive doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 8, 1 << 20, LOOM_ALGO_RHD),
                   "recursive halving-doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 6, 1 << 20, LOOM_ALGO_RHD), "ring");
  /* recursive doubling cannot run on 3 ranks: the tuner's choice */
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 3, 64 << 20, LOOM_ALGO_RD), "ring");
  ck_assert_str_eq(plan(LOOM_COLL_ALLREDUCE, 3, 8, LOOM_ALGO_RD), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_BROADCAST, 5, 8, LOOM_ALGO_CHAIN), "chain");
  ck_assert_str_eq(plan(LOOM_COLL_BROADCAST, 5, 64 << 20, LOOM_ALGO_TREE), "binomial tree");
  ck_assert_str_eq(plan(LOOM_COLL_REDUCE, 5, 8, LOOM_ALGO_AUTO), "binomial tree");
  ck_assert_str_eq(plan(LOOM_COLL_REDUCE, 5, 1 << 20, LOOM_ALGO_AUTO), "chain");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 4, 1 << 10, LOOM_ALGO_AUTO), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 4, 1 << 10, LOOM_ALGO_RD), "recursive doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 4, 1 << 10, LOOM_ALGO_RING), "ring");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 2, 1 << 10, LOOM_ALGO_AUTO), "recursive doubling");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 3, 1 << 10, LOOM_ALGO_AUTO), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 9, 1 << 10, LOOM_ALGO_AUTO), "ring");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 9, 1 << 10, LOOM_ALGO_ONESHOT), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 8, 32 << 10, LOOM_ALGO_AUTO), "one-shot");
  ck_assert_str_eq(plan(LOOM_COLL_ALLGATHER, 8, (32 << 10) + 4, LOOM_ALGO_AUTO), "ring");
  /* an algorithm the collective does not have (LOOM_ALGO rejects it; the
   * planner ignores it) */
  ck_assert_str_eq(plan(LOOM_COLL_REDUCESCATTER, 4, 8, LOOM_ALGO_TREE), "ring");
}
END_TEST

START_TEST(tuner_with_nodes) {
  struct loom_topo two_by_two, uneven, one_each;
  int id4[] = {0, 1, 0, 1}, id5[] = {0, 0, 0, 1, 1}, id3[] = {7, 8, 9};
  ck_assert_int_eq(loom_topo_from_nodes(&two_by_two, 4, id4), 0);
  ck_assert_int_eq(loom_topo_from_nodes(&uneven, 5, id5), 0);
  ck_assert_int_eq(loom_topo_from_nodes(&one_each, 3, id3), 0);
  /* across nodes the alpha-beta model ranks: latency-bound recursive
   * doubling for small messages, hierarchical for large ones */
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 4, 8, LOOM_ALGO_AUTO, &two_by_two),
                   "recursive doubling");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 4, 16 << 10, LOOM_ALGO_AUTO, &two_by_two),
                   "recursive doubling");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 4, 1 << 20, LOOM_ALGO_AUTO, &two_by_two),
                   "hierarchical");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 4, 64 << 20, LOOM_ALGO_AUTO, &two_by_two),
                   "hierarchical");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLGATHER, 4, 1 << 20, LOOM_ALGO_AUTO, &two_by_two),
                   "ring (by node)");
  /* one-shot all-gather is for one node */
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLGATHER, 4, 8, LOOM_ALGO_AUTO, &two_by_two),
                   "recursive doubling");
  ck_assert_str_eq(plan_on(LOOM_COLL_REDUCESCATTER, 4, 1 << 20, LOOM_ALGO_AUTO, &two_by_two),
                   "ring (by node)");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 4, 1 << 20, LOOM_ALGO_RING, &two_by_two),
                   "ring (by node)");
  /* nodes of unequal size, or one rank per node: no hierarchical; a forced
   * hier falls back to the model's own pick (at 1 MiB the ring and the
   * segmented tree are within 5% of each other on 3+2 ranks) */
  const char *auto5 = plan_on(LOOM_COLL_ALLREDUCE, 5, 1 << 20, LOOM_ALGO_AUTO, &uneven);
  ck_assert_msg(strcmp(auto5, "ring (by node)") == 0 || strcmp(auto5, "double binary tree") == 0,
                "1 MiB on nodes of 3 and 2: %s", auto5);
  char auto5_copy[32];
  snprintf(auto5_copy, sizeof auto5_copy, "%s", auto5);
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 5, 1 << 20, LOOM_ALGO_HIER, &uneven), auto5_copy);
  const char *auto3 = plan_on(LOOM_COLL_ALLREDUCE, 3, 1 << 20, LOOM_ALGO_AUTO, &one_each);
  ck_assert_msg(strcmp(auto3, "hierarchical") != 0, "one rank per node: %s", auto3);
  ck_assert(!loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, 3, &one_each));
  ck_assert(loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, 4, &two_by_two));
  ck_assert(!loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_HIER, 4, NULL));
  /* one node: plain rings */
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 3, 1 << 20, LOOM_ALGO_HIER, NULL), "ring");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 3, 8, LOOM_ALGO_TREE, NULL), "one-shot");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 4, 1 << 20, LOOM_ALGO_TREE, &two_by_two),
                   "double binary tree");
  /* many nodes: small messages on a non-power-of-two count take the tree
   * (one-shot's 2(n-L) network messages per rank cost more), on a power of
   * two recursive doubling (log2 n latencies against the tree's 2 log2 N) */
  struct loom_topo many, pow2;
  int id1000[1000];
  for (int r = 0; r < 1000; r++)
    id1000[r] = r / 2;
  ck_assert_int_eq(loom_topo_from_nodes(&many, 1000, id1000), 0);
  ck_assert_int_eq(loom_topo_from_nodes(&pow2, 1000, id1000), 0); /* freed below, reused */
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 1000, 8, LOOM_ALGO_AUTO, &many),
                   "double binary tree");
  /* large: a pipelined bandwidth algorithm, not the tree, whose levels each
   * add a whole half-buffer time (ring and hierarchical are within 10% of
   * each other in the model at this scale) */
  const char *big = plan_on(LOOM_COLL_ALLREDUCE, 1000, 256 << 20, LOOM_ALGO_AUTO, &many);
  ck_assert_msg(strcmp(big, "ring (by node)") == 0 || strcmp(big, "hierarchical") == 0,
                "256 MiB on 500 nodes x 2: %s", big);
  loom_topo_free(&pow2);
  int id16[16];
  for (int r = 0; r < 16; r++)
    id16[r] = r / 2;
  ck_assert_int_eq(loom_topo_from_nodes(&pow2, 16, id16), 0);
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 16, 8, LOOM_ALGO_AUTO, &pow2),
                   "recursive doubling");
  ck_assert_str_eq(plan_on(LOOM_COLL_ALLREDUCE, 16, 8, LOOM_ALGO_AUTO, NULL), "recursive doubling");
  loom_topo_free(&many);
  loom_topo_free(&pow2);
  loom_topo_free(&two_by_two);
  loom_topo_free(&uneven);
  loom_topo_free(&one_each);
}
END_TEST

/* ---- LOOM_TUNE_FILE ---------------------------------------------------------- */

static const char *write_tmp(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/check_plan_tune.%d", (int)getpid());
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return path;
}

START_TEST(tune_file) {
  char comment[1200], text[2048]; /* a comment longer than the loader's buffer */
  memset(comment, 'x', sizeof comment);
  comment[0] = '#';
  comment[sizeof comment - 1] = '\0';
  snprintf(text, sizeof text, "%s\n%s", comment,
           "# loom tune file 1\n"
           "allreduce 2 1 max ring   # the rest\n"
           "allreduce 2 1 1024 oneshot\n"
           "\n"
           "allreduce 4 1 max rd\n"
           "ALLGATHER 2 1 65536 Ring\n"
           "broadcast 2 1 4096 auto\n"
           "broadcast 2 1 max chain\n");
  const char *path = write_tmp(text);
  struct loom_tune t;
  char err[256] = "";
  ck_assert_msg(loom_tune_load(&t, path, 2, 1, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(t.nentries, 5); /* the 4-rank line is skipped */
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_ALLREDUCE, 8), LOOM_ALGO_ONESHOT);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_ALLREDUCE, 1024), LOOM_ALGO_ONESHOT);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_ALLREDUCE, 1025), LOOM_ALGO_RING);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_ALLGATHER, 65536), LOOM_ALGO_RING);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_ALLGATHER, 65537), LOOM_ALGO_AUTO);
  /* "auto": the tuner's choice up to 4096 bytes, then the measured chain */
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_BROADCAST, 8), LOOM_ALGO_AUTO);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_BROADCAST, 4096), LOOM_ALGO_AUTO);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_BROADCAST, 4097), LOOM_ALGO_CHAIN);
  ck_assert_int_eq(loom_tune_lookup(&t, LOOM_COLL_REDUCE, 8), LOOM_ALGO_AUTO);
  /* the measured choice wins over the rules, LOOM_ALGO still limits it */
  struct loom_plan_args a = {
      .coll = LOOM_COLL_ALLREDUCE, .nranks = 2, .count = 2, .elem_size = 4, .tune = &t};
  static struct loom_step steps[LOOM_SCHED_MAX_STEPS(2)];
  struct loom_schedule s;
  loom_sched_init(&s, steps, LOOM_SCHED_MAX_STEPS(2));
  ck_assert_str_eq(loom_plan(&a, &s), "one-shot");
  a.allowed = 1u << LOOM_ALGO_RD;
  ck_assert_str_eq(loom_plan(&a, &s), "recursive doubling");
  loom_tune_free(&t);
  unlink(path);
}
END_TEST

START_TEST(tune_file_errors) {
  struct loom_tune t;
  char err[256];
  ck_assert_int_eq(loom_tune_load(&t, "/nonexistent/tune", 2, 1, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "No such file"));
  const char *bad[] = {"allreduce 2 1 1024\n", "allreduce 2 1 1k ring\n",
                       "allgather 2 1 max tree\n", "bogus 2 1 max ring\n",
                       "allreduce 0 1 max ring\n", "allreduce 2 1 max ring extra\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "# fine\nallreduce 2 1 max ring\n%s", bad[i]);
    const char *path = write_tmp(text);
    ck_assert_msg(loom_tune_load(&t, path, 2, 1, err, sizeof err) == -1, "accepted: %s", bad[i]);
    ck_assert_msg(strstr(err, ":3: expected") != NULL, "%s: %s", bad[i], err);
    unlink(path);
  }
  /* a size given twice (found by fuzz_tune): refused, naming both lines;
   * the same size for another job's ranks is not this job's concern */
  const char *path = write_tmp("allgather 2 1 4096 ring\nallgather 4 1 4096 auto\n"
                               "allgather 2 1 4096 auto\n");
  ck_assert_int_eq(loom_tune_load(&t, path, 2, 1, err, sizeof err), -1);
  ck_assert_msg(strstr(err, ":3: allgather 2 1 4096 repeats the size of line 1") != NULL, "%s",
                err);
  ck_assert_int_eq(loom_tune_load(&t, path, 4, 1, err, sizeof err), 0);
  loom_tune_free(&t);
  unlink(path);
}
END_TEST

/* The model's formulas on cases with known answers. */
START_TEST(cost_model) {
  /* bandwidth only: 1 and 0.25 GB/s */
  struct loom_cost_model m = {.beta_intra = 1e-9, .beta_inter = 4e-9};
  struct loom_topo one_node, two_by_two;
  int id4a[] = {0, 0, 0, 0}, id4b[] = {0, 0, 1, 1};
  ck_assert_int_eq(loom_topo_from_nodes(&one_node, 4, id4a), 0);
  ck_assert_int_eq(loom_topo_from_nodes(&two_by_two, 4, id4b), 0);
  double S = 1 << 20;
#define NEAR(x, want) ck_assert_msg(fabs((x) - (want)) < 1e-12 + 1e-9 * (want), "%g != %g", (x), (want))
  /* ring: 2(n-1)/n of the data over the slowest link */
  NEAR(loom_cost_allreduce(LOOM_ALGO_RING, 4, &one_node, S, &m), 1.5 * S * 1e-9);
  NEAR(loom_cost_allreduce(LOOM_ALGO_RING, 4, &two_by_two, S, &m), 1.5 * S * 4e-9);
  /* recursive doubling: the whole buffer per step; across nodes both ranks
   * of a node share its NIC */
  NEAR(loom_cost_allreduce(LOOM_ALGO_RD, 4, &one_node, S, &m), 2 * S * 1e-9);
  NEAR(loom_cost_allreduce(LOOM_ALGO_RD, 4, &two_by_two, S, &m), S * 1e-9 + 2 * S * 4e-9);
  /* hierarchical: 2(L-1)/L inside, 2(N-1)/N across */
  NEAR(loom_cost_allreduce(LOOM_ALGO_HIER, 4, &two_by_two, S, &m), S * 1e-9 + S * 4e-9);
  ck_assert(loom_cost_allreduce(LOOM_ALGO_RING, 1, NULL, S, &m) == 0);
  /* latency only: the tree's depth over 8 nodes is 3 edges, each way */
  struct loom_cost_model lat = {.alpha_inter = 1e-6};
  struct loom_topo eight;
  int id8[] = {0, 1, 2, 3, 4, 5, 6, 7};
  ck_assert_int_eq(loom_topo_from_nodes(&eight, 8, id8), 0);
  NEAR(loom_cost_allreduce(LOOM_ALGO_TREE, 8, &eight, 8, &lat), 6e-6);
  NEAR(loom_cost_allreduce(LOOM_ALGO_RING, 8, &eight, 8, &lat), 14e-6);
  NEAR(loom_cost_allreduce(LOOM_ALGO_RD, 8, &eight, 8, &lat), 3e-6);
#undef NEAR
  loom_topo_free(&one_node);
  loom_topo_free(&two_by_two);
  loom_topo_free(&eight);
}
END_TEST

/* What the transports report replaces the defaults field by field; the
 * network's bandwidth falls back to the NIC speed, then the default. */
START_TEST(cost_seed_from_links) {
#define NEAR(x, want) ck_assert_msg(fabs((x) - (want)) < 1e-15 + 1e-9 * (want), "%g != %g", (x), (want))
  struct loom_cost_model m;
  loom_cost_seed(&m, NULL, NULL);
  NEAR(m.alpha_intra, LOOM_COST_SHM_ALPHA_US * 1e-6);
  NEAR(m.beta_inter, 1.0 / (LOOM_COST_NET_GBPS * 1e9));
  NEAR(m.msg_inter, LOOM_COST_NET_MSG_US * 1e-6);
  struct loom_topo t;
  int id[] = {0, 1};
  ck_assert_int_eq(loom_topo_from_nodes(&t, 2, id), 0);
  t.net_mbps = 100000; /* 12.5 GB/s */
  loom_cost_seed(&m, &t, NULL);
  NEAR(m.beta_inter, 1.0 / 12.5e9);
  struct loom_cost_links l = {.intra = {.latency_us = 1.0},
                              .inter = {.latency_us = 3.0, .msg_overhead_us = 0.5}};
  loom_cost_seed(&m, &t, &l);
  NEAR(m.alpha_intra, 1e-6);
  NEAR(m.beta_intra, 1.0 / (LOOM_COST_SHM_GBPS * 1e9)); /* not reported: the default */
  NEAR(m.alpha_inter, 3e-6);
  NEAR(m.msg_inter, 0.5e-6);
  NEAR(m.beta_inter, 1.0 / 12.5e9); /* not reported: the NIC's */
  l.inter.bandwidth_gbps = 25.0;
  loom_cost_seed(&m, &t, &l);
  NEAR(m.beta_inter, 1.0 / 25e9);
#undef NEAR
  loom_topo_free(&t);
}
END_TEST

START_TEST(runs_and_names) {
  ck_assert(loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_RD, 8, NULL));
  ck_assert(!loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_RD, 6, NULL));
  ck_assert(loom_algo_runs(LOOM_COLL_ALLREDUCE, LOOM_ALGO_ONESHOT, 6, NULL));
  ck_assert(!loom_algo_runs(LOOM_COLL_GATHER, LOOM_ALGO_RING, 4, NULL));
  ck_assert_str_eq(loom_algo_name(LOOM_ALGO_ONESHOT), "oneshot");
  ck_assert_str_eq(loom_algo_name(LOOM_ALGO_COUNT), "?");
}
END_TEST

/* ---- LOOM_PROTO and the protocol choice ------------------------------------ */

/* The slice the planner gives `coll` of `bytes` on nranks (topo may be
 * NULL), with LOOM_PROTO's mask proto_allowed. */
static size_t slice_of(enum loom_coll coll, int nranks, size_t bytes, enum loom_algo algo,
                       const struct loom_topo *topo, unsigned proto_allowed) {
  static struct loom_step steps[LOOM_SCHED_MAX_STEPS(1024)];
  struct loom_schedule s;
  loom_sched_init(&s, steps, LOOM_SCHED_MAX_STEPS(1024));
  s.slice_bytes = 12345; /* loom_plan must set it */
  unsigned allowed = algo == LOOM_ALGO_AUTO ? 0 : 1u << algo;
  struct loom_plan_args a = {.coll = coll,
                             .nranks = nranks,
                             .count = bytes / 4,
                             .elem_size = 4,
                             .allowed = allowed,
                             .topo = topo,
                             .proto_allowed = proto_allowed,
                             .chunk_bytes = 512u << 10,
                             .nchannels = 1};
  loom_plan(&a, &s);
  return s.slice_bytes;
}

START_TEST(proto_parse) {
  unsigned f[LOOM_COLL_COUNT];
  char err[256] = "";
  unsigned ll = 1u << LOOM_PROTO_LL, simple = 1u << LOOM_PROTO_SIMPLE;
  ck_assert_int_eq(loom_proto_parse("LL", f, err, sizeof err), 0);
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE], ll);
  ck_assert_uint_eq(f[LOOM_COLL_BROADCAST], ll);
  ck_assert_uint_eq(f[LOOM_COLL_GATHER], 0); /* no choice there */
  ck_assert_int_eq(loom_proto_parse("^ll", f, err, sizeof err), 0);
  ck_assert_uint_eq(f[LOOM_COLL_REDUCE], simple);
  ck_assert_int_eq(loom_proto_parse("broadcast:LL;simple", f, err, sizeof err), 0);
  ck_assert_uint_eq(f[LOOM_COLL_BROADCAST], ll);
  ck_assert_uint_eq(f[LOOM_COLL_ALLREDUCE], simple);
  ck_assert_int_eq(loom_proto_parse("LL128", f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "LOOM_PROTO=\"LL128\": unknown protocol \"LL128\" (known: LL, "
                            "Simple)") != NULL,
                "%s", err);
  ck_assert_int_eq(loom_proto_parse("gather:LL", f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a collective with a choice of protocol") != NULL, "%s", err);
  ck_assert_int_eq(loom_proto_parse("broadcast:^LL,Simple", f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "excludes every protocol broadcast has") != NULL, "%s", err);
  ck_assert_str_eq(loom_proto_name(LOOM_PROTO_LL), "LL");
  ck_assert_str_eq(loom_proto_name(LOOM_PROTO_SIMPLE), "Simple");
}
END_TEST

START_TEST(proto_choice) {
  unsigned ll = 1u << LOOM_PROTO_LL, simple = 1u << LOOM_PROTO_SIMPLE;
  size_t LL = LOOM_PROTO_LL_SLICE_BYTES;
  /* a long chain: 64 ranks forward 4 MiB: (63 + 256 - 1) 16 KiB slices
   * beat (63 + 8 - 1) 512 KiB ones */
  ck_assert_uint_eq(slice_of(LOOM_COLL_BROADCAST, 64, 4u << 20, LOOM_ALGO_CHAIN, NULL, 0), LL);
  /* 2 ranks: one hop, nothing to pipeline */
  ck_assert_uint_eq(slice_of(LOOM_COLL_BROADCAST, 2, 4u << 20, LOOM_ALGO_CHAIN, NULL, 0), 0);
  /* rings keep every link busy: Simple whatever the size */
  ck_assert_uint_eq(slice_of(LOOM_COLL_ALLREDUCE, 64, 4u << 20, LOOM_ALGO_RING, NULL, 0), 0);
  ck_assert_uint_eq(slice_of(LOOM_COLL_ALLGATHER, 64, 1u << 20, LOOM_ALGO_AUTO, NULL, 0), 0);
  /* a message no larger than one LL slice: Simple */
  ck_assert_uint_eq(slice_of(LOOM_COLL_BROADCAST, 64, 16u << 10, LOOM_ALGO_CHAIN, NULL, 0), 0);
  /* forced either way */
  ck_assert_uint_eq(slice_of(LOOM_COLL_ALLREDUCE, 4, 4u << 20, LOOM_ALGO_RING, NULL, ll), LL);
  ck_assert_uint_eq(slice_of(LOOM_COLL_BROADCAST, 64, 4u << 20, LOOM_ALGO_CHAIN, NULL, simple),
                    0);
  /* more ranks on a node than cores: Simple (the chain cannot all run) */
  struct loom_topo t;
  int node[64];
  for (int r = 0; r < 64; r++)
    node[r] = 0;
  ck_assert_int_eq(loom_topo_from_nodes(&t, 64, node), 0);
  struct loom_topo_hw hw;
  memset(&hw, 0, sizeof hw);
  hw.cores = 2;
  t.hw = &hw;
  ck_assert_uint_eq(slice_of(LOOM_COLL_BROADCAST, 64, 4u << 20, LOOM_ALGO_CHAIN, &t, 0), 0);
  hw.cores = 64;
  ck_assert_uint_eq(slice_of(LOOM_COLL_BROADCAST, 64, 4u << 20, LOOM_ALGO_CHAIN, &t, 0), LL);
  t.hw = NULL;
  loom_topo_free(&t);
}
END_TEST

/* ---- the plan cache ------------------------------------------------------------ */

#define CACHE_STEPS LOOM_SCHED_MAX_STEPS(8)

/* Plans coll for rank 1 of 5 ranks into s (steps of CACHE_STEPS). */
struct shape {
  enum loom_coll coll;
  int root;
  size_t count, elem_size;
};

static struct loom_plan_key key_of(struct shape h) {
  return loom_plan_key_make(h.coll, h.root, h.count, h.elem_size);
}

static const char *plan_shape(struct shape h, struct loom_schedule *s,
                              struct loom_step *steps) {
  loom_sched_init(s, steps, CACHE_STEPS);
  struct loom_plan_args a = {.coll = h.coll, .rank = 1, .nranks = 5, .root = h.root,
                             .count = h.count, .elem_size = h.elem_size};
  return loom_plan(&a, s);
}

/* A hit gives back exactly the schedule that was put, in the caller's
 * steps; other shapes, and a caller with too few steps, miss. */
START_TEST(plan_cache_hit_is_the_planned_schedule) {
  static struct loom_step planned[CACHE_STEPS], got[CACHE_STEPS];
  struct loom_plan_cache pc = {0};
  uint64_t *pp = NULL;
  const struct shape shapes[] = {
      {LOOM_COLL_ALLREDUCE, -1, 3, 4},      {LOOM_COLL_ALLREDUCE, -1, 1 << 20, 4},
      {LOOM_COLL_BROADCAST, 2, 1000, 8},    {LOOM_COLL_ALLGATHER, -1, 4099, 2}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    struct loom_schedule s, out;
    const struct loom_plan_key key = key_of(shapes[i]);
    const char *algo = plan_shape(shapes[i], &s, planned);
    ck_assert_ptr_nonnull(algo);
    ck_assert_int_gt(s.nsteps, 0);
    loom_sched_init(&out, got, CACHE_STEPS);
    ck_assert_ptr_null(loom_plan_cache_get(&pc, &key, &out, &pp));
    uint64_t *kept = loom_plan_cache_put(&pc, &key, algo, &s);
    ck_assert_ptr_nonnull(kept);
    ck_assert_uint_eq(*kept, 0);
    *kept = 100 + i; /* the caller's note comes back with every hit */
    memset(got, 0xa5, sizeof got);
    ck_assert_str_eq(loom_plan_cache_get(&pc, &key, &out, &pp), algo);
    ck_assert_ptr_eq(pp, kept);
    ck_assert_uint_eq(*pp, 100 + i);
    ck_assert_ptr_eq(out.steps, got);
    ck_assert_int_eq(out.cap, CACHE_STEPS);
    ck_assert_int_eq(out.nsteps, s.nsteps);
    ck_assert_uint_eq(out.scratch_count, s.scratch_count);
    ck_assert_uint_eq(out.slice_bytes, s.slice_bytes);
    ck_assert_int_eq(memcmp(&out.copy, &s.copy, sizeof s.copy), 0);
    ck_assert_int_eq(memcmp(&out.fold, &s.fold, sizeof s.fold), 0);
    ck_assert_int_eq(memcmp(got, planned, sizeof *got * (size_t)s.nsteps), 0);
    /* a caller whose array is too small for it misses */
    struct loom_schedule small;
    loom_sched_init(&small, got, s.nsteps - 1);
    ck_assert_ptr_null(loom_plan_cache_get(&pc, &key, &small, &pp));
  }
  /* every field of the key counts */
  struct loom_schedule out;
  loom_sched_init(&out, got, CACHE_STEPS);
  struct shape h = shapes[2];
  struct loom_plan_key k = key_of(h);
  ck_assert_ptr_nonnull(loom_plan_cache_get(&pc, &k, &out, &pp));
  h.root = 3;
  k = key_of(h);
  ck_assert_ptr_null(loom_plan_cache_get(&pc, &k, &out, &pp));
  h = shapes[2];
  h.elem_size = 4;
  k = key_of(h);
  ck_assert_ptr_null(loom_plan_cache_get(&pc, &k, &out, &pp));
  h = shapes[0];
  h.count = 4;
  k = key_of(h);
  ck_assert_ptr_null(loom_plan_cache_get(&pc, &k, &out, &pp));
  h = shapes[0];
  h.coll = LOOM_COLL_REDUCESCATTER;
  k = key_of(h);
  ck_assert_ptr_null(loom_plan_cache_get(&pc, &k, &out, &pp));
  /* a root of -1 and a collective one apart do not alias in the word */
  h = shapes[0];
  h.coll = (enum loom_coll)(h.coll + 1);
  h.root = 0;
  k = key_of(h);
  ck_assert_ptr_null(loom_plan_cache_get(&pc, &k, &out, &pp));
  /* a fifth shape replaces the oldest, the others stay */
  struct loom_schedule s;
  struct shape fifth = {LOOM_COLL_REDUCE, 0, 77, 4};
  k = key_of(fifth);
  loom_plan_cache_put(&pc, &k, plan_shape(fifth, &s, planned), &s);
  ck_assert_ptr_nonnull(loom_plan_cache_get(&pc, &k, &out, &pp));
  k = key_of(shapes[0]);
  ck_assert_ptr_null(loom_plan_cache_get(&pc, &k, &out, &pp));
  for (int i = 1; i < 4; i++) {
    k = key_of(shapes[i]);
    ck_assert_ptr_nonnull(loom_plan_cache_get(&pc, &k, &out, &pp));
  }
  loom_plan_cache_free(&pc);
  /* a schedule of no steps (one rank) into an entry with no array yet,
   * and back into a caller's empty array */
  struct loom_plan_key one = loom_plan_key_make(LOOM_COLL_ALLREDUCE, -1, 8, 4);
  struct loom_schedule none;
  loom_sched_init(&none, NULL, 0);
  loom_plan_cache_put(&pc, &one, "none", &none);
  ck_assert_str_eq(loom_plan_cache_get(&pc, &one, &none, &pp), "none");
  ck_assert_int_eq(none.nsteps, 0);
  loom_plan_cache_free(&pc);
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_add_test(tc, parse_empty);
  tcase_add_test(tc, proto_parse);
  tcase_add_test(tc, proto_choice);
  tcase_add_test(tc, parse_plain_applies_where_it_can);
  tcase_add_test(tc, parse_per_collective_and_override);
  tcase_add_test(tc, parse_errors);
  tcase_add_test(tc, mask_text);
  tcase_add_test(tc, tune_file);
  tcase_add_test(tc, tune_file_errors);
  tcase_add_test(tc, cost_model);
  tcase_add_test(tc, cost_seed_from_links);
  tcase_add_test(tc, tuner_allreduce);
  tcase_add_test(tc, tuner_oversubscribed);
  tcase_add_test(tc, tuner_forced_and_fallback);
  tcase_add_test(tc, tuner_with_nodes);
  tcase_add_test(tc, runs_and_names);
  tcase_add_test(tc, plan_cache_hit_is_the_planned_schedule);
  suite_add_tcase(s, tc);
  return check_run(s);
}
