#!/bin/bash
# The soak (soak_test.c): 10,000 randomly chosen calls on 4 ranks (every
# collective, send/recv, barrier and fused buckets; every datatype and op;
# three communicators, one with its ranks reversed; at once or on a
# stream), every result verified, then RSS, open fds and threads checked
# flat against the warmed-up process.  LOOM_SOAK_CALLS=N runs longer,
# LOOM_SOAK_SEED=S another sequence.
. "$(dirname "$0")/lib.sh"
# LOOM_TEST_LIGHT (the sanitizer pass of scripts/test.sh): 2,000 calls
light=2000
[ "${LOOM_TEST_LIGHT:-0}" = 1 ] || light=10000
calls=${LOOM_SOAK_CALLS:-$light}
seed=${LOOM_SOAK_SEED:-1}
limit=$((300 + calls / 50))
start=$SECONDS
run_ranks 4 $limit "$TESTBIN/ranks/soak_test" "$calls" "$seed"
expect_count ": soak ok: $calls calls" 4 \
  "4 ranks, $calls random calls (seed $seed) verified, resources flat, in $((SECONDS - start)) s (rc $rc)"
printf '%s\n' "$out" | grep "^\[0\].*soak ok" | sed 's/^/    /'
# the same over TCP (no shared memory), a fifth of the calls, another seed
tcp_calls=$((calls / 5))
LOOM_SHM_DISABLE=1 run_ranks 4 $limit "$TESTBIN/ranks/soak_test" "$tcp_calls" $((seed + 1))
expect_count ": soak ok: $tcp_calls calls" 4 "the same over TCP: $tcp_calls calls verified, resources flat (rc $rc)"
check_no_leftovers soak_test
finish
