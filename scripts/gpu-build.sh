#!/usr/bin/env bash
# Build (here, x86-64, glibc of this machine) everything the GPU test needs into .gpu-bin/
# (git-ignored): the roofline binary, the gpu_device test executable and gpu-test.sh itself.
# On the GPU host (no cargo needed) the test is then one command:
#     bash .gpu-bin/gpu-test.sh
# (.gpu-bin/ is self-contained: copy or carry it anywhere; the script finds its files beside itself.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin roofline
exe=$(cargo test --release --no-run --test gpu_device --message-format=json 2>/dev/null \
  | grep -o '"executable":"[^"]*gpu_device[^"]*"' | tail -1 | cut -d'"' -f4)
[ -x "$exe" ] || { echo "gpu-build: no gpu_device test executable found" >&2; exit 1; }
mkdir -p .gpu-bin
cp "${CARGO_TARGET_DIR:-target}/release/roofline" .gpu-bin/roofline
cp "$exe" .gpu-bin/gpu_device
cp scripts/gpu-test.sh .gpu-bin/gpu-test.sh
# What gpu-test.sh needs beside the binaries: cuBLASLt's location, the NVTX programs
# (nvtx_app.cu is built there with nvcc against kernels.cu), torch's GEMM set, a CPU report
# for `compare`.
cp scripts/cuda-libs.sh scripts/nvtx/nvtx_app.cu kernels/gpu/kernels.cu scripts/torch/nvtx_nested.py scripts/torch/gemms.py .gpu-bin/
cp tests/fixtures/reports/several.json .gpu-bin/cpu_reference.json
chmod +x .gpu-bin/roofline .gpu-bin/gpu_device .gpu-bin/gpu-test.sh
# Release builds carry debug info (~50 MB each): strip the copies so .gpu-bin/ travels light.
if command -v strip > /dev/null; then strip .gpu-bin/roofline .gpu-bin/gpu_device; fi
ls -la .gpu-bin
echo "gpu-build: on the GPU host run: bash .gpu-bin/gpu-test.sh"
