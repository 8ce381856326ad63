/*
 * wire.h — byte layouts of everything the bootstrap sends or stores: the
 * unique id, message frames, the hello a rank sends the root and the peer
 * info the root hands back.  Integers are big-endian on the wire so that a
 * malformed or foreign message is recognised, never trusted.
 */
#ifndef LOOM_BOOTSTRAP_WIRE_H
#define LOOM_BOOTSTRAP_WIRE_H

#include "net/auth.h"
#include "net/socket.h"
#include "loom.h"

#include <stddef.h>
#include <stdint.h>

#define LOOM_HOSTNAME_BYTES 64
#define LOOM_HOSTID_BYTES 64

/* ---- unique id ---- */
struct loom_id_fields {
  union loom_sockaddr root;                 /* where the root listens */
  uint8_t secret[LOOM_SECRET_BYTES];        /* random, or from LOOM_COMM_SECRET/LOOM_COMM_ID */
  int from_env;                             /* 1: made from LOOM_COMM_ID (rank 0 hosts root) */
};
void loom_id_encode(const struct loom_id_fields *f, loomUniqueId *id);
/* 0 on success, -1 when `id` is not a Loom id (bad magic/version/family). */
int loom_id_decode(const loomUniqueId *id, struct loom_id_fields *f);

/* ---- what the root and a rank tag with the secret (net/auth.h labels):
 * the rank's proof with its hello, and the root's answers; both sides
 * must use the same, so they live here ---- */
#define LOOM_ROOT_LABEL "loom/root"
#define LOOM_ROOT_LABEL_ERROR LOOM_ROOT_LABEL "/error"
#define LOOM_ROOT_LABEL_PLACEMENT LOOM_ROOT_LABEL "/placement"
#define LOOM_ROOT_LABEL_ACK LOOM_ROOT_LABEL "/ack"

/* ---- frames: every bootstrap message starts with this header ---- */
#define LOOM_FRAME_MAGIC 0x4c4d4231u /* "LMB1" */
#define LOOM_FRAME_HDR_BYTES 12
#define LOOM_FRAME_MAX_PAYLOAD (64u << 20) /* larger frames are rejected */

enum loom_frame_type {
  LOOM_FRAME_HELLO = 1,  /* rank -> root: nranks, peer info (after its proof) */
  /* 2 was the whole rank table, n entries to every rank (n^2 in all) */
  LOOM_FRAME_ERROR = 3,  /* root -> rank: code, text saying why init failed, tag */
  /* 4 was the ring hello, which carried the secret in clear */
  LOOM_FRAME_DATA = 5,   /* bootstrap allgather block */
  LOOM_FRAME_NOTICE = 6, /* failure notice travelling the ring */
  LOOM_FRAME_PLACEMENT = 7, /* root -> rank: its placement (below), then the root's tag */
  LOOM_FRAME_ACK = 8,       /* root -> a NEIGHBOUR hello's rank: the root's tag only */
};

struct loom_frame_hdr {
  uint32_t type;
  uint32_t len; /* payload bytes */
};
void loom_frame_hdr_encode(const struct loom_frame_hdr *h, uint8_t out[LOOM_FRAME_HDR_BYTES]);
/* 0 on success; -1 bad magic, unknown type or len above max_len. */
int loom_frame_hdr_decode(const uint8_t in[LOOM_FRAME_HDR_BYTES], uint32_t max_len,
                          struct loom_frame_hdr *h);

/* ---- what each rank tells the others at rendezvous ---- */
struct loom_peer_info {
  int32_t rank;
  int32_t pid;
  char hostname[LOOM_HOSTNAME_BYTES];
  char hostid[LOOM_HOSTID_BYTES];    /* hostname + boot id: same node <=> equal */
  union loom_sockaddr listen_addr;   /* bootstrap ring listener */
};
#define LOOM_PEER_INFO_BYTES (8 + LOOM_HOSTNAME_BYTES + LOOM_HOSTID_BYTES + 20)
void loom_peer_info_encode(const struct loom_peer_info *p, uint8_t *out);
int loom_peer_info_decode(const uint8_t *in, struct loom_peer_info *p);

/* ---- several roots (loomCommInitRankScalable) ----
 * Root g of k serves the block of ranks [first(g), first(g + 1)), with
 * first(g) = floor(g * nranks / k).  A rank sends its hello to its
 * block's root as a MEMBER, and, where it is the ring neighbour of
 * another block's edge rank, to that block's root as a NEIGHBOUR too, so
 * every root can tell each of its members both ring neighbours.  One
 * root (k = 1) serves every rank and has no neighbours. */
int loom_roots_first(int32_t g, int32_t nranks, int32_t nroots);
int loom_roots_of(int32_t rank, int32_t nranks, int32_t nroots);
/* The ranks outside root g's block that are ring neighbours of its edge
 * ranks (0 to 2, distinct, written to out). */
int loom_roots_neighbours(int32_t g, int32_t nranks, int32_t nroots, int32_t out[2]);

/* HELLO payload: nranks, nroots, the root it is for, its role there, the
 * rank's peer info.  It travels after the rank's proof of the secret
 * (net/auth.h), never with the secret itself. */
enum loom_hello_role { LOOM_HELLO_MEMBER = 0, LOOM_HELLO_NEIGHBOUR = 1 };
struct loom_hello {
  int32_t nranks, nroots, root, role;
  struct loom_peer_info info;
};
#define LOOM_HELLO_BYTES (16 + LOOM_PEER_INFO_BYTES)
void loom_hello_encode(const struct loom_hello *h, uint8_t *out);
/* 0 on success; -1 when a field is out of range or the rank is not what
 * its role says at that root (not in its block, not a neighbour of it). */
int loom_hello_decode(const uint8_t *in, struct loom_hello *h);

/* PLACEMENT payload: what one rank needs of the others before the
 * topology all-gather, and no more, so that the root sends O(ranks per
 * node) bytes to each rank, not the whole table: the peer infos of its
 * ring predecessor and successor, then the count and the ranks (in
 * ascending order, its own among them) that share its host id. */
struct loom_placement {
  struct loom_peer_info prev, next;
  int32_t nlocal;
  int32_t *local; /* nlocal entries; owned by the caller */
};
#define LOOM_PLACEMENT_BYTES(nlocal) (2 * LOOM_PEER_INFO_BYTES + 4 + 4 * (size_t)(nlocal))
void loom_placement_encode(const struct loom_placement *p, uint8_t *out);
/* Decodes the `len` bytes of `rank`'s placement in an nranks-wide job,
 * allocating p->local.  0 on success; -1 when anything is off (length,
 * neighbours that are not rank - 1 and rank + 1, local ranks out of range,
 * out of order or without `rank`), leaving nothing allocated. */
int loom_placement_decode(const uint8_t *in, size_t len, int32_t rank, int32_t nranks,
                          struct loom_placement *p);

/* NOTICE payload: suspect rank, reporter rank, kind, then (for a
 * mismatch) the fingerprints of the suspect's and the reporter's calls. */
enum loom_notice_kind {
  LOOM_NOTICE_DIED = 1,     /* its connection closed or failed */
  LOOM_NOTICE_TIMEOUT = 2,  /* it stopped making progress */
  LOOM_NOTICE_ABORT = 3,    /* it called loomCommAbort */
  LOOM_NOTICE_MISMATCH = 4, /* its call does not match (size mismatch seen) */
  /* Not a failure: `suspect` ranks in a row, ending with the reporter,
   * wait in the call whose fingerprint is reporter_fp, one of them for
   * LOOM_STRAGGLER_WARN_MS (engine/straggler.c); readers that do not wait
   * in that call drop it. */
  LOOM_NOTICE_LATE = 5,
  LOOM_NOTICE_REVOKE = 6, /* it called loomCommRevoke (api/shrink.c) */
};
#define LOOM_NOTICE_BYTES 44
struct loom_notice {
  int32_t suspect, reporter, kind;
  uint64_t suspect_fp[2], reporter_fp[2]; /* zero unless kind is MISMATCH */
};
/* What a notice means, for messages, and the result code it gives. */
const char *loom_notice_text(int kind);
loomResult_t loom_notice_result(int kind);
void loom_notice_encode(const struct loom_notice *n, uint8_t out[LOOM_NOTICE_BYTES]);
int loom_notice_decode(const uint8_t in[LOOM_NOTICE_BYTES], struct loom_notice *n);


#endif
