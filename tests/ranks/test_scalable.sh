#!/bin/bash
# loomCommInitRankScalable: the rendezvous spread over several bootstrap
# roots (scalable_test.c).  Verified collectives after init with 1, 2, 3
# and as many roots as ranks, over shared memory and over TCP; nodes
# (LOOM_HOSTID) whose ranks fall in two roots' blocks still work and are
# warned about; a rank that passes the ids in another order fails at once
# and the others within the bootstrap timeout, naming it; bad arguments
# return loomInvalidArgument at once.
. "$(dirname "$0")/lib.sh"
ST="$TESTBIN/ranks/scalable_test"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
n=8

# run_k K [PREFIX...] -- [ARGS...] — n ranks, K roots, a fresh id
# directory; PREFIX runs each rank (sh -c ...), ARGS follow the directory.
# lib.sh's checks as run_ranks's: the launch must exit 0 (with
# --reverse-last a rank exits 0 once its init failed as it must).
run_k() {
  k=$1; shift
  pre=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do pre+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  rm -rf "$work/ids" && mkdir "$work/ids"
  out=$(timeout -k 5 130 "$LOOMRUN" --tag-output --keep-going --timeout 120 -n $n \
    "${pre[@]}" "$ST" -k "$k" "$work/ids" "$@" 2>&1)
  rc=$?
  launch_checks 0 120 "$n ranks, $k root(s) $*"
}

for k in 1 2 3 $n; do
  run_k $k
  expect_count ": ok$" $n "$n ranks, $k root(s), shared memory: sweep, all-gather, ring verified (rc $rc)"
done
LOOM_SHM_DISABLE=1 run_k 3
expect_count ": ok$" $n "$n ranks, 3 roots, TCP only: verified (rc $rc)"

# 2 nodes of 4 ranks over 3 roots (blocks 0-1, 2-4, 5-7): each node spans
# two blocks, so part of it reaches the rest over TCP; said once per node.
hostid='LOOM_HOSTID=node$((LOOM_RANK / 4)) exec "$0" "$@"'
run_k 3 sh -c "$hostid"
expect_count ": ok$" $n "2 nodes split over 3 roots' blocks: verified (rc $rc)"
expect_count "WARN.*this node's 4 ranks fall in more than one of the 3 bootstrap roots' blocks" 2 \
  "each split node warned about once, by its first rank"
# The same nodes over 2 roots (blocks 0-3, 4-7): one block a node, no warning.
run_k 2 sh -c "$hostid"
expect_count ": ok$" $n "2 nodes over 2 roots, a block each: verified (rc $rc)"
expect_count "bootstrap roots' blocks" 0 "no warning when every node is in one block"

# The last rank passes the ids in reverse order: it says hello to another
# root than its block's, which refuses it at once; the other roots give up
# at the bootstrap timeout naming it.
start=$SECONDS
LOOM_BOOTSTRAP_TIMEOUT=4 run_k 3 -- --reverse-last
took=$((SECONDS - start))
expect_count "^\[$((n - 1))\] rank $((n - 1)): init failed: .*the same ids in the same order" 1 \
  "ids in another order: that rank is told why"
# Roots 0 and 2 wait for it (root 1 does not): their members (0, 1, 5,
# 6) and neighbours (2, 4) are told it never arrived; rank 3, answered by
# root 1, fails forming the ring with the ranks that failed.
expect_count "init failed: .*ranks $((n - 1)) (1 of [0-9]*) never arrived" $((n - 2)) \
  "ids in another order: the ranks that waited on it at roots 0 and 2 name it"
expect_count ": init failed: " $n "ids in another order: every rank's init fails, none hangs"
if [ "$took" -le 30 ]; then pass "all failed within ${took} s (timeout 4 s)"; else fail "took ${took} s"; fi

out=$("$ST" --args 2>&1); rc=$?
expect_count "^args: ok$" 1 "bad arguments: loomInvalidArgument at once, each with a message (rc $rc)"
out=$(LOOM_COMM_ID=127.0.0.1:1 "$ST" --args 2>&1); rc=$?
expect_count "^args: ok$" 1 "ids from LOOM_COMM_ID refused when there are several (rc $rc)"
printf '%s\n' "$out" | head -3

check_no_leftovers scalable_test
finish
