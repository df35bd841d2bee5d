#!/usr/bin/env bash
# dgemm n=1024 (default), 1 thread, AVX-512 (or --variant): our kernel against OpenBLAS's
# cblas_dgemm, interleaved ROUNDS times (default 7) on the same pinned CPU, min time of each
# round's 3 repetitions; prints both GFLOP/s per round and the median ratio ours/OpenBLAS.
#
# Usage: scripts/compare-dgemm.sh [N] [ROUNDS] [VARIANT] [CPU] [REPS]   (REPS per round, default 3)
# Needs: cc, libopenblas-dev (cblas.h, -lopenblas); builds target/release/roofline if absent.
# OB_DRIVER=path: use a prebuilt driver (e.g. linked with -static) instead of compiling one;
# ROOFLINE=path: a prebuilt roofline binary (a host without cargo, e.g. the GPU host).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1024}
ROUNDS=${2:-7}
VARIANT=${3:-avx512}
CPU=${4:-0}
REPS=${5:-3}

if [ -z "${OB_DRIVER:-}" ] && ! echo '#include <cblas.h>' | cc -E -x c - >/dev/null 2>&1; then
  echo "compare-dgemm: cblas.h not found (install libopenblas-dev)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/ob.c" <<'C'
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  double *a = malloc(8L * n * n), *b = malloc(8L * n * n), *c = malloc(8L * n * n);
  srand(1);
  for (long i = 0; i < (long)n * n; i++) { a[i] = rand() / (double)RAND_MAX - .5; b[i] = rand() / (double)RAND_MAX - .5; }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n); /* warm-up */
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    t = now() - t;
    if (t < best) best = t;
  }
  printf("%.6e\n", best);
  return 0;
}
C
if [ -n "${OB_DRIVER:-}" ]; then cp "$OB_DRIVER" "$work/ob"; else cc -O2 "$work/ob.c" -o "$work/ob" -lopenblas; fi
R=${ROOFLINE:-target/release/roofline}
[ -x "$R" ] || cargo build --release --bin roofline >&2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
flops=$((2 * N * N * N))
ratios=()
t_obs=()
t_uss=()
for r in $(seq 1 "$ROUNDS"); do
  t_ob=$(taskset -c "$CPU" "$work/ob" "$N" "$REPS")
  t_us=$(taskset -c "$CPU" "$R" run dgemm --size "$N" --variant "$VARIANT" --repeat "$REPS" --min-time 0 --no-verify --json |
    python3 -c 'import json,sys; p=json.load(sys.stdin)["points"][0]; print(min(p["seconds_samples"]))')
  ratio=$(python3 -c "print(f'{$t_ob/$t_us:.3f}')")
  ratios+=("$ratio")
  t_obs+=("$t_ob")
  t_uss+=("$t_us")
  python3 -c "print(f'round $r: ours {$flops/$t_us/1e9:7.2f} GFLOP/s  openblas {$flops/$t_ob/1e9:7.2f} GFLOP/s  ours/openblas {$ratio}')"
done
python3 -c "import statistics,sys; r=[float(x) for x in sys.argv[1:]]; print(f'median ours/openblas over {len(r)} rounds: {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})')" "${ratios[@]}"
# Best of all rounds for each side: the least-disturbed figure on a shared machine.
python3 -c "import sys; n=$N; h=len(sys.argv)//2; ob=min(map(float,sys.argv[1:h+1])); us=min(map(float,sys.argv[h+1:])); print(f'best of all rounds: ours {2*n**3/us/1e9:.2f} GFLOP/s, openblas {2*n**3/ob/1e9:.2f} GFLOP/s, ours/openblas {ob/us:.3f}')" "${t_obs[@]}" "${t_uss[@]}"
