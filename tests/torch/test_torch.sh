#!/bin/sh
# test_torch.sh — the torch.distributed backend "loom" (python/loom_torch):
#   torch_ops.py     every operation on 2, 3 and 4 ranks, against analytic
#                    results and gloo's; subgroups; async work and futures;
#                    bad input; on 2 ranks again with small calls on the
#                    caller's thread (LOOM_TORCH_INLINE_BYTES)
#   torch_ddp.py     DDP against gloo: bit for bit on 2 ranks, within float
#                    tolerance on 3 and 4; with fp16_compress_hook too
#   torch_faults.py  a late rank (wait with a timeout), a stuck rank (an
#                    error naming it after the group's timeout, no hang) and
#                    a dead rank; survivors of a dead rank carrying on in
#                    a group made by loom_torch.shrink
#   torch_exit.py    processes that raise or exit with work in flight exit
#                    with their own status, never hang or die of a signal
#   the example      examples/torch/train_ddp.py, both models, losses equal
#                    to gloo's
# Each run is bounded (the launcher's timeout, and timeout(1) around it),
# and each rank must print its "checks passed" line.  Skips (77) when the
# extension was not built: no torch, no headers, or an ASan build (python
# cannot load an ASan-instrumented libloom without LD_PRELOAD).
set -u
if [ "${TORCH_BUILT:-no}" != yes ]; then
  echo "SKIP: the loom_torch extension was not built:" \
    "${TORCH_NOTE:-configure did not look for torch}"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/../ranks/lib.sh
. "$here/../ranks/lib.sh" # pass/fail/expect_count/finish; exports LOOM_SOCKET_IFNAME=lo
export GLOO_SOCKET_IFNAME=lo
PY=${TORCH_PYTHON:-/usr/bin/python3}

# run_py N TIMEOUT_S SCRIPT [ARGS] — N ranks of SCRIPT; each must pass.
run_py() {
  n=$1; t=$2; script=$3; shift 3
  out=$(timeout -k 5 $((t + 15)) "$PY" "$here/$script" --launch "$n" --timeout "$t" "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ]; then
    expect_count "checks passed" "$n" "$script $* on $n ranks"
  else
    fail "$script $* on $n ranks (rc=$rc)"
    printf '%s\n' "$out" | tail -n 40
  fi
}

for n in 2 3 4; do run_py "$n" 90 torch_ops.py; done
# Small all_reduce, broadcast and barrier on the caller's thread (opt-in).
LOOM_TORCH_INLINE_BYTES=65536 run_py 2 90 torch_ops.py
for n in 2 3 4; do run_py "$n" 90 torch_ddp.py; done
run_py 2 30 torch_faults.py --scenario late
run_py 3 40 torch_faults.py --scenario stuck
run_py 2 30 torch_faults.py --scenario dead
run_py 4 60 torch_faults.py --scenario shrink
LOOM_STRAGGLER_WARN_MS=400 run_py 3 30 torch_faults.py --scenario straggler

# Exits: a rank that raises mid-training, ranks that sys.exit(10) with work
# in flight, and the raise in spawned processes; 10 iterations (50 by
# hand: torch_exit.py --iterations 50).
out=$(timeout -k 5 600 "$PY" "$here/torch_exit.py" --iterations 10 --timeout 60 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
  expect_count "10 iterations x 3 scenarios in .*: every process exited as required" 1 \
    "torch_exit.py: 30 x 2 processes exit with their status, none hung or killed by a signal"
else
  fail "torch_exit.py (rc=$rc)"
  printf '%s\n' "$out" | grep -v "LOOM WARN" | tail -n 40
fi

# The example (examples/torch/train_ddp.py) with both of its models: the
# losses it prints on 2 ranks equal gloo's to the last printed digit.
example="$here/../../examples/torch/train_ddp.py"
for model in mlp embedding; do
  losses=""
  for backend in loom gloo; do
    out=$(timeout -k 5 120 "$PY" "$example" --backend "$backend" --model "$model" --nprocs 2 \
      --steps 6 --warmup 1 --timeout 60 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] || ! printf '%s\n' "$out" | grep -q "$backend, 2 ranks, $model: mean step"; then
      fail "train_ddp.py --backend $backend --model $model (rc=$rc)"
      printf '%s\n' "$out" | tail -n 20
    fi
    losses="$losses|$(printf '%s\n' "$out" | grep '^step' | awk '{print $2, $4}' | tr '\n' ' ')"
  done
  loom_l=${losses#|}; loom_l=${loom_l%%|*}; gloo_l=${losses##*|}
  if [ -n "$loom_l" ] && [ "$loom_l" = "$gloo_l" ]; then
    pass "train_ddp.py --model $model: losses equal gloo's ($loom_l)"
  else
    fail "train_ddp.py --model $model: losses loom [$loom_l] gloo [$gloo_l]"
  fi
done

# The same example under loomrun, which sets torch's RANK, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT (env://) as torchrun does.
run_ranks 2 90 "$PY" "$example" --backend loom --model mlp --steps 3 --warmup 1 --timeout 60
expect_count "loom, 2 ranks, mlp: mean step" 1 "loomrun -n 2 python3 train_ddp.py: env:// from loomrun's variables"

sleep 0.2
if pgrep -f "$here/torch_" >/dev/null; then
  fail "ranks left behind: $(pgrep -af "$here/torch_" | head -3)"
else
  pass "no rank process left behind"
fi
finish
