#!/bin/bash
# device-check.sh — the one prepared run of the CUDA device backend on a
# machine with a GPU (docs/devices.md), sized for under 8 minutes:
#   1. uses the prebuilt bundle in ./.devrun when there is one
#      (bench/device-bundle.sh BUILD_DIR makes it here: the GPU machine has
#      no Autotools or Debian -dev packages), else builds Loom with the CUDA
#      module in ./build-cuda (configure --with-cuda);
#   2. check_device: the CUDA kernels against the host's, bit for bit, and
#      CUDA events and streams;
#   3. the collective matrix with every buffer in CUDA memory, queued on a
#      CUDA stream, on 2 and 4 ranks sharing the one GPU through CUDA IPC,
#      and on 2 ranks staged through host memory (LOOM_DEVICE_IPC=0);
#      device_test's API checks, 100 two-stream iterations and a clique of
#      loomCommInitAll on 2 ranks;
#   4. loom-perf --device cuda (all-reduce and all-gather, 2 ranks, 8 B to
#      256 MiB), through CUDA IPC and staged, beside the GPU's own
#      device-to-device cudaMemcpy bandwidth (bench/cuda_d2d.cu) measured in
#      the same run, and loom-perf on host buffers for comparison.
# Everything goes to stdout and to $OUT/device-check.txt ($OUT: the device
# tool's output folder; /tmp/device-check otherwise).  Exits 77 when there
# is no GPU, 1 when a check fails.  CHECK_DEVICE=sim rehearses the same
# steps on the simulated device, on a machine without a GPU; PERF_MAX
# (default 256M) bounds loom-perf's sizes, RUN_S (default 240) each
# multi-rank step's seconds.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/device-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/device-check.txt") 2>&1
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PATH"
failed=0
step() { echo; echo "=== $* ($(date +%T))"; }
check() { if "$@"; then echo "PASS: $*"; else echo "FAIL ($?): $*"; failed=$((failed + 1)); fi; }

DEV=${CHECK_DEVICE:-cuda}
step "machine"
uname -a; nproc; nvidia-smi -L 2>&1 || true
nvcc --version 2>&1 | tail -1
if [ "$DEV" = cuda ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU here (nvidia-smi -L fails): nothing to check"
  exit 77
fi

if [ -x .devrun/bin/loomrun ]; then
  step "prebuilt bundle (.devrun, from bench/device-bundle.sh)"
  BIN=$PWD/.devrun/bin
  export LD_LIBRARY_PATH=$PWD/.devrun/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LOOM_MODULE_PATH=$PWD/.devrun/lib
  CHECK_DEVICE_BIN=$BIN/check_device COLL_TEST=$BIN/coll_test DEVICE_TEST=$BIN/device_test
  LOOMRUN=$BIN/loomrun LOOM_INFO=$BIN/loom-info LOOM_PERF=$BIN/loom-perf CUDA_D2D=$BIN/cuda_d2d
else
  step "build (build-cuda)"
  [ -x configure ] || ./autogen.sh >/dev/null || { echo "FAIL: autogen (autoconf, automake, libtool installed?)"; exit 1; }
  mkdir -p build-cuda
  (cd build-cuda && { [ -f Makefile ] || ../configure --with-cuda --without-torch --enable-werror >configure.log 2>&1 ||
     { tail -30 configure.log; exit 1; }; } && make -j"$(nproc)" >make.log 2>&1 &&
     make -j"$(nproc)" tests/unit/check_device tests/ranks/coll_test tests/ranks/device_test >>make.log 2>&1) ||
    { tail -40 build-cuda/make.log; echo "FAIL: build"; exit 1; }
  B=$PWD/build-cuda
  export LOOM_MODULE_PATH=$B/.libs
  CHECK_DEVICE_BIN=$B/tests/unit/check_device COLL_TEST=$B/tests/ranks/coll_test
  DEVICE_TEST=$B/tests/ranks/device_test LOOMRUN=$B/tools/loomrun LOOM_INFO=$B/tools/loom-info
  LOOM_PERF=$B/bench/loom-perf CUDA_D2D=$B/cuda_d2d
  nvcc -O2 -o "$CUDA_D2D" bench/cuda_d2d.cu || { echo "FAIL: cuda_d2d"; exit 1; }
fi
export LOOM_SOCKET_IFNAME=lo
"$LOOM_INFO" | sed -n '1,8p'
RUN_S=${RUN_S:-240} # bound of each multi-rank step
RUN="timeout -k 5 $((RUN_S + 60)) $LOOMRUN --timeout $RUN_S"

step "check_device (kernels, events, streams on every backend, CUDA included)"
check timeout 120 "$CHECK_DEVICE_BIN"

step "collective matrix on CUDA buffers queued on a CUDA stream"
for n in 2 4; do
  check $RUN -n $n "$COLL_TEST" -d $DEV -S 1 -s 0,1,7,100,4099,65537
done
check $RUN -n 2 "$COLL_TEST" -d $DEV -s 1,4099,300007 -t float32,bfloat16 -o sum,avg,premulsum
check env LOOM_DEVICE_IPC=0 $RUN -n 2 "$COLL_TEST" -d $DEV -S 1 -s 0,7,4099,65537
step "device_test on CUDA: API, 100 two-stream iterations, host functions, a clique"
check $RUN -n 2 "$DEVICE_TEST" -d $DEV -p api,order,hostfn,group,clique -i 100

step "bandwidth: the GPU's device-to-device copy (ceiling)"
[ "$DEV" = cuda ] && "$CUDA_D2D" -b 8 -e 268435456 -n 20 -w 5
for c in allreduce allgather; do
  step "loom-perf -C $c --device cuda, 2 ranks (through CUDA IPC)"
  $RUN -n 2 "$LOOM_PERF" -C $c --device $DEV -b 8 -e "${PERF_MAX:-256M}" -f 4 -n 20 -w 5
  step "loom-perf -C $c --device cuda, 2 ranks, staged (LOOM_DEVICE_IPC=0)"
  LOOM_DEVICE_IPC=0 $RUN -n 2 "$LOOM_PERF" -C $c --device $DEV -b 8 -e "${PERF_MAX:-256M}" -f 4 -n 20 -w 5
  step "loom-perf -C $c on host buffers, 2 ranks (the same run, for comparison)"
  $RUN -n 2 "$LOOM_PERF" -C $c -b 8 -e "${PERF_MAX:-256M}" -f 4 -n 20 -w 5
done
step "done: $failed check(s) failed"
[ "$failed" -eq 0 ]
