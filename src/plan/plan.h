/*
 * plan.h — from a collective call to a schedule: which algorithm runs (the
 * tuner: size and rank-count thresholds, or what LOOM_ALGO forces).
 */
#ifndef LOOM_PLAN_PLAN_H
#define LOOM_PLAN_PLAN_H

#include "core/coll.h"
#include "sched/schedule.h"
#include "topo/topo.h"

#include <stddef.h>
#include <stdint.h>

/* Up to this size a power-of-two number of ranks uses recursive doubling
 * (log2 n latencies, whole buffers); above it the ring (2(n-1) latencies,
 * 2(n-1)/n of the buffer) wins.  Measured with 2 ranks on the development
 * machine: equal at 128 KiB, recursive doubling 30% faster at 32 KiB.
 * Rooted collectives use a binomial tree up to the same size, a chain
 * above it. */
#define LOOM_PLAN_RD_MAX_BYTES (64u << 10)
/* More than two ranks use the one-shot all-reduce up to this size (one
 * message latency; each rank sends n-1 copies of its input). */
#define LOOM_PLAN_ONESHOT_MAX_BYTES (8u << 10)
/* ... and up to this many ranks: beyond, on several nodes, the double
 * binary tree (2 log2(nodes) + 2(ranks per node - 1) latencies) takes the
 * small messages, since one-shot's n-1 messages per rank all cross. */
#define LOOM_PLAN_ONESHOT_MAX_RANKS 8
/* All-gather of 3 to LOOM_PLAN_ONESHOT_MAX_RANKS ranks on one node goes
 * one-shot up to this many bytes in all: the ring's bytes per rank, one
 * message latency.  Measured on 2 cores, 32 B-256 KiB in all (3, 4 and 8
 * ranks, 3-5 interleaved rounds, 2026-12-06): mean time 0.33-0.87x
 * recursive doubling's, 0.17-0.99x the ring's; p99 0.22-0.76x recursive
 * doubling's. */
#define LOOM_PLAN_ONESHOT_GATHER_MAX_BYTES (256u << 10)
/* Where a node has more ranks than cores, halving-doubling (all-reduce)
 * and recursive doubling (all-gather, total bytes) up to this size: fewer
 * steps, so fewer hand-offs between ranks that take turns on a core (4
 * ranks on 2 cores, 128 KiB-1 MiB: rings 1.3-4x slower, 2026-12-05). */
#define LOOM_PLAN_OVERSUB_MAX_BYTES (1u << 20)

/* Algorithms, as LOOM_ALGO names them.  AUTO: the tuner's choice. */
enum loom_algo {
  LOOM_ALGO_AUTO,
  LOOM_ALGO_RING,    /* allreduce, allgather, reducescatter */
  LOOM_ALGO_RD,      /* recursive doubling: allreduce, allgather (power-of-two ranks) */
  LOOM_ALGO_ONESHOT, /* allreduce, allgather: every rank sends its input to all */
  LOOM_ALGO_TREE,    /* binomial tree: broadcast, reduce; double binary tree: allreduce (nodes) */
  LOOM_ALGO_CHAIN,   /* pipelined chain: broadcast, reduce */
  LOOM_ALGO_HIER,    /* allreduce: reduce-scatter in nodes, all-reduce across, all-gather in nodes */
  LOOM_ALGO_RHD,     /* allreduce: recursive halving-doubling (power-of-two ranks) */
  LOOM_ALGO_COUNT
};

/* "auto", "ring", "rd", "oneshot", "tree", "chain", "hier", "rhd". */
const char *loom_algo_name(enum loom_algo algo);
/* Whether `coll` has `algo` at all (any rank count). */
int loom_algo_applies(enum loom_coll coll, enum loom_algo algo);
/* Whether `algo` can run `coll` on nranks ranks (rd: a power of two;
 * hier: topo with several nodes of equal size, more than one rank each;
 * topo NULL: one node). */
int loom_algo_runs(enum loom_coll coll, enum loom_algo algo, int nranks,
                   const struct loom_topo *topo);

/* Parses LOOM_ALGO, NCCL_ALGO's syntax: items separated by ';', each an
 * optional collective and ':' then a comma list of algorithms, or '^' and
 * the algorithms to exclude: "tree,ring", "^oneshot",
 * "allreduce:tree,ring;broadcast:chain".  Case-insensitive.  A plain item
 * limits every collective that has one of its algorithms; an item naming
 * a collective overrides plain ones whatever their order; later items of
 * the same kind override earlier ones.  Fills allowed[] (LOOM_COLL_COUNT
 * entries, bit 1 << algo per allowed algorithm; 0 = no limit).  On error
 * returns -1 and says why in err. */
int loom_algo_parse(const char *spec, unsigned allowed[LOOM_COLL_COUNT], char *err,
                    size_t errlen);
/* "tree, ring" for the bits of a mask (into buf). */
const char *loom_algo_mask_text(unsigned mask, char *buf, size_t len);

/* ---- proto.c: protocols (LOOM_PROTO), i.e. the pipeline's slice size ---- */
/* Host transports have one wire format; what a protocol changes is how
 * finely a step's data is cut into pipeline slices.  LL: small slices, so
 * data forwarded through many hops (chains, trees) starts moving on
 * sooner, for more messages.  SIMPLE: LOOM_CHUNK_BYTES slices, fewest
 * messages: full bandwidth. */
enum loom_proto {
  LOOM_PROTO_AUTO,
  LOOM_PROTO_LL,
  LOOM_PROTO_SIMPLE,
  LOOM_PROTO_COUNT
};
#define LOOM_PROTO_LL_SLICE_BYTES (16u << 10)
/* "auto", "LL", "Simple". */
const char *loom_proto_name(enum loom_proto proto);
/* LOOM_PROTO in NCCL_PROTO's syntax ("LL", "^LL", "broadcast:LL;Simple"),
 * as loom_algo_parse: allowed[coll] gets 1 << proto per allowed protocol,
 * 0 = no limit. */
int loom_proto_parse(const char *spec, unsigned allowed[LOOM_COLL_COUNT], char *err,
                     size_t errlen);

/* ---- choice.c: the syntax LOOM_ALGO and LOOM_PROTO share ---- */
struct loom_choice_kind {
  const char *var;               /* "LOOM_ALGO" */
  const char *what;              /* "algorithm" */
  const char *const *names;      /* by value; [first, count) can be named */
  int first, count;
  unsigned (*coll_mask)(int coll); /* the values a collective has (0: none) */
  const char *list;              /* the names, for messages */
};
int loom_choice_parse(const struct loom_choice_kind *k, const char *spec,
                      unsigned allowed[LOOM_COLL_COUNT], char *err, size_t errlen);

/* ---- cost.c: the alpha-beta model the tuner ranks by across nodes ---- */
/* Defaults, measured on the development machine (shared memory, and TCP
 * over loopback for the network when no NIC speed is known). */
#define LOOM_COST_SHM_ALPHA_US 0.25
#define LOOM_COST_SHM_GBPS 5.0
#define LOOM_COST_NET_ALPHA_US 20.0
#define LOOM_COST_NET_GBPS 2.0
#define LOOM_COST_REDUCE_GBPS 10.0
#define LOOM_COST_SHM_MSG_US 0.3 /* work per message at each end: the engine */
#define LOOM_COST_NET_MSG_US 2.0 /* ... and TCP's system calls */
struct loom_cost_model {
  double alpha_intra, beta_intra; /* s, s/byte */
  double alpha_inter, beta_inter;
  double msg_intra, msg_inter; /* s of work per message at each end */
  double beta_reduce;          /* s per byte of one operand */
};
/* What the transports report of a connection inside a node (intra) and
 * between nodes (inter), from their ops tables' `properties`; 0 in a
 * field: not known. */
struct loom_cost_link {
  double latency_us, bandwidth_gbps, msg_overhead_us;
};
struct loom_cost_links {
  struct loom_cost_link intra, inter;
};
/* The model for these links (NULL, or a field 0: the defaults above); the
 * network's bandwidth, where its transport does not know it, from the
 * slowest NIC speed the topology knows (topo->net_mbps). */
void loom_cost_seed(struct loom_cost_model *m, const struct loom_topo *t,
                    const struct loom_cost_links *links);
/* Predicted seconds of an all-reduce of `bytes` with `algo` on n ranks of
 * topology t (NULL: one node); INFINITY for algorithms it has no formula
 * for.  Whether the algorithm can run is not checked here. */
double loom_cost_allreduce(enum loom_algo algo, int n, const struct loom_topo *t, size_t bytes,
                           const struct loom_cost_model *m);
/* Predicted seconds for `bytes` to travel a pipeline of `depth` hops cut
 * into slices of slice_bytes: (depth + slices - 1) slice times, each
 * alpha + per-message work + slice * beta of the slowest level. */
double loom_cost_pipeline(int depth, size_t bytes, size_t slice_bytes, const struct loom_topo *t,
                          const struct loom_cost_model *m);

/* ---- tune.c: LOOM_TUNE_FILE (measured choices, see the file's format there) ---- */
struct loom_tune_entry {
  uint64_t max_bytes; /* covers sizes up to this (above the previous entry) */
  enum loom_algo algo;
  int line; /* in the file, for messages */
};
struct loom_tune_list {
  struct loom_tune_entry *entries; /* sorted by max_bytes */
  int n, cap;
};
struct loom_tune {
  struct loom_tune_list colls[LOOM_COLL_COUNT];
  int nentries;
};
/* Loads the entries of `path` for nranks ranks on nnodes nodes (the others
 * are skipped).  0 on success; -1 with the reason (file and line) in err,
 * a size given twice for one collective included. */
int loom_tune_load(struct loom_tune *t, const char *path, int nranks, int nnodes, char *err,
                   size_t errlen);
/* The measured algorithm for this size, or AUTO. */
enum loom_algo loom_tune_lookup(const struct loom_tune *t, enum loom_coll coll, size_t bytes);
void loom_tune_free(struct loom_tune *t);

/* What the planner needs of one call.  count is per rank where NCCL says
 * so (all-gather, reduce-scatter, all-to-all, gather, scatter). */
struct loom_plan_args {
  enum loom_coll coll;
  int rank, nranks, root;
  size_t count, elem_size;
  unsigned allowed; /* LOOM_ALGO: 1 << algo per allowed algorithm, 0 = any; when none of
                       them can run the tuner's choice runs */
  const struct loom_topo *topo; /* which ranks share a node; NULL: all one node */
  const struct loom_tune *tune; /* LOOM_TUNE_FILE's choices; NULL: none */
  const struct loom_cost_links *links; /* what the transports report; NULL: defaults */
  /* all-to-all-v: per peer, in elements */
  const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
  unsigned proto_allowed; /* LOOM_PROTO: 1 << proto per allowed protocol, 0 = any */
  size_t chunk_bytes;     /* Simple's slice (LOOM_CHUNK_BYTES); 0: the default 512 KiB */
  int nchannels;          /* LOOM_NCHANNELS: rings for a ring all-reduce (0 or 1: one) */
};

/* Fills `s` (cap >= LOOM_SCHED_MAX_STEPS(nranks)) for every collective but
 * SENDRECV, and returns the algorithm's name for logs.  s->slice_bytes is
 * the protocol's slice: LOOM_PROTO_LL_SLICE_BYTES for LL, 0 for Simple. */
const char *loom_plan(const struct loom_plan_args *a, struct loom_schedule *s);

#endif
