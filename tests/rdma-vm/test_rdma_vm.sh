#!/bin/sh
# The ibverbs transport on a real kernel verbs stack: tests/ranks/test_ib.sh
# (the conformance suite on the device, the collective matrix over
# LOOM_NET=ib on 2-4 ranks and on 2 LOOM_HOSTID nodes x 2 ranks, a rank
# killed mid-run) inside a QEMU guest with a Soft-RoCE device
# (tests/rdma-vm/guest.sh).  Skips (77) where the guest cannot be had,
# saying why.  A few minutes under TCG; the plain pass only.
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: sanitizer pass (LOOM_TEST_LIGHT=1): the Soft-RoCE guest ran test_ib.sh in the plain pass"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/guest.sh" -t 1500 bash "$here/../ranks/test_ib.sh"
