#!/bin/sh
# ab-connect.sh — connections on first use against all at init, over TCP
# (LOOM_SHM_DISABLE=1), one build: the evidence that lazy connection
# (LOOM_CONNECT=lazy, the default) costs nothing at small scale.  Per rank
# count (RANKS, default 2 4 8) and round (ROUNDS, default 3), eager and
# lazy take turns running
#   bench/init-time             init, the first 8-byte all-reduce (max
#                               over ranks: lazy connects there) and fds
#   bench/loom-perf SWEEP       out-of-place time per call (warm)
# and the table gives medians [min-max] and lazy/eager ratios of medians.
#
#   bench/ab-connect.sh [BUILD]
set -u
B=${1:-build}
RANKS=${RANKS:-"2 4 8"}
ROUNDS=${ROUNDS:-3}
SWEEP=${SWEEP:-"-b 8 -e 4M -f 16 -n 200 -w 20"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LOOM_SHM_DISABLE=1

for r in $(seq "$ROUNDS"); do
  for n in $RANKS; do
    for mode in eager lazy; do
      LOOM_CONNECT=$mode timeout 120 "$B/tools/loomrun" -n "$n" "$B/bench/init-time" 2>/dev/null |
        awk -v g="init-$n" -v who="$mode" '/^init-time:/ {
          print g, who, 1, $8; print g, who, 2, $13; print g, who, 3, $19 }' >>"$tmp/all"
      # shellcheck disable=SC2086 # SWEEP is a flag list
      LOOM_CONNECT=$mode timeout 300 "$B/tools/loomrun" -n "$n" "$B/bench/loom-perf" $SWEEP \
        2>/dev/null | awk -v g="perf-$n" -v who="$mode" '$1 ~ /^[0-9]+$/ && NF >= 8 {
          print g, who, $1, $5 }' >>"$tmp/all"
    done
  done
  echo "round $r of $ROUNDS done" >&2
done

echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); $ROUNDS interleaved rounds, tcp only"
echo "# init-N rows: 1 = init ms (max over ranks), 2 = first all-reduce ms (max), 3 = fds a rank (max)"
echo "# perf-N rows: bytes, out-of-place time in us per call"
printf "%-10s %10s  %-22s %-22s %12s\n" case key eager lazy lazy/eager
awk -v whos="eager lazy" -v ratios="lazy/eager" -f "$(dirname "$0")/median-table.awk" \
  "$tmp/all" | sort -k1,1 -k2,2n
