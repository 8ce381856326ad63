#!/bin/bash
# Groups (send/recv in any order, fusion), streams and events, split,
# loomCommInitAll, abort, mismatched calls, bad arguments of the newer
# calls and receives from any rank: one api_test case per launch, exact
# results, every wait bounded.
. "$(dirname "$0")/lib.sh"
AT="$TESTBIN/ranks/api_test"

for n in 2 3 5; do
  run_ranks $n 60 "$AT" --group-p2p
  expect_count "group-p2p ok" $n "send/recv in groups (ring, all pairs shuffled, self, in-order pairs) on $n ranks"
done
# Many slices per message (more than the 64 receives posted at once), one socket.
LOOM_CHUNK_BYTES=4096 LOOM_SOCKET_NSOCKS=1 run_ranks 4 60 "$AT" --group-p2p
expect_count "group-p2p ok" 4 "send/recv in groups with 4 KB slices and 1 socket on 4 ranks"

for n in 2 3; do
  run_ranks $n 60 "$AT" --group-fusion
  expect_count "group-fusion ok" $n "1000 fused all-reduces, 100 fused all-gathers, dependent calls on $n ranks"
  printf '%s\n' "$out" | grep "timing" | sed 's/^/  /'
done
LOOM_BUCKET_BYTES=65536 run_ranks 3 60 "$AT" --group-fusion
expect_count "group-fusion ok" 3 "fusion into 64 KB buckets on 3 ranks"

for n in 2 3 4; do
  run_ranks $n 60 "$AT" --streams
  expect_count "streams ok" $n "two comms on two streams progress at once; events, queries, stream errors on $n ranks"
  expect_count "stream error surfaced: .*count 10" $n "a mismatch on a stream surfaces in loomStreamSynchronize on $n ranks"
done

for n in 3 5; do
  run_ranks $n 60 "$AT" --split
  expect_count "split ok" $n "loomCommSplit (reversed keys, NOCOLOR, nested) on $n ranks"
done

run_ranks 1 60 "$AT" --initall
expect_count "initall ok" 1 "loomCommInitAll(4) driven by one thread in groups"

for n in 3 4; do
  run_ranks $n 60 "$AT" --abort
  expect_count "abort ok" $n "loomCommAbort from a thread on $n ranks"
  expect_count "after loomCommAbort: .*interrupted" 1 "the blocked call on the aborting rank returned at once ($n ranks)"
  expect_count "learned of rank 1's abort" $((n - 1)) "the other $((n - 1)) ranks fail naming rank 1"
done

for n in 3 4 5; do
  run_ranks $n 60 "$AT" --mismatch
  expect_count "mismatch ok" $n "mismatched collective/count/type/op/fusion, send/recv sizes on $n ranks"
  expect_count "mismatch \(allreduce vs allgather\|count 10 vs 12\|int32 vs float32\|max vs sum\|fused group vs one that cannot fuse\): invalid usage at the mismatched call" $((5 * n)) "5 collective mismatches (one from fusion) x $n ranks: loomInvalidUsage at the call, naming both calls"
  expect_count "rank 1: mismatch send 10 vs recv 12 elements: invalid usage at the mismatched call" 1 "send/recv size mismatch: the receiver fails at the call"
  expect_count "send 10 vs recv 12 elements: invalid usage at" $n "send/recv size mismatch: every rank fails at that call or its next"
done
for n in 2 3; do
  run_ranks $n 120 "$AT" --mismatch-matrix
  expect_count "mismatch-matrix ok" $n "every collective x every mismatching argument (kind, count, datatype, op, root, all-to-all-v counts, split, finalize), 12 and 1M elements, on $n ranks: loomInvalidUsage at the call on every rank, naming both calls"
done
LOOM_SHM_DISABLE=1 run_ranks 3 120 "$AT" --mismatch-matrix
expect_count "mismatch-matrix ok" 3 "the mismatch matrix over TCP only on 3 ranks"
run_ranks 3 60 "$AT" --mismatch-root
expect_count "mismatch-root ok" 3 "12-element broadcasts with different roots: loomInvalidUsage naming both roots on 3 ranks"
run_ranks 3 60 "$AT" --mismatch-root-big
expect_count "mismatch-root-big ok" 3 "4 MB broadcasts with different roots: loomInvalidUsage naming both roots on 3 ranks"

for n in 1 3; do
  run_ranks $n 60 "$AT" --bad-args
  expect_count "bad-args ok" $n "bad arguments of the newer calls on $n ranks"
  expect_count "-> invalid argument:" $((n * 49)) "49 invalid calls rejected with a message on each of $n ranks"
  expect_count "-> invalid usage:" $((2 * n)) "loomGroupEnd without loomGroupStart, a group with two streams on one comm: invalid usage on each of $n ranks"
done

for n in 2 3 5; do
  run_ranks $n 60 "$AT" --any-source
  expect_count "any-source ok" $n "loomRecvAny: fan-in of 3 sizes in sender order with barriers in between, on a stream, a late sender behind a collective, bad arguments, a timeout that leaves the communicator usable, on $n ranks"
  expect_count "nobody sends: timeout waiting for a peer: rank 0: recv from any rank: no message arrived for 300 ms" 1 "loomRecvAny times out after the communicator's timeout with loomTimeout ($n ranks)"
done
LOOM_SHM_DISABLE=1 LOOM_SOCKET_NSOCKS=1 LOOM_CHUNK_BYTES=4096 run_ranks 4 60 "$AT" --any-source
expect_count "any-source ok" 4 "loomRecvAny over TCP only, one socket, 4 KB slices, on 4 ranks"
LOOM_SHM_DISABLE=1 run_ranks 3 60 "$AT" --any-source
expect_count "any-source ok" 3 "loomRecvAny over TCP only, striped sockets, on 3 ranks"
PLUGDIR="$TESTBIN/../transports/tcpplug/.libs"
if [ -e "$PLUGDIR/libloom-net-tcpplug.so" ]; then
  ANY_SOURCE_UNSUPPORTED=1 LD_LIBRARY_PATH="$PLUGDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    LOOM_NET_PLUGIN=tcpplug LOOM_SHM_DISABLE=1 run_ranks 3 60 "$AT" --any-source
  expect_count "over a plugin without probe: invalid argument: .*rank 1 is reached over the \"tcpplug\" transport, which cannot look at a message before receiving it" 1 \
    "loomRecvAny over a plugin without probe: loomInvalidArgument naming the peer and the transport"
  expect_count "any-source ok" 3 "the communicator stays usable after it"
else
  skip "loomRecvAny over a plugin without probe: the TCP plugin was not built"
fi

for k in "2 1" "4 3" "5 1"; do
  set -- $k
  LATE_RANK=$2 LOOM_STRAGGLER_WARN_MS=500 run_ranks $1 60 "$AT" --straggler
  expect_count "straggler ok" $1 "a rank 2.5 s late on $1 ranks: the call completes, the next one does not warn, a split after it works"
  expect_count "LOOM WARN rank [0-9]*: allreduce(count 1, int32, sum) #1 has waited [0-9]* ms for rank $2, which has not joined it" $(($1 - 1)) \
    "LOOM_STRAGGLER_WARN_MS=500: every other rank warns once naming late rank $2 ($1 ranks)"
  expect_count "straggler callback: late rank $2: " $(($1 - 1)) "loomCommSetStragglerCallback gets the same, once per waiting rank ($1 ranks)"
done

check_no_leftovers api_test
finish
