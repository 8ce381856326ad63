/*
 * cuda_internal.h — what the CUDA backend's files share: the table of
 * allocations it knows the bounds of (loomMemAlloc's and opened IPC
 * handles), and its error check.
 */
#ifndef LOOM_DEVICE_CUDA_INTERNAL_H
#define LOOM_DEVICE_CUDA_INTERNAL_H

#include "loom.h"
#include "device/alloc_table.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

extern struct loom_alloc_table loom_cuda_allocations;

/* loomSuccess for cudaSuccess; otherwise reports "<call> failed: <text>". */
loomResult_t loom_cuda_check(cudaError_t err, const char *call);
/* Records [ptr, ptr+bytes) in the table (imported: an opened IPC handle). */
loomResult_t loom_cuda_remember(void *ptr, size_t bytes, int imported);

/* The driver's function `name` (its CUDA 12 version), through the
 * runtime, so the module links only the runtime; NULL when absent. */
void *loom_cuda_driver_entry(const char *name);

/* cuda_ipc.c: device/device.h's ipc_* entries (CUDA IPC). */
loomResult_t loom_cuda_ipc_get(const void *ptr, void *handle, size_t *offset);
loomResult_t loom_cuda_ipc_open(const void *handle, void **base);
void loom_cuda_ipc_close(void *base);

/* cuda_wait.c: device/device.h's wait_value_async. */
loomResult_t loom_cuda_wait_value(void *native, const uint32_t *flag, uint32_t value);

#endif
