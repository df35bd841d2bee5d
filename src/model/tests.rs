use std::collections::BTreeMap;

use super::advice::advice;
use super::analysis::{ai_per_level, attainable_dram, attainable_hierarchical};
use super::labels::isa_rank;
use super::point::point_isa;
use super::*;
#[cfg(feature = "analysis")]
use crate::machine::MachineModel;
use crate::schema::report::{Bound, Bytes, Flops, Point, Provenance, Roofs};

fn roofs() -> RoofSet {
    let mut r = Roofs {
        kind: "empirical".into(),
        threads: Some(1),
        ..Default::default()
    };
    r.compute_gflops.insert("double.avx512.fma".into(), 100.0);
    r.compute_gflops.insert("double.avx512.nofma".into(), 50.0);
    r.compute_gflops.insert("double.scalar.fma".into(), 10.0);
    r.bandwidth_gbs.insert("l1".into(), 400.0);
    r.bandwidth_gbs.insert("l2".into(), 200.0);
    r.bandwidth_gbs.insert("l3".into(), 100.0);
    r.bandwidth_gbs.insert("dram".into(), 20.0);
    RoofSet::from_roofs(&r)
}

fn point(flops: f64, class: &str, bytes: &[(&str, f64)], secs: f64) -> Point {
    let mut by_class = BTreeMap::new();
    by_class.insert(class.to_string(), flops);
    let b: Bytes = bytes.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    Point::new(
        "p",
        Provenance {
            flops: None,
            bytes: BTreeMap::new(),
            seconds: None,
            notes: vec![],
            untrusted: Vec::new(),
        },
        Flops {
            total: flops,
            effective: None,
            by_class,
            ..Default::default()
        },
        b,
        1,
        vec![secs],
    )
}

#[test]
fn three_models_by_hand() {
    // W = 1e9 flop, core 2e9 + stack 2e9 B → AI_core 0.25; L2 1e9 → 1; L3 5e8 → 2; DRAM 1e8 → 10.
    let p = point(
        1e9,
        "packed512_double",
        &[("core", 2e9), ("stack", 2e9), ("l2", 1e9), ("l3", 5e8), ("dram", 1e8)],
        0.1,
    );
    let r = roofs();
    let ai = ai_per_level(&p);
    assert_eq!(ai["core"], 0.25);
    assert_eq!(ai["dram"], 10.0);
    // classic: min(100, 20·10=200) = 100, compute
    let d = attainable_dram(&p, &r).unwrap();
    assert_eq!(d.gflops, 100.0);
    assert!(matches!(d.limiter, Limiter::Compute { .. }));
    // CARM: L1 roof 400·0.25 = 100 → equal to peak: compute (ties keep the peak)
    let (c, per) = attainable_cache_aware(&p, &r).unwrap();
    assert_eq!(c.gflops, 100.0);
    assert_eq!(per["l2"], 50.0);
    assert_eq!(per["dram"], 5.0);
    // hierarchical: core 400·.25=100, l2 200·1=200, l3 100·2=200, dram 200 → 100 (peak tie)
    let h = attainable_hierarchical(&p, &r).unwrap();
    assert_eq!(h.gflops, 100.0);
    // Now make L2 traffic heavier: l2 4e9 → AI .25 → 50 GFLOP/s, memory at L2.
    let p2 = point(1e9, "packed512_double", &[("core", 2e9), ("l2", 4e9), ("dram", 1e8)], 0.1);
    let h2 = attainable_hierarchical(&p2, &r).unwrap();
    assert_eq!(h2.gflops, 50.0);
    assert_eq!(h2.limiter, Limiter::Memory { level: "l2".into() });
    let a = analyse(&p2, &r);
    assert_eq!(a.primary, Some(ModelKind::Hierarchical));
    // achieved 1e9/0.1 = 10 GFLOP/s → 20 % of 50
    assert!((a.roof_fraction.unwrap() - 0.2).abs() < 1e-12);
    assert_eq!(a.bound, Bound::Memory { level: "l2".into() });
    assert!(a.advice.contains("L2"), "{}", a.advice);
}

/// Uniform draws in [0, 1) from a clock-seeded xorshift (a new draw every run).
fn uniform_draws() -> impl FnMut() -> f64 {
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Roofs of a core with `a` FMA pipes and `b` add-only pipes (Zen: 2 + 2; Intel: 2 + 0) of
/// `lanes` doubles at `ghz`, as the peak kernels measure them: all FMA, multiply + add, and
/// FMA + add (the best mix).
fn pipe_roofs(a: f64, b: f64, lanes: f64, ghz: f64) -> (RoofSet, f64, f64) {
    let (fma, nofma) = (2.0 * a * lanes * ghz, (a + b) * lanes * ghz);
    // FMA + add at its best: the FMA pipes on FMAs, the add pipes on adds.
    let fma_add = (2.0 * a + b) * lanes * ghz;
    let mut r = Roofs {
        kind: "empirical".into(),
        threads: Some(1),
        ..Default::default()
    };
    r.compute_gflops.insert("double.avx512.fma".into(), fma);
    r.compute_gflops.insert("double.avx512.nofma".into(), nofma);
    r.compute_gflops.insert("double.avx512.fma_add".into(), fma_add.max(fma));
    r.bandwidth_gbs.insert("l1".into(), 1e6);
    r.bandwidth_gbs.insert("dram".into(), 1e5);
    (RoofSet::from_roofs(&r), fma, nofma)
}

#[test]
fn a_points_compute_roof_is_the_one_its_fma_share_can_reach() {
    let mut next = uniform_draws();
    for round in 0..200 {
        let zen = round % 2 == 0;
        let (a, b) = if zen { (2.0, 2.0) } else { (2.0, 0.0) };
        let lanes = [2.0, 4.0, 8.0][(next() * 3.0) as usize % 3];
        let ghz = 1.5 + 2.5 * next();
        let (r, fma_roof, _) = pipe_roofs(a, b, lanes, ghz);
        let share = match round % 5 {
            0 => 1.0,
            1 => 0.0,
            _ => next(),
        };
        // The pipe model itself: FMA ops (share/2 per flop) only on the `a` pipes; all ops
        // (FMAs and the rest, 1 − share per flop) on the a + b pipes.
        let cycles_per_flop = ((share / 2.0) / a).max((share / 2.0 + 1.0 - share) / (a + b)) / (lanes * ghz);
        let want = 1.0 / cycles_per_flop;
        let got = r.mix_roof("double", "avx512", share).unwrap();
        // (Roofs and the model are computed in a different order: a few ulps apart.)
        assert!(
            (got - want).abs() <= 1e-12 * want,
            "round {round} zen {zen} share {share}: {got} vs {want}"
        );
        // A point of that share, compute-bound (AI far above the ridge), at 90 % of it.
        let w = 1e9 * (1.0 + next());
        let mut p = point(
            w,
            "packed512_double",
            &[("core", w / 1e3), ("dram", w / 1e4)],
            w / (0.9 * want * 1e9),
        );
        p.flops.fma = Some(share * w);
        let an = analyse(&p, &r);
        let used = an.compute_roof.clone().unwrap();
        assert!((used.gflops - want).abs() <= 1e-12 * want, "{used:?} vs {want}");
        assert_eq!(an.bound, Bound::Compute { isa: "avx512".into() });
        // (0.9 of the roof, up to the rounding of w / T and back.)
        assert!((an.roof_fraction.unwrap() - 0.9).abs() < 1e-9, "{:?}", an.roof_fraction);
        if share == 1.0 {
            // All FMA: the FMA roof (never the FMA+add one), and no "use FMA".
            assert!((used.gflops - fma_roof).abs() <= 1e-12 * fma_roof);
            assert_eq!(used.label, "AVX-512 FMA");
            assert!(!an.advice.contains("use FMA"), "{}", an.advice);
            assert!(an.advice.contains("FMAs already"), "{}", an.advice);
        } else if share < 0.95 {
            // "Use FMA" only where an all-FMA mix has a higher roof: on Intel always (the
            // FMA roof is twice the other operations'), on Zen only below 2/3 FMA-free work.
            let all_fma = r.mix_roof("double", "avx512", 1.0).unwrap();
            let raises = all_fma > 1.05 * want;
            assert_eq!(
                an.advice.contains("use FMA (only"),
                raises,
                "zen {zen} share {share}: {}",
                an.advice
            );
            assert_eq!(an.advice.contains("more would not raise its roof"), !raises, "{}", an.advice);
        }
        // The same point from a backend that cannot tell FMAs apart (Intel FP_ARITH): the
        // highest roof, said so.
        p.flops.fma = None;
        let an = analyse(&p, &r);
        let used = an.compute_roof.unwrap();
        let highest = r.peak("double").unwrap().gflops;
        assert_eq!(used.gflops, highest);
        assert!(used.fma_share.is_none() && used.why.contains("do not tell FMAs"), "{used:?}");
    }
}

#[test]
fn a_point_over_its_roof_by_less_than_both_spreads_is_at_it() {
    let mut next = uniform_draws();
    for round in 0..300 {
        let roof_spread = 0.05 * next();
        let mut r = Roofs {
            kind: "empirical".into(),
            threads: Some(1),
            ..Default::default()
        };
        r.compute_gflops.insert("double.avx512.fma".into(), 100.0);
        r.compute_gflops.insert("double.avx512.nofma".into(), 50.0);
        r.spread.insert("double.avx512.fma".into(), roof_spread);
        r.spread.insert("double.avx512.nofma".into(), roof_spread);
        r.bandwidth_gbs.insert("l1".into(), 1e6);
        r.bandwidth_gbs.insert("dram".into(), 1e5);
        let roofs = RoofSet::from_roofs(&r);
        // Compute-bound all-FMA point; its samples spread by `d` around the median.
        let over = 1.0 + 0.12 * next();
        let d = 0.04 * next();
        let median = 1e9 / (over * 100.0 * 1e9);
        let samples: Vec<f64> = [1.0 - d, 1.0 - d / 2.0, 1.0, 1.0 + d / 2.0, 1.0 + d]
            .iter()
            .map(|k| k * median)
            .collect();
        let mut p = point(1e9, "packed512_double", &[("core", 1e6), ("dram", 1e5)], median);
        p.seconds_samples = samples;
        p.flops.fma = Some(1e9);
        p.derive();
        let a = analyse(&p, &roofs);
        let f = a.roof_fraction.unwrap();
        let tolerance = p.spread().unwrap() + roof_spread;
        let warned = above_roof(&p, &a, &roofs);
        // (Decided on the fraction the model computed; the draw only places it near the edge.)
        assert_eq!(
            warned.is_some(),
            f > 1.0 + tolerance,
            "round {round}: fraction {f}, tolerance {tolerance}: {warned:?}"
        );
        // Over by more than 5 % but within the spreads: said in a note with both spreads.
        let said = crate::model::analysis::over_roof_within_spreads(&p, &a, &roofs);
        assert_eq!(
            said.is_some(),
            f > 1.0 + crate::model::analysis::OVER_ROOF_SAID && f <= 1.0 + tolerance,
            "round {round}: fraction {f}, tolerance {tolerance}: {said:?}"
        );
        if let Some(n) = said {
            assert!(n.contains(&format!("{:.1}% of the double AVX-512", f * 100.0)), "{n}");
            assert!(n.contains(&format!("({:.1} %)", roof_spread * 100.0)), "{n}");
        }
    }
}

#[test]
fn compute_bound_at_own_isa() {
    // scalar code with high AI: scalar roof 10 < peak 100 → compute at scalar
    let p = point(1e9, "scalar_double", &[("core", 1e8), ("dram", 1e7)], 0.2);
    let a = analyse(&p, &roofs());
    assert_eq!(a.bound, Bound::Compute { isa: "scalar".into() });
    assert!(a.advice.contains("wider SIMD"));
    // avx512 code with high AI: compute at avx512, no "wider SIMD"
    let p = point(1e9, "packed512_double", &[("core", 1e8), ("dram", 1e7)], 0.02);
    let a = analyse(&p, &roofs());
    assert_eq!(a.bound, Bound::Compute { isa: "avx512".into() });
    assert!(!a.advice.contains("wider SIMD"));
    assert!((a.roof_fraction.unwrap() - 0.5).abs() < 1e-12);
}

#[test]
fn overhead_rules() {
    // tiny T (10 µs) and a low roof fraction: 0.1 GFLOP/s against a DRAM roof of 20·0.1 = 2
    let p = point(1e3, "packed512_double", &[("core", 1e4), ("dram", 1e4)], 1e-5);
    assert_eq!(analyse(&p, &roofs()).bound, Bound::Overhead);
    // tiny T but at the roof: not overhead
    let p = point(1e3, "packed512_double", &[("core", 1e4), ("dram", 1e4)], 5e-7);
    // 2 GFLOP/s at dram roof 20·0.1 = 2 → fraction 1
    assert_eq!(analyse(&p, &roofs()).bound, Bound::Memory { level: "dram".into() });
    // a fitted fixed cost above half of T
    let mut p = point(1e9, "packed512_double", &[("core", 1e9), ("dram", 1e9)], 1.0);
    p.extra.fixed_seconds = Some(0.6);
    assert_eq!(analyse(&p, &roofs()).bound, Bound::Overhead);
    assert!(advice(&Bound::Overhead, None).contains("bigger batches"));
    // "Wider SIMD" only where the machine has a wider ISA than the point's.
    let avx2 = Bound::Compute { isa: "avx2".into() };
    assert!(advice(&avx2, Some("avx512")).contains("wider SIMD"));
    assert!(!advice(&avx2, Some("avx2")).contains("wider SIMD"));
    assert!(advice(&avx2, Some("avx2")).contains("widest this machine has"));
    // L1-bound code cannot move to a closer cache level.
    let l1 = Bound::Memory { level: "l1".into() };
    assert!(!advice(&l1, None).contains("closer cache level"));
    assert!(advice(&Bound::Memory { level: "l3".into() }, None).contains("closer cache level"));
}

#[test]
fn unplaceable_points_say_why() {
    let p = point(1e9, "packed512_double", &[("core", 1e9)], 0.0);
    assert!(analyse(&p, &roofs()).skipped.unwrap().contains("zero time"));
    let p = point(1e9, "packed512_double", &[("core", 0.0)], 1.0);
    assert!(analyse(&p, &roofs()).skipped.unwrap().contains("zero bytes"));
    let p = point(0.0, "packed512_double", &[("core", 1.0)], 1.0);
    assert!(analyse(&p, &roofs()).skipped.unwrap().contains("zero flops"));
}

#[cfg(feature = "analysis")]
#[test]
fn level_bytes_read_against_traffic_roofs_core_bytes_against_core_roofs() {
    // A triad's DRAM traffic is 4/3 of its core bytes (write-allocate): 32 B/element at
    // the level vs 24 B core-side. The machine's DRAM roof: 21 GB/s core-side, 28 GB/s
    // of traffic (the same run counted both ways), plus a non-temporal copy at 25 GB/s.
    let mut rng = 0x9e37_79b9_u64;
    for _ in 0..50 {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = 1e6 + (rng >> 40) as f64; // elements
        let gbs_traffic = 20.0 + (rng >> 58) as f64; // what the kernel reached, ≤ 35
        let secs = 32.0 * n / (gbs_traffic * 1e9);
        let p = point(2.0 * n, "packed256_double", &[("core", 24.0 * n), ("dram", 32.0 * n)], secs);
        let doc = serde_json::json!({
            "schema": "roofline.ceilings/1",
            "compute": [{"precision": "double", "isa": "avx2", "fma": true, "mode": "fma", "gflops": 50.0}],
            "bandwidth": [
                {"level": "L1", "kernel": "load", "gbs": 150.0, "gbs_write_allocate": 150.0},
                {"level": "DRAM", "kernel": "triad", "gbs": 21.0 + gbs_traffic / 2.0, "gbs_write_allocate": (21.0 + gbs_traffic / 2.0) * 4.0 / 3.0},
                {"level": "DRAM", "kernel": "copy_nt", "gbs": 25.0, "gbs_write_allocate": 25.0}
            ]
        });
        let r = RoofSet::from_ceilings_json(&doc.to_string(), "t", None).unwrap();
        let roof_core = 21.0 + gbs_traffic / 2.0;
        assert_eq!(r.bandwidth("dram"), Some(roof_core), "the NT kernel is not a core-side roof");
        let traffic = r.roof_for_bytes("dram").unwrap().1;
        assert!((traffic - roof_core * 4.0 / 3.0).abs() < 1e-9);
        // Classic model: DRAM bytes against the traffic roof, so reaching a fraction
        // f of that roof reads as f, never above 1 for a physical run.
        let d = attainable_dram(&p, &r).unwrap();
        let achieved = 2.0 * n / secs / 1e9;
        assert!((achieved / d.gflops - gbs_traffic / traffic).abs() < 1e-9);
        assert!(achieved / d.gflops <= 1.0 + 1e-12);
        // CARM: the same point by core AI against the core-side L1 roof.
        let (c, per) = attainable_cache_aware(&p, &r).unwrap();
        assert!((c.gflops - 150.0 * 2.0 / 24.0).abs() < 1e-9);
        assert!((per["dram"] - roof_core * 2.0 / 24.0).abs() < 1e-9);
    }
    // Round trip through a report's roofs keeps both conventions.
    let r = RoofSet::from_roofs(
        &RoofSet::from_ceilings_json(
            &serde_json::json!({"schema": "roofline.ceilings/1", "bandwidth": [
            {"level": "dram", "kernel": "triad", "gbs": 18.0, "gbs_write_allocate": 24.0}]})
            .to_string(),
            "t",
            None,
        )
        .unwrap()
        .to_roofs(),
    );
    assert_eq!(r.bandwidth("dram"), Some(18.0));
    assert_eq!(r.roof_for_bytes("dram").unwrap().1, 24.0);
    assert_eq!(r.roof_for_bytes("core"), None, "core bytes read against L1, absent here");
}

#[cfg(feature = "analysis")]
#[test]
fn a_mixed_roof_set_keeps_which_roofs_are_theoretical_through_a_report() {
    let mut measured = Roofs {
        kind: "empirical".into(),
        threads: Some(1),
        ..Default::default()
    };
    measured.compute_gflops.insert("double.avx2.fma".into(), 50.0);
    measured.bandwidth_gbs.insert("l1".into(), 140.0);
    let mut s = RoofSet::from_roofs(&measured);
    let mut theory = Roofs {
        kind: "theoretical".into(),
        threads: Some(1),
        ..Default::default()
    };
    theory.compute_gflops.insert("double.avx2.fma".into(), 52.0);
    theory.compute_gflops.insert("double.avx2.nofma".into(), 26.0);
    theory.bandwidth_gbs.insert("l1_load".into(), 207.0);
    s.fill_from(&RoofSet::from_roofs(&theory));
    let saved = s.to_roofs();
    assert_eq!(saved.kind, "mixed");
    let json = serde_json::to_string(&saved).unwrap();
    let back = RoofSet::from_roofs(&serde_json::from_str(&json).unwrap());
    let style = |r: &RoofSet| -> Vec<(String, bool)> {
        r.compute
            .iter()
            .map(|c| (c.key(), c.empirical))
            .chain(r.bandwidth.iter().map(|b| (b.level.clone(), b.empirical)))
            .collect()
    };
    assert_eq!(style(&back), style(&s));
    assert!(
        back.compute
            .iter()
            .any(|c| c.key() == "double.avx2.fma" && c.empirical && c.gflops == 50.0)
    );
    assert!(back.compute.iter().any(|c| c.key() == "double.avx2.nofma" && !c.empirical));
    assert!(back.bandwidth.iter().any(|b| b.level == "l1_load" && !b.empirical));
}

#[test]
fn fma_add_mix_keeps_its_own_label() {
    let mut r = Roofs::default();
    r.compute_gflops.insert("double.avx2.fma".into(), 50.0);
    r.compute_gflops.insert("double.avx2.fma_add".into(), 73.0);
    r.compute_gflops.insert("double.avx2.mul_add".into(), 49.0);
    let s = RoofSet::from_roofs(&r);
    let labels: Vec<String> = s.compute.iter().map(|c| c.label()).collect();
    assert!(labels.contains(&"AVX2 FMA+add".to_string()), "{labels:?}");
    assert!(labels.contains(&"AVX2 no-FMA".to_string()), "{labels:?}");
    assert_eq!(s.peak("double").unwrap().label(), "AVX2 FMA+add");
    let back = s.to_roofs();
    assert_eq!(
        back.compute_gflops.keys().collect::<Vec<_>>(),
        vec!["double.avx2.fma", "double.avx2.fma_add", "double.avx2.nofma"]
    );
}

#[cfg(feature = "analysis")]
#[test]
fn ceilings_file_reader() {
    let doc = serde_json::json!({
        "schema": "roofline.ceilings/1",
        "compute": [
            {"precision": "double", "isa": "avx512", "fma": true, "threads": 1, "gflops": 80.0, "ghz": 3.0},
            {"precision": "double", "isa": "avx512", "fma": true, "threads": 2, "gflops": 150.0, "ghz": 3.0},
            {"precision": "double", "isa": "scalar", "fma": false, "threads": 2, "gflops": 6.0, "ghz": 3.0}
        ],
        "bandwidth": [
            {"level": "L1", "kernel": "load", "threads": 2, "working_set_bytes": 16384, "gbs": 500.0, "bytes_convention": "core"},
            {"level": "l1", "kernel": "copy", "threads": 2, "working_set_bytes": 16384, "gbs": 450.0, "bytes_convention": "core"},
            {"level": "dram", "kernel": "triad", "threads": 2, "working_set_bytes": 1e9, "gbs": 30.0, "bytes_convention": "core"}
        ]
    });
    let s = RoofSet::from_ceilings_json(&doc.to_string(), "c.json", None).unwrap();
    assert_eq!(s.threads, Some(2));
    assert_eq!(s.peak("double").unwrap().gflops, 150.0);
    assert_eq!(s.bandwidth("l1"), Some(500.0));
    assert_eq!(s.compute.len(), 2);
    let s1 = RoofSet::from_ceilings_json(&doc.to_string(), "c.json", Some(1)).unwrap();
    assert_eq!(s1.peak("double").unwrap().gflops, 80.0);
    // Not measured at 3 or 16 threads: the nearest measured count, 2.
    for t in [3, 16] {
        let s = RoofSet::from_ceilings_json(&doc.to_string(), "c.json", Some(t)).unwrap();
        assert_eq!((s.threads, s.peak("double").unwrap().gflops), (Some(2), 150.0));
    }
    // round trip through the report's summary
    let back = RoofSet::from_roofs(&s.to_roofs());
    assert_eq!(back, s);
    for bad in ["{", "{\"schema\":\"roofline.report/1\"}", "{\"schema\":\"roofline.ceilings/2\"}"] {
        assert!(RoofSet::from_ceilings_json(bad, "c.json", None).is_err(), "{bad}");
    }
    let neg = doc.to_string().replace("30.0", "-30.0");
    assert!(RoofSet::from_ceilings_json(&neg, "c.json", None).is_err());
}

/// A point of one class whose W is split as the report schema splits it (integer classes
/// in `int_ops`, not in `total`).
fn class_point(class: &str, work: f64, bytes: f64, secs: f64) -> Point {
    let mut p = point(work, class, &[("core", bytes), ("dram", bytes / 4.0)], secs);
    p.flops = Flops::of_classes([(class.to_string(), work)].into_iter().collect());
    p.derive();
    p
}

fn mixed_roofs() -> RoofSet {
    let mut r = Roofs {
        kind: "empirical".into(),
        threads: Some(1),
        ..Default::default()
    };
    r.compute_gflops.insert("double.avx512.fma".into(), 100.0);
    r.compute_gflops.insert("bf16.avx512.fma".into(), 80.0);
    r.compute_gflops.insert("bf16.amx.fma".into(), 2800.0);
    r.compute_gflops.insert("int8.amx.fma".into(), 5600.0);
    r.bandwidth_gbs.insert("l1".into(), 4000.0);
    r.bandwidth_gbs.insert("dram".into(), 200.0);
    RoofSet::from_roofs(&r)
}

#[test]
fn mixed_precision_points_read_against_their_own_family() {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(std::process::id());
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    let r = mixed_roofs();
    for _ in 0..20 {
        // High AI (compute-bound): W/bytes in 50..100.
        let work = 1e9 * (1.0 + next());
        let bytes = work / (50.0 + 50.0 * next());
        let frac = 0.2 + 0.7 * next();
        // AMX bf16 at `frac` of its roof.
        let p = class_point("tile_bf16", work, bytes, work / (frac * 2800.0e9));
        assert_eq!(point_precision(&p), "bf16");
        assert_eq!(point_isa(&p), Some("amx"));
        let a = analyse(&p, &r);
        assert_eq!(a.bound, Bound::Compute { isa: "amx".into() });
        assert!((a.roof_fraction.unwrap() - frac).abs() < 1e-9, "{a:?}");
        // AMX int8: W is integer operations (not in flops.total), read against GOP/s roofs.
        let p = class_point("tile_int8", work, bytes, work / (frac * 5600.0e9));
        assert_eq!(p.flops.total, 0.0);
        assert_eq!(point_precision(&p), "int8");
        assert_eq!(point_work(&p), work);
        assert!((point_rate(&p).unwrap() - frac * 5600.0).abs() < 1e-6 * 5600.0);
        let a = analyse(&p, &r);
        assert!(a.skipped.is_none(), "{a:?}");
        assert!((a.roof_fraction.unwrap() - frac).abs() < 1e-9, "{a:?}");
        assert!((a.ai["core"] - work / bytes).abs() < 1e-9 * work / bytes);
        // vdpbf16ps code: compute-bound at AVX-512's bf16 roof, and told of the tile unit.
        let p = class_point("packed512_bf16", work, bytes, work / (frac * 80.0e9));
        let a = analyse(&p, &r);
        assert_eq!(a.bound, Bound::Compute { isa: "avx512".into() });
        // The fraction is of the precision's peak (any unit), as for FP64 code.
        assert!((a.roof_fraction.unwrap() - frac * 80.0 / 2800.0).abs() < 1e-9);
        assert!(
            a.advice.contains("a tile unit exists") && a.advice.contains("35.0x"),
            "{}",
            a.advice
        );
        // Double-precision code: told of the lower precision's roof.
        let p = class_point("packed512_double", work, bytes, work / (frac * 100.0e9));
        let a = analyse(&p, &r);
        assert!(a.advice.contains("a lower precision is faster here"), "{}", a.advice);
        assert!(a.advice.contains("BF16 AMX tiles"), "{}", a.advice);
    }
    // Memory-bound bf16 code gets no unit advice.
    let p = class_point("tile_bf16", 1e9, 1e10, 1.0);
    assert!(!analyse(&p, &r).advice.contains("tile unit"));
}

#[test]
fn a_machine_without_the_unit_has_no_roof_for_its_precision() {
    // Only FP64 roofs (a Zen 3): bf16 and int8 points get no roof, never the FP64 one.
    let r = roofs();
    for class in ["tile_bf16", "packed512_bf16", "tile_int8", "packed256_int8", "packed512_half"] {
        let p = class_point(class, 1e9, 1e7, 0.01);
        assert!(r.peak(point_precision(&p)).is_none(), "{class}");
        let a = analyse(&p, &r);
        assert_eq!(a.roof_fraction, None, "{class}");
        assert!(a.attainable.is_empty(), "{class}");
    }
    // Double and single still fall back to each other.
    assert_eq!(r.peak("single").unwrap().precision, "double");
}

#[test]
fn precision_of_mixed_points_and_families() {
    let mut p = class_point("tile_bf16", 1e9, 1e6, 1.0);
    p.flops.by_class.insert("packed512_single".into(), 2e8);
    assert_eq!(point_precision(&p), "bf16");
    p.flops.by_class.insert("packed512_single".into(), 2e9);
    assert_eq!(point_precision(&p), "single");
    let p = class_point("packed256_half", 1e9, 1e6, 1.0);
    assert_eq!(point_precision(&p), "half");
    assert_eq!(point_isa(&p), Some("avx2"));
    let p = class_point("packed512_int16", 1e9, 1e6, 1.0);
    assert_eq!(point_precision(&p), "int16");
    assert_eq!(precision_family("tensor_bf16"), precision_family("bf16"));
    assert_eq!(precision_family("tensor_fp16"), "half");
    assert_eq!(precision_family("tensor_fp64"), "double");
    assert_ne!(precision_family("tensor_tf32"), precision_family("single"));
    assert!(isa_rank("amx") > isa_rank("avx512"));
    let r = mixed_roofs();
    let bf16: Vec<String> = r.of_family("bf16").map(|c| c.label()).collect();
    assert_eq!(bf16, vec!["BF16 AVX-512 dot", "BF16 AMX tiles"]);
    assert_eq!(r.at_isa("int8", "amx").unwrap().unit(), "GOP/s");
    assert_eq!(r.precisions(), vec!["bf16", "double", "int8"]);
    // The keys survive a report round trip.
    assert_eq!(RoofSet::from_roofs(&r.to_roofs()), r);
}

#[cfg(feature = "analysis")]
#[test]
fn theoretical_roofs_include_the_mixed_units_of_the_machine_model() {
    let doc = serde_json::json!({
        "schema": "roofline.machine/1", "vendor": "GenuineIntel", "family": 6, "model": 143, "stepping": 8,
        "brand": "Test SPR", "microarchitecture": "spr", "microarchitecture_name": "Sapphire Rapids",
        "identified_by": "cpuid model", "hypervisor": null, "sockets": 1, "cores": 8, "threads": 16, "smt": true,
        "caches": [], "isa": ["avx512f", "amx_bf16"], "fp_pipes": {}, "fp_pipes_source": "platform table",
        "frequency_ghz": {"nominal": 2.0, "nominal_source": "test", "measured": 2.5, "by_isa": {}, "by_isa_all_threads": {}, "override_ghz": null},
        "peak_gflops": {"double": {"avx512": 1280.0}, "single": {}},
        "peak_gflops_per_core": {"double": {"avx512": 80.0}, "single": {}},
        "mixed_ops_per_cycle": {"bf16.amx": 1024.0, "int8.amx": 2048.0},
        "peak_mixed_per_core": {"bf16.amx": 2560.0, "int8.amx": 5120.0},
        "peak_mixed": {"bf16.amx": 20480.0, "int8.amx": 40960.0}
    });
    let m: MachineModel = serde_json::from_value(doc).unwrap();
    let t = 3;
    let r = RoofSet::theoretical(&m, t);
    let amx = r.at_isa("bf16", "amx").unwrap();
    assert_eq!(amx.gflops, 2560.0 * f64::from(t));
    assert!(!amx.empirical);
    assert_eq!(r.at_isa("int8", "amx").unwrap().gflops, 5120.0 * f64::from(t));
    assert_eq!(r.peak("double").unwrap().gflops, 80.0 * f64::from(t));
    // A measured bf16 roof keeps its place; the theory fills the int8 one.
    let mut measured = mixed_roofs();
    measured.compute.retain(|c| c.precision != "int8");
    measured.fill_from(&r);
    assert_eq!(measured.at_isa("bf16", "amx").unwrap().gflops, 2800.0);
    assert!(!measured.at_isa("int8", "amx").unwrap().empirical);
}

#[cfg(feature = "analysis")]
#[test]
fn theoretical_roofs_of_every_core_run_at_the_all_core_clock() {
    // An Emerald Rapids guest of 16 cores: one core's AVX2 clock read 3.56 GHz, all cores'
    // 2.4 GHz; 32 single flop/cycle per core on AVX2, 1024 bf16 on AMX.
    let (one, all) = (3.56, 2.4);
    let doc = serde_json::json!({
        "schema": "roofline.machine/1", "vendor": "GenuineIntel", "family": 6, "model": 207, "stepping": 2,
        "brand": "Test EMR", "microarchitecture": "spr", "microarchitecture_name": "Emerald Rapids",
        "identified_by": "cpuid model", "hypervisor": "KVM", "sockets": 1, "cores": 16, "threads": 16, "smt": false,
        "caches": [], "isa": ["avx2", "fma", "amx_bf16"], "fp_pipes": {}, "fp_pipes_source": "platform table",
        "frequency_ghz": {"nominal": 2.0, "nominal_source": "test", "measured": one, "by_isa": {}, "by_isa_all_threads": {}, "override_ghz": null},
        "peak_gflops": {"double": {}, "single": {"avx2": 32.0 * all * 16.0}},
        "peak_gflops_per_core": {"double": {}, "single": {"avx2": 32.0 * one}},
        "mixed_ops_per_cycle": {"bf16.amx": 1024.0},
        "peak_mixed_per_core": {"bf16.amx": 1024.0 * one},
        "peak_mixed": {"bf16.amx": 1024.0 * all * 16.0}
    });
    let m: MachineModel = serde_json::from_value(doc).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
    let every = RoofSet::theoretical(&m, 16);
    assert!(close(every.peak("single").unwrap().gflops, 32.0 * all * 16.0), "{every:?}");
    assert!(close(every.at_isa("bf16", "amx").unwrap().gflops, 1024.0 * all * 16.0));
    // Fewer threads than cores keep the one-core clock (an upper bound); one thread is one core.
    let four = RoofSet::theoretical(&m, 4);
    assert!(close(four.peak("single").unwrap().gflops, 32.0 * one * 4.0));
    assert!(close(RoofSet::theoretical(&m, 1).peak("single").unwrap().gflops, 32.0 * one));
}

/// A theoretical roof filled in beside measured ones never stands above a measured roof that
/// bounds it: of the same precision and mode at a wider vector ISA, or of FMA at the same or a
/// wider one for a roof without FMA (the main job's 16-thread report read "peak single 1589
/// GFLOP/s (AVX2 FMA)", a paper AVX2 peak at a quiet clock above the AVX-512 FMA measured at
/// 1255 on a busy host). Roofs of another precision or unit are left as they are, and every
/// capped roof stays theoretical.
#[test]
fn a_paper_roof_is_not_above_a_measured_one_that_bounds_it() {
    let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
    let roof = |precision: &str, isa: &str, fma: bool, gflops: f64, empirical: bool| ComputeRoof {
        precision: precision.into(),
        isa: isa.into(),
        fma,
        mix: false,
        gflops,
        empirical,
        spread: 0.0,
    };
    for _ in 0..300 {
        let (a512, a2) = (500.0 + 1000.0 * rng.unit(), 300.0 + 1000.0 * rng.unit());
        let measured = RoofSet {
            compute: vec![
                roof("single", "avx512", true, a512, true),
                roof("single", "avx2", true, a2, true),
                roof("bf16", "amx", true, 100.0 * rng.unit(), true),
                roof("double", "avx2", true, 50.0 + 100.0 * rng.unit(), false),
            ],
            bandwidth: vec![],
            threads: Some(16),
            notes: vec![],
        };
        // Each paper roof with the measured roofs that bound it, written out by hand.
        let paper: Vec<(&str, &str, bool, f64, Vec<f64>)> = vec![
            ("single", "avx2", true, 2000.0 * rng.unit(), vec![a512]),
            ("single", "sse", true, 2000.0 * rng.unit(), vec![a512, a2]),
            ("single", "avx2", false, 2000.0 * rng.unit(), vec![a512, a2]),
            ("single", "avx512", true, 2000.0 * rng.unit(), vec![]),
            ("single", "avx512", false, 2000.0 * rng.unit(), vec![a512]),
            ("double", "scalar", true, 2000.0 * rng.unit(), vec![]),
            ("bf16", "avx512", true, 2000.0 * rng.unit(), vec![]),
        ];
        let mut theory = RoofSet {
            compute: paper.iter().map(|(p, i, f, g, _)| roof(p, i, *f, *g, false)).collect(),
            bandwidth: vec![],
            threads: Some(16),
            notes: vec![],
        };
        theory.cap_below_wider_measured(&measured);
        for (c, (p, i, f, g, bounds)) in theory.compute.iter().zip(&paper) {
            assert!(!c.empirical);
            let expected = bounds.iter().fold(*g, |x, b| x.min(*b));
            assert_eq!(c.gflops, expected, "{p}.{i} fma={f} from {g} under {bounds:?}");
        }
        let mut filled = measured.clone();
        filled.fill_from(&theory);
        let peak = filled.peak("single").unwrap();
        assert!(peak.empirical && peak.gflops == a512.max(a2), "{peak:?} in {filled:?}");
    }
}
