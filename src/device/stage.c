/*
 * stage.c — the host blocks and copy lists of a staged call (stage.h),
 * and the cache of freed blocks: a block is reused for a request of at
 * least half its size, so one size's blocks serve a sweep of sizes.
 */
#include "device/stage.h"
#include "core/error.h"
#include "core/log.h"

#include <pthread.h>
#include <stdlib.h>

static struct {
  pthread_mutex_t lock;
  struct cached {
    const struct loom_device_ops *dev;
    struct loom_stage_block b;
  } v[LOOM_STAGE_CACHE_BLOCKS];
  int n;
  size_t bytes;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A cached block of dev for `bytes`, or {NULL}. */
static struct loom_stage_block cache_take(const struct loom_device_ops *dev, size_t bytes) {
  struct loom_stage_block b = {0};
  pthread_mutex_lock(&cache.lock);
  for (int i = 0; i < cache.n; i++)
    if (cache.v[i].dev == dev && cache.v[i].b.bytes >= bytes &&
        cache.v[i].b.bytes / 2 <= bytes) {
      b = cache.v[i].b;
      cache.bytes -= b.bytes;
      cache.v[i] = cache.v[--cache.n];
      break;
    }
  pthread_mutex_unlock(&cache.lock);
  return b;
}

/* Keeps b for reuse, or frees it when the cache is full. */
static void cache_give(const struct loom_device_ops *dev, struct loom_stage_block b) {
  pthread_mutex_lock(&cache.lock);
  int kept = cache.n < LOOM_STAGE_CACHE_BLOCKS && cache.bytes + b.bytes <= LOOM_STAGE_CACHE_BYTES;
  if (kept) {
    cache.v[cache.n++] = (struct cached){.dev = dev, .b = b};
    cache.bytes += b.bytes;
  }
  pthread_mutex_unlock(&cache.lock);
  if (!kept)
    dev->host_free(b.ptr);
}

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
  struct loom_stage_block b = cache_take(dev, bytes);
  if (b.ptr == NULL) {
    LOOM_CHECK(dev->host_alloc(&b.ptr, bytes));
    b.bytes = bytes;
  }
  st->blocks[st->nblocks++] = b;
  *block = b.ptr;
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
    cache_give(st->dev, st->blocks[i]);
  free(st->blocks);
  free(st->in);
  free(st->out);
  *st = (struct loom_stage){0};
}
