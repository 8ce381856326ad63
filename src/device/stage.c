/*
 * stage.c — the host blocks and copy lists of a staged call (stage.h).
 */
#include "device/stage.h"
#include "core/error.h"
#include "core/log.h"

#include <stdlib.h>

static int grow(void **v, int *cap, int n, size_t elem) {
  if (n < *cap)
    return 1;
  int c = *cap ? 2 * *cap : 8;
  void *p = realloc(*v, elem * (size_t)c);
  if (p == NULL)
    return 0;
  *v = p;
  *cap = c;
  return 1;
}

loomResult_t loom_stage_block(struct loom_stage *st, const struct loom_device_ops *dev,
                              size_t bytes, void **block) {
  if (st->dev != NULL && st->dev != dev)
    return loom_error(loomInternalError, LOOM_LOG_COLL,
                      "staging buffers of two devices (%s and %s) in one call", st->dev->name,
                      dev->name);
  if (!grow((void **)&st->blocks, &st->cap_blocks, st->nblocks, sizeof *st->blocks))
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory staging device buffers");
  st->dev = dev;
  LOOM_CHECK(dev->host_alloc(block, bytes));
  st->blocks[st->nblocks++] = *block;
  return loomSuccess;
}

loomResult_t loom_stage_copy(struct loom_stage *st, int in, void *dst, const void *src,
                             size_t bytes) {
  struct loom_stage_copy **v = in ? &st->in : &st->out;
  int *n = in ? &st->nin : &st->nout, *cap = in ? &st->cap_in : &st->cap_out;
  if (bytes == 0)
    return loomSuccess;
  if (!grow((void **)v, cap, *n, sizeof **v))
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory staging device buffers");
  (*v)[(*n)++] = (struct loom_stage_copy){.dst = dst, .src = src, .bytes = bytes};
  return loomSuccess;
}

loomResult_t loom_stage_run_sync(const struct loom_stage *st, int in) {
  const struct loom_stage_copy *v = in ? st->in : st->out;
  int n = in ? st->nin : st->nout;
  for (int i = 0; i < n; i++)
    LOOM_CHECK(st->dev->memcpy_sync(v[i].dst, v[i].src, v[i].bytes));
  return loomSuccess;
}

loomResult_t loom_stage_run_async(const struct loom_stage *st, int in, void *native) {
  const struct loom_stage_copy *v = in ? st->in : st->out;
  int n = in ? st->nin : st->nout;
  for (int i = 0; i < n; i++)
    LOOM_CHECK(st->dev->memcpy_async(v[i].dst, v[i].src, v[i].bytes, native));
  return loomSuccess;
}

void loom_stage_free(struct loom_stage *st) {
  for (int i = 0; i < st->nblocks; i++)
    st->dev->host_free(st->blocks[i]);
  free(st->blocks);
  free(st->in);
  free(st->out);
  *st = (struct loom_stage){0};
}
