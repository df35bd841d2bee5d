#!/usr/bin/env bash
# Build (here, x86-64, glibc of this machine) what scripts/gpu-test.sh runs on a GPU host:
# the roofline binary and the gpu_device test executable, into .gpu-bin/ (git-ignored).
set -euo pipefail
cargo build --release --bin roofline
exe=$(cargo test --release --no-run --test gpu_device --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*gpu_device[^"]*"' | tail -1 | cut -d'"' -f4)
mkdir -p .gpu-bin
cp target/release/roofline .gpu-bin/roofline
cp "$exe" .gpu-bin/gpu_device
ls -la .gpu-bin
