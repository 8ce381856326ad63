/*
 * msg_check.c — the text of a message that does not belong to its
 * receive (msg_check.h).
 */
#include "common/msg_check.h"
#include "core/error.h"

loomResult_t loom_msg_mismatch(struct loom_xfer *x, uint64_t fp0, uint64_t fp1,
                               uint64_t msg_len, int rank, int peer, int record) {
  if (fp0 != x->fp[0] || fp1 != x->fp[1]) {
    x->peer_fp[0] = fp0;
    x->peer_fp[1] = fp1;
    x->fp_mismatch = 1;
    if (record)
      loom_error_record(loomInvalidUsage, "rank %d: rank %d's message belongs to another call",
                        rank, peer);
    return loomInvalidUsage;
  }
  if (record)
    loom_error_record(loomInvalidUsage,
                      "rank %d: rank %d sent a message of %llu bytes where %zu were expected "
                      "(did the ranks call different collectives or counts?)",
                      rank, peer, (unsigned long long)msg_len, x->len);
  return loomInvalidUsage;
}
