/*
 * loomrun_bind.h — `loomrun --bind-to core|numa|none`: which CPUs each rank
 * may run on, as mpirun's --bind-to.  The plan is made once in loomrun
 * (before any rank starts) from the CPUs loomrun itself may use (its
 * affinity: taskset, cgroups) and the kernel's topology in sysfs.
 */
#ifndef LOOMRUN_BIND_H
#define LOOMRUN_BIND_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stddef.h>

/* AUTO, the default: CORE, whether or not the ranks fit on the cores
 * (measured: docs/performance.md, "Small-message latency was bimodal").
 * It was NONE for ranks that outnumber the cores until 4 ranks on 2
 * cores measured better bound. */
enum loomrun_bind { LOOMRUN_BIND_AUTO, LOOMRUN_BIND_NONE, LOOMRUN_BIND_CORE, LOOMRUN_BIND_NUMA };

/* "auto", "core", "numa" or "none"; -1 for anything else. */
int loomrun_bind_parse(const char *text, enum loomrun_bind *out);

/* The CPU set of each of nranks ranks (*sets: nranks entries, freed by
 * the caller; NULL when the ranks are not bound).  core: rank r gets
 * every hardware thread of the r-th core (cores ordered by package, then
 * core id); when ranks outnumber cores (*wrapped set to 1), consecutive
 * ranks share one: rank r gets core r * cores / nranks (4 ranks on 2
 * cores: 0 and 1 on the first, 2 and 3 on the second).  numa: the same
 * over the NUMA nodes that hold usable CPUs.  auto: core.  *how is left
 * as what was done (auto resolved).  Returns 0, or -1 with a message in
 * why. */
int loomrun_bind_plan(enum loomrun_bind *how, int nranks, cpu_set_t **sets, int *wrapped,
                      char *why, size_t why_len);

/* "0-1,4" for the report line. */
void loomrun_bind_format(const cpu_set_t *set, char *out, size_t len);

#endif /* LOOMRUN_BIND_H */
