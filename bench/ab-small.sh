#!/bin/sh
# ab-small.sh — small-message latency of two Loom builds side by side, with
# Open MPI's MPI_Allreduce in the same rounds: before/after evidence for a
# change that touches the small-call path (docs/performance.md).
#
#   bench/ab-small.sh BEFORE_BUILD AFTER_BUILD
#
# Each round runs, one after the other, before and after (every other
# round after first) and, for all-reduce, Open MPI; each a 2-rank
# loom-perf sweep (SWEEP, default 8 B..1 KiB; out-of-place time, -n 2000
# -w 200).  ROUNDS (default 5) rounds; COLLS (default
# "allreduce broadcast").  Prints per collective and size the median and
# min-max of each, the ratios of medians after/before and after/MPI, and
# the same ratios paired by round (median [min-max] of each round's).
#
# BEFORE_ENV and AFTER_ENV (default empty) are VAR=VALUE words set for
# that side only, so one build can be compared with itself under two
# settings: the flight recorder's cost is
#   BEFORE_ENV=LOOM_TRACE_BUFFER=0 bench/ab-small.sh build build
set -u
BEFORE=$1
AFTER=$2
ROUNDS=${ROUNDS:-5}
COLLS=${COLLS:-"allreduce broadcast"}
MPIRUN=${MPIRUN:-"mpirun --allow-run-as-root --oversubscribe"}
SWEEP=${SWEEP:-"-b 8 -e 1K -f 8 -n 2000 -w 200"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

loom_run() { # BUILD COLL [VAR=VALUE...] -> "size time" lines
  build=$1 coll=$2
  shift 2
  env "$@" "$build/tools/loomrun" --timeout 120 -n 2 "$build/bench/loom-perf" -C "$coll" $SWEEP --csv - 2>/dev/null |
    sed 's/^\[[0-9]*\] //' | awk -F, '$1 == "'"$coll"'" { print $6, $8 }'
}
mpi_run() {
  $MPIRUN -np 2 "$AFTER/bench/mpi-perf" $SWEEP 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1, $5 }'
}

for r in $(seq "$ROUNDS"); do
  for c in $COLLS; do
    # which side goes first alternates, so neither always follows the other
    if [ $((r % 2)) = 1 ]; then
      loom_run "$BEFORE" "$c" ${BEFORE_ENV:-} | sed "s/^/$c before /" >>"$tmp/all"
      loom_run "$AFTER" "$c" ${AFTER_ENV:-} | sed "s/^/$c after /" >>"$tmp/all"
    else
      loom_run "$AFTER" "$c" ${AFTER_ENV:-} | sed "s/^/$c after /" >>"$tmp/all"
      loom_run "$BEFORE" "$c" ${BEFORE_ENV:-} | sed "s/^/$c before /" >>"$tmp/all"
    fi
    if [ "$c" = allreduce ] && [ -x "$AFTER/bench/mpi-perf" ]; then
      mpi_run | sed "s/^/$c mpi /" >>"$tmp/all"
    fi
  done
  echo "round $r of $ROUNDS done" >&2
done

echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); $ROUNDS interleaved rounds"
echo "# 2 ranks, out-of-place time in us: median [min-max]; before: $BEFORE ${BEFORE_ENV:-}, after: $AFTER ${AFTER_ENV:-}"
printf "%-10s %10s  %-22s %-22s %-22s %12s %12s %-22s %-22s\n" coll bytes before after openmpi \
  aft/bef aft/mpi "aft/bef by round" "aft/mpi by round"
awk -v whos="before after mpi" -v ratios="after/before after/mpi" -v paired=1 \
  -f "$(dirname "$0")/median-table.awk" \
  "$tmp/all" | sort -k1,1 -k2,2n
