#!/usr/bin/env bash
# Mixed-precision device run (Sapphire Rapids CPU of the GPU host): the trace_mixprec tests (exact W of
# AMX / AVX-512 BF16/FP16/VNNI programs, compiled there with cc), the same programs prebuilt
# (static, gcc 12) in case the host compiler lacks the intrinsics, and one-core unit throughputs.
# Prepare here: scripts/mixprec/prepare.sh; run there: bash .gpu-bin/mixprec/device.sh
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
cc --version | head -1
chmod +x roofline trace_mixprec peaks amx_shapes mixprec_simd
echo "== trace_mixprec (cc on the host)"
CARGO_BIN_EXE_roofline=$PWD/roofline ROOFLINE_TEST_FIXTURES=$PWD ./trace_mixprec --nocapture 2>&1 | tail -20
for p in "amx_shapes 53" "mixprec_simd 1234"; do
  set -- $p
  echo "== $1 (prebuilt) native"; ./$1 $2 | tee "$OUT/$1.expect"
  ./roofline measure --backend trace --json -- ./$1 $2 > "$OUT/$1.trace.json" 2> "$OUT/$1.trace.err"; echo "rc $?"
  python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['points'][0]['flops']; print(json.dumps(f))" "$OUT/$1.trace.json"
done
echo "== peaks"; ./peaks | tee "$OUT/peaks.txt"
