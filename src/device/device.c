/*
 * device.c — the device layer's front (device/device.h): which backend
 * owns a pointer, the CUDA module loaded on first use, and the public
 * memory calls loomMemAlloc, loomMemFree and loomPointerGetDevice.
 *
 * Until a backend other than host's plain memory is used, `active` is 0
 * and every pointer is host memory without a lookup: programs that never
 * allocate device memory pay one relaxed load per collective.
 */
#include "config.h"
#include "device/device.h"
#include "device/sim/sim.h"
#include "core/error.h"
#include "core/log.h"
#include "module_loader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int active;
static const struct loom_device_ops *_Atomic cuda_ops; /* set once the module is loaded */
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;

int loom_device_active(void) { return atomic_load_explicit(&active, memory_order_relaxed); }

void loom_device_mark_active(void) { atomic_store(&active, 1); }

const char *loom_device_name(loomDevice_t device) {
  switch (device) {
  case loomDeviceHost:
    return "host";
  case loomDeviceSim:
    return "sim";
  case loomDeviceCuda:
    return "cuda";
  }
  return "invalid";
}

const char *loom_devices_built(void) {
#ifdef LOOM_HAVE_CUDA
  return "host sim cuda";
#else
  return "host sim";
#endif
}

/* Loads the CUDA module and checks a GPU is there (once; a failure is
 * retried by the next call, with the same message). */
static loomResult_t load_cuda(const char *fn) {
  pthread_mutex_lock(&cuda_lock);
  loomResult_t res = loomSuccess;
  if (atomic_load(&cuda_ops) == NULL) {
    const struct loom_device_module *m = NULL;
    char why[512];
    if (loom_module_get_device("cuda", &m, why, sizeof why) != 0)
      res = loom_error(loomInvalidUsage, LOOM_LOG_INIT, "%s: loomDeviceCuda: %s", fn, why);
    else if (!m->available(why, sizeof why))
      res = loom_error(loomInvalidUsage, LOOM_LOG_INIT, "%s: loomDeviceCuda: no GPU to run on "
                       "(%s)", fn, why);
    else
      atomic_store(&cuda_ops, m->ops);
  }
  pthread_mutex_unlock(&cuda_lock);
  return res;
}

loomResult_t loom_device_get(loomDevice_t device, const struct loom_device_ops **ops,
                             const char *fn) {
  switch (device) {
  case loomDeviceHost:
    *ops = &loom_device_host_ops;
    return loomSuccess;
  case loomDeviceSim:
    loom_device_mark_active();
    *ops = &loom_device_sim_ops;
    return loomSuccess;
  case loomDeviceCuda:
    LOOM_CHECK(load_cuda(fn));
    loom_device_mark_active();
    *ops = atomic_load(&cuda_ops);
    return loomSuccess;
  }
  return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                    "%s: invalid device %d (use loomDeviceHost, loomDeviceSim or "
                    "loomDeviceCuda)", fn, (int)device);
}

loomDevice_t loom_device_of(const void *ptr, const struct loom_device_ops **ops,
                            uintptr_t *base, size_t *size) {
  *ops = &loom_device_host_ops;
  *base = (uintptr_t)ptr;
  *size = 0;
  if (ptr == NULL || !loom_device_active())
    return loomDeviceHost;
  if (loom_device_sim_ops.classify(ptr, base, size)) {
    *ops = &loom_device_sim_ops;
    return loomDeviceSim;
  }
  const struct loom_device_ops *cuda = atomic_load(&cuda_ops);
  if (cuda != NULL && cuda->classify(ptr, base, size)) {
    *ops = cuda;
    return loomDeviceCuda;
  }
  if (!loom_device_host_ops.classify(ptr, base, size)) {
    *base = (uintptr_t)ptr;
    *size = 0;
  }
  return loomDeviceHost;
}

loomResult_t loom_device_check_span(const void *ptr, size_t bytes, const char *what,
                                    const char *fn) {
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  loomDevice_t dev = loom_device_of(ptr, &ops, &base, &size);
  if (bytes == 0 || (size == 0 && base == (uintptr_t)ptr && dev == loomDeviceHost))
    return loomSuccess; /* bounds unknown (malloc'd memory) */
  if (size == 0 && dev == loomDeviceSim)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: %s %p is simulated-device memory that is not allocated (freed?)",
                      fn, what, ptr);
  size_t off = (uintptr_t)ptr - base;
  if (size != 0 && (off > size || bytes > size - off))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: %s %p + %zu bytes overruns its %s allocation of %zu bytes at %p "
                      "(by %zu bytes)", fn, what, ptr, bytes, loom_device_name(dev), size,
                      (void *)base, off + bytes - size);
  return loomSuccess;
}

/* ---- the public memory calls ---- */

loomResult_t loomMemAlloc(void **ptr, size_t bytes, loomDevice_t device) {
  static const char fn[] = "loomMemAlloc";
  if (ptr == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: ptr is NULL", fn);
  *ptr = NULL;
  const struct loom_device_ops *ops;
  LOOM_CHECK(loom_device_get(device, &ops, fn));
  if (bytes == 0)
    return loomSuccess; /* NULL, as cudaMalloc(0) gives; loomMemFree(NULL) is fine */
  return ops->mem_alloc(ptr, bytes);
}

loomResult_t loomMemFree(void *ptr) {
  if (ptr == NULL)
    return loomSuccess;
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  loom_device_of(ptr, &ops, &base, &size);
  return ops->mem_free(ptr);
}

loomResult_t loomPointerGetDevice(const void *ptr, loomDevice_t *device) {
  if (device == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomPointerGetDevice: device is NULL");
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  *device = loom_device_of(ptr, &ops, &base, &size);
  return loomSuccess;
}
