/*
 * host.c — the host backend's ops table: "device" memory is pinned host
 * memory (page-aligned, mlock()ed where the limit allows), kept in an
 * allocation table for bounds and loomMemFree; copies and kernels run at
 * once on the calling thread (a host stream's worker, src/stream, is what
 * makes them asynchronous); the kernels are device/reduce.c's, the same
 * code the engine calls directly.  Host streams and events are
 * src/stream's own, so the stream and event entries are NULL.
 */
#include "device/device.h"
#include "device/alloc_table.h"
#include "device/reduce.h"
#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct loom_alloc_table pinned = LOOM_ALLOC_TABLE_INIT;

static loomResult_t mem_alloc(void **ptr, size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *p = NULL;
  int err = posix_memalign(&p, page, bytes ? bytes : 1);
  if (err != 0)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomMemAlloc(host): %zu bytes: %s",
                      bytes, strerror(err));
  if (bytes > 0 && mlock(p, bytes) != 0) /* pinned where RLIMIT_MEMLOCK allows */
    LOOM_INFO(LOOM_LOG_INIT, "loomMemAlloc(host): mlock of %zu bytes: %s (left pageable)",
               bytes, strerror(errno));
  struct loom_alloc a = {.base = (uintptr_t)p, .bytes = bytes, .span = bytes ? bytes : 1,
                         .fd = -1};
  pthread_mutex_lock(&pinned.lock);
  int bad = loom_alloc_insert(&pinned, &a, loom_alloc_slot(&pinned, a.base));
  pthread_mutex_unlock(&pinned.lock);
  if (bad) {
    free(p);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomMemAlloc(host): out of memory");
  }
  loom_device_mark_active(); /* bounds of this allocation are now checked */
  *ptr = p;
  return loomSuccess;
}

static loomResult_t mem_free(void *ptr) {
  struct loom_alloc a;
  if (loom_alloc_take(&pinned, (uintptr_t)ptr, 0, &a) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomMemFree: %p was not returned by loomMemAlloc (free it the way it "
                      "was allocated)", ptr);
  if (a.bytes > 0)
    (void)munlock(ptr, a.bytes);
  free(ptr);
  return loomSuccess;
}

static loomResult_t host_alloc(void **ptr, size_t bytes) {
  int err = posix_memalign(ptr, 64, bytes ? bytes : 1);
  return err == 0 ? loomSuccess
                  : loom_error(loomSystemError, LOOM_LOG_INIT,
                               "out of host memory (%zu bytes of staging)", bytes);
}

static void host_free(void *ptr) { free(ptr); }

static int classify(const void *ptr, uintptr_t *base, size_t *size) {
  return loom_alloc_bounds(&pinned, ptr, base, size);
}

static loomResult_t memcpy_now(void *dst, const void *src, size_t bytes, void *native) {
  (void)native;
  memmove(dst, src, bytes);
  return loomSuccess;
}

static loomResult_t memcpy_sync(void *dst, const void *src, size_t bytes) {
  return memcpy_now(dst, src, bytes, NULL);
}

static loomResult_t reduce_now(void *dst, const void *a, const void *b, size_t count,
                               loomDataType_t dt, loomRedOp_t op, void *native) {
  (void)native;
  loom_reduce(dst, a, b, count, dt, op);
  return loomSuccess;
}

static loomResult_t premul_now(void *dst, const void *src, size_t count, loomDataType_t dt,
                               const void *scalar, void *native) {
  (void)native;
  loom_premul(dst, src, count, dt, scalar);
  return loomSuccess;
}

static loomResult_t scale_avg_now(void *buf, size_t count, loomDataType_t dt, int nranks,
                                  void *native) {
  (void)native;
  loom_scale_avg(buf, count, dt, nranks);
  return loomSuccess;
}

static loomResult_t host_func_now(void *native, void (*fn)(void *), void *arg) {
  (void)native;
  fn(arg);
  return loomSuccess;
}

const struct loom_device_ops loom_device_host_ops = {
    .struct_size = sizeof(struct loom_device_ops),
    .device = loomDeviceHost,
    .name = "host",
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .classify = classify,
    .memcpy_async = memcpy_now,
    .memcpy_sync = memcpy_sync,
    .reduce_async = reduce_now,
    .premul_async = premul_now,
    .scale_avg_async = scale_avg_now,
    .host_func = host_func_now,
};
