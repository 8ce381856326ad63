/*
 * root.h — the bootstrap root's state, shared by its two halves: root.c
 * (accepting, challenging and admitting hellos) and root_answer.c (the
 * answers: each member's placement, each neighbour's acknowledgement,
 * errors).  Internal to src/bootstrap.
 */
#ifndef LOOM_BOOTSTRAP_ROOT_H
#define LOOM_BOOTSTRAP_ROOT_H

#include "bootstrap/wire.h"
#include "net/auth.h"

#include <sys/types.h>

/* Unproven connections held at once: far below the usual 1,024 open files,
 * so a flood cannot make accept() fail; the oldest is dropped for a new one. */
#define ROOT_MAX_PENDING 256
#define ROOT_PROOF_MS 10000  /* from accept to a complete, proven hello */
#define ROOT_ACCEPT_BURST 32 /* accepts per turn, so a flood drains fast */
#define ROOT_REPLY_MS 10000  /* bound on sending one rank its answer */
#define ROOT_PROGRESS_MS 10000 /* how often a waiting root says who is missing */
#define ROOT_HELLO_FRAME (LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES)

struct pending_conn {
  int fd;
  size_t have; /* bytes of proof + hello frame read so far */
  uint8_t buf[LOOM_AUTH_PROOF_BYTES + ROOT_HELLO_FRAME];
  struct loom_auth_state auth;
  uint64_t deadline;
  union loom_sockaddr from;
};

struct root_state {
  int listen_fd;
  uint8_t secret[LOOM_SECRET_BYTES];
  int timeout_s;
  char addr_text[LOOM_ADDR_STRLEN];
  struct pending_conn *pending; /* ROOT_MAX_PENDING slots, in arrival order */
  int npending;
  int nranks;       /* 0 until the first valid hello */
  int nroots, index; /* this root is root `index` of nroots (wire.h) */
  int lo, hi;        /* its block of member ranks: [lo, hi) */
  int32_t neighbours[2]; /* ranks of other blocks it must hear from too */
  int nneighbours;
  int expected;      /* hi - lo + nneighbours */
  int arrived;
  int *rank_fd;     /* per rank, -1 until arrived */
  struct loom_auth_state *rank_auth; /* per rank: its handshake, to tag replies */
  struct loom_peer_info *infos;
  unsigned long dropped; /* connections that never proved the secret */
  uint64_t first_ns, last_ns; /* the first and last rank's hello accepted */
};

/* An error frame: code, text, and the root's tag over both. */
void loom_root_send_error(int fd, const struct loom_auth_state *auth, const uint8_t *secret,
                          loomResult_t code, const char *text);
/* Whether rank r is answered in pass 0 (other processes) or 1 (this one). */
int loom_root_answer_in_pass(const struct root_state *st, int r, int pass, pid_t self);
/* Answers every rank that arrived: placements to members, acknowledgements
 * to neighbours (or, out of memory, an error to all). */
void loom_root_answer_all(struct root_state *st);

#endif
