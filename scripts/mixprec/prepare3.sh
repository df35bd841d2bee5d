#!/usr/bin/env bash
# Build here (release) what scripts/mixprec/device3.sh runs, into /work/main/.gpu-bin/mixprec3/
# (carry just that folder). roofline keeps its symbol table (strip --strip-debug); the fully
# stripped copy shows what the tracer makes of a stripped program (docs/trace.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${CARGO_TARGET_DIR:-target}
D=${1:-/work/main/.gpu-bin/mixprec3}
cargo build --release
exe() { cargo test --release "$@" --no-run --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4; }
mkdir -p "$D"
cp "$T/release/roofline" "$D/roofline"
cp "$T/release/roofline" "$D/roofline-stripped"
cp "$(exe -p roofline-kernels --lib)" "$D/kernels_lib_tests"
cp "$(exe --test trace_mixprec)" "$D/trace_mixprec"
strip --strip-debug "$D/roofline" "$D/kernels_lib_tests" "$D/trace_mixprec"
strip "$D/roofline-stripped"
# The tracer before tile restarts were recognized (an earlier build), if one is at hand.
[ -x /work/main/.gpu-bin/mixprec2/roofline ] && cp /work/main/.gpu-bin/mixprec2/roofline "$D/roofline-old"
gcc -O2 -mavx512f -static scripts/mixprec/peaks_bf16.c -o "$D/peaks_bf16"
cp scripts/mixprec/device3.sh scripts/mixprec/summ.py scripts/mixprec/aft_summ.py scripts/mixprec/torch_matmul.py \
   tests/fixtures/trace/amx_first_touch.c tests/fixtures/trace/amx_shapes.c tests/fixtures/trace/mixprec_simd.c "$D/"
ls -la "$D"; du -sh "$D"
