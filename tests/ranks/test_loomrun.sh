#!/bin/bash
# test_loomrun.sh — end-to-end checks of the loomrun launcher.
# shellcheck disable=SC2016,SC2317  # single quotes are for the ranks; cleanup runs from trap
# Uses $LOOMRUN, else tools/loomrun next to this source tree.  Exit 0 = pass.
set -u

here=$(cd "$(dirname "$0")" && pwd)
LOOMRUN=${LOOMRUN:-$here/../../tools/loomrun}
if [ ! -x "$LOOMRUN" ]; then
  echo "test_loomrun: $LOOMRUN is not an executable" >&2
  exit 1
fi

# Every process the tests start carries this marker in its command line
# (sh's $0), and every sleep uses this unusual duration, so that leftovers
# can be found with pgrep.
MARK="loomrun_test_$$_$RANDOM"
SLP=$((300000 + RANDOM))
tmp=$(mktemp -d)
failures=0

cleanup() {
  pkill -KILL -f -- "$MARK" 2>/dev/null
  pkill -KILL -f -- "sleep $SLP\$" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

expect_eq() { # name expected actual
  if [ "$2" == "$3" ]; then pass "$1"; else
    fail "$1: expected [$2], got [$3]"
  fi
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# Runs loomrun --tag-output (bounded by timeout 30) with stdout/stderr in
# $tmp/out and $tmp/err; sets rc and ms (elapsed milliseconds).  run_plain:
# without --tag-output (loomrun's default, as mpirun's).
run_plain() {
  local t0
  t0=$(now_ms)
  timeout 30 "$LOOMRUN" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  ms=$(($(now_ms) - t0))
}
run() { run_plain --tag-output "$@"; }

no_leftovers() { # name
  for _ in $(seq 50); do # processes killed just now may take a moment
    pgrep -f -- "$MARK|sleep $SLP\$" >/dev/null || { pass "$1: no leftover processes"; return; }
    sleep 0.1
  done
  fail "$1: leftover processes: $(pgrep -af -- "$MARK|sleep $SLP\$" | tr '\n' ';')"
}

expect_lt() { # name value bound
  if [ "$2" -lt "$3" ]; then pass "$1 ($2 < $3)"; else fail "$1: $2 is not < $3"; fi
}

# ---- environment -----------------------------------------------------------
unset LOOM_COMM_ID LOOM_SOCKET_IFNAME LOOM_PORT_RANGE
run -n 3 sh -c 'echo $LOOM_RANK/$LOOM_NRANKS/$LOOM_LOCAL_RANK' "$MARK"
expect_eq "env: exit code" 0 "$rc"
expect_eq "env: rank variables" $'[0] 0/3/0\n[1] 1/3/1\n[2] 2/3/2' "$(sort "$tmp/out")"
expect_eq "env: stderr empty" "" "$(cat "$tmp/err")"

run -n 3 sh -c 'echo "$LOOM_COMM_ID $LOOM_SOCKET_IFNAME"' "$MARK"
ids=$(sed 's/^\[[0-9]\] //' "$tmp/out" | sort -u)
expect_eq "env: one LOOM_COMM_ID for all ranks" 1 "$(echo "$ids" | wc -l)"
if [[ $ids =~ ^127\.0\.0\.1:([0-9]+)\ lo$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] &&
  [ "${BASH_REMATCH[1]}" -le 65535 ]; then
  pass "env: LOOM_COMM_ID=127.0.0.1:port, LOOM_SOCKET_IFNAME=lo"
else
  fail "env: bad LOOM_COMM_ID/LOOM_SOCKET_IFNAME: [$ids]"
fi

LOOM_PORT_RANGE=47311-47320 run -n 2 sh -c 'echo $LOOM_COMM_ID' "$MARK"
port=$(head -n1 "$tmp/out" | sed 's/.*://')
if [ "$rc" = 0 ] && [ "$port" -ge 47311 ] && [ "$port" -le 47320 ]; then
  pass "env: LOOM_PORT_RANGE honoured ($port)"
else
  fail "env: LOOM_PORT_RANGE=47311-47320 gave [$(cat "$tmp/out")] rc $rc"
fi

LOOM_COMM_ID=10.1.2.3:4567 LOOM_SOCKET_IFNAME=eth9 \
  run -n 2 sh -c 'echo "$LOOM_COMM_ID $LOOM_SOCKET_IFNAME"' "$MARK"
expect_eq "env: existing LOOM_COMM_ID and LOOM_SOCKET_IFNAME kept" \
  $'[0] 10.1.2.3:4567 eth9\n[1] 10.1.2.3:4567 eth9' "$(sort "$tmp/out")"

# ---- output ------------------------------------------------------------------
run -n 2 sh -c 'echo out$LOOM_RANK; echo err$LOOM_RANK >&2; printf "part$LOOM_RANK"' "$MARK"
expect_eq "output: exit code" 0 "$rc"
expect_eq "output: stdout lines" $'[0] out0\n[0] part0\n[1] out1\n[1] part1' "$(sort "$tmp/out")"
expect_eq "output: stderr lines" $'[0] err0\n[1] err1' "$(sort "$tmp/err")"

run --no-prefix -n 2 sh -c 'echo out$LOOM_RANK' "$MARK"
expect_eq "output: --no-prefix" $'out0\nout1' "$(sort "$tmp/out")"
run_plain -n 2 sh -c 'echo out$LOOM_RANK; echo err$LOOM_RANK >&2' "$MARK"
expect_eq "output: unprefixed by default (as mpirun)" $'out0\nout1' "$(sort "$tmp/out")"
expect_eq "output: stderr unprefixed by default" $'err0\nerr1' "$(sort "$tmp/err")"

# ---- torch.distributed's variables ---------------------------------------------
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
RANK=9 WORLD_SIZE=99 run_plain -n 3 sh -c 'echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE' "$MARK"
expect_eq "torch env: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (outer ones replaced)" \
  $'0/3/0/3\n1/3/1/3\n2/3/2/3' "$(sort "$tmp/out")"
run_plain -n 2 sh -c 'echo "$MASTER_ADDR $MASTER_PORT ${LOOM_COMM_ID##*:}"' "$MARK"
set -- $(head -n1 "$tmp/out")
if [ "$(sort -u "$tmp/out" | wc -l)" = 1 ] && [ "${1:-}" = 127.0.0.1 ] &&
   [ "${2:-0}" -ge 1 ] 2>/dev/null && [ "${2:-0}" -le 65535 ] && [ "${2:-}" != "${3:-}" ]; then
  pass "torch env: MASTER_ADDR=127.0.0.1, one MASTER_PORT ($2) for all, not LOOM_COMM_ID's ($3)"
else
  fail "torch env: MASTER_ADDR/MASTER_PORT: [$(cat "$tmp/out")]"
fi
LOOM_PORT_RANGE=47321-47330 run_plain -n 2 sh -c 'echo "$MASTER_PORT ${LOOM_COMM_ID##*:}"' "$MARK"
set -- $(head -n1 "$tmp/out")
if [ "${1:-0}" -gt "${2:-0}" ] 2>/dev/null && [ "${1:-0}" -le 47330 ]; then
  pass "torch env: MASTER_PORT inside LOOM_PORT_RANGE, after LOOM_COMM_ID's ($1 > $2)"
else
  fail "torch env: LOOM_PORT_RANGE=47321-47330 gave MASTER_PORT/LOOM_COMM_ID port [$*]"
fi
MASTER_PORT=29555 run_plain -n 2 sh -c 'echo $MASTER_PORT' "$MARK"
expect_eq "torch env: an existing MASTER_PORT kept" $'29555\n29555' "$(sort "$tmp/out")"

# Many long lines from several ranks at once must never be cut or mixed.
run -n 4 sh -c 'i=0; while [ $i -lt 300 ]; do printf "%s%04d\n" "$(printf %0500d $LOOM_RANK)" $i; i=$((i+1)); done' "$MARK"
bad=$(grep -cvE '^\[([0-3])\] 0{499}[0-3][0-9]{4}$' "$tmp/out")
expect_eq "output: 1200 long lines, none mixed" "1200 0" "$(wc -l <"$tmp/out") $bad"
mismatch=$(sed -E 's/^\[([0-3])\] 0{499}([0-3]).*/\1\2/' "$tmp/out" | grep -cvE '^(.)\1$')
expect_eq "output: every line under its own rank" 0 "$mismatch"

# ---- exit status ---------------------------------------------------------------
run -n 3 sh -c 'exit 0' "$MARK"
expect_eq "exit: all ranks succeed" 0 "$rc"

run -n 3 sh -c 'if [ $LOOM_RANK = 1 ]; then exit 3; fi; sleep '$SLP'; :' "$MARK"
expect_eq "exit: rank 1 exit 3 propagates" 3 "$rc"
expect_lt "exit: other ranks killed quickly (ms)" "$ms" 5000
if grep -qE '^loomrun: rank 1 \(pid [0-9]+\) exited with status 3; killing the other ranks$' "$tmp/err"; then
  pass "exit: failure message"
else
  fail "exit: failure message missing: [$(cat "$tmp/err")]"
fi
no_leftovers "exit"

# Ranks that ignore SIGTERM get SIGKILL 3 s later.
run -n 3 sh -c 'trap "" TERM; if [ $LOOM_RANK = 2 ]; then sleep 0.3; exit 7; fi; sleep '$SLP'; :' "$MARK"
expect_eq "exit: SIGTERM-proof ranks: status 7" 7 "$rc"
expect_lt "exit: SIGKILL after the grace (ms)" "$ms" 8000
if [ "$ms" -ge 3000 ]; then pass "exit: 3 s grace before SIGKILL"; else fail "exit: killed after only $ms ms"; fi
no_leftovers "exit: SIGTERM-proof"

run -n 2 sh -c 'if [ $LOOM_RANK = 0 ]; then kill -9 $$; fi; sleep '$SLP'; :' "$MARK"
expect_eq "signal: rank killed by SIGKILL gives 137" 137 "$rc"
expect_lt "signal: quick (ms)" "$ms" 5000
if grep -qE '^loomrun: rank 0 \(pid [0-9]+\) killed by signal 9 \(Killed\); killing the other ranks$' "$tmp/err"; then
  pass "signal: message"
else
  fail "signal: message missing: [$(cat "$tmp/err")]"
fi
no_leftovers "signal"

run -n 2 "$tmp/no such program $MARK"
expect_eq "exec failure: 127" 127 "$rc"
if grep -q "^\[[01]\] loomrun: cannot run $tmp/no such program $MARK: No such file or directory$" "$tmp/err"; then
  pass "exec failure: message"
else
  fail "exec failure: message missing: [$(cat "$tmp/err")]"
fi

# ---- --timeout -------------------------------------------------------------------
run --timeout 1 -n 3 sh -c 'sleep '$SLP'; :' "$MARK"
expect_eq "timeout: exit code 124" 124 "$rc"
expect_lt "timeout: bounded (ms)" "$ms" 4000
if [ "$ms" -ge 1000 ]; then pass "timeout: not before 1 s"; else fail "timeout: after only $ms ms"; fi
if grep -q "^loomrun: timeout" "$tmp/err"; then pass "timeout: message"; else
  fail "timeout: message missing: [$(cat "$tmp/err")]"
fi
no_leftovers "timeout"

run --timeout 1 -n 2 sh -c 'trap "" TERM; sleep '$SLP'; :' "$MARK"
expect_eq "timeout: SIGTERM-proof ranks: 124" 124 "$rc"
expect_lt "timeout: SIGTERM-proof bounded (ms)" "$ms" 7000
no_leftovers "timeout: SIGTERM-proof"

run --timeout 5 -n 2 sh -c 'exit 0' "$MARK"
expect_eq "timeout: a quick job is not affected" 0 "$rc"

# ---- --keep-going ------------------------------------------------------------------
run --keep-going -n 3 sh -c 'case $LOOM_RANK in 0) exit 5;; 1) sleep 0.5; exit 6;; 2) sleep 1; echo done;; esac' "$MARK"
expect_eq "keep-going: status of the first failure" 5 "$rc"
expect_eq "keep-going: rank 2 ran to its end" "[2] done" "$(cat "$tmp/out")"
if [ "$ms" -ge 1000 ]; then pass "keep-going: waited for all"; else fail "keep-going: returned after $ms ms"; fi
expect_eq "keep-going: one message per failure" 2 "$(grep -cE '^loomrun: rank [01] \(pid [0-9]+\) exited with status [56]$' "$tmp/err")"

# ---- --bind-to -------------------------------------------------------------------
# Each rank runs on the CPUs --report-bindings names for it; only CPUs
# loomrun itself may use count; ranks of different cores share none.
own_cpus='grep Cpus_allowed_list /proc/$$/status | cut -f2'
run --bind-to core --report-bindings -n 2 sh -c "$own_cpus" "$MARK"
expect_eq "bind-to core: exit code" 0 "$rc"
said=$(sed -n 's/^loomrun: rank \([0-9]*\) bound to CPUs \(.*\)$/[\1] \2/p' "$tmp/err" | sort)
expect_eq "bind-to core: each rank runs where --report-bindings says" "$said" "$(sort "$tmp/out")"
ncpu=$(nproc)
expand_cpus() { # "0-2,5" -> one CPU a line
  printf '%s\n' "$1" | tr ',' '\n' | while IFS=- read -r lo hi; do seq "$lo" "${hi:-$lo}"; done
}
# the cores among loomrun's CPUs (a core's hardware threads count once)
ncores=$(for c in $(expand_cpus "$(sh -c "$own_cpus")"); do
  cat "/sys/devices/system/cpu/cpu$c/topology/physical_package_id" \
    "/sys/devices/system/cpu/cpu$c/topology/core_id" 2>/dev/null | tr '\n' ' '
  echo
done | sort -u | wc -l)
if [ "$ncores" -ge 2 ]; then
  r0=$(sed -n 's/^\[0\] //p' "$tmp/out"); r1=$(sed -n 's/^\[1\] //p' "$tmp/out")
  shared=$( (expand_cpus "$r0"; expand_cpus "$r1") | sort -n | uniq -d | tr '\n' ' ')
  if [ -n "$r0" ] && [ -n "$r1" ] && [ -z "$shared" ]; then
    pass "bind-to core: ranks 0 and 1 on different CPUs ($r0 / $r1)"
  else
    fail "bind-to core: ranks 0 and 1 share CPUs ($r0 / $r1: $shared)"
  fi
else
  echo "SKIP: bind-to core on different CPUs: one core here"
fi
taskset -c 0 "$LOOMRUN" --tag-output --bind-to core -n 2 sh -c "$own_cpus" "$MARK" >"$tmp/out" 2>"$tmp/err"
expect_eq "bind-to core under taskset -c 0: every rank on CPU 0" $'[0] 0\n[1] 0' "$(sort "$tmp/out")"
run --bind-to numa --report-bindings -n 2 sh -c "$own_cpus" "$MARK"
said=$(sed -n 's/^loomrun: rank \([0-9]*\) bound to CPUs \(.*\)$/[\1] \2/p' "$tmp/err" | sort)
expect_eq "bind-to numa: each rank runs where --report-bindings says" "$said" "$(sort "$tmp/out")"
mine=$(sh -c "$own_cpus")
run --bind-to none -n 2 sh -c "$own_cpus" "$MARK"
expect_eq "bind-to none: every rank on loomrun's CPUs" "[0] $mine"$'\n'"[1] $mine" "$(sort "$tmp/out")"
# auto (the default): bound to cores; ranks beyond the cores share one,
# consecutive ranks together (0 and 1 on the first core).
run --report-bindings -n 2 sh -c "$own_cpus" "$MARK"
said=$(sed -n 's/^loomrun: rank \([0-9]*\) bound to CPUs \(.*\)$/[\1] \2/p' "$tmp/err" | sort)
expect_eq "bind-to auto, 2 ranks: each rank runs where --report-bindings says" "$said" "$(sort "$tmp/out")"
over=$((ncpu + 1))
run --report-bindings -n $over sh -c "$own_cpus" "$MARK"
said=$(sed -n 's/^loomrun: rank \([0-9]*\) bound to CPUs \(.*\)$/[\1] \2/p' "$tmp/err" | sort)
expect_eq "bind-to auto, $over ranks on $ncpu CPUs: said that some share a core" \
  "loomrun: $over ranks outnumber the cores: some share one" "$(grep outnumber "$tmp/err")"
expect_eq "bind-to auto, $over ranks: each rank runs where --report-bindings says" "$said" \
  "$(sort "$tmp/out")"
r0=$(sed -n 's/^\[0\] //p' "$tmp/out"); r1=$(sed -n 's/^\[1\] //p' "$tmp/out")
last=$(sed -n "s/^\[$ncpu\] //p" "$tmp/out")
expect_eq "bind-to auto, $over ranks: ranks 0 and 1 share the first core" "$r0" "$r1"
if [ "$ncores" -ge 2 ]; then
  if [ -n "$last" ] && [ "$last" != "$r0" ]; then
    pass "bind-to auto, $over ranks: the last rank on another core ($last, rank 0 on $r0)"
  else
    fail "bind-to auto, $over ranks: the last rank on rank 0's CPUs ($last / $r0)"
  fi
fi
run --bind-to socket -n 2 true
expect_eq "bind-to: an unknown value is refused (exit 2)" 2 "$rc"
expect_eq "bind-to: the message names it" 'loomrun: --bind-to "socket": expected auto, core, numa or none' \
  "$(cat "$tmp/err")"

# ---- many ranks, few descriptors ---------------------------------------------------
# Under a hard limit too low for two pipes a rank, each rank's stderr joins
# its stdout (said once); under one too low for one pipe a rank, a clear
# refusal.
(ulimit -n 300 && exec "$LOOMRUN" --tag-output -n 200 sh -c 'echo out$LOOM_RANK; echo err$LOOM_RANK >&2' "$MARK") \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
expect_eq "fds: 200 ranks under ulimit -n 300: exit code" 0 "$rc"
expect_eq "fds: every rank's stdout and stderr lines, under its own prefix" "400 0" \
  "$(wc -l <"$tmp/out") $(grep -cvE '^\[([0-9]+)\] (out|err)\1$' "$tmp/out")"
expect_eq "fds: said once why stderr joins stdout" \
  "loomrun: 200 ranks need 464 open files for separate stdout and stderr pipes but the limit is 300 (ulimit -Hn): each rank's stderr goes to its stdout" \
  "$(cat "$tmp/err")"
(ulimit -n 150 && exec "$LOOMRUN" -n 200 true) >"$tmp/out" 2>"$tmp/err"
rc=$?
expect_eq "fds: 200 ranks under ulimit -n 150: refused (125)" 125 "$rc"
expect_eq "fds: the refusal says what to do" \
  "loomrun: 200 ranks need 264 open files (one pipe each), but the limit is 150: raise it (ulimit -n) or start fewer ranks" \
  "$(cat "$tmp/err")"
no_leftovers "fds"

# ---- leftovers of the ranks' own children ------------------------------------------
run -n 2 sh -c 'sh -c "sleep '$SLP'; :" "$0-child" & echo started' "$MARK"
expect_eq "children: ranks exit 0" 0 "$rc"
expect_lt "children: background children do not hold the job (ms)" "$ms" 5000
no_leftovers "children of successful ranks"

run -n 2 sh -c 'sh -c "sleep '$SLP'; :" "$0-child" & if [ $LOOM_RANK = 1 ]; then exit 2; fi; sleep '$SLP'; :' "$MARK"
expect_eq "children: failure status" 2 "$rc"
no_leftovers "children of failed ranks"

# ---- signals to loomrun ------------------------------------------------------------
for sig in INT TERM; do
  "$LOOMRUN" -n 2 sh -c 'echo ready; sleep '$SLP'; :' "$MARK" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 100); do
    [ "$(grep -c ready "$tmp/out")" = 2 ] && break
    sleep 0.1
  done
  kill -$sig $pid
  for _ in $(seq 100); do
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 $pid 2>/dev/null; then
    fail "SIG$sig: loomrun still running 10 s later"
    kill -KILL $pid
  fi
  wait $pid
  rc=$?
  expect_eq "SIG$sig: forwarded, exit code" $((128 + $(kill -l $sig))) "$rc"
  no_leftovers "SIG$sig"
done

# ---- usage -------------------------------------------------------------------------
run -n 0 true
expect_eq "usage: -n 0 rejected" 2 "$rc"
run -n 1025 true
expect_eq "usage: -n 1025 rejected" 2 "$rc"
run -n 2
expect_eq "usage: no program" 2 "$rc"
run --timeout -1 -n 1 true
expect_eq "usage: bad --timeout" 2 "$rc"
run --help
expect_eq "usage: --help" 0 "$rc"
run --version
expect_eq "usage: --version" 0 "$rc"
run --np 2 sh -c 'echo $LOOM_NRANKS' "$MARK"
expect_eq "usage: --np" $'[0] 2\n[1] 2' "$(sort "$tmp/out")"

no_leftovers "end"
if [ "$failures" -ne 0 ]; then
  echo "test_loomrun: $failures failure(s)" >&2
  exit 1
fi
echo "test_loomrun: all passed"
exit 0
