//! Sweeps: a suite kernel against working-set size (×factor steps), with the plateau detector
//! marking levels, each size classified, and a fit T(n) = a + b·n exposing the fixed overhead.

use super::measure::{Budget, repeated_team, stats, time_instances};
use super::plateau;
use crate::schema::ceilings::Host;
use crate::schema::sweep::{LevelBoundary, LinearFit, Plateau, Sweep, SweepPoint};
use roofline_kernels::Variant;
use roofline_kernels::api::Kernel;

/// Working-set sizes from `from` to `to` (inclusive where reached), ×`factor` each step.
pub fn sizes(from: u64, to: u64, factor: f64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = from.max(1) as f64;
    while s <= to as f64 * 1.0001 && v.len() < 10_000 {
        let b = s.round() as u64;
        if v.last() != Some(&b) {
            v.push(b);
        }
        s *= factor;
    }
    v
}

pub fn fit(points: &[(f64, f64)]) -> Option<LinearFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *y > 0.0)
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in &pts {
        let w = 1.0 / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let det = sw * sxx - sx * sx;
    if det.abs() < f64::MIN_POSITIVE || !det.is_finite() {
        return None;
    }
    let b = (sw * sxy - sx * sy) / det;
    let a = (sy - b * sx) / sw;
    let mean = sy / sw;
    let (mut ss_res, mut ss_tot) = (0.0, 0.0);
    for &(x, y) in &pts {
        let w = 1.0 / (y * y);
        ss_res += w * (y - a - b * x).powi(2);
        ss_tot += w * (y - mean).powi(2);
    }
    let r2 = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 1.0 };
    Some(LinearFit { a, b, r2 })
}

/// The level a per-thread working set fits in, by CPUID sizes.
pub fn cpuid_level(host: &Host, per_thread: u64, threads: usize) -> String {
    for c in &host.caches {
        let share = c.size_bytes / (threads as u64).min(c.shared_by_threads.max(1) as u64).max(1);
        if per_thread <= share {
            return format!("L{}", c.level);
        }
    }
    "DRAM".to_string()
}

/// Name plateaus by the CPUID level of their sizes and pair boundaries with capacities. A
/// boundary between two plateaus of one level (a noisy L1 read as two steps) is no level's
/// end and is left out: each level ends once, after its last plateau.
pub fn level_boundaries(host: &Host, plateaus: &[Plateau], threads: usize) -> Vec<LevelBoundary> {
    // The level a plateau lives in: where its middle size fits by CPUID.
    let level_of = |p: &Plateau| cpuid_level(host, ((p.from_bytes as f64 * p.to_bytes as f64).sqrt()) as u64, threads);
    let levels: Vec<String> = plateaus.iter().map(level_of).collect();
    plateau::boundaries(plateaus)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| levels[*i] != levels[*i + 1])
        .map(|(i, b)| {
            let level = levels[i].clone();
            let cap = level
                .strip_prefix('L')
                .and_then(|l| l.parse::<u32>().ok())
                .and_then(|l| host.cache(l))
                .map(|c| c.size_bytes / (threads as u64).min(c.shared_by_threads.max(1) as u64).max(1));
            LevelBoundary {
                level,
                ratio: cap.map(|c| b.estimate_bytes as f64 / c as f64),
                detected: b,
                cpuid_bytes: cap,
            }
        })
        .collect()
}

/// Run `kernel` at each size on `threads` threads. `progress` is called after each size.
#[allow(clippy::too_many_arguments)]
pub fn run(
    host: &Host,
    kernel: &dyn Kernel,
    variant: Variant,
    sizes_bytes: &[u64],
    threads: usize,
    budget: Budget,
    seed: u64,
    mut progress: impl FnMut(),
) -> Result<Sweep, String> {
    let _reuse = roofline_kernels::stream::ReusedArrays::open();
    let mut points = Vec::new();
    let mut last_n = 0;
    for &ws in sizes_bytes {
        let per_thread = ws / threads as u64;
        let n = kernel.size_for_bytes(per_thread);
        if n == last_n {
            progress();
            continue;
        }
        last_n = n;
        let (team, times) = repeated_team(threads, budget.sample, |i| kernel.instance(n, variant, seed.wrapping_add(i as u64)))?;
        let counts: Vec<_> = team.iter().map(|i| i.counts()).collect();
        let flops: u64 = counts.iter().map(|c| c.flops_total()).sum();
        let bytes: u64 = counts.iter().map(|c| c.core_bytes()).sum();
        let s = stats(&time_instances(team, budget));
        let wsb = kernel.working_set_bytes(n) * threads as u64;
        points.push(SweepPoint {
            working_set_bytes: wsb,
            n: n as u64,
            seconds: s.median / times as f64,
            spread: s.spread,
            gflops: flops as f64 / s.median / 1e9,
            gbs: bytes as f64 / s.median / 1e9,
            ai: if bytes > 0 { Some(flops as f64 / bytes as f64) } else { None },
            cpuid_level: cpuid_level(host, kernel.working_set_bytes(n), threads),
            plateau: None,
            bound: None,
        });
        progress();
    }
    let series: Vec<(u64, f64)> = points
        .iter()
        .map(|p| (p.working_set_bytes, if p.gbs > 0.0 { p.gbs } else { p.gflops }))
        .collect();
    let plateaus = plateau::detect(&series);
    for p in &mut points {
        p.plateau = plateaus
            .iter()
            .find(|pl| (pl.from_bytes..=pl.to_bytes).contains(&p.working_set_bytes))
            .map(|pl| pl.index);
    }
    let boundaries = level_boundaries(host, &plateaus, threads);
    let fit = fit(&points.iter().map(|p| (p.n as f64, p.seconds)).collect::<Vec<_>>());
    Ok(Sweep {
        kernel: kernel.name().to_string(),
        variant: variant.name().to_string(),
        threads: threads as u32,
        factor: 0.0,
        points,
        plateaus,
        boundaries,
        fit,
    })
}

/// Classify each point: overhead-bound when the fixed overhead is at least half the time;
/// otherwise compute-bound when the compute roof is below AI × the level's bandwidth roof,
/// else memory-bound at that level.
pub fn classify(sweep: &mut Sweep, compute_roof_gflops: Option<f64>, level_gbs: &dyn Fn(&str) -> Option<f64>) {
    let a = sweep.fit.map(|f| f.a).unwrap_or(0.0);
    for p in &mut sweep.points {
        p.bound = Some(if a > 0.0 && a >= 0.5 * p.seconds {
            "overhead".to_string()
        } else {
            match (p.ai, compute_roof_gflops, level_gbs(&p.cpuid_level)) {
                (None, _, _) => format!("memory ({})", p.cpuid_level),
                (Some(ai), Some(c), Some(bw)) if c < ai * bw => "compute".to_string(),
                (Some(_), _, _) => format!("memory ({})", p.cpuid_level),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_overhead_and_slope() {
        let pts: Vec<(f64, f64)> = (0..30).map(|i| 1000.0 * 1.25f64.powi(i)).map(|n| (n, 2e-7 + 1e-10 * n)).collect();
        let f = fit(&pts).unwrap();
        assert!((f.a - 2e-7).abs() < 1e-12, "{f:?}");
        assert!((f.b - 1e-10).abs() < 1e-15, "{f:?}");
        assert!(f.r2 > 0.999);
        assert!(fit(&[(1.0, 1.0)]).is_none());
        assert!(fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
    }

    #[test]
    fn sizes_grow_by_the_factor() {
        let s = sizes(4096, 1 << 20, 1.25);
        assert_eq!(s[0], 4096);
        assert_eq!(s[1], 5120);
        assert!(*s.last().unwrap() <= 1 << 20);
        assert!(s.windows(2).all(|w| (w[1] as f64 / w[0] as f64 - 1.25).abs() < 0.01));
        assert_eq!(sizes(10, 5, 2.0), Vec::<u64>::new());
    }

    #[test]
    fn classification_uses_overhead_then_roofs() {
        let host = Host::detect();
        let mk = |n: u64, seconds: f64, ai: f64, level: &str| SweepPoint {
            working_set_bytes: n * 8,
            n,
            seconds,
            spread: 0.0,
            gflops: 0.0,
            gbs: 0.0,
            ai: Some(ai),
            cpuid_level: level.to_string(),
            plateau: None,
            bound: None,
        };
        let _ = host;
        let mut s = Sweep {
            kernel: "x".into(),
            variant: "scalar".into(),
            threads: 1,
            factor: 1.25,
            points: vec![
                mk(10, 1.1e-7, 0.1, "L1"),
                mk(1 << 20, 1e-3, 0.1, "DRAM"),
                mk(1 << 20, 1e-3, 50.0, "DRAM"),
            ],
            plateaus: vec![],
            boundaries: vec![],
            fit: Some(LinearFit { a: 1e-7, b: 1e-9, r2: 1.0 }),
        };
        classify(&mut s, Some(100.0), &|l| if l == "DRAM" { Some(20.0) } else { Some(200.0) });
        assert_eq!(s.points[0].bound.as_deref(), Some("overhead"));
        assert_eq!(s.points[1].bound.as_deref(), Some("memory (DRAM)"));
        assert_eq!(s.points[2].bound.as_deref(), Some("compute"));
    }

    /// The Emerald Rapids guest's sweep (2026-11-29): two plateaus inside L1 (251 and 192 GB/s),
    /// then L2, L3 and DRAM. L1 ends once, after the second; every level once, in order.
    #[test]
    fn a_level_read_as_two_plateaus_ends_once() {
        let cache = |level, size_bytes| crate::schema::ceilings::CacheLevel {
            level,
            size_bytes,
            shared_by_threads: if level == 3 { 16 } else { 1 },
        };
        let host = Host {
            caches: vec![cache(1, 48 << 10), cache(2, 2 << 20), cache(3, 300 << 20)],
            ..Host::default()
        };
        let kib = |k: f64| (k * 1024.0) as u64;
        let plateaus: Vec<Plateau> = [(9.8, 12.2), (29.8, 37.2), (90.9, 1024.0), (3993.6, 37580.8), (684236.8, 855244.8)]
            .iter()
            .enumerate()
            .map(|(index, &(from, to))| Plateau {
                index,
                from_bytes: kib(from),
                to_bytes: kib(to),
                value: 1.0,
                points: 2,
            })
            .collect();
        let b = level_boundaries(&host, &plateaus, 1);
        let levels: Vec<&str> = b.iter().map(|x| x.level.as_str()).collect();
        assert_eq!(levels, ["L1", "L2", "L3"]);
        assert_eq!(
            (b[0].detected.last_inside_bytes, b[0].detected.first_outside_bytes),
            (kib(37.2), kib(90.9))
        );
    }
}
