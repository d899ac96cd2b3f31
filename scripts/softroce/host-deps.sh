#!/bin/bash
# host-deps.sh CACHE - make sure the host has what the soft-RoCE harness needs.
#
# * Debian packages for building the guest and the verbs tests are installed
#   with apt, and only those that are missing. The install is simulated first
#   and refused if apt would remove any package: this script must never
#   uninstall things from a developer machine or a CI image.
# * QEMU is NOT installed. Debian 12's qemu-system-x86 (7.2) cannot coexist
#   with a backported qemu-utils 10.x (which "Breaks: qemu-system-common
#   (<< 8.0)"), and apt would silently remove qemu-utils, as happened in the
#   spike. Instead, if no qemu-system-x86_64 is on the PATH, the qemu packages
#   are downloaded and unpacked into CACHE/qemu (about 80 MB, 3 s), and a small
#   wrapper points the binary at its own libraries, firmware and modules.
#   VELOS_SOFTROCE_QEMU=/path/to/qemu-system-x86_64 overrides both.
#
# Result: CACHE/qemu/bin/qemu-system-x86_64 (a wrapper or a symlink).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
CACHE=${1:?usage: host-deps.sh CACHE}

[ "$(id -u)" = 0 ] || die "must run as root (apt, debootstrap)"
command -v apt-get > /dev/null || die "needs a Debian-based host (apt-get)"

# Guest build: debootstrap, modprobe/depmod (kmod), cpio, zstd; jq reads cargo's JSON.
# Verbs tests: velos-rdma's `verbs` feature uses the sideway crate, whose
# build runs cmake and bindgen (libclang); the verbs libraries themselves are
# dlopen'ed at run time, inside the guest, so the host needs no libibverbs.
PKGS="debootstrap kmod cpio zstd jq cmake libclang1-14 libclang-common-14-dev pkg-config"
missing=()
for p in $PKGS; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    apt_update_once
    log "apt-get install ${missing[*]}"
    removals=$(apt-get -s install --no-install-recommends "${missing[@]}" | awk '/^Remv /{print $2}')
    [ -z "$removals" ] || die "installing ${missing[*]} would remove: $removals; install by hand"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

Q=$CACHE/qemu
mkdir -p "$Q/bin"
if [ -n "${VELOS_SOFTROCE_QEMU:-}" ]; then
    [ -x "$VELOS_SOFTROCE_QEMU" ] || die "VELOS_SOFTROCE_QEMU=$VELOS_SOFTROCE_QEMU is not executable"
    ln -sfn "$VELOS_SOFTROCE_QEMU" "$Q/bin/qemu-system-x86_64"
elif sys=$(command -v qemu-system-x86_64); then
    ln -sfn "$sys" "$Q/bin/qemu-system-x86_64"
else
    # Unpacked qemu, keyed on the candidate version of qemu-system-x86.
    ver=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/{print $2}')
    if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
        apt_update_once
        ver=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/{print $2}')
    fi
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "no qemu-system-x86 package in the apt sources"
    if [ "$(cat "$Q/version" 2>/dev/null)" != "$ver" ] || [ -L "$Q/bin/qemu-system-x86_64" ] \
       || [ ! -x "$Q/bin/qemu-system-x86_64" ]; then
        log "unpacking qemu-system-x86 $ver into $Q (not installed on the host)"
        rm -rf "$Q" && mkdir -p "$Q/debs" "$Q/root" "$Q/bin"
        # The packages apt would install (qemu and the libraries the host
        # lacks): read from a simulation, which never changes the host.
        pkgs=$(apt-get -s install --no-install-recommends qemu-system-x86 | awk '/^Inst /{print $2}')
        [ -n "$pkgs" ] || die "apt resolved no packages for qemu-system-x86"
        # shellcheck disable=SC2086
        (cd "$Q/debs" && apt_retry apt-get download -qq $pkgs) > /dev/null 2>&1 \
            || die "apt-get download of the qemu packages failed"
        for d in "$Q"/debs/*.deb; do dpkg-deb -x "$d" "$Q/root"; done
        rm -rf "$Q/debs" "$Q/root/usr/share/doc" "$Q/root/usr/share/man"
        R=$Q/root
        cat > "$Q/bin/qemu-system-x86_64" <<WRAP
#!/bin/sh
# Runs the qemu unpacked by host-deps.sh with its own libraries, modules and firmware.
LD_LIBRARY_PATH='$R/usr/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
QEMU_MODULE_DIR='$R/usr/lib/x86_64-linux-gnu/qemu'
export LD_LIBRARY_PATH QEMU_MODULE_DIR
exec '$R/usr/bin/qemu-system-x86_64' -L '$R/usr/share/qemu' -L '$R/usr/share/seabios' \\
    -L '$R/usr/lib/ipxe/qemu' "\$@"
WRAP
        chmod 755 "$Q/bin/qemu-system-x86_64"
        echo "$ver" > "$Q/version"
    fi
fi
"$Q/bin/qemu-system-x86_64" --version | head -1 | sed 's/^/[softroce] /' \
    || die "qemu does not start: $Q/bin/qemu-system-x86_64"
