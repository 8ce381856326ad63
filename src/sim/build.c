/*
 * build.c — the schedules loom-sim runs: loom_plan's, for every rank of a
 * synthetic topology or, where every node runs the same schedule shifted
 * by a node, for the ranks of node 0 only.
 *
 * Folding.  With ranks numbered node by node and nodes of equal size, the
 * ring (in node order), hierarchical and one-shot schedules are invariant
 * under the shift r -> r + L (L ranks per node) when every block they cut
 * has the same size: rank r + L does what rank r does, with every peer
 * shifted by L, at the same times, since the model's costs depend only on
 * whether a peer is on the same node.  So node 0's ranks stand for all: a
 * message to rank q goes to the simulated rank local_of[q], one to another
 * node uses node 0's NIC on both ends (that NIC then carries, at the same
 * times, what every NIC carries).  Block sizes are equal when the count is
 * a multiple of the rank count; the ring and hierarchical all-reduce are
 * simulated with the count rounded up to one (the result says so).  The
 * double binary tree and recursive doubling are not shift-invariant in this
 * way (a tree's depth differs by node) and have O(log n) steps per rank, so
 * every rank is simulated.  check_sim compares folded and full runs.
 */
#include "sim/sim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int loom_sim_topo(struct loom_topo *t, int nnodes, int local) {
  int n = nnodes * local;
  int *node = malloc((size_t)n * sizeof *node);
  if (node == NULL)
    return -1;
  for (int r = 0; r < n; r++)
    node[r] = r / local;
  int rc = loom_topo_from_nodes(t, n, node);
  free(node);
  return rc;
}

static struct loom_plan_args plan_args(const struct loom_topo *t, enum loom_coll coll, int rank,
                                       size_t count, size_t esize, unsigned allowed) {
  struct loom_plan_args a = {
      .coll = coll,
      .rank = rank,
      .nranks = t->nranks,
      .count = count,
      .elem_size = esize,
      .allowed = allowed,
      .topo = t, /* as the API passes it */
  };
  return a;
}

static struct loom_schedule *scratch_new(int nranks) {
  struct loom_schedule *s = malloc(sizeof *s);
  int cap = LOOM_SCHED_MAX_STEPS(nranks);
  struct loom_step *steps = malloc((size_t)cap * sizeof *steps);
  if (s == NULL || steps == NULL) {
    free(s);
    free(steps);
    return NULL;
  }
  loom_sched_init(s, steps, cap);
  return s;
}

static void scratch_free(struct loom_schedule *s) {
  if (s != NULL)
    free(s->steps);
  free(s);
}

enum loom_algo loom_sim_tuner_pick(const struct loom_topo *t, enum loom_coll coll,
                                   size_t count, size_t elem_size) {
  struct loom_schedule *s = scratch_new(t->nranks);
  if (s == NULL)
    return LOOM_ALGO_AUTO;
  /* loom_plan names its choice; find the algorithm that, forced, gets the
   * same name (new algorithms need no table here) */
  struct loom_plan_args a = plan_args(t, coll, 0, count, elem_size, 0);
  const char *name = loom_plan(&a, s);
  enum loom_algo pick = LOOM_ALGO_AUTO;
  for (int x = LOOM_ALGO_AUTO + 1; x < LOOM_ALGO_COUNT && pick == LOOM_ALGO_AUTO && name; x++) {
    if (!loom_algo_runs(coll, (enum loom_algo)x, t->nranks, t))
      continue;
    a.allowed = 1u << x;
    const char *forced = loom_plan(&a, s);
    if (forced != NULL && strcmp(forced, name) == 0)
      pick = (enum loom_algo)x;
  }
  scratch_free(s);
  return pick;
}

static int ranges_overlap(size_t a, size_t alen, size_t b, size_t blen) {
  return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

/* Whether the local copy's destination is touched by a step (then the
 * engine copies before anything else). */
static int copy_first(const struct loom_schedule *s) {
  const struct loom_local_copy *c = &s->copy;
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    if ((st->send_peer >= 0 && st->send_buf == c->to_buf &&
         ranges_overlap(c->to_off, c->count, st->send_off, st->send_count)) ||
        (st->recv_peer >= 0 && st->recv_buf == c->to_buf &&
         ranges_overlap(c->to_off, c->count, st->recv_off, st->recv_count)) ||
        (st->recv_op == LOOM_RECV_REDUCE && st->mine_buf == c->to_buf &&
         ranges_overlap(c->to_off, c->count, st->mine_off, st->recv_count)))
      return 1;
  }
  return 0;
}

/* Growing storage for the compacted steps of all simulated ranks. */
struct pool {
  struct loom_sim_step *steps;
  size_t n, cap;
};

static int pool_reserve(struct pool *p, size_t more) {
  if (p->n + more <= p->cap)
    return 0;
  size_t cap = p->cap ? p->cap : 1024;
  while (cap < p->n + more)
    cap *= 2;
  struct loom_sim_step *s = realloc(p->steps, cap * sizeof *s);
  if (s == NULL)
    return -1;
  p->steps = s;
  p->cap = cap;
  return 0;
}

/* Appends s's steps that move data (the engine skips empty ones: a send
 * waiting on an empty receive does not wait) and fills the rank's record
 * (its steps as an offset into the pool until the pool stops moving). */
static int compact(const struct loom_schedule *s, int rank, struct pool *pool,
                   struct loom_sim_rank *out, int *map) {
  if (pool_reserve(pool, (size_t)s->nsteps) != 0)
    return -1;
  size_t first = pool->n;
  for (int i = 0; i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    int has_send = st->send_peer >= 0 && st->send_count > 0;
    int has_recv = st->recv_peer >= 0 && st->recv_count > 0;
    map[i] = -1;
    if (!has_send && !has_recv)
      continue;
    struct loom_sim_step *o = &pool->steps[pool->n];
    map[i] = (int)(pool->n - first);
    pool->n++;
    o->send_peer = has_send ? st->send_peer : -1;
    o->recv_peer = has_recv ? st->recv_peer : -1;
    o->send_count = has_send ? st->send_count : 0;
    o->recv_count = has_recv ? st->recv_count : 0;
    o->wait = has_send && st->wait_step >= 0 ? map[st->wait_step] : -1;
    o->wait_all = st->wait_all;
    o->reduce = has_recv && st->recv_op == LOOM_RECV_REDUCE;
    o->clobber = has_send && has_recv && st->send_buf == st->recv_buf &&
                 ranges_overlap(st->send_off, st->send_count, st->recv_off, st->recv_count);
  }
  out->rank = rank;
  out->nsteps = (int)(pool->n - first);
  out->steps = (struct loom_sim_step *)(uintptr_t)first; /* fixed up later */
  int copies = s->copy.count > 0 &&
               !(s->copy.from_buf == s->copy.to_buf && s->copy.from_off == s->copy.to_off);
  out->copy_count = copies ? s->copy.count : 0;
  out->copy_first = copies && copy_first(s);
  out->fold_count = s->fold.count;
  out->fold_blocks = s->fold.nblocks;
  return 0;
}

static int can_fold(const struct loom_topo *t, const struct loom_sim_call *c,
                    enum loom_algo algo) {
  if (c->fold != LOOM_SIM_FOLD_AUTO || t->nnodes < 2 || !loom_topo_uniform(t))
    return 0;
  if (c->coll == LOOM_COLL_ALLGATHER)
    return algo == LOOM_ALGO_RING;
  return algo == LOOM_ALGO_RING || algo == LOOM_ALGO_HIER || algo == LOOM_ALGO_ONESHOT;
}

int loom_sim_predict(const struct loom_sim_params *p, const struct loom_topo *t,
                     const struct loom_sim_call *c, struct loom_sim_result *r, char *err,
                     size_t errlen) {
  memset(r, 0, sizeof *r);
  enum loom_algo algo = c->algo;
  if (algo == LOOM_ALGO_AUTO)
    algo = loom_sim_tuner_pick(t, c->coll, c->count, c->elem_size);
  if (!loom_algo_runs(c->coll, algo, t->nranks, t))
    return 1;
  int n = t->nranks, fold = can_fold(t, c, algo);
  int local = loom_topo_node_size(t, 0);
  size_t count = c->count;
  if (fold && c->coll == LOOM_COLL_ALLREDUCE && algo != LOOM_ALGO_ONESHOT && count % (size_t)n)
    count += (size_t)n - count % (size_t)n;
  int nsim = fold ? local : n;

  double t0 = now_s();
  int rc = -1;
  struct loom_schedule *s = scratch_new(n);
  struct loom_sim_rank *ranks = calloc((size_t)nsim, sizeof *ranks);
  int *map = malloc((size_t)LOOM_SCHED_MAX_STEPS(n) * sizeof *map);
  int *sim_of = malloc((size_t)n * sizeof *sim_of);
  int *nic_of = malloc((size_t)nsim * sizeof *nic_of);
  struct pool pool = {.steps = NULL, .n = 0, .cap = 0};
  if (s == NULL || ranks == NULL || map == NULL || sim_of == NULL || nic_of == NULL) {
    snprintf(err, errlen, "out of memory for %d ranks' schedules", nsim);
    goto out;
  }
  unsigned allowed = 1u << algo;
  const char *name = NULL;
  for (int i = 0; i < nsim; i++) {
    int rank = fold ? loom_topo_rank_at(t, 0, i) : i;
    struct loom_plan_args a = plan_args(t, c->coll, rank, count, c->elem_size, allowed);
    name = loom_plan(&a, s); /* the forced algorithm: loom_algo_runs said it can */
    if (name == NULL) {
      snprintf(err, errlen, "rank %d's schedule needs more than %d steps", rank, s->cap);
      goto out;
    }
    r->steps += s->nsteps;
    if (compact(s, rank, &pool, &ranks[i], map) != 0) {
      snprintf(err, errlen, "out of memory for rank %d's schedule", rank);
      goto out;
    }
  }
  for (int i = 0; i < nsim; i++)
    ranks[i].steps = pool.steps + (uintptr_t)ranks[i].steps;
  for (int q = 0; q < n; q++)
    sim_of[q] = fold ? t->local_of[q] : q;
  for (int i = 0; i < nsim; i++)
    nic_of[i] = fold ? 0 : t->node_of[i];
  r->gen_s = now_s() - t0;

  /* the buffers of a node's ranks: send, receive and scratch */
  double esz = (double)c->elem_size, in = (double)count * esz;
  double out = c->coll == LOOM_COLL_ALLGATHER ? in * n : in;
  double node_bytes = (in + out + (double)s->scratch_count * esz) * local;
  struct loom_sim_job job = {
      .nranks = n,
      .nsim = nsim,
      .node_of = t->node_of,
      .sim_of = sim_of,
      .nic_of = nic_of,
      .nnics = fold ? 1 : t->nnodes,
      .local = local,
      .node_bytes = node_bytes,
      .elem_size = c->elem_size,
      .slice_bytes = s->slice_bytes, /* the protocol's (the same on every rank) */
      .ranks = ranks,
      .progress = c->progress,
      .progress_arg = c->progress_arg,
  };
  t0 = now_s();
  rc = loom_sim_model_run(p, &job, &r->time, &r->events, err, errlen);
  r->sim_s = now_s() - t0;
  r->nsim = nsim;
  r->folded = fold;
  r->count = count;
  r->algo = algo;
  r->name = name;
out:
  scratch_free(s);
  free(ranks);
  free(map);
  free(sim_of);
  free(nic_of);
  free(pool.steps);
  return rc;
}
