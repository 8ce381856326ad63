/*
 * ipc_coll.h — collectives on device buffers between the ranks of one
 * node, device to device through IPC handles (CUDA IPC, the simulated
 * device's shared storage), with no host bounce.
 *
 * A call runs as a few small engine tasks with device work between them:
 *
 *   handshake: an all-gather of each rank's record (the call's identity,
 *     its buffers' IPC handles), posted once the rank's inputs are ready
 *     (on a device stream: once the stream reached the call);
 *   phase 1: each rank's share of the work, as the device's own copies and
 *     reduction kernels on the communicator's IPC stream, reading (and for
 *     reduce, writing) the peers' buffers; then a barrier;
 *   phase 2 (all-reduce only): each rank copies the other ranks' reduced
 *     slices into its buffer; then a barrier.
 *
 * After the last barrier no rank touches another's memory, so each may go
 * on (its device stream released).  Every rank's record is checked against
 * its own, so two different calls are named instead of mixed, and the
 * handshake and barriers carry their own fingerprint kind
 * (LOOM_FP_DEVICE_IPC), so a rank that stages the call through host memory
 * meanwhile is named too.
 *
 * Which calls take this path depends only on what every rank of a correct
 * program shares (the call, the communicator, LOOM_DEVICE_IPC), never on a
 * group's other calls, so all ranks choose alike: see loom_ipc_wants.
 */
#ifndef LOOM_API_IPC_COLL_H
#define LOOM_API_IPC_COLL_H

#include "api/task.h"
#include "device/device.h"

#include <stdint.h>

/* One rank's part of the handshake. */
struct loom_ipc_rec {
  uint64_t process;         /* a random token of the process: its own buffers need no IPC */
  int32_t device, coll, datatype, op, root;
  int32_t direct;           /* 1: its buffers can be mapped (host: loomMemAlloc's) */
  uint32_t uid;             /* host: peers of another user cannot open its memfds */
  uint32_t pidns;           /* host: nor peers in another PID namespace (core/procid.h) */
  uint64_t count;
  uint64_t send_ptr, recv_ptr;  /* as the rank sees them (0: not used by it) */
  uint64_t send_off, recv_off;  /* offsets in the handles' allocations */
  unsigned char send_handle[LOOM_IPC_HANDLE_MAX], recv_handle[LOOM_IPC_HANDLE_MAX];
};

/* One call in progress (part of a batch). */
struct loom_ipc_state;
struct loom_ipc_run {
  int phase;    /* the engine task in flight: 0 handshake, 1 and 2 barriers */
  int fallback; /* host: a rank's buffers cannot be mapped; the call goes the usual way */
  const struct loom_call *c;
  const struct loom_device_ops *dev;
  struct loom_ipc_state *st; /* the communicator's IPC state for dev */
  struct loom_ipc_rec mine;
  struct loom_ipc_rec *recs; /* nranks */
  const char **send;         /* each rank's buffers as this process addresses them */
  char **recv;
  void *host_recv;           /* this rank's output when it is host memory ... */
  void *scratch_recv;        /* ... and the device scratch standing for it */
};

/* Host all-reduce's pieces: reduced, then copied to the peers from cache. */
#define LOOM_HOST_IPC_PIECE_BYTES (64u << 10)
/* The most calls between handshakes while they keep finding malloc'd
 * buffers. */
#define LOOM_HOST_IPC_BACKOFF_MAX 4096u

/* 1 when call c runs through IPC: a collective of that kind (not
 * PreMulSum) on a communicator of more than one rank, all on one node, on
 * device buffers of a backend with IPC with LOOM_DEVICE_IPC on, or on
 * host buffers of LOOM_HOST_IPC_MIN bytes or more (count x type size).
 * A host call goes through IPC only when every rank's buffers came from
 * loomMemAlloc, which the handshake finds out; otherwise
 * loom_ipc_continue ends it with r->fallback set, on every rank alike,
 * and the caller runs it the usual way; the next host calls then skip the
 * handshake for a while (1, 2, 4 ... LOOM_HOST_IPC_BACKOFF_MAX calls). */
int loom_ipc_wants(const struct loom_call *c);

/* Starts c: posts its handshake into p. */
loomResult_t loom_ipc_begin(loomComm_t comm, const struct loom_call *c, struct loom_ipc_run *r,
                            struct loom_posted *p);
/* The task r posted ended well: runs the next phase's device work and
 * posts its barrier (*posted 1), or finishes the call (*posted 0; with
 * r->fallback set, nothing moved: the call is still to run). */
loomResult_t loom_ipc_continue(loomComm_t comm, struct loom_ipc_run *r, struct loom_posted *p,
                               int *posted);
/* Frees what r holds (after it finished or failed). */
void loom_ipc_end(struct loom_ipc_run *r);

/* ipc_state.c: the communicator's IPC stream and opened handles. */
/* The communicator's state for dev (made on first use). */
loomResult_t loom_ipc_state_get(loomComm_t comm, const struct loom_device_ops *dev,
                                struct loom_ipc_state **st);
/* The IPC stream of st (a native stream of its device). */
void *loom_ipc_stream(const struct loom_ipc_state *st);
/* This process's address of the allocation a handle names, opening it on
 * first use and keeping it open for later calls (ipc_state.c's bounds). */
loomResult_t loom_ipc_map(struct loom_ipc_state *st, const unsigned char *handle, void **base);
/* Device scratch `which` (0, 1) of at least `bytes`, kept for later calls. */
loomResult_t loom_ipc_scratch(struct loom_ipc_state *st, int which, size_t bytes, void **ptr);
/* Marks the start of a call: handles opened before it may be closed. */
void loom_ipc_next_call(struct loom_ipc_state *st);
/* Closes every handle and the stream (communicator destroyed). */
void loom_ipc_state_free(loomComm_t comm);
/* A token of this process, the same for all its communicators. */
uint64_t loom_ipc_process_token(void);

#endif
