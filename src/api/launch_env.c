/*
 * launch_env.c — loomGetLaunchInfo: where a launcher put this process.
 *
 * Launchers are tried in a fixed order: loomrun, Open MPI's mpirun, Slurm,
 * torchrun.  A launcher is chosen when its rank or its size variable is set;
 * then both must be set and valid, or the call fails (a half-set launcher is
 * an error, not a reason to fall through to the next one).
 */
#include "loom.h"
#include "core/config.h"
#include "core/error.h"

#include <limits.h>
#include <stdlib.h>

struct launcher {
  const char *name;
  const char *rank_var, *size_var, *local_var;
};

/* LOOM_* variables are read through the config table; the others directly. */
static const struct launcher foreign[] = {
    {.name = "mpirun",
     .rank_var = "OMPI_COMM_WORLD_RANK",
     .size_var = "OMPI_COMM_WORLD_SIZE",
     .local_var = "OMPI_COMM_WORLD_LOCAL_RANK"},
    {.name = "slurm", .rank_var = "SLURM_PROCID", .size_var = "SLURM_NTASKS",
     .local_var = "SLURM_LOCALID"},
    {.name = "torchrun", .rank_var = "RANK", .size_var = "WORLD_SIZE",
     .local_var = "LOCAL_RANK"},
};

#define LOOKED_FOR                                                             \
  "LOOM_RANK/LOOM_NRANKS/LOOM_LOCAL_RANK (loomrun), "                          \
  "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_LOCAL_RANK "      \
  "(mpirun), SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (slurm), "                \
  "RANK/WORLD_SIZE/LOCAL_RANK (torchrun)"

/* Checks rank/local rank against the size; fills `info` on success. */
static loomResult_t finish(loomLaunchInfo_t *info, const char *launcher,
                           const char *rank_var, int rank,
                           const char *size_var, int nranks,
                           const char *local_var, int local) {
  if (rank >= nranks)
    return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                      "loomGetLaunchInfo (%s): %s=%d is out of range for "
                      "%s=%d (expected 0..%d)",
                      launcher, rank_var, rank, size_var, nranks, nranks - 1);
  if (local >= nranks)
    return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                      "loomGetLaunchInfo (%s): %s=%d is out of range for "
                      "%s=%d (expected 0..%d)",
                      launcher, local_var, local, size_var, nranks, nranks - 1);
  info->rank = rank;
  info->nranks = nranks;
  info->localRank = local;
  info->launcher = launcher;
  return loomSuccess;
}

/* loomrun's variables, through the config table (which has already
 * rejected, with a warning, values that are not integers in range). */
static loomResult_t from_loomrun(loomLaunchInfo_t *info) {
  static const struct {
    loom_param_id id;
    const char *name, *expected;
  } vars[3] = {
      {.id = LOOM_PARAM_RANK, .name = "LOOM_RANK", .expected = "an integer >= 0"},
      {.id = LOOM_PARAM_NRANKS, .name = "LOOM_NRANKS", .expected = "an integer >= 1"},
      {.id = LOOM_PARAM_LOCAL_RANK, .name = "LOOM_LOCAL_RANK", .expected = "an integer >= 0"}};
  int value[3] = {0, 0, -1};
  for (int i = 0; i < 3; i++) {
    if (!loom_param_is_set(vars[i].id)) {
      if (i == 2)
        break;
      return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                        "loomGetLaunchInfo (loomrun): %s is set but %s is not",
                        vars[1 - i].name, vars[i].name);
    }
    /* An invalid value falls back to the default, which is unset. */
    if (loom_param_str(vars[i].id) == NULL)
      return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                        "loomGetLaunchInfo (loomrun): %s is not valid "
                        "(expected %s; see the LOOM_DEBUG warning for the "
                        "value)",
                        vars[i].name, vars[i].expected);
    value[i] = (int)loom_param_int(vars[i].id);
  }
  return finish(info, "loomrun", "LOOM_RANK", value[0], "LOOM_NRANKS",
                value[1], "LOOM_LOCAL_RANK", value[2]);
}

/* Reads `var` as an integer in [min, INT_MAX] into *out. */
static loomResult_t read_int(const struct launcher *l, const char *var,
                             int64_t min, int *out) {
  const char *text = getenv(var);
  int64_t v;
  if (loom_parse_int(text, &v) != 0 || v < min || v > INT_MAX)
    return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                      "loomGetLaunchInfo (%s): %s=\"%s\" is not valid "
                      "(expected an integer >= %lld)",
                      l->name, var, text, (long long)min);
  *out = (int)v;
  return loomSuccess;
}

static loomResult_t from_foreign(const struct launcher *l,
                                 loomLaunchInfo_t *info) {
  const char *rank_text = getenv(l->rank_var);
  const char *size_text = getenv(l->size_var);
  if (rank_text == NULL || size_text == NULL)
    return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                      "loomGetLaunchInfo (%s): %s is set but %s is not",
                      l->name, rank_text ? l->rank_var : l->size_var,
                      rank_text ? l->size_var : l->rank_var);
  int rank, nranks, local = -1;
  LOOM_CHECK(read_int(l, l->rank_var, 0, &rank));
  LOOM_CHECK(read_int(l, l->size_var, 1, &nranks));
  if (getenv(l->local_var) != NULL)
    LOOM_CHECK(read_int(l, l->local_var, 0, &local));
  return finish(info, l->name, l->rank_var, rank, l->size_var, nranks,
                l->local_var, local);
}

loomResult_t loomGetLaunchInfo(loomLaunchInfo_t *info) {
  if (info == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_ENV,
                      "loomGetLaunchInfo: info is NULL");
  if (loom_param_is_set(LOOM_PARAM_RANK) || loom_param_is_set(LOOM_PARAM_NRANKS))
    return from_loomrun(info);
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
    if (getenv(foreign[i].rank_var) != NULL ||
        getenv(foreign[i].size_var) != NULL)
      return from_foreign(&foreign[i], info);
  return loom_error(loomInvalidUsage, LOOM_LOG_ENV,
                    "loomGetLaunchInfo: no launcher environment found; looked "
                    "for " LOOKED_FOR);
}
