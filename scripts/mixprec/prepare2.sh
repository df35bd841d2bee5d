#!/usr/bin/env bash
# Build here (release), copy what scripts/mixprec/device2.sh runs into /work/main/.gpu-bin/mixprec2/.
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${CARGO_TARGET_DIR:-target}
cargo build --release
cargo test --release -p roofline-kernels --lib --no-run 2>&1 | tail -1
D=/work/main/.gpu-bin/mixprec2
mkdir -p "$D"
cp "$T/release/roofline" "$D/roofline"
cp "$(ls -t "$T"/release/deps/roofline_kernels-* | grep -v '\.d$' | grep -v '\.rlib$' | grep -v '\.rmeta$' | head -1)" "$D/kernels_lib_tests"
strip "$D/roofline" "$D/kernels_lib_tests"
cp scripts/mixprec/device2.sh scripts/mixprec/torch_matmul.py "$D/"
ls -la "$D"
