#!/bin/sh
# The whole test suite: installs, builds (warnings are errors), runs
# `make check`, then the AddressSanitizer/UBSan build's suite.
# Exit status 0 only when every test passed (skips allowed).
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
# The test programs build in parallel (TESTS= runs none); the tests then run
# one at a time, as the multi-rank ones need the machine to themselves.
make -C build -j"$(nproc)" check TESTS= >/dev/null
make -C build check || { cat build/tests/*/*.log 2>/dev/null | tail -n 200; exit 1; }
# The installed library, header and loom.pc work for a program built outside.
stage="$PWD/build/stage"
rm -rf "$stage"
make -C build install DESTDIR="$stage" >/dev/null
prefix=$(sed -n 's/^prefix=//p' build/loom.pc)
PKG_CONFIG_PATH="$stage$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" \
  sh -c 'cc -std=c11 -Wall -Werror examples/allreduce.c $(pkg-config --cflags --libs loom) -o build/example-allreduce'
out=$(LD_LIBRARY_PATH="$stage$prefix/lib" timeout 60 build/tools/loomrun --timeout 50 -n 3 build/example-allreduce)
echo "$out"
[ "$(echo "$out" | grep -c 'sum of ranks = 3 (expected 3)')" -eq 3 ] || { echo "FAIL: installed example"; exit 1; }
echo "PASS: installed libloom, loom.h and loom.pc build and run examples/allreduce.c"
if [ "${LOOM_SKIP_ASAN:-0}" != 1 ]; then
  # A separate out-of-tree build with sanitizers.
  mkdir -p build-asan
  (cd build-asan && { [ -f Makefile ] || ../configure --enable-werror --enable-asan; } &&
     make -j"$(nproc)" && make -j"$(nproc)" check TESTS= >/dev/null && ASAN_OPTIONS=detect_leaks=1 LOOM_TEST_LIGHT=1 make check) ||
    { cat build-asan/tests/*/*.log 2>/dev/null | tail -n 200; exit 1; }
fi
echo "loom: all tests passed"
