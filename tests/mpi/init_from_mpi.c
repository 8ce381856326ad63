/*
 * init_from_mpi.c — checks loom_mpi.h beyond what the examples use: the
 * arguments it rejects, a process left out of a split (MPI_COMM_NULL), the
 * Config variant (name, timeout, non-blocking init).
 *
 * Run under mpirun with 2 or more ranks.  Each rank prints
 * "init_from_mpi: rank R of N: OK (C checks)" or, per failed check,
 * "init_from_mpi: rank R: FAIL: ..." and exits 1.
 */
#include <loom_mpi.h>

#include <mpi.h>
#include <stdio.h>
#include <time.h>

static int rank, nranks, checks, failures;

static void expect(int ok, const char *what) {
  checks++;
  if (!ok) {
    failures++;
    printf("init_from_mpi: rank %d: FAIL: %s\n", rank, what);
  }
}

/* Sums rank + 1 over comm; expects `want`. */
static void expect_sum(loomComm_t comm, long long want, const char *what) {
  long long mine = rank + 1, sum = -1;
  loomResult_t r = loomAllReduce(&mine, &sum, 1, loomInt64, loomSum, comm, NULL);
  expect(r == loomSuccess && sum == want, what);
}

static void rejected_arguments(void) {
  loomComm_t untouched = (loomComm_t)&untouched;
  expect(loomCommInitFromMPI(MPI_COMM_WORLD, NULL) == loomInvalidArgument,
         "a NULL comm pointer gives loomInvalidArgument");
  expect(loomCommInitFromMPI(MPI_COMM_NULL, &untouched) == loomInvalidArgument,
         "MPI_COMM_NULL gives loomInvalidArgument");
  expect(untouched == (loomComm_t)&untouched, "*comm is not written on failure");

  /* Even and odd ranks joined by an inter-communicator. */
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
  expect(loomCommInitFromMPIConfig(inter, &untouched, NULL) == loomInvalidArgument,
         "an inter-communicator gives loomInvalidArgument");
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

/* Rank 0 is left out (MPI_COMM_NULL); the others make a communicator. */
static void all_but_rank_0(void) {
  MPI_Comm rest;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &rest);
  loomComm_t comm = NULL;
  loomResult_t r = loomCommInitFromMPI(rest, &comm);
  if (rank == 0) {
    expect(rest == MPI_COMM_NULL && r == loomInvalidArgument,
           "the rank left out of the split gets loomInvalidArgument");
    return;
  }
  expect(r == loomSuccess, "ranks 1.. make a communicator without rank 0");
  if (r != loomSuccess)
    return;
  int count = 0, me = -1;
  loomCommCount(comm, &count);
  loomCommUserRank(comm, &me);
  expect(count == nranks - 1 && me == rank - 1, "its size and ranks are MPI's");
  /* sum of rank + 1 over ranks 1..n-1 */
  expect_sum(comm, (long long)nranks * (nranks + 1) / 2 - 1, "its all-reduce is exact");
  loomCommFinalize(comm);
  loomCommDestroy(comm);
  MPI_Comm_free(&rest);
}

/* The Config variant, non-blocking: loomInProgress, then ready. */
static void with_config(void) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.timeout_ms = 60000;
  config.commName = "from-mpi";
  loomComm_t comm = NULL;
  loomResult_t r = loomCommInitFromMPIConfig(MPI_COMM_WORLD, &comm, &config);
  expect((r == loomInProgress || r == loomSuccess) && comm != NULL,
         "a non-blocking config returns loomInProgress (or loomSuccess) with the handle");
  if (comm == NULL)
    return;
  loomResult_t state = loomInProgress;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    if (loomCommGetAsyncError(comm, &state) != loomSuccess)
      break;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (state == loomInProgress && now.tv_sec - start.tv_sec < 30);
  expect(state == loomSuccess, "the non-blocking communicator becomes ready within 30 s");
  if (state == loomSuccess)
    expect_sum(comm, (long long)nranks * (nranks + 1) / 2, "its all-reduce is exact");
  loomCommFinalize(comm);
  loomCommDestroy(comm);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks < 2) {
    fprintf(stderr, "init_from_mpi: needs at least 2 ranks (got %d)\n", nranks);
    MPI_Finalize();
    return 2;
  }
  rejected_arguments();
  all_but_rank_0();
  with_config();
  if (failures == 0)
    printf("init_from_mpi: rank %d of %d: OK (%d checks)\n", rank, nranks, checks);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
