#!/usr/bin/env bash
# The README's pictures: assets/roofline.png, the cache-aware chart of the report `roofline`
# writes (the kernel suite on this machine) as a PNG (the static plot's code), and
# assets/report-page.png, the first screen of that report's HTML page at 1366×768 in headless
# chromium, with the dot that takes the most time pinned (skipped, saying so, without
# chromium).
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
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [ -n "$browser" ]; then
  "$R" report show "$report" -o "$work/page.html" >/dev/null 2>&1
  # Pin the largest dot (the first drawn) once the page's script has set the chart up.
  python3 - "$work/page.html" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
pin = ('<script>window.addEventListener("load",function(){var d=document.querySelector(".chartbox .dots circle");'
       'if(d)d.dispatchEvent(new MouseEvent("click",{bubbles:true}));});</script></body>')
open(p, "w").write(s.replace("</body>", pin, 1))
PY
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$work/profile-browser" --window-size=1366,768 --screenshot="$PWD/assets/report-page.png" \
    "file://$work/page.html" >/dev/null 2>&1 || true
  [ -s assets/report-page.png ] || echo "readme-chart: no screenshot of the page was produced" >&2
else
  echo "readme-chart: no chromium: assets/report-page.png not redrawn (apt-get install -y chromium)" >&2
fi
python3 - "$report" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
m = r.get("machine", {})
e = r.get("environment", {})
print("machine:", m.get("brand"), "|", m.get("microarchitecture_name"), "|", m.get("threads"), "threads",
      "| hypervisor:", m.get("hypervisor"), "| measured:", e.get("timestamp"))
PY
