/*
 * ib_wire.c — encoding and validation of the ibverbs connection handshake
 * (layout in ib_wire.h; offsets below).
 */
#include "ib_wire.h"
#include "net/bytes.h"
#include "core/hmac.h"

#include <string.h>

/* Offsets of the fields. */
enum {
  OFF_MAGIC = 0,       /* u16 */
  OFF_VERSION = 2,     /* u8, then one reserved byte */
  OFF_RANK = 4,        /* u32 */
  OFF_PEER = 8,        /* u32 */
  OFF_HASH = 12,       /* u64 */
  OFF_QPN = 20,        /* u32 */
  OFF_RING_ADDR = 24,  /* u64 */
  OFF_RING_RKEY = 32,  /* u32 */
  OFF_SLOT_BYTES = 36, /* u32 */
  OFF_NSLOTS = 40,     /* u16 */
  OFF_CREDITS = 42,    /* u16 */
  OFF_RDV_SLOTS = 44,  /* u16, then two reserved bytes */
  OFF_CHECKSUM = 48,   /* u32 over bytes [0, 48) */
};

/* FNV-1a, 32 bits: catches torn or corrupted private data, not forgery
 * (the communicator hash does that job). */
static uint32_t checksum(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 16777619u;
  return h;
}

uint64_t ib_wire_secret_hash(const uint8_t *secret, size_t len) {
  /* HMAC-SHA256 under the secret of a label only this use has: one-way,
   * and unlike any other value derived from the secret. */
  const struct loom_bytes label = {.p = "loom/ib-hello", .len = 13};
  uint8_t tag[LOOM_SHA256_BYTES];
  loom_hmac_sha256(secret, len, &label, 1, tag);
  uint64_t h = 0;
  for (int i = 0; i < 8; i++)
    h = h << 8 | tag[i];
  return h;
}

void ib_wire_encode(const struct ib_hello *h, uint8_t out[IB_WIRE_BYTES]) {
  memset(out, 0, IB_WIRE_BYTES);
  loom_put_u16(out + OFF_MAGIC, IB_WIRE_MAGIC);
  out[OFF_VERSION] = IB_WIRE_VERSION;
  loom_put_u32(out + OFF_RANK, h->rank);
  loom_put_u32(out + OFF_PEER, h->peer);
  loom_put_u64(out + OFF_HASH, h->comm_hash);
  loom_put_u32(out + OFF_QPN, h->qp_num);
  loom_put_u64(out + OFF_RING_ADDR, h->ring_addr);
  loom_put_u32(out + OFF_RING_RKEY, h->ring_rkey);
  loom_put_u32(out + OFF_SLOT_BYTES, h->slot_bytes);
  loom_put_u16(out + OFF_NSLOTS, h->nslots);
  loom_put_u16(out + OFF_CREDITS, h->credits);
  loom_put_u16(out + OFF_RDV_SLOTS, h->rdv_slots);
  loom_put_u32(out + OFF_CHECKSUM, checksum(out, OFF_CHECKSUM));
}

int ib_wire_peek_version(const uint8_t *in, size_t len) {
  return len > OFF_VERSION ? in[OFF_VERSION] : -1;
}

enum ib_wire_error ib_wire_decode(const uint8_t *in, size_t len, struct ib_hello *out) {
  if (in == NULL || len < IB_WIRE_BYTES)
    return IB_WIRE_TRUNCATED;
  if (loom_get_u16(in + OFF_MAGIC) != IB_WIRE_MAGIC)
    return IB_WIRE_BAD_MAGIC;
  if (in[OFF_VERSION] != IB_WIRE_VERSION)
    return IB_WIRE_BAD_VERSION;
  if (loom_get_u32(in + OFF_CHECKSUM) != checksum(in, OFF_CHECKSUM))
    return IB_WIRE_BAD_CHECKSUM;
  struct ib_hello h = {
      .version = in[OFF_VERSION],
      .rank = loom_get_u32(in + OFF_RANK),
      .peer = loom_get_u32(in + OFF_PEER),
      .comm_hash = loom_get_u64(in + OFF_HASH),
      .qp_num = loom_get_u32(in + OFF_QPN),
      .ring_addr = loom_get_u64(in + OFF_RING_ADDR),
      .ring_rkey = loom_get_u32(in + OFF_RING_RKEY),
      .slot_bytes = loom_get_u32(in + OFF_SLOT_BYTES),
      .nslots = loom_get_u16(in + OFF_NSLOTS),
      .credits = loom_get_u16(in + OFF_CREDITS),
      .rdv_slots = loom_get_u16(in + OFF_RDV_SLOTS),
  };
  if (!loom_is_pow2_u32(h.nslots) || h.nslots > IB_WIRE_MAX_SLOTS ||
      h.slot_bytes < IB_WIRE_MIN_SLOT_BYTES || h.slot_bytes > IB_WIRE_MAX_SLOT_BYTES ||
      h.slot_bytes % 64 != 0 || h.credits == 0 || h.credits > h.nslots ||
      !loom_is_pow2_u32(h.rdv_slots) || h.rdv_slots > IB_WIRE_MAX_RDV_SLOTS || h.ring_addr == 0)
    return IB_WIRE_BAD_GEOMETRY;
  *out = h;
  return IB_WIRE_OK;
}

const char *ib_wire_strerror(enum ib_wire_error e) {
  switch (e) {
  case IB_WIRE_OK:
    return "valid";
  case IB_WIRE_TRUNCATED:
    return "handshake truncated";
  case IB_WIRE_BAD_MAGIC:
    return "not a Loom ibverbs handshake (bad magic)";
  case IB_WIRE_BAD_VERSION:
    return "another version of Loom's ibverbs transport";
  case IB_WIRE_BAD_CHECKSUM:
    return "handshake corrupt (bad checksum)";
  case IB_WIRE_BAD_GEOMETRY:
    return "handshake describes an invalid receive ring";
  }
  return "unknown handshake error";
}
