/*
 * ib_wire.h — the connection handshake of the ibverbs transport: what each
 * side puts in the rdma_cm private data (the connecting side in its
 * connect request, the accepting side in its accept reply).
 *
 * It fits the 56 bytes an InfiniBand connect request leaves to the
 * consumer.  Pure functions: encode, and decode with validation (length,
 * magic, version, checksum, ring geometry); the caller checks the ranks
 * and the communicator hash against what it expects.
 */
#ifndef LOOM_TRANSPORT_IB_WIRE_H
#define LOOM_TRANSPORT_IB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define IB_WIRE_MAGIC 0x4c49u /* "LI" */
#define IB_WIRE_VERSION 1
#define IB_WIRE_BYTES 52
/* Limits a decoded hello must respect (the ring is pre-registered memory). */
#define IB_WIRE_MAX_SLOTS 4096u
#define IB_WIRE_MIN_SLOT_BYTES 256u
#define IB_WIRE_MAX_SLOT_BYTES (4u << 20)
#define IB_WIRE_MAX_RDV_SLOTS 1024u

struct ib_hello {
  uint8_t version;
  uint32_t rank;       /* the sender's rank */
  uint32_t peer;       /* the rank it means to reach */
  uint64_t comm_hash;  /* ib_wire_secret_hash of the communicator's secret */
  uint32_t qp_num;     /* for logs and checks */
  uint64_t ring_addr;  /* the sender's receive region: ring slots, then CTS entries */
  uint32_t ring_rkey;
  uint32_t slot_bytes; /* a multiple of 64 */
  uint16_t nslots;     /* a power of two */
  uint16_t credits;    /* slots the receiver of this hello may fill at once */
  uint16_t rdv_slots;  /* CTS entries after the slots, a power of two */
};

enum ib_wire_error {
  IB_WIRE_OK = 0,
  IB_WIRE_TRUNCATED,   /* fewer than IB_WIRE_BYTES */
  IB_WIRE_BAD_MAGIC,   /* not a Loom handshake */
  IB_WIRE_BAD_VERSION, /* another version of the transport */
  IB_WIRE_BAD_CHECKSUM,
  IB_WIRE_BAD_GEOMETRY, /* slots, sizes or credits out of range */
};

/* Writes IB_WIRE_BYTES bytes (version and checksum filled in). */
void ib_wire_encode(const struct ib_hello *h, uint8_t out[IB_WIRE_BYTES]);
/* Decodes `len` bytes into *h; *h is written only on success.  A longer
 * buffer is accepted (transports pad private data with zeros). */
enum ib_wire_error ib_wire_decode(const uint8_t *in, size_t len, struct ib_hello *h);
/* Why decode failed, for messages. */
const char *ib_wire_strerror(enum ib_wire_error e);
/* The version found in a buffer that failed with IB_WIRE_BAD_VERSION. */
int ib_wire_peek_version(const uint8_t *in, size_t len);

/* A 64-bit digest of the communicator's secret: the handshake proves
 * membership without carrying the secret itself. */
uint64_t ib_wire_secret_hash(const uint8_t *secret, size_t len);

#endif
