#!/bin/sh
# headline.sh — the figures at the top of docs/performance.md, in one go:
# Loom and Open MPI alternating round by round (loom-perf --peer mpi
# --rounds), the memory and TCP ceilings (--ceiling), and gloo
# (bench/gloo-perf.py, run ROUNDS times in the same session), all-reduce
# and all-gather, 2 ranks, float32 sum; then a Markdown table of medians
# with min-max and the ratios of the medians.
#
#   bench/headline.sh [BUILD_DIR]           (default: build; from the source tree)
#
# Environment: ROUNDS (default 5), KEEP (directory for the raw JSON and
# tables; default a temporary one, removed), MPIRUN (default mpirun
# --allow-run-as-root --oversubscribe), PYTHON (default /usr/bin/python3).
# Small sizes run 2,000 iterations (8 B-64 KiB), large ones 20 (256 KiB-
# 256 MiB).  About 12 minutes on the 2-vCPU development VM.
set -eu
build=${1:-build}
rounds=${ROUNDS:-5}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${KEEP:-}" ]; then out=$KEEP; mkdir -p "$out"; else
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
passes="small:-b 8 -e 64K -f 8 -n 2000 -w 200
large:-b 256K -e 256M -f 4 -n 20 -w 5"

for coll in allreduce allgather; do
  echo "$passes" | while IFS=: read -r name flags; do
    echo "headline: $coll $name: Loom and Open MPI, $rounds rounds" >&2
    # shellcheck disable=SC2086 # $flags and $mpirun are option lists
    $mpirun -np 2 "$build/bench/loom-perf" -C "$coll" $flags --peer mpi --ceiling \
      --rounds "$rounds" --json "$out/loom-$coll-$name.json" >"$out/loom-$coll-$name.txt" </dev/null
    r=1
    while [ "$r" -le "$rounds" ]; do
      echo "headline: $coll $name: gloo, run $r of $rounds" >&2
      # shellcheck disable=SC2086
      "$python" "$here/gloo-perf.py" -C "$coll" $flags >"$out/gloo-$coll-$name-$r.txt" </dev/null
      r=$((r + 1))
    done
  done
done

"$python" - "$out" "$rounds" <<'EOF'
import glob, json, statistics, subprocess, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def gloo_rows(path):
    """size -> (time us, busbw GB/s) of gloo-perf.py's table (out-of-place)."""
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) > 7 and not line.startswith("#") and f[0].isdigit():
            rows[int(f[0])] = (float(f[4]), float(f[6]))
    return rows

def label(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b // div} {unit}"
    return f"{b} B"

def cell(m, lo, hi, digits):
    return f"{m:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"

commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip() or "?"
print(f"commit {commit}; {rounds} rounds: median [min–max]; ratios are of the medians "
      "(above 1: Loom faster)\n")
for coll in ("allreduce", "allgather"):
    for name, what in (("small", "time (µs)"), ("large", "busbw (GB/s)")):
        d = json.load(open(f"{out}/loom-{coll}-{name}.json"))
        gl = [gloo_rows(p) for p in sorted(glob.glob(f"{out}/gloo-{coll}-{name}-*.txt"))]
        print(f"**{coll}**, 2 ranks, float32, {what}\n")
        print("| size | Loom | Open MPI | Loom/MPI | gloo | Loom/gloo | memory ceiling | TCP ceiling |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in d["rows"]:
            b = row["bytes"]
            lt, mt = row["oop"]["time_us"], row["peer"]["time_us"]
            g = [r[b] for r in gl if b in r]
            gt = statistics.median(x[0] for x in g) if g else None
            if name == "small":
                lc = cell(lt, row["oop"]["time_us_min"], row["oop"]["time_us_max"], 2)
                mc = cell(mt, row["peer"]["time_us_min"], row["peer"]["time_us_max"], 2)
                gc = cell(gt, min(x[0] for x in g), max(x[0] for x in g), 1) if g else "n/a"
            else:
                lc = cell(row["oop"]["busbw_gbs"], row["oop"]["busbw_gbs_min"],
                          row["oop"]["busbw_gbs_max"], 2)
                mc = cell(row["peer"]["busbw_gbs"], row["peer"]["busbw_gbs_min"],
                          row["peer"]["busbw_gbs_max"], 2)
                gb = [x[1] for x in g]
                gc = cell(statistics.median(gb), min(gb), max(gb), 2) if g else "n/a"
            ce = row.get("ceiling", {})
            print(f"| {label(b)} | {lc} | {mc} | {mt / lt:.2f} | {gc} | "
                  + (f"{gt / lt:.2f}" if g else "n/a")
                  + f" | {ce.get('mem_busbw_gbs', float('nan')):.2f} GB/s"
                  + f" | {ce.get('tcp_gbs', float('nan')):.2f} GB/s |")
        print()
EOF
