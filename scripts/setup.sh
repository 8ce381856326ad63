#!/bin/sh
# Installs the Debian packages Loom needs (as root, non-interactively) and
# builds it in ./build (out of tree, so a sanitizer build can sit beside it).  Used by the README's commands and by CI.
set -eu
cd "$(dirname "$0")/.."
PACKAGES="build-essential autoconf automake libtool pkg-config check \
  libibverbs-dev librdmacm-dev libfabric-dev libhwloc-dev \
  openmpi-bin libopenmpi-dev iproute2 procps gnuplot-nox \
  qemu-system-x86 busybox-static cpio kmod \
  python3-torch libtorch-dev pybind11-dev python3-dev \
  clang libclang-rt-14-dev"
missing=""
for p in $PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing </dev/null
fi
[ -x configure ] || ./autogen.sh
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror ${LOOM_CONFIGURE_FLAGS:-}
make -j"$(nproc)"
