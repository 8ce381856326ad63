#!/bin/bash
# Large messages up to 64 MB, checked exactly.
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/coll_test"
run_ranks 2 300 "$CT" -s 16M -t float32 -o sum -c both   # 64 MB
expect_count "cases passed" 2 "64 MB float32 sum, 2 ranks"
run_ranks 3 300 "$CT" -s 4M -t float32 -o sum -c reducescatter,broadcast,reduce,alltoall
expect_count "cases passed" 3 "16 MB reduce-scatter, broadcast, reduce, all-to-all, 3 ranks"
run_ranks 4 300 "$CT" -s 16M -t float32 -o sum -c allreduce
expect_count "cases passed" 4 "64 MB float32 all-reduce, 4 ranks"
run_ranks 8 300 "$CT" -s 2M -t float32 -c allgather       # 64 MB gathered
expect_count "cases passed" 8 "64 MB all-gather result, 8 ranks"
run_ranks 3 300 "$CT" -s 3000017 -t bfloat16,float16,int8,float64 -o avg,min -c both
expect_count "cases passed" 3 "3M odd count, half types, 3 ranks"
check_no_leftovers coll_test
finish
