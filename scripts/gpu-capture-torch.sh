#!/usr/bin/env bash
# Runs on a GPU host (the device tool) from the repository root or beside scripts/torch/:
# real Nsight Compute captures of PyTorch workloads for tests/fixtures/ncu/:
# scripts/torch/app.py (eager ATen kernels, cuBLAS, flash attention, CUB, NVTX ranges),
# scripts/torch/gemms.py (cuBLAS GEMM set through torch.matmul) and scripts/torch/compiled.py
# (Inductor's Triton kernels). Kernel names both mangled and demangled
# (--print-kernel-base), --nvtx on. Metric lists: roofline's HIERARCHICAL_METRICS and
# INSTRUCTION_METRICS read from src/gpu/ncu.rs (or $HERE/ncu.rs), the *.peak_sustained roofs
# and device attributes. Everything lands in $OUT/torch-captures.tar.gz. Never changes clocks.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$HERE/torch; [ -f "$PY/app.py" ] || PY=$HERE
SRC=src/gpu/ncu.rs; [ -f "$SRC" ] || SRC=$HERE/ncu.rs
OUT=${OUT:-/tmp/out}; W=$(mktemp -d); C=$W/torch; mkdir -p "$C" "$OUT"
pack() { (cd "$W" && tar czf "$OUT/torch-captures.tar.gz" torch); }
# Packed after every step: a run stopped at its time limit still brings back what it made.
log() { pack; echo "== $* ($(date +%T))"; }
log host
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,clocks.sm --format=csv | tee "$C/nvidia-smi.csv"
{ ncu --version | tail -1; python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name())'; } 2>&1 | tee "$C/versions.txt"
ncu --help > "$C/ncu-help.txt" 2>&1
ncu --query-metrics --chip gh100 > "$W/q.txt" 2>&1
have() { grep -q "^$1 " "$W/q.txt" || grep -q "^$1$" "$W/q.txt"; }
pick() { local out=(); for m in "$@"; do base=${m%%.*}; if have "$base"; then out+=("$m"); else echo "missing metric: $m" >&2; fi; done; local IFS=,; echo "${out[*]}"; }
list() { awk "/^pub const $1/{on=1; next} on && /^\];/{on=0} on" "$SRC" | grep -o '"[^"]*"' | tr -d '"'; }
HIER=$(pick $(list HIERARCHICAL_METRICS))
INSTR=$(pick $(list INSTRUCTION_METRICS))
PEAK=$(pick sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained \
  sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained \
  sm__ops_path_tensor_src_fp16.sum.peak_sustained sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained \
  sm__ops_path_tensor_src_fp64.sum.peak_sustained sm__ops_path_tensor_src_fp8.sum.peak_sustained \
  dram__bytes.sum.peak_sustained lts__t_bytes.sum.peak_sustained l1tex__t_bytes.sum.peak_sustained dram__cycles_elapsed.avg.per_second)
DEV=device__attribute_display_name,device__attribute_multiprocessor_count,device__attribute_max_gpu_frequency_khz,device__attribute_max_mem_frequency_khz,device__attribute_global_memory_bus_width
{ echo "HIER=$HIER"; echo "INSTR=$INSTR"; echo "PEAK=$PEAK"; echo "DEV=$DEV"; } > "$C/metric-lists-torch.txt"
NCU="timeout 170 ncu --clock-control none --csv --nvtx"
log app mangled
$NCU --print-kernel-base mangled --metrics "$HIER,$PEAK,$DEV" python3 "$PY/app.py" > "$C/torch_app_mangled.csv" 2>&1; echo "rc=$?"
if ! grep -q "device__attribute_display_name" "$C/torch_app_mangled.csv"; then
  echo "device attributes refused; without them"; DEV=""
  $NCU --print-kernel-base mangled --metrics "$HIER,$PEAK" python3 "$PY/app.py" > "$C/torch_app_mangled.csv" 2>&1; echo "rc=$?"
fi
ALL="$HIER,$PEAK${DEV:+,$DEV}"
log app demangled
$NCU --print-kernel-base demangled --metrics "$ALL" python3 "$PY/app.py" > "$C/torch_app_demangled.csv" 2>&1; echo "rc=$?"
log gemm set
$NCU --print-kernel-base mangled --metrics "$ALL" python3 "$PY/gemms.py" 4096 1 > "$C/gemm_set_mangled.csv" 2>&1; echo "rc=$?"
$NCU --print-kernel-base demangled --metrics "$ALL" python3 "$PY/gemms.py" 4096 1 > "$C/gemm_set_demangled.csv" 2>&1; echo "rc=$?"
log gemm native times
for n in 4096 8192; do python3 "$PY/gemms.py" $n 20 time; done 2>&1 | tee "$C/gemm_native.txt"
log app instr, function names, raw page
$NCU --print-kernel-base mangled --metrics "$INSTR" python3 "$PY/app.py" > "$C/torch_app_instr_mangled.csv" 2>&1; echo "rc=$?"
$NCU --print-kernel-base function --metrics gpu__time_duration.sum python3 "$PY/app.py" > "$C/torch_app_function.csv" 2>&1; echo "rc=$?"
$NCU --page raw --print-kernel-base mangled --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum python3 "$PY/app.py" > "$C/torch_app_raw_nvtx.csv" 2>&1; echo "rc=$?"
log nvtx report
timeout 120 ncu --clock-control none --nvtx -f -o "$W/app" --metrics gpu__time_duration.sum python3 "$PY/app.py" > "$W/rep.log" 2>&1; echo "rc=$?"
ncu -i "$W/app.ncu-rep" --print-nvtx-rename kernel --csv --page raw > "$C/torch_app_nvtx_rename_raw.csv" 2>&1
ncu -i "$W/app.ncu-rep" --page details > "$C/torch_app_details.txt" 2>&1
log triton
timeout 200 ncu --clock-control none --csv --nvtx -k regex:triton --metrics "$ALL" python3 "$PY/compiled.py" > "$C/torch_triton.csv" 2>&1; echo "rc=$?"
log done
ls -la "$C"; grep -h "Kernel Name" -m1 "$C"/torch_app_raw_nvtx.csv | cut -c1-800
pack
