/*
 * fingerprint.c — packing and printing call fingerprints.
 */
#include "engine/fingerprint.h"
#include "device/reduce.h"
#include "core/coll.h"

#include <stdarg.h>
#include <stdio.h>

void loom_fp_make(uint64_t fp[2], int coll, int datatype, int op, int root, uint64_t count,
                  unsigned seq) {
  /* The collective is stored plus one, so no real fingerprint is zero. */
  fp[0] = (uint64_t)((coll + 1) & 0xff) << 56 | (uint64_t)(datatype & 0xff) << 48 |
          (uint64_t)(op & 0xff) << 40 | (uint64_t)(seq & 0xffff) << 24 |
          ((uint32_t)(root + 1) & 0xffffff);
  fp[1] = count;
}

int loom_fp_is_sendrecv(const uint64_t fp[2]) {
  return (int)(fp[0] >> 56) - 1 == LOOM_COLL_SENDRECV;
}

unsigned loom_fp_seq(const uint64_t fp[2]) {
  return loom_fp_is_sendrecv(fp) ? 0x10000u : (unsigned)(fp[0] >> 24 & 0xffff);
}

struct text {
  char *buf;
  size_t len, used;
};

static void append(struct text *t, const char *fmt, ...) {
  if (t->used >= t->len)
    return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
  va_end(ap);
  if (k > 0)
    t->used += (size_t)k;
}

void loom_fp_text(const uint64_t fp[2], char *buf, size_t len) {
  int coll = (int)(fp[0] >> 56) - 1, dt = (int)(fp[0] >> 48 & 0xff), op = (int)(fp[0] >> 40 & 0xff);
  int root = (int)(fp[0] & 0xffffff) - 1;
  unsigned seq = (unsigned)(fp[0] >> 24 & 0xffff);
  struct text t = {.buf = buf, .len = len, .used = 0};
  if (len > 0)
    buf[0] = '\0';
  if (coll == LOOM_FP_SPLIT || coll == LOOM_FP_FINALIZE) {
    snprintf(buf, len, "%s() #%u", coll == LOOM_FP_SPLIT ? "loomCommSplit" : "loomCommFinalize",
             seq);
    return;
  }
  if (coll == LOOM_FP_DEVICE_IPC) {
    snprintf(buf, len, "a collective on device buffers, through device IPC (LOOM_DEVICE_IPC=1, "
             "one node) #%u", seq);
    return;
  }
  if (coll == LOOM_FP_HOST_IPC) {
    snprintf(buf, len, "a collective on host buffers of LOOM_HOST_IPC_MIN bytes or more, "
             "exchanging its buffers first (one node) #%u", seq);
    return;
  }
  append(&t, "%s(", loom_coll_name((enum loom_coll)coll));
  const char *sep = "";
  /* Per-pair sizes of send/recv and all-to-all-v are checked per message. */
  if (coll != LOOM_COLL_SENDRECV && coll != LOOM_COLL_ALLTOALLV && coll != LOOM_COLL_BARRIER) {
    append(&t, "count %llu", (unsigned long long)fp[1]);
    sep = ", ";
  }
  if (coll != LOOM_COLL_SENDRECV && coll != LOOM_COLL_BARRIER) {
    append(&t, "%s%s", sep, dt < loomNumTypes ? loom_datatype_name((loomDataType_t)dt) : "?");
    sep = ", ";
  }
  if (op != LOOM_FP_NO_OP)
    append(&t, "%s%s", sep, op < loomNumOps ? loom_redop_name((loomRedOp_t)op) : "premulsum");
  if (root >= 0)
    append(&t, "%sroot %d", sep, root);
  append(&t, ")");
  if (coll != LOOM_COLL_SENDRECV)
    append(&t, " #%u", seq);
}
