#!/bin/bash
# loom-perf verifies every element of every size (#wrong = 0): all-reduce and
# all-gather over a wide range, every collective on 3 ranks at a few small
# sizes (out of place and in place), the -G bucket-fusion mode, and
# --autotune with the LOOM_TUNE_FILE it writes.
. "$(dirname "$0")/lib.sh"
: "${LOOMPERF:?}"

# expect_rows N IP_WRONG WHAT — $out must hold exactly N table rows, each
# with #wrong 0 out of place and IP_WRONG ("0" or "N/A") in place.
# A row (loomrun prefixes "[0] "): size count type redop | time algbw busbw
# #wrong | time algbw busbw #wrong.
expect_rows() {
  got=$(printf '%s\n' "$out" | awk -v ip="$2" '
    $1 == "[0]" && $2 ~ /^[0-9]+$/ { rows++; if (NF == 13 && $9 == "0" && $13 == ip) good++ }
    END { printf "%d %d", rows, good }')
  if [ "$got" = "$1 $1" ]; then pass "$3"; else
    fail "$3 (expected $1 rows with #wrong 0 / $2; rows, good rows: $got; rc=$rc)"
    printf '%s\n' "$out" | tail -n 30
  fi
}

run_ranks 4 300 "$LOOMPERF" -b 8 -e 64M -f 4 -n 2 -w 1
expect_count "Out of bounds values : 0 OK" 1 "loom-perf all-reduce 8 B .. 64 MB on 4 ranks, #wrong = 0"
run_ranks 3 300 "$LOOMPERF" -C allgather -b 8 -e 16M -f 8 -n 2 -w 1 -d bfloat16
expect_count "Out of bounds values : 0 OK" 1 "loom-perf all-gather bfloat16 on 3 ranks, #wrong = 0"
run_ranks 2 120 "$LOOMPERF" -b 1K -e 1M -f 32 -n 2 -w 1 -d int64 -o max
expect_count "Out of bounds values : 0 OK" 1 "loom-perf int64 max on 2 ranks"

# Every collective once on 3 ranks: sizes 100, 4000 and 160000 bytes (not
# multiples of 3: the per-rank counts round down as in nccl-tests), a
# different type (and op, root) each.
small="-b 100 -e 160000 -f 40 -n 2 -w 1 -c 1"
while read -r coll ip args; do
  # shellcheck disable=SC2086 # $small and $args are option lists
  run_ranks 3 60 "$LOOMPERF" -C "$coll" $small $args
  expect_count "Out of bounds values : 0 OK" 1 "loom-perf -C $coll${args:+ $args} on 3 ranks, #wrong = 0"
  rows=3
  [ "$coll" = barrier ] && rows=1
  expect_rows "$rows" "$ip" "loom-perf -C $coll: $rows row(s) checked, in place $ip"
done <<'EOF'
allreduce 0 -d half -o min
allgather 0 -d int8
reducescatter 0 -d bfloat16 -o avg
broadcast 0 -d uint8 -r 1
reduce 0 -d int32 -o prod -r 2
alltoall N/A -d double
gather 0 -d half -r 2
scatter 0 -d int64 -r 1
sendrecv N/A -d float
barrier N/A
EOF

# -G: T all-reduces grouped vs separate vs one call, all three checked.
# A row: size count type redop | 3 x (time algbw busbw) | #wrong.
expect_group_rows() {
  got=$(printf '%s\n' "$out" | awk '
    $1 == "[0]" && $2 ~ /^[0-9]+$/ { rows++; if (NF == 15 && $15 == "0") good++ }
    END { printf "%d %d", rows, good }')
  if [ "$got" = "$1 $1" ]; then pass "$2"; else
    fail "$2 (expected $1 rows with #wrong 0; rows, good rows: $got; rc=$rc)"
    printf '%s\n' "$out" | tail -n 30
  fi
}
run_ranks 2 60 "$LOOMPERF" -G 1000 -b 4M -e 4M -n 2 -w 1 -c 1
expect_count "Out of bounds values : 0 OK" 1 "loom-perf -G 1000 at 4 MB on 2 ranks, #wrong = 0"
expect_group_rows 1 "loom-perf -G 1000: one row, grouped/separate/single all checked"
export LOOM_BUCKET_BYTES=64K # several buckets per group
run_ranks 2 60 "$LOOMPERF" -G 100 -b 4000 -e 400000 -f 100 -n 2 -w 1 -d bfloat16 -o avg
unset LOOM_BUCKET_BYTES
expect_count "Out of bounds values : 0 OK" 1 "loom-perf -G 100 in 64 KB buckets, bfloat16 avg, #wrong = 0"
expect_group_rows 2 "loom-perf -G 100: two rows checked"
# --autotune: each algorithm that can run is timed on a child communicator
# of its own, against a child with the library's own choice; one round
# (--rounds 1: no spread, so any lead over the default writes an entry,
# and the file usually has some) keeps this quick.  A later run loads the
# file and follows it: the measured algorithm where there is an entry, the
# tuner's own choice ("auto", or no entry) elsewhere.
# test_perf_rounds.sh tests the rule with several rounds.
tune_dir=$(mktemp -d)
tune="$tune_dir/t.tune"
run_ranks 2 60 "$LOOMPERF" --autotune "$tune" --rounds 1 -b 8 -e 64K -f 64 -n 2 -w 1
expect_count "Out of bounds values : 0 OK" 1 "loom-perf --autotune on 2 ranks: every candidate checked"
expect_count "^\[0\] # allreduce: timing ring, rd, oneshot, rhd and default; cannot run here: tree" 1 \
  "loom-perf --autotune on 2 ranks of 1 node: rd and rhd timed, tree and hier not"
# Every entry "COLL 2 1 MAX_BYTES|max ALGO" with an algorithm timed here or
# auto, sizes rising, "max" only last, auto never last.
bad=$(awk '/^#/ || NF == 0 { next }
  { ok = NF == 5 && $2 == 2 && $3 == 1 && ($4 == "max" || $4 ~ /^[0-9]+$/) &&
      (($1 == "allreduce" && $5 ~ /^(ring|rd|oneshot|rhd|auto)$/) ||
       ($1 == "allgather" && $5 ~ /^(ring|rd|auto)$/) ||
       (($1 == "broadcast" || $1 == "reduce") && $5 ~ /^(tree|chain|auto)$/))
    if (!ok || ($1 in done) || ($4 != "max" && ($1 in last) && $4 + 0 <= last[$1]) ||
        ($4 == "max" && $5 == "auto"))
      print "bad entry " NR ": " $0
    if ($4 == "max") done[$1] = 1; else last[$1] = $4 + 0 }' "$tune" 2>&1)
if [ -f "$tune" ] && [ -z "$bad" ]; then pass "loom-perf --autotune: the tune file's entries parse"; else
  fail "loom-perf --autotune: tune file: ${bad:-missing}"; cat "$tune"; fi
entries=$(grep -vc '^#' "$tune")
trace_algos() { # $1: tune file or "": each all-reduce size's algorithm, "SIZE NAME" lines
  LOOM_TUNE_FILE=$1 LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=INIT,COLL \
    run_ranks 2 60 "$LOOMPERF" -b 8 -e 64K -f 64 -n 1 -w 0 -c 0
}
trace_algos ""
untuned=$out
trace_algos "$tune"
expect_count "LOOM_TUNE_FILE=$tune: $entries measured choice(s) for 2 ranks on 1 node(s)" 1 \
  "LOOM_TUNE_FILE loads the $entries entries autotune wrote"
name_of() { # an algorithm as the trace names it
  case $1 in
  rd) echo "recursive doubling" ;; rhd) echo "recursive halving-doubling" ;;
  oneshot) echo "one-shot" ;; *) echo "$1" ;;
  esac
}
for size in 8 512 32768; do # the file's all-reduce choice is the one made
  algo=$(awk -v s=$size '$1 == "allreduce" && ($4 == "max" || s <= $4 + 0) { print $5; exit }' "$tune")
  pat="^\[0\] .* allreduce count $((size / 4)) float32: "
  if [ -z "$algo" ] || [ "$algo" = auto ]; then # the tuner's choice, as without the file
    name=$(printf '%s\n' "$untuned" | grep -m1 "$pat" | sed "s/.*float32: \([^,]*\),.*/\1/")
    algo="auto ($name)"
  else
    name=$(name_of "$algo")
  fi
  calls=$(printf '%s\n' "$out" | grep -c "$pat")
  good=$(printf '%s\n' "$out" | grep -c "$pat$name,")
  if [ -n "$name" ] && [ "$calls" -gt 0 ] && [ "$good" = "$calls" ]; then
    pass "LOOM_TUNE_FILE: all-reduces of $size B use $algo as the file says"; else
    fail "LOOM_TUNE_FILE: $good of $calls all-reduces of $size B use $algo ('$name')"; fi
done
# 3 ranks: rd and rhd need a power-of-two rank count and are not timed.
run_ranks 3 60 "$LOOMPERF" --autotune "$tune" --rounds 1 -C allreduce,allgather -b 8 -e 64K -f 64 -n 2 -w 1
expect_count "^\[0\] # allreduce: timing ring, oneshot and default; cannot run here: rd " 1 \
  "loom-perf --autotune on 3 ranks: rd and rhd not timed"
expect_count "^\[0\] # allgather: only ring can run here" 1 "loom-perf --autotune on 3 ranks: all-gather has no choice"
# (Whether a size gets an entry depends on the times: every entry is
# checked, none is required.)
if [ -f "$tune" ] && ! grep -v '^#' "$tune" | grep -vq '^allreduce 3 1 [0-9max]* \(ring\|oneshot\|auto\)$'; then
  pass "loom-perf --autotune on 3 ranks: entries for 3 ranks, no rd"; else
  fail "loom-perf --autotune on 3 ranks: unexpected file"; cat "$tune"; fi
rm -rf "$tune_dir"
finish
