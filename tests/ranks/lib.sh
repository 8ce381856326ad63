# lib.sh — helpers for the multi-rank test scripts (sourced).
# Every launch is bounded twice: loomrun --timeout and an outer timeout.
set -u
: "${LOOMRUN:?set by make check}"
: "${TESTBIN:?set by make check}"
export LOOM_SOCKET_IFNAME="${LOOM_SOCKET_IFNAME:-lo}"
failures=0

# run_ranks N TIMEOUT_S prog args... — output in $out (every line tagged
# "[rank] ": --tag-output), status in $rc.  The launch must exit 0: a rank
# that crashes or fails after printing the lines a check counts fails the
# script.  run_ranks_failing: the launch must fail (exit non-zero), as a
# test of an error expects; its checks then say which error.
run_ranks() { launch_ranks 0 "" "$@"; }
run_ranks_failing() { launch_ranks fail "" "$@"; }

# launch_ranks WANT LOOMRUN_FLAG N TIMEOUT_S prog args... — WANT is 0 or
# "fail" (a non-zero status other than a timeout's)
launch_ranks() {
  local want=$1 flag=$2
  n=$3; t=$4; shift 4
  out=$(timeout -k 5 $((t + 10)) "$LOOMRUN" --tag-output ${flag:+"$flag"} --timeout "$t" -n "$n" "$@" 2>&1)
  rc=$?
  launch_checks "$want" "$t" "$n ranks of $*"
}

# launch_checks WANT TIMEOUT_S WHAT — after a launch a script made itself
# ($out and $rc set; TIMEOUT_S its loomrun --timeout): the checks
# run_ranks makes, sanitizer_check and exit_check.
launch_checks() {
  t=$2
  sanitizer_check "$3"
  exit_check "$1" "$3"
}

# exit_check WANT WHAT — $rc is what WANT (0 or "fail") says.  A launch
# meant to fail must end by itself: 124 (loomrun's --timeout, or the outer
# timeout's TERM) is a hang, whatever lines its ranks printed first.  (A
# loomrun the outer timeout has to KILL gives 137, as a killed rank does:
# kill tests count the failed ranks too, expect_failed_ranks.)
exit_check() {
  local why=""
  if [ "$rc" -eq 124 ]; then
    why="timed out after $t s"
  elif [ "$1" = fail ] && [ "$rc" -eq 0 ]; then
    why="exited 0 where it should have failed"
  elif [ "$1" != fail ] && [ "$rc" -ne 0 ]; then
    why="exited $rc"
  fi
  if [ -n "$why" ]; then
    fail "$2: the launch $why"
    printf '%s\n' "$out" | tail -n 30
  fi
}

# A sanitizer's report anywhere in a launch's output fails the script,
# whatever the lines its checks count say: LeakSanitizer reports at exit,
# after a rank printed "ok", and a launch that is meant to fail may fail
# for that reason too.
sanitizer_check() {
  case $out in
  *"ERROR: LeakSanitizer"* | *"ERROR: AddressSanitizer"* | *"runtime error:"*)
    fail "a sanitizer reported an error: $*"
    printf '%s\n' "$out" | grep -A14 -E "ERROR: (Leak|Address)Sanitizer|runtime error:" | head -60 ;;
  esac
}

# run_ranks, but a rank that fails does not end the others: each says why.
run_ranks_keep() { launch_ranks 0 --keep-going "$@"; }
run_ranks_keep_failing() { launch_ranks fail --keep-going "$@"; }

# expect_failed_ranks N WHAT — loomrun --keep-going named exactly N ranks
# that failed: after a rank is killed, the victim alone (the launch's
# status is the victim's, so a survivor that crashed after printing its
# "ok" shows only here).
expect_failed_ranks() {
  expect_count "^loomrun: rank [0-9]* (pid [0-9]*) \(exited with status\|killed by signal\)" "$1" "$2"
}

# expect_init_fail N PATTERN WHAT — every rank's init failed saying PATTERN.
expect_init_fail() {
  if [ "$rc" -ne 0 ]; then
    expect_count "FAIL: loomCommInitRank.*$2" "$1" "$3"
  else
    fail "$3 (init succeeded)"
  fi
}

pass() { echo "PASS: $*"; }
skip() { echo "SKIP: $*"; }

# use_python_checks WHAT — for scripts that check output with Python: PY
# (Debian's python3), have_py (1 when it can run), a scratch directory
# $tmp removed at exit; without PY one SKIP line says WHAT is left out.
use_python_checks() {
  PY=/usr/bin/python3
  tmp=$(mktemp -d) || exit 1
  trap 'rm -rf "$tmp"' EXIT
  have_py=0
  [ -x "$PY" ] && have_py=1
  [ $have_py = 1 ] || skip "no $PY: $1"
}
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_count PATTERN N WHAT — $out must contain exactly N lines matching
expect_count() {
  got=$(printf '%s\n' "$out" | grep -c -- "$1")
  if [ "$got" -eq "$2" ]; then pass "$3"; else fail "$3 (expected $2 lines matching '$1', got $got; rc=$rc)"; printf '%s\n' "$out" | tail -n 30; fi
}

# No rank of a test may outlive it, nor leave a shared-memory segment.
check_no_leftovers() {
  sleep 0.2
  if pgrep -f "$TESTBIN/ranks/$1" >/dev/null; then
    fail "processes of $1 left behind: $(pgrep -af "$TESTBIN/ranks/$1" | head -3)"
    pkill -9 -f "$TESTBIN/ranks/$1"
  else
    pass "no $1 process left behind"
  fi
  left=$(ls /dev/shm 2>/dev/null | grep '^loom-' | head -3)
  if [ -n "$left" ]; then
    fail "shared-memory segments left in /dev/shm: $left"
    rm -f /dev/shm/loom-*
  else
    pass "no loom segment left in /dev/shm"
  fi
}

finish() {
  if [ "$failures" -eq 0 ]; then echo "all checks passed"; exit 0; fi
  echo "$failures check(s) failed"; exit 1
}
