/*
 * loom_failure.c — one line per failed Loom call in the tools; see
 * loom_failure.h for why the library's detail is not repeated.
 */
#include "loom_failure.h"

#include <stdio.h>
#include <string.h>

void bench_report_loom_failure(const char *prog, int rank, const char *call_text,
                               loomResult_t res) {
  int name_len = (int)strcspn(call_text, "( ");
  if (rank >= 0)
    fprintf(stderr, "%s: rank %d: %.*s failed (%s; Loom's message is above)\n", prog, rank,
            name_len, call_text, loomGetErrorString(res));
  else
    fprintf(stderr, "%s: %.*s failed (%s; Loom's message is above)\n", prog, name_len,
            call_text, loomGetErrorString(res));
}
