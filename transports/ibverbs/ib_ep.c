/*
 * ib_ep.c — the data path of one ibverbs connection (protocols in
 * ib_ep.h): eager copies through the ring, rendezvous writes straight
 * into the posted receive buffer, credits and completions.
 */
#include "ib_ep.h"
#include "common/msg_check.h"
#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* wr_id: kind in the high 32 bits, an index below. */
enum wr_kind {
  WR_SLOT = 1,
  WR_CTS,
  WR_DATA,
  WR_DATA_LAST,
  WR_CREDIT,
  WR_BOUNCE_LAST, /* the last write of rendezvous data sent from staging slots (index:
                     the slot; the others are WR_SLOT writes) */
};
#define WR_ID(kind, index) ((uint64_t)(kind) << 32 | (uint32_t)(index))

struct ib_rdv_send {
  struct loom_xfer *x;
  struct loom_mr_entry *mr;
  uint32_t rdv;
  int cts;         /* the receiver's CTS arrived */
  uint64_t raddr;  /* from the CTS */
  uint32_t rkey;
  size_t posted;   /* bytes whose writes are posted */
  int bounce;      /* registering x->buf failed for want of locked memory: the
                      data goes through staging slots instead */
};

struct ib_rdv_recv {
  struct loom_xfer *x;
  struct loom_mr_entry *mr;
  uint32_t rdv;
};

size_t ib_ep_region_bytes(uint32_t nslots, uint32_t slot_bytes, uint32_t rdv_slots) {
  return (size_t)nslots * slot_bytes + (size_t)rdv_slots * IB_CTS_BYTES;
}

/* Writes a side may have in flight: one per staging slot and CTS entry,
 * rendezvous data (several writes when a message exceeds max_write), and
 * credit returns; every post checks for room, so this bounds, not trusts. */
uint32_t ib_ep_sq_depth(uint32_t nslots, uint32_t rdv_slots) {
  return nslots + 4 * rdv_slots + 8;
}

/* Immediates the peer may have in flight towards us: SLOT (at most the
 * slots we granted), CTS (at most our table's entries), DONE (at most the
 * CTS we may have outstanding, the peer's table size = ours) and CREDIT
 * (each returns at least one of the nslots credits we can hold). */
uint32_t ib_ep_rq_depth(uint32_t nslots, uint32_t rdv_slots) {
  return 2 * nslots + 2 * rdv_slots;
}

loomResult_t ib_ep_fail(struct ib_ep *ep, loomResult_t code, const char *fmt, ...) {
  if (ep->failed != loomSuccess)
    return ep->failed;
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  ep->failed = loom_error_record(code, "rank %d: ibverbs connection to rank %d failed: %s",
                                 ep->cfg.rank, ep->cfg.peer, detail);
  return ep->failed;
}

loomResult_t ib_ep_init(struct ib_ep *ep, const struct ib_ep_config *cfg) {
  memset(ep, 0, sizeof *ep);
  ep->cfg = *cfg;
  ep->ring_bytes = (size_t)cfg->nslots * cfg->slot_bytes;
  ep->sq_depth = ib_ep_sq_depth(cfg->nslots, cfg->rdv_slots);
  ep->rq_depth = ib_ep_rq_depth(cfg->nslots, cfg->rdv_slots);
  if (cfg->max_write == 0 || cfg->slot_bytes <= IB_HDR_BYTES ||
      ib_credit_tx_init(&ep->tx, cfg->nslots, cfg->credits) != 0 ||
      ib_credit_rx_init(&ep->rx, cfg->nslots, cfg->nslots / 4 ? cfg->nslots / 4 : 1) != 0 ||
      cfg->rdv_slots == 0 || (cfg->rdv_slots & (cfg->rdv_slots - 1)) != 0)
    return loom_error_record(loomInternalError,
                             "rank %d: ibverbs: invalid ring geometry for rank %d (%u slots "
                             "of %u bytes, %u credits, %u rendezvous entries)",
                             cfg->rank, cfg->peer, cfg->nslots, cfg->slot_bytes,
                             cfg->credits, cfg->rdv_slots);
  loom_fifo_init(&ep->sendq, sizeof(struct loom_xfer *));
  loom_fifo_init(&ep->recvq, sizeof(struct loom_xfer *));
  loom_fifo_init(&ep->rdv_out, sizeof(struct ib_rdv_send));
  loom_fifo_init(&ep->rdv_in, sizeof(struct ib_rdv_recv));
  ep->slot_busy = calloc(cfg->nslots, 1);
  ep->cts_busy = calloc(cfg->rdv_slots, 1);
  if (ep->slot_busy == NULL || ep->cts_busy == NULL) {
    free(ep->slot_busy);
    free(ep->cts_busy);
    ep->slot_busy = ep->cts_busy = NULL;
    return loom_error_record(loomSystemError, "rank %d: out of memory for rank %d's connection",
                             cfg->rank, cfg->peer);
  }
  return loomSuccess;
}

loomResult_t ib_ep_set_remote(struct ib_ep *ep, uint64_t addr, uint32_t rkey, uint32_t credits) {
  if (ib_credit_tx_init(&ep->tx, ep->cfg.nslots, credits) != 0 || addr == 0)
    return ib_ep_fail(ep, loomRemoteError, "invalid receive ring (%u credits for %u slots)",
                      credits, ep->cfg.nslots);
  ep->cfg.remote_addr = addr;
  ep->cfg.remote_rkey = rkey;
  ep->cfg.credits = credits;
  return loomSuccess;
}

loomResult_t ib_ep_start(struct ib_ep *ep) {
  int rc = ep->cfg.nic->post_recvs(ep->cfg.qp, (int)ep->rq_depth);
  if (rc != 0)
    return ib_ep_fail(ep, loomSystemError, "ibv_post_recv of %u receives: %s", ep->rq_depth,
                      strerror(rc));
  return loomSuccess;
}

void ib_ep_fini(struct ib_ep *ep) {
  struct ib_rdv_send *s;
  while ((s = loom_fifo_at(&ep->rdv_out, 0)) != NULL) {
    if (s->mr != NULL)
      loom_mr_release(ep->cfg.mrs, s->mr);
    loom_fifo_pop(&ep->rdv_out);
  }
  struct ib_rdv_recv *r;
  while ((r = loom_fifo_at(&ep->rdv_in, 0)) != NULL) {
    if (r->mr != NULL)
      loom_mr_release(ep->cfg.mrs, r->mr);
    loom_fifo_pop(&ep->rdv_in);
  }
  loom_fifo_free(&ep->sendq);
  loom_fifo_free(&ep->recvq);
  loom_fifo_free(&ep->rdv_out);
  loom_fifo_free(&ep->rdv_in);
  free(ep->slot_busy);
  free(ep->cts_busy);
  ep->slot_busy = ep->cts_busy = NULL;
}

static size_t eager_max(const struct ib_ep *ep) { return ep->cfg.slot_bytes - IB_HDR_BYTES; }

loomResult_t ib_ep_isend(struct ib_ep *ep, struct loom_xfer *x) {
  if (ep->failed != loomSuccess)
    return ep->failed;
  x->done = 0;
  x->fp_mismatch = 0;
  if (loom_fifo_push(&ep->sendq, &x) != 0)
    return loom_error_record(loomSystemError, "out of memory queueing a message for rank %d",
                             ep->cfg.peer);
  return loomSuccess;
}

loomResult_t ib_ep_irecv(struct ib_ep *ep, struct loom_xfer *x) {
  if (ep->failed != loomSuccess)
    return ep->failed;
  x->done = 0;
  x->fp_mismatch = 0;
  if (loom_fifo_push(&ep->recvq, &x) != 0)
    return loom_error_record(loomSystemError, "out of memory queueing a receive from rank %d",
                             ep->cfg.peer);
  return loomSuccess;
}

/* ---- posting ---------------------------------------------------------------- */

static loomResult_t post_write(struct ib_ep *ep, uint64_t wr_id, const void *local, size_t len,
                               uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm,
                               int with_imm) {
  int rc = ep->cfg.nic->write(ep->cfg.qp, wr_id, local, len, lkey, raddr, rkey, with_imm, imm);
  if (rc != 0)
    return ib_ep_fail(ep, loomSystemError, "ibv_post_send (RDMA write of %zu bytes): %s", len,
                      strerror(rc));
  ep->sq_used++;
  return loomSuccess;
}

static int sq_room(const struct ib_ep *ep) { return ep->sq_used < ep->sq_depth; }

/* Credits to piggyback on a header or CTS going to the peer now. */
static uint16_t piggyback_credits(const struct ib_ep *ep) {
  uint32_t n = ib_credit_rx_due(&ep->rx, 1);
  return (uint16_t)(n > 0xffffu ? 0xffffu : n);
}

static loomResult_t mr_error(struct ib_ep *ep, int rc, const void *buf, size_t len) {
  return ib_ep_fail(ep, rc == ENOMEM ? loomSystemError : loomInvalidArgument,
                    "ibv_reg_mr of the %zu-byte buffer at %p: %s%s", len, buf, strerror(rc),
                    rc == ENOMEM || rc == EPERM
                        ? " (raise the locked-memory limit: ulimit -l unlimited)"
                        : "");
}

/* Announces the send queue's head: an eager message or an RTS.  Returns 1
 * when it was posted, 0 when it must wait (no credit, staging slot or
 * send-queue room). */
static int post_one_send(struct ib_ep *ep, struct loom_xfer *x, loomResult_t *res) {
  uint32_t s = ep->tx.next & (ep->cfg.nslots - 1);
  if (ep->tx.credits == 0 || ep->slot_busy[s] || !sq_room(ep))
    return 0;
  int eager = x->len <= eager_max(ep);
  uint32_t slot;
  ib_credit_tx_take(&ep->tx, &slot);
  struct ib_msg_hdr h = {.kind = eager ? IB_MSG_EAGER : IB_MSG_RTS,
                         .credits = piggyback_credits(ep),
                         .seq = ep->send_seq,
                         .len = x->len,
                         .fp = {x->fp[0], x->fp[1]}};
  uint8_t *stage = ep->cfg.out + (size_t)slot * ep->cfg.slot_bytes;
  ib_hdr_encode(&h, stage);
  size_t bytes = IB_HDR_BYTES;
  if (eager && x->len > 0) {
    memcpy(stage + IB_HDR_BYTES, x->buf, x->len);
    bytes += x->len;
  }
  *res = post_write(ep, WR_ID(WR_SLOT, slot), stage, bytes, ep->cfg.out_lkey,
                    ep->cfg.remote_addr + (uint64_t)slot * ep->cfg.slot_bytes,
                    ep->cfg.remote_rkey, ib_imm_make(IB_IMM_SLOT, slot), 1);
  if (*res != loomSuccess)
    return 0;
  ib_credit_rx_returned(&ep->rx, h.credits);
  ep->slot_busy[slot] = 1;
  ep->send_seq++;
  if (eager) {
    x->done = 1; /* copied: the caller may reuse its buffer */
  } else {
    /* the buffer is registered when the CTS arrives (post_rdv_data) */
    struct ib_rdv_send rs = {.x = x, .rdv = ep->rdv_sent++};
    if (loom_fifo_push(&ep->rdv_out, &rs) != 0) {
      *res = ib_ep_fail(ep, loomSystemError, "out of memory");
      return 0;
    }
  }
  return 1;
}

static loomResult_t post_sends(struct ib_ep *ep, int *progressed) {
  struct loom_xfer **xp;
  while ((xp = loom_fifo_at(&ep->sendq, 0)) != NULL) {
    loomResult_t res = loomSuccess;
    if (!post_one_send(ep, *xp, &res))
      return res;
    loom_fifo_pop(&ep->sendq);
    *progressed = 1;
  }
  return loomSuccess;
}

/* Registration failed for want of locked memory (RLIMIT_MEMLOCK), not
 * because the buffer is bad. */
static int short_of_locked_memory(int rc) { return rc == ENOMEM || rc == EAGAIN; }

/* Registers the send buffer of a rendezvous whose CTS arrived.  Taken this
 * late, a send's registration never waits on the peer, so a receiver that
 * waits for locked memory (post_cts) always gets some back.  Short of
 * locked memory, the data goes through the staging slots instead. */
static loomResult_t register_send(struct ib_ep *ep, struct ib_rdv_send *s) {
  int rc = loom_mr_acquire(ep->cfg.mrs, s->x->buf, s->x->len, &s->mr);
  if (rc == 0)
    return loomSuccess;
  s->mr = NULL;
  if (!short_of_locked_memory(rc))
    return mr_error(ep, rc, s->x->buf, s->x->len);
  if (!ep->bounce_noted)
    LOOM_INFO(LOOM_LOG_NET,
              "ib: rank %d: registering a %zu-byte send buffer for rank %d failed (%s): its "
              "data goes through the staging slots (ulimit -l unlimited avoids the copy)",
              ep->cfg.rank, s->x->len, ep->cfg.peer, strerror(rc));
  ep->bounce_noted = 1;
  s->bounce = 1;
  return loomSuccess;
}

/* A free staging slot to write bounced data from, or -1. */
static int free_slot(const struct ib_ep *ep) {
  for (uint32_t i = 0; i < ep->cfg.nslots; i++) {
    uint32_t s = (ep->tx.next + ep->cfg.nslots / 2 + i) & (ep->cfg.nslots - 1);
    if (!ep->slot_busy[s])
      return (int)s;
  }
  return -1;
}

/* Posts the next write of s: straight from its registered buffer, or
 * copied into a staging slot.  1: posted; 0: must wait for room. */
static int post_rdv_write(struct ib_ep *ep, struct ib_rdv_send *s, loomResult_t *res) {
  if (!sq_room(ep))
    return 0;
  size_t n = s->x->len - s->posted;
  size_t most = ep->cfg.max_write;
  if (s->bounce && ep->cfg.slot_bytes < most)
    most = ep->cfg.slot_bytes;
  if (n > most)
    n = most;
  int last = s->posted + n == s->x->len;
  const char *from = (const char *)s->x->buf + s->posted;
  uint32_t lkey, index = s->rdv;
  enum wr_kind kind = last ? WR_DATA_LAST : WR_DATA;
  if (s->bounce) {
    int slot = free_slot(ep);
    if (slot < 0)
      return 0;
    uint8_t *stage = ep->cfg.out + (size_t)slot * ep->cfg.slot_bytes;
    memcpy(stage, from, n);
    ep->slot_busy[slot] = 1;
    from = (const char *)stage;
    lkey = ep->cfg.out_lkey;
    index = (uint32_t)slot;
    kind = last ? WR_BOUNCE_LAST : WR_SLOT; /* a WR_SLOT completion frees the slot */
  } else {
    lkey = s->mr->keys.lkey;
  }
  *res = post_write(ep, WR_ID(kind, index), from, n, lkey, s->raddr + s->posted, s->rkey,
                    ib_imm_make(IB_IMM_DONE, s->rdv), last);
  if (*res != loomSuccess)
    return 0;
  s->posted += n;
  return 1;
}

/* Rendezvous data: every entry whose CTS arrived, in order, as far as the
 * send queue (and, bounced, the staging slots) have room. */
static loomResult_t post_rdv_data(struct ib_ep *ep, int *progressed) {
  for (size_t i = 0; i < ep->rdv_out.count; i++) {
    struct ib_rdv_send *s = loom_fifo_at(&ep->rdv_out, i);
    if (!s->cts)
      return loomSuccess; /* CTS arrive in order: none further either */
    if (s->mr == NULL && !s->bounce)
      LOOM_CHECK(register_send(ep, s));
    while (s->posted < s->x->len) {
      loomResult_t res = loomSuccess;
      if (!post_rdv_write(ep, s, &res))
        return res;
      *progressed = 1;
    }
  }
  return loomSuccess;
}

/* ---- matching arrived messages with posted receives ------------------------- */

static loomResult_t check_match(struct ib_ep *ep, const struct ib_msg_hdr *h,
                                struct loom_xfer *x) {
  if (h->seq != ep->recv_seq)
    return ib_ep_fail(ep, loomRemoteError,
                      "corrupt stream (message %u arrived where %u was expected)", h->seq,
                      ep->recv_seq);
  loomResult_t res = loom_msg_check(x, h->fp[0], h->fp[1], h->len, ep->cfg.rank,
                                    ep->cfg.peer, ep->failed == loomSuccess);
  if (res != loomSuccess && ep->failed == loomSuccess)
    ep->failed = res;
  if (res != loomSuccess)
    return ep->failed;
  return loomSuccess;
}

/* Answers a matched RTS with a CTS.  1: posted; 0: must wait for room. */
static int post_cts(struct ib_ep *ep, struct loom_xfer *x, loomResult_t *res) {
  uint32_t idx = ep->rdv_matched & (ep->cfg.rdv_slots - 1);
  if (ep->rdv_in.count >= ep->cfg.rdv_slots || ep->cts_busy[idx] || !sq_room(ep))
    return 0;
  struct loom_mr_entry *mr;
  int rc = loom_mr_acquire(ep->cfg.mrs, x->buf, x->len, &mr);
  if (rc != 0) {
    /* Short of locked memory while transfers hold some: they give it back
     * without waiting on anyone (sends register only once their CTS came,
     * or bounce), so answer this RTS later.  With none held, waiting cannot
     * help. */
    if (!short_of_locked_memory(rc) || loom_mr_in_use_all() == 0)
      *res = mr_error(ep, rc, x->buf, x->len);
    return 0;
  }
  struct ib_cts c = {.credits = piggyback_credits(ep),
                     .rdv = ep->rdv_matched,
                     .addr = (uint64_t)(uintptr_t)x->buf,
                     .len = x->len,
                     .rkey = mr->keys.rkey};
  uint8_t *stage = ep->cfg.out + ep->ring_bytes + (size_t)idx * IB_CTS_BYTES;
  ib_cts_encode(&c, stage);
  *res = post_write(ep, WR_ID(WR_CTS, idx), stage, IB_CTS_BYTES, ep->cfg.out_lkey,
                    ep->cfg.remote_addr + ep->ring_bytes + (uint64_t)idx * IB_CTS_BYTES,
                    ep->cfg.remote_rkey, ib_imm_make(IB_IMM_CTS, c.rdv), 1);
  if (*res != loomSuccess) {
    loom_mr_release(ep->cfg.mrs, mr);
    return 0;
  }
  ib_credit_rx_returned(&ep->rx, c.credits);
  ep->cts_busy[idx] = 1;
  struct ib_rdv_recv rr = {.x = x, .mr = mr, .rdv = ep->rdv_matched++};
  if (loom_fifo_push(&ep->rdv_in, &rr) != 0) {
    *res = ib_ep_fail(ep, loomSystemError, "out of memory");
    return 0;
  }
  return 1;
}

static loomResult_t match_recvs(struct ib_ep *ep, int *progressed) {
  struct loom_xfer **xp;
  uint32_t slot;
  while (ib_credit_rx_pending(&ep->rx, &slot) > 0 && (xp = loom_fifo_at(&ep->recvq, 0)) != NULL) {
    struct loom_xfer *x = *xp;
    const uint8_t *in = ep->cfg.in + (size_t)slot * ep->cfg.slot_bytes;
    struct ib_msg_hdr h;
    if (ib_hdr_decode(in, &h) != 0)
      return ib_ep_fail(ep, loomRemoteError, "corrupt stream (bad header in ring slot %u)", slot);
    LOOM_CHECK(check_match(ep, &h, x));
    if (h.kind == IB_MSG_EAGER) {
      if (x->len > 0)
        memcpy(x->buf, in + IB_HDR_BYTES, x->len);
      x->done = 1;
    } else {
      loomResult_t res = loomSuccess;
      if (!post_cts(ep, x, &res))
        return res;
    }
    loom_fifo_pop(&ep->recvq);
    ep->recv_seq++;
    ib_credit_rx_release(&ep->rx);
    *progressed = 1;
  }
  return loomSuccess;
}

int ib_ep_probe(struct ib_ep *ep, uint64_t fp[2], uint64_t *len) {
  if (ep->failed != loomSuccess)
    return -1;
  uint32_t slot;
  if (ep->recvq.count > 0 || ib_credit_rx_pending(&ep->rx, &slot) == 0)
    return 0;
  struct ib_msg_hdr h;
  if (ib_hdr_decode(ep->cfg.in + (size_t)slot * ep->cfg.slot_bytes, &h) != 0) {
    ib_ep_fail(ep, loomRemoteError, "corrupt stream (bad header in ring slot %u)", slot);
    return -1;
  }
  fp[0] = h.fp[0];
  fp[1] = h.fp[1];
  *len = h.len;
  return 1;
}

static loomResult_t return_credits(struct ib_ep *ep, int *progressed) {
  uint32_t n = ib_credit_rx_due(&ep->rx, 0);
  if (n == 0 || !sq_room(ep))
    return loomSuccess;
  /* A zero-length write: it carries only its immediate. */
  LOOM_CHECK(post_write(ep, WR_ID(WR_CREDIT, 0), NULL, 0, 0, ep->cfg.remote_addr,
                        ep->cfg.remote_rkey, ib_imm_make(IB_IMM_CREDIT, n), 1));
  ib_credit_rx_returned(&ep->rx, n);
  *progressed = 1;
  return loomSuccess;
}

loomResult_t ib_ep_progress(struct ib_ep *ep, int *progressed) {
  if (ep->failed != loomSuccess)
    return ep->failed;
  if (ep->rq_missing > 0) {
    /* Before anything that lets the peer send more (ib_ep_rq_depth). */
    int rc = ep->cfg.nic->post_recvs(ep->cfg.qp, (int)ep->rq_missing);
    if (rc != 0)
      return ib_ep_fail(ep, loomSystemError, "ibv_post_recv: %s", strerror(rc));
    ep->rq_missing = 0;
  }
  LOOM_CHECK(match_recvs(ep, progressed));
  LOOM_CHECK(post_rdv_data(ep, progressed));
  LOOM_CHECK(post_sends(ep, progressed));
  LOOM_CHECK(return_credits(ep, progressed));
  return loomSuccess;
}

/* ---- completions ------------------------------------------------------------ */

/* The oldest rendezvous send wrote its last byte.  Send completions come
 * in posting order, and rendezvous data is posted in RTS order: the
 * finished one is the oldest (check_rdv: its number must be rdv). */
static loomResult_t rdv_send_done(struct ib_ep *ep, int check_rdv, uint32_t rdv) {
  struct ib_rdv_send *s = loom_fifo_at(&ep->rdv_out, 0);
  if (s == NULL || (check_rdv && s->rdv != rdv) || s->posted != s->x->len)
    return ib_ep_fail(ep, loomInternalError, "rendezvous %u completed out of order",
                      s != NULL ? s->rdv : rdv);
  if (s->mr != NULL)
    loom_mr_release(ep->cfg.mrs, s->mr);
  s->x->done = 1;
  loom_fifo_pop(&ep->rdv_out);
  return loomSuccess;
}

loomResult_t ib_ep_send_done(struct ib_ep *ep, uint64_t wr_id) {
  if (ep->sq_used == 0)
    return ib_ep_fail(ep, loomInternalError, "a send completion with none outstanding");
  ep->sq_used--;
  uint32_t index = (uint32_t)wr_id;
  switch ((enum wr_kind)(wr_id >> 32)) {
  case WR_SLOT:
    if (index < ep->cfg.nslots)
      ep->slot_busy[index] = 0;
    return loomSuccess;
  case WR_CTS:
    if (index < ep->cfg.rdv_slots)
      ep->cts_busy[index] = 0;
    return loomSuccess;
  case WR_DATA:
  case WR_CREDIT:
    return loomSuccess;
  case WR_BOUNCE_LAST:
    if (index < ep->cfg.nslots)
      ep->slot_busy[index] = 0;
    return rdv_send_done(ep, 0, 0);
  case WR_DATA_LAST:
    return rdv_send_done(ep, 1, index);
  }
  return ib_ep_fail(ep, loomInternalError, "unknown send completion 0x%llx",
                    (unsigned long long)wr_id);
}

static loomResult_t on_slot(struct ib_ep *ep, uint32_t slot) {
  if (ib_credit_rx_arrive(&ep->rx, slot) != 0)
    return ib_ep_fail(ep, loomRemoteError,
                      "protocol error (ring slot %u written out of order or without credit)",
                      slot);
  /* Credits riding on the header are taken now, even if no receive is
   * posted yet: the sender may be waiting for them. */
  struct ib_msg_hdr h;
  const uint8_t *in = ep->cfg.in + (size_t)slot * ep->cfg.slot_bytes;
  if (ib_hdr_decode(in, &h) != 0 || (h.kind == IB_MSG_EAGER && h.len > eager_max(ep)) ||
      (h.kind == IB_MSG_RTS && h.len <= eager_max(ep)))
    return ib_ep_fail(ep, loomRemoteError, "corrupt stream (bad header in ring slot %u)", slot);
  if (ib_credit_tx_give(&ep->tx, h.credits) != 0)
    return ib_ep_fail(ep, loomRemoteError, "protocol error (%u credits returned, more than lent)",
                      h.credits);
  return loomSuccess;
}

static loomResult_t on_cts(struct ib_ep *ep, uint32_t value) {
  uint32_t idx = value & (ep->cfg.rdv_slots - 1);
  struct ib_cts c;
  const uint8_t *in = ep->cfg.in + ep->ring_bytes + (size_t)idx * IB_CTS_BYTES;
  if (ib_cts_decode(in, &c) != 0 || ib_imm_value(c.rdv) != value || c.rdv != ep->cts_seen)
    return ib_ep_fail(ep, loomRemoteError, "protocol error (unexpected CTS %u)", value);
  /* rdv_out holds rendezvous rdv_sent - count .. rdv_sent - 1, oldest first. */
  uint32_t first = ep->rdv_sent - (uint32_t)ep->rdv_out.count;
  struct ib_rdv_send *s = loom_fifo_at(&ep->rdv_out, (uint32_t)(c.rdv - first));
  if (s == NULL || s->rdv != c.rdv || s->cts || c.len != s->x->len)
    return ib_ep_fail(ep, loomRemoteError, "protocol error (CTS %u matches no rendezvous)", c.rdv);
  if (ib_credit_tx_give(&ep->tx, c.credits) != 0)
    return ib_ep_fail(ep, loomRemoteError, "protocol error (%u credits returned, more than lent)",
                      c.credits);
  s->cts = 1;
  s->raddr = c.addr;
  s->rkey = c.rkey;
  ep->cts_seen++;
  return loomSuccess;
}

static loomResult_t on_done(struct ib_ep *ep, uint32_t value) {
  struct ib_rdv_recv *r = loom_fifo_at(&ep->rdv_in, 0);
  if (r == NULL || ib_imm_value(r->rdv) != value)
    return ib_ep_fail(ep, loomRemoteError, "protocol error (rendezvous %u finished, none open)",
                      value);
  loom_mr_release(ep->cfg.mrs, r->mr);
  r->x->done = 1;
  loom_fifo_pop(&ep->rdv_in);
  return loomSuccess;
}

loomResult_t ib_ep_recv_imm(struct ib_ep *ep, uint32_t imm) {
  if (ep->failed != loomSuccess)
    return ep->failed;
  ep->rq_missing++;
  uint32_t v = ib_imm_value(imm);
  switch (ib_imm_type_of(imm)) {
  case IB_IMM_SLOT:
    return on_slot(ep, v);
  case IB_IMM_CTS:
    return on_cts(ep, v);
  case IB_IMM_DONE:
    return on_done(ep, v);
  case IB_IMM_CREDIT:
    if (ib_credit_tx_give(&ep->tx, v) != 0)
      return ib_ep_fail(ep, loomRemoteError,
                        "protocol error (%u credits returned, more than lent)", v);
    return loomSuccess;
  }
  return ib_ep_fail(ep, loomRemoteError, "protocol error (unknown immediate 0x%08x)", imm);
}
