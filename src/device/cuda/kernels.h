/*
 * kernels.h — the CUDA backend's element-wise kernels (kernels.cu), seen
 * from C: cuda_ops.c queues them on a stream through these launchers.
 *
 * They compute exactly what device/reduce.h's host kernels compute (the
 * same wrap-around, NaN and rounding rules, float16/bfloat16 converted
 * bit for bit as device/half.h does), so a collective gives the same bits
 * whether it reduces on the host or on the GPU.
 *
 * Each launcher queues one kernel on `stream` and returns at once:
 * cudaSuccess, or the launch's error (cudaGetLastError after it);
 * cudaErrorInvalidValue for a dt or op out of range.  count == 0 queues
 * nothing.  Errors of the running kernel come back from the stream.
 */
#ifndef LOOM_DEVICE_CUDA_KERNELS_H
#define LOOM_DEVICE_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = a[i] op b[i] (loomAvg sums); dst may be a and/or b. */
cudaError_t loom_cuda_reduce(void *dst, const void *a, const void *b, size_t count,
                             loomDataType_t dt, loomRedOp_t op, cudaStream_t stream);

/* dst[i] = src[i] * scalar; scalar is one element of dt in host memory,
 * read before this returns (passed to the kernel by value); dst may be src. */
cudaError_t loom_cuda_premul(void *dst, const void *src, size_t count, loomDataType_t dt,
                             const void *scalar, cudaStream_t stream);

/* buf[i] /= nranks by loom_scale_avg's rules; nothing when nranks <= 1. */
cudaError_t loom_cuda_scale_avg(void *buf, size_t count, loomDataType_t dt, int nranks,
                                cudaStream_t stream);

/* Later work on stream waits until (int32_t)(*flag - value) >= 0; flag
 * is mapped host memory (cudaHostAlloc), written by the host.  One thread
 * of one block polls it. */
cudaError_t loom_cuda_wait_kernel(const uint32_t *flag, uint32_t value, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_DEVICE_CUDA_KERNELS_H */
