/*
 * module.c — what libloom-dev-cuda.so exports: the one struct libloom's
 * module loader (transports/module_loader.c) looks up by name,
 * loom_device_module_v1 (device/device.h).  Its first three fields tie the
 * module to the Loom build it came from; bind hands it libloom's error and
 * log services (transports/common/module_shim.c); available says whether
 * there is a GPU to run on.
 *
 * CUDA stays out of libloom itself: only this module links libcudart, and
 * it is loaded the first time a program asks for loomDeviceCuda.
 */
#include "config.h"
#include "common/module.h"
#include "core/config.h"
#include "device/device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

/* cuda_ops.c */

/* "1 GPU: NVIDIA H200", or "8 GPUs, device 0: NVIDIA H200". */
static void describe_gpus(int count, char *why, size_t len) {
  struct cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess)
    (void)cudaGetLastError();
  const char *name = err == cudaSuccess ? prop.name : "name unknown";
  if (count == 1)
    snprintf(why, len, "1 GPU: %s", name);
  else
    snprintf(why, len, "%d GPUs, device 0: %s", count, name);
}

static int cuda_available(char *why, size_t len) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: leave no error for later calls */
    snprintf(why, len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
    return 0;
  }
  if (count <= 0) {
    snprintf(why, len, "cudaGetDeviceCount: no CUDA-capable device is detected");
    return 0;
  }
  describe_gpus(count, why, len);
  return 1;
}

__attribute__((visibility("default"))) const struct loom_device_module loom_device_module_v1 = {
    .abi = LOOM_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .param_count = LOOM_PARAM_COUNT,
    .name = "cuda",
    .bind = loom_module_bind,
    .ops = &loom_device_cuda_ops,
    .available = cuda_available,
};
