/*
 * ib_ep.h — the data path of one ibverbs connection ("endpoint"): posting
 * messages, the eager and rendezvous protocols over the receive ring
 * (ib_proto.h), credits (ib_credit.h) and completion handling.
 *
 * It talks to the NIC only through struct ib_nic_ops (two calls: an RDMA
 * write, with or without immediate, and posting receives), and learns of
 * completions through ib_ep_send_done / ib_ep_recv_imm, so that the unit
 * tests run the very same protocol over a loopback fake without a device.
 *
 * Protocols (per connection and direction, messages matched in order):
 *   eager  (len <= slot_bytes - IB_HDR_BYTES): the sender copies header and
 *          payload into its staging slot and writes them into the peer's
 *          ring slot (imm SLOT); the send is done at once; the receiver
 *          checks fingerprint and length and copies out, freeing the slot
 *   rendezvous (larger): the sender writes an RTS header into a slot;
 *          the receiver, once the matching receive is posted, registers
 *          the receive buffer (common/mr_cache.h) and writes a CTS
 *          (address, rkey) into the sender's CTS table (imm CTS); the
 *          sender registers its buffer and writes the data straight into
 *          the receive buffer, the last write with imm DONE.  No copy.
 *          Short of locked memory (RLIMIT_MEMLOCK), the sender copies the
 *          data through free staging slots instead, and the receiver
 *          answers the RTS once transfers in flight have given some back:
 *          a send's registration waits on nobody, so that always comes.
 * Ring slots come back to the sender in batches (imm CREDIT) or inside any
 * header or CTS going the other way.
 */
#ifndef LOOM_TRANSPORT_IB_EP_H
#define LOOM_TRANSPORT_IB_EP_H

#include "ib_credit.h"
#include "common/fifo.h"
#include "common/mr_cache.h"
#include "ib_proto.h"
#include "transport.h"

#include <stddef.h>
#include <stdint.h>

/* Ring geometry: compile-time, the same on every rank (checked in the
 * handshake).  16 x 32 KiB slots and 8 rendezvous in flight per direction:
 * 512 KiB + 256 B registered to receive and as much to stage sends, per
 * peer. */
#define IB_EP_NSLOTS 16u
#define IB_EP_SLOT_BYTES (32u << 10)
#define IB_EP_RDV_SLOTS 8u

struct ib_nic_ops {
  /* RDMA write of len bytes (0 allowed, local then unused) from local
   * (lkey) to raddr (rkey), carrying imm when with_imm; always signaled:
   * its completion comes back as ib_ep_send_done(wr_id).  0 or errno. */
  int (*write)(void *qp, uint64_t wr_id, const void *local, size_t len, uint32_t lkey,
               uint64_t raddr, uint32_t rkey, int with_imm, uint32_t imm);
  /* Posts n receives for immediates (no buffer).  0 or errno. */
  int (*post_recvs)(void *qp, int n);
};

struct ib_ep_config {
  int rank, peer;
  uint32_t nslots, slot_bytes, rdv_slots;
  uint8_t *in;          /* ring + CTS table the peer writes (ib_ep_region_bytes) */
  uint8_t *out;         /* staging for what this side writes (same size) */
  uint32_t out_lkey;
  uint64_t remote_addr; /* the peer's `in` */
  uint32_t remote_rkey;
  uint32_t credits;     /* slots the peer granted (its hello) */
  size_t max_write;     /* largest single RDMA write (the port's max_msg_sz) */
  const struct ib_nic_ops *nic;
  void *qp;
  struct loom_mr_cache *mrs;
};

struct ib_ep {
  struct ib_ep_config cfg;
  size_t ring_bytes; /* nslots * slot_bytes: where the CTS table starts */
  uint32_t sq_depth, rq_depth, sq_used, rq_missing;
  struct ib_credit_tx tx;
  struct ib_credit_rx rx;
  struct loom_fifo sendq;   /* struct loom_xfer *: posted, not yet announced */
  struct loom_fifo recvq;   /* struct loom_xfer *: posted, not yet matched */
  struct loom_fifo rdv_out; /* struct ib_rdv_send: RTS sent, data not yet complete */
  struct loom_fifo rdv_in;  /* struct ib_rdv_recv: CTS sent, DONE not yet seen */
  uint32_t send_seq, recv_seq; /* messages announced / matched */
  uint32_t rdv_sent;           /* RTS sent (numbers the sender's rendezvous) */
  uint32_t rdv_matched;        /* RTS matched (numbers the receiver's CTS) */
  uint32_t cts_seen;           /* CTS received */
  uint8_t *slot_busy;          /* staging slot written, completion not yet seen */
  uint8_t *cts_busy;
  int bounce_noted;            /* the INFO line on the first bounced send was logged */
  loomResult_t failed;
};

/* Bytes of the `in` and `out` regions for a geometry. */
size_t ib_ep_region_bytes(uint32_t nslots, uint32_t slot_bytes, uint32_t rdv_slots);
/* Send and receive queue depths the QP needs for a geometry. */
uint32_t ib_ep_sq_depth(uint32_t nslots, uint32_t rdv_slots);
uint32_t ib_ep_rq_depth(uint32_t nslots, uint32_t rdv_slots);

/* Sets up the state; posts no receive.  Errors are recorded (last error).
 * The remote fields may be 0 until the handshake: ib_ep_set_remote. */
loomResult_t ib_ep_init(struct ib_ep *ep, const struct ib_ep_config *cfg);
/* The peer's receive region and the credits it grants (its hello). */
loomResult_t ib_ep_set_remote(struct ib_ep *ep, uint64_t addr, uint32_t rkey, uint32_t credits);
/* Posts the initial receives: before the peer may write. */
loomResult_t ib_ep_start(struct ib_ep *ep);
/* Releases registrations held by transfers still in flight. */
void ib_ep_fini(struct ib_ep *ep);

loomResult_t ib_ep_isend(struct ib_ep *ep, struct loom_xfer *x);
loomResult_t ib_ep_irecv(struct ib_ep *ep, struct loom_xfer *x);
/* struct loom_transport's probe: the oldest unmatched header in the ring
 * (no receive is posted). */
int ib_ep_probe(struct ib_ep *ep, uint64_t fp[2], uint64_t *len);

/* Completions, as the CQ reports them. */
loomResult_t ib_ep_send_done(struct ib_ep *ep, uint64_t wr_id);
loomResult_t ib_ep_recv_imm(struct ib_ep *ep, uint32_t imm);
/* A failed work completion: the connection is broken. */
loomResult_t ib_ep_fail(struct ib_ep *ep, loomResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Posts what can be posted: receives to replenish, CTS for matched RTS,
 * rendezvous data, new messages, credits.  *progressed set when anything
 * moved. */
loomResult_t ib_ep_progress(struct ib_ep *ep, int *progressed);

#endif
