#!/usr/bin/env bash
# Runs on a GPU host after scripts/gpu-build.sh's .gpu-bin/ was carried there: the
# instruction-roofline captures for tests/fixtures/ncu/ (roofline's INSTRUCTION_METRICS,
# ceilings' *.peak_sustained and unit clocks included: `*_iroof.csv`), shared-memory bank
# conflicts on purpose (`shared_stride` 1 and 32), the FMA pipes' use by the HFMA2 and FFMA
# peak kernels (`fp16_pipes.csv`), and a full `roofline gpu ceilings` run. Everything lands
# in $OUT. Never changes clocks.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
OUT=${OUT:-/tmp/out}; W=$(mktemp -d); C=$W/iroof; mkdir -p "$C" "$OUT"
R=$PWD/.gpu-bin/roofline
log() { echo "== $*"; }
log build
nvcc -O3 -arch=sm_90 -o "$W/suite" kernels/gpu/suite.cu 2>&1 | grep -v "warning #177\|const int B\|^ *^\|^$\|Remark" | tail -5
ncu --query-metrics --chip gh100 > "$W/q.txt" 2>&1
have() { grep -q "^$1 " "$W/q.txt" || grep -q "^$1$" "$W/q.txt"; }
pick() { local out=(); for m in "$@"; do base=${m%%.*}; if have "$base"; then out+=("$m"); else echo "missing metric: $m" >&2; fi; done; local IFS=,; echo "${out[*]}"; }
# roofline's own list, read from the source that built .gpu-bin/roofline
LIST=$(awk '/^pub const INSTRUCTION_METRICS/{on=1; next} on && /^\];/{on=0} on' src/gpu/ncu.rs | grep -o '"[^"]*"' | tr -d '"')
IR=$(pick $LIST)
echo "IROOF=$IR" > "$C/metric-lists-iroof.txt"
for m in $LIST; do have "${m%%.*}" && grep "^${m%%.*} " "$W/q.txt"; done > "$C/query-metrics-iroof.txt"
NCU="ncu --clock-control none --csv"
log captures
for k in "dgemm 1024 2" "triad 16777216 2" "strided_store 16777216 2" "normalize_warp 2097152 2" "shared_stride 1 2" "shared_stride 32 2"; do
  set -- $k; name=$1; [ "$1" = shared_stride ] && name=shared_stride$2
  $NCU --metrics "$IR" "$W/suite" $k > "$C/${name}_iroof.csv" 2>&1
done
log fp16 pipes
PIPES=$(pick sm__inst_executed_pipe_fma.sum sm__inst_executed_pipe_fmaheavy.sum sm__inst_executed_pipe_fmalite.sum sm__inst_executed_pipe_fp16.sum \
  sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active \
  sm__pipe_fmalite_cycles_active.avg.pct_of_peak_sustained_active sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_active \
  sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active \
  sm__sass_thread_inst_executed_op_hfma_pred_on.sum sm__sass_thread_inst_executed_op_ffma_pred_on.sum sm__cycles_elapsed.avg.per_second gpu__time_duration.sum sm__cycles_elapsed.max)
$NCU --metrics "$PIPES" "$W/suite" hfma2_peak 4000 1 > "$C/fp16_pipes.csv" 2>&1
$NCU --metrics "$PIPES" "$W/suite" ffma_peak 4000 1 > "$C/ffma_pipes.csv" 2>&1
grep -h 'pipe\|duration' "$C/fp16_pipes.csv" "$C/ffma_pipes.csv" | cut -d, -f1,5,13- | sed 's/"//g' | sort -u -t, -k1,3 | head -40
log roofline gpu measure --set instruction
"$R" gpu measure --set instruction -k dgemm -o "$C/gpu_measure_dgemm_instr.json" -- "$W/suite" dgemm 1024 1 || echo "measure failed"
log ceilings
"$R" gpu ceilings -o "$C/ceilings.json" 2>&1 | tail -40
ls -la "$C"; grep -c . "$C"/*_iroof.csv
(cd "$W" && tar czf "$OUT/iroof.tar.gz" iroof)
