/*
 * wire.c — encoders and validating decoders for bootstrap messages.
 */
#include "bootstrap/wire.h"
#include "net/bytes.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAGIC 0x4c4d4944u /* "LMID" */
#define ID_VERSION 1u

/* Id layout: magic(4) version(4) flags(4) addr(20) secret(16), rest zero. */
void loom_id_encode(const struct loom_id_fields *f, loomUniqueId *id) {
  uint8_t *p = (uint8_t *)id->internal;
  memset(id, 0, sizeof *id);
  loom_put_u32(p, ID_MAGIC);
  loom_put_u32(p + 4, ID_VERSION);
  loom_put_u32(p + 8, f->from_env ? 1u : 0u);
  loom_sockaddr_encode(&f->root, p + 12);
  memcpy(p + 32, f->secret, LOOM_SECRET_BYTES);
}

int loom_id_decode(const loomUniqueId *id, struct loom_id_fields *f) {
  const uint8_t *p = (const uint8_t *)id->internal;
  if (loom_get_u32(p) != ID_MAGIC || loom_get_u32(p + 4) != ID_VERSION)
    return -1;
  uint32_t flags = loom_get_u32(p + 8);
  if (flags > 1)
    return -1;
  memset(f, 0, sizeof *f);
  f->from_env = (int)flags;
  if (loom_sockaddr_decode(p + 12, &f->root) != 0 || loom_sockaddr_port(&f->root) == 0)
    return -1;
  memcpy(f->secret, p + 32, LOOM_SECRET_BYTES);
  return 0;
}

void loom_frame_hdr_encode(const struct loom_frame_hdr *h,
                           uint8_t out[LOOM_FRAME_HDR_BYTES]) {
  loom_put_u32(out, LOOM_FRAME_MAGIC);
  loom_put_u32(out + 4, h->type);
  loom_put_u32(out + 8, h->len);
}

int loom_frame_hdr_decode(const uint8_t in[LOOM_FRAME_HDR_BYTES], uint32_t max_len,
                          struct loom_frame_hdr *h) {
  if (loom_get_u32(in) != LOOM_FRAME_MAGIC)
    return -1;
  h->type = loom_get_u32(in + 4);
  h->len = loom_get_u32(in + 8);
  if (h->type != LOOM_FRAME_HELLO && h->type != LOOM_FRAME_ERROR && h->type != LOOM_FRAME_DATA &&
      h->type != LOOM_FRAME_NOTICE && h->type != LOOM_FRAME_PLACEMENT &&
      h->type != LOOM_FRAME_ACK)
    return -1;
  if (h->len > max_len || h->len > LOOM_FRAME_MAX_PAYLOAD)
    return -1;
  return 0;
}

/* Copies a fixed-size text field, forcing NUL termination. */
static void copy_text(char *dst, const uint8_t *src, size_t n) {
  memcpy(dst, src, n);
  dst[n - 1] = '\0';
}

void loom_peer_info_encode(const struct loom_peer_info *p, uint8_t *out) {
  loom_put_u32(out, (uint32_t)p->rank);
  loom_put_u32(out + 4, (uint32_t)p->pid);
  memset(out + 8, 0, LOOM_HOSTNAME_BYTES + LOOM_HOSTID_BYTES);
  memcpy(out + 8, p->hostname, strnlen(p->hostname, LOOM_HOSTNAME_BYTES - 1));
  memcpy(out + 8 + LOOM_HOSTNAME_BYTES, p->hostid,
         strnlen(p->hostid, LOOM_HOSTID_BYTES - 1));
  loom_sockaddr_encode(&p->listen_addr, out + 8 + LOOM_HOSTNAME_BYTES + LOOM_HOSTID_BYTES);
}

int loom_peer_info_decode(const uint8_t *in, struct loom_peer_info *p) {
  memset(p, 0, sizeof *p);
  p->rank = (int32_t)loom_get_u32(in);
  p->pid = (int32_t)loom_get_u32(in + 4);
  copy_text(p->hostname, in + 8, LOOM_HOSTNAME_BYTES);
  copy_text(p->hostid, in + 8 + LOOM_HOSTNAME_BYTES, LOOM_HOSTID_BYTES);
  if (p->rank < 0 || p->pid <= 0)
    return -1;
  return loom_sockaddr_decode(in + 8 + LOOM_HOSTNAME_BYTES + LOOM_HOSTID_BYTES,
                              &p->listen_addr);
}

int loom_roots_first(int32_t g, int32_t nranks, int32_t nroots) {
  return (int)((int64_t)g * nranks / nroots);
}

int loom_roots_of(int32_t rank, int32_t nranks, int32_t nroots) {
  int g = (int)((int64_t)rank * nroots / nranks);
  while (g + 1 < nroots && loom_roots_first(g + 1, nranks, nroots) <= rank)
    g++;
  while (g > 0 && loom_roots_first(g, nranks, nroots) > rank)
    g--;
  return g;
}

int loom_roots_neighbours(int32_t g, int32_t nranks, int32_t nroots, int32_t out[2]) {
  /* 64-bit: first + nranks - 1 passes INT32_MAX for large nranks */
  int32_t cand[2] = {(int32_t)(((int64_t)loom_roots_first(g, nranks, nroots) + nranks - 1) % nranks),
                     loom_roots_first(g + 1, nranks, nroots) % nranks};
  int n = 0;
  for (int i = 0; i < 2; i++)
    if (loom_roots_of(cand[i], nranks, nroots) != g && (n == 0 || out[0] != cand[i]))
      out[n++] = cand[i];
  return n;
}

void loom_hello_encode(const struct loom_hello *h, uint8_t *out) {
  loom_put_u32(out, (uint32_t)h->nranks);
  loom_put_u32(out + 4, (uint32_t)h->nroots);
  loom_put_u32(out + 8, (uint32_t)h->root);
  loom_put_u32(out + 12, (uint32_t)h->role);
  loom_peer_info_encode(&h->info, out + 16);
}

/* Whether `rank` may say hello to root g in `role`. */
static int hello_fits_root(int32_t rank, int32_t role, int32_t g, int32_t nranks,
                           int32_t nroots) {
  if (role == LOOM_HELLO_MEMBER)
    return loom_roots_of(rank, nranks, nroots) == g;
  int32_t nb[2];
  int n = loom_roots_neighbours(g, nranks, nroots, nb);
  for (int i = 0; i < n; i++)
    if (nb[i] == rank)
      return 1;
  return 0;
}

int loom_hello_decode(const uint8_t *in, struct loom_hello *h) {
  h->nranks = (int32_t)loom_get_u32(in);
  h->nroots = (int32_t)loom_get_u32(in + 4);
  h->root = (int32_t)loom_get_u32(in + 8);
  h->role = (int32_t)loom_get_u32(in + 12);
  if (h->nranks <= 0 || h->nroots <= 0 || h->nroots > h->nranks || h->root < 0 ||
      h->root >= h->nroots || (h->role != LOOM_HELLO_MEMBER && h->role != LOOM_HELLO_NEIGHBOUR))
    return -1;
  if (loom_peer_info_decode(in + 16, &h->info) != 0 || h->info.rank >= h->nranks)
    return -1;
  return hello_fits_root(h->info.rank, h->role, h->root, h->nranks, h->nroots) ? 0 : -1;
}

void loom_placement_encode(const struct loom_placement *p, uint8_t *out) {
  loom_peer_info_encode(&p->prev, out);
  loom_peer_info_encode(&p->next, out + LOOM_PEER_INFO_BYTES);
  out += 2 * LOOM_PEER_INFO_BYTES;
  loom_put_u32(out, (uint32_t)p->nlocal);
  for (int32_t i = 0; i < p->nlocal; i++)
    loom_put_u32(out + 4 + 4 * (size_t)i, (uint32_t)p->local[i]);
}

/* The local ranks: ascending, in range, `rank` among them. */
static int local_ranks_ok(const int32_t *local, int32_t nlocal, int32_t rank, int32_t nranks) {
  int self = 0;
  for (int32_t i = 0; i < nlocal; i++) {
    if (local[i] < 0 || local[i] >= nranks || (i > 0 && local[i] <= local[i - 1]))
      return 0;
    self |= local[i] == rank;
  }
  return self;
}

int loom_placement_decode(const uint8_t *in, size_t len, int32_t rank, int32_t nranks,
                          struct loom_placement *p) {
  memset(p, 0, sizeof *p);
  if (nranks <= 0 || rank < 0 || rank >= nranks || len < LOOM_PLACEMENT_BYTES(1))
    return -1;
  const uint8_t *tail = in + 2 * LOOM_PEER_INFO_BYTES;
  uint32_t nlocal = loom_get_u32(tail);
  if (nlocal == 0 || nlocal > (uint32_t)nranks || len != LOOM_PLACEMENT_BYTES(nlocal))
    return -1;
  if (loom_peer_info_decode(in, &p->prev) != 0 ||
      loom_peer_info_decode(in + LOOM_PEER_INFO_BYTES, &p->next) != 0 ||
      p->prev.rank != (int32_t)(((int64_t)rank + nranks - 1) % nranks) ||
      p->next.rank != (int32_t)(((int64_t)rank + 1) % nranks))
    return -1;
  p->local = malloc(sizeof *p->local * nlocal);
  if (p->local == NULL)
    return -1;
  p->nlocal = (int32_t)nlocal;
  for (uint32_t i = 0; i < nlocal; i++)
    p->local[i] = (int32_t)loom_get_u32(tail + 4 + 4 * (size_t)i);
  if (!local_ranks_ok(p->local, p->nlocal, rank, nranks)) {
    free(p->local);
    p->local = NULL;
    return -1;
  }
  return 0;
}

const char *loom_notice_text(int kind) {
  switch (kind) {
  case LOOM_NOTICE_TIMEOUT:
    return "stopped making progress (timeout)";
  case LOOM_NOTICE_ABORT:
    return "aborted its communicator";
  case LOOM_NOTICE_MISMATCH:
    return "made a call that does not match this one";
  case LOOM_NOTICE_LATE:
    return "waits for a late rank";
  case LOOM_NOTICE_REVOKE:
    return "revoked its communicator";
  default:
    return "failed or exited";
  }
}

loomResult_t loom_notice_result(int kind) {
  switch (kind) {
  case LOOM_NOTICE_TIMEOUT:
    return loomTimeout;
  case LOOM_NOTICE_MISMATCH:
    return loomInvalidUsage;
  default:
    return loomRemoteError;
  }
}

void loom_notice_encode(const struct loom_notice *n, uint8_t out[LOOM_NOTICE_BYTES]) {
  loom_put_u32(out, (uint32_t)n->suspect);
  loom_put_u32(out + 4, (uint32_t)n->reporter);
  loom_put_u32(out + 8, (uint32_t)n->kind);
  const uint64_t *w[4] = {&n->suspect_fp[0], &n->suspect_fp[1], &n->reporter_fp[0],
                          &n->reporter_fp[1]};
  for (int i = 0; i < 4; i++) {
    loom_put_u32(out + 12 + 8 * i, (uint32_t)(*w[i] >> 32));
    loom_put_u32(out + 16 + 8 * i, (uint32_t)*w[i]);
  }
}

int loom_notice_decode(const uint8_t in[LOOM_NOTICE_BYTES], struct loom_notice *n) {
  n->suspect = (int32_t)loom_get_u32(in);
  n->reporter = (int32_t)loom_get_u32(in + 4);
  n->kind = (int32_t)loom_get_u32(in + 8);
  uint64_t *w[4] = {&n->suspect_fp[0], &n->suspect_fp[1], &n->reporter_fp[0],
                    &n->reporter_fp[1]};
  for (int i = 0; i < 4; i++)
    *w[i] = (uint64_t)loom_get_u32(in + 12 + 8 * i) << 32 | loom_get_u32(in + 16 + 8 * i);
  if (n->suspect < 0 || n->reporter < 0 || n->kind < LOOM_NOTICE_DIED ||
      n->kind > LOOM_NOTICE_REVOKE)
    return -1;
  return 0;
}
