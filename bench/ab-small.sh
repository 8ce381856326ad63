#!/bin/sh
# ab-small.sh — small-message latency of two Loom builds side by side, with
# Open MPI's MPI_Allreduce in the same rounds: before/after evidence for a
# change that touches the small-call path (docs/performance.md).
#
#   bench/ab-small.sh BEFORE_BUILD AFTER_BUILD
#
# Each round runs, one after the other: before, after (and Open MPI for
# all-reduce), each a 2-rank loom-perf sweep (SWEEP, default 8 B..1 KiB; out-of-place
# time, -n 2000 -w 200).  ROUNDS (default 5) rounds; COLLS (default
# "allreduce broadcast").  Prints per collective and size the median and
# min-max of each, and the ratios of medians after/before and after/MPI.
set -u
BEFORE=$1
AFTER=$2
ROUNDS=${ROUNDS:-5}
COLLS=${COLLS:-"allreduce broadcast"}
MPIRUN=${MPIRUN:-"mpirun --allow-run-as-root --oversubscribe"}
SWEEP=${SWEEP:-"-b 8 -e 1K -f 8 -n 2000 -w 200"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

loom_run() { # BUILD COLL -> "size time" lines
  "$1/tools/loomrun" --timeout 120 -n 2 "$1/bench/loom-perf" -C "$2" $SWEEP --csv - 2>/dev/null |
    sed 's/^\[[0-9]*\] //' | awk -F, '$1 == "'"$2"'" { print $6, $8 }'
}
mpi_run() {
  $MPIRUN -np 2 "$AFTER/bench/mpi-perf" $SWEEP 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1, $5 }'
}

for r in $(seq "$ROUNDS"); do
  for c in $COLLS; do
    loom_run "$BEFORE" "$c" | sed "s/^/$c before /" >>"$tmp/all"
    loom_run "$AFTER" "$c" | sed "s/^/$c after /" >>"$tmp/all"
    if [ "$c" = allreduce ] && [ -x "$AFTER/bench/mpi-perf" ]; then
      mpi_run | sed "s/^/$c mpi /" >>"$tmp/all"
    fi
  done
  echo "round $r of $ROUNDS done" >&2
done

echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); $ROUNDS interleaved rounds"
echo "# 2 ranks, out-of-place time in us: median [min-max]"
sort -k1,1 -k3,3n "$tmp/all" | awk '
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { key = $1 " " $3; n[key, $2]++; v[key, $2, n[key, $2]] = $4; keys[key] = 1 }
  END {
    printf "%-10s %6s  %-22s %-22s %-22s %9s %9s\n", "coll", "bytes", "before", "after", "openmpi", "aft/bef", "aft/mpi"
    for (key in keys) {
      split(key, k, " ")
      line = sprintf("%-10s %6d ", k[1], k[2]); m["before"] = m["after"] = m["mpi"] = 0
      for (w = 1; w <= 3; w++) {
        who = w == 1 ? "before" : w == 2 ? "after" : "mpi"
        c = n[key, who]
        if (c == 0) { line = line sprintf(" %-22s", "n/a"); continue }
        delete a; lo = 1e30; hi = 0
        for (i = 1; i <= c; i++) { a[i] = v[key, who, i]; if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
        m[who] = med(a, c)
        line = line sprintf(" %-22s", sprintf("%.2f [%.2f-%.2f]", m[who], lo, hi))
      }
      line = line sprintf(" %9s", m["before"] > 0 ? sprintf("%.2f", m["after"] / m["before"]) : "n/a")
      line = line sprintf(" %9s", m["mpi"] > 0 ? sprintf("%.2f", m["after"] / m["mpi"]) : "n/a")
      print line
    }
  }' | sort -k1,1 -k2,2n
