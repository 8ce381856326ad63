/*
 * host_ipc.c — the host backend's IPC (device/device.h's ipc_*): the ranks
 * of one node read and write each other's loomMemAlloc host memory
 * directly, which lets a collective on such buffers skip the shared-memory
 * FIFOs (api/ipc_coll.c).  An allocation lives in a memfd (host.c), shared
 * by handle as device/memfd_ipc.h says; the importer maps the whole file
 * and keeps it in the allocation table, marked imported, until closed.
 */
#include "device/host.h"
#include "device/memfd_ipc.h"
#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HOST_IPC_MAGIC 0x4c48534du /* "LHSM" */

loomResult_t loom_host_ipc_get(const void *ptr, void *handle, size_t *offset) {
  pthread_mutex_lock(&loom_host_allocs.lock);
  int i = loom_alloc_find(&loom_host_allocs, (uintptr_t)ptr);
  struct loom_alloc a = i >= 0 ? loom_host_allocs.v[i] : (struct loom_alloc){.fd = -1};
  pthread_mutex_unlock(&loom_host_allocs.lock);
  if (i < 0 || a.imported || a.fd < 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "host IPC: %p is not in a live loomMemAlloc allocation of this process",
                      ptr);
  LOOM_CHECK(loom_memfd_handle_make(a.fd, HOST_IPC_MAGIC, a.bytes, a.span, "host IPC", handle));
  *offset = (uintptr_t)ptr - a.base;
  return loomSuccess;
}

loomResult_t loom_host_ipc_open(const void *handle, void **base) {
  struct loom_alloc a = {.imported = 1};
  LOOM_CHECK(loom_memfd_handle_open(handle, HOST_IPC_MAGIC, "host IPC", &a.fd, &a.bytes,
                                    &a.span));
  /* Populated now: faulting the pages in one by one during the first
   * collective costs more than the kernel filling the page table here. */
  void *p = mmap(NULL, a.span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, a.fd, 0);
  int err = errno;
  close(a.fd);
  a.fd = -1;
  if (p == MAP_FAILED)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "host IPC: mapping %zu bytes: %s",
                      a.span, strerror(err));
  a.base = (uintptr_t)p;
  if (loom_host_allocs_add(&a) != 0) {
    munmap(p, a.span);
    return loom_error(loomSystemError, LOOM_LOG_COLL, "host IPC: out of memory");
  }
  *base = p;
  return loomSuccess;
}

void loom_host_ipc_close(void *base) {
  struct loom_alloc a;
  if (loom_alloc_take(&loom_host_allocs, (uintptr_t)base, 1, &a) == 0)
    munmap(base, a.span);
}
