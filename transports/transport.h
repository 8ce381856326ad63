/*
 * transport.h — the one interface every transport implements (tcp now; shm,
 * ofi and ibverbs later).  A transport moves opaque buffers between two
 * ranks; it knows nothing of collectives.
 *
 * Life cycle, per communicator:
 *   init      listen; fill this rank's address blob (addr_bytes long), which
 *             the caller exchanges through the bootstrap allgather
 *   connect   open connections to a set of peers, given everyone's blobs;
 *             collective: each peer must name this rank in its own call
 *   isend/irecv post one message on a connection; messages on one
 *             connection and direction match in posting order, and the
 *             receiver must post the sender's exact length and fingerprint
 *   progress  move bytes; sets xfer->done on completion
 *   poll_fds  what to wait on in the kernel when progress made none
 *   fini      close everything
 */
#ifndef LOOM_TRANSPORT_H
#define LOOM_TRANSPORT_H

#include "loom.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define LOOM_TRANSPORT_API_VERSION 3

/* What a transport learns about the communicator at init. */
struct loom_transport_comm {
  int rank, nranks;
  const uint8_t *secret;      /* LOOM_SECRET_BYTES; authenticates connections */
  const void *local_sockaddr; /* union loom_sockaddr: the address to listen on */
  const char *comm_name;      /* for messages */
  const int *local_ranks;     /* the ranks on this host (this one included), ascending */
  int nlocal;
};

/* One posted send or receive.  The caller owns it and must keep it (and
 * the buffer) alive until done is set or the transport is finalised. */
struct loom_xfer {
  void *buf;
  size_t len;
  /* The call's fingerprint (engine/fingerprint.h): a send carries it, a
   * receive expects it.  When a message arrives with another, the receive
   * fails with loomInvalidUsage and peer_fp holds the sender's. */
  uint64_t fp[2];
  uint64_t peer_fp[2];
  int fp_mismatch;
  volatile int done;
  int parts_left; /* transport private */
};

struct loom_transport {
  const char *name;
  int api_version;
  size_t addr_bytes;
  loomResult_t (*init)(const struct loom_transport_comm *info, void **ctx,
                       void *addr);
  /* addrs: nranks blobs of addr_bytes, indexed by rank.  conns[i] receives
   * the connection to peers[i]. */
  loomResult_t (*connect)(void *ctx, int npeers, const int *peers,
                          const void *addrs, uint64_t deadline, void **conns);
  loomResult_t (*isend)(void *conn, struct loom_xfer *x);
  loomResult_t (*irecv)(void *conn, struct loom_xfer *x);
  /* *progressed is set when any byte moved.  On a failed connection the
   * error is returned with its text as the thread's last error, not logged:
   * the engine logs it once with the collective's context; *failed_peer
   * names the peer.  isend/irecv report the same way. */
  loomResult_t (*progress)(void *ctx, int *progressed, int *failed_peer);
  /* Fills at most max entries; returns how many. */
  int (*poll_fds)(void *ctx, struct pollfd *fds, int max);
  void (*fini)(void *ctx);
  /* 1: some data arrives without waking any fd (shared memory), so a
   * waiter must come back to progress() within a short time. */
  int busy_wait;
};

extern const struct loom_transport loom_transport_tcp;
extern const struct loom_transport loom_transport_shm;
/* Routes each peer to shm (same host, unless LOOM_SHM_DISABLE=1) or tcp. */
extern const struct loom_transport loom_transport_mux;
/* Whether a mux context currently routes any peer over a busy-wait
 * transport. */
int loom_mux_busy_wait(void *mux_ctx);

#endif
