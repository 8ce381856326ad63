/*
 * perf_coll.c — loom-perf's table of collectives (see perf_coll.h).
 */
#include "perf_coll.h"

#include <string.h>

const coll_info_t coll_info[COLL_COUNT] = {
    [COLL_ALLREDUCE] = {"allreduce", 1, 0, 0, 1, 1},
    [COLL_ALLGATHER] = {"allgather", 0, 0, 1, 1, 1},
    [COLL_REDUCESCATTER] = {"reducescatter", 1, 0, 1, 1, 1},
    [COLL_BROADCAST] = {"broadcast", 0, 1, 0, 1, 1},
    [COLL_REDUCE] = {"reduce", 1, 1, 0, 1, 1},
    [COLL_ALLTOALL] = {"alltoall", 0, 0, 1, 0, 0},
    [COLL_GATHER] = {"gather", 0, 1, 1, 1, 1},
    [COLL_SCATTER] = {"scatter", 0, 1, 1, 1, 1},
    /* in place (sendbuff == recvbuff) is timed but, as in nccl-tests, not
     * checked: NCCL does not define sending and receiving one buffer */
    [COLL_SENDRECV] = {"sendrecv", 0, 0, 0, 1, 0},
    [COLL_BARRIER] = {"barrier", 0, 0, 0, 0, 0},
};

int coll_by_name(const char *name, coll_t *out) {
  for (int k = 0; k < COLL_COUNT; k++)
    if (strcmp(coll_info[k].name, name) == 0) {
      *out = (coll_t)k;
      return 1;
    }
  return 0;
}

double bus_factor(coll_t c, int n) {
  switch (c) {
  case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
  case COLL_ALLGATHER: case COLL_REDUCESCATTER: case COLL_ALLTOALL:
  case COLL_GATHER: case COLL_SCATTER:
    return (double)(n - 1) / n;
  default: return 1.0; /* broadcast, reduce, sendrecv, barrier */
  }
}
