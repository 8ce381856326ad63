/*
 * fuzz_choice.c — libFuzzer harness for the LOOM_ALGO / LOOM_PROTO syntax
 * (src/plan/choice.c): any text is accepted or refused with a message,
 * never a crash; what is accepted names only bits the mask text can print.
 */
#include "plan/plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *spec = malloc(size + 1);
  if (spec == NULL)
    return 0;
  memcpy(spec, data, size);
  spec[size] = '\0'; /* the variables are C strings: a NUL ends them early */
  unsigned allowed[LOOM_COLL_COUNT];
  char err[256], text[512];
  for (int which = 0; which < 2; which++) {
    err[0] = '\0';
    int rc = which == 0 ? loom_algo_parse(spec, allowed, err, sizeof err)
                        : loom_proto_parse(spec, allowed, err, sizeof err);
    if (rc != 0 && err[0] == '\0')
      abort(); /* refused without saying why */
    if (rc == 0 && which == 0)
      for (int c = 0; c < LOOM_COLL_COUNT; c++)
        (void)loom_algo_mask_text(allowed[c], text, sizeof text);
  }
  free(spec);
  return 0;
}
