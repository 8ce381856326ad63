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

/* word 0: collective(8) datatype(8) op(8) spare(8) root+1(32); word 1: count. */
void loom_fp_make(uint64_t fp[2], int coll, int datatype, int op, int root, uint64_t count);
/* "allreduce(count 1024, float32, sum)", "broadcast(count 8, int8, root 2)". */
void loom_fp_text(const uint64_t fp[2], char *buf, size_t len);

#endif
