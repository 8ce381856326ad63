/*
 * fuzz_topo_record.c — libFuzzer harness for the topology records ranks
 * send each other at init (src/topo/record.c, grouped as exchange.c
 * does).  The first byte picks 1 to 4 ranks; the rest is split evenly
 * into the starts of their records (the remainder zeros), as other ranks
 * could send them.
 * Properties: a decoded record is safe (strings NUL-terminated, nnics in
 * range) and a fixed point (encoded and decoded again it is the same);
 * the ranks group into nodes; and the topology written as JSON (what
 * LOOM_TOPO_DUMP_FILE writes) reads back with the same grouping and the
 * same hardware, whatever bytes the names held.
 */
#include "topo/topo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 4

static void check_safe(const struct loom_topo_hw *hw) {
  if (memchr(hw->hostid, 0, sizeof hw->hostid) == NULL ||
      memchr(hw->hostname, 0, sizeof hw->hostname) == NULL || hw->nnics < 0 ||
      hw->nnics > LOOM_TOPO_MAX_NICS)
    abort();
  for (int i = 0; i < LOOM_TOPO_MAX_NICS; i++) {
    const struct loom_topo_nic *n = &hw->nics[i];
    if (memchr(n->name, 0, sizeof n->name) == NULL || memchr(n->kind, 0, sizeof n->kind) == NULL ||
        memchr(n->addr, 0, sizeof n->addr) == NULL)
      abort();
  }
}

static const char *hostid_of(int r, void *arg) {
  return ((const struct loom_topo_hw *)arg)[r].hostid;
}

static void same_topology(const struct loom_topo *a, const struct loom_topo *b, const char *text) {
  if (a->nranks != b->nranks || a->nnodes != b->nnodes ||
      memcmp(a->node_of, b->node_of, (size_t)a->nranks * sizeof *a->node_of) != 0 ||
      (a->hw == NULL) != (b->hw == NULL)) {
    fprintf(stderr, "written back, another grouping:\n%s\n", text);
    abort();
  }
  for (int k = 0; a->hw != NULL && k < a->nnodes; k++)
    if (memcmp(&a->hw[k], &b->hw[k], sizeof a->hw[k]) != 0) {
      fprintf(stderr, "written back, node %d's hardware differs:\n%s\n", k, text);
      abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  int n = 1 + data[0] % MAX_RANKS;
  static uint8_t wire[MAX_RANKS * LOOM_TOPO_RECORD_BYTES];
  memset(wire, 0, sizeof wire);
  /* each rank's record starts with its share of the input (test_fuzz.sh
   * caps inputs at 4 KiB, two records' worth) */
  size_t share = (size - 1) / (size_t)n;
  if (share > LOOM_TOPO_RECORD_BYTES)
    share = LOOM_TOPO_RECORD_BYTES;
  for (int r = 0; r < n; r++)
    memcpy(wire + (size_t)r * LOOM_TOPO_RECORD_BYTES, data + 1 + (size_t)r * share, share);
  struct loom_topo_hw all[MAX_RANKS], again;
  static uint8_t back[LOOM_TOPO_RECORD_BYTES];
  for (int r = 0; r < n; r++) {
    loom_topo_hw_decode(wire + (size_t)r * LOOM_TOPO_RECORD_BYTES, &all[r]);
    check_safe(&all[r]);
    loom_topo_hw_encode(&all[r], back);
    loom_topo_hw_decode(back, &again);
    if (memcmp(&again, &all[r], sizeof again) != 0)
      abort(); /* not a fixed point */
  }
  struct loom_topo t, t2;
  if (loom_topo_group(&t, n, hostid_of, all) != 0)
    return 0; /* out of memory */
  t.hw = malloc((size_t)t.nnodes * sizeof *t.hw);
  if (t.hw == NULL)
    abort();
  for (int k = 0; k < t.nnodes; k++)
    t.hw[k] = all[loom_topo_rank_at(&t, k, 0)];
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL || loom_topo_write_json(&t, f) != 0 || fclose(f) != 0)
    abort();
  char err[256];
  if (loom_topo_parse_json(&t2, text, len, "fuzz (written back)", err, sizeof err) != 0) {
    fprintf(stderr, "written back, it does not parse: %s\n%s\n", err, text);
    abort();
  }
  same_topology(&t, &t2, text);
  free(text);
  loom_topo_free(&t2);
  loom_topo_free(&t);
  return 0;
}
