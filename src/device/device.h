/*
 * device.h — the device layer: one ops table per backend (host, sim,
 * cuda), the only place backend-specific code lives.  Everything above it
 * (the public memory and stream calls, staging of collective buffers)
 * goes through a table; a new backend (Ascend ACL, ROCm) is one folder
 * that fills one (docs/devices.md).
 *
 * Conventions every backend keeps:
 *  - `native` is the backend's stream (a cudaStream_t, a sim stream); the
 *    *_async entries queue work on it and return at once, in the order
 *    called; errors of queued work come back from stream_sync.
 *  - host_func runs fn(arg) on a host thread once the work queued before
 *    it is done, and later work on that stream waits until fn returns; fn
 *    must neither call the backend nor block: while it runs, CUDA makes
 *    other threads' stream creation and IPC opens wait (seen on an H200),
 *    so a host function waiting for Loom's own work deadlocks.  Loom holds
 *    a stream until a collective is done with wait_value_async instead.
 *  - Pointers are classified by classify(): 1 when `ptr` is this device's
 *    memory, with the allocation's bounds in *base / *size where the
 *    backend knows them (*size 0 otherwise).
 *  - Errors are reported with loom_error (core/error.h) where first seen,
 *    naming the call.
 *  - The host backend's stream and event entries are NULL: host streams
 *    and events are src/stream's own; its copies and kernels run at once
 *    on the calling thread (a host stream's worker).
 */
#ifndef LOOM_DEVICE_DEVICE_H
#define LOOM_DEVICE_DEVICE_H

#include "loom.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_NUM_DEVICES 3 /* loomDeviceHost, loomDeviceSim, loomDeviceCuda */

struct loom_device_ops {
  size_t struct_size; /* sizeof(struct loom_device_ops) of the backend's build */
  loomDevice_t device;
  const char *name; /* "host", "sim", "cuda" */

  /* ---- memory ---- */
  loomResult_t (*mem_alloc)(void **ptr, size_t bytes);
  /* loomInvalidArgument when ptr is not an allocation of mem_alloc */
  loomResult_t (*mem_free)(void *ptr);
  /* Pinned host memory for staging (host code may touch it). */
  loomResult_t (*host_alloc)(void **ptr, size_t bytes);
  void (*host_free)(void *ptr);
  int (*classify)(const void *ptr, uintptr_t *base, size_t *size);

  /* ---- streams ---- */
  loomResult_t (*stream_create)(void **native);
  /* Waits for the stream's work, then frees it. */
  void (*stream_destroy)(void *native);
  /* Waits for the stream's work; returns the first error of that work.
   * native NULL: the device's default stream (the work a program queued
   * there, as a blocking cudaMemcpy would wait for). */
  loomResult_t (*stream_sync)(void *native);
  /* loomSuccess when the stream is idle, loomInProgress otherwise. */
  loomResult_t (*stream_query)(void *native);

  /* ---- work on a stream (dst/src may be device or host memory) ---- */
  loomResult_t (*memcpy_async)(void *dst, const void *src, size_t bytes, void *native);
  /* Synchronous, on no stream: the bytes are in dst when it returns
   * (cudaMemcpy alone does not promise that for a small copy from
   * pageable memory, which another process may read through IPC). */
  loomResult_t (*memcpy_sync)(void *dst, const void *src, size_t bytes);
  /* dst[i] = a[i] op b[i] for a built-in op (loomAvg sums), as
   * device/reduce.h's loom_reduce does on the host. */
  loomResult_t (*reduce_async)(void *dst, const void *a, const void *b, size_t count,
                               loomDataType_t dt, loomRedOp_t op, void *native);
  /* dst[i] = src[i] * scalar (one host element of dt): PreMulSum's input. */
  loomResult_t (*premul_async)(void *dst, const void *src, size_t count, loomDataType_t dt,
                               const void *scalar, void *native);
  /* buf[i] /= nranks: loomAvg's last step (loom_scale_avg's rules). */
  loomResult_t (*scale_avg_async)(void *buf, size_t count, loomDataType_t dt, int nranks,
                                  void *native);
  loomResult_t (*host_func)(void *native, void (*fn)(void *), void *arg);

  /* ---- events: completion seen without blocking ---- */
  loomResult_t (*event_create)(void **event);
  void (*event_destroy)(void *event);
  loomResult_t (*event_record)(void *event, void *native);
  /* loomSuccess when the work before the last record is done, else
   * loomInProgress; never blocks. */
  loomResult_t (*event_query)(void *event);
  /* Later work on the stream waits for the event's last record, on the
   * device: no host thread (nor a backend's callback thread) blocks.  The
   * event may be destroyed right after the call. */
  loomResult_t (*stream_wait_event)(void *native, void *event);
  /* Later work on the stream waits, on the device, until the host has
   * set the 32-bit word at flag (host_alloc memory, written with an
   * atomic store) to value or past it: (int32_t)(*flag - value) >= 0, so
   * a counter may wrap.  No host thread blocks (cuStreamWaitValue32). */
  loomResult_t (*wait_value_async)(void *native, const uint32_t *flag, uint32_t value);
  /* Optional: told after the host stored a new value into a waited word,
   * by a backend whose waits sleep on the host (the simulator); NULL where
   * the device polls the word itself (CUDA). */
  void (*wait_value_wake)(uint32_t *flag);

  /* ---- IPC: ranks of one node use each other's device memory ---- */
  /* Bytes of a handle (at most LOOM_IPC_HANDLE_MAX); 0: no IPC, and the
   * three entries below are NULL. */
  size_t ipc_handle_bytes;
  /* The handle of the allocation holding ptr, and ptr's offset in it. */
  loomResult_t (*ipc_get)(const void *ptr, void *handle, size_t *offset);
  /* Maps another process's allocation: *base is its start here, device
   * memory of this backend as any other (its bounds known where the
   * backend knows them).  Opening a handle of this process is refused. */
  loomResult_t (*ipc_open)(const void *handle, void **base);
  void (*ipc_close)(void *base);
};

#define LOOM_IPC_HANDLE_MAX 64 /* a cudaIpcMemHandle_t */

/* The device module (libloom-dev-cuda.so) exports this, named
 * LOOM_DEVICE_MODULE_SYMBOL.  The first three fields are those of every
 * Loom module (transports/common/module.h) and are checked first. */
#define LOOM_DEVICE_MODULE_SYMBOL "loom_device_module_v1"
struct loom_module_host;
struct loom_device_module {
  int abi;
  const char *version;
  int param_count;
  const char *name; /* "cuda" */
  void (*bind)(const struct loom_module_host *host);
  const struct loom_device_ops *ops;
  /* 1 when the backend has a device to run on; why says what was found. */
  int (*available)(char *why, size_t len);
};

/* The backends built into libloom, and the CUDA module's (cuda/). */
extern const struct loom_device_ops loom_device_host_ops;
extern const struct loom_device_ops loom_device_sim_ops;
extern const struct loom_device_ops loom_device_cuda_ops;

/* "host", "sim", "cuda"; "invalid" otherwise. */
const char *loom_device_name(loomDevice_t device);

/* The ops of `device`, loading its module on first use: loomSuccess, or an
 * error naming fn and what to do (not built, no module, no device). */
loomResult_t loom_device_get(loomDevice_t device, const struct loom_device_ops **ops,
                             const char *fn);

/* The backends built, "host sim cuda", for loom-info. */
const char *loom_devices_built(void);

/* Nonzero once any backend besides host holds memory or streams: until
 * then every pointer is host memory and classification costs nothing. */
int loom_device_active(void);
void loom_device_mark_active(void);

/* Where ptr lives: loomDeviceHost for any memory no active backend claims
 * (malloc'd memory included).  *ops is the owner's table (host's for host
 * memory); base/size are the allocation's bounds where known (size 0:
 * unknown, as for malloc'd memory). */
loomDevice_t loom_device_of(const void *ptr, const struct loom_device_ops **ops,
                            uintptr_t *base, size_t *size);

/* Checks that [ptr, ptr+bytes) stays inside the allocation it starts in,
 * where the backend knows the bounds; what names the buffer ("sendbuff"). */
loomResult_t loom_device_check_span(const void *ptr, size_t bytes, const char *what,
                                    const char *fn);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_DEVICE_DEVICE_H */
