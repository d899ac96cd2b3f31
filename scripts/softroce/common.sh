# common.sh - helpers shared by the host-side scripts of the soft-RoCE harness.
# Sourced (not run) by run.sh, host-deps.sh and build-guest.sh.

# Everything goes to stdout so that CI logs keep the order of events, and so
# that run.sh's verdict line really is the last line.
log()   { printf '[softroce %s] %s\n' "$(date +%T)" "$*"; }
die()   { log "error: $*"; exit 1; }
now()   { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }

# True when the Debian package $1 is installed (not merely known or removed).
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Content hash of its arguments (strings) and, for arguments that are files,
# of their contents: the cache keys of the guest build.
key_of() {
    local a
    for a in "$@"; do
        if [ -f "$a" ]; then sha256sum < "$a"; else printf '%s\n' "$a"; fi
    done | sha256sum | cut -c1-16
}

# apt-get with a non-interactive frontend; on a stale package list (a fresh CI
# machine, or a mirror that moved on), "apt-get update" once and retry.
APT_UPDATED=0
apt_update_once() {
    [ "$APT_UPDATED" = 1 ] && return 0
    log "apt-get update"
    apt-get update -qq
    APT_UPDATED=1
}
apt_retry() {
    DEBIAN_FRONTEND=noninteractive "$@" && return 0
    [ "$APT_UPDATED" = 1 ] && return 1
    apt_update_once
    DEBIAN_FRONTEND=noninteractive "$@"
}
