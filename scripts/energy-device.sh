#!/usr/bin/env bash
# Energy figures on a host with perf's `power` PMU (the GPU hosts: an Emerald Rapids guest,
# `energy-psys` only), for docs/energy.md: the raw sysfs tree (a recorded fixture), then the
# suite kernels, the main job and the energy ceilings with --energy, as JSON under $OUT
# (default energy-out/). Build here first (`cargo build --release --bin roofline`, copied
# to .gpu-bin/); run there: `bash scripts/energy-device.sh [ROUNDS]` (default 5).
set -u
cd "$(dirname "$0")/.."
bin=$PWD/.gpu-bin/roofline
out=${OUT:-energy-out}
rounds=${1:-5}
mkdir -p "$out/tree/power"
if [ -d /sys/bus/event_source/devices/power ]; then
  (cd /sys/bus/event_source/devices/power && for f in type cpumask $(find format events -type f); do
    mkdir -p "$out/tree/power/$(dirname "$f")"
    cat "$f" > "$out/tree/power/$f"
  done)
fi
{ cat /proc/sys/kernel/perf_event_paranoid; id -u; nproc; date -u +%FT%TZ; } > "$out/host.txt"
lscpu > "$out/lscpu.txt" 2>&1
e=(--energy --idle-seconds 0.5)
# Suite kernels, alternating, every core (the platform domain counts the whole guest).
for i in $(seq "$rounds"); do
  $bin run dgemm --variant avx512 --threads all --min-time 0.5 "${e[@]}" -o "$out/dgemm-all-$i.json" > /dev/null 2>> "$out/stderr.txt"
  $bin run bf16_gemm --variant amx --threads all --min-time 0.5 "${e[@]}" -o "$out/bf16amx-all-$i.json" > /dev/null 2>> "$out/stderr.txt"
  $bin run triad --bytes 256MiB --threads all --min-time 0.5 "${e[@]}" -o "$out/triad-all-$i.json" > /dev/null 2>> "$out/stderr.txt"
  $bin run dgemm --variant avx512 --threads 1 --min-time 0.5 "${e[@]}" -o "$out/dgemm-1-$i.json" > /dev/null 2>> "$out/stderr.txt"
done
echo "runs done $(date -u +%T)" >> "$out/host.txt"
# The main job, once, with its own ceilings cache.
XDG_CACHE_HOME=$out/cache-profile timeout 90 $bin profile "${e[@]}" --kernels triad,dgemm --threads 1,all -o "$out/profile" > "$out/profile.txt" 2>> "$out/stderr.txt"
echo "profile done $(date -u +%T) rc=$?" >> "$out/host.txt"
# Energy ceilings, each from a fresh cache (the time roofs are measured again too).
for i in $(seq "$rounds"); do
  XDG_CACHE_HOME=$out/cache-$i timeout 60 $bin ceilings --quick --threads all "${e[@]}" --json > "$out/ceilings-$i.json" 2>> "$out/stderr.txt"
  echo "ceilings $i done $(date -u +%T) rc=$?" >> "$out/host.txt"
done
rm -rf "$out"/cache-*
cat "$out/host.txt"; tail -20 "$out/stderr.txt"
