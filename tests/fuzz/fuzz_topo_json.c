/*
 * fuzz_topo_json.c — libFuzzer harness for the topology JSON reader
 * (LOOM_TOPO_FILE, loom-sim's --topo; src/topo/json.c).  Any input must
 * be parsed or refused with a message, never crash or leak; what parses
 * must survive a round trip: written back with loom_topo_write_json and
 * read again, it gives the same grouping.
 */
#include "topo/topo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void same_grouping(const struct loom_topo *a, const struct loom_topo *b) {
  if (a->nranks != b->nranks || a->nnodes != b->nnodes ||
      memcmp(a->node_of, b->node_of, (size_t)a->nranks * sizeof *a->node_of) != 0 ||
      memcmp(a->by_node, b->by_node, (size_t)a->nranks * sizeof *a->by_node) != 0 ||
      (a->hw == NULL) != (b->hw == NULL))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct loom_topo t, again;
  char err[256];
  if (loom_topo_parse_json(&t, (const char *)data, size, "fuzz", err, sizeof err) != 0) {
    if (err[0] == '\0')
      abort(); /* refused without saying why */
    return 0;
  }
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL || loom_topo_write_json(&t, f) != 0 || fclose(f) != 0)
    abort();
  if (loom_topo_parse_json(&again, text, len, "fuzz (written back)", err, sizeof err) != 0) {
    fprintf(stderr, "written back, it does not parse: %s\n%s\n", err, text);
    abort();
  }
  same_grouping(&t, &again);
  free(text);
  loom_topo_free(&again);
  loom_topo_free(&t);
  return 0;
}
