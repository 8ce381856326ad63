#!/bin/sh
# run_pytorch_suite.sh — PyTorch's own distributed test suite (torch 1.13's
# distributed_test, as test/distributed/test_distributed_spawn.py runs it)
# against the "loom" backend, on each of RANKS (default "2 3") world sizes.
# Fails on any failure or error; skips are the suite's own (tests for other
# backends, GPUs, larger worlds).  Extra arguments go to unittest (e.g.
# -k test_all_gather); SUITE_TIMEOUT (default 3600) bounds each world size.
#
#   PYTHONPATH=build/python LD_LIBRARY_PATH=build/.libs tests/torch/run_pytorch_suite.sh
#
# Under `make check` it runs only with LOOM_PYTORCH_SUITE=1: it takes
# about 4 (2 ranks) and 6 (3 ranks) minutes here, more than the suite's
# time budget has left (docs/torch.md has its last result).
set -u
if [ "${TORCH_BUILT:-yes}" != yes ]; then
  echo "SKIP: the loom_torch extension was not built: ${TORCH_NOTE:-configure did not look for torch}"
  exit 77
fi
if [ -n "${TESTBIN:-}" ] && [ "${LOOM_PYTORCH_SUITE:-0}" != 1 ]; then
  echo "SKIP: PyTorch's distributed suite runs only with LOOM_PYTORCH_SUITE=1 (about 10 minutes"
  echo "      on 2 cores, past the suite's time budget; docs/torch.md has its last result)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
PY=${TORCH_PYTHON:-/usr/bin/python3}
export LOOM_SOCKET_IFNAME=${LOOM_SOCKET_IFNAME:-lo} GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo}
export BACKEND=loom
failed=0
for n in ${RANKS:-2 3}; do
  tmp=$(mktemp -d) || exit 1
  mkdir -p "$tmp/barrier" "$tmp/test_dir"
  start=$(date +%s)
  (cd "$here/pytorch_suite" &&
     WORLD_SIZE=$n TEMP_DIR=$tmp timeout -k 10 "${SUITE_TIMEOUT:-3600}" "$PY" run_suite.py "$@") \
    >"$tmp/log" 2>&1
  rc=$?
  summary=$(grep -E '^(Ran [0-9]+ tests|OK|FAILED)' "$tmp/log" | tr '\n' ' ')
  echo "world size $n: rc $rc, $(($(date +%s) - start)) s: $summary"
  if [ "$rc" -ne 0 ]; then
    failed=1
    grep -E '^(ERROR|FAIL): ' "$tmp/log"
    grep -E '^(RuntimeError|AssertionError|Exception)' "$tmp/log" | sort | uniq -c | sort -rn | head -20
    [ -n "${KEEP_LOG:-}" ] && cp "$tmp/log" "$KEEP_LOG.$n"
  fi
  rm -rf "$tmp"
done
exit $failed
