//! The terminal summary: a one-line-per-point overview, then per point W, Q per level,
//! T (median and spread), GFLOP/s, GB/s and AI per level, attainable performance per model,
//! `roof_fraction`, the bound and one line of advice. Skipped points are listed with why.

use std::fmt::Write;

use super::{Exporter, NamedReport, View};
use crate::error::Result;
use crate::model::{Analysis, ModelKind, RoofSet, isa_label, level_label, level_rank};
use crate::schema::report::{Bound, Point};
use crate::schema::units::{seconds, si_unit, sig3};

pub struct TableExporter;

/// `memory (L2)`, `compute (AVX-512)`, `overhead`.
pub fn bound_text(b: &Bound) -> String {
    match b {
        Bound::Compute { isa } => format!("compute ({})", isa_label(isa)),
        Bound::Memory { level } => format!("memory ({})", level_label(level)),
        Bound::Overhead => "overhead".into(),
        Bound::Unknown => "unknown".into(),
    }
}

fn levels_of(p: &Point) -> Vec<&String> {
    let mut v: Vec<&String> = p.bytes.keys().collect();
    crate::util::sort_by(&mut v, |a, b| (level_rank(a), *a).cmp(&(level_rank(b), *b)));
    v
}

fn prov(p: &Point, level: Option<&str>) -> String {
    let s = match level {
        None => p.provenance.flops,
        Some(l) => p.provenance.bytes.get(l).copied(),
    };
    s.map(|s| format!(" ({})", s.name())).unwrap_or_default()
}

/// The view as the text table the commands print (a section per thread count when the
/// reports carry roofs at several).
pub fn render(view: &View) -> String {
    let cpu = view
        .reports
        .iter()
        .find_map(|r| r.report.environment.cpu_choice.as_ref())
        .map(cpu_choice_line)
        .unwrap_or_default();
    let sets = view.by_threads();
    if sets.len() < 2 {
        return cpu + &render_one(view);
    }
    // One section per roof set (the main job's one thread and every core), each point
    // under the roofs of its own thread count.
    let sections = sets
        .iter()
        .map(|v| {
            let t = v
                .roofs
                .threads
                .map(|t| format!("{t} thread(s)"))
                .unwrap_or_else(|| "other thread counts".into());
            format!("== {t} ==\n{}", render_one(v))
        })
        .collect::<Vec<_>>();
    cpu + &sections.join("\n")
}

/// Below this share of the fastest CPU's probe rate, the CPUs are called unequal.
pub const UNEQUAL_CPUS: f64 = 0.9;

/// Which CPU one-thread runs used and why, and whether the machine's CPUs are unequal.
pub fn cpu_choice_line(c: &crate::schema::report::CpuChoice) -> String {
    let mut o = format!("one thread ran on CPU {} ({} on each of {} CPU(s)", c.cpu, c.probe, c.rates.len());
    match c.slowest() {
        Some((cpu, share)) if share < UNEQUAL_CPUS => {
            let _ = write!(
                o,
                "); the CPUs are unequal: CPU {cpu} ran it at {:.0} % of the fastest (a neighbour on its core or a lower clock; teams wait for their slowest thread)",
                100.0 * share
            );
        }
        Some((_, share)) => {
            let _ = write!(o, ", all within {:.0} % of the fastest)", 100.0 * (1.0 - share));
        }
        None => o.push(')'),
    }
    o.push('\n');
    o
}

fn render_one(view: &View) -> String {
    let mut o = roofs_line(&view.roofs);
    o.push_str(&overview(view));
    for (r, p, a) in view.points() {
        if a.skipped.is_none() {
            o.push_str(&point_details(view, r, p, a));
        }
    }
    // GPU points measured with the instruction metrics: their instruction roofline (GPU
    // imports come with `analysis`; a regions-only build has none).
    #[cfg(any(feature = "analysis", feature = "plot"))]
    o.push_str(&super::instruction::text_section(view.points().map(|(_, p, _)| p)));
    let skipped = view.skipped();
    if !skipped.is_empty() {
        o.push_str("\nskipped (cannot be placed on a roofline):\n");
        for (r, p, why) in skipped {
            let _ = writeln!(o, "  {p} [{r}]: {why}");
        }
    }
    o
}

/// The roofs in one line: peaks per precision, then each memory level's bandwidth.
fn roofs_line(roofs: &RoofSet) -> String {
    let mut o = String::new();
    if !roofs.is_empty() {
        let kind = if roofs.compute.iter().all(|c| c.empirical) && roofs.bandwidth.iter().all(|b| b.empirical) {
            "empirical"
        } else {
            "empirical/theoretical"
        };
        let _ = write!(
            o,
            "roofs ({kind}{}):",
            roofs.threads.map(|t| format!(", {t} thread(s)")).unwrap_or_default()
        );
        for prec in ["double", "single"] {
            if let Some(p) = roofs.peak(prec).filter(|p| p.precision == prec) {
                let _ = write!(o, " peak {prec} {} GFLOP/s ({});", sig3(p.gflops), p.label());
            }
        }
        // One peak per other precision (fp16, bf16, int8, tensor types): its own family.
        for prec in roofs.precisions().into_iter().filter(|p| !matches!(*p, "double" | "single")) {
            if let Some(p) = roofs.peak(prec) {
                let _ = write!(o, " peak {prec} {} {} ({});", sig3(p.gflops), p.unit(), p.label());
            }
        }
        for b in &roofs.bandwidth {
            // Core-side GB/s (cache-aware model); in brackets the level's own traffic with
            // write-allocate, which the classic and hierarchical models read level bytes against.
            let traffic = if (b.traffic_gbs - b.gbs).abs() > 1e-9 * b.gbs {
                format!(" [traffic {}]", sig3(b.traffic_gbs))
            } else {
                String::new()
            };
            let _ = write!(o, " {} {} GB/s{traffic};", level_label(&b.level), sig3(b.gbs));
        }
        o.push('\n');
        for n in &roofs.notes {
            let _ = writeln!(o, "  note: {n}");
        }
    } else {
        o.push_str("roofs: none (no ceilings in the report, no --ceilings, no machine peaks): attainable figures unknown\n");
    }
    o
}

/// One row per point: GFLOP/s, AI at core and DRAM, attainable, roof fraction, bound.
fn overview(view: &View) -> String {
    let mut o = String::new();
    let name_w = view
        .points()
        .map(|(r, p, _)| view.point_label(r, p).chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let _ = writeln!(
        o,
        "\n{:<name_w$}  {:>9}  {:>8}  {:>8}  {:>10}  {:>6}  bound",
        "point", "GFLOP/s", "AI core", "AI dram", "attainable", "roof%"
    );
    for (r, p, a) in view.points() {
        let label = view.point_label(r, p);
        if a.skipped.is_some() {
            let _ = writeln!(o, "{label:<name_w$}  skipped (see below)");
            continue;
        }
        let att = a
            .primary
            .and_then(|m| a.get(m))
            .map(|x| sig3(x.gflops))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "{:<name_w$}  {:>9}  {:>8}  {:>8}  {:>10}  {:>6}  {}",
            label,
            crate::model::point_rate(p).map(sig3).unwrap_or_else(|| "-".into()),
            a.ai.get("core").map(|x| sig3(*x)).unwrap_or_else(|| "-".into()),
            a.ai.get("dram").map(|x| sig3(*x)).unwrap_or_else(|| "-".into()),
            att,
            a.roof_fraction.map(|f| format!("{:.0}%", f * 100.0)).unwrap_or_else(|| "-".into()),
            bound_text(&a.bound)
        );
        let prec = crate::model::point_precision(p);
        if !matches!(prec, "double" | "single") {
            // Other precisions: which roofs the row was read against, and the rate's unit.
            let _ = writeln!(
                o,
                "{:<name_w$}  ({} work: {}, {} roofs)",
                "",
                crate::model::precision_label(prec),
                crate::model::rate_unit(prec),
                crate::model::precision_label(prec)
            );
        }
    }
    o
}

/// One point in full: W, T, Q per level, rates, AI, attainable per model, compute roof,
/// bound and advice, notes.
fn point_details(view: &View, r: &NamedReport, p: &Point, a: &Analysis) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\n{}  [{}, {} thread{}]",
        view.point_label(r, p),
        p.source.as_deref().unwrap_or(&r.name),
        p.threads,
        if p.threads == 1 { "" } else { "s" }
    );
    let spread = p.spread().map(|s| format!(" (spread {:.1}%)", s * 100.0)).unwrap_or_default();
    let _ = writeln!(
        o,
        "  W {}{}   T {}{} over {} rep(s){}",
        si_unit(p.flops.total, "FLOP"),
        prov(p, None),
        seconds(p.seconds),
        spread,
        p.seconds_samples.len(),
        p.provenance.seconds.map(|s| format!(" ({})", s.name())).unwrap_or_default()
    );
    let q: Vec<String> = levels_of(p)
        .iter()
        .map(|l| format!("{} {}{}", l, si_unit(p.bytes[*l], "B"), prov(p, Some(l))))
        .collect();
    let _ = writeln!(o, "  Q {}", q.join(", "));
    let gbs: Vec<String> = levels_of(p)
        .iter()
        .filter_map(|l| p.gbs.get(*l).map(|g| format!("{l} {}", sig3(*g))))
        .collect();
    let ai: Vec<String> = levels_of(p)
        .iter()
        .filter_map(|l| a.ai.get(*l).map(|x| format!("{l} {}", sig3(*x))))
        .collect();
    let _ = writeln!(
        o,
        "  {} GFLOP/s   GB/s: {}   AI (flop/B): {}",
        crate::model::point_rate(p).map(sig3).unwrap_or_else(|| "-".into()),
        gbs.join(", "),
        ai.join(", ")
    );
    let att: Vec<String> = [ModelKind::Hierarchical, ModelKind::Dram, ModelKind::CacheAware]
        .iter()
        .filter_map(|m| a.get(*m))
        .map(|x| format!("{} {} GFLOP/s", x.model.name(), sig3(x.gflops)))
        .collect();
    if att.is_empty() {
        let _ = writeln!(o, "  attainable: unknown (no roofs for this point's levels)");
    } else {
        let _ = writeln!(o, "  attainable: {}", att.join("; "));
    }
    if let Some((_, per_level)) = crate::model::attainable_cache_aware(p, &r.roofs) {
        let mut lv: Vec<(&String, &f64)> = per_level.iter().collect();
        crate::util::sort_by_key(&mut lv, |(l, _)| level_rank(l));
        let parts: Vec<String> = lv.iter().map(|(l, g)| format!("{} {}", level_label(l), sig3(**g))).collect();
        let _ = writeln!(o, "  cache-aware roofs at core AI (GFLOP/s): {}", parts.join(", "));
    }
    if let Some(c) = &a.compute_roof {
        let _ = writeln!(
            o,
            "  compute roof: {} {} {} ({})",
            c.label,
            sig3(c.gflops),
            crate::model::rate_unit(crate::model::point_precision(p)),
            c.why
        );
    }
    if let (Some(f), Some(m)) = (a.roof_fraction, a.primary) {
        let _ = writeln!(o, "  roof_fraction {:.1}% of the {} roof", f * 100.0, m.name());
    }
    let _ = writeln!(o, "  bound: {} → {}", bound_text(&a.bound), a.advice);
    for n in &p.provenance.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    o
}

impl Exporter for TableExporter {
    fn export(&self, view: &View) -> Result<Vec<u8>> {
        Ok(render(view).into_bytes())
    }
}
