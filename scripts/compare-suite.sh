#!/usr/bin/env bash
# The kernel suite per call against likwid-bench at the same working set (issue 3's L1/L2
# target: ≥ 0.80 of likwid's figure), and the suite's DRAM-sized streams against the DRAM
# ceiling of `roofline ceilings` (target ≥ 0.90). One thread, pinned to the same CPU, each
# figure the median of RUNS (default 5) interleaved runs of ours and the peer's.
#
#   RUNS=5 scripts/compare-suite.sh
#
# Ours: `roofline run K --bytes S` (one call per kernel invocation, calls batched to ≥ 20 µs
# per timed sample, core bytes: what the loads and stores move, no write-allocate, as likwid
# counts). Peers: likwid-bench load/copy/stream (STREAM triad a = b + s·c: the same three
# streams as our triad), 256-bit kernels where the CPU has no AVX-512.
# DRAM: each stream kernel's DRAM traffic (write-allocate included, analytic) at 4 × the LLC
# against the DRAM ceiling the profile uses (traffic convention, the ceilings' best DRAM
# figure), and the read-only ones also against the read-only (load) DRAM ceiling.
# Needs likwid-bench (apt-get install likwid) for the L1/L2 part; exit 2 without it.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
command -v likwid-bench >/dev/null || { echo "compare-suite: likwid-bench not found; hint: apt-get install likwid" >&2; exit 2; }
R=${ROOFLINE:-target/release/roofline}   # ROOFLINE=: a prebuilt binary (a host without cargo)
[ -x "$R" ] || cargo build --release --bin roofline >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
ours() { # kernel bytes level -> GB/s at that level
  taskset -c "$CPU" "$R" run "$1" --bytes "$2" --min-time 0.3 --json 2>/dev/null |
    python3 -c "import json,sys; p=json.load(sys.stdin)['points'][0]; print(p['gbs'].get('$3', 0))"
}
peer() { # test bytes -> GB/s (likwid's working set string: bytes, one thread)
  likwid-bench -t "$1" -w "S0:${2}B:1" 2>/dev/null | awk '$1 == "MByte/s:" {print $2/1000}'
}

echo "| kernel | working set | roofline GB/s | likwid-bench GB/s | ratio |"
echo "|---|---|---|---|---|"
for ws in $L1 $L2; do
  for pair in load:load_$ISA copy:copy_$ISA triad:stream_${ISA}; do
    k=${pair%%:*}; t=${pair#*:}
    : >"$tmp/o"; : >"$tmp/p"
    for _ in $(seq "$RUNS"); do ours "$k" "$ws" core >>"$tmp/o"; peer "$t" "$ws" >>"$tmp/p"; done
    o=$(median <"$tmp/o"); p=$(median <"$tmp/p")
    awk -v k="$k" -v w="$ws" -v o="$o" -v p="$p" -v t="$t" 'BEGIN {printf "| %s | %d B | %.1f | %.1f (%s) | %.3f |\n", k, w, o, p, t, (p > 0 ? o / p : 0)}'
  done
done

# DRAM ceilings: the cached quick ceilings (measured if absent), traffic convention and load.
"$R" ceilings --quick --refresh --json 2>/dev/null >"$tmp/ceil.json" || true
read -r roof_traffic roof_load < <(python3 - "$tmp/ceil.json" <<'PY'
import json, sys
try:
    c = json.load(open(sys.argv[1]))
except Exception:
    print(0, 0); sys.exit()
bw = [b for b in c.get("bandwidth", []) if b.get("level") == "DRAM" and b.get("threads") == 1]
def traffic(b):
    # the figure with write-allocate where the kernel stores (the traffic the DRAM serves)
    return b.get("gbs_write_allocate") or b["gbs"]
print(max([traffic(b) for b in bw] or [0]), max([b["gbs"] for b in bw if b.get("kernel") == "load"] or [0]))
PY
)
echo
echo "DRAM ceilings (1 thread): traffic $roof_traffic GB/s, read-only (load) $roof_load GB/s; working set $DRAM B"
echo "| kernel | DRAM GB/s (median of $RUNS) | of the DRAM ceiling | of the read-only ceiling |"
echo "|---|---|---|---|"
for k in triad daxpy copy dot load; do
  : >"$tmp/o"
  for _ in $(seq "$RUNS"); do ours "$k" "$DRAM" dram >>"$tmp/o"; done
  o=$(median <"$tmp/o")
  awk -v k="$k" -v o="$o" -v t="$roof_traffic" -v l="$roof_load" \
    'BEGIN {printf "| %s | %.1f | %.0f %% | %s |\n", k, o, (t > 0 ? 100 * o / t : 0), ((k == "dot" || k == "load") && l > 0 ? sprintf("%.0f %%", 100 * o / l) : "-")}'
done
