/*
 * fuzz_wire.c — libFuzzer harness for the bootstrap's decoders
 * (src/bootstrap/wire.c): the unique id, frame headers, peer info, the
 * HELLO a rank sends the root and the failure NOTICE.  These bytes come
 * from the network, from anyone who can reach the root's port.  The
 * first input byte picks the decoder, the rest is its input (zero-padded
 * to the decoder's fixed size).  Properties: whatever decodes re-encodes
 * and decodes to the same fields; decoded strings end inside their
 * buffers; a HELLO's rank is below its rank count; a frame's length is
 * within the limit passed; a PLACEMENT (the root's answer, of variable
 * length: its rank and rank count come first, 16 bits each) names the
 * rank's own neighbours and its local ranks in order, in range.
 */
#include "bootstrap/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { BUF = 1024 };

static void strings_end(const struct loom_peer_info *p) {
  if (memchr(p->hostname, 0, sizeof p->hostname) == NULL ||
      memchr(p->hostid, 0, sizeof p->hostid) == NULL)
    abort();
}

static void same_peer(const struct loom_peer_info *a, const struct loom_peer_info *b) {
  if (a->rank != b->rank || a->pid != b->pid || strcmp(a->hostname, b->hostname) != 0 ||
      strcmp(a->hostid, b->hostid) != 0 ||
      memcmp(&a->listen_addr, &b->listen_addr, sizeof a->listen_addr) != 0)
    abort();
}

static void id(const uint8_t *in) {
  loomUniqueId uid, again_id;
  struct loom_id_fields f, again;
  memcpy(uid.internal, in, sizeof uid.internal);
  if (loom_id_decode(&uid, &f) != 0)
    return;
  loom_id_encode(&f, &again_id);
  if (loom_id_decode(&again_id, &again) != 0 ||
      memcmp(&f.root, &again.root, sizeof f.root) != 0 ||
      memcmp(f.secret, again.secret, sizeof f.secret) != 0 || f.from_env != again.from_env)
    abort();
}

static void frame(const uint8_t *in) {
  struct loom_frame_hdr h, again;
  uint8_t out[LOOM_FRAME_HDR_BYTES];
  uint32_t max_len = (uint32_t)in[LOOM_FRAME_HDR_BYTES] << 16; /* 0 .. 16 MiB */
  if (loom_frame_hdr_decode(in, max_len, &h) != 0)
    return;
  if (h.len > max_len)
    abort();
  loom_frame_hdr_encode(&h, out);
  if (loom_frame_hdr_decode(out, max_len, &again) != 0 || again.type != h.type ||
      again.len != h.len)
    abort();
}

static void peer(const uint8_t *in) {
  struct loom_peer_info p, again;
  uint8_t out[LOOM_PEER_INFO_BYTES];
  if (loom_peer_info_decode(in, &p) != 0)
    return;
  strings_end(&p);
  loom_peer_info_encode(&p, out);
  if (loom_peer_info_decode(out, &again) != 0)
    abort();
  same_peer(&p, &again);
}

static void hello(const uint8_t *in) {
  struct loom_hello h, again;
  uint8_t out[LOOM_HELLO_BYTES];
  if (loom_hello_decode(in, &h) != 0)
    return;
  if (h.nranks <= 0 || h.info.rank < 0 || h.info.rank >= h.nranks || h.nroots < 1 ||
      h.nroots > h.nranks || h.root < 0 || h.root >= h.nroots)
    abort();
  /* a member is in the block of the root it names */
  if (h.role == LOOM_HELLO_MEMBER && loom_roots_of(h.info.rank, h.nranks, h.nroots) != h.root)
    abort();
  strings_end(&h.info);
  loom_hello_encode(&h, out);
  if (loom_hello_decode(out, &again) != 0 || again.nranks != h.nranks ||
      again.nroots != h.nroots || again.root != h.root || again.role != h.role)
    abort();
  same_peer(&h.info, &again.info);
}

static void notice(const uint8_t *in) {
  struct loom_notice n, again;
  uint8_t out[LOOM_NOTICE_BYTES];
  if (loom_notice_decode(in, &n) != 0)
    return;
  (void)loom_notice_text(n.kind);
  (void)loom_notice_result(n.kind);
  loom_notice_encode(&n, out);
  if (loom_notice_decode(out, &again) != 0 || again.suspect != n.suspect ||
      again.reporter != n.reporter || again.kind != n.kind ||
      memcmp(again.suspect_fp, n.suspect_fp, sizeof n.suspect_fp) != 0 ||
      memcmp(again.reporter_fp, n.reporter_fp, sizeof n.reporter_fp) != 0)
    abort();
}

static void placement(const uint8_t *in, size_t len) {
  if (len < 4)
    return;
  int32_t rank = in[0] << 8 | in[1], nranks = in[2] << 8 | in[3];
  struct loom_placement p, again;
  if (loom_placement_decode(in + 4, len - 4, rank, nranks, &p) != 0) {
    if (p.local != NULL)
      abort();
    return;
  }
  if (p.prev.rank != (rank + nranks - 1) % nranks || p.next.rank != (rank + 1) % nranks ||
      p.nlocal < 1 || p.nlocal > nranks)
    abort();
  int self = 0;
  for (int32_t i = 0; i < p.nlocal; i++) {
    if (p.local[i] < 0 || p.local[i] >= nranks || (i > 0 && p.local[i] <= p.local[i - 1]))
      abort();
    self |= p.local[i] == rank;
  }
  strings_end(&p.prev);
  strings_end(&p.next);
  uint8_t *out = malloc(LOOM_PLACEMENT_BYTES(p.nlocal));
  if (!self || out == NULL)
    abort();
  loom_placement_encode(&p, out);
  if (loom_placement_decode(out, LOOM_PLACEMENT_BYTES(p.nlocal), rank, nranks, &again) != 0 ||
      again.nlocal != p.nlocal ||
      memcmp(again.local, p.local, sizeof *p.local * (size_t)p.nlocal) != 0)
    abort();
  same_peer(&p.prev, &again.prev);
  same_peer(&p.next, &again.next);
  free(out);
  free(p.local);
  free(again.local);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t in[BUF] = {0};
  memcpy(in, data + 1, size - 1 < BUF ? size - 1 : BUF);
  if (data[0] % 6 == 5) {
    placement(data + 1, size - 1);
    return 0;
  }
  switch (data[0] % 6) {
  case 0: id(in); break;
  case 1: frame(in); break;
  case 2: peer(in); break;
  case 3: hello(in); break;
  default: notice(in); break;
  }
  return 0;
}
