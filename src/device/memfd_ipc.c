/*
 * memfd_ipc.c — memfd-backed allocations shared by handle (memfd_ipc.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include "device/memfd_ipc.h"
#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct memfd_handle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t ino;
  uint64_t bytes;
  uint64_t span;
};

_Static_assert(sizeof(struct memfd_handle) == LOOM_MEMFD_HANDLE_BYTES, "handle size");

loomResult_t loom_memfd_create(const char *name, size_t span, const char *what, int *fd) {
  *fd = memfd_create(name, MFD_CLOEXEC);
  if (*fd < 0)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "%s: memfd_create: %s", what,
                      strerror(errno));
  if (ftruncate(*fd, (off_t)span) != 0) {
    loomResult_t res = loom_error(loomSystemError, LOOM_LOG_INIT, "%s: %zu bytes: %s", what,
                                  span, strerror(errno));
    close(*fd);
    *fd = -1;
    return res;
  }
  return loomSuccess;
}

loomResult_t loom_memfd_handle_make(int fd, uint32_t magic, size_t bytes, size_t span,
                                    const char *what, void *handle) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "%s: fstat: %s", what, strerror(errno));
  struct memfd_handle h = {.magic = magic, .pid = (int32_t)getpid(), .fd = fd,
                           .ino = (uint64_t)st.st_ino, .bytes = bytes, .span = span};
  memcpy(handle, &h, sizeof h);
  return loomSuccess;
}

loomResult_t loom_memfd_handle_open(const void *handle, uint32_t magic, const char *what,
                                    int *fd, size_t *bytes, size_t *span) {
  struct memfd_handle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != magic || h.span < h.bytes || h.span == 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL, "%s: not a handle of this backend",
                      what);
  if (h.pid == (int32_t)getpid())
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: a handle of this process (use the pointer itself)", what);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
  *fd = open(path, O_RDWR | O_CLOEXEC);
  if (*fd < 0)
    return loom_error(loomSystemError, LOOM_LOG_COLL,
                      "%s: cannot open %s: %s (the peer process gone, or in another PID "
                      "namespace or user?)", what, path, strerror(errno));
  struct stat st;
  if (fstat(*fd, &st) != 0 || (uint64_t)st.st_ino != h.ino || (uint64_t)st.st_size < h.span) {
    close(*fd);
    *fd = -1;
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: %s is no longer the allocation its handle names (freed by its "
                      "owner before the collective ran?)", what, path);
  }
  *bytes = (size_t)h.bytes;
  *span = (size_t)h.span;
  return loomSuccess;
}
