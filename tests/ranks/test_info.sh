#!/bin/bash
# loom-info lists every LOOM_* variable of the config table with its value.
. "$(dirname "$0")/lib.sh"
: "${LOOMINFO:?}"
out=$(LOOM_SPIN_US=7 "$LOOMINFO" 2>&1); rc=$?
for v in LOOM_DEBUG LOOM_DEBUG_SUBSYS LOOM_DEBUG_FILE LOOM_COMM_ID LOOM_RANK LOOM_NRANKS \
         LOOM_LOCAL_RANK LOOM_SOCKET_IFNAME LOOM_SOCKET_FAMILY LOOM_PORT_RANGE \
         LOOM_BOOTSTRAP_TIMEOUT LOOM_TIMEOUT_MS LOOM_SOCKET_NSOCKS LOOM_CHUNK_BYTES LOOM_SPIN_US; do
  expect_count "^[ *] $v " 1 "loom-info lists $v"
done
expect_count '^\* LOOM_SPIN_US *= 7 ' 1 "a set variable is marked and shown with its value"
expect_count "^Loom 0\.1\.0" 1 "version line"
# LOOM_DEBUG_FILE with %h and %p
dir=$(mktemp -d)
LOOM_DEBUG=INFO LOOM_DEBUG_FILE="$dir/loom.%h.%p.log" run_ranks 2 60 "$TESTBIN/ranks/coll_test" -s 1 -t int8 -o sum
files=$(ls "$dir" | grep -c "^loom\.$(hostname | cut -d. -f1)\.[0-9]*\.log$")
if [ "$files" -eq 2 ] && grep -q " LOOM INFO comm loom: rank 1 of 2 ready" "$dir"/*.log; then pass "LOOM_DEBUG_FILE per host and pid, lines tagged"; else fail "LOOM_DEBUG_FILE: $files files in $dir"; ls "$dir"; fi
rm -rf "$dir"
finish
