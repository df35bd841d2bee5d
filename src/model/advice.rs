//! Advice: one line per regime, and where the machine has faster units (a tile unit, a lower
//! precision) for compute-bound code, a second one naming them.

use crate::schema::report::{Bound, Point, level};

use super::labels::{isa_label, isa_rank, level_label, precision_family, precision_label};
use super::point::point_precision;
use super::roofs::RoofSet;

/// One line of advice per regime (the classic table), for a machine whose widest compute roof
/// is `widest_isa` (None: unknown): "wider SIMD" only where a wider ISA exists, "a closer
/// cache level" only below L1.
pub fn advice(bound: &Bound, widest_isa: Option<&str>) -> String {
    mix_advice(bound, widest_isa, None, None)
}

/// [`advice`] for a point whose FMA share is `fma_share` (None: unknown), where an all-FMA mix
/// would raise its compute roof by `fma_gain` (all-FMA roof over its mix's roof; None:
/// unknown): no "use FMA" for code made of FMAs, nor where more FMAs would not raise the roof
/// (Zen's add pipes run the rest), the share named where they would.
pub fn mix_advice(bound: &Bound, widest_isa: Option<&str>, fma_share: Option<f64>, fma_gain: Option<f64>) -> String {
    match bound {
        Bound::Overhead => "overhead-bound: a fixed cost dominates — bigger batches, fewer calls/launches, fuse small kernels".into(),
        Bound::Memory { level } if level == level::L1 || level == level::CORE => format!(
            "memory-bound at {}: fewer loads and stores per flop — fuse passes, keep values in registers (register blocking), narrower types",
            level_label(level)
        ),
        Bound::Memory { level } => format!(
            "memory-bound at {}: fuse passes, block/tile for a closer cache level, fewer passes over the data, narrower types",
            level_label(level)
        ),
        Bound::Compute { isa } if isa == "amx" => "compute-bound at AMX tiles: keep the tile unit fed — more accumulator tiles per A and B tile load, B packed in the tile (VNNI) layout, blocks sized for L1/L2".into(),
        Bound::Compute { isa } => {
            let wider = widest_isa.is_none_or(|w| isa_rank(w) > isa_rank(isa)) && isa_rank(isa) < isa_rank("avx512");
            let fma = match (fma_share, fma_gain) {
                (Some(s), _) if s >= 0.95 => "its flops are FMAs already: ".to_string(),
                (Some(s), Some(g)) if g <= 1.05 => format!(
                    "{:.0} % of its flops are FMAs and more would not raise its roof (the other operations run beside them): ",
                    s * 100.0
                ),
                (Some(s), _) => format!("use FMA (only {:.0} % of the flops are FMAs), ", s * 100.0),
                (None, _) => "use FMA, ".to_string(),
            };
            if wider {
                format!(
                    "compute-bound at {}: wider SIMD (vectorize to a wider ISA), {fma}more independent accumulators",
                    isa_label(isa)
                )
            } else {
                format!(
                    "compute-bound at {} (the widest this machine has): {fma}more independent accumulators to hide latency",
                    isa_label(isa)
                )
            }
        }
        Bound::Unknown => "unknown: no roofs or no placeable figures for this point".into(),
    }
}

/// Advice beyond the regime's, for compute-bound points on a machine with faster units: a tile
/// unit (AMX) of the point's own precision above its SIMD roof, or a lower precision (fp16,
/// bf16, int8) whose roof is well above the point's precision's peak. Only roofs the set
/// holds (measured or from the platform table) are named; None otherwise.
pub fn unit_advice(p: &Point, bound: &Bound, roofs: &RoofSet) -> Option<String> {
    let Bound::Compute { isa } = bound else { return None };
    let prec = point_precision(p);
    let own = roofs.at_isa(prec, isa).or_else(|| roofs.peak(prec)).map(|r| r.gflops);
    // 1. A tile unit of the same precision.
    if isa != "amx"
        && let Some(tile) = roofs.at_isa(prec, "amx")
        && own.is_none_or(|o| tile.gflops > 1.5 * o)
    {
        return Some(format!(
            "a tile unit exists: {} reaches {} {} here{} — use AMX tiles (oneDNN, _tile_dp* intrinsics)",
            tile.label(),
            crate::schema::units::sig3(tile.gflops),
            tile.unit(),
            own.map(|o| format!(" ({:.1}x this code's roof)", tile.gflops / o))
                .unwrap_or_default()
        ));
    }
    // 2. A lower precision: the fastest roof of a narrower format than the point's.
    let rank = |f: &str| ["double", "single", "half", "bf16", "int16", "int8"].iter().position(|x| *x == f);
    let own_rank = rank(precision_family(prec))?;
    let lower = roofs
        .compute
        .iter()
        .filter(|c| rank(precision_family(&c.precision)).is_some_and(|r| r > own_rank && r <= 3))
        .max_by(|a, b| a.gflops.total_cmp(&b.gflops))?;
    let peak = roofs.peak(prec).map(|r| r.gflops).or(own)?;
    (lower.gflops > 1.5 * peak).then(|| {
        format!(
            "a lower precision is faster here: {} reaches {} {} ({:.1}x the {} peak) — where accuracy allows (e.g. {} inputs, fp32 accumulation)",
            lower.label(),
            crate::schema::units::sig3(lower.gflops),
            lower.unit(),
            lower.gflops / peak,
            precision_label(prec),
            precision_label(&lower.precision)
        )
    })
}
