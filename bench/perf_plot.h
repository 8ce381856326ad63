/*
 * perf_plot.h — `loom-perf --plot FILE.png`: busbw against size (log axes)
 * for Loom out of place and in place, the MPI peer and the ceilings when
 * measured, and Loom over MPI in a panel below, drawn by gnuplot run as a
 * child process on a generated script and data file in a temporary
 * directory.
 */
#ifndef PERF_PLOT_H
#define PERF_PLOT_H

#include "perf_results.h"

/* Whether gnuplot can be run (found on PATH); 0 with a message on stderr
 * naming the package to install. */
int perf_plot_available(void);

/* Draws r into png; 0, or -1 with a message on stderr. */
int perf_plot(const perf_results_t *r, const char *png);

#endif /* PERF_PLOT_H */
