#!/bin/bash
# The ibverbs transport (transports/ibverbs/, docs/transports.md).  Without
# a usable RDMA device (or Soft-RoCE) it skips (77), printing the reason
# loom_ib_available() gives.  With one: the collective matrix over
# LOOM_NET=ib (every peer over ib with LOOM_SHM_DISABLE=1, and two
# LOOM_HOSTID nodes), large messages (rendezvous), small slices (many
# messages in flight: credits), a rank killed, stalled or aborting, and the INFO log
# naming device and port.  tests/rdma-vm/ runs it on Soft-RoCE in a guest.
# Every run is bounded (lib.sh); the whole script takes under a minute.
. "$(dirname "$0")/lib.sh"
: "${LOOMINFO:?}"
CT="$TESTBIN/ranks/coll_test"
PROBE="$TESTBIN/ranks/ib_probe"

# ib_probe --init: loom_ib_available's answer, then the transport's own
# init (and fini) on this machine; both must agree.
probe=$(timeout -k 5 30 "$PROBE" --init 2>&1)
prc=$?
echo "$probe"
reason=$(printf '%s\n' "$probe" | sed -n 's/^ib: unavailable: //p')
case $prc in
0) ;;
3)
  echo "SKIP: $probe"
  exit 77
  ;;
2)
  # The reason must say what is missing, and init must fail with the same
  # reason (LOOM_NET=ib reports it), its resources released.
  if [ "${#reason}" -ge 12 ] &&
    printf '%s\n' "$probe" | grep -Fq "ib: init failed (system error (a system call failed; see the log)): rank 0: ibverbs transport: no usable RDMA port: $reason"; then
    echo "SKIP: no usable RDMA device here: $reason"
    exit 77
  fi
  echo "FAIL: ib_probe: no reason, or init failed with another one"
  exit 1
  ;;
*)
  echo "FAIL: ib_probe exited with $prc: $probe"
  exit 1
  ;;
esac

# A device exists.  First the transport alone: the conformance suite
# (tests/transport/checks.c) through the ibverbs ops table on this device:
# two ranks in one process, connect, both protocols, a mismatched call, a
# stranger refused, a peer that goes away and one that never listens.
pair=$(timeout -k 5 300 "$TESTBIN/transport/conformance" ib 2>&1)
prc=$?
printf '%s\n' "$pair"
if [ "$prc" -eq 0 ] && printf '%s\n' "$pair" | grep -q ": all checks passed$"; then
  pass "conformance: the ibverbs transport end to end on $probe"
else
  fail "conformance ib (exit $prc)"
fi
# The matrix needs LOOM_NET=ib (the transport selection).
if ! "$LOOMINFO" 2>/dev/null | grep -q "LOOM_NET\b"; then
  echo "SKIP: the collective matrix: this Loom has no LOOM_NET selection yet"
  finish
fi
export LOOM_NET=ib LOOM_SHM_DISABLE=1
LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET,INIT run_ranks 2 60 "$CT" -s 1,1021,70001 \
  -t float32,int8,float16 -o sum,max,premulsum
expect_count "cases passed" 2 "ib: small matrix, 2 ranks, every peer over ib"
expect_count "LOOM INFO ib: rank [01] on .* port [0-9]* (\(RoCE\|InfiniBand\)), rdma_cm listening on" 2 \
  "ib: every rank names its device, port and address"
expect_count "LOOM INFO ib: rank [01] connected to 1 peer(s)" 2 "ib: connections set up"
run_ranks 3 60 "$CT"
expect_count "cases passed" 3 "ib: full matrix, 3 ranks"
run_ranks 2 60 "$CT" -s 1,300007,1M -t float32,int8 -o sum,min
expect_count "cases passed" 2 "ib: up to 4 MiB (rendezvous writes), 2 ranks"
LOOM_CHUNK_BYTES=4096 run_ranks 4 60 "$CT" -c allreduce,allgather,alltoall,sendrecv \
  -s 1,1021,70001 -t float32,int8 -o sum,max
expect_count "cases passed" 4 "ib: 4 KiB slices (credits, many messages in flight), 4 ranks"
# A rank killed mid-run: both others name it, over ib (completion errors
# and the QP's teardown, not the TCP bootstrap's, must carry it).
run_ranks_keep_failing 3 120 "$TESTBIN/ranks/fault_test" --kill 1
expect_failed_ranks 1 "ib: 3 ranks, rank 1 killed: only it failed"
expect_count "noticed rank 1's death" 2 "ib: 3 ranks, rank 1 killed: both others name it"
# A stalled rank and a rank's loomCommAbort, over ib: named by the others
# within timeout_ms, their queue pairs torn down while transfers are posted.
run_ranks_keep 4 120 "$TESTBIN/ranks/fault_test" --stall 2 1500
expect_count "gave up on stalled rank 2" 3 "ib: 4 ranks, rank 2 stalled: the 3 others name it"
run_ranks_keep 4 120 "$TESTBIN/ranks/fault_test" --abort-rank 2
expect_count "learned of rank 2's abort" 3 "ib: 4 ranks, rank 2 aborts: the 3 others name it"
# As a user under Debian's default 8 MiB locked-memory limit (only in the
# Soft-RoCE guest, tests/rdma-vm/, where the device node may be opened to
# all): every rank warns at connection time, naming the limit and what to
# do, and messages up to 4 MiB still pass on 2 and 4 ranks (receivers wait
# for registrations to be given back, senders copy through staging slots;
# before, a 4 MiB all-gather failed in ibv_reg_mr).
if [ "${LOOM_RDMA_VM:-0}" = 1 ] && command -v setpriv >/dev/null; then
  chmod 666 /dev/infiniband/*
  as_user_8m() {
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'ulimit -l 8192 && exec "$@"' sh \
      timeout -k 5 190 "$LOOMRUN" --tag-output --timeout 180 -n "$@" 2>&1)
    rc=$?
  }
  as_user_8m 2 "$CT" -s 1,1021,300007,1M -t float32,int8 -o sum,max -c allreduce,allgather,reducescatter,alltoall,sendrecv
  expect_count "LOOM WARN ib: rank [01]: the locked-memory limit is 8192 KiB (ulimit -l) but its rings to 1 peer(s) pin 1024 KiB and their rendezvous transfers up to 8192 KiB more: .*ulimit -l unlimited" 2 \
    "ib: under an 8 MiB locked-memory limit, as a user, both ranks warn at connection time"
  expect_count "cases passed" 2 "ib: as a user under 8 MiB, 2 ranks, up to 4 MiB"
  as_user_8m 4 "$CT" -s 1,300007,1M -t float32 -o sum -c allreduce,allgather,alltoall
  expect_count "cases passed" 4 "ib: as a user under 8 MiB, 4 ranks (3 peers' rings), up to 4 MiB"
fi
unset LOOM_SHM_DISABLE
run_ranks 4 60 sh -c 'LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"' "$CT" \
  -s 1,1021,300007 -t float32,bfloat16 -o sum,avg
expect_count "cases passed" 4 "ib: 2 nodes x 2 ranks (shm inside, ib across)"
check_no_leftovers coll_test
finish
