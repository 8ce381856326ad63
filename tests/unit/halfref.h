/*
 * halfref.h — helpers shared by the unit tests of the reduction kernels and
 * of the 16-bit float conversions: a random generator, bit casts, and slow
 * reference roundings to float16/bfloat16 written independently of
 * src/device/half.h.
 */
#ifndef LOOM_TESTS_HALFREF_H
#define LOOM_TESTS_HALFREF_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- Helpers ------------------------------------------------------------- */

#include "check_expect.h"

static uint64_t rng_state;

static inline uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

static inline float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t f_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline int half_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
static inline int bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

/* Value of a non-negative finite half, computed independently of half.h;
 * 0x7c00 counts as 2^16 (the next binade, for rounding at overflow). */
static inline double half_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0)
    return ldexp(m, -24);
  return ldexp(1024 + m, e - 25);
}

/* Reference float -> half: binary search of the representable magnitudes
 * and round to nearest even, with rounding as if the exponent were
 * unbounded (so anything at or above 65520 becomes Inf). */
static inline uint16_t ref_float_to_half(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f))
    return 0x7e00; /* only NaN-ness is compared */
  double v = fabs((double)f);
  if (isinf(f) || v >= 65536.0)
    return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7c00; /* half_value(lo) <= v < half_value(hi) */
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (half_value(mid) <= v)
      lo = mid;
    else
      hi = mid;
  }
  double dl = v - half_value(lo), dh = half_value(hi) - v;
  uint16_t r = (dl < dh || (dl == dh && (lo & 1) == 0)) ? lo : hi;
  return sign | r;
}

/* Reference float -> bf16: the two neighbours by truncation, compared in
 * double; 0x7f80 counts as 2^128. */
static inline double bf16_value(uint16_t b) {
  if (b == 0x7f80)
    return ldexp(1.0, 128);
  return (double)bits_f((uint32_t)b << 16);
}

static inline uint16_t ref_float_to_bf16(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f))
    return 0x7fc0;
  if (isinf(f))
    return sign | 0x7f80;
  double v = fabs((double)f);
  uint16_t lo = (uint16_t)((f_bits(f) & 0x7fffffffu) >> 16), hi = lo + 1;
  double dl = v - bf16_value(lo), dh = bf16_value(hi) - v;
  uint16_t r = (dl < dh || (dl == dh && (lo & 1) == 0)) ? lo : hi;
  return sign | r;
}

#endif
