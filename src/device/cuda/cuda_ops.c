/*
 * cuda_ops.c — the CUDA backend's ops table (device/device.h), built into
 * libloom-dev-cuda.so: each entry is one CUDA runtime call (the kernels
 * are kernels.cu's launchers).
 *
 * Memory from cudaMalloc is also recorded in a device/alloc_table.h table,
 * so that classify can give an allocation's bounds (Loom checks that a
 * buffer does not overrun its allocation) and mem_free can refuse a pointer
 * that loomMemAlloc did not hand out instead of passing it to cudaFree.
 *
 * Every failure is reported once, here, with loom_error: the CUDA call and
 * cudaGetErrorString's text ("cudaMemcpyAsync failed: an illegal memory
 * access was encountered").  Answers that are not failures (a stream or
 * event not ready, a pointer CUDA does not know) are cleared from the
 * runtime's last-error slot, so that a later launch's cudaGetLastError does
 * not mistake them for its own error.
 *
 * The calls act on the calling thread's current CUDA device (device 0
 * unless the program chose another with cudaSetDevice).
 */
#include "device/device.h"
#include "device/alloc_table.h"
#include "device/cuda/kernels.h"
#include "device/cuda/cuda_internal.h"
#include "core/error.h"
#include "core/log.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

/* Every live cudaMalloc of mem_alloc and every opened IPC handle, by
 * address (cuda_internal.h). */
struct loom_alloc_table loom_cuda_allocations = LOOM_ALLOC_TABLE_INIT;

/* ---- errors ----------------------------------------------------------------- */

loomResult_t loom_cuda_check(cudaError_t err, const char *call) {
  if (err == cudaSuccess)
    return loomSuccess;
  return loom_error(loomUnhandledCudaError, LOOM_LOG_INIT, "%s failed: %s", call,
                    cudaGetErrorString(err));
}

void *loom_cuda_driver_entry(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess)
    return fn;
  (void)cudaGetLastError();
  return NULL;
}

/* Takes err out of the runtime's last-error slot when it is what the slot
 * holds (an answer, not a failure to report later). */
static void forget_answer(cudaError_t err) {
  if (cudaPeekAtLastError() == err)
    (void)cudaGetLastError();
}

/* stream_query and event_query: not ready is loomInProgress, not an error. */
static loomResult_t query_result(cudaError_t err, const char *call) {
  if (err != cudaErrorNotReady)
    return loom_cuda_check(err, call);
  forget_answer(err);
  return loomInProgress;
}

static loomResult_t check_type(loomDataType_t dt, const char *what) {
  if ((unsigned)dt < (unsigned)loomNumTypes)
    return loomSuccess;
  return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s on a CUDA device: invalid data "
                    "type %d", what, (int)dt);
}

/* ---- memory ----------------------------------------------------------------- */

loomResult_t loom_cuda_remember(void *ptr, size_t bytes, int imported) {
  struct loom_alloc a = {.base = (uintptr_t)ptr, .bytes = bytes, .span = bytes ? bytes : 1,
                         .storage = NULL, .fd = -1, .imported = imported};
  pthread_mutex_lock(&loom_cuda_allocations.lock);
  int rc = loom_alloc_insert(&loom_cuda_allocations, &a,
                             loom_alloc_slot(&loom_cuda_allocations, a.base));
  pthread_mutex_unlock(&loom_cuda_allocations.lock);
  if (rc == 0)
    return loomSuccess;
  return loom_error(loomSystemError, LOOM_LOG_INIT, "loomMemAlloc(cuda): out of host memory "
                    "to record an allocation of %zu bytes", bytes);
}

static loomResult_t mem_alloc(void **ptr, size_t bytes) {
  void *p = NULL;
  LOOM_CHECK(loom_cuda_check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc"));
  loomResult_t res = loom_cuda_remember(p, bytes, 0);
  if (res != loomSuccess) {
    cudaFree(p);
    return res;
  }
  *ptr = p;
  return loomSuccess;
}

static loomResult_t mem_free(void *ptr) {
  struct loom_alloc a;
  if (loom_alloc_take(&loom_cuda_allocations, (uintptr_t)ptr, 0, &a) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomMemFree: %p is not the start of "
                      "a live CUDA allocation of loomMemAlloc", ptr);
  return loom_cuda_check(cudaFree(ptr), "cudaFree");
}

static loomResult_t host_alloc(void **ptr, size_t bytes) {
  /* mapped: a stream's wait_value_async reads a word of it */
  return loom_cuda_check(cudaHostAlloc(ptr, bytes ? bytes : 1,
                                       cudaHostAllocPortable | cudaHostAllocMapped),
                         "cudaHostAlloc");
}

static void host_free(void *ptr) { loom_cuda_check(cudaFreeHost(ptr), "cudaFreeHost"); }

/* Device memory: ours with its bounds, or another's (cudaMalloc'd by the
 * program) with *size 0.  Host, managed and unknown memory: 0. */
static int classify(const void *ptr, uintptr_t *base, size_t *size) {
  if (loom_alloc_bounds(&loom_cuda_allocations, ptr, base, size))
    return 1;
  struct cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    forget_answer(err);
    return 0;
  }
  if (attr.type != cudaMemoryTypeDevice)
    return 0;
  *base = (uintptr_t)ptr;
  *size = 0;
  return 1;
}

/* ---- streams ---------------------------------------------------------------- */

static loomResult_t stream_create(void **native) {
  cudaStream_t stream;
  LOOM_CHECK(loom_cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags"));
  *native = stream;
  return loomSuccess;
}

static void stream_destroy(void *native) {
  loom_cuda_check(cudaStreamSynchronize((cudaStream_t)native), "cudaStreamSynchronize");
  loom_cuda_check(cudaStreamDestroy((cudaStream_t)native), "cudaStreamDestroy");
}

static loomResult_t stream_sync(void *native) {
  cudaStream_t stream = native != NULL ? (cudaStream_t)native : cudaStreamLegacy;
  return loom_cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

static loomResult_t stream_query(void *native) {
  return query_result(cudaStreamQuery((cudaStream_t)native), "cudaStreamQuery");
}

/* ---- work on a stream ------------------------------------------------------- */

static loomResult_t memcpy_async(void *dst, const void *src, size_t bytes, void *native) {
  return loom_cuda_check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)native),
      "cudaMemcpyAsync");
}

/* On the default (legacy) stream, as cudaMemcpy, but waited for: a small
 * cudaMemcpy from pageable memory may return before the bytes land, and a
 * peer reading them through IPC then sees old data (seen on an H200). */
static loomResult_t memcpy_sync(void *dst, const void *src, size_t bytes) {
  LOOM_CHECK(loom_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                             cudaStreamLegacy), "cudaMemcpyAsync"));
  return loom_cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
}

static loomResult_t reduce_async(void *dst, const void *a, const void *b, size_t count,
                                 loomDataType_t dt, loomRedOp_t op, void *native) {
  LOOM_CHECK(check_type(dt, "reduce"));
  if ((unsigned)op >= (unsigned)loomNumOps)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "reduce on a CUDA device: invalid "
                      "op %d (only the built-in ops run here)", (int)op);
  return loom_cuda_check(loom_cuda_reduce(dst, a, b, count, dt, op, (cudaStream_t)native),
                         "the reduce kernel's launch");
}

static loomResult_t premul_async(void *dst, const void *src, size_t count, loomDataType_t dt,
                                 const void *scalar, void *native) {
  LOOM_CHECK(check_type(dt, "premul"));
  return loom_cuda_check(loom_cuda_premul(dst, src, count, dt, scalar, (cudaStream_t)native),
                         "the premul kernel's launch");
}

static loomResult_t scale_avg_async(void *buf, size_t count, loomDataType_t dt, int nranks,
                                    void *native) {
  LOOM_CHECK(check_type(dt, "scale_avg"));
  return loom_cuda_check(loom_cuda_scale_avg(buf, count, dt, nranks, (cudaStream_t)native),
                         "the scale_avg kernel's launch");
}

static loomResult_t host_func(void *native, void (*fn)(void *), void *arg) {
  return loom_cuda_check(cudaLaunchHostFunc((cudaStream_t)native, fn, arg), "cudaLaunchHostFunc");
}

/* ---- events ----------------------------------------------------------------- */

static loomResult_t event_create(void **event) {
  cudaEvent_t e;
  LOOM_CHECK(loom_cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                             "cudaEventCreateWithFlags"));
  *event = e;
  return loomSuccess;
}

static void event_destroy(void *event) {
  loom_cuda_check(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
}

static loomResult_t event_record(void *event, void *native) {
  return loom_cuda_check(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)native),
                         "cudaEventRecord");
}

static loomResult_t event_query(void *event) {
  return query_result(cudaEventQuery((cudaEvent_t)event), "cudaEventQuery");
}

static loomResult_t stream_wait_event(void *native, void *event) {
  return loom_cuda_check(cudaStreamWaitEvent((cudaStream_t)native, (cudaEvent_t)event, 0),
                         "cudaStreamWaitEvent");
}

const struct loom_device_ops loom_device_cuda_ops = {
    .struct_size = sizeof(struct loom_device_ops),
    .device = loomDeviceCuda,
    .name = "cuda",
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .classify = classify,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_sync = stream_sync,
    .stream_query = stream_query,
    .memcpy_async = memcpy_async,
    .memcpy_sync = memcpy_sync,
    .reduce_async = reduce_async,
    .premul_async = premul_async,
    .scale_avg_async = scale_avg_async,
    .host_func = host_func,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .stream_wait_event = stream_wait_event,
    .wait_value_async = loom_cuda_wait_value,
    .ipc_handle_bytes = sizeof(cudaIpcMemHandle_t),
    .ipc_get = loom_cuda_ipc_get,
    .ipc_open = loom_cuda_ipc_open,
    .ipc_close = loom_cuda_ipc_close,
};
