#!/bin/sh
# two-speed.sh [BUILD] — is this machine in its fast or its slow mode, and
# do Loom and Open MPI move with it?  ROUNDS (5) rounds, each: the
# cross-core round trip of one cache line (bench/line-latency, CPUs 0 and
# 1), then one job of `mpirun -np 2 loom-perf --peer mpi` with an 8 B and a
# 2 MiB all-reduce (Loom's and Open MPI's time and busbw side by side,
# results checked).  One line per round; run it alone.  On the
# development VM (2 vCPUs of an AMD EPYC) the round trip sits at one of
# two values for minutes at a time, and every small-message time with it.
set -eu
build=${1:-build}
rounds=${ROUNDS:-5}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%-5s %-20s %-10s %-10s %-12s %-12s %s\n' round "line round trip (ns)" \
  "8 B Loom" "8 B MPI" "2 MiB Loom" "2 MiB MPI" "(us; busbw GB/s)"
r=1
while [ "$r" -le "$rounds" ]; do
  ns=$("$build/bench/line-latency" 0 1 200000 5 | sed 's/.*: \([0-9.]*\) ns a round trip.*/\1/')
  # shellcheck disable=SC2086 # $mpirun is an option list
  $mpirun -np 2 "$build/bench/loom-perf" -C allreduce -b 8 -e 8 -n 20000 -w 1000 --peer mpi \
    --csv "$tmp" >/dev/null </dev/null
  small=$(awk -F, '$1 == "allreduce" { if ($11 != 0 || $18 != 0) print "WRONG"; else printf "%-10.3f %-10.3f", $8, $16 }' "$tmp")
  # shellcheck disable=SC2086
  $mpirun -np 2 "$build/bench/loom-perf" -C allreduce -b 2M -e 2M -n 100 -w 10 --peer mpi \
    --csv "$tmp" >/dev/null </dev/null
  large=$(awk -F, '$1 == "allreduce" { if ($11 != 0 || $18 != 0) print "WRONG"; else printf "%-12.2f %-12.2f", $10, $17 }' "$tmp")
  printf '%-5s %-20s %s %s\n' "$r" "$ns" "$small" "$large"
  r=$((r + 1))
done
