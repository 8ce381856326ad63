/*
 * sim.h — loom-sim's model: predicts the time of one collective call by
 * running every rank's real schedule (made by loom_plan, as the engine
 * would get it) through a discrete-event model of ranks, links and NICs.
 * docs/simulator.md describes the model, its parameters and its limits.
 *
 * Pieces:
 *  - params.c: the parameters, their defaults (calibrated on the
 *    development machine) and the calibration file;
 *  - build.c: a synthetic topology (nodes x ranks per node), the schedules
 *    of the ranks to simulate (all of them, or one node's ranks where the
 *    schedule is the same on every node), the tuner's choice;
 *  - model.c: the discrete-event model itself.
 */
#ifndef LOOM_SIM_SIM_H
#define LOOM_SIM_SIM_H

#include "plan/plan.h"
#include "topo/topo.h"

#include <stddef.h>
#include <stdio.h>

/* ---- params.c ---- */

/* One level of links: between ranks of a node (intra) or of two nodes
 * (inter). */
struct loom_sim_level {
  double alpha;    /* seconds from the end of a message's injection to its arrival */
  double bw;       /* bytes/s at which one rank injects a message (its engine is busy meanwhile) */
  double overhead; /* seconds of engine time per message slice, at the sender and again
                      at the receiver */
};

struct loom_sim_params {
  struct loom_sim_level intra, inter;
  double nic_bw;    /* bytes/s a node's NIC carries each way (shared by its ranks); 0 = no limit */
  double reduce_bw; /* bytes/s of reduction, counted in bytes of one operand; 0 = free */
  double copy_bw;   /* bytes/s of a local copy (memcpy); 0 = free */
  int cores;        /* cores per node: with more ranks than cores every CPU cost and
                       latency grows by ranks/cores; 0 = no limit */
  double llc_bytes;  /* a node's last-level cache; 0 = no cache model */
  double mem_factor; /* how much slower every byte cost is from memory than from the
                        cache: costs grow by 1 + (mem_factor - 1) * max(0, 1 - llc /
                        the node's working set) */
  size_t chunk_bytes; /* pipeline slice (LOOM_CHUNK_BYTES) */
};

/* A calibrated transport: what a level is set to from the calibration. */
struct loom_sim_transport {
  char name[16]; /* "shm", "tcp" */
  struct loom_sim_level level;
};

#define LOOM_SIM_MAX_TRANSPORTS 4

/* Everything a calibration file holds. */
struct loom_sim_calibration {
  struct loom_sim_transport tp[LOOM_SIM_MAX_TRANSPORTS];
  int ntp;
  double reduce_bw, copy_bw;
  double llc_bytes, mem_factor;
  int cores;                 /* of the machine measured */
  char intra[16], inter[16]; /* which transport each level uses by default */
  char source[160];          /* where the numbers come from (a comment) */
};

/* The built-in calibration (measured on the development machine; see
 * docs/simulator.md). */
void loom_sim_calibration_default(struct loom_sim_calibration *c);
/* Reads a calibration file ("key = value" lines, '#' comments; the format
 * is described at the top of params.c) over *c.  0, or -1 with
 * "PATH:LINE: what" in err. */
int loom_sim_calibration_read(struct loom_sim_calibration *c, const char *path, char *err,
                              size_t errlen);
/* Writes c in the format loom_sim_calibration_read reads. */
void loom_sim_calibration_write(const struct loom_sim_calibration *c, FILE *f);
/* The transport called name, or NULL. */
const struct loom_sim_transport *loom_sim_transport_find(const struct loom_sim_calibration *c,
                                                         const char *name);
/* Parameters from a calibration: intra and inter levels from the named
 * transports (NULL: c's defaults); cores 0 (a synthetic node has as many
 * as it needs); chunk 512 KiB.  0, or -1 with err when a name is unknown. */
int loom_sim_params_from(const struct loom_sim_calibration *c, const char *intra,
                         const char *inter, struct loom_sim_params *p, char *err,
                         size_t errlen);

/* ---- build.c ---- */

/* nnodes nodes of `local` ranks each, ranks numbered node by node. */
int loom_sim_topo(struct loom_topo *t, int nnodes, int local);

/* Whether one node's ranks stand for all (every node runs the same
 * schedule, shifted): ring, hierarchical and one-shot all-reduce, ring
 * all-gather, on more than one node of equal size. */
enum loom_sim_fold { LOOM_SIM_FOLD_AUTO, LOOM_SIM_FOLD_NEVER };

struct loom_sim_call {
  enum loom_coll coll;  /* LOOM_COLL_ALLREDUCE or LOOM_COLL_ALLGATHER */
  enum loom_algo algo;  /* LOOM_ALGO_AUTO: the tuner's choice */
  size_t count;         /* elements, per rank for all-gather (as loom_plan) */
  size_t elem_size;
  enum loom_sim_fold fold;
  /* Called every LOOM_SIM_PROGRESS_EVENTS events of the model with the
   * events run so far (NULL: never), for progress reports. */
  void (*progress)(void *arg, long events);
  void *progress_arg;
};

#define LOOM_SIM_PROGRESS_EVENTS (1L << 22)

struct loom_sim_result {
  double time;        /* predicted seconds of the call: its slowest rank */
  double gen_s, sim_s; /* wall time spent making schedules, and in the model */
  long steps;         /* schedule steps made (before empty ones are dropped) */
  long events;        /* messages and reductions the model ran */
  int nsim;           /* ranks simulated */
  int folded;         /* 1: one node's ranks stood for every node */
  size_t count;       /* elements simulated: folding rounds a ring's or
                         hierarchical count up to a multiple of the rank count */
  enum loom_algo algo;
  const char *name;   /* loom_plan's name of the schedule */
};

/* Predicts one call on topology t (uniform nodes when folding).  Returns
 * 0; 1 when the algorithm cannot run there (nothing predicted); -1 with
 * err on a failure (memory, or a schedule the model finds inconsistent:
 * mismatched messages, a rank waiting forever). */
int loom_sim_predict(const struct loom_sim_params *p, const struct loom_topo *t,
                     const struct loom_sim_call *c, struct loom_sim_result *r, char *err,
                     size_t errlen);

/* The algorithm loom_plan's tuner picks for the call (allowed = 0). */
enum loom_algo loom_sim_tuner_pick(const struct loom_topo *t, enum loom_coll coll,
                                   size_t count, size_t elem_size);

/* ---- model.c ---- */

/* One step as the model needs it (a compacted struct loom_step). */
struct loom_sim_step {
  int send_peer, recv_peer;  /* real ranks, -1: none */
  int wait;                  /* index of the step whose receive the send forwards, -1 */
  unsigned char wait_all;
  unsigned char reduce;      /* the receive reduces */
  unsigned char clobber;     /* the receive overwrites what this step sends */
  size_t send_count, recv_count; /* elements */
};

/* One simulated rank's schedule. */
struct loom_sim_rank {
  int rank; /* its real rank */
  int nsteps;
  struct loom_sim_step *steps;
  size_t copy_count;  /* local copy, elements (0: none) */
  int copy_first;     /* the copy must finish before any step (its
                         destination is used by a step) */
  size_t fold_count;  /* one-shot fold: elements per block */
  int fold_blocks;
};

/* What the model runs: nsim ranks standing for nranks real ones. */
struct loom_sim_job {
  int nranks, nsim;
  const int *node_of; /* real rank -> node: a message is inter-node when its ends differ */
  const int *sim_of;  /* real rank -> the simulated rank standing for it */
  const int *nic_of;  /* simulated rank -> its NIC (0 .. nnics-1) */
  int nnics;
  int local;          /* ranks per node, for the contention factor */
  double node_bytes;  /* the call's working set on a node (buffers of all its ranks) */
  size_t elem_size;
  size_t slice_bytes; /* the schedule's pipeline slice; 0: the params' chunk_bytes */
  struct loom_sim_rank *ranks;
  void (*progress)(void *arg, long events); /* as struct loom_sim_call's */
  void *progress_arg;
};

/* Runs the job: fills *time (seconds) and *events.  0, or -1 with err. */
int loom_sim_model_run(const struct loom_sim_params *p, const struct loom_sim_job *job,
                       double *time, long *events, char *err, size_t errlen);

/* ---- init_model.c: a communicator's start ---- */

struct loom_sim_init_params {
  double discover_s;   /* a rank discovering its node's hardware */
  double root_hello_s; /* the root's time per hello (accept, challenge, check, answer) */
  double root_bw;      /* bytes/s at which the root sends the placements */
  int roots;           /* bootstrap roots (loomCommInitRankScalable), on separate nodes */
  double ring_setup_s; /* connecting to the ring successor and proving the secret */
  double ring_alpha;   /* seconds per step of a bootstrap ring all-gather */
  double ring_bw;      /* bytes/s of one ring hop */
  double shm_seg_s;    /* creating this rank's shared-memory segment */
  double shm_map_s;    /* mapping one local peer's segment */
  double connect_s;    /* one TCP connection made on first use (connect and hello) */
  int cores;           /* per node; 0: a core per rank */
  int no_shm;          /* 1: ranks of a node talk over TCP too (LOOM_SHM_DISABLE=1) */
};

struct loom_sim_init_result {
  double bootstrap, topology, transports, first_connect, total; /* seconds */
};

void loom_sim_init_params_default(struct loom_sim_init_params *p);
/* The start of nnodes x local ranks, phase by phase. */
void loom_sim_init_predict(const struct loom_sim_init_params *p, int nnodes, int local,
                           struct loom_sim_init_result *r);

#endif
