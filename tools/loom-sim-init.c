/*
 * loom-sim-init.c — `loom-sim --init`: a communicator's predicted start
 * (src/sim/init_model.c) per rank count, phase by phase, and beside what
 * bench/init-scaling.sh measured on this machine (--compare).
 *
 *   loom-sim --init [-L ranks-per-node] [--max RANKS] [--cores C] [--root-bw GBPS]
 *                   [--roots K]
 *                   [--compare FILE]
 *
 * Rank counts double from 2 (one node while they fit in -L, default 8;
 * then nodes of -L ranks) up to --max (default 16384).  --compare reads
 * the table bench/init-scaling.sh prints and models its runs as they ran:
 * one node, every rank on it, --cores cores (default: this machine's).
 */
#include "sim/sim.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f, "usage: loom-sim --init [-L ranks-per-node] [--max RANKS] [--cores C] "
             "[--root-bw GBPS] [--roots K] [--compare FILE]\n"
             "  predicts loomCommInitRank and the first collective's connections phase by "
             "phase\n"
             "  (model and calibration: src/sim/init_model.c, docs/simulator.md)\n");
}

static void print_row(int nnodes, int local, const struct loom_sim_init_result *r) {
  printf("%7d %6d %6d %10.4f %9.4f %11.4f %10.4f %9.3f\n", nnodes * local, nnodes, local,
         r->bootstrap, r->topology, r->transports, r->first_connect, r->total);
}

/* Model against init-scaling.sh's table: rows "N  init X [..]  last rank Y
 * [..]  first Z [..]  fds F". */
static int compare(const struct loom_sim_init_params *base, const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  printf("# measured (bench/init-scaling.sh, %s) against the model on one node of %d cores\n",
         path, base->cores);
  printf("#  ranks  measured: last rank + first call (s)   model (s)   model/measured\n");
  char line[512];
  struct loom_sim_init_params p = *base;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "# bench/init-scaling.sh: tcp", 28) == 0)
      p.no_shm = 1; /* that run had LOOM_SHM_DISABLE=1 */
    int n;
    double init_max, last, first;
    if (sscanf(line, " %d init %lf [%*[^]]] last rank %lf [%*[^]]] first %lf", &n, &init_max,
               &last, &first) != 4)
      continue;
    struct loom_sim_init_result r;
    loom_sim_init_predict(&p, 1, n, &r);
    double measured = (last + first) / 1e3;
    printf("%8d %20.3f %24.3f %12.2f\n", n, measured, r.total, r.total / measured);
  }
  fclose(f);
  return 0;
}

int loom_sim_init_main(int argc, char **argv) {
  struct loom_sim_init_params p;
  loom_sim_init_params_default(&p);
  int local = 8, max = 16384;
  const char *cmp = NULL;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int cores = -1;
  static const struct option longs[] = {{"max", required_argument, 0, 'm'},
                                        {"cores", required_argument, 0, 'c'},
                                        {"compare", required_argument, 0, 'C'},
                                        {"root-bw", required_argument, 0, 'r'},
                                        {"roots", required_argument, 0, 'R'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "L:h", longs, NULL)) != -1) {
    switch (c) {
    case 'L': local = atoi(optarg); break;
    case 'm': max = atoi(optarg); break;
    case 'c': cores = atoi(optarg); break;
    case 'C': cmp = optarg; break;
    case 'r': p.root_bw = atof(optarg) * 1e9; break;
    case 'R': p.roots = atoi(optarg); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (local < 1 || max < 2 || !(p.root_bw > 0) || p.roots < 1 || (cores < 0 && cores != -1) ||
      optind != argc) {
    usage(stderr);
    return 2;
  }
  if (cmp != NULL) {
    p.cores = cores >= 0 ? cores : (int)cpus;
    return compare(&p, cmp);
  }
  p.cores = cores > 0 ? cores : 0;
  printf("# loom-sim --init: predicted start, seconds per phase (the slowest rank); "
         "%d ranks a node, %s, %d bootstrap root(s)\n",
         local, p.cores > 0 ? "cores as given" : "a core per rank", p.roots);
  printf("#  ranks  nodes  local  bootstrap  topology  transports  first-conn     total\n");
  for (int n = 2; n <= max; n *= 2) {
    int l = n < local ? n : local;
    struct loom_sim_init_result r;
    loom_sim_init_predict(&p, n / l, l, &r);
    print_row(n / l, l, &r);
  }
  return 0;
}
