/*
 * half.h — scalar conversions between float32 and the two 16-bit float
 * formats Loom reduces: IEEE 754 binary16 ("float16", "half") and bfloat16.
 *
 * Everything here is portable C11: bit casts through memcpy and integer
 * arithmetic (plus one exact float multiply on normal operands), so the
 * results do not depend on the floating-point environment (rounding mode,
 * FTZ/DAZ).  They match the x86 F16C instructions bit for bit, NaN payloads
 * included (checked against VCVTPH2PS for all 2^16 halves and VCVTPS2PH for
 * all 2^32 floats), so reduce.c's F16C and portable paths round alike.
 *
 *  - float16 -> float32 and bfloat16 -> float32 are exact.
 *  - float32 -> float16 and float32 -> bfloat16 round to nearest, ties to
 *    even; values too large for the format become +-Inf; NaN stays NaN (the
 *    quiet bit is set and the payload's top bits are kept), so a NaN never
 *    turns into Inf.
 *  - float16 subnormals are produced and consumed correctly.
 *
 * The functions are small and branch-light so that loops over them
 * auto-vectorise (reduce.c relies on this for bfloat16).
 */
#ifndef LOOM_DEVICE_HALF_H
#define LOOM_DEVICE_HALF_H

#include <stdint.h>
#include <string.h>

/* Host code everywhere; also device code in the CUDA backend's kernels
 * (cuda/kernels.cu), which must convert exactly as the host does. */
#ifdef __CUDACC__
#define LOOM_HALF_FN static inline __host__ __device__
#else
#define LOOM_HALF_FN static inline
#endif

LOOM_HALF_FN uint32_t loom_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

LOOM_HALF_FN float loom_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- IEEE binary16 ------------------------------------------------------- */

LOOM_HALF_FN float loom_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) {
    /* Inf, or NaN: keep the payload and make it quiet (as VCVTPH2PS does). */
    uint32_t nan = mant ? 0x00400000u : 0u;
    return loom_bits_f32(sign | 0x7f800000u | nan | (mant << 13));
  }
  if (exp == 0) {
    /* Zero or subnormal: mant * 2^-24, exact in float32. */
    float f = (float)mant * 0x1p-24f;
    return loom_bits_f32(sign | loom_f32_bits(f));
  }
  return loom_bits_f32(sign | ((exp + (127u - 15u)) << 23) | (mant << 13));
}

LOOM_HALF_FN uint16_t loom_float_to_half(float f) {
  uint32_t x = loom_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;

  if (ax > 0x7f800000u) /* NaN: quiet it, keep the top payload bits */
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) /* >= 65520 (and Inf): rounds to Inf */
    return (uint16_t)(sign | 0x7c00u);
  if (ax >= 0x38800000u) { /* >= 2^-14: a normal half */
    /* Rebias the exponent, then round the 13 dropped bits to nearest even;
     * a carry out of the mantissa correctly bumps the exponent. */
    uint32_t r = ax - ((127u - 15u) << 23);
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
  if (ax < 0x33000000u) /* < 2^-25: rounds to zero (2^-25 itself is a tie) */
    return sign;
  {
    /* Subnormal half: the value is m * 2^(e-150); in units of 2^-24 that is
     * m >> (126 - e), shift in 14..24, rounded to nearest even.  A result of
     * 0x400 (rounded up to the smallest normal) is the right encoding. */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t s = 126u - e;
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t halfway = 1u << (s - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u)))
      q++;
    return (uint16_t)(sign | q);
  }
}

/* ---- bfloat16 ------------------------------------------------------------ */

LOOM_HALF_FN float loom_bf16_to_float(uint16_t b) {
  return loom_bits_f32((uint32_t)b << 16);
}

/* Written without branches so that loops over it vectorise. */
LOOM_HALF_FN uint16_t loom_float_to_bf16(float f) {
  uint32_t x = loom_f32_bits(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (x >> 16) | 0x0040u;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

#endif /* LOOM_DEVICE_HALF_H */
