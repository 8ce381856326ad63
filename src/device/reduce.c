/*
 * reduce.c — host reduction kernels (see reduce.h for the semantics).
 *
 * Speed: all-reduce spends its compute time here, on buffers of megabytes,
 * so every (type, op) pair gets its own loop that GCC and Clang
 * auto-vectorise.  Two details make that work:
 *
 *  - Aliasing.  dst may be the same pointer as a and/or b.  Each kernel
 *    therefore comes in four restrict-qualified variants (dst, a, b all
 *    distinct; dst == a; dst == b; dst == a == b), so the compiler needs no
 *    run-time overlap checks, which GCC's -O2 cost model would refuse.
 *  - Trip counts.  GCC 12 at -O2 (the "very-cheap" vectoriser cost model)
 *    only vectorises a loop whose trip count is a known multiple of the
 *    vector length, so each kernel runs blocks of LOOM_BLOCK_BYTES
 *    followed by a short scalar tail.
 *
 * On x86-64 the choice is made at run time (CPUID), with no -m flags needed:
 *  - AVX2 + F16C: the integer/float32/float64 kernels are compiled a second
 *    time with __attribute__((target("avx2"))) (twice the vector width; about
 *    1.5-2x faster on cache-resident data); bfloat16 uses hand-written AVX2
 *    (integer-shift conversion, 16 lanes); float16 uses F16C.
 *  - AVX + F16C only: float16 uses F16C, the rest the baseline kernels.
 *  - Otherwise (and on other architectures): baseline kernels, vectorised
 *    for the baseline ISA (SSE2 on x86-64); float16 is converted in scalar
 *    code, bfloat16 in a loop of integer shifts that auto-vectorises.
 * All paths give bit-identical results (half.h matches F16C exactly).
 *
 * Integer sum and prod are done in the unsigned type of the same width (the
 * bits of a two's-complement wrap-around result do not depend on
 * signedness), so int8/int32/int64 share those kernels with uint8/32/64 and
 * there is no signed overflow.
 *
 * For testing on x86: define LOOM_REDUCE_PORTABLE_ONLY to compile without
 * the x86 SIMD paths, or LOOM_REDUCE_NO_AVX2 to stop at AVX + F16C.
 */
#include "device/reduce.h"

#include <stdatomic.h>
#include <stdint.h>

#include "device/half.h"

#if defined(__x86_64__) && !defined(LOOM_REDUCE_PORTABLE_ONLY) &&              \
    (defined(__GNUC__) || defined(__clang__))
#define LOOM_HAVE_X86_SIMD 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define LOOM_HAVE_X86_SIMD 0
#endif

/* Every loop here runs blocks of this many bytes (one AVX2 vector, two
 * SSE2 ones), then a scalar tail: one loop, whatever the size.  With
 * blocks of 64 elements and a second loop of 8-element blocks for the
 * rest, a 2-rank float32 all-reduce of 96-248 B, reduced straight from
 * the shared-memory cell, took 0.1 us longer than one of 256 B (the
 * second loop's sizes; p50, in the VM's slow mode; cause not found: no
 * PMU here), and 0.81x the time with this one loop
 * (docs/history/performance-log.md). */
#define LOOM_BLOCK_BYTES 32

/* ---- Names and sizes ----------------------------------------------------- */

const char *loom_datatype_name(loomDataType_t dt) {
  switch (dt) {
  case loomInt8:
    return "int8";
  case loomUint8:
    return "uint8";
  case loomInt32:
    return "int32";
  case loomUint32:
    return "uint32";
  case loomInt64:
    return "int64";
  case loomUint64:
    return "uint64";
  case loomFloat16:
    return "float16";
  case loomFloat32:
    return "float32";
  case loomFloat64:
    return "float64";
  case loomBfloat16:
    return "bfloat16";
  default:
    return "invalid";
  }
}

const char *loom_redop_name(loomRedOp_t op) {
  switch (op) {
  case loomSum:
    return "sum";
  case loomProd:
    return "prod";
  case loomMax:
    return "max";
  case loomMin:
    return "min";
  case loomAvg:
    return "avg";
  default:
    return "invalid";
  }
}

/* ---- Element operations -------------------------------------------------- */

/* Integers (unsigned for add/mul: wrap-around without undefined behaviour;
 * the cast back truncates uint8 results promoted to int). */
#define OP_ADD(T, x, y) ((T)((x) + (y)))
#define OP_MUL(T, x, y) ((T)((x) * (y)))
#define OP_MAX(T, x, y) ((x) > (y) ? (x) : (y))
#define OP_MIN(T, x, y) ((x) < (y) ? (x) : (y))

/* Floats.  max/min return x when x is NaN and y when y is NaN (x > NaN and
 * x < NaN are false), so a NaN in either input comes out; this matches
 * (v)maxps/(v)minps with an extra "x is NaN" blend and vectorises. */
#define OP_FADD(T, x, y) ((x) + (y))
#define OP_FMUL(T, x, y) ((x) * (y))
#define OP_FMAX(T, x, y) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define OP_FMIN(T, x, y) (((x) < (y) || (x) != (x)) ? (x) : (y))

/* 16-bit floats: widen, combine in float32, round back to nearest even. */
#define OP_BF16(FOP, x, y)                                                     \
  loom_float_to_bf16(FOP(float, loom_bf16_to_float(x), loom_bf16_to_float(y)))
#define OP_BADD(T, x, y) OP_BF16(OP_FADD, x, y)
#define OP_BMUL(T, x, y) OP_BF16(OP_FMUL, x, y)
#define OP_BMAX(T, x, y) OP_BF16(OP_FMAX, x, y)
#define OP_BMIN(T, x, y) OP_BF16(OP_FMIN, x, y)

#define OP_HALF(FOP, x, y)                                                     \
  loom_float_to_half(FOP(float, loom_half_to_float(x), loom_half_to_float(y)))
#define OP_HADD(T, x, y) OP_HALF(OP_FADD, x, y)
#define OP_HMUL(T, x, y) OP_HALF(OP_FMUL, x, y)
#define OP_HMAX(T, x, y) OP_HALF(OP_FMAX, x, y)
#define OP_HMIN(T, x, y) OP_HALF(OP_FMIN, x, y)

/* ---- Kernel generator ---------------------------------------------------- */

typedef void (*loom_kernel_fn)(void *dst, const void *a, const void *b,
                               size_t n);

/* The loops must not be inlined into their dispatcher: GCC 12 then stops
 * vectorising them (the restrict guarantees get lost). */
#if defined(__GNUC__) || defined(__clang__)
#define LOOM_NOINLINE __attribute__((noinline))
#else
#define LOOM_NOINLINE
#endif

/* Runs STMT for i over [start, end) in blocks of exactly BLOCK elements:
 * GCC vectorises the fixed-count inner loop even at -O2. */
#define LOOM_BLOCKS(start, end, BLOCK, STMT)                                   \
  for (size_t blk_ = (start); blk_ < (end); blk_ += (BLOCK))                   \
    for (size_t j_ = 0; j_ < (BLOCK); j_++) {                                  \
      size_t i = blk_ + j_;                                                    \
      STMT;                                                                    \
    }

/* Runs STMT for i over [0, n) of elements of type T: blocks of
 * LOOM_BLOCK_BYTES, then the scalar tail. */
#define LOOM_LOOP(T, n, STMT)                                                  \
  do {                                                                         \
    enum { blk_elems_ = LOOM_BLOCK_BYTES / sizeof(T) };                        \
    size_t vec_n_ = (n) & ~(size_t)(blk_elems_ - 1);                           \
    LOOM_BLOCKS(0, vec_n_, blk_elems_, STMT);                                  \
    for (size_t i = vec_n_; i < (n); i++)                                      \
      STMT;                                                                    \
  } while (0)

/* Defines NAME(dst, a, b, n) computing dst[i] = OP(T, a[i], b[i]) over
 * elements of type T, with one restrict-qualified loop per aliasing case.
 * ATTR is empty or a target attribute. */
#define DEFINE_KERNEL(NAME, T, OP, ATTR)                                       \
  ATTR LOOM_NOINLINE static void NAME##_abc(                                   \
      T *restrict d, const T *restrict a, const T *restrict b, size_t n) {     \
    LOOM_LOOP(T, n, d[i] = OP(T, a[i], b[i]));                                 \
  }                                                                            \
  ATTR LOOM_NOINLINE static void NAME##_da(T *restrict d, const T *restrict b, \
                                           size_t n) {                         \
    LOOM_LOOP(T, n, d[i] = OP(T, d[i], b[i]));                                 \
  }                                                                            \
  ATTR LOOM_NOINLINE static void NAME##_db(T *restrict d, const T *restrict a, \
                                           size_t n) {                         \
    LOOM_LOOP(T, n, d[i] = OP(T, a[i], d[i]));                                 \
  }                                                                            \
  ATTR LOOM_NOINLINE static void NAME##_dab(T *restrict d, size_t n) {         \
    LOOM_LOOP(T, n, d[i] = OP(T, d[i], d[i]));                                 \
  }                                                                            \
  static void NAME(void *dst, const void *a, const void *b, size_t n) {        \
    if (dst == a && dst == b)                                                  \
      NAME##_dab((T *)dst, n);                                                 \
    else if (dst == a)                                                         \
      NAME##_da((T *)dst, (const T *)b, n);                                    \
    else if (dst == b)                                                         \
      NAME##_db((T *)dst, (const T *)a, n);                                    \
    else                                                                       \
      NAME##_abc((T *)dst, (const T *)a, (const T *)b, n);                     \
  }

/* The integer, float32 and float64 kernels, named P##_u8_sum and so on.
 * Sum and prod are shared by signed and unsigned integers of each width;
 * max and min depend on signedness. */
#define DEFINE_NUMERIC_KERNELS(P, ATTR)                                        \
  DEFINE_KERNEL(P##_u8_sum, uint8_t, OP_ADD, ATTR)                             \
  DEFINE_KERNEL(P##_u8_prod, uint8_t, OP_MUL, ATTR)                            \
  DEFINE_KERNEL(P##_u32_sum, uint32_t, OP_ADD, ATTR)                           \
  DEFINE_KERNEL(P##_u32_prod, uint32_t, OP_MUL, ATTR)                          \
  DEFINE_KERNEL(P##_u64_sum, uint64_t, OP_ADD, ATTR)                           \
  DEFINE_KERNEL(P##_u64_prod, uint64_t, OP_MUL, ATTR)                          \
  DEFINE_KERNEL(P##_i8_max, int8_t, OP_MAX, ATTR)                              \
  DEFINE_KERNEL(P##_i8_min, int8_t, OP_MIN, ATTR)                              \
  DEFINE_KERNEL(P##_u8_max, uint8_t, OP_MAX, ATTR)                             \
  DEFINE_KERNEL(P##_u8_min, uint8_t, OP_MIN, ATTR)                             \
  DEFINE_KERNEL(P##_i32_max, int32_t, OP_MAX, ATTR)                            \
  DEFINE_KERNEL(P##_i32_min, int32_t, OP_MIN, ATTR)                            \
  DEFINE_KERNEL(P##_u32_max, uint32_t, OP_MAX, ATTR)                           \
  DEFINE_KERNEL(P##_u32_min, uint32_t, OP_MIN, ATTR)                           \
  DEFINE_KERNEL(P##_i64_max, int64_t, OP_MAX, ATTR)                            \
  DEFINE_KERNEL(P##_i64_min, int64_t, OP_MIN, ATTR)                            \
  DEFINE_KERNEL(P##_u64_max, uint64_t, OP_MAX, ATTR)                           \
  DEFINE_KERNEL(P##_u64_min, uint64_t, OP_MIN, ATTR)                           \
  DEFINE_KERNEL(P##_f32_sum, float, OP_FADD, ATTR)                             \
  DEFINE_KERNEL(P##_f32_prod, float, OP_FMUL, ATTR)                            \
  DEFINE_KERNEL(P##_f32_max, float, OP_FMAX, ATTR)                             \
  DEFINE_KERNEL(P##_f32_min, float, OP_FMIN, ATTR)                             \
  DEFINE_KERNEL(P##_f64_sum, double, OP_FADD, ATTR)                            \
  DEFINE_KERNEL(P##_f64_prod, double, OP_FMUL, ATTR)                           \
  DEFINE_KERNEL(P##_f64_max, double, OP_FMAX, ATTR)                            \
  DEFINE_KERNEL(P##_f64_min, double, OP_FMIN, ATTR)

/* A [datatype][op] table (loomAvg reduces as loomSum) of the kernels from
 * DEFINE_NUMERIC_KERNELS(P, ...) and the given 16-bit float kernels. */
#define KERNEL_TABLE(P, F16, BF16)                                             \
  {                                                                            \
    [loomInt8] = {P##_u8_sum, P##_u8_prod, P##_i8_max, P##_i8_min},            \
    [loomUint8] = {P##_u8_sum, P##_u8_prod, P##_u8_max, P##_u8_min},           \
    [loomInt32] = {P##_u32_sum, P##_u32_prod, P##_i32_max, P##_i32_min},       \
    [loomUint32] = {P##_u32_sum, P##_u32_prod, P##_u32_max, P##_u32_min},      \
    [loomInt64] = {P##_u64_sum, P##_u64_prod, P##_i64_max, P##_i64_min},       \
    [loomUint64] = {P##_u64_sum, P##_u64_prod, P##_u64_max, P##_u64_min},      \
    [loomFloat16] = {F16##_sum, F16##_prod, F16##_max, F16##_min},             \
    [loomFloat32] = {P##_f32_sum, P##_f32_prod, P##_f32_max, P##_f32_min},     \
    [loomFloat64] = {P##_f64_sum, P##_f64_prod, P##_f64_max, P##_f64_min},     \
    [loomBfloat16] = {BF16##_sum, BF16##_prod, BF16##_max, BF16##_min},        \
  }

/* ---- Baseline kernels ---------------------------------------------------- */

DEFINE_NUMERIC_KERNELS(k, )

/* bfloat16: the conversions are shifts and adds; this vectorises. */
DEFINE_KERNEL(k_bf16_sum, uint16_t, OP_BADD, )
DEFINE_KERNEL(k_bf16_prod, uint16_t, OP_BMUL, )
DEFINE_KERNEL(k_bf16_max, uint16_t, OP_BMAX, )
DEFINE_KERNEL(k_bf16_min, uint16_t, OP_BMIN, )

/* float16 without F16C: scalar conversions. */
DEFINE_KERNEL(k_f16_sum, uint16_t, OP_HADD, )
DEFINE_KERNEL(k_f16_prod, uint16_t, OP_HMUL, )
DEFINE_KERNEL(k_f16_max, uint16_t, OP_HMAX, )
DEFINE_KERNEL(k_f16_min, uint16_t, OP_HMIN, )

static const loom_kernel_fn loom_kernels[loomNumTypes][4] =
    KERNEL_TABLE(k, k_f16, k_bf16);

/* ---- x86: float16 with F16C, bfloat16 with AVX2 -------------------------- */

#if LOOM_HAVE_X86_SIMD

#define LOOM_F16C __attribute__((target("avx,f16c")))
#define LOOM_AVX2 __attribute__((target("avx2,f16c")))
#define LOOM_CVT_ROUND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

enum { LOOM_CPU_KNOWN = 1, LOOM_CPU_F16C = 2, LOOM_CPU_AVX2 = 4 };

/* LOOM_CPU_F16C: AVX and F16C; LOOM_CPU_AVX2: that and AVX2; both only if
 * the OS saves the AVX registers.  Read with CPUID/XGETBV (clang 14 lacks
 * __builtin_cpu_supports("f16c")). */
static int loom_detect_cpu(void) {
  unsigned int eax, ebx, ecx, edx;
  int features = LOOM_CPU_KNOWN;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return features;
  const unsigned int need =
      (1u << 27) /* OSXSAVE */ | (1u << 28) /* AVX */ | (1u << 29) /* F16C */;
  if ((ecx & need) != need)
    return features;
  unsigned int xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  if ((xcr0_lo & 6u) != 6u) /* XMM and YMM state */
    return features;
  features |= LOOM_CPU_F16C;
#ifndef LOOM_REDUCE_NO_AVX2 /* for testing the F16C-only path */
  if (__get_cpuid_max(0, NULL) >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    if (ebx & (1u << 5))
      features |= LOOM_CPU_AVX2;
  }
#endif
  return features;
}

/* Detected once and cached (CPUID is slow in virtual machines); callers
 * racing on the first use compute the same value. */
static int loom_cpu(int feature) {
  static atomic_int cached; /* 0: not yet known */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v == 0) {
    v = loom_detect_cpu();
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return (v & feature) != 0;
}

/* Eight-lane float ops; max/min propagate NaN like OP_FMAX/OP_FMIN:
 * vmaxps(x, y) is (x > y ? x : y), then x where x is NaN. */
LOOM_F16C static inline __m256 v_add(__m256 x, __m256 y) {
  return _mm256_add_ps(x, y);
}
LOOM_F16C static inline __m256 v_mul(__m256 x, __m256 y) {
  return _mm256_mul_ps(x, y);
}
LOOM_F16C static inline __m256 v_max(__m256 x, __m256 y) {
  return _mm256_blendv_ps(_mm256_max_ps(x, y), x,
                          _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
LOOM_F16C static inline __m256 v_min(__m256 x, __m256 y) {
  return _mm256_blendv_ps(_mm256_min_ps(x, y), x,
                          _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* 8 float16 <-> 8 floats. */
LOOM_F16C static inline __m256 v_load_half(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
LOOM_F16C static inline void v_store_half(uint16_t *p, __m256 v) {
  _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, LOOM_CVT_ROUND));
}

/* 16 bfloat16 <-> 2 x 8 floats.  Interleaving zeros below each bf16 is the
 * conversion; unpack and pack both work within 128-bit lanes, so the pack
 * puts the elements back in their order. */
LOOM_AVX2 static inline void v_load_bf16(const uint16_t *p, __m256 *lo,
                                         __m256 *hi) {
  __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
  __m256i z = _mm256_setzero_si256();
  *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
  *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
}
/* loom_float_to_bf16 on 8 lanes, result in the low 16 bits of each. */
LOOM_AVX2 static inline __m256i v_round_bf16(__m256 f) {
  __m256i x = _mm256_castps_si256(f);
  __m256i top = _mm256_srli_epi32(x, 16);
  __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
  __m256i r =
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
  r = _mm256_srli_epi32(r, 16);
  __m256i qnan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
  __m256 is_nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  return _mm256_castps_si256(_mm256_blendv_ps(
      _mm256_castsi256_ps(r), _mm256_castsi256_ps(qnan), is_nan));
}
LOOM_AVX2 static inline void v_store_bf16(uint16_t *p, __m256 lo, __m256 hi) {
  /* Every lane is in [0, 0xffff], so the saturating pack just narrows. */
  _mm256_storeu_si256((__m256i *)(void *)p,
                      _mm256_packus_epi32(v_round_bf16(lo), v_round_bf16(hi)));
}

/* Each step loads before it stores, so dst may alias a and/or b exactly.
 * The tail goes through zero-padded copies so that it gets exactly the same
 * arithmetic as the main loop. */
#define DEFINE_F16C_KERNEL(NAME, VOP)                                          \
  LOOM_F16C static void NAME(void *dst, const void *a, const void *b,          \
                             size_t n) {                                       \
    uint16_t *d = (uint16_t *)dst;                                             \
    const uint16_t *x = (const uint16_t *)a, *y = (const uint16_t *)b;         \
    size_t i = 0;                                                              \
    for (; i + 16 <= n; i += 16) {                                             \
      __m256 r0 = VOP(v_load_half(x + i), v_load_half(y + i));                 \
      __m256 r1 = VOP(v_load_half(x + i + 8), v_load_half(y + i + 8));         \
      v_store_half(d + i, r0);                                                 \
      v_store_half(d + i + 8, r1);                                             \
    }                                                                          \
    for (; i + 8 <= n; i += 8)                                                 \
      v_store_half(d + i, VOP(v_load_half(x + i), v_load_half(y + i)));        \
    if (i < n) {                                                               \
      uint16_t tx[8] = {0}, ty[8] = {0}, td[8];                                \
      memcpy(tx, x + i, (n - i) * sizeof *tx);                                 \
      memcpy(ty, y + i, (n - i) * sizeof *ty);                                 \
      v_store_half(td, VOP(v_load_half(tx), v_load_half(ty)));                 \
      memcpy(d + i, td, (n - i) * sizeof *td);                                 \
    }                                                                          \
  }

#define DEFINE_BF16_AVX2_KERNEL(NAME, VOP)                                     \
  LOOM_AVX2 static void NAME(void *dst, const void *a, const void *b,          \
                             size_t n) {                                       \
    uint16_t *d = (uint16_t *)dst;                                             \
    const uint16_t *x = (const uint16_t *)a, *y = (const uint16_t *)b;         \
    __m256 xl, xh, yl, yh;                                                     \
    size_t i = 0;                                                              \
    for (; i + 16 <= n; i += 16) {                                             \
      v_load_bf16(x + i, &xl, &xh);                                            \
      v_load_bf16(y + i, &yl, &yh);                                            \
      v_store_bf16(d + i, VOP(xl, yl), VOP(xh, yh));                           \
    }                                                                          \
    if (i < n) {                                                               \
      uint16_t tx[16] = {0}, ty[16] = {0}, td[16];                             \
      memcpy(tx, x + i, (n - i) * sizeof *tx);                                 \
      memcpy(ty, y + i, (n - i) * sizeof *ty);                                 \
      v_load_bf16(tx, &xl, &xh);                                               \
      v_load_bf16(ty, &yl, &yh);                                               \
      v_store_bf16(td, VOP(xl, yl), VOP(xh, yh));                              \
      memcpy(d + i, td, (n - i) * sizeof *td);                                 \
    }                                                                          \
  }

DEFINE_F16C_KERNEL(k_f16c_sum, v_add)
DEFINE_F16C_KERNEL(k_f16c_prod, v_mul)
DEFINE_F16C_KERNEL(k_f16c_max, v_max)
DEFINE_F16C_KERNEL(k_f16c_min, v_min)

DEFINE_BF16_AVX2_KERNEL(k_bf16_avx2_sum, v_add)
DEFINE_BF16_AVX2_KERNEL(k_bf16_avx2_prod, v_mul)
DEFINE_BF16_AVX2_KERNEL(k_bf16_avx2_max, v_max)
DEFINE_BF16_AVX2_KERNEL(k_bf16_avx2_min, v_min)

static const loom_kernel_fn loom_f16c_kernels[4] = {k_f16c_sum, k_f16c_prod,
                                                    k_f16c_max, k_f16c_min};

LOOM_F16C static void scale_f16c(uint16_t *p, size_t n, float div) {
  __m256 vdiv = _mm256_set1_ps(div);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    v_store_half(p + i, _mm256_div_ps(v_load_half(p + i), vdiv));
  if (i < n) {
    uint16_t t[8] = {0};
    memcpy(t, p + i, (n - i) * sizeof *t);
    v_store_half(t, _mm256_div_ps(v_load_half(t), vdiv));
    memcpy(p + i, t, (n - i) * sizeof *t);
  }
}

LOOM_AVX2 static void scale_bf16_avx2(uint16_t *p, size_t n, float div) {
  __m256 vdiv = _mm256_set1_ps(div), lo, hi;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v_load_bf16(p + i, &lo, &hi);
    v_store_bf16(p + i, _mm256_div_ps(lo, vdiv), _mm256_div_ps(hi, vdiv));
  }
  if (i < n) {
    uint16_t t[16] = {0};
    memcpy(t, p + i, (n - i) * sizeof *t);
    v_load_bf16(t, &lo, &hi);
    v_store_bf16(t, _mm256_div_ps(lo, vdiv), _mm256_div_ps(hi, vdiv));
    memcpy(p + i, t, (n - i) * sizeof *t);
  }
}

/* The numeric kernels again, vectorised for AVX2. */
DEFINE_NUMERIC_KERNELS(k_avx2, LOOM_AVX2)

static const loom_kernel_fn loom_kernels_avx2[loomNumTypes][4] =
    KERNEL_TABLE(k_avx2, k_f16c, k_bf16_avx2);

#endif /* LOOM_HAVE_X86_SIMD */

/* ---- Public entry points ------------------------------------------------- */

void loom_reduce(void *dst, const void *a, const void *b, size_t count,
                 loomDataType_t dt, loomRedOp_t op) {
  if (count == 0 || (unsigned)dt >= (unsigned)loomNumTypes ||
      (unsigned)op >= (unsigned)loomNumOps)
    return;
  if (op == loomAvg)
    op = loomSum;
#if LOOM_HAVE_X86_SIMD
  if (loom_cpu(LOOM_CPU_AVX2)) {
    loom_kernels_avx2[dt][op](dst, a, b, count);
    return;
  }
  if (dt == loomFloat16 && loom_cpu(LOOM_CPU_F16C)) {
    loom_f16c_kernels[op](dst, a, b, count);
    return;
  }
#endif
  loom_kernels[dt][op](dst, a, b, count);
}

/* buf[i] /= n for one type; DIV_T is the type the division is done in. */
#define SCALE_LOOP(T, DIV_T, buf, count, n)                                    \
  do {                                                                         \
    T *restrict p_ = (T *)(buf);                                               \
    DIV_T n_ = (DIV_T)(n);                                                     \
    LOOM_LOOP(T, count, p_[i] = (T)(p_[i] / n_));                              \
  } while (0)

void loom_scale_avg(void *buf, size_t count, loomDataType_t dt, int nranks) {
  if (count == 0 || nranks <= 1)
    return;
  switch (dt) {
  /* Integer division does not vectorise (and is slow), so 8- and 32-bit
   * integers divide in float and double and truncate, which gives exactly
   * C's truncating integer division: x and n convert exactly (an n that
   * float cannot hold exceeds every 8-bit x, so both quotients are 0), and
   * with x = q*n + r, 0 <= r < n, the rounding error of x/n, at most
   * |x/n| * 2^-24 (float, |x| <= 255) or |x/n| * 2^-53 (double, |x| < 2^32),
   * is below the distance 1/n from x/n to the next integer, so truncating
   * the rounded quotient gives q.  64-bit integers use integer division. */
  case loomInt8:
    SCALE_LOOP(int8_t, float, buf, count, nranks);
    break;
  case loomUint8:
    SCALE_LOOP(uint8_t, float, buf, count, nranks);
    break;
  case loomInt32:
    SCALE_LOOP(int32_t, double, buf, count, nranks);
    break;
  case loomUint32:
    SCALE_LOOP(uint32_t, double, buf, count, nranks);
    break;
  case loomInt64:
    SCALE_LOOP(int64_t, int64_t, buf, count, nranks);
    break;
  case loomUint64:
    SCALE_LOOP(uint64_t, uint64_t, buf, count, nranks);
    break;
  case loomFloat32:
    SCALE_LOOP(float, float, buf, count, nranks);
    break;
  case loomFloat64:
    SCALE_LOOP(double, double, buf, count, nranks);
    break;
  case loomFloat16: {
    uint16_t *restrict p = (uint16_t *)buf;
    float n = (float)nranks;
#if LOOM_HAVE_X86_SIMD
    if (loom_cpu(LOOM_CPU_F16C)) {
      scale_f16c(p, count, n);
      break;
    }
#endif
    LOOM_LOOP(uint16_t, count, p[i] = loom_float_to_half(loom_half_to_float(p[i]) / n));
    break;
  }
  case loomBfloat16: {
    uint16_t *restrict p = (uint16_t *)buf;
    float n = (float)nranks;
#if LOOM_HAVE_X86_SIMD
    if (loom_cpu(LOOM_CPU_AVX2)) {
      scale_bf16_avx2(p, count, n);
      break;
    }
#endif
    LOOM_LOOP(uint16_t, count, p[i] = loom_float_to_bf16(loom_bf16_to_float(p[i]) / n));
    break;
  }
  default:
    break;
  }
}

void loom_premul(void *dst, const void *src, size_t count, loomDataType_t dt,
                 const void *scalar) {
  enum { CHUNK = 512 };
  size_t esize = loom_datatype_size(dt);
  _Alignas(64) unsigned char fill[CHUNK * 8];
  size_t chunk = count < CHUNK ? count : CHUNK;
  for (size_t i = 0; i < chunk; i++)
    memcpy(fill + i * esize, scalar, esize);
  for (size_t i = 0; i < count; i += CHUNK) {
    size_t m = count - i < CHUNK ? count - i : CHUNK;
    loom_reduce((char *)dst + i * esize, (const char *)src + i * esize, fill, m, dt, loomProd);
  }
}
