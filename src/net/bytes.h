/*
 * bytes.h — the one byte order of everything Loom puts on a wire or into a
 * peer's memory: big-endian (network order), written and read a byte at a
 * time, so two hosts of any byte order agree and no record is read through
 * a cast of unaligned memory.  The bootstrap, the topology exchange and
 * every transport's headers use these and nothing else.
 */
#ifndef LOOM_NET_BYTES_H
#define LOOM_NET_BYTES_H

#include <stdint.h>

static inline void loom_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static inline void loom_put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static inline void loom_put_u64(uint8_t *p, uint64_t v) {
  loom_put_u32(p, (uint32_t)(v >> 32));
  loom_put_u32(p + 4, (uint32_t)v);
}

static inline uint16_t loom_get_u16(const uint8_t *p) {
  return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t loom_get_u32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t loom_get_u64(const uint8_t *p) {
  return (uint64_t)loom_get_u32(p) << 32 | loom_get_u32(p + 4);
}

/* Ring sizes and slot counts read off a wire must be powers of two. */
static inline int loom_is_pow2_u32(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

#endif
