/*
 * sim_ipc.c — the simulated device's IPC (device/device.h's ipc_*): ranks
 * of one node share device memory as a node's GPUs do through CUDA IPC.
 * An allocation's bytes live in a memfd (sim_mem.c), shared by handle as
 * device/memfd_ipc.h says; the importer maps it and places it in its own
 * device range.  Host code cannot touch the imported range either: only the
 * backend's copies and kernels translate it.
 */
#include "device/sim/sim.h"
#include "device/alloc_table.h"
#include "device/memfd_ipc.h"
#include "core/error.h"
#include "core/log.h"

#include <stdint.h>

#define SIM_IPC_MAGIC 0x4c53494du /* "LSIM" */

_Static_assert(LOOM_SIM_IPC_HANDLE_BYTES == LOOM_MEMFD_HANDLE_BYTES, "handle size");

loomResult_t loom_sim_ipc_get(const void *ptr, void *handle, size_t *offset) {
  struct loom_alloc a;
  if (!loom_sim_lookup(ptr, &a))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "simulated device: %p is not in a live allocation (freed?)", ptr);
  if (a.imported)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "simulated device: %p was opened from another process's handle: only "
                      "its owner exports it", ptr);
  LOOM_CHECK(loom_memfd_handle_make(a.fd, SIM_IPC_MAGIC, a.bytes, a.span, "simulated device",
                                    handle));
  *offset = (uintptr_t)ptr - a.base;
  return loomSuccess;
}

loomResult_t loom_sim_ipc_open(const void *handle, void **base) {
  struct loom_alloc a = {.imported = 1};
  LOOM_CHECK(loom_memfd_handle_open(handle, SIM_IPC_MAGIC, "simulated device IPC", &a.fd,
                                    &a.bytes, &a.span));
  loom_sim_api_exclusive(); /* as cudaIpcOpenMemHandle, it waits for running host functions */
  loomResult_t res = loom_sim_map_and_place(&a, "IPC open", base);
  loom_sim_api_shared_end();
  return res;
}

void loom_sim_ipc_close(void *base) {
  struct loom_alloc a;
  if (loom_sim_unplace((uintptr_t)base, 1, &a) == 0)
    loom_sim_release(&a);
}
