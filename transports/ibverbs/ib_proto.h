/*
 * ib_proto.h — the records of the ibverbs data path, as they lie in the
 * peer's memory, and the 32-bit immediate of each RDMA write.
 *
 * A connection's receive region (per direction) is `nslots` ring slots of
 * `slot_bytes`, then `rdv_slots` CTS entries:
 *   slot:  IB_HDR_BYTES header (EAGER: payload follows; RTS: announces a
 *          large message) — written by the sender with imm SLOT(slot)
 *   CTS:   clear-to-send for RTS number `rdv`: where to write it — written
 *          by the receiver into the sender's region with imm CTS(rdv)
 * The large message itself is written straight into the posted receive
 * buffer, its last write carrying imm DONE(rdv).  A zero-length write with
 * imm CREDIT(n) returns n ring slots when no header is going the other way.
 */
#ifndef LOOM_TRANSPORT_IB_PROTO_H
#define LOOM_TRANSPORT_IB_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define IB_HDR_BYTES 32
#define IB_CTS_BYTES 32

enum ib_msg_kind { IB_MSG_EAGER = 1, IB_MSG_RTS = 2 };

struct ib_msg_hdr {
  uint8_t kind;     /* enum ib_msg_kind */
  uint16_t credits; /* ring slots returned to the receiver of this header */
  uint32_t seq;     /* message number on this connection and direction */
  uint64_t len;     /* message bytes */
  uint64_t fp[2];   /* the call's fingerprint */
};

struct ib_cts {
  uint16_t credits;
  uint32_t rdv;  /* rendezvous number this CTS answers */
  uint64_t addr; /* the receive buffer */
  uint64_t len;
  uint32_t rkey;
};

void ib_hdr_encode(const struct ib_msg_hdr *h, uint8_t out[IB_HDR_BYTES]);
/* 0, or -1 when the bytes are not a header (bad magic or kind). */
int ib_hdr_decode(const uint8_t in[IB_HDR_BYTES], struct ib_msg_hdr *h);
void ib_cts_encode(const struct ib_cts *c, uint8_t out[IB_CTS_BYTES]);
int ib_cts_decode(const uint8_t in[IB_CTS_BYTES], struct ib_cts *c);

/* ---- immediates: type in the top 4 bits, value in the low 28 ---- */
enum ib_imm_type {
  IB_IMM_SLOT = 1,   /* value: ring slot written */
  IB_IMM_CTS = 2,    /* value: rendezvous number (low 28 bits) */
  IB_IMM_DONE = 3,   /* value: rendezvous number (low 28 bits) */
  IB_IMM_CREDIT = 4, /* value: slots returned */
};
#define IB_IMM_VALUE_MASK 0x0fffffffu

static inline uint32_t ib_imm_make(enum ib_imm_type t, uint32_t value) {
  return (uint32_t)t << 28 | (value & IB_IMM_VALUE_MASK);
}
static inline enum ib_imm_type ib_imm_type_of(uint32_t imm) {
  return (enum ib_imm_type)(imm >> 28);
}
static inline uint32_t ib_imm_value(uint32_t imm) { return imm & IB_IMM_VALUE_MASK; }

#endif
