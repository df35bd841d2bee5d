//! What the page tells about each dot: the figures its hover box shows, the panel a click
//! pins (figures, notes, advice, hottest functions and lines), and advice written from the
//! dot's own numbers (which roof, how far below it, what the next roof up needs), so no two
//! dots get the same paragraph.

use serde_json::{Value, json};

use super::chart::{Chart, bound_class};
use super::table::bound_text;
use super::{NamedReport, View};
use crate::model::{
    Analysis, ComputeRoof, Limiter, RoofSet, isa_label, level_label, level_rank, point_precision, point_rate, point_work, precision_family,
    rate_unit, unit_advice,
};
use crate::schema::report::{Bound, Point};
use crate::schema::units::{seconds, si, sig3};

/// Hottest functions and lines listed in a dot's panel (the tables below have more).
const HOT_ROWS: usize = 5;

/// Roof fraction from which a point counts as at its roof: only less work or traffic helps.
pub const AT_ROOF: f64 = 0.8;

fn pct(f: f64) -> String {
    if f >= 0.1 {
        format!("{:.0} %", f * 100.0)
    } else {
        format!("{} %", sig3(f * 100.0))
    }
}

/// The roof a point's primary model reads it against, by name: `L2 (hierarchical)`,
/// `AVX-512 FMA`.
pub fn primary_roof(a: &Analysis) -> Option<(String, f64)> {
    let m = a.primary?;
    let at = a.get(m)?;
    let name = match &at.limiter {
        Limiter::Compute { isa, fma } => a
            .compute_roof
            .as_ref()
            .map(|c| c.label.clone())
            .unwrap_or_else(|| format!("{} {}", isa_label(isa), if *fma { "FMA" } else { "no-FMA" })),
        Limiter::Memory { level } => format!("{} bandwidth", level_label(level)),
    };
    Some((format!("{name} ({} model)", m.name()), at.gflops))
}

/// The next compute roof above `gflops` for `precision`, and what reaching it takes.
fn next_compute_roof<'a>(roofs: &'a RoofSet, precision: &str, isa: &str, gflops: f64) -> Option<(&'a ComputeRoof, String)> {
    let next = roofs
        .compute
        .iter()
        .filter(|c| c.precision == precision && c.gflops > gflops * 1.05)
        .min_by(|a, b| a.gflops.total_cmp(&b.gflops))?;
    let need = if next.isa != isa {
        format!("{} vectors", isa_label(&next.isa))
    } else if next.mix {
        "FMAs issued beside separate adds".to_string()
    } else if next.fma {
        "its multiply-adds fused (FMA)".to_string()
    } else {
        "more independent operations".to_string()
    };
    Some((next, need))
}

/// The faster unit the model's advice names for a compute-bound point (a tile unit of its
/// precision, or a lower precision's roof well above its peak): its roof.
fn faster_unit<'a>(p: &Point, bound: &Bound, roofs: &'a RoofSet) -> Option<&'a ComputeRoof> {
    // Only where the model says there is one (its thresholds), then the roof it names.
    let said = unit_advice(p, bound, roofs)?;
    roofs
        .compute
        .iter()
        .filter(|c| said.contains(&c.label()))
        .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
}

/// Advice from the dot's own numbers: where it is against its roof, what only helps there,
/// and what the next roof up needs. Empty for points that cannot be placed.
pub fn dot_advice(p: &Point, a: &Analysis, roofs: &RoofSet) -> Vec<String> {
    if a.skipped.is_some() {
        return Vec::new();
    }
    let Some(rate) = point_rate(p) else { return Vec::new() };
    let prec = point_precision(p);
    let unit = rate_unit(prec);
    let f = a.roof_fraction;
    let mut out = Vec::new();
    match &a.bound {
        Bound::Overhead => {
            let t = seconds(p.seconds);
            match p.extra.fixed_seconds {
                Some(fixed) if p.seconds > 0.0 => out.push(format!(
                    "A fixed cost of {} is {} of its {t} per call: more work per call (batches), fewer calls or launches; the roofs apply to the rest.",
                    seconds(fixed),
                    pct(fixed / p.seconds)
                )),
                _ => out.push(format!(
                    "{t} per call at {} of its roof: start-up and synchronisation dominate; time more work per call before reading the roofs.",
                    f.map(pct).unwrap_or_else(|| "an unknown share".into())
                )),
            }
        }
        Bound::Compute { isa } => {
            let (label, roof) = a
                .compute_roof
                .as_ref()
                .map(|c| (c.label.clone(), c.gflops))
                .or_else(|| roofs.at_isa(prec, isa).map(|c| (c.label(), c.gflops)))
                .unwrap_or_else(|| (isa_label(isa), rate / f.unwrap_or(1.0)));
            let frac = rate / roof;
            if frac >= AT_ROOF {
                out.push(format!(
                    "At {} of the {label} roof ({} {unit}): only fewer flops or a lower precision make it faster.",
                    pct(frac),
                    sig3(roof)
                ));
            } else {
                out.push(format!(
                    "At {} of the {label} roof ({} {unit}): {:.1}x is left at this ISA; what holds it is latency, not bandwidth — more independent accumulators, unrolled dependency chains.",
                    pct(frac),
                    sig3(roof),
                    roof / rate
                ));
            }
            // (At the highest roof, the first line said what is left.)
            if let Some((next, need)) = next_compute_roof(roofs, prec, isa, roof) {
                out.push(format!(
                    "The next roof up, {} at {} {unit} ({:.1}x this dot's {}), needs {need}.",
                    next.label(),
                    sig3(next.gflops),
                    next.gflops / rate,
                    sig3(rate)
                ));
            }
            if let Some(lower) = faster_unit(p, &a.bound, roofs) {
                out.push(format!(
                    "{} reaches {} {} here, {:.1}x this dot's {} {unit}: {}.",
                    lower.label(),
                    sig3(lower.gflops),
                    lower.unit(),
                    lower.gflops / rate,
                    sig3(rate),
                    if lower.isa == "amx" && precision_family(&lower.precision) == precision_family(prec) {
                        "a tile unit (oneDNN, _tile_dp* intrinsics)"
                    } else {
                        "a lower precision, where accuracy allows"
                    }
                ));
            }
        }
        Bound::Memory { level } => memory_advice(&mut out, p, a, roofs, level, rate),
        Bound::Unknown => {}
    }
    out
}

fn memory_advice(out: &mut Vec<String>, p: &Point, a: &Analysis, roofs: &RoofSet, level: &str, rate: f64) {
    let prec = point_precision(p);
    let unit = rate_unit(prec);
    let name = level_label(level);
    let prim = a.primary.and_then(|m| a.get(m));
    let att = prim.map(|x| x.gflops).unwrap_or(rate);
    // The AI the roof was read at: the level's own (core bytes against L1).
    let ai =
        a.ai.get(level)
            .or_else(|| if level == "l1" { a.ai.get("core") } else { None })
            .copied();
    let frac = rate / att;
    let Some(ai) = ai.filter(|x| *x > 0.0) else {
        out.push(format!("At {} of the {name} roof ({} {unit}).", pct(frac), sig3(att)));
        return;
    };
    let bw = att / ai;
    if frac >= AT_ROOF {
        out.push(format!(
            "At {} of the {name} roof ({} GB/s × AI {} = {} {unit}): {name}'s bandwidth is used; only fewer {name} bytes per flop help (reuse in a closer level, fused passes, narrower types).",
            pct(frac),
            sig3(bw),
            sig3(ai),
            sig3(att)
        ));
    } else {
        out.push(format!(
            "At {} of the {name} roof ({} GB/s × AI {} = {} {unit}): {:.1}x of {name}'s bandwidth is unused — more bytes in flight (independent streams, prefetching, threads) before less traffic.",
            pct(frac),
            sig3(bw),
            sig3(ai),
            sig3(att),
            att / rate
        ));
    }
    let peak = a
        .compute_roof
        .as_ref()
        .map(|c| (c.label.clone(), c.gflops))
        .or_else(|| roofs.peak(prec).map(|c| (c.label(), c.gflops)));
    if let Some((label, g)) = peak.clone()
        && g > att
    {
        let ridge = g / bw;
        out.push(format!(
            "To reach the {label} roof ({} {unit}) its {name} AI must grow from {} to {} flop/B: {:.1}x fewer {name} bytes per flop.",
            sig3(g),
            sig3(ai),
            sig3(ridge),
            ridge / ai
        ));
    }
    // The level above: the same bytes served from it.
    let closer = roofs
        .bandwidth
        .iter()
        .filter(|b| level_rank(&b.level) < level_rank(level) && level_rank(&b.level) >= 1 && b.gbs > bw)
        .max_by_key(|b| level_rank(&b.level));
    if let Some(c) = closer {
        let reach = (c.traffic_gbs.max(c.gbs) * ai).min(peak.map(|p| p.1).unwrap_or(f64::INFINITY));
        out.push(format!(
            "Served from {} ({} GB/s), as blocking for it would, the same AI reaches {} {unit}.",
            level_label(&c.level),
            sig3(c.traffic_gbs.max(c.gbs)),
            sig3(reach)
        ));
    }
}

/// The data of one dot for the page's script: `n` name, `b` bound, `bc` bound class, `tip`
/// the hover box's rows, `more` the pinned panel's extra rows, `adv` advice, `notes`,
/// `fns` and `lines` (hottest first), `warn` a warning.
pub fn dot_data(view: &View, r: &NamedReport, p: &Point, a: &Analysis, share: f64) -> Value {
    let roofs = r.roofs_for(p.threads);
    let unit = rate_unit(point_precision(p));
    let mut tip: Vec<(String, String)> = Vec::new();
    if view.reports.len() > 1 {
        tip.push(("report".into(), r.name.clone()));
    }
    let rate = point_rate(p);
    tip.push((
        unit.into(),
        rate.map(|g| {
            let spread = super::plot::error_bar(p)
                .map(|(lo, hi)| format!(" (IQR {}–{})", sig3(lo), sig3(hi)))
                .unwrap_or_default();
            format!("{}{spread}", sig3(g))
        })
        .unwrap_or_else(|| "-".into()),
    ));
    let mut ai: Vec<(&String, &f64)> = a.ai.iter().collect();
    ai.sort_by_key(|(l, _)| level_rank(l));
    if !ai.is_empty() {
        tip.push((
            "AI (flop/B)".into(),
            ai.iter()
                .map(|(l, x)| format!("{} {}", level_label(l), sig3(**x)))
                .collect::<Vec<_>>()
                .join(" · "),
        ));
    }
    tip.push((
        "T".into(),
        format!(
            "{}{}",
            seconds(p.seconds),
            p.spread()
                .map(|s| format!(" ± {:.1} % (IQR/median)", s * 100.0))
                .unwrap_or_default()
        ),
    ));
    if let Some((name, g)) = primary_roof(a) {
        tip.push(("roof".into(), format!("{name}: {} {unit}", sig3(g))));
    }
    if let Some(f) = a.roof_fraction {
        tip.push(("of roof".into(), pct(f)));
    }
    tip.push(("bound".into(), bound_text(&a.bound)));
    tip.push(("share of time".into(), pct(share)));
    let mut more: Vec<(String, String)> = vec![
        ("threads".into(), p.threads.to_string()),
        (
            "W".into(),
            format!("{} {}", si(point_work(p)), if unit == "GOP/s" { "op" } else { "flop" }),
        ),
    ];
    let mut q: Vec<(&String, &f64)> = p.bytes.iter().collect();
    q.sort_by_key(|(l, _)| level_rank(l));
    if !q.is_empty() {
        more.push((
            "Q".into(),
            q.iter()
                .map(|(l, b)| format!("{} {}B", level_label(l), si(**b)))
                .collect::<Vec<_>>()
                .join(" · "),
        ));
    }
    if let Some(c) = &a.compute_roof {
        more.push(("compute roof".into(), format!("{} {} {unit}", c.label, sig3(c.gflops))));
    }
    let hot = |rows: &Option<Vec<crate::schema::extras::WorkRow>>, line: bool| -> Vec<Value> {
        let Some(rows) = rows else { return Vec::new() };
        let total: u64 = rows.iter().map(|r| r.flops).sum();
        let mut rows: Vec<&crate::schema::extras::WorkRow> = rows.iter().collect();
        rows.sort_by(|a, b| b.flops.cmp(&a.flops).then(b.instructions.cmp(&a.instructions)));
        rows.iter()
            .take(HOT_ROWS)
            .map(|w| {
                let what = if line {
                    format!("{} ({})", w.line.as_deref().unwrap_or("?"), w.function)
                } else {
                    w.function.clone()
                };
                let share = if total > 0 {
                    pct(w.flops as f64 / total as f64)
                } else {
                    "-".into()
                };
                json!([what, share])
            })
            .collect()
    };
    let mut d = json!({
        "n": view.point_label(r, p),
        "b": bound_text(&a.bound),
        "bc": bound_class(&a.bound),
        "tip": tip,
        "more": more,
        "adv": dot_advice(p, a, roofs),
        "notes": p.provenance.notes,
    });
    // What most points lack is left out, not written empty: a thousand dots are a thousand
    // times each key.
    let fns = hot(&p.extra.by_function, false);
    if !fns.is_empty() {
        d["fns"] = json!(fns);
    }
    let lines = hot(&p.extra.by_line, true);
    if !lines.is_empty() {
        d["lines"] = json!(lines);
    }
    if let Some(w) = crate::model::above_roof(p, a, roofs) {
        d["warn"] = json!(w);
    }
    // A GPU kernel's whole name (demangled where ncu gave it mangled) behind its short one.
    if let Some(k) = p
        .extra
        .kernel_demangled
        .as_deref()
        .or(p.extra.kernel.as_deref())
        .filter(|k| !p.name.contains(*k))
    {
        d["full"] = json!(k);
    }
    // GPU points: the regime and why; NVTX regions: their kernels (launches, share of time).
    if let Some(reg) = &p.extra.regime {
        d["reg"] = json!([reg, p.extra.regime_reason.as_deref().unwrap_or("")]);
    }
    if let Some(ks) = &p.extra.kernels {
        d["kern"] = json!(
            ks.iter()
                .map(|k| json!([k.name, k.launches, format!("{:.1}", k.time_share.unwrap_or(0.0) * 100.0)]))
                .collect::<Vec<_>>()
        );
    }
    d
}

/// The data of every dot of a chart, in the dots' order, as JSON safe inside a `<script>`:
/// `{"notes": [...], "keys": [...], "dots": [...]}`, each dot's `notes` the indices of its
/// notes in the shared list (the same caveats hold for many points: said once in the file),
/// and the names of its `tip` and `more` rows indices into `keys`.
pub fn chart_data(view: &View, chart: &Chart) -> String {
    let kind = chart.kind;
    let mut out = Vec::with_capacity(chart.dots.len());
    let mut notes: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut k = 0;
    for r in &view.reports {
        for (p, a) in r.report.points.iter().zip(&r.analyses) {
            if super::chart::dot_position(p, a, kind).is_none() {
                continue;
            }
            let share = chart.dots.get(k).map(|d| d.share).unwrap_or(0.0);
            let mut d = dot_data(view, r, p, a, share);
            let ids: Vec<usize> = p
                .provenance
                .notes
                .iter()
                .map(|n| match notes.iter().position(|m| m == n) {
                    Some(i) => i,
                    None => {
                        notes.push(n.clone());
                        notes.len() - 1
                    }
                })
                .collect();
            d["notes"] = json!(ids);
            // The rows' names are the same few for every dot: written once in `keys`.
            for rows in ["tip", "more"] {
                if let Some(pairs) = d[rows].as_array_mut() {
                    for kv in pairs {
                        let name = kv[0].as_str().unwrap_or("").to_string();
                        let at = keys.iter().position(|k| *k == name).unwrap_or_else(|| {
                            keys.push(name);
                            keys.len() - 1
                        });
                        kv[0] = json!(at);
                    }
                }
            }
            out.push(d);
            k += 1;
        }
    }
    let doc = json!({ "notes": notes, "keys": keys, "dots": out });
    serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into()).replace("</", "<\\/")
}

#[cfg(test)]
#[path = "dot_info_tests.rs"]
mod tests;
