#!/bin/bash
# The flight recorder (trace_test.c, tools/loom-trace): what a dump holds
# after a known sequence of calls (exact entries, the ring's wrap, off),
# dumps written on error by every failing rank, and loom-trace's verdict
# for a rank that falls behind, one that dies, one that crashes and a
# mismatched call; loomCommDump's bad arguments.
. "$(dirname "$0")/lib.sh"
: "${LOOMTRACE:?set by make check}"
TT="$TESTBIN/ranks/trace_test"
use_python_checks "the checks of the dumps' entries are left out"
export LOOM_TIMEOUT_MS=1500 LOOM_BOOTSTRAP_TIMEOUT=10

# check_record PREFIX N BUFFER — every rank's dump of the prologue
check_record() {
  [ $have_py = 1 ] || return 0
  got=$("$PY" - "$@" <<'PYEOF' 2>&1
import json, sys
prefix, n, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
expect = [  # (kind, seq, coll, count, datatype, fused, stream)
    ("coll", 0, "allreduce", 1024, "float32", 1, 0),
    ("coll", 1, "broadcast", 256, "int32", 1, 0),
    ("coll", 2, "allreduce", 8, "float32", 2, 0),
    ("coll", 3, "allreduce", 8, "float32", 2, 0),
    ("p2p", 0, "send/recv", 64, "uint8", 2, 0),
    ("p2p", 1, "send/recv", 64, "uint8", 2, 0),
    ("coll", 4, "barrier", 0, None, 1, 0),
    ("coll", 5, "allgather", 16, "int64", 1, 1),
]
for r in range(n):
    d = json.load(open("%s.%d" % (prefix, r)))
    assert (d["rank"], d["nranks"], d["reason"], d["buffer"], d["recorded"]) == (r, n, "request", cap, 8), d
    ids = [e["id"] for e in d["entries"]]
    first = max(0, 8 - cap)
    assert ids == list(range(first + 1, 9)), ids
    for e, x in zip(d["entries"], expect[first:]):
        got = (e["kind"], e["seq"], e["coll"], e["count"], e.get("datatype"), e["fused"], e["stream"])
        assert got == x, (r, got, x)
        assert e["state"] == "finished" and e["started_ns"] >= e["queued_ns"] > 0, e
        assert e["ended_ns"] >= e["started_ns"], e
        if e["kind"] == "p2p":  # a group of sends and receives run directly: one pass
            assert e["queued_ns"] == e["started_ns"], e
    byid = {e["id"]: e for e in d["entries"]}
    if 5 in byid:
        assert byid[5]["direction"] == "send" and byid[5]["peers"] == [{"rank": (r + 1) % n, "sent": 64, "received": 0}], byid[5]
        assert byid[6]["direction"] == "recv" and byid[6]["peers"] == [{"rank": (r + n - 1) % n, "sent": 0, "received": 64}], byid[6]
    if 2 in byid:
        assert byid[2]["root"] == 1 % n and byid[2]["peers"], byid[2]
    for e in d["entries"]:
        if e["coll"] == "allgather":  # a ring: 16 int64 to and from each neighbour per step
            sent = sum(p["sent"] for p in e["peers"])
            assert sent == 128 * (n - 1), e
print("ok")
PYEOF
)
}

run_ranks 3 60 "$TT" record "$tmp/rec"
expect_count ": dumped$" 3 "3 ranks dump on demand (rc $rc)"
check_record "$tmp/rec" 3 2000
[ "$got" = ok ] && pass "every entry of the 8 calls is exact on every rank" || fail "the dumps' entries: $got"
LOOM_TRACE_BUFFER=3 run_ranks 3 60 "$TT" record "$tmp/wrap"
check_record "$tmp/wrap" 3 3
[ "$got" = ok ] && pass "LOOM_TRACE_BUFFER=3 keeps the last 3 of 8 calls" || fail "the ring's wrap: $got"
LOOM_TRACE_BUFFER=0 run_ranks_keep_failing 3 60 "$TT" record "$tmp/off"
expect_count "FAIL: loomCommDump.*invalid usage: .*flight recorder is off (LOOM_TRACE_BUFFER=0)" 3 \
  "LOOM_TRACE_BUFFER=0: loomCommDump says the recorder is off (rc $rc)"
LOOM_TRACE_DUMP_DIR=$tmp run_ranks 1 30 "$TT" args -
expect_count ": args ok$" 1 "loomCommDump's bad arguments (rc $rc)"

# scenario MODE RANK [ENV...] — 4 ranks, dumps into a fresh $dir; the
# verdict in $verdict.  Every rank must end within the bound, and the
# launch pass lib.sh's checks: exit 0 (the others' calls fail as they
# must) but where a rank dies (die, segv: non-zero), and no sanitizer's
# report (for segv, none from the ranks that did not raise the signal).
scenario() {
  mode=$1; who=$2; shift 2
  dir="$tmp/$mode"
  rm -rf "$dir" && mkdir -p "$dir"
  start=$SECONDS
  out=$(env LOOM_TRACE_DUMP_DIR="$dir" TRACE_IDLE_S=4 "$@" timeout -k 5 70 "$LOOMRUN" --tag-output \
    --keep-going --timeout 60 -n 4 "$TT" "$mode" "$who" 2>&1)
  rc=$?
  local want=0 all=$out
  case $mode in die | segv) want=fail ;; esac
  # segv: the report of the rank that raised the signal is expected
  [ "$mode" = segv ] && out=$(printf '%s\n' "$all" | grep -v "^\[$who\] ")
  launch_checks "$want" 60 "trace scenario $mode $who $*"
  out=$all
  took=$((SECONDS - start))
  verdict=$("$LOOMTRACE" "$dir" 2>&1)
  ndumps=$(ls "$dir" | grep -c '^loom-trace\..*\.json$')
  [ $took -le 20 ] && pass "$mode: every rank ended in ${took} s" ||
    fail "$mode: the job took ${took} s (timeout 1.5 s)"
}
expect_verdict() {
  if printf '%s\n' "$verdict" | grep -q -- "$1"; then pass "$2"; else
    fail "$2: loom-trace said:"; printf '%s\n' "$verdict" | sed 's/^/    /'; fi
}

scenario behind 2
[ "$ndumps" = 4 ] && pass "behind: 3 dumps on timeout and rank 2's on demand" || fail "behind: $ndumps dumps"
expect_verdict "verdict: rank 2 fell behind: it stopped after allgather #5 (count 16, int64) and never started allreduce #6 (count 1024, float32, sum), where ranks 0-1, 3 wait" \
  "behind: loom-trace names rank 2, the call it finished last and the one the others wait in"
expect_verdict "rank 0: failed in allreduce #6 (count 1024, float32, sum), .*blaming rank 2" \
  "behind: each waiting rank's call and whom it blames"
printf '%s\n' "$verdict" | sed 's/^/    /'

scenario behind 2 TRACE_NO_DUMP=1
[ "$ndumps" = 3 ] && pass "behind, silent: only the 3 ranks that timed out dump" || fail "behind, silent: $ndumps dumps"
expect_verdict "verdict: rank 2 left no dump, and the others timed out waiting for it: it is stuck or fell behind" \
  "behind, silent: loom-trace says the rank without a dump was waited for, not that it died"

scenario die 1
[ "$ndumps" = 3 ] && pass "die: the 3 survivors dump on error" || fail "die: $ndumps dumps"
expect_verdict "no dump from rank 1$" "die: the rank without a dump is listed"
expect_verdict "verdict: rank 1 left no dump: it died .*; the survivors blame it" "die: loom-trace names rank 1"

scenario mismatch 3
[ "$ndumps" = 4 ] && pass "mismatch: every rank dumps" || fail "mismatch: $ndumps dumps"
expect_verdict "verdict: mismatched calls at collective #6: rank 3 called allreduce #6 (count 2048, float32, sum); ranks 0-2 called allreduce #6 (count 1024, float32, sum)" \
  "mismatch: loom-trace shows both calls and the odd rank"
expect_count "mismatched calls: rank 3 called allreduce(count 2048, float32, sum) #6" 4 \
  "mismatch: the error's call number is the recorder's (#6: a fused bucket counts its calls)"

scenario segv 1 LOOM_DUMP_ON_SIGNAL=1
[ "$ndumps" = 4 ] && pass "segv: the crashing rank dumps from its signal handler, the others on error" ||
  fail "segv: $ndumps dumps"
# (under AddressSanitizer the handler before ours is ASan's, which reports the SEGV and exits 1)
expect_count "rank 1 .*signal 11\|rank 1 .*Segmentation\|^\[1\] .*ERROR: AddressSanitizer: SEGV" 1 \
  "segv: the rank still dies of SIGSEGV (the handler passes it on)"
expect_verdict "verdict: rank 1 crashed (signal SIGSEGV), idle: its last call, allgather #5" \
  "segv: loom-trace names the crashed rank"

# Without a directory: the last calls in the WARN; with LOOM_DUMP_ON_ERROR=0: nothing
scenario die 1 LOOM_TRACE_DUMP_DIR=
expect_count "LOOM WARN flight recorder (remote error): comm [0-9a-f]* rank [023], last calls:" 3 \
  "no LOOM_TRACE_DUMP_DIR: each survivor logs its last calls once"
scenario die 1 LOOM_DUMP_ON_ERROR=0
[ "$ndumps" = 0 ] && pass "LOOM_DUMP_ON_ERROR=0: no dump" || fail "LOOM_DUMP_ON_ERROR=0: $ndumps dumps"

mkdir -p "$tmp/empty"
"$LOOMTRACE" "$tmp/empty" >/dev/null 2>&1
[ $? = 2 ] && pass "loom-trace on a directory without dumps exits 2" || fail "loom-trace on an empty directory"

check_no_leftovers trace_test
finish
