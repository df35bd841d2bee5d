//! The "compute, bandwidth, overhead" view of GPU kernels.
//!
//! - **overhead**: the kernel's GPU time per launch is within [`OVERHEAD_FLOOR_FACTOR`] of
//!   the launch floor (what launching an empty kernel costs, measured by `gpu ceilings`):
//!   launching costs as much as the work, and only fewer launches (batching, fusion, CUDA
//!   graphs) help;
//! - otherwise **compute** when its DRAM arithmetic intensity is at or above the ridge of its
//!   own roof (the compute roof of its dominant precision over the HBM roof), **bandwidth**
//!   below it (and for kernels with no flops).

use crate::schema::{Point, Roofs};

/// "Near the launch floor": at most this many times the floor per launch.
pub const OVERHEAD_FLOOR_FACTOR: f64 = 2.0;

/// The launch floor used when no `gpu ceilings` figure exists for the GPU: ncu's
/// `gpu__time_duration` of an empty kernel on an H100 SXM (10 launches of 2.11–2.21 µs,
/// tests/fixtures/ncu/nvtx_app.csv, `empty_probe`).
pub const DEFAULT_LAUNCH_FLOOR_S: f64 = 2.1e-6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    Compute,
    Bandwidth,
    Overhead,
}

impl Regime {
    pub fn key(self) -> &'static str {
        match self {
            Regime::Compute => "compute",
            Regime::Bandwidth => "bandwidth",
            Regime::Overhead => "overhead",
        }
    }
}

/// The regime of a GPU point and a one-line reason; None without time or roofs to decide.
pub fn classify(p: &Point, roofs: Option<&Roofs>, launch_floor_s: f64) -> Option<(Regime, String)> {
    if p.seconds <= 0.0 {
        return None;
    }
    let launches = p.extra.launches.unwrap_or(1).max(1) as f64;
    let per = p.seconds / launches;
    if per <= OVERHEAD_FLOOR_FACTOR * launch_floor_s {
        return Some((
            Regime::Overhead,
            format!(
                "{:.1} us per launch, within {OVERHEAD_FLOOR_FACTOR}x the launch floor of {:.1} us",
                per * 1e6,
                launch_floor_s * 1e6
            ),
        ));
    }
    let dram = p.bytes.get("dram").copied().unwrap_or(0.0);
    if p.flops.total <= 0.0 {
        return (dram > 0.0).then(|| (Regime::Bandwidth, "no flops, DRAM traffic only".to_string()));
    }
    if dram <= 0.0 {
        return Some((Regime::Compute, "flops and no DRAM traffic".into()));
    }
    let roofs = roofs?;
    let prec = crate::model::point_precision(p);
    let compute = roofs.compute_gflops.get(&format!("{prec}.gpu.fma")).copied()?;
    let hbm = roofs.bandwidth_gbs.get("dram").copied()?;
    let ridge = compute / hbm;
    let ai = p.flops.total / dram;
    Some(if ai >= ridge {
        (
            Regime::Compute,
            format!("AI {ai:.1} flop/B at or above the {prec} ridge {ridge:.1}"),
        )
    } else {
        (Regime::Bandwidth, format!("AI {ai:.2} flop/B below the {prec} ridge {ridge:.1}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Flops, Provenance};

    fn point(flops: f64, dram: f64, seconds: f64, launches: u64) -> Point {
        let mut p = Point::new(
            "k",
            Provenance::default(),
            Flops {
                total: flops,
                effective: None,
                by_class: [("double_any_width".to_string(), flops)].into_iter().collect(),
                ..Default::default()
            },
            [("dram".to_string(), dram)].into_iter().collect(),
            0,
            vec![seconds],
        );
        p.extra.launches = Some(launches);
        p
    }

    #[test]
    fn floor_ridge_and_no_flops() {
        let mut r = Roofs::default();
        r.compute_gflops.insert("double.gpu.fma".into(), 60_000.0);
        r.bandwidth_gbs.insert("dram".into(), 3_000.0); // ridge 20 flop/B
        let floor = 2e-6;
        // 8 launches in 24 µs: 3 µs each, under 2 × 2 µs.
        assert_eq!(classify(&point(1e6, 1e6, 24e-6, 8), Some(&r), floor).unwrap().0, Regime::Overhead);
        // The same per-launch time at a floor of 1 µs: no longer overhead; AI 1 < 20.
        assert_eq!(classify(&point(1e6, 1e6, 24e-6, 8), Some(&r), 1e-6).unwrap().0, Regime::Bandwidth);
        // AI 40 ≥ 20.
        assert_eq!(classify(&point(4e9, 1e8, 1e-3, 1), Some(&r), floor).unwrap().0, Regime::Compute);
        assert_eq!(classify(&point(0.0, 1e8, 1e-3, 1), None, floor).unwrap().0, Regime::Bandwidth);
        // No roofs and both flops and bytes: undecided.
        assert!(classify(&point(1e9, 1e8, 1e-3, 1), None, floor).is_none());
    }
}
