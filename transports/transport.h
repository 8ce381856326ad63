/*
 * transport.h — Loom's transports, inside the library.  The interface
 * itself (struct loom_transport, the life cycle below) is public in
 * include/loom_net.h, so that plugins can implement it.
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

#include "config.h"   /* LOOM_HAVE_VERBS */
#include "loom_net.h" /* the vtable and its structs: public, for plugins */

extern const struct loom_transport loom_transport_tcp;
extern const struct loom_transport loom_transport_shm;
/* The next two live in the transport modules, not in libloom (which links
 * neither libfabric nor libibverbs): libloom-net-ofi.so and
 * libloom-net-ib.so export them through common/module.h and
 * module_loader.c loads them when chosen; unit tests link their code
 * directly.  libfabric's transport, built with libfabric only
 * (LOOM_HAVE_FABRIC). */
extern const struct loom_transport loom_transport_ofi;
#ifdef LOOM_HAVE_VERBS /* libibverbs and librdmacm found */
/* transports/ibverbs/: RC queue pairs set up through rdma_cm. */
extern const struct loom_transport loom_transport_ib;
/* 1 when an active RDMA port with an IP address rdma_cm can bind exists
 * (honouring LOOM_IB_HCA and LOOM_IB_GID_INDEX; why then names it), else
 * 0 with the reason in why, e.g. "no RDMA device (ibv_get_device_list
 * found none)".  why may be NULL. */
int loom_ib_available(char *why, size_t len);
#endif
/* Routes each peer to shm (same host, unless LOOM_SHM_DISABLE=1) or the
 * network transport that transports/select.c chooses (LOOM_NET,
 * LOOM_NET_PLUGIN; tcp by default). */
extern const struct loom_transport loom_transport_mux;
/* Whether a context must be polled without sleeping: some data reaches
 * it without waking any fd (the table's busy_wait, or its ctx_busy_wait
 * where the context decides; the mux answers for the peers it routes). */
static inline int loom_transport_busy_wait(const struct loom_transport *tp, void *ctx) {
  return tp->ctx_busy_wait != NULL ? tp->ctx_busy_wait(ctx) : tp->busy_wait;
}
/* Reading in place, so that a reduction reads received data straight
 * from a shared-memory FIFO instead of a copy of it.  A receive posted
 * with buf == NULL on a connection whose `can` is 1 for its size (the
 * transport may find small ones faster copied out) is not copied: `peek`
 * gives the next arrived part of it (its bytes and where they are; 0 when
 * none has arrived, or when the connection failed: progress then reports
 * it), `consume` hands that part back to the sender, and the part that
 * completes the message sets its done.  Only the receive at the front of
 * its connection can be read; parts are whole elements of every datatype. */
struct loom_peek_ops {
  int (*can)(void *conn, size_t bytes);
  size_t (*peek)(void *conn, struct loom_xfer *x, const void **data);
  void (*consume)(void *conn, struct loom_xfer *x);
};
/* What the mux's probe returns for a peer whose transport has none (a
 * plugin, ofi): that peer cannot be a source of loomRecvAny. */
#define LOOM_PROBE_UNSUPPORTED (-2)
/* The mux's table carries them as its `peek` (in place over shm, but for
 * a message of one data line, unless single copy is on for that peer or
 * LOOM_SHM_DIRECT_REDUCE=0; never over a network), its ctx_name
 * ("shm+tcp", "ofi") and, per peer, the properties of the transport that
 * carries it. */

#endif
