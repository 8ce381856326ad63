#!/bin/sh
# device-paths.sh — the two data paths of device buffers on one node, side
# by side in interleaved rounds (docs/performance.md, docs/devices.md):
#   ipc     device to device through IPC handles (LOOM_DEVICE_IPC=1, the default)
#   staged  copied into host blocks, run by the host engine, copied back
#           (LOOM_DEVICE_IPC=0)
#   host    the same call on host buffers (no device at all), for reference
#
#   bench/device-paths.sh BUILD [DEVICE]
#
# DEVICE is sim (default) or cuda.  Each round runs the three one after the
# other: a 2-rank loom-perf sweep (SWEEP, default 64 KiB..64 MiB, x4) of
# each collective in COLLS (default "allreduce allgather").  ROUNDS
# (default 3).  The simulated device's random delay is off
# (LOOM_SIM_DELAY_US=0): it exists to catch ordering bugs, not to model a
# device's speed.  Prints per collective and size the median [min-max] of
# the out-of-place bus bandwidth (GB/s) of each path and the ratios of
# medians ipc/staged and ipc/host.
set -u
B=$1
DEV=${2:-sim}
ROUNDS=${ROUNDS:-3}
COLLS=${COLLS:-"allreduce allgather"}
SWEEP=${SWEEP:-"-b 64K -e 64M -f 4 -n 20 -w 3"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LOOM_SIM_DELAY_US=0

run() { # PATH COLL -> "coll path bytes busbw" lines
  case $1 in
  ipc) env LOOM_DEVICE_IPC=1 "$B/tools/loomrun" --timeout 300 -n 2 "$B/bench/loom-perf" -C "$2" --device "$DEV" $SWEEP --csv - ;;
  staged) env LOOM_DEVICE_IPC=0 "$B/tools/loomrun" --timeout 300 -n 2 "$B/bench/loom-perf" -C "$2" --device "$DEV" $SWEEP --csv - ;;
  host) "$B/tools/loomrun" --timeout 300 -n 2 "$B/bench/loom-perf" -C "$2" $SWEEP --csv - ;;
  esac 2>/dev/null | awk -F, -v p="$1" '$1 == "'"$2"'" { print $1, p, $6, $10 }'
}

for r in $(seq "$ROUNDS"); do
  for c in $COLLS; do
    for p in ipc staged host; do
      run "$p" "$c" >>"$tmp/all"
    done
  done
  echo "round $r of $ROUNDS done" >&2
done

echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); device $DEV; $ROUNDS interleaved rounds"
echo "# 2 ranks, out-of-place bus bandwidth in GB/s: median [min-max]"
printf "%-10s %10s  %-22s %-22s %-22s %12s %12s\n" coll bytes ipc staged host ipc/staged ipc/host
awk -v whos="ipc staged host" -v ratios="ipc/staged ipc/host" -f "$(dirname "$0")/median-table.awk" \
  "$tmp/all" | sort -k1,1 -k2,2n
