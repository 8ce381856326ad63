/*
 * fingerprint.h — a call's identity in 16 bytes (collective, type, op,
 * root, count), carried in every message header so that ranks making
 * different calls on one communicator get loomInvalidUsage naming both
 * calls instead of corrupt data or a hang.
 */
#ifndef LOOM_ENGINE_FINGERPRINT_H
#define LOOM_ENGINE_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_FP_NO_ROOT (-1)
#define LOOM_FP_NO_OP 0xff
/* Communicator calls, beyond enum loom_coll (core/coll.h): each runs a barrier
 * fingerprinted with its own kind before its bootstrap work. */
#define LOOM_FP_SPLIT 100
#define LOOM_FP_FINALIZE 101
/* The handshakes and barriers of a collective on device buffers run
 * through IPC (api/ipc_coll.c): a rank staging the same call through host
 * memory, or passing host buffers, is named instead of mixed in. */
#define LOOM_FP_DEVICE_IPC 102
/* The same for a large collective on host buffers of one node
 * (LOOM_HOST_IPC_MIN): the handshake that finds out whether every rank's
 * buffers came from loomMemAlloc, and the barrier after the direct work. */
#define LOOM_FP_HOST_IPC 103

/* word 0: collective+1(8) datatype(8) op(8) seq(16) root+1(24); word 1:
 * count.  seq numbers the communicator's collectives (mod 65536; 0 for
 * send/recv batches, which involve only some ranks), so a message left over
 * from an earlier call (all-to-all-v counts that differ in one pair) is
 * caught by the next call instead of being taken as its data. */
void loom_fp_make(uint64_t fp[2], int coll, int datatype, int op, int root, uint64_t count,
                  unsigned seq);
/* The call number of a fingerprint; UINT_MAX-like 0x10000 for send/recv. */
unsigned loom_fp_seq(const uint64_t fp[2]);
int loom_fp_is_sendrecv(const uint64_t fp[2]);
/* "allreduce(count 1024, float32, sum) #7", "broadcast(count 8, int8, root 2) #8". */
void loom_fp_text(const uint64_t fp[2], char *buf, size_t len);

#endif
