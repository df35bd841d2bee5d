#!/usr/bin/env bash
# The GPU tests, on a GPU host that has no cargo: one command, `bash .gpu-bin/gpu-test.sh`,
# after `scripts/gpu-build.sh` here and copying (or carrying) .gpu-bin/ there. Runs the
# prebuilt gpu_device test executable (device query, suite rates, quick ceilings, ncu on our
# own run) and the roofline binary's GPU commands, each checked; prints one PASS/FAIL line
# per step and a summary; exit 0 only when every step passed.
set -uo pipefail
B=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
export ROOFLINE_BIN=$B/roofline
W=${GPU_TEST_DIR:-$(mktemp -d)}
mkdir -p "$W"
pass=0; fail=0; failed=()
step() { # step NAME CMD... : run, report PASS/FAIL with the exit status
  local name=$1; shift
  echo "== $name: $*"
  "$@"; local rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name (exit $rc)"; fail=$((fail + 1)); failed+=("$name"); fi
}
json_has() { # json_has FILE TEXT: the file exists and contains TEXT
  [ -s "$1" ] && grep -q "$2" "$1"
}
echo "== host: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
echo "== ncu: $(command -v ncu || echo 'not on PATH')"
step version "$B/roofline" --version
step gpu_device "$B/gpu_device" --test-threads=1 --nocapture
step "gpu machine --ncu" "$B/roofline" gpu machine --ncu
step "gpu run triad" "$B/roofline" gpu run triad --size 16777216 --repeat 5 -o "$W/triad.json"
step "triad report has W=2n" json_has "$W/triad.json" '"double_any_width": 33554432'
step "gpu run dgemm" "$B/roofline" gpu run dgemm --size 1024 --repeat 3 -o "$W/dgemm.json"
step "gpu measure (ncu) of gpu run" "$B/roofline" gpu measure -k triad -o "$W/measure.json" -- "$B/roofline" gpu run triad --size 4194304 --repeat 2
# 2 warm-up + 2 timed launches of 2n flops each: 4 * 2 * 4194304.
step "measured W = 4 launches x 2n" json_has "$W/measure.json" '"total": 33554432'
echo "== outputs in $W"
echo "gpu-test: $pass passed, $fail failed${failed:+ (${failed[*]})}"
[ $fail -eq 0 ]
