#!/usr/bin/env bash
# The trace backend's long stress run (issue #36): every multi-threaded case of
# tests/trace_stress.rs (rayon pool made before and inside regions, nested join, threads asleep
# in futex/read/nanosleep across region ends, OpenMP teams with passive and active waiting, Eigen's OpenMP GEMM)
# traced RUNS times each (default 100) with random sizes and thread counts, half of the runs idle
# and half with a CPU hog beside, every 10th also against the reference mode. Any exit status,
# output or W different from the native run, the formula or the reference fails and prints the
# seed (replay: ROOFLINE_STRESS_SEED=S scripts/trace-stress.sh RUNS).
# Run it on an otherwise idle machine: the idle half is the one that found the futex crash.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-100}"
cargo build --release --bins --examples
ROOFLINE_STRESS_RUNS="$runs" cargo test --release --test trace_stress -- --ignored --nocapture long 2>&1 \
  | grep -v '^random '
