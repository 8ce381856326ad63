/*
 * perf_launch.c — loom-perf's launchers and rendezvous (see perf_launch.h).
 *
 * loomGetLaunchInfo reads loomrun's, Open MPI's, Slurm's and torchrun's
 * variables; PMI's (PMI_RANK/PMI_SIZE, set by MPICH's and Intel MPI's
 * Hydra launcher) are read here when none of those is set.
 */
#define _POSIX_C_SOURCE 200809L

#include "loom_failure.h"
#include "perf_launch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LOOM_PERF_MPI
#include <mpi.h>
#endif

static int parse_int(const char *s, int lo, int *out) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (s == NULL || end == s || *end != '\0' || errno != 0 || v < lo || v > INT_MAX)
    return -1;
  *out = (int)v;
  return 0;
}

/* PMI_RANK/PMI_SIZE; 0 when neither is set, exits when they are wrong. */
static int from_pmi(perf_launch_t *l) {
  const char *rank = getenv("PMI_RANK"), *size = getenv("PMI_SIZE");
  if (rank == NULL && size == NULL)
    return 0;
  if (parse_int(rank, 0, &l->rank) || parse_int(size, 1, &l->nranks) || l->rank >= l->nranks) {
    fprintf(stderr, "loom-perf: PMI_RANK=\"%s\" and PMI_SIZE=\"%s\" are not a rank and a "
            "size (0 <= rank < size)\n", rank ? rank : "(unset)", size ? size : "(unset)");
    exit(1);
  }
  l->local_rank = -1;
  l->launcher = "pmi";
  return 1;
}

/* PMI_RANK comes from MPICH's or Intel MPI's Hydra (or srun --mpi=pmi2),
 * whose ranks an Open MPI library may not see as one job: MPI is started
 * there only for --peer mpi, and its world checked against PMI's. */
static int launched_by_mpi(const perf_launch_t *l) {
  return strcmp(l->launcher, "mpirun") == 0 || strcmp(l->launcher, "pmi") == 0;
}

#ifdef LOOM_PERF_MPI
static void start_mpi(int *argc, char ***argv, perf_launch_t *l) {
  MPI_Init(argc, argv);
  l->mpi = 1;
  int rank = -1, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != l->rank || size != l->nranks) {
    fprintf(stderr, "loom-perf: rank %d: MPI_COMM_WORLD says rank %d of %d but %s says %d "
            "of %d: this MPI was not started by that launcher (use mpirun, or srun with "
            "MPI's PMI support)\n", l->rank, rank, size, l->launcher, l->rank, l->nranks);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}
#endif

/* Whether any launcher loomGetLaunchInfo knows has set a variable (it
 * logs a warning when it finds none, which PMI jobs need not see). */
static int known_launcher_env(void) {
  static const char *const vars[] = {"LOOM_RANK", "LOOM_NRANKS", "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                     "RANK", "WORLD_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i]) != NULL)
      return 1;
  return 0;
}

void perf_launch_start(int *argc, char ***argv, int want_mpi, perf_launch_t *l) {
  memset(l, 0, sizeof *l);
  if (known_launcher_env() || !from_pmi(l)) {
    loomLaunchInfo_t li;
    loomResult_t res = loomGetLaunchInfo(&li);
    if (res != loomSuccess) {
      bench_report_loom_failure("loom-perf", -1, "loomGetLaunchInfo", res);
      fprintf(stderr, "  (also looked for PMI_RANK/PMI_SIZE)\n"
              "  Run under a launcher, e.g. 'loomrun -n 4 loom-perf ...' or "
              "'mpirun -np 4 loom-perf ...'.\n");
      exit(1);
    }
    l->rank = li.rank;
    l->nranks = li.nranks;
    l->local_rank = li.localRank;
    l->launcher = li.launcher ? li.launcher : "?";
  }
  int use_mpi = strcmp(l->launcher, "mpirun") == 0 || want_mpi;
  if (want_mpi && !launched_by_mpi(l) && strcmp(l->launcher, "slurm") != 0) {
    /* Every rank says it: the launcher may kill the others as soon as one exits. */
    fprintf(stderr, "loom-perf: --peer mpi needs MPI's own launcher: run 'mpirun -np %d "
            "loom-perf --peer mpi ...' (or srun with MPI support); %s starts ranks "
            "that MPI does not know\n", l->nranks, l->launcher);
    exit(1);
  }
#ifdef LOOM_PERF_MPI
  if (use_mpi)
    start_mpi(argc, argv, l);
#else
  (void)argc;
  (void)argv;
  (void)use_mpi;
#endif
}

/* Sets LOOM_COMM_ID from MASTER_ADDR/MASTER_PORT when only those are set;
 * exits with a message when there is no rendezvous address at all. */
static void setup_comm_id(perf_launch_t *l) {
  const char *id = getenv("LOOM_COMM_ID");
  if (id != NULL && *id != '\0') {
    snprintf(l->rendezvous, sizeof l->rendezvous, "LOOM_COMM_ID=%s", id);
    return;
  }
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr != NULL && *addr != '\0' && port != NULL && *port != '\0') {
    int p;
    if (parse_int(port, 1, &p) || p >= 65535) {
      fprintf(stderr, "loom-perf: rank %d: bad MASTER_PORT '%s' (expected 1..65534: "
              "Loom's root listens on MASTER_PORT+1)\n", l->rank, port);
      exit(1);
    }
    char buf[300];
    int v6 = strchr(addr, ':') != NULL && addr[0] != '[';
    snprintf(buf, sizeof buf, v6 ? "[%s]:%d" : "%s:%d", addr, p + 1);
    if (setenv("LOOM_COMM_ID", buf, 1) != 0) {
      perror("loom-perf: setenv");
      exit(1);
    }
    snprintf(l->rendezvous, sizeof l->rendezvous, "MASTER_ADDR:(MASTER_PORT+1) = %.150s", buf);
    return;
  }
  if (l->nranks == 1) {
    snprintf(l->rendezvous, sizeof l->rendezvous, "none (one rank)");
    return; /* a lone rank can host its own root */
  }
  if (l->rank != 0) { /* rank 0 explains */
    fprintf(stderr, "loom-perf: rank %d: LOOM_COMM_ID is not set\n", l->rank);
    exit(1);
  }
  const char *why = "";
  if (strcmp(l->launcher, "mpirun") == 0)
    why = "\n  (This loom-perf was built without MPI, so under mpirun it cannot send the "
          "id with MPI_Bcast.)";
  else if (strcmp(l->launcher, "pmi") == 0)
    why = "\n  (Under PMI, MPI carries the id only with --peer mpi.)";
  fprintf(stderr,
          "loom-perf: rank %d: no rendezvous address: LOOM_COMM_ID is not set "
          "(launched by %s).\n"
          "  Run under loomrun (e.g. 'loomrun -n %d loom-perf ...'), or set\n"
          "  LOOM_COMM_ID=host:port (the same on every rank; rank 0 listens there),\n"
          "  or MASTER_ADDR and MASTER_PORT as torchrun does.%s\n",
          l->rank, l->launcher, l->nranks, why);
  exit(1);
}

loomResult_t perf_launch_unique_id(perf_launch_t *l, loomUniqueId *id) {
#ifdef LOOM_PERF_MPI
  if (l->mpi) {
    /* Rank 0 makes the id (starting the root unless LOOM_COMM_ID names
     * one) and MPI carries it: no address to agree on beforehand. */
    int failed = 0;
    loomResult_t res = loomSuccess;
    if (l->rank == 0) {
      res = loomGetUniqueId(id);
      failed = res != loomSuccess;
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (failed) {
      if (l->rank == 0)
        return res;
      fprintf(stderr, "loom-perf: rank %d: rank 0 could not create the unique id\n", l->rank);
      perf_launch_abort(l, 1);
    }
    MPI_Bcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD);
    snprintf(l->rendezvous, sizeof l->rendezvous, "MPI_Bcast of rank 0's unique id");
    return loomSuccess;
  }
#endif
  setup_comm_id(l);
  return loomGetUniqueId(id);
}

void perf_launch_end(perf_launch_t *l) {
#ifdef LOOM_PERF_MPI
  if (l->mpi)
    MPI_Finalize();
#endif
  l->mpi = 0;
}

void perf_launch_abort(const perf_launch_t *l, int status) {
#ifdef LOOM_PERF_MPI
  if (l != NULL && l->mpi)
    MPI_Abort(MPI_COMM_WORLD, status);
#endif
  (void)l;
  exit(status);
}
