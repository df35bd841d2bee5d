//! The top of the report page: a one-line machine summary and the chart with its legend and
//! the pinned dot's panel, laid out so that the chart fills the first screen of a laptop
//! (1366×768); the tables and the rest follow, folded, in [`super::html`].

use std::fmt::Write;

use super::View;
use super::chart::{self, BOUND_COLORS, Chart, MAX_R};
use super::dot_info::chart_data;
use super::markup::esc;
use crate::machine::cpuid::hypervisor_name;

/// The page's script (hover, pin, roof toggles, zoom, label re-check).
pub const SCRIPT: &str = include_str!("page.js");

/// CSS of the chart section.
pub const CSS: &str = "
header h1{font-size:1.25em;margin:0 0 2px}
.machine{margin:0 0 6px;font-size:.92em;color:#444;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.chartbox{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start;margin-bottom:10px}
.chart-wrap{position:relative;flex:1 1 600px;min-width:0;background:#fff;border:1px solid #e2e2e2;border-radius:8px;padding:4px}
.chart-wrap svg.chart{display:block;width:100%;height:auto;max-height:calc(100vh - 112px)}
.toolbar{display:flex;gap:8px;align-items:center;font-size:.88em;color:#555;padding:0 4px 2px;white-space:nowrap;overflow:hidden}
.toolbar>*{flex:none}.toolbar>.muted{flex:1 1 0;min-width:0;overflow:hidden;text-overflow:ellipsis}
.toolbar button,.pin button{font:inherit;border:1px solid #bbb;background:#f6f6f6;border-radius:4px;padding:1px 8px;cursor:pointer}
svg.chart text{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg.chart .ticks text{stroke:none}
svg.chart .lbl.clash{display:none}
svg.chart .dot{stroke:#fff;stroke-width:1;fill-opacity:.85;cursor:pointer}
svg.chart .dot:hover,svg.chart .dot.pinned{stroke:#000;stroke-width:2.5}
svg.chart:focus{outline:2px solid #1a56db;outline-offset:-2px}
svg.chart .dot:focus{outline:none;stroke:#1a56db;stroke-width:3.5;stroke-dasharray:4 2}
svg.chart .dot.old{fill-opacity:.35}
.dot.compute,.sw.compute{fill:#d62728;background:#d62728}.dot.memory,.sw.memory{fill:#1f77b4;background:#1f77b4}
.dot.overhead,.sw.overhead{fill:#e08a00;background:#e08a00}.dot.unknown,.sw.unknown{fill:#888;background:#888}
.tip{position:absolute;z-index:2;max-width:360px;background:#fff;border:1px solid #999;border-radius:6px;padding:6px 8px;font-size:.85em;box-shadow:0 2px 8px rgba(0,0,0,.2);pointer-events:none}
.side{flex:0 1 300px;min-width:240px;font-size:.88em;position:sticky;top:4px;max-height:calc(100vh - 8px);overflow-y:auto}
.pin{margin-bottom:8px}
.side h3{font-size:1em;margin:.2em 0}
.legend{background:#fff;border:1px solid #e2e2e2;border-radius:8px;padding:6px 10px;margin-bottom:8px}
.legend ul{list-style:none;padding:0;margin:2px 0 6px}
.legend li{margin:1px 0}
.legend label{cursor:pointer}
.sw{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:5px;vertical-align:-1px}
.rl{display:inline-block;width:18px;height:0;border-top:2px solid;margin:0 5px 3px 2px;vertical-align:middle}
.rl.dash{border-top-style:dashed}.rl.thin{border-top-width:1px}
.pin{position:relative;background:#fff;border:1px solid #999;border-radius:8px;padding:6px 10px}
.pin .close{position:absolute;right:6px;top:4px}
.pin h3{margin-right:28px;overflow-wrap:anywhere}
.pin h4{margin:.6em 0 .2em;font-size:.95em}
.pin ul{margin:0;padding-left:1.1em}
.pin table.hot td{white-space:normal;text-align:left;border:0;padding:1px 4px;font-size:.95em}
.pin table.hot td:last-child{text-align:right;white-space:nowrap}
td.straggler{color:#b00;font-weight:600}
.balance figure{margin:6px 0}
";

/// The one line above the chart: CPU, microarchitecture, threads, clock, hypervisor, and
/// the roofs' thread count.
pub fn machine_line(view: &View) -> String {
    let Some(r) = view.reports.first() else { return String::new() };
    let m = &r.report.machine;
    let s = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let mut parts: Vec<String> = Vec::new();
    if let Some(b) = s("brand").or_else(|| s("name")) {
        parts.push(b);
    }
    if let Some(u) = s("microarchitecture_name").or_else(|| s("microarchitecture")) {
        parts.push(u);
    }
    if let Some(t) = m.get("threads").and_then(|v| v.as_u64()) {
        parts.push(format!("{t} threads"));
    }
    if let Some(g) = m
        .get("frequency_ghz")
        .and_then(|f| f.get("measured").or_else(|| f.get("nominal")))
        .and_then(|v| v.as_f64())
    {
        parts.push(format!("{g:.2} GHz"));
    }
    if let Some(h) = s("hypervisor").filter(|h| !h.is_empty()) {
        parts.push(format!("{} guest", hypervisor_name(&h)));
    }
    if view.reports.len() > 1 {
        parts.push(format!(
            "{} reports: {}",
            view.reports.len(),
            view.reports.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(" → ")
        ));
    }
    parts.join(" · ")
}

/// One chart section: toolbar, chart, hover box; legend and pinned panel beside. `id` must
/// be unique in the page. Returns None when no point can be placed.
pub fn chart_section(view: &View, id: &str, heading: Option<&str>) -> Option<String> {
    let (mut o, data, _) = chart_parts(view, id, heading)?;
    let _ = write!(o, "<script type=\"application/json\" id=\"{id}-data\">{data}</script></section>");
    Some(o)
}

/// A chart drawn on demand: a button, the chart's section kept as text (the browser reads a
/// string much faster than it lays out a thousand dots it may never show) and its data. The
/// script builds the section on the first press and shows or hides it after; the advice
/// cards read the data either way. `what` names the dots on the button ("ranks").
pub fn chart_on_demand(view: &View, id: &str, heading: &str, what: &str) -> Option<String> {
    let (section, data, dots) = chart_parts(view, id, Some(heading))?;
    let mut o = String::new();
    let _ = write!(
        o,
        "<section class=\"later\" data-chart=\"{id}\"><p class=\"toolbar\"><button type=\"button\" class=\"draw\" aria-expanded=\"false\" data-show=\"Draw the {what}' dots\" data-hide=\"Hide the {what}' dots\">Draw the {what}' dots</button><span class=\"muted\">{}: {dots} dot(s), drawn when asked</span></p>",
        esc(heading)
    );
    // The section's own `</` (its frames' script included) written `<\u002f`: no `</script`
    // ends this element early, and the script turns them back exactly (a literal `<` of the
    // markup only ever opens a tag: text is escaped).
    let _ = write!(
        o,
        "<script type=\"text/html\" id=\"{id}-markup\">{}</script>",
        format!("{section}</section>").replace("</", "<\\u002f")
    );
    let _ = write!(o, "<script type=\"application/json\" id=\"{id}-data\">{data}</script></section>");
    Some(o)
}

/// A chart section's markup up to its data (still open), its data, and its number of dots.
fn chart_parts(view: &View, id: &str, heading: Option<&str>) -> Option<(String, String, usize)> {
    let chart = chart::layout(view)?;
    let mut o = String::new();
    let _ = write!(
        o,
        "<section class=\"chartbox\" id=\"{id}-box\"><div class=\"chart-wrap\"><div class=\"toolbar\">"
    );
    if let Some(h) = heading {
        let _ = write!(o, "<b>{}</b>", esc(h));
    }
    let _ = write!(
        o,
        "<span>{}</span><button type=\"button\" class=\"zoom\" aria-pressed=\"false\">Full range</button><span class=\"muted\" id=\"{id}-keys\">hover a dot; click to pin; keys: Tab, arrows, Enter, Esc</span></div>",
        if chart.kind == super::PlotKind::Dram {
            "classic roofline (DRAM AI)"
        } else {
            "cache-aware roofline (core-side AI)"
        }
    );
    o.push_str(&chart::svg(&chart, id, chart::integer_work(view)));
    // The pinned panel above the legend: on a laptop's first screen.
    o.push_str("<div class=\"tip\" role=\"tooltip\" hidden></div></div><aside class=\"side\"><div class=\"pin\" aria-live=\"polite\" hidden></div>");
    legend(&mut o, &chart);
    o.push_str("</aside>");
    Some((o, chart_data(view, &chart), chart.dots.len()))
}

fn legend(o: &mut String, chart: &Chart) {
    o.push_str("<div class=\"legend\"><h3>Dots</h3><ul>");
    for (class, _, text) in BOUND_COLORS {
        if chart.dots.iter().any(|d| d.bound == class) {
            let _ = write!(o, "<li><span class=\"sw {class}\"></span>{text}</li>");
        }
    }
    let largest = chart.dots.iter().map(|d| d.share).fold(0.0, f64::max);
    let _ = write!(
        o,
        "<li class=\"muted\">area: share of the run time (largest {:.0} %, {MAX_R:.0} px)</li>",
        largest * 100.0
    );
    if chart.dots.iter().any(|d| d.report > 0) {
        o.push_str("<li class=\"muted\">faded: the earlier report; arrows: before → after</li>");
    }
    o.push_str("</ul><h3>Roofs</h3><ul>");
    let item = |o: &mut String, r: &chart::ChartRoof| {
        let _ = write!(
            o,
            "<li><label><input type=\"checkbox\" data-roof=\"{}\"{}><span class=\"rl{}{}\" style=\"border-color:{}\"></span>{}</label></li>",
            r.key,
            if r.shown { " checked" } else { "" },
            if r.dashed { " dash" } else { "" },
            if r.thin { " thin" } else { "" },
            r.color,
            esc(&r.label())
        );
    };
    for r in chart.roofs.iter().filter(|r| r.shown) {
        item(o, r);
    }
    o.push_str("</ul>");
    let hidden = chart.roofs.iter().filter(|r| !r.shown).count();
    if hidden > 0 {
        let _ = write!(
            o,
            "<details class=\"more\"><summary>{hidden} other roof(s) of this machine</summary>\
             <label><input type=\"checkbox\" class=\"every\"> show all</label><ul>"
        );
        for r in chart.roofs.iter().filter(|r| !r.shown) {
            item(o, r);
        }
        o.push_str("</ul></details>");
    }
    let measured = chart.roofs.iter().any(|r| !r.dashed);
    let theoretical = chart.roofs.iter().any(|r| r.dashed);
    let _ = write!(
        o,
        "<p class=\"muted\">{}; thin: no FMA; □ ridge: where a memory roof meets the peak.</p></div>",
        match (measured, theoretical) {
            (true, true) => "solid: measured, dashed: theoretical",
            (true, false) => "all measured",
            _ => "dashed: theoretical",
        }
    );
}
