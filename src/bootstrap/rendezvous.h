/*
 * rendezvous.h — the rank's side of the rendezvous with the bootstrap
 * root(s): proofs and hellos, then the answers.  Internal to
 * src/bootstrap (bootstrap.c calls it before forming the ring).
 */
#ifndef LOOM_BOOTSTRAP_RENDEZVOUS_H
#define LOOM_BOOTSTRAP_RENDEZVOUS_H

#include "bootstrap/wire.h"

struct loom_rendezvous {
  int rank, nranks, timeout_s;
  const struct loom_peer_info *self;
  const struct loom_id_fields *ids; /* one per root, in the order every rank uses */
  int nids;
  uint64_t deadline;
};

/* Says hello to this rank's root as a member and to the roots whose
 * blocks it borders as a neighbour (wire.h), all before waiting on any,
 * then reads every answer: the placement from its own root into *out
 * (out->local allocated), an acknowledgement from each other.  Errors
 * name the root and, from a root that gave up, the ranks that never
 * arrived. */
loomResult_t loom_rendezvous(const struct loom_rendezvous *rv, struct loom_placement *out);

#endif
