#!/usr/bin/env bash
# Sapphire Rapids CPU of the GPU host: the AMX GEMMs' core Q under trace (tile restarts), dgemm
# validate with and without a symbol table, the AVX-512 BF16 / VNNI and AVX-VNNI GEMM paths,
# vdpbf16ps latency and throughput, and the split bf16 GEMM against PyTorch on 16 threads.
# Prepare here: scripts/mixprec/prepare3.sh; run there: bash .gpu-bin/mixprec3/device3.sh
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
chmod +x roofline roofline-stripped roofline-old kernels_lib_tests trace_mixprec peaks_bf16
date -u; lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|L2 cache|L3 cache"
cc --version | head -1; python3 -c "import torch; print('torch', torch.__version__)"
echo "== kernel-crate tests: every path of both GEMMs and their split parts against the reference"
timeout 120 ./kernels_lib_tests gemm_lowp lowp --nocapture 2>&1 | tail -22
echo "== trace_mixprec tests (first-touch tile rows included)"
CARGO_BIN_EXE_roofline=$PWD/roofline ROOFLINE_TEST_FIXTURES=$PWD timeout 200 ./trace_mixprec --nocapture 2>&1 | tail -14
echo "== tile rows on first-touched pages: before (roofline-old) and after"
gcc -O2 -mamx-tile amx_first_touch.c -o aft
for r in "5 16 64" "9 7 40" "3 16 64"; do
  ./aft $r > "$OUT/aft.expect"
  for b in roofline-old roofline; do
    ./$b measure --backend trace --by-function --json -o "$OUT/aft_$b.json" -- ./aft $r > /dev/null 2> "$OUT/aft.err" || tail -3 "$OUT/aft.err"
    python3 aft_summ.py "$OUT/aft_$b.json" "$OUT/aft.expect" "$b aft $r"
  done
done
echo "== validate: the low-precision GEMMs (all variants) under trace"
for ws in 48KiB 1MiB; do timeout 240 ./roofline validate --kernels bf16_gemm,int8_gemm --working-set $ws 2>&1 | tail -12; done
echo "== validate dgemm/sgemm: with a symbol table, then the same binary stripped"
timeout 120 ./roofline validate --kernels dgemm,sgemm 2>&1 | tail -12
timeout 120 ./roofline-stripped validate --kernels dgemm 2>&1 | tail -10
echo "== vdpbf16ps / vpdpbusd chains"
timeout 60 ./peaks_bf16
echo "== one thread (CPU 3), n=1024: every path"
for spec in "bf16_gemm avx512" "bf16_gemm amx" "int8_gemm avx512" "int8_gemm avx2" "int8_gemm amx"; do
  set -- $spec
  taskset -c 3 timeout 120 ./roofline run $1 --variant $2 --size 1024 --threads 1 --repeat 10 --json > "$OUT/$1_$2.json" 2> "$OUT/$1_$2.err" || tail -3 "$OUT/$1_$2.err"
  python3 summ.py "$OUT/$1_$2.json"
done
echo "== 16 threads, n=2048: suite bf16_gemm --split (AMX) vs PyTorch bf16 matmul, alternating"
for round in 1 2 3; do
  python3 torch_matmul.py 2048 16 20 | tee -a "$OUT/torch_2048_16.jsonl"
  timeout 120 ./roofline run bf16_gemm --split --threads 16 --size 2048 --repeat 20 --json > "$OUT/split16_$round.json" 2> "$OUT/split16_$round.err" || tail -3 "$OUT/split16_$round.err"
  python3 summ.py "$OUT/split16_$round.json"
done
echo "== 8 threads, n=2048, once each"
python3 torch_matmul.py 2048 8 20 | tee -a "$OUT/torch_2048_8.jsonl"
timeout 120 ./roofline run bf16_gemm --split --threads 8 --size 2048 --repeat 20 --json > "$OUT/split8.json" 2> "$OUT/split8.err" || tail -3 "$OUT/split8.err"
python3 summ.py "$OUT/split8.json"
echo done
