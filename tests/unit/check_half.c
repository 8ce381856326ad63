/*
 * check_half.c — unit tests of the float16 and bfloat16 conversions
 * (src/device/half.h): tables of known bit patterns, every half value, and
 * slow reference roundings that search the representable values.
 */
#include "device/half.h"
#include "halfref.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- float16 conversions ------------------------------------------------- */

START_TEST(test_half_table) {
  static const struct {
    float f;
    uint16_t h;
  } exact[] = {
      {0.0f, 0x0000},          {-0.0f, 0x8000},
      {1.0f, 0x3C00},          {-1.0f, 0xBC00},
      {2.0f, 0x4000},          {0.5f, 0x3800},
      {-2.5f, 0xC100},         {65504.0f, 0x7BFF},
      {-65504.0f, 0xFBFF},     {0x1p-14f, 0x0400},
      {0x1p-24f, 0x0001},      {-0x1p-24f, 0x8001},
      {0x3ffp-24f, 0x03FF},    {0x1p-15f, 0x0200},
      {1.0009765625f, 0x3C01}, {0.333251953125f, 0x3555},
      {INFINITY, 0x7C00},      {-INFINITY, 0xFC00},
  };
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    ck_assert_msg(loom_float_to_half(exact[i].f) == exact[i].h,
                  "to_half(%a) = 0x%04x, want 0x%04x", (double)exact[i].f,
                  loom_float_to_half(exact[i].f), exact[i].h);
    float back = loom_half_to_float(exact[i].h);
    ck_assert_msg(f_bits(back) == f_bits(exact[i].f), "to_float(0x%04x) = %a",
                  exact[i].h, (double)back);
  }
  static const struct {
    float f;
    uint16_t h;
  } rounded[] = {
      {0.1f, 0x2E66}, /* 0.0999755859375 */
      {-0.1f, 0xAE66},
      {1.0f / 3.0f, 0x3555},
      {65519.0f, 0x7BFF}, /* below the midpoint 65520 */
      {65520.0f, 0x7C00}, /* midpoint, ties to even: Inf */
      {-65520.0f, 0xFC00},
      {1e6f, 0x7C00},
      {FLT_MAX, 0x7C00},
      {1.00048828125f, 0x3C00}, /* 1 + 2^-11: tie, even is 1.0 */
      {1.00146484375f, 0x3C02}, /* 1 + 3*2^-11: tie, even is 0x3C02 */
      {0x1.002002p+0f, 0x3C01}, /* just above the tie */
      {0x1p-25f, 0x0000},       /* half the smallest subnormal: tie to 0 */
      {-0x1p-25f, 0x8000},
      {0x1.000002p-25f, 0x0001}, /* just above: rounds up */
      {0x3p-25f, 0x0002},        /* 1.5 * 2^-24: tie, even is 2 */
      {0x5p-25f, 0x0002},        /* 2.5 * 2^-24: tie, even is 2 */
      {0x7p-25f, 0x0004},        /* 3.5 * 2^-24: tie, even is 4 */
      {0x7ffp-25f, 0x0400},      /* 1023.5 * 2^-24 rounds up to 2^-14 */
      {1e-10f, 0x0000},
      {FLT_MIN, 0x0000},
      {1e-45f, 0x0000}, /* float subnormal */
      {-1e-45f, 0x8000},
  };
  for (size_t i = 0; i < sizeof rounded / sizeof rounded[0]; i++)
    ck_assert_msg(loom_float_to_half(rounded[i].f) == rounded[i].h,
                  "to_half(%a) = 0x%04x, want 0x%04x", (double)rounded[i].f,
                  loom_float_to_half(rounded[i].f), rounded[i].h);

  ck_assert(half_is_nan(loom_float_to_half(NAN)));
  ck_assert(half_is_nan(loom_float_to_half(-NAN)));
  ck_assert(half_is_nan(loom_float_to_half(bits_f(0x7f800001u)))); /* sNaN */
  ck_assert(half_is_nan(loom_float_to_half(bits_f(0x7fc00000u))));
  ck_assert(half_is_nan(loom_float_to_half(bits_f(0xff800001u))));
  ck_assert(isnan(loom_half_to_float(0x7C01)));
  ck_assert(isnan(loom_half_to_float(0x7E00)));
  ck_assert(isnan(loom_half_to_float(0xFFFF)));
  ck_assert(loom_half_to_float(0x7C00) == INFINITY);
  ck_assert(loom_half_to_float(0xFC00) == -INFINITY);
}
END_TEST

/* Every half: to_float matches an independent decoding, and converting back
 * gives the same bits (NaN stays NaN). */
START_TEST(test_half_exhaustive) {
  for (uint32_t h = 0; h <= 0xffff; h++) {
    float f = loom_half_to_float((uint16_t)h);
    int e = (h >> 10) & 0x1f;
    if (e == 0x1f && (h & 0x3ff)) {
      EXPECT(isnan(f), "0x%04x", h);
      EXPECT(half_is_nan(loom_float_to_half(f)), "0x%04x", h);
      continue;
    }
    double want = e == 0x1f ? INFINITY : half_value((uint16_t)(h & 0x7fff));
    if (h & 0x8000)
      want = -want;
    EXPECT((double)f == want && !signbit(f) == !(h & 0x8000),
           "to_float(0x%04x) = %a, want %a", h, (double)f, want);
    EXPECT(loom_float_to_half(f) == h, "round trip of 0x%04x gives 0x%04x", h,
           loom_float_to_half(f));
  }
}
END_TEST

/* float -> half against the search-based reference: every midpoint between
 * neighbouring halves and its two float neighbours, plus random floats. */
START_TEST(test_half_rounding_reference) {
  for (uint16_t h = 0; h < 0x7c00; h++) {
    double mid = (half_value(h) + half_value((uint16_t)(h + 1))) / 2;
    float m =
        (float)mid; /* exact: a half midpoint has <= 12 significant bits */
    EXPECT((double)m == mid, "midpoint above 0x%04x is not a float", h);
    float cand[3] = {m, nextafterf(m, 0.0f), nextafterf(m, INFINITY)};
    for (int k = 0; k < 3; k++)
      for (int s = 0; s < 2; s++) {
        float f = s ? -cand[k] : cand[k];
        EXPECT(loom_float_to_half(f) == ref_float_to_half(f),
               "to_half(%a) = 0x%04x, want 0x%04x", (double)f,
               loom_float_to_half(f), ref_float_to_half(f));
      }
  }
  rng_state = 12345;
  for (int i = 0; i < 200000; i++) {
    uint32_t u = (uint32_t)rng();
    if (i & 1) /* concentrate on the half range: exponents 100..145 */
      u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 46) << 23);
    float f = bits_f(u);
    uint16_t got = loom_float_to_half(f), want = ref_float_to_half(f);
    if (isnan(f))
      EXPECT(half_is_nan(got), "to_half(NaN 0x%08x) = 0x%04x", u, got);
    else
      EXPECT(got == want, "to_half(%a) = 0x%04x, want 0x%04x", (double)f, got,
             want);
  }
}
END_TEST

/* float16 arithmetic on subnormals and rounding, through loom_reduce. */

/* ---- bfloat16 conversions ------------------------------------------------ */

START_TEST(test_bf16_table) {
  static const struct {
    uint32_t f; /* float32 bits */
    uint16_t b;
  } cases[] = {
      {0x00000000u, 0x0000}, /* 0 */
      {0x80000000u, 0x8000}, /* -0 */
      {0x3f800000u, 0x3F80}, /* 1 */
      {0xbf800000u, 0xBF80}, /* -1 */
      {0x40000000u, 0x4000}, /* 2 */
      {0x3f000000u, 0x3F00}, /* 0.5 */
      {0x40400000u, 0x4040}, /* 3 */
      {0x7f800000u, 0x7F80}, /* Inf */
      {0xff800000u, 0xFF80}, /* -Inf */
      {0x7f7fffffu, 0x7F80}, /* FLT_MAX rounds up past the largest bf16 */
      {0x7f7f7fffu, 0x7F7F}, /* just below the midpoint */
      {0x7f7f8000u, 0x7F80}, /* midpoint, 0x7f7f odd: Inf */
      {0x3f808000u, 0x3F80}, /* 1 + 2^-8: tie, even 0x3F80 */
      {0x3f818000u, 0x3F82}, /* tie, 0x3F81 odd: up */
      {0x3f808001u, 0x3F81}, /* just above the tie */
      {0x3f807fffu, 0x3F80}, /* just below the tie */
      {0xbf818000u, 0xBF82}, /* negative tie to even */
      {0x00008000u, 0x0000}, /* subnormal tie to even 0 */
      {0x00018000u, 0x0002}, /* subnormal tie, up */
      {0x007fffffu, 0x0080}, /* largest subnormal -> FLT_MIN */
      {0x3dcccccdu, 0x3DCD}, /* 0.1f */
      {0x40490fdbu, 0x4049}, /* pi */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ck_assert_msg(loom_float_to_bf16(bits_f(cases[i].f)) == cases[i].b,
                  "to_bf16(0x%08x) = 0x%04x, want 0x%04x", cases[i].f,
                  loom_float_to_bf16(bits_f(cases[i].f)), cases[i].b);
  ck_assert_uint_eq(f_bits(0.1f), 0x3dcccccdu);

  /* NaN stays a quiet NaN, never Inf (0x7f800001 would round to 0x7f80). */
  static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u,
                                  0xff800001u, 0x7fffffffu, 0x7f80ffffu};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    uint16_t b = loom_float_to_bf16(bits_f(nans[i]));
    ck_assert_msg(bf16_is_nan(b) && (b & 0x0040), "to_bf16(0x%08x) = 0x%04x",
                  nans[i], b);
    ck_assert_uint_eq(b & 0x8000, (nans[i] >> 16) & 0x8000);
  }

  /* to_float is exact: every bf16 round-trips. */
  for (uint32_t b = 0; b <= 0xffff; b++) {
    float f = loom_bf16_to_float((uint16_t)b);
    EXPECT(f_bits(f) == b << 16, "bf16_to_float(0x%04x) = 0x%08x", b,
           f_bits(f));
    if (bf16_is_nan((uint16_t)b))
      EXPECT(bf16_is_nan(loom_float_to_bf16(f)), "NaN 0x%04x lost", b);
    else
      EXPECT(loom_float_to_bf16(f) == b, "round trip of 0x%04x gives 0x%04x", b,
             loom_float_to_bf16(f));
  }

  rng_state = 777;
  for (int i = 0; i < 200000; i++) {
    float f = bits_f((uint32_t)rng());
    uint16_t got = loom_float_to_bf16(f);
    if (isnan(f))
      EXPECT(bf16_is_nan(got), "to_bf16(NaN %a) = 0x%04x", (double)f, got);
    else
      EXPECT(got == ref_float_to_bf16(f), "to_bf16(%a) = 0x%04x", (double)f,
             got);
  }
}
END_TEST

static Suite *half_suite(void) {
  Suite *s = suite_create("half");
  TCase *tc = tcase_create("conversions");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_half_table);
  tcase_add_test(tc, test_half_exhaustive);
  tcase_add_test(tc, test_half_rounding_reference);
  tcase_add_test(tc, test_bf16_table);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(half_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
