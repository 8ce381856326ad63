#!/bin/bash
# Rendezvous: missing ranks named at the timeout, stray connections
# dropped, LOOM_PORT_RANGE honoured, bad LOOM_* values explained.
. "$(dirname "$0")/lib.sh"
FT="$TESTBIN/ranks/fault_test"
CT="$TESTBIN/ranks/coll_test"

LOOM_BOOTSTRAP_TIMEOUT=2 run_ranks 3 60 "$FT" --missing
expect_count "init failed after .*ranks 3 (1 of 4) never arrived" 3 "every rank names the missing rank 3"

# While it waits, the root says every 10 s who is missing and how long is left
# (fault_test itself then fails: it holds a 2 s timeout to under 10 s,
# which it checks only once the error named rank 3: every rank must get
# that far, so none is killed when the first fails).
LOOM_BOOTSTRAP_TIMEOUT=12 run_ranks_keep_failing 3 60 "$FT" --missing
expect_count "bootstrap root .*: still waiting for ranks 3 (1 of 4) after [0-9]* s; giving up in [0-9]* s (LOOM_BOOTSTRAP_TIMEOUT)" 1 \
  "a waiting root names the missing rank every 10 s"
expect_count "rank [0-2]: FAIL: took [0-9.]* s (LOOM_BOOTSTRAP_TIMEOUT should end it)" 3 \
  "every rank fails at the 12 s timeout with an error naming rank 3"

# A rank other than 0 that made its own id (mpirun without a broadcast) is told at once.
out=$(env -u LOOM_COMM_ID LOOM_RANK=1 LOOM_NRANKS=2 LOOM_BOOTSTRAP_TIMEOUT=2 timeout 30 "$CT" -s 5 2>&1); rc=$?
expect_count "rank 1 of 2 initialises with an id this process made itself (loomGetUniqueId).*MPI_Bcast.*LOOM_COMM_ID" 1 \
  "a rank that made its own id is told what to do"
expect_count "at 127.0.0.1:[0-9]* at " 0 "no address named twice"

LOOM_BOOTSTRAP_TIMEOUT=2 run_ranks 3 60 "$FT" --nonblocking
expect_count "non-blocking init ready, then failed as required: .*never arrived" 3 "non-blocking init, success and failure"

run_ranks 1 60 "$FT" --stray
expect_count "joined in" 1 "rank joins past junk connections"
# Junk and an oversized header never amount to a proof: they wait out their
# 10 s deadline in a slot, harmlessly; a wrong proof is dropped at once.
expect_count "dropped connection .*wrong proof of the job's secret" 1 "a hello proving another secret dropped and logged"

# A narrow port range: every listener (root, ring, tcp) must fall inside.
base=$((20000 + ($$ % 20000)))
LOOM_PORT_RANGE="$base-$((base + 40))" LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET,BOOTSTRAP \
  run_ranks 4 120 "$CT" -s 100 -t int32 -o sum
expect_count "cases passed" 4 "collectives inside LOOM_PORT_RANGE"
ports=$(printf '%s\n' "$out" | grep -o 'listening on 127.0.0.1:[0-9]*' | sed 's/.*://')
outside=0; count=0
for p in $ports; do count=$((count + 1)); { [ "$p" -lt "$base" ] || [ "$p" -gt $((base + 40)) ]; } && outside=$((outside + 1)); done
if [ "$count" -ge 5 ] && [ "$outside" -eq 0 ]; then pass "$count listeners all in $base-$((base + 40))"; else fail "listeners: $count, outside the range: $outside"; fi

# The MPI-style path (no LOOM_COMM_ID): the id's root follows LOOM_SOCKET_IFNAME.
out=$(env -u LOOM_COMM_ID LOOM_RANK=0 LOOM_NRANKS=1 LOOM_SOCKET_IFNAME==lo timeout 30 "$CT" -s 5 -t int8 2>&1); rc=$?
expect_count "cases passed" 1 "loomGetUniqueId root on LOOM_SOCKET_IFNAME==lo"
out=$(env -u LOOM_COMM_ID LOOM_RANK=0 LOOM_NRANKS=1 LOOM_SOCKET_IFNAME==nosuch0 timeout 30 "$CT" -s 5 2>&1); rc=$?
expect_count "no up interface with an address matches LOOM_SOCKET_IFNAME==nosuch0" 2 "unknown interface explained (logged once, returned once)"
out=$(LOOM_COMM_ID=not-an-address LOOM_RANK=0 LOOM_NRANKS=1 timeout 30 "$CT" -s 5 2>&1); rc=$?
expect_count 'LOOM_COMM_ID="not-an-address" is not host:port' 2 "malformed LOOM_COMM_ID explained"
LOOM_SOCKET_NSOCKS=banana run_ranks 2 60 "$CT" -s 5 -t int8 -o sum
expect_count 'LOOM_SOCKET_NSOCKS="banana" is not valid' 2 "bad variable value warned about, default used"
expect_count "cases passed" 2 "and the job still runs"
check_no_leftovers fault_test
check_no_leftovers coll_test
finish
