#!/usr/bin/env bash
# Runs on a GPU host after scripts/gpu-build.sh's .gpu-bin/ was carried there: the captures
# added after gpu-capture.sh for tests/fixtures/ncu/ (a two-kernel process for the
# critical-kernel ranking, the smsp__sass_* metric prefix, ncu's own roofline sections with
# their raw metrics, the SASS of the FMA peak kernels, `roofline gpu run` reports for
# `roofline compare`). Everything lands in $OUT/extra.tar.gz. Never changes clocks.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
OUT=${OUT:-/tmp/out}; W=$(mktemp -d); C=$W/extra; mkdir -p "$C" "$OUT"
R=$PWD/.gpu-bin/roofline
log() { echo "== $*"; }
log build
nvcc -O3 -arch=sm_90 -o "$W/suite" kernels/gpu/suite.cu 2>&1 | grep -v "warning #177\|const int B\|^ *^\|^$\|Remark" | tail -5
nvcc -O3 -arch=sm_90 -cubin -o "$W/suite.cubin" kernels/gpu/suite.cu 2>/dev/null
log sass
cuobjdump -sass "$W/suite.cubin" > "$W/all.sass" 2>&1
for f in hfma2_peak ffma_peak; do
  awk -v f="$f" '/Function : /{on = index($0, f) > 0} on' "$W/all.sass" > "$C/$f.sass"
  echo "$f: HFMA2 $(grep -c 'HFMA2 ' "$C/$f.sass") HFMA2.MMA $(grep -c 'HFMA2.MMA' "$C/$f.sass") FFMA $(grep -c ' FFMA ' "$C/$f.sass") HADD2 $(grep -c 'HADD2' "$C/$f.sass") BRA $(grep -c 'BRA' "$C/$f.sass") lines $(wc -l < "$C/$f.sass")"
done
HIER=$(grep '^HIER=' tests/fixtures/ncu/metric-lists.txt | cut -d= -f2)
NCU="ncu --clock-control none --csv"
log two kernels
"$W/suite" two_kernels 16777216 3
$NCU --metrics "$HIER" "$W/suite" two_kernels 16777216 3 > "$C/two_kernels_hier.csv" 2>&1
log smsp prefix
SMSP=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__sass_thread_inst_executed_op_dadd_pred_on.sum,smsp__sass_thread_inst_executed_op_dmul_pred_on.sum,smsp__sass_thread_inst_executed_op_dfma_pred_on.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum
$NCU --metrics "$SMSP" "$W/suite" triad 1048576 1 > "$C/triad_smsp_prefix.csv" 2>&1
log ncu roofline sections, raw page
$NCU --page raw --section SpeedOfLight_RooflineChart --metrics "$HIER" "$W/suite" dgemm 1024 1 > "$C/dgemm_roofline_section_raw.csv" 2>&1
log gpu run reports
"$R" gpu run triad --size 33554432 --repeat 10 -o "$C/gpu_run_triad.json" > /dev/null
"$R" gpu run dgemm --size 2048 --repeat 5 -o "$C/gpu_run_dgemm.json" > /dev/null
ls -la "$C"; head -c 1500 "$C/triad_smsp_prefix.csv"; echo; head -c 600 "$C/dgemm_roofline_section_raw.csv"; echo
(cd "$W" && tar czf "$OUT/extra.tar.gz" extra)
