#!/bin/sh
# host-ipc.sh [BUILD] — 2 ranks on one node: Loom on malloc'd buffers
# (through the shared-memory FIFOs) against Loom on loomMemAlloc's buffers
# (host IPC, LOOM_HOST_IPC_MIN, 256K unless set), each job beside Open MPI's
# MPI_Allreduce/MPI_Allgather on malloc'd buffers (--peer mpi) and the
# memory ceiling (--ceiling), results checked.  ROUNDS (3) rounds; in each,
# for all-reduce then all-gather, a malloc job and a loomMemAlloc job in
# turn.  Prints, per collective and size, the medians over the rounds of
# each job's out-of-place busbw with [min-max], and the ratios of the
# medians.  SWEEP sets loom-perf's sizes (default 256 KiB-256 MiB, x4);
# KEEP=DIR keeps the JSON.  Run it alone: nothing else on the machine.
set -eu
build=${1:-build}
rounds=${ROUNDS:-3}
sweep=${SWEEP:--b 256K -e 256M -f 4 -n 20 -w 5}
colls=${COLLS:-allreduce allgather}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
if [ -n "${KEEP:-}" ]; then out=$KEEP; mkdir -p "$out"; else
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

r=1
while [ "$r" -le "$rounds" ]; do
  for coll in $colls; do
    for mem in malloc loom; do
      echo "host-ipc: round $r of $rounds: $coll, --mem $mem" >&2
      # shellcheck disable=SC2086 # $sweep and $mpirun are option lists
      LOOM_HOST_IPC_MIN=${LOOM_HOST_IPC_MIN:-256K} $mpirun -x LOOM_HOST_IPC_MIN -np 2 \
        "$build/bench/loom-perf" -C "$coll" $sweep --mem "$mem" --peer mpi \
        --ceiling --json "$out/$coll-$mem-$r.json" >"$out/$coll-$mem-$r.txt" </dev/null
    done
  done
  r=$((r + 1))
done

/usr/bin/python3 - "$out" "$rounds" "$colls" <<'PY'
import json, statistics, sys
out, rounds, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def rows(path):
    d = json.load(open(path))
    if any(x["oop"]["wrong"] or (x.get("peer") or {}).get("wrong") for x in d["rows"]):
        sys.exit(f"{path}: wrong results")
    return {x["bytes"]: x for x in d["rows"]}

def label(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b // div} {unit}"
    return f"{b} B"

def cell(v):
    return f"{statistics.median(v):.2f} [{min(v):.2f}–{max(v):.2f}]"

print(f"{rounds} rounds: busbw GB/s, median [min–max]; ratios of the medians")
for coll in colls:
    runs = {m: [rows(f"{out}/{coll}-{m}-{r}.json") for r in range(1, rounds + 1)]
            for m in ("malloc", "loom")}
    print(f"\n**{coll}**, 2 ranks, float32, busbw (GB/s)\n")
    print("| size | Loom, malloc | Loom, loomMemAlloc | Open MPI | memory ceiling "
          "| loomMemAlloc/malloc | loomMemAlloc/MPI | loomMemAlloc/ceiling |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in sorted(runs["malloc"][0]):
        mal = [x[b]["oop"]["busbw_gbs"] for x in runs["malloc"]]
        lm = [x[b]["oop"]["busbw_gbs"] for x in runs["loom"]]
        mpi = [x[b]["peer"]["busbw_gbs"] for m in runs for x in runs[m]]
        ceil = [x[b]["ceiling"]["mem_busbw_gbs"] for m in runs for x in runs[m]]
        med = statistics.median
        print(f"| {label(b)} | {cell(mal)} | {cell(lm)} | {cell(mpi)} | {cell(ceil)} "
              f"| {med(lm) / med(mal):.2f} | {med(lm) / med(mpi):.2f} | {med(lm) / med(ceil):.2f} |")
PY
