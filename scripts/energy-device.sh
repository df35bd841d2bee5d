#!/usr/bin/env bash
# Energy figures on a host with perf's `power` PMU (the GPU hosts: an Emerald Rapids guest,
# `energy-psys` only), for docs/energy.md: the raw sysfs tree (a recorded fixture), the suite
# kernels with --energy (ROUNDS alternations, every core), the energy ceilings and the main
# job, as JSON under $OUT (default energy-out/), packed into $PACK when set. Each stage has
# its own time limit so that what ran comes back. Build here first (`cargo build --release
# --bin roofline`, copied to .gpu-bin/); run there: `bash scripts/energy-device.sh [ROUNDS]`.
set -u
cd "$(dirname "$0")/.."
bin=${ROOFLINE_BIN:-$PWD/.gpu-bin/roofline}
out=${OUT:-energy-out}
rounds=${1:-5}
export XDG_CACHE_HOME=$out/cache
mkdir -p "$out/tree/power"
pack() { if [ -n "${PACK:-}" ]; then tar czf "$PACK.part" --exclude=./cache -C "$out" . && mv "$PACK.part" "$PACK"; fi; }
if [ -d /sys/bus/event_source/devices/power ]; then
  (cd /sys/bus/event_source/devices/power && for f in type cpumask $(find format events -type f); do
    mkdir -p "$out/tree/power/$(dirname "$f")"
    cat "$f" > "$out/tree/power/$f"
  done)
fi
{ cat /proc/sys/kernel/perf_event_paranoid; id -u; nproc; date -u +%FT%TZ; } > "$out/host.txt"
e=(--energy --idle-seconds 0.3)
r=(--threads all --min-time 0.3 --no-verify "${e[@]}")
stage() {
  local limit=$1 rc t0
  shift
  t0=$(date +%s%N)
  timeout "$limit" "$@" 2>> "$out/stderr.txt"
  rc=$?
  echo "rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms: $*" >> "$out/host.txt"
}
for i in $(seq "$rounds"); do
  stage 10 $bin run dgemm --variant avx512 --size 1024 "${r[@]}" -o "$out/dgemm-$i.json" > /dev/null
  stage 10 $bin run bf16_gemm --variant amx --size 1024 "${r[@]}" -o "$out/bf16amx-$i.json" > /dev/null
  stage 10 $bin run triad --bytes 256MiB "${r[@]}" -o "$out/triad-$i.json" > /dev/null
  pack
done
stage 45 $bin ceilings --quick --threads all "${e[@]}" --json > "$out/ceilings.json"
pack
stage 25 $bin profile "${e[@]}" --kernels triad,dgemm --threads all -o "$out/profile" > "$out/profile.txt"
pack
cat "$out/host.txt"; tail -5 "$out/stderr.txt"
