#!/usr/bin/env bash
# CI: the fuzz crate (fuzz/, its own workspace, run with cargo-fuzz) must compile against the
# library and be formatted. This type-checks and lints every target; it builds no fuzzer and
# runs none (scripts/fuzz-all.sh does that).
#
# It runs on the toolchain `cargo` is (CI's stable), not nightly: libfuzzer-sys and the targets
# use no nightly feature, cargo-fuzz's nightly-only flags (sanitizers, coverage passes) change
# code generation, not what type-checks, and neither the library nor the targets have
# `cfg(fuzzing)` code. The target dir is the workspace's, so the dependencies the clippy step
# already checked are reused: after `cargo clippy --workspace --all-targets` this costs the
# library's check plus the targets (measured: 20 CPU-seconds, about 10 to 15 s on 2 vCPUs). A
# nightly check would check every dependency again under another compiler (the whole fuzz
# crate from nothing: 37 s on an idle 2-vCPU machine) for nothing it could catch.
#
# libFuzzer itself (C++, compiled by libfuzzer-sys's build script) is only needed to link a
# fuzzer: CUSTOM_LIBFUZZER_PATH points the build script at an empty stand-in archive, which a
# check never links, so no C++ compiler is needed and the minute of compiling it is saved.
#
# FUZZ_CHECK_TOOLCHAIN=nightly checks with nightly instead (installed with rustup if missing;
# skipped, with a message, where it cannot be had).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo=(cargo)
if [ -n "${FUZZ_CHECK_TOOLCHAIN:-}" ]; then
  tc=$FUZZ_CHECK_TOOLCHAIN
  if ! rustup run "$tc" cargo --version >/dev/null 2>&1; then
    echo "fuzz-check: installing the $tc toolchain with rustup" >&2
    if ! rustup toolchain install "$tc" --profile minimal --component clippy,rustfmt >/dev/null 2>&1; then
      echo "fuzz-check: SKIPPED: the $tc toolchain cannot be installed here; the fuzz crate was not checked" >&2
      exit 0
    fi
  fi
  rustup component add --toolchain "$tc" clippy rustfmt >/dev/null 2>&1 || true
  cargo=(cargo "+$tc")
fi

mkdir -p target/fuzz-check
stub=$PWD/target/fuzz-check/libfuzzer-stub.a
[ -e "$stub" ] || : >"$stub"

"${cargo[@]}" fmt --manifest-path fuzz/Cargo.toml --all --check
# `-- -D warnings` reaches the fuzz crate's targets only: the library is a path dependency
# outside fuzz/'s workspace, linted by the workspace clippy step.
CUSTOM_LIBFUZZER_PATH=$stub "${cargo[@]}" clippy --manifest-path fuzz/Cargo.toml --target-dir target --bins -- -D warnings
