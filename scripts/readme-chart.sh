#!/usr/bin/env bash
# The README's picture, assets/roofline.png: the cache-aware chart of the report `roofline`
# writes (the kernel suite on this machine), drawn as a PNG by the same code as the HTML
# report's chart.
#
#   scripts/readme-chart.sh                 # profile this machine (about a minute), then draw
#   scripts/readme-chart.sh REPORT.json     # draw from an existing report (e.g. roofline-report/report.json)
#
# ROOFLINE=path picks a roofline binary (default: this checkout's release build, built if absent).
# Update the README's caption (machine, date) with what the script prints.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${ROOFLINE:-${CARGO_TARGET_DIR:-target}/release/roofline}
if [ ! -x "$R" ]; then
  cargo build --release --bin roofline
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -ge 1 ]; then
  report=$1
else
  "$R" profile -o "$work/profile" >/dev/null
  report=$work/profile/report.json
fi
"$R" plot "$report" --kind carm -o assets/roofline.png >/dev/null
python3 - "$report" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
m = r.get("machine", {})
e = r.get("environment", {})
print("machine:", m.get("brand"), "|", m.get("microarchitecture_name"), "|", m.get("threads"), "threads",
      "| hypervisor:", m.get("hypervisor"), "| measured:", e.get("timestamp"))
PY
