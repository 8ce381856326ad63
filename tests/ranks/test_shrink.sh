#!/bin/bash
# Carrying on without failed ranks (shrink_test.c): a rank killed in the
# middle of a sweep and the survivors shrinking and verifying a sweep, over
# shared memory and over TCP; shrinks with no failure (twice from one
# parent, and of a shrunk communicator); loomCommRevoke ending a blocked
# call on this rank and the others' calls; bad arguments; survivors that
# disagree on whom to exclude, or a survivor dying during the shrink,
# failing within the bootstrap timeout.
. "$(dirname "$0")/lib.sh"
ST="$TESTBIN/ranks/shrink_test"
for shm_off in 0 1; do
  export LOOM_SHM_DISABLE=$shm_off
  echo "# LOOM_SHM_DISABLE=$shm_off"
  start=$SECONDS
  run_ranks_keep_failing 4 120 "$ST" --kill 2
  expect_failed_ranks 1 "4 ranks, rank 2 killed mid-sweep: only it failed"
  expect_count ": kill ok: rank 2 died, shrank to 3 ranks" 3 \
    "4 ranks, rank 2 killed mid-sweep: the 3 survivors shrink and verify a sweep ($((SECONDS - start)) s)"
  expect_count "rank 2 (pid [0-9]*) killed by signal 9" 1 "loomrun reports the killed rank"
  printf '%s\n' "$out" | grep "kill ok" | sed 's/^/    /'
done
unset LOOM_SHM_DISABLE
run_ranks_keep_failing 3 120 "$ST" --kill 0
expect_failed_ranks 1 "rank 0 killed: only it failed"
expect_count ": kill ok: rank 0 died, shrank to 2 ranks" 2 "rank 0 killed: the survivors meet at rank 1"
run_ranks 4 120 "$ST" --healthy
expect_count ": healthy ok" 4 "shrinks without a failure: twice from one parent, then of the result"
run_ranks 3 120 "$ST" --revoke
expect_count ": revoke ok" 3 "loomCommRevoke ends a blocked call, the others fail naming the revoker, then a shrink"
run_ranks 2 60 "$ST" --bad-args
expect_count ": bad-args ok" 2 "invalid shrink arguments: loomInvalidArgument, communicator intact"
# a survivor dies instead of shrinking: a member (1), then the rank where
# the survivors meet (0); the others fail within the bootstrap timeout
for d in 1 0; do
  LOOM_BOOTSTRAP_TIMEOUT=4 run_ranks_keep_failing 4 60 "$ST" --die-in-shrink $d
  expect_failed_ranks 2 "rank 3 killed, then rank $d dies during a shrink: only those two failed"
  expect_count ": die-in-shrink ok" 2 "rank $d dies during a shrink: the 2 others fail within the bootstrap timeout"
done
LOOM_BOOTSTRAP_TIMEOUT=4 run_ranks_keep 3 60 "$ST" --disagree
expect_count ": disagree ok" 3 "survivors disagreeing on the excluded set all fail, saying why"
check_no_leftovers shrink_test
finish
