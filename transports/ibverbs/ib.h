/*
 * ib.h — internals of the ibverbs transport shared by its files:
 *   ib.c          the vtable (init, connect, isend/irecv, progress, fini)
 *   ib_device.c   choosing device, port and address (LOOM_IB_HCA,
 *                 LOOM_IB_GID_INDEX), loom_ib_available()
 *   ib_connect.c  rdma_cm connection set-up and the handshake
 *   ib_verbs.c    the NIC operations of ib_ep.h over ibv_post_send/recv,
 *                 completion queues, memory registration
 * The data path itself (ib_ep.c) and its pure parts (ib_wire, ib_proto,
 * ib_credit, ib_mr, ib_select) know nothing of verbs.
 */
#ifndef LOOM_TRANSPORT_IB_H
#define LOOM_TRANSPORT_IB_H

#include "net/socket.h"
#include "ib_ep.h"
#include "common/mr_cache.h"
#include "ib_wire.h"
#include "transport.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>

/* Address blob: magic, then the rdma_cm listener (loom_sockaddr_encode). */
#define IB_ADDR_MAGIC 0x4c494231u /* "LIB1" */
#define IB_ADDR_BYTES 24
/* Registration cache bounds (idle entries; see common/mr_cache.h). */
#define IB_MR_MAX_ENTRIES 256
#define IB_MR_MAX_BYTES ((size_t)4 << 30)
/* Completions taken from a CQ at once. */
#define IB_POLL_BATCH 16
/* rdma_cm address and route resolution, per attempt (milliseconds). */
#define IB_RESOLVE_MS 2000

/* ---- ib_device.c -------------------------------------------------------------- */

struct ib_choice {
  struct rdma_cm_id *id;     /* bound to addr, port 0: becomes the listener */
  union loom_sockaddr addr;  /* the IP address rdma_cm uses on this port */
  char dev[64];
  int port;
  int roce;                  /* the port's link layer is Ethernet */
  size_t max_msg;            /* the port's max_msg_sz */
  int odp;                   /* RC writes to On-Demand-Paging registrations work */
};

/* How many RDMA devices libibverbs sees; 0 with the reason in why. */
int ib_count_devices(char *why, size_t why_len);
/* Chooses an active port (LOOM_IB_HCA) with an IP address rdma_cm can
 * bind (LOOM_IB_GID_INDEX's GID for RoCE, else `preferred`, else any
 * interface address), binding out->id on channel `ec`.  Returns 0, or -1
 * with the reason in why. */
int ib_choose(struct rdma_event_channel *ec, const union loom_sockaddr *preferred,
              struct ib_choice *out, char *why, size_t why_len);

/* ---- connections ----------------------------------------------------------------- */

enum ib_conn_state {
  IB_CONN_RESOLVING_ADDR,
  IB_CONN_RESOLVING_ROUTE,
  IB_CONN_CONNECTING, /* rdma_connect or rdma_accept sent */
  IB_CONN_ESTABLISHED,
  IB_CONN_FAILED,
};

struct ib_ctx;

struct ib_conn {
  struct ib_ctx *ctx;
  int peer;
  int active; /* this side connects (the lower rank) */
  enum ib_conn_state state;
  struct rdma_cm_id *id;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  uint8_t *in, *out; /* ib_ep's regions, registered below */
  size_t region_bytes;
  struct ibv_mr *in_mr, *out_mr;
  struct ib_ep ep;
  int ep_ready;
  int cq_armed;
  /* Completions polled by poll_fds after arming the CQ (closing the race
   * with the notification); progress handles them first. */
  struct ibv_wc stash[IB_POLL_BATCH];
  int nstash;
  int attempts; /* connection attempts (retried while the peer is not listening) */
  uint64_t retry_at;
  union loom_sockaddr peer_addr;
  /* Why set-up failed (state IB_CONN_FAILED), kept for the caller. */
  loomResult_t err_code;
  char err[384];
};

struct ib_ctx {
  int rank, nranks;
  const char *comm_name;
  uint64_t comm_hash;
  struct ib_choice dev;
  struct ibv_context *verbs;
  struct ibv_pd *pd;
  struct ibv_comp_channel *channel;
  struct rdma_event_channel *cm;
  struct rdma_cm_id *listen_id;
  uint8_t timeout, retry_cnt;
  struct loom_mr_cache mrs;
  int mrs_ready;
  int kick_fd;   /* eventfd made readable when stashed completions wait */
  int kicked;
  struct ib_conn **conns; /* per rank, NULL until connecting */
  struct ib_conn **open;  /* the non-NULL entries: what progress walks */
  int nopen;
  uint64_t next_cm_check; /* progress looks at rdma_cm events this often */
  loomResult_t failed;    /* a device-wide failure */
};

/* ib_connect.c */
loomResult_t ib_connect_peers(struct ib_ctx *ctx, int npeers, const int *peers,
                              const void *addrs, uint64_t deadline);
/* Handles pending rdma_cm events without waiting (disconnections after
 * set-up). */
void ib_cm_poll_nowait(struct ib_ctx *ctx);
void ib_conn_free(struct ib_conn *c);

/* ib_verbs.c */
extern const struct ib_nic_ops ib_verbs_nic;
extern const struct loom_mr_ops ib_verbs_mr_ops_template; /* .arg = the ctx */
/* Creates the CQ, the QP on c->id, registers the regions and starts the
 * endpoint (receives posted). */
loomResult_t ib_conn_setup_qp(struct ib_conn *c);
/* Undoes ib_conn_setup_qp (for a retried attempt, or at the end). */
void ib_conn_teardown_qp(struct ib_conn *c);
/* Drains the connection's completions into its endpoint. */
loomResult_t ib_conn_poll_cq(struct ib_conn *c, int *progressed);
/* Before sleeping: consume notifications, re-arm every CQ, peek for
 * completions that raced with arming.  Returns 1 when some wait (the
 * caller must not sleep). */
int ib_arm_cqs(struct ib_ctx *ctx);

#endif
