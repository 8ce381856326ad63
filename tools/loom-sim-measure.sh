#!/bin/sh
# loom-sim-measure.sh — the measured side of loom-sim's calibration and
# accuracy check (docs/simulator.md): runs loom-perf under loomrun for
# all-reduce and all-gather on 2, 4 and 8 ranks of this machine, over shared
# memory and over TCP (LOOM_SHM_DISABLE=1), REPEAT times in alternation, and
# prints one line per run and size:
#
#   TRANSPORT COLL NRANKS BYTES TIME_US REP [CHUNK]
#
# (out-of-place time, the slowest rank's average, as loom-perf prints it;
# sizes 8 B (all-gather: 64 B), 64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB).
# For the per-message overhead the 2-rank all-gathers of 1 and 4 MiB are
# also run with LOOM_CHUNK_BYTES=8K (CHUNK 8192: 64-256 slices a message
# instead of 1-4).
# `loom-sim --compare FILE` reads these lines, takes the median per case and
# prints the model's error for each.
#
#   tools/loom-sim-measure.sh [BUILD_DIR] > measured.txt
#
# Environment: REPEAT (default 3), NPS (default "2 4 8"), TRANSPORTS
# (default "shm tcp"), COLLS (default "allreduce allgather").
set -u
B=${1:-.}
REPEAT=${REPEAT:-3}
NPS=${NPS:-"2 4 8"}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
COLLS=${COLLS:-"allreduce allgather"}
for f in "$B/tools/loomrun" "$B/bench/loom-perf"; do
  [ -x "$f" ] || { echo "$0: $f: not found (give the build directory)" >&2; exit 1; }
done

# one loom-perf run: prints "BYTES TIME_US" per size (chunk: LOOM_CHUNK_BYTES,
# "-" for the default)
perf() { # transport np coll chunk args...
  tp=$1 np=$2 coll=$3 chunk=$4
  shift 4
  set -- "$B/tools/loomrun" --no-prefix -n "$np" "$B/bench/loom-perf" -C "$coll" -c 0 "$@"
  [ "$chunk" != - ] && set -- LOOM_CHUNK_BYTES="$chunk" "$@"
  [ "$tp" = tcp ] && set -- LOOM_SHM_DISABLE=1 LOOM_SOCKET_IFNAME=lo "$@"
  env "$@" | awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1, $5 }'
}

echo "# loom-sim-measure: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$REPEAT" ]; do
  echo "# repetition $r: $(date -u '+%H:%M:%S'), load $(cut -d' ' -f1-3 /proc/loadavg)"
  for tp in $TRANSPORTS; do
    for np in $NPS; do
      for coll in $COLLS; do
        # the smallest size: 8 B all-reduce; all-gather 64 B (8 B split
        # over 8 ranks would be 0 elements each)
        small=8
        [ "$coll" = allgather ] && small=64
        {
          perf "$tp" "$np" "$coll" - -b "$small" -e "$small" -n 1000 -w 100
          perf "$tp" "$np" "$coll" - -b 64K -e 1M -f 4 -n 50 -w 5
          perf "$tp" "$np" "$coll" - -b 4M -e 16M -f 4 -n 10 -w 2
        } | while read -r bytes us; do
          echo "$tp $coll $np $bytes $us $r"
        done
      done
    done
    perf "$tp" 2 allgather 8192 -b 1M -e 4M -f 4 -n 20 -w 3 | while read -r bytes us; do
      echo "$tp allgather 2 $bytes $us $r 8192"
    done
  done
  r=$((r + 1))
done
