/*
 * allreduce.c — the smallest Loom program: every rank contributes its rank
 * number, all-reduce sums them.  Run with `loomrun -n 4 ./allreduce`.
 * Build against an installed Loom:
 *   cc allreduce.c $(pkg-config --cflags --libs loom) -o allreduce
 */
#include <loom.h>
#include <stdio.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    loomResult_t r_ = (call);                                                  \
    if (r_ != loomSuccess) {                                                   \
      fprintf(stderr, "%s failed: %s: %s\n", #call, loomGetErrorString(r_),   \
              loomGetLastError(NULL));                                         \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  loomLaunchInfo_t li;
  CHECK(loomGetLaunchInfo(&li));
  loomUniqueId id;
  CHECK(loomGetUniqueId(&id)); /* the same id on every rank under loomrun */
  loomComm_t comm;
  CHECK(loomCommInitRank(&comm, li.nranks, id, li.rank));
  double mine[4] = {li.rank, li.rank, li.rank, li.rank}, sum[4];
  CHECK(loomAllReduce(mine, sum, 4, loomFloat64, loomSum, comm, NULL));
  printf("rank %d of %d: sum of ranks = %g (expected %d)\n", li.rank, li.nranks, sum[0],
         li.nranks * (li.nranks - 1) / 2);
  CHECK(loomCommFinalize(comm));
  CHECK(loomCommDestroy(comm));
  return sum[3] == li.nranks * (li.nranks - 1) / 2 ? 0 : 1;
}
