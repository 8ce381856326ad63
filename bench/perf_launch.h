/*
 * perf_launch.h — how loom-perf finds its rank and its peers under each
 * launcher: loomrun, Open MPI's mpirun, PMI (MPICH/Hydra), Slurm's srun or
 * torchrun.  Built with MPI (LOOM_PERF_MPI) and started by mpirun (or with
 * --peer mpi), it initialises MPI and rank 0 sends the Loom unique id to
 * the others with MPI_Bcast; otherwise every rank derives the id from
 * LOOM_COMM_ID or from MASTER_ADDR/MASTER_PORT.
 */
#ifndef PERF_LAUNCH_H
#define PERF_LAUNCH_H

#include "loom.h"

typedef struct {
  int rank, nranks;
  int local_rank;       /* -1 when the launcher does not say */
  const char *launcher; /* "loomrun", "mpirun", "pmi", "slurm", "torchrun" */
  int mpi;              /* MPI_Init was called */
  char rendezvous[200]; /* how the unique id reached every rank, for the header */
} perf_launch_t;

/* Fills *l from the environment and initialises MPI when that applies
 * (want_mpi: --peer mpi was given).  Exits with a message (status 1) when
 * no launcher is found, MPI is wanted but cannot be had, or MPI's ranks
 * differ from the launcher's. */
void perf_launch_start(int *argc, char ***argv, int want_mpi, perf_launch_t *l);

/* The job's Loom unique id in *id, the same on every rank.  Collective
 * under MPI.  Exits with a message when there is no rendezvous address;
 * returns loomGetUniqueId's error otherwise. */
loomResult_t perf_launch_unique_id(perf_launch_t *l, loomUniqueId *id);

/* Ends MPI (MPI_Finalize) when perf_launch_start started it. */
void perf_launch_end(perf_launch_t *l);

/* Stops every rank after a fatal error: MPI_Abort under MPI, else exit. */
void perf_launch_abort(const perf_launch_t *l, int status) __attribute__((noreturn));

#endif /* PERF_LAUNCH_H */
