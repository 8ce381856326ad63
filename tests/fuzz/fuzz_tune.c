/*
 * fuzz_tune.c — libFuzzer harness for the LOOM_TUNE_FILE reader
 * (src/plan/tune.c).  The first two input bytes give the job's ranks and
 * nodes, the rest is the file (through a memfd).  Properties: a refusal
 * says why; what loads keeps each collective's entries sorted by size,
 * and lookups at every size of interest answer without fault.
 */
#include "plan/plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static void check_sorted(const struct loom_tune *t) {
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    for (int i = 1; i < t->colls[c].n; i++)
      if (t->colls[c].entries[i - 1].max_bytes >= t->colls[c].entries[i].max_bytes)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  int nranks = 1 + data[0] % 16, nnodes = 1 + data[1] % 4;
  int fd = memfd_create("loom-tune", 0);
  if (fd < 0)
    return 0;
  if (size > 2 && write(fd, data + 2, size - 2) != (ssize_t)(size - 2)) {
    close(fd);
    return 0;
  }
  char path[64], err[512] = "";
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  struct loom_tune t;
  if (loom_tune_load(&t, path, nranks, nnodes, err, sizeof err) != 0) {
    if (err[0] == '\0')
      abort(); /* refused without saying why */
  } else {
    check_sorted(&t);
    for (int c = 0; c < LOOM_COLL_COUNT; c++)
      for (int shift = 0; shift < 64; shift += 7)
        (void)loom_tune_lookup(&t, (enum loom_coll)c, (size_t)1 << shift);
    loom_tune_free(&t);
  }
  close(fd);
  return 0;
}
