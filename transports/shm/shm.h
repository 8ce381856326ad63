/*
 * shm.h — internals of the shared-memory transport.
 *
 * Every rank owns one POSIX shared-memory segment holding one FIFO per
 * local peer: the FIFO from peer p to this rank lives in this rank's
 * segment, and p maps the segment to write into it (single producer,
 * single consumer).  A FIFO is a ring of cells; a cell's first cache line
 * holds its sequence flag, the part's length, the message's length and
 * fingerprint and, for messages of up to SHM_INLINE_BYTES, the data itself:
 * a small message costs the reader one cache line and no system call.
 * Larger messages are cut into cell-sized parts (the bulk protocol).
 *
 * The segment is unlinked as soon as every local peer has mapped it, so a
 * rank killed later leaves nothing in /dev/shm; one killed during set-up
 * leaves a segment named after its pid, which the next init removes.
 */
#ifndef LOOM_TRANSPORT_SHM_H
#define LOOM_TRANSPORT_SHM_H

#include "transport.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define SHM_LINE 64
#define SHM_DIR "/dev/shm"
#define SHM_INLINE_BYTES 32
/* Receives of up to this many bytes prefetch their cell's data lines while
 * they wait (shm.c, prefetch_data_lines). */
#define SHM_PREFETCH_BYTES 256
#define SHM_NAME_BYTES 48
#define SHM_SEG_MAGIC 0x4c4d5348u /* "LMSH" */

/* Processes share these through the mapping: the atomics must be
 * lock-free (no hidden lock inside one process's memory). */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "shared-memory atomics must be lock-free");

/* The first cache line of a cell: 32 bytes of header, then up to 32 of a
 * small message (a 32-byte all-reduce in one line: 0.47-0.53 us a call
 * against 0.61-0.62 in two, 2026-12-06).  seq holds the low 32 bits of index + 1: a stale cell
 * holds index + 1 - cells, never equal to it modulo 2^32. */
struct shm_cell_hdr {
  _Atomic uint32_t seq; /* (uint32_t)(index + 1) once the cell is full */
  uint32_t len;          /* bytes of this part, | SHM_CELL_CMA */
  uint64_t total;        /* bytes of the whole message */
  uint64_t fp[2];        /* the call's fingerprint */
  uint8_t inline_data[SHM_INLINE_BYTES];
};
_Static_assert(sizeof(struct shm_cell_hdr) == SHM_LINE, "a cell header is one cache line");

/* In len: a single-copy message (no data in the cell; inline_data holds
 * the sender's address).  Parts are at most SHM_PAYLOAD_MAX bytes. */
#define SHM_CELL_CMA 0x80000000u

/* The flag a full cell for FIFO position `index` holds. */
static inline uint32_t shm_cell_seq(uint64_t index) { return (uint32_t)(index + 1); }
/* Bytes of data in the part a cell holds. */
static inline uint32_t shm_cell_len(const struct shm_cell_hdr *cell) {
  return cell->len & ~SHM_CELL_CMA;
}

/* A FIFO's control block: the consumer's position on its own line. */
struct shm_fifo_ctl {
  _Atomic uint64_t tail;     /* cells consumed */
  _Atomic uint64_t cma_done; /* single-copy messages the consumer has read */
  char pad[SHM_LINE - 16];
};

struct shm_seg_hdr {
  _Atomic uint32_t magic; /* written last: the segment is ready */
  uint32_t nfifos;
  uint32_t cells, cell_bytes; /* per FIFO; cell_bytes includes the header line */
  int32_t owner_pid;
  _Atomic int32_t mapped; /* peers that mapped this segment (a futex its owner sleeps on) */
  char pad[SHM_LINE - 24];
};

/* A mapped segment (own or a peer's). */
struct shm_seg {
  char name[SHM_NAME_BYTES];
  void *base;
  size_t bytes;
  int unlinked;
  /* The creator's descriptor, holding a shared flock until the segment is
   * unlinked, so that a process that cannot see the creator's pid (another
   * PID namespace) knows it is not stale; 0: none. */
  int lock_fd;
};

/* shm.c: struct loom_peek_ops over a shm connection */
int loom_shm_can_peek(void *conn, size_t bytes);
size_t loom_shm_peek(void *conn, struct loom_xfer *x, const void **data);
void loom_shm_consume(void *conn, struct loom_xfer *x);

/* shm_segment.c */
size_t shm_seg_bytes(uint32_t nfifos, uint32_t cells, uint32_t cell_bytes);
/* Creates this rank's segment; checks /dev/shm has room, saying how much
 * is needed and suggesting LOOM_SHM_DISABLE=1 when not. */
loomResult_t shm_seg_create(struct shm_seg *seg, uint32_t nfifos, uint32_t cells,
                            uint32_t cell_bytes, int rank);
loomResult_t shm_seg_map(struct shm_seg *seg, const char *name, int rank, int peer);
void shm_seg_unlink(struct shm_seg *seg);
void shm_seg_close(struct shm_seg *seg);
/* Maps the pages of [addr, addr + bytes) of a mapped segment into this
 * process now, and reads one byte of each (the segment's pages are
 * reserved at creation, but each process still pays for its first touch
 * of each, as a page fault and, in a VM, a trap to the hypervisor: the
 * first calls through a fresh FIFO paid milliseconds of them). */
void shm_seg_prefault(void *addr, size_t bytes);
/* Removes segments of this naming scheme whose creator no longer runs. */
void shm_seg_remove_stale(void);
struct shm_fifo_ctl *shm_fifo_ctl(const struct shm_seg *seg, uint32_t fifo);
struct shm_cell_hdr *shm_cell(const struct shm_seg *seg, uint32_t fifo, uint64_t index);

#endif
