/*
 * ofi_post.c — moving parts: posting tagged sends and receives (header +
 * payload), holding back what the provider has no room for, reading the
 * completion queue and checking each arrived header against what was
 * posted.
 */
#include "ofi/ofi_fabric.h"
#include "common/msg_check.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define SLAB_REQS 128
#define CQ_BATCH 32

/* ---- requests ------------------------------------------------------------- */

int ofi_mr_register(struct ofi_ctx *ctx, void *buf, size_t len, struct fid_mr **mr) {
  int rc = fi_mr_reg(ctx->domain, buf, len, FI_SEND | FI_RECV, 0, ctx->mr_key++, 0, mr, NULL);
  if (rc == 0 && ctx->mr_endpoint) {
    rc = fi_mr_bind(*mr, &ctx->ep->fid, 0);
    if (rc == 0)
      rc = fi_mr_enable(*mr);
    if (rc != 0)
      fi_close(&(*mr)->fid);
  }
  return rc;
}

static struct ofi_req *req_get(struct ofi_ctx *ctx) {
  if (ctx->free_reqs == NULL) {
    struct ofi_slab *s = calloc(1, sizeof *s + SLAB_REQS * sizeof(struct ofi_req));
    if (s == NULL)
      return NULL;
    if (ctx->mr_local && ofi_mr_register(ctx, s->reqs, SLAB_REQS * sizeof(struct ofi_req), &s->mr) != 0) {
      free(s);
      return NULL;
    }
    s->next = ctx->slabs;
    ctx->slabs = s;
    for (int i = 0; i < SLAB_REQS; i++) {
      s->reqs[i].hdr_desc = s->mr != NULL ? fi_mr_desc(s->mr) : NULL;
      s->reqs[i].next = ctx->free_reqs;
      ctx->free_reqs = &s->reqs[i];
    }
  }
  struct ofi_req *r = ctx->free_reqs;
  ctx->free_reqs = r->next;
  r->next = NULL;
  r->busy = 1;
  return r;
}

static void req_put(struct ofi_ctx *ctx, struct ofi_req *r) {
  if (r->mr != NULL)
    loom_mr_release(&ctx->mr, r->mr);
  r->mr = NULL;
  r->busy = 0;
  r->x = NULL;
  r->next = ctx->free_reqs;
  ctx->free_reqs = r;
}

void ofi_reqs_free(struct ofi_ctx *ctx) {
  for (struct ofi_slab *s = ctx->slabs; s != NULL; s = s->next)
    for (int i = 0; i < SLAB_REQS; i++)
      if (s->reqs[i].busy && s->reqs[i].mr != NULL) {
        loom_mr_release(&ctx->mr, s->reqs[i].mr);
        s->reqs[i].mr = NULL;
      }
  loom_mr_cache_fini(&ctx->mr);
  while (ctx->slabs != NULL) {
    struct ofi_slab *s = ctx->slabs;
    ctx->slabs = s->next;
    if (s->mr != NULL)
      fi_close(&s->mr->fid);
    free(s);
  }
  ctx->free_reqs = NULL;
  memset(ctx->waiting, 0, sizeof ctx->waiting);
  ctx->inflight[0] = ctx->inflight[1] = 0;
}

/* ---- failures ------------------------------------------------------------- */

static loomResult_t fail(struct ofi_ctx *ctx, int peer, loomResult_t code) {
  if (ctx->failed == loomSuccess) {
    ctx->failed = code;
    ctx->failed_peer = peer;
  }
  return ctx->failed;
}

static loomResult_t fail_fi(struct ofi_ctx *ctx, int peer, const char *what, int err,
                            const char *detail) {
  if (ctx->failed != loomSuccess)
    return ctx->failed;
  loom_error_record(loomRemoteError,
                    "rank %d: ofi (%s) %s rank %d failed: %s%s%s (did the process exit?)",
                    ctx->rank, ctx->prov, what, peer, fi_strerror(err), detail ? ": " : "",
                    detail ? detail : "");
  return fail(ctx, peer, loomRemoteError);
}

/* ---- posting -------------------------------------------------------------- */

static ssize_t try_post(struct ofi_req *r) {
  struct ofi_ctx *ctx = r->conn->ctx;
  struct iovec iov[2] = {{.iov_base = r->hdr, .iov_len = OFI_HDR_BYTES}, {.iov_base = NULL}};
  void *desc[2] = {r->hdr_desc, NULL};
  size_t n = 1;
  if (r->x != NULL && r->len > 0) {
    iov[1].iov_base = (char *)r->x->buf + r->offset;
    iov[1].iov_len = r->len;
    desc[1] = r->mr != NULL ? r->mr->keys.desc : NULL;
    n = 2;
  }
  if (r->is_send)
    return fi_tsendv(ctx->ep, iov, desc, n, r->conn->addr, r->tag, &r->fctx);
  return fi_trecvv(ctx->ep, iov, desc, n, r->conn->addr, r->tag, 0, &r->fctx);
}

static void wait_push(struct ofi_ctx *ctx, struct ofi_req *r) {
  struct ofi_queue *q = &ctx->waiting[r->is_send];
  r->next = NULL;
  if (q->tail != NULL)
    q->tail->next = r;
  else
    q->head = r;
  q->tail = r;
}

/* Posts r; 1 when the provider had no room (r not posted), 0 when posted,
 * else the failure (r released). */
static int post_or_fail(struct ofi_ctx *ctx, struct ofi_req *r, loomResult_t *res) {
  int d = r->is_send;
  if (ctx->inflight[d] >= ctx->max_inflight[d])
    return 1;
  ssize_t rc = try_post(r);
  if (rc == -FI_EAGAIN)
    return 1;
  if (rc != 0) {
    int peer = r->conn->peer;
    req_put(ctx, r);
    *res = fail_fi(ctx, peer, d ? "send to" : "receive from", (int)-rc, NULL);
    return -1;
  }
  ctx->inflight[d]++;
  return 0;
}

/* Posts now, or queues behind earlier posts that are waiting for room. */
static loomResult_t submit(struct ofi_req *r) {
  struct ofi_ctx *ctx = r->conn->ctx;
  loomResult_t res = loomSuccess;
  if (ctx->waiting[r->is_send].head != NULL || post_or_fail(ctx, r, &res) == 1)
    wait_push(ctx, r);
  return res;
}

static loomResult_t post_waiting(struct ofi_ctx *ctx) {
  for (int d = 0; d < 2; d++) {
    struct ofi_queue *q = &ctx->waiting[d];
    while (q->head != NULL) {
      struct ofi_req *r = q->head, *next = r->next;
      loomResult_t res = loomSuccess;
      int rc = post_or_fail(ctx, r, &res);
      if (rc == 1)
        break;
      q->head = next;
      if (q->head == NULL)
        q->tail = NULL;
      if (rc < 0)
        return res;
    }
  }
  return loomSuccess;
}

int ofi_posts_ready(const struct ofi_ctx *ctx) {
  for (int d = 0; d < 2; d++)
    if (ctx->waiting[d].head != NULL && ctx->inflight[d] < ctx->max_inflight[d])
      return 1;
  return 0;
}

static loomResult_t out_of_memory(struct ofi_ctx *ctx, int peer, const char *what) {
  loom_error_record(loomSystemError, "rank %d: ofi: out of memory %s for rank %d", ctx->rank,
                    what, peer);
  return loomSystemError;
}

loomResult_t ofi_post(struct ofi_conn *c, struct loom_xfer *x, int is_send) {
  struct ofi_ctx *ctx = c->ctx;
  if (ctx->failed != loomSuccess)
    return ctx->failed;
  size_t nparts = ofi_nparts(x->len, c->part_bytes);
  x->done = 0;
  x->fp_mismatch = 0;
  x->parts_left = (int)nparts;
  for (size_t j = 0; j < nparts; j++) {
    struct ofi_req *r = req_get(ctx);
    if (r == NULL)
      return out_of_memory(ctx, c->peer, "posting a message");
    r->conn = c;
    r->x = x;
    r->is_send = is_send;
    r->offset = j * c->part_bytes;
    r->len = j == nparts - 1 ? x->len - r->offset : c->part_bytes;
    uint32_t seq = is_send ? c->send_seq++ : c->recv_seq++;
    r->tag = ofi_tag_make(is_send ? ctx->rank : c->peer, seq);
    if (is_send) {
      struct ofi_hdr h = {
          .magic = OFI_HDR_MAGIC, .part = (uint32_t)j, .msg_len = x->len, .fp = {x->fp[0], x->fp[1]}};
      ofi_hdr_encode(r->hdr, &h);
    } else {
      memset(r->hdr, 0, sizeof r->hdr); /* a truncated message may leave it unwritten */
    }
    if (ctx->mr_local && r->len > 0 &&
        loom_mr_acquire(&ctx->mr, (char *)x->buf + r->offset, r->len, &r->mr) != 0) {
      r->mr = NULL;
      req_put(ctx, r);
      loom_error_record(loomSystemError,
                        "rank %d: ofi (%s): registering %zu bytes at %p for rank %d failed "
                        "(locked-memory limit? ulimit -l)",
                        ctx->rank, ctx->prov, r->len, (char *)x->buf + r->offset, c->peer);
      return fail(ctx, c->peer, loomSystemError);
    }
    LOOM_CHECK(submit(r));
  }
  return loomSuccess;
}

loomResult_t ofi_post_hello(struct ofi_conn *c, int is_send) {
  struct ofi_ctx *ctx = c->ctx;
  struct ofi_req *r = req_get(ctx);
  if (r == NULL)
    return out_of_memory(ctx, c->peer, "saying hello");
  r->conn = c;
  r->x = NULL;
  r->is_send = is_send;
  r->offset = r->len = 0;
  r->tag = ofi_tag_hello(is_send ? ctx->rank : c->peer);
  memset(r->hdr, 0, sizeof r->hdr);
  if (is_send) { /* a token of the secret rides in the fingerprint's place */
    struct ofi_hdr h = {.magic = OFI_HDR_MAGIC};
    memcpy(h.fp, ctx->hello_token, sizeof h.fp);
    ofi_hdr_encode(r->hdr, &h);
  }
  return submit(r);
}

/* ---- completions ---------------------------------------------------------- */

static loomResult_t check_hello(struct ofi_req *r) {
  struct ofi_ctx *ctx = r->conn->ctx;
  struct ofi_hdr h;
  uint64_t token[2];
  memcpy(token, ctx->hello_token, sizeof token);
  if (ofi_hdr_decode(r->hdr, &h) != 0 || h.fp[0] != token[0] || h.fp[1] != token[1]) {
    loom_error_record(loomInvalidUsage,
                      "rank %d: ofi: the hello from rank %d's address carried the wrong secret "
                      "(another job on the same fabric address?)",
                      ctx->rank, r->conn->peer);
    return fail(ctx, r->conn->peer, loomInvalidUsage);
  }
  r->conn->hello_received = 1;
  return loomSuccess;
}

/* A receive's header against the posted call; got = bytes that arrived
 * (header included), or 0 when the message was truncated (longer than
 * posted). */
static loomResult_t check_recv(struct ofi_req *r, size_t got) {
  struct ofi_ctx *ctx = r->conn->ctx;
  struct loom_xfer *x = r->x;
  int peer = r->conn->peer;
  struct ofi_hdr h;
  if (got != 0 && got < OFI_HDR_BYTES) {
    loom_error_record(loomRemoteError, "rank %d: ofi: rank %d sent a %zu-byte message (no header)",
                      ctx->rank, peer, got);
    return fail(ctx, peer, loomRemoteError);
  }
  if (ofi_hdr_decode(r->hdr, &h) != 0) {
    loom_error_record(loomRemoteError, "rank %d: ofi: corrupt message from rank %d (bad header)",
                      ctx->rank, peer);
    return fail(ctx, peer, loomRemoteError);
  }
  if (loom_msg_check(x, h.fp[0], h.fp[1], h.msg_len, ctx->rank, peer, 1) != loomSuccess)
    return fail(ctx, peer, loomInvalidUsage);
  if (got != OFI_HDR_BYTES + r->len) { /* same call and length: the same parts */
    loom_error_record(loomRemoteError, "rank %d: ofi: corrupt message from rank %d (part of "
                      "%zu bytes where %zu were expected)", ctx->rank, peer,
                      got - OFI_HDR_BYTES, r->len);
    return fail(ctx, peer, loomRemoteError);
  }
  return loomSuccess;
}

static loomResult_t complete(struct ofi_req *r, size_t got) {
  struct ofi_ctx *ctx = r->conn->ctx;
  loomResult_t res = loomSuccess;
  ctx->inflight[r->is_send]--;
  if (r->x == NULL) {
    if (r->is_send)
      r->conn->hello_sent = 1;
    else
      res = check_hello(r);
  } else {
    if (!r->is_send)
      res = check_recv(r, got);
    if (res == loomSuccess && --r->x->parts_left == 0)
      r->x->done = 1;
  }
  req_put(ctx, r);
  return res;
}

static loomResult_t complete_error(struct ofi_ctx *ctx) {
  struct fi_cq_err_entry err;
  memset(&err, 0, sizeof err);
  ssize_t rc = fi_cq_readerr(ctx->cq, &err, 0);
  if (rc == -FI_EAGAIN)
    return loomSuccess;
  if (rc < 0) {
    loom_error_record(loomSystemError, "rank %d: ofi (%s): fi_cq_readerr failed: %s", ctx->rank,
                      ctx->prov, fi_strerror((int)-rc));
    return fail(ctx, ctx->rank, loomSystemError);
  }
  struct ofi_req *r = err.op_context;
  if (r == NULL) {
    loom_error_record(loomSystemError, "rank %d: ofi (%s): a failed operation without context: %s",
                      ctx->rank, ctx->prov, fi_strerror(err.err));
    return fail(ctx, ctx->rank, loomSystemError);
  }
  ctx->inflight[r->is_send]--;
  if (err.err == FI_ECANCELED) {
    req_put(ctx, r);
    return loomSuccess;
  }
  loomResult_t res;
  struct ofi_hdr h;
  if (err.err == FI_ETRUNC && !r->is_send && r->x != NULL) {
    /* Longer than posted.  Where the provider delivered the header, it
     * tells another call from a longer message of this one. */
    res = ofi_hdr_decode(r->hdr, &h) == 0 ? check_recv(r, 0) : loomSuccess;
    if (res == loomSuccess) {
      loom_error_record(loomInvalidUsage,
                        "rank %d: rank %d sent a message longer than the %zu bytes expected "
                        "(did the ranks call different collectives or counts?)",
                        ctx->rank, r->conn->peer, r->x->len);
      res = fail(ctx, r->conn->peer, loomInvalidUsage);
    }
  } else {
    char detail[160] = "";
    if (err.prov_errno != 0)
      fi_cq_strerror(ctx->cq, err.prov_errno, err.err_data, detail, sizeof detail);
    res = fail_fi(ctx, r->conn->peer, r->is_send ? "send to" : "receive from", err.err,
                  detail[0] ? detail : NULL);
  }
  req_put(ctx, r);
  return res;
}

loomResult_t ofi_progress_cq(struct ofi_ctx *ctx, int *progressed, int *failed_peer) {
  loomResult_t res = ctx->failed;
  if (res == loomSuccess)
    res = post_waiting(ctx);
  for (;;) {
    if (res != loomSuccess)
      break;
    struct fi_cq_tagged_entry ents[CQ_BATCH];
    ssize_t n = fi_cq_read(ctx->cq, ents, CQ_BATCH);
    if (n == -FI_EAGAIN)
      break;
    if (n == -FI_EAVAIL) {
      *progressed = 1;
      res = complete_error(ctx);
      continue;
    }
    if (n < 0) {
      loom_error_record(loomSystemError, "rank %d: ofi (%s): fi_cq_read failed: %s", ctx->rank,
                        ctx->prov, fi_strerror((int)-n));
      res = fail(ctx, ctx->rank, loomSystemError);
      break;
    }
    *progressed = 1;
    for (ssize_t i = 0; i < n && res == loomSuccess; i++)
      res = complete(ents[i].op_context, ents[i].len);
    if (n < CQ_BATCH)
      break;
  }
  if (res != loomSuccess)
    *failed_peer = ctx->failed_peer != ctx->rank ? ctx->failed_peer : -1;
  return res;
}
