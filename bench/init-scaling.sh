#!/bin/sh
# init-scaling.sh — how a communicator's start grows with its rank count
# on this machine: bench/init-time (loomCommInitRank, then the first and
# second 8-byte all-reduce) under loomrun from 2 to 256 ranks, ROUNDS
# rounds (default 3) with the rank counts taking turns, over shared
# memory (one node) or TCP only (NET=tcp: LOOM_SHM_DISABLE=1).  Prints per
# rank count the medians and min-max of init (the max over ranks: what the
# job waited, the spawn of every process included; and the min: the last
# rank to arrive, close to the bootstrap's own cost), the first all-reduce
# (max over ranks: it makes lazy connections) and the descriptors a rank
# held, then the slope of each between successive counts (time ratio per
# step, beside what n log n growth would give).
#
#   bench/init-scaling.sh [BUILD]           (BUILD: default ./build)
#   RANKS="2 4 8 16 32 64 128 256" ROUNDS=3 NET=shm|tcp CONNECT=lazy|eager
set -u
B=${1:-build}
RANKS=${RANKS:-"2 4 8 16 32 64 128 256"}
ROUNDS=${ROUNDS:-3}
NET=${NET:-shm}
CONNECT=${CONNECT:-lazy}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ "$NET" = tcp ] && export LOOM_SHM_DISABLE=1
export LOOM_CONNECT="$CONNECT"
# Many ranks on few cores: the shared-memory FIFOs must fit /dev/shm
# (shm_layout.c bounds them) and each rank needs a few descriptors.
ulimit -n 65536 2>/dev/null || true

r=1
while [ "$r" -le "$ROUNDS" ]; do
  for n in $RANKS; do
    line=$(timeout 600 "$B/tools/loomrun" --timeout 550 -n "$n" "$B/bench/init-time" 2>"$tmp/err" |
      grep '^init-time:')
    if [ -z "$line" ]; then
      echo "init-time failed at $n ranks (round $r):" >&2
      tail -n 5 "$tmp/err" >&2
      continue
    fi
    echo "$line" | awk -v n="$n" '{ print n, $6, $8, $13, $19 }' >>"$tmp/runs"
  done
  r=$((r + 1))
done

echo "# bench/init-scaling.sh: $NET, LOOM_CONNECT=$CONNECT, $ROUNDS round(s), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# medians [min-max] over rounds; init and first all-reduce in ms (the max over ranks unless marked)"
sort -n -k1,1 "$tmp/runs" | awk '
function med(a, k,   i, j, t) {
  for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function flush(   m1, m2, m3, m4) {
  if (k == 0) return
  m1 = med(lo, k); lo1 = lo[1]; lo2 = lo[k]
  m2 = med(hi, k); hi1 = hi[1]; hi2 = hi[k]
  m3 = med(fst, k); f1 = fst[1]; f2 = fst[k]
  m4 = med(fd, k)
  printf "%6d  init %9.1f [%.1f-%.1f]  last rank %8.1f [%.1f-%.1f]  first %8.2f [%.2f-%.2f]  fds %4d\n",
    cur, m2, hi1, hi2, m1, lo1, lo2, m3, f1, f2, m4
  if (prev_n > 0)
    slope = slope sprintf("%6d -> %-6d init x%.2f  last rank x%.2f  first x%.2f   (n log n: x%.2f)\n",
      prev_n, cur, m2 / prev_hi, m1 / prev_lo, m3 / prev_f, cur * log(cur) / (prev_n * log(prev_n)))
  prev_n = cur; prev_hi = m2; prev_lo = m1; prev_f = m3
  k = 0
}
{ if ($1 != cur) { flush(); cur = $1 } k++; lo[k] = $2; hi[k] = $3; fst[k] = $4; fd[k] = $5 }
END { flush(); printf "# growth per step:\n%s", slope }'
