#!/bin/bash
# The shared-memory transport: chosen for ranks of one host (and not with
# LOOM_SHM_DISABLE=1), single copy where allowed with LOOM_SHM_CMA=1,
# reductions read in place or staged (LOOM_SHM_DIRECT_REDUCE), a /dev/shm
# too small explained, segments of killed ranks removed, nothing left in
# /dev/shm.
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/coll_test"

LOOM_DEBUG=INFO run_ranks 3 120 "$CT" -s 1,70001 -t float32 -o sum
expect_count "cases passed" 3 "3 ranks over shm"
expect_count "2 peer(s) over shm, 0 over tcp" 3 "every rank routes its 2 local peers over shm"
expect_count "segment unlinked" 3 "every segment unlinked once mapped"
expect_count "single copy .*: off, two copies - LOOM_SHM_CMA=0" 3 "two copies by default (LOOM_SHM_CMA=0)"
expect_count "reductions read the FIFO in place: on" 3 "reductions read the FIFO in place by default"
# Reductions through a staging slot (the path network peers take), every
# op, slices of several cells and more than a slice (LOOM_CHUNK_BYTES 512K).
LOOM_DEBUG=INFO LOOM_SHM_DIRECT_REDUCE=0 run_ranks 3 120 "$CT" -s 1,70001,300007 -t float32,int32 -o sum,prod,max,avg
expect_count "cases passed" 3 "3 ranks over shm, reductions staged (LOOM_SHM_DIRECT_REDUCE=0)"
expect_count "reductions read the FIFO in place: off" 3 "LOOM_SHM_DIRECT_REDUCE=0: staged"
LOOM_DEBUG=INFO LOOM_SHM_CMA=1 run_ranks 3 120 "$CT" -s 1,70001,300007 -t float32,int8 -o sum,max
expect_count "cases passed" 3 "3 ranks over shm, single copy (LOOM_SHM_CMA=1)"
expect_count "single copy (process_vm_readv) from 64 KiB: on" 3 "LOOM_SHM_CMA=1: single copy on (root, same user)"
LOOM_DEBUG=INFO LOOM_SHM_DISABLE=1 run_ranks 3 120 "$CT" -s 1,70001 -t float32 -o sum
expect_count "cases passed" 3 "3 ranks with LOOM_SHM_DISABLE=1"
expect_count "0 peer(s) over shm, 2 over tcp" 3 "LOOM_SHM_DISABLE=1 routes every peer over tcp"

# A segment whose creator is gone (a rank killed during set-up) is removed
# by the next job on the host.
sh -c 'exit 0' & dead=$!; wait $dead
stale=/dev/shm/loom-$dead-0badf00d
: > "$stale"
LOOM_DEBUG=INFO run_ranks 2 120 "$CT" -s 1 -t int8 -o sum
if [ ! -e "$stale" ] && printf '%s\n' "$out" | grep -q "removed /loom-$dead-0badf00d"; then
  pass "stale segment of dead pid $dead removed and logged"
else
  fail "stale segment $stale: still there or not logged"; rm -f "$stale"
fi

# /dev/shm too small: a clear error naming the size and LOOM_SHM_DISABLE.
if unshare -m true 2>/dev/null; then
  out=$(unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs /dev/shm &&
        timeout -k 5 70 "$0" --keep-going --timeout 60 -n 3 "$1" -s 1 -t int8 -o sum' \
        "$LOOMRUN" "$CT" 2>&1)
  expect_count "FAIL: loomCommInitRank.*needs [0-9]* bytes in /dev/shm .*LOOM_SHM_DISABLE=1" 3 \
    "/dev/shm too small: every rank says how much it needs and how to avoid it"
else
  echo "SKIP: /dev/shm too small (cannot unshare the mount namespace here)"
fi
check_no_leftovers coll_test
finish
