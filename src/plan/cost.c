/*
 * cost.c — the tuner's alpha-beta model: a closed-form time for each
 * all-reduce algorithm on a topology, used to rank them when a call spans
 * several nodes (on one node the measured thresholds of plan.c stand).
 *
 * A message of B bytes over a level costs alpha + B * beta plus the work
 * of sending and receiving it (the engine's, and the system calls of TCP);
 * reductions cost bytes / reduce bandwidth.  Rings are as slow as their
 * slowest link (inter-node once the ring spans nodes); the L ranks of a
 * node share its NIC.  Nodes are taken as equal
 * (the largest node stands for all), and power-of-two partners at a
 * distance of at least L ranks are taken to be on other nodes (ranks of a
 * node numbered together).  loom-sim (src/sim) runs the real schedules
 * through a discrete-event model instead; docs/simulator.md compares the
 * two kinds of prediction with measured runs.
 */
#include "plan/plan.h"

#include <math.h>
#include <stdlib.h>

/* x when known (> 0), else the default */
static double known(double x, double dflt) { return x > 0 ? x : dflt; }

void loom_cost_seed(struct loom_cost_model *m, const struct loom_topo *t,
                    const struct loom_cost_links *links) {
  static const struct loom_cost_links none;
  const struct loom_cost_link *in = links != NULL ? &links->intra : &none.intra;
  const struct loom_cost_link *net = links != NULL ? &links->inter : &none.inter;
  double nic_gbps = t != NULL && t->net_mbps > 0 ? (double)t->net_mbps / 8e3 : 0.0;
  m->alpha_intra = known(in->latency_us, LOOM_COST_SHM_ALPHA_US) * 1e-6;
  m->beta_intra = 1.0 / (known(in->bandwidth_gbps, LOOM_COST_SHM_GBPS) * 1e9);
  m->msg_intra = known(in->msg_overhead_us, LOOM_COST_SHM_MSG_US) * 1e-6;
  m->alpha_inter = known(net->latency_us, LOOM_COST_NET_ALPHA_US) * 1e-6;
  m->beta_inter =
      1.0 / (known(net->bandwidth_gbps, known(nic_gbps, LOOM_COST_NET_GBPS)) * 1e9);
  m->msg_inter = known(net->msg_overhead_us, LOOM_COST_NET_MSG_US) * 1e-6;
  m->beta_reduce = 1.0 / (LOOM_COST_REDUCE_GBPS * 1e9);
}

double loom_cost_allreduce(enum loom_algo algo, int n, const struct loom_topo *t, size_t bytes,
                           const struct loom_cost_model *m) {
  double S = (double)bytes, red = m->beta_reduce;
  int N = t != NULL && t->nnodes > 0 ? t->nnodes : 1, L = N > 1 ? t->max_node_size : n;
  /* per level: latency, per-message engine/system work, seconds per byte */
  double ai = m->alpha_intra, oi = m->msg_intra, bi = m->beta_intra;
  double an = N > 1 ? m->alpha_inter : ai, on = N > 1 ? m->msg_inter : oi;
  double bn = N > 1 ? m->beta_inter : bi;
  double amax = an > ai ? an : ai, omax = on > oi ? on : oi, bmax = bn > bi ? bn : bi;
  if (n <= 1)
    return 0;
  switch (algo) {
  case LOOM_ALGO_RING: /* node-ordered: each node boundary is one link, not shared */
    return 2.0 * (n - 1) * (amax + omax) + 2.0 * (n - 1) / n * S * bmax +
           (double)(n - 1) / n * S * red;
  case LOOM_ALGO_RD: { /* partners d >= L apart are on other nodes: all L ranks cross at once */
    double T = 0;
    for (int d = 1; d < n; d *= 2)
      T += d >= L ? an + on + S * bn * L + S * red : ai + oi + S * bi + S * red;
    return T;
  }
  case LOOM_ALGO_RHD: {
    double T = 0, part = S / 2; /* near partners first: the large halves stay in the node */
    for (int d = 1; d < n; d *= 2, part /= 2) /* halving, then doubling back */
      T += 2.0 * (d >= L ? an + on + part * bn * L : ai + oi + part * bi) + part * red;
    return T;
  }
  case LOOM_ALGO_ONESHOT: {
    /* n-1 copies per rank: L-1 inside its node, n-L through the NIC it
     * shares with L-1 others; each network message costs both ends */
    double nic = (double)L * (n - L) * S * bn, local = (L - 1) * S * bi;
    return amax + (L - 1) * oi + 2.0 * (n - L) * on + (nic > local ? nic : local) +
           (n - 1) * S * red;
  }
  case LOOM_ALGO_TREE: {
    int depth = 0; /* edges from the heap's root to its deepest node */
    while ((2 << depth) <= N)
      depth++;
    /* up and down; a rank takes in all of one child's part before the
     * next child's (receives complete in posting order), so each level of
     * the heap and of the node's chain adds a whole part's time: the half
     * buffer, or a quarter of it once halves go in segments (float32) */
    int segs = bytes >= (size_t)2 * LOOM_TREE_SEGMENTS * LOOM_TREE_SEGMENT_MIN * 4
                   ? LOOM_TREE_SEGMENTS
                   : 1;
    return 2.0 * (depth * (an + on) + (L - 1) * (ai + oi)) +
           (1.0 + (double)(depth + L - 1) / segs) * S * bmax + S * red;
  }
  case LOOM_ALGO_HIER: {
    double intra = 2.0 * (L - 1) * (ai + oi + S / L * bi);
    double inter = 2.0 * (N - 1) * (an + on + S / N * bn); /* L rings share the NIC */
    return intra + inter + (double)(L - 1) / L * S * red + (double)(N - 1) / N * S / L * red;
  }
  default:
    return INFINITY;
  }
}

double loom_cost_pipeline(int depth, size_t bytes, size_t slice_bytes, const struct loom_topo *t,
                          const struct loom_cost_model *m) {
  int several = t != NULL && t->nnodes > 1;
  double a = several && m->alpha_inter > m->alpha_intra ? m->alpha_inter : m->alpha_intra;
  double o = several && m->msg_inter > m->msg_intra ? m->msg_inter : m->msg_intra;
  double b = several && m->beta_inter > m->beta_intra ? m->beta_inter : m->beta_intra;
  if (depth < 1 || bytes == 0)
    return 0;
  size_t slice = slice_bytes < bytes ? slice_bytes : bytes;
  double slices = ceil((double)bytes / (double)slice);
  return (depth + slices - 1) * (a + o + (double)slice * b);
}
