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

# LOOM_TEST_LIGHT=1 (the sanitizer build in scripts/test.sh, which looks
# for memory errors on every code path, not for every shape) runs fewer
# rank counts of the full matrix, over TCP too, smaller matrices on
# nodes and over one socket, and leaves out the 8-rank large run; the
# other runs below are kept.
light=${LOOM_TEST_LIGHT:-0}
counts="1 2 3 4 5 6 7 8"
tcp_counts="3 8"
[ "$light" = 1 ] && counts="1 3" && tcp_counts="3"
for n in $counts; do
  run_ranks $n 300 "$CT"
  expect_count "cases passed" $n "every collective, full matrix on $n ranks"
  expect_every_coll "$n ranks"
done
# The same matrix over TCP (ranks of one host use shared memory by default).
for n in $tcp_counts; do
  LOOM_SHM_DISABLE=1 run_ranks $n 300 "$CT"
  expect_count "cases passed" $n "every collective over TCP (LOOM_SHM_DISABLE=1), $n ranks"
done
# Above the 512 KiB chunk: pipelined chain broadcast/reduce and rings, odd counts.
run_ranks 5 300 "$CT" -s 1,3,1021,300007 -t float64,float16,int8 -o sum,avg,min,premulsum
expect_count "cases passed" 5 "up to 2.4 MB (300007 float64), 5 ranks"
expect_every_coll "large, 5 ranks"
if [ "$light" != 1 ]; then
  run_ranks 8 300 "$CT" -s 1021,262147 -t float32,bfloat16 -o sum,max,premulsum
  expect_count "cases passed" 8 "up to 1 MB (262147 float32), 8 ranks"
fi
# Many pipeline slices per block, a few sockets per peer, odd counts.
LOOM_CHUNK_BYTES=4096 LOOM_SOCKET_NSOCKS=3 run_ranks 3 300 "$CT" -s 1,5000,65537,300007 \
  -t int8,uint32,float16,float64 -o sum,avg,max,premulsum
expect_count "cases passed" 3 "small slices, 3 sockets, 3 ranks"
LOOM_CHUNK_BYTES=4096 run_ranks 7 300 "$CT" -s 3,1021,70001 -t float64,int8,bfloat16 -o sum,min,premulsum
expect_count "cases passed" 7 "small slices, 7 ranks"
one_sock_types=float32,bfloat16,int64,uint8
[ "$light" = 1 ] && one_sock_types=float32,uint8
LOOM_SOCKET_NSOCKS=1 run_ranks 4 300 "$CT" -s 1,1021,262147 -t $one_sock_types -o sum,prod,avg
expect_count "cases passed" 4 "1 socket, 4 ranks"
# Ranks sharing one CPU (a rank waiting for a peer that runs on its own
# CPU yields from its first turn, engine_wait.c): 3 ranks on CPU 0.
out=$(timeout -k 5 130 taskset -c 0 "$LOOMRUN" --tag-output --timeout 120 -n 3 "$CT" \
  -s 1,1021,70001 -t float32,int8 -o sum,max -r 3 2>&1)
rc=$?
launch_checks 0 120 "3 ranks on CPU 0"
expect_count "cases passed" 3 "3 ranks on one CPU (taskset -c 0), repeated calls"
# Repeated calls on one communicator (PreMulSum ops created and freed each time).
run_ranks 5 300 "$CT" -s 3,4099 -t float16,int32 -o sum,prod,premulsum -r 20
expect_count "cases passed" 5 "20 repetitions on 5 ranks"
# Every algorithm LOOM_ALGO can force, at sizes the tuner would give another
# one, across slices (4 KiB chunks: the one-shot fold works slice by slice).
LOOM_ALGO='allreduce:oneshot;allgather:ring;broadcast:chain;reduce:chain' LOOM_CHUNK_BYTES=4096 \
  run_ranks 3 300 "$CT" -c allreduce,allgather,broadcast,reduce,barrier -s 1,7,4099,70001 \
  -t float32,float16,int8,float64 -o sum,avg,max,premulsum
expect_count "cases passed" 3 "LOOM_ALGO oneshot/ring/chain, 3 ranks"
LOOM_ALGO=allreduce:oneshot LOOM_CHUNK_BYTES=4096 run_ranks 6 300 "$CT" -c allreduce \
  -s 1,1021,70001 -t bfloat16,int32,float64 -o sum,prod,min,avg
expect_count "cases passed" 6 "LOOM_ALGO oneshot, 6 ranks"
LOOM_ALGO=allgather:oneshot LOOM_CHUNK_BYTES=4096 run_ranks 5 300 "$CT" -c allgather \
  -s 1,1021,70001 -t int8,float64 -o sum
expect_count "cases passed" 5 "LOOM_ALGO allgather:oneshot, 5 ranks"
LOOM_ALGO=ring,tree run_ranks 4 300 "$CT" -c allreduce,allgather,reducescatter,broadcast,reduce \
  -s 1,5,1021,262147 -t float32,int64 -o sum,max
expect_count "cases passed" 4 "LOOM_ALGO ring/tree, 4 ranks"
LOOM_ALGO=rd run_ranks 4 300 "$CT" -c allreduce,allgather -s 1,1021,262147 -t float32,uint8 -o sum,min
expect_count "cases passed" 4 "LOOM_ALGO rd at every size, 4 ranks"
# rd cannot run on 3 ranks: rank 0 says so once per communicator and the tuner chooses.
LOOM_ALGO=allreduce:rd run_ranks 3 300 "$CT" -c allreduce -s 1,70001 -t float32 -o sum
expect_count "cases passed" 3 "LOOM_ALGO rd on 3 ranks falls back"
expect_count "allreduce cannot use rd on 3 ranks" 1 "LOOM_ALGO rd on 3 ranks: WARN once"
# A spec that does not parse fails init on every rank with the reason.
LOOM_ALGO=allgather:tree run_ranks_failing 2 60 "$CT" -c allreduce -s 1
if [ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q 'LOOM_ALGO="allgather:tree": allgather has no algorithm tree'; then
  pass "LOOM_ALGO=allgather:tree: init fails, saying why"
else
  fail "LOOM_ALGO=allgather:tree: expected a failed init naming the reason (rc=$rc)"
  printf '%s\n' "$out" | tail -n 10
fi
# LOOM_PROTO=LL (16 KiB pipeline slices) everywhere it applies, and a bad
# protocol spec failing init with the reason.
LOOM_PROTO=LL run_ranks 3 300 "$CT" -c allreduce,allgather,reducescatter,broadcast,reduce \
  -s 1,1021,70001,300007 -t float32,int8 -o sum,max
expect_count "cases passed" 3 "LOOM_PROTO=LL on 3 ranks, every collective with a choice"
LOOM_PROTO=LL LOOM_ALGO=allreduce:tree run_ranks 4 300 \
  sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"' "$CT" -c allreduce \
  -s 1,70001,300007 -t float32 -o sum,avg
expect_count "cases passed" 4 "LOOM_PROTO=LL with the double binary tree on 2 nodes x 2 ranks"
# Ring all-reduce on 2 and 3 channels (rings in other orders over parts of
# the data), one node of 3 and 2 nodes x 2.
LOOM_ALGO=allreduce:ring LOOM_NCHANNELS=3 run_ranks 3 300 "$CT" -c allreduce \
  -s 1,1021,70001,300007 -t float32,int8 -o sum,max,avg
expect_count "cases passed" 3 "LOOM_NCHANNELS=3, ring all-reduce on 3 ranks"
LOOM_DEBUG=TRACE LOOM_ALGO=allreduce:ring LOOM_NCHANNELS=2 run_ranks 4 300 \
  sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"' "$CT" -c allreduce \
  -s 1021,300007 -t float32 -o sum,avg
expect_count "cases passed" 4 "LOOM_NCHANNELS=2, ring all-reduce on 2 nodes x 2 ranks"
expect_count "\[0\] .*allreduce count 300007 float32: ring (by node, channels)" 4 "LOOM_NCHANNELS=2: the channel rings ran (sum, avg; in and out of place)"
LOOM_PROTO=gather:LL run_ranks_failing 2 60 "$CT" -c allreduce -s 1
if [ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q 'LOOM_PROTO="gather:LL": "gather" is not a collective with a choice of protocol'; then
  pass "LOOM_PROTO=gather:LL: init fails, saying why"
else
  fail "LOOM_PROTO=gather:LL: expected a failed init naming the reason (rc=$rc)"
  printf '%s\n' "$out" | tail -n 10
fi
# Two "nodes" of two ranks on this machine (LOOM_HOSTID per rank): shared
# memory inside a node, TCP between them, the whole matrix.
light_matrix=
[ "$light" = 1 ] && light_matrix="-s 0,1,1021,70001 -t float32,int8,float16 -o sum,max,premulsum"
LOOM_DEBUG=INFO run_ranks 4 300 sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"' "$CT" $light_matrix
expect_count "cases passed" 4 "2 nodes x 2 ranks by LOOM_HOSTID, every collective"
expect_count "1 peer(s) over shm, 2 over tcp" 4 "2 nodes x 2 ranks: shm inside a node, tcp across"
# Nodes interleaved (rank r on node r mod 2) and 2 x 3: the hierarchical
# all-reduce and the rings ordered by node, whole matrix / large sizes;
# hier forced down to the smallest sizes.
LOOM_DEBUG=INFO run_ranks 4 300 sh -c 'LOOM_HOSTID=node$((LOOM_RANK % 2)) exec "$0" "$@"' "$CT" $light_matrix
expect_count "cases passed" 4 "2 interleaved nodes x 2 ranks, every collective"
expect_count "topology: 2 nodes x 2 ranks; .*hierarchical" 1 "2 interleaved nodes: rank 0 logs the topology and hierarchical"
run_ranks 6 300 sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 3)) exec "$0" "$@"' "$CT" \
  -c allreduce,allgather,reducescatter -s 1,1021,70001,300007 -t float32,int8,float16 -o sum,avg,max
expect_count "cases passed" 6 "2 nodes x 3 ranks, large sizes"
LOOM_ALGO=allreduce:hier LOOM_CHUNK_BYTES=4096 run_ranks 6 300 \
  sh -c 'LOOM_HOSTID=node$((LOOM_RANK % 3)) exec "$0" "$@"' "$CT" -c allreduce,barrier \
  -s 1,2,7,1021,70001 -t float32,bfloat16,int64 -o sum,prod,min,avg,premulsum
expect_count "cases passed" 6 "LOOM_ALGO=hier on 3 interleaved nodes x 2 ranks, every size"
# The double binary tree forced (small messages on many nodes pick it by
# themselves above 8 ranks), on 3 nodes of 2 and on 5 single-rank nodes.
LOOM_ALGO=allreduce:tree LOOM_CHUNK_BYTES=4096 run_ranks 6 300 \
  sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"' "$CT" -c allreduce,barrier \
  -s 1,2,7,1021,70001 -t float32,float16,int32 -o sum,max,avg,premulsum
expect_count "cases passed" 6 "LOOM_ALGO=tree on 3 nodes x 2 ranks, every size"
LOOM_ALGO=allreduce:tree run_ranks 5 300 sh -c 'LOOM_HOSTID=node$LOOM_RANK exec "$0" "$@"' "$CT" \
  -c allreduce -s 1,1021,70001 -t float64,uint8 -o sum,min
expect_count "cases passed" 5 "LOOM_ALGO=tree on 5 nodes x 1 rank"
# Recursive halving-doubling forced (power-of-two ranks; not the tuner's
# choice on this machine), every size across slices.
LOOM_ALGO=allreduce:rhd LOOM_CHUNK_BYTES=4096 run_ranks 4 300 "$CT" -c allreduce,barrier \
  -s 1,3,7,1021,70001 -t float32,float16,int32 -o sum,avg,max,premulsum
expect_count "cases passed" 4 "LOOM_ALGO=rhd on 4 ranks, every size"
LOOM_ALGO=allreduce:rhd run_ranks 8 300 "$CT" -c allreduce -s 1,1021,262147 -t float32,int8 -o sum,min
expect_count "cases passed" 8 "LOOM_ALGO=rhd on 8 ranks"
check_no_leftovers coll_test
finish
