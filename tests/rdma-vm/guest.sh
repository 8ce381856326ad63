#!/bin/sh
# guest.sh — runs a command on a real kernel verbs stack: a QEMU guest with
# Debian's own kernel and a Soft-RoCE device (rdma_rxe on a virtio NIC),
# whose root is this machine's root filesystem, read-only over 9p, so the
# command sees the build tree unchanged (docs/testing.md).
#
#   tests/rdma-vm/guest.sh [-t SECONDS] [--link listen|connect PORT ADDR/PREFIX]
#                          COMMAND [ARG...]
#
# --link joins this guest to another one through a QEMU socket link on
# 127.0.0.1:PORT (one guest listens, the other connects) instead of QEMU's
# user network, with ADDR/PREFIX on its NIC: two kernels, each with its own
# Soft-RoCE device, doing RDMA to each other (tests/rdma-vm/pair.sh).
#
# COMMAND runs as root in the current directory inside the guest, with
# fresh /tmp, /dev/shm and /run, `ulimit -l unlimited` and LOOM_RDMA_VM=1
# (so a test knows it may change the guest); its output is
# the guest console's.  The exit status is COMMAND's; 77 when the guest
# cannot be had here (no QEMU, no kernel package, no busybox), saying why;
# 124 when it ran past -t (default 900 s).
#
# The guest is built at first use from Debian packages and cached in
# $LOOM_RDMA_VM_CACHE (default /var/cache/loom-rdma-vm): the kernel that
# linux-image-amd64 depends on (apt-get download, dpkg-deb -x, no install),
# and an initramfs of busybox, the modules below and tests/rdma-vm/init.
# No KVM: a KVM guest hung at boot here, and TCG boots in about 10 s.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
limit=900
if [ "${1:-}" = -t ]; then limit=$2; shift 2; fi
netdev="user,id=n0"
mac=52:54:00:12:34:56 # QEMU's default
cmdline_ip=""
if [ "${1:-}" = --link ]; then
  netdev="socket,id=n0,$2=127.0.0.1:$3"
  [ "$2" = listen ] && mac=52:54:00:00:00:01 || mac=52:54:00:00:00:02 # one link, two NICs
  cmdline_ip=" loomip=$4"
  shift 4
fi
[ $# -gt 0 ] || { echo "usage: $0 [-t SECONDS] COMMAND [ARG...]" >&2; exit 2; }
cache=${LOOM_RDMA_VM_CACHE:-/var/cache/loom-rdma-vm}
skip() { echo "SKIP: Soft-RoCE guest: $*"; exit 77; }

# In load order: virtio and its NIC, verbs and rxe (crc32_generic first, or
# `rdma link add` fails with "No such file or directory"), the RDMA CM, 9p.
MODULES="crc32_generic virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
virtio_pci failover net_failover virtio_net ib_core ib_uverbs udp_tunnel ip6_udp_tunnel
rdma_rxe configfs iw_cm ib_cm rdma_cm rdma_ucm netfs fscache 9pnet 9pnet_virtio 9p"

for tool in qemu-system-x86_64 dpkg-deb cpio depmod; do
  command -v "$tool" >/dev/null || skip "no $tool (Debian packages qemu-system-x86, dpkg, cpio, kmod)"
done
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
  skip "no static /bin/busybox (Debian package busybox-static)"
command -v rdma >/dev/null || skip "no rdma tool (Debian package iproute2)"

# ---- the kernel: the package linux-image-amd64 depends on -----------------------
mkdir -p "$cache"
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
[ -n "$kpkg" ] || kpkg=$(cat "$cache/kernel-package" 2>/dev/null || true)
[ -n "$kpkg" ] || skip "apt-cache does not know linux-image-amd64's kernel package"
kdir=$cache/$kpkg
if [ ! -f "$kdir/done" ]; then
  rm -rf "$kdir" && mkdir -p "$kdir"
  (cd "$kdir" && apt-get download "$kpkg" >download.log 2>&1) ||
    skip "apt-get download $kpkg failed: $(tail -n 1 "$kdir/download.log")"
  dpkg-deb -x "$kdir"/"$kpkg"_*.deb "$kdir/root"
  rm -f "$kdir"/*.deb
  echo "$kpkg" >"$cache/kernel-package"
  touch "$kdir/done"
fi
kver=$(ls "$kdir/root/lib/modules" | head -1)
vmlinuz=$kdir/root/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || skip "no kernel image in $kpkg"

# ---- the initramfs: rebuilt when init or the module list changes -----------------
key=$( (cat "$here/init"; echo "$MODULES $kver") | md5sum | cut -c1-12)
initrd=$cache/initrd-$key.gz
if [ ! -f "$initrd" ]; then
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/modules" "$stage/proc" "$stage/sys" "$stage/dev"
  cp /bin/busybox "$stage/bin/busybox"
  cp "$here/init" "$stage/init" && chmod 755 "$stage/init"
  for m in $MODULES; do
    f=$(find "$kdir/root/lib/modules/$kver" -name "$m.ko*" | head -1)
    [ -n "$f" ] || { rm -rf "$stage"; skip "kernel $kver has no module $m"; }
    case $f in
      *.xz) xz -dc "$f" >"$stage/modules/$m.ko" ;;
      *.zst) zstd -qdc "$f" >"$stage/modules/$m.ko" ;;
      *) cp "$f" "$stage/modules/$m.ko" ;;
    esac
  done
  echo "$MODULES" | tr ' ' '\n' | grep -v '^$' >"$stage/modules.order"
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1 >"$initrd.tmp") && mv "$initrd.tmp" "$initrd"
  rm -rf "$stage"
fi

# ---- the run ---------------------------------------------------------------------
job=$(mktemp -d)
trap 'rm -rf "$job"' EXIT
pwd >"$job/cwd"
{
  echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LOOM_RDMA_VM=1"
  env | grep -E '^(LOOM_|TESTBIN=|TOP_BUILDDIR=|LOOMRUN=|LOOMPERF=|LOOMINFO=|CC=)' |
    sed "s/'/'\\\\''/g; s/=\(.*\)$/='\1'/; s/^/export /"
  printf 'exec'
  for a in "$@"; do printf " '%s'" "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")"; done
  echo
} >"$job/cmd.sh"
timeout -k 10 "$limit" qemu-system-x86_64 -accel tcg,thread=multi -smp 2 -m 3072 \
  -nodefaults -vga none -display none -serial stdio -no-reboot -kernel "$vmlinuz" -initrd "$initrd" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1$cmdline_ip" \
  -netdev "$netdev" -device "virtio-net-pci,netdev=n0,mac=$mac" \
  -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$job,mount_tag=job,security_model=none" </dev/null || {
  rc=$?
  [ "$rc" = 124 ] && { echo "rdma-vm: the guest ran past $limit s"; exit 124; }
  echo "rdma-vm: qemu exited with status $rc"
  exit 1
}
[ -f "$job/status" ] || { echo "rdma-vm: the guest ended without running the job"; exit 1; }
status=$(cat "$job/status")
[ "$status" = 98 ] && { echo "rdma-vm: 'rdma link add rxe0 type rxe netdev eth0' failed in the guest"; exit 1; }
exit "$status"
