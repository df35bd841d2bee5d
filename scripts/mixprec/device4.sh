#!/usr/bin/env bash
# Second Sapphire Rapids run: the AMX GEMMs one-thread against the build before the SIMD paths
# and the split mode (same host, alternating), the mixed-precision ceilings against the
# platform rates (vdpbf16ps rated now), a default validate (the low-precision GEMMs included)
# and the stripped-binary warning. Prepare: scripts/mixprec/prepare3.sh; run: bash .gpu-bin/mixprec3/device4.sh
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
chmod +x roofline roofline-stripped roofline-old
date -u; lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\) per core"
echo "== AMX GEMMs, one thread on CPU 3: earlier build (variant avx512 = AMX there) vs this one (amx), alternating"
for n in 1024 2048; do
  for round in 1 2 3; do
    for k in bf16_gemm int8_gemm; do
      taskset -c 3 ./roofline-old run $k --size $n --threads 1 --repeat 10 --json > "$OUT/old_${k}_$n.json" 2>/dev/null && python3 summ.py "$OUT/old_${k}_$n.json" | sed 's/^/old /'
      taskset -c 3 ./roofline run $k --variant amx --size $n --threads 1 --repeat 10 --json > "$OUT/new_${k}_$n.json" 2>/dev/null && python3 summ.py "$OUT/new_${k}_$n.json" | sed 's/^/new /'
    done
  done
done
echo "== ceilings --quick --threads 1 (mixed-precision units against the platform rates)"
timeout 200 ./roofline ceilings --quick --threads 1 --refresh -o "$OUT/ceilings.json" 2>&1 | grep -i -E "bf16|int8|int16|half|amx|clock|GHz" | head -30
echo "== default validate (trace): every kernel, the low-precision GEMMs included"
timeout 300 ./roofline validate 2>&1 | tail -45
echo "== a stripped binary says so"
timeout 60 ./roofline-stripped validate --kernels triad 2>&1 | head -3
echo done
