#!/bin/bash
# run.sh - run velos-rdma's tests against real RDMA verbs: soft-RoCE (rdma_rxe)
# in a QEMU guest, on a host that has no RDMA hardware or kernel support.
#
# Usage: sudo scripts/softroce/run.sh [--help]
#
# Steps: install missing host packages (apt) -> build or reuse the cached guest
# (Debian kernel + debootstrap'd rootfs as initramfs) -> cargo test -p
# velos-rdma --features verbs --release --no-run, and the velos binary with its
# node_cluster and node_latency tests -> copy the executables and the litmus suite
# to a 9p share -> boot the guest under TCG (no NIC; rxe0 on a dummy netdev) ->
# in the guest: ibv_devinfo, ib_atomic_lat, velos-rdma's tests, the cluster
# (leader killed), the latency step (decision p50 next to ib_atomic_lat's), the
# litmus suite on verbs -> print one verdict per step, then "N passed, N failed"
# as the last line.
# Exit status: 0 when every step passed; 1 on any failure, timeout or missing
# verdict.
#
# Environment (all optional):
#   VELOS_SOFTROCE_CACHE         cache dir (default: <repo>/target/softroce)
#   VELOS_SOFTROCE_TIMEOUT       seconds before qemu is killed (default 900)
#   VELOS_SOFTROCE_TEST_TIMEOUT  seconds per test executable in the guest (600)
#   VELOS_SOFTROCE_TEST_ARGS     arguments for every test executable (e.g. --test-threads=1)
#   VELOS_SOFTROCE_ATOMIC_ITERS  ib_atomic_lat iterations (1000)
#   VELOS_SOFTROCE_LATENCY_VALUES  values the latency step decides one at a time (1000)
#   VELOS_SOFTROCE_LITMUS_RUNS   executions per litmus test in the litmus step (40)
#   VELOS_SOFTROCE_CLUSTER_RUNS  how many times the cluster step runs its test (1)
#   VELOS_SOFTROCE_FAILOVER_TRIALS  leader crashes per protocol in the failover step (20)
#   VELOS_SOFTROCE_FAILOVER_TIME_SCALE  the factor on both protocols' timing there (1000)
#   VELOS_SOFTROCE_ACCEL         qemu -accel value (tcg,thread=multi; KVM hangs on PVM hosts)
#   VELOS_SOFTROCE_SMP, VELOS_SOFTROCE_MEM   guest vCPUs (2) and MiB (2048)
#   VELOS_SOFTROCE_QEMU          a qemu-system-x86_64 to use instead of the default
#   VELOS_SOFTROCE_KERNEL        kernel package (default: what linux-image-amd64 depends on)
#   VELOS_SOFTROCE_MIRROR        Debian mirror for debootstrap (default: the host's apt source)
#   VELOS_SOFTROCE_VERBOSE=1     also copy the guest's serial console to stdout
#   CARGO_TARGET_DIR, CARGO      as for cargo
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

case "${1:-}" in
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0;;
    "") ;;
    *) echo "usage: $0 [--help]" >&2; exit 2;;
esac

REPO=$(cd "$HERE/../.." && pwd)
CACHE=${VELOS_SOFTROCE_CACHE:-$REPO/target/softroce}
TIMEOUT=${VELOS_SOFTROCE_TIMEOUT:-900}
ACCEL=${VELOS_SOFTROCE_ACCEL:-tcg,thread=multi}
SMP=${VELOS_SOFTROCE_SMP:-2}
MEM=${VELOS_SOFTROCE_MEM:-2048}
CARGO=${CARGO:-cargo}

# Whatever ends this script early, the last line is still the verdict count.
REPORTED=0
on_exit() {
    local rc=$?
    if [ "$REPORTED" = 0 ]; then
        echo "FAIL harness: stopped before the guest ran (exit status $rc; see above)"
        echo "0 passed, 1 failed"
        [ "$rc" != 0 ] || rc=1
    fi
    exit "$rc"
}
trap on_exit EXIT

[ "$(id -u)" = 0 ] || die "must run as root (apt, debootstrap)"
mkdir -p "$CACHE/logs"
CACHE=$(cd "$CACHE" && pwd)
# One run at a time per cache: the guest build and the share are not shareable.
exec 9> "$CACHE/lock"
flock -n 9 || { log "waiting for another run using $CACHE"; flock -w 3600 9 || die "cache is locked"; }
T_ALL=$(now)

# ---------------------------------------------------------------- host and guest
t=$(now)
"$HERE/host-deps.sh" "$CACHE"
T_DEPS=$(since "$t")
QEMU=$CACHE/qemu/bin/qemu-system-x86_64
command -v jq > /dev/null || die "jq is missing"

t=$(now)
"$HERE/build-guest.sh" "$CACHE"
T_GUEST=$(since "$t")

# ---------------------------------------------------------------- test executables
t=$(now)
command -v "$CARGO" > /dev/null || die "cargo not found (set CARGO=/path/to/cargo)"
log "cargo test -p velos-rdma --features verbs --release --no-run"
(cd "$REPO" && "$CARGO" test -p velos-rdma --features verbs --release --no-run --message-format=json) \
    > "$CACHE/logs/cargo.json" 2> "$CACHE/logs/cargo.log" \
    || { tail -30 "$CACHE/logs/cargo.log"; die "cargo build of the tests failed (log: $CACHE/logs/cargo.log)"; }
SHARE=$CACHE/share
rm -rf "$SHARE" && mkdir -p "$SHARE/tests" "$SHARE/results"
# Every executable velos-rdma's test build produced (unit tests "lib-…",
# integration tests "test-…"), named without cargo's hash.
jq -r 'select(.reason == "compiler-artifact" and .executable != null
              and .profile.test == true and (.package_id | contains("velos-rdma")))
       | "\(.target.kind[0]) \(.target.name) \(.executable)"' "$CACHE/logs/cargo.json" \
    | grep -E '^[a-z-]+ [A-Za-z0-9_-]+ /' > "$CACHE/logs/executables.txt" \
    || die "cargo produced no test executables"
while read -r kind name exe; do
    install -m755 "$exe" "$SHARE/tests/$kind-$name"
done < "$CACHE/logs/executables.txt"
# The cluster step: tests/node_cluster.rs (three `velos node` processes) and the velos
# binary it starts, which the guest finds through VELOS_BIN (cargo's compile-time path
# does not exist there). Not in tests/: run as its own step, "cluster".
log "cargo test -p velos-cli --features verbs --release --test node_cluster --test node_embed --test node_latency --test node_replace --test node_durable --no-run; cargo build -p velos-cli --features verbs --release --bin velos"
(cd "$REPO" && "$CARGO" test -p velos-cli --features verbs --release --test node_cluster --test node_embed --test node_latency --test node_replace --test node_durable --no-run --message-format=json \
    && "$CARGO" build -p velos-cli --features verbs --release --bin velos --message-format=json) \
    > "$CACHE/logs/cargo-cluster.json" 2> "$CACHE/logs/cargo-cluster.log" \
    || { tail -30 "$CACHE/logs/cargo-cluster.log"; die "cargo build of the cluster test failed (log: $CACHE/logs/cargo-cluster.log)"; }
cargo_test_exe() {   # the test executable of integration test $1
    jq -r --arg name "$1" 'select(.reason == "compiler-artifact" and .executable != null
                                  and .profile.test == true and .target.name == $name)
                           | .executable' "$CACHE/logs/cargo-cluster.json" | tail -1
}
cluster_test=$(cargo_test_exe node_cluster)
embed_test=$(cargo_test_exe node_embed)
latency_test=$(cargo_test_exe node_latency)
replace_test=$(cargo_test_exe node_replace)
durable_test=$(cargo_test_exe node_durable)
velos_bin=$(jq -r 'select(.reason == "compiler-artifact" and .executable != null
                          and .profile.test == false and .target.name == "velos"
                          and (.target.kind | index("bin")))
                   | .executable' "$CACHE/logs/cargo-cluster.json" | tail -1)
[ -x "$cluster_test" ] || die "no node_cluster test executable in $CACHE/logs/cargo-cluster.json"
[ -x "$embed_test" ] || die "no node_embed test executable in $CACHE/logs/cargo-cluster.json"
[ -x "$latency_test" ] || die "no node_latency test executable in $CACHE/logs/cargo-cluster.json"
[ -x "$replace_test" ] || die "no node_replace test executable in $CACHE/logs/cargo-cluster.json"
[ -x "$durable_test" ] || die "no node_durable test executable in $CACHE/logs/cargo-cluster.json"
[ -x "$velos_bin" ] || die "no velos binary in $CACHE/logs/cargo-cluster.json"
mkdir -p "$SHARE/cluster"
install -m755 "$cluster_test" "$SHARE/cluster/node_cluster"
install -m755 "$embed_test" "$SHARE/cluster/node_embed"
install -m755 "$latency_test" "$SHARE/cluster/node_latency"
install -m755 "$replace_test" "$SHARE/cluster/node_replace"
install -m755 "$durable_test" "$SHARE/cluster/node_durable"
install -m755 "$velos_bin" "$SHARE/cluster/velos"
T_CARGO=$(since "$t")

# The guest's steps, in order: a step without a verdict is a failure.
EXPECTED="rxe_up ibv_devinfo ib_atomic_lat"
for f in "$SHARE"/tests/*; do EXPECTED="$EXPECTED test/$(basename "$f")"; done
EXPECTED="$EXPECTED permission cluster embed replace durable latency failover"
install -m755 "$HERE/guest/run-tests.sh" "$SHARE/run-tests.sh"
sq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }   # shell-quote for config.env
{
    echo "ATOMIC_ITERS=$(sq "${VELOS_SOFTROCE_ATOMIC_ITERS:-1000}")"
    echo "TEST_TIMEOUT=$(sq "${VELOS_SOFTROCE_TEST_TIMEOUT:-600}")"
    echo "TEST_ARGS=$(sq "${VELOS_SOFTROCE_TEST_ARGS:-}")"
    echo "LATENCY_VALUES=$(sq "${VELOS_SOFTROCE_LATENCY_VALUES:-1000}")"
    echo "CLUSTER_RUNS=$(sq "${VELOS_SOFTROCE_CLUSTER_RUNS:-1}")"
    echo "FAILOVER_TRIALS=$(sq "${VELOS_SOFTROCE_FAILOVER_TRIALS:-20}")"
    echo "FAILOVER_TIME_SCALE=$(sq "${VELOS_SOFTROCE_FAILOVER_TIME_SCALE:-1000}")"
} > "$SHARE/config.env"

# ---------------------------------------------------------------- litmus
# The litmus step: the suite (velos-sim/litmus) as real executions on rxe0 with
# the velos binary of the cluster step (`velos litmus --backend verbs`).
rm -rf "$SHARE/litmus" && cp -r "$REPO/velos-sim/litmus" "$SHARE/litmus"
EXPECTED="$EXPECTED litmus"
echo "LITMUS_RUNS=$(sq "${VELOS_SOFTROCE_LITMUS_RUNS:-40}")" >> "$SHARE/config.env"
# ---------------------------------------------------------------- (end of litmus)

# ---------------------------------------------------------------- boot
SERIAL=$CACHE/logs/serial.log
log "booting the guest ($ACCEL, $SMP vCPU, $MEM MiB, timeout $TIMEOUT s; serial: $SERIAL)"
t=$(now)
qemu=(timeout --kill-after=10 "$TIMEOUT" "$QEMU"
      -accel "$ACCEL" -cpu max -smp "$SMP" -m "$MEM"
      -nographic -no-reboot -nic none
      -kernel "$CACHE/guest/vmlinuz" -initrd "$CACHE/guest/initramfs.cpio.zst"
      -append "console=ttyS0 panic=-1 loglevel=1"
      -virtfs "local,path=$SHARE,mount_tag=share,security_model=none,id=share")
set +e
if [ "${VELOS_SOFTROCE_VERBOSE:-0}" = 1 ]; then
    "${qemu[@]}" < /dev/null 2>&1 | tee "$SERIAL"; qrc=${PIPESTATUS[0]}
else
    "${qemu[@]}" < /dev/null > "$SERIAL" 2>&1; qrc=$?
fi
set -e
T_BOOT=$(since "$t")
rm -rf "$CACHE/results" && cp -r "$SHARE/results" "$CACHE/results"

# ---------------------------------------------------------------- report
# The serial console has CRLF line ends and the firmware's terminal escapes,
# and kernel messages may precede a marker on the same line: markers are
# searched anywhere in a cleaned-up copy of the log.
tr -d '\r' < "$SERIAL" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' > "$CACHE/logs/serial.txt"
markers=$(grep -o '@@ .*' "$CACHE/logs/serial.txt" || true)
passed=0; failed=0
verdicts=()
verdict() {   # PASS|FAIL name [why]
    verdicts+=("$1 $2${3:+: $3}")
    if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    verdict FAIL boot "qemu killed after $TIMEOUT s (VELOS_SOFTROCE_TIMEOUT)"
elif [ "$qrc" != 0 ]; then
    verdict FAIL boot "qemu exit status $qrc"
elif ! grep -q '^@@ GUEST_DONE' <<< "$markers"; then
    verdict FAIL boot "the guest powered off without its GUEST_DONE marker"
else
    verdict PASS boot "$(sed -n 's/^@@ GUEST_DONE .*uptime=\([0-9.]*\).*/guest uptime \1 s/p' <<< "$markers")"
fi
for s in $EXPECTED; do
    line=$(grep -E "^@@ (PASS|FAIL) $s( |$)" <<< "$markers" | tail -1 || true)
    case "$line" in
        "@@ PASS "*) verdict PASS "$s";;
        "@@ FAIL "*) why=${line#"@@ FAIL $s"}; verdict FAIL "$s" "${why# }";;
        *) verdict FAIL "$s" "no verdict from the guest";;
    esac
done
# Failures outside the expected steps (e.g. the 9p share).
while read -r s why; do
    case " $EXPECTED " in *" $s "*) ;; *) verdict FAIL "$s" "$why";; esac
done < <(sed -n 's/^@@ FAIL //p' <<< "$markers")

if [ "$failed" != 0 ]; then
    echo "--- last lines of the serial console ($SERIAL):"
    tail -40 "$CACHE/logs/serial.txt" | sed 's/^/    /'
fi
lat=$(sed -n 's/^@@ METRIC ib_atomic_lat_cas_typical_us=//p' <<< "$markers")
[ -z "$lat" ] || log "ib_atomic_lat CMP_AND_SWAP: t_typical $lat us (TCG; a sanity figure, not performance data)"
# (grep finds nothing when a step failed early: `|| true`, or pipefail ends the script.)
{ grep '^@@ METRIC cluster_' <<< "$markers" || true; } | sed 's/^@@ METRIC //' | while read -r m; do
    log "node_cluster: $m (TCG; a sanity figure, not performance data)"
done
{ grep '^@@ METRIC replace_' <<< "$markers" || true; } | sed 's/^@@ METRIC //' | while read -r m; do
    log "node_replace: $m (TCG; a sanity figure, not performance data)"
done
# Our decision latency next to the raw compare-and-swap's, from the same boot.
{ grep '^@@ METRIC latency_' <<< "$markers" || true; } | sed 's/^@@ METRIC //' | while read -r m; do
    case $m in
        *_per_decision=*) log "node_latency: $m";;
        *) log "node_latency: $m (TCG; target: decision p50 <= 1.3x ib_atomic_lat t_typical)";;
    esac
done
# litmus: the suite's totals on real verbs (coverage = allowed outcomes observed);
# none when the step failed early (grep finds nothing: not an error here).
{ grep '^@@ METRIC litmus_' <<< "$markers" || true; } | sed 's/^@@ METRIC //' | while read -r m; do
    log "litmus: $m"
done
log "times: host deps ${T_DEPS} s, guest ${T_GUEST} s, cargo ${T_CARGO} s, boot ${T_BOOT} s, total $(since "$T_ALL") s"
log "results: $CACHE/results"
for v in "${verdicts[@]}"; do echo "$v"; done
REPORTED=1
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
