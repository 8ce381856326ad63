/*
 * init_model.c — loom-sim's model of a communicator's start
 * (loomCommInitRank and the connections its first collective makes), phase
 * by phase as src/api/init.c runs them and logs them at
 * LOOM_DEBUG_SUBSYS=INIT.  Unlike the collective model (model.c) it is a
 * closed formula per phase, because every phase is a fixed pattern:
 *
 *   bootstrap   every rank sends its hello to the root, which handles them
 *               one at a time and then sends each rank its placement (its
 *               ring neighbours' infos and the ranks of its node:
 *               LOOM_PLACEMENT_BYTES(L)); with --roots K each root does
 *               this for its block of n / K ranks (and 2 neighbours) in
 *               parallel; then each rank connects to its ring successor
 *   topology    each rank discovers its node, then one ring all-gather
 *               (n - 1 steps) of the records with each rank's transport
 *               addresses behind its record
 *   transports  shared memory: this rank's segment and a map per local
 *               peer; TCP connects nothing (LOOM_CONNECT=lazy)
 *   first call  an 8-byte all-reduce: recursive doubling, one round per
 *               doubling, each round off the node connecting one peer
 *
 * Where a node has fewer cores than ranks, every CPU step stretches by
 * ranks / cores (the ranks take turns), as in the collective model.
 */
#include "sim/sim.h"

#include "bootstrap/wire.h" /* LOOM_PLACEMENT_BYTES */

#include <math.h>

/* Each rank's transport address blob (transports/mux.c's MUX_ADDR_BYTES:
 * a name, the network transport's address, tcp's and shm's). */
#define INIT_ADDR_BYTES 388.0

void loom_sim_init_params_default(struct loom_sim_init_params *p) {
  /* Calibrated on the development machine, 2026-12-05 (docs/simulator.md,
   * "Start-up"): discover_s, shm_seg_s and connect_s from the INIT
   * phases of 2 ranks; ring_alpha fitted to bench/init-scaling.sh's TCP
   * runs of 2 to 256 ranks on 2 cores when init still made two ring
   * all-gathers (within 0.88-1.18 of them; 0.75-1.03 of the runs with
   * one); root_hello_s from the root thread's CPU time (logged at INIT):
   * 1.8 ms for 8 ranks, 3.5 ms for 32, so 70 us a hello (110-170 us a
   * rank in all at 32 to 256 ranks on 2 cores).  root_bw and ring_bw are
   * not identified by those runs (their terms stay small): loopback
   * TCP's bandwidth. */
  *p = (struct loom_sim_init_params){
      .discover_s = 24e-3,
      .root_hello_s = 70e-6,
      .root_bw = 2e9,
      .ring_setup_s = 1e-3,
      .ring_alpha = 55e-6,
      .ring_bw = 2e9,
      .shm_seg_s = 0.7e-3,
      .shm_map_s = 0.1e-3,
      .connect_s = 0.25e-3,
      .cores = 0,
      .roots = 1,
      .no_shm = 0,
  };
}

static double ceil_log2(int n) {
  double r = 0;
  for (long v = 1; v < n; v *= 2)
    r++;
  return r;
}

void loom_sim_init_predict(const struct loom_sim_init_params *p, int nnodes, int local,
                           struct loom_sim_init_result *r) {
  double n = (double)nnodes * local;
  /* ranks taking turns on a core (1: a core each) */
  double turns = p->cores > 0 && local > p->cores ? (double)local / p->cores : 1.0;
  double answer = LOOM_FRAME_HDR_BYTES + LOOM_PLACEMENT_BYTES(local) + LOOM_AUTH_TAG_BYTES;
  /* the root's hellos are its own thread's CPU time, one after another,
   * while the ranks of its node wait (so not stretched by turns); with
   * several roots each takes its block and up to 2 neighbours at once */
  int roots = p->roots > 1 ? p->roots : 1;
  double per_root = ceil(n / roots) + (roots > 1 ? 2 : 0);
  r->bootstrap = turns * p->ring_setup_s + per_root * (p->root_hello_s + answer / p->root_bw);
  r->topology = turns * p->discover_s +
                (n - 1) * (turns * p->ring_alpha +
                           (LOOM_TOPO_RECORD_BYTES + INIT_ADDR_BYTES) / p->ring_bw);
  r->transports =
      local > 1 && !p->no_shm ? turns * (p->shm_seg_s + (local - 1) * p->shm_map_s) : 0;
  /* recursive doubling pairs rank r with r ^ 2^k: the rounds with 2^k >=
   * local cross nodes, each connecting one new peer before it moves */
  r->first_connect = ceil_log2(nnodes) * turns * p->connect_s;
  r->total = r->bootstrap + r->topology + r->transports + r->first_connect;
}
