/*
 * perf_device.c — loom-perf --device's mirrors of its buffers
 * (perf_device.h).
 */
#include "perf_device.h"

loomResult_t perf_device_mirror(void **dev, void *host, size_t bytes, loomDevice_t device,
                                int loom_mem) {
  *dev = host;
  if (device == loomDeviceHost && !loom_mem)
    return loomSuccess;
  loomResult_t res = loomMemAlloc(dev, bytes, device);
  return res == loomSuccess ? perf_device_copy(*dev, host, bytes) : res;
}

loomResult_t perf_device_unmirror(void *dev, const void *host) {
  return dev == host ? loomSuccess : loomMemFree(dev);
}

loomResult_t perf_device_copy(void *dst, const void *src, size_t bytes) {
  return dst == src || bytes == 0 ? loomSuccess : loomMemcpyAsync(dst, src, bytes, NULL);
}
