#!/bin/bash
# Host IPC (LOOM_HOST_IPC_MIN, docs/performance.md): collectives on host
# buffers from loomMemAlloc read and write the peers' buffers directly on
# one node.  The whole collective matrix through it (LOOM_HOST_IPC_MIN=1:
# every size) on 2, 3 and 4 ranks, in place and out of place, on a host
# stream, and past several 64 KiB pieces with avg; the path is the one
# traced; a rank with malloc'd buffers makes every rank take the usual
# path, with right results, and the handshakes back off; ranks disagreeing on LOOM_HOST_IPC_MIN are
# named; below LOOM_HOST_IPC_MIN (256 KiB by default) and with 0 nothing
# changes; a rank that is not dumpable, or in another PID namespace, makes
# every rank take the usual path.
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/coll_test"
light=${LOOM_TEST_LIGHT:-0}
sizes=0,1,7,100,4099,65537
[ "$light" = 1 ] && sizes=0,7,4099

for n in 2 3 4; do
  LOOM_HOST_IPC_MIN=1 run_ranks $n 300 "$CT" -d host -s $sizes
  expect_count "cases passed" $n "collective matrix on loomMemAlloc host buffers through host IPC, $n ranks"
done
LOOM_HOST_IPC_MIN=1 run_ranks 3 300 "$CT" -d host -S 1 -s $sizes
expect_count "cases passed" 3 "collective matrix through host IPC queued on a host stream, 3 ranks"
# Several pieces per rank (a piece is 64 KiB), avg scaled piece by piece,
# PreMulSum (never through IPC).
LOOM_HOST_IPC_MIN=1 run_ranks 3 300 "$CT" -d host -s 300007 -t float32,bfloat16,int32 \
  -o sum,avg,max,premulsum -c allreduce,allgather,reducescatter,broadcast,reduce
expect_count "cases passed" 3 "host IPC past several 64 KiB pieces, sum/avg/max/premulsum, 3 ranks"

# The path taken: host IPC for loomMemAlloc buffers (an in-place and an
# out-of-place call per collective and rank) ...
LOOM_HOST_IPC_MIN=1 LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 "$CT" -d host \
  -c allreduce,allgather -s 7 -t int32 -o sum
expect_count "allreduce count 7 int32: host IPC" 4 "loomMemAlloc buffers: all-reduce goes through host IPC"
expect_count "allgather count 7 int32: host IPC" 4 "loomMemAlloc buffers: all-gather goes through host IPC"
# ... not below LOOM_HOST_IPC_MIN (256 KiB by default) ...
LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 "$CT" -d host -c allreduce -s 7,65535 \
  -t float32 -o sum
expect_count "host IPC\|through the transports" 0 "below the default LOOM_HOST_IPC_MIN: no handshake"
# ... from it (65536 float32 = 256 KiB) ...
LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 "$CT" -d host -c allreduce -s 65536 \
  -t float32 -o sum
expect_count "allreduce count 65536 float32: host IPC" 4 "from the default LOOM_HOST_IPC_MIN (256 KiB): host IPC"
# ... and never with 0.
LOOM_HOST_IPC_MIN=0 LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 "$CT" -d host \
  -c allreduce -s 7,1M -t float32 -o sum
expect_count "host IPC\|through the transports" 0 "LOOM_HOST_IPC_MIN=0: no handshake"
# A rank that is not dumpable: the peers could not open its memory through
# /proc (root could, so only the fallback's trace tells), so every rank
# takes the usual path.
LOOM_HOST_IPC_MIN=1 LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 \
  sh -c 'exec "$0" "$@" -D "$((LOOM_RANK != 1))"' "$CT" -d host -c allreduce,allgather -s 7 \
  -t int32 -o sum
expect_count "cases passed" 2 "rank 1 not dumpable: right results"
expect_count "allreduce count 7 int32: host buffers not all from loomMemAlloc: through the transports" 4 \
  "rank 1 not dumpable: every rank takes the usual path"
expect_count ": host IPC$" 0 "rank 1 not dumpable: no rank through host IPC"
# A rank in another PID namespace (a container sharing the host's
# /dev/shm): the peers could not open its memory through /proc/PID, so
# every rank takes the usual path; its shared-memory segment is not taken
# for a dead pid's (shm_segment.c).
if unshare --pid --fork --mount-proc true 2>/dev/null; then
  LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 \
    sh -c 'if [ "$LOOM_RANK" = 1 ]; then exec unshare --pid --fork --mount-proc "$0" "$@"; else exec "$0" "$@"; fi' \
    "$CT" -d host -c allreduce,allgather -s 1M -t float32 -o sum
  expect_count "cases passed" 2 "rank 1 in another PID namespace: right results"
  expect_count "host buffers not all from loomMemAlloc: through the transports" 6 \
    "rank 1 in another PID namespace: every rank takes the usual path"
  expect_count ": host IPC$" 0 "rank 1 in another PID namespace: no rank through host IPC"
else
  echo "# skipped: unshare --pid --fork --mount-proc is not allowed here"
fi
# ... and when one rank's buffers are malloc'd, every rank goes the usual
# way after the handshake.
for n in 2 3; do
  LOOM_HOST_IPC_MIN=1 LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks $n 300 \
    sh -c 'if [ "$LOOM_RANK" = 1 ]; then exec "$0" "$@"; else exec "$0" -d host "$@"; fi' \
    "$CT" -s 0,7,65537 -c allreduce,allgather,reducescatter,broadcast,reduce,alltoall -t int32,float32
  expect_count "cases passed" $n "rank 1 on malloc'd buffers, the others on loomMemAlloc's: right results, $n ranks"
  # Of the 256 (2 ranks) or 328 (3 ranks) host calls a rank makes here,
  # coll_test's own checks included, 9 shake hands: the wait doubles
  # after each handshake that finds malloc'd buffers (without the
  # back-off every call would).
  expect_count "host buffers not all from loomMemAlloc: through the transports" $((n * 9)) \
    "rank 1 on malloc'd buffers: every rank takes the usual path, handshakes backing off, $n ranks"
  expect_count ": host IPC$" 0 "rank 1 on malloc'd buffers: no rank through host IPC, $n ranks"
done

# Ranks that disagree (one exchanges buffers first, one does not) are
# named, not mixed.
run_ranks_keep_failing 2 60 sh -c 'LOOM_HOST_IPC_MIN=$LOOM_RANK exec "$0" "$@"' "$CT" -d host \
  -c allreduce -s 7 -t int32 -o sum
expect_count "FAIL: .*mismatched calls: rank 1 called a collective on host buffers of LOOM_HOST_IPC_MIN bytes or more" 2 \
  "LOOM_HOST_IPC_MIN set on one rank only: both fail naming the other's call"
check_no_leftovers coll_test
finish
