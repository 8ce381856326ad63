/*
 * perf_plot.c — loom-perf's plot through gnuplot (see perf_plot.h).
 *
 * The data file has one line per size: bytes, then busbw of Loom out of
 * place, in place, MPI, the memory and the TCP ceilings ("?" where not
 * measured, gnuplot's missing value).  The script picks the pngcairo
 * terminal when gnuplot has it, else png.
 */
#define _POSIX_C_SOURCE 200809L

#include "perf_plot.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The full path of gnuplot on PATH in out; 0 when there is none. */
static int find_gnuplot(char *out, size_t len) {
  const char *path = getenv("PATH");
  if (path == NULL || *path == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path != '\0') {
    size_t n = strcspn(path, ":");
    snprintf(out, len, "%.*s/gnuplot", (int)(n ? n : 1), n ? path : ".");
    if (access(out, X_OK) == 0)
      return 1;
    path += n + (path[n] == ':');
  }
  return 0;
}

int perf_plot_available(void) {
  char exe[4096];
  if (find_gnuplot(exe, sizeof exe))
    return 1;
  fprintf(stderr, "loom-perf: --plot needs gnuplot, which is not on PATH: install it "
          "(Debian: apt-get install gnuplot-nox) or leave out --plot\n");
  return 0;
}

static void put_value(FILE *f, double v) {
  if (v >= 0)
    fprintf(f, " %.6g", v);
  else
    fputs(" ?", f);
}

static int write_data(const perf_results_t *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fputs("# bytes loom_oop loom_ip mpi mem_ceiling tcp_ceiling (busbw GB/s; ? = none)\n", f);
  for (int i = 0; i < r->nrows; i++) {
    const perf_row_t *row = &r->rows[i];
    fprintf(f, "%zu", row->bytes);
    put_value(f, row->oop.busbw_gbs);
    put_value(f, row->has_ip ? row->ip.busbw_gbs : -1);
    put_value(f, row->has_peer ? row->peer.busbw_gbs : -1);
    put_value(f, r->ceiling ? row->mem_gbs : -1);
    put_value(f, r->ceiling ? row->tcp_gbs : -1);
    fputc('\n', f);
  }
  return fclose(f) == 0 ? 0 : -1;
}

/* s as a gnuplot single-quoted string ('' stands for '). */
static void put_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'')
      fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* Whether column `col` (2..6) of the data has any value. */
static int has_column(const perf_results_t *r, int col) {
  for (int i = 0; i < r->nrows; i++) {
    const perf_row_t *row = &r->rows[i];
    double v = col == 2 ? row->oop.busbw_gbs
             : col == 3 ? (row->has_ip ? row->ip.busbw_gbs : -1)
             : col == 4 ? (row->has_peer ? row->peer.busbw_gbs : -1)
             : col == 5 ? (r->ceiling ? row->mem_gbs : -1)
                        : (r->ceiling ? row->tcp_gbs : -1);
    if (v >= 0)
      return 1;
  }
  return 0;
}

static int write_script(const perf_results_t *r, const char *path, const char *data,
                        const char *png) {
  static const char *const titles[] = {"Loom out of place", "Loom in place", "MPI (peer)",
                                       "memory ceiling", "TCP ceiling"};
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fputs("if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
        "  set terminal pngcairo size 1000,640 enhanced\n"
        "} else {\n"
        "  set terminal png size 1000,640\n"
        "}\n", f);
  fputs("set output ", f);
  put_quoted(f, png);
  fprintf(f, "\nset title 'loom-perf %s, %d ranks, %s %s'\n", r->collective, r->nranks,
          r->datatype, r->op);
  fputs("set logscale x 2\nset format x '2^{%L}'\nset xlabel 'size (bytes)'\n"
        "set ylabel 'bus bandwidth (GB/s)'\nset grid\nset key top left\n"
        "set datafile missing '?'\nplot", f);
  int first = 1;
  for (int col = 2; col <= 6; col++) {
    if (!has_column(r, col))
      continue;
    fputs(first ? " " : ", \\\n     ", f);
    put_quoted(f, data);
    fprintf(f, " using 1:%d with linespoints title '%s'", col, titles[col - 2]);
    first = 0;
  }
  if (first) /* nothing to draw: keep the axes */
    fputs(" NaN notitle", f);
  fputc('\n', f);
  return fclose(f) == 0 ? 0 : -1;
}

static int run_gnuplot(const char *script) {
  char exe[4096];
  if (!find_gnuplot(exe, sizeof exe)) {
    perf_plot_available(); /* says why */
    return -1;
  }
  char *argv[] = {exe, (char *)script, NULL};
  pid_t pid;
  int err = posix_spawn(&pid, exe, NULL, NULL, argv, environ);
  if (err != 0) {
    fprintf(stderr, "loom-perf: --plot: cannot run %s: %s\n", exe, strerror(err));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      fprintf(stderr, "loom-perf: --plot: waitpid: %s\n", strerror(errno));
      return -1;
    }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "loom-perf: --plot: gnuplot failed (%s %d); its messages are above\n",
            WIFEXITED(status) ? "exit status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
  }
  return 0;
}

int perf_plot(const perf_results_t *r, const char *png) {
  const char *tmp = getenv("TMPDIR");
  char dir[4096], data[4200], script[4200];
  snprintf(dir, sizeof dir, "%s/loom-perf-plot.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) {
    fprintf(stderr, "loom-perf: --plot: cannot create a directory in %s: %s\n",
            tmp && *tmp ? tmp : "/tmp", strerror(errno));
    return -1;
  }
  snprintf(data, sizeof data, "%s/busbw.dat", dir);
  snprintf(script, sizeof script, "%s/plot.gp", dir);
  int status = -1;
  if (write_data(r, data) != 0 || write_script(r, script, data, png) != 0)
    fprintf(stderr, "loom-perf: --plot: cannot write in %s: %s\n", dir, strerror(errno));
  else
    status = run_gnuplot(script);
  struct stat st;
  if (status == 0 && (stat(png, &st) != 0 || st.st_size == 0)) {
    fprintf(stderr, "loom-perf: --plot: gnuplot did not write %s\n", png);
    status = -1;
  }
  unlink(data);
  unlink(script);
  rmdir(dir);
  return status;
}
