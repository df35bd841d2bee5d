#!/usr/bin/env bash
# Runs on a GPU host (the device tool): builds kernels/gpu/suite.cu, then captures real
# Nsight Compute CSVs of the GPU suite for tests/fixtures/ncu/. Everything lands in
# $OUT/captures.tar.gz (plus the log). Never changes clocks (--clock-control none).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
OUT=${OUT:-/tmp/out}; W=$(mktemp -d); mkdir -p "$W/cap" "$OUT"
log() { echo "== $*"; }
log host; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,clocks.sm,pcie.link.gen.max --format=csv | tee "$W/cap/nvidia-smi.csv"
nvidia-smi -q > "$W/cap/nvidia-smi-q.txt" 2>&1
nvcc --version | tail -2; ncu --version | tail -1; which ncu
log build
nvcc -O3 -arch=sm_90 -o "$W/suite" kernels/gpu/suite.cu 2>&1 | tail -5 || exit 1
nvcc -O3 -arch=sm_90 -Xptxas -v -c -o /dev/null kernels/gpu/suite.cu > "$W/cap/ptxas.txt" 2>&1
log untimed runs
for k in "triad 33554432 20" "daxpy 33554432 20" "dfma_peak 20000 5" "ffma_peak 40000 5" "hfma2_peak 40000 5" "bf16_gemm 4096 5" "dgemm 2048 3" "cos_unfused 16777216 10" "cos_fused 16777216 10" "normalize_naive 8388608 5" "normalize_warp 8388608 5" "strided_store 16777216 5" "unit_store 16777216 5"; do
  "$W/suite" $k | tee -a "$W/cap/native-times.txt"
done
log metrics query
ncu --query-metrics --chip gh100 > "$W/cap/query-metrics-gh100.txt" 2>&1
have() { grep -q "^$1 " "$W/cap/query-metrics-gh100.txt" || grep -q "^$1$" "$W/cap/query-metrics-gh100.txt"; }
pick() { local out=(); for m in "$@"; do base=${m%%.*}; if have "$base"; then out+=("$m"); else echo "missing metric: $m" >&2; fi; done; local IFS=,; echo "${out[*]}"; }
HIER=$(pick gpu__time_duration.sum sm__cycles_elapsed.avg.per_second dram__bytes_read.sum dram__bytes_write.sum lts__t_bytes.sum l1tex__t_bytes.sum \
  sm__sass_thread_inst_executed_op_dadd_pred_on.sum sm__sass_thread_inst_executed_op_dmul_pred_on.sum sm__sass_thread_inst_executed_op_dfma_pred_on.sum \
  sm__sass_thread_inst_executed_op_fadd_pred_on.sum sm__sass_thread_inst_executed_op_fmul_pred_on.sum sm__sass_thread_inst_executed_op_ffma_pred_on.sum \
  sm__sass_thread_inst_executed_op_hadd_pred_on.sum sm__sass_thread_inst_executed_op_hmul_pred_on.sum sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  sm__ops_path_tensor_src_bf16_dst_fp32.sum sm__ops_path_tensor_src_fp16.sum sm__ops_path_tensor_src_int8.sum \
  sm__ops_path_tensor_src_tf32_dst_fp32.sum sm__ops_path_tensor_src_fp64.sum sm__ops_path_tensor_src_fp8.sum sm__inst_executed_pipe_tensor.sum \
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active)
INSTR=$(pick gpu__time_duration.sum smsp__inst_executed.sum smsp__thread_inst_executed.sum \
  l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum \
  l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum l1tex__t_requests_pipe_lsu_mem_global_op_st.sum \
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum \
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum \
  smsp__inst_executed_op_global_ld.sum smsp__inst_executed_op_global_st.sum smsp__inst_executed_op_shared_ld.sum smsp__inst_executed_op_shared_st.sum \
  lts__t_sectors.sum dram__sectors_read.sum dram__sectors_write.sum)
PEAK=$(pick sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained \
  sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained dram__bytes.sum.peak_sustained lts__t_bytes.sum.peak_sustained \
  l1tex__t_bytes.sum.peak_sustained sm__inst_executed.sum.peak_sustained sm__cycles_elapsed.avg.per_second dram__cycles_elapsed.avg.per_second \
  sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained device__attribute_multiprocessor_count device__attribute_max_shared_memory_per_block)
echo "HIER=$HIER" > "$W/cap/metric-lists.txt"; echo "INSTR=$INSTR" >> "$W/cap/metric-lists.txt"; echo "PEAK=$PEAK" >> "$W/cap/metric-lists.txt"
NCU="ncu --clock-control none --csv"
log captures
$NCU --metrics "$HIER" "$W/suite" triad 33554432 3 > "$W/cap/triad_hier_details.csv" 2>&1
$NCU --page raw --metrics "$HIER" "$W/suite" triad 33554432 3 > "$W/cap/triad_hier_raw.csv" 2>&1
$NCU --print-units base --metrics "$HIER" "$W/suite" daxpy 33554432 2 > "$W/cap/daxpy_hier_base.csv" 2>&1
for k in "dfma_peak 2000 2" "ffma_peak 4000 2" "hfma2_peak 4000 2" "bf16_gemm 2048 2" "dgemm 1024 2" "cos_unfused 4194304 2" "cos_fused 4194304 2" "normalize_naive 2097152 2" "normalize_warp 2097152 2"; do
  set -- $k; $NCU --metrics "$HIER" "$W/suite" $k > "$W/cap/$1_hier.csv" 2>&1
done
for k in "triad 33554432 2" "strided_store 16777216 2" "unit_store 16777216 2" "dgemm 1024 2" "normalize_warp 2097152 2" "normalize_naive 2097152 2"; do
  set -- $k; $NCU --metrics "$INSTR" "$W/suite" $k > "$W/cap/$1_instr.csv" 2>&1
done
$NCU --metrics "$PEAK" "$W/suite" triad 1048576 1 > "$W/cap/peaks.csv" 2>&1
$NCU --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalDoubleRooflineChart "$W/suite" dgemm 1024 1 > "$W/cap/dgemm_ncu_roofline_sections.csv" 2>&1
# ncu's own output with program output and ==PROF== lines mixed in (no --csv redirect of stderr separation)
ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum "$W/suite" cos_unfused 1048576 2 > "$W/cap/cos_unfused_mixed.csv" 2>&1
ncu --clock-control none --csv --metrics gpu__time_duration.sum -k regex:nomatch "$W/suite" triad 1024 1 > "$W/cap/nomatch.txt" 2>&1
ls -la "$W/cap"; wc -l "$W/cap"/*.csv | tail -1
head -5 "$W/cap/triad_hier_details.csv"; head -3 "$W/cap/triad_hier_raw.csv" | cut -c1-600
(cd "$W" && tar czf "$OUT/captures.tar.gz" cap)
