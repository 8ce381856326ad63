#!/bin/bash
# device-bundle.sh BUILD_DIR — gathers what bench/device-check.sh runs into
# ./.devrun (ignored by git), so a GPU machine that has no Autotools or
# Debian -dev packages can run the checks without building:
#   .devrun/bin  loomrun, loom-info, loom-perf, check_device, coll_test,
#                device_test and cuda_d2d (built here with nvcc);
#   .devrun/lib  libloom.so.0, its on-demand modules (libloom-dev-cuda.so,
#                net modules) and every library they need beyond glibc's own.
# BUILD_DIR must be configured with CUDA (configure's summary says
# "CUDA ... yes").  The device tool's `carry` names .devrun.
set -eu
cd "$(dirname "$0")/.."
B=$(cd "${1:?usage: device-bundle.sh BUILD_DIR}" && pwd)
grep -q 'cuda=yes' "$B/config.h" || { echo "device-bundle: $B was configured without CUDA" >&2; exit 1; }
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
make -C "$B" -j"$(nproc)" >/dev/null
make -C "$B" tests/unit/check_device tests/ranks/coll_test tests/ranks/device_test >/dev/null
rm -rf .devrun && mkdir -p .devrun/bin .devrun/lib
grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >>.git/info/exclude

real_binary() { # a libtool wrapper's program lies in .libs beside it
  local dir base
  dir=$(dirname "$1") base=$(basename "$1")
  if [ -x "$dir/.libs/$base" ]; then echo "$dir/.libs/$base"; else echo "$1"; fi
}
for p in tools/loomrun tools/loom-info bench/loom-perf tests/unit/check_device \
         tests/ranks/coll_test tests/ranks/device_test; do
  cp "$(real_binary "$B/$p")" .devrun/bin/
done
"$CUDA_HOME/bin/nvcc" -O2 -o .devrun/bin/cuda_d2d bench/cuda_d2d.cu
cp -L "$B/.libs/libloom.so.0" .devrun/lib/
for m in "$B"/.libs/libloom-*.so; do cp -L "$m" .devrun/lib/; done

# Every library outside glibc that a program or module needs (libloom.so.0
# itself is found through LD_LIBRARY_PATH there, so ldd may miss it here).
glibc='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64)\.so'
LD_LIBRARY_PATH=$PWD/.devrun/lib ldd .devrun/bin/* .devrun/lib/*.so* 2>/dev/null |
  awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
    [[ $name =~ $glibc || -e .devrun/lib/$name ]] || cp -L "$path" ".devrun/lib/$name"
  done
du -sh .devrun
