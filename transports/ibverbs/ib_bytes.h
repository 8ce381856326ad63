/*
 * ib_bytes.h — little-endian byte order for everything the ibverbs
 * transport puts on the wire or into a peer's memory (handshake, slot
 * headers, CTS entries), so that two hosts of any byte order agree and a
 * foreign or torn record is recognised by its layout, never trusted.
 */
#ifndef LOOM_TRANSPORT_IB_BYTES_H
#define LOOM_TRANSPORT_IB_BYTES_H

#include <stdint.h>

static inline void ib_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void ib_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline void ib_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t ib_get_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t ib_get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static inline uint64_t ib_get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static inline int ib_is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

#endif
