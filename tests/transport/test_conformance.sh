#!/bin/bash
# The transport conformance suite: the same checks (tests/transport/
# checks.c) through the ops table of every transport built here — tcp
# (connecting on first use, and at init),
# shm, ofi with its tcp provider, Loom's TCP transport loaded as a plugin,
# and ibverbs over the in-process fake device (on a real device
# tests/ranks/test_ib.sh runs it too).  A transport that is not built here
# is a SKIP with the reason; anything else that does not pass fails.
. "$(dirname "$0")/../ranks/lib.sh"
BIN="$TESTBIN/transport"
PLUGIN="$TESTBIN/../transports/tcpplug/.libs/libloom-net-tcpplug.so"

# conform WHAT PROGRAM ARG [ENV...] — runs one transport's checks (bounded).
conform() {
  what=$1; prog=$2; arg=$3; shift 3
  out=$(env "$@" timeout -k 5 300 "$prog" "$arg" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/  /'
  if [ "$rc" -eq 77 ]; then
    echo "SKIP: $what: $(printf '%s\n' "$out" | tail -n 1)"
  elif [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q ": all checks passed$"; then
    pass "$what: every conformance check"
  else
    fail "$what: conformance (exit $rc)"
  fi
}

conform "tcp" "$BIN/conformance" tcp
conform "tcp (LOOM_CONNECT=eager)" "$BIN/conformance" tcp LOOM_CONNECT=eager
conform "shm" "$BIN/conformance" shm
conform "ofi (tcp provider)" "$BIN/conformance" ofi LOOM_OFI_PROVIDER=tcp
conform "the TCP plugin" "$BIN/conformance" "$PLUGIN"
if [ -x "$BIN/conformance_ib_fake" ]; then
  conform "ibverbs (fake device)" "$BIN/conformance_ib_fake" ib
  conform "ibverbs (fake device, On-Demand Paging)" "$BIN/conformance_ib_fake" ib FAKE_RDMA_ODP=1
else
  echo "SKIP: ibverbs (fake device): this Loom was built without the ibverbs transport"
fi
check_no_leftovers conformance
finish
