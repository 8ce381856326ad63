/*
 * ofi.h — internals of the libfabric (OFI) transport, shared by its files.
 *
 * One reliable-datagram endpoint (FI_EP_RDM) per communicator and rank,
 * tagged messages only.  A message is cut into parts of at most the
 * provider's max_msg_size (less the header); every part is one tagged
 * message of a 32-byte header followed by the payload (one iovec each),
 * so the receiver sees the sender's fingerprint and length:
 *
 *   header: magic "LMOH" (32) | part index (32) | message length (64) |
 *           fingerprint word 0 (64) | fingerprint word 1 (64), big-endian
 *
 * Tags: bits 0-31 the sender's sequence number on this connection and
 * direction (one per part, so parts and messages match in posting order),
 * bits 32-55 the sender's rank (a receive names its peer by tag, so no
 * FI_DIRECTED_RECV is needed), bit 56 marks the connect-time hello.
 *
 * The address blob: magic "LMOF", the endpoint name's length, the
 * provider's max_msg_size, the provider's name (every rank must use the
 * same one) and fi_getname()'s bytes.
 *
 * Everything in ofi_wire.c, ofi_names.c and ofi_mr.c is pure (no libfabric
 * call) and unit-tested by tests/unit/check_ofi.c.
 */
#ifndef LOOM_TRANSPORT_OFI_H
#define LOOM_TRANSPORT_OFI_H

#include "transport.h"

#include <stddef.h>
#include <stdint.h>

/* ---- ofi_wire.c: tags, part headers, address blobs ------------------------ */

#define OFI_TAG_SEQ_BITS 32
#define OFI_TAG_RANK_BITS 24
#define OFI_TAG_HELLO (1ull << 56)
#define OFI_MAX_RANKS (1 << OFI_TAG_RANK_BITS)

uint64_t ofi_tag_make(int sender, uint32_t seq);
uint64_t ofi_tag_hello(int sender);
int ofi_tag_sender(uint64_t tag);
uint32_t ofi_tag_seq(uint64_t tag);
int ofi_tag_is_hello(uint64_t tag);

#define OFI_HDR_BYTES 32
#define OFI_HDR_MAGIC 0x4c4d4f48u /* "LMOH" */

struct ofi_hdr {
  uint32_t magic, part;
  uint64_t msg_len;
  uint64_t fp[2];
};

void ofi_hdr_encode(uint8_t out[OFI_HDR_BYTES], const struct ofi_hdr *h);
/* 0 when the magic is right, -1 otherwise (h is filled either way). */
int ofi_hdr_decode(const uint8_t in[OFI_HDR_BYTES], struct ofi_hdr *h);

/* Parts are never larger than this, whatever the provider allows: one
 * message's size must fit the 32-bit length fields of every provider. */
#define OFI_MAX_PART ((size_t)1 << 30)
/* The payload per part for a provider max_msg_size (both ends use the
 * smaller of their two). */
size_t ofi_part_bytes(uint64_t max_msg_size);
/* How many parts a message of len bytes takes (at least 1: an empty
 * message still carries its header). */
size_t ofi_nparts(size_t len, size_t part_bytes);

#define OFI_ADDR_BYTES 192
#define OFI_ADDR_MAGIC 0x4c4d4f46u /* "LMOF" */
#define OFI_PROV_NAME_BYTES 32
#define OFI_EP_NAME_MAX (OFI_ADDR_BYTES - 16 - OFI_PROV_NAME_BYTES)

struct ofi_addr {
  uint64_t max_msg_size;
  char prov[OFI_PROV_NAME_BYTES]; /* NUL-terminated */
  size_t name_len;
  uint8_t name[OFI_EP_NAME_MAX];
};

/* -1 when the name or the provider's name does not fit. */
int ofi_addr_encode(uint8_t out[OFI_ADDR_BYTES], const struct ofi_addr *a);
/* -1 on a bad magic or length (a rank that did not initialise ofi). */
int ofi_addr_decode(const uint8_t in[OFI_ADDR_BYTES], struct ofi_addr *a);

/* ---- ofi_names.c: LOOM_OFI_PROVIDER and choosing a provider --------------- */

/* LOOM_OFI_PROVIDER is a comma-separated list of provider names in order of
 * preference; a name with no ';' ("tcp") matches that core provider with
 * or without a utility layer ("tcp;ofi_rxm"), a full name only itself.
 * 0 when the spec is well formed, else -1 and the reason in err. */
int ofi_spec_check(const char *spec, char *err, size_t errlen);
int ofi_prov_matches(const char *item, const char *prov_name);
/* Whether a provider drives real fabric hardware (verbs, efa, psm2/3, cxi,
 * opx, ...), not sockets or shared memory (tcp, sockets, udp, net, shm,
 * sm2), which are slower than Loom's own TCP and shm transports. */
int ofi_prov_is_fabric(const char *prov_name);
/* The index in names[] of the provider to use: the first (in libfabric's
 * order) that matches the spec's earliest item, or with no spec the best
 * found: a fabric, then tcp;ofi_rxm, tcp, net, sockets, udp, shm.  -1 and
 * the reason (the providers found) in err when none matches. */
int ofi_pick(const char *spec, const char *const *names, int n, char *err, size_t errlen);

/* ---- registrations: common/mr_cache.h ---------------------------------------- */

/* Registrations of user buffers, for providers that need them
 * (FI_MR_LOCAL), in the cache the RDMA transports share: a bounded LRU of
 * page-aligned ranges.  Loom cannot see free(): a range freed and reused
 * while cached would keep its old registration, so the cache is small and
 * per communicator. */
#define OFI_MR_CACHE_ENTRIES 64
#define OFI_MR_CACHE_BYTES ((size_t)1 << 30)

/* ---- ofi_provider.c and ofi.c --------------------------------------------- */

/* Whether the default selection should use ofi: 1 when a fabric device is
 * visible and libfabric's chosen provider (LOOM_OFI_PROVIDER, else the
 * best) is a fabric.  why says what was found.  Without a fabric device
 * libfabric is not loaded at all (fi_getinfo takes 150-350 ms). */
int loom_ofi_default_ok(char *why, size_t whylen);

#endif
