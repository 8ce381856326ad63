/*
 * testdata.h — input values and exact expected results for collective
 * tests.  Inputs are small integers chosen so that every datatype and op
 * is exact for up to 8 ranks (bfloat16 has 8 significant bits: sums stay
 * <= 256), so results can be compared bit for bit.
 */
#ifndef LOOM_TESTS_TESTDATA_H
#define LOOM_TESTS_TESTDATA_H

#include "device/half.h"
#include "loom.h"

#include <stdint.h>
#include <string.h>

static inline int td_is_signed(loomDataType_t dt) {
  return dt == loomInt8 || dt == loomInt32 || dt == loomInt64 || dt == loomFloat16 ||
         dt == loomFloat32 || dt == loomFloat64 || dt == loomBfloat16;
}

static inline int td_is_float(loomDataType_t dt) {
  return dt == loomFloat16 || dt == loomFloat32 || dt == loomFloat64 || dt == loomBfloat16;
}

/* Rank `rank`'s input element i for op. */
static inline int64_t td_input(int rank, size_t i, loomDataType_t dt, loomRedOp_t op) {
  int sgn = td_is_signed(dt);
  switch (op) {
  case loomProd: {
    int64_t v = (rank + i) % 3 == 0 ? 2 : 1;
    if (sgn && (rank * 5 + i) % 7 == 1)
      v = -v;
    return v;
  }
  case loomMax:
  case loomMin:
    return sgn ? (int64_t)((rank * 13 + i * 7) % 200) - 100 : (int64_t)((rank * 13 + i * 7) % 250);
  default: /* sum, avg, and all-gather data */
    return sgn ? (int64_t)((rank * 7 + i * 3) % 32) - 16 : (int64_t)((rank * 7 + i * 3) % 32);
  }
}

/* Stores integer value v as element i of buf. */
static inline void td_store(void *buf, size_t i, loomDataType_t dt, int64_t v) {
  switch (dt) {
  case loomInt8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case loomUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case loomInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case loomUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
  case loomInt64: ((int64_t *)buf)[i] = v; break;
  case loomUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
  case loomFloat16: ((uint16_t *)buf)[i] = loom_float_to_half((float)v); break;
  case loomBfloat16: ((uint16_t *)buf)[i] = loom_float_to_bf16((float)v); break;
  case loomFloat32: ((float *)buf)[i] = (float)v; break;
  case loomFloat64: ((double *)buf)[i] = (double)v; break;
  default: break;
  }
}

/* The expected element i of the reduction over nranks ranks, stored as dt
 * into out (one element). */
static inline void td_expected(int nranks, size_t i, loomDataType_t dt, loomRedOp_t op,
                               void *out) {
  int64_t acc = td_input(0, i, dt, op);
  for (int r = 1; r < nranks; r++) {
    int64_t v = td_input(r, i, dt, op);
    switch (op) {
    case loomProd: acc *= v; break;
    case loomMax: acc = v > acc ? v : acc; break;
    case loomMin: acc = v < acc ? v : acc; break;
    default: acc += v; break;
    }
  }
  if (op != loomAvg) {
    td_store(out, 0, dt, acc);
    return;
  }
  /* Avg: the exact sum, then the division the library documents. */
  switch (dt) {
  case loomFloat32: { float f = (float)acc / (float)nranks; memcpy(out, &f, 4); break; }
  case loomFloat64: { double d = (double)acc / (double)nranks; memcpy(out, &d, 8); break; }
  case loomFloat16: { uint16_t h = loom_float_to_half((float)acc / (float)nranks); memcpy(out, &h, 2); break; }
  case loomBfloat16: { uint16_t h = loom_float_to_bf16((float)acc / (float)nranks); memcpy(out, &h, 2); break; }
  case loomUint8: { uint8_t u = (uint8_t)acc; u = (uint8_t)(u / (uint8_t)nranks); memcpy(out, &u, 1); break; }
  case loomUint32: { uint32_t u = (uint32_t)acc / (uint32_t)nranks; memcpy(out, &u, 4); break; }
  case loomUint64: { uint64_t u = (uint64_t)acc / (uint64_t)nranks; memcpy(out, &u, 8); break; }
  default: td_store(out, 0, dt, acc / nranks); break;
  }
}

/* Data for collectives that only move data (all-gather, broadcast,
 * all-to-all, gather, scatter, send/recv): rank `rank`'s element `i`, a
 * wider range than the sum inputs (exact in every type, period 200 in i)
 * so that misplaced blocks show.  Callers give each destination its own
 * index range (TD_BLOCK apart) so that blocks differ by sender and by
 * receiver. */
#define TD_BLOCK ((size_t)1000003)
static inline int64_t td_data(int rank, size_t i, loomDataType_t dt) {
  return td_input(rank, i, dt, loomMax);
}

/* loomRedOpCreatePreMulSum: rank r's scalar is r + 1 and its inputs lie in
 * [-7, 7] ([0, 7] unsigned), so every product is exact and, over up to 8
 * ranks, every partial sum stays within 7 * 36 = 252 (exact in bfloat16;
 * the 8-bit integers wrap as the library documents). */
static inline int64_t td_premul_scalar(int rank) { return rank + 1; }

static inline int64_t td_premul_input(int rank, size_t i, loomDataType_t dt) {
  return td_is_signed(dt) ? (int64_t)((rank * 7 + i * 3) % 15) - 7
                          : (int64_t)((rank * 5 + i * 3) % 8);
}

/* The expected element i of the PreMulSum reduction over nranks ranks. */
static inline void td_expected_premul(int nranks, size_t i, loomDataType_t dt, void *out) {
  int64_t acc = 0;
  for (int r = 0; r < nranks; r++)
    acc += td_premul_scalar(r) * td_premul_input(r, i, dt);
  td_store(out, 0, dt, acc);
}

#endif
