//! CSV export: one row per point (RFC 4180 quoting). Columns for bytes, GB/s and AI are one
//! per level present in any point (`bytes_core`, `gbs_dram`, `ai_l2`, …); empty cells where a
//! figure is unknown. Numbers are written with full precision so the table round-trips.
//! Where any point carries energy (`--energy`), columns for it follow: the domain, joules per
//! run and their spread, GFLOP/J, and its place on the report's energy roofline.

use super::{Exporter, View};
use crate::error::Result;
use crate::model::{ModelKind, level_rank};
use crate::schema::report::Bound;

pub struct CsvExporter;

/// The levels present in any point, core outwards.
pub fn levels(view: &View) -> Vec<String> {
    let mut v: Vec<String> = view.points().flat_map(|(_, p, _)| p.bytes.keys().cloned()).collect();
    crate::util::sort_by(&mut v, |a, b| (level_rank(a), a).cmp(&(level_rank(b), b)));
    v.dedup();
    v
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v:e}")).unwrap_or_default()
}

/// `compute:avx512`, `memory:l2`, `overhead`, `unknown`.
pub fn bound_key(b: &Bound) -> String {
    match b {
        Bound::Compute { isa } => format!("compute:{isa}"),
        Bound::Memory { level } => format!("memory:{level}"),
        Bound::Overhead => "overhead".into(),
        Bound::Unknown => "unknown".into(),
    }
}

/// The view as CSV: a header and one row per point.
pub fn to_csv(view: &View) -> String {
    let levels = levels(view);
    let mut header: Vec<String> = [
        "report",
        "source",
        "name",
        "threads",
        "seconds",
        "spread",
        "repetitions",
        "flops",
        "gflops",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for prefix in ["bytes", "gbs", "ai"] {
        for l in &levels {
            if prefix != "bytes" && l == "stack" {
                continue;
            }
            header.push(format!("{prefix}_{l}"));
        }
    }
    header.extend(
        [
            "attainable_dram",
            "attainable_cache_aware",
            "attainable_hierarchical",
            "roof_model",
            "roof_fraction",
            "bound",
            "skipped",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let with_energy = view.points().any(|(_, p, _)| p.extra.energy.is_some());
    if with_energy {
        header.extend(ENERGY_COLUMNS.iter().map(|s| s.to_string()));
    }
    let mut out = header.join(",");
    out.push('\n');
    for (r, p, a) in view.points() {
        let mut row: Vec<String> = vec![
            quote(&r.name),
            quote(p.source.as_deref().unwrap_or("")),
            quote(&p.name),
            p.threads.to_string(),
            num(Some(p.seconds)),
            num(p.spread()),
            p.seconds_samples.len().to_string(),
            num(Some(p.flops.total)),
            num(p.gflops),
        ];
        for l in &levels {
            row.push(num(p.bytes.get(l).copied()));
        }
        for l in levels.iter().filter(|l| *l != "stack") {
            row.push(num(p.gbs.get(l).copied()));
        }
        for l in levels.iter().filter(|l| *l != "stack") {
            row.push(num(a.ai.get(l).copied()));
        }
        for m in [ModelKind::Dram, ModelKind::CacheAware, ModelKind::Hierarchical] {
            row.push(num(a.get(m).map(|x| x.gflops)));
        }
        row.push(a.primary.map(|m| m.key().to_string()).unwrap_or_default());
        row.push(num(a.roof_fraction));
        row.push(if a.skipped.is_some() { String::new() } else { bound_key(&a.bound) });
        row.push(quote(a.skipped.as_deref().unwrap_or("")));
        if with_energy {
            row.extend(energy_cells(&r.report, p));
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// The energy columns, after the others.
pub const ENERGY_COLUMNS: [&str; 8] = [
    "energy_domain",
    "joules",
    "joules_spread",
    "watts",
    "gflop_per_joule",
    "energy_roof_gflop_per_joule",
    "energy_roof_fraction",
    "energy_bound",
];

/// A point's energy cells (empty without energy): its whole domain's joules per run, their
/// spread and the mean power, GFLOP/J, and where it sits on its report's energy roofline.
fn energy_cells(report: &crate::schema::Report, p: &crate::schema::Point) -> Vec<String> {
    let Some(e) = &p.extra.energy else {
        return vec![String::new(); ENERGY_COLUMNS.len()];
    };
    let whole = e.domains.get(&e.total_domain);
    let place = crate::model::energy::place_in(report, p).map(|(_, at)| at);
    vec![
        quote(&e.total_domain),
        num(Some(e.total_joules)),
        num(whole.and_then(|d| d.spread)),
        num(whole.map(|d| d.watts)),
        num(e.gflop_per_joule),
        num(place.as_ref().map(|a| a.attainable)),
        num(place.as_ref().map(|a| a.fraction)),
        place.map(|a| a.bound.to_string()).unwrap_or_default(),
    ]
}

impl Exporter for CsvExporter {
    fn export(&self, view: &View) -> Result<Vec<u8>> {
        Ok(to_csv(view).into_bytes())
    }
}
