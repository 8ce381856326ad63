#!/bin/sh
# pair.sh — two Soft-RoCE guests (tests/rdma-vm/guest.sh) joined by a QEMU
# socket link on 127.0.0.1, 10.0.3.1 and 10.0.3.2, each running one rank of
# a 2-rank job over LOOM_NET=ib: RDMA between two kernels, each with its
# own rxe device, as between two hosts.
#
#   tests/rdma-vm/pair.sh [-t SECONDS] PROGRAM [ARG...]
#
# PROGRAM (a Loom program taking its rank from LOOM_RANK/LOOM_NRANKS, such
# as tests/ranks/coll_test) runs as rank 0 in the first guest, which hosts
# the bootstrap root, and as rank 1 in the second.  Prints each guest's
# output prefixed with [0] or [1]; exits 0 when both ranks did, 77 when
# the guests cannot be had (as guest.sh), 1 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
limit=900
if [ "${1:-}" = -t ]; then limit=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [-t SECONDS] PROGRAM [ARG...]" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill $pa $pb 2>/dev/null; rm -rf "$work"' EXIT
port=$((20000 + $$ % 20000))
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export LOOM_NRANKS=2 LOOM_COMM_ID=10.0.3.1:29500 LOOM_COMM_SECRET="$secret" LOOM_NET=ib \
  LOOM_SOCKET_IFNAME=eth0
LOOM_RANK=0 LOOM_HOSTID=guest-a "$here/guest.sh" -t "$limit" --link listen "$port" 10.0.3.1/24 \
  "$@" >"$work/a" 2>&1 &
pa=$!
sleep 1 # the listening side first
LOOM_RANK=1 LOOM_HOSTID=guest-b "$here/guest.sh" -t "$limit" --link connect "$port" 10.0.3.2/24 \
  "$@" >"$work/b" 2>&1 &
pb=$!
wait "$pa"; ra=$?
wait "$pb"; rb=$?
pa= pb=
sed 's/^/[0] /' "$work/a"
sed 's/^/[1] /' "$work/b"
[ "$ra" = 77 ] || [ "$rb" = 77 ] && exit 77
[ "$ra" = 0 ] && [ "$rb" = 0 ] && exit 0
echo "pair: guest 0 exited with $ra, guest 1 with $rb"
exit 1
