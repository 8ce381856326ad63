/*
 * perf_output.c — loom-perf's results as JSON and CSV (see perf_results.h).
 *
 * JSON: {"tool":"loom-perf","version":"0.1.0","collective":"allreduce",
 *        "nranks":4,"nodes":1,"datatype":"float","op":"sum","root":0,
 *        "iters":20,"warmup":5,"agg_iters":1,"average":3,"blocking":null,
 *        "launcher":"loomrun","peer":"mpi"|null,
 *        "rows":[{"bytes":B,"count":C,
 *                 "oop":{"time_us":..,"algbw_gbs":..,"busbw_gbs":..,"wrong":0},
 *                 "ip":{...}|null,
 *                 "peer":{"time_us":..,"busbw_gbs":..,"wrong":0,"ratio":..},
 *                 "ceiling":{"mem_busbw_gbs":..,"tcp_gbs":..}}],
 *        "avg_busbw_gbs":..,"ceiling":{"memory":"...","tcp":"..."}}
 * "peer" in a row only with --peer mpi, "ceiling" only with --ceiling;
 * "wrong" is null when not checked, bandwidths null when there is none
 * (barrier); "ratio" is Loom's out-of-place busbw over MPI's (its time
 * over Loom's), above 1 when Loom is faster.
 * --rounds N > 1: "rounds":N at the top; the figures of "oop", "ip" and
 * "peer" are the medians over the rounds ("wrong" the sum), each with
 * "time_us_min", "time_us_max", "busbw_gbs_min", "busbw_gbs_max" and
 * "per_round":{"time_us":[..],"busbw_gbs":[..],"wrong":[..]}; "ratio" is
 * the medians' and the ceilings are medians.
 * --percentiles: "percentiles":1 at the top, and "p50_us" and "p99_us"
 * (per call; with rounds the medians of the rounds') in "oop", "ip" and
 * "peer".
 * CSV: one header line, then one line per row with every column always
 * present (empty when not measured), so files of several runs concatenate.
 * --rounds N > 1 adds 13 columns at the end: rounds, then time_min_us,
 * time_max_us, busbw_min_gbs and busbw_max_gbs of oop_, ip_ and peer_;
 * files of runs with the same rounds setting concatenate.
 * --percentiles adds 6 more: p50_us and p99_us of oop_, ip_ and peer_.
 */
#define _POSIX_C_SOURCE 200809L

#include "perf_results.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int perf_results_add(perf_results_t *r, const perf_row_t *row) {
  if (r->nrows == r->cap) {
    int cap = r->cap ? 2 * r->cap : 32;
    perf_row_t *rows = realloc(r->rows, (size_t)cap * sizeof *rows);
    if (rows == NULL)
      return -1;
    r->rows = rows;
    r->cap = cap;
  }
  r->rows[r->nrows++] = *row;
  return 0;
}

void perf_results_free(perf_results_t *r) {
  free(r->rows);
  free(r->round_rows);
  r->rows = r->round_rows = NULL;
  r->nrows = r->cap = 0;
}

FILE *perf_output_open(const char *path) {
  if (strcmp(path, "-") == 0) {
    /* The results take stdout; the human table follows stderr. */
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      fprintf(stderr, "loom-perf: cannot set stdout aside for the results: %s\n",
              strerror(errno));
      return NULL;
    }
    return f;
  }
  FILE *f = fopen(path, "w");
  if (f == NULL)
    fprintf(stderr, "loom-perf: cannot write '%s': %s\n", path, strerror(errno));
  return f;
}

/* ---- JSON -------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s) {
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* A number, or null when negative (meaning "none") or not finite. */
static void json_number(FILE *f, double v) {
  if (v < 0 || !isfinite(v))
    fputs("null", f);
  else
    fprintf(f, "%.6g", v);
}

/* ,"name":v — a member after the first. */
static void json_field(FILE *f, const char *name, double v) {
  fprintf(f, ",\"%s\":", name);
  json_number(f, v);
}

static void json_wrong(FILE *f, int64_t wrong) {
  if (wrong < 0)
    fputs("null", f);
  else
    fprintf(f, "%" PRId64, wrong);
}

/* The measurement at byte offset off (oop, ip, peer) of a row. */
static const perf_meas_t *meas_of(const perf_row_t *row, size_t off) {
  return (const perf_meas_t *)((const char *)row + off);
}

/* --rounds N > 1: the range of row i's measurement at off, and every
 * round's figures. */
static void json_spread(FILE *f, const perf_results_t *r, int i, size_t off) {
  const perf_meas_t *m = meas_of(&r->rows[i], off);
  json_field(f, "time_us_min", m->time_min_us);
  json_field(f, "time_us_max", m->time_max_us);
  json_field(f, "busbw_gbs_min", m->busbw_min_gbs);
  json_field(f, "busbw_gbs_max", m->busbw_max_gbs);
  static const char *const fields[] = {"time_us", "busbw_gbs", "wrong"};
  for (int k = 0; k < 3; k++) {
    fprintf(f, "%s\"%s\":[", k ? "]," : ",\"per_round\":{", fields[k]);
    for (int round = 0; round < r->rounds; round++) {
      const perf_meas_t *x = meas_of(&r->round_rows[(size_t)round * (size_t)r->nrows + (size_t)i], off);
      if (round > 0)
        fputc(',', f);
      if (k == 2)
        json_wrong(f, x->wrong);
      else
        json_number(f, k == 0 ? x->time_us : x->busbw_gbs);
    }
  }
  fputs("]}", f);
}

static int has_rounds(const perf_results_t *r) {
  return r->rounds > 1 && r->round_rows != NULL;
}

/* --percentiles: ,"p50_us":..,"p99_us":.. */
static void json_percentiles(FILE *f, const perf_results_t *r, const perf_meas_t *m) {
  if (!r->percentiles)
    return;
  json_field(f, "p50_us", m->p50_us);
  json_field(f, "p99_us", m->p99_us);
}

static void json_meas(FILE *f, const perf_results_t *r, int i, size_t off) {
  const perf_meas_t *m = meas_of(&r->rows[i], off);
  fputs("{\"time_us\":", f);
  json_number(f, m->time_us);
  json_field(f, "algbw_gbs", m->algbw_gbs);
  json_field(f, "busbw_gbs", m->busbw_gbs);
  fputs(",\"wrong\":", f);
  json_wrong(f, m->wrong);
  if (has_rounds(r))
    json_spread(f, r, i, off);
  json_percentiles(f, r, m);
  fputc('}', f);
}

static double ratio(const perf_row_t *row) {
  return row->oop.time_us > 0 ? row->peer.time_us / row->oop.time_us : -1;
}

static void json_row(FILE *f, const perf_results_t *r, int i) {
  const perf_row_t *row = &r->rows[i];
  fprintf(f, "{\"bytes\":%zu,\"count\":%zu,\"oop\":", row->bytes, row->count);
  json_meas(f, r, i, offsetof(perf_row_t, oop));
  fputs(",\"ip\":", f);
  if (row->has_ip)
    json_meas(f, r, i, offsetof(perf_row_t, ip));
  else
    fputs("null", f);
  if (row->has_peer) {
    fputs(",\"peer\":{\"time_us\":", f);
    json_number(f, row->peer.time_us);
    json_field(f, "busbw_gbs", row->peer.busbw_gbs);
    fputs(",\"wrong\":", f);
    json_wrong(f, row->peer.wrong);
    if (has_rounds(r))
      json_spread(f, r, i, offsetof(perf_row_t, peer));
    json_percentiles(f, r, &row->peer);
    json_field(f, "ratio", ratio(row));
    fputc('}', f);
  }
  if (r->ceiling) {
    fputs(",\"ceiling\":{\"mem_busbw_gbs\":", f);
    json_number(f, row->mem_gbs);
    json_field(f, "tcp_gbs", row->tcp_gbs);
    fputc('}', f);
  }
  fputc('}', f);
}

static int finish(FILE *f, const char *path) {
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "loom-perf: writing '%s' failed: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

int perf_write_json(const perf_results_t *r, FILE *f, const char *path) {
  fputs("{\"tool\":\"loom-perf\",\"version\":", f);
  json_string(f, r->version);
  fputs(",\"collective\":", f);
  json_string(f, r->collective);
  fprintf(f, ",\"nranks\":%d", r->nranks);
  if (r->nodes > 0)
    fprintf(f, ",\"nodes\":%d", r->nodes);
  fputs(",\"datatype\":", f);
  json_string(f, r->datatype);
  fputs(",\"op\":", f);
  json_string(f, r->op);
  fprintf(f, ",\"root\":%d,\"iters\":%d,\"warmup\":%d,\"agg_iters\":%d,\"average\":%d",
          r->root, r->iters, r->warmup, r->agg_iters, r->average);
  if (r->blocking < 0)
    fputs(",\"blocking\":null", f);
  else
    fprintf(f, ",\"blocking\":%d", r->blocking);
  fputs(",\"launcher\":", f);
  json_string(f, r->launcher);
  fputs(",\"peer\":", f);
  json_string(f, r->peer_mpi ? "mpi" : NULL);
  if (has_rounds(r))
    fprintf(f, ",\"rounds\":%d", r->rounds);
  if (r->percentiles)
    fputs(",\"percentiles\":1", f);
  fputs(",\"rows\":[", f);
  for (int i = 0; i < r->nrows; i++) {
    fputs(i ? ",\n  " : "\n  ", f);
    json_row(f, r, i);
  }
  fputs("],\n \"avg_busbw_gbs\":", f);
  json_number(f, r->avg_busbw_gbs);
  if (r->ceiling) {
    fputs(",\"ceiling\":{\"memory\":", f);
    json_string(f, r->mem_what);
    fputs(",\"tcp\":", f);
    json_string(f, r->tcp_what);
    fputc('}', f);
  }
  fputs("}\n", f);
  return finish(f, path);
}

/* ---- CSV --------------------------------------------------------------------- */

static void csv_number(FILE *f, double v) {
  fputc(',', f);
  if (v >= 0 && isfinite(v))
    fprintf(f, "%.6g", v);
}

static void csv_wrong(FILE *f, int64_t wrong) {
  fputc(',', f);
  if (wrong >= 0)
    fprintf(f, "%" PRId64, wrong);
}

static void csv_meas(FILE *f, const perf_meas_t *m, int valid) {
  if (!valid) {
    fputs(",,,,", f);
    return;
  }
  csv_number(f, m->time_us);
  csv_number(f, m->algbw_gbs);
  csv_number(f, m->busbw_gbs);
  csv_wrong(f, m->wrong);
}

/* --rounds N > 1: the range of one measurement (empty when not measured). */
static void csv_spread(FILE *f, const perf_meas_t *m, int valid) {
  csv_number(f, valid ? m->time_min_us : -1);
  csv_number(f, valid ? m->time_max_us : -1);
  csv_number(f, valid ? m->busbw_min_gbs : -1);
  csv_number(f, valid ? m->busbw_max_gbs : -1);
}

/* --percentiles: p50 and p99 of one measurement (empty when not measured). */
static void csv_percentiles(FILE *f, const perf_meas_t *m, int valid) {
  csv_number(f, valid ? m->p50_us : -1);
  csv_number(f, valid ? m->p99_us : -1);
}

int perf_write_csv(const perf_results_t *r, FILE *f, const char *path) {
  fputs("collective,nranks,datatype,op,root,bytes,count,"
        "oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,"
        "ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong,"
        "peer_time_us,peer_busbw_gbs,peer_wrong,ratio,"
        "mem_busbw_gbs,tcp_gbs", f);
  if (has_rounds(r))
    fputs(",rounds,oop_time_min_us,oop_time_max_us,oop_busbw_min_gbs,oop_busbw_max_gbs,"
          "ip_time_min_us,ip_time_max_us,ip_busbw_min_gbs,ip_busbw_max_gbs,"
          "peer_time_min_us,peer_time_max_us,peer_busbw_min_gbs,peer_busbw_max_gbs", f);
  if (r->percentiles)
    fputs(",oop_p50_us,oop_p99_us,ip_p50_us,ip_p99_us,peer_p50_us,peer_p99_us", f);
  fputc('\n', f);
  for (int i = 0; i < r->nrows; i++) {
    const perf_row_t *row = &r->rows[i];
    fprintf(f, "%s,%d,%s,%s,%d,%zu,%zu", r->collective, r->nranks, r->datatype, r->op,
            r->root, row->bytes, row->count);
    csv_meas(f, &row->oop, 1);
    csv_meas(f, &row->ip, row->has_ip);
    if (row->has_peer) {
      csv_number(f, row->peer.time_us);
      csv_number(f, row->peer.busbw_gbs);
      csv_wrong(f, row->peer.wrong);
      csv_number(f, ratio(row));
    } else {
      fputs(",,,,", f);
    }
    csv_number(f, r->ceiling ? row->mem_gbs : -1);
    csv_number(f, r->ceiling ? row->tcp_gbs : -1);
    if (has_rounds(r)) {
      fprintf(f, ",%d", r->rounds);
      csv_spread(f, &row->oop, 1);
      csv_spread(f, &row->ip, row->has_ip);
      csv_spread(f, &row->peer, row->has_peer);
    }
    if (r->percentiles) {
      csv_percentiles(f, &row->oop, 1);
      csv_percentiles(f, &row->ip, row->has_ip);
      csv_percentiles(f, &row->peer, row->has_peer);
    }
    fputc('\n', f);
  }
  return finish(f, path);
}
