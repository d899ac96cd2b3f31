#!/usr/bin/env bash
# A bounded fuzz run of the `.litmus` parser, the cluster-file parser and the rendezvous's
# frame decoder (cargo-fuzz,
# libFuzzer). Each target starts from its seed corpus in corpus/<target>/ and runs for
# VELOS_FUZZ_SECONDS seconds (default 30). Exits non-zero when a target crashes (a panic, a
# malformed error message, a timeout or running out of memory), printing the input that did it.
#
# Stable Rust: cargo-fuzz needs nightly-only flags (-Z sanitizer, -Cpasses=sancov-module);
# RUSTC_BOOTSTRAP=1 lets the stable compiler take them. No sanitizer is used (-s none): the
# code fuzzed is safe Rust, and the build is faster without AddressSanitizer. The release
# profile of this crate (Cargo.toml) is lightly optimized, for a short build.
#
# Usage: scripts/fuzz/run.sh [TARGET...]   (default: every target)
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2
seconds=${VELOS_FUZZ_SECONDS:-30}
fuzz_dir=$(cd "$(dirname "$0")" && pwd)
cd "$fuzz_dir/../.."

if ! cargo fuzz --version 2>/dev/null | grep -qF "$CARGO_FUZZ_VERSION"; then
  echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION"
  # --debug: a third quicker to build, and cargo-fuzz's own speed does not matter.
  cargo install --locked --debug "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi

export RUSTC_BOOTSTRAP=1
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(litmus_parse cluster_file_parse rendezvous_frames rendezvous_seal)
fi
fuzz=(cargo fuzz)
opts=(--fuzz-dir "$fuzz_dir" --sanitizer none)

echo "== building the fuzz targets"
for target in "${targets[@]}"; do
  "${fuzz[@]}" build "${opts[@]}" "$target"
done

failed=0
for target in "${targets[@]}"; do
  # New inputs go to a scratch corpus (work/, ignored by git); the seeds stay as committed.
  work="$fuzz_dir/work/$target"
  artifacts="$fuzz_dir/artifacts/$target"
  mkdir -p "$work" "$artifacts"
  before=$(mktemp)
  ls -1 "$artifacts" > "$before"
  echo "== fuzzing $target for ${seconds}s"
  rc=0
  # The frame decoder must not allocate beyond its input: a 1 MiB limit on any one
  # allocation (inputs are at most 4 KiB; an announced length can ask for 4 GiB).
  limit=()
  if [ "$target" = rendezvous_frames ]; then
    limit=(-malloc_limit_mb=1)
  fi
  "${fuzz[@]}" run "${opts[@]}" "$target" "$work" "$fuzz_dir/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    "${limit[@]}" -print_final_stats=1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "FAILED: $target (exit $rc)"
    ls -1 "$artifacts" | comm -13 "$before" - | while read -r name; do
      echo "crashing input: $artifacts/$name"
    done
  else
    echo "ok: $target"
  fi
  rm -f "$before"
done
exit "$failed"
