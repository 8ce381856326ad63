/*
 * perf_types.c — datatypes for loom-perf (see perf_types.h).
 */
#include "perf_types.h"

#include <stdio.h>
#include <string.h>

/* Indexed by loomDataType_t. */
const type_info_t type_info[loomNumTypes] = {
    [loomInt8] = {"int8", 1, 0, 1, 127},
    [loomUint8] = {"uint8", 1, 0, 0, 255},
    [loomInt32] = {"int32", 4, 0, 1, INT32_MAX},
    [loomUint32] = {"uint32", 4, 0, 0, INT32_MAX},
    [loomInt64] = {"int64", 8, 0, 1, INT32_MAX},
    [loomUint64] = {"uint64", 8, 0, 0, INT32_MAX},
    [loomFloat16] = {"half", 2, 1, 1, 2048},
    [loomFloat32] = {"float", 4, 1, 1, 1 << 24},
    [loomFloat64] = {"double", 8, 1, 1, INT32_MAX},
    [loomBfloat16] = {"bfloat16", 2, 1, 1, 256},
};

static const struct {
  const char *name;
  loomDataType_t type;
} type_names[] = {
    {"int8", loomInt8},       {"char", loomInt8},         {"uint8", loomUint8},
    {"int32", loomInt32},     {"int", loomInt32},         {"uint32", loomUint32},
    {"int64", loomInt64},     {"uint64", loomUint64},     {"half", loomFloat16},
    {"float16", loomFloat16}, {"float", loomFloat32},     {"float32", loomFloat32},
    {"double", loomFloat64},  {"float64", loomFloat64},   {"bfloat16", loomBfloat16},
    {"bf16", loomBfloat16},
};

const char *const op_names[loomNumOps] = {
    [loomSum] = "sum", [loomProd] = "prod", [loomMax] = "max",
    [loomMin] = "min", [loomAvg] = "avg"};

/* float16 / bfloat16 <-> float32, round to nearest even. */
static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, man = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xff);
  if (exp == 0xff) /* inf or NaN (kept quiet) */
    return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
  int e = exp - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
  if (e <= 0) {                        /* subnormal half or zero */
    if (e < -10)
      return (uint16_t)sign;
    man |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1)))
      h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
    h++; /* a carry into the exponent is correct (may give inf) */
  return (uint16_t)(sign | h);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) { /* zero or subnormal: man * 2^-24 is exact in float */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31)
    return bits_float(sign | 0x7f800000u | (man << 13));
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

static uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
    return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

void store_value(loomDataType_t t, void *buf, size_t i, int64_t v) {
  char *p = (char *)buf + i * type_info[t].size;
  uint64_t u = (uint64_t)v;
  switch (t) {
  case loomInt8: case loomUint8: { uint8_t x = (uint8_t)u; memcpy(p, &x, 1); break; }
  case loomInt32: case loomUint32: { uint32_t x = (uint32_t)u; memcpy(p, &x, 4); break; }
  case loomInt64: case loomUint64: memcpy(p, &u, 8); break;
  case loomFloat16: { uint16_t x = float_to_half((float)v); memcpy(p, &x, 2); break; }
  case loomBfloat16: { uint16_t x = float_to_bf16((float)v); memcpy(p, &x, 2); break; }
  case loomFloat32: { float x = (float)v; memcpy(p, &x, 4); break; }
  case loomFloat64: { double x = (double)v; memcpy(p, &x, 8); break; }
  default: break;
  }
}

double load_float(loomDataType_t t, const void *buf, size_t i) {
  const char *p = (const char *)buf + i * type_info[t].size;
  uint16_t h;
  float f;
  double d;
  switch (t) {
  case loomFloat16: memcpy(&h, p, 2); return half_to_float(h);
  case loomBfloat16: memcpy(&h, p, 2); return bf16_to_float(h);
  case loomFloat32: memcpy(&f, p, 4); return f;
  default: memcpy(&d, p, 8); return d;
  }
}

void format_value(loomDataType_t t, const void *buf, size_t i, char *out, size_t len) {
  const char *p = (const char *)buf + i * type_info[t].size;
  if (type_info[t].is_float) {
    snprintf(out, len, "%.9g", load_float(t, buf, i));
    return;
  }
  uint64_t u = 0;
  memcpy(&u, p, type_info[t].size); /* little-endian host assumed */
  switch (t) {
  case loomInt8: snprintf(out, len, "%d", (int)(int8_t)(uint8_t)u); break;
  case loomInt32: snprintf(out, len, "%ld", (long)(int32_t)(uint32_t)u); break;
  case loomInt64: snprintf(out, len, "%lld", (long long)(int64_t)u); break;
  default: snprintf(out, len, "%llu", (unsigned long long)u); break;
  }
}

int elem_equal(loomDataType_t t, const void *a, const void *b, size_t i) {
  if (type_info[t].is_float)
    return load_float(t, a, i) == load_float(t, b, i); /* NaN never equal */
  size_t s = type_info[t].size;
  return memcmp((const char *)a + i * s, (const char *)b + i * s, s) == 0;
}

int perf_type_by_name(const char *name, loomDataType_t *out) {
  for (size_t k = 0; k < sizeof type_names / sizeof type_names[0]; k++)
    if (strcmp(type_names[k].name, name) == 0) {
      *out = type_names[k].type;
      return 1;
    }
  return 0;
}
