/*
 * check_reduce.c — unit tests of the host reduction kernels
 * (src/device/reduce.c); the 16-bit conversions are in check_half.c.
 *
 * Every datatype x op is checked against a scalar reference written here
 * (integer arithmetic done in 64 bits and truncated, float arithmetic done in
 * double and rounded), for several lengths, misalignments and every allowed
 * aliasing of dst with a and b.
 */
#include "device/half.h"
#include "device/reduce.h"
#include "loom.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "halfref.h"

/* ---- Reference reduction ------------------------------------------------- */

/* Integer ops in 64 bits, truncated to the type's width by the store. */
#define REF_INT(T, WIDE)                                                       \
  do {                                                                         \
    T x, y, r;                                                                 \
    memcpy(&x, a, sizeof x);                                                   \
    memcpy(&y, b, sizeof y);                                                   \
    uint64_t ux = (uint64_t)(WIDE)x, uy = (uint64_t)(WIDE)y;                   \
    switch (op) {                                                              \
    case loomSum:                                                              \
    case loomAvg:                                                              \
      r = (T)(ux + uy);                                                        \
      break;                                                                   \
    case loomProd:                                                             \
      r = (T)(ux * uy);                                                        \
      break;                                                                   \
    case loomMax:                                                              \
      r = (WIDE)x > (WIDE)y ? x : y;                                           \
      break;                                                                   \
    default:                                                                   \
      r = (WIDE)x < (WIDE)y ? x : y;                                           \
      break;                                                                   \
    }                                                                          \
    memcpy(out, &r, sizeof r);                                                 \
  } while (0)

/* Float ops in double; any NaN input gives NaN. */
static double ref_fop(loomRedOp_t op, double x, double y) {
  if (isnan(x) || isnan(y))
    return NAN;
  switch (op) {
  case loomSum:
  case loomAvg:
    return x + y;
  case loomProd:
    return x * y;
  case loomMax:
    return x > y ? x : y;
  default:
    return x < y ? x : y;
  }
}

static void ref_elem(loomDataType_t dt, loomRedOp_t op, const void *a,
                     const void *b, void *out) {
  switch (dt) {
  case loomInt8:
    REF_INT(int8_t, int64_t);
    break;
  case loomUint8:
    REF_INT(uint8_t, uint64_t);
    break;
  case loomInt32:
    REF_INT(int32_t, int64_t);
    break;
  case loomUint32:
    REF_INT(uint32_t, uint64_t);
    break;
  case loomInt64:
    REF_INT(int64_t, int64_t);
    break;
  case loomUint64:
    REF_INT(uint64_t, uint64_t);
    break;
  case loomFloat32: {
    float x, y, r;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    r = (float)ref_fop(op, x, y); /* double rounding is harmless for + * */
    memcpy(out, &r, 4);
    break;
  }
  case loomFloat64: {
    double x, y, r;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    r = ref_fop(op, x, y);
    memcpy(out, &r, 8);
    break;
  }
  case loomFloat16: {
    uint16_t x, y, r;
    memcpy(&x, a, 2);
    memcpy(&y, b, 2);
    r = ref_float_to_half(
        (float)ref_fop(op, loom_half_to_float(x), loom_half_to_float(y)));
    memcpy(out, &r, 2);
    break;
  }
  case loomBfloat16: {
    uint16_t x, y, r;
    memcpy(&x, a, 2);
    memcpy(&y, b, 2);
    r = ref_float_to_bf16(
        (float)ref_fop(op, loom_bf16_to_float(x), loom_bf16_to_float(y)));
    memcpy(out, &r, 2);
    break;
  }
  default:
    break;
  }
}

/* Does `got` match `want`?  Floats: any NaN matches NaN, and for max/min a
 * zero of either sign matches a zero; otherwise the bits must be equal. */
static int elem_matches(loomDataType_t dt, loomRedOp_t op, const void *got,
                        const void *want) {
  int minmax = (op == loomMax || op == loomMin);
  switch (dt) {
  case loomFloat32: {
    float g, w;
    memcpy(&g, got, 4);
    memcpy(&w, want, 4);
    if (isnan(w))
      return isnan(g);
    if (minmax && w == 0 && g == 0)
      return 1;
    return memcmp(got, want, 4) == 0;
  }
  case loomFloat64: {
    double g, w;
    memcpy(&g, got, 8);
    memcpy(&w, want, 8);
    if (isnan(w))
      return isnan(g);
    if (minmax && w == 0 && g == 0)
      return 1;
    return memcmp(got, want, 8) == 0;
  }
  case loomFloat16:
  case loomBfloat16: {
    uint16_t g, w;
    memcpy(&g, got, 2);
    memcpy(&w, want, 2);
    int (*is_nan)(uint16_t) = dt == loomFloat16 ? half_is_nan : bf16_is_nan;
    if (is_nan(w))
      return is_nan(g);
    if (minmax && (w & 0x7fff) == 0 && (g & 0x7fff) == 0)
      return 1;
    return g == w;
  }
  default:
    return memcmp(got, want, loom_datatype_size(dt)) == 0;
  }
}

/* ---- Test data ----------------------------------------------------------- */

static const float special_f[] = {
    NAN,       -NAN,     INFINITY,
    -INFINITY, 0.0f,     -0.0f,
    FLT_MIN,   -FLT_MIN, 1e-45f /* smallest subnormal */,
    FLT_MAX,   -FLT_MAX, 1.0f,
    -1.0f,
};
#define N_SPECIAL (sizeof special_f / sizeof special_f[0])

static float rand_float(void) {
  uint64_t r = rng();
  switch (r % 8) {
  case 0:
    return special_f[(r >> 8) % N_SPECIAL];
  case 1:
    return bits_f((uint32_t)(r >> 32)); /* any bit pattern */
  case 2:
    return (float)((int)((r >> 16) % 201) - 100); /* small integers */
  default:
    return (float)((double)(int64_t)(r >> 11) / 4503599627370496.0 * 1000.0);
  }
}

static void fill(void *buf, size_t n, loomDataType_t dt) {
  unsigned char *p = buf;
  size_t sz = loom_datatype_size(dt);
  for (size_t i = 0; i < n; i++, p += sz) {
    switch (dt) {
    case loomFloat32: {
      float f = rand_float();
      memcpy(p, &f, 4);
      break;
    }
    case loomFloat64: {
      double d = (rng() & 7) == 0 ? (double)bits_f((uint32_t)rng())
                                  : (double)rand_float() * 1.000000001;
      memcpy(p, &d, 8);
      break;
    }
    case loomFloat16: {
      uint16_t h = (rng() & 1) ? (uint16_t)rng()
                               : loom_float_to_half(rand_float() / 16.0f);
      memcpy(p, &h, 2);
      break;
    }
    case loomBfloat16: {
      uint16_t h =
          (rng() & 1) ? (uint16_t)rng() : loom_float_to_bf16(rand_float());
      memcpy(p, &h, 2);
      break;
    }
    default: { /* integers: random bits, sometimes an extreme or small one */
      uint64_t r = rng(), v = rng();
      uint64_t top = (uint64_t)1 << (8 * sz - 1); /* INTn_MIN's bits */
      if ((r & 15) == 0) {
        static const int pick[4] = {0, 1, 2, 3};
        switch (pick[(r >> 4) & 3]) {
        case 0:
          v = 0;
          break;
        case 1:
          v = ~(uint64_t)0; /* -1 / UINTn_MAX */
          break;
        case 2:
          v = top; /* INTn_MIN */
          break;
        default:
          v = top - 1; /* INTn_MAX */
          break;
        }
      } else if ((r & 15) == 1) {
        v = (uint64_t)((int64_t)(r >> 8) % 7); /* small, maybe negative */
      }
      memcpy(p, &v, sz); /* little-endian low bytes; any bits are valid */
      break;
    }
    }
  }
}

/* ---- Names and sizes ----------------------------------------------------- */

START_TEST(test_names_sizes) {
  static const struct {
    loomDataType_t dt;
    size_t size;
    const char *name;
  } types[] = {
      {loomInt8, 1, "int8"},       {loomUint8, 1, "uint8"},
      {loomInt32, 4, "int32"},     {loomUint32, 4, "uint32"},
      {loomInt64, 8, "int64"},     {loomUint64, 8, "uint64"},
      {loomFloat16, 2, "float16"}, {loomFloat32, 4, "float32"},
      {loomFloat64, 8, "float64"}, {loomBfloat16, 2, "bfloat16"},
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    ck_assert_uint_eq(loom_datatype_size(types[i].dt), types[i].size);
    ck_assert_str_eq(loom_datatype_name(types[i].dt), types[i].name);
  }
  ck_assert_uint_eq(loom_datatype_size(loomNumTypes), 0);
  ck_assert_uint_eq(loom_datatype_size((loomDataType_t)-1), 0);
  ck_assert_str_eq(loom_datatype_name(loomNumTypes), "invalid");
  ck_assert_str_eq(loom_datatype_name((loomDataType_t)-1), "invalid");

  ck_assert_str_eq(loom_redop_name(loomSum), "sum");
  ck_assert_str_eq(loom_redop_name(loomProd), "prod");
  ck_assert_str_eq(loom_redop_name(loomMax), "max");
  ck_assert_str_eq(loom_redop_name(loomMin), "min");
  ck_assert_str_eq(loom_redop_name(loomAvg), "avg");
  ck_assert_str_eq(loom_redop_name(loomNumOps), "invalid");
}
END_TEST

/* ---- Every datatype x op against the reference --------------------------- */

/* Around every block size of the kernels: 8-element blocks (8, 23, 33), the
 * 64-element blocks (64, 65, 72) and both with a tail (1003). */
static const size_t lengths[] = {0, 1, 7, 8, 23, 33, 64, 65, 72, 1003};
#define N_LENGTHS (sizeof lengths / sizeof lengths[0])

enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B, ALIAS_ALL, N_ALIAS };
static const char *alias_name[] = {"none", "dst==a", "dst==b", "dst==a==b"};

/* _i enumerates (datatype, op). */
START_TEST(test_matrix) {
  loomDataType_t dt = (loomDataType_t)(_i / loomNumOps);
  loomRedOp_t op = (loomRedOp_t)(_i % loomNumOps);
  size_t sz = loom_datatype_size(dt);
  const size_t maxn = 1003 + 1; /* +1 for the misaligned start */
  unsigned char *a = malloc(maxn * sz), *b = malloc(maxn * sz);
  unsigned char *d = malloc(maxn * sz), *want = malloc(maxn * sz);
  unsigned char *a0 = malloc(maxn * sz), *b0 = malloc(maxn * sz);
  ck_assert(a && b && d && want && a0 && b0);
  rng_state = 0x9E3779B97F4A7C15ULL + (uint64_t)_i;

  for (size_t li = 0; li < N_LENGTHS; li++)
    for (int off = 0; off <= 1; off++)
      for (int alias = 0; alias < N_ALIAS; alias++) {
        size_t n = lengths[li];
        fill(a0, maxn, dt);
        fill(b0, maxn, dt);
        memcpy(a, a0, maxn * sz);
        memcpy(b, b0, maxn * sz);
        memset(d, 0xA5, maxn * sz);

        unsigned char *pa = a + off * sz, *pb = b + off * sz;
        unsigned char *pd = d + off * sz;
        const unsigned char *ra = a0 + off * sz, *rb = b0 + off * sz;
        if (alias == ALIAS_DST_A)
          pd = pa;
        else if (alias == ALIAS_DST_B)
          pd = pb;
        else if (alias == ALIAS_ALL) {
          pd = pb = pa;
          rb = ra;
        }
        for (size_t i = 0; i < n; i++)
          ref_elem(dt, op, ra + i * sz, rb + i * sz, want + i * sz);

        loom_reduce(pd, pa, pb, n, dt, op);

        for (size_t i = 0; i < n; i++) {
          if (!elem_matches(dt, op, pd + i * sz, want + i * sz)) {
            uint64_t g = 0, w = 0, x = 0, y = 0;
            memcpy(&g, pd + i * sz, sz);
            memcpy(&w, want + i * sz, sz);
            memcpy(&x, ra + i * sz, sz);
            memcpy(&y, rb + i * sz, sz);
            ck_abort_msg("%s %s n=%zu off=%d alias=%s: element %zu: "
                         "0x%llx op 0x%llx = 0x%llx, want 0x%llx",
                         loom_datatype_name(dt), loom_redop_name(op), n, off,
                         alias_name[alias], i, (unsigned long long)x,
                         (unsigned long long)y, (unsigned long long)g,
                         (unsigned long long)w);
          }
        }
        /* Nothing past the end (or before an offset start) was written. */
        if (alias == ALIAS_NONE) {
          for (size_t i = 0; i < maxn * sz; i++)
            if (i < off * sz || i >= (off + n) * sz)
              EXPECT(d[i] == 0xA5, "%s %s n=%zu: wrote byte %zu",
                     loom_datatype_name(dt), loom_redop_name(op), n, i);
        } else {
          unsigned char *base = alias == ALIAS_DST_B ? b : a;
          const unsigned char *orig = alias == ALIAS_DST_B ? b0 : a0;
          for (size_t i = 0; i < maxn * sz; i++)
            if (i < off * sz || i >= (off + n) * sz)
              EXPECT(base[i] == orig[i], "%s %s n=%zu: wrote byte %zu",
                     loom_datatype_name(dt), loom_redop_name(op), n, i);
        }
      }
  free(a);
  free(b);
  free(d);
  free(want);
  free(a0);
  free(b0);
}
END_TEST

START_TEST(test_invalid_args_do_nothing) {
  int32_t a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, d[3] = {7, 7, 7};
  loom_reduce(d, a, b, 3, loomNumTypes, loomSum);
  loom_reduce(d, a, b, 3, loomInt32, loomNumOps);
  loom_reduce(d, a, b, 0, loomInt32, loomSum);
  loom_reduce(NULL, NULL, NULL, 0, loomFloat16, loomSum);
  loom_scale_avg(d, 3, loomNumTypes, 2);
  loom_scale_avg(NULL, 0, loomInt32, 2);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(d[i], 7);
}
END_TEST

/* ---- Integer wrap-around ------------------------------------------------- */

START_TEST(test_int_wrap) {
  {
    int8_t a[4] = {127, -128, -128, 100}, b[4] = {1, -1, -128, 100}, d[4];
    loom_reduce(d, a, b, 4, loomInt8, loomSum);
    ck_assert_int_eq(d[0], -128);
    ck_assert_int_eq(d[1], 127);
    ck_assert_int_eq(d[2], 0);
    ck_assert_int_eq(d[3], -56);
    loom_reduce(d, a, b, 4, loomInt8, loomProd);
    ck_assert_int_eq(d[0], 127);
    ck_assert_int_eq(d[1], -128); /* -128 * -1 = 128 wraps to -128 */
    ck_assert_int_eq(d[2], 0);    /* 16384 mod 256 */
    ck_assert_int_eq(d[3], 16);   /* 10000 mod 256 */
    loom_reduce(d, a, b, 4, loomInt8, loomMax);
    ck_assert_int_eq(d[0], 127);
    ck_assert_int_eq(d[1], -1);
    loom_reduce(d, a, b, 4, loomInt8, loomMin);
    ck_assert_int_eq(d[0], 1);
    ck_assert_int_eq(d[1], -128);
  }
  {
    uint8_t a[3] = {255, 200, 16}, b[3] = {1, 100, 16}, d[3];
    loom_reduce(d, a, b, 3, loomUint8, loomSum);
    ck_assert_uint_eq(d[0], 0);
    ck_assert_uint_eq(d[1], 44);
    ck_assert_uint_eq(d[2], 32);
    loom_reduce(d, a, b, 3, loomUint8, loomProd);
    ck_assert_uint_eq(d[0], 255);
    ck_assert_uint_eq(d[1], (200 * 100) % 256);
    ck_assert_uint_eq(d[2], 0);
    loom_reduce(d, a, b, 3, loomUint8, loomMax); /* unsigned compare */
    ck_assert_uint_eq(d[0], 255);
    ck_assert_uint_eq(d[1], 200);
  }
  {
    int32_t a[3] = {INT32_MAX, 65536, INT32_MIN}, b[3] = {1, 65536, -1}, d[3];
    loom_reduce(d, a, b, 3, loomInt32, loomSum);
    ck_assert_int_eq(d[0], INT32_MIN);
    ck_assert_int_eq(d[1], 131072);
    ck_assert_int_eq(d[2], INT32_MAX);
    loom_reduce(d, a, b, 3, loomInt32, loomProd);
    ck_assert_int_eq(d[0], INT32_MAX);
    ck_assert_int_eq(d[1], 0); /* 2^32 wraps to 0 */
    ck_assert_int_eq(d[2], INT32_MIN);
    int32_t c[1] = {46341}; /* 46341^2 = 2147488281 wraps negative */
    loom_reduce(d, c, c, 1, loomInt32, loomProd);
    ck_assert_int_eq(d[0], (int32_t)(2147488281LL - 4294967296LL));
  }
  {
    uint32_t a[2] = {UINT32_MAX, 0x10000u}, b[2] = {2, 0x10000u}, d[2];
    loom_reduce(d, a, b, 2, loomUint32, loomSum);
    ck_assert_uint_eq(d[0], 1);
    loom_reduce(d, a, b, 2, loomUint32, loomProd);
    ck_assert_uint_eq(d[0], UINT32_MAX - 1);
    ck_assert_uint_eq(d[1], 0);
    loom_reduce(d, a, b, 2, loomUint32, loomMin);
    ck_assert_uint_eq(d[0], 2);
  }
  {
    int64_t a[2] = {INT64_MAX, INT64_MIN}, b[2] = {1, -1}, d[2];
    loom_reduce(d, a, b, 2, loomInt64, loomSum);
    ck_assert(d[0] == INT64_MIN);
    ck_assert(d[1] == INT64_MAX);
    loom_reduce(d, a, b, 2, loomInt64, loomProd);
    ck_assert(d[0] == INT64_MAX);
    ck_assert(d[1] == INT64_MIN);
    loom_reduce(d, a, b, 2, loomInt64, loomMax);
    ck_assert(d[0] == INT64_MAX && d[1] == -1);
    loom_reduce(d, a, b, 2, loomInt64, loomMin);
    ck_assert(d[0] == 1 && d[1] == INT64_MIN);
  }
  {
    uint64_t a[2] = {UINT64_MAX, 1ULL << 32}, b[2] = {1, 1ULL << 32}, d[2];
    loom_reduce(d, a, b, 2, loomUint64, loomSum);
    ck_assert(d[0] == 0);
    loom_reduce(d, a, b, 2, loomUint64, loomProd);
    ck_assert(d[0] == UINT64_MAX && d[1] == 0);
    loom_reduce(d, a, b, 2, loomUint64, loomMax);
    ck_assert(d[0] == UINT64_MAX);
  }
}
END_TEST

/* ---- NaN and infinities -------------------------------------------------- */

/* Runs one op on 70 copies of (x, y) (so both the vector loop and the tail
 * see them) and returns element 0 after checking that all agree. */
static float f32_op(float x, float y, loomRedOp_t op) {
  float a[70], b[70], d[70];
  for (int i = 0; i < 70; i++) {
    a[i] = x;
    b[i] = y;
  }
  loom_reduce(d, a, b, 70, loomFloat32, op);
  for (int i = 1; i < 70; i++)
    EXPECT(memcmp(&d[i], &d[0], 4) == 0 || (isnan(d[i]) && isnan(d[0])),
           "f32 %s: element %d differs from element 0", loom_redop_name(op), i);
  return d[0];
}

static double f64_op(double x, double y, loomRedOp_t op) {
  double a[70], b[70], d[70];
  for (int i = 0; i < 70; i++) {
    a[i] = x;
    b[i] = y;
  }
  loom_reduce(d, a, b, 70, loomFloat64, op);
  for (int i = 1; i < 70; i++)
    EXPECT(memcmp(&d[i], &d[0], 8) == 0 || (isnan(d[i]) && isnan(d[0])),
           "f64 %s: element %d differs from element 0", loom_redop_name(op), i);
  return d[0];
}

static uint16_t h16_op(uint16_t x, uint16_t y, loomRedOp_t op,
                       loomDataType_t dt) {
  uint16_t a[70], b[70], d[70];
  for (int i = 0; i < 70; i++) {
    a[i] = x;
    b[i] = y;
  }
  loom_reduce(d, a, b, 70, dt, op);
  int (*is_nan)(uint16_t) = dt == loomFloat16 ? half_is_nan : bf16_is_nan;
  for (int i = 1; i < 70; i++)
    EXPECT(d[i] == d[0] || (is_nan(d[i]) && is_nan(d[0])),
           "%s %s: element %d differs from element 0", loom_datatype_name(dt),
           loom_redop_name(op), i);
  return d[0];
}

START_TEST(test_nan_propagation) {
  static const loomRedOp_t ops[] = {loomSum, loomProd, loomMax, loomMin};
  static const float others[] = {0.0f,     -0.0f,    1.0f,      -5.0f, FLT_MAX,
                                 -FLT_MAX, INFINITY, -INFINITY, NAN};
  const uint16_t hnan = 0x7e00, hnan_neg = 0xfe00, hsnan = 0x7c01;
  const uint16_t bnan = 0x7fc0, bsnan = 0x7f81;
  for (size_t o = 0; o < 4; o++) {
    loomRedOp_t op = ops[o];
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
      float v = others[k];
      ck_assert_msg(isnan(f32_op(NAN, v, op)), "f32 %s(NaN, %g)",
                    loom_redop_name(op), v);
      ck_assert_msg(isnan(f32_op(v, NAN, op)), "f32 %s(%g, NaN)",
                    loom_redop_name(op), v);
      ck_assert(isnan(f32_op(-NAN, v, op)));
      ck_assert(isnan(f64_op(NAN, v, op)));
      ck_assert(isnan(f64_op(v, NAN, op)));
      uint16_t hv = loom_float_to_half(v), bv = loom_float_to_bf16(v);
      ck_assert_msg(half_is_nan(h16_op(hnan, hv, op, loomFloat16)),
                    "f16 %s(NaN, %g)", loom_redop_name(op), v);
      ck_assert(half_is_nan(h16_op(hv, hnan, op, loomFloat16)));
      ck_assert(half_is_nan(h16_op(hv, hnan_neg, op, loomFloat16)));
      ck_assert(half_is_nan(h16_op(hsnan, hv, op, loomFloat16)));
      ck_assert(half_is_nan(h16_op(hv, hsnan, op, loomFloat16)));
      ck_assert_msg(bf16_is_nan(h16_op(bnan, bv, op, loomBfloat16)),
                    "bf16 %s(NaN, %g)", loom_redop_name(op), v);
      ck_assert(bf16_is_nan(h16_op(bv, bnan, op, loomBfloat16)));
      ck_assert(bf16_is_nan(h16_op(bsnan, bv, op, loomBfloat16)));
      ck_assert(bf16_is_nan(h16_op(bv, bsnan, op, loomBfloat16)));
    }
  }
}
END_TEST

START_TEST(test_infinities) {
  ck_assert(f32_op(INFINITY, 1.0f, loomSum) == INFINITY);
  ck_assert(f32_op(-INFINITY, 1.0f, loomSum) == -INFINITY);
  ck_assert(isnan(f32_op(INFINITY, -INFINITY, loomSum)));
  ck_assert(isnan(f32_op(INFINITY, 0.0f, loomProd)));
  ck_assert(f32_op(INFINITY, -2.0f, loomProd) == -INFINITY);
  ck_assert(f32_op(FLT_MAX, FLT_MAX, loomSum) == INFINITY);
  ck_assert(f32_op(INFINITY, FLT_MAX, loomMax) == INFINITY);
  ck_assert(f32_op(-INFINITY, -FLT_MAX, loomMin) == -INFINITY);
  ck_assert(f32_op(-INFINITY, 3.0f, loomMax) == 3.0f);
  ck_assert(f32_op(INFINITY, 3.0f, loomMin) == 3.0f);
  ck_assert(f64_op(INFINITY, 1.0, loomSum) == INFINITY);
  ck_assert(isnan(f64_op(-INFINITY, INFINITY, loomSum)));
  ck_assert(f64_op(DBL_MAX, 2.0, loomProd) == INFINITY);
  ck_assert(f64_op(-INFINITY, -DBL_MAX, loomMin) == -INFINITY);

  /* float16: 0x7c00 = +Inf, 0xfc00 = -Inf, 0x7bff = 65504, 0x3c00 = 1. */
  ck_assert_uint_eq(h16_op(0x7c00, 0x3c00, loomSum, loomFloat16), 0x7c00);
  ck_assert_uint_eq(h16_op(0xfc00, 0x3c00, loomSum, loomFloat16), 0xfc00);
  ck_assert(half_is_nan(h16_op(0x7c00, 0xfc00, loomSum, loomFloat16)));
  ck_assert(half_is_nan(h16_op(0x7c00, 0x0000, loomProd, loomFloat16)));
  ck_assert_uint_eq(h16_op(0x7bff, 0x7bff, loomSum, loomFloat16), 0x7c00);
  ck_assert_uint_eq(h16_op(0x7bff, 0x4000, loomProd, loomFloat16), 0x7c00);
  ck_assert_uint_eq(h16_op(0x7bff, 0x7c00, loomMax, loomFloat16), 0x7c00);
  ck_assert_uint_eq(h16_op(0xfc00, 0x7bff, loomMin, loomFloat16), 0xfc00);
  /* 65504 + 8 = 65512 rounds down to 65504; + 16 = 65520 rounds to Inf. */
  ck_assert_uint_eq(h16_op(0x7bff, 0x4800, loomSum, loomFloat16), 0x7bff);
  ck_assert_uint_eq(h16_op(0x7bff, 0x4c00, loomSum, loomFloat16), 0x7c00);

  /* bfloat16: 0x7f80 = +Inf, 0x7f7f = largest finite. */
  ck_assert_uint_eq(h16_op(0x7f80, 0x3f80, loomSum, loomBfloat16), 0x7f80);
  ck_assert(bf16_is_nan(h16_op(0x7f80, 0xff80, loomSum, loomBfloat16)));
  ck_assert_uint_eq(h16_op(0x7f7f, 0x7f7f, loomSum, loomBfloat16), 0x7f80);
  ck_assert_uint_eq(h16_op(0xff80, 0x7f7f, loomMin, loomBfloat16), 0xff80);
}
END_TEST

START_TEST(test_half_reduce_cases) {
  /* 2^-24 + 2^-24 = 2^-23 (0x0002); smallest normal - smallest subnormal. */
  ck_assert_uint_eq(h16_op(0x0001, 0x0001, loomSum, loomFloat16), 0x0002);
  ck_assert_uint_eq(h16_op(0x0400, 0x8001, loomSum, loomFloat16), 0x03FF);
  ck_assert_uint_eq(h16_op(0x03FF, 0x0001, loomSum, loomFloat16), 0x0400);
  /* 2^-24 * 0.5 = 2^-25: tie, rounds to even 0; * 0.75 rounds up to 1. */
  ck_assert_uint_eq(h16_op(0x0001, 0x3800, loomProd, loomFloat16), 0x0000);
  ck_assert_uint_eq(h16_op(0x0001, 0x3A00, loomProd, loomFloat16), 0x0001);
  ck_assert_uint_eq(h16_op(0x8001, 0x3800, loomProd, loomFloat16), 0x8000);
  /* 3 * 2^-24 * 0.5 = 1.5 * 2^-24: tie, rounds to even 2. */
  ck_assert_uint_eq(h16_op(0x0003, 0x3800, loomProd, loomFloat16), 0x0002);
  /* 1 + 2^-11 (half an ulp) ties to 1.0; 1.0009765625 + 2^-11 ties up. */
  ck_assert_uint_eq(h16_op(0x3C00, 0x1000, loomSum, loomFloat16), 0x3C00);
  ck_assert_uint_eq(h16_op(0x3C01, 0x1000, loomSum, loomFloat16), 0x3C02);
  /* max/min compare subnormals and signs correctly. */
  ck_assert_uint_eq(h16_op(0x0001, 0x0002, loomMax, loomFloat16), 0x0002);
  ck_assert_uint_eq(h16_op(0x8001, 0x0001, loomMin, loomFloat16), 0x8001);
  ck_assert_uint_eq(h16_op(0xBC00, 0x3C00, loomMax, loomFloat16), 0x3C00);
}
END_TEST

START_TEST(test_bf16_reduce_cases) {
  /* 1 + 2^-8 ties to 1.0 (even); 1.0078125 + 2^-8 ties up to 1.015625. */
  ck_assert_uint_eq(h16_op(0x3F80, 0x3B80, loomSum, loomBfloat16), 0x3F80);
  ck_assert_uint_eq(h16_op(0x3F81, 0x3B80, loomSum, loomBfloat16), 0x3F82);
  ck_assert_uint_eq(h16_op(0x3F80, 0x3F80, loomSum, loomBfloat16), 0x4000);
  ck_assert_uint_eq(h16_op(0x4040, 0xC000, loomProd, loomBfloat16), 0xC0C0);
  ck_assert_uint_eq(h16_op(0xBF80, 0x3F80, loomMax, loomBfloat16), 0x3F80);
  ck_assert_uint_eq(h16_op(0xBF80, 0x3F80, loomMin, loomBfloat16), 0xBF80);
}
END_TEST

/* ---- Averaging ----------------------------------------------------------- */

START_TEST(test_avg_ints) {
  {
    int8_t v[5] = {-7, 7, -128, 127, -1};
    loom_scale_avg(v, 5, loomInt8, 2);
    ck_assert_int_eq(v[0], -3); /* truncates toward zero */
    ck_assert_int_eq(v[1], 3);
    ck_assert_int_eq(v[2], -64);
    ck_assert_int_eq(v[3], 63);
    ck_assert_int_eq(v[4], 0);
    int8_t w[2] = {-128, 100};
    loom_scale_avg(w, 2, loomInt8, 300); /* more ranks than int8 holds */
    ck_assert_int_eq(w[0], 0);
    ck_assert_int_eq(w[1], 0);
  }
  {
    uint8_t v[3] = {255, 7, 2};
    loom_scale_avg(v, 3, loomUint8, 2);
    ck_assert_uint_eq(v[0], 127);
    ck_assert_uint_eq(v[1], 3);
    ck_assert_uint_eq(v[2], 1);
  }
  {
    int32_t v[4] = {INT32_MIN, INT32_MAX, -10, 10};
    loom_scale_avg(v, 4, loomInt32, 3);
    ck_assert_int_eq(v[0], INT32_MIN / 3);
    ck_assert_int_eq(v[1], INT32_MAX / 3);
    ck_assert_int_eq(v[2], -3);
    ck_assert_int_eq(v[3], 3);
  }
  {
    uint32_t v[2] = {UINT32_MAX, 5};
    loom_scale_avg(v, 2, loomUint32, 7);
    ck_assert_uint_eq(v[0], UINT32_MAX / 7);
    ck_assert_uint_eq(v[1], 0);
  }
  {
    int64_t v[3] = {INT64_MIN, INT64_MAX, -9};
    loom_scale_avg(v, 3, loomInt64, 4);
    ck_assert(v[0] == INT64_MIN / 4 && v[1] == INT64_MAX / 4 && v[2] == -2);
    uint64_t u[1] = {UINT64_MAX};
    loom_scale_avg(u, 1, loomUint64, 3);
    ck_assert(u[0] == UINT64_MAX / 3);
  }
  { /* every int8/uint8 value, many rank counts (the kernels may divide in
     * floating point; the result must still be C's integer division) */
    for (int nr = 2; nr <= 600; nr += (nr < 300 ? 1 : 37)) {
      int8_t s8[256];
      uint8_t u8[256];
      for (int x = 0; x < 256; x++) {
        s8[x] = (int8_t)(x - 128);
        u8[x] = (uint8_t)x;
      }
      loom_scale_avg(s8, 256, loomInt8, nr);
      loom_scale_avg(u8, 256, loomUint8, nr);
      for (int x = 0; x < 256; x++) {
        EXPECT(s8[x] == (x - 128) / nr, "int8 %d / %d = %d", x - 128, nr,
               s8[x]);
        EXPECT(u8[x] == x / nr, "uint8 %d / %d = %d", x, nr, u8[x]);
      }
    }
  }
  { /* int32/uint32 next to multiples of n, where rounding would show */
    static const int nrs[] = {2, 3, 7, 10, 1000, 65537, 1 << 20, 2147483647};
    rng_state = 99;
    for (size_t k = 0; k < sizeof nrs / sizeof nrs[0]; k++) {
      int nr = nrs[k];
      int32_t s[64];
      uint32_t u[64];
      for (int i = 0; i < 64; i++) {
        int64_t q = (int64_t)(rng() % (uint64_t)((INT64_C(1) << 31) / nr + 1));
        int64_t v = q * nr + (i % 3) - 1; /* q*n - 1, q*n, q*n + 1 */
        if (i & 4)
          v = -v;
        if (v > INT32_MAX || v < INT32_MIN)
          v = (i & 8) ? INT32_MAX : INT32_MIN;
        s[i] = (int32_t)v;
        u[i] =
            (uint32_t)(q * nr + (i % 3)) + (uint32_t)(i & 8 ? 0x80000000u : 0);
      }
      int32_t s0[64];
      uint32_t u0[64];
      memcpy(s0, s, sizeof s);
      memcpy(u0, u, sizeof u);
      loom_scale_avg(s, 64, loomInt32, nr);
      loom_scale_avg(u, 64, loomUint32, nr);
      for (int i = 0; i < 64; i++) {
        EXPECT(s[i] == s0[i] / nr, "int32 %d / %d = %d", s0[i], nr, s[i]);
        EXPECT(u[i] == u0[i] / (uint32_t)nr, "uint32 %u / %d = %u", u0[i], nr,
               u[i]);
      }
    }
  }
  { /* nranks <= 1 leaves the data alone */
    int32_t v[2] = {-7, 9};
    loom_scale_avg(v, 2, loomInt32, 1);
    loom_scale_avg(v, 2, loomInt32, 0);
    ck_assert(v[0] == -7 && v[1] == 9);
  }
}
END_TEST

START_TEST(test_avg_floats) {
  {
    float v[4] = {3.0f, 1.0f, NAN, -INFINITY};
    loom_scale_avg(v, 4, loomFloat32, 4);
    ck_assert(v[0] == 0.75f && v[1] == 0.25f && isnan(v[2]) &&
              v[3] == -INFINITY);
    float w[1] = {1.0f};
    loom_scale_avg(w, 1, loomFloat32, 3);
    ck_assert(w[0] == 1.0f / 3.0f); /* a true division, not * (1/3) */
  }
  {
    double v[2] = {1.0, -6.0};
    loom_scale_avg(v, 2, loomFloat64, 3);
    ck_assert(v[0] == 1.0 / 3.0 && v[1] == -2.0);
  }
  {
    /* 1.0/3 in float is 0x3eaaaaab -> half 0x3555; 65504/2 = 32752 (0x77FF);
     * subnormal 0x0003/2 = 1.5*2^-24 ties to 0x0002. */
    uint16_t v[4] = {0x3C00, 0x7BFF, 0x0003, 0x7E00};
    uint16_t w[4];
    memcpy(w, v, sizeof w);
    loom_scale_avg(v, 4, loomFloat16, 3);
    ck_assert_uint_eq(v[0], 0x3555);
    loom_scale_avg(w, 4, loomFloat16, 2);
    ck_assert_uint_eq(w[0], 0x3800);
    ck_assert_uint_eq(w[1], 0x77FF);
    ck_assert_uint_eq(w[2], 0x0002);
    ck_assert(half_is_nan(w[3]));
  }
  {
    uint16_t v[3] = {0x3F80, 0x4040, 0x7FC0}; /* 1, 3, NaN */
    loom_scale_avg(v, 3, loomBfloat16, 3);
    ck_assert_uint_eq(v[0], 0x3EAB); /* 1/3 = 0x3eaaaaab rounds up */
    ck_assert_uint_eq(v[1], 0x3F80);
    ck_assert(bf16_is_nan(v[2]));
  }
}
END_TEST

/* loom_scale_avg on every type and several lengths against a reference. */
START_TEST(test_avg_matrix) {
  loomDataType_t dt = (loomDataType_t)_i;
  size_t sz = loom_datatype_size(dt);
  static const int ranks[] = {2, 3, 7, 8, 1000};
  unsigned char *buf = malloc(1004 * sz), *orig = malloc(1004 * sz);
  ck_assert(buf && orig);
  rng_state = 4242 + (uint64_t)_i;
  for (size_t li = 0; li < N_LENGTHS; li++)
    for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
      size_t n = lengths[li];
      int nr = ranks[r];
      fill(orig, 1004, dt);
      memcpy(buf, orig, 1004 * sz);
      loom_scale_avg(buf + sz, n, dt, nr);
      ck_assert(memcmp(buf, orig, sz) == 0);
      ck_assert(memcmp(buf + (n + 1) * sz, orig + (n + 1) * sz,
                       (1004 - n - 1) * sz) == 0);
      for (size_t i = 1; i <= n; i++) {
        const unsigned char *o = orig + i * sz, *g = buf + i * sz;
        uint64_t want = 0, got = 0;
        memcpy(&got, g, sz);
        switch (dt) {
        case loomInt8: {
          int8_t x;
          memcpy(&x, o, 1);
          int8_t q = (int8_t)((int64_t)x / nr);
          memcpy(&want, &q, 1);
          break;
        }
        case loomUint8:
          want = (uint64_t)o[0] / (uint64_t)nr;
          break;
        case loomInt32: {
          int32_t x;
          memcpy(&x, o, 4);
          int32_t q = (int32_t)((int64_t)x / nr);
          memcpy(&want, &q, 4);
          break;
        }
        case loomUint32: {
          uint32_t x;
          memcpy(&x, o, 4);
          want = x / (uint64_t)nr;
          break;
        }
        case loomInt64: {
          int64_t x;
          memcpy(&x, o, 8);
          int64_t q = x / nr;
          memcpy(&want, &q, 8);
          break;
        }
        case loomUint64: {
          uint64_t x;
          memcpy(&x, o, 8);
          want = x / (uint64_t)nr;
          break;
        }
        case loomFloat32: {
          float x, q;
          memcpy(&x, o, 4);
          q = (float)((double)x / nr);
          memcpy(&want, &q, 4);
          break;
        }
        case loomFloat64: {
          double x, q;
          memcpy(&x, o, 8);
          q = x / nr;
          memcpy(&want, &q, 8);
          break;
        }
        case loomFloat16: {
          uint16_t x;
          memcpy(&x, o, 2);
          want = ref_float_to_half((float)((double)loom_half_to_float(x) / nr));
          break;
        }
        default: {
          uint16_t x;
          memcpy(&x, o, 2);
          want = ref_float_to_bf16((float)((double)loom_bf16_to_float(x) / nr));
          break;
        }
        }
        EXPECT(elem_matches(dt, loomSum, &got, &want),
               "%s n=%zu nranks=%d element %zu: got 0x%llx want 0x%llx",
               loom_datatype_name(dt), n, nr, i - 1, (unsigned long long)got,
               (unsigned long long)want);
      }
    }
  free(buf);
  free(orig);
}
END_TEST

/* ---- Runner -------------------------------------------------------------- */

static Suite *reduce_suite(void) {
  Suite *s = suite_create("reduce");
  TCase *tc = tcase_create("names");
  tcase_add_test(tc, test_names_sizes);
  tcase_add_test(tc, test_invalid_args_do_nothing);
  suite_add_tcase(s, tc);

  tc = tcase_create("matrix");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_matrix, 0, loomNumTypes * loomNumOps);
  tcase_add_loop_test(tc, test_avg_matrix, 0, loomNumTypes);
  suite_add_tcase(s, tc);

  tc = tcase_create("special");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_int_wrap);
  tcase_add_test(tc, test_nan_propagation);
  tcase_add_test(tc, test_infinities);
  tcase_add_test(tc, test_half_reduce_cases);
  tcase_add_test(tc, test_bf16_reduce_cases);
  tcase_add_test(tc, test_avg_ints);
  tcase_add_test(tc, test_avg_floats);
  suite_add_tcase(s, tc);

  return s;
}

int main(void) {
  SRunner *sr = srunner_create(reduce_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
