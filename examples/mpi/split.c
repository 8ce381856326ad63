/*
 * split.c — one Loom communicator per MPI sub-communicator.
 *
 * MPI_COMM_WORLD is split into even and odd ranks; each half gets its own
 * Loom communicator (loomCommInitFromMPI on the sub-communicator) and sums
 * a buffer over its members only.  The same halves are then made from a
 * world Loom communicator with loomCommSplit, which must give every rank
 * the same rank, size and sums.
 *
 *   mpicc split.c $(pkg-config --cflags --libs loom) -o split
 *   mpirun -np 4 ./split
 *
 * Each rank prints one line, "split: world rank W of N: color C, rank R of
 * M: OK ..." when everything agreed; otherwise the difference is named on
 * stderr and the exit status is 1.  A failing Loom call aborts the job.
 */
#include <loom_mpi.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LOOM_OR_ABORT(call)                                                    \
  do {                                                                         \
    loomResult_t r_ = (call);                                                  \
    if (r_ != loomSuccess) {                                                   \
      fprintf(stderr, "%s failed: %s: %s\n", #call, loomGetErrorString(r_),   \
              loomGetLastError(NULL));                                         \
      MPI_Abort(MPI_COMM_WORLD, 1);                                            \
    }                                                                          \
  } while (0)

#define COUNT 100000

static int world_rank;

/* The sum of (w + 1) over the world ranks w of `color` (w % 2 == color). */
static int color_sum(int world_size, int color) {
  int sum = 0;
  for (int w = color; w < world_size; w += 2)
    sum += w + 1;
  return sum;
}

/* Sums rank-dependent floats over `comm`; returns the number of elements
 * that differ from the exact sum. */
static int sum_and_check(const char *what, loomComm_t comm, int sum_of_ranks) {
  float *buf = malloc(COUNT * sizeof *buf);
  if (buf == NULL) {
    fprintf(stderr, "split: rank %d: out of memory\n", world_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < COUNT; i++)
    buf[i] = (float)((world_rank + 1) * (i % 13 + 1));
  LOOM_OR_ABORT(loomAllReduce(buf, buf, COUNT, loomFloat32, loomSum, comm, NULL));
  int wrong = 0;
  for (int i = 0; i < COUNT; i++) {
    float want = (float)(sum_of_ranks * (i % 13 + 1));
    if (buf[i] != want && wrong++ == 0)
      fprintf(stderr, "split: world rank %d: %s: element %d is %g, expected %g\n", world_rank,
              what, i, buf[i], want);
  }
  free(buf);
  return wrong;
}

/* 0 when comm has `rank` and `size`, else 1 with a message. */
static int check_shape(const char *what, loomComm_t comm, int rank, int size) {
  int got_rank, got_size;
  LOOM_OR_ABORT(loomCommUserRank(comm, &got_rank));
  LOOM_OR_ABORT(loomCommCount(comm, &got_size));
  if (got_rank == rank && got_size == size)
    return 0;
  fprintf(stderr, "split: world rank %d: %s is rank %d of %d, expected %d of %d\n", world_rank,
          what, got_rank, got_size, rank, size);
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int color = world_rank % 2, wrong = 0;

  /* Half of the world in MPI, and its Loom twin. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &half);
  int half_rank, half_size;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  loomComm_t from_mpi = NULL;
  LOOM_OR_ABORT(loomCommInitFromMPI(half, &from_mpi));
  wrong += check_shape("the communicator from MPI", from_mpi, half_rank, half_size);
  int sum = color_sum(world_size, color);
  wrong += sum_and_check("all-reduce on the communicator from MPI", from_mpi, sum);

  /* MPI agrees on the sum of the members' world ranks. */
  int one = world_rank + 1, mpi_sum = 0;
  MPI_Allreduce(&one, &mpi_sum, 1, MPI_INT, MPI_SUM, half);
  if (mpi_sum != sum) {
    fprintf(stderr, "split: world rank %d: MPI_Allreduce on the half gives %d, expected %d\n",
            world_rank, mpi_sum, sum);
    wrong++;
  }

  /* The same halves through Loom alone. */
  loomComm_t world = NULL, from_split = NULL;
  LOOM_OR_ABORT(loomCommInitFromMPI(MPI_COMM_WORLD, &world));
  LOOM_OR_ABORT(loomCommSplit(world, color, world_rank, &from_split, NULL));
  wrong += check_shape("the communicator from loomCommSplit", from_split, half_rank, half_size);
  wrong += sum_and_check("all-reduce on the communicator from loomCommSplit", from_split, sum);

  if (wrong == 0)
    printf("split: world rank %d of %d: color %d, rank %d of %d: OK (sum %d from "
           "MPI_Comm_split and loomCommSplit)\n",
           world_rank, world_size, color, half_rank, half_size, sum);
  else
    printf("split: world rank %d of %d: FAILED (%d wrong)\n", world_rank, world_size, wrong);

  LOOM_OR_ABORT(loomCommFinalize(from_split));
  LOOM_OR_ABORT(loomCommDestroy(from_split));
  LOOM_OR_ABORT(loomCommFinalize(world));
  LOOM_OR_ABORT(loomCommDestroy(world));
  LOOM_OR_ABORT(loomCommFinalize(from_mpi));
  LOOM_OR_ABORT(loomCommDestroy(from_mpi));
  MPI_Comm_free(&half);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
