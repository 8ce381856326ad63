#!/bin/sh
# ab-init.sh — a communicator's start in two builds, interleaved: the
# before/after evidence for a change to init (bootstrap, topology,
# transports).  Per round (ROUNDS, default 3) and rank count (RANKS,
# default 2 32 256), the builds take turns running bench/init-time under
# loomrun, over TCP only (NET=tcp, the default: LOOM_SHM_DISABLE=1) or
# shared memory (NET=shm); the table gives medians [min-max] and the
# ratio after/before of the medians.
#
#   bench/ab-init.sh BEFORE_BUILD AFTER_BUILD
#
# Rows: "last-N" the smallest init over ranks (the last rank to arrive:
# the bootstrap's own cost, without loomrun's spawning), "init-N" the
# largest (what the job waited), "first-N" the first 8-byte all-reduce
# (max over ranks), all in ms.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BUILD AFTER_BUILD" >&2; exit 2; }
RANKS=${RANKS:-"2 32 256"}
ROUNDS=${ROUNDS:-3}
NET=${NET:-tcp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ "$NET" = tcp ] && export LOOM_SHM_DISABLE=1

for r in $(seq "$ROUNDS"); do
  for n in $RANKS; do
    for who in before after; do
      if [ "$who" = before ]; then b=$1; else b=$2; fi
      timeout 600 "$b/tools/loomrun" --timeout 550 -n "$n" "$b/bench/init-time" 2>/dev/null |
        awk -v n="$n" -v who="$who" '/^init-time:/ {
          print "last", who, n, $6; print "init", who, n, $8; print "first", who, n, $13 }' \
          >>"$tmp/all"
    done
  done
  echo "round $r of $ROUNDS done" >&2
done

echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); $ROUNDS interleaved rounds, $NET"
echo "# before: $1   after: $2   (ms; last = min init over ranks, init = max, first = first all-reduce)"
printf "%-10s %10s  %-22s %-22s %12s\n" case ranks before after after/before
awk -v whos="before after" -v ratios="after/before" -f "$(dirname "$0")/median-table.awk" \
  "$tmp/all" | sort -k1,1 -k2,2n
