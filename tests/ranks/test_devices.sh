#!/bin/bash
# Device memory and device streams on the simulated device (docs/devices.md):
# the whole collective matrix with every buffer in simulated device memory
# (stream NULL, and queued on a device stream between an upload and a
# download with no host sync), on 2, 3 and 4 ranks of one node (through
# device IPC), on one node staged through host memory (LOOM_DEVICE_IPC=0),
# and on 2 "nodes" x 2 ranks (staged); ranks disagreeing on the path are
# named; device_test's API checks, the fault of host code touching device
# memory, 100 iterations of a two-stream pipeline with random delays, and
# a clique of loomCommInitAll.  With a GPU and the CUDA module, the same
# on loomDeviceCuda.
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/coll_test"
DT="$TESTBIN/ranks/device_test"
light=${LOOM_TEST_LIGHT:-0}
sizes=0,1,7,100,4099,65537
[ "$light" = 1 ] && sizes=0,7,4099

for n in 2 3 4; do
  run_ranks $n 300 "$CT" -d sim -s $sizes
  expect_count "cases passed" $n "collective matrix on sim device buffers, stream NULL, $n ranks"
done
for n in 2 3; do
  run_ranks $n 300 "$CT" -d sim -S 1 -s $sizes
  expect_count "cases passed" $n "collective matrix on sim buffers queued on a sim stream, $n ranks"
done
# Ranks of one node move device buffers device to device (device IPC)...
LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL run_ranks 2 60 "$CT" -d sim -c allreduce,allgather \
  -s 7 -t int32 -o sum
expect_count "allreduce count 7 int32: device IPC" 4 "one node: all-reduce goes through device IPC"
expect_count "allgather count 7 int32: device IPC" 4 "one node: all-gather goes through device IPC"
# ... unless LOOM_DEVICE_IPC=0 stages them through host memory.
for S in 0 1; do
  LOOM_DEVICE_IPC=0 run_ranks 3 300 "$CT" -d sim -S $S -s $sizes
  expect_count "cases passed" 3 "LOOM_DEVICE_IPC=0: collective matrix staged through host memory, -S $S, 3 ranks"
done
# Ranks that disagree (one stages, one goes through IPC) are named, not mixed.
run_ranks_keep_failing 2 60 sh -c 'LOOM_DEVICE_IPC=$LOOM_RANK exec "$0" "$@"' "$CT" -d sim -c allreduce -s 7 \
  -t int32 -o sum
expect_count "FAIL: .*mismatched calls: rank 1 called a collective on device buffers, through device IPC" 2 \
  "a rank staging and a rank using device IPC: both fail naming the other's call"
run_ranks 4 300 sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"' "$CT" -d sim -S 1 -s 0,7,4099
expect_count "cases passed" 4 "2 nodes x 2 ranks, sim buffers on a sim stream"
# Pipelined sizes (several 512 KiB chunks) with PreMulSum and avg.
run_ranks 3 300 "$CT" -d sim -S 1 -s 300007 -t float32,bfloat16 -o sum,avg,premulsum \
  -c allreduce,allgather,reducescatter,broadcast
expect_count "cases passed" 3 "sim buffers above the pipeline chunk, 3 ranks"

for n in 1 2 3; do
  run_ranks $n 300 "$DT" -i 100
  expect_count "device_test rank .*passed (100 ordering iterations)" $n \
    "device API errors, fault on host access, 100 two-stream iterations, dependent calls in a group, a clique, $n ranks"
done
# No delay at all must order as well as long ones.
LOOM_SIM_DELAY_US=0 run_ranks 2 300 "$DT" -p order -i 50
expect_count "passed (50 ordering" 2 "ordering without simulated delay"
LOOM_SIM_DELAY_US=300 run_ranks 2 300 "$DT" -p order,hostfn -i 10
expect_count "passed (10 ordering" 2 "ordering with delays up to 300 us"
check_no_leftovers coll_test
check_no_leftovers device_test

# The CUDA backend, where there is one to run.
if "$LOOMINFO" | grep -q '^devices:.* cuda' && command -v nvidia-smi >/dev/null &&
   nvidia-smi -L >/dev/null 2>&1; then
  run_ranks 2 300 "$CT" -d cuda -S 1 -s $sizes
  expect_count "cases passed" 2 "collective matrix on CUDA buffers on a CUDA stream, 2 ranks"
  run_ranks 2 300 "$DT" -d cuda -p api,order,hostfn,group -i 100
  expect_count "passed (100 ordering" 2 "CUDA streams: 100 two-stream iterations"
elif "$LOOMINFO" | grep -q '^devices:.* cuda'; then
  # The module is built but there is no GPU: a clear error, not a crash.
  run_ranks_failing 1 60 "$LOOMPERF" --device cuda -b 8 -e 8 -n 1 -w 0
  if [ "$rc" -ne 0 ]; then pass "--device cuda without a GPU fails (rc $rc)"; else fail "--device cuda without a GPU succeeded"; fi
  expect_count "LOOM WARN .*loomMemAlloc: loomDeviceCuda: no GPU to run on (" 1 \
    "--device cuda without a GPU says why, once (Loom's WARN)"
  expect_count "loom-perf: rank 0: [a-zA-Z_]* failed (invalid usage; Loom's message is above)$" 1 "loom-perf's own line, once, without repeating Loom's text"
  echo "SKIP: CUDA device checks: no GPU here"
else
  echo "SKIP: CUDA device checks: the CUDA module was not built (configure found no nvcc/CUDA runtime)"
fi
finish
