#!/bin/sh
# Every header of the library compiles on its own, first in a file, with
# the project's warnings: a header includes what it uses, so no file has to
# know another's include order (loom_mpi.h needs mpi.h: compiled where
# mpicc exists).
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-cc}
BUILD=${TOP_BUILDDIR:-build}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
checked=0
for h in $(find src transports include -name '*.h' | sort); do
  compiler=$CC
  if [ "$h" = include/loom_mpi.h ]; then
    command -v mpicc >/dev/null 2>&1 || { echo "SKIP: $h: no mpicc"; continue; }
    compiler=mpicc
  fi
  extra=
  case $h in src/device/cuda/*) # the CUDA backend's headers need the CUDA runtime's
    cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
    [ -f "$cuda_inc/cuda_runtime_api.h" ] || { echo "SKIP: $h: no CUDA headers"; continue; }
    extra="-I$cuda_inc" ;;
  esac
  printf '#include "%s"\n' "$h" > "$tmp/one.c"
  checked=$((checked + 1))
  if ! $compiler -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only -I. -Isrc \
       -Iinclude -Itransports -I"$BUILD" $extra $(pkg-config --cflags-only-I hwloc 2>/dev/null) \
       "$tmp/one.c" > "$tmp/err" 2>&1; then
    echo "FAIL: $h does not compile on its own:"
    sed 's/^/  /' "$tmp/err" | head -5
    failed=$((failed + 1))
  fi
done
echo "checked $checked headers"
[ "$failed" -eq 0 ] && echo "1 passed, 0 failed" && exit 0
echo "$failed failed"
exit 1
