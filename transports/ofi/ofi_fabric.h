/*
 * ofi_fabric.h — the OFI transport's libfabric objects: the context (one
 * endpoint, address vector and completion queue per communicator), the
 * connections (a peer's address and sequence numbers) and the requests
 * (one per posted part).
 */
#ifndef LOOM_TRANSPORT_OFI_FABRIC_H
#define LOOM_TRANSPORT_OFI_FABRIC_H

#include "ofi/ofi.h"
#include "common/mr_cache.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

struct ofi_ctx;

struct ofi_conn {
  int peer;
  fi_addr_t addr;
  uint32_t send_seq, recv_seq; /* next part's tag sequence, per direction */
  size_t part_bytes;           /* payload per part: the smaller max of both ends */
  int hello_sent, hello_received;
  struct ofi_ctx *ctx;
};

struct ofi_req {
  struct fi_context2 fctx; /* first: libfabric hands it back as op_context */
  struct ofi_req *next;    /* on the free list or a waiting queue */
  struct ofi_conn *conn;
  struct loom_xfer *x; /* NULL: a hello */
  size_t offset, len;  /* the slice of x->buf this part carries */
  uint64_t tag;
  int is_send;
  int busy;
  struct loom_mr_entry *mr; /* the user buffer's registration (FI_MR_LOCAL) */
  void *hdr_desc;          /* the header's registration */
  uint8_t hdr[OFI_HDR_BYTES];
};

/* Requests come in slabs, registered as a whole when the provider wants
 * local buffers registered (the headers live in them). */
struct ofi_slab {
  struct ofi_slab *next;
  struct fid_mr *mr;
  struct ofi_req reqs[];
};

struct ofi_ctx {
  int rank, nranks;
  /* HMAC-SHA256(secret, "loom/ofi-hello"), cut to 16 bytes: what a hello
   * carries to show it belongs to this communicator (never the secret) */
  uint8_t hello_token[16];
  char prov[OFI_PROV_NAME_BYTES];
  char domain_name[64];
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  int wait_fd;  /* the CQ's wait fd; -1: the provider has none (busy wait) */
  int ready_fd; /* an eventfd that always polls readable: "progress now" */
  int mr_local; /* FI_MR_LOCAL: buffers must be registered */
  int mr_endpoint;
  uint64_t mr_key;
  struct loom_mr_cache mr;
  size_t part_bytes; /* this end's payload per part */
  struct ofi_conn **conns; /* per rank */
  struct ofi_slab *slabs;
  struct ofi_req *free_reqs;
  /* Posts wait here, per direction (0: receives, 1: sends), while the
   * provider's queue is full (EAGAIN, or its rx/tx size in flight), so
   * that receives never wait behind sends or the reverse. */
  struct ofi_queue {
    struct ofi_req *head, *tail;
  } waiting[2];
  size_t inflight[2], max_inflight[2];
  loomResult_t failed;                     /* first failure, kept for later calls */
  int failed_peer;
};

/* ofi_provider.c: chooses the provider (LOOM_OFI_PROVIDER, LOOM_OFI_DOMAIN,
 * the interface of local_sockaddr) and opens fabric, domain, address
 * vector, completion queue and endpoint; fills ctx->info .. ctx->ep,
 * wait_fd, mr_local and part_bytes.  On failure everything opened is
 * closed again (ofi_close). */
loomResult_t ofi_open(struct ofi_ctx *ctx, const void *local_sockaddr);
void ofi_close(struct ofi_ctx *ctx);

/* ofi.c: registers user buffers from now on, through the cache (init
 * calls it for FI_MR_LOCAL providers; tests force it).  -1: out of memory. */
int ofi_registration_on(struct ofi_ctx *ctx);

/* ofi_post.c: posting parts, completions, progress; registering memory
 * for sends and receives (bound to the endpoint where FI_MR_ENDPOINT);
 * whether posts wait that the provider would take now. */
int ofi_posts_ready(const struct ofi_ctx *ctx);
int ofi_mr_register(struct ofi_ctx *ctx, void *buf, size_t len, struct fid_mr **mr);
loomResult_t ofi_post(struct ofi_conn *c, struct loom_xfer *x, int is_send);
loomResult_t ofi_post_hello(struct ofi_conn *c, int is_send);
loomResult_t ofi_progress_cq(struct ofi_ctx *ctx, int *progressed, int *failed_peer);
void ofi_reqs_free(struct ofi_ctx *ctx);

#endif
