#!/bin/bash
# The engine's post/progress interface: one thread drives collectives on
# three communicators at once (engine_test), over shared memory and TCP.
. "$(dirname "$0")/lib.sh"
ET="$TESTBIN/ranks/engine_test"
for n in 2 3; do
  run_ranks $n 120 "$ET"
  expect_count "one thread: exact" $n "3 communicators driven by one thread per rank, $n ranks"
  expect_count "ran on this thread: exact" $n "a group over 3 communicators on one thread, $n ranks"
done
LOOM_SHM_DISABLE=1 run_ranks 3 120 "$ET"
expect_count "one thread: exact" 3 "the same over TCP only, 3 ranks"
expect_count "ran on this thread: exact" 3 "the group over TCP only, 3 ranks"
check_no_leftovers engine_test
finish
