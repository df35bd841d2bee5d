#!/usr/bin/env bash
# Render an HTML report in a real headless browser (Debian's chromium) at a phone-sized
# window and check that a screenshot is produced and is not blank, and that nothing makes the
# whole page scroll sideways (wide plots and tables must scroll inside their own box).
#
#   scripts/check-html.sh [REPORT.html] [SCREENSHOT.png]
#
# Without arguments it builds the release binary, writes an HTML report from the
# before/after fixtures and checks that. Install the browser with `apt-get install -y chromium`.
# The page must be self-contained: its script and styles inline, nothing fetched.
# Exit 0: screenshot produced and non-blank, no page-level horizontal overflow; 1: check
# failed; 2: no browser / bad usage. (tests/html_browser.rs checks the page's behaviour.)
set -euo pipefail
cd "$(dirname "$0")/.."

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [ -z "$browser" ]; then
  echo "check-html: no chromium found; hint: apt-get install -y chromium" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
html="${1:-}"
shot="${2:-$work/screenshot.png}"
if [ -z "$html" ]; then
  cargo build --release --quiet
  html="$work/report.html"
  ./target/release/roofline plot tests/fixtures/reports/before.json tests/fixtures/reports/after.json \
    --kind all -o "$html" >/dev/null
fi
[ -f "$html" ] || { echo "check-html: $html: no such file" >&2; exit 2; }
abs_html=$(cd "$(dirname "$html")" && pwd)/$(basename "$html")

# The page must be self-contained: no external scripts or resources.
if grep -Eqi '<script[^>]+src=|<link[^>]+href=|src="https?:|url\(https?:' "$abs_html"; then
  echo "check-html: $html references external scripts or resources" >&2
  exit 1
fi

# Page-level horizontal overflow at 390 px: headless chromium's own window is never narrower
# than 500 px, so the page is loaded into a 390 px iframe of a small probe page (the checked
# page is left as it is); the probe records the page's scroll width against its
# viewport and the widest elements not inside a box that scrolls on its own; --dump-dom
# prints the result. The page's own script runs in the frame before the probe reads it.
cp "$abs_html" "$work/page.html"
cat >"$work/probe.html" <<'PROBE'
<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="page.html" width="390" height="844" style="border:0;display:block"></iframe>
<script>
document.getElementById("f").onload = function () {
  var doc = this.contentDocument, win = this.contentWindow, d = doc.documentElement, w = d.clientWidth, bad = [];
  doc.querySelectorAll("body *").forEach(function (e) {
    var r = e.getBoundingClientRect(), p = e.parentElement, inside = false;
    for (; p && p !== doc.body; p = p.parentElement) {
      if (win.getComputedStyle(p).overflowX !== "visible") { inside = true; break; }
    }
    if (!inside && r.right > w + 1) bad.push(e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? "." + e.className.split(" ")[0] : "") + "(" + Math.round(r.right) + "px)");
  });
  document.body.setAttribute("data-overflow", d.scrollWidth + " " + w + " " + bad.slice(0, 6).join(" "));
  // Labels as the browser renders them: no two text boxes of one plot may overlap.
  var clash = [];
  doc.querySelectorAll("svg").forEach(function (svg) {
    var boxes = [];
    svg.querySelectorAll("text").forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width > 0 && t.textContent.trim() !== "") boxes.push([r, t.textContent.trim()]);
    });
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i][0], b = boxes[j][0];
      var ox = Math.min(a.right, b.right) - Math.max(a.left, b.left), oy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (ox > 1 && oy > 2) clash.push((boxes[i][1] + " / " + boxes[j][1]).replace(/\s+/g, "_"));
    }
  });
  document.body.setAttribute("data-clash", clash.length + " " + clash.slice(0, 4).join(" "));
};
</script></body></html>
PROBE
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
  --allow-file-access-from-files --user-data-dir="$work/profile" --window-size=390,844 --dump-dom \
  "file://$work/probe.html" >"$work/dom.html" 2>"$work/dom.log" || true
overflow=$(grep -o 'data-overflow="[^"]*"' "$work/dom.html" | head -1 | sed 's/^data-overflow="//; s/"$//')
if [ -z "$overflow" ]; then
  echo "check-html: could not measure the page width; browser log:" >&2
  tail -20 "$work/dom.log" >&2
  exit 1
fi
read -r scroll_w view_w offenders <<<"$overflow"
clash=$(grep -o 'data-clash="[^"]*"' "$work/dom.html" | head -1 | sed 's/^data-clash="//; s/"$//')
read -r n_clash clashes <<<"${clash:-? }"
echo "check-html: $n_clash overlapping text pair(s) in the rendered plots"
if [ "$n_clash" != "0" ]; then
  echo "check-html: rendered labels overlap: ${clashes:-?}" >&2
  exit 1
fi
echo "check-html: page width $scroll_w px in a $view_w px viewport"
if [ "$scroll_w" -gt "$view_w" ]; then
  echo "check-html: the whole page scrolls sideways on a phone ($scroll_w > $view_w px): ${offenders:-?}" >&2
  exit 1
fi

rm -f "$shot"
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
  --user-data-dir="$work/profile" --screenshot="$shot" --window-size=390,844 \
  "file://$abs_html" >"$work/browser.log" 2>&1 || true

if [ ! -s "$shot" ]; then
  echo "check-html: no screenshot produced; browser log:" >&2
  tail -20 "$work/browser.log" >&2
  exit 1
fi

# Non-blank: the PNG must hold more than a handful of distinct colours. Decode with python3's
# zlib (PNG IDAT) to avoid extra tools.
python3 - "$shot" <<'PY'
import sys, zlib, struct
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, w, h, ctype = 8, b'', 0, 0, 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos+8])
    body = data[pos+8:pos+8+n]
    if kind == b'IHDR':
        w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
bpp = {2: 3, 6: 4, 0: 1, 4: 2}.get(ctype, 4)
stride = w * bpp + 1
# Sample the unfiltered bytes of each row (filters change values, but a blank page
# compresses to a handful of distinct row contents).
rows = {raw[i*stride+1:(i+1)*stride] for i in range(h)}
distinct_bytes = len(set(raw))
print(f"check-html: screenshot {w}x{h}, {len(rows)} distinct rows, {distinct_bytes} distinct byte values")
if w != 390 or len(rows) < 20 or distinct_bytes < 16:
    print("check-html: the screenshot looks blank", file=sys.stderr)
    sys.exit(1)
PY
echo "check-html: ok ($shot)"
