/*
 * loomrun_bind.c — `loomrun --bind-to` (see loomrun_bind.h).  Topology from
 * sysfs: /sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id}
 * for cores, /sys/devices/system/node/nodeK/cpulist for NUMA nodes.  Where
 * sysfs does not say (some containers), each CPU is its own core and all
 * CPUs one node.
 */
#include "loomrun_bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYS_CPU "/sys/devices/system/cpu/cpu%d/topology/%s"
#define SYS_NODE "/sys/devices/system/node/node%d/cpulist"
#define MAX_NODES 1024

int loomrun_bind_parse(const char *text, enum loomrun_bind *out) {
  static const struct { const char *name; enum loomrun_bind how; } names[] = {
      {"auto", LOOMRUN_BIND_AUTO}, {"none", LOOMRUN_BIND_NONE},
      {"core", LOOMRUN_BIND_CORE}, {"numa", LOOMRUN_BIND_NUMA}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(text, names[i].name) == 0) {
      *out = names[i].how;
      return 0;
    }
  return -1;
}

/* The integer in a sysfs file; -1 when there is none. */
static long read_long(const char *path) {
  FILE *f = fopen(path, "r");
  long v = -1;
  if (f != NULL) {
    if (fscanf(f, "%ld", &v) != 1)
      v = -1;
    fclose(f);
  }
  return v;
}

/* Parses a kernel CPU list ("0-3,8,10-11") into set; -1 when unreadable. */
static int read_cpulist(const char *path, cpu_set_t *set) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  char line[4096];
  int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  CPU_ZERO(set);
  for (char *p = line; ok && *p != '\0' && *p != '\n';) {
    char *end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p)
      return -1;
    if (*end == '-')
      hi = strtol(end + 1, &end, 10);
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
      CPU_SET((int)c, set);
    p = *end == ',' ? end + 1 : end;
  }
  return ok ? 0 : -1;
}

struct cpu_core {
  long package, core; /* -1 each when sysfs does not say */
  int cpu;
};

static int by_core(const void *a, const void *b) {
  const struct cpu_core *x = a, *y = b;
  if (x->package != y->package)
    return x->package < y->package ? -1 : 1;
  if (x->core != y->core)
    return x->core < y->core ? -1 : 1;
  return x->cpu - y->cpu;
}

/* Which of `places` (cores or NUMA nodes) rank r runs on: its own while
 * the ranks fit; else consecutive ranks share one, in blocks that differ
 * by at most one rank.  Neighbours in the rank order (a ring's, the
 * first pairs of halving-doubling) then share a core's caches: 4 ranks
 * on 2 cores moved 128 KiB all-reduce in half the time of round-robin
 * placement (docs/performance.md). */
static int place_of(int r, int nranks, int places) {
  return nranks <= places ? r : (int)((long)r * places / nranks);
}

/* Rank r's set: the usable CPUs of core place_of(r). */
static int plan_cores(const cpu_set_t *allowed, int nranks, cpu_set_t *sets, int *wrapped) {
  struct cpu_core cpus[CPU_SETSIZE];
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, allowed))
      continue;
    char path[128];
    snprintf(path, sizeof path, SYS_CPU, c, "physical_package_id");
    long package = read_long(path);
    snprintf(path, sizeof path, SYS_CPU, c, "core_id");
    long core = read_long(path);
    cpus[n++] = (struct cpu_core){package, core < 0 ? c : core, c};
  }
  qsort(cpus, (size_t)n, sizeof cpus[0], by_core);
  int ncores = 0;
  int *first = malloc(sizeof(int) * (size_t)(n + 1)); /* index in cpus of each core */
  if (first == NULL)
    return -1;
  for (int i = 0; i < n; i++)
    if (i == 0 || cpus[i].package != cpus[i - 1].package || cpus[i].core != cpus[i - 1].core)
      first[ncores++] = i;
  first[ncores] = n;
  *wrapped = nranks > ncores;
  for (int r = 0; r < nranks; r++) {
    int k = place_of(r, nranks, ncores);
    CPU_ZERO(&sets[r]);
    for (int i = first[k]; i < first[k + 1]; i++)
      CPU_SET(cpus[i].cpu, &sets[r]);
  }
  free(first);
  return 0;
}

/* Rank r's set: the usable CPUs of node place_of(r) among the nodes that
 * have some. */
static int plan_numa(const cpu_set_t *allowed, int nranks, cpu_set_t *sets, int *wrapped) {
  cpu_set_t *nodes = malloc(sizeof(cpu_set_t) * MAX_NODES);
  if (nodes == NULL)
    return -1;
  int nnodes = 0;
  for (int k = 0; k < MAX_NODES; k++) {
    char path[128];
    cpu_set_t node;
    snprintf(path, sizeof path, SYS_NODE, k);
    if (read_cpulist(path, &node) != 0)
      continue;
    CPU_AND(&node, &node, allowed);
    if (CPU_COUNT(&node) > 0)
      nodes[nnodes++] = node;
  }
  if (nnodes == 0)
    nodes[nnodes++] = *allowed; /* no NUMA information: one node */
  *wrapped = nranks > nnodes;
  for (int r = 0; r < nranks; r++)
    sets[r] = nodes[place_of(r, nranks, nnodes)];
  free(nodes);
  return 0;
}

int loomrun_bind_plan(enum loomrun_bind *how, int nranks, cpu_set_t **sets, int *wrapped,
                      char *why, size_t why_len) {
  *sets = NULL;
  *wrapped = 0;
  if (*how == LOOMRUN_BIND_NONE)
    return 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0) {
    snprintf(why, why_len, "cannot read the CPUs loomrun may use (sched_getaffinity)");
    return -1;
  }
  cpu_set_t *out = calloc((size_t)nranks, sizeof(cpu_set_t));
  if (out == NULL) {
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  int res = *how == LOOMRUN_BIND_NUMA ? plan_numa(&allowed, nranks, out, wrapped)
                                      : plan_cores(&allowed, nranks, out, wrapped);
  if (res != 0) {
    free(out);
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  if (*how == LOOMRUN_BIND_AUTO)
    *how = LOOMRUN_BIND_CORE;
  *sets = out;
  return 0;
}

void loomrun_bind_format(const cpu_set_t *set, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
    if (!CPU_ISSET(c, set) || (c > 0 && CPU_ISSET(c - 1, set)))
      continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
      end++;
    int w = end > c ? snprintf(out + used, len - used, "%s%d-%d", used ? "," : "", c, end)
                    : snprintf(out + used, len - used, "%s%d", used ? "," : "", c);
    used += w > 0 ? (size_t)w : 0;
  }
}
