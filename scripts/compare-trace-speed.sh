#!/usr/bin/env bash
# The trace backend's cost on a real program, against the program run natively and (with OLD)
# against another roofline build, interleaved per round so that load swings hit both alike.
#
#   scripts/compare-trace-speed.sh -- python3 mm.py 256
#   OLD=/tmp/roofline-before R=5 scripts/compare-trace-speed.sh -- python3 -c pass
#   OLD=target/release/roofline OLD_ENV=ROOFLINE_TRACE_CACHE=0 NEW_ENV=ROOFLINE_TRACE_CACHE=8 \
#     scripts/compare-trace-speed.sh -- python3 -c pass     (one build, code cache off against on)
#
# OLD_ENV / NEW_ENV: VAR=VALUE words set for that build's runs only (they reach the traced
# program too: give both sides values of the same length, so that its environment's size
# does not differ).
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
  # shellcheck disable=SC2086
  [ -n "${OLD:-}" ] && timed old env ${OLD_ENV:-} "$OLD" measure --backend trace -o "$rep/old.json" -- "$@"
  # shellcheck disable=SC2086
  timed new env ${NEW_ENV:-} "$NEW" measure --backend trace -o "$rep/new.json" -- "$@"
  for b in old new; do
    [ -f "$rep/$b.json" ] && python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["points"][0]; print("W", sys.argv[2], int(p["flops"]["total"]), p["extra"]["instructions"])' "$rep/$b.json" "$b" >>"$out"
  done
  rm -f "$rep/old.json" "$rep/new.json"
  echo "round $r done" >&2
done
python3 - "$out" <<'P'
import collections, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
work = collections.defaultdict(list)
for row in rows:
    if row[0] == "W":
        work[row[1]].append(f"{row[2]} ({row[3]} instructions)")
        continue
    label, u, s, e = row
    by[label].append((float(u) + float(s), float(e)))
for label, w in work.items():
    print(f"{label:6} W per round: {', '.join(w)}")
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
