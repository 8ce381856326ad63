/*
 * record.c — a node's hardware record as it travels between ranks at init:
 * field by field in the one wire byte order (net/bytes.h), strings as
 * fixed NUL-padded fields, so ranks of different builds, compilers or byte
 * orders read the same values and a record is never a struct's memory.  A
 * decoded record is made safe (loom_topo_hw_sanitize) before anyone reads
 * it: strings end inside their fields, the NIC count is in range.
 */
#include "topo/topo.h"
#include "net/bytes.h"

#include <string.h>

#define NIC_BYTES (32 + 16 + 64 + 4 + 4)
_Static_assert(LOOM_TOPO_RECORD_BYTES ==
                   2 * LOOM_TOPO_NAME_BYTES + 4 * 4 + 2 * 8 + 4 + LOOM_TOPO_MAX_NICS * NIC_BYTES,
               "LOOM_TOPO_RECORD_BYTES must match the layout below");

/* A cursor over a record. */
struct rec {
  uint8_t *p;
};

static void put_text(struct rec *r, const char *s, size_t field) {
  size_t n = strnlen(s, field);
  memcpy(r->p, s, n);
  memset(r->p + n, 0, field - n);
  r->p += field;
}

static void put32(struct rec *r, int32_t v) {
  loom_put_u32(r->p, (uint32_t)v);
  r->p += 4;
}

static void put64(struct rec *r, int64_t v) {
  loom_put_u64(r->p, (uint64_t)v);
  r->p += 8;
}

void loom_topo_hw_encode(const struct loom_topo_hw *hw, uint8_t out[LOOM_TOPO_RECORD_BYTES]) {
  struct rec r = {.p = out};
  put_text(&r, hw->hostid, sizeof hw->hostid);
  put_text(&r, hw->hostname, sizeof hw->hostname);
  put32(&r, hw->cores);
  put32(&r, hw->pus);
  put32(&r, hw->numa_nodes);
  put32(&r, hw->sockets);
  put64(&r, hw->l3_bytes);
  put64(&r, hw->memory_bytes);
  put32(&r, hw->nnics);
  for (int i = 0; i < LOOM_TOPO_MAX_NICS; i++) {
    const struct loom_topo_nic *n = &hw->nics[i];
    put_text(&r, n->name, sizeof n->name);
    put_text(&r, n->kind, sizeof n->kind);
    put_text(&r, n->addr, sizeof n->addr);
    put32(&r, n->speed_mbps);
    put32(&r, n->numa);
  }
}

/* The reading side: const bytes, a cursor of its own. */
struct crec {
  const uint8_t *p;
};

static void get_text(struct crec *r, char *s, size_t field) {
  memcpy(s, r->p, field); /* sanitize ends it inside the field */
  r->p += field;
}

static int32_t get32(struct crec *r) {
  int32_t v = (int32_t)loom_get_u32(r->p);
  r->p += 4;
  return v;
}

static int64_t get64(struct crec *r) {
  int64_t v = (int64_t)loom_get_u64(r->p);
  r->p += 8;
  return v;
}

void loom_topo_hw_decode(const uint8_t in[LOOM_TOPO_RECORD_BYTES], struct loom_topo_hw *hw) {
  struct crec r = {.p = in};
  memset(hw, 0, sizeof *hw);
  get_text(&r, hw->hostid, sizeof hw->hostid);
  get_text(&r, hw->hostname, sizeof hw->hostname);
  hw->cores = get32(&r);
  hw->pus = get32(&r);
  hw->numa_nodes = get32(&r);
  hw->sockets = get32(&r);
  hw->l3_bytes = get64(&r);
  hw->memory_bytes = get64(&r);
  hw->nnics = get32(&r);
  for (int i = 0; i < LOOM_TOPO_MAX_NICS; i++) {
    struct loom_topo_nic *n = &hw->nics[i];
    get_text(&r, n->name, sizeof n->name);
    get_text(&r, n->kind, sizeof n->kind);
    get_text(&r, n->addr, sizeof n->addr);
    n->speed_mbps = get32(&r);
    n->numa = get32(&r);
  }
  loom_topo_hw_sanitize(hw);
}
