#!/bin/bash
# Transports between nodes (docs/transports.md): the collective matrix over
# libfabric (LOOM_NET=ofi) with its tcp (ofi_rxm) and shm providers, every
# peer over ofi (LOOM_SHM_DISABLE=1) and shm inside LOOM_HOSTID nodes; a
# killed rank, a stalled one and mismatched calls named by the others;
# LOOM_NET_PLUGIN=tcpplug (Loom's TCP transport loaded as a plugin) through
# the matrix; and init failing with the reason for a missing plugin, one
# of another API version, LOOM_NET=ib without a device, a bad LOOM_NET or
# provider, and ranks that disagree.  Skips (77) when libfabric is not built in.
. "$(dirname "$0")/lib.sh"
: "${LOOMINFO:?}"
CT="$TESTBIN/ranks/coll_test"
FT="$TESTBIN/ranks/fault_test"
PLUGDIR="$TESTBIN/../transports/tcpplug/.libs"
SMALL="-s 1,1021,70001 -t float32,int8,float16 -o sum,max,premulsum"
started=$SECONDS

if ! "$LOOMINFO" 2>/dev/null | grep -q "^built in: .*\bofi\b"; then
  echo "SKIP: this Loom was built without libfabric (configure found no libfabric-dev)"
  exit 77
fi

per_node2='LOOM_HOSTID=node$((LOOM_RANK / 2)) exec "$0" "$@"'

# LOOM_TEST_LIGHT=1 (the sanitizer pass of scripts/test.sh): the "full"
# matrices keep every collective and root but fewer types, ops and sizes.
FULL=
NODE_SIZES=1,1021,70001,300007
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  FULL="-s 0,1,1021,65537 -t float32,int8,float16,float64 -o sum,max,avg,premulsum"
  NODE_SIZES=1,1021,70001
fi

# ---- libfabric tcp (with ofi_rxm): every peer over ofi -------------------------
export LOOM_SHM_DISABLE=1 LOOM_NET=ofi LOOM_OFI_PROVIDER=tcp
LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET,INIT run_ranks 3 120 "$CT" $FULL
expect_count "cases passed" 3 "ofi tcp: full matrix, 3 ranks"
expect_count "by collective:\( [a-z]* [1-9][0-9]*\)*\$" 1 "ofi tcp: every collective ran"
expect_count "LOOM INFO ofi: rank [0-2]: provider tcp;ofi_rxm (LOOM_OFI_PROVIDER), domain lo," 3 \
  "ofi tcp: every rank names its provider and domain"
expect_count "LOOM INFO rank [0-2]: 0 peer(s) over shm, 2 over ofi (LOOM_NET=ofi)" 3 \
  "ofi tcp: every peer over ofi, and why"
expect_count "ready in .* (transport ofi," 3 "ofi tcp: the ready line names the transport"
run_ranks 2 120 "$CT" -s 1,300007,1M -t float32,int8 -o sum,min
expect_count "cases passed" 2 "ofi tcp: up to 4 MiB (1M float32), 2 ranks"
LOOM_CHUNK_BYTES=4096 run_ranks 4 120 "$CT" -c allreduce,allgather,alltoall,sendrecv $SMALL
expect_count "cases passed" 4 "ofi tcp: 4 KiB slices (many messages in flight), 4 ranks"

# ---- libfabric shm ----------------------------------------------------------------
LOOM_OFI_PROVIDER=shm LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET run_ranks 2 120 "$CT"
expect_count "cases passed" 2 "ofi shm: full matrix, 2 ranks"
expect_count "LOOM INFO ofi: rank [01]: provider shm (LOOM_OFI_PROVIDER)" 2 "ofi shm: provider named"
LOOM_OFI_PROVIDER=shm run_ranks 4 120 "$CT" $SMALL
expect_count "cases passed" 4 "ofi shm: small matrix, 4 ranks"

# ---- nodes: shm inside, ofi across ------------------------------------------------
LOOM_SHM_DISABLE=0 LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET run_ranks 4 120 sh -c "$per_node2" "$CT" \
  -s $NODE_SIZES -t float32,bfloat16,int64 -o sum,avg,premulsum
expect_count "cases passed" 4 "ofi tcp: 2 nodes x 2 ranks (LOOM_HOSTID)"
expect_count "LOOM INFO rank [0-3]: 1 peer(s) over shm, 2 over ofi (LOOM_NET=ofi; shm inside the node)" 4 \
  "2 nodes x 2 ranks: shm inside a node, ofi across"

# ---- failures: named, within the timeout ------------------------------------------
for k in "3 1" "2 0"; do
  set -- $k
  run_ranks_keep_failing $1 60 "$FT" --kill $2
  expect_failed_ranks 1 "ofi: $1 ranks, rank $2 killed: only it failed"
  expect_count "noticed rank $2's death" $(($1 - 1)) "ofi: $1 ranks, rank $2 killed: the others name it"
done
run_ranks_keep 3 60 "$FT" --stall 2 1500
expect_count "gave up on stalled rank 2" 2 "ofi: stalled rank 2 named by the 2 others within timeout_ms"
run_ranks_keep 3 60 "$FT" --mismatch
expect_count "mismatch detected .*invalid usage" 3 "ofi: count mismatch is loomInvalidUsage on every rank"

# ---- a plugin: Loom's TCP transport as libloom-net-tcpplug.so ----------------------
unset LOOM_NET LOOM_OFI_PROVIDER
export LD_LIBRARY_PATH="$PLUGDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LOOM_NET_PLUGIN=tcpplug LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET run_ranks 3 120 "$CT" $FULL
expect_count "cases passed" 3 "plugin tcpplug: full matrix, 3 ranks"
expect_count "LOOM INFO LOOM_NET_PLUGIN=tcpplug: loaded libloom-net-tcpplug.so, transport \"tcpplug\" (API version [0-9]*)" 3 \
  "plugin tcpplug: every rank loads it"
expect_count "LOOM INFO rank [0-2]: 0 peer(s) over shm, 2 over plugin tcpplug (LOOM_NET_PLUGIN=tcpplug)" 3 \
  "plugin tcpplug: every peer over it"
LOOM_SHM_DISABLE=0 LOOM_NET_PLUGIN=tcpplug run_ranks 4 120 sh -c "$per_node2" "$CT" $SMALL
expect_count "cases passed" 4 "plugin tcpplug: 2 nodes x 2 ranks, shm inside"
LOOM_NET_PLUGIN=tcpplug run_ranks_keep_failing 3 60 "$FT" --kill 1
expect_failed_ranks 1 "plugin tcpplug: rank 1 killed: only it failed"
expect_count "noticed rank 1's death" 2 "plugin tcpplug: rank 1 killed, the others name it"

# ---- refusals ---------------------------------------------------------------------
LOOM_NET_PLUGIN=nonexistent run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "invalid argument: LOOM_NET_PLUGIN=nonexistent: cannot load libloom-net-nonexistent.so" \
  "LOOM_NET_PLUGIN=nonexistent: init fails on every rank, naming the file"
LOOM_NET_PLUGIN=badversion run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "libloom-net-badversion.so was built for transport API version 3 (loom_net_plugin_v3), this Loom speaks version [0-9]" \
  "LOOM_NET_PLUGIN=badversion: refused, naming both versions"
LOOM_NET_PLUGIN=badsize run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "libloom-net-badsize.so: loom_net_plugin_v[0-9]* has struct_size 16, less than version [0-9]*'s [0-9]* bytes" \
  "LOOM_NET_PLUGIN=badsize: a table smaller than this version's refused, naming both sizes"
LOOM_NET_PLUGIN=tcpplug LOOM_NET=tcp run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "both choose the transport between nodes: unset one" "LOOM_NET and LOOM_NET_PLUGIN together: refused"
unset LD_LIBRARY_PATH
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
  echo "SKIP: LOOM_NET=ib without a device (this machine has an RDMA device)"
else
  LOOM_NET=ib run_ranks_keep_failing 2 30 "$CT" -s 1
  expect_init_fail 2 "LOOM_NET=ib, but \(this Loom was built without the ibverbs transport\|the ibverbs transport cannot run here\)" \
    "LOOM_NET=ib without an RDMA device: init fails saying why"
fi
LOOM_NET=infiniband run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "invalid argument: LOOM_NET=\"infiniband\": expected tcp, ofi or ib" "LOOM_NET=infiniband: refused"
LOOM_NET=ofi LOOM_OFI_PROVIDER=nonesuch run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "LOOM_OFI_PROVIDER=\"nonesuch\" matches none of the providers found: .*tcp;ofi_rxm" \
  "LOOM_OFI_PROVIDER=nonesuch: init fails listing the providers found"
LOOM_NET=ofi LOOM_OFI_DOMAIN=nosuch run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "invalid argument: ofi: rank [01]: LOOM_OFI_DOMAIN=nosuch: no provider has that domain; the domains found: .*\blo\b" \
  "LOOM_OFI_DOMAIN=nosuch: init fails listing the domains found"
LOOM_NET=ofi LOOM_OFI_PROVIDER='tcp,' run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "invalid argument: ofi: rank [01]: LOOM_OFI_PROVIDER=\"tcp,\": an empty name" \
  "LOOM_OFI_PROVIDER='tcp,': refused"
# Ranks that disagree: rank 0 on ofi, rank 1 on tcp.
run_ranks_keep_failing 2 30 sh -c '[ "$LOOM_RANK" = 0 ] && export LOOM_NET=ofi; exec "$0" "$@"' "$CT" -s 1
expect_init_fail 2 "rank [01] uses the transport \(ofi\|tcp\) between nodes (.*) but rank [01] uses \(tcp\|ofi\): set LOOM_NET" \
  "LOOM_NET=ofi on one rank only: both ranks refuse, naming the other's transport"

# ---- the default on a machine without a fabric stays Loom's tcp ---------------------
if ls /sys/class/infiniband/* /dev/cxi[0-9]* /dev/hfi1_[0-9]* >/dev/null 2>&1; then
  echo "SKIP: the default choice (this machine has a fabric device)"
else
  LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET run_ranks 2 60 "$CT" -c allreduce -s 1021 -t float32 -o sum
  expect_count "cases passed" 2 "default: runs"
  expect_count "LOOM INFO rank [01]: 0 peer(s) over shm, 1 over tcp (default: .*no fabric device for libfabric" 2 \
    "default without a fabric device: tcp, and why (libfabric not even loaded)"
  expect_count "LOOM INFO ofi:" 0 "default: the ofi transport is not opened"
fi
unset LOOM_SHM_DISABLE
check_no_leftovers coll_test
echo "# $((SECONDS - started)) s"
finish
