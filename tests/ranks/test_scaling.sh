#!/bin/bash
# loom-ddp on 1, 2 and 3 ranks (exact averaged gradients, throughput and
# efficiency lines, JSON consistent with them); loom-scaling's tables from
# fake loom-perf outputs with known times (formulas, JSON preferred over
# the text table, a wrong element failing the run); loom-scaling over real
# runs: loom-perf at 2 and 4 ranks on 1 and 2 LOOM_HOSTID nodes, --ddp at 1
# and 2 ranks, and over network namespaces when root.  About 15 s.
. "$(dirname "$0")/lib.sh"
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: sanitizer pass (LOOM_TEST_LIGHT=1): loom-scaling ran in the plain pass, and the library calls it makes are run by the other tests here"
  exit 77
fi
: "${LOOMPERF:?}" "${LOOMDDP:?}" "${LOOMSCALING:?}"
command -v python3 >/dev/null || { echo "SKIP: no python3 (loom-scaling's tables need it)"; exit 77; }
started=$SECONDS
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT

# json FILE EXPR — prints the Python expression EXPR of the JSON document d.
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# scaling ARGS... — loom-scaling bounded by 120 s; output in $out, status in $rc.
scaling() {
  out=$(timeout -k 5 120 "$LOOMSCALING" "$@" 2>&1)
  rc=$?
}

# expect_row RANKS NODES REST WHAT — a row of loom-scaling's per-scale
# table: "RANKS NODES" then REST (an extended regular expression).
expect_row() { expect_count "^ *$1 \+$2 \+$3\$" 1 "$4"; }

# ---- loom-ddp ---------------------------------------------------------------------
# 100000 parameters in buckets of 64 KiB: 6 full buckets and one of 6784 bytes.
ddp="-P 100000 -B 64K -s 3 -w 1 -b 8"
# shellcheck disable=SC2086 # $ddp is an option list
run_ranks 1 60 "$LOOMDDP" $ddp -t 20 --json "$work/d1.json"
expect_count "^\[0\] # model: 100000 float32 parameters (0.4 MiB) in 7 bucket(s) of 65536 bytes (the last 6784 bytes); bucket 6 is ready first$" 1 \
  "loom-ddp: 7 buckets of 64 KiB, the last partial"
expect_count "^\[0\] check: step 0: 100000 averaged gradients exact on all 1 rank(s)$" 1 "loom-ddp 1 rank: step 0 checked"
expect_count "^\[0\] check: step 3: 100000 averaged gradients exact on all 1 rank(s)$" 1 "loom-ddp 1 rank: last step (3) checked"
expect_count "^\[0\] efficiency vs 1 rank: 100.0% (this run is the 1-rank reference: samples/s [0-9.]*)$" 1 \
  "loom-ddp 1 rank: it is the reference"
passes=$(json "$work/d1.json" 'd["kernel_passes"]' 2>/dev/null)
samples=$(json "$work/d1.json" 'd["ddp"]["samples_per_s"]' 2>/dev/null)
if [ "$rc" = 0 ] && [ "${passes:-0}" -gt 0 ] 2>/dev/null && [ -n "$samples" ]; then
  pass "loom-ddp 1 rank: JSON with $passes kernel passes per step and $samples samples/s"
else
  fail "loom-ddp 1 rank: status $rc, JSON passes '$passes' samples '$samples'"; printf '%s\n' "$out" | tail -n 20
  passes=100 samples=100
fi
for n in 2 3; do
  # shellcheck disable=SC2086
  run_ranks "$n" 60 "$LOOMDDP" $ddp -W "$passes" --ref-samples "$samples" --json "$work/d$n.json"
  expect_count "^\[0\] # compute: $passes kernel passes per step (-W, as given)$" 1 "loom-ddp $n ranks: the 1-rank run's work"
  for step in 0 3; do
    expect_count "^\[0\] check: step $step: 100000 averaged gradients exact on all $n rank(s)$" 1 \
      "loom-ddp $n ranks: step $step's averages exact on every rank"
  done
  expect_count "^\[0\] compute-only: [0-9.]* steps/s  [0-9.]* ms/step" 1 "loom-ddp $n ranks: compute-only line"
  expect_count "^\[0\] ddp: [0-9.]* steps/s  [0-9.]* ms/step  samples/s [0-9.]*  ($n rank(s) x batch 8)" 1 \
    "loom-ddp $n ranks: throughput line"
  expect_count "^\[0\] efficiency vs 1 rank: [0-9.]*% = samples/s [0-9.]* / ($n x $samples)$" 1 \
    "loom-ddp $n ranks: efficiency against the 1-rank run"
  # The JSON agrees with itself: samples/s = steps/s x batch x ranks, and
  # efficiency = samples/s / (ranks x reference).
  bad=$(json "$work/d$n.json" "[k for k, ok in (('nranks', d['nranks'] == $n), ('wrong', d['wrong'] == 0),
      ('buckets', d['buckets'] == 7), ('checked', d['checked_steps'] == [0, 3]),
      ('samples', abs(d['ddp']['samples_per_s'] - d['ddp']['steps_per_s'] * 8 * $n) < 1e-3 * d['ddp']['samples_per_s']),
      ('efficiency', abs(d['efficiency'] - d['ddp']['samples_per_s'] / ($n * $samples)) < 1e-4)) if not ok]" 2>&1)
  if [ "$bad" = "[]" ]; then pass "loom-ddp $n ranks: JSON consistent"; else fail "loom-ddp $n ranks: JSON: $bad"; fi
done
bad_out=$("$LOOMDDP" -P 0 2>&1); rc=$?
if [ "$rc" = 2 ] && printf '%s' "$bad_out" | grep -q "^loom-ddp: -P takes a positive parameter count"; then
  pass "loom-ddp -P 0: usage error"; else fail "loom-ddp -P 0: status $rc: $bad_out"; fi

# ---- loom-scaling's arithmetic, from fake loom-perf tables -------------------------
# Rank 0 prints one 1 MiB all-reduce row taking 100 us x ranks/2: busbw
# 1048576 B / 100 us = 10.4858 GB/s on 2 ranks, x 1.5 / 2 = 7.8643 on 4
# (eff 75.0%); time-eff 50.0%.  FAKE_WRONG sets #wrong on 4 ranks,
# FAKE_EXIT the exit status of 4 ranks.
cat >"$work/fake-perf" <<'EOF'
#!/bin/sh
for a; do [ "$a" = --help ] && { echo "usage: fake loom-perf, text only"; exit 0; }; done
[ "$LOOM_NRANKS" = 4 ] && [ -n "${FAKE_EXIT:-}" ] && exit "$FAKE_EXIT"
[ "$LOOM_RANK" = 0 ] || exit 0
t=$((100 * LOOM_NRANKS / 2)) w=0
[ "$LOOM_NRANKS" = 4 ] && w=${FAKE_WRONG:-0}
echo "# loom-perf: allreduce, Loom library 0.1.0 (fake)"
printf '%12d  %12d  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n' \
  1048576 262144 float32 sum "$t.0" 0.00 0.00 "$w" "$t.0" 0.00 0.00 0
EOF
# The same with --json: the file says 5 GB/s on 2 ranks and 2.5 on 4, the
# table (ignored) 999 us.
cat >"$work/fake-perf-json" <<'EOF'
#!/bin/sh
for a; do [ "$a" = --help ] && { echo "  --json FILE  results as JSON"; exit 0; }; done
[ "$LOOM_RANK" = 0 ] || exit 0
while [ $# -gt 0 ]; do [ "$1" = --json ] && file=$2; shift; done
bw=5.0; [ "$LOOM_NRANKS" = 4 ] && bw=2.5
echo "# loom-perf: allreduce (fake)"
printf '%12d  %12d  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n' \
  1048576 262144 float32 sum 999.0 0.00 0.00 0 999.0 0.00 0.00 0
printf '{"tool":"loom-perf","collective":"allreduce","nranks":%d,"rows":[{"bytes":1048576,"count":262144,"oop":{"time_us":%d,"algbw_gbs":1,"busbw_gbs":%s,"wrong":0},"ip":null}],"avg_busbw_gbs":%s}\n' \
  "$LOOM_NRANKS" $((100 * LOOM_NRANKS / 2)) "$bw" "$bw" >"$file"
EOF
chmod +x "$work/fake-perf" "$work/fake-perf-json"
LOOMPERF="$work/fake-perf" scaling --nodes-via hostid --ranks 2,4 --nodes 1,2 --json "$work/fake.json" -- -b 1M -e 1M
expect_row 2 1 "2 \+1 \+10.4858 \+100.0% \+10.4858 \+100.0% \+100.0% \+0  ok" "fake loom-perf: 2x1 is the reference"
expect_row 2 2 "1 \+1 \+10.4858 \+100.0% \+10.4858 \+100.0% \+100.0% \+0  ok" "fake loom-perf: 2x2 same busbw, 100%"
expect_row 4 1 "4 \+1 \+7.8643 \+75.0% \+7.8643 \+75.0% \+50.0% \+0  ok" "fake loom-perf: 4x1 busbw x 1.5 / 2 = 75%, time-eff 50%"
expect_row 4 2 "2 \+1 \+7.8643 \+75.0% \+7.8643 \+75.0% \+50.0% \+0  ok" "fake loom-perf: 4x2 the same"
if [ "$rc" = 0 ]; then pass "fake loom-perf: status 0"; else fail "fake loom-perf: status $rc"; fi
got=$(json "$work/fake.json" '[(s["nranks"], s["nodes"], round(s["rows"][0]["efficiency"], 6), s["rows"][0]["time_efficiency"]) for s in d["scales"]]' 2>&1)
if [ "$got" = "[(2, 1, 1.0, 1.0), (2, 2, 1.0, 1.0), (4, 1, 0.75, 0.5), (4, 2, 0.75, 0.5)]" ]; then
  pass "fake loom-perf: --json holds the same efficiencies"; else fail "fake loom-perf: --json: $got"; fi
FAKE_WRONG=3 LOOMPERF="$work/fake-perf" scaling --nodes-via hostid --ranks 2,4 --nodes 1 -- -b 1M -e 1M
expect_row 4 1 "4 \+1 \+7.8643 \+75.0% \+7.8643 \+75.0% \+50.0% \+3  ok" "fake loom-perf: 3 wrong elements counted"
if [ "$rc" = 1 ]; then pass "fake loom-perf with wrong elements: status 1"; else fail "wrong elements: status $rc, expected 1"; fi
FAKE_EXIT=3 LOOMPERF="$work/fake-perf" scaling --nodes-via hostid --ranks 2,4 --nodes 1 -- -b 1M -e 1M
expect_row 2 1 "2 \+1 \+10.4858 \+100.0% .* 0  ok" "fake loom-perf failing on 4 ranks: 2 ranks still reported"
expect_row 4 1 "4 \+0 \+N/A .* N/A  FAILED (status 3)" "fake loom-perf failing on 4 ranks: the failure reported"
if [ "$rc" = 1 ]; then pass "a failed run: status 1"; else fail "a failed run: status $rc, expected 1"; fi
LOOMPERF="$work/fake-perf-json" scaling --nodes-via hostid --ranks 2,4 --nodes 1 -- -b 1M -e 1M
expect_row 4 1 "4 \+1 \+2.5000 \+50.0% \+2.5000 \+50.0% \+50.0% \+0  ok" "fake loom-perf --json: the JSON is read, not the table"

# ---- loom-scaling over real runs --------------------------------------------------
t0=$SECONDS
scaling --nodes-via hostid --ranks 2,4 --nodes 1,2 --timeout 60 --json "$work/s.json" -- -b 1K -e 16K -f 4 -n 2 -w 1
took=$((SECONDS - t0))
expect_count "^# loom-scaling: allreduce; nodes via LOOM_HOSTID" 1 "loom-scaling: nodes through LOOM_HOSTID"
for rk in "2 1 2" "2 2 1" "4 1 4" "4 2 2"; do
  read -r r k rpn <<<"$rk"
  expect_row "$r" "$k" "$rpn \+3 .* 0  ok" "loom-scaling: $r ranks on $k node(s): 3 sizes, #wrong 0"
done
if [ "$rc" = 0 ] && [ "$took" -le 45 ]; then pass "loom-scaling: 4 scales in $took s"; else
  fail "loom-scaling: status $rc after $took s (expected 0 within 45 s)"; printf '%s\n' "$out" | tail -n 30; fi
got=$(json "$work/s.json" '[(s["nranks"], s["nodes"], s["status"], s["wrong"], len(s["rows"])) for s in d["scales"]]' 2>&1)
if [ "$got" = "[(2, 1, 0, 0, 3), (2, 2, 0, 0, 3), (4, 1, 0, 0, 3), (4, 2, 0, 0, 3)]" ]; then
  pass "loom-scaling --json: 4 scales, 3 rows each, nothing wrong"; else fail "loom-scaling --json: $got"; fi

# shellcheck disable=SC2086
scaling --ddp --nodes-via hostid -N 2 --timeout 60 --json "$work/sd.json" -- $ddp -t 20
expect_count "^ *1 \+1 \+[0-9.]\+ \+[0-9.]\+ \+100.0% \+[0-9.]\+ \+100.0% \+[0-9.]\+% \+[0-9.]\+ \+0  ok$" 1 \
  "loom-scaling --ddp: 1 rank, the reference"
expect_count "^ *2 \+1 \+[0-9.]\+ \+[0-9.]\+ \+[0-9.]\+% \+[0-9.]\+ \+[0-9.]\+% \+[0-9.]\+% \+[0-9.]\+ \+0  ok$" 1 \
  "loom-scaling --ddp: 2 ranks, efficiency against 1"
got=$(json "$work/sd.json" 'abs(d["scales"][1]["efficiency"] - d["scales"][1]["samples_per_s"] / (2 * d["scales"][0]["samples_per_s"])) < 1e-9' 2>&1)
if [ "$rc" = 0 ] && [ "$got" = True ]; then pass "loom-scaling --ddp: efficiency = samples/s / (2 x 1 rank's)"; else
  fail "loom-scaling --ddp: status $rc, JSON check '$got'"; printf '%s\n' "$out" | tail -n 20; fi

scaling --nodes-via sideways
expect_count "^loom-scaling: --nodes-via takes auto, netns or hostid, not 'sideways'" 1 "loom-scaling: bad --nodes-via explained"
if [ "$rc" = 2 ]; then pass "loom-scaling: usage error status 2"; else fail "loom-scaling: bad option: status $rc"; fi

# ---- over network namespaces, when this machine can make them -----------------------
cluster_dir="$(dirname "$0")/../cluster"
if why=$(. "$cluster_dir/cluster.sh" && cluster_probe); then
  scaling --nodes-via netns --ranks 2,4 --nodes 1,2 --timeout 60 -- -b 1K -e 16K -f 4 -n 2 -w 1
  expect_count "^# loom-scaling: allreduce; nodes via network namespaces" 1 "loom-scaling: nodes as network namespaces"
  for rk in "2 1 2" "2 2 1" "4 1 4" "4 2 2"; do
    read -r r k rpn <<<"$rk"
    expect_row "$r" "$k" "$rpn \+3 .* 0  ok" "loom-scaling netns: $r ranks on $k node(s), #wrong 0"
  done
  if [ "$rc" = 0 ]; then pass "loom-scaling netns: status 0"; else fail "loom-scaling netns: status $rc"; printf '%s\n' "$out" | tail -n 30; fi
else
  echo "SKIP (network namespace part): ${why#SKIP: }"
fi

# ---- nothing left ----------------------------------------------------------------------
sleep 0.2
left=$(pgrep -f "^($LOOMDDP|$LOOMPERF|$work/fake-perf)( |\$)")
if [ -z "$left" ]; then pass "no loom-ddp or loom-perf process left behind"; else
  fail "processes left behind: $left"; kill -9 $left; fi
left=$(ls /dev/shm 2>/dev/null | grep '^loom-' | head -3)
if [ -z "$left" ]; then pass "no loom segment left in /dev/shm"; else fail "segments left in /dev/shm: $left"; fi
echo "# $((SECONDS - started)) s"
finish
