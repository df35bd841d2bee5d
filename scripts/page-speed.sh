#!/usr/bin/env bash
# How fast the report page is with many dots, measured in headless chromium: a report of N
# points (default 1000, made from the main job's fixture: its one-thread points repeated with
# their work and time scaled, so the dots spread over the chart) is written as HTML, then
# loaded RUNS times (default 5); each load records, in the page, the time from navigation to
# the end of the load event (parse, layout, the script's set-up and label check) and the
# time of each interaction with layout forced (hovering 50 dots, pinning 20, toggling a roof,
# switching to the full range and back), and, where a chart is drawn on demand (a job's rank
# dots above 64 ranks), the time from the button's press to the chart laid out.
#
#   scripts/page-speed.sh [N] [RUNS]
#   PEER=/path/to/other/roofline scripts/page-speed.sh   # the same, alternating with another build's page
#   JOB=1 scripts/page-speed.sh [RANKS] [RUNS]          # a job's page: RANKS ranks (default 1000) on
#                                                       # nodes of 8, merged by `report merge` (PEER too)
#
# Prints the page's size, then per run: load ms, hover/pin median and max ms, toggle and
# zoom ms; with PEER, the other page's load time in the same run and the ratio. The target
# (docs/reports.md): under 200 ms for 1,000 points on 2 vCPUs. Install the browser with
# `apt-get install -y chromium`.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
RUNS=${2:-5}
R=${ROOFLINE:-${CARGO_TARGET_DIR:-target}/release/roofline}
[ -x "$R" ] || cargo build --release --bin roofline
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
[ -n "$browser" ] || { echo "page-speed: no chromium found; hint: apt-get install -y chromium" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "${JOB:-}" ]; then
  # A job of N ranks, 8 a node, made from a recorded rank file (as benches/job_merge.rs does).
  python3 - "$N" tests/fixtures/jobs/two-nodes/genoa-a-r0.json "$work/job" <<'PY'
import json, os, sys
n, src, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
base = json.load(open(src))
os.makedirs(out)
for r in range(n):
    d = json.loads(json.dumps(base))
    host, local = f"node{r // 8}", r % 8
    d["environment"]["job"].update(rank=r, size=n, local_rank=local, node=host, dram="node" if local == 0 else "none")
    for p in d["points"]:
        p["flops"]["total"] = 1000.0 + r
        p["seconds"] = 1e-3 * (1 + r % 7)
        if local != 0:
            p["bytes"].pop("dram", None)
    json.dump(d, open(f"{out}/{host}-r{r}.json", "w"))
PY
  "$R" report merge "$work/job" -o "$work/page.html" >/dev/null 2>&1
  echo "page-speed: job of $N ranks: $(stat -c %s "$work/page.html") bytes"
else
python3 - "$N" tests/fixtures/reports/main-job.json "$work/many.json" <<'PY'
import json, random, sys
n, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
r = json.load(open(src))
base = [p for p in r["points"] if p.get("threads") == 1 and p["flops"].get("total", 0) > 0]
r["ceilings_by_threads"] = []
rng = random.Random(42)
points = []
for k in range(n):
    p = json.loads(json.dumps(base[k % len(base)]))
    w, t = 10 ** rng.uniform(-1, 1), 10 ** rng.uniform(-1, 1)
    p["name"] = f"{p['name']}#{k}"
    fl = p["flops"]
    for key in ("total", "fma"):
        if isinstance(fl.get(key), (int, float)):
            fl[key] *= w
    fl["by_class"] = {c: v * w for c, v in fl.get("by_class", {}).items()}
    p["seconds"] *= t
    p["seconds_samples"] = [s * t for s in p.get("seconds_samples", [])]
    for key in ("gflops", "gbs", "ai", "bound", "roof_fraction"):
        p.pop(key, None)
    points.append(p)
r["points"] = points
json.dump(r, open(dst, "w"))
PY
"$R" report show "$work/many.json" -o "$work/page.html" >/dev/null 2>&1
echo "page-speed: $N points: $(stat -c %s "$work/page.html") bytes"
fi
if [ -n "${PEER:-}" ]; then
  if [ -n "${JOB:-}" ]; then
    "$PEER" report merge "$work/job" -o "$work/peer.html" >/dev/null 2>&1
  else
    "$PEER" report show "$work/many.json" -o "$work/peer.html" >/dev/null 2>&1
  fi
  echo "page-speed: peer page ($PEER): $(stat -c %s "$work/peer.html") bytes"
fi

# The probe: runs inside the load event, synchronously, each step followed by a forced
# layout (getBoundingClientRect); performance.now() is the browser's real clock (no
# virtual time).
probe='<script>
window.addEventListener("load", function () {
  var out = { load: performance.now(), ready: window.__ready || 0 };
  function med(v) { v = v.slice().sort(function (a, b) { return a - b; }); return v[Math.floor(v.length / 2)]; }
  var box = document.querySelector(".chartbox");
  if (box) {
    var svg = box.querySelector("svg.chart"), tip = box.querySelector(".tip"), pin = box.querySelector(".pin");
    var dots = svg.querySelectorAll("g.frame .dots circle"), hov = [], pins = [];
    for (var k = 0; k < 50; k++) {
      var d = dots[(k * 7919) % dots.length], r = d.getBoundingClientRect();
      var o = { bubbles: true, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, view: window };
      var t0 = performance.now();
      d.dispatchEvent(new MouseEvent("mouseover", o)); tip.getBoundingClientRect();
      hov.push(performance.now() - t0);
      d.dispatchEvent(new MouseEvent("mouseout", o));
      if (k < 20) { t0 = performance.now(); d.dispatchEvent(new MouseEvent("click", o)); pin.getBoundingClientRect(); pins.push(performance.now() - t0); }
    }
    var cb = box.querySelector(".legend input[data-roof]"), t1 = performance.now();
    cb.click(); svg.getBoundingClientRect(); out.toggle = performance.now() - t1;
    var z = box.querySelector("button.zoom"); t1 = performance.now();
    z.click(); svg.getBoundingClientRect(); z.click(); svg.getBoundingClientRect(); out.zoom = (performance.now() - t1) / 2;
    out.hover_med = med(hov); out.hover_max = Math.max.apply(null, hov);
    out.pin_med = med(pins); out.pin_max = Math.max.apply(null, pins);
    out.dots = dots.length;
  }
  var draw = document.querySelector("section.later button.draw");
  if (draw) {
    var t2 = performance.now();
    draw.click();
    var later = draw.closest("section.later");
    later.querySelector("svg.chart").getBoundingClientRect();
    out.draw = performance.now() - t2;
    out.drawn = later.querySelectorAll("g.frame .dots circle").length;
  }
  document.body.setAttribute("data-speed", JSON.stringify(out));
});
</script></body>'
# "ready": when the charts are set up (a mark right after the page's script, which follows
# the charts; the folded sections are read after it).
for f in page peer; do
  [ -f "$work/$f.html" ] || continue
  python3 - "$work/$f.html" "$work/$f-probed.html" "$probe" <<'PY'
import sys
s = open(sys.argv[1]).read()
at = s.find("<details>")
if at >= 0 and "chartbox" in s[:at]:
    s = s[:at] + "<script>window.__ready = performance.now();</script>" + s[at:]
open(sys.argv[2], "w").write(s.replace("</body>", sys.argv[3], 1))
PY
done

measure() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size=1366,768 --dump-dom "file://$work/$1-probed.html" 2>/dev/null \
    | grep -o 'data-speed="[^"]*"' | sed 's/^data-speed="//; s/"$//; s/&quot;/"/g'
}
for run in $(seq 1 "$RUNS"); do
  line=$(measure page | python3 -c 'import json,sys; d=json.load(sys.stdin); print("charts ready %.0f ms, load %.0f ms, hover median %.1f max %.1f ms, pin median %.1f max %.1f ms, roof toggle %.1f ms, zoom %.1f ms (%d dots)" % (d["ready"], d["load"], d["hover_med"], d["hover_max"], d["pin_med"], d["pin_max"], d["toggle"], d["zoom"], d["dots"]) + ("; dots drawn on demand in %.0f ms (%d dots)" % (d["draw"], d["drawn"]) if "draw" in d else ""))')
  if [ -f "$work/peer-probed.html" ]; then
    peer=$(measure peer | python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["load"])')
    load=$(echo "$line" | sed 's/.*, load \([0-9]*\) ms.*/\1/')
    line="$line; peer load $peer ms, ratio $(python3 -c "print('%.2f' % ($load / max($peer, 1)))")"
  fi
  echo "run $run: $line"
done
