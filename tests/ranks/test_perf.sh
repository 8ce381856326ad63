#!/bin/bash
# loom-perf verifies every size (#wrong = 0) for both collectives.
. "$(dirname "$0")/lib.sh"
: "${LOOMPERF:?}"
run_ranks 4 300 "$LOOMPERF" -b 8 -e 64M -f 4 -n 2 -w 1
expect_count "Out of bounds values : 0 OK" 1 "loom-perf all-reduce 8 B .. 64 MB on 4 ranks, #wrong = 0"
run_ranks 3 300 "$LOOMPERF" -C allgather -b 8 -e 16M -f 8 -n 2 -w 1 -d bfloat16
expect_count "Out of bounds values : 0 OK" 1 "loom-perf all-gather bfloat16 on 3 ranks, #wrong = 0"
run_ranks 2 120 "$LOOMPERF" -b 1K -e 1M -f 32 -n 2 -w 1 -d int64 -o max
expect_count "Out of bounds values : 0 OK" 1 "loom-perf int64 max on 2 ranks"
finish
