#!/usr/bin/env bash
# The trace backend's cost on a real program, against the program run natively and (with OLD)
# against another roofline build, interleaved per round so that load swings hit both alike.
#
#   scripts/compare-trace-speed.sh -- python3 mm.py 256
#   OLD=/tmp/roofline-before R=5 scripts/compare-trace-speed.sh -- python3 -c pass
#
# Per round: the native run, then each build's `measure --backend trace` (its own native timing
# run included). Prints per run the CPU seconds (user + system of the whole process tree) and
# the wall seconds, then the medians and the median of the per-round ratios traced / native.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "compare-trace-speed: no command; hint: scripts/compare-trace-speed.sh -- python3 -c pass" >&2; exit 2; }
NEW=${NEW:-target/release/roofline}
R=${R:-5}
[ -x "$NEW" ] || { echo "compare-trace-speed: NEW=$NEW is not an executable roofline; hint: cargo build --release" >&2; exit 2; }
if [ -n "${OLD:-}" ] && [ ! -x "$OLD" ]; then
  echo "compare-trace-speed: OLD=$OLD is not an executable; hint: OLD=/path/to/roofline-before" >&2; exit 2
fi
out=$(mktemp); rep=$(mktemp -d)
trap 'rm -rf "$out" "$rep"' EXIT
timed() { # label, command...
  local label=$1; shift
  /usr/bin/time -f "$label %U %S %e" -o "$rep/t" "$@" >/dev/null 2>"$rep/err" || { echo "compare-trace-speed: $label failed:" >&2; tail -3 "$rep/err" >&2; exit 1; }
  cat "$rep/t" >>"$out"
}
for r in $(seq "$R"); do
  timed native "$@"
  [ -n "${OLD:-}" ] && timed old "$OLD" measure --backend trace -o "$rep/old.json" -- "$@"
  timed new "$NEW" measure --backend trace -o "$rep/new.json" -- "$@"
  echo "round $r done" >&2
done
python3 - "$out" <<'P'
import collections, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
for label, u, s, e in rows:
    by[label].append((float(u) + float(s), float(e)))
for label, v in by.items():
    print(f"{label:6} cpu {' '.join(f'{c:.2f}' for c, _ in v)}  wall {' '.join(f'{w:.2f}' for _, w in v)}")
nat = by["native"]
for label in ("old", "new"):
    if label not in by:
        continue
    cpu = [c / max(n[0], 0.01) for (c, _), n in zip(by[label], nat)]
    wall = [w / max(n[1], 0.01) for (_, w), n in zip(by[label], nat)]
    print(f"{label}: median cpu {statistics.median(c for c, _ in by[label]):.2f} s, ratio to native: cpu {statistics.median(cpu):.0f}x, wall {statistics.median(wall):.0f}x")
if "old" in by:
    r = [n[0] / o[0] for o, n in zip(by["old"], by["new"])]
    print(f"new / old cpu per round: {' '.join(f'{x:.2f}' for x in r)}; median {statistics.median(r):.2f}")
P
