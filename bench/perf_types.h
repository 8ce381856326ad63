/*
 * perf_types.h — loom-perf's view of Loom's datatypes: names, sizes, the
 * largest exact sum, and reading/writing/comparing elements as the checks
 * need (float16 and bfloat16 converted in software, round to nearest even).
 */
#ifndef PERF_TYPES_H
#define PERF_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

typedef struct {
  const char *name; /* as printed in the table */
  size_t size;
  int is_float;
  int is_signed;
  int64_t exact_max; /* largest sum the type holds exactly (and without wrap) */
} type_info_t;

/* Indexed by loomDataType_t. */
extern const type_info_t type_info[loomNumTypes];
/* Indexed by loomRedOp_t (built-in ops). */
extern const char *const op_names[loomNumOps];

/* The type -d names ("float", "half", "bf16", ...); 0 when unknown. */
int perf_type_by_name(const char *name, loomDataType_t *out);
/* Stores the integer v as element i of buf; integers wrap (two's complement). */
void store_value(loomDataType_t t, void *buf, size_t i, int64_t v);
/* Element i of a float-typed buffer, as a double. */
double load_float(loomDataType_t t, const void *buf, size_t i);
/* Element i as text. */
void format_value(loomDataType_t t, const void *buf, size_t i, char *out, size_t len);
/* Whether element i of a and b are equal (NaN never). */
int elem_equal(loomDataType_t t, const void *a, const void *b, size_t i);

#endif
