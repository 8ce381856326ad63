#!/bin/sh
# run_sanitized.sh — the torch tests under AddressSanitizer: libloom and
# the loom_torch extension built with -fsanitize=address in their own build
# directory, libasan preloaded into Debian's python3 (which is not
# instrumented; torch is not either), every sanitizer report written to a
# file and the run failed if there is one.  LeakSanitizer is off: the
# interpreter and torch keep their allocations to the end by design.
#
#   tests/torch/run_sanitized.sh [BUILD_DIR]   (default build-torch-asan)
#
# Runs torch_ops.py on 2 and 3 ranks, torch_ddp.py on 2, torch_faults.py
# (late, stuck, dead, straggler) and torch_exit.py (ITERATIONS, default 5,
# of its three exit paths).  About 15 minutes on 2 cores, the build
# included; not in `make check` (the suite's time budget), run by hand
# after changes to the extension or to what it calls.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build-torch-asan}
PY=${TORCH_PYTHON:-/usr/bin/python3}
flags="-O1 -g -fsanitize=address -fno-omit-frame-pointer"
if [ ! -f "$build/Makefile" ]; then
  mkdir -p "$build" && (cd "$build" && "$top/configure" -q CFLAGS="$flags" CXXFLAGS="$flags" \
    LDFLAGS="-fsanitize=address" --with-torch) || { echo "FAIL: configure"; exit 1; }
fi
make -C "$build" -j"$(nproc)" >"$build/make.log" 2>&1 || {
  tail -n 30 "$build/make.log"; echo "FAIL: build"; exit 1; }
reports=$(mktemp -d) || exit 1
trap 'rm -rf "$reports"' EXIT
export PYTHONPATH="$build/python" LD_LIBRARY_PATH="$build/.libs"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
export ASAN_OPTIONS="detect_leaks=0:log_path=$reports/asan"
export LOOM_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo
failed=0
run() { # NAME TIMEOUT_S SCRIPT ARGS... (env assignments may precede)
  name=$1; t=$2; shift 2
  start=$(date +%s)
  if out=$(timeout -k 5 $((t + 30)) "$@" 2>&1); then rc=0; else rc=$?; fi
  if [ "$rc" -eq 0 ]; then
    echo "PASS: $name ($(($(date +%s) - start)) s)"
  else
    echo "FAIL: $name (exit $rc)"; printf '%s\n' "$out" | tail -n 20; failed=1
  fi
}
cd "$top/tests/torch" || exit 1
for n in 2 3; do run "torch_ops.py, $n ranks" 300 "$PY" torch_ops.py --launch $n --timeout 300; done
run "torch_ddp.py, 2 ranks" 300 "$PY" torch_ddp.py --launch 2 --timeout 300
run "torch_faults.py late" 120 "$PY" torch_faults.py --launch 2 --timeout 120 --scenario late
run "torch_faults.py stuck" 120 "$PY" torch_faults.py --launch 3 --timeout 120 --scenario stuck
run "torch_faults.py dead" 120 "$PY" torch_faults.py --launch 2 --timeout 120 --scenario dead
run "torch_faults.py straggler" 120 env LOOM_STRAGGLER_WARN_MS=400 \
  "$PY" torch_faults.py --launch 3 --timeout 120 --scenario straggler
run "torch_exit.py x ${ITERATIONS:-5}" 900 "$PY" torch_exit.py --iterations "${ITERATIONS:-5}"
if ls "$reports"/asan.* >/dev/null 2>&1; then
  echo "FAIL: AddressSanitizer reports:"
  head -n 60 "$reports"/asan.*
  failed=1
else
  echo "PASS: no AddressSanitizer report"
fi
exit $failed
