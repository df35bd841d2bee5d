//! The one plateau detector (ERT's rule), shared by `roofline ceilings --sweep` and
//! `roofline sweep`: along increasing working-set sizes, a plateau is a run of points within
//! ±5 % of its median; a new level starts when the value drops by more than 1.25× below the
//! current level's plateau. Values that rise by more than 5 % restart the current level's
//! plateau (small sizes are often overhead-bound and climb before they settle).

use crate::schema::sweep::{Boundary, Plateau};

/// Points within this fraction of the plateau's median belong to it.
pub const PLATEAU_TOLERANCE: f64 = 0.05;
/// A drop by more than this factor starts a new level.
pub const LEVEL_DROP: f64 = 1.25;

fn median(v: &[f64]) -> f64 {
    crate::schema::stats::median(v).unwrap_or(f64::NAN)
}

/// Plateaus of `(working_set_bytes, value)` points (any order; sorted by size here).
/// A level needs at least two points within tolerance to count as a plateau.
pub fn detect(points: &[(u64, f64)]) -> Vec<Plateau> {
    let mut pts: Vec<(u64, f64)> = points.iter().copied().filter(|(_, v)| v.is_finite() && *v > 0.0).collect();
    pts.sort_by_key(|p| p.0);
    let mut levels: Vec<Vec<(u64, f64)>> = Vec::new();
    let mut cur: Vec<(u64, f64)> = Vec::new();
    for p in pts {
        if cur.is_empty() {
            cur.push(p);
            continue;
        }
        let reference = median(&cur.iter().map(|x| x.1).collect::<Vec<_>>());
        if (p.1 - reference).abs() <= PLATEAU_TOLERANCE * reference {
            cur.push(p);
        } else if cur.len() < 2 {
            // A lone point is no plateau yet: one off it by more than the tolerance, either
            // way, starts over from itself. (Anchored on a lone transition point, every point
            // of the level after it, 5–25 % lower, was dropped as a transition: the Emerald
            // Rapids guest's L3, 3–60 MiB at 24 GB/s after a point at 28.7, was lost.)
            cur.clear();
            cur.push(p);
        } else if p.1 < reference / LEVEL_DROP || p.1 > reference * (1.0 + PLATEAU_TOLERANCE) {
            // A drop to a new level, or a rise (warm-up): the plateau so far is one.
            levels.push(std::mem::take(&mut cur));
            cur.push(p);
        }
        // Points between 5 % and 25 % below an established plateau are transitions: in no
        // plateau.
    }
    if cur.len() >= 2 {
        levels.push(cur);
    }
    // A plateau followed by a higher one is not a level of its own (warm-up, noise).
    let mut kept: Vec<Vec<(u64, f64)>> = Vec::new();
    for l in levels {
        let v = median(&l.iter().map(|x| x.1).collect::<Vec<_>>());
        while let Some(prev) = kept.last() {
            let pv = median(&prev.iter().map(|x| x.1).collect::<Vec<_>>());
            if pv < v * LEVEL_DROP {
                kept.pop();
            } else {
                break;
            }
        }
        kept.push(l);
    }
    kept.into_iter()
        .enumerate()
        .map(|(index, l)| Plateau {
            index,
            from_bytes: l[0].0,
            to_bytes: l[l.len() - 1].0,
            value: median(&l.iter().map(|x| x.1).collect::<Vec<_>>()),
            points: l.len(),
        })
        .collect()
}

pub fn boundaries(plateaus: &[Plateau]) -> Vec<Boundary> {
    plateaus
        .windows(2)
        .map(|w| Boundary {
            last_inside_bytes: w[0].to_bytes,
            first_outside_bytes: w[1].from_bytes,
            estimate_bytes: ((w[0].to_bytes as f64) * (w[1].from_bytes as f64)).sqrt() as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic memory hierarchy: levels of `bw` up to `cap` with a smooth transition,
    /// multiplicative noise of ±`noise`.
    fn hierarchy(levels: &[(u64, f64)], noise: f64, seed: u64) -> Vec<(u64, f64)> {
        let mut rng = roofline_kernels::stream::SplitMix(seed);
        let mut out = Vec::new();
        let mut s = 4096.0f64;
        while s < 1.5e9 {
            let size = s as u64;
            let mut bw = levels.last().unwrap().1;
            for (i, &(cap, b)) in levels.iter().enumerate() {
                if size <= cap {
                    // The last 10 % of a level blends towards the next.
                    let next = levels.get(i + 1).map(|l| l.1).unwrap_or(b);
                    let f = ((size as f64 / cap as f64) - 0.9).max(0.0) / 0.1;
                    bw = b + (next - b) * f.min(1.0) * 0.5;
                    break;
                }
            }
            out.push((size, bw * (1.0 + noise * rng.next_f64())));
            s *= 1.25;
        }
        out
    }

    #[test]
    fn finds_each_level_and_its_boundary() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        eprintln!("plateau seed {seed}");
        let levels = [(32 << 10, 400.0), (1 << 20, 150.0), (32 << 20, 60.0), (u64::MAX, 20.0)];
        let pts = hierarchy(&levels, 0.02, seed);
        let p = detect(&pts);
        assert_eq!(p.len(), 4, "{p:?}");
        for (pl, lv) in p.iter().zip(&levels) {
            // Each level: ≥ 9 points within ±2 % of it (next_f64 ∈ [−1, 1)) and ≤ 1 blend point
            // (sizes ×1.25 apart, blends in the last 10 %): its median is within 2 % for any draw.
            assert!((pl.value - lv.1).abs() < 0.05 * lv.1, "{pl:?} vs {lv:?}");
        }
        let b = boundaries(&p);
        for (bd, lv) in b.iter().zip(&levels) {
            let r = bd.estimate_bytes as f64 / lv.0 as f64;
            assert!((0.5..2.0).contains(&r), "{bd:?} vs {}", lv.0);
        }
    }

    /// A recorded sweep (tests/fixtures/sweeps/emr-load-1t.json): the Emerald Rapids guest's L3
    /// serves 3–60 MiB at about 24 GB/s and ends before 117 MiB, though CPUID says 300 MiB.
    #[test]
    fn a_guests_l3_ends_far_below_cpuid_and_is_found() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../tests/fixtures/sweeps/emr-load-1t.json")).unwrap();
        let pts: Vec<(u64, f64)> = doc["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
            .collect();
        let p = detect(&pts);
        assert_eq!(p.len(), 4, "L1, L2, L3, DRAM: {p:?}");
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        // L1 ≈ 300, L2 ≈ 142, L3 ≈ 24, DRAM ≈ 15 GB/s, each plateau ordered below the last.
        for (pl, (lo, hi)) in p.iter().zip([(280.0, 320.0), (135.0, 150.0), (22.0, 26.0), (13.5, 17.0)]) {
            assert!((lo..hi).contains(&pl.value), "{pl:?}");
        }
        let l3 = &p[2];
        assert!(mib(l3.from_bytes) <= 4.0 && mib(l3.to_bytes) >= 48.0, "{l3:?}");
        let b = boundaries(&p);
        // The L3 boundary between its last point inside (60 MiB) and the first outside (≤ 117 MiB).
        let est = mib(b[2].estimate_bytes);
        assert!((55.0..117.0).contains(&est), "{b:?}");
        assert!(est < 300.0 / 2.0, "far below CPUID's 300 MiB: {est}");
    }

    #[test]
    fn a_small_drop_is_not_a_level_and_a_warmup_climb_is_skipped() {
        // 15 % drop: same level (transition points excluded, no boundary).
        let pts: Vec<(u64, f64)> = (0..20).map(|i| (4096u64 << i, if i < 10 { 100.0 } else { 87.0 })).collect();
        let p = detect(&pts);
        assert_eq!(p.len(), 1, "{p:?}");
        // Climb 20 → 40 → 80 → 100 then flat: one plateau at 100.
        let mut pts = vec![(1000, 20.0), (2000, 40.0), (3000, 80.0)];
        pts.extend((4..12).map(|i| (i * 1000, 100.0)));
        let p = detect(&pts);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].from_bytes, 4000);
        assert!(detect(&[]).is_empty());
        assert!(detect(&[(1, f64::NAN), (2, 5.0)]).is_empty());
    }
}
