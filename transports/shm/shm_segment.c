/*
 * shm_segment.c — creating, mapping and removing the shared-memory
 * segments of the shm transport.  Names are /loom-<pid>-<random>, so a
 * segment left by a killed rank can be recognised and removed; its
 * creator holds a shared flock on it until it unlinks it, because a pid
 * that does not run here may run in another PID namespace sharing
 * /dev/shm (containers with the host's IPC), where the segment is live.
 */
#include "shm.h"
#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define SHM_PREFIX "loom-"

size_t shm_seg_bytes(uint32_t nfifos, uint32_t cells, uint32_t cell_bytes) {
  return SHM_LINE + (size_t)nfifos * (SHM_LINE + (size_t)cells * cell_bytes);
}

struct shm_fifo_ctl *shm_fifo_ctl(const struct shm_seg *seg, uint32_t fifo) {
  const struct shm_seg_hdr *h = seg->base;
  size_t fifo_bytes = SHM_LINE + (size_t)h->cells * h->cell_bytes;
  return (struct shm_fifo_ctl *)((char *)seg->base + SHM_LINE + fifo * fifo_bytes);
}

struct shm_cell_hdr *shm_cell(const struct shm_seg *seg, uint32_t fifo, uint64_t index) {
  const struct shm_seg_hdr *h = seg->base;
  char *cells = (char *)shm_fifo_ctl(seg, fifo) + SHM_LINE;
  return (struct shm_cell_hdr *)(cells + (size_t)(index % h->cells) * h->cell_bytes);
}

/* Keeps fd, whose shared flock marks the segment in use, open; returns
 * it, moved above the standard descriptors so that 0 can mean none, or 0
 * (and closes it) where it is not locked: the segment then relies on its
 * pid alone. */
static int keep_lock(int fd, int locked) {
  int held = !locked ? -1 : fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (held != fd)
    close(fd);
  return held < 0 ? 0 : held;
}

/* Whether a live process holds segment `name` (its creator's flock). */
static int held_in_use(const char *name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0)
    return errno != ENOENT; /* not ours to open: not ours to remove */
  int busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return busy;
}

/* Each of the host's nfifos ranks makes a segment of `bytes`. */
static loomResult_t check_room(size_t bytes, uint32_t nfifos, int rank) {
  struct statvfs vfs;
  if (statvfs(SHM_DIR, &vfs) != 0)
    return loomSuccess; /* no /dev/shm to measure: let shm_open say */
  unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
  if (avail < bytes)
    return loom_error(loomSystemError, LOOM_LOG_NET,
                      "shm: rank %d needs %zu bytes in " SHM_DIR " for its shared-memory "
                      "FIFOs (the host's %u ranks about %llu together) but only %llu are "
                      "free: enlarge " SHM_DIR " (e.g. docker --shm-size), lower "
                      "LOOM_SHM_NODE_BYTES, or set LOOM_SHM_DISABLE=1 to use TCP",
                      rank, bytes, nfifos, (unsigned long long)bytes * nfifos, avail);
  return loomSuccess;
}

loomResult_t shm_seg_create(struct shm_seg *seg, uint32_t nfifos, uint32_t cells,
                            uint32_t cell_bytes, int rank) {
  memset(seg, 0, sizeof *seg);
  size_t bytes = shm_seg_bytes(nfifos, cells, cell_bytes);
  LOOM_CHECK(check_room(bytes, nfifos, rank));
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
    r = (uint32_t)rank;
  snprintf(seg->name, sizeof seg->name, "/" SHM_PREFIX "%d-%08x", (int)getpid(), r);
  int fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return loom_error(loomSystemError, LOOM_LOG_NET,
                      "shm: rank %d cannot create %s: %s (set LOOM_SHM_DISABLE=1 to use TCP)",
                      rank, seg->name, strerror(errno));
  int locked = flock(fd, LOCK_SH | LOCK_NB) == 0; /* in use, before anything else */
  /* posix_fallocate reserves the pages now: a full /dev/shm fails here, not
   * with SIGBUS at the first write. */
  int err = ftruncate(fd, (off_t)bytes) != 0 ? errno : posix_fallocate(fd, 0, (off_t)bytes);
  if (err == 0) {
    seg->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (seg->base == MAP_FAILED) {
      err = errno;
      seg->base = NULL;
    }
  }
  if (err != 0) {
    close(fd);
    shm_unlink(seg->name);
    return loom_error(loomSystemError, LOOM_LOG_NET,
                      "shm: rank %d cannot size %s to %zu bytes: %s (is " SHM_DIR
                      " full? set LOOM_SHM_DISABLE=1 to use TCP)",
                      rank, seg->name, bytes, strerror(err));
  }
  seg->lock_fd = keep_lock(fd, locked);
  seg->bytes = bytes;
  /* A new file reads as zeros (ftruncate, then posix_fallocate's pages):
   * no memset, which would touch every page of every FIFO at init. */
  struct shm_seg_hdr *h = seg->base;
  h->nfifos = nfifos;
  h->cells = cells;
  h->cell_bytes = cell_bytes;
  h->owner_pid = (int32_t)getpid();
  atomic_store_explicit(&h->magic, SHM_SEG_MAGIC, memory_order_release);
  return loomSuccess;
}

loomResult_t shm_seg_map(struct shm_seg *seg, const char *name, int rank, int peer) {
  memset(seg, 0, sizeof *seg);
  snprintf(seg->name, sizeof seg->name, "%s", name);
  seg->unlinked = 1; /* its owner unlinks it */
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0)
    return loom_error_record(loomRemoteError, "shm: rank %d cannot open rank %d's segment %s: %s",
                             rank, peer, name, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct shm_seg_hdr)) {
    close(fd);
    return loom_error_record(loomRemoteError, "shm: rank %d's segment %s is truncated", peer,
                             name);
  }
  seg->bytes = (size_t)st.st_size;
  seg->base = mmap(NULL, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (seg->base == MAP_FAILED) {
    seg->base = NULL;
    return loom_error_record(loomSystemError, "shm: rank %d cannot map %s: %s", rank, name,
                             strerror(errno));
  }
  const struct shm_seg_hdr *h = seg->base;
  if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_SEG_MAGIC ||
      shm_seg_bytes(h->nfifos, h->cells, h->cell_bytes) > seg->bytes) {
    shm_seg_close(seg);
    return loom_error_record(loomRemoteError, "shm: rank %d's segment %s is not a Loom segment",
                             peer, name);
  }
  return loomSuccess;
}

void shm_seg_unlink(struct shm_seg *seg) {
  if (seg->name[0] != '\0' && !seg->unlinked) {
    shm_unlink(seg->name);
    seg->unlinked = 1;
  }
  if (seg->lock_fd > 0)
    close(seg->lock_fd);
  seg->lock_fd = 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif

void shm_seg_prefault(void *addr, size_t bytes) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = (uintptr_t)addr & ~(page - 1);
  uintptr_t hi = ((uintptr_t)addr + bytes + page - 1) & ~(page - 1);
  /* best effort: where it fails the pages are mapped as first used */
  (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
  /* Then one read a page, by each process that maps it.  In a VM a
   * process's first access to a populated page can still trap to the
   * hypervisor, unseen by the guest (no page fault counted): on the
   * development VM 1 MiB of cells was first written in 1.1-3.2 ms against
   * 10-20 us after, and a peer's touch of the same pages did not spare
   * this process its own.  Here that costs about 2 ms a MiB at connect
   * instead of 20-30 us on each of a FIFO's first 16 messages.  Reading,
   * not writing: a peer may already be sending through these cells. */
  for (uintptr_t at = lo; at < hi; at += page)
    (void)*(volatile const char *)at;
}

void shm_seg_close(struct shm_seg *seg) {
  shm_seg_unlink(seg);
  if (seg->base != NULL)
    munmap(seg->base, seg->bytes);
  seg->base = NULL;
}

void shm_seg_remove_stale(void) {
  DIR *d = opendir(SHM_DIR);
  if (d == NULL)
    return;
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    int pid;
    unsigned r;
    if (sscanf(ent->d_name, SHM_PREFIX "%d-%8x", &pid, &r) != 2 || pid <= 0)
      continue;
    if (kill(pid, 0) == 0 || errno != ESRCH)
      continue; /* its creator runs (or is not ours to judge) */
    char name[SHM_NAME_BYTES + 2];
    snprintf(name, sizeof name, "/%.*s", SHM_NAME_BYTES - 1, ent->d_name);
    if (held_in_use(name)) {
      LOOM_INFO(LOOM_LOG_NET, "shm: kept %s: no pid %d runs here, but a process holds it "
                "(its creator in another PID namespace?)", name, pid);
      continue;
    }
    if (shm_unlink(name) == 0)
      LOOM_INFO(LOOM_LOG_NET, "shm: removed %s, left by pid %d which no longer runs", name,
                pid);
  }
  closedir(d);
}
