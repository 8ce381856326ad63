/*
 * host.c — the host backend's ops table: "device" memory is pinned host
 * memory (page-aligned, mlock()ed where the limit allows) in a memfd, so
 * that the node's other ranks can map it (host_ipc.c), kept in an
 * allocation table for bounds and loomMemFree; copies and kernels run at
 * once on the calling thread (a host stream's worker, src/stream, is what
 * makes them asynchronous); the kernels are device/reduce.c's, the same
 * code the engine calls directly.  Host streams and events are
 * src/stream's own, so the stream and event entries are NULL.
 */
#include "device/device.h"
#include "device/host.h"
#include "device/memfd_ipc.h"
#include "device/reduce.h"
#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct loom_alloc_table loom_host_allocs = LOOM_ALLOC_TABLE_INIT;

int loom_host_allocs_add(const struct loom_alloc *a) {
  pthread_mutex_lock(&loom_host_allocs.lock);
  int bad = loom_alloc_insert(&loom_host_allocs, a, loom_alloc_slot(&loom_host_allocs, a->base));
  pthread_mutex_unlock(&loom_host_allocs.lock);
  return bad;
}

static loomResult_t mem_alloc(void **ptr, size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  struct loom_alloc a = {.bytes = bytes, .span = (bytes + page - 1) / page * page};
  if (a.span == 0)
    a.span = page;
  if (a.span < bytes)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomMemAlloc(host): %zu bytes",
                      bytes);
  LOOM_CHECK(loom_memfd_create("loom-host", a.span, "loomMemAlloc(host)", &a.fd));
  void *p = mmap(NULL, a.span, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0);
  if (p == MAP_FAILED) {
    loomResult_t res = loom_error(loomSystemError, LOOM_LOG_INIT,
                                  "loomMemAlloc(host): mapping %zu bytes: %s", a.span,
                                  strerror(errno));
    close(a.fd);
    return res;
  }
  if (bytes > 0 && mlock(p, bytes) != 0) /* pinned where RLIMIT_MEMLOCK allows */
    LOOM_INFO(LOOM_LOG_INIT, "loomMemAlloc(host): mlock of %zu bytes: %s (left pageable)",
               bytes, strerror(errno));
  a.base = (uintptr_t)p;
  if (loom_host_allocs_add(&a) != 0) {
    munmap(p, a.span);
    close(a.fd);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "loomMemAlloc(host): out of memory");
  }
  loom_device_mark_active(); /* bounds of this allocation are now checked */
  *ptr = p;
  return loomSuccess;
}

static loomResult_t mem_free(void *ptr) {
  struct loom_alloc a;
  if (loom_alloc_take(&loom_host_allocs, (uintptr_t)ptr, 0, &a) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomMemFree: %p was not returned by loomMemAlloc (free it the way it "
                      "was allocated)", ptr);
  munmap(ptr, a.span); /* unlocks too */
  close(a.fd);
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
  return loom_alloc_bounds(&loom_host_allocs, ptr, base, size);
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
    .ipc_handle_bytes = LOOM_MEMFD_HANDLE_BYTES,
    .ipc_get = loom_host_ipc_get,
    .ipc_open = loom_host_ipc_open,
    .ipc_close = loom_host_ipc_close,
};
