#!/bin/bash
# A rank killed mid-run, a stalled rank, mismatched calls, abort; a rank
# dying in a split or a group, a rank frozen by SIGSTOP: every other rank
# returns an error naming the culprit, promptly; nothing hangs.
. "$(dirname "$0")/lib.sh"
FT="$TESTBIN/ranks/fault_test"
kill_case() { # n victim
  run_ranks_keep_failing $1 120 "$FT" --kill $2
  expect_failed_ranks 1 "$1 ranks, rank $2 killed: only it failed"
  expect_count "noticed rank $2's death" $(($1 - 1)) "$1 ranks, rank $2 killed: every other rank names it"
  expect_count "rank $2 (pid [0-9]*) killed by signal 9" 1 "loomrun reports the killed rank"
}
# Every case over shared memory (the default on one host), then over TCP.
for shm_off in 0 1; do
  export LOOM_SHM_DISABLE=$shm_off
  echo "# LOOM_SHM_DISABLE=$shm_off"
  kill_case 2 1
  kill_case 3 0
  kill_case 8 5
  run_ranks_keep 4 120 "$FT" --stall 2 1500
  expect_count "gave up on stalled rank 2" 3 "stalled rank named by the 3 others within timeout_ms"
  run_ranks_keep 8 120 "$FT" --stall 5 1500
  expect_count "gave up on stalled rank 5" 7 "8 ranks (recursive doubling): stalled rank 5 named by the 7 others"
  run_ranks_keep 4 120 "$FT" --abort-rank 2
  expect_count "learned of rank 2's abort" 3 "a rank's loomCommAbort is named as an abort by the others"
  run_ranks_keep 3 120 "$FT" --mismatch
  expect_count "mismatch detected .*invalid usage" 3 "count mismatch: loomInvalidUsage on every rank"
  run_ranks_keep 3 60 "$FT" --clean-exit
  expect_count "clean exit of rank 1 ok" 2 "a rank that sent and exited cleanly is no death while its data waits to be read"
  run_ranks_keep 2 60 "$FT" --abort
  expect_count "abort ended the blocked collective" 1 "loomCommAbort from another thread"
done
unset LOOM_SHM_DISABLE
# Other phases (phase_test.c): a rank dying instead of splitting, inside a
# group before its end, and a rank frozen by SIGSTOP (over shared memory
# and TCP); every survivor names it within its bound.
PT="$TESTBIN/ranks/phase_test"
LOOM_BOOTSTRAP_TIMEOUT=5 run_ranks_keep_failing 4 60 "$PT" --die-in split 2
expect_failed_ranks 1 "rank 2 dies instead of splitting: only it failed"
expect_count ": split ok after" 3 "rank 2 dies instead of splitting: the 3 others' split fails naming it"
run_ranks_keep_failing 4 60 "$PT" --die-in group 1
expect_failed_ranks 1 "rank 1 dies inside a group: only it failed"
expect_count ": group ok after" 3 "rank 1 dies inside a group: the 3 others' loomGroupEnd fails naming it"
for shm_off in 0 1; do
  LOOM_SHM_DISABLE=$shm_off run_ranks_keep_failing 4 60 "$PT" --sigstop 2
  expect_failed_ranks 1 "rank 2 stopped by SIGSTOP (LOOM_SHM_DISABLE=$shm_off): only it failed"
  expect_count ": sigstop ok after" 3 "rank 2 stopped by SIGSTOP (LOOM_SHM_DISABLE=$shm_off): the 3 others time out naming it within 1.5 + 5 s"
done
# The process hosting the bootstrap root (it made the id) killed right
# after the ranks' init, as if its host went away: nothing needs it any
# more, so all-reduces, a barrier, a split and finalize work.
rm -f "$TESTBIN/ranks/root-gone.id"
"$PT" --make-id "$TESTBIN/ranks/root-gone.id" >/dev/null 2>&1 &
root_pid=$!
for _ in $(seq 100); do [ -f "$TESTBIN/ranks/root-gone.id" ] && break; sleep 0.1; done
run_ranks 3 60 "$PT" --root-gone "$TESTBIN/ranks/root-gone.id" "$root_pid"
kill -9 "$root_pid" 2>/dev/null # in case the ranks never got to it
wait "$root_pid"; root_rc=$?
expect_count ": root-gone ok" 3 "the root's process killed after init: the 3 ranks compute, split and finalize (root exit $root_rc)"
[ "$root_rc" = 137 ] && pass "the root's process died of SIGKILL" || fail "the root's process exited $root_rc"
rm -f "$TESTBIN/ranks/root-gone.id"
check_no_leftovers phase_test
check_no_leftovers fault_test
finish
