//! The report page in a real browser (Debian's headless `chromium`): the chart's top inside
//! the first 768 px of a 1366×768 window and the whole chart on that screen, hovering a dot
//! shows its numbers, a click pins them, a legend toggle hides a roof, no two text boxes of
//! the chart overlap as the browser renders them (in every frame and with every roof shown),
//! and no console error. The page is loaded with a probe script injected (one at the top of
//! its head that records errors, one after the page's own script that drives it with DOM
//! events and writes its findings into the DOM); `--dump-dom` prints them.
//!
//! Skipped, with one line saying so, where no chromium is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|b| std::env::split_paths(&path).map(move |d| d.join(b)))
        .find(|p| p.is_file())
}

const EARLY: &str = r#"<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) { window.__errors.push("rejection: " + e.reason); });
(function () { var ce = console.error; console.error = function () { window.__errors.push("console.error: " + Array.prototype.join.call(arguments, " ")); return ce.apply(console, arguments); }; })();
</script>"#;

const PROBE: &str = r#"<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = { errors: window.__errors, steps: [] };
  function visibleTexts(svg) {
    var frame = Array.prototype.filter.call(svg.querySelectorAll("g.frame"), function (g) { return g.style.display !== "none"; })[0];
    return Array.prototype.map.call(frame.querySelectorAll("text"), function (t) { return [t, t.getBoundingClientRect()]; })
      .filter(function (p) { return p[1].width > 0 && p[1].height > 0; });
  }
  function clashes(svg, state) {
    var b = visibleTexts(svg), bad = [];
    for (var i = 0; i < b.length; i++) for (var j = i + 1; j < b.length; j++) {
      var r = b[i][1], s = b[j][1];
      var ox = Math.min(r.right, s.right) - Math.max(r.left, s.left), oy = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
      if (ox > 0.5 && oy > 0.5) bad.push(state + ": " + b[i][0].textContent + " / " + b[j][0].textContent);
    }
    out.steps.push(state + " " + b.length + " texts");
    return bad;
  }
  try {
    var box = document.querySelector(".chartbox"), svg = box.querySelector("svg.chart");
    var r = svg.getBoundingClientRect();
    out.chart_top = r.top + window.scrollY; out.chart_bottom = r.bottom + window.scrollY; out.viewport = [window.innerWidth, window.innerHeight];
    out.overlaps = clashes(svg, "opened");
    // Hover the largest dot where the browser hit-tests it (nothing drawn over it).
    var frame = svg.querySelector("g.frame"), dot = frame.querySelector(".dots circle");
    var d = dot.getBoundingClientRect(), cx = d.left + d.width / 2, cy = d.top + d.height / 2;
    var hit = document.elementFromPoint(cx, cy);
    // (A smaller dot drawn over it is hovered instead.)
    out.hit_is_dot = !!(hit && hit.classList && hit.classList.contains("dot"));
    if (out.hit_is_dot) dot = hit;
    var opts = { bubbles: true, clientX: cx, clientY: cy, view: window };
    (hit || dot).dispatchEvent(new MouseEvent("mouseover", opts));
    var tip = box.querySelector(".tip");
    out.tip_shown = !tip.hidden; out.tip = tip.textContent;
    var data = JSON.parse(document.getElementById(svg.id + "-data").textContent).dots[+dot.getAttribute("data-i")];
    out.dot_name = data.n; out.dot_rate = data.tip.filter(function (kv) { return /FLOP|OP\/s/.test(kv[0]); }).map(function (kv) { return kv[1]; })[0];
    (hit || dot).dispatchEvent(new MouseEvent("mouseout", opts));
    out.tip_hidden_after = tip.hidden;
    (hit || dot).dispatchEvent(new MouseEvent("click", opts));
    var pin = box.querySelector(".pin");
    out.pin_shown = !pin.hidden; out.pin = pin.textContent;
    out.pinned_marked = svg.querySelectorAll(".dot.pinned").length;
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
    out.pin_hidden_after_escape = pin.hidden;
    // Legend: uncheck the first shown roof; its line must disappear from the chart.
    var cb = box.querySelector(".legend input[data-roof]:checked"), key = cb.getAttribute("data-roof");
    function shownLines() {
      return Array.prototype.filter.call(svg.querySelectorAll('line.roof[data-roof="' + key + '"]'), function (l) { return getComputedStyle(l).display !== "none" && l.getBoundingClientRect().width + l.getBoundingClientRect().height > 0; }).length;
    }
    out.toggled_roof = key; out.roof_lines_before = shownLines();
    cb.click();
    out.roof_lines_after = shownLines();
    cb.click();
    out.roof_lines_again = shownLines();
    // Every roof on, then the full range: still no overlapping text.
    var every = box.querySelector("input.every");
    if (every) { every.click(); out.hidden_roofs_shown = svg.querySelectorAll('line.roof[style*="display: none"]').length; }
    out.overlaps = out.overlaps.concat(clashes(svg, "all roofs"));
    box.querySelector("button.zoom").click();
    out.frame_after_zoom_click = Array.prototype.filter.call(svg.querySelectorAll("g.frame"), function (g) { return g.style.display !== "none"; })[0].getAttribute("data-frame");
    out.hidden_in_full = svg.querySelectorAll('g.frame[data-frame="full"] line.roof[style*="display: none"]').length;
    out.overlaps = out.overlaps.concat(clashes(svg, "full range, all roofs"));
    if (every) every.click();
    out.overlaps = out.overlaps.concat(clashes(svg, "full range"));
    out.labels_hidden_by_recheck = svg.querySelectorAll("text.lbl.clash").length;
  } catch (e) { out.errors.push("probe: " + e.message + " " + e.stack); }
  out.errors = window.__errors;
  document.body.setAttribute("data-probe", JSON.stringify(out));
}, 50); });
</script>"#;

/// Load `page` with the probes in headless chromium at 1366×768; the probe's findings.
fn probe(chromium: &Path, page: &Path, work: &Path) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    let html = html
        .replacen("<head>", &format!("<head>{EARLY}"), 1)
        .replacen("</body>", &format!("{PROBE}</body>"), 1);
    let probed = work.join("probed.html");
    std::fs::write(&probed, html).unwrap();
    let out = Command::new("timeout")
        .arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1366,768",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", work.join("profile").display()))
        .arg(format!("file://{}", probed.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom
        .find("data-probe=\"")
        .unwrap_or_else(|| panic!("no probe result; browser said: {}", String::from_utf8_lossy(&out.stderr)));
    let rest = &dom[at + "data-probe=\"".len()..];
    let raw = &rest[..rest.find('"').unwrap()];
    let json = raw
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("probe result not JSON ({e}): {json}"))
}

fn check_page(chromium: &Path, page: &Path, work: &Path, what: &str) -> serde_json::Value {
    let r = probe(chromium, page, work);
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    assert_eq!(r["errors"], serde_json::json!([]), "{what}: errors in the page: {}", r["errors"]);
    // A 1366×768 window: its viewport is shorter by the browser's own bars, as on a laptop.
    let view_h = r["viewport"][1].as_f64().unwrap_or(0.0);
    assert_eq!(r["viewport"][0], 1366, "{what}: the window is not 1366 px wide");
    assert!(view_h > 500.0 && view_h <= 768.0, "{what}: viewport {}", r["viewport"]);
    assert!(
        f("chart_top") < 768.0,
        "{what}: the chart starts at {} px, below the first screen",
        f("chart_top")
    );
    assert!(
        f("chart_bottom") <= view_h,
        "{what}: the chart ends at {} px, past the first screen ({view_h} px)",
        f("chart_bottom")
    );
    assert_eq!(
        r["hit_is_dot"], true,
        "{what}: something other than a dot is drawn over the largest dot"
    );
    assert_eq!(r["tip_shown"], true, "{what}: hovering shows nothing");
    let (name, rate) = (s("dot_name"), s("dot_rate"));
    assert!(!name.is_empty() && !rate.is_empty(), "{what}: {r}");
    for want in [
        name.as_str(),
        rate.as_str(),
        "AI (flop/B)",
        "T",
        "of roof",
        "bound",
        "share of time",
    ] {
        assert!(s("tip").contains(want), "{what}: the hover box lacks '{want}': {}", s("tip"));
    }
    assert_eq!(r["tip_hidden_after"], true, "{what}: the hover box stays after the pointer leaves");
    assert_eq!(r["pin_shown"], true, "{what}: a click pins nothing");
    for want in [name.as_str(), rate.as_str(), "Advice", "W", "Q"] {
        assert!(s("pin").contains(want), "{what}: the pinned panel lacks '{want}': {}", s("pin"));
    }
    assert!(f("pinned_marked") >= 1.0, "{what}: the pinned dot is not marked");
    assert_eq!(r["pin_hidden_after_escape"], true, "{what}: Escape does not unpin");
    assert!(f("roof_lines_before") >= 1.0, "{what}: roof {} not drawn", s("toggled_roof"));
    assert_eq!(
        f("roof_lines_after"),
        0.0,
        "{what}: unchecking {} leaves it drawn",
        s("toggled_roof")
    );
    assert_eq!(
        f("roof_lines_again"),
        f("roof_lines_before"),
        "{what}: checking {} again",
        s("toggled_roof")
    );
    assert_eq!(
        s("frame_after_zoom_click"),
        "full",
        "{what}: the zoom button does not show the full range"
    );
    // "show all" was on when the full range was first built: every roof drawn there too.
    assert_eq!(f("hidden_in_full"), 0.0, "{what}: the full range lost the legend's toggles");
    assert_eq!(r["overlaps"], serde_json::json!([]), "{what}: overlapping text: {}", r["overlaps"]);
    r
}

fn write_page(args: &[&str], out: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roofline"));
    for a in args {
        if a.ends_with(".json") {
            // In tests/fixtures/reports, or a path under tests/fixtures.
            cmd.arg(if a.contains('/') {
                fixtures.join("..").join(a)
            } else {
                fixtures.join(a)
            });
        } else {
            cmd.arg(a);
        }
    }
    let st = cmd.arg("-o").arg(out).output().unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
}

#[test]
fn report_page_in_a_real_browser() {
    let Some(chromium) = browser() else {
        eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The main job's report (two roof sets: the first chart is the one-thread one).
    let main = dir.path().join("main.html");
    write_page(&["report", "show", "main-job.json"], &main);
    let size = std::fs::metadata(&main).unwrap().len();
    assert!(size < 1_000_000, "the main job's page is {size} bytes");
    let page = std::fs::read_to_string(&main).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http") && !page.contains("url(http"),
        "network reference"
    );
    let r = check_page(&chromium, &main, dir.path(), "main job");
    assert!(
        r["hidden_roofs_shown"].as_f64() == Some(0.0),
        "'show all' left roofs hidden: {}",
        r["hidden_roofs_shown"]
    );
    // Two reports on one page (before → after), and a report of six kinds of points.
    let two = dir.path().join("two.html");
    write_page(&["plot", "before.json", "after.json"], &two);
    check_page(&chromium, &two, dir.path(), "before/after");
    let several = dir.path().join("several.html");
    write_page(&["report", "show", "several.json"], &several);
    check_page(&chromium, &several, dir.path(), "several");
    // A CPU report and a GPU one (`compare`): each machine's roofs, arrows CPU → GPU.
    let cmp = dir.path().join("compare.html");
    write_page(&["compare", "several.json", "ncu/gpu_run_dgemm.json"], &cmp);
    let page = std::fs::read_to_string(&cmp).unwrap();
    assert!(page.contains("class=\"arrow\""), "no arrow from the CPU dgemm to the GPU one");
    assert!(page.contains(">GPU "), "no GPU roof on the chart");
    assert!(!page.contains("GPU GPU"), "a GPU roof names its machine twice");
    check_page(&chromium, &cmp, dir.path(), "compare");
}
