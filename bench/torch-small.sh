#!/bin/sh
# torch-small.sh — a small all_reduce from Python against Loom's own C
# latency, interleaved: each round runs torch-bench.py's latency part
# (4 B, 1000 calls) with small calls on the caller's thread (the default)
# and with them queued on the stream (LOOM_TORCH_INLINE_BYTES=0), and
# loom-perf's 4 B all-reduce (-n 1000 -w 100).  ROUNDS (default 5).
# Prints each round's three figures (us); docs/performance.md has the
# medians.
#
#   bench/torch-small.sh BUILD
set -u
B=$1
export PYTHONPATH="$B/python" LD_LIBRARY_PATH="$B/.libs"
here=$(dirname "$0")
echo "round inline_us queued_us c_us"
for r in $(seq "${ROUNDS:-5}"); do
  a=$(/usr/bin/python3 "$here/torch-bench.py" --parts latency --rounds 1 2>/dev/null |
        sed -n 's/^small all_reduce (4 B): loom \([0-9.]*\) us.*/\1/p')
  b=$(LOOM_TORCH_INLINE_BYTES=0 /usr/bin/python3 "$here/torch-bench.py" --parts latency --rounds 1 2>/dev/null |
        sed -n 's/^small all_reduce (4 B): loom \([0-9.]*\) us.*/\1/p')
  c=$("$B/tools/loomrun" --timeout 60 -n 2 "$B/bench/loom-perf" -b 4 -e 4 -n 1000 -w 100 --csv - 2>/dev/null |
        awk -F, '$1 == "allreduce" { print $8 }')
  echo "$r $a $b $c"
done
