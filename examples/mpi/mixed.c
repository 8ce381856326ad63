/*
 * mixed.c — MPI and Loom calls on the same data in one program.
 *
 *   1. loomAllGather of every rank's block, then MPI_Allreduce over the
 *      gathered buffer (and MPI_Allgather of the same blocks must match);
 *   2. MPI_Barrier, then loomBroadcast from the last rank, queued on a Loom
 *      stream; MPI reads the data only after loomStreamSynchronize;
 *   3. MPI_Bcast of a seed from rank 0, then a Loom all-reduce of values
 *      made from it, queued on the stream; while it runs, MPI_Allreduce
 *      sums a copy of the same values on the main thread; both must give
 *      the exact sum.
 *
 * The rules the program follows (docs/mpi.md): a buffer handed to a queued
 * Loom call belongs to Loom until the stream is synchronised; every rank
 * makes its blocking MPI and Loom calls in the same order; only the main
 * thread calls MPI (Loom's threads never do), hence MPI_THREAD_FUNNELED.
 *
 *   mpicc mixed.c $(pkg-config --cflags --libs loom) -o mixed
 *   mpirun -np 4 ./mixed
 *
 * Each rank prints one line, "mixed: rank R of N: OK ..." when all three
 * steps were exact; otherwise the first wrong element is named on stderr
 * and the exit status is 1.  A failing Loom call aborts the job.
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

#define BLOCK 20000 /* doubles per rank */

static int rank, nranks;

static double *alloc_doubles(size_t count) {
  double *p = malloc(count * sizeof *p);
  if (p == NULL) {
    fprintf(stderr, "mixed: rank %d: out of memory for %zu doubles\n", rank, count);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* Returns the number of elements of `got` not equal to want(i), naming the
 * first. */
static int compare(const char *step, const double *got, size_t count, double (*want)(size_t)) {
  int wrong = 0;
  for (size_t i = 0; i < count; i++)
    if (got[i] != want(i) && wrong++ == 0)
      fprintf(stderr, "mixed: rank %d: %s: element %zu is %.17g, expected %.17g\n", rank, step,
              i, got[i], want(i));
  return wrong;
}

/* Step 1: element j of the gathered buffer is j (rank r sent r*BLOCK + i). */
static double gathered_value(size_t j) { return (double)j; }
static double summed_gather(size_t j) { return (double)nranks * (double)j; }

static int gather_then_mpi_sum(loomComm_t comm) {
  size_t total = (size_t)nranks * BLOCK;
  double *mine = alloc_doubles(BLOCK), *by_loom = alloc_doubles(total);
  double *by_mpi = alloc_doubles(total), *sum = alloc_doubles(total);
  for (size_t i = 0; i < BLOCK; i++)
    mine[i] = (double)((size_t)rank * BLOCK + i);
  LOOM_OR_ABORT(loomAllGather(mine, by_loom, BLOCK, loomFloat64, comm, NULL));
  MPI_Allgather(mine, BLOCK, MPI_DOUBLE, by_mpi, BLOCK, MPI_DOUBLE, MPI_COMM_WORLD);
  MPI_Allreduce(by_loom, sum, (int)total, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int wrong = compare("loomAllGather", by_loom, total, gathered_value);
  if (memcmp(by_loom, by_mpi, total * sizeof *by_loom) != 0) {
    fprintf(stderr, "mixed: rank %d: loomAllGather and MPI_Allgather differ\n", rank);
    wrong++;
  }
  wrong += compare("MPI_Allreduce of the gathered data", sum, total, summed_gather);
  free(mine);
  free(by_loom);
  free(by_mpi);
  free(sum);
  return wrong;
}

/* Step 2: the last rank's buffer holds 1000000 + 3i. */
static double broadcast_value(size_t i) { return 1000000.0 + 3.0 * (double)i; }

static int broadcast_on_stream(loomComm_t comm, loomStream_t stream) {
  double *buf = alloc_doubles(BLOCK), *low = alloc_doubles(BLOCK), *high = alloc_doubles(BLOCK);
  int root = nranks - 1;
  for (size_t i = 0; i < BLOCK; i++)
    buf[i] = rank == root ? broadcast_value(i) : -1.0;
  MPI_Barrier(MPI_COMM_WORLD);
  LOOM_OR_ABORT(loomBroadcast(buf, buf, BLOCK, loomFloat64, root, comm, stream));
  /* buf is Loom's until the stream is synchronised: no MPI call on it. */
  LOOM_OR_ABORT(loomStreamSynchronize(stream));
  int wrong = compare("loomBroadcast", buf, BLOCK, broadcast_value);
  /* Every rank holds the same data: its minimum and maximum over ranks. */
  MPI_Allreduce(buf, low, BLOCK, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(buf, high, BLOCK, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  wrong += compare("MPI_MIN after loomBroadcast", low, BLOCK, broadcast_value);
  wrong += compare("MPI_MAX after loomBroadcast", high, BLOCK, broadcast_value);
  free(buf);
  free(low);
  free(high);
  return wrong;
}

/* Step 3: rank r contributes seed * (r + 1) + i. */
static int seed;
static double seeded_sum(size_t i) {
  return (double)seed * nranks * (nranks + 1) / 2 + (double)nranks * (double)i;
}

static int seeded_allreduce(loomComm_t comm, loomStream_t stream) {
  double *for_loom = alloc_doubles(BLOCK), *by_loom = alloc_doubles(BLOCK);
  double *for_mpi = alloc_doubles(BLOCK), *by_mpi = alloc_doubles(BLOCK);
  seed = rank == 0 ? 12345 : 0;
  MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (size_t i = 0; i < BLOCK; i++)
    for_loom[i] = for_mpi[i] = (double)seed * (rank + 1) + (double)i;
  LOOM_OR_ABORT(loomAllReduce(for_loom, by_loom, BLOCK, loomFloat64, loomSum, comm, stream));
  /* The Loom call progresses on the stream's thread meanwhile; MPI works
   * on its own copy, since for_loom is Loom's until the synchronisation. */
  MPI_Allreduce(for_mpi, by_mpi, BLOCK, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  LOOM_OR_ABORT(loomStreamSynchronize(stream));
  int wrong = compare("loomAllReduce of seeded data", by_loom, BLOCK, seeded_sum);
  wrong += compare("MPI_Allreduce of seeded data", by_mpi, BLOCK, seeded_sum);
  free(for_loom);
  free(by_loom);
  free(for_mpi);
  free(by_mpi);
  return wrong;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (provided < MPI_THREAD_FUNNELED) {
    fprintf(stderr, "mixed: rank %d: MPI gives thread level %d, below MPI_THREAD_FUNNELED\n",
            rank, provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  loomComm_t comm = NULL;
  loomStream_t stream = NULL;
  LOOM_OR_ABORT(loomCommInitFromMPI(MPI_COMM_WORLD, &comm));
  LOOM_OR_ABORT(loomStreamCreate(&stream));

  int wrong = gather_then_mpi_sum(comm);
  wrong += broadcast_on_stream(comm, stream);
  wrong += seeded_allreduce(comm, stream);

  if (wrong == 0)
    printf("mixed: rank %d of %d: OK (allgather then MPI_Allreduce, broadcast from rank %d, "
           "stream allreduce beside MPI_Allreduce)\n",
           rank, nranks, nranks - 1);
  else
    printf("mixed: rank %d of %d: FAILED (%d wrong)\n", rank, nranks, wrong);
  LOOM_OR_ABORT(loomStreamDestroy(stream));
  LOOM_OR_ABORT(loomCommFinalize(comm));
  LOOM_OR_ABORT(loomCommDestroy(comm));
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
