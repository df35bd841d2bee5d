#!/usr/bin/env bash
# Mixed-precision roofs, ceilings and suite GEMMs on the GPU host's Sapphire Rapids CPU.
# Prepare here: scripts/mixprec/prepare2.sh; run there: bash .gpu-bin/mixprec2/device2.sh
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
chmod +x roofline kernels_lib_tests 2>/dev/null
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/\(Flags:\).*\(amx[^ ]*\).*/\1 ... \2 .../' | head -3
grep -o -w -E "amx_tile|amx_bf16|amx_int8|avx512_fp16|avx512_bf16|avx512_vnni|avx_vnni" /proc/cpuinfo | sort | uniq -c
echo "== kernel-crate tests (AMX GEMMs against the reference, unit loops)"
./kernels_lib_tests lowp peak_mixed gemm_lowp --nocapture 2>&1 | tail -16
echo "== roofline machine"
timeout 60 ./roofline machine 2>&1 | tail -30
echo "== roofline validate (trace W and core Q of the AMX GEMMs)"
for ws in 48KiB 1MiB; do
  timeout 200 ./roofline validate --kernels bf16_gemm,int8_gemm --working-set $ws 2>&1 | tail -6
done
echo "== roofline ceilings --quick --threads 1"
timeout 180 ./roofline ceilings --quick --threads 1 --refresh -o "$OUT/ceilings.json" 2>&1 | tail -40
echo "== bf16_gemm vs PyTorch (oneDNN), 1 thread, pinned to CPU 3, alternating"
for n in 1024 2048; do
  for round in 1 2 3; do
    taskset -c 3 python3 torch_matmul.py $n 1 20 | tee -a "$OUT/torch_$n.jsonl"
    taskset -c 3 ./roofline run bf16_gemm --size $n --threads 1 --repeat 20 --json > "$OUT/bf16_gemm_${n}_$round.json" 2> "$OUT/bf16_gemm_${n}_$round.err"
    python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['points'][0]; print('suite bf16_gemm n=%s: median %.3f ms, %.1f GFLOP/s, bound %s, roof %s' % (sys.argv[2], p['seconds']*1e3, p['gflops'], p.get('bound'), p.get('roof_fraction')))" "$OUT/bf16_gemm_${n}_$round.json" $n
  done
done
echo "== int8_gemm, 1 thread"
taskset -c 3 ./roofline run int8_gemm --size 1024 --threads 1 --repeat 20 --json > "$OUT/int8_gemm_1024.json" 2> "$OUT/int8_gemm_1024.err"
python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['points'][0]; print('suite int8_gemm n=1024: median %.3f ms, %.1f GOP/s (int_ops %s), bound %s, roof %s' % (p['seconds']*1e3, p['flops']['int_ops']/p['seconds']/1e9, p['flops']['int_ops'], p.get('bound'), p.get('roof_fraction')))" "$OUT/int8_gemm_1024.json"
echo "== report of bf16_gemm 2048 (table)"
./roofline report show "$OUT/bf16_gemm_2048_1.json" 2>&1 | head -14


echo done
