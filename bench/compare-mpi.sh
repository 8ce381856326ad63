#!/bin/sh
# compare-mpi.sh — runs loom-perf (under loomrun) and mpi-perf (under mpirun)
# on the same sizes and prints their bus bandwidth and time side by side.
# (One job can do the same for every collective, both results checked:
# mpirun -np N loom-perf --peer mpi ...; this script keeps the two
# libraries in separate jobs, as docs/performance.md's tables were made.)
#
#   bench/compare-mpi.sh [LOOMRUN [LOOM_PERF [MPI_PERF]]] [-- PERF_ARGS...]
#
# Defaults are relative to the build tree: tools/loomrun bench/loom-perf
# bench/mpi-perf; PERF_ARGS default to "-b 8 -e 64M -f 4" and are given to
# both programs (use flags both accept: -C -b -e -i -f -n -w -c).
# Environment:
#   NP       ranks (default 2)
#   MPIRUN   MPI launcher command (default: mpirun --allow-run-as-root --oversubscribe)
#   INPLACE  1: compare the in-place columns instead of the out-of-place ones
#   REPEAT   runs of each (alternating); the table shows median times (default 1)
# Exit status: 0 when both runs succeeded, 1 otherwise.
set -u
prev=

LOOMRUN=tools/loomrun
LOOM_PERF=bench/loom-perf
MPI_PERF=bench/mpi-perf
n=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  n=$((n + 1))
  case $n in
  1) LOOMRUN=$1 ;;
  2) LOOM_PERF=$1 ;;
  3) MPI_PERF=$1 ;;
  *) echo "usage: $0 [LOOMRUN [LOOM_PERF [MPI_PERF]]] [-- PERF_ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
[ $# -gt 0 ] && shift # the "--"
[ $# -eq 0 ] && set -- -b 8 -e 64M -f 4

NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
INPLACE=${INPLACE:-0}
REPEAT=${REPEAT:-1}
COLL=allreduce
for a in "$@"; do
  [ "$prev" = "-C" ] && COLL=$a
  prev=$a
done

for f in "$LOOMRUN" "$LOOM_PERF" "$MPI_PERF"; do
  if [ ! -x "$f" ]; then
    echo "$0: $f: not found or not executable" >&2
    exit 1
  fi
done

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

status=0
echo "# loom: $LOOMRUN --no-prefix -n $NP $LOOM_PERF $*"
echo "# mpi:  $MPIRUN -np $NP $MPI_PERF $*"
echo "# $REPEAT alternating run(s) each; times are the median over runs"
r=1
while [ "$r" -le "$REPEAT" ]; do
  if ! "$LOOMRUN" --no-prefix -n "$NP" "$LOOM_PERF" "$@" >"$tmp/loom.$r" 2>"$tmp/loom.err"; then
    echo "$0: loom-perf failed; its output:" >&2
    cat "$tmp/loom.$r" "$tmp/loom.err" >&2
    status=1
  fi
  # shellcheck disable=SC2086 # MPIRUN is a command line
  if ! $MPIRUN -np "$NP" "$MPI_PERF" "$@" >"$tmp/mpi.$r" 2>"$tmp/mpi.err"; then
    echo "$0: mpi-perf failed; its output:" >&2
    cat "$tmp/mpi.$r" "$tmp/mpi.err" >&2
    status=1
  fi
  r=$((r + 1))
done

# Data rows: size count type redop | time algbw busbw #wrong | time algbw busbw #wrong
# busbw is recomputed from the median time with the collective's factor.
awk -v inplace="$INPLACE" -v np="$NP" -v coll="$COLL" '
  function row() { return ($1 ~ /^[0-9]+$/ && NF >= 12) }
  function median(list,   a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  { side = (FILENAME ~ /\/loom\.[0-9]+$/) ? "loom" : "mpi" }
  row() {
    t = inplace ? $9 : $5
    if (!(($1) in seen)) { seen[$1] = 1; order[n++] = $1 }
    times[side, $1] = times[side, $1] " " t
    w = inplace ? $12 : $8
    if (side == "loom" && w != "0" && w != "N/A") wrong[$1] = 1
  }
  END {
    factor = (coll == "allgather") ? (np - 1) / np : 2 * (np - 1) / np
    printf "# %s %s, %s ranks\n", coll, inplace ? "in-place" : "out-of-place", np
    printf "%12s  %11s  %10s  %9s  %11s  %11s\n", "size(B)", "loom busbw", "mpi busbw",
           "loom/mpi", "loom us", "mpi us"
    for (i = 0; i < n; i++) {
      s = order[i]
      lt = ((("loom", s) in times)) ? median(times["loom", s]) : ""
      mt = ((("mpi", s) in times)) ? median(times["mpi", s]) : ""
      lb = (lt != "" && lt > 0) ? sprintf("%.2f", s / lt / 1000 * factor) : "-"
      mb = (mt != "" && mt > 0) ? sprintf("%.2f", s / mt / 1000 * factor) : "-"
      ratio = (lt != "" && mt != "" && lt > 0) ? sprintf("%.2f", mt / lt) : "-"
      printf "%12s  %11s  %10s  %9s  %11s  %11s%s\n", s, lb, mb, ratio,
             lt == "" ? "-" : sprintf("%.1f", lt), mt == "" ? "-" : sprintf("%.1f", mt),
             (s in wrong) ? "  (loom #wrong > 0)" : ""
    }
  }
' "$tmp"/loom.[0-9]* "$tmp"/mpi.[0-9]*

exit $status
