#!/usr/bin/env bash
# The kernel suite per call against likwid-bench at the same working set (the suite's L1/L2
# target: ≥ 0.80 of likwid's figure), and the suite's DRAM-sized streams against the DRAM
# ceiling of `roofline ceilings` (target ≥ 0.90). One thread, pinned to the same CPU, each
# figure the median of RUNS (default 5) interleaved runs of ours and the peer's.
#
#   RUNS=5 scripts/compare-suite.sh
#   PARTS=cache RUNS=9 scripts/compare-suite.sh     # only the L1/L2 table (cache, dram, stream)
#   PARTS=dram THREADS=16 scripts/compare-suite.sh  # the DRAM table on 16 threads (the tool pins them)
#
# Ours: `roofline run K --bytes S` (one call per kernel invocation, calls batched to ≥ 20 µs
# per timed sample, core bytes: what the loads and stores move, no write-allocate, as likwid
# counts). Peers: likwid-bench load/copy/stream (STREAM triad a = b + s·c: the same three
# streams as our triad), 256-bit kernels where the CPU has no AVX-512.
# DRAM: each stream kernel's DRAM traffic (write-allocate included, analytic) at 4 × the LLC
# against the DRAM ceiling the profile uses (traffic convention, the ceilings' best DRAM
# figure), and against the ceiling of the same access pattern measured in every run.
# DRAM peers: copy, scale, add and triad against a McCalpin-STREAM-style program
# (scripts/stream.c, cc -O3 -march=native -fopenmp, one thread, the same working set),
# counted the same (STREAM) way: core bytes, no write-allocate. STREAM_BIN=: a prebuilt one.
# Needs likwid-bench (apt-get install likwid) for the L1/L2 part; exit 2 without it.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
THREADS=${THREADS:-1}   # the DRAM table only; the cache and STREAM tables are one thread
PARTS=" ${PARTS:-cache dram stream} "
command -v likwid-bench >/dev/null || { echo "compare-suite: likwid-bench not found; hint: apt-get install likwid" >&2; exit 2; }
R=${ROOFLINE:-target/release/roofline}   # ROOFLINE=: a prebuilt binary (a host without cargo)
[ -x "$R" ] || cargo build --release --bin roofline >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${STREAM_BIN:-}" ]; then cp "$STREAM_BIN" "$tmp/stream"; else cc -O3 -march=native -fopenmp scripts/stream.c -o "$tmp/stream"; fi
cache_bytes() { # level -> bytes of one instance (sysfs)
  local f
  for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    [ "$(cat "$d/level")" = "$1" ] && [ "$(cat "$d/type")" != Instruction ] && f=$(cat "$d/size")
  done
  case "${f:-0}" in *K) echo $(( ${f%K} * 1024 )) ;; *M) echo $(( ${f%M} * 1048576 )) ;; *) echo 0 ;; esac
}
L1=$(( $(cache_bytes 1) / 2 )); [ "$L1" -gt 0 ] || L1=16384
L2=$(( $(cache_bytes 2) / 2 )); [ "$L2" -gt 0 ] || L2=262144
LLC=$(cache_bytes 3); [ "$LLC" -gt 0 ] || LLC=$(cache_bytes 2)
DRAM=$(( LLC * 4 )); [ "$DRAM" -ge $((128 << 20)) ] || DRAM=$((128 << 20))
if grep -qw avx512f /proc/cpuinfo; then ISA=avx512; else ISA=avx; fi
CPU=$(taskset -pc $$ | awk -F': ' '{print $2}' | cut -d, -f1 | cut -d- -f1)
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# The ratio: the median of each run's ours/peer (runs are interleaved, so a run and its peer
# see the same host load; the per-run ratio cancels much of it, the medians alone do not).
ratio_median() { paste "$1" "$2" | awk '$2 > 0 {print $1 / $2}' | median; }
ours() { # kernel bytes level -> GB/s at that level
  taskset -c "$CPU" "$R" run "$1" --bytes "$2" --min-time 0.3 --json 2>/dev/null |
    python3 -c "import json,sys; p=json.load(sys.stdin)['points'][0]; print(p['gbs'].get('$3', 0))"
}
peer() { # test bytes -> GB/s (likwid's working set string: bytes, one thread)
  likwid-bench -t "$1" -w "S0:${2}B:1" 2>/dev/null | awk '$1 == "MByte/s:" {print $2/1000}'
}

if [[ $PARTS == *" cache "* ]]; then
echo "| kernel | working set | roofline GB/s (median) | likwid-bench GB/s (median) | ratio (median of per-run ratios) |"
echo "|---|---|---|---|---|"
for ws in $L1 $L2; do
  for pair in load:load_$ISA copy:copy_$ISA triad:stream_${ISA}; do
    k=${pair%%:*}; t=${pair#*:}
    : >"$tmp/o"; : >"$tmp/p"
    for _ in $(seq "$RUNS"); do ours "$k" "$ws" core >>"$tmp/o"; peer "$t" "$ws" >>"$tmp/p"; done
    o=$(median <"$tmp/o"); p=$(median <"$tmp/p"); r=$(ratio_median "$tmp/o" "$tmp/p")
    awk -v k="$k" -v w="$ws" -v o="$o" -v p="$p" -v t="$t" -v r="$r" 'BEGIN {printf "| %s | %d B | %.1f | %.1f (%s) | %.3f |\n", k, w, o, p, t, r}'
  done
done

fi

# DRAM: against the best DRAM figure of a quick ceilings run (the roof the profile draws,
# traffic convention), and against the ceiling of the same access pattern measured side by
# side in every run (`ceilings --figure P:BYTES`, core GB/s × P's traffic factor), as the median
# of per-run ratios. The ceilings measure the suite's own loops, so triad, daxpy and copy each
# have theirs; dot and load (reads only) ↔ load: a read-only stream on one core cannot reach a
# roof that counts writes.
if [[ $PARTS == *" dram "* ]]; then
"$R" ceilings --quick --refresh --threads "$THREADS" --json 2>/dev/null >"$tmp/ceil.json" || true
roof_traffic=$(python3 - "$tmp/ceil.json" "$THREADS" <<'PY'
import json, sys
try:
    c = json.load(open(sys.argv[1]))
except Exception:
    print(0); sys.exit()
bw = [b for b in c.get("bandwidth", []) if b.get("level") == "DRAM" and b.get("threads") == int(sys.argv[2])]
# the figure with write-allocate where the kernel stores (the traffic the DRAM serves)
print(max([b.get("gbs_write_allocate") or b["gbs"] for b in bw] or [0]))
PY
)
pin() { if [ "$THREADS" = 1 ]; then taskset -c "$CPU" "$@"; else "$@"; fi; }
ours_dram() { # kernel total-bytes -> DRAM GB/s of THREADS threads (--bytes is per thread)
  pin "$R" run "$1" --bytes $(( $2 / THREADS )) --threads "$THREADS" --min-time 0.3 --json 2>/dev/null |
    python3 -c "import json,sys; p=json.load(sys.stdin)['points'][0]; print(p['gbs'].get('dram', 0))"
}
ceiling_figure() { # pattern total-bytes -> DRAM traffic GB/s of that ceiling kernel
  local core factor
  core=$(pin "$R" ceilings --figure "$1:$2" --threads "$THREADS" 2>/dev/null || echo 0)
  case $1 in copy) factor=1.5 ;; triad) factor=1.3333333 ;; *) factor=1 ;; esac
  awk -v c="$core" -v f="$factor" 'BEGIN {print c * f}'
}
echo
echo "DRAM ceiling ($THREADS thread(s), quick ceilings, traffic convention): $roof_traffic GB/s; working set $DRAM B in all"
echo "| kernel | DRAM GB/s (median of $RUNS) | of the DRAM ceiling | same-pattern ceiling GB/s (median) | of it (median of per-run ratios) |"
echo "|---|---|---|---|---|"
for k in triad daxpy copy dot load; do
  case $k in triad|daxpy|copy) pat=$k ;; *) pat=load ;; esac
  : >"$tmp/o"; : >"$tmp/p"
  for _ in $(seq "$RUNS"); do ours_dram "$k" "$DRAM" >>"$tmp/o"; ceiling_figure "$pat" "$DRAM" >>"$tmp/p"; done
  o=$(median <"$tmp/o"); p=$(median <"$tmp/p"); r=$(ratio_median "$tmp/o" "$tmp/p")
  awk -v k="$k" -v o="$o" -v t="$roof_traffic" -v p="$p" -v pat="$pat" -v r="$r" \
    'BEGIN {printf "| %s | %.1f | %.0f %% | %.1f (%s) | %.0f %% |\n", k, o, (t > 0 ? 100 * o / t : 0), p, pat, 100 * r}'
done
fi

# DRAM, side by side with STREAM: same kernel, working set and counting (core bytes).
[[ $PARTS == *" stream "* ]] || exit 0
echo
echo "| kernel | working set | roofline GB/s (core, median) | STREAM GB/s (median) | ratio (median of per-run ratios) |"
echo "|---|---|---|---|---|"
for k in copy scale add triad; do
  case $k in copy|scale) arrays=2 ;; *) arrays=3 ;; esac
  n=$(( DRAM / (arrays * 8) ))
  : >"$tmp/o"; : >"$tmp/p"
  for _ in $(seq "$RUNS"); do
    ours "$k" "$(( n * arrays * 8 ))" core >>"$tmp/o"
    OMP_NUM_THREADS=1 taskset -c "$CPU" "$tmp/stream" "$k" "$n" 10 >>"$tmp/p"
  done
  o=$(median <"$tmp/o"); p=$(median <"$tmp/p"); r=$(ratio_median "$tmp/o" "$tmp/p")
  awk -v k="$k" -v w="$(( n * arrays * 8 ))" -v o="$o" -v p="$p" -v r="$r" 'BEGIN {printf "| %s | %d B | %.1f | %.1f | %.3f |\n", k, w, o, p, r}'
done
