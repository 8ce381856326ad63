#!/bin/bash
# test_perf_rounds.sh — loom-perf --rounds N on a noisy machine: the table,
# --json and --csv carry per size the median and min-max over the rounds
# (JSON: every round's figures too, min <= median <= max, the median the
# middle round, #wrong 0 in every round); --rounds is validated; with
# --peer mpi under mpirun the rounds alternate Loom and MPI; and
# --autotune's rule (an entry only where the fastest beats the library's
# own choice by more than the spread) holds row by row, is what the file
# says, and keeps the default where candidates run the same schedule.
# Parts whose prerequisite is missing (python3, MPI in loom-perf, mpirun)
# are skipped with a SKIP line saying why.  About 20 s on 2 cores.
. "$(dirname "$0")/lib.sh"
: "${LOOMPERF:?}"

use_python_checks "the JSON and autotune checks are left out"

# check_rounds_json FILE ROUNDS ROWS WHAT [peer] — FILE parses; "rounds" is
# ROUNDS; ROWS rows; in every measurement (oop, ip where there is one, peer
# with "peer") min <= median <= max for time and busbw, per_round lists of
# ROUNDS figures whose middle (ROUNDS odd) is the median, and wrong 0 in
# every round.
check_rounds_json() {
  [ $have_py = 1 ] || return 0
  got=$("$PY" - "$@" <<'EOF' 2>&1
import json, sys
path, rounds, nrows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
peer = len(sys.argv) > 5
d = json.load(open(path))
bad = []
if d.get("rounds") != rounds: bad.append("rounds is %r" % d.get("rounds"))
if len(d["rows"]) != nrows: bad.append("%d rows, expected %d" % (len(d["rows"]), nrows))
def check(name, size, m):
    if m is None:
        return bad.append("%d B: no %s" % (size, name))
    pr = m.get("per_round", {})
    for f in ("time_us", "busbw_gbs"):
        lo, med, hi = m.get(f + "_min"), m.get(f), m.get(f + "_max")
        if None in (lo, med, hi) or not lo <= med <= hi:
            bad.append("%d B %s %s: min %r median %r max %r" % (size, name, f, lo, med, hi))
        vals = pr.get(f, [])
        if len(vals) != rounds:
            bad.append("%d B %s: %d rounds of %s" % (size, name, len(vals), f))
        elif rounds % 2 == 1 and sorted(vals)[rounds // 2] != med:
            bad.append("%d B %s %s: median %r is not the middle of %r" % (size, name, f, med, vals))
        elif vals and (min(vals) != lo or max(vals) != hi):
            bad.append("%d B %s %s: min/max %r/%r of %r" % (size, name, f, lo, hi, vals))
    if pr.get("wrong") != [0] * rounds or m.get("wrong") != 0:
        bad.append("%d B %s: wrong %r %r" % (size, name, m.get("wrong"), pr.get("wrong")))
for r in d["rows"]:
    check("oop", r["bytes"], r["oop"])
    if r["ip"] is not None: check("ip", r["bytes"], r["ip"])
    if peer:
        check("peer", r["bytes"], r.get("peer"))
        if not r["peer"].get("ratio", 0) > 0: bad.append("%d B: ratio %r" % (r["bytes"], r["peer"]))
print("; ".join(bad) if bad else "ok")
EOF
)
  if [ "$got" = ok ]; then pass "$4"; else fail "$4: $got"; fi
}

# ---- --rounds 3 through loomrun: --json -, --csv, the table ------------------
sweep="-b 1K -e 1M -f 32 -n 3 -w 1"
if [ $have_py = 1 ]; then
  # shellcheck disable=SC2086 # $sweep is an option list
  timeout -k 5 70 "$LOOMRUN" --timeout 60 -n 2 "$LOOMPERF" $sweep --rounds 3 --json - \
    >"$tmp/r3.json" 2>"$tmp/r3.err"
  rc=$?
  if [ $rc = 0 ] && "$PY" -m json.tool "$tmp/r3.json" >/dev/null; then
    pass "loomrun -n 2 loom-perf --rounds 3 --json - | python3 -m json.tool"; else
    fail "loom-perf --rounds 3 --json -: rc $rc or not JSON"; tail -n 20 "$tmp/r3.err"; fi
  check_rounds_json "$tmp/r3.json" 3 3 "loom-perf --rounds 3 --json: median, min, max and 3 rounds per size"
  out=$(cat "$tmp/r3.err")
  expect_count "^# round [123] of 3: Loom [0-9.]* s$" 3 "loom-perf --rounds 3: one progress line per round"
  expect_count "Out of bounds values : 0 OK" 1 "loom-perf --rounds 3: checked in every round, #wrong 0"
fi
# The table: size count type redop | time algbw busbw min-max #wrong, out of
# place and in place; min <= median <= max.
run_ranks 2 60 "$LOOMPERF" -C allgather $sweep --rounds 3 --csv "$tmp/r3.csv"
expect_count "^\[0\] #  *size .* busbw  busbw min-max  #wrong .* busbw  busbw min-max  #wrong$" 1 \
  "loom-perf --rounds 3: the table has busbw min-max columns"
got=$(printf '%s\n' "$out" | awk '
  $1 == "[0]" && $2 ~ /^[0-9]+$/ { rows++
    split($9, a, "-"); split($14, b, "-")
    if (NF == 15 && $10 == "0" && $15 == "0" && a[1] <= $8 + 0 && $8 <= a[2] + 0 &&
        b[1] <= $13 + 0 && $13 <= b[2] + 0) good++ }
  END { printf "%d %d", rows, good }')
[ "$got" = "3 3" ] && pass "loom-perf --rounds 3: 3 rows, min <= busbw <= max, #wrong 0" ||
  { fail "loom-perf --rounds 3 table: rows, good rows = $got"; printf '%s\n' "$out" | tail -n 20; }
# CSV: the 21 columns of one round, then rounds and 12 min/max columns.
got=$(awk -F, '
  NR == 1 { ok = NF == 34 && $22 == "rounds" && $25 == "oop_busbw_min_gbs" &&
            $26 == "oop_busbw_max_gbs" && $34 == "peer_busbw_max_gbs"; next }
  { n++; if (NF != 34 || $22 != 3 || $11 != "0" || !($25 <= $10 && $10 <= $26)) ok = 0 }
  END { printf "%d %d", ok, n }' "$tmp/r3.csv" 2>&1)
[ "$got" = "1 3" ] && pass "loom-perf --rounds 3 --csv: header with the min/max columns, 3 rows within them" ||
  { fail "loom-perf --rounds 3 --csv: ok, rows = $got"; cat "$tmp/r3.csv"; }
# An even count (the median between the middle two) and barrier's one row.
run_ranks 2 60 "$LOOMPERF" -C barrier -n 3 -w 1 --rounds 2
expect_count "^\[0\] *0 *0 *none *none .* N/A *0 .* N/A *N/A$" 1 "loom-perf -C barrier --rounds 2: one row, checked"

# ---- --rounds is validated ----------------------------------------------------------
for bad in 0 1001 -3 two ""; do
  out=$("$LOOMPERF" --rounds "$bad" 2>&1)
  rc=$?
  expect_count "^loom-perf: --rounds takes a number of rounds from 1 to 1000, not '$bad'" 1 \
    "loom-perf --rounds '$bad': refused, naming the option"
  [ $rc = 2 ] || fail "loom-perf --rounds '$bad': exit $rc, expected 2"
done
out=$("$LOOMPERF" --rounds 2>&1)
rc=$?
expect_count "^loom-perf: --rounds takes a number of rounds" 1 "loom-perf --rounds without a value: refused"
out=$("$LOOMPERF" -G 4 --rounds 3 2>&1)
rc=$?
expect_count "^loom-perf: -G prints its own comparison .*--rounds" 1 "loom-perf -G with --rounds: refused"
[ $rc = 2 ] && pass "loom-perf -G --rounds: exit 2" || fail "loom-perf -G --rounds: exit $rc"

# ---- --percentiles --------------------------------------------------------------
# -n 1: each form's one iteration is its mean, median and p99 alike, so the
# three are equal exactly; -n 50 with --rounds 3: 0 < p50 <= p99 (each the
# median over the rounds), and CSV's 6 extra columns.
check_percentiles_json() { # FILE WHAT equal|ordered
  [ $have_py = 1 ] || return 0
  got=$("$PY" - "$@" <<'EOF' 2>&1
import json, sys
path, how = sys.argv[1], sys.argv[3]
d = json.load(open(path))
bad = [] if d.get("percentiles") == 1 else ["no \"percentiles\":1"]
for r in d["rows"]:
    for name in ("oop", "ip"):
        m = r[name]
        if m is None: continue
        p50, p99, t = m.get("p50_us"), m.get("p99_us"), m.get("time_us")
        if None in (p50, p99, t):
            bad.append("%d B %s: p50 %r p99 %r time %r" % (r["bytes"], name, p50, p99, t))
        elif how == "equal" and not p50 == p99 == t:
            bad.append("%d B %s: p50 %r p99 %r time %r differ" % (r["bytes"], name, p50, p99, t))
        elif how == "ordered" and not 0 < p50 <= p99:
            bad.append("%d B %s: p50 %r p99 %r" % (r["bytes"], name, p50, p99))
print("; ".join(bad) if bad else "ok")
EOF
)
  if [ "$got" = ok ]; then pass "$2"; else fail "$2: $got"; fi
}
run_ranks 2 60 "$LOOMPERF" -b 8 -e 1K -f 32 -n 1 -w 1 --percentiles --json "$tmp/p1.json"
check_percentiles_json "$tmp/p1.json" "loom-perf -n 1 --percentiles: p50 = p99 = the time" equal
expect_count "^\[0\] #  *size .* #wrong  *p50  *p99 .* #wrong  *p50  *p99$" 1 \
  "loom-perf --percentiles: the table has p50 and p99 columns"
run_ranks 2 60 "$LOOMPERF" -b 8 -e 1K -f 32 -n 50 -w 5 -z 1 --rounds 3 --percentiles \
  --json "$tmp/p3.json" --csv "$tmp/p3.csv"
check_percentiles_json "$tmp/p3.json" "loom-perf -z 1 --rounds 3 --percentiles: 0 < p50 <= p99" ordered
got=$(awk -F, '
  NR == 1 { ok = NF == 40 && $35 == "oop_p50_us" && $40 == "peer_p99_us"; next }
  { n++; if (NF != 40 || !(0 < $35 && $35 <= $36)) ok = 0 }
  END { printf "%d %d", ok, n }' "$tmp/p3.csv" 2>&1)
[ "$got" = "1 2" ] && pass "loom-perf --percentiles --csv: 6 more columns, p50 <= p99" ||
  { fail "loom-perf --percentiles --csv: ok, rows = $got"; cat "$tmp/p3.csv"; }
out=$("$LOOMPERF" -z 0 --percentiles 2>&1)
rc=$?
expect_count "^loom-perf: --percentiles times every iteration on its own" 1 \
  "loom-perf -z 0 --percentiles: refused, saying why"
[ $rc = 2 ] && pass "loom-perf -z 0 --percentiles: exit 2" || fail "loom-perf -z 0 --percentiles: exit $rc"

# ---- --rounds 3 --peer mpi under mpirun: Loom and MPI alternate -------------------
mpirun=${MPIRUN:-$(command -v mpirun)}
if "$LOOMPERF" --peer mpi -o avg 2>&1 | grep -q "built without MPI"; then
  skip "loom-perf was built without MPI: --rounds with --peer mpi not tested"
elif [ -z "$mpirun" ] || [ ! -x "$mpirun" ]; then
  skip "mpirun not found: --rounds with --peer mpi not tested"
else
  export OMPI_MCA_plm_rsh_agent='' OMPI_MCA_btl=self,vader,tcp
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  # shellcheck disable=SC2086
  out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout -k 5 100 \
    "$mpirun" --timeout 90 --oversubscribe --allow-run-as-root -np 2 "$LOOMPERF" $sweep \
    --rounds 3 --peer mpi --json "$tmp/mpi.json" 2>&1)
  rc=$?
  expect_count "^# round [123] of 3: Loom [0-9.]* s, MPI [0-9.]* s$" 3 \
    "mpirun loom-perf --rounds 3 --peer mpi: each round Loom's sweep, then MPI's"
  expect_count "Out of bounds values : 0 OK" 1 "mpirun loom-perf --rounds 3 --peer mpi: #wrong 0"
  check_rounds_json "$tmp/mpi.json" 3 3 "--rounds 3 --peer mpi --json: Loom's and MPI's rounds" peer
fi

# ---- --autotune's rule --------------------------------------------------------------
# On 2 ranks allgather's ring and rd, and broadcast's and reduce's tree and
# chain, all send each rank's data once to the other, so every candidate
# runs what the default runs and any lead is noise.  Before the rule every
# size got the fastest's entry, and two runs in a row wrote different
# files.  Exact identity of two runs cannot be guaranteed: noise can still
# give a lead beyond the spread (1 size in ~10,000 with the default 5
# rounds by simulation; 0 of 12 pairs of runs differed on this VM, 2 of 12
# with 3 rounds).  So what is asserted is what cannot flake and still fails
# without the rule: each row's entry follows from its printed lead and
# spread; the file holds exactly the rows' entries; some size kept the
# default (auto).  That the two files are identical is reported, and only
# a NOTE when they are not.
# check_autotune OUT FILE WHAT — the rows in OUT (loomrun --tag-output)
# against the rule and against FILE.
check_autotune() {
  [ $have_py = 1 ] || return 0
  printf '%s\n' "$1" >"$tmp/autotune.out"
  got=$("$PY" - "$tmp/autotune.out" "$2" <<'EOF' 2>&1
import re, sys
bad, rows, coll, ncand = [], {}, None, 0
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line.startswith("[0] "): continue
    line = line[4:]
    m = re.match(r"# (\w+): timing (.*?) and default", line)
    if m:
        coll = m.group(1); ncand = len(m.group(2).split(", ")); rows[coll] = []; continue
    f = line.split()
    if coll and f and f[0].isdigit():
        if len(f) != ncand + 6:
            bad.append("row %r" % line); continue
        lead, spread, entry = float(f[-3]), float(f[-2]), f[-1]
        # printed rounded: compare weakly
        if entry == "auto" and not lead <= spread or entry != "auto" and not lead >= spread:
            bad.append("%s %s B: entry %s with lead %s, spread %s" % (coll, f[0], entry, f[-3], f[-2]))
        if entry != "auto" and entry != f[-4]:
            bad.append("%s %s B: entry %s is not the fastest %s" % (coll, f[0], entry, f[-4]))
        rows[coll].append((f[0], entry))
want = []
for c, rs in rows.items():  # the rows' entries, merged as the file merges them
    runs = []
    for size, entry in rs:
        if runs and runs[-1][1] == entry: runs[-1][0] = size
        else: runs.append([size, entry])
    # the last run covers every larger size ("max"), unless it is auto:
    # then it has no entry, and the run before it keeps its bound
    if runs and runs[-1][1] == "auto": runs.pop()
    elif runs: runs[-1][0] = "max"
    want += ["%s 2 1 %s %s" % (c, s, e) for s, e in runs]
have = [l.strip() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
if have != want: bad.append("file %r, rows say %r" % (have, want))
if len(rows) != 3: bad.append("collectives %r" % sorted(rows))
if not any(e == "auto" for rs in rows.values() for _, e in rs): bad.append("no size kept the default")
print("; ".join(bad) if bad else "ok")
EOF
)
  if [ "$got" = ok ]; then pass "$3"; else fail "$3: $got"; printf '%s\n' "$1" | tail -n 30; fi
}
tune_args="-C allgather,broadcast,reduce -b 1K -e 64K -f 8"
for k in 1 2; do
  # shellcheck disable=SC2086
  run_ranks 2 60 "$LOOMPERF" --autotune "$tmp/t$k.tune" $tune_args
  expect_count "Out of bounds values : 0 OK" 1 "loom-perf --autotune run $k: every candidate checked in 5 rounds"
  expect_count "^\[0\] # sizes 1024 .. 65536 B; per size, 5 round(s)" 1 "loom-perf --autotune: 5 rounds by default"
  check_autotune "$out" "$tmp/t$k.tune" "loom-perf --autotune run $k: entries where lead > spread, as the file says"
done
if [ -f "$tmp/t1.tune" ] && [ -f "$tmp/t2.tune" ]; then
  if diff <(grep -v '^#' "$tmp/t1.tune") <(grep -v '^#' "$tmp/t2.tune") >/dev/null; then
    pass "loom-perf --autotune twice in a row: the same entries ($(grep -vc '^#' "$tmp/t1.tune"))"; else
    echo "NOTE: loom-perf --autotune twice in a row: the entries differ (noise beyond the spread; see above)"
    diff <(grep -v '^#' "$tmp/t1.tune") <(grep -v '^#' "$tmp/t2.tune"); fi
fi
finish
