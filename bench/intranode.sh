#!/bin/sh
# intranode.sh — one node, in one go: Loom (loom-perf under loomrun), Open MPI
# (mpi-perf under mpirun: MPI_Allreduce / MPI_Allgather), gloo (gloo-perf.py:
# torch.distributed) and the memory ceiling (ceiling: threads doing the ideal
# data movement), all-reduce then all-gather, float32 sum, over the same
# sizes; prints a table of bus bandwidths and ratios per collective, the
# times of the small sizes, and whether Loom meets its intra-node targets.
#
#   bench/intranode.sh [BUILD_DIR]          (default: build)
#
# Environment:
#   NP       ranks (default 2; the targets are set for 2)
#   REPEAT   runs of each program, alternating (default 1); the tables use
#            the median time over runs
#   SIZES    the sweep, as loom-perf flags; passes separated by ';', each run
#            by every program (default: many iterations for small sizes,
#            few for large ones; about 7 minutes per REPEAT on 2 cores):
#              -b 8 -e 64K -f 2 -n 2000 -w 200; -b 128K -e 8M -f 2 -n 200 -w 20;
#              -b 16M -e 256M -f 2 -n 10 -w 3
#            (the middle pass takes 200 calls: with 50, one preemption of the
#            VM's own threads, 0.1-0.25 ms, moved a size's mean by 20-70 %)
#   PCT_PASS the pass in which loom and mpi also report each size's p50 and
#            p99 (--percentiles; default 1, the small sizes; 0: none)
#   IPC_PASS the pass in which Loom runs a second time on loomMemAlloc's
#            buffers (loom-perf --mem loom: host IPC, each rank reading
#            the peers' buffers directly), column "ipc" (default: the
#            last pass, the large sizes; 0: none)
#   COLLS    collectives (default "allreduce allgather")
#   MODE_SPLIT_NS  a cache line's round trip (ns) under which a run counts
#            as in the fast mode, for the targets judged by mode (default 200)
#   MPIRUN   MPI launcher (default: mpirun --allow-run-as-root --oversubscribe)
#   PYTHON   Python with torch for gloo-perf.py (default /usr/bin/python3)
#   PLOT     FILE.png: also draw busbw against size for the four, one panel
#            per collective (gnuplot; Debian package gnuplot-nox)
#   KEEP     DIR: keep every run's raw output, the plotted data (COLL.dat:
#            size and busbw of loom, mpi, gloo, ceiling) and the gnuplot
#            script (plot.gp) in DIR, to re-plot or re-read without a rerun
# A program that cannot run here (no MPI, no torch) shows n/a and the rest
# goes on.  Columns are out-of-place times (gloo: its only form; all_reduce
# works in place).  busbw is recomputed from the median time with nccl-tests'
# factor: all-reduce 2(n-1)/n, all-gather (n-1)/n.
# The targets are issue 23's (2 ranks): 8 B-1 KiB all-reduce mean, p50 and
# p99 at most Open MPI's; 128 KiB-8 MiB all-reduce >= 2x Open MPI; 64-256 MiB
# >= 2.5x Open MPI and >= 0.8x the memory ceiling; all-gather >= Open MPI
# from 32 KiB.  The ceiling's target is judged for both of Loom's paths:
# malloc'd buffers (through the shared-memory FIFOs: two copies a byte,
# which no tuning brings to 0.8x) and loomMemAlloc's (host IPC).
# Before each run and at the end it times one cache line's round trip
# between CPUs 0 and 1 (bench/line-latency) and prints them with the
# targets: on a VM whose two vCPUs sit near or far apart (about 60 or 450
# ns here) every small-message figure moves with it.  When a collective's
# runs were not all in one mode, the targets are judged again over the
# fast runs alone and over the slow ones (MODE_SPLIT_NS, default 200: a
# reading under it is fast; the reading is before the run, and the mode
# can change within one).
# Exit status: 0 when every program that ran succeeded, 1 otherwise; a
# missed target is reported, not an error.
set -u
set -f # the flags in SIZES are split on blanks, never globbed

BUILD=${1:-build}
NP=${NP:-2}
REPEAT=${REPEAT:-1}
SIZES=${SIZES:-"-b 8 -e 64K -f 2 -n 2000 -w 200; -b 128K -e 8M -f 2 -n 200 -w 20; -b 16M -e 256M -f 2 -n 10 -w 3"}
COLLS=${COLLS:-allreduce allgather}
PCT_PASS=${PCT_PASS:-1}
MODE_SPLIT_NS=${MODE_SPLIT_NS:-200}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
PYTHON=${PYTHON:-/usr/bin/python3}
PLOT=${PLOT:-}
if [ -n "$PLOT" ] && ! command -v gnuplot >/dev/null 2>&1; then
  echo "$0: PLOT=$PLOT needs gnuplot (apt-get install gnuplot-nox)" >&2
  exit 1
fi
here=$(dirname "$0")

LOOMRUN=$BUILD/tools/loomrun
LOOM_PERF=$BUILD/bench/loom-perf
MPI_PERF=$BUILD/bench/mpi-perf
CEILING=$BUILD/bench/ceiling
LINE_LATENCY=$BUILD/bench/line-latency
GLOO_PERF=$here/gloo-perf.py

for f in "$LOOMRUN" "$LOOM_PERF"; do
  if [ ! -x "$f" ]; then
    echo "$0: $f: not found or not executable (build first, or give the build directory)" >&2
    exit 1
  fi
done

# Which of the others can run; the rest are n/a.
tools=loom
# shellcheck disable=SC2086 # MPIRUN is a command line
set -- $MPIRUN
if [ -x "$MPI_PERF" ] && command -v "$1" >/dev/null 2>&1; then
  tools="$tools mpi"
else
  echo "# mpi: n/a ($MPI_PERF not built or '$1' not found)"
fi
if "$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' >/dev/null 2>&1; then
  tools="$tools gloo"
else
  echo "# gloo: n/a ($PYTHON cannot import torch with gloo)"
fi
if [ -x "$CEILING" ]; then
  tools="$tools ceiling"
else
  echo "# ceiling: n/a ($CEILING not built)"
fi

KEEP=${KEEP:-}
tmp=$(mktemp -d) || exit 1
# KEEP: copy the work directory, with plot.gp pointing at the copies.
keep_results() {
  mkdir -p "$KEEP" && keep_abs=$(cd "$KEEP" && pwd) && cp -R "$tmp"/. "$keep_abs"/ &&
    if [ -f "$keep_abs/plot.gp" ]; then sed -i "s|$tmp|$keep_abs|g" "$keep_abs/plot.gp"; fi &&
    echo "# kept: $keep_abs" >&2
}
trap 'if [ -n "$KEEP" ]; then keep_results; fi; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
printf '%s\n' "$SIZES" | tr ';' '\n' | sed 's/^ *//; s/ *$//; /^$/d' >"$tmp/passes"
npasses=$(wc -l <"$tmp/passes")
IPC_PASS=${IPC_PASS:-$npasses}
[ "$IPC_PASS" -gt 0 ] && tools=$(echo "$tools" | sed 's/^loom/loom loomipc/')

echo "# loom:    $LOOMRUN --no-prefix -n $NP $LOOM_PERF -C COLL PASS"
echo "# mpi:     $MPIRUN -np $NP $MPI_PERF -C COLL PASS"
echo "# gloo:    $PYTHON $GLOO_PERF -t $NP -C COLL PASS"
echo "# ceiling: $CEILING -t $NP -C COLL PASS"
echo "# PASS, one run each: $(paste -sd';' "$tmp/passes" | sed 's/;/; /g')"
[ "$PCT_PASS" -gt 0 ] && echo "# pass $PCT_PASS: loom and mpi with --percentiles too"
[ "$IPC_PASS" -gt 0 ] && echo "# pass $IPC_PASS: loom again with --mem loom (ipc: loomMemAlloc buffers)"
echo "# $REPEAT alternating run(s) of each; times are the median over runs"

status=0
# note_mode WHEN: appends "WHEN NS" to the list of the machine's modes
# (one cache line's round trip between CPUs 0 and 1; nothing without two
# CPUs or the program).
note_mode() {
  if [ -x "$LINE_LATENCY" ] && [ "$(nproc)" -ge 2 ]; then
    nm_ns=$("$LINE_LATENCY" 0 1 200000 5 2>/dev/null |
      sed -n 's/.*: \([0-9.]*\) ns a round trip.*/\1/p')
    [ -n "$nm_ns" ] && echo "$1 $nm_ns" >>"$tmp/modes"
  fi
}
# run_tool TOOL COLL OUT PASS_ARGS...: one run; its table goes to OUT.
# PCT: "--percentiles" in the pass that reports p50 and p99, else empty.
run_tool() {
  rt_tool=$1 rt_coll=$2 rt_out=$3
  shift 3
  # shellcheck disable=SC2086 # MPIRUN is a command line
  case $rt_tool in
  loom) set -- "$LOOMRUN" --no-prefix -n "$NP" "$LOOM_PERF" -C "$rt_coll" "$@" $PCT ;;
  loomipc) set -- "$LOOMRUN" --no-prefix -n "$NP" "$LOOM_PERF" -C "$rt_coll" "$@" --mem loom ;;
  mpi) set -- $MPIRUN -np "$NP" "$MPI_PERF" -C "$rt_coll" "$@" $PCT ;;
  gloo) set -- "$PYTHON" "$GLOO_PERF" -t "$NP" -C "$rt_coll" "$@" ;;
  ceiling) set -- "$CEILING" -t "$NP" -C "$rt_coll" "$@" ;;
  esac
  if ! "$@" >"$rt_out" 2>"$tmp/err" </dev/null; then
    echo "$0: failed: $*; its output:" >&2
    cat "$rt_out" "$tmp/err" >&2
    status=1
  fi
}

for coll in $COLLS; do
  mkdir -p "$tmp/$coll"
  r=1
  while [ "$r" -le "$REPEAT" ]; do
    note_mode "$coll.run$r"
    p=1
    while [ "$p" -le "$npasses" ]; do
      pass=$(sed -n "${p}p" "$tmp/passes")
      PCT=
      [ "$p" -eq "$PCT_PASS" ] && PCT=--percentiles
      for tool in $tools; do
        [ "$tool" = loomipc ] && [ "$p" -ne "$IPC_PASS" ] && continue
        echo "# $coll: run $r/$REPEAT, pass $p/$npasses: $tool" >&2
        # shellcheck disable=SC2086 # the pass is a list of flags
        run_tool "$tool" "$coll" "$tmp/$coll/$tool.$r.$p" $pass
      done
      p=$((p + 1))
    done
    r=$((r + 1))
  done
done

set +f
# Data rows: size count type redop | time algbw busbw #wrong | (in place).
# report COLL TARGETS PLOTDATA FILE...: the tables of COLL over the runs in
# FILE... on stdout, the plotted data to PLOTDATA, the verdicts on its
# targets appended to TARGETS.
report() {
  rp_coll=$1 rp_targets=$2 rp_plot=$3
  shift 3
  awk -v np="$NP" -v coll="$rp_coll" -v tools="$tools" -v targets="$rp_targets" \
    -v plotdata="$rp_plot" '
    function median(list,   a, k, i, j, t) {
      k = split(list, a, " ")
      for (i = 2; i <= k; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    # median time of tool at size s: "" when not measured; t_m: of metric
    # m ("mean", or "p50" and "p99" where measured)
    function t_m(m, tool, s) { return ((m, tool, s) in times) ? median(times[m, tool, s]) : "" }
    function t_of(tool, s) { return t_m("mean", tool, s) }
    function bw(tool, s,   t) {
      if (!(tool in avail)) return "n/a"
      t = t_of(tool, s)
      return (t != "" && t > 0) ? sprintf("%.2f", s / t / 1000 * factor) : "-"
    }
    function us(tool, s, m,   t) {
      if (!(tool in avail)) return "n/a"
      t = t_m(m == "" ? "mean" : m, tool, s)
      return t == "" ? "-" : sprintf(t < 1 ? "%.3f" : "%.2f", t)
    }
    # how many times faster base (default loom) is than tool (= base busbw
    # / tool busbw), by metric m (default the mean): the number, "-" when
    # not measured, "n/a" when tool did not run
    function ratio(tool, s, m, base,   lt, t) {
      if (!(tool in avail)) return "n/a"
      if (m == "") m = "mean"
      if (base == "") base = "loom"
      lt = t_m(m, base, s); t = t_m(m, tool, s)
      return (lt != "" && t != "" && lt > 0) ? t / lt : "-"
    }
    # the same, as the tables print it (2 decimals)
    function speedup(tool, s, m, base,   x) {
      x = ratio(tool, s, m, base)
      return (x == "-" || x == "n/a") ? x : sprintf("%.2f", x)
    }
    # target: over the sizes in [lo, hi], the worst speedup of base
    # (default loom) over tool (by metric m, default the mean) must reach
    # need; judged unrounded, printed to 3 decimals
    function target(what, tool, lo, hi, need, m, base,   i, s, x, worst, at, k) {
      k = 0
      if (base != "" && !(base in avail)) tool = base # reported as not run
      for (i = 0; i < n; i++) {
        s = order[i] + 0
        if (s < lo || s > hi) continue
        x = ratio(tool, s, m, base)
        if (x == "-" || x == "n/a") continue
        if (k == 0 || x + 0 < worst) { worst = x + 0; at = s }
        k++
      }
      if (!(tool in avail))
        printf "  %-12s  %s: %s did not run\n", "n/a", what, tool >> targets
      else if (k == 0)
        printf "  %-12s  %s: no size of the range measured\n", "not measured", what >> targets
      else
        printf "  %-12s  %s: worst %.3f (%s B), over %d size(s)\n", (worst >= need) ? "met" : "MISSED",
               what, worst, order_name[at], k >> targets
    }
    BEGIN { split(tools, tl, " "); for (i in tl) avail[tl[i]] = 1 }
    $1 ~ /^[0-9]+$/ && NF >= 12 {
      f = FILENAME; sub(/.*\//, "", f); split(f, part, "."); tool = part[1]
      if (!(($1 + 0) in seen)) { seen[$1 + 0] = 1; order[n++] = $1 + 0; order_name[$1 + 0] = $1 }
      times["mean", tool, $1 + 0] = times["mean", tool, $1 + 0] " " $5
      if (NF >= 16) { # --percentiles: p50 and p99 after #wrong
        times["p50", tool, $1 + 0] = times["p50", tool, $1 + 0] " " $9
        times["p99", tool, $1 + 0] = times["p99", tool, $1 + 0] " " $10
      }
      if ((tool == "loom" || tool == "loomipc") && $8 != "0" && $8 != "N/A") wrong[$1 + 0] = 1
    }
    END {
      factor = (coll == "allgather") ? (np - 1) / np : 2 * (np - 1) / np
      # sizes in increasing order
      for (i = 1; i < n; i++) { t = order[i]; for (j = i - 1; j >= 0 && order[j] > t; j--) order[j + 1] = order[j]; order[j + 1] = t }
      printf "# %s, float32%s, %d ranks: busbw (GB/s) and loom / other (busbw ratio)\n",
             coll, coll == "allreduce" ? " sum" : "", np
      printf "%12s  %10s  %10s  %10s  %10s  %9s  %9s  %9s  %10s  %9s\n", "size(B)", "loom", "mpi",
             "gloo", "ceiling", "loom/mpi", "loom/gloo", "loom/ceil", "ipc", "ipc/ceil"
      for (i = 0; i < n; i++) {
        s = order[i]
        ipc = t_of("loomipc", s) == "" ? "-" : bw("loomipc", s)
        printf "%12s  %10s  %10s  %10s  %10s  %9s  %9s  %9s  %10s  %9s%s\n", order_name[s],
               bw("loom", s), bw("mpi", s), bw("gloo", s), bw("ceiling", s), speedup("mpi", s),
               speedup("gloo", s), speedup("ceiling", s), ipc,
               ipc == "-" || ipc == "n/a" ? ipc : speedup("ceiling", s, "", "loomipc"),
               (s in wrong) ? "  (loom #wrong > 0)" : ""
      }
      # size and the four busbws for the plot ("?" where not measured)
      for (i = 0; i < n; i++) {
        s = order[i]
        printf "%s", s > plotdata
        for (k = 1; k <= 4; k++) {
          x = bw(k == 1 ? "loom" : k == 2 ? "mpi" : k == 3 ? "gloo" : "ceiling", s)
          printf " %s", (x == "n/a" || x == "-") ? "?" : x > plotdata
        }
        printf "\n" > plotdata
      }
      close(plotdata)
      small = 0
      for (i = 0; i < n; i++) if (order[i] <= 1024) small++
      if (small) {
        printf "# %s, sizes up to 1 KB: time (us) and mpi time / loom time; p50 and p99 of loom and mpi\n", coll
        printf "%12s  %10s  %10s  %10s  %10s  %9s  %8s  %8s  %9s  %8s  %8s  %9s\n", "size(B)", "loom",
               "mpi", "gloo", "ceiling", "mpi/loom", "loom p50", "mpi p50", "mpi/loom", "loom p99",
               "mpi p99", "mpi/loom"
        for (i = 0; i < n && order[i] <= 1024; i++) {
          s = order[i]
          printf "%12s  %10s  %10s  %10s  %10s  %9s  %8s  %8s  %9s  %8s  %8s  %9s\n", order_name[s],
                 us("loom", s), us("mpi", s), us("gloo", s), us("ceiling", s), speedup("mpi", s),
                 us("loom", s, "p50"), us("mpi", s, "p50"), speedup("mpi", s, "p50"),
                 us("loom", s, "p99"), us("mpi", s, "p99"), speedup("mpi", s, "p99")
        }
      }
      M = 1048576
      if (coll == "allreduce") {
        target("all-reduce 64-256 MB busbw >= 0.8 x ceiling (malloc buffers)", "ceiling", 64 * M,
               256 * M, 0.8)
        target("all-reduce 64-256 MB busbw >= 0.8 x ceiling (loomMemAlloc, ipc)", "ceiling", 64 * M,
               256 * M, 0.8, "", "loomipc")
        target("all-reduce 64-256 MB busbw >= 2.5 x OpenMPI", "mpi", 64 * M, 256 * M, 2.5)
        target("all-reduce 128 KB-8 MB busbw >= 2 x OpenMPI", "mpi", 128 * 1024, 8 * M, 2)
        target("all-reduce 8 B-1 KB latency <= OpenMPI (ratio: mpi time / loom time)", "mpi", 8, 1024, 1)
        target("all-reduce 8 B-1 KB p50 <= OpenMPI p50 (mpi / loom)", "mpi", 8, 1024, 1, "p50")
        target("all-reduce 8 B-1 KB p99 <= OpenMPI p99 (mpi / loom)", "mpi", 8, 1024, 1, "p99")
      } else if (coll == "allgather") {
        target("all-gather >= 32 KB busbw >= OpenMPI", "mpi", 32 * 1024, 2147483647, 1)
      }
    }
  ' "$@"
}
for coll in $COLLS; do
  echo
  report "$coll" "$tmp/targets" "$tmp/$coll.dat" "$tmp/$coll"/*.[0-9]*.[0-9]*
done

if [ -n "$PLOT" ]; then
  ncoll=$(echo $COLLS | wc -w)
  {
    echo "set terminal pngcairo size 1000,$((420 * ncoll)) noenhanced"
    echo "set output '$PLOT'"
    echo "set datafile missing '?'"
    echo "set multiplot layout $ncoll,1"
    echo "set logscale x 2; set logscale y 10; set format x '%.0b%BB'; set grid"
    echo "set xlabel 'message size'; set ylabel 'busbw (GB/s)'; set key top left"
    for coll in $COLLS; do
      d="$tmp/$coll.dat"
      echo "set title '$coll, float32, $NP ranks, one node ($(hostname), $(nproc) CPUs, $(date -u +%Y-%m-%d))'"
      echo "plot '$d' using 1:2 with linespoints title 'Loom', '$d' using 1:3 with linespoints title 'Open MPI', '$d' using 1:4 with linespoints title 'gloo', '$d' using 1:5 with lines dashtype 2 title 'memory ceiling'"
    done
    echo "unset multiplot"
  } >"$tmp/plot.gp"
  if gnuplot "$tmp/plot.gp" 2>"$tmp/gperr"; then
    echo "# plot: $PLOT"
  else
    echo "$0: gnuplot failed:" >&2
    cat "$tmp/gperr" >&2
    status=1
  fi
fi

note_mode end
if [ -s "$tmp/modes" ]; then
  echo
  echo "# the machine's mode: one cache line's round trip between CPUs 0 and 1 (ns,"
  echo "# bench/line-latency) before each run and at the end; about 60 fast, 450 slow here"
  echo "  $(paste -sd' ' "$tmp/modes" | sed 's/ \([^ ]*\.run\|end\)/, \1/g')"
fi

echo
echo "# targets (issue 23: 2 ranks, float32 sum; the worst size in each range counts)"
[ "$NP" -ne 2 ] && echo "# NOTE: NP=$NP, but the targets are set for 2 ranks"
if [ -s "$tmp/targets" ]; then
  cat "$tmp/targets"
else
  echo "  (no target applies to COLLS=$COLLS)"
fi

# The same verdicts over the runs of each mode alone, when a collective's
# runs were not all in one mode: a median over both mixes them.
# runs_of COLL CLASS: the numbers of COLL's runs whose reading before them
# was under MODE_SPLIT_NS (fast) or not (slow).
runs_of() {
  awk -v c="$1.run" -v k="$2" -v cut="$MODE_SPLIT_NS" 'index($1, c) == 1 {
    r = substr($1, length(c) + 1); if ((k == "fast") == ($2 + 0 < cut)) print r }' "$tmp/modes"
}
mixed=0
if [ -s "$tmp/modes" ]; then
  for coll in $COLLS; do
    [ -n "$(runs_of "$coll" fast)" ] && [ -n "$(runs_of "$coll" slow)" ] && mixed=1
  done
fi
if [ "$mixed" = 1 ] && [ -s "$tmp/targets" ]; then
  for class in fast slow; do
    : >"$tmp/targets.$class"
    counts=
    for coll in $COLLS; do
      runs=$(runs_of "$coll" "$class")
      set --
      for r in $runs; do set -- "$@" "$tmp/$coll"/*."$r".[0-9]*; done
      counts="$counts${counts:+, }$coll $(echo $runs | wc -w)"
      [ $# -gt 0 ] && report "$coll" "$tmp/targets.$class" /dev/null "$@" >/dev/null
    done
    echo
    echo "# targets, $class runs only (the reading before the run $([ $class = fast ] && echo under || echo at least) $MODE_SPLIT_NS ns; runs: $counts)"
    if [ -s "$tmp/targets.$class" ]; then cat "$tmp/targets.$class"; else echo "  (none)"; fi
  done
fi
exit $status
