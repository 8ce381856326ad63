/*
 * cuda_ipc.c — CUDA IPC for the device layer's ipc_* entries: ranks of
 * one node read and write each other's device buffers (NVLink or PCIe
 * peer access, or one GPU shared by several processes) with no host
 * bounce.  A handle covers a whole cudaMalloc allocation, so the pointer's
 * offset in it travels beside the handle; for memory Loom did not
 * allocate (a framework's caching allocator) the allocation's start comes
 * from the driver's cuMemGetAddressRange, reached through the runtime's
 * cudaGetDriverEntryPointByVersion so that the module still links only
 * the runtime.
 */
#include "device/cuda/cuda_internal.h"
#include "device/device.h"
#include "core/error.h"
#include "core/log.h"

#include <pthread.h>
#include <string.h>

/* CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) */
typedef int (*get_range_fn)(unsigned long long *base, size_t *size, unsigned long long p);

static get_range_fn get_range;
static pthread_once_t get_range_once = PTHREAD_ONCE_INIT;

static void find_get_range(void) {
  get_range = (get_range_fn)loom_cuda_driver_entry("cuMemGetAddressRange");
}

/* The allocation holding ptr: from Loom's table, else from the driver. */
static loomResult_t allocation_of(const void *ptr, uintptr_t *base, size_t *size) {
  if (loom_alloc_bounds(&loom_cuda_allocations, ptr, base, size))
    return loomSuccess;
  pthread_once(&get_range_once, find_get_range);
  unsigned long long b = 0;
  if (get_range == NULL || get_range(&b, size, (unsigned long long)(uintptr_t)ptr) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "CUDA IPC: cannot find the allocation holding %p (cuMemGetAddressRange)",
                      ptr);
  *base = (uintptr_t)b;
  return loomSuccess;
}

loomResult_t loom_cuda_ipc_get(const void *ptr, void *handle, size_t *offset) {
  uintptr_t base;
  size_t size;
  LOOM_CHECK(allocation_of(ptr, &base, &size));
  cudaIpcMemHandle_t h;
  LOOM_CHECK(loom_cuda_check(cudaIpcGetMemHandle(&h, (void *)base), "cudaIpcGetMemHandle"));
  memcpy(handle, &h, sizeof h);
  *offset = (uintptr_t)ptr - base;
  return loomSuccess;
}

loomResult_t loom_cuda_ipc_open(const void *handle, void **base) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  void *p = NULL;
  LOOM_CHECK(loom_cuda_check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                             "cudaIpcOpenMemHandle"));
  uintptr_t b;
  size_t size = 0;
  loomResult_t res = allocation_of(p, &b, &size);
  if (res == loomSuccess)
    res = loom_cuda_remember(p, size, 1);
  if (res != loomSuccess) {
    (void)cudaIpcCloseMemHandle(p);
    return res;
  }
  *base = p;
  return loomSuccess;
}

void loom_cuda_ipc_close(void *base) {
  struct loom_alloc a;
  if (loom_alloc_take(&loom_cuda_allocations, (uintptr_t)base, 1, &a) == 0)
    (void)loom_cuda_check(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
}
