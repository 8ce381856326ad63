/*
 * loom_net.h — the transport interface: what every Loom transport (tcp,
 * shm, ofi, ibverbs) implements, and what a network plugin exports.
 *
 * A transport moves opaque buffers between two ranks; it knows nothing of
 * collectives.  Life cycle, per communicator:
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
 *
 * Plugins.  With LOOM_NET_PLUGIN=NAME, Loom dlopen()s libloom-net-NAME.so
 * (the normal dlopen search path first, then Loom's pkglibdir) and looks up
 * the symbol named by LOOM_NET_PLUGIN_SYMBOL: a `const struct
 * loom_transport` whose api_version must equal LOOM_TRANSPORT_API_VERSION
 * and whose struct_size is sizeof(struct loom_transport) as the plugin saw
 * it: members past that size are taken as absent (NULL), so optional
 * members can be added at the end without breaking built plugins.
 * It then carries every peer that is not on this rank's host (or every
 * peer with LOOM_SHM_DISABLE=1).  docs/transports.md describes the ABI.
 *
 *   #include <loom_net.h>
 *   const struct loom_transport LOOM_NET_PLUGIN_NAME = {
 *       .name = "myfabric", .api_version = LOOM_TRANSPORT_API_VERSION,
 *       .struct_size = sizeof(struct loom_transport), ...};
 *
 * Threads: one thread at a time calls into a context and its connections.
 */
#ifndef LOOM_NET_H
#define LOOM_NET_H

#include "loom.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 4: record_error and log in loom_transport_comm, ctx_busy_wait.
 * 5: struct_size, and the optional properties, ctx_name and peek; probe
 *    came later within 5 (plugins built before it have it NULL). */
#define LOOM_TRANSPORT_API_VERSION 5

#define LOOM_NET_CAT2_(a, b) a##b
#define LOOM_NET_CAT_(a, b) LOOM_NET_CAT2_(a, b)
#define LOOM_NET_STR2_(a) #a
#define LOOM_NET_STR_(a) LOOM_NET_STR2_(a)
/* The symbol a plugin exports: loom_net_plugin_v5 for this version. */
#define LOOM_NET_PLUGIN_NAME LOOM_NET_CAT_(loom_net_plugin_v, LOOM_TRANSPORT_API_VERSION)
#define LOOM_NET_PLUGIN_SYMBOL LOOM_NET_STR_(LOOM_NET_PLUGIN_NAME)

/* Bytes of the secret shared by the ranks of one communicator. */
#define LOOM_NET_SECRET_BYTES 16

/* Levels for loom_transport_comm.log. */
#define LOOM_NET_LOG_WARN 1
#define LOOM_NET_LOG_INFO 2
#define LOOM_NET_LOG_TRACE 3

/* What a transport learns about the communicator at init. */
struct loom_transport_comm {
  int rank, nranks;
  const uint8_t *secret;      /* LOOM_NET_SECRET_BYTES; authenticates connections */
  const void *local_sockaddr; /* a struct sockaddr (AF_INET or AF_INET6, port 0):
                                 the address Loom's bootstrap uses on this host */
  const char *comm_name;      /* for messages */
  const int *local_ranks;     /* the ranks on this host (this one included), ascending */
  int nlocal;
  /* Makes `text` the calling thread's last error (loomGetLastError) without
   * logging it: how a failure's reason reaches the user. */
  void (*record_error)(const char *text);
  /* Writes one line to Loom's log (LOOM_DEBUG, LOOM_DEBUG_FILE), tagged
   * with host, pid and rank. */
  void (*log)(int level, const char *text);
};

/* One posted send or receive.  The caller owns it and must keep it (and
 * the buffer) alive until done is set or the transport is finalised. */
struct loom_xfer {
  void *buf;
  size_t len;
  /* The call's fingerprint: a send carries it, a receive expects it.  When
   * a message arrives with another, the receive fails with
   * loomInvalidUsage and peer_fp holds the sender's. */
  uint64_t fp[2];
  uint64_t peer_fp[2];
  int fp_mismatch;
  int done; /* set by progress, read by the same thread after it */
  int parts_left; /* transport private */
};

/* What a transport tells the tuner's cost model (the alpha-beta model that
 * ranks algorithms across nodes) about one peer's connection.  0 in a
 * field: not known; the model then uses the node's NIC speed or its own
 * default. */
struct loom_net_properties {
  double latency_us;      /* one small message, one way */
  double bandwidth_gbps;  /* one connection's, in GB/s */
  double msg_overhead_us; /* CPU work per message at each end (system calls, ...) */
};

/* Loom's own, for reading received data in place (transports/transport.h);
 * plugins leave peek NULL. */
struct loom_peek_ops;

/* The largest address blob a transport may have (addr_bytes): every
 * rank's travels to every rank at init. */
#define LOOM_NET_ADDR_MAX 1024

struct loom_transport {
  const char *name;
  int api_version;
  size_t struct_size; /* sizeof(struct loom_transport) where the table was built */
  size_t addr_bytes; /* 1 to LOOM_NET_ADDR_MAX */
  loomResult_t (*init)(const struct loom_transport_comm *info, void **ctx,
                       void *addr);
  /* addrs: nranks blobs of addr_bytes, indexed by rank.  conns[i] receives
   * the connection to peers[i].  deadline: CLOCK_MONOTONIC nanoseconds. */
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
  /* Optional (NULL: busy_wait applies): the same question per context,
   * for transports that learn it at init (a provider without wait fds). */
  int (*ctx_busy_wait)(void *ctx);
  /* Optional: the connection to `peer` as the cost model should see it
   * (zeroed by the caller first; leave unknown fields 0). */
  void (*properties)(void *ctx, int peer, struct loom_net_properties *p);
  /* Optional: what the context carries, for the log (e.g. "shm+tcp"). */
  const char *(*ctx_name)(void *ctx);
  /* Optional, Loom's own transports only: reading received data in place. */
  const struct loom_peek_ops *peek;
  /* Optional (NULL: a receive from any source, loomRecvAny, cannot be
   * served over this transport): the next message on conn, looked at
   * before a receive is posted for it.  Called only while no receive is
   * posted or under way on conn.  Returns 1 when the first part of that
   * message has arrived, with its fingerprint in fp and its length in
   * *len (nothing is consumed); 0 when none has yet; -1 when the
   * connection failed (its text as the thread's last error).  After a 0,
   * the next poll_fds (before the next progress) includes what signals
   * that message's arrival. */
  int (*probe)(void *conn, uint64_t fp[2], uint64_t *len);
};

#ifdef __cplusplus
}
#endif

#endif
