#!/bin/sh
# test_mpi_examples.sh — runs the MPI examples (examples/mpi) and
# tests/mpi/init_from_mpi under mpirun on 2, 3 and 4 ranks: each run must
# exit 0 with exactly one success line per rank, and leave no process and
# no /dev/shm/loom-* segment behind.  One failing run checks that an init
# error on rank 0 reaches every rank and ends the job quickly.
# Skips (77) when configure found no MPI or mpirun is missing.
set -u
if [ "${MPI_FOUND:-no}" != yes ]; then
  echo "SKIP: configure found no MPI (mpicc), so the MPI examples were not built;" \
    "install openmpi-bin and libopenmpi-dev and rerun configure"
  exit 77
fi
if [ -z "${MPIRUN:-}" ] || [ ! -x "$MPIRUN" ]; then
  echo "SKIP: mpirun not found at configure time (MPIRUN='${MPIRUN:-}')"
  exit 77
fi
: "${EXAMPLEBIN:?set by make check}"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/../ranks/lib.sh
. "$here/../ranks/lib.sh" # pass/fail/expect_count/finish; exports LOOM_SOCKET_IFNAME=lo
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: sanitizer pass (LOOM_TEST_LIGHT=1): the MPI examples ran in the plain pass, and the library calls they make are run by the other tests here"
  exit 77
fi

# Open MPI in a container, one host.  Local ranks inherit this environment.
#  - plm_rsh_agent empty: mpirun otherwise refuses to start when neither ssh
#    nor rsh is installed (setup.sh installs without recommends), although
#    no remote node is used.
#  - btl self,vader,tcp: leaves out openib/ofi, which may warn on hosts
#    with RDMA devices they cannot use; ranks of one host talk over vader.
#  - vader single copy off: it uses CMA (process_vm_readv), which fails in
#    containers without ptrace permission.
export OMPI_MCA_plm_rsh_agent=
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# ASan builds (configure --enable-asan): Open MPI leaks by design.  Its leaks
# are suppressed (openmpi.supp names its libraries), so a leak in Loom or in
# the examples still fails a run.  That needs the slow unwinder (Open MPI
# has no frame pointers: the fast one stops inside it, before the frame the
# suppressions match), which makes a run about 5 times slower; so only the
# 2-rank runs look for leaks, the others run with detect_leaks=0 (later
# ASAN_OPTIONS entries override earlier ones).  Without ASan these are
# ignored.
export LSAN_OPTIONS="suppressions=$here/openmpi.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
LEAK_CHECK="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
NO_LEAK_CHECK="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

SHM_BEFORE=$(mktemp) || exit 1
trap 'rm -f "$SHM_BEFORE"' EXIT

# The names of the Loom segments in /dev/shm, one a line.
loom_segments() {
  for f in /dev/shm/loom-*; do
    [ -e "$f" ] && echo "${f#/dev/shm/}"
  done
}

# run_mpi K PROG — $out and $rc as run_ranks does; leaks checked on 2 ranks.
# Bounded twice: mpirun --timeout ends the job and its ranks, the outer
# timeout ends mpirun itself should it hang.
run_mpi() {
  asan=$NO_LEAK_CHECK
  [ "$1" -eq 2 ] && asan=$LEAK_CHECK
  out=$(ASAN_OPTIONS=$asan timeout -k 5 120 "$MPIRUN" --timeout 100 --oversubscribe \
    --allow-run-as-root -np "$1" "$2" 2>&1)
  rc=$?
}

# No rank (nor mpirun, whose command line names the program) may outlive a
# run, nor leave a Loom segment.  Others may run Loom at the same time, so
# only new segments count, and of those only ones whose owner (the pid in
# loom-<pid>-<random>) is gone or is one of ours.
check_no_leftovers() {
  sleep 0.2
  if pgrep -f "$1" >/dev/null; then
    fail "processes of $1 left behind: $(pgrep -af "$1" | head -3)"
    for pid in $(pgrep -f "$1"); do kill -9 "$pid"; done
  else
    pass "no $1 process left behind"
  fi
  left=
  for seg in $(loom_segments | grep -vxF -f "$SHM_BEFORE"); do
    owner=${seg#loom-}
    owner=${owner%%-*}
    if ! kill -0 "$owner" 2>/dev/null ||
      tr '\0' ' ' <"/proc/$owner/cmdline" 2>/dev/null | grep -qF "$1"; then
      left="$left $seg"
      rm -f "/dev/shm/$seg"
    fi
  done
  if [ -n "$left" ]; then fail "shared-memory segments left in /dev/shm:$left"; else pass "no loom segment left in /dev/shm"; fi
}

# expect_run K PROG PATTERN — rc 0, exactly K lines matching PATTERN
expect_run() {
  loom_segments >"$SHM_BEFORE"
  run_mpi "$1" "$2"
  name=${2##*/}
  if [ "$rc" -eq 0 ]; then
    pass "$name on $1 ranks: exit status 0"
  else
    fail "$name on $1 ranks: exit status $rc"
    printf '%s\n' "$out" | tail -n 30
  fi
  expect_count "$3" "$1" "$name on $1 ranks: one success line per rank"
  check_no_leftovers "$2"
}

# The exact split of 4 ranks: evens {0,2} sum 1+3, odds {1,3} sum 2+4.
check_split_of_4() {
  expect_count "^split: world rank 0 of 4: color 0, rank 0 of 2: OK (sum 4 " 1 "split: world rank 0 is rank 0 of the evens, sum 4"
  expect_count "^split: world rank 2 of 4: color 0, rank 1 of 2: OK (sum 4 " 1 "split: world rank 2 is rank 1 of the evens, sum 4"
  expect_count "^split: world rank 1 of 4: color 1, rank 0 of 2: OK (sum 6 " 1 "split: world rank 1 is rank 0 of the odds, sum 6"
  expect_count "^split: world rank 3 of 4: color 1, rank 1 of 2: OK (sum 6 " 1 "split: world rank 3 is rank 1 of the odds, sum 6"
}

for k in 2 3 4; do
  expect_run "$k" "$EXAMPLEBIN/mpi/allreduce" \
    "^allreduce: rank [0-9]* of $k: OK (5 sizes up to 1048576 floats, exact and equal to MPI_Allreduce)\$"
  expect_run "$k" "$EXAMPLEBIN/mpi/split" \
    "^split: world rank [0-9]* of $k: color [01], rank [0-9]* of [0-9]*: OK (sum [0-9]* from MPI_Comm_split and loomCommSplit)\$"
  [ "$k" -eq 4 ] && check_split_of_4
  expect_run "$k" "$EXAMPLEBIN/mpi/mixed" \
    "^mixed: rank [0-9]* of $k: OK (allgather then MPI_Allreduce, broadcast from rank $((k - 1)), stream allreduce beside MPI_Allreduce)\$"
  expect_run "$k" "$TESTBIN/mpi/init_from_mpi" "^init_from_mpi: rank [0-9]* of $k: OK ([0-9]* checks)\$"
  # rank 0 is left out of one communicator, so it makes 2 checks fewer
  expect_count "^init_from_mpi: rank 0 of $k: OK (8 checks)\$" 1 "init_from_mpi on $k ranks: rank 0 made 8 checks"
  expect_count "^init_from_mpi: rank [1-9] of $k: OK (10 checks)\$" $((k - 1)) \
    "init_from_mpi on $k ranks: the other ranks made 10 checks"
done

# Rank 0 cannot make the unique id (no interface matches): it fails, the
# others are told through the broadcast instead of waiting for the
# rendezvous, and the job ends at once with a nonzero status.
loom_segments >"$SHM_BEFORE"
start=$(date +%s)
ifname=$LOOM_SOCKET_IFNAME
LOOM_SOCKET_IFNAME=no-such-interface0
run_mpi 3 "$EXAMPLEBIN/mpi/allreduce"
LOOM_SOCKET_IFNAME=$ifname
took=$(($(date +%s) - start))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ "$took" -le 20 ]; then
  pass "an init failure on rank 0 ends the job (exit status $rc, ${took} s)"
else
  fail "an init failure on rank 0 should end the job quickly with an error (exit status $rc, ${took} s)"
fi
expect_count "LOOM WARN.*no up interface with an address matches LOOM_SOCKET_IFNAME=no-such-interface0" 1 \
  "rank 0, and only rank 0, logs the reason"
expect_count ": OK (" 0 "no rank reports success"
check_no_leftovers "$EXAMPLEBIN/mpi/allreduce"

finish
