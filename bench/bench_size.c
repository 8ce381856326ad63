/*
 * bench_size.c — size arguments of the benchmarks (see bench_size.h).
 */
#include "bench_size.h"

#include <errno.h>
#include <stdlib.h>

int bench_parse_size(const char *s, size_t max, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10), mult = 1;
  if (end == s || errno != 0 || *s == '-')
    return -1;
  switch (*end) {
  case 'k': case 'K': mult = 1ull << 10; end++; break;
  case 'm': case 'M': mult = 1ull << 20; end++; break;
  case 'g': case 'G': mult = 1ull << 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || v > (unsigned long long)max / mult)
    return -1;
  *out = (size_t)(v * mult);
  return 0;
}
