/*
 * loom-perf.c — bandwidth benchmark for Loom collectives, in the style of
 * NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf).
 *
 *   loomrun -n 4 loom-perf [-C allreduce|allgather] -b 8 -e 64M -f 2
 *
 * Uses the public API only.  Every rank sweeps the same message sizes; for
 * each size it checks the result once out of place and once in place (-c 1),
 * then times -n iterations of each after -w warm-up iterations.  The time
 * reported is the slowest rank's average per iteration.  Rank 0 prints the
 * table.  Exit status: 0 on success, 1 on a Loom error or a wrong result,
 * 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"

/* ---- Error handling -------------------------------------------------------- */

static loomComm_t g_comm; /* set once the communicator exists */
static int g_rank = -1;

static void die_loom(const char *what, loomResult_t res, int line) {
  const char *detail = loomGetLastError(g_comm);
  fprintf(stderr, "loom-perf: rank %d: %s failed (line %d): %s (%d): %s\n",
          g_rank, what, line, loomGetErrorString(res), (int)res,
          detail && *detail ? detail : "(no further details)");
  if (g_comm != NULL)
    loomCommAbort(g_comm); /* make the peers fail fast instead of hanging */
  exit(1);
}

#define LOOMCHECK(call)                                                        \
  do {                                                                         \
    loomResult_t res_ = (call);                                                \
    if (res_ != loomSuccess)                                                   \
      die_loom(#call, res_, __LINE__);                                         \
  } while (0)

/* ---- Data types ------------------------------------------------------------ */

typedef struct {
  const char *name; /* as printed in the table */
  size_t size;
  int is_float;
  int is_signed;
  int64_t exact_max; /* largest sum the type holds exactly (and without wrap) */
} type_info_t;

/* Indexed by loomDataType_t. */
static const type_info_t type_info[loomNumTypes] = {
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

static const char *const op_names[loomNumOps] = {
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

/* Stores the integer v as element i of buf; integers wrap (two's complement). */
static void store_value(loomDataType_t t, void *buf, size_t i, int64_t v) {
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

/* Element i of a float-typed buffer, as a double. */
static double load_float(loomDataType_t t, const void *buf, size_t i) {
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

/* Element i of an integer-typed buffer, as text. */
static void format_value(loomDataType_t t, const void *buf, size_t i, char *out, size_t len) {
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

static int elem_equal(loomDataType_t t, const void *a, const void *b, size_t i) {
  if (type_info[t].is_float)
    return load_float(t, a, i) == load_float(t, b, i); /* NaN never equal */
  size_t s = type_info[t].size;
  return memcmp((const char *)a + i * s, (const char *)b + i * s, s) == 0;
}

/* ---- Options --------------------------------------------------------------- */

enum { COLL_ALLREDUCE, COLL_ALLGATHER };

typedef struct {
  size_t min_bytes, max_bytes, step_bytes;
  size_t step_factor; /* > 1: multiply; else add step_bytes */
  int iters, warmup, check;
  loomDataType_t type;
  loomRedOp_t op;
  int coll;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: loomrun -n NRANKS loom-perf [options]\n"
          "  -C collective    allreduce (default) or allgather\n"
          "  -b minbytes      smallest message (default 8); K, M, G suffixes\n"
          "  -e maxbytes      largest message (default 64M)\n"
          "  -i stepbytes     increment between sizes\n"
          "  -f stepfactor    multiplication factor between sizes (default 2)\n"
          "  -n iters         timed iterations per size (default 20)\n"
          "  -w warmup        warm-up iterations per size (default 5)\n"
          "  -c 0|1           check results (default 1)\n"
          "  -d datatype      int8 uint8 int32 uint32 int64 uint64 half|float16\n"
          "                   float|float32 double|float64 bfloat16 (default float)\n"
          "  -o op            sum prod min max avg (default sum; allreduce only)\n"
          "  -h               this help\n"
          "For allgather, sizes are the total bytes each rank receives.\n"
          "The rendezvous comes from LOOM_COMM_ID (set by loomrun), or from\n"
          "MASTER_ADDR/MASTER_PORT (torchrun) as MASTER_ADDR:(MASTER_PORT+1).\n");
}

static void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "loom-perf: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(loom-perf -h lists the options)\n");
  exit(2);
}

/* "64M" -> 67108864; returns 0 on success. */
static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno != 0 || *s == '-')
    return -1;
  unsigned long long mult = 1;
  switch (*end) {
  case 'k': case 'K': mult = 1ull << 10; end++; break;
  case 'm': case 'M': mult = 1ull << 20; end++; break;
  case 'g': case 'G': mult = 1ull << 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mult)
    return -1;
  *out = (size_t)(v * mult);
  return 0;
}

static int parse_int(const char *s, int lo, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > INT_MAX)
    return -1;
  *out = (int)v;
  return 0;
}

static void parse_args(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.min_bytes = 8, .max_bytes = 64u << 20, .step_bytes = 1u << 20,
                .step_factor = 2, .iters = 20, .warmup = 5, .check = 1,
                .type = loomFloat32, .op = loomSum, .coll = COLL_ALLREDUCE};
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (arg[0] != '-' || arg[1] == '\0' || arg[2] != '\0' || strchr("Cbeifnwcdo", arg[1]) == NULL)
      usage_error("unknown argument '%s'", arg);
    if (a + 1 >= argc)
      usage_error("option %s needs a value", arg);
    const char *val = argv[++a];
    int iv = 0;
    switch (arg[1]) {
    case 'b': if (parse_size(val, &o->min_bytes)) usage_error("bad size '%s'", val); break;
    case 'e': if (parse_size(val, &o->max_bytes)) usage_error("bad size '%s'", val); break;
    case 'i':
      if (parse_size(val, &o->step_bytes) || o->step_bytes == 0)
        usage_error("bad step '%s'", val);
      o->step_factor = 1;
      break;
    case 'f':
      if (parse_int(val, 1, &iv)) usage_error("bad step factor '%s'", val);
      o->step_factor = (size_t)iv;
      break;
    case 'n': if (parse_int(val, 1, &o->iters)) usage_error("bad iteration count '%s'", val); break;
    case 'w': if (parse_int(val, 0, &o->warmup)) usage_error("bad warm-up count '%s'", val); break;
    case 'c':
      if (parse_int(val, 0, &o->check) || o->check > 1) usage_error("-c takes 0 or 1, not '%s'", val);
      break;
    case 'd': {
      size_t k, n = sizeof type_names / sizeof type_names[0];
      for (k = 0; k < n && strcmp(type_names[k].name, val) != 0; k++)
        ;
      if (k == n) usage_error("unknown datatype '%s'", val);
      o->type = type_names[k].type;
      break;
    }
    case 'o': {
      int k;
      for (k = 0; k < loomNumOps && strcmp(op_names[k], val) != 0; k++)
        ;
      if (k == loomNumOps) usage_error("unknown op '%s'", val);
      o->op = (loomRedOp_t)k;
      break;
    }
    case 'C':
      if (strcmp(val, "allreduce") == 0) o->coll = COLL_ALLREDUCE;
      else if (strcmp(val, "allgather") == 0) o->coll = COLL_ALLGATHER;
      else usage_error("unknown collective '%s' (allreduce or allgather)", val);
      break;
    }
  }
  if (o->min_bytes > o->max_bytes)
    usage_error("minbytes is larger than maxbytes%s", "");
}

/* ---- The benchmark --------------------------------------------------------- */

typedef struct {
  opts_t o;
  loomComm_t comm;
  int rank, nranks;
  size_t tsize;
  void *send, *recv, *expect; /* sized for max_bytes */
  int64_t sum_max;            /* input values for sum/avg stay in 0..sum_max */
  int reports;                /* mismatch lines printed by this rank */
} bench_t;

/* Input element i of rank r.  Every value is a small integer chosen so that
 * every partial result is exact in every type, whatever the reduction order:
 * sums stay within type_info.exact_max, products are powers of two <= 64,
 * and for avg each pair of ranks adds +d and -d to a common base, so the sum
 * is exactly nranks*base and the average exactly base. */
static int64_t input_value(const bench_t *b, int r, size_t i, unsigned seed) {
  uint64_t k = (uint64_t)i + seed, ur = (uint64_t)r;
  if (b->o.coll == COLL_ALLGATHER)
    return (int64_t)((ur * 31 + k * 7) % 97);
  switch (b->o.op) {
  case loomSum:
    return (int64_t)((k * 7 + ur * 3) % (uint64_t)(b->sum_max + 1));
  case loomProd:
    return (r < 6 && ((k >> r) & 1)) ? 2 : 1;
  case loomAvg: {
    if (b->sum_max < 2)
      return b->sum_max;
    int64_t base = 1 + (int64_t)(k % (uint64_t)(b->sum_max - 1));
    if ((b->nranks & 1) && r == b->nranks - 1)
      return base; /* the unpaired last rank */
    int64_t d = ((k + ur / 2) & 1) ? 1 : -1;
    return (r & 1) ? base - d : base + d;
  }
  default: { /* min, max: signed types get negative values too */
    int64_t v = (int64_t)((k * 31 + ur * 17) % 97);
    return type_info[b->o.type].is_signed ? v - 48 : v;
  }
  }
}

/* Fills b->send with this rank's input (count elements) and b->expect with
 * the result every rank should get. */
static void prepare(bench_t *b, size_t count, unsigned seed) {
  loomDataType_t t = b->o.type;
  for (size_t i = 0; i < count; i++)
    store_value(t, b->send, i, input_value(b, b->rank, i, seed));
  if (b->o.coll == COLL_ALLGATHER) {
    for (int r = 0; r < b->nranks; r++)
      for (size_t i = 0; i < count; i++)
        store_value(t, b->expect, (size_t)r * count + i, input_value(b, r, i, seed));
    return;
  }
  for (size_t i = 0; i < count; i++) {
    int64_t acc = input_value(b, 0, i, seed);
    for (int r = 1; r < b->nranks; r++) {
      int64_t v = input_value(b, r, i, seed);
      switch (b->o.op) {
      case loomProd: acc *= v; break;
      case loomMax: acc = v > acc ? v : acc; break;
      case loomMin: acc = v < acc ? v : acc; break;
      default: acc += v; break; /* sum, avg */
      }
    }
    if (b->o.op == loomAvg)
      acc /= b->nranks; /* exact by construction; truncating for integers */
    store_value(t, b->expect, i, acc);
  }
}

static void run_coll(bench_t *b, size_t count, int in_place) {
  char *recv = b->recv;
  if (b->o.coll == COLL_ALLREDUCE) {
    const void *send = in_place ? (const void *)recv : b->send;
    LOOMCHECK(loomAllReduce(send, recv, count, b->o.type, b->o.op, b->comm, NULL));
  } else {
    const void *send = in_place ? (const void *)(recv + (size_t)b->rank * count * b->tsize) : b->send;
    LOOMCHECK(loomAllGather(send, recv, count, b->o.type, b->comm, NULL));
  }
}

static int64_t sum_over_ranks(bench_t *b, int64_t v) {
  LOOMCHECK(loomAllReduce(&v, &v, 1, loomInt64, loomSum, b->comm, NULL));
  return v;
}

/* One checked run; returns the number of wrong elements over all ranks. */
static int64_t check_once(bench_t *b, size_t count, int in_place) {
  size_t nelem = b->o.coll == COLL_ALLGATHER ? count * (size_t)b->nranks : count;
  size_t bytes = nelem * b->tsize;
  memset(b->recv, 0x7f, bytes); /* poison: not a value any check expects */
  if (in_place) {
    size_t off = b->o.coll == COLL_ALLGATHER ? (size_t)b->rank * count * b->tsize : 0;
    memcpy((char *)b->recv + off, b->send, count * b->tsize);
  }
  run_coll(b, count, in_place);
  int64_t wrong = 0;
  for (size_t i = 0; i < nelem; i++) {
    if (elem_equal(b->o.type, b->recv, b->expect, i))
      continue;
    if (wrong++ == 0 && b->reports < 10) {
      char got[64], want[64];
      format_value(b->o.type, b->recv, i, got, sizeof got);
      format_value(b->o.type, b->expect, i, want, sizeof want);
      fprintf(stderr, "loom-perf: rank %d: %s %s %s count %zu (%s): element %zu is %s, expected %s\n",
              b->rank, b->o.coll == COLL_ALLGATHER ? "allgather" : "allreduce",
              type_info[b->o.type].name, b->o.coll == COLL_ALLGATHER ? "-" : op_names[b->o.op],
              count, in_place ? "in place" : "out of place", i, got, want);
      b->reports++;
    }
  }
  return sum_over_ranks(b, wrong);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Average microseconds per iteration of the slowest rank. */
static double time_coll(bench_t *b, size_t count, int in_place) {
  int32_t token = 0;
  LOOMCHECK(loomAllReduce(&token, &token, 1, loomInt32, loomSum, b->comm, NULL)); /* barrier */
  double t0 = now_s();
  for (int it = 0; it < b->o.iters; it++)
    run_coll(b, count, in_place);
  double us = (now_s() - t0) * 1e6 / b->o.iters;
  LOOMCHECK(loomAllReduce(&us, &us, 1, loomFloat64, loomMax, b->comm, NULL));
  return us;
}

static void print_result(double us, size_t bytes, double bus_factor, int check, int64_t wrong,
                         double *bw_sum) {
  char tstr[32], wstr[32];
  snprintf(tstr, sizeof tstr, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  if (check)
    snprintf(wstr, sizeof wstr, "%lld", (long long)wrong);
  else
    snprintf(wstr, sizeof wstr, "N/A");
  double algbw = (double)bytes / (us * 1e3); /* bytes/us/1e3 = GB/s */
  double busbw = algbw * bus_factor;
  *bw_sum += busbw;
  printf("  %7s  %6.2f  %6.2f  %6s", tstr, algbw, busbw, wstr);
}

static void print_header(bench_t *b, const char *launcher) {
  /* Every rank contributes "Pid ... on host"; rank 0 prints them. */
  enum { INFO = 128 };
  char mine[INFO] = {0}, host[64] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(mine, sizeof mine, "Pid %6ld on %s", (long)getpid(), host);
  char *all = calloc((size_t)b->nranks, INFO);
  if (all == NULL) {
    fprintf(stderr, "loom-perf: out of memory\n");
    exit(1);
  }
  LOOMCHECK(loomAllGather(mine, all, INFO, loomUint8, b->comm, NULL));
  if (b->rank == 0) {
    const opts_t *o = &b->o;
    int lib = 0;
    LOOMCHECK(loomGetVersion(&lib));
    printf("# loom-perf: %s, Loom library %d.%d.%d (header %d.%d.%d), launcher %s\n",
           o->coll == COLL_ALLGATHER ? "allgather" : "allreduce", lib / 10000,
           lib / 100 % 100, lib % 100, LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH, launcher);
    printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
           "validation: %d\n",
           b->nranks, o->min_bytes, o->max_bytes,
           o->step_factor > 1 ? o->step_factor : o->step_bytes,
           o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
    printf("#\n# Using ranks\n");
    for (int r = 0; r < b->nranks; r++)
      printf("#  Rank %2d %.*s\n", r, INFO - 1, all + (size_t)r * INFO);
    printf("#\n");
    printf("#%54s%-33s%s\n", "", "out-of-place", "in-place");
    printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
           "type", "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
           "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  free(all);
}

/* Chooses the rendezvous address; exits with a message when there is none. */
static void setup_comm_id(int rank, int nranks) {
  const char *id = getenv("LOOM_COMM_ID");
  if (id != NULL && *id != '\0')
    return;
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr != NULL && *addr != '\0' && port != NULL && *port != '\0') {
    int p;
    if (parse_int(port, 1, &p) || p >= 65535) {
      fprintf(stderr, "loom-perf: rank %d: bad MASTER_PORT '%s'\n", rank, port);
      exit(1);
    }
    char buf[300];
    int v6 = strchr(addr, ':') != NULL && addr[0] != '[';
    snprintf(buf, sizeof buf, v6 ? "[%s]:%d" : "%s:%d", addr, p + 1);
    if (setenv("LOOM_COMM_ID", buf, 1) != 0) {
      perror("loom-perf: setenv");
      exit(1);
    }
    if (rank == 0)
      printf("# LOOM_COMM_ID unset: using MASTER_ADDR:(MASTER_PORT+1) = %s\n", buf);
    return;
  }
  if (nranks == 1)
    return; /* a lone rank can host its own root */
  if (rank != 0) { /* rank 0 explains */
    fprintf(stderr, "loom-perf: rank %d: LOOM_COMM_ID is not set\n", rank);
    exit(1);
  }
  fprintf(stderr,
          "loom-perf: rank %d: no rendezvous address: LOOM_COMM_ID is not set.\n"
          "  Run under loomrun (e.g. 'loomrun -n %d loom-perf ...'), or set\n"
          "  LOOM_COMM_ID=host:port (the same on every rank; rank 0 listens there),\n"
          "  or MASTER_ADDR and MASTER_PORT as torchrun does.\n",
          rank, nranks);
  exit(1);
}

static void *alloc_buf(size_t bytes) {
  size_t align = 4096, rounded = (bytes + align - 1) / align * align;
  void *p = aligned_alloc(align, rounded ? rounded : align);
  if (p == NULL) {
    fprintf(stderr, "loom-perf: rank %d: cannot allocate %zu bytes\n", g_rank, bytes);
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  bench_t b = {0};
  parse_args(argc, argv, &b.o);
  const opts_t *o = &b.o;

  loomLaunchInfo_t li;
  loomResult_t res = loomGetLaunchInfo(&li);
  if (res != loomSuccess) {
    fprintf(stderr, "loom-perf: cannot tell this process's rank: %s: %s\n"
            "  Run under a launcher, e.g. 'loomrun -n 4 loom-perf ...'.\n",
            loomGetErrorString(res), loomGetLastError(NULL));
    return 1;
  }
  b.rank = g_rank = li.rank;
  b.nranks = li.nranks;
  setup_comm_id(b.rank, b.nranks);

  loomUniqueId id;
  LOOMCHECK(loomGetUniqueId(&id));
  LOOMCHECK(loomCommInitRank(&b.comm, b.nranks, id, b.rank));
  g_comm = b.comm;
  int n = 0, r = 0;
  LOOMCHECK(loomCommCount(b.comm, &n));
  LOOMCHECK(loomCommUserRank(b.comm, &r));
  if (n != b.nranks || r != b.rank) {
    fprintf(stderr, "loom-perf: rank %d: communicator says rank %d of %d, launcher says %d of %d\n",
            b.rank, r, n, b.rank, b.nranks);
    loomCommAbort(b.comm);
    return 1;
  }

  b.tsize = type_info[o->type].size;
  int64_t m = type_info[o->type].exact_max / b.nranks;
  b.sum_max = m < 7 ? m : 7;
  /* allgather: the send buffer only holds one rank's share */
  size_t send_bytes = o->coll == COLL_ALLGATHER ? o->max_bytes / (size_t)b.nranks : o->max_bytes;
  b.send = alloc_buf(send_bytes);
  b.recv = alloc_buf(o->max_bytes);
  b.expect = o->check ? alloc_buf(o->max_bytes) : NULL;
  memset(b.send, 0, send_bytes);
  memset(b.recv, 0, o->max_bytes);

  print_header(&b, li.launcher ? li.launcher : "?");

  double bus_factor = o->coll == COLL_ALLGATHER
                          ? (double)(b.nranks - 1) / b.nranks
                          : 2.0 * (b.nranks - 1) / b.nranks;
  const char *redop = o->coll == COLL_ALLGATHER ? "none" : op_names[o->op];
  int64_t total_wrong = 0;
  double bw_sum = 0;
  int bw_count = 0;
  unsigned seed = 0;

  for (size_t bytes = o->min_bytes; bytes <= o->max_bytes;) {
    size_t count = bytes / b.tsize;
    if (o->coll == COLL_ALLGATHER)
      count /= (size_t)b.nranks; /* per rank */
    size_t total = count * b.tsize * (o->coll == COLL_ALLGATHER ? (size_t)b.nranks : 1);
    if (count > 0) {
      int64_t wrong_oop = 0, wrong_ip = 0;
      if (o->check) {
        prepare(&b, count, seed++);
        wrong_oop = check_once(&b, count, 0);
        wrong_ip = check_once(&b, count, 1);
        total_wrong += wrong_oop + wrong_ip;
      }
      for (int w = 0; w < o->warmup; w++)
        run_coll(&b, count, 0);
      double us_oop = time_coll(&b, count, 0);
      double us_ip = time_coll(&b, count, 1);
      if (b.rank == 0) {
        printf("%12zu  %12zu  %8s  %6s", total, count, type_info[o->type].name, redop);
        print_result(us_oop, total, bus_factor, o->check, wrong_oop, &bw_sum);
        print_result(us_ip, total, bus_factor, o->check, wrong_ip, &bw_sum);
        printf("\n");
        fflush(stdout);
      }
      bw_count += 2;
    }
    /* next size; stop on overflow */
    if (o->step_factor > 1) {
      if (bytes > SIZE_MAX / o->step_factor)
        break;
      bytes = bytes == 0 ? 1 : bytes * o->step_factor;
    } else {
      if (bytes > SIZE_MAX - o->step_bytes)
        break;
      bytes += o->step_bytes;
    }
  }

  if (b.rank == 0) {
    printf("# Out of bounds values : %lld %s\n", (long long)total_wrong,
           total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", bw_count ? bw_sum / bw_count : 0.0);
    printf("#\n");
    fflush(stdout);
  }

  LOOMCHECK(loomCommFinalize(b.comm));
  LOOMCHECK(loomCommDestroy(b.comm));
  g_comm = NULL;
  free(b.send);
  free(b.recv);
  free(b.expect);
  return total_wrong ? 1 : 0;
}
