#!/bin/bash
# device-diag.sh — a short diagnostic run on the GPU machine for when
# bench/device-check.sh hangs: a few small CUDA cases, each bounded to
# CASE_S seconds; a case still running then has every thread of every rank
# printed (cuda-gdb, which the GPU machine has, else gdb) before it is
# killed.  Uses the .devrun bundle (bench/device-bundle.sh).  Output in
# $OUT/device-diag.txt.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/device-diag}
CASE_S=${CASE_S:-20}
mkdir -p "$OUT"
exec > >(tee "$OUT/device-diag.txt") 2>&1
BIN=$PWD/.devrun/bin
export LD_LIBRARY_PATH=$PWD/.devrun/lib LOOM_MODULE_PATH=$PWD/.devrun/lib LOOM_SOCKET_IFNAME=lo
export LOOM_TIMEOUT_MS=$(((CASE_S - 5) * 1000))
DBG=$(command -v cuda-gdb || command -v gdb)

stacks() { # every thread of every process named $1
  local pid
  for pid in $(pgrep -x "$1"); do
    echo "--- stacks of $1 pid $pid"
    timeout 30 "$DBG" -p "$pid" -batch -ex "thread apply all bt 20" 2>&1 | grep -E '^(Thread|#)' | head -120
  done
}

run_case() { # name loomrun-arguments...
  local name=$1 prog
  shift
  echo; echo "=== $name ($(date +%T)): $*"
  "$BIN/loomrun" --timeout $((CASE_S + 60)) "$@" &
  local job=$! waited=0
  while kill -0 "$job" 2>/dev/null && [ $waited -lt "$CASE_S" ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$job" 2>/dev/null; then
    echo "HUNG after ${CASE_S} s: $name"
    for prog in coll_test device_test loom-perf; do stacks "$prog"; pkill -9 -x "$prog"; done
    kill -9 "$job" 2>/dev/null
    wait "$job" 2>/dev/null
  else
    wait "$job"; echo "rc=$? in ${waited} s: $name"
  fi
}

nvidia-smi -L
DEV=${CHECK_DEVICE:-cuda}
C="$BIN/coll_test -d $DEV -t float32 -o sum -s 7"
run_case "allreduce, IPC, no stream" -n 2 $C -c allreduce
run_case "allreduce, staged, stream" -n 2 env LOOM_DEVICE_IPC=0 $C -c allreduce -S 1
run_case "allreduce, IPC, stream, INFO" -n 2 env LOOM_DEBUG=INFO $C -c allreduce -S 1
run_case "broadcast, staged, no stream" -n 2 env LOOM_DEVICE_IPC=0 $C -c broadcast
run_case "device_test api" -n 2 "$BIN/device_test" -d $DEV -p api
run_case "loom-perf allreduce cuda to 64M" -n 2 "$BIN/loom-perf" -C allreduce --device $DEV -b 8 -e 64M -f 8 -n 10 -w 2
echo "=== done ($(date +%T))"
