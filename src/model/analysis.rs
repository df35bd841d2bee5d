//! Analysis of a point: its AI per level, the attainable performance under each roofline model,
//! the bound classification, the above-roof warning, and the annotation of a report's points.

use serde::Serialize;
use std::collections::BTreeMap;

use crate::schema::report::{Bound, Point, Report, level};
use crate::util::map_of;

use super::advice::{advice, mix_advice, unit_advice};
use super::labels::{isa_label, level_label, rate_unit};
use super::mix::{ComputeRoofUsed, fma_share, point_compute_roof};
use super::point::{point_isa, point_precision, point_rate, point_work};
use super::roofs::{ComputeRoof, RoofSet};

/// T below this is suspicious of call overhead (timer, launch, page faults).
pub const OVERHEAD_SECONDS: f64 = 20e-6;
/// ...when the point also reaches less than this fraction of its roof.
pub const OVERHEAD_ROOF_FRACTION: f64 = 0.10;
/// A sweep's fitted fixed cost `a` at or above this share of T means overhead-bound.
pub const OVERHEAD_FIXED_SHARE: f64 = 0.5;

/// Which roofline model a number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Classic: DRAM roof against DRAM AI.
    Dram,
    /// Cache-aware (CARM): core-side AI against each level's roof.
    CacheAware,
    /// Each level's AI against its own roof, minimum over levels.
    Hierarchical,
}

impl ModelKind {
    /// The name reports print (`classic (DRAM)`, `cache-aware`, `hierarchical`).
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Dram => "classic (DRAM)",
            ModelKind::CacheAware => "cache-aware",
            ModelKind::Hierarchical => "hierarchical",
        }
    }
    /// The key in JSON and CSV (`dram`, `cache-aware`, `hierarchical`).
    pub fn key(self) -> &'static str {
        match self {
            ModelKind::Dram => "dram",
            ModelKind::CacheAware => "cache-aware",
            ModelKind::Hierarchical => "hierarchical",
        }
    }
}

/// What limits an attainable figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Limiter {
    /// A compute roof.
    Compute {
        /// The ISA of the roof (`scalar`, `avx2`, `avx512`, …).
        isa: String,
        /// Whether the roof counts FMA (two flops per instruction).
        fma: bool,
    },
    /// A bandwidth roof.
    Memory {
        /// The level whose bandwidth limits (`l1`, …, `dram`).
        level: String,
    },
}

/// An attainable performance and the model it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Attainable {
    /// The model.
    pub model: ModelKind,
    /// Attainable performance, GFLOP/s (GOP/s for integer work).
    pub gflops: f64,
    /// The roof that sets it.
    pub limiter: Limiter,
}

/// Everything the model says about one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Analysis {
    /// AI per level (core uses core + stack bytes).
    pub ai: BTreeMap<String, f64>,
    /// One entry per model the roofs and bytes allow.
    pub attainable: Vec<Attainable>,
    /// The model `roof_fraction` and the bound are read from (the tightest available).
    pub primary: Option<ModelKind>,
    /// Achieved over attainable performance under the primary model (1.0: at the roof).
    pub roof_fraction: Option<f64>,
    /// What limits the point.
    pub bound: Bound,
    /// One line on what to try, for this bound.
    pub advice: String,
    /// The compute roof the point is judged against and why that one (its FMA share, or why
    /// the highest roof was taken); None for a point that cannot be placed or has no roof.
    #[cfg_attr(feature = "analysis", serde(default))]
    pub compute_roof: Option<ComputeRoofUsed>,
    /// Why the point cannot be placed on a roofline (zero time, zero flops, no bytes).
    pub skipped: Option<String>,
}

impl Analysis {
    /// The attainable figure under `model`, if the roofs and bytes allowed it.
    pub fn get(&self, model: ModelKind) -> Option<&Attainable> {
        self.attainable.iter().find(|a| a.model == model)
    }
}

/// AI per level, core-side AI over core + stack bytes (as [`Point::derive`] stores them), in
/// the unit of the point's work ([`point_work`]: ops per byte for integer work).
pub fn ai_per_level(p: &Point) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (lvl, b) in &p.bytes {
        if lvl == level::STACK {
            continue;
        }
        let bytes = if lvl == level::CORE {
            p.core_side_bytes().unwrap_or(*b)
        } else {
            *b
        };
        let work = point_work(p);
        if bytes > 0.0 && work > 0.0 {
            out.insert(lvl.clone(), work / bytes);
        }
    }
    out
}

/// Why a point cannot be placed, if it cannot.
pub fn unplaceable(p: &Point) -> Option<String> {
    if !(p.seconds > 0.0 && p.seconds.is_finite()) {
        return Some("zero time: T was not measured or rounded to 0".into());
    }
    let work = point_work(p);
    if work.is_nan() || work <= 0.0 {
        return Some("zero flops: W is 0, a roofline needs flops (use GB/s views)".into());
    }
    if !p.bytes.iter().any(|(l, b)| l != level::STACK && *b > 0.0) {
        return Some("zero bytes: no level has traffic, AI is undefined".into());
    }
    None
}

fn compute_limiter(c: &ComputeRoof) -> Limiter {
    Limiter::Compute {
        isa: c.isa.clone(),
        fma: c.fma,
    }
}

/// Classic model: `min(peak, BW_dram · AI_dram)`.
pub fn attainable_dram(p: &Point, roofs: &RoofSet) -> Option<Attainable> {
    let (peak, _) = point_compute_roof(p, roofs, None)?;
    let peak = &peak;
    let ai = *ai_per_level(p).get(level::DRAM)?;
    let (lvl, bw) = roofs.roof_for_bytes(level::DRAM)?;
    Some(min_of(ModelKind::Dram, peak, [(lvl, bw * ai)]))
}

/// Cache-aware model: the core-side AI against each level's roof; the attainable figure is
/// the top one (L1, else the highest bandwidth), capped by the peak. Returns that and the
/// per-level roofs at the point's core AI.
pub fn attainable_cache_aware(p: &Point, roofs: &RoofSet) -> Option<(Attainable, BTreeMap<String, f64>)> {
    let (peak, _) = point_compute_roof(p, roofs, None)?;
    let peak = &peak;
    let ai = *ai_per_level(p).get(level::CORE)?;
    let per_level = map_of(roofs.bandwidth.iter().map(|b| (b.level.clone(), (b.gbs * ai).min(peak.gflops))));
    let top = roofs.top_bandwidth()?;
    Some((min_of(ModelKind::CacheAware, peak, [(top.level.clone(), top.gbs * ai)]), per_level))
}

/// Hierarchical model: `min(peak, min_l BW_l · AI_l)` over levels with both bytes and a roof.
pub fn attainable_hierarchical(p: &Point, roofs: &RoofSet) -> Option<Attainable> {
    let (peak, _) = point_compute_roof(p, roofs, None)?;
    let peak = &peak;
    let candidates: Vec<(String, f64)> = ai_per_level(p)
        .iter()
        .filter_map(|(lvl, ai)| roofs.roof_for_bytes(lvl).map(|(roof, bw)| (roof, bw * ai)))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    Some(min_of(ModelKind::Hierarchical, peak, candidates))
}

fn min_of(model: ModelKind, peak: &ComputeRoof, memory: impl IntoIterator<Item = (String, f64)>) -> Attainable {
    let mut best = Attainable {
        model,
        gflops: peak.gflops,
        limiter: compute_limiter(peak),
    };
    for (lvl, g) in memory {
        if g < best.gflops {
            best = Attainable {
                model,
                gflops: g,
                limiter: Limiter::Memory { level: lvl },
            };
        }
    }
    best
}

/// Analyse a point against a set of roofs.
pub fn analyse(p: &Point, roofs: &RoofSet) -> Analysis {
    let ai = ai_per_level(p);
    if let Some(why) = unplaceable(p) {
        let bound = Bound::Unknown;
        return Analysis {
            ai,
            attainable: vec![],
            primary: None,
            roof_fraction: None,
            advice: advice(&bound, roofs.widest_isa()),
            bound,
            compute_roof: None,
            skipped: Some(why),
        };
    }
    let mut attainable = Vec::new();
    attainable.extend(attainable_dram(p, roofs));
    attainable.extend(attainable_cache_aware(p, roofs).map(|(a, _)| a));
    attainable.extend(attainable_hierarchical(p, roofs));
    // The tightest model available: hierarchical, then classic, then cache-aware.
    let primary = [ModelKind::Hierarchical, ModelKind::Dram, ModelKind::CacheAware]
        .into_iter()
        .find(|m| attainable.iter().any(|a| a.model == *m));
    let achieved = point_rate(p).unwrap_or(0.0);
    let prim = primary.and_then(|m| attainable.iter().find(|a| a.model == m));
    let roof_fraction = prim.filter(|a| a.gflops > 0.0).map(|a| achieved / a.gflops);
    let bound = classify(p, roofs, prim, roof_fraction);
    let share = fma_share(p);
    let gain = match (&bound, share) {
        (Bound::Compute { isa }, Some(s)) => {
            let prec = point_precision(p);
            roofs
                .mix_roof(prec, isa, 1.0)
                .zip(roofs.mix_roof(prec, isa, s))
                .map(|(all, mix)| all / mix)
        }
        _ => None,
    };
    let mut text = mix_advice(&bound, roofs.widest_isa(), share, gain);
    // The roof the bound is judged at: the point's own ISA where it has one, else the peak.
    let compute_roof = point_isa(p)
        .and_then(|isa| point_compute_roof(p, roofs, Some(isa)))
        .or_else(|| point_compute_roof(p, roofs, None))
        .map(|(_, used)| used);
    if let Some(more) = unit_advice(p, &bound, roofs) {
        text = format!("{text}; {more}");
    }
    Analysis {
        ai,
        attainable,
        primary,
        roof_fraction,
        advice: text,
        bound,
        compute_roof,
        skipped: None,
    }
}

/// The bound of a placeable point given its primary attainable figure.
pub fn classify(p: &Point, roofs: &RoofSet, primary: Option<&Attainable>, roof_fraction: Option<f64>) -> Bound {
    let fixed_share = p.extra.fixed_seconds.filter(|a| a.is_finite() && *a >= 0.0).map(|a| a / p.seconds);
    if fixed_share.is_some_and(|s| s >= OVERHEAD_FIXED_SHARE) {
        return Bound::Overhead;
    }
    if p.seconds < OVERHEAD_SECONDS && roof_fraction.is_some_and(|f| f < OVERHEAD_ROOF_FRACTION) {
        return Bound::Overhead;
    }
    let Some(prim) = primary else { return Bound::Unknown };
    let own_isa = point_isa(p);
    // The point's own ISA roof caps it before the memory roof does: compute-bound at that ISA.
    if let Some(isa) = own_isa
        && let Some((r, _)) = point_compute_roof(p, roofs, Some(isa))
        && r.gflops < prim.gflops
    {
        return Bound::Compute { isa: isa.to_string() };
    }
    match &prim.limiter {
        Limiter::Memory { level } => Bound::Memory { level: level.clone() },
        Limiter::Compute { isa, .. } => Bound::Compute {
            isa: own_isa.map(str::to_string).unwrap_or_else(|| isa.clone()),
        },
    }
}

/// A point above its roof (achieved GFLOP/s over what the primary model allows): a roof set too
/// low (an empirical ceiling under what a library reaches, a peak at the wrong clock) or a
/// count that is wrong. The warning names both numbers; None when the point is at or under.
///
/// Both figures are measured: a point over its roof by less than the two spreads together
/// (the point's timing spread and the roof's measurement spread, each interquartile range
/// over median) is at its roof, not above it (cuBLAS's dgemm reads 100.0 % of the FP64
/// tensor ceiling it set itself).
pub fn above_roof(p: &Point, a: &Analysis, roofs: &RoofSet) -> Option<String> {
    let Over {
        f,
        prim,
        point_spread,
        roof_spread,
        roof,
    } = over_roof(p, a, roofs)?;
    if f <= 1.0 + point_spread + roof_spread {
        return None;
    }
    let achieved = point_rate(p)?;
    let unit = rate_unit(point_precision(p));
    Some(format!(
        "above its roof: {} reaches {:.4} {unit}, {:.1}% of {roof} ({:.4} {unit}, {} model), beyond the spreads of both (point {:.1} %, roof {:.1} %): the roof is too low (a ceiling under what this code reaches, a peak at another clock) or a count is wrong",
        p.name,
        achieved,
        f * 100.0,
        prim.gflops,
        prim.model.name(),
        point_spread * 100.0,
        roof_spread * 100.0
    ))
}

/// Over its roof by more than this share (and by less than both spreads): said, not warned.
pub const OVER_ROOF_SAID: f64 = 0.05;

/// A point over its roof by more than [`OVER_ROOF_SAID`] but within the spreads of both
/// (`above_roof` says nothing there): a note that names the fraction and the spreads that
/// cover it, so a figure well over 100 % never stands unexplained. None otherwise.
pub fn over_roof_within_spreads(p: &Point, a: &Analysis, roofs: &RoofSet) -> Option<String> {
    let Over {
        f,
        point_spread,
        roof_spread,
        roof,
        ..
    } = over_roof(p, a, roofs)?;
    if f <= 1.0 + OVER_ROOF_SAID || f > 1.0 + point_spread + roof_spread {
        return None;
    }
    Some(format!(
        "over its roof within the spreads: {:.1}% of {roof}, inside the point's time spread ({:.1} %) and the roof's ({:.1} %) together, so read as at its roof, not above it; more repetitions (a larger working set or longer runs) would narrow the point's spread",
        f * 100.0,
        point_spread * 100.0,
        roof_spread * 100.0
    ))
}

/// A point's fraction of its primary roof where over 1, with the spreads that bound it.
struct Over<'a> {
    f: f64,
    prim: &'a Attainable,
    point_spread: f64,
    roof_spread: f64,
    /// The roof, in words.
    roof: String,
}

fn over_roof<'a>(p: &Point, a: &'a Analysis, roofs: &RoofSet) -> Option<Over<'a>> {
    let f = a.roof_fraction.filter(|f| f.is_finite() && *f > 1.0)?;
    let prim = a.primary.and_then(|m| a.attainable.iter().find(|x| x.model == m))?;
    let roof_spread = match &prim.limiter {
        Limiter::Compute { isa, .. } => point_compute_roof(p, roofs, Some(isa))
            .or_else(|| point_compute_roof(p, roofs, None))
            .map_or(0.0, |(r, _)| r.spread),
        Limiter::Memory { level } => roofs.bandwidth.iter().find(|b| &b.level == level).map_or(0.0, |b| b.spread),
    };
    let roof = match &prim.limiter {
        Limiter::Compute { isa, .. } => format!("the {} {} compute roof", point_precision(p), isa_label(isa)),
        Limiter::Memory { level } => format!("the {} bandwidth roof at its AI", level_label(level)),
    };
    Some(Over {
        f,
        prim,
        point_spread: p.spread().filter(|s| s.is_finite()).unwrap_or(0.0),
        roof_spread,
        roof,
    })
}

/// Fill each point's `bound` and `roof_fraction` and record the model's figures in
/// `extra.model` (attainable per model, primary model, advice, skip reason). A point above its
/// roof gets the `above_roof` warning in its provenance notes and `extra.model.above_roof`.
pub fn annotate(report: &mut Report, roofs: &RoofSet) -> Vec<Analysis> {
    annotate_by_threads(report, roofs, &[])
}

/// [`annotate`] with roof sets at other thread counts: a point whose thread count has a set in
/// `by_threads` is read against that one, any other against `roofs`.
pub fn annotate_by_threads(report: &mut Report, roofs: &RoofSet, by_threads: &[RoofSet]) -> Vec<Analysis> {
    let mut out = Vec::with_capacity(report.points.len());
    for p in &mut report.points {
        p.derive();
        let roofs = by_threads.iter().find(|s| s.threads == Some(p.threads)).unwrap_or(roofs);
        let a = analyse(p, roofs);
        let above = above_roof(p, &a, roofs);
        // Re-annotating (a report read back) keeps one copy of each.
        if let Some(w) = &above {
            p.provenance.notes.retain(|n| !n.starts_with("above its roof:"));
            p.provenance.notes.push(w.clone());
        }
        if let Some(n) = over_roof_within_spreads(p, &a, roofs) {
            p.provenance.notes.retain(|n| !n.starts_with("over its roof within the spreads:"));
            p.provenance.notes.push(n);
        }
        p.bound = (a.skipped.is_none()).then(|| a.bound.clone());
        p.roof_fraction = a.roof_fraction;
        let mut attainable = serde_json::Map::new();
        attainable.extend(
            a.attainable
                .iter()
                .map(|x| (x.model.key().to_string(), serde_json::json!(x.gflops))),
        );
        p.extra.insert(
            "model",
            serde_json::json!({
                "attainable_gflops": attainable,
                "roof_fraction_model": a.primary.map(|m| m.key()),
                "advice": a.advice,
                "compute_roof": a.compute_roof,
                "skipped": a.skipped,
                "above_roof": above,
            }),
        );
        out.push(a);
    }
    out
}
