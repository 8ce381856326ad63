#!/bin/bash
# Transports load only when chosen (docs/transports.md): libloom.so links no
# RDMA library; a program linking it catches no SIGSEGV/SIGTERM/... and dies
# of SIGTERM with 143 (SIGSEGV: 139) as the shell expects; the default on a
# host without RDMA or fabric hardware maps no RDMA library; LOOM_NET=ofi
# loads libloom-net-ofi.so (named in the INFO log) and gives correct
# results, PSM's signal handlers kept out; loom-info lists the modules and
# loom-topo lists libfabric's providers apart from the NICs; a missing
# module, one whose library is missing, a damaged file and a module of
# another Loom build each fail init with a message saying what to do.
. "$(dirname "$0")/lib.sh"
: "${LOOMINFO:?}"
: "${LOOM_MODULE_PATH:?make check sets it to the build tree .libs}"
CT="$TESTBIN/ranks/coll_test"
PROBE="$TESTBIN/ranks/sig_probe"
TOPO="$TESTBIN/../tools/loom-topo"
LIB="$TESTBIN/../.libs/libloom.so"
RDMA_LIBS='libfabric\|libibverbs\|librdmacm\|libinfinipath\|libpsm'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

built() { "$LOOMINFO" 2>/dev/null | grep -q "^built in: .*\b$1\b"; }
# The bits of SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM in a mask.
FATAL_BITS=$(( (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 10) | (1 << 14) ))
# expect_no_handlers WHAT — every SigCgt line in $out catches none of them.
expect_no_handlers() {
  if printf '%s\n' "$out" | grep -q "sig_probe: asan yes"; then
    echo "SKIP: $1: built with AddressSanitizer, whose own handlers show in SigCgt"
    return
  fi
  masks=$(printf '%s\n' "$out" | sed -n 's/^\(\[[0-9]*\] \)\{0,1\}sig_probe: rank [0-9]*: SigCgt:[[:space:]]*//p')
  [ -n "$masks" ] || { fail "$1: no SigCgt line"; printf '%s\n' "$out" | tail -20; return; }
  for m in $masks; do
    if [ $(( 16#$m & FATAL_BITS )) -ne 0 ]; then
      fail "$1: SigCgt $m catches a fatal signal"
      return
    fi
  done
  pass "$1: no SIGINT/SIGILL/SIGABRT/SIGBUS/SIGSEGV/SIGTERM handler (SigCgt $(echo $masks))"
}

# ---- (a) libloom.so links no RDMA library -------------------------------------------
if [ ! -f "$LIB" ]; then
  echo "SKIP: no shared library at $LIB"; exit 77
fi
deps=$(ldd "$LIB" 2>&1)
if printf '%s\n' "$deps" | grep -q "$RDMA_LIBS"; then
  fail "libloom.so links an RDMA library: $(printf '%s\n' "$deps" | grep "$RDMA_LIBS" | tr '\n' ' ')"
else
  pass "ldd libloom.so: no libfabric, libibverbs, librdmacm, libinfinipath or libpsm"
fi

# ---- (b) a program linking libloom.so: no handlers, dies as the shell expects --------
out=$(timeout -k 5 60 "$PROBE" print 2>&1); rc=$?
expect_count "^sig_probe: rank 0: version [0-9]*, allreduce 1 (expected 1)$" 1 "sig_probe: one-rank all-reduce through libloom.so"
expect_no_handlers "sig_probe, default transport"
if ls /sys/class/infiniband/* /sys/class/cxi/* /dev/cxi[0-9]* /dev/hfi1_[0-9]* >/dev/null 2>&1; then
  echo "SKIP: the default maps no RDMA library (this machine has RDMA or fabric hardware)"
else
  expect_count "^sig_probe: rank 0: RDMA libraries mapped: none$" 1 "default on a plain host: no RDMA library mapped"
fi
(ulimit -c 0; exec timeout -k 5 60 "$PROBE" term) >/dev/null 2>&1; rc=$?
if [ "$rc" -eq 143 ]; then pass "SIGTERM ends it with status 143"; else fail "SIGTERM: status $rc, expected 143"; fi
if printf '%s\n' "$out" | grep -q "^sig_probe: asan yes"; then
  echo "SKIP: SIGSEGV's status: AddressSanitizer reports a SIGSEGV and exits 1"
else
  (ulimit -c 0; exec timeout -k 5 60 "$PROBE" segv) >/dev/null 2>&1; rc=$?
  if [ "$rc" -eq 139 ]; then pass "SIGSEGV ends it with status 139"; else fail "SIGSEGV: status $rc, expected 139"; fi
fi

# ---- loom-info lists the modules ---------------------------------------------------
out=$("$LOOMINFO" 2>&1); rc=$?
expect_count "^modules (loaded only when used: transports when chosen, a device backend at its first use), searched in $LOOM_MODULE_PATH (LOOM_MODULE_PATH):" 1 \
  "loom-info: where modules are looked for"
expect_count "^  ofi  libloom-net-ofi.so " 1 "loom-info: lists the ofi module"
expect_count "^  ib   libloom-net-ib.so " 1 "loom-info: lists the ib module"
expect_count "^  cuda libloom-dev-cuda.so " 1 "loom-info: lists the CUDA device module"
expect_count "^devices: host sim\( cuda\)\?\$" 1 "loom-info: the device backends built"

if ! built ofi; then
  echo "SKIP: the ofi module: this Loom was built without libfabric"
  finish
fi
OFI_MOD="$LOOM_MODULE_PATH/libloom-net-ofi.so"
expect_count "^  ofi  libloom-net-ofi.so  *$OFI_MOD (needs libfabric)" 1 "loom-info: the ofi module's file"

# ---- (c) LOOM_NET=ofi goes through the module ------------------------------------------
export LOOM_SHM_DISABLE=1 LOOM_OFI_PROVIDER=tcp
LOOM_NET=ofi LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET run_ranks 2 120 "$CT" -s 1,1021,70001 \
  -t float32,int8 -o sum,max
expect_count "cases passed" 2 "LOOM_NET=ofi: 2 ranks, correct results"
expect_count "LOOM INFO loaded transport module $OFI_MOD (ofi, Loom [0-9.]*)" 2 \
  "LOOM_NET=ofi: every rank loads libloom-net-ofi.so and logs its path"
expect_count "LOOM INFO rank [01]: 0 peer(s) over shm, 1 over ofi (LOOM_NET=ofi)" 2 "LOOM_NET=ofi: the peer over ofi"
LOOM_NET=ofi run_ranks 2 60 "$PROBE" print
expect_count "sig_probe: rank [01]: version [0-9]*, allreduce 3 (expected 3)$" 2 "sig_probe over ofi: 2 ranks"
expect_count "sig_probe: rank [01]: RDMA libraries mapped: libfabric" 2 "sig_probe over ofi: libfabric is mapped"
expect_no_handlers "sig_probe with libfabric loaded (IPATH_NO_BACKTRACE, HFI_NO_BACKTRACE)"
unset LOOM_SHM_DISABLE LOOM_OFI_PROVIDER

# ---- loom-topo: libfabric's providers through the module, apart from the NICs ----------
out=$(LOOM_DEBUG=INFO timeout 60 "$TOPO" 2>&1); rc=$?
expect_count "^|- NICs: [0-9]*$" 1 "loom-topo: NICs under their own heading"
expect_count "^\`- libfabric providers: [1-9][0-9]*$" 1 "loom-topo: libfabric's providers under theirs"
nics=$(printf '%s\n' "$out" | sed -n '/^|- NICs:/,/^`- libfabric providers:/p' | grep -c " ofi ")
if [ "$nics" -eq 0 ]; then pass "loom-topo: no provider counted as a NIC"; else fail "loom-topo: $nics provider(s) among the NICs"; fi
expect_count "loaded transport module $OFI_MOD" 1 "loom-topo: the providers come from the ofi module"
out=$(LOOM_DEBUG=INFO timeout 60 "$TOPO" --no-ofi 2>&1); rc=$?
expect_count "loaded transport module" 0 "loom-topo --no-ofi: no module loaded"

# ---- (d) modules that cannot be used: init fails saying what to do ------------------------
mkdir "$tmp/empty" "$tmp/junk" "$tmp/nolib"
LOOM_NET=ofi LOOM_MODULE_PATH="$tmp/empty" run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "LOOM_NET=ofi: cannot load libloom-net-ofi.so: it is in none of $tmp/empty (LOOM_MODULE_PATH): install Loom's ofi module there, or set LOOM_MODULE_PATH to its directory, or unset LOOM_NET" \
  "a missing ofi module: init fails naming the file and where it was looked for"
if built ib; then
  LOOM_NET=ib LOOM_MODULE_PATH="$tmp/empty" run_ranks_keep_failing 2 30 "$CT" -s 1
  expect_init_fail 2 "LOOM_NET=ib: cannot load libloom-net-ib.so: it is in none of $tmp/empty" \
    "a missing ib module: init fails naming the file"
fi
if command -v perl >/dev/null; then
  # The real module, its libfabric.so.1 renamed: as on a host without libfabric.
  perl -pe 's/libfabric\.so\.1/libfabriX.so.1/g' <"$OFI_MOD" >"$tmp/nolib/libloom-net-ofi.so"
  LOOM_NET=ofi LOOM_MODULE_PATH="$tmp/nolib" run_ranks_keep_failing 2 30 "$CT" -s 1
  expect_init_fail 2 "LOOM_NET=ofi: cannot load libloom-net-ofi.so (libfabriX.so.1: cannot open shared object file.*): install libfabric1 (Debian, Ubuntu) or libfabric (RPM), or unset LOOM_NET" \
    "the ofi module without its libfabric: init fails naming the package"
else
  echo "SKIP: the ofi module without its libfabric (no perl to rename the library)"
fi
echo "not a module" >"$tmp/junk/libloom-net-ofi.so"
LOOM_NET=ofi LOOM_MODULE_PATH="$tmp/junk" run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "LOOM_NET=ofi: cannot load libloom-net-ofi.so ($tmp/junk/libloom-net-ofi.so: .*): the file is damaged or not a module of this machine; reinstall Loom" \
  "a damaged module file: refused"
LOOM_NET=ofi LOOM_MODULE_PATH="$TESTBIN/modules/.libs" run_ranks_keep_failing 2 30 "$CT" -s 1
expect_init_fail 2 "LOOM_NET=ofi: cannot load libloom-net-ofi.so: .*/libloom-net-ofi.so comes from another build of Loom (Loom 0.0.0-other, module ABI 1, 1 settings; this library: Loom [0-9.]*" \
  "a module of another Loom build: refused, naming both"
check_no_leftovers coll_test
finish
