#!/usr/bin/env bash
# Runs on a GPU host (the device tool), beside its files in one folder (.gpu-bin/NAME/):
# real ncu captures with NVTX ranges for tests/fixtures/ncu/ — a CUDA
# program with nested nvtxRangePush ranges and a domain of its own (nvtx_app.cu, built here
# with nvcc against kernels.cu) and eager PyTorch with nested torch.cuda.nvtx ranges
# (nvtx_nested.py) — plus `roofline gpu ceilings` (cuBLASLt tensor ceilings, FFMA, launch
# floor), the same run's cuBLAS rates through torch (gemms.py) and `gpu run dgemm` /
# `dgemm_tiled`. Everything lands in $OUT/nvtx/. Never changes clocks.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; C=$OUT/nvtx; mkdir -p "$C"; W=$(mktemp -d)
. "$B/cuda-libs.sh"
echo "== host"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv | tee "$C/nvidia-smi.csv"
{ ncu --version | tail -1; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } 2>&1 | tee "$C/versions.txt"
ncu --query-metrics --chip gh100 > "$W/q.txt" 2>&1
have() { grep -q "^$1 " "$W/q.txt" || grep -q "^$1$" "$W/q.txt"; }
pick() { local out=(); for m in "$@"; do base=${m%%.*}; if have "$base"; then out+=("$m"); else echo "missing metric: $m" >&2; fi; done; local IFS=,; echo "${out[*]}"; }
list() { awk "/^pub const $1/{on=1; next} on && /^\];/{on=0} on" "$B/ncu.rs" | grep -o '"[^"]*"' | tr -d '"'; }
HIER=$(pick $(list HIERARCHICAL_METRICS)); ROOF=$(pick $(list ROOF_METRICS))
ALL="$HIER,$ROOF"
echo "ALL=$ALL" > "$C/metric-lists-nvtx.txt"
echo "== build nvtx_app ($(date +%T))"
nvcc -O3 -arch=sm_90 -std=c++17 -I"$B" "$B/nvtx_app.cu" -o "$W/nvtx_app" -ldl 2>&1 | tail -5
"$W/nvtx_app"
NCU="timeout 150 ncu --clock-control none --csv --nvtx --print-kernel-base mangled"
echo "== capture nvtx_app ($(date +%T))"
$NCU --metrics "$ALL" "$W/nvtx_app" > "$C/nvtx_app.csv" 2>&1; echo "rc=$?"
echo "== capture torch nvtx_nested ($(date +%T))"
$NCU --metrics "$ALL" python3 "$B/nvtx_nested.py" > "$C/torch_nvtx_nested.csv" 2>&1; echo "rc=$?"
grep -o '"[0-9]*  *"[^,]*' "$C/torch_nvtx_nested.csv" | sort | uniq -c | head -30
echo "== gpu ceilings ($(date +%T))"
"$B/roofline" gpu ceilings -o "$C/gpu_ceilings.json" 2>&1 | tee "$C/gpu_ceilings.txt"
echo "== torch cuBLAS, same run ($(date +%T))"
python3 "$B/gemms.py" 8192 20 time 2>&1 | tee "$C/torch_gemm_native.txt"
echo "== gpu run dgemm / dgemm_tiled ($(date +%T))"
"$B/roofline" gpu run dgemm --size 8192 --repeat 5 -o "$C/gpu_run_dgemm_cublas.json" 2>&1 | tee "$C/gpu_run_dgemm.txt"
"$B/roofline" gpu run dgemm_tiled --size 4096 --repeat 3 -o "$C/gpu_run_dgemm_tiled.json" 2>&1 | tee -a "$C/gpu_run_dgemm.txt"
echo "== done ($(date +%T))"; ls -la "$C"
