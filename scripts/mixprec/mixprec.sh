#!/usr/bin/env bash
# Mixed-precision runs on another machine's CPU (AMX, AVX-512 BF16/FP16/VNNI, AVX-VNNI; e.g. the
# Sapphire Rapids CPU of a GPU host that has no cargo), in two halves:
#
#   scripts/mixprec/mixprec.sh prepare DEST [--baseline ROOFLINE]
#       here, in the checkout: build (release) and copy into DEST everything `run` needs:
#       roofline (symbol table kept) and a fully stripped copy (what the tracer makes of a
#       stripped program, docs/trace.md), the kernel crate's unit tests, the trace_mixprec test,
#       static builds of the fixture programs and of peaks.c / peaks_bf16.c, their sources,
#       this script and its helpers. --baseline ROOFLINE copies an earlier roofline binary in
#       as roofline-old, for the `baseline` step.
#   bash DEST/mixprec.sh run [--out DIR] [--cpu N] [--rounds N] [--threads "16 8"] STEP...
#       there, after copying DEST over: the steps in the order given (`all`: every step; the
#       `baseline` step only with roofline-old present). The log (DIR/log.txt), reports and
#       other outputs go to DIR: --out, else $OUT when set, else a new temporary directory.
#
# Steps:
#   host      the CPU (lscpu, mixed-precision flags), the C compiler, PyTorch's version
#   trace     tests/trace_mixprec.rs (the fixtures compiled there with cc), and the prebuilt
#             amx_shapes / mixprec_simd natively and under the trace backend (W per class)
#   peaks     one-core unit throughputs (peaks.c) and vdpbf16ps / vpdpbusd chains (peaks_bf16.c)
#   kernels   the kernel crate's tests of the low-precision GEMMs against the reference
#   machine   roofline machine (theoretical mixed-precision peaks)
#   ceilings  roofline ceilings --quick --threads 1 (the units against the platform rates)
#   validate  roofline validate of bf16_gemm/int8_gemm (48KiB, 1MiB) and of dgemm/sgemm with a
#             symbol table, then dgemm and triad with the stripped binary
#   validate-all  a default roofline validate (every kernel)
#   gemm      one thread pinned to --cpu, n = 1024: every variant of bf16_gemm and int8_gemm;
#             then bf16_gemm against PyTorch's bf16 matmul at n = 1024 and 2048, alternating
#             --rounds times
#   threads   bf16_gemm --split against PyTorch at n = 2048 on each of --threads, alternating
#             --rounds times
#   baseline  roofline-old against roofline: tile rows on first-touched pages (amx_first_touch.c)
#             and the AMX GEMMs on one thread, alternating --rounds times
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

prepare() {
  local dest="" baseline=""
  while [ $# -gt 0 ]; do
    case $1 in
      --baseline) baseline=$2; shift 2 ;;
      -*) usage ;;
      *) [ -z "$dest" ] || usage; dest=$1; shift ;;
    esac
  done
  [ -n "$dest" ] || usage
  set -e
  mkdir -p "$dest"; dest=$(cd "$dest" && pwd)
  [ -z "$baseline" ] || baseline=$(realpath "$baseline")
  local here; here=$(cd "$(dirname "$0")" && pwd)
  cd "$here/../.."
  local tgt=${CARGO_TARGET_DIR:-target}
  exe() { cargo test --release "$@" --no-run --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4; }
  cargo build --release
  cp "$tgt/release/roofline" "$dest/roofline"
  cp "$tgt/release/roofline" "$dest/roofline-stripped"
  cp "$(exe -p roofline-kernels --lib)" "$dest/kernels_lib_tests"
  cp "$(exe --test trace_mixprec)" "$dest/trace_mixprec"
  strip --strip-debug "$dest/roofline" "$dest/kernels_lib_tests" "$dest/trace_mixprec"
  strip "$dest/roofline-stripped"
  [ -z "$baseline" ] || cp "$baseline" "$dest/roofline-old"
  gcc -O2 -mamx-tile -mamx-bf16 -mamx-int8 -static tests/fixtures/trace/amx_shapes.c -o "$dest/amx_shapes"
  gcc -O2 -static tests/fixtures/trace/mixprec_simd.c -o "$dest/mixprec_simd"
  gcc -O2 -march=sapphirerapids -static scripts/mixprec/peaks.c -o "$dest/peaks"
  gcc -O2 -mavx512f -static scripts/mixprec/peaks_bf16.c -o "$dest/peaks_bf16"
  cp scripts/mixprec/mixprec.sh scripts/mixprec/summ.py scripts/mixprec/aft_summ.py scripts/mixprec/torch_matmul.py \
    tests/fixtures/trace/amx_first_touch.c tests/fixtures/trace/amx_shapes.c tests/fixtures/trace/mixprec_simd.c "$dest/"
  ls -la "$dest"; du -sh "$dest"
}

step_host() {
  date -u
  lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|L2 cache|L3 cache"
  grep -o -w -E "amx_tile|amx_bf16|amx_int8|avx512_fp16|avx512_bf16|avx512_vnni|avx_vnni" /proc/cpuinfo | sort | uniq -c
  cc --version | head -1
  python3 -c "import torch; print('torch', torch.__version__)" 2>&1 | tail -1
}

step_trace() {
  echo "== trace_mixprec tests (the fixtures compiled here with cc)"
  CARGO_BIN_EXE_roofline=$PWD/roofline ROOFLINE_TEST_FIXTURES=$PWD timeout 200 ./trace_mixprec --nocapture 2>&1 | tail -20
  local p
  for p in "amx_shapes 53" "mixprec_simd 1234"; do
    set -- $p
    echo "== $1 $2 (prebuilt): native, then W under trace"
    ./"$1" "$2" | tee "$OUT/$1.expect"
    ./roofline measure --backend trace --json -- ./"$1" "$2" > "$OUT/$1.trace.json" 2> "$OUT/$1.trace.err"; echo "rc $?"
    [ -s "$OUT/$1.trace.json" ] && python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['points'][0]['flops']; print(json.dumps(f))" "$OUT/$1.trace.json"
  done
}

step_peaks() {
  echo "== one-core unit throughputs (peaks.c)"
  timeout 120 ./peaks | tee "$OUT/peaks.txt"
  echo "== vdpbf16ps / vpdpbusd chains (peaks_bf16.c)"
  timeout 60 ./peaks_bf16 | tee "$OUT/peaks_bf16.txt"
}

step_kernels() {
  echo "== kernel-crate tests: every path of the low-precision GEMMs and their split parts against the reference"
  timeout 120 ./kernels_lib_tests gemm_lowp lowp peak_mixed --nocapture 2>&1 | tail -24
}

step_machine() {
  echo "== roofline machine"
  timeout 60 ./roofline machine 2>&1 | tail -30
}

step_ceilings() {
  echo "== roofline ceilings --quick --threads 1"
  timeout 200 ./roofline ceilings --quick --threads 1 --refresh -o "$OUT/ceilings.json" 2>&1 | tail -40
}

step_validate() {
  local ws
  echo "== validate: the low-precision GEMMs (all variants) under trace"
  for ws in 48KiB 1MiB; do timeout 240 ./roofline validate --kernels bf16_gemm,int8_gemm --working-set $ws 2>&1 | tail -12; done
  echo "== validate dgemm/sgemm: with a symbol table, then the same binary stripped"
  timeout 120 ./roofline validate --kernels dgemm,sgemm 2>&1 | tail -12
  timeout 120 ./roofline-stripped validate --kernels dgemm 2>&1 | tail -10
  echo "== a stripped binary says so"
  timeout 60 ./roofline-stripped validate --kernels triad 2>&1 | head -3
}

step_validate_all() {
  echo "== default validate (trace): every kernel, the low-precision GEMMs included"
  timeout 300 ./roofline validate 2>&1 | tail -45
}

# run_point NAME ROOFLINE-ARGS...: one `roofline run` report in $OUT/NAME.json, summarized.
run_point() {
  local name=$1; shift
  timeout 120 "$@" --json > "$OUT/$name.json" 2> "$OUT/$name.err" || tail -3 "$OUT/$name.err"
  python3 summ.py "$OUT/$name.json"
}

step_gemm() {
  local spec n round
  echo "== one thread (CPU $CPU), n = 1024: every path"
  for spec in "bf16_gemm avx512" "bf16_gemm amx" "int8_gemm avx512" "int8_gemm avx2" "int8_gemm amx"; do
    set -- $spec
    run_point "$1_$2" taskset -c "$CPU" ./roofline run "$1" --variant "$2" --size 1024 --threads 1 --repeat 10
  done
  echo "== bf16_gemm against PyTorch bf16 matmul, one thread on CPU $CPU, alternating $ROUNDS times"
  for n in 1024 2048; do
    for round in $(seq "$ROUNDS"); do
      taskset -c "$CPU" python3 torch_matmul.py "$n" 1 20 | tee -a "$OUT/torch_${n}_1.jsonl"
      run_point "bf16_gemm_${n}_$round" taskset -c "$CPU" ./roofline run bf16_gemm --size "$n" --threads 1 --repeat 20
    done
  done
}

step_threads() {
  local t round
  for t in $THREADS; do
    echo "== $t threads, n = 2048: suite bf16_gemm --split (AMX) against PyTorch bf16 matmul, alternating $ROUNDS times"
    for round in $(seq "$ROUNDS"); do
      python3 torch_matmul.py 2048 "$t" 20 | tee -a "$OUT/torch_2048_$t.jsonl"
      run_point "split${t}_$round" ./roofline run bf16_gemm --split --threads "$t" --size 2048 --repeat 20
    done
  done
}

step_baseline() {
  local r b n round k
  [ -x roofline-old ] || { echo "baseline: no roofline-old here (prepare --baseline ROOFLINE)"; return 1; }
  echo "== tile rows on first-touched pages: roofline-old, then roofline"
  gcc -O2 -mamx-tile amx_first_touch.c -o aft
  for r in "5 16 64" "9 7 40" "3 16 64"; do
    ./aft $r > "$OUT/aft.expect"
    for b in roofline-old roofline; do
      ./$b measure --backend trace --by-function --json -o "$OUT/aft_$b.json" -- ./aft $r > /dev/null 2> "$OUT/aft.err" || tail -3 "$OUT/aft.err"
      python3 aft_summ.py "$OUT/aft_$b.json" "$OUT/aft.expect" "$b aft $r"
    done
  done
  echo "== AMX GEMMs, one thread on CPU $CPU: roofline-old (its default variant) against roofline (amx), alternating $ROUNDS times"
  for n in 1024 2048; do
    for round in $(seq "$ROUNDS"); do
      for k in bf16_gemm int8_gemm; do
        run_point "old_${k}_${n}_$round" taskset -c "$CPU" ./roofline-old run "$k" --size "$n" --threads 1 --repeat 10 | sed 's/^/old /'
        run_point "new_${k}_${n}_$round" taskset -c "$CPU" ./roofline run "$k" --variant amx --size "$n" --threads 1 --repeat 10 | sed 's/^/new /'
      done
    done
  done
}

run() {
  CPU=3 ROUNDS=3 THREADS="16 8" OUT=${OUT:-}
  local steps=()
  while [ $# -gt 0 ]; do
    case $1 in
      --out) OUT=$2; shift 2 ;;
      --cpu) CPU=$2; shift 2 ;;
      --rounds) ROUNDS=$2; shift 2 ;;
      --threads) THREADS=$2; shift 2 ;;
      all) steps+=(host trace peaks kernels machine ceilings validate validate-all gemm threads)
           [ -x "$(dirname "$0")/roofline-old" ] && steps+=(baseline); shift ;;
      host|trace|peaks|kernels|machine|ceilings|validate|validate-all|gemm|threads|baseline) steps+=("$1"); shift ;;
      *) usage ;;
    esac
  done
  [ ${#steps[@]} -gt 0 ] || usage
  [ -n "$OUT" ] || OUT=$(mktemp -d)
  mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
  cd "$(dirname "$0")"
  exec > >(tee "$OUT/log.txt") 2>&1
  chmod +x roofline roofline-stripped kernels_lib_tests trace_mixprec peaks peaks_bf16 amx_shapes mixprec_simd 2>/dev/null
  chmod +x roofline-old 2>/dev/null
  local s
  for s in "${steps[@]}"; do
    echo "==== $s"
    "step_${s//-/_}"
  done
  echo "== outputs in $OUT"
}

case ${1:-} in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
