#!/bin/bash
# Connections made on first use (LOOM_CONNECT=lazy, the default) against
# all at init (eager), over TCP only (LOOM_SHM_DISABLE=1): the file
# descriptors a rank holds after init, after a verified all-reduce and
# all-gather sweep and after an all-to-all; send/recv outside a group and
# a receive from any source, which must connect by themselves; a rank
# dead before anyone connected to it; a bad LOOM_CONNECT.  64 ranks in the
# plain pass (about 20 s), 8 under sanitizers (LOOM_TEST_LIGHT=1).
. "$(dirname "$0")/lib.sh"
CT="$TESTBIN/ranks/connect_test"
FT="$TESTBIN/ranks/fault_test"
export LOOM_SHM_DISABLE=1
n=64
[ "${LOOM_TEST_LIGHT:-0}" = 1 ] && n=8

# fds_at WHAT — the count rank 0 printed for WHAT ("init", "sweep", ...).
fds_at() { printf '%s\n' "$out" | sed -n "s/^\[0\] fds: .*$1 \([0-9]*\).*/\1/p" | head -n 1; }

LOOM_CONNECT=lazy run_ranks $n 180 "$CT" --p2p --alltoall
expect_count ": ok$" $n "lazy, $n ranks over tcp: sweep, ring send/recv, receive from any, all-to-all verified"
init=$(fds_at init) sweep=$(fds_at sweep) a2a=$(fds_at alltoall)
echo "# lazy: most fds on a rank: init ${init:-?}, after the sweep ${sweep:-?}, after all-to-all ${a2a:-?}"
# Init holds no data socket; the sweep's schedules (ring, tree, recursive
# doubling: at most 2 log2(n) + 2 peers, 2 sockets each) stay under 48 on
# 64 ranks; all-to-all connects every peer it sends to.
if [ -n "$sweep" ] && [ "$sweep" -le 48 ] && [ "$init" -lt "$sweep" ]; then
  pass "lazy: at most $sweep fds a rank after the sweep (init $init; bound 48)"
else
  fail "lazy: fds init '$init', after the sweep '$sweep' (expected init < sweep <= 48)"
fi
if [ -n "$a2a" ] && [ "$a2a" -ge $((init + 2 * (n - 1))) ]; then
  pass "lazy: all-to-all connected all $((n - 1)) peers ($a2a fds)"
else
  fail "lazy: after all-to-all '$a2a' fds (expected >= init + 2 x $((n - 1)))"
fi

LOOM_CONNECT=eager run_ranks $n 180 "$CT" --p2p
expect_count ": ok$" $n "eager, $n ranks over tcp: the same calls verified"
eager_init=$(fds_at init)
if [ -n "$eager_init" ] && [ -n "$init" ] && [ "$eager_init" -ge $((init + 2 * (n - 1))) ]; then
  pass "eager: $eager_init fds a rank from init (2 sockets to each of $((n - 1)) peers)"
else
  fail "eager: '$eager_init' fds at init (expected >= $init + 2 x $((n - 1)))"
fi

# A rank that dies before any collective: those that would connect to it
# are refused, those it would have connected to learn it from the
# bootstrap; every one names it.
for victim in 0 3; do
  run_ranks_keep_failing 4 120 "$FT" --kill-early $victim
  expect_failed_ranks 1 "lazy: rank $victim killed before any connection: only it failed"
  expect_count "noticed rank $victim's death" 3 "lazy: rank $victim killed before any connection: the 3 others name it"
done

# --keep-going: every rank says why, none is killed before it prints
LOOM_CONNECT=sometimes run_ranks_keep_failing 2 60 "$CT"
expect_init_fail 2 "LOOM_CONNECT=sometimes: must be \"lazy\"" "a bad LOOM_CONNECT fails init saying what it takes"

unset LOOM_SHM_DISABLE
check_no_leftovers connect_test
check_no_leftovers fault_test
finish
