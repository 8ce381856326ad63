/*
 * memfd_ipc.h — allocations backed by a memfd that the other processes of
 * the node open by handle, as GPUs of one node share memory through CUDA
 * IPC: the host backend's loomMemAlloc memory (host.c, host_ipc.c) and the
 * simulated device's storage (sim/).
 *
 * A handle names the exporter's process, the descriptor and the file's
 * inode.  The importer opens /proc/PID/fd/FD (allowed to a process of the
 * same user) and checks that it is still the file the handle names: the
 * descriptor number may have been reused since.
 */
#ifndef LOOM_DEVICE_MEMFD_IPC_H
#define LOOM_DEVICE_MEMFD_IPC_H

#include "loom.h"

#include <stddef.h>
#include <stdint.h>

#define LOOM_MEMFD_HANDLE_BYTES 40

/* A new memfd of `span` bytes, close-on-exec; what names the caller
 * ("loomMemAlloc(host)") in errors. */
loomResult_t loom_memfd_create(const char *name, size_t span, const char *what, int *fd);

/* The handle of the allocation of `bytes` (`span` mapped) held by fd;
 * magic tells the backends' handles apart. */
loomResult_t loom_memfd_handle_make(int fd, uint32_t magic, size_t bytes, size_t span,
                                    const char *what, void *handle);

/* Opens another process's allocation from its handle: *fd (read-write),
 * its bytes and span.  A handle of another backend, of this process, or
 * of a file that is gone: an error naming what. */
loomResult_t loom_memfd_handle_open(const void *handle, uint32_t magic, const char *what,
                                    int *fd, size_t *bytes, size_t *span);

#endif
