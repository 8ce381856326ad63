#!/bin/bash
# coll_test: every collective (all-reduce, all-gather, reduce-scatter,
# broadcast, reduce, all-to-all, all-to-all-v, gather, scatter, send/recv
# rings and all-pairs groups, barrier) x every datatype x op (PreMulSum
# included) x size (0 .. 65537 elements) x root, in place and out of place,
# on 1 to 8 ranks; then sizes above the 512 KiB pipeline
# chunk (chain and ring algorithms, many slices), small slices with several
# sockets, one socket, and repeated calls on one communicator.
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/coll_test"

# $out must hold rank 0's per-collective line with no collective at 0 cases.
expect_every_coll() {
  expect_count "by collective:\( [a-z]* [1-9][0-9]*\)*\$" 1 "$1: every selected collective ran"
}

# LOOM_TEST_LIGHT=1 (the sanitizer build in scripts/test.sh) runs fewer
# rank counts of the full matrix; the runs below are kept.
counts="1 2 3 4 5 6 7 8"
[ "${LOOM_TEST_LIGHT:-0}" = 1 ] && counts="1 3 4 8"
for n in $counts; do
  run_ranks $n 300 "$CT"
  expect_count "cases passed" $n "every collective, full matrix on $n ranks"
  expect_every_coll "$n ranks"
done
# The same matrix over TCP (ranks of one host use shared memory by default).
for n in 3 8; do
  LOOM_SHM_DISABLE=1 run_ranks $n 300 "$CT"
  expect_count "cases passed" $n "every collective over TCP (LOOM_SHM_DISABLE=1), $n ranks"
done
# Above the 512 KiB chunk: pipelined chain broadcast/reduce and rings, odd counts.
run_ranks 5 300 "$CT" -s 1,3,1021,300007 -t float64,float16,int8 -o sum,avg,min,premulsum
expect_count "cases passed" 5 "up to 2.4 MB (300007 float64), 5 ranks"
expect_every_coll "large, 5 ranks"
run_ranks 8 300 "$CT" -s 1021,262147 -t float32,bfloat16 -o sum,max,premulsum
expect_count "cases passed" 8 "up to 1 MB (262147 float32), 8 ranks"
# Many pipeline slices per block, a few sockets per peer, odd counts.
LOOM_CHUNK_BYTES=4096 LOOM_SOCKET_NSOCKS=3 run_ranks 3 300 "$CT" -s 1,5000,65537,300007 \
  -t int8,uint32,float16,float64 -o sum,avg,max,premulsum
expect_count "cases passed" 3 "small slices, 3 sockets, 3 ranks"
LOOM_CHUNK_BYTES=4096 run_ranks 7 300 "$CT" -s 3,1021,70001 -t float64,int8,bfloat16 -o sum,min,premulsum
expect_count "cases passed" 7 "small slices, 7 ranks"
LOOM_SOCKET_NSOCKS=1 run_ranks 4 300 "$CT" -s 1,1021,262147 -t float32,bfloat16,int64,uint8 -o sum,prod,avg
expect_count "cases passed" 4 "1 socket, 4 ranks"
# Repeated calls on one communicator (PreMulSum ops created and freed each time).
run_ranks 5 300 "$CT" -s 3,4099 -t float16,int32 -o sum,prod,premulsum -r 20
expect_count "cases passed" 5 "20 repetitions on 5 ranks"
check_no_leftovers coll_test
finish
