#!/bin/sh
# compare-mpi.sh — runs loom-perf (under loomrun) and mpi-perf (under mpirun)
# on the same sizes and prints their bus bandwidth and time side by side.
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
# Exit status: 0 when both runs succeeded, 1 otherwise.
set -u

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

for f in "$LOOMRUN" "$LOOM_PERF" "$MPI_PERF"; do
  if [ ! -x "$f" ]; then
    echo "$0: $f: not found or not executable" >&2
    exit 1
  fi
done

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

status=0
echo "# loom: $LOOMRUN -n $NP $LOOM_PERF $*"
if ! "$LOOMRUN" -n "$NP" "$LOOM_PERF" "$@" >"$tmp/loom.out" 2>"$tmp/loom.err"; then
  echo "$0: loom-perf failed; its output:" >&2
  cat "$tmp/loom.out" "$tmp/loom.err" >&2
  status=1
fi
echo "# mpi:  $MPIRUN -np $NP $MPI_PERF $*"
# shellcheck disable=SC2086 # MPIRUN is a command line
if ! $MPIRUN -np "$NP" "$MPI_PERF" "$@" >"$tmp/mpi.out" 2>"$tmp/mpi.err"; then
  echo "$0: mpi-perf failed; its output:" >&2
  cat "$tmp/mpi.out" "$tmp/mpi.err" >&2
  status=1
fi

# Data rows: size count type redop | time algbw busbw #wrong | time algbw busbw #wrong
awk -v inplace="$INPLACE" -v np="$NP" -v loomfile="$tmp/loom.out" '
  function row() { return ($1 ~ /^[0-9]+$/ && NF >= 12) }
  { file = (FILENAME == loomfile) ? 1 : 2 }
  file == 1 && row() {
    t = inplace ? $9 : $5; b = inplace ? $11 : $7
    if (!($1 in ltime)) order[n++] = $1
    ltime[$1] = t; lbus[$1] = b; lwrong[$1] = inplace ? $12 : $8
  }
  file == 2 && row() {
    t = inplace ? $9 : $5; b = inplace ? $11 : $7
    if (!($1 in ltime) && !($1 in mtime)) order[n++] = $1
    mtime[$1] = t; mbus[$1] = b
  }
  END {
    printf "# %s, %s ranks\n", inplace ? "in-place" : "out-of-place", np
    printf "%12s  %11s  %10s  %9s  %11s  %11s\n", "size(B)", "loom busbw", "mpi busbw",
           "loom/mpi", "loom us", "mpi us"
    for (i = 0; i < n; i++) {
      s = order[i]
      lb = (s in lbus) ? lbus[s] : "-"; mb = (s in mbus) ? mbus[s] : "-"
      lt = (s in ltime) ? ltime[s] : "-"; mt = (s in mtime) ? mtime[s] : "-"
      # busbw ratio, from the times (busbw is rounded to 0.01 GB/s)
      ratio = (s in ltime && s in mtime && ltime[s] + 0 > 0) ? sprintf("%.2f", mtime[s] / ltime[s]) : "-"
      note = (s in lwrong && lwrong[s] != "0" && lwrong[s] != "N/A") ? "  (loom #wrong " lwrong[s] ")" : ""
      printf "%12s  %11s  %10s  %9s  %11s  %11s%s\n", s, lb, mb, ratio, lt, mt, note
    }
  }
' "$tmp/loom.out" "$tmp/mpi.out"

exit $status
