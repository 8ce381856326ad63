/*
 * sim_ops.c — the simulated device's ops table (device/device.h): memory
 * from sim_mem.c, streams and events from sim_stream.c, kernels that run
 * the host's reduction code on the translated storage.  Pinned host
 * memory is plain host memory here.
 */
#include "device/device.h"
#include "device/sim/sim.h"
#include "core/error.h"
#include "core/log.h"
#include "device/reduce.h"

#include <stdlib.h>
#include <string.h>

static loomResult_t host_alloc(void **ptr, size_t bytes) {
  *ptr = malloc(bytes ? bytes : 1);
  return *ptr != NULL ? loomSuccess
                      : loom_error(loomSystemError, LOOM_LOG_INIT,
                                   "simulated device: out of host memory (%zu bytes)", bytes);
}

static void host_free(void *ptr) { free(ptr); }

static loomResult_t memcpy_async(void *dst, const void *src, size_t bytes, void *native) {
  struct loom_sim_op op = {.kind = LOOM_SIM_COPY, .dst = dst, .a = src, .count = bytes};
  return loom_sim_stream_push(native, &op);
}

static loomResult_t memcpy_sync(void *dst, const void *src, size_t bytes) {
  struct loom_sim_op op = {.kind = LOOM_SIM_COPY, .dst = dst, .a = src, .count = bytes};
  char text[512];
  loomResult_t res = loom_sim_op_run(&op, text, sizeof text);
  return res == loomSuccess ? res : loom_error(res, LOOM_LOG_INIT, "%s", text);
}

static loomResult_t reduce_async(void *dst, const void *a, const void *b, size_t count,
                                 loomDataType_t dt, loomRedOp_t op, void *native) {
  struct loom_sim_op o = {.kind = LOOM_SIM_REDUCE, .dst = dst, .a = a, .b = b,
                          .count = count, .dt = dt, .op = op};
  return loom_sim_stream_push(native, &o);
}

static loomResult_t premul_async(void *dst, const void *src, size_t count, loomDataType_t dt,
                                 const void *scalar, void *native) {
  struct loom_sim_op o = {.kind = LOOM_SIM_PREMUL, .dst = dst, .a = src, .count = count,
                          .dt = dt};
  memcpy(o.scalar, scalar, loom_datatype_size(dt)); /* one element, not 8 bytes */
  return loom_sim_stream_push(native, &o);
}

static loomResult_t scale_avg_async(void *buf, size_t count, loomDataType_t dt, int nranks,
                                    void *native) {
  struct loom_sim_op o = {.kind = LOOM_SIM_SCALE, .dst = buf, .count = count, .dt = dt,
                          .nranks = nranks};
  return loom_sim_stream_push(native, &o);
}

static loomResult_t host_func(void *native, void (*fn)(void *), void *arg) {
  struct loom_sim_op o = {.kind = LOOM_SIM_HOST_FUNC, .fn = fn, .arg = arg};
  return loom_sim_stream_push(native, &o);
}

const struct loom_device_ops loom_device_sim_ops = {
    .struct_size = sizeof(struct loom_device_ops),
    .device = loomDeviceSim,
    .name = "sim",
    .mem_alloc = loom_sim_alloc,
    .mem_free = loom_sim_free,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .classify = loom_sim_classify,
    .stream_create = loom_sim_stream_create,
    .stream_destroy = loom_sim_stream_destroy,
    .stream_sync = loom_sim_stream_sync,
    .stream_query = loom_sim_stream_query,
    .memcpy_async = memcpy_async,
    .memcpy_sync = memcpy_sync,
    .reduce_async = reduce_async,
    .premul_async = premul_async,
    .scale_avg_async = scale_avg_async,
    .host_func = host_func,
    .event_create = loom_sim_event_create,
    .event_destroy = loom_sim_event_destroy,
    .event_record = loom_sim_event_record,
    .event_query = loom_sim_event_query,
    .stream_wait_event = loom_sim_stream_wait_event,
    .wait_value_async = loom_sim_wait_value,
    .wait_value_wake = loom_sim_wake_value,
    .ipc_handle_bytes = LOOM_SIM_IPC_HANDLE_BYTES,
    .ipc_get = loom_sim_ipc_get,
    .ipc_open = loom_sim_ipc_open,
    .ipc_close = loom_sim_ipc_close,
};
