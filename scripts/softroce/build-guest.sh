#!/bin/bash
# build-guest.sh CACHE - build (or reuse) the soft-RoCE guest under CACHE:
#   CACHE/guest/vmlinuz            Debian's stock kernel (its .deb is unpacked,
#                                  never installed on the host)
#   CACHE/guest/initramfs.cpio.zst the whole Debian rootfs + modules + guest/init
# Each stage is keyed on its inputs and redone only when they change:
#   kernel    - the kernel package linux-image-amd64 resolves to, and the module list
#   rootfs    - the suite and the package list (debootstrap, ~35 s)
#   initramfs - the two keys above and guest/init (repacking takes ~1 s)
# Stages are built in a temporary directory and moved into place at the end,
# so an interrupted build is never mistaken for a finished one.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
CACHE=${1:?usage: build-guest.sh CACHE}
G=$CACHE/guest
mkdir -p "$G"

SUITE=${VELOS_SOFTROCE_SUITE:-bookworm}
# Userland of the guest. It must match the host's glibc closely enough to run
# the host-built test executables: both are Debian 12.
GUEST_PKGS=rdma-core,ibverbs-utils,ibverbs-providers,perftest,iproute2,kmod,busybox-static
# Kernel modules of the guest (with their dependencies). rdma_rxe needs a
# crc32 shash for its ICRC, which modprobe's dependency list does not show:
# without crc32_generic/crc32_pclmul, "rdma link add" fails with ENOENT.
MODULES="rdma_rxe ib_uverbs rdma_ucm dummy 9p 9pnet_virtio virtio_pci crc32_generic crc32_pclmul"

# The Debian mirror: the machine's own apt source unless VELOS_SOFTROCE_MIRROR is set.
mirror() {
    local m=${VELOS_SOFTROCE_MIRROR:-}
    [ -n "$m" ] || m=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
    [ -n "$m" ] || m=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    echo "${m:-http://deb.debian.org/debian}"
}

# ---------------------------------------------------------------- kernel
# The package linux-image-amd64 currently depends on, e.g. linux-image-6.1.0-57-amd64.
kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
KPKG=${VELOS_SOFTROCE_KERNEL:-$(kpkg)}
if [ -z "$KPKG" ]; then apt_update_once; KPKG=$(kpkg); fi
[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 to a kernel package"
KV=${KPKG#linux-image-}
KKEY=$(key_of "$KPKG" "$MODULES")
if [ "$(cat "$G/kernel.key" 2>/dev/null)" != "$KKEY" ]; then
    t=$(now)
    log "kernel: $KPKG (download + unpack)"
    tmp=$CACHE/tmp-kernel
    rm -rf "$tmp" && mkdir -p "$tmp/deb" "$tmp/out"
    if ! (cd "$tmp/deb" && apt-get download -qq "$KPKG") > /dev/null 2>&1; then
        # A stale package list names a kernel the mirror no longer has:
        # refresh it and resolve linux-image-amd64 again.
        apt_update_once
        KPKG=${VELOS_SOFTROCE_KERNEL:-$(kpkg)}; KV=${KPKG#linux-image-}
        KKEY=$(key_of "$KPKG" "$MODULES")
        (cd "$tmp/deb" && apt-get download -qq "$KPKG") > /dev/null 2>&1 \
            || die "apt-get download $KPKG failed"
    fi
    dpkg-deb -x "$tmp"/deb/*.deb "$tmp/x"
    grep -q '^CONFIG_RDMA_RXE=m' "$tmp/x/boot/config-$KV" || die "$KPKG has no rdma_rxe module"
    depmod -b "$tmp/x" "$KV"
    # Keep only vmlinuz and the modules the guest loads (8 MB of 400 MB).
    M=$tmp/x/lib/modules/$KV
    for m in $MODULES; do modprobe -d "$tmp/x" -S "$KV" --show-depends "$m"; done \
        | awk '$1 == "insmod" { print $2 }' | sort -u | sed "s|.*/$KV/||" > "$tmp/modules.txt"
    while read -r m; do install -D -m644 "$M/$m" "$tmp/out/lib/modules/$KV/$m"; done < "$tmp/modules.txt"
    cp "$M"/modules.order "$M"/modules.builtin* "$tmp/out/lib/modules/$KV/"
    cp "$tmp/x/boot/vmlinuz-$KV" "$tmp/out/vmlinuz"
    echo "$KV" > "$tmp/out/version"
    rm -rf "$G/kernel" && mv "$tmp/out" "$G/kernel" && rm -rf "$tmp"
    echo "$KKEY" > "$G/kernel.key"
    log "kernel: $KV, $(find "$G/kernel/lib" -name '*.ko*' | wc -l) modules, $(since "$t") s"
fi
KV=$(cat "$G/kernel/version")

# ---------------------------------------------------------------- rootfs
RKEY=$(key_of "$SUITE" "$GUEST_PKGS")
if [ "$(cat "$G/rootfs.key" 2>/dev/null)" != "$RKEY" ]; then
    t=$(now)
    MIRROR=$(mirror)
    log "rootfs: debootstrap $SUITE from $MIRROR (~35 s)"
    tmp=$CACHE/tmp-rootfs
    rm -rf "$tmp"
    mkdir -p "$CACHE/logs"
    debootstrap --variant=minbase --include="$GUEST_PKGS" "$SUITE" "$tmp" "$MIRROR" \
        > "$CACHE/logs/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/logs/debootstrap.log"; die "debootstrap failed (log: $CACHE/logs/debootstrap.log)"; }
    rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* \
           "$tmp"/usr/share/{doc,man,locale,info}
    rm -rf "$G/rootfs" && mv "$tmp" "$G/rootfs"
    echo "$RKEY" > "$G/rootfs.key"
    log "rootfs: $(du -sm "$G/rootfs" | cut -f1) MB, $(since "$t") s"
fi

# ---------------------------------------------------------------- initramfs
# Two concatenated cpio archives (the kernel unpacks both): the untouched
# rootfs, then an overlay with the modules and /init. The rootfs directory
# itself is never modified, so it stays reusable when only init changes.
IKEY=$(key_of "$KKEY" "$RKEY" "$HERE/guest/init")
if [ "$(cat "$G/initramfs.key" 2>/dev/null)" != "$IKEY" ] || [ ! -s "$G/initramfs.cpio.zst" ]; then
    t=$(now)
    ov=$CACHE/tmp-overlay
    # Modules go where the rootfs's /lib really is (bookworm: merged /usr).
    if [ -L "$G/rootfs/lib" ]; then lib=usr/lib; else lib=lib; fi
    rm -rf "$ov" && mkdir -p "$ov/$lib"
    cp -a "$G/kernel/lib/modules" "$ov/$lib/"
    depmod -b "$ov/${lib%lib}" "$KV"
    install -m755 "$HERE/guest/init" "$ov/init"
    { (cd "$G/rootfs" && find . -xdev | LC_ALL=C sort | cpio -o -H newc --quiet)
      (cd "$ov" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet); } \
        | zstd -T0 -3 -q -f -o "$G/initramfs.tmp"
    mv "$G/initramfs.tmp" "$G/initramfs.cpio.zst"
    cp "$G/kernel/vmlinuz" "$G/vmlinuz"
    rm -rf "$ov"
    echo "$IKEY" > "$G/initramfs.key"
    log "initramfs: $(du -m "$G/initramfs.cpio.zst" | cut -f1) MB, $(since "$t") s"
fi
