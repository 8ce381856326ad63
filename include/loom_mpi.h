/*
 * loom_mpi.h — create a Loom communicator from an MPI communicator.
 *
 * Header-only: nothing here is compiled into libloom, so the library does
 * not depend on MPI.  Include it from an MPI program and build with the MPI
 * compiler wrapper and Loom's pkg-config flags:
 *
 *   mpicc prog.c $(pkg-config --cflags --libs loom) -o prog
 *
 * Both functions are collective over `mpicomm`: every process of it must
 * call them, in the same order relative to other collectives on `mpicomm`.
 * The Loom communicator has the same size as `mpicomm` and each process
 * keeps its MPI rank.  The unique id is made by rank 0 of `mpicomm` (which
 * starts the bootstrap root in that process) and sent to the others with
 * MPI_Bcast, so do not set LOOM_COMM_ID: with it every communicator would
 * share one rendezvous address.
 *
 * Results: loomInvalidArgument for a NULL `comm`, MPI_COMM_NULL or an
 * inter-communicator (checked before any communication, so a process
 * passing them does not enter the collective); loomSystemError when an MPI
 * call fails (MPI's own error handler runs first: with the default
 * MPI_ERRORS_ARE_FATAL the job is aborted); otherwise whatever
 * loomGetUniqueId or loomCommInitRank(Config) returns.  When rank 0 fails to make the id, every rank returns that
 * failure rather than waiting for a rendezvous that cannot happen.
 * loomGetLastError(NULL) has Loom's message; the MPI failures are described
 * on stderr.  *comm is written only on success (or, with a non-blocking
 * config, on loomInProgress: poll loomCommGetAsyncError as for
 * loomCommInitRankConfig).
 *
 * See docs/mpi.md for the rules on mixing MPI and Loom calls.
 */
#ifndef LOOM_MPI_H
#define LOOM_MPI_H

#include <mpi.h>
#include <stdio.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Internal to this header: reports a failed MPI call on stderr with MPI's
 * text for `mpierr`. */
static inline loomResult_t loomMPIReportError(const char *call, int mpierr) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(mpierr, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "MPI error %d", mpierr);
  fprintf(stderr, "loomCommInitFromMPI: %s failed: %s\n", call, text);
  return loomSystemError;
}

/* Like loomCommInitFromMPI, with a configuration for loomCommInitRankConfig
 * (NULL: the defaults, as loomCommInitRank). */
static inline loomResult_t loomCommInitFromMPIConfig(MPI_Comm mpicomm, loomComm_t *comm,
                                                     loomConfig_t *config) {
  if (comm == NULL) {
    fprintf(stderr, "loomCommInitFromMPI: comm is NULL (expected a loomComm_t "
                    "to write the new communicator to)\n");
    return loomInvalidArgument;
  }
  if (mpicomm == MPI_COMM_NULL) {
    fprintf(stderr, "loomCommInitFromMPI: mpicomm is MPI_COMM_NULL (this "
                    "process is not a member of any communicator to mirror)\n");
    return loomInvalidArgument;
  }
  int rank = 0, nranks = 0, inter = 0, err;
  if ((err = MPI_Comm_test_inter(mpicomm, &inter)) != MPI_SUCCESS)
    return loomMPIReportError("MPI_Comm_test_inter", err);
  if (inter) {
    fprintf(stderr, "loomCommInitFromMPI: mpicomm is an inter-communicator "
                    "(expected an intra-communicator; merge it first with "
                    "MPI_Intercomm_merge)\n");
    return loomInvalidArgument;
  }
  if ((err = MPI_Comm_rank(mpicomm, &rank)) != MPI_SUCCESS)
    return loomMPIReportError("MPI_Comm_rank", err);
  if ((err = MPI_Comm_size(mpicomm, &nranks)) != MPI_SUCCESS)
    return loomMPIReportError("MPI_Comm_size", err);

  /* Rank 0's result travels with the id, so that when it cannot make one
   * the others fail at once instead of timing out in the rendezvous. */
  struct {
    int result;
    loomUniqueId id;
  } root = {loomSuccess, {{0}}};
  if (rank == 0)
    root.result = (int)loomGetUniqueId(&root.id);
  if ((err = MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, mpicomm)) != MPI_SUCCESS)
    return loomMPIReportError("MPI_Bcast of the unique id", err);
  if (root.result != loomSuccess) {
    if (rank != 0)
      fprintf(stderr, "loomCommInitFromMPI: rank 0 of the MPI communicator "
                      "could not create the unique id (%s)\n",
              loomGetErrorString((loomResult_t)root.result));
    return (loomResult_t)root.result;
  }

  loomComm_t made = NULL;
  loomResult_t result =
      config == NULL ? loomCommInitRank(&made, nranks, root.id, rank)
                     : loomCommInitRankConfig(&made, nranks, root.id, rank, config);
  if (result == loomSuccess || result == loomInProgress)
    *comm = made;
  return result;
}

/* Creates a Loom communicator with the members and ranks of `mpicomm`.
 * Collective over mpicomm; see the top of this file. */
static inline loomResult_t loomCommInitFromMPI(MPI_Comm mpicomm, loomComm_t *comm) {
  return loomCommInitFromMPIConfig(mpicomm, comm, NULL);
}

#ifdef __cplusplus
}
#endif

#endif /* LOOM_MPI_H */
