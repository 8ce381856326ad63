/*
 * reduce.h — host reduction kernels: the element-wise arithmetic behind
 * all-reduce, reduce and reduce-scatter.
 *
 * Semantics (they follow loom.h):
 *  - Integer sum and prod wrap around (two's complement); max/min compare
 *    as signed or unsigned according to the type.
 *  - float16 and bfloat16 are converted to float32, combined, and rounded
 *    back to nearest-even after every step.
 *  - Floating max/min propagate NaN: if either input is NaN the result is
 *    NaN (unlike fmaxf/fminf, which return the other operand).  Otherwise
 *    they return the larger/smaller input (for +0 versus -0 either may
 *    come back).
 *  - loomAvg is reduced as a sum; the caller divides once at the end with
 *    loom_scale_avg().
 */
#ifndef LOOM_DEVICE_REDUCE_H
#define LOOM_DEVICE_REDUCE_H

#include <stddef.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size in bytes of one element of `dt`; 0 when dt is not a valid type.
 * Inline: a small call reads it several times. */
static inline size_t loom_datatype_size(loomDataType_t dt) {
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

/* "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
 * "float32", "float64", "bfloat16"; "invalid" for anything else. */
const char *loom_datatype_name(loomDataType_t dt);

/* "sum", "prod", "max", "min", "avg"; "invalid" for anything else. */
const char *loom_redop_name(loomRedOp_t op);

/* dst[i] = a[i] op b[i] for i in [0, count).  dst may be the same pointer
 * as a and/or b; the buffers must not otherwise overlap.  loomAvg sums.
 * An invalid dt or op, or count == 0, does nothing. */
void loom_reduce(void *dst, const void *a, const void *b, size_t count,
                 loomDataType_t dt, loomRedOp_t op);

/* buf[i] = buf[i] / nranks, the final step of loomAvg.  Integers use C
 * division (truncating toward zero); float32 divides by (float)nranks,
 * float64 by (double)nranks, float16/bfloat16 divide in float32 and round
 * back.  Does nothing when nranks <= 1 or dt is invalid. */
void loom_scale_avg(void *buf, size_t count, loomDataType_t dt, int nranks);

/* dst[i] = src[i] * scalar, scalar being one element of dt (PreMulSum's
 * premultiplied input); dst may be src. */
void loom_premul(void *dst, const void *src, size_t count, loomDataType_t dt,
                 const void *scalar);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_DEVICE_REDUCE_H */
