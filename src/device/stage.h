/*
 * stage.h — staging a call's device buffers through host memory: the
 * device bytes a call reads are copied into host blocks before it runs
 * (`in`), the bytes it writes are copied back after (`out`), and the call
 * itself runs on the blocks.  Built by src/api/staging.c from a call's
 * buffers; run synchronously here (stream == NULL) or queued on a device
 * stream by src/stream/device_stream.c.
 */
#ifndef LOOM_DEVICE_STAGE_H
#define LOOM_DEVICE_STAGE_H

#include "device/device.h"

#include <stddef.h>

#define LOOM_STAGE_CACHE_BYTES (256u << 20)
#define LOOM_STAGE_CACHE_BLOCKS 32

struct loom_stage_copy {
  void *dst;
  const void *src;
  size_t bytes;
};

struct loom_stage {
  const struct loom_device_ops *dev; /* the staged buffers' device; NULL: nothing staged */
  struct loom_stage_copy *in, *out;
  int nin, nout, cap_in, cap_out;
  struct loom_stage_block *blocks; /* host staging, from dev->host_alloc */
  int nblocks, cap_blocks;
};

struct loom_stage_block {
  void *ptr;
  size_t bytes;
};

/* A host block of `bytes` for dev's buffers, owned by the stage. */
loomResult_t loom_stage_block(struct loom_stage *st, const struct loom_device_ops *dev,
                              size_t bytes, void **block);
/* Adds a copy to run before (in = 1) or after (in = 0) the call. */
loomResult_t loom_stage_copy(struct loom_stage *st, int in, void *dst, const void *src,
                             size_t bytes);
/* Runs the in or out copies now (dev->memcpy_sync). */
loomResult_t loom_stage_run_sync(const struct loom_stage *st, int in);
/* Queues them on a device stream (dev->memcpy_async). */
loomResult_t loom_stage_run_async(const struct loom_stage *st, int in, void *native);
/* Frees the lists and gives the blocks back (the stage struct itself is
 * the caller's).  Freed blocks are kept for reuse, up to
 * LOOM_STAGE_CACHE_BYTES in all: allocating pinned memory for every call
 * costs more than the call (page faults, cudaHostAlloc's milliseconds). */
void loom_stage_free(struct loom_stage *st);

#endif
