/*
 * shm_layout.h — how big a host's shared-memory FIFOs are.  A host of n
 * ranks holds n^2 FIFOs (one per ordered pair, the self FIFO included, in
 * n segments), so their size must shrink as n grows for the host's total
 * to stay bounded: by LOOM_SHM_NODE_BYTES, and by half of /dev/shm's size
 * (a container's 64 MiB /dev/shm included).  Every rank of a host computes
 * the same layout from the same inputs; a rank that differs (another
 * LOOM_SHM_NODE_BYTES) is refused at connect.
 */
#ifndef LOOM_TRANSPORT_SHM_LAYOUT_H
#define LOOM_TRANSPORT_SHM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* The most cells a FIFO gets: two pipeline slices (LOOM_CHUNK_BYTES'
 * default, 512 KiB) of 64 KiB cells where a host has few ranks, one where
 * it has more; and the fewest cells and smallest payload it may shrink to. */
#define SHM_CELLS_FEW_RANKS 16
#define SHM_CELLS_MANY_RANKS 8
#define SHM_FEW_RANKS 4 /* local ranks, at most, for SHM_CELLS_FEW_RANKS */
#define SHM_CELLS_MIN 2
#define SHM_PAYLOAD_MAX (64u << 10)
#define SHM_PAYLOAD_MIN (4u << 10)
/* cell_at() (shm.c) masks the index: halving keeps these powers of two */
_Static_assert((SHM_CELLS_FEW_RANKS & (SHM_CELLS_FEW_RANKS - 1)) == 0 &&
                   (SHM_CELLS_MANY_RANKS & (SHM_CELLS_MANY_RANKS - 1)) == 0 &&
                   (SHM_CELLS_MIN & (SHM_CELLS_MIN - 1)) == 0,
               "cells per FIFO must be powers of two");

struct shm_layout {
  uint32_t cells;      /* per FIFO, a power of two */
  uint32_t cell_bytes; /* header line + payload */
  uint64_t node_bytes; /* what the host's n segments take together */
  uint64_t budget;     /* what they were allowed */
};

/* The layout for nlocal ranks on a host whose FIFOs may take `budget`
 * bytes in all: the largest cells (then the most of them) that fit, never
 * below SHM_CELLS_MIN cells of SHM_PAYLOAD_MIN (node_bytes then exceeds
 * the budget). */
struct shm_layout shm_layout_for(int nlocal, uint64_t budget);

/* The budget: LOOM_SHM_NODE_BYTES (node_param) capped at half of what the
 * file system at shm_dir holds (its size, not its free space, so that
 * every rank computes the same). */
uint64_t shm_layout_budget(uint64_t node_param, const char *shm_dir);

#endif /* LOOM_TRANSPORT_SHM_LAYOUT_H */
