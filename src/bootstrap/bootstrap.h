/*
 * bootstrap.h — out-of-band rendezvous of the ranks of one communicator.
 *
 * The root (a thread in the process that made the unique id, or in rank 0
 * when LOOM_COMM_ID is used) collects every rank's hello and hands back
 * each rank's placement: its ring neighbours and the ranks of its host,
 * O(ranks per node) bytes a rank (wire.h; what the others need to know of
 * every rank travels in the topology all-gather, api/comm_topo.c).  The
 * ranks then form a ring of sockets used for
 * bootstrap allgather and barrier and, later, for failure notices.  Every
 * wait ends at the bootstrap deadline with an error naming the ranks that
 * did not arrive.
 */
#ifndef LOOM_BOOTSTRAP_BOOTSTRAP_H
#define LOOM_BOOTSTRAP_BOOTSTRAP_H

#include "bootstrap/wire.h"
#include "loom.h"

struct loom_bootstrap;

/* Starts a root listener thread on `bind_addr` (port 0 = any, honouring
 * LOOM_PORT_RANGE) that accepts hellos carrying `secret`.  Writes the bound
 * address.  The thread ends when all ranks arrived or at the timeout. */
loomResult_t loom_root_start(const union loom_sockaddr *bind_addr,
                             const uint8_t secret[LOOM_SECRET_BYTES],
                             int timeout_s, union loom_sockaddr *bound);
/* The same on a socket already listening at addr (which it takes and
 * closes when done): a communicator's shrink port (api/shrink.c). */
loomResult_t loom_root_serve(int listen_fd, const union loom_sockaddr *addr,
                             const uint8_t secret[LOOM_SECRET_BYTES], int timeout_s);

/* Makes a unique id: from LOOM_COMM_ID when set, else a fresh root. */
loomResult_t loom_bootstrap_make_id(loomUniqueId *id);
/* Makes a unique id with a fresh root in this process, ignoring
 * LOOM_COMM_ID (for communicators made from others: split, init-all). */
loomResult_t loom_bootstrap_make_root_id(loomUniqueId *id);

/* Joins the rendezvous described by the `nids` ids (one root each, wire.h
 * says which ranks each serves; every rank passes the same ids in the
 * same order) as `rank` of `nranks`.  The communicator's secret is the
 * first id's. */
loomResult_t loom_bootstrap_init(const loomUniqueId *ids, int nids, int rank, int nranks,
                                 struct loom_bootstrap **out);

int loom_bootstrap_rank(const struct loom_bootstrap *bs);
int loom_bootstrap_nranks(const struct loom_bootstrap *bs);
/* What this rank told the root: pid, host name, host id, ring listener. */
const struct loom_peer_info *loom_bootstrap_self(const struct loom_bootstrap *bs);
/* The ranks sharing this rank's host id, ascending, this rank among them
 * (the root's grouping of the host ids every rank sent). */
const int32_t *loom_bootstrap_host_ranks(const struct loom_bootstrap *bs, int *nlocal);
/* The communicator's secret (used to authenticate data connections). */
const uint8_t *loom_bootstrap_secret(const struct loom_bootstrap *bs);
/* The local address other ranks can reach this rank on. */
const union loom_sockaddr *loom_bootstrap_local_addr(const struct loom_bootstrap *bs);

/* Ring allgather: `data` holds nranks blocks of `size` bytes; this rank's
 * block (at rank*size) is filled in by the caller. */
loomResult_t loom_bootstrap_allgather(struct loom_bootstrap *bs, void *data,
                                      size_t size);
loomResult_t loom_bootstrap_barrier(struct loom_bootstrap *bs);

/* ---- failure notices (used by the engine while a collective waits) ---- */

/* The fd to poll for POLLIN: notices from the ring predecessor (-1 when
 * the communicator has one rank). */
int loom_bootstrap_notice_fd(const struct loom_bootstrap *bs);
/* Reads what arrived on the notice fd, waiting at most wait_ms.  Returns 1
 * and fills `n` when a notice arrived or the predecessor closed its socket
 * (then n->suspect is the predecessor, kind DIED), 0 when nothing (or only
 * part of a frame) came, -1 when the next frame belongs to a later
 * bootstrap operation (it is left in place). */
int loom_bootstrap_read_notice(struct loom_bootstrap *bs, int wait_ms,
                               struct loom_notice *n);
/* Sends a notice to the ring successor: one non-blocking send, best effort
 * (the successor may be the rank that died). */
void loom_bootstrap_send_notice(struct loom_bootstrap *bs, const struct loom_notice *n);

void loom_bootstrap_close(struct loom_bootstrap *bs);

#endif
