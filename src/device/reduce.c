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
 *    vector length, so each kernel runs a main loop over a multiple of
 *    LOOM_BLOCK elements followed by a short scalar tail.
 *
 * float16 uses the F16C conversion instructions (8 lanes of AVX) when the
 * CPU has them, chosen at run time (functions compiled with
 * __attribute__((target("avx,f16c"))), so no -m flags are needed);
 * otherwise a portable scalar loop.
 * bfloat16 converts with integer shifts in a loop that auto-vectorises.
 *
 * Integer sum and prod are done in the unsigned type of the same width (the
 * bits of a two's-complement wrap-around result do not depend on
 * signedness), so int8/int32/int64 share those kernels with uint8/32/64 and
 * there is no signed overflow.
 *
 * Define LOOM_REDUCE_PORTABLE_ONLY to compile without the x86 SIMD paths
 * (used to test the portable code on x86).
 */
#include "device/reduce.h"

#include <stdint.h>

#include "device/half.h"

#if defined(__x86_64__) && !defined(LOOM_REDUCE_PORTABLE_ONLY) &&             \
    (defined(__GNUC__) || defined(__clang__))
#define LOOM_HAVE_F16C_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define LOOM_HAVE_F16C_PATH 0
#endif

/* Main loops cover a multiple of this many elements (a multiple of every
 * vector length in use: 64 x int8 is two AVX2 vectors). */
#define LOOM_BLOCK 64

/* ---- Names and sizes ------------------------------------------------------ */

size_t loom_datatype_size(loomDataType_t dt) {
  switch (dt) {
  case loomInt8:
  case loomUint8:
    return 1;
  case loomFloat16:
  case loomBfloat16:
    return 2;
  case loomInt32:
  case loomUint32:
  case loomFloat32:
    return 4;
  case loomInt64:
  case loomUint64:
  case loomFloat64:
    return 8;
  default:
    return 0;
  }
}

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

/* ---- Element operations --------------------------------------------------- */

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
  loom_float_to_bf16(                                                          \
      FOP(float, loom_bf16_to_float(x), loom_bf16_to_float(y)))
#define OP_BADD(T, x, y) OP_BF16(OP_FADD, x, y)
#define OP_BMUL(T, x, y) OP_BF16(OP_FMUL, x, y)
#define OP_BMAX(T, x, y) OP_BF16(OP_FMAX, x, y)
#define OP_BMIN(T, x, y) OP_BF16(OP_FMIN, x, y)

#define OP_HALF(FOP, x, y)                                                     \
  loom_float_to_half(                                                          \
      FOP(float, loom_half_to_float(x), loom_half_to_float(y)))
#define OP_HADD(T, x, y) OP_HALF(OP_FADD, x, y)
#define OP_HMUL(T, x, y) OP_HALF(OP_FMUL, x, y)
#define OP_HMAX(T, x, y) OP_HALF(OP_FMAX, x, y)
#define OP_HMIN(T, x, y) OP_HALF(OP_FMIN, x, y)

/* ---- Kernel generator ------------------------------------------------------ */

typedef void (*loom_kernel_fn)(void *dst, const void *a, const void *b,
                               size_t n);

/* The loops must not be inlined into their dispatcher: GCC 12 then stops
 * vectorising them (the restrict guarantees get lost). */
#if defined(__GNUC__) || defined(__clang__)
#define LOOM_NOINLINE __attribute__((noinline))
#else
#define LOOM_NOINLINE
#endif

/* Runs STMT for i over [0, n): blocks of exactly LOOM_BLOCK elements, whose
 * fixed-count inner loop GCC vectorises even at -O2, then the scalar tail. */
#define LOOM_LOOP(n, STMT)                                                     \
  do {                                                                         \
    size_t main_n_ = (n) & ~(size_t)(LOOM_BLOCK - 1);                          \
    for (size_t blk_ = 0; blk_ < main_n_; blk_ += LOOM_BLOCK)                  \
      for (size_t j_ = 0; j_ < LOOM_BLOCK; j_++) {                             \
        size_t i = blk_ + j_;                                                  \
        STMT;                                                                  \
      }                                                                        \
    for (size_t i = main_n_; i < (n); i++)                                     \
      STMT;                                                                    \
  } while (0)

/* Defines NAME(dst, a, b, n) computing dst[i] = OP(T, a[i], b[i]) over
 * elements of type T, with one restrict-qualified loop per aliasing case. */
#define DEFINE_KERNEL(NAME, T, OP)                                             \
  LOOM_NOINLINE static void NAME##_abc(T *restrict d, const T *restrict a,                   \
                         const T *restrict b, size_t n) {                      \
    LOOM_LOOP(n, d[i] = OP(T, a[i], b[i]));                                    \
  }                                                                            \
  LOOM_NOINLINE static void NAME##_da(T *restrict d, const T *restrict b, size_t n) {        \
    LOOM_LOOP(n, d[i] = OP(T, d[i], b[i]));                                    \
  }                                                                            \
  LOOM_NOINLINE static void NAME##_db(T *restrict d, const T *restrict a, size_t n) {        \
    LOOM_LOOP(n, d[i] = OP(T, a[i], d[i]));                                    \
  }                                                                            \
  LOOM_NOINLINE static void NAME##_dab(T *restrict d, size_t n) {                            \
    LOOM_LOOP(n, d[i] = OP(T, d[i], d[i]));                                    \
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

/* Sum and prod, shared by signed and unsigned integers of each width. */
DEFINE_KERNEL(k_u8_sum, uint8_t, OP_ADD)
DEFINE_KERNEL(k_u8_prod, uint8_t, OP_MUL)
DEFINE_KERNEL(k_u32_sum, uint32_t, OP_ADD)
DEFINE_KERNEL(k_u32_prod, uint32_t, OP_MUL)
DEFINE_KERNEL(k_u64_sum, uint64_t, OP_ADD)
DEFINE_KERNEL(k_u64_prod, uint64_t, OP_MUL)

/* Integer max and min depend on signedness. */
DEFINE_KERNEL(k_i8_max, int8_t, OP_MAX)
DEFINE_KERNEL(k_i8_min, int8_t, OP_MIN)
DEFINE_KERNEL(k_u8_max, uint8_t, OP_MAX)
DEFINE_KERNEL(k_u8_min, uint8_t, OP_MIN)
DEFINE_KERNEL(k_i32_max, int32_t, OP_MAX)
DEFINE_KERNEL(k_i32_min, int32_t, OP_MIN)
DEFINE_KERNEL(k_u32_max, uint32_t, OP_MAX)
DEFINE_KERNEL(k_u32_min, uint32_t, OP_MIN)
DEFINE_KERNEL(k_i64_max, int64_t, OP_MAX)
DEFINE_KERNEL(k_i64_min, int64_t, OP_MIN)
DEFINE_KERNEL(k_u64_max, uint64_t, OP_MAX)
DEFINE_KERNEL(k_u64_min, uint64_t, OP_MIN)

DEFINE_KERNEL(k_f32_sum, float, OP_FADD)
DEFINE_KERNEL(k_f32_prod, float, OP_FMUL)
DEFINE_KERNEL(k_f32_max, float, OP_FMAX)
DEFINE_KERNEL(k_f32_min, float, OP_FMIN)
DEFINE_KERNEL(k_f64_sum, double, OP_FADD)
DEFINE_KERNEL(k_f64_prod, double, OP_FMUL)
DEFINE_KERNEL(k_f64_max, double, OP_FMAX)
DEFINE_KERNEL(k_f64_min, double, OP_FMIN)

DEFINE_KERNEL(k_bf16_sum, uint16_t, OP_BADD)
DEFINE_KERNEL(k_bf16_prod, uint16_t, OP_BMUL)
DEFINE_KERNEL(k_bf16_max, uint16_t, OP_BMAX)
DEFINE_KERNEL(k_bf16_min, uint16_t, OP_BMIN)

/* Portable float16 (scalar; used when F16C is missing). */
DEFINE_KERNEL(k_f16_sum, uint16_t, OP_HADD)
DEFINE_KERNEL(k_f16_prod, uint16_t, OP_HMUL)
DEFINE_KERNEL(k_f16_max, uint16_t, OP_HMAX)
DEFINE_KERNEL(k_f16_min, uint16_t, OP_HMIN)

/* Indexed by [datatype][op]; loomAvg reduces as loomSum. */
static const loom_kernel_fn loom_kernels[loomNumTypes][4] = {
    [loomInt8] = {k_u8_sum, k_u8_prod, k_i8_max, k_i8_min},
    [loomUint8] = {k_u8_sum, k_u8_prod, k_u8_max, k_u8_min},
    [loomInt32] = {k_u32_sum, k_u32_prod, k_i32_max, k_i32_min},
    [loomUint32] = {k_u32_sum, k_u32_prod, k_u32_max, k_u32_min},
    [loomInt64] = {k_u64_sum, k_u64_prod, k_i64_max, k_i64_min},
    [loomUint64] = {k_u64_sum, k_u64_prod, k_u64_max, k_u64_min},
    [loomFloat16] = {k_f16_sum, k_f16_prod, k_f16_max, k_f16_min},
    [loomFloat32] = {k_f32_sum, k_f32_prod, k_f32_max, k_f32_min},
    [loomFloat64] = {k_f64_sum, k_f64_prod, k_f64_max, k_f64_min},
    [loomBfloat16] = {k_bf16_sum, k_bf16_prod, k_bf16_max, k_bf16_min},
};

/* ---- float16 with F16C ------------------------------------------------------ */

#if LOOM_HAVE_F16C_PATH

#define LOOM_F16C __attribute__((target("avx,f16c")))
#define LOOM_CVT_ROUND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* F16C and AVX in the CPU, and the OS saving the AVX registers.  Read with
 * CPUID/XGETBV (clang 14 lacks __builtin_cpu_supports("f16c")) once, then
 * cached: CPUID is slow in virtual machines.  Racing first callers compute
 * the same answer. */
static int loom_detect_f16c(void) {
  unsigned int eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return 0;
  const unsigned int need = (1u << 27) /* OSXSAVE */ | (1u << 28) /* AVX */ |
                            (1u << 29) /* F16C */;
  if ((ecx & need) != need)
    return 0;
  unsigned int xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  return (xcr0_lo & 6u) == 6u; /* XMM and YMM state enabled */
}

static int loom_cpu_has_f16c(void) {
  static int cached = -1; /* -1: not yet known */
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    v = loom_detect_f16c();
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
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

LOOM_F16C static inline __m256 v_load_half(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
LOOM_F16C static inline void v_store_half(uint16_t *p, __m256 v) {
  _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, LOOM_CVT_ROUND));
}

/* Each step loads before it stores, so dst may alias a and/or b exactly.
 * The tail (< 8 elements) goes through a zero-padded copy so that it gets
 * exactly the same arithmetic as the main loop. */
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

DEFINE_F16C_KERNEL(k_f16c_sum, v_add)
DEFINE_F16C_KERNEL(k_f16c_prod, v_mul)
DEFINE_F16C_KERNEL(k_f16c_max, v_max)
DEFINE_F16C_KERNEL(k_f16c_min, v_min)

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

#endif /* LOOM_HAVE_F16C_PATH */

/* ---- Public entry points ------------------------------------------------------ */

void loom_reduce(void *dst, const void *a, const void *b, size_t count,
                 loomDataType_t dt, loomRedOp_t op) {
  if (count == 0 || (unsigned)dt >= (unsigned)loomNumTypes ||
      (unsigned)op >= (unsigned)loomNumOps)
    return;
  if (op == loomAvg)
    op = loomSum;
#if LOOM_HAVE_F16C_PATH
  if (dt == loomFloat16 && loom_cpu_has_f16c()) {
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
    LOOM_LOOP(count, p_[i] = (T)(p_[i] / n_));                                 \
  } while (0)

void loom_scale_avg(void *buf, size_t count, loomDataType_t dt, int nranks) {
  if (count == 0 || nranks <= 1)
    return;
  switch (dt) {
  case loomInt8: /* int8/uint8 promote to int: plain C division */
    SCALE_LOOP(int8_t, int, buf, count, nranks);
    break;
  case loomUint8:
    SCALE_LOOP(uint8_t, int, buf, count, nranks);
    break;
  case loomInt32:
    SCALE_LOOP(int32_t, int32_t, buf, count, nranks);
    break;
  case loomUint32:
    SCALE_LOOP(uint32_t, uint32_t, buf, count, nranks);
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
#if LOOM_HAVE_F16C_PATH
    if (loom_cpu_has_f16c()) {
      scale_f16c(p, count, n);
      break;
    }
#endif
    LOOM_LOOP(count, p[i] = loom_float_to_half(loom_half_to_float(p[i]) / n));
    break;
  }
  case loomBfloat16: {
    uint16_t *restrict p = (uint16_t *)buf;
    float n = (float)nranks;
    LOOM_LOOP(count, p[i] = loom_float_to_bf16(loom_bf16_to_float(p[i]) / n));
    break;
  }
  default:
    break;
  }
}
