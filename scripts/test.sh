#!/bin/sh
# The whole test suite: installs, builds (warnings are errors), runs
# `make check`, then the AddressSanitizer/UBSan build's suite.
# Exit status 0 only when every test passed (skips allowed).
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
make -C build check || { cat build/tests/*/*.log 2>/dev/null | tail -n 200; exit 1; }
if [ "${LOOM_SKIP_ASAN:-0}" != 1 ]; then
  # A separate out-of-tree build with sanitizers.
  mkdir -p build-asan
  (cd build-asan && { [ -f Makefile ] || ../configure --enable-werror --enable-asan; } &&
     make -j"$(nproc)" && ASAN_OPTIONS=detect_leaks=1 make check) ||
    { cat build-asan/tests/*/*.log 2>/dev/null | tail -n 200; exit 1; }
fi
echo "loom: all tests passed"
