/*
 * sim_ipc.c — the simulated device's IPC (device/device.h's ipc_*): ranks
 * of one node share device memory as a node's GPUs do through CUDA IPC.
 * An allocation's bytes live in a memfd (sim_mem.c); its handle names the
 * exporter's process, the descriptor and the file's inode, and the
 * importer opens /proc/PID/fd/FD (allowed to a process of the same user),
 * checks it is the same file, maps it and places it in its own device
 * range.  Host code cannot touch the imported range either: only the
 * backend's copies and kernels translate it.
 */
#include "device/sim/sim.h"
#include "device/alloc_table.h"
#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIM_IPC_MAGIC 0x4c53494du /* "LSIM" */

struct sim_handle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t ino;
  uint64_t bytes;
  uint64_t span;
};

_Static_assert(sizeof(struct sim_handle) == LOOM_SIM_IPC_HANDLE_BYTES, "handle size");

loomResult_t loom_sim_ipc_get(const void *ptr, void *handle, size_t *offset) {
  struct loom_alloc a;
  if (!loom_sim_lookup(ptr, &a))
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "simulated device: %p is not in a live allocation (freed?)", ptr);
  if (a.imported)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "simulated device: %p was opened from another process's handle: only "
                      "its owner exports it", ptr);
  struct stat st;
  if (fstat(a.fd, &st) != 0)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "simulated device: fstat: %s",
                      strerror(errno));
  struct sim_handle h = {.magic = SIM_IPC_MAGIC, .pid = (int32_t)getpid(), .fd = a.fd,
                         .ino = (uint64_t)st.st_ino, .bytes = a.bytes, .span = a.span};
  memcpy(handle, &h, sizeof h);
  *offset = (uintptr_t)ptr - a.base;
  return loomSuccess;
}

/* Opens the exporter's memfd and checks it is the allocation the handle
 * names (the descriptor number may have been reused since). */
static loomResult_t open_file(const struct sim_handle *h, int *fd) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
  *fd = open(path, O_RDWR | O_CLOEXEC);
  if (*fd < 0)
    return loom_error(loomSystemError, LOOM_LOG_COLL,
                      "simulated device IPC: cannot open %s: %s (the peer process gone, or in "
                      "another PID namespace or user?)", path, strerror(errno));
  struct stat st;
  if (fstat(*fd, &st) != 0 || (uint64_t)st.st_ino != h->ino ||
      (uint64_t)st.st_size < h->span) {
    close(*fd);
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "simulated device IPC: %s is no longer the allocation its handle names "
                      "(freed by its owner before the collective ran?)", path);
  }
  return loomSuccess;
}

loomResult_t loom_sim_ipc_open(const void *handle, void **base) {
  struct sim_handle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != SIM_IPC_MAGIC || h.span < h.bytes || h.span == 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "simulated device IPC: not a handle of the simulated device");
  if (h.pid == (int32_t)getpid())
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "simulated device IPC: a handle of this process (use the pointer itself)");
  struct loom_alloc a = {.bytes = h.bytes, .span = h.span, .imported = 1};
  LOOM_CHECK(open_file(&h, &a.fd));
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
