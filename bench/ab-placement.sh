#!/bin/sh
# ab-placement.sh — small-message latency of two Loom builds where ranks
# share CPUs, with Open MPI in the same rounds: the before/after evidence
# for changes to how a waiting rank spins and yields (docs/performance.md,
# "When ranks share a CPU").
#
#   bench/ab-placement.sh BEFORE_BUILD AFTER_BUILD
#
# Cases, each a loom-perf all-reduce sweep (SWEEP, default 8 B and 1 KiB,
# -n 5000 -w 500, out-of-place time per call):
#   split   2 ranks, each bound to its own CPU (loomrun --bind-to core where
#           the build has it, else taskset per rank)
#   shared  2 ranks on one CPU (taskset -c 0 around the launcher)
#   over4   4 ranks on all CPUs, unbound (ranks outnumber 2 cores)
# ROUNDS (default 3) rounds, the builds and Open MPI (mpi-perf, same
# placement: --bind-to core; taskset -c 0 with --bind-to none; 4 ranks
# --bind-to none; where ranks share a CPU with mpi_yield_when_idle 1, its
# setting for that case: busy polling alone takes ~4 ms a call there)
# taking turns in each.  Prints per case and size the
# median and min-max of each and the ratios of medians.
set -u
BEFORE=$1
AFTER=$2
ROUNDS=${ROUNDS:-3}
SWEEP=${SWEEP:-"-b 8 -e 1K -f 128 -n 5000 -w 500"}
MPIRUN=${MPIRUN:-"mpirun --allow-run-as-root --oversubscribe"}
CASES=${CASES:-"split shared over4"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

loom_case() { # BUILD CASE -> "size time" lines
  b=$1
  case $2 in
  split) set -- "$b/tools/loomrun" -n 2 sh -c 'exec taskset -c "$LOOM_RANK" "$0" "$@"' ;;
  shared) set -- taskset -c 0 "$b/tools/loomrun" -n 2 ;;
  over4) set -- "$b/tools/loomrun" -n 4 ;;
  esac
  # shellcheck disable=SC2086 # SWEEP is a flag list
  timeout 300 "$@" "$b/bench/loom-perf" $SWEEP 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $1, $5 }'
}
mpi_case() { # CASE -> "size time" lines
  case $1 in
  split) set -- $MPIRUN --bind-to core -np 2 ;;
  shared) set -- taskset -c 0 $MPIRUN --bind-to none --mca mpi_yield_when_idle 1 -np 2 ;;
  over4) set -- $MPIRUN --bind-to none --mca mpi_yield_when_idle 1 -np 4 ;;
  esac
  # shellcheck disable=SC2086
  timeout 300 "$@" "$AFTER/bench/mpi-perf" $SWEEP 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1, $5 }'
}

for r in $(seq "$ROUNDS"); do
  for c in $CASES; do
    loom_case "$BEFORE" "$c" | sed "s/^/$c before /" >>"$tmp/all"
    loom_case "$AFTER" "$c" | sed "s/^/$c after /" >>"$tmp/all"
    [ -x "$AFTER/bench/mpi-perf" ] && mpi_case "$c" | sed "s/^/$c mpi /" >>"$tmp/all"
  done
  echo "round $r of $ROUNDS done" >&2
done

echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); $ROUNDS interleaved rounds"
echo "# out-of-place time in us: median [min-max]"
printf "%-10s %10s  %-22s %-22s %-22s %12s %12s\n" case bytes before after openmpi aft/bef aft/mpi
awk -v whos="before after mpi" -v ratios="after/before after/mpi" -f "$(dirname "$0")/median-table.awk" \
  "$tmp/all" | sort -k1,1 -k2,2n
