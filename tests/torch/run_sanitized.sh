#!/bin/sh
# run_sanitized.sh — the torch tests under a memory checker, every report
# that concerns Loom failing the run.
#
#   tests/torch/run_sanitized.sh [BUILD_DIR]              AddressSanitizer
#   tests/torch/run_sanitized.sh --valgrind [BUILD_DIR]   valgrind memcheck
#
# AddressSanitizer (default BUILD_DIR build-torch-asan): libloom and the
# loom_torch extension built with -fsanitize=address in their own build
# directory, libasan preloaded into Debian's python3 (which is not
# instrumented; torch is not either).  Any report fails the run.
# LeakSanitizer is off: the interpreter and torch keep their allocations
# to the end by design.  About 5 minutes on 2 cores, the build included.
#
# valgrind (default BUILD_DIR build, the ordinary build): each rank process
# runs under memcheck (PYTHONMALLOC=malloc, Debian's python3.supp).  torch,
# gloo, glibc's loader and libcpuinfo report errors of their own; only an
# error whose stack names Loom code (a frame with "loom" or "Loom" in it)
# fails the run, the others are counted.  valgrind_hwy_shim.so is
# preloaded (see valgrind_hwy_shim.c).  The spawn exit scenario is left
# out (torch.multiprocessing starts its processes itself).  About 20
# minutes on 2 cores.
#
# Runs torch_ops.py on 2 and 3 ranks, torch_ddp.py on 2, torch_faults.py
# (late, stuck, dead, straggler) and torch_exit.py (ITERATIONS, default 5
# for ASan and 1 for valgrind, of its exit paths).  Not in `make check`
# (the suite's time budget): run by hand after changes to the extension or
# to what it calls.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
mode=asan
if [ "${1:-}" = --valgrind ]; then mode=valgrind; shift; fi
PY=${TORCH_PYTHON:-/usr/bin/python3}
if [ $mode = valgrind ]; then build=${1:-$top/build}; else build=${1:-$top/build-torch-asan}; fi
flags="-O1 -g -fsanitize=address -fno-omit-frame-pointer"
if [ $mode = valgrind ] && [ ! -f "$build/Makefile" ]; then
  echo "FAIL: $build is not configured (./configure --with-torch there first)"; exit 1
elif [ ! -f "$build/Makefile" ]; then
  mkdir -p "$build" && (cd "$build" && "$top/configure" -q CFLAGS="$flags" CXXFLAGS="$flags" \
    LDFLAGS="-fsanitize=address" --with-torch) || { echo "FAIL: configure"; exit 1; }
fi
make -C "$build" -j"$(nproc)" >"$build/make.log" 2>&1 || {
  tail -n 30 "$build/make.log"; echo "FAIL: build"; exit 1; }
reports=$(mktemp -d) || exit 1
trap 'rm -rf "$reports"' EXIT
export PYTHONPATH="$build/python" LD_LIBRARY_PATH="$build/.libs"
export LOOM_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo
if [ $mode = valgrind ]; then
  command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
  gcc -shared -fPIC -O2 -o "$reports/hwy_shim.so" "$top/tests/torch/valgrind_hwy_shim.c" ||
    { echo "FAIL: the libhwy shim did not build"; exit 1; }
  export LD_PRELOAD="$reports/hwy_shim.so" PYTHONMALLOC=malloc
  export LOOM_TEST_WRAPPER="valgrind -q --log-file=$reports/vg.%p --num-callers=40 \
--suppressions=/usr/lib/valgrind/python3.supp"
  iterations=${ITERATIONS:-1} scale=4 exit_scenarios=raise,exit10
else
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
  export ASAN_OPTIONS="detect_leaks=0:log_path=$reports/asan"
  iterations=${ITERATIONS:-5} scale=1 exit_scenarios=raise,exit10,spawn
fi
failed=0
run() { # NAME TIMEOUT_S SCRIPT ARGS... (env assignments may precede)
  name=$1; t=$2; shift 2
  start=$(date +%s)
  if out=$(timeout -k 5 $((t * scale + 30)) "$@" 2>&1); then rc=0; else rc=$?; fi
  if [ "$rc" -eq 0 ]; then
    echo "PASS: $name ($(($(date +%s) - start)) s)"
  else
    echo "FAIL: $name (exit $rc)"; printf '%s\n' "$out" | tail -n 20; failed=1
  fi
}
cd "$top/tests/torch" || exit 1
T() { echo $(($1 * scale)); } # a launcher's timeout, longer under valgrind
for n in 2 3; do run "torch_ops.py, $n ranks" 300 "$PY" torch_ops.py --launch $n --timeout "$(T 300)"; done
run "torch_ddp.py, 2 ranks" 300 "$PY" torch_ddp.py --launch 2 --timeout "$(T 300)"
run "torch_faults.py late" 120 "$PY" torch_faults.py --launch 2 --timeout "$(T 120)" --scenario late
run "torch_faults.py stuck" 120 "$PY" torch_faults.py --launch 3 --timeout "$(T 120)" --scenario stuck
run "torch_faults.py dead" 120 "$PY" torch_faults.py --launch 2 --timeout "$(T 120)" --scenario dead
run "torch_faults.py straggler" 120 env LOOM_STRAGGLER_WARN_MS=400 \
  "$PY" torch_faults.py --launch 3 --timeout "$(T 120)" --scenario straggler
run "torch_exit.py x $iterations ($exit_scenarios)" 900 "$PY" torch_exit.py \
  --iterations "$iterations" --scenarios "$exit_scenarios" --timeout "$(T 60)"
if [ $mode = valgrind ]; then
  # valgrind's error records are separated by a line holding only the pid
  awk -v out="$reports/loom_errors" '
    function close_record() {
      if (rec ~ /[Ll]oom/) { print rec > out; n++ } else if (rec != "") other++
      rec = ""
    }
    FNR == 1 { close_record() }
    /^==[0-9]+== $/ { close_record(); next }
    { rec = rec $0 "\n" }
    END { close_record()
          printf "valgrind: %d error records in Loom code, %d elsewhere (torch, gloo, ld.so)\n", n + 0, other + 0 }
  ' "$reports"/vg.* /dev/null
  if [ -s "$reports/loom_errors" ]; then
    echo "FAIL: valgrind errors in Loom code:"; head -n 80 "$reports/loom_errors"; failed=1
  else
    echo "PASS: no valgrind error in Loom code"
  fi
elif ls "$reports"/asan.* >/dev/null 2>&1; then
  echo "FAIL: AddressSanitizer reports:"
  head -n 60 "$reports"/asan.*
  failed=1
else
  echo "PASS: no AddressSanitizer report"
fi
exit $failed
