#!/usr/bin/env bash
# Build what scripts/mixprec/device.sh needs into /work/main/.gpu-bin/mixprec (or $1).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-/work/main/.gpu-bin/mixprec}
mkdir -p "$dest"
cargo build --release --bin roofline
exe=$(cargo test --release --no-run --test trace_mixprec --message-format=json 2>/dev/null \
  | grep -o '"executable":"[^"]*trace_mixprec[^"]*"' | tail -1 | cut -d'"' -f4)
tgt=${CARGO_TARGET_DIR:-target}
cp "$tgt/release/roofline" "$exe" "$dest/"
mv "$dest/$(basename "$exe")" "$dest/trace_mixprec"
gcc -O2 -mamx-tile -mamx-bf16 -mamx-int8 -static tests/fixtures/trace/amx_shapes.c -o "$dest/amx_shapes"
gcc -O2 -static tests/fixtures/trace/mixprec_simd.c -o "$dest/mixprec_simd"
gcc -O2 -march=sapphirerapids -static scripts/mixprec/peaks.c -o "$dest/peaks"
cp scripts/mixprec/device.sh tests/fixtures/trace/amx_shapes.c tests/fixtures/trace/mixprec_simd.c "$dest/"
strip "$dest/roofline" "$dest/trace_mixprec"
ls -la "$dest"
