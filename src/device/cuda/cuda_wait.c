/*
 * cuda_wait.c — the CUDA backend's wait_value_async (device/device.h): a
 * stream waits on the GPU for a word of host memory that Loom's worker
 * sets when a collective is done, so that no host thread blocks inside
 * CUDA (a blocking host function stalls other threads' stream creation
 * and IPC opens: seen as a deadlock on an H200).
 *
 * The driver's cuStreamWaitValue32 (GEQ, which compares as
 * (int32_t)(*addr - value) >= 0) does it without using the GPU's cores;
 * it is reached through cudaGetDriverEntryPointByVersion, so the module
 * still links only the runtime.  Where the driver refuses it, a one-thread
 * kernel polls the word instead (kernels.cu).  Which one runs is logged
 * once at INFO.
 */
#include "device/cuda/cuda_internal.h"
#include "device/cuda/kernels.h"
#include "core/error.h"
#include "core/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* CUresult cuStreamWaitValue32(CUstream, CUdeviceptr, cuuint32_t, unsigned int) */
typedef int (*wait_value_fn)(void *stream, unsigned long long addr, uint32_t value,
                             unsigned flags);
enum { CU_STREAM_WAIT_VALUE_GEQ = 0x0, CUDA_ERROR_NOT_SUPPORTED = 801 };

static wait_value_fn driver_wait;
static pthread_once_t driver_wait_once = PTHREAD_ONCE_INIT;
static atomic_int use_kernel; /* the driver refused a wait: poll with a kernel */

static void find_driver_wait(void) {
  driver_wait = (wait_value_fn)loom_cuda_driver_entry("cuStreamWaitValue32");
  LOOM_INFO(LOOM_LOG_INIT, "CUDA streams wait for Loom's collectives with %s",
            driver_wait != NULL ? "cuStreamWaitValue32" : "a polling kernel");
}

/* The device's address of the host word (the same under unified
 * addressing, where cudaHostGetDevicePointer may not be needed). */
static unsigned long long device_address(const uint32_t *flag) {
  void *dptr = NULL;
  if (cudaHostGetDevicePointer(&dptr, (void *)flag, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    dptr = (void *)flag;
  }
  return (unsigned long long)(uintptr_t)dptr;
}

loomResult_t loom_cuda_wait_value(void *native, const uint32_t *flag, uint32_t value) {
  pthread_once(&driver_wait_once, find_driver_wait);
  unsigned long long addr = device_address(flag);
  if (driver_wait != NULL && !atomic_load(&use_kernel)) {
    int rc = driver_wait(native, addr, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (rc == 0)
      return loomSuccess;
    if (rc != CUDA_ERROR_NOT_SUPPORTED) /* a bad stream, a broken context: the caller's error */
      return loom_error(loomUnhandledCudaError, LOOM_LOG_INIT,
                        "cuStreamWaitValue32 failed (CUresult %d)", rc);
    atomic_store(&use_kernel, 1);
    LOOM_INFO(LOOM_LOG_INIT, "cuStreamWaitValue32 is not supported here: CUDA streams wait "
              "for Loom's collectives with a polling kernel from now on");
  }
  return loom_cuda_check(
      loom_cuda_wait_kernel((const uint32_t *)(uintptr_t)addr, value, (cudaStream_t)native),
      "the wait kernel's launch");
}
