//! HTML export: one self-contained file (inline SVG, CSS and script; no network). The chart
//! comes first ([`super::page`]: one line on the machine above it, legend and pinned dot
//! beside); then, folded, the machine and environment, the roofs and the other views, one
//! card of advice per point, the point table, where the work is and the skipped points.
//! Plots scale to the width, wide tables scroll inside their own box.

use std::fmt::Write;

use super::{Exporter, PlotKind, View};
use crate::error::Result;
use crate::model::{ModelKind, level_label};
use crate::report::table::bound_text;
use crate::schema::extras::WorkRow;
use crate::schema::report::{Environment, Point};
use crate::schema::units::{seconds, si, sig3};

pub struct HtmlExporter;

pub use super::markup::esc;

/// An SVG document made inline and fluid: no XML prolog, width follows the container.
pub fn inline_svg(svg: &str) -> String {
    let svg = super::markup::compact_svg(svg);
    let body = match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => &svg,
    };
    match body.find('>') {
        Some(end) => {
            let head = &body[..end];
            let head = strip_attr(&strip_attr(head, "width"), "height");
            format!(
                "{head} style=\"width:100%;min-width:520px;height:auto\" role=\"img\"{}",
                &body[end..]
            )
        }
        None => body.to_string(),
    }
}

fn strip_attr(tag: &str, name: &str) -> String {
    let pat = format!(" {name}=\"");
    match tag.find(&pat) {
        Some(i) => {
            let rest = &tag[i + pat.len()..];
            match rest.find('"') {
                Some(j) => format!("{}{}", &tag[..i], &rest[j + 1..]),
                None => tag.to_string(),
            }
        }
        None => tag.to_string(),
    }
}

const CSS: &str = "
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:0;padding:12px;color:#222;background:#fafafa;line-height:1.4}
main{max-width:1400px;margin:0 auto}
.warn{color:#8a1c00;background:#fff1e6;border-left:3px solid #d9480f;padding:4px 8px}
h1{font-size:1.4em;margin:.2em 0 .4em}
h2{font-size:1.15em;margin:1.2em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
summary{cursor:pointer}summary h2{display:inline-block;margin:.6em 0 .3em;border:0}
.adv{padding-left:1.1em;margin:.3em 0}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:10px}
.card{background:#fff;border:1px solid #e2e2e2;border-radius:8px;padding:10px 12px}
.card h3{font-size:1em;margin:0 0 .3em;overflow-wrap:anywhere}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 10px;font-size:.92em}
.kv dt{color:#666}.kv dd{margin:0;overflow-wrap:anywhere}
figure{margin:0 0 12px;background:#fff;border:1px solid #e2e2e2;border-radius:8px;padding:4px;overflow-x:auto;-webkit-overflow-scrolling:touch}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:10px}
figure svg{display:block;max-width:100%}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;background:#fff;border:1px solid #e2e2e2;border-radius:8px}
table{border-collapse:collapse;font-size:.88em;white-space:nowrap}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:right}
th:first-child,td:first-child{text-align:left;position:sticky;left:0;background:#fff}
th{background:#f3f3f3}
.bound{font-weight:600}
.compute{color:#a31515}.memory{color:#1f4e96}.overhead{color:#8a5a00}
.muted{color:#666;font-size:.9em}
ul{padding-left:1.2em}
";

fn kv(o: &mut String, rows: &[(&str, Option<String>)]) {
    o.push_str("<dl class=\"kv\">");
    for (k, v) in rows {
        if let Some(v) = v {
            let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
        }
    }
    o.push_str("</dl>");
}

fn machine_rows(m: &serde_json::Value) -> Vec<(&'static str, Option<String>)> {
    let s = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let n = |k: &str| m.get(k).and_then(|v| v.as_u64()).map(|v| v.to_string());
    let caches = m.get("caches").and_then(|c| c.as_array()).map(|cs| {
        cs.iter()
            .filter_map(|c| {
                let lvl = c.get("level")?.as_u64()?;
                let kind = c.get("kind").and_then(|k| k.as_str()).unwrap_or("");
                if kind == "instruction" {
                    return None;
                }
                Some(format!(
                    "L{lvl} {}",
                    crate::schema::units::fmt_bytes(c.get("size_bytes")?.as_f64()?)
                ))
            })
            .collect::<Vec<_>>()
            .join(", ")
    });
    let ghz = m.get("frequency_ghz").and_then(|f| {
        f.get("measured")
            .and_then(|v| v.as_f64())
            .map(|g| format!("{g:.2} GHz measured"))
            .or_else(|| f.get("nominal").and_then(|v| v.as_f64()).map(|g| format!("{g:.2} GHz nominal")))
    });
    vec![
        ("CPU", s("brand")),
        ("microarchitecture", s("microarchitecture_name").or_else(|| s("microarchitecture"))),
        (
            "sockets / cores / threads",
            match (n("sockets"), n("cores"), n("threads")) {
                (Some(a), Some(b), Some(c)) => Some(format!("{a} / {b} / {c}")),
                _ => None,
            },
        ),
        ("caches", caches.filter(|c| !c.is_empty())),
        ("clock", ghz),
        ("hypervisor", s("hypervisor").map(|h| crate::machine::cpuid::hypervisor_name(&h))),
        (
            "ISA",
            m.get("isa")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(" ")),
        ),
    ]
}

fn env_rows(e: &Environment) -> Vec<(&'static str, Option<String>)> {
    vec![
        ("host", e.host.clone()),
        ("rank", e.rank.map(|r| r.to_string())),
        ("kernel", e.kernel.clone()),
        ("governor", e.governor.clone()),
        ("turbo", e.turbo.map(|t| if t { "on" } else { "off" }.into())),
        ("SMT", e.smt.map(|t| if t { "on" } else { "off" }.into())),
        ("hypervisor", e.hypervisor.as_deref().map(crate::machine::cpuid::hypervisor_name)),
        ("steal", e.steal_fraction.map(|s| format!("{:.1}%", s * 100.0))),
        ("measured clock", e.measured_ghz.map(|g| format!("{g:.2} GHz"))),
        (
            "CPU of one thread",
            e.cpu_choice
                .as_ref()
                .map(|c| crate::report::table::cpu_choice_line(c).trim_end().to_string()),
        ),
        ("compiler", e.compiler.clone()),
        (
            "roofline",
            Some(format!(
                "{}{}",
                e.tool_version,
                e.git_sha.as_deref().map(|g| format!(" ({g})")).unwrap_or_default()
            )),
        ),
        ("command", (!e.command_line.is_empty()).then(|| e.command_line.join(" "))),
        ("time", e.timestamp.clone()),
    ]
}

fn bound_class(b: &crate::report::Bound) -> &'static str {
    match b {
        crate::report::Bound::Compute { .. } => "compute",
        crate::report::Bound::Memory { .. } => "memory",
        crate::report::Bound::Overhead => "overhead",
        crate::report::Bound::Unknown => "",
    }
}

/// The whole page: the title and one line on the machine, then the chart of each roof set
/// (the main job's one thread and every core) with its legend, hover and pinned panel; the
/// rest (machine and environment, roofs, the other views, advice, tables) follows, folded.
pub fn render(view: &View, title: &str) -> Result<String> {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{CSS}{}</style></head><body><main>\n<header><h1>{}</h1>",
        esc(title),
        super::page::CSS,
        esc(title)
    );
    let npoints = view.points().count();
    // A merged job: its line, its charts (nodes, ranks, the job) and its balance.
    let job = super::job_page::job_of(view).map(|(_, j)| j);
    let _ = write!(
        o,
        "<p class=\"machine\">{} · {} point(s) · roofline {}</p></header>",
        esc(&match job {
            Some(j) => super::job_page::summary_line(j),
            None => super::page::machine_line(view),
        }),
        npoints,
        env!("CARGO_PKG_VERSION")
    );
    let sets = view.by_threads();
    // (heading, points, drawn only when asked)
    let charted: Vec<(Option<String>, View, bool)> = match job {
        Some(_) => super::job_page::views(view)
            .into_iter()
            .map(|c| (Some(c.heading), c.view, c.on_demand))
            .collect(),
        None => sets
            .iter()
            .map(|set| ((sets.len() > 1).then(|| threads_heading(set)), set.clone(), false))
            .collect(),
    };
    for (i, (heading, set, on_demand)) in charted.iter().enumerate() {
        let id = format!("chart{i}");
        let section = match heading {
            Some(h) if *on_demand => super::page::chart_on_demand(set, &id, h, "ranks"),
            _ => super::page::chart_section(set, &id, heading.as_deref()),
        };
        o.push_str(section.as_deref().unwrap_or_default());
    }
    // The script right after the charts: they respond before the rest of the page is read
    // (a chart drawn on demand is set up when asked).
    let _ = write!(o, "<script>{}</script>", super::page::SCRIPT);
    energy_section(&mut o, view);
    point_energy_section(&mut o, view);
    command_energy_section(&mut o, view);
    if job.is_some() {
        super::job_page::sections(&mut o, view);
    }
    // Machine and environment, per report (and per merge source).
    o.push_str("<details><summary><h2>Machine and environment</h2></summary><div class=\"grid\">");
    for r in &view.reports {
        if r.report.sources.is_empty() {
            let _ = write!(o, "<div class=\"card\"><h3>{}</h3>", esc(&r.name));
            kv(&mut o, &machine_rows(&r.report.machine));
            kv(&mut o, &env_rows(&r.report.environment));
            o.push_str("</div>");
        } else {
            for s in &r.report.sources {
                let _ = write!(
                    o,
                    "<div class=\"card\"><h3>{} <span class=\"muted\">in {}</span></h3>",
                    esc(&s.name),
                    esc(&r.name)
                );
                kv(&mut o, &machine_rows(&s.machine));
                kv(&mut o, &env_rows(&s.environment));
                o.push_str("</div>");
            }
        }
    }
    o.push_str("</div></details>");
    // Roofs and the other views, per roof set.
    for set in &sets {
        let t = if sets.len() > 1 {
            format!(" — {}", threads_heading(set))
        } else {
            String::new()
        };
        let _ = write!(o, "<details><summary><h2>Roofs and the other views{}</h2></summary>", esc(&t));
        roofs_and_plots(&mut o, set)?;
        o.push_str("</details>");
    }
    let charted: Vec<View> = charted.into_iter().map(|(_, v, _)| v).collect();
    o.push_str(&render_rest(view, &charted)?);
    Ok(o)
}

/// The energy rooflines (GFLOP/J against intensity) of the reports that carry energy roofs,
/// with each placed point's figures in a table beneath.
fn energy_section(o: &mut String, view: &View) {
    let charts = super::energy_chart::view_svgs(view);
    if charts.is_empty() {
        return;
    }
    o.push_str("<section class=\"energy\"><h2>Energy roofline</h2><div class=\"plots\">");
    for svg in &charts {
        let _ = write!(o, "<figure>{}</figure>", svg.trim_end());
    }
    o.push_str("</div><div class=\"scroll\"><table><tr><th>point</th><th>AI dram</th><th>GFLOP/J</th><th>roofline GFLOP/J</th><th>of roofline</th><th>energy bound</th><th>J/run</th></tr>");
    for r in &view.reports {
        for p in &r.report.points {
            if let Some((_, at)) = crate::model::energy::place_in(&r.report, p) {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}%</td><td>{}</td><td>{}</td></tr>",
                    esc(&p.name),
                    sig3(at.ai),
                    sig3(at.gflop_per_joule),
                    sig3(at.attainable),
                    100.0 * at.fraction,
                    at.bound,
                    p.extra
                        .energy
                        .as_ref()
                        .map_or("-".into(), |e| format!("{:.4e} ({})", e.total_joules, esc(&e.total_domain)))
                );
            }
        }
    }
    o.push_str("</table></div><p class=\"muted\">Energy roofline (Choi, Bedard, Fowler and Vuduc): 1 / (pJ per flop + pJ per byte / intensity), the constant power left out; the energy balance point is where a byte costs as much as the flops it feeds.</p></section>");
}

/// The joules of every point that has them (a command's and each of its marker regions',
/// the suite kernels'), per domain, with how they were read and their caveats.
fn point_energy_section(o: &mut String, view: &View) {
    let with: Vec<(&crate::schema::Point, &crate::schema::energy::PointEnergy)> = view
        .reports
        .iter()
        .flat_map(|r| r.report.points.iter())
        .filter_map(|p| p.extra.energy.as_ref().map(|e| (p, e)))
        .collect();
    if with.is_empty() {
        return;
    }
    o.push_str("<section class=\"point-energy\"><h2>Energy per point</h2><div class=\"scroll\"><table><tr><th>point</th><th>domain</th><th>J/run</th><th>spread</th><th>W</th><th>idle W</th><th>GFLOP/J</th></tr>");
    let mut notes: Vec<String> = Vec::new();
    for (p, e) in &with {
        for (name, d) in &e.domains {
            let gflop_j = (p.flops.total > 0.0 && d.joules > 0.0).then(|| p.flops.total / 1e9 / d.joules);
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:.4e}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&p.name),
                esc(name),
                d.joules,
                d.spread.map_or("-".into(), |x| format!("{:.1}%", 100.0 * x)),
                sig3(d.watts),
                e.idle.get(name).map_or("-".into(), |i| sig3(i.watts)),
                gflop_j.map_or("-".into(), sig3)
            );
        }
        for n in std::iter::once(&e.source).chain(&e.notes) {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
    }
    o.push_str("</table></div><p class=\"muted\">");
    for (i, n) in notes.iter().enumerate() {
        let _ = write!(o, "{}{}", if i > 0 { "; " } else { "" }, esc(n));
    }
    o.push_str("</p></section>");
}

/// The energy of the whole command (`gpu measure --energy`) of each report that carries it:
/// what was measured, in the words of the report, and how.
fn command_energy_section(o: &mut String, view: &View) {
    let with: Vec<&crate::schema::energy::CommandEnergy> = view.reports.iter().filter_map(|r| r.report.command_energy.as_ref()).collect();
    if with.is_empty() {
        return;
    }
    o.push_str("<section class=\"command-energy\"><h2>Energy of the whole command</h2>");
    for c in with {
        let _ = write!(o, "<p>Energy: {}</p><p class=\"muted\">{}", esc(&c.measured), esc(&c.energy.source));
        for n in &c.energy.notes {
            let _ = write!(o, "; {}", esc(n));
        }
        o.push_str("</p>");
    }
    o.push_str("</section>");
}

fn threads_heading(set: &View) -> String {
    set.roofs
        .threads
        .map(|t| format!("{t} thread(s)"))
        .unwrap_or_else(|| "other thread counts".into())
}

/// The roof tables and the charts of one view (one thread count).
fn roofs_and_plots(o: &mut String, view: &View) -> Result<()> {
    if view.roofs.is_empty() {
        o.push_str("<p>No roofs: the report has no ceilings and no machine peaks; pass <code>--ceilings FILE</code>.</p>");
    } else {
        o.push_str("<div class=\"grid\"><div class=\"scroll\"><table><tr><th>compute</th><th>GFLOP/s</th><th>source</th></tr>");
        for c in &view.roofs.compute {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&super::chart::roof_name(c, true)),
                sig3(c.gflops),
                if c.empirical { "measured" } else { "theoretical" }
            );
        }
        o.push_str(
            "</table></div><div class=\"scroll\"><table><tr><th>memory</th><th>GB/s core-side</th><th>GB/s traffic</th><th>source</th></tr>",
        );
        for b in &view.roofs.bandwidth {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&level_label(&b.level)),
                sig3(b.gbs),
                sig3(b.traffic_gbs),
                if b.empirical { "measured" } else { "theoretical" }
            );
        }
        o.push_str("</table></div></div>");
        o.push_str(
            "<p class=\"muted\">Core-side: bytes of load/store instructions (the cache-aware model reads core-side AI against these). \
             Traffic: what the level serves, write-allocate reads included (the classic and hierarchical models read a level's bytes against these).</p>",
        );
        if let Some(t) = view.roofs.threads {
            let _ = write!(o, "<p class=\"muted\">Roofs for {t} thread(s).</p>");
        }
        for n in &view.roofs.notes {
            let _ = write!(o, "<p class=\"muted\">{}</p>", esc(n));
        }
    }
    // Plots
    o.push_str("<h3>Rooflines</h3><div class=\"plots\">");
    let all = View {
        reports: view.reports.clone(),
        roofs: view.roofs.clone(),
        kind: PlotKind::All,
    };
    let (kinds, left_out) = super::plot::drawn_panels(&all);
    for line in &left_out {
        let _ = write!(o, "<p class=\"muted\">{}</p>", esc(line));
    }
    for kind in kinds {
        let single = View {
            reports: view.reports.clone(),
            roofs: view.roofs.clone(),
            kind,
        };
        let (svg, panels) = super::plot::svg_sized(&single, super::plot::COMPACT)?;
        let _ = write!(o, "<figure>{}", inline_svg(&svg));
        let mut notes: Vec<String> = panels.iter().flat_map(|p| p.not_shown.iter().cloned()).collect();
        notes.extend(
            panels
                .iter()
                .flat_map(|p| p.hidden.iter().map(|h| format!("label '{h}' hidden (no free spot)"))),
        );
        if !notes.is_empty() {
            let _ = write!(o, "<figcaption class=\"muted\">Notes: {}</figcaption>", esc(&notes.join("; ")));
        }
        o.push_str("</figure>");
    }
    // GPU points captured with the instruction metrics: their instruction roofline beside.
    let with_ir: Vec<Point> = view
        .points()
        .filter(|(_, p, _)| super::instruction::block(p).is_some())
        .map(|(_, p, _)| p.clone())
        .collect();
    if !with_ir.is_empty() {
        let svg = super::instruction::svg(&with_ir)?;
        let _ = write!(o, "<figure>{}</figure>", inline_svg(&svg));
    }
    o.push_str("</div>");
    Ok(())
}

/// One card of advice per point, built in the page when the section is first opened: from
/// the charts' data for the points drawn on one of `charted` (their advice is written once
/// in the file), from `cards-data` for the others (their own data, the same shape).
fn advice_cards(o: &mut String, view: &View, charted: &[View]) {
    o.push_str("<details class=\"cards\"><summary><h2>Advice per point</h2></summary><div class=\"grid\"></div>");
    // The points drawn on a chart, by report, name and source.
    let mut placed: std::collections::HashSet<(String, String, Option<String>)> = std::collections::HashSet::new();
    for set in charted {
        if let Some(kind) = super::chart::chosen_kind(set) {
            for (r, p, a) in set.points() {
                if super::chart::dot_position(p, a, kind).is_some() {
                    placed.insert((r.name.clone(), p.name.clone(), p.source.clone()));
                }
            }
        }
    }
    let mut unplaced = Vec::new();
    for set in view.by_threads() {
        for (r, p, a) in set.points() {
            if a.skipped.is_some() || placed.contains(&(r.name.clone(), p.name.clone(), p.source.clone())) {
                continue;
            }
            let mut d = super::dot_info::dot_data(&set, r, p, a, 0.0);
            if let Some(m) = d.as_object_mut() {
                m.remove("notes");
            }
            unplaced.push(d);
        }
    }
    let _ = write!(
        o,
        "<script type=\"application/json\" id=\"cards-data\">{}</script></details>",
        serde_json::to_string(&unplaced)
            .unwrap_or_else(|_| "[]".into())
            .replace("</", "<\\/")
    );
}

/// Everything after the charts: the advice cards and the rest.
fn render_rest(view: &View, charted: &[View]) -> Result<String> {
    let mut o = String::new();
    advice_cards(&mut o, view, charted);
    // GPU fusion candidates (gpu::fusion): one line per chain with its kernels.
    let chains: Vec<&crate::schema::report::FusionChain> = view.reports.iter().flat_map(|r| r.report.fusion.iter()).collect();
    if !chains.is_empty() {
        o.push_str("<h2>Fusion candidates</h2><p class=\"muted\">Consecutive memory-bound kernels on one stream inside the same NVTX ranges; the fused bytes are a lower bound (the first kernel's reads, the last one's writes).</p><ul>");
        for c in chains {
            let _ = write!(
                o,
                "<li>{}{}<br><span class=\"muted\">{}</span></li>",
                if c.region.is_empty() {
                    String::new()
                } else {
                    format!("[{}] ", esc(&c.region))
                },
                esc(&c.summary),
                esc(&c.kernels.join(" → "))
            );
        }
        o.push_str("</ul>");
    }
    point_table(&mut o, view);
    attribution_tables(&mut o, view);
    let skipped = view.skipped();
    if !skipped.is_empty() {
        o.push_str("<h2>Skipped points</h2><ul>");
        for (r, p, why) in skipped {
            let _ = write!(o, "<li><b>{}</b> ({}): {}</li>", esc(p), esc(r), esc(why));
        }
        o.push_str("</ul>");
    }
    o.push_str(
        "<p class=\"muted\">Models: <b>classic</b> min(peak, BW<sub>DRAM</sub>·AI<sub>DRAM</sub>); \
         <b>cache-aware</b> core-side AI against each level's roof (Ilić et al.); \
         <b>hierarchical</b> min(peak, min<sub>l</sub> BW<sub>l</sub>·AI<sub>l</sub>). \
         The roof fraction and the bound use the tightest model available.</p>",
    );
    o.push_str("</main></body></html>\n");
    Ok(o)
}

/// The point table, built in the page when it is first opened from `points-data`: `h` the
/// header, `r` one row of cells per point (its provenance an index into `pv`), each row's
/// last item its bound's class (a table of
/// a thousand rows is mostly markup; its cells are what it says).
fn point_table(o: &mut String, view: &View) {
    let levels: Vec<String> = super::csv::levels(view).into_iter().filter(|l| l != "stack").collect();
    let mut head: Vec<String> = ["point", "threads", "T (median)", "spread", "W (flop)", "GFLOP/s"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    for l in &levels {
        head.extend([format!("Q {l}"), format!("GB/s {l}"), format!("AI {l}")]);
    }
    head.extend(
        ["hierarchical", "classic", "cache-aware", "roof", "bound", "provenance"]
            .iter()
            .map(|h| h.to_string()),
    );
    let dash = || "-".to_string();
    let mut rows: Vec<Vec<serde_json::Value>> = Vec::new();
    let mut provenances: Vec<String> = Vec::new();
    for (r, p, a) in view.points() {
        let mut row = vec![
            view.point_label(r, p),
            p.threads.to_string(),
            seconds(p.seconds),
            p.spread().map(|s| format!("{:.1}%", s * 100.0)).unwrap_or_else(dash),
            si(p.flops.total),
            p.gflops.map(sig3).unwrap_or_else(dash),
        ];
        for l in &levels {
            row.push(p.bytes.get(l).map(|b| format!("{}B", si(*b))).unwrap_or_else(dash));
            row.push(p.gbs.get(l).map(|x| sig3(*x)).unwrap_or_else(dash));
            row.push(a.ai.get(l).map(|x| sig3(*x)).unwrap_or_else(dash));
        }
        for m in [ModelKind::Hierarchical, ModelKind::Dram, ModelKind::CacheAware] {
            row.push(a.get(m).map(|x| sig3(x.gflops)).unwrap_or_else(dash));
        }
        let mut prov = Vec::new();
        if let Some(s) = p.provenance.flops {
            prov.push(format!("W {}", s.name()));
        }
        for (l, s) in &p.provenance.bytes {
            prov.push(format!("Q {l} {}", s.name()));
        }
        if let Some(s) = p.provenance.seconds {
            prov.push(format!("T {}", s.name()));
        }
        row.push(a.roof_fraction.map(|f| format!("{:.0}%", f * 100.0)).unwrap_or_else(dash));
        row.push(if a.skipped.is_some() {
            "skipped".to_string()
        } else {
            bound_text(&a.bound)
        });
        // Most points share their provenance: written once, the rows refer to it.
        let prov = prov.join(", ");
        let k = match provenances.iter().position(|p| *p == prov) {
            Some(k) => k,
            None => {
                provenances.push(prov);
                provenances.len() - 1
            }
        };
        let mut row: Vec<serde_json::Value> = row.into_iter().map(serde_json::Value::from).collect();
        row.push(k.into());
        row.push(bound_class(&a.bound).into());
        rows.push(row);
    }
    let doc = serde_json::json!({ "h": head, "r": rows, "pv": provenances });
    let _ = write!(
        o,
        "<details class=\"points\"><summary><h2>Points</h2></summary><div class=\"scroll\"></div>\
         <script type=\"application/json\" id=\"points-data\">{}</script></details>",
        serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into()).replace("</", "<\\/")
    );
}

/// Rows per attribution table in the page (the JSON has them all).
const ATTRIBUTION_ROWS: usize = 15;

/// "Where the work is": the trace backend's per-function and per-line attribution
/// (`extra.by_function`, `extra.by_line`) of each point that carries it, most flops first.
fn attribution_tables(o: &mut String, view: &View) {
    let mut head = false;
    for (r, p, _) in view.points() {
        for (key, what, rows) in [
            ("by_function", "function", &p.extra.by_function),
            ("by_line", "source line", &p.extra.by_line),
        ] {
            let Some(rows) = rows else {
                continue;
            };
            if rows.is_empty() {
                continue;
            }
            if !head {
                o.push_str("<details><summary><h2>Where the work is</h2></summary>");
                head = true;
            }
            let mut rows: Vec<&WorkRow> = rows.iter().collect();
            rows.sort_by(|a, b| b.flops.cmp(&a.flops).then(b.instructions.cmp(&a.instructions)));
            let total: u64 = rows.iter().map(|r| r.flops).sum();
            let _ = write!(
                o,
                "<h3>{} by {what}</h3><div class=\"scroll\"><table><tr>{}<th>function</th><th>instructions</th><th>W (flop)</th><th>core bytes</th><th>share of W</th></tr>",
                esc(&view.point_label(r, p)),
                if key == "by_line" { "<th>line</th>" } else { "" }
            );
            for row in rows.iter().take(ATTRIBUTION_ROWS) {
                let f = row.flops;
                o.push_str("<tr>");
                if key == "by_line" {
                    let _ = write!(o, "<td><code>{}</code></td>", esc(row.line.as_deref().unwrap_or("?")));
                }
                let _ = write!(
                    o,
                    "<td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&row.function),
                    row.instructions,
                    f,
                    row.core_bytes,
                    if total > 0 {
                        format!("{:.1}%", 100.0 * f as f64 / total as f64)
                    } else {
                        "-".into()
                    }
                );
            }
            if rows.len() > ATTRIBUTION_ROWS {
                let _ = write!(
                    o,
                    "<tr><td colspan=\"6\" class=\"muted\">{} more rows in the JSON report</td></tr>",
                    rows.len() - ATTRIBUTION_ROWS
                );
            }
            o.push_str("</table></div>");
        }
    }
    if head {
        o.push_str("</details>");
    }
}

impl Exporter for HtmlExporter {
    fn export(&self, view: &View) -> Result<Vec<u8>> {
        Ok(render(view, "Roofline report")?.into_bytes())
    }
}
