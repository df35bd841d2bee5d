//! Mix-aware compute roofs: the roof a point's mix of FMAs and other operations can reach
//! (docs/reports.md, "The compute roof of a point's mix").

use serde::Serialize;

use crate::schema::report::{Point, Source};

use super::labels::isa_label;
use super::point::point_precision;
use super::roofs::{ComputeRoof, RoofSet};

/// The compute roof a point is judged against (docs/reports.md, "The compute roof of a
/// point's mix").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct ComputeRoofUsed {
    /// `AVX-512 FMA`, `AVX-512 at 62 % FMA`, `AVX-512 FMA+add`.
    pub label: String,
    /// GFLOP/s (GOP/s for integer work).
    pub gflops: f64,
    /// The share of the point's flops done by FMAs, when its counts tell (`flops.fma`).
    pub fma_share: Option<f64>,
    /// Why this roof.
    pub why: String,
}

impl RoofSet {
    /// The roof code of `precision` at `isa` reaches when a share `fma` (0–1) of its flops
    /// comes from FMAs and the rest from adds and multiplies. An FMA issues only to the FMA
    /// pipes; any other operation to any FP pipe (the same ones on Intel; on Zen also the FADD
    /// pipes). Per flop, FMAs take `fma / R_fma` of the time on the FMA pipes, and all
    /// operations together `(fma / 2 + (1 − fma)) / R_nofma` of every pipe, where `R_fma` is
    /// the all-FMA roof and `R_nofma` the multiply-and-add one: the roof is the inverse of the
    /// larger, capped by the FMA+add roof where measured. (An upper bound: adds and multiplies
    /// are taken as balanced over the pipes, which the counts cannot tell.) None without both
    /// an FMA and a no-FMA roof there.
    pub fn mix_roof(&self, precision: &str, isa: &str, fma: f64) -> Option<f64> {
        let best = |fma_mode: bool, mix: bool| {
            self.compute
                .iter()
                .filter(|c| c.precision == precision && c.isa == isa && c.fma == fma_mode && (!fma_mode || c.mix == mix))
                .map(|c| c.gflops)
                .filter(|g| g.is_finite() && *g > 0.0)
                .max_by(f64::total_cmp)
        };
        let (all_fma, no_fma, fma_add) = (best(true, false), best(false, false), best(true, true));
        let s = fma.clamp(0.0, 1.0);
        let g = match (all_fma, no_fma) {
            (Some(f), Some(n)) => 1.0 / (s / f).max((s / 2.0 + (1.0 - s)) / n),
            (Some(f), None) if s >= 1.0 => f,
            (None, Some(n)) if s <= 0.0 => n,
            _ => return None,
        };
        Some(fma_add.map_or(g, |b| g.min(b.max(all_fma.unwrap_or(0.0)))))
    }
}

/// The share of a point's floating-point work done by FMAs (0–1), when its counts tell
/// (`flops.fma`).
pub fn fma_share(p: &Point) -> Option<f64> {
    let f = p.flops.fma.filter(|f| f.is_finite() && *f >= 0.0)?;
    (p.flops.total > 0.0).then(|| (f / p.flops.total).clamp(0.0, 1.0))
}

/// Whether a precision's roofs come in FMA and no-FMA modes (the SIMD formats; the
/// mixed-precision units have one multiply-accumulate roof each).
fn has_fma_modes(precision: &str) -> bool {
    matches!(precision, "double" | "single" | "half")
}

/// The compute roof of a point at `isa` (None: the machine's highest for the point's
/// precision): for its mix of FMAs and other operations where its counts tell
/// ([`RoofSet::mix_roof`]), else the highest roof there; with why that one.
pub fn point_compute_roof(p: &Point, roofs: &RoofSet, isa: Option<&str>) -> Option<(ComputeRoof, ComputeRoofUsed)> {
    let prec = point_precision(p);
    let highest = match isa {
        Some(isa) => roofs.at_isa(prec, isa)?,
        None => roofs.peak(prec)?,
    };
    let share = fma_share(p).filter(|_| has_fma_modes(&highest.precision) && highest.precision == prec);
    let mixed = share.and_then(|s| Some((s, roofs.mix_roof(prec, &highest.isa, s)?)));
    let isa_name = isa_label(&highest.isa);
    let Some((s, g)) = mixed else {
        let why = match share {
            _ if !has_fma_modes(&highest.precision) => format!("the {} roof of this precision", highest.label()),
            Some(_) => {
                format!("the highest at {isa_name}: this roof set has no FMA and no-FMA roofs there to weigh the point's mix with")
            }
            None => format!(
                "the highest at {isa_name}: this point's counts{} do not tell FMAs from adds and multiplies, so it may not reach it{}",
                p.provenance.flops.map(|s| format!(" ({})", s.name())).unwrap_or_default(),
                if matches!(p.provenance.flops, Some(Source::Perf | Source::PerfStat)) {
                    " (Intel's FP_ARITH events count an FMA as two flops of its class)"
                } else {
                    ""
                }
            ),
        };
        let used = ComputeRoofUsed {
            label: highest.label(),
            gflops: highest.gflops,
            fma_share: share,
            why,
        };
        return Some((highest.clone(), used));
    };
    let pct = s * 100.0;
    let label = if s >= 0.995 {
        format!("{isa_name} FMA")
    } else if s <= 0.005 {
        format!("{isa_name} no-FMA")
    } else {
        format!("{isa_name} at {pct:.0} % FMA")
    };
    let empirical = roofs
        .compute
        .iter()
        .filter(|c| c.precision == prec && c.isa == highest.isa && !c.mix)
        .all(|c| c.empirical);
    let spread = roofs
        .compute
        .iter()
        .filter(|c| c.precision == prec && c.isa == highest.isa)
        .map(|c| c.spread)
        .fold(0.0, f64::max);
    let roof = ComputeRoof {
        precision: prec.to_string(),
        isa: highest.isa.clone(),
        fma: s > 0.0,
        mix: false,
        gflops: g,
        empirical,
        spread,
    };
    let used = ComputeRoofUsed {
        label,
        gflops: g,
        fma_share: Some(s),
        why: format!(
            "{pct:.0} % of the flops are FMAs: an FMA runs only on the FMA pipes, other operations on any FP pipe (docs/reports.md, \"The compute roof of a point's mix\")"
        ),
    };
    Some((roof, used))
}
