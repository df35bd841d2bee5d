#!/usr/bin/env bash
# The whole energy check on a GPU host, in one call (docs/energy.md). Build here first:
#     cargo build --release --bin roofline && mkdir -p .gpu-bin && cp target/release/roofline .gpu-bin/ && strip .gpu-bin/roofline
# then there (no cargo needed; .gpu-bin/ carried): `bash scripts/energy-device.sh [ROUNDS]`.
#
# 1. The host: perf's `power` PMU tree (a recorded fixture), perf_event_paranoid, CPUs, GPUs.
# 2. Does the CPU's energy counter move? scripts/rapl-raw.py reads every RAPL event raw
#    (perf_event_open, no roofline) while idle and with every CPU busy.
# 3. The GPUs: `gpu measure --energy` of a command that works every board (all boards counted,
#    each and summed), and again with CUDA_VISIBLE_DEVICES=0 (the others named as left out);
#    with GPU_CEILINGS=1 also `gpu ceilings --quick --energy` and `gpu run dgemm --energy`.
# 4. The CPU figures, only where it moved: ROUNDS alternations (default 5) of `ceilings --quick
#    --energy` (pJ/flop per ISA, pJ/byte per level, the constant power) and the main job
#    (`profile --energy`), within CPU_BUDGET seconds (default 150). Where it did not move, one
#    `measure --energy` that must refuse with exit 2 (a counter that counts nothing).
#
# Everything goes under $OUT (default energy-out/), packed into $PACK when set; each stage has
# its own time limit, so what ran comes back. The summary is host.txt (one line per stage:
# rc, milliseconds, command) and summary.txt.
set -u
cd "$(dirname "$0")/.."
bin=${ROOFLINE_BIN:-$PWD/.gpu-bin/roofline}
out=${OUT:-energy-out}
rounds=${1:-5}
cpu_budget=${CPU_BUDGET:-150}
export XDG_CACHE_HOME=$out/cache
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
[ -f scripts/cuda-libs.sh ] && . scripts/cuda-libs.sh > /dev/null
mkdir -p "$out/tree/power"
pack() { if [ -n "${PACK:-}" ]; then tar czf "$PACK.part" --exclude=./cache -C "$out" . && mv "$PACK.part" "$PACK"; fi; }
if [ -d /sys/bus/event_source/devices/power ]; then
  (cd /sys/bus/event_source/devices/power && for f in type cpumask $(find format events -type f); do
    mkdir -p "$out/tree/power/$(dirname "$f")"
    cat "$f" > "$out/tree/power/$f"
  done)
fi
{
  echo "paranoid $(cat /proc/sys/kernel/perf_event_paranoid) uid $(id -u) cpus $(nproc) $(date -u +%FT%TZ)"
  grep -m1 "model name" /proc/cpuinfo
  echo "hypervisor: $(systemd-detect-virt 2>/dev/null || grep -o hypervisor -m1 /proc/cpuinfo)"
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
} > "$out/host.txt"
stage() { # stage LIMIT CMD...: run with a time limit, its rc and milliseconds in host.txt
  local limit=$1 rc t0
  shift
  t0=$(date +%s%N)
  timeout "$limit" "$@" 2>> "$out/stderr.txt"
  rc=$?
  echo "rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms: $*" >> "$out/host.txt"
  return $rc
}
summary() { echo "$*" | tee -a "$out/summary.txt"; }

# 2. The raw counter, idle then loaded.
stage 20 python3 scripts/rapl-raw.py 3 0.25 > "$out/rapl-raw.txt"
grep '^summary\|^perf:\|^msr' "$out/rapl-raw.txt" | tee -a "$out/summary.txt"
if grep '^summary busy' "$out/rapl-raw.txt" | grep -qv ': 0 changes'; then moves=1; else moves=0; fi
summary "cpu energy counter moves under load: $moves"
pack

# 3. The GPUs (before the CPU figures, which take what time is left).
if nvidia-smi -L > /dev/null 2>&1 && python3 -c 'import torch' 2> /dev/null; then
  g=(--energy --idle-seconds 1 -k vectorized_elementwise)
  stage 90 $bin gpu measure "${g[@]}" -o "$out/gpu-all.json" -- python3 scripts/torch/every_board.py 2 > "$out/gpu-all.txt"
  summary "gpu measure, every board: rc $?"
  grep "energy: counting" "$out/stderr.txt" | tail -1 | tee -a "$out/summary.txt"
  grep -i "energy" "$out/gpu-all.txt" | head -3 | tee -a "$out/summary.txt"
  pack
  if [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then
    CUDA_VISIBLE_DEVICES=0 stage 90 $bin gpu measure "${g[@]}" -o "$out/gpu-one.json" -- python3 scripts/torch/every_board.py 2 > "$out/gpu-one.txt"
    summary "gpu measure, CUDA_VISIBLE_DEVICES=0: rc $?"
    grep "energy: counting" "$out/stderr.txt" | tail -1 | tee -a "$out/summary.txt"
    grep -i "energy" "$out/gpu-one.txt" | head -3 | tee -a "$out/summary.txt"
    pack
  fi
  if [ "${GPU_CEILINGS:-0}" = 1 ]; then
    stage 200 $bin gpu ceilings --quick --energy --json > "$out/gpu-ceilings.json"
    stage 60 $bin gpu run dgemm --size 8192 --energy -o "$out/gpu-dgemm.json" > "$out/gpu-dgemm.txt"
    pack
  fi
else
  summary "gpu: no nvidia-smi or no torch: skipped"
fi
# 4. The CPU figures, or the refusal.
e=(--energy --idle-seconds 0.5)
if [ "$moves" = 1 ]; then
  t_end=$(( $(date +%s) + cpu_budget ))
  for i in $(seq "$rounds"); do
    [ "$(date +%s)" -lt "$t_end" ] || { summary "cpu: budget spent after $((i - 1)) round(s)"; break; }
    stage 45 $bin ceilings --quick --threads all "${e[@]}" --json > "$out/ceilings-$i.json"
    stage 40 $bin profile "${e[@]}" -o "$out/profile-$i" > "$out/profile-$i.txt"
    pack
  done
else
  stage 20 $bin measure "${e[@]}" -o "$out/refused.json" -- true > /dev/null
  rc=$?
  summary "cpu: measure --energy exit $rc (2 expected: a counter that counts nothing); report written: $([ -e "$out/refused.json" ] && echo yes || echo no)"
  tail -2 "$out/stderr.txt" | tee -a "$out/summary.txt"
fi

cat "$out/host.txt"
tail -5 "$out/stderr.txt"
