/*
 * coll.h — the collectives, as every layer names them: the planner picks
 * schedules for them, the engine puts them in call fingerprints and
 * messages, the API dispatches on them.  Here, below all of those, so that
 * no layer includes another's header for a shared enum.
 */
#ifndef LOOM_CORE_COLL_H
#define LOOM_CORE_COLL_H

enum loom_coll {
  LOOM_COLL_ALLREDUCE,
  LOOM_COLL_ALLGATHER,
  LOOM_COLL_REDUCESCATTER,
  LOOM_COLL_BROADCAST,
  LOOM_COLL_REDUCE,
  LOOM_COLL_ALLTOALL,
  LOOM_COLL_ALLTOALLV,
  LOOM_COLL_GATHER,
  LOOM_COLL_SCATTER,
  LOOM_COLL_SENDRECV, /* a batch of loomSend/loomRecv */
  LOOM_COLL_BARRIER,
  LOOM_COLL_COUNT
};

/* Whether the collective reduces (takes a loomRedOp_t). */
static inline int loom_coll_reduces(enum loom_coll coll) {
  return coll == LOOM_COLL_ALLREDUCE || coll == LOOM_COLL_REDUCE ||
         coll == LOOM_COLL_REDUCESCATTER;
}

/* "allreduce", ... for messages; "?" out of range. */
static inline const char *loom_coll_name(enum loom_coll coll) {
  static const char *const names[LOOM_COLL_COUNT] = {
      "allreduce", "allgather", "reducescatter", "broadcast", "reduce",  "alltoall",
      "alltoallv", "gather",    "scatter",       "send/recv", "barrier",
  };
  return (unsigned)coll < LOOM_COLL_COUNT ? names[coll] : "?";
}

#endif
