#!/bin/bash
# test_fuzz.sh — builds the libFuzzer harnesses of tests/fuzz against a
# clang build of libloom_internal (instrumented for coverage, with
# AddressSanitizer and UBSan) and runs each for LOOM_FUZZ_SECONDS (default
# 10) from its seed corpus (tests/fuzz/corpus/NAME; new inputs go to a
# scratch copy, not the tree).  Fails on any crash, leak, sanitizer report
# or broken property, printing the input that did it; commit that input to
# the corpus as a regression case once fixed.  Longer by hand:
#   LOOM_FUZZ_SECONDS=600 make check TESTS=tests/fuzz/test_fuzz.sh
# Skips (77) without clang's libFuzzer, and in the sanitizer run of
# scripts/test.sh (LOOM_TEST_LIGHT=1: this build is sanitized already).
set -u
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${LOOM_FUZZ_SECONDS:-10}
if [ "${LOOM_TEST_LIGHT:-0}" = 1 ]; then
  echo "SKIP: the fuzz build is sanitized itself; it runs in the plain make check"
  exit 77
fi
work=${LOOM_FUZZ_BUILD:-$PWD/fuzz-build}
mkdir -p "$work"
probe="$work/probe.c"
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' >"$probe"
if ! clang -fsanitize=fuzzer "$probe" -o "$work/probe" 2>/dev/null; then
  echo "SKIP: clang with libFuzzer not found (Debian: clang, libclang-rt-14-dev)"
  exit 77
fi

flags="-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
lib="$work/lib/.libs/libloom_internal.a"
mkdir -p "$work/lib"
if [ ! -f "$work/lib/Makefile" ]; then
  echo "configuring the fuzz build (clang) in $work/lib"
  (cd "$work/lib" && "$srcdir/configure" CC=clang CFLAGS="$flags -fsanitize=fuzzer-no-link" \
     --without-torch --without-cuda --without-mpi --disable-lto >configure.log 2>&1) ||
    { tail -20 "$work/lib/configure.log"; echo "FAIL: configure"; exit 1; }
fi
make -C "$work/lib" -j"$(nproc)" libloom_internal.la >"$work/lib/make.log" 2>&1 ||
  { tail -30 "$work/lib/make.log"; echo "FAIL: building libloom_internal with clang"; exit 1; }
libs="$(sed -n 's/^HWLOC_LIBS = //p' "$work/lib/Makefile") -lrt -lm -ldl -lpthread"

failed=0
for harness in "$srcdir"/tests/fuzz/fuzz_*.c; do
  name=$(basename "$harness" .c)
  corpus_name=${name#fuzz_}
  bin="$work/$name"
  # shellcheck disable=SC2086
  clang $flags -fsanitize=fuzzer -D_GNU_SOURCE -I"$srcdir/include" -I"$srcdir/src" -I"$srcdir/transports" -I"$work/lib" \
    "$harness" "$lib" $libs -o "$bin" || { echo "FAIL: building $name"; failed=1; continue; }
  scratch="$work/corpus-$corpus_name"
  rm -rf "$scratch" && mkdir -p "$scratch"
  cp "$srcdir/tests/fuzz/corpus/$corpus_name"/* "$scratch/" 2>/dev/null
  log="$work/$name.log"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 timeout -k 10 $((seconds + 60)) "$bin" \
     -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
     -artifact_prefix="$work/$name-" "$scratch" >"$log" 2>&1)
  rc=$?
  runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "FAIL: $name (exit $rc); its log ends:"
    tail -30 "$log"
    ls "$work/$name-"* 2>/dev/null | sed 's/^/  input: /'
    failed=1
  else
    echo "PASS: $name, ${runs:-no count} in ${seconds} s, corpus $(ls "$scratch" | wc -l) inputs"
  fi
done
exit $failed
