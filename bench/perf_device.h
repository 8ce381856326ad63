/*
 * perf_device.h — loom-perf --device: the buffers its calls get live in a
 * device's memory (loomMemAlloc), as nccl-tests' do in GPU memory; the
 * host buffers loom-perf fills and checks are mirrored there around every
 * checked call (docs/devices.md).
 */
#ifndef PERF_DEVICE_H
#define PERF_DEVICE_H

#include "loom.h"

#include <stddef.h>

/* *dev = host for loomDeviceHost unless loom_mem; else memory of
 * loomMemAlloc on device holding host's bytes. */
loomResult_t perf_device_mirror(void **dev, void *host, size_t bytes, loomDevice_t device,
                                int loom_mem);
/* Frees what perf_device_mirror allocated (nothing when dev == host). */
loomResult_t perf_device_unmirror(void *dev, const void *host);
/* Copies between a buffer and its mirror (nothing when they are one). */
loomResult_t perf_device_copy(void *dst, const void *src, size_t bytes);

#endif /* PERF_DEVICE_H */
