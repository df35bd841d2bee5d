#!/usr/bin/env bash
# Our ceilings against their peers, side by side on the same threads and working sets.
# Each figure is the median of RUNS interleaved runs (ours, peer, ours, peer, …), so that
# load from other processes hits both alike. Prints a Markdown table with the ratios.
#
#   scripts/compare-peers.sh            # RUNS=5 THREADS=1
#   RUNS=7 THREADS=2 scripts/compare-peers.sh
#   RUNS=11 FIGURES="peak load_L1" scripts/compare-peers.sh   # only these figures
#
# Peers: likwid-bench (peakflops_avx512_fma, load_avx512) and a STREAM-style triad
# (scripts/stream.c, cc -O3 -march=native -fopenmp; STREAM counting: no write-allocate).
#
# Method, the same on both sides: `roofline ceilings --figure` reports the median of ≥ 15
# samples of about 1 ms; a likwid-bench figure (PEER_MODE=short, the default) is the median of
# PEER_REPS runs of about 1–2 ms each (-i chosen from the working set), and STREAM's is the
# median of 20 repetitions. PEER_MODE=long runs likwid-bench with its own iteration count
# (about a second, so on a shared machine its figure includes time slices of other tasks).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
PEER_MODE=${PEER_MODE:-short}
PEER_REPS=${PEER_REPS:-9}
THREADS=${THREADS:-1}
command -v likwid-bench >/dev/null || { echo "likwid-bench not found: install likwid" >&2; exit 2; }
# ROOFLINE= and STREAM_BIN=: prebuilt binaries (a host without cargo or a compiler).
R=${ROOFLINE:-./target/release/roofline}
[ -n "${ROOFLINE:-}" ] || cargo build --release --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${STREAM_BIN:-}" ]; then cp "$STREAM_BIN" "$tmp/stream"; else cc -O3 -march=native -fopenmp scripts/stream.c -o "$tmp/stream"; fi

# L1 = half of L1d, L2 = half of L2, L3 = half of L3, DRAM = 4 x L3 (per thread, as in `roofline ceilings`).
cache_bytes() { # level -> bytes of the first data/unified cache of that level (sysfs), else 0
  local d
  for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    [ "$(cat "$d/level")" = "$1" ] && [ "$(cat "$d/type")" != Instruction ] || continue
    numfmt --from=iec "$(cat "$d/size")"; return
  done
  echo 0
}
L1=$(( $(cache_bytes 1) / 2 )); [ "$L1" -gt 0 ] || L1=16384
L2=$(( $(cache_bytes 2) / 2 )); [ "$L2" -gt 0 ] || L2=524288
L3=$(( $(cache_bytes 3) / 2 )); [ "$L3" -gt 0 ] || L3=16777216
DRAM=$(( L3 * 8 ))
[ "$DRAM" -ge $((128 << 20)) ] || DRAM=$((128 << 20))

# The widest ISA both sides run here: AVX-512 where the CPU has it, else AVX2/FMA (likwid's
# `avx` kernels are 256-bit), so the comparison works on every x86-64 host.
if grep -qw avx512f /proc/cpuinfo; then LW_ISA=avx512; LW_LABEL=AVX-512; else LW_ISA=avx; LW_LABEL="AVX2 (256-bit)"; fi
PEAK_TEST=peakflops_${LW_ISA}_fma
LOAD_TEST=load_${LW_ISA}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# The ratio: the median of each run's ours/peer (runs are interleaved, so a run and its peer
# see the same host load; the per-run ratio cancels much of it, the medians alone do not).
ratio_median() { paste "$1" "$2" | awk '$2 > 0 {print $1 / $2}' | median; }
likwid_w() { echo "S0:${1}B:${THREADS}"; }

# likwid-bench: TEST WORKSET UNIT_BYTES_PER_ITERATION -> one figure (GFLOP/s or GB/s)
likwid() {
  local test=$1 w=$2 per_iter=$3 field=MByte/s
  [[ $test == peakflops* ]] && field=MFlops/s
  if [ "$PEER_MODE" = long ]; then
    likwid-bench -t "$test" -w "$w" 2>/dev/null | awk -v f="$field" '$1 == f":" {print $2/1000}'
    return
  fi
  local iters=$(( 200000000 / per_iter )); [ "$iters" -ge 2 ] || iters=2
  for _ in $(seq "$PEER_REPS"); do
    likwid-bench -t "$test" -w "$w" -i "$iters" 2>/dev/null | awk -v f="$field" '$1 == f":" {print $2/1000}'
  done | median
}

# Our threads are pinned to the first allowed CPUs; pin the peers there too.
CPUS=$(taskset -pc $$ | awk -F': ' '{print $2}' | cut -d, -f1 | awk -F- -v t="$THREADS" '{print $1 "-" $1 + t - 1}')

declare -A OURS PEER RATIO
FIGURES=${FIGURES:-peak load_L1 load_L2 load_L3 load_DRAM triad_DRAM triad_nt_DRAM}
run_pair() { # name ours-cmd peer-cmd
  local name=$1 ours=$2 peer=$3
  [[ " $FIGURES " == *" $name "* ]] || return 0
  : >"$tmp/$name.ours"; : >"$tmp/$name.peer"
  for _ in $(seq "$RUNS"); do
    eval "$ours" >>"$tmp/$name.ours"
    eval "$peer" >>"$tmp/$name.peer"
  done
  OURS[$name]=$(median <"$tmp/$name.ours")
  PEER[$name]=$(median <"$tmp/$name.peer")
  RATIO[$name]=$(ratio_median "$tmp/$name.ours" "$tmp/$name.peer")
}

# Peak DP FMA: GFLOP/s (ours also prints its measured AVX-512 clock and the theoretical peak there).
: >"$tmp/peak.clock"
run_pair peak \
  "$R ceilings --threads $THREADS --figure peak | tee -a $tmp/peak.clock | awk '{print \$1}'" \
  "likwid $PEAK_TEST S0:32kB:$THREADS 200000"
for lv in L1 L2 L3 DRAM; do
  bytes=${!lv}
  run_pair "load_$lv" \
    "$R ceilings --threads $THREADS --figure load:$((bytes * THREADS))" \
    "likwid $LOAD_TEST $(likwid_w $((bytes * THREADS))) $bytes"
done
N=$(( DRAM * THREADS / 24 ))
run_pair triad_DRAM \
  "$R ceilings --threads $THREADS --figure triad:$((N * 24))" \
  "OMP_NUM_THREADS=$THREADS OMP_PROC_BIND=close taskset -c $CPUS $tmp/stream $N 20"
run_pair triad_nt_DRAM \
  "$R ceilings --threads $THREADS --figure triad_nt:$((N * 24))" \
  "OMP_NUM_THREADS=$THREADS OMP_PROC_BIND=close taskset -c $CPUS $tmp/stream $N 20"

theo=$(awk '{print $3}' "$tmp/peak.clock" | median)
ghz=$(awk '{print $2}' "$tmp/peak.clock" | median)
pct=$(awk '{print $4}' "$tmp/peak.clock" | median)
echo "| figure (threads=$THREADS, median of $RUNS interleaved runs, peer mode $PEER_MODE) | working set | roofline | peer | ratio (median of per-run ratios) |"
echo "|---|---|---|---|---|"
row() { # name label ws unit peer-name
  [ -n "${OURS[$1]:-}" ] || return 0
  awk -v o="${OURS[$1]}" -v p="${PEER[$1]}" -v r="${RATIO[$1]}" -v l="$2" -v w="$3" -v u="$4" -v pn="$5" \
    'BEGIN {printf "| %s | %s | %.1f %s | %.1f %s (%s) | %.3f |\n", l, w, o, u, p, u, pn, r}'
}
row peak "peak DP FMA ($LW_LABEL)" "32 kB" "GFLOP/s" "likwid-bench $PEAK_TEST"
for lv in L1 L2 L3 DRAM; do row "load_$lv" "load $lv" "$(( ${!lv} * THREADS )) B" "GB/s" "likwid-bench $LOAD_TEST"; done
row triad_DRAM "triad DRAM (no write-allocate)" "$(( N * 24 )) B" "GB/s" "STREAM-style triad"
row triad_nt_DRAM "triad_nt DRAM (NT stores)" "$(( N * 24 )) B" "GB/s" "STREAM-style triad"
# % of theoretical: each peak sample's flop/cycle at the clock measured right before it on
# the same thread (a busy host slows both), against the platform table's flop/cycle.
[ -z "${OURS[peak]:-}" ] || awk -v o="${OURS[peak]}" -v t="$theo" -v g="$ghz" -v p="$pct" \
  'BEGIN {if (t > 0) printf "\npeak DP FMA: %.1f GFLOP/s; %.1f %% of the theoretical flop/cycle (theoretical %.1f GFLOP/s at the measured clock of that ISA, %.2f GHz)\n", o, p, t, g}'
