#!/bin/bash
# Every datatype x op x size (0 .. 65537 elements), in place and out of
# place, for all-reduce and all-gather, on 1, 2, 3, 4, 5 and 8 ranks.
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/coll_test"
for n in 1 2 3 4 5 8; do
  run_ranks $n 300 "$CT"
  expect_count "cases passed" $n "full matrix on $n ranks"
done
# Many pipeline slices per block, a few sockets per peer, odd counts.
LOOM_CHUNK_BYTES=4096 LOOM_SOCKET_NSOCKS=3 run_ranks 3 300 "$CT" -s 1,5000,65537,300007 -o sum,avg,max
expect_count "cases passed" 3 "small slices, 3 sockets, 3 ranks"
LOOM_SOCKET_NSOCKS=1 run_ranks 4 300 "$CT" -s 1,1021,262147 -t float32,bfloat16,int64,uint8
expect_count "cases passed" 4 "1 socket, 4 ranks"
# Repeated calls on one communicator.
run_ranks 5 300 "$CT" -s 3,4099 -t float16,int32 -o sum,prod -r 20
expect_count "cases passed" 5 "20 repetitions on 5 ranks"
check_no_leftovers coll_test
finish
