/*
 * ofi_wire.c — the OFI transport's bytes on the wire: tags, part headers,
 * part sizes and the address blob (layouts in ofi.h).
 */
#include "ofi/ofi.h"
#include "net/bytes.h"

#include <string.h>

#define TAG_SEQ_MASK ((1ull << OFI_TAG_SEQ_BITS) - 1)
#define TAG_RANK_MASK ((1ull << OFI_TAG_RANK_BITS) - 1)

uint64_t ofi_tag_make(int sender, uint32_t seq) {
  return ((uint64_t)sender & TAG_RANK_MASK) << OFI_TAG_SEQ_BITS | (uint64_t)seq;
}

uint64_t ofi_tag_hello(int sender) { return OFI_TAG_HELLO | ofi_tag_make(sender, 0); }

int ofi_tag_sender(uint64_t tag) {
  return (int)((tag >> OFI_TAG_SEQ_BITS) & TAG_RANK_MASK);
}

uint32_t ofi_tag_seq(uint64_t tag) { return (uint32_t)(tag & TAG_SEQ_MASK); }

int ofi_tag_is_hello(uint64_t tag) { return (tag & OFI_TAG_HELLO) != 0; }

void ofi_hdr_encode(uint8_t out[OFI_HDR_BYTES], const struct ofi_hdr *h) {
  loom_put_u32(out, h->magic);
  loom_put_u32(out + 4, h->part);
  loom_put_u64(out + 8, h->msg_len);
  loom_put_u64(out + 16, h->fp[0]);
  loom_put_u64(out + 24, h->fp[1]);
}

int ofi_hdr_decode(const uint8_t in[OFI_HDR_BYTES], struct ofi_hdr *h) {
  h->magic = loom_get_u32(in);
  h->part = loom_get_u32(in + 4);
  h->msg_len = loom_get_u64(in + 8);
  h->fp[0] = loom_get_u64(in + 16);
  h->fp[1] = loom_get_u64(in + 24);
  return h->magic == OFI_HDR_MAGIC ? 0 : -1;
}

size_t ofi_part_bytes(uint64_t max_msg_size) {
  uint64_t part = max_msg_size > OFI_HDR_BYTES ? max_msg_size - OFI_HDR_BYTES : 1;
  return part > OFI_MAX_PART ? OFI_MAX_PART : (size_t)part;
}

size_t ofi_nparts(size_t len, size_t part_bytes) {
  if (len == 0 || part_bytes == 0)
    return 1;
  return len / part_bytes + (len % part_bytes != 0);
}

int ofi_addr_encode(uint8_t out[OFI_ADDR_BYTES], const struct ofi_addr *a) {
  size_t plen = strnlen(a->prov, sizeof a->prov);
  if (a->name_len > OFI_EP_NAME_MAX || plen >= OFI_PROV_NAME_BYTES)
    return -1;
  memset(out, 0, OFI_ADDR_BYTES);
  loom_put_u32(out, OFI_ADDR_MAGIC);
  loom_put_u32(out + 4, (uint32_t)a->name_len);
  loom_put_u64(out + 8, a->max_msg_size);
  memcpy(out + 16, a->prov, plen);
  memcpy(out + 16 + OFI_PROV_NAME_BYTES, a->name, a->name_len);
  return 0;
}

int ofi_addr_decode(const uint8_t in[OFI_ADDR_BYTES], struct ofi_addr *a) {
  memset(a, 0, sizeof *a);
  if (loom_get_u32(in) != OFI_ADDR_MAGIC)
    return -1;
  uint32_t name_len = loom_get_u32(in + 4);
  if (name_len == 0 || name_len > OFI_EP_NAME_MAX)
    return -1;
  a->name_len = name_len;
  a->max_msg_size = loom_get_u64(in + 8);
  memcpy(a->prov, in + 16, OFI_PROV_NAME_BYTES - 1);
  memcpy(a->name, in + 16 + OFI_PROV_NAME_BYTES, name_len);
  return 0;
}
