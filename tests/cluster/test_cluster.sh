#!/bin/bash
# Several nodes on one machine: network namespaces joined by a bridge, one
# hostname each (cluster.sh).  2 nodes x 2 ranks through every collective
# (shared memory inside a node, TCP across), 3x1 and 2x3, a node killed
# mid-run, the link between nodes cut mid-run, traffic shaped with tc tbf,
# and the harness itself: timeouts,
# interruption, leftovers of a killed run.  Nothing may be left behind.
# Needs root and network namespaces; otherwise exit 77 with the reason.
. "$(dirname "$0")/../ranks/lib.sh"
. "$(dirname "$0")/cluster.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
CT="$TESTBIN/ranks/coll_test"
PERF="${LOOMPERF:-$TESTBIN/../bench/loom-perf}"
SMALL="-s 1,1021,70001 -t float32,int8 -o sum,max"
started=$SECONDS

cluster_probe || exit 77
root_links_before=$(ip -o link show | awk -F': ' '{print $2}' | sort)
mine="loomc-$$-"   # every name this test makes starts so (cluster.sh)
work=$(mktemp -d) || exit 1
CLUSTER_ON_EXIT='rm -rf "$work"'
trap 'rm -rf "$work"' EXIT

# crun NODES RANKS_PER_NODE TIMEOUT prog args... — cluster_ranks in this
# shell (a signal to the test then ends it at once); output in $out, status
# in $rc.
crun() {
  cluster_ranks "$@" >"$work/out" 2>&1
  rc=$?
  out=$(cat "$work/out")
}

# expect_rc WANT WHAT
expect_rc() {
  if [ "$rc" -eq "$1" ]; then pass "$2"; else fail "$2 (status $rc, expected $1)"; printf '%s\n' "$out" | tail -n 20; fi
}

# Processes of this test's clusters still alive: their environment holds
# LOOM_CLUSTER_RUN=loomc-$$-... (cluster_ranks puts it there).
marked_pids() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -q "^LOOM_CLUSTER_RUN=$1" && echo "${p#/proc/}"
  done
}

# ---- 3 nodes, no shaping -----------------------------------------------------
cluster_up 3 || { rc=$?; [ "$rc" -eq 77 ] && exit 77; fail "cluster_up 3 (status $rc)"; finish; }

# Every collective, default matrix, 2 nodes x 2 ranks.
LOOM_DEBUG=INFO crun 2 2 120 "$CT"
expect_count "cases passed" 4 "2 nodes x 2 ranks: every collective, full matrix"
expect_count "by collective:\( [a-z]* [1-9][0-9]*\)*\$" 1 "2 nodes x 2 ranks: every collective ran"
expect_count "LOOM INFO topology: 2 nodes x 2 ranks; .*1 MiB hierarchical" 1 \
  "2 nodes x 2 ranks: rank 0's topology sees 2 nodes and picks the hierarchical all-reduce"
for r in 0 1 2 3; do
  k=$((r / 2))
  expect_count "^\[$r\] loom-node-$k:[0-9]*:$r LOOM INFO rank $r: 1 peer(s) over shm, 2 over tcp" 1 \
    "rank $r on loom-node-$k: shm to its node's other rank, tcp to the other node's 2"
  expect_count "^\[$r\] .*tcp: rank $r listening on $CLUSTER_SUBNET.$((k + 1)):" 1 \
    "rank $r listens on node $k's veth address"
done
expect_count "^\[0\] .*bootstrap root listening on $CLUSTER_SUBNET.1:" 1 "rank 0 hosts the bootstrap root on node 0's address"

LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET crun 3 1 120 "$CT" $SMALL
expect_count "cases passed" 3 "3 nodes x 1 rank: every collective, small matrix"
expect_count "LOOM INFO rank [0-2]: 0 peer(s) over shm, 2 over tcp" 3 "3 nodes x 1 rank: tcp only"

LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET crun 2 3 120 "$CT" $SMALL
expect_count "cases passed" 6 "2 nodes x 3 ranks: every collective, small matrix"
expect_count "LOOM INFO rank [0-5]: 2 peer(s) over shm, 3 over tcp" 6 "2 nodes x 3 ranks: shm x2, tcp x3"

# libfabric's tcp provider between the nodes (LOOM_NET=ofi), when built in.
if "${LOOMINFO:-$TESTBIN/../tools/loom-info}" 2>/dev/null | grep -q "^built in: .*\bofi\b"; then
  # The sanitizer pass (LOOM_TEST_LIGHT=1) runs the small matrix here: the
  # full one ran over ofi in test_ofi.sh and over tcp between nodes above.
  ofi_matrix=; ofi_what="full matrix"
  [ "${LOOM_TEST_LIGHT:-0}" = 1 ] && ofi_matrix=$SMALL && ofi_what="small matrix"
  LOOM_NET=ofi LOOM_OFI_PROVIDER=tcp LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET crun 2 2 120 "$CT" $ofi_matrix
  expect_count "cases passed" 4 "LOOM_NET=ofi: 2 nodes x 2 ranks, $ofi_what over libfabric tcp"
  expect_count "LOOM INFO rank [0-3]: 1 peer(s) over shm, 2 over ofi" 4 "LOOM_NET=ofi: shm inside a node, ofi across"
  expect_count "LOOM INFO ofi: rank [0-3]: provider tcp;ofi_rxm (LOOM_OFI_PROVIDER), domain $CLUSTER_IFNAME," 4 \
    "LOOM_NET=ofi: every rank on its node's $CLUSTER_IFNAME"
else
  echo "SKIP: LOOM_NET=ofi across nodes (built without libfabric)"
fi

# A rank of node 1 dies (SIGKILL from outside) in the middle of a sweep:
# the three others must fail, promptly, naming rank 2.
CLUSTER_KEEP_GOING=1 cluster_ranks 2 2 60 "$PERF" -b 1M -e 1M -n 100000 -w 1 >"$work/out" 2>&1 &
job=$!
victim=""
for i in $(seq 1 100); do
  victim=$(cluster_rank_pid 2) && break
  sleep 0.1
done
sleep 1
killed_at=$SECONDS
[ -n "$victim" ] && kill -9 "$victim"
wait "$job"; rc=$?
took=$((SECONDS - killed_at))
out=$(cat "$work/out")
if [ -n "$victim" ] && [ "$rc" -ne 0 ] && [ "$took" -le 15 ]; then
  pass "rank 2 killed: the run failed within $took s"
else
  fail "rank 2 (pid '$victim') killed: status $rc after $took s (expected non-zero within 15 s)"
fi
expect_count "^cluster: rank 2 (pid [0-9]* on loom-node-1) killed by signal 9" 1 "the harness names the killed rank"
expect_count "^cluster: rank [013] (pid [0-9]* on loom-node-[01]) exited with status 1" 3 "the 3 others exit with status 1 by themselves"
expect_count "^\[\([013]\)\] [^ ]*:\1 LOOM WARN .*: rank \1: allreduce failed: rank 2 failed or exited" 3 "each of the 3 others names rank 2 as the culprit, once (Loom's WARN)"

# The link between the nodes cut (node 1's veth down) in the middle of a
# sweep: no connection closes, nothing moves; every rank must time out
# (timeout_ms 3 s) naming a rank on the other side, within 3 + 5 s.
LOOM_TIMEOUT_MS=3000 CLUSTER_KEEP_GOING=1 cluster_ranks 2 2 60 "$PERF" -b 1M -e 1M -n 1000000 -w 1 \
  >"$work/out" 2>&1 &
job=$!
sleep 3
cut_at=$SECONDS
ip -n "$(cluster_ns 1)" link set "$CLUSTER_IFNAME" down
wait "$job"; rc=$?
took=$((SECONDS - cut_at))
ip -n "$(cluster_ns 1)" link set "$CLUSTER_IFNAME" up
out=$(cat "$work/out")
if [ "$rc" -ne 0 ] && [ "$took" -le 8 ]; then
  pass "link cut: the run failed within $took s (timeout_ms 3 s)"
else
  fail "link cut: status $rc after $took s (expected non-zero within 8 s)"
fi
expect_count "^\[[01]\] .*allreduce failed: rank [23] stopped making progress (timeout)" 2 \
  "link cut: node 0's ranks each name a rank of node 1"
expect_count "^\[[23]\] .*allreduce failed: rank [01] stopped making progress (timeout)" 2 \
  "link cut: node 1's ranks each name a rank of node 0"

# The harness: a rank that fails ends the others; a run that hangs ends at
# its timeout; either way nothing of it survives.
crun 2 1 30 sh -c '[ "$LOOM_RANK" = 1 ] && exit 3; exec sleep 30'
expect_rc 3 "a rank exiting 3: the run's status is 3"
expect_count "^cluster: rank 1 (pid [0-9]* on loom-node-1) exited with status 3; killing the other ranks" 1 "the failed rank named"
crun 2 1 1 sleep 30
expect_rc 124 "ranks running past the timeout: status 124"
expect_count "^cluster: timeout: the job ran longer than 1 s" 1 "the timeout named"
left=$(marked_pids "$mine")
if [ -z "$left" ]; then pass "no rank of this cluster's runs is alive"; else fail "ranks left alive: $left"; kill -9 $left; fi
left=$(cluster_shm_left "$CLUSTER_DIR/pids")
if [ -z "$left" ]; then pass "the ranks left no segment in /dev/shm"; else fail "segments left: $left"; fi
cluster_down

# ---- Shaped: tc tbf 200mbit on each node's veth ------------------------------
# (not in the sanitizer pass: shaping changes timing, not code paths)
rc=0
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: traffic shaping in the sanitizer pass (LOOM_TEST_LIGHT=1); it ran in the plain pass"
  rc=77
else
  cluster_up 2 200mbit; rc=$?
fi
if [ "$rc" -eq 77 ]; then
  echo "SKIP: traffic shaping (see the reason above)"
elif [ "$rc" -ne 0 ]; then
  fail "cluster_up 2 200mbit (status $rc)"
else
  crun 2 2 120 "$CT" $SMALL
  expect_count "cases passed" 4 "200mbit: 2 nodes x 2 ranks, small matrix"
  # 200 Mbit/s = 0.025 GB/s: the shaped link bounds a 2-node all-reduce.
  crun 2 1 60 "$PERF" -b 4M -e 4M -n 3 -w 1
  bw=$(printf '%s\n' "$out" | sed -n 's/^\[0\] # Avg bus bandwidth *: *\([0-9.]*\).*/\1/p')
  if [ -n "$bw" ] && awk -v b="$bw" 'BEGIN { exit !(b > 0.001 && b <= 0.027) }'; then
    pass "200mbit: all-reduce bus bandwidth $bw GB/s (at most 0.025 + burst)"
  else
    fail "200mbit: all-reduce bus bandwidth '$bw' GB/s, expected at most 0.027 (rc=$rc)"
    printf '%s\n' "$out" | tail -n 5
  fi
  left=$(cluster_shm_left "$CLUSTER_DIR/pids")
  if [ -z "$left" ]; then pass "200mbit: no segment left in /dev/shm"; else fail "segments left: $left"; fi
  cluster_down
fi

# ---- Teardown when the harness itself is interrupted or killed ----------------
# run_ranks.sh gets SIGTERM mid-run: its trap removes everything at once.
"$HERE/run_ranks.sh" 2 1 60 sleep 60 >"$work/term" 2>&1 &
job=$!
for i in $(seq 1 100); do
  [ "$(marked_pids "loomc-$job-" | wc -l)" -eq 2 ] && break
  sleep 0.1
done
kill -TERM "$job"
for i in $(seq 1 100); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && { fail "run_ranks.sh still runs 10 s after SIGTERM"; kill -9 "$job"; }
wait "$job"; rc=$?
out=$(cat "$work/term")
expect_rc 143 "run_ranks.sh: SIGTERM mid-run ends it with 143"
expect_count "caught SIGTERM; tearing the cluster down" 1 "run_ranks.sh says why it tears down"
left="$(ip netns list | grep "^loomc-$job-")$(marked_pids "loomc-$job-")"
if [ -z "$left" ]; then pass "after SIGTERM: no namespace, no rank left"; else fail "after SIGTERM, left: $left"; fi

# run_ranks.sh gets SIGKILL (no trap runs): the next cluster_up removes what
# it left, ranks included.
"$HERE/run_ranks.sh" 2 1 60 sleep 60 >"$work/kill" 2>&1 &
job=$!
for i in $(seq 1 100); do
  [ "$(marked_pids "loomc-$job-" | wc -l)" -eq 2 ] && break
  sleep 0.1
done
kill -KILL "$job"
wait "$job" 2>/dev/null
n_ns=$(ip netns list | grep -c "^loomc-$job-")
n_pids=$(marked_pids "loomc-$job-" | wc -l)
if [ "$n_ns" -eq 3 ] && [ "$n_pids" -eq 2 ]; then
  pass "run_ranks.sh killed by SIGKILL leaves its 3 namespaces and 2 ranks (as it must)"
else
  fail "after SIGKILL expected 3 namespaces and 2 ranks left, found $n_ns and $n_pids"
fi
cluster_up 1 >"$work/stale" 2>&1 || fail "cluster_up after a killed run"
out=$(cat "$work/stale")
expect_count "removing loomc-$job-[0-9]*-[a-z0-9]*, left by pid $job which no longer runs" 3 "cluster_up removes the killed run's 3 namespaces"
cluster_down
left="$(ip netns list | grep "^loomc-$job-")$(marked_pids "loomc-$job-")$(ls -d /tmp/loomc-$job-* 2>/dev/null)"
if [ -z "$left" ]; then pass "after SIGKILL and cleanup: nothing of the killed run left"; else fail "left: $left"; fi

# ---- Nothing left ---------------------------------------------------------------
left="$(ip netns list | grep "^$mine")$(ls -d /tmp/$mine* 2>/dev/null)$(marked_pids "$mine")"
if [ -z "$left" ]; then pass "no namespace, run directory or process of this test left"; else fail "left: $left"; fi
root_links_after=$(ip -o link show | awk -F': ' '{print $2}' | sort)
if [ "$root_links_before" = "$root_links_after" ]; then
  pass "the root namespace's links are as before (no veth, no bridge)"
else
  fail "root namespace links changed: $(diff <(echo "$root_links_before") <(echo "$root_links_after") | grep '^[<>]' | tr '\n' ' ')"
fi
echo "# $((SECONDS - started)) s"
finish
