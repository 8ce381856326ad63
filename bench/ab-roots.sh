#!/bin/bash
# ab-roots.sh — one bootstrap root against several (loomCommInitRankScalable),
# interleaved: per round (ROUNDS, default 3) bench/init-time runs N ranks
# (RANKS, default 256) over TCP with one root, then with ROOTS (default 8),
# at LOOM_DEBUG_SUBSYS=INIT, and prints init-time's line and each root's
# line ("N hellos over T ms, placements sent in P ms; root thread CPU C ms").
#
#   bench/ab-roots.sh [BUILD]
set -u
B=${1:-build}
RANKS=${RANKS:-256}
ROOTS=${ROOTS:-8}
ROUNDS=${ROUNDS:-3}
export LOOM_SHM_DISABLE=1 LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=INIT
echo "# $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); $RANKS ranks, tcp, 1 root against $ROOTS"
for r in $(seq "$ROUNDS"); do
  for k in 1 "$ROOTS"; do
    d=$(mktemp -d)
    args=()
    [ "$k" != 1 ] && args=(--roots "$k" "$d")
    timeout 600 "$B/tools/loomrun" --timeout 550 -n "$RANKS" "$B/bench/init-time" "${args[@]}" 2>&1 |
      grep -E "init-time:|bootstrap root" | sed 's/.*bootstrap root [^ ]*/root/' |
      awk -v k="$k" -v r="$r" '{ print "round " r " roots " k ": " $0 }'
    rm -rf "$d"
  done
done
