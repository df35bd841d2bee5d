//! The report page in a real browser, driven over WebDriver: Debian's `chromium-driver`
//! (`chromedriver`) starts one headless `chromium` at 1366×768 and the test speaks the
//! W3C WebDriver protocol to it (HTTP and JSON over a `TcpStream`). Checked on four pages:
//! the chart's top inside the first 768 px and the whole chart on that screen; the pointer
//! moved over a dot shows its numbers and moved away hides them; a click pins them and
//! Escape unpins; the keyboard reaches the dots (Tab into the chart, an arrow key to the next
//! dot, visible focus, a label for assistive technology, Enter pins); a click on a legend
//! toggle hides a roof; no two text boxes of the chart overlap as the browser renders them
//! (in every frame and with every roof shown); the folded advice cards and point table are
//! built when opened; and no error (a recorder injected at the top of the page, and the
//! browser's log). A job of 70 ranks: its rank dots drawn when asked (and hidden, and shown
//! again), their advice cards there before.
//!
//! Skipped, with one line saying so, where chromium or chromedriver is not installed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names
        .iter()
        .flat_map(|b| std::env::split_paths(&path).map(move |d| d.join(b)))
        .find(|p| p.is_file())
}

/// Records errors from the first moment (injected at the top of the page's head).
const EARLY: &str = r#"<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) { window.__errors.push("rejection: " + e.reason); });
(function () { var ce = console.error; console.error = function () { window.__errors.push("console.error: " + Array.prototype.join.call(arguments, " ")); return ce.apply(console, arguments); }; })();
</script>"#;

/// Helpers the scripts below use, defined once per page.
const HELPERS: &str = r#"
window.__t = {
  svg: function () { return document.querySelector(".chartbox svg.chart"); },
  box: function () { return document.querySelector(".chartbox"); },
  frame: function () { return Array.prototype.filter.call(__t.svg().querySelectorAll("g.frame"), function (g) { return g.style.display !== "none"; })[0]; },
  clashes: function (state) {
    var b = Array.prototype.map.call(__t.frame().querySelectorAll("text"), function (t) { return [t, t.getBoundingClientRect()]; })
      .filter(function (p) { return p[1].width > 0 && p[1].height > 0; }), bad = [];
    for (var i = 0; i < b.length; i++) for (var j = i + 1; j < b.length; j++) {
      var r = b[i][1], s = b[j][1];
      var ox = Math.min(r.right, s.right) - Math.max(r.left, s.left), oy = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
      if (ox > 0.5 && oy > 0.5) bad.push(state + ": " + b[i][0].textContent + " / " + b[j][0].textContent);
    }
    return bad;
  },
  data: function (i) { var svg = __t.svg(); return JSON.parse(document.getElementById(svg.id + "-data").textContent).dots[i]; },
  shown: function (key) {
    return Array.prototype.filter.call(__t.svg().querySelectorAll('line.roof[data-roof="' + key + '"]'), function (l) { var r = l.getBoundingClientRect(); return getComputedStyle(l).display !== "none" && r.width + r.height > 0; }).length;
  }
};
"#;

/// The first screen: chart geometry, overlaps, and the largest dot where the browser
/// hit-tests it (a smaller dot drawn over it is taken instead).
const OPENED: &str = r#"
var svg = __t.svg(), r = svg.getBoundingClientRect(), out = {};
out.chart_top = r.top + window.scrollY; out.chart_bottom = r.bottom + window.scrollY; out.viewport = [window.innerWidth, window.innerHeight];
out.overlaps = __t.clashes("opened");
var dot = __t.frame().querySelector(".dots circle"), d = dot.getBoundingClientRect();
out.x = d.left + d.width / 2; out.y = d.top + d.height / 2;
var hit = document.elementFromPoint(out.x, out.y);
out.hit_is_dot = !!(hit && hit.classList && hit.classList.contains("dot"));
if (out.hit_is_dot) dot = hit;
var data = __t.data(+dot.getAttribute("data-i")), keys = JSON.parse(document.getElementById(svg.id + "-data").textContent).keys;
out.dot_name = data.n;
out.dots = __t.frame().querySelectorAll(".dots circle").length;
out.has_roof = data.tip.some(function (kv) { return keys[kv[0]] === "of roof"; });
out.dot_rate = data.tip.filter(function (kv) { return /FLOP|OP\/s/.test(keys[kv[0]]); }).map(function (kv) { return kv[1]; })[0];
return out;
"#;

const TIP: &str = r#"var t = __t.box().querySelector(".tip"); return { shown: !t.hidden, text: t.textContent };"#;
const PIN: &str = r#"var p = __t.box().querySelector(".pin"); return { shown: !p.hidden, text: p.textContent, marked: __t.svg().querySelectorAll(".dot.pinned").length };"#;
const FOCUSED: &str = r#"
var a = document.activeElement, t = __t.box().querySelector(".tip");
var cs = a ? getComputedStyle(a) : null;
return { is_dot: !!(a && a.classList && a.classList.contains("dot")), i: a && a.getAttribute("data-i"),
  name: a && a.classList && a.classList.contains("dot") ? __t.data(+a.getAttribute("data-i")).n : null,
  label: a && a.getAttribute("aria-label"), role: a && a.getAttribute("role"),
  dash: cs ? cs.strokeDasharray : "", stroke_width: cs ? parseFloat(cs.strokeWidth) : 0,
  tip_shown: !t.hidden, tip: t.textContent };
"#;

/// Minimal W3C WebDriver client over HTTP/1.1 (one request per connection).
struct Driver {
    child: Child,
    port: u16,
    session: String,
}

fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The driver may keep the connection open: read the head, then the body's length.
    let mut raw: Vec<u8> = Vec::new();
    let mut buf = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "{method} {path}: the driver closed the connection");
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &raw[head_end..];
        let done = match length {
            Some(n) => body.len() >= n,
            None if chunked => body.ends_with(b"0\r\n\r\n"),
            None => false,
        };
        if done {
            break;
        }
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let rest = String::from_utf8_lossy(&raw[head_end..]).into_owned();
    let text = rest.clone();
    let payload = if chunked {
        let (mut out, mut r) = (String::new(), rest.as_str());
        while let Some((size, after)) = r.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            r = &after[n + 2..];
        }
        out
    } else {
        rest
    };
    serde_json::from_str(&payload).unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"))
}

impl Driver {
    fn start(driver: &Path, chromium: &Path, profile: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut d = Driver {
            child,
            port,
            session: String::new(),
        };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(20), "chromedriver did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                         "--window-size=1366,768", format!("--user-data-dir={}", profile.display())]
            },
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        let r = http(port, "POST", "/session", Some(&caps));
        d.session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_string();
        d
    }
    fn call(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let r = http(self.port, method, &format!("/session/{}/{what}", self.session), body.as_ref());
        if let Some(e) = r["value"].get("error") {
            panic!("WebDriver {what}: {e}: {}", r["value"]["message"]);
        }
        r["value"].clone()
    }
    fn js(&self, script: &str) -> Value {
        self.call("POST", "execute/sync", Some(json!({"script": script, "args": []})))
    }
    fn pointer(&self, actions: Value) {
        self.call(
            "POST",
            "actions",
            Some(json!({"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": actions}]})),
        );
    }
    fn move_to(&self, x: f64, y: f64) {
        self.pointer(json!([{"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x.round() as i64, "y": y.round() as i64}]));
    }
    fn click_at(&self, x: f64, y: f64) {
        self.pointer(json!([
            {"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x.round() as i64, "y": y.round() as i64},
            {"type": "pointerDown", "button": 0}, {"type": "pointerUp", "button": 0}
        ]));
    }
    fn key(&self, key: char) {
        self.call(
            "POST",
            "actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
                {"type": "keyDown", "value": key.to_string()}, {"type": "keyUp", "value": key.to_string()}]}]})),
        );
    }
    fn click(&self, css: &str) {
        let e = self.call("POST", "element", Some(json!({"using": "css selector", "value": css})));
        let id = e
            .as_object()
            .and_then(|m| m.values().next())
            .and_then(Value::as_str)
            .unwrap()
            .to_string();
        self.call("POST", &format!("element/{id}/click"), Some(json!({})));
    }
    /// Severe entries of the browser's log since the last call (empty where the driver keeps none).
    fn severe_log(&self) -> Vec<String> {
        let r = http(
            self.port,
            "POST",
            &format!("/session/{}/se/log", self.session),
            Some(&json!({"type": "browser"})),
        );
        r["value"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|e| e["level"] == "SEVERE")
                    .map(|e| e["message"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(|| http(self.port, "DELETE", &format!("/session/{}", self.session), None));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TAB: char = '\u{E004}';
const ENTER: char = '\u{E007}';
const ESCAPE: char = '\u{E00C}';
const RIGHT: char = '\u{E014}';
const HOME: char = '\u{E011}';

/// Tab from the toolbar focuses a dot (visible focus, role, label) and shows its numbers;
/// Home and the right arrow move between dots; Enter pins the focused dot; Escape unpins.
fn check_keyboard(d: &Driver, what: &str, dots: u64) {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    // The keyboard: from the zoom button, Tab enters the chart on a dot; an arrow key moves
    // to another; Enter pins it; Escape unpins.
    d.move_to(2.0, 2.0);
    d.js("__t.box().querySelector('button.zoom').focus();");
    d.key(TAB);
    let first = d.js(FOCUSED);
    assert_eq!(first["is_dot"], true, "{what}: Tab from the toolbar does not reach a dot: {first}");
    assert_eq!(first["role"], "button", "{what}: {first}");
    assert!(
        s(&first, "label").starts_with(&s(&first, "name")) && s(&first, "label").contains("bound"),
        "{what}: the focused dot's label: {first}"
    );
    assert!(
        s(&first, "dash") != "none" && f(&first, "stroke_width") >= 3.0,
        "{what}: the focus is not visible: {first}"
    );
    assert_eq!(first["tip_shown"], true, "{what}: the focused dot shows no numbers");
    assert!(s(&first, "tip").contains(&s(&first, "name")), "{what}: {first}");
    // Home: the dot of least AI; the right arrow: the next one.
    d.key(HOME);
    let home = d.js(FOCUSED);
    assert_eq!(home["is_dot"], true, "{what}: Home leaves the dots: {home}");
    d.key(RIGHT);
    let next = d.js(FOCUSED);
    if dots > 1 {
        assert!(
            next["is_dot"] == true && next["i"] != home["i"],
            "{what}: the right arrow stays on {home} / {next}"
        );
        assert!(s(&next, "tip").contains(&s(&next, "name")), "{what}: {next}");
    }
    d.key(ENTER);
    let pin = d.js(PIN);
    assert!(
        pin["shown"] == true && s(&pin, "text").contains(&s(&next, "name")),
        "{what}: Enter does not pin the focused dot: {pin}"
    );
    d.key(ESCAPE);
    assert_eq!(d.js(PIN)["shown"], false, "{what}: Escape does not unpin");
}

fn check_folded(d: &Driver, what: &str, points: usize, roofed: bool) {
    // The folded cards and point table are built when opened: a card per point at most (none
    // twice), with its advice; one row per point.
    d.js("document.querySelector('details.cards').open = true; document.querySelector('details.points').open = true;");
    let t0 = Instant::now();
    let built = loop {
        let b = d.js("return { cards: document.querySelectorAll('details.cards .card').length, \
             advice: document.querySelectorAll('details.cards .card ul.adv li').length, \
             rows: document.querySelectorAll('details.points tr').length };");
        if b["rows"].as_u64().unwrap_or(0) > 0 || t0.elapsed() > Duration::from_secs(5) {
            break b;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(built["rows"], points + 1, "{what}: the point table: {built}");
    assert!(
        built["cards"].as_u64().unwrap_or(0) >= 1
            && built["cards"].as_u64() <= Some(points as u64)
            && (built["advice"].as_u64() >= built["cards"].as_u64() || !roofed),
        "{what}: advice cards: {built}"
    );
}

fn check_page(d: &Driver, page: &Path, work: &Path, what: &str, points: usize) -> Value {
    let html = std::fs::read_to_string(page)
        .unwrap()
        .replacen("<head>", &format!("<head>{EARLY}"), 1);
    let probed = work.join(format!("{what}.html").replace(['/', ' '], "-"));
    std::fs::write(&probed, html).unwrap();
    d.call("POST", "url", Some(json!({"url": format!("file://{}", probed.display())})));
    d.js(HELPERS);
    let r = d.js(OPENED);
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    // A 1366×768 window: its viewport is shorter by the browser's own bars, as on a laptop.
    let view_h = r["viewport"][1].as_f64().unwrap_or(0.0);
    assert_eq!(r["viewport"][0], 1366, "{what}: the window is not 1366 px wide");
    assert!(view_h > 500.0 && view_h <= 768.0, "{what}: viewport {}", r["viewport"]);
    assert!(f(&r, "chart_top") < 768.0, "{what}: the chart starts at {} px", f(&r, "chart_top"));
    assert!(
        f(&r, "chart_bottom") <= view_h,
        "{what}: the chart ends at {} px, past the first screen ({view_h} px)",
        f(&r, "chart_bottom")
    );
    assert_eq!(
        r["hit_is_dot"], true,
        "{what}: something other than a dot is drawn over the largest dot"
    );
    let (name, rate) = (s(&r, "dot_name"), s(&r, "dot_rate"));
    assert!(!name.is_empty() && !rate.is_empty(), "{what}: {r}");
    let (x, y) = (f(&r, "x"), f(&r, "y"));
    let mut overlaps: Vec<Value> = r["overlaps"].as_array().cloned().unwrap_or_default();

    // The pointer over the dot, then away.
    d.move_to(x, y);
    let tip = d.js(TIP);
    assert_eq!(tip["shown"], true, "{what}: hovering shows nothing");
    // (The recorded job's machines have bandwidth roofs only: its dots have no roof fraction,
    // no bound and so no advice.)
    let roofed = what != "job";
    assert!(r["has_roof"] == true || !roofed, "{what}: the largest dot has no roof: {r}");
    for want in [name.as_str(), rate.as_str(), "AI (flop/B)", "T", "bound", "share of time"]
        .into_iter()
        .chain(roofed.then_some("of roof"))
    {
        assert!(
            s(&tip, "text").contains(want),
            "{what}: the hover box lacks '{want}': {}",
            s(&tip, "text")
        );
    }
    d.move_to(2.0, 2.0);
    assert_eq!(d.js(TIP)["shown"], false, "{what}: the hover box stays after the pointer leaves");
    // A click pins; Escape unpins.
    d.click_at(x, y);
    let pin = d.js(PIN);
    assert_eq!(pin["shown"], true, "{what}: a click pins nothing");
    for want in [name.as_str(), rate.as_str(), "W", "Q"]
        .into_iter()
        .chain(roofed.then_some("Advice"))
    {
        assert!(
            s(&pin, "text").contains(want),
            "{what}: the pinned panel lacks '{want}': {}",
            s(&pin, "text")
        );
    }
    assert!(f(&pin, "marked") >= 1.0, "{what}: the pinned dot is not marked");
    d.key(ESCAPE);
    assert_eq!(d.js(PIN)["shown"], false, "{what}: Escape does not unpin");

    check_keyboard(d, what, r["dots"].as_u64().unwrap_or(0));

    // Legend: a click on the box of the first checked roof drawn in this frame; its line
    // disappears, then comes back. (The recorded job's dots sit far below its memory roofs:
    // none is inside the dots' frame there.)
    let key = d.js(
        "var k = Array.prototype.map.call(__t.box().querySelectorAll('.legend input[data-roof]:checked'), \
         function (c) { return c.getAttribute('data-roof'); }).filter(function (k) { return __t.shown(k) > 0; }); \
         return k.length ? k[0] : null;",
    );
    assert!(key.is_string() || what == "job", "{what}: no checked roof is drawn");
    if let Some(key) = key.as_str() {
        let lines = |d: &Driver| d.js(&format!("return __t.shown({key:?});")).as_f64().unwrap();
        let before = lines(d);
        let css = format!(".chartbox .legend input[data-roof=\"{key}\"]");
        d.click(&css);
        assert_eq!(lines(d), 0.0, "{what}: unchecking {key} leaves it drawn");
        d.click(&css);
        assert_eq!(lines(d), before, "{what}: checking {key} again");
    }
    // Every roof on, then the full range: still no overlapping text.
    let every = d.js("var e = __t.box().querySelector('input.every'); if (!e) return null; e.click(); \
         return __t.svg().querySelectorAll('line.roof[style*=\"display: none\"]').length;");
    overlaps.extend(d.js("return __t.clashes('all roofs');").as_array().cloned().unwrap_or_default());
    d.click(".chartbox button.zoom");
    let zoomed = d.js("return { frame: __t.frame().getAttribute('data-frame'), \
         hidden: __t.svg().querySelectorAll('g.frame[data-frame=\"full\"] line.roof[style*=\"display: none\"]').length, \
         overlaps: __t.clashes('full range, all roofs') };");
    overlaps.extend(zoomed["overlaps"].as_array().cloned().unwrap_or_default());
    assert_eq!(zoomed["frame"], "full", "{what}: the zoom button does not show the full range");
    // "show all" was on when the full range was first built: every roof drawn there too.
    assert_eq!(zoomed["hidden"], 0, "{what}: the full range lost the legend's toggles");
    if !every.is_null() {
        d.js("__t.box().querySelector('input.every').click();");
        overlaps.extend(d.js("return __t.clashes('full range');").as_array().cloned().unwrap_or_default());
    }
    assert_eq!(overlaps, Vec::<Value>::new(), "{what}: overlapping text");

    check_folded(d, what, points, roofed);

    let mut errors: Vec<String> = d
        .js("return window.__errors;")
        .as_array()
        .map(|a| a.iter().map(|e| e.as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default();
    errors.extend(d.severe_log());
    assert_eq!(errors, Vec::<String>::new(), "{what}: errors in the page");
    json!({ "every": every })
}

/// A job of `n` ranks, 8 a node, written into `dir` from the recorded rank 0 of `two-nodes`
/// (each rank's W and T its own), as scripts/page-speed.sh makes one.
fn generate_job(n: u32, dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jobs/two-nodes/genoa-a-r0.json");
    let base: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    for r in 0..n {
        let mut d = base.clone();
        let (host, local) = (format!("node{}", r / 8), r % 8);
        let job = &mut d["environment"]["job"];
        job["rank"] = r.into();
        job["size"] = n.into();
        job["local_rank"] = local.into();
        job["node"] = host.clone().into();
        job["dram"] = if local == 0 { "node" } else { "none" }.into();
        for p in d["points"].as_array_mut().unwrap() {
            p["flops"]["total"] = (1000.0 + f64::from(r)).into();
            p["seconds"] = (1e-3 * f64::from(1 + r % 7)).into();
            if local != 0 {
                p["bytes"].as_object_mut().unwrap().remove("dram");
            }
        }
        std::fs::write(dir.join(format!("{host}-r{r}.json")), d.to_string()).unwrap();
    }
}

/// A job above 64 ranks: its rank dots are not drawn when the page opens; the advice cards
/// still have every rank's; a press of the button draws them (hover shows a rank's numbers),
/// the next hides them and the next shows them again.
fn check_rank_dots_on_demand(d: &Driver, page: &Path, work: &Path, ranks: u64) {
    let html = std::fs::read_to_string(page)
        .unwrap()
        .replacen("<head>", &format!("<head>{EARLY}"), 1);
    let probed = work.join("large-job.html");
    std::fs::write(&probed, html).unwrap();
    d.call("POST", "url", Some(json!({"url": format!("file://{}", probed.display())})));
    let opened = d.js("return { boxes: document.querySelectorAll('.chartbox').length, \
         later: document.querySelectorAll('section.later').length, \
         drawn: document.querySelectorAll('section.later .chartbox').length };");
    assert_eq!(opened, json!({"boxes": 2, "later": 1, "drawn": 0}), "large job: {opened}");
    d.js("document.querySelector('details.cards').open = true;");
    let t0 = Instant::now();
    let rank_cards = loop {
        let c = d.js(
            "return Array.prototype.filter.call(document.querySelectorAll('details.cards .card h3'), \
             function (h) { return / @ rank /.test(h.textContent); }).length;",
        );
        if c.as_u64() > Some(0) || t0.elapsed() > Duration::from_secs(5) {
            break c;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(rank_cards, 2 * ranks, "large job: advice cards of the undrawn ranks");
    d.click("section.later button.draw");
    let drawn = d.js(
        "var l = document.querySelector('section.later'), b = l.querySelector('.chartbox'); b.scrollIntoView(); \
         var svg = b.querySelector('svg.chart'), f = Array.prototype.filter.call(svg.querySelectorAll('g.frame'), \
         function (g) { return g.style.display !== 'none'; })[0], dot = f.querySelector('.dots circle'), r = dot.getBoundingClientRect(); \
         var x = r.left + r.width / 2, y = r.top + r.height / 2, hit = document.elementFromPoint(x, y); \
         if (hit && hit.classList.contains('dot')) dot = hit; \
         var doc = JSON.parse(document.getElementById(svg.id + '-data').textContent); \
         return { dots: f.querySelectorAll('.dots circle').length, height: svg.getBoundingClientRect().height, \
           x: x, y: y, name: doc.dots[+dot.getAttribute('data-i')].n, \
           button: l.querySelector('button.draw').textContent, expanded: l.querySelector('button.draw').getAttribute('aria-expanded') };",
    );
    assert_eq!(drawn["dots"], 2 * ranks, "large job: the rank dots drawn: {drawn}");
    assert!(drawn["height"].as_f64() > Some(200.0), "large job: {drawn}");
    assert_eq!(drawn["expanded"], "true", "{drawn}");
    assert!(drawn["button"].as_str().unwrap_or("").starts_with("Hide"), "{drawn}");
    let name = drawn["name"].as_str().unwrap_or("").to_string();
    assert!(name.contains(" @ rank "), "large job: {drawn}");
    d.move_to(drawn["x"].as_f64().unwrap(), drawn["y"].as_f64().unwrap());
    let tip = d.js("var t = document.querySelector('section.later .tip'); return { shown: !t.hidden, text: t.textContent };");
    assert!(
        tip["shown"] == true && tip["text"].as_str().unwrap_or("").contains(&name),
        "large job: hovering a rank dot: {tip} ({name})"
    );
    let shown = "return getComputedStyle(document.querySelector('section.later .chartbox')).display !== 'none';";
    d.click("section.later button.draw");
    assert_eq!(d.js(shown), false, "large job: a second press hides the rank dots");
    d.click("section.later button.draw");
    assert_eq!(d.js(shown), true, "large job: a third press shows them again");
    let mut errors: Vec<String> = d
        .js("return window.__errors;")
        .as_array()
        .map(|a| a.iter().map(|e| e.as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default();
    errors.extend(d.severe_log());
    assert_eq!(errors, Vec::<String>::new(), "large job: errors in the page");
}

fn write_page(args: &[&str], out: &Path) -> usize {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roofline"));
    let mut points = 0;
    for a in args {
        if a.ends_with(".json") {
            // In tests/fixtures/reports, or a path under tests/fixtures.
            let path = if a.contains('/') {
                fixtures.join("..").join(a)
            } else {
                fixtures.join(a)
            };
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            points += v["points"].as_array().map_or(0, Vec::len);
            cmd.arg(path);
        } else {
            cmd.arg(a);
        }
    }
    let st = cmd.arg("-o").arg(out).output().unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    points
}

#[test]
fn report_page_in_a_real_browser() {
    let Some(chromium) = on_path(&["chromium", "chromium-browser", "google-chrome"]) else {
        eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
        return;
    };
    let Some(driver) = on_path(&["chromedriver"]) else {
        eprintln!("skipped: no chromedriver on PATH (apt-get install chromium-driver)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The main job's report (two roof sets: the first chart is the one-thread one).
    let main = dir.path().join("main.html");
    let n_main = write_page(&["report", "show", "main-job.json"], &main);
    let size = std::fs::metadata(&main).unwrap().len();
    assert!(size < 1_000_000, "the main job's page is {size} bytes");
    let page = std::fs::read_to_string(&main).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http") && !page.contains("url(http"),
        "network reference"
    );
    // Two reports on one page (before → after), a report of six kinds of points, and a CPU
    // report beside a GPU one (`compare`: each machine's roofs, arrows CPU → GPU).
    let two = dir.path().join("two.html");
    let n_two = write_page(&["plot", "before.json", "after.json"], &two);
    let several = dir.path().join("several.html");
    let n_several = write_page(&["report", "show", "several.json"], &several);
    let cmp = dir.path().join("compare.html");
    let n_cmp = write_page(&["compare", "several.json", "ncu/gpu_run_dgemm.json"], &cmp);
    let page = std::fs::read_to_string(&cmp).unwrap();
    assert!(page.contains("class=\"arrow\""), "no arrow from the CPU dgemm to the GPU one");
    assert!(page.contains(">GPU "), "no GPU roof on the chart");
    assert!(!page.contains("GPU GPU"), "a GPU roof names its machine twice");

    // One browser for every page.
    let d = Driver::start(&driver, &chromium, &dir.path().join("profile"));
    let r = check_page(&d, &main, dir.path(), "main job", n_main);
    assert_eq!(r["every"], 0, "'show all' left roofs hidden");
    check_page(&d, &two, dir.path(), "before/after", n_two);
    check_page(&d, &several, dir.path(), "several", n_several);
    check_page(&d, &cmp, dir.path(), "compare", n_cmp);
    // A merged job's page: nodes, ranks and the job drawn; T per rank beside the balance.
    let job_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jobs/two-nodes");
    let job = dir.path().join("job.html");
    let st = Command::new(env!("CARGO_BIN_EXE_roofline"))
        .args(["report", "merge"])
        .arg(&job_dir)
        .arg("-o")
        .arg(&job)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    // Four ranks' two points, each node's two and the job's two.
    check_page(&d, &job, dir.path(), "job", 4 * 2 + 2 * 2 + 2);
    let bars = d.js(
        "return Array.prototype.map.call(document.querySelectorAll('.balance figure.ranks svg'), \
         function (s) { return s.getBoundingClientRect().height; });",
    );
    assert!(
        bars.as_array()
            .is_some_and(|b| b.len() == 2 && b.iter().all(|h| h.as_f64() > Some(50.0))),
        "job: T per rank not drawn: {bars}"
    );
    // A job of 70 ranks (above the 64 drawn when the page opens): rank dots on demand.
    let large_dir = dir.path().join("large-job");
    generate_job(70, &large_dir);
    let large = dir.path().join("large.html");
    let st = Command::new(env!("CARGO_BIN_EXE_roofline"))
        .args(["report", "merge"])
        .arg(&large_dir)
        .arg("-o")
        .arg(&large)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    check_rank_dots_on_demand(&d, &large, dir.path(), 70);
}
