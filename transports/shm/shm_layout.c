/*
 * shm_layout.c — the size of a host's shared-memory FIFOs (see
 * shm_layout.h).
 */
#include "shm_layout.h"
#include "shm.h"

#include <sys/statvfs.h>

struct shm_layout shm_layout_for(int nlocal, uint64_t budget) {
  uint32_t cells = nlocal <= SHM_FEW_RANKS ? SHM_CELLS_FEW_RANKS : SHM_CELLS_MANY_RANKS;
  uint32_t payload = SHM_PAYLOAD_MAX;
  uint64_t n = (uint64_t)(nlocal > 0 ? nlocal : 1);
  uint64_t total;
  for (;;) {
    total = n * (uint64_t)shm_seg_bytes((uint32_t)n, cells, SHM_LINE + payload);
    if (total <= budget)
      break;
    if (cells > SHM_CELLS_MIN)
      cells /= 2; /* fewer cells first: large cells keep big messages cheap */
    else if (payload > SHM_PAYLOAD_MIN)
      payload /= 2;
    else
      break;
  }
  return (struct shm_layout){.cells = cells, .cell_bytes = SHM_LINE + payload,
                             .node_bytes = total, .budget = budget};
}

uint64_t shm_layout_budget(uint64_t node_param, const char *shm_dir) {
  struct statvfs st;
  if (statvfs(shm_dir, &st) != 0 || st.f_blocks == 0)
    return node_param;
  uint64_t half = (uint64_t)st.f_blocks * (uint64_t)st.f_frsize / 2;
  return half < node_param ? half : node_param;
}
