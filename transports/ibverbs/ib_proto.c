/*
 * ib_proto.c — byte layouts of the slot header and the CTS entry.
 */
#include "ib_proto.h"
#include "net/bytes.h"

#include <string.h>

#define HDR_MAGIC 0xb1u
#define CTS_MAGIC 0xc7u

/* Header: magic u8, kind u8, credits u16, seq u32, len u64, fp u64 x2. */
void ib_hdr_encode(const struct ib_msg_hdr *h, uint8_t out[IB_HDR_BYTES]) {
  out[0] = HDR_MAGIC;
  out[1] = h->kind;
  loom_put_u16(out + 2, h->credits);
  loom_put_u32(out + 4, h->seq);
  loom_put_u64(out + 8, h->len);
  loom_put_u64(out + 16, h->fp[0]);
  loom_put_u64(out + 24, h->fp[1]);
}

int ib_hdr_decode(const uint8_t in[IB_HDR_BYTES], struct ib_msg_hdr *h) {
  if (in[0] != HDR_MAGIC || (in[1] != IB_MSG_EAGER && in[1] != IB_MSG_RTS))
    return -1;
  h->kind = in[1];
  h->credits = loom_get_u16(in + 2);
  h->seq = loom_get_u32(in + 4);
  h->len = loom_get_u64(in + 8);
  h->fp[0] = loom_get_u64(in + 16);
  h->fp[1] = loom_get_u64(in + 24);
  return 0;
}

/* CTS: magic u8, reserved u8, credits u16, rdv u32, addr u64, len u64,
 * rkey u32, reserved u32. */
void ib_cts_encode(const struct ib_cts *c, uint8_t out[IB_CTS_BYTES]) {
  memset(out, 0, IB_CTS_BYTES);
  out[0] = CTS_MAGIC;
  loom_put_u16(out + 2, c->credits);
  loom_put_u32(out + 4, c->rdv);
  loom_put_u64(out + 8, c->addr);
  loom_put_u64(out + 16, c->len);
  loom_put_u32(out + 24, c->rkey);
}

int ib_cts_decode(const uint8_t in[IB_CTS_BYTES], struct ib_cts *c) {
  if (in[0] != CTS_MAGIC)
    return -1;
  c->credits = loom_get_u16(in + 2);
  c->rdv = loom_get_u32(in + 4);
  c->addr = loom_get_u64(in + 8);
  c->len = loom_get_u64(in + 16);
  c->rkey = loom_get_u32(in + 24);
  return 0;
}
