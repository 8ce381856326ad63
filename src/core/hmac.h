/*
 * hmac.h — SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), for the proofs
 * that a connecting process knows its job's secret (net/auth.h).
 * Small and dependency-free: Loom links no crypto library.
 */
#ifndef LOOM_CORE_HMAC_H
#define LOOM_CORE_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_SHA256_BYTES 32

struct loom_sha256 {
  uint32_t h[8];
  uint64_t bytes;
  uint8_t block[64];
  size_t used;
};

void loom_sha256_init(struct loom_sha256 *c);
void loom_sha256_update(struct loom_sha256 *c, const void *data, size_t len);
void loom_sha256_final(struct loom_sha256 *c, uint8_t out[LOOM_SHA256_BYTES]);
void loom_sha256(const void *data, size_t len, uint8_t out[LOOM_SHA256_BYTES]);

/* HMAC-SHA256 over the concatenation of nparts buffers. */
struct loom_bytes {
  const void *p;
  size_t len;
};
void loom_hmac_sha256(const uint8_t *key, size_t keylen, const struct loom_bytes *parts,
                      int nparts, uint8_t out[LOOM_SHA256_BYTES]);

/* Constant-time comparison: 1 when the len bytes are equal. */
int loom_bytes_equal_ct(const uint8_t *a, const uint8_t *b, size_t len);

#endif
