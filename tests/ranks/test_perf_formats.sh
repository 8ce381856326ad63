#!/bin/bash
# test_perf_formats.sh — loom-perf as a benchmark suite: --json and --csv
# for every collective (parsed, row counts, #wrong 0), -m/-z/-a runs,
# --ceiling, --plot (a PNG), --peer mpi under mpirun on 2 and 3 ranks (Loom
# and MPI both #wrong 0), and launches as srun, torchrun and PMI would do
# them (variables set by hand for 2 background processes).  Parts whose
# prerequisite is missing (python3, gnuplot, MPI in loom-perf, mpirun) are
# skipped with a SKIP line saying why; the rest (CSV, -m/-z/-a, ceilings,
# launches) always runs.
. "$(dirname "$0")/lib.sh"
: "${LOOMPERF:?}"

use_python_checks "the JSON checks are left out"

# check_json FILE ROWS IP WHAT [PEER] — FILE parses; its rows number ROWS,
# every "oop" has wrong 0, "ip" is checked (0), N/A
# (not checked: null wrong) or absent (null) as IP says; with PEER=peer
# every row has an MPI part with wrong 0 (null for barrier).
check_json() {
  [ $have_py = 1 ] || return 0
  got=$("$PY" - "$@" <<'EOF' 2>&1
import json, sys
path, rows, ip, what = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
peer = len(sys.argv) > 5
d = json.load(open(path))
bad = []
for k in ("tool", "version", "collective", "nranks", "datatype", "op", "root",
          "iters", "warmup", "peer", "rows", "avg_busbw_gbs"):
    if k not in d: bad.append("no field " + k)
if d.get("tool") != "loom-perf": bad.append("tool is %r" % d.get("tool"))
if len(d["rows"]) != rows: bad.append("%d rows, expected %d" % (len(d["rows"]), rows))
barrier = d["collective"] == "barrier"
for r in d["rows"]:
    o = r["oop"]
    if o["wrong"] != 0:
        bad.append("%d B: oop wrong %r" % (r["bytes"], o["wrong"]))
    if not (o["time_us"] > 0): bad.append("%d B: time %r" % (r["bytes"], o["time_us"]))
    if not barrier and not (o["busbw_gbs"] > 0 and o["algbw_gbs"] > 0):
        bad.append("%d B: no bandwidth" % r["bytes"])
    want = {"0": 0, "N/A": None}.get(ip, "absent")
    if want == "absent":
        if r["ip"] is not None: bad.append("%d B: ip present" % r["bytes"])
    elif r["ip"] is None or r["ip"]["wrong"] != want:
        bad.append("%d B: ip %r" % (r["bytes"], r["ip"]))
    if peer:
        p = r.get("peer")
        if p is None or p["wrong"] != (None if barrier else 0) or not (p["time_us"] > 0):
            bad.append("%d B: peer %r" % (r["bytes"], p))
    elif "peer" in r:
        bad.append("peer part without --peer")
if peer and d["peer"] != "mpi": bad.append("peer is %r" % d["peer"])
print("; ".join(bad) if bad else "ok")
EOF
)
  if [ "$got" = ok ]; then pass "$4"; else fail "$4: $got (rc=$rc)"; printf '%s\n' "$out" | tail -n 20; fi
}

# expect_rows N IP WHAT — as test_perf.sh: N table rows with #wrong 0 out of
# place and IP ("0" or "N/A") in place.
expect_rows() {
  got=$(printf '%s\n' "$out" | awk -v ip="$2" '
    $1 == "[0]" && $2 ~ /^[0-9]+$/ { rows++; if (NF == 13 && $9 == "0" && $13 == ip) good++ }
    END { printf "%d %d", rows, good }')
  if [ "$got" = "$1 $1" ]; then pass "$3"; else
    fail "$3 (expected $1 rows with #wrong 0 / $2; rows, good rows: $got; rc=$rc)"
    printf '%s\n' "$out" | tail -n 20
  fi
}

# ---- --json and --csv for every collective (3 ranks, 3 sizes) -------------
small="-b 100 -e 160000 -f 40 -n 2 -w 1"
while read -r coll ip args; do
  # shellcheck disable=SC2086 # $small and $args are option lists
  run_ranks 3 60 "$LOOMPERF" -C "$coll" $small $args --json "$tmp/$coll.json" --csv "$tmp/$coll.csv"
  rows=3
  [ "$coll" = barrier ] && rows=1
  expect_count "Out of bounds values : 0 OK" 1 "loom-perf -C $coll --json --csv: #wrong = 0"
  check_json "$tmp/$coll.json" "$rows" "$ip" "loom-perf -C $coll --json: $rows row(s), parsed, wrong 0"
  # CSV: a header, then one line per row of 21 fields, oop_wrong 0.
  csv=$(awk -F, -v want="$coll" '
    NR == 1 { ok = $1 == "collective" && $11 == "oop_wrong" && NF == 21; next }
    { n++; if (NF != 21 || $1 != want || $11 != "0") ok = 0 }
    END { printf "%d %d", ok, n }' "$tmp/$coll.csv" 2>&1)
  if [ "$csv" = "1 $rows" ]; then pass "loom-perf -C $coll --csv: header and $rows row(s), oop_wrong 0"; else
    fail "loom-perf -C $coll --csv: ok, rows = $csv (expected 1 $rows)"; cat "$tmp/$coll.csv"; fi
done <<'EOF'
allreduce 0 -d half -o min
allgather 0 -d int8
reducescatter 0 -d bfloat16 -o avg
broadcast 0 -d uint8 -r 1
reduce 0 -d int32 -o prod -r 2
alltoall absent -d double
gather 0 -d half -r 2
scatter 0 -d int64 -r 1
sendrecv N/A -d float
barrier absent
EOF

# piped WHAT — after `cmd 2>"$tmp/stderr" | ...; echo "${PIPESTATUS[0]}" >"$tmp/rc"`:
# lib.sh's checks of the launch (its status and its stderr), as run_ranks's.
piped() {
  out=$(cat "$tmp/stderr") rc=$(cat "$tmp/rc")
  rc=${rc:-255} # no status written: count it as a failure
  launch_checks 0 70 "$1"
}

# --json - : the JSON alone on stdout (the table moves to stderr).
if [ $have_py = 1 ]; then
  got=$(timeout -k 5 70 "$LOOMRUN" --no-prefix --timeout 60 -n 2 "$LOOMPERF" -b 8 -e 64K -f 64 \
    -n 2 -w 1 --json - 2>"$tmp/stderr" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(len(d["rows"]), d["nranks"], all(r["oop"]["wrong"] == 0 for r in d["rows"]))' 2>&1
    echo "${PIPESTATUS[0]}" >"$tmp/rc")
  piped "loom-perf --json -"
  if [ "$got" = "3 2 True" ] && grep -q "Out of bounds values : 0 OK" "$tmp/stderr"; then
    pass "loom-perf --json -: stdout is one JSON object, the table is on stderr"; else
    fail "loom-perf --json -: got '$got'"; cat "$tmp/stderr"; fi
  # Through loomrun as a user types it (no flag: loomrun does not prefix).
  timeout -k 5 70 "$LOOMRUN" -n 2 "$LOOMPERF" -b 8 -e 1K -f 8 -n 2 -w 1 --json - 2>"$tmp/stderr" |
    "$PY" -m json.tool >/dev/null
  status=("${PIPESTATUS[@]}")
  echo "${status[0]}" >"$tmp/rc"
  if [ "${status[1]}" = 0 ]; then
    pass "loomrun -n 2 loom-perf --json - | python3 -m json.tool"; else
    fail "loomrun -n 2 loom-perf --json - | python3 -m json.tool"; fi
  piped "loomrun -n 2 loom-perf --json - | python3 -m json.tool"
  got=$(timeout -k 5 70 "$LOOMRUN" -n 2 "$LOOMPERF" -b 8 -e 1K -f 8 -n 2 -w 1 --csv - 2>"$tmp/stderr" |
    "$PY" -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
print(len(rows), all(len(r) == len(rows[0]) for r in rows))' 2>&1
    echo "${PIPESTATUS[0]}" >"$tmp/rc")
  piped "loomrun -n 2 loom-perf --csv -"
  if [ "$got" = "4 True" ]; then pass "loomrun -n 2 loom-perf --csv - parses as CSV (a header and 3 rows)"; else
    fail "loomrun -n 2 loom-perf --csv -: got '$got'"; fi
fi

# ---- -m, -z, -a: every run checked, #wrong 0 ----------------------------------
while read -r ranks coll ip args; do
  # shellcheck disable=SC2086
  run_ranks "$ranks" 60 "$LOOMPERF" -C "$coll" $small $args
  expect_count "Out of bounds values : 0 OK" 1 "loom-perf -C $coll $args on $ranks ranks: #wrong = 0"
  expect_rows 3 "$ip" "loom-perf -C $coll $args: 3 rows checked"
done <<'EOF'
3 allreduce 0 -m 4
3 allreduce 0 -m 4 -z 1 -a 1
2 allreduce 0 -z 0 -a 0 -d double -o max
3 allgather 0 -m 3 -z 0 -a 2
3 reducescatter 0 -m 2 -z 1 -d int32
3 broadcast 0 -m 3 -r 2 -z 0
3 sendrecv N/A -m 3 -z 1
3 alltoall N/A -m 2 -z 0
EOF
run_ranks 3 60 "$LOOMPERF" -C barrier -m 5 -z 1 -n 3 -w 1
expect_count "Out of bounds values : 0 OK" 1 "loom-perf -C barrier -m 5 -z 1: checked"
expect_count "agg iters: 5  time across ranks (-a): 3 (maximum)  blocking (-z): 1" 1 \
  "loom-perf header names -m, -a and -z"

# ---- --ceiling and --plot ---------------------------------------------------------
plot_args=
have_gnuplot=0
if command -v gnuplot >/dev/null 2>&1; then have_gnuplot=1; plot_args="--plot $tmp/busbw.png"; else
  skip "gnuplot not found (Debian: gnuplot-nox): the PNG is not checked"; fi
# shellcheck disable=SC2086
run_ranks 2 60 "$LOOMPERF" -b 1K -e 1M -f 32 -n 3 -w 1 --ceiling --json "$tmp/ceil.json" $plot_args
expect_count "Out of bounds values : 0 OK" 1 "loom-perf --ceiling: Loom and the memory ceiling checked"
expect_count "^\[0\] # TCP ceiling   : one TCP stream rank 0 -> rank 1 over 127.0.0.1 (lo).*peak" 1 \
  "loom-perf --ceiling: TCP stream over loopback measured (LOOM_SOCKET_IFNAME=lo)"
expect_count "^\[0\] # Memory ceiling: 2 threads on rank 0's host .*ideal all-reduce.*peak" 1 \
  "loom-perf --ceiling: memory ceiling of 2 threads"
if [ $have_py = 1 ]; then
  got=$("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
c = [r["ceiling"] for r in d["rows"]]
print(len(c), all(x["mem_busbw_gbs"] > 0 and x["tcp_gbs"] > 0 for x in c), "memory" in d["ceiling"])' \
    "$tmp/ceil.json" 2>&1)
  if [ "$got" = "3 True True" ]; then pass "loom-perf --ceiling --json: both ceilings in every row"; else
    fail "loom-perf --ceiling --json: $got"; fi
fi
# 3 ranks: rank 2 only waits; the all-gather's ceiling is the ideal copy.
run_ranks 3 60 "$LOOMPERF" -C allgather -b 3K -e 300K -f 10 -n 3 -w 1 --ceiling --csv "$tmp/ceil.csv"
expect_count "^\[0\] # Memory ceiling: [23] threads on rank 0's host .*ideal all-gather.*peak" 1 \
  "loom-perf -C allgather --ceiling on 3 ranks: memory ceiling of the ideal copy"
got=$(awk -F, 'NR > 1 && $20 > 0 && $21 > 0 { n++ } END { print n + 0 }' "$tmp/ceil.csv")
[ "$got" = 3 ] && pass "loom-perf --ceiling --csv on 3 ranks: both ceilings in 3 rows" ||
  fail "loom-perf --ceiling --csv on 3 ranks: $got rows with both ceilings, expected 3"
if [ $have_gnuplot = 1 ]; then
  magic=$(head -c 8 "$tmp/busbw.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  if [ "$magic" = 89504e470d0a1a0a ]; then pass "loom-perf --plot: a PNG file was written"; else
    fail "loom-perf --plot: $tmp/busbw.png is not a PNG (magic '$magic')"; fi
fi
# Without gnuplot on PATH --plot fails before the sweep, saying what to
# install.  PATH without gnuplot: its directories are replaced by one of
# links to everything else they hold.
nogp="$tmp/nogp"
mkdir "$nogp"
path_nogp=$nogp
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  if [ -x "$d/gnuplot" ]; then
    for f in "$d"/*; do [ "${f##*/}" = gnuplot ] || ln -sf "$f" "$nogp/"; done
  else
    path_nogp=$path_nogp:$d
  fi
done
PATH=$path_nogp run_ranks_failing 2 30 "$LOOMPERF" -b 8 -e 64 -n 1 -w 0 --plot "$tmp/no.png"
expect_count "^\[0\] loom-perf: --plot needs gnuplot, which is not on PATH: install it" 1 \
  "loom-perf --plot without gnuplot: clear message"
[ "$rc" -ne 0 ] && pass "loom-perf --plot without gnuplot: nonzero exit" || fail "--plot without gnuplot: rc 0"

# ---- --peer mpi under mpirun ------------------------------------------------------
mpirun=${MPIRUN:-$(command -v mpirun)}
if "$LOOMPERF" --peer mpi -o avg 2>&1 | grep -q "built without MPI"; then
  skip "loom-perf was built without MPI (configure found no mpicc): --peer mpi not tested"
  out=$("$LOOMPERF" --peer mpi 2>&1)
  rc=$?
  expect_count "built without MPI" 1 "loom-perf --peer mpi without MPI: clear message"
  [ "$rc" = 2 ] && pass "loom-perf --peer mpi without MPI: exit 2" || fail "--peer mpi without MPI: rc $rc"
elif [ -z "$mpirun" ] || [ ! -x "$mpirun" ]; then
  skip "mpirun not found: --peer mpi not tested"
else
  # Open MPI in a container, one host (as tests/mpi/test_mpi_examples.sh):
  # no ssh needed, no openib/ofi warnings, no CMA (ptrace) single copy.
  # ASan builds: Open MPI leaks by design, so no leak check in these runs.
  export OMPI_MCA_plm_rsh_agent='' OMPI_MCA_btl=self,vader,tcp
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  # run_mpi N ARGS... — $out, $rc as run_ranks; bounded by mpirun --timeout
  # and an outer timeout.
  run_mpi() {
    n=$1; shift
    out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout -k 5 100 \
      "$mpirun" --timeout 90 --oversubscribe --allow-run-as-root -np "$n" "$LOOMPERF" "$@" 2>&1)
    rc=$?
    launch_checks 0 90 "mpirun -np $n loom-perf $*"
  }
  run_ranks_failing 2 30 "$LOOMPERF" --peer mpi -b 8 -e 8
  # Every rank prints it, but loomrun may kill the others once one exits.
  got=$(printf '%s\n' "$out" | grep -c "^\[[01]\] loom-perf: --peer mpi needs MPI's own launcher: run 'mpirun -np 2")
  [ "$got" -ge 1 ] && [ "$rc" -ne 0 ] && pass "loom-perf --peer mpi under loomrun: refused, naming mpirun" ||
    { fail "--peer mpi under loomrun: $got refusals, rc $rc"; printf '%s\n' "$out" | tail -n 20; }
  run_mpi 2 --peer mpi -b 8 -e 1M -f 32 -n 3 -w 1 --json "$tmp/mpi2.json" --csv "$tmp/mpi2.csv"
  expect_count "Out of bounds values : 0 OK" 1 "mpirun -np 2 loom-perf --peer mpi: #wrong = 0"
  expect_count "launcher mpirun, rendezvous MPI_Bcast of rank 0's unique id" 1 \
    "mpirun -np 2 loom-perf: the id went through MPI_Bcast (no LOOM_COMM_ID)"
  check_json "$tmp/mpi2.json" 4 0 "mpirun -np 2 --peer mpi --json: Loom and MPI wrong 0" peer
  got=$(awk -F, 'NR > 1 && $18 == "0" && $19 > 0 { n++ } END { print n + 0 }' "$tmp/mpi2.csv")
  [ "$got" = 4 ] && pass "mpirun -np 2 --peer mpi --csv: peer_wrong 0 and a ratio in 4 rows" ||
    fail "mpirun -np 2 --peer mpi --csv: $got good rows of 4"
  while read -r coll ip args; do
    # shellcheck disable=SC2086
    run_mpi 3 --peer mpi -C "$coll" $small $args --json "$tmp/mpi3.json"
    rows=3
    [ "$coll" = barrier ] && rows=1
    expect_count "Out of bounds values : 0 OK" 1 "mpirun -np 3 loom-perf --peer mpi -C $coll: #wrong = 0"
    check_json "$tmp/mpi3.json" "$rows" "$ip" "mpirun -np 3 --peer mpi -C $coll: Loom and MPI wrong 0" peer
  done <<'EOF'
allreduce 0 -d int64 -o max
allgather 0 -d half
reducescatter 0 -o prod -d int32
broadcast 0 -r 1
reduce 0 -r 2 -o min -d double
alltoall absent -d uint8
gather 0 -r 1
scatter 0 -r 2
sendrecv N/A
barrier absent
EOF
fi

# ---- srun-, torchrun- and PMI-like launches by hand -----------------------------------
free_port() { # a port whose successor is free too (MASTER_PORT+1)
  if [ $have_py = 1 ]; then
    "$PY" -c '
import socket
for _ in range(50):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1)); print(p + 1); break
    except OSError: pass
    finally: a.close(); b.close()'
  else
    echo $((20000 + RANDOM % 30000))
  fi
}
# by_hand WHAT VARS_RANK0 VARS_RANK1 — two background ranks, bounded.
by_hand() {
  what=$1
  # shellcheck disable=SC2086
  timeout -k 5 60 env $2 "$LOOMPERF" -b 8 -e 64K -f 64 -n 2 -w 1 >"$tmp/h0" 2>&1 &
  p0=$!
  # shellcheck disable=SC2086
  timeout -k 5 60 env $3 "$LOOMPERF" -b 8 -e 64K -f 64 -n 2 -w 1 >"$tmp/h1" 2>&1 &
  p1=$!
  wait $p0; rc0=$?
  wait $p1; rc1=$?
  out=$(cat "$tmp/h0" "$tmp/h1")
  sanitizer_check "loom-perf launched as $what would"
  if [ $rc0 = 0 ] && [ $rc1 = 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/h0" &&
    grep -q "launcher $what" "$tmp/h0"; then
    pass "loom-perf launched as $what would (2 ranks by hand): #wrong = 0"; else
    fail "loom-perf launched as $what would: rc $rc0/$rc1"; cat "$tmp/h0" "$tmp/h1" | tail -n 20; fi
}
clean="-u LOOM_COMM_ID -u MASTER_ADDR -u MASTER_PORT"
port=$(free_port)
by_hand slurm "$clean SLURM_PROCID=0 SLURM_NTASKS=2 LOOM_COMM_ID=127.0.0.1:$port" \
  "$clean SLURM_PROCID=1 SLURM_NTASKS=2 LOOM_COMM_ID=127.0.0.1:$port"
port=$(free_port)
by_hand torchrun "$clean RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1))" \
  "$clean RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1))"
expect_in() { if grep -q "$1" "$tmp/h0"; then pass "$2"; else fail "$2"; cat "$tmp/h0"; fi; }
expect_in "rendezvous MASTER_ADDR:(MASTER_PORT+1) = 127.0.0.1:$port" \
  "torchrun-like: Loom's root on MASTER_PORT+1"
port=$(free_port)
by_hand pmi "$clean PMI_RANK=0 PMI_SIZE=2 LOOM_COMM_ID=127.0.0.1:$port" \
  "$clean PMI_RANK=1 PMI_SIZE=2 LOOM_COMM_ID=127.0.0.1:$port"
# No rendezvous address: rank 0 says which variables to set.
# shellcheck disable=SC2086
out=$(timeout 30 env $clean SLURM_PROCID=0 SLURM_NTASKS=2 "$LOOMPERF" -b 8 -e 8 2>&1)
rc=$?
expect_count "no rendezvous address: LOOM_COMM_ID is not set (launched by slurm)" 1 \
  "srun-like without LOOM_COMM_ID: the message names it"
expect_count "or MASTER_ADDR and MASTER_PORT as torchrun does" 1 \
  "srun-like without LOOM_COMM_ID: the message names MASTER_ADDR/MASTER_PORT"
[ "$rc" = 1 ] && pass "no rendezvous address: exit 1" || fail "no rendezvous address: rc $rc"
finish
