/*
 * msg_check.h — the check every transport makes when a message meets the
 * receive posted for it: the same call (fingerprint) and the same length.
 * One rule and one message text for tcp, shm, ofi, ibverbs and plugins
 * built from Loom's code, so that a mismatch reads the same whichever
 * transport saw it and the engine can name both calls.
 */
#ifndef LOOM_TRANSPORT_COMMON_MSG_CHECK_H
#define LOOM_TRANSPORT_COMMON_MSG_CHECK_H

#include "loom_net.h"

#include <stdint.h>

/* What a failed check found (marked in x: peer_fp and fp_mismatch for
 * another call), its text recorded as the thread's last error when
 * `record` (a connection that already failed keeps its first text).
 * Returns loomInvalidUsage. */
loomResult_t loom_msg_mismatch(struct loom_xfer *x, uint64_t fp0, uint64_t fp1,
                               uint64_t msg_len, int rank, int peer, int record);

/* Checks a message of msg_len bytes carrying fingerprint (fp0, fp1) from
 * `peer` against receive x on `rank`: loomSuccess, or loomInvalidUsage as
 * loom_msg_mismatch says.  Inline: it runs for every arrived part. */
static inline loomResult_t loom_msg_check(struct loom_xfer *x, uint64_t fp0, uint64_t fp1,
                                          uint64_t msg_len, int rank, int peer, int record) {
  if (__builtin_expect(fp0 == x->fp[0] && fp1 == x->fp[1] && msg_len == x->len, 1))
    return loomSuccess;
  return loom_msg_mismatch(x, fp0, fp1, msg_len, rank, peer, record);
}

#endif
