#!/bin/bash
# Who may join a job (docs/security.md): two jobs given one LOOM_COMM_ID
# never compute together; a process that does not know the job's secret
# cannot join, inject a rank table, replay a captured hello, or starve
# the root with a flood; a
# port held by another program is named as such; loomCommAbort ends a
# pending non-blocking init at once.  Every wait is bounded.
. "$(dirname "$0")/lib.sh"
JP="$TESTBIN/ranks/job_probe"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FLOOD="$(dirname "$0")/flood.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_listen PORT: waits, at most 30 s, until a socket listens on PORT
# (ss, iproute2); 1 if none did.
wait_listen() {
  wl_i=0
  while [ $wl_i -lt 300 ]; do
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
    sleep 0.1
    wl_i=$((wl_i + 1))
  done
  return 1
}
export LOOM_BOOTSTRAP_TIMEOUT=20

# ---- two jobs on one LOOM_COMM_ID ----------------------------------------
# Job A's rank 1 arrives late; job B starts meanwhile with A's address.
port=$(free_port)
( LOOM_COMM_ID=127.0.0.1:$port JOB_VALUE=1 PROBE_DELAY_MS=2500 \
    timeout -k 5 60 "$LOOMRUN" --tag-output --timeout 50 -n 2 "$JP" >"$tmp/a" 2>&1; echo $? >"$tmp/a.rc" ) &
# B starts once A's root listens (a fixed 0.7 s was too short under ASan
# on a loaded machine: B's root took the port and the jobs swapped roles).
wait_listen "$port" || fail "job A's root never listened on port $port"
# --keep-going: each of B's ranks says why it failed (its rank 1 may meet
# A's root and fail before its rank 0 has said that the port is taken).
LOOM_COMM_ID=127.0.0.1:$port JOB_VALUE=1000 timeout -k 5 60 "$LOOMRUN" --tag-output --keep-going \
  --timeout 50 -n 2 "$JP" >"$tmp/b" 2>&1
echo $? >"$tmp/b.rc"
# B's rank 1 alone (as another launcher might start it after its rank 0
# failed) meets A's root:
env LOOM_COMM_ID=127.0.0.1:$port LOOM_COMM_SECRET=job-b LOOM_RANK=1 LOOM_NRANKS=2 JOB_VALUE=1000 \
  timeout -k 5 30 "$JP" >>"$tmp/b" 2>&1
wait
out=$(cat "$tmp/a"); rc=$(cat "$tmp/a.rc")
expect_count "job 1 sum 3 (expected 3)" 2 "job A completes with its own ranks and data (rc=$rc)"
out=$(cat "$tmp/b"); rc=$(cat "$tmp/b.rc")
expect_count "job 1000 sum" 0 "job B computes nothing"
expect_count "rank 0: init failed: .*in use" 1 "job B's rank 0: the root's port is in use"
expect_count "^rank 1: init failed: .*is not this job's bootstrap root" 1 "job B's rank 1: another job's root, said loudly"
[ "$rc" != 0 ] && pass "job B fails under loomrun (rc=$rc)" || fail "job B exited 0"

# ---- a forged rank table ----------------------------------------------------
out=$(timeout 30 "$JP" --fake-root 2>&1); rc=$?
expect_count "fake-root: refused" 1 "a root without the secret cannot hand out peer addresses"

# ---- a flood of 1,100 silent connections while the job starts --------------
port=$(free_port)
( ulimit -n 4096; "$PY" "$FLOOD" 127.0.0.1 "$port" 1100 8 >"$tmp/flood" 2>&1 ) &
flood_pid=$!
sleep 0.3
LOOM_COMM_ID=127.0.0.1:$port JOB_VALUE=7 PROBE_DELAY_MS=4000 run_ranks 2 60 "$JP"
wait $flood_pid
expect_count "job 7 sum 21 (expected 21)" 2 "the job completes while 1,100 silent connections flood its root"
expect_count "dropped .* connections in all" 1 "the root drops the flood (logged once, counted)"
printf '  %s\n' "$(cat "$tmp/flood")"

# ---- strangers trickling into a rank's data port as it connects ------------
# 400 connections that send a byte every half second and never finish a
# hello, made while the job sits between init and its first all-reduce
# (whose first use opens the TCP connections): more than the 256 a rank
# lets prove themselves at once, so its peer's connection waits behind
# them in the backlog unless the oldest stranger gives way.
( LOOM_SHM_DISABLE=1 LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET PROBE_PAUSE_MS=3000 JOB_VALUE=9 \
    timeout -k 5 60 "$LOOMRUN" --tag-output --timeout 50 -n 2 "$JP" >"$tmp/slow" 2>&1 ) &
job_pid=$!
data_port=
for _ in $(seq 200); do
  data_port=$(sed -n 's/.*tcp: rank 1 listening on 127.0.0.1:\([0-9]*\),.*/\1/p' "$tmp/slow")
  [ -n "$data_port" ] && break
  sleep 0.1
done
if [ -z "$data_port" ]; then
  fail "slow-loris: rank 1 never said where it listens"
else
  ( ulimit -n 4096; "$PY" "$FLOOD" 127.0.0.1 "$data_port" 400 8 --trickle >"$tmp/trickle" 2>&1 ) &
  trickle_pid=$!
  wait $job_pid
  wait $trickle_pid
  out=$(cat "$tmp/slow")
  expect_count "job 9 sum 27 (expected 27)" 2 "slow-loris on the data port: the job's all-reduce is right"
  took=$(sed -n 's/.*rank 1: the all-reduce took \([0-9.]*\) s/\1/p' <<<"$out")
  if awk -v t="${took:-99}" 'BEGIN { exit !(t < 4) }'; then
    pass "slow-loris: rank 1's peer got through the strangers in ${took} s (each stranger may hold a slot 5 s)"
  else
    fail "slow-loris: the all-reduce took ${took:-?} s behind the strangers"
  fi
  expect_count "rank 1 dropped an incoming connection" 4 "slow-loris: the first 4 drops logged"
  expect_count "rank 1 dropped [0-9]* incoming connections in all" 1 "slow-loris: the rest counted, summed once"
  printf '  %s\n' "$(cat "$tmp/trickle" | tr '\n' ' ')" "$(grep 'in all' <<<"$out")"
fi

# ---- a captured hello replayed -------------------------------------------------
# Rank 1 reaches the root through a man in the middle (replay.py), which
# sends rank 1's proof and hello again on a connection of its own: the
# root's challenge differs per connection, so the copy must be refused,
# and the genuine one still admitted.
port=$(free_port); pport=$(free_port)
"$PY" "$(dirname "$0")/replay.py" "$pport" 127.0.0.1 "$port" >"$tmp/replay" 2>&1 &
replay_pid=$!
sleep 0.3
LOOM_COMM_ID=127.0.0.1:$port JOB_VALUE=7 run_ranks 2 60 sh -c \
  '[ "$LOOM_RANK" = 1 ] && LOOM_COMM_ID=127.0.0.1:'"$pport"' && export LOOM_COMM_ID; exec "$0"' "$JP"
wait $replay_pid
expect_count "job 7 sum 21 (expected 21)" 2 "the job completes through the man in the middle"
expect_count "dropped connection from .*wrong proof" 1 "the root drops the replayed hello (logged)"
out=$(cat "$tmp/replay")
expect_count "^replay refused: error frame" 1 "a replayed authenticated hello is refused with an error frame"
expect_count "relayed the genuine hello" 1 "the genuine hello went through afterwards"

# ---- the port held by another program ---------------------------------------
port=$(free_port)
"$PY" -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $port)); s.listen(8); s.settimeout(20)
end = time.time() + 15
while time.time() < end:
    try:
        c, _ = s.accept(); c.sendall(b'SSH-2.0-OpenSSH_9.2\r\n')
    except OSError:
        break
" &
holder=$!
sleep 0.3
# Each rank on its own (loomrun would end rank 1 as soon as rank 0 fails).
out=$(for r in 0 1; do env LOOM_COMM_ID=127.0.0.1:$port LOOM_RANK=$r LOOM_NRANKS=2 \
        timeout -k 5 30 "$JP" 2>&1; done)
kill $holder 2>/dev/null; wait $holder 2>/dev/null
expect_count "^rank 0: init failed: .*in use" 1 "rank 0: the port of LOOM_COMM_ID is in use"
expect_count "^rank 1: init failed: .*another program listens on that port" 1 "rank 1: a foreign program on the port is named as such"

# ---- loomCommAbort of a pending non-blocking init -----------------------------
out=$(timeout 30 "$JP" --abort-init 2>&1); rc=$?
expect_count "abort-init: loomCommAbort returned after" 1 "loomCommAbort ends a pending non-blocking init within 1 s"

check_no_leftovers job_probe
finish
