#!/usr/bin/env bash
# Two roofline builds and likwid-bench, interleaved per round on one pinned CPU: the suite's
# load/copy/triad per call at half of L1d and half of L2 (or SIZES), so a change's effect is
# measured against the peer in the same run rather than across noisy days.
#
#   OLD=/path/to/roofline-before NEW=target/release/roofline scripts/compare-builds.sh
#   CPU=5 R=9 SIZES="24576 1048576" ...
#
# Prints, per kernel and size: medians of likwid, old and new (GB/s, core bytes) and the median
# of per-round ratios to likwid. Needs likwid-bench (apt-get install likwid).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v likwid-bench >/dev/null || { echo "compare-builds: likwid-bench not found; hint: apt-get install likwid" >&2; exit 2; }
[ -n "${OLD:-}" ] && [ -x "$OLD" ] || { echo "compare-builds: OLD is not an executable roofline; hint: OLD=/path/to/roofline-before scripts/compare-builds.sh" >&2; exit 2; }
NEW=${NEW:-target/release/roofline}
CPU=${CPU:-0}; R=${R:-9}
if grep -qw avx512f /proc/cpuinfo; then V=avx512; I=avx512; else V=avx2; I=avx; fi
if [ -z "${SIZES:-}" ]; then
  SIZES=$(python3 -c 'import json,subprocess,sys
m=json.loads(subprocess.run([sys.argv[1],"machine","--json"],capture_output=True,text=True).stdout)
c={(x["level"],x["kind"]):x["size_bytes"] for x in m["caches"] if x["kind"] in ("data","unified")}
print(c[(1,"data")]//2, c[(2,"unified")]//2)' "$NEW")
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
gbs() { taskset -c "$CPU" "$1" run "$2" --bytes "$3" --variant $V --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["points"][0]["gbs"]["core"])'; }
lk() { taskset -c "$CPU" likwid-bench -t "$1" -w "S0:${2}B:1" 2>/dev/null | awk '$1=="MByte/s:" {print $2/1000}'; }
for _ in $(seq "$R"); do
  for sz in $SIZES; do
    for k in load:load_$I copy:copy_$I triad:stream_$I; do
      ours=${k%%:*}; peer=${k#*:}
      echo "$ours $sz likwid $(lk "$peer" "$sz")"
      echo "$ours $sz old $(gbs "$OLD" "$ours" "$sz")"
      echo "$ours $sz new $(gbs "$NEW" "$ours" "$sz")"
    done
  done
done >"$out"
python3 - "$out" <<'P'
import statistics, collections, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    k, sz, who, v = l.split(); d[(k, sz, who)].append(float(v))
for (k, sz) in sorted({(a, b) for a, b, _ in d}, key=lambda x: (int(x[1]), x[0])):
    L, O, N = d[(k, sz, 'likwid')], d[(k, sz, 'old')], d[(k, sz, 'new')]
    ro = statistics.median(o / l for o, l in zip(O, L)); rn = statistics.median(n / l for n, l in zip(N, L))
    print(f"{k:<6} {sz:>8} B  likwid {statistics.median(L):6.1f}  old {statistics.median(O):6.1f} ({ro:.3f})  new {statistics.median(N):6.1f} ({rn:.3f})  GB/s (ours/likwid, median of per-round ratios)")
P
