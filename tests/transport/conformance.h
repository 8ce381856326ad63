/*
 * conformance.h — the checks every transport must pass (checks.c), and
 * what a transport may leave out, each with the reason it is printed.
 */
#ifndef LOOM_TESTS_TRANSPORT_CONFORMANCE_H
#define LOOM_TESTS_TRANSPORT_CONFORMANCE_H

#include "pair.h"

struct conformance {
  const struct loom_transport *tp;
  const char *name;
  /* NULL, or why a check does not apply to this transport */
  const char *no_auth;      /* refusing a rank of another communicator */
  const char *no_deadline;  /* giving up on a peer that never listens */
  const char *no_peer_gone; /* seeing the peer's fini (not its process's death) */
  int failures;
};

void conformance_check(struct conformance *c, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void conformance_skip(const char *what, const char *why);

/* checks.c: each opens and closes its own pair. */
void check_exchange(struct conformance *c);
void check_fingerprint_mismatch(struct conformance *c);
void check_length_mismatch(struct conformance *c);
void check_other_secret(struct conformance *c);
void check_peer_gone(struct conformance *c);
void check_unlistened(struct conformance *c);
/* probe.c */
void check_probe(struct conformance *c);

#endif
