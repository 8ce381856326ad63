#!/bin/bash
# The README's commands, run as written: command 1 of "The two commands"
# (set-up, build and the 2-rank benchmark; command 2 is this suite, which
# .ci/run runs on a clean clone), every line of the quick reference under
# "Using it" but the one naming a placeholder program, and the C snippet
# there, compiled verbatim inside a main() and run on 2 ranks under mpirun
# with its result checked.  A README line that stops working fails here.
# About 70 s; the plain pass only.
cd "$(dirname "$0")/.." || exit 1
src=$PWD
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: sanitizer pass (LOOM_TEST_LIGHT=1): the README's commands ran in the plain pass"
  exit 77
fi
build=${TOP_BUILDDIR:?}
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
# The lines run as a user's shell would: none of the test harness's paths.
unset PYTHONPATH LD_LIBRARY_PATH LOOM_MODULE_PATH

# block HEADING LANG — the first ```LANG block after the line "HEADING".
block() {
  awk -v h="$1" -v l="$2" '$0 == h { f = 1 } f && $0 == "```" l { p = 1; next }
                           p && $0 == "```" { exit } p' README.md
}
# run_line DIR LINE — LINE (its trailing comment dropped) in DIR, bounded.
run_line() {
  (cd "$1" && timeout -k 5 300 bash -c "$2") >"$work/line.out" 2>&1
}

# ---- command 1 -----------------------------------------------------------------------
two=$(block "## The two commands" sh)
cmd1=$(printf '%s\n' "$two" | grep '^\./scripts/setup\.sh && ')
if [ -z "$cmd1" ] || ! printf '%s\n' "$two" | grep -qx '\./scripts/test\.sh'; then
  fail "README's \"The two commands\" block lacks './scripts/setup.sh && ...' or './scripts/test.sh'"
fi
grep -qx 'exec \./scripts/test\.sh' .ci/run && pass ".ci/run runs command 2 (./scripts/test.sh)" ||
  fail ".ci/run does not exec ./scripts/test.sh"
if [ -n "$cmd1" ] && [ "$build" -ef "$src/build" ]; then
  if run_line "$src" "$cmd1" && grep -q '^# Out of bounds values : 0 OK' "$work/line.out"; then
    pass "command 1 as written: $cmd1"
  else
    fail "command 1 as written ($cmd1)"; tail -n 15 "$work/line.out"
  fi
elif [ -n "$cmd1" ]; then
  # another build directory (not the README's ./build): its benchmark part
  bench=${cmd1#./scripts/setup.sh && }
  mkdir "$work/tree" && ln -s "$build" "$work/tree/build"
  if run_line "$work/tree" "$bench" && grep -q '^# Out of bounds values : 0 OK' "$work/line.out"; then
    pass "command 1's benchmark on this build ($build is not ./build): $bench"
  else
    fail "command 1's benchmark ($bench)"; tail -n 15 "$work/line.out"
  fi
fi

# ---- the quick reference ---------------------------------------------------------------
# In a scratch directory that looks like the source tree (build/, examples/),
# so the files the lines write (r.json, r.png) land there.
mkdir -p "$work/ref" && ln -s "$build" "$work/ref/build" && ln -s "$src/examples" "$work/ref/examples"
nlines=0
while IFS= read -r line; do
  cmd=$(printf '%s\n' "$line" | sed 's/ \{2,\}#.*$//; s/ *$//')
  [ -n "$cmd" ] || continue
  nlines=$((nlines + 1))
  case $cmd in
    *my_program*) echo "SKIP line: $cmd (a placeholder for the user's program)"; continue ;;
    mpirun*) if [ "${MPI_FOUND:-no}" != yes ]; then echo "SKIP line: $cmd (no MPI)"; continue; fi ;;
  esac
  case $cmd in
    */python3\ *train_ddp.py*) if [ "${TORCH_BUILT:-no}" != yes ]; then echo "SKIP line: $cmd (loom_torch not built)"; continue; fi ;;
  esac
  if run_line "$work/ref" "$cmd"; then pass "as written: $cmd"; else
    fail "as written: $cmd"; tail -n 15 "$work/line.out"; fi
done < <(awk '$0 == "## Using it" { f = 1 } f && /^```sh/ { p = 1; next } p && /^```/ { exit } p' README.md)
[ "$nlines" -ge 5 ] && pass "$nlines quick-reference lines found" || fail "only $nlines quick-reference lines found in README.md"

# ---- the C snippet ----------------------------------------------------------------------
if [ "${MPI_FOUND:-no}" = yes ] && command -v mpicc >/dev/null; then
  {
    printf '%s\n' '#include <mpi.h>' '#include <stdio.h>'
    block "## Using it" c | grep '^#include'
    printf '%s\n' 'int main(int argc, char **argv) {' '  int rank, nranks;' \
      '  MPI_Init(&argc, &argv);' '  MPI_Comm_rank(MPI_COMM_WORLD, &rank);' \
      '  MPI_Comm_size(MPI_COMM_WORLD, &nranks);' \
      '  size_t count = 1000;' '  float sendbuf[1000], recvbuf[1000];' \
      '  for (size_t i = 0; i < count; i++) sendbuf[i] = (float)(rank + 1) * (float)i;' \
      '  { /* the README snippet, verbatim */'
    block "## Using it" c | grep -v '^#include'
    printf '%s\n' '  }' '  int bad = 0;' \
      '  for (size_t i = 0; i < count; i++) bad += recvbuf[i] != (float)(nranks * (nranks + 1) / 2) * (float)i;' \
      '  printf("rank %d: %d wrong\n", rank, bad);' '  MPI_Finalize();' '  return bad != 0;' '}'
  } >"$work/snippet.c"
  if mpicc -std=c11 -Wall -Werror -I"$src/include" "$work/snippet.c" -L"$build/.libs" -lloom \
       -Wl,-rpath,"$build/.libs" -o "$work/snippet" 2>"$work/cc.out"; then
    if timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$work/snippet" >"$work/line.out" 2>&1 &&
       [ "$(grep -c '^rank [01]: 0 wrong$' "$work/line.out")" = 2 ]; then
      pass "the C snippet, verbatim in a main(): 2 ranks under mpirun, 1,000 sums exact"
    else
      fail "the C snippet under mpirun"; tail -n 15 "$work/line.out"
    fi
  else
    fail "the C snippet does not compile"; cat "$work/cc.out"; cat -n "$work/snippet.c" | tail -n 30
  fi
else
  echo "SKIP: the C snippet (it uses MPI_Bcast; no MPI here)"
fi

[ "$failures" -eq 0 ] && { echo "all checks passed"; exit 0; }
echo "$failures check(s) failed"
exit 1
