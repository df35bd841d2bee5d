#!/usr/bin/env bash
# The GEMMs and clocks on a server CPU without cargo (the device tool's Emerald Rapids host),
# in two halves:
#
#   scripts/server-gemm.sh prepare DEST [--baseline ROOFLINE]
#       here: build (release) and copy into DEST roofline, the kernel crate's unit tests, the
#       examples gemm_shapes, amx_shapes, amx_clock and amx_cpus, scripts/torch/peer_ratio.py and this
#       script (stripped copies). --baseline copies an earlier roofline in as roofline-old.
#   bash DEST/server-gemm.sh run [TRIALS]
#       there: every step below, its log and JSON in $OUT (else a new temporary directory).
#
# Steps of `run`:
#   tests      the kernel crate's GEMM tests (AMX blockings computed where AMX runs)
#   validate   roofline validate (trace) of dgemm and of the AMX GEMMs at two sizes
#   machine    the clock per ISA (and roofline-old's, where present)
#   clock-amx  the clock under AMX and the tile unit's flop/cycle (amx_clock), and per vCPU
#              over rounds and on one vCPU over 0.5 s (amx_cpus: the slow phases); every vCPU
#              at once in six issue patterns (amx_clock variants: vCPUs sharing a host core
#              come in pairs of equal figures)
#   dgemm      the production dgemm (Intel: late16, mc 128), the previous kernel (eb) and three
#              other micro-tiles (6x32, 8x24, 14x16) against the AVX-512 FMA peak loop,
#              interleaved on one core (DGEMM_SHAPES: other gemm_shapes shapes)
#   peers      the suite's GEMMs against PyTorch's matmul, alternated per trial (TRIALS, default
#              5; dgemm also against the FMA peak loop and numpy's OpenBLAS): one thread
#              pinned (dgemm n = 1024; bf16 and int8 AMX at n = 1024, 2048; with roofline-old
#              beside where present), then 16 threads (--split)
#   main       the main job (`roofline`, no cached ceilings: 1 thread and all CPUs), its table
#   sweep      roofline ceilings --sweep --threads 1,16: the plateaus and each level's roof
#   amx-peak   the main job's quick AMX figure (`ceilings --figure`), five runs each of bf16 and
#              int8 at 1 and 16 threads: % of the unit's rate, measurements made, the CPU kept,
#              slow threads (count@share/worth in fastest threads)
#   ceilings   roofline ceilings --quick --threads 1,16: the AMX and FMA peaks with spread
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
  cd "$(dirname "$0")/.."
  local tgt=${CARGO_TARGET_DIR:-target}
  cargo build --release --bin roofline
  cargo build --release -p roofline-kernels --examples
  local tests
  tests=$(cargo test --release -p roofline-kernels --lib --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
  cp "$tgt/release/roofline" "$dest/roofline"
  cp "$tests" "$dest/kernels_lib_tests"
  for x in gemm_shapes amx_shapes amx_clock amx_cpus; do cp "$tgt/release/examples/$x" "$dest/$x"; done
  [ -z "$baseline" ] || cp "$baseline" "$dest/roofline-old"
  strip "$dest/roofline" "$dest/kernels_lib_tests" "$dest/gemm_shapes" "$dest/amx_shapes" "$dest/amx_clock" "$dest/amx_cpus"
  cp scripts/torch/peer_ratio.py scripts/server-gemm.sh "$dest/"
  ls -la "$dest"
}

run() {
  local trials=${1:-5}
  cd "$(dirname "$0")"
  local out=${OUT:-$(mktemp -d)}
  export XDG_CACHE_HOME; XDG_CACHE_HOME=$(mktemp -d)
  exec > >(tee "$out/log.txt") 2>&1
  date -u; lscpu | grep -E "Model name|^CPU\(s\)|MHz"; git_rev=$(./roofline --version 2>/dev/null); echo "$git_rev"
  local old=""; [ -x ./roofline-old ] && old=,./roofline-old
  echo "== tests"; timeout 120 ./kernels_lib_tests gemm 2>&1 | grep -E "test result|FAIL|panick"
  echo "== validate (trace)"
  timeout 120 ./roofline validate --kernels dgemm 2>&1 | grep -E "avx512|verdict"
  for ws in 48KiB 4MiB; do timeout 120 ./roofline validate --kernels bf16_gemm,int8_gemm --working-set $ws 2>&1 | grep -E " amx "; done
  echo "== machine"; for b in ./roofline ${old:+./roofline-old}; do echo "$b"; timeout 60 $b machine 2>&1 | grep -i -E "^clock|warning" ; done
  echo "== clock under AMX"; timeout 60 ./amx_clock 11 3
  echo "== AMX rate per vCPU and over time"; timeout 60 ./amx_cpus 3 5 2 200
  echo "== AMX on every vCPU at once (bf16 flop/cycle per issue pattern)"
  # (`wait` with the pids: a bare `wait` also waits for the log's `tee`, which never ends.)
  local n pids=(); n=$(nproc)
  for c in $(seq 0 $((n - 1))); do timeout 60 ./amx_clock 9 "$c" variants > "/tmp/variants.$c" 2>&1 & pids+=($!); done
  wait "${pids[@]}"
  for c in $(seq 0 $((n - 1))); do cat "/tmp/variants.$c"; done
  echo "== dgemm against the FMA peak loop, cpu 3"; timeout 150 ./gemm_shapes 1024 9 3 3 ${DGEMM_SHAPES:-8x16/256/128/late16 8x16/256/144/eb 6x32/128/144 8x24/192/144 14x16/192/140} | tee "$out/dgemm-peak.txt"
  echo "== peers, 1 thread (cpu 3)"
  timeout 300 taskset -c 3 python3 peer_ratio.py --trials "$trials" --json "$out/peer1.json" \
    dgemm:avx512:1024:1:./roofline$old bf16_gemm:amx:1024:1:./roofline$old bf16_gemm:amx:2048:1:./roofline$old \
    int8_gemm:amx:1024:1:./roofline$old int8_gemm:amx:2048:1:./roofline$old 2>&1 | grep -v trial
  echo "== peers, 16 threads"
  timeout 200 python3 peer_ratio.py --trials "$trials" --json "$out/peer16.json" \
    bf16_gemm:amx:1024:16 bf16_gemm:amx:2048:16 int8_gemm:amx:1024:16 int8_gemm:amx:2048:16 2>&1 | grep -v trial
  echo "== main job (no cached ceilings)"
  local t0=$SECONDS
  (mkdir -p "$out/main" && cd "$out/main" && timeout 240 "$OLDPWD/roofline" > table.txt 2> stderr.txt; echo "rc $?" >> table.txt)
  echo "main job: $((SECONDS - t0)) s"; cat "$out/main/table.txt"; grep -i -E "warning|re-measur" "$out/main/stderr.txt"
  echo "== sweep (1 and 16 threads)"
  t0=$SECONDS
  timeout 240 ./roofline ceilings --sweep --threads 1,16 --refresh > "$out/sweep.txt" 2> "$out/sweep.err"
  echo "sweep: $((SECONDS - t0)) s, rc $?"; cat "$out/sweep.txt"
  echo "== AMX peak, the main job's quick figure, five runs each (GFLOP/s best spread GHz % measurements cpu slow-threads)"
  for fig in bf16.amx int8.amx; do for t in 1 16; do
    for i in 1 2 3 4 5; do echo "$fig x$t: $(timeout 60 ./roofline ceilings --figure $fig --threads $t 2>&1)"; done
  done; done
  echo "== ceilings (quick, 1 and 16 threads)"
  for i in 1; do
    timeout 120 ./roofline ceilings --quick --threads 1,16 --refresh --json > "$out/ceilings$i.json" 2>/dev/null
    python3 -c "
import json, sys
for c in json.load(open(sys.argv[1]))['compute']:
    if c['isa'] == 'amx' or (c['isa'], c['mode'], c['precision']) == ('avx512', 'fma', 'double'):
        print(c['precision'], c['isa'], c['threads'], 'threads: %.0f G/s, spread %.3f, %.2f GHz, %.1f %% of theory' % (c['gflops'], c['spread'], c['ghz'] or 0, c['percent_of_theoretical'] or 0), c.get('unequal_threads', ''))
" "$out/ceilings$i.json"
  done
  date -u
}

case ${1:-} in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
