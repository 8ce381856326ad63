/*
 * perf_plot.c — loom-perf's plot through gnuplot (see perf_plot.h).
 *
 * The data file has one line per size: bytes, then busbw of Loom out of
 * place, in place and MPI, each with its min and max over the rounds, the
 * memory and the TCP ceilings, and Loom's over MPI's ("?" where not
 * measured, gnuplot's missing value).  The script draws busbw on log axes
 * (the ceilings can be ten times the measurements), with bars from min to
 * max after --rounds, and with --peer a second panel of the ratio; the
 * subtitle says host, Loom's version and date.  It picks the pngcairo
 * terminal when gnuplot has it, else png.
 */
#define _POSIX_C_SOURCE 200809L

#include "perf_plot.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
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

/* What the plot draws: the series, their data columns and looks.  Colours
 * from Okabe and Ito's palette, told apart with colour-blindness too;
 * measurements solid with points, ceilings dashed without. */
enum { S_OOP, S_IP, S_PEER, S_MEM, S_TCP, NSERIES };
static const struct {
  const char *title, *color, *style;
  int col; /* data column; measurements have min and max in the next two */
} series[NSERIES] = {
    [S_OOP] = {"Loom out of place", "#0072B2", "lw 2 pt 7 ps 0.9", 2},
    [S_IP] = {"Loom in place", "#56B4E9", "lw 2 dt 2 pt 5 ps 0.8", 5},
    [S_PEER] = {"MPI (peer)", "#D55E00", "lw 2 pt 9 ps 1.0", 8},
    [S_MEM] = {"memory ceiling", "#009E73", "lw 1.5 dt 4", 11},
    [S_TCP] = {"TCP ceiling", "#CC79A7", "lw 1.5 dt 3", 12},
};
enum { COL_RATIO = 13 }; /* Loom's out-of-place busbw / MPI's */

/* Series s's busbw in row (which: 0 the median, 1 min, 2 max); negative:
 * none. */
static double value(const perf_results_t *r, const perf_row_t *row, int s, int which) {
  const perf_meas_t *m = s == S_OOP ? &row->oop
                       : s == S_IP && row->has_ip ? &row->ip
                       : s == S_PEER && row->has_peer ? &row->peer
                                                      : NULL;
  if (s == S_MEM || s == S_TCP)
    return r->ceiling ? (s == S_MEM ? row->mem_gbs : row->tcp_gbs) : -1;
  if (m == NULL)
    return -1;
  return which == 0 ? m->busbw_gbs : which == 1 ? m->busbw_min_gbs : m->busbw_max_gbs;
}

static void put_value(FILE *f, double v) {
  if (v > 0)
    fprintf(f, " %.6g", v);
  else
    fputs(" ?", f); /* none, or 0 (a log axis has no place for it) */
}

static int write_data(const perf_results_t *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fputs("# bytes, busbw (GB/s; ? = none) of: loom_oop min max, loom_ip min max, mpi min max,\n"
        "# mem_ceiling, tcp_ceiling; loom_oop/mpi\n", f);
  for (int i = 0; i < r->nrows; i++) {
    const perf_row_t *row = &r->rows[i];
    fprintf(f, "%zu", row->bytes);
    for (int s = 0; s < NSERIES; s++)
      for (int which = 0; which < (s <= S_PEER ? 3 : 1); which++)
        put_value(f, value(r, row, s, which));
    double oop = value(r, row, S_OOP, 0), peer = value(r, row, S_PEER, 0);
    put_value(f, oop > 0 && peer > 0 ? oop / peer : -1);
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

/* Whether series s has any value. */
static int has_series(const perf_results_t *r, int s) {
  for (int i = 0; i < r->nrows; i++)
    if (value(r, &r->rows[i], s, 0) > 0)
      return 1;
  return 0;
}

/* "512", "4K", "16M", "2G": a power of two as the size axis shows it. */
static void size_label(char *out, size_t len, size_t v) {
  static const char units[] = "KMGTP";
  int u = -1;
  while (v >= 1024 && v % 1024 == 0 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u < 0)
    snprintf(out, len, "%zu", v);
  else
    snprintf(out, len, "%zu%c", v, units[u]);
}

/* Tics at powers of two from the smallest size to the largest, labelled
 * 8, 1K, 1M... (unlabelled when not labels); at most about a dozen (every
 * 2nd or 4th power when more). */
static void put_xtics(FILE *f, const perf_results_t *r, int labels) {
  size_t lo = SIZE_MAX, hi = 0;
  for (int i = 0; i < r->nrows; i++) {
    lo = r->rows[i].bytes < lo ? r->rows[i].bytes : lo;
    hi = r->rows[i].bytes > hi ? r->rows[i].bytes : hi;
  }
  int e_lo = 0, e_hi = 0;
  while (e_lo < 62 && ((size_t)1 << (e_lo + 1)) <= lo)
    e_lo++;
  while (e_hi < 62 && ((size_t)1 << e_hi) < hi)
    e_hi++;
  int step = 1;
  while ((e_hi - e_lo) / step > 12)
    step *= 2;
  /* the same range and margins in both panels, so that sizes line up */
  fprintf(f, "set xrange [%g:%g]\nset lmargin 12\nset rmargin 3\n", (double)lo / 1.4,
          (double)hi * 1.4);
  fputs("set xtics (", f);
  for (int e = e_lo - e_lo % step, first = 1; e <= e_hi; e += step, first = 0) {
    char label[32];
    label[0] = '\0';
    if (labels)
      size_label(label, sizeof label, (size_t)1 << e);
    fprintf(f, "%s'%s' %zu", first ? "" : ", ", label, (size_t)1 << e);
  }
  fputs(")\n", f);
}

/* The title and, below it, where and when: host, Loom's version, date,
 * and what a point is when there were rounds. */
static void put_title(FILE *f, const perf_results_t *r) {
  char title[512], date[64] = "?", rounds[64] = "";
  struct utsname u;
  if (uname(&u) != 0)
    snprintf(u.nodename, sizeof u.nodename, "?");
  time_t now = time(NULL);
  struct tm tm;
  if (localtime_r(&now, &tm) != NULL)
    strftime(date, sizeof date, "%Y-%m-%d %H:%M %Z", &tm);
  if (r->rounds > 1)
    snprintf(rounds, sizeof rounds, "; median of %d rounds, bars from min to max", r->rounds);
  snprintf(title, sizeof title, "loom-perf %s, %d ranks, %s %s", r->collective, r->nranks,
           r->datatype, r->op);
  fputs("set title ", f);
  put_quoted(f, title);
  fputs(" font ',13' offset 0,1\nset tmargin 4.5\nset label 1 ", f);
  snprintf(title, sizeof title, "host %s, Loom %s, %s%s", u.nodename, r->version, date, rounds);
  put_quoted(f, title);
  fputs(" at graph 0.5, graph 1.04 center font ',10' tc rgb '#444444'\n", f);
}

/* The main panel: busbw on log axes, so that small sizes and the ceilings
 * far above the measurements do not flatten the comparison. */
static void put_busbw_panel(FILE *f, const perf_results_t *r, const char *data) {
  fputs("set logscale xy\nset format y '%g'\nset ylabel 'bus bandwidth (GB/s, log scale)'\n"
        "set grid xtics ytics mytics lc rgb '#dddddd'\nset key top left box opaque\n", f);
  put_xtics(f, r, !has_series(r, S_PEER)); /* else the ratio's panel below has them */
  fputs("plot", f);
  int first = 1, bars = r->rounds > 1;
  for (int s = 0; s < NSERIES; s++) {
    if (!has_series(r, s))
      continue;
    fputs(first ? " " : ", \\\n     ", f);
    put_quoted(f, data);
    int c = series[s].col, errors = bars && s <= S_PEER;
    if (errors)
      fprintf(f, " using 1:%d:%d:%d with yerrorlines", c, c + 1, c + 2);
    else
      fprintf(f, " using 1:%d with %s", c, s <= S_PEER ? "linespoints" : "lines");
    fprintf(f, " lc rgb '%s' %s title '%s'", series[s].color, series[s].style, series[s].title);
    first = 0;
  }
  if (first) /* nothing to draw: keep the axes */
    fputs(" NaN notitle", f);
  fputc('\n', f);
}

/* Below it with --peer: Loom's out-of-place busbw over MPI's. */
static void put_ratio_panel(FILE *f, const perf_results_t *r, const char *data) {
  fputs("unset title\nunset label 1\nunset logscale y\nset logscale x\n"
        "set ylabel 'Loom / MPI busbw'\nset xlabel 'size (bytes)'\nset key off\n"
        "set yrange [0:*]\nset grid xtics ytics lc rgb '#dddddd'\n", f);
  put_xtics(f, r, 1);
  fputs("plot 1 with lines lc rgb '#888888' dt 2 notitle, ", f);
  put_quoted(f, data);
  fprintf(f, " using 1:%d with linespoints lc rgb '%s' lw 2 pt 7 ps 0.8 notitle\n", COL_RATIO,
          series[S_PEER].color);
}

static int write_script(const perf_results_t *r, const char *path, const char *data,
                        const char *png) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  int ratio = has_series(r, S_PEER);
  fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
             "  set terminal pngcairo size 1000,%d noenhanced font 'sans,11'\n"
             "} else {\n"
             "  set terminal png size 1000,%d noenhanced\n"
             "}\n",
          ratio ? 860 : 640, ratio ? 860 : 640);
  fputs("set output ", f);
  put_quoted(f, png);
  fputs("\nset datafile missing '?'\nset border lc rgb '#444444'\n", f);
  put_title(f, r);
  if (ratio) /* two panels: busbw 70 %, the ratio below */
    fputs("set multiplot\nset size 1,0.7\nset origin 0,0.3\nset bmargin 1\n", f);
  else
    fputs("set xlabel 'size (bytes)'\n", f);
  put_busbw_panel(f, r, data);
  if (ratio) {
    fputs("set size 1,0.3\nset origin 0,0\nset tmargin 0.5\nset bmargin 3\n", f);
    put_ratio_panel(f, r, data);
    fputs("unset multiplot\n", f);
  }
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
