/*
 * staging.c — device buffers of collective calls, staged through host
 * memory (device/stage.h): each call's device inputs are copied into host
 * blocks before it runs and its device results copied back after, the
 * call itself running on the blocks.  An in-place call (sendbuff and
 * recvbuff overlapping) gets one block for both, so the in-place rule
 * holds on the blocks as on the device.  An all-to-all-v block is also
 * filled from recvbuff first, so that the gaps between the blocks it
 * receives go back unchanged.
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/error.h"
#include "device/stage.h"

#include <stdint.h>

/* The part of [p, p+bytes) that is device memory of `dev`, or 0 bytes. */
static size_t device_bytes(const void *p, size_t bytes, loomDevice_t dev) {
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  return bytes > 0 && p != NULL && loom_device_of(p, &ops, &base, &size) == dev ? bytes : 0;
}

static loomResult_t stage_call(struct loom_stage *st, struct loom_call *c,
                               const struct loom_device_ops *ops) {
  char *s = (char *)c->sendbuff, *r = c->recvbuff;
  size_t sb = device_bytes(s, c->send_bytes, c->device);
  size_t rb = device_bytes(r, c->recv_bytes, c->device);
  int prefill = c->coll == LOOM_COLL_ALLTOALLV;
  if (sb > 0 && rb > 0 && s < r + rb && r < s + sb) { /* in place: one block */
    char *lo = s < r ? s : r, *hi = s + sb > r + rb ? s + sb : r + rb;
    void *block;
    LOOM_CHECK(loom_stage_block(st, ops, (size_t)(hi - lo), &block));
    char *b = block;
    LOOM_CHECK(loom_stage_copy(st, 1, b + (s - lo), s, sb));
    LOOM_CHECK(loom_stage_copy(st, 0, r, b + (r - lo), rb));
    c->sendbuff = b + (s - lo);
    c->recvbuff = b + (r - lo);
    return loomSuccess;
  }
  void *block;
  if (sb > 0) {
    LOOM_CHECK(loom_stage_block(st, ops, sb, &block));
    LOOM_CHECK(loom_stage_copy(st, 1, block, s, sb));
    c->sendbuff = block;
  }
  if (rb > 0) {
    LOOM_CHECK(loom_stage_block(st, ops, rb, &block));
    if (prefill)
      LOOM_CHECK(loom_stage_copy(st, 1, block, r, rb));
    LOOM_CHECK(loom_stage_copy(st, 0, r, block, rb));
    c->recvbuff = block;
  }
  return loomSuccess;
}

loomResult_t loom_stage_calls(struct loom_stage *st, struct loom_call *calls, int n) {
  for (int i = 0; i < n; i++) {
    if (calls[i].device == loomDeviceHost)
      continue;
    const struct loom_device_ops *ops;
    LOOM_CHECK(loom_device_get(calls[i].device, &ops, loom_coll_name(calls[i].coll)));
    LOOM_CHECK(stage_call(st, &calls[i], ops));
  }
  return loomSuccess;
}

loomResult_t loom_execute_staged(loomComm_t comm, struct loom_call *calls, int ncalls) {
  struct loom_stage st = {0};
  loomResult_t res = loom_stage_calls(&st, calls, ncalls);
  if (res == loomSuccess && st.dev != NULL)
    res = loom_stage_run_sync(&st, 1);
  if (res == loomSuccess)
    res = loom_execute(comm, calls, ncalls);
  if (res == loomSuccess && st.dev != NULL)
    res = loom_stage_run_sync(&st, 0);
  loom_stage_free(&st);
  return res;
}
