/*
 * allreduce.c — an MPI program that sums float buffers with Loom and checks
 * every element against the exact sum and against MPI_Allreduce.
 *
 *   mpicc allreduce.c $(pkg-config --cflags --libs loom) -o allreduce
 *   mpirun -np 4 ./allreduce
 *
 * Each rank prints one line, "allreduce: rank R of N: OK ..." when every
 * size was right; a wrong element is named on stderr and the exit status
 * is 1.  A failing Loom or MPI call aborts the job.
 */
#include <loom_mpi.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOOM_OR_ABORT(call)                                                    \
  do {                                                                         \
    loomResult_t r_ = (call);                                                  \
    if (r_ != loomSuccess) {                                                   \
      fprintf(stderr, "%s failed: %s: %s\n", #call, loomGetErrorString(r_),   \
              loomGetLastError(NULL));                                         \
      MPI_Abort(MPI_COMM_WORLD, 1);                                            \
    }                                                                          \
  } while (0)

/* Counts in floats; the last one (4 MiB) is split into many slices. */
static const size_t counts[] = {1, 7, 1000, 65537, 1u << 20};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* Integer-valued, so every sum is exact in float whatever the order. */
static float input(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 97 + 1)); }

static float expected(int nranks, size_t i) {
  return (float)(nranks * (nranks + 1) / 2 * (int)(i % 97 + 1));
}

/* Returns the number of wrong elements, naming the first on stderr. */
static size_t check(const char *what, const float *got, size_t count, int rank, int nranks) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    if (got[i] == expected(nranks, i))
      continue;
    if (wrong++ == 0)
      fprintf(stderr, "allreduce: rank %d: %s, count %zu: element %zu is %g, expected %g\n",
              rank, what, count, i, got[i], expected(nranks, i));
  }
  return wrong;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  loomComm_t comm = NULL;
  LOOM_OR_ABORT(loomCommInitFromMPI(MPI_COMM_WORLD, &comm));

  size_t max = counts[NCOUNTS - 1], wrong = 0;
  float *send = malloc(max * sizeof *send);
  float *by_loom = malloc(max * sizeof *by_loom);
  float *by_mpi = malloc(max * sizeof *by_mpi);
  if (send == NULL || by_loom == NULL || by_mpi == NULL) {
    fprintf(stderr, "allreduce: rank %d: out of memory for %zu floats\n", rank, max);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t c = 0; c < NCOUNTS; c++) {
    size_t count = counts[c];
    for (size_t i = 0; i < count; i++)
      send[i] = input(rank, i);
    LOOM_OR_ABORT(loomAllReduce(send, by_loom, count, loomFloat32, loomSum, comm, NULL));
    MPI_Allreduce(send, by_mpi, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    wrong += check("loomAllReduce", by_loom, count, rank, nranks);
    wrong += check("MPI_Allreduce", by_mpi, count, rank, nranks);
    if (memcmp(by_loom, by_mpi, count * sizeof *by_loom) != 0) {
      fprintf(stderr, "allreduce: rank %d: count %zu: Loom and MPI results differ\n", rank,
              count);
      wrong++;
    }
  }

  if (wrong == 0)
    printf("allreduce: rank %d of %d: OK (%zu sizes up to %zu floats, exact and equal to "
           "MPI_Allreduce)\n",
           rank, nranks, NCOUNTS, max);
  else
    printf("allreduce: rank %d of %d: FAILED (%zu wrong)\n", rank, nranks, wrong);
  free(send);
  free(by_loom);
  free(by_mpi);
  LOOM_OR_ABORT(loomCommFinalize(comm));
  LOOM_OR_ABORT(loomCommDestroy(comm));
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
