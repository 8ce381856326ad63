#!/bin/sh
# The ibverbs transport on a real kernel verbs stack, in QEMU guests with
# Soft-RoCE devices (tests/rdma-vm/guest.sh):
#  1. tests/ranks/test_ib.sh inside one guest: the conformance suite on the
#     device, the collective matrix over LOOM_NET=ib on 2-4 ranks and on 2
#     LOOM_HOSTID nodes x 2 ranks, a rank killed, stalled or aborting, and
#     the locked-memory warning as a user under an 8 MiB limit;
#  2. two guests joined by a socket link (pair.sh), one rank in each: RDMA
#     between two kernels.  The barrier case is left out there: it compares
#     wall clocks across ranks, and two guests' clocks differ by seconds.
# Skips (77) where the guests cannot be had, saying why.  About 2.5
# minutes under TCG; the plain pass only.
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: sanitizer pass (LOOM_TEST_LIGHT=1): the Soft-RoCE guests ran in the plain pass"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
"$here/guest.sh" -t 1500 bash "$here/../ranks/test_ib.sh"
one=$?
[ "$one" = 77 ] && exit 77
# (the console's lines end in CR LF)
out=$("$here/pair.sh" -t 600 "$TESTBIN/ranks/coll_test" \
  -c allreduce,allgather,reducescatter,broadcast,reduce,alltoall,alltoallv,gather,scatter,sendrecv \
  -s 1,1021,300007,1M -t float32,int8 -o sum,max 2>&1; echo "pair-status $?")
two=$(printf '%s\n' "$out" | sed -n 's/^pair-status //p')
out=$(printf '%s\n' "$out" | tr -d '\r' | grep -v '^pair-status ')
printf '%s\n' "$out" | grep -v '^\[[01]\] \[ *[0-9]*\.[0-9]*\]' # not the kernels' own lines
n=$(printf '%s\n' "$out" | grep -c '^\[[01]\] coll_test rank [01] of 2: [0-9]* cases passed$')
if [ "$two" = 0 ] && [ "$n" = 2 ]; then
  echo "PASS: two guests, one rank each: the matrix over RDMA between two kernels"
else
  echo "FAIL: two guests (status $two, $n of 2 ranks passed)"
fi
[ "$one" = 0 ] && [ "$two" = 0 ] && [ "$n" = 2 ]
