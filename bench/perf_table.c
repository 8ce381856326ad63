/*
 * perf_table.c — loom-perf's human table (see perf_table.h).  One round:
 * per form "time algbw busbw #wrong", as nccl-tests prints it.  With
 * --rounds N > 1 the figures are the rounds' medians and busbw's min-max
 * comes before #wrong; the peer's loom/mpi is the ratio of the medians.
 * --percentiles adds p50 and p99 (us per call) at the end of each form.
 */
#include "perf_table.h"
#include "perf_time.h"

#include <stdio.h>

void perf_fmt_wrong(char *out, size_t len, int64_t wrong) {
  if (wrong >= 0)
    snprintf(out, len, "%lld", (long long)wrong);
  else
    snprintf(out, len, "N/A");
}

/* busbw's min-max over the rounds ("1.23-15.40"), N/A when there is none. */
static void fmt_range(char *out, size_t len, const perf_meas_t *m) {
  if (m->busbw_min_gbs >= 0)
    snprintf(out, len, "%.2f-%.2f", m->busbw_min_gbs, m->busbw_max_gbs);
  else
    snprintf(out, len, "N/A");
}

/* The column heads of one Loom form, or of the peer (MPI) when peer. */
static void form_heads(const opts_t *o, int units, int peer) {
  printf("  %7s  %6s", units ? "(us)" : "time", units ? "(GB/s)" : peer ? "busbw" : "algbw");
  if (!peer)
    printf("  %6s", units ? "(GB/s)" : "busbw");
  if (o->rounds > 1)
    printf("  %13s", units ? "(GB/s)" : "busbw min-max");
  printf("  %6s", units ? "" : "#wrong");
  if (peer)
    printf("  %8s", units ? "(busbw)" : "loom/mpi");
  if (o->percentiles)
    printf("  %7s  %7s", units ? "(us)" : "p50", units ? "(us)" : "p99");
}

/* --percentiles' cells of one form (N/A: none). */
static void print_percentiles(const opts_t *o, const perf_meas_t *m) {
  if (!o->percentiles)
    return;
  char p50[32] = "N/A", p99[32] = "N/A";
  if (m != NULL && m->p50_us >= 0) {
    perf_time_str(p50, sizeof p50, m->p50_us);
    perf_time_str(p99, sizeof p99, m->p99_us);
  }
  printf("  %7s  %7s", p50, p99);
}

static void print_heads(const opts_t *o) {
  int pct_w = o->percentiles ? 18 : 0;
  int loom_w = (o->rounds > 1 ? 48 : 33) + pct_w, peer_w = (o->rounds > 1 ? 50 : 35) + pct_w;
  int more = o->peer_mpi || o->ceiling;
  printf("#%54s%-*s", "", loom_w, "out-of-place");
  printf("%-*s", more ? loom_w : 0, "in-place");
  if (o->peer_mpi)
    printf("%-*s", o->ceiling ? peer_w : 0, "MPI (--peer), out-of-place");
  if (o->ceiling)
    printf("%s", "ceilings");
  for (int units = 0; units < 2; units++) {
    printf("\n#%11s  %12s  %8s  %6s", units ? "(B)" : "size", units ? "(elements)" : "count",
           units ? "" : "type", units ? "" : "redop");
    form_heads(o, units, 0);
    form_heads(o, units, 0);
    if (o->peer_mpi)
      form_heads(o, units, 1);
    if (o->ceiling)
      printf("  %7s  %7s", units ? "(GB/s)" : "memory", units ? "(GB/s)" : "tcp");
  }
  printf("\n");
}

void perf_table_heads(const opts_t *o) {
  if (o->peer_mpi)
    printf("# MPI (--peer mpi): the matching MPI collective on the same buffers, out of\n"
           "# place, checked; loom/mpi = Loom's out-of-place busbw / MPI's (> 1: Loom\n"
           "# faster)\n");
  if (o->ceiling)
    printf("# ceilings (--ceiling): memory = busbw of the ideal collective in memory\n"
           "# (rank 0's threads); tcp = one TCP stream rank 0 -> rank 1, bytes/s\n");
  if (o->rounds > 1)
    printf("# rounds (--rounds %d): each round sweeps every size with Loom%s; every\n"
           "# figure is the median over the rounds, busbw min-max the range the rounds\n"
           "# gave; #wrong counts all rounds%s\n",
           o->rounds, o->peer_mpi ? ", then with MPI" : "",
           o->peer_mpi ? "; loom/mpi is the ratio of the medians" : "");
  print_heads(o);
}

void perf_table_result(totals_t *tot, const perf_meas_t *m, int with_wrong) {
  char tstr[32], wstr[32];
  perf_time_str(tstr, sizeof tstr, m->time_us);
  perf_fmt_wrong(wstr, sizeof wstr, m->wrong);
  if (m->busbw_gbs >= 0) {
    tot->bw_sum += m->busbw_gbs;
    tot->bw_count++;
    printf("  %7s  %6.2f  %6.2f", tstr, m->algbw_gbs, m->busbw_gbs);
  } else {
    printf("  %7s  %6s  %6s", tstr, "N/A", "N/A");
  }
  if (with_wrong)
    printf("  %6s", wstr);
}

/* One Loom form's cells; m NULL: N/A (no in-place form). */
static void print_form(const opts_t *o, totals_t *tot, const perf_meas_t *m) {
  char range[64] = "N/A", wstr[32] = "N/A";
  if (m == NULL)
    printf("  %7s  %6s  %6s", "N/A", "N/A", "N/A");
  else
    perf_table_result(tot, m, 0);
  if (m != NULL) {
    fmt_range(range, sizeof range, m);
    perf_fmt_wrong(wstr, sizeof wstr, m->wrong);
  }
  if (o->rounds > 1)
    printf("  %13s", range);
  printf("  %6s", wstr);
  print_percentiles(o, m);
}

/* --peer and --ceiling cells of a row. */
static void print_extra(const opts_t *o, const perf_row_t *row) {
  if (o->peer_mpi) {
    char tstr[32], wstr[32], bw[16] = "N/A", ratio[16] = "N/A", range[64];
    perf_time_str(tstr, sizeof tstr, row->peer.time_us);
    perf_fmt_wrong(wstr, sizeof wstr, row->peer.wrong);
    if (row->peer.busbw_gbs >= 0)
      snprintf(bw, sizeof bw, "%6.2f", row->peer.busbw_gbs);
    if (row->oop.time_us > 0)
      snprintf(ratio, sizeof ratio, "%8.2f", row->peer.time_us / row->oop.time_us);
    printf("  %7s  %6s", tstr, bw);
    if (o->rounds > 1) {
      fmt_range(range, sizeof range, &row->peer);
      printf("  %13s", range);
    }
    printf("  %6s  %8s", wstr, ratio);
    print_percentiles(o, &row->peer);
  }
  if (o->ceiling) {
    char mem[16] = "N/A", tcp[16] = "N/A";
    if (row->mem_gbs >= 0)
      snprintf(mem, sizeof mem, "%7.2f", row->mem_gbs);
    if (row->tcp_gbs >= 0)
      snprintf(tcp, sizeof tcp, "%7.2f", row->tcp_gbs);
    printf("  %7s  %7s", mem, tcp);
  }
}

void perf_table_row(const opts_t *o, totals_t *tot, const perf_row_t *row, const char *type,
                    const char *redop) {
  printf("%12zu  %12zu  %8s  %6s", row->bytes, row->count, type, redop);
  print_form(o, tot, &row->oop);
  print_form(o, tot, row->has_ip ? &row->ip : NULL);
  print_extra(o, row);
  printf("\n");
  fflush(stdout);
}
