use super::*;

/// A document with one compute and one bandwidth figure per count of `threads`, each figure
/// `10 × threads` (so the figure read tells the count it came from).
fn doc_at(threads: &[u32]) -> Ceilings {
    let compute: Vec<_> = threads
        .iter()
        .map(|&t| serde_json::json!({"precision": "double", "isa": "avx2", "fma": true, "threads": t, "gflops": 10.0 * f64::from(t)}))
        .collect();
    let bandwidth: Vec<_> = threads
        .iter()
        .map(|&t| serde_json::json!({"level": "DRAM", "kernel": "load", "threads": t, "gbs": 10.0 * f64::from(t)}))
        .collect();
    let text = serde_json::json!({"schema": CEILINGS_SCHEMA, "compute": compute, "bandwidth": bandwidth}).to_string();
    Ceilings::from_json(&text, "doc").unwrap()
}

/// Random sets of measured thread counts and a random count asked for: the count read is the
/// one asked for where measured, else one no farther than any other measured count, and of two
/// equally near the larger; the roofs are those measured there.
#[test]
fn the_thread_rule_is_exact_else_nearest_ties_to_the_larger() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut rng = roofline_kernels::stream::SplitMix(seed);
    let mut ties = 0;
    for round in 0..2000 {
        let n = 1 + (rng.next_u64() % 6) as usize;
        let mut measured: Vec<u32> = (0..n).map(|_| 1 + (rng.next_u64() % 64) as u32).collect();
        measured.sort_unstable();
        measured.dedup();
        // Every third round asks for a measured count; the others for any count up to 80.
        let wanted = if round % 3 == 0 {
            measured[(rng.next_u64() % measured.len() as u64) as usize]
        } else {
            1 + (rng.next_u64() % 80) as u32
        };
        let mut shuffled = measured.clone();
        shuffled.rotate_left((rng.next_u64() % measured.len() as u64) as usize);
        let got = nearest_threads(shuffled.iter().copied(), wanted).unwrap();
        let why = format!("seed {seed}: {measured:?} asked {wanted}, got {got}");
        assert!(measured.contains(&got), "{why}");
        if measured.contains(&wanted) {
            assert_eq!(got, wanted, "{why}");
        }
        for &m in &measured {
            let (d, dg) = (m.abs_diff(wanted), got.abs_diff(wanted));
            assert!(d > dg || (d == dg && m <= got), "{why}: {m} is nearer or as near and larger");
            ties += usize::from(d == dg && m != got);
        }
        let c = doc_at(&shuffled);
        assert_eq!(c.measured_threads(), measured, "{why}");
        let r = c.roofs(wanted);
        assert_eq!(r.threads, Some(got), "{why}");
        assert_eq!(r.compute_gflops["double.avx2.fma"], 10.0 * f64::from(got), "{why}");
        assert_eq!(r.bandwidth_gbs["dram"], 10.0 * f64::from(got), "{why}");
    }
    assert!(ties > 0, "seed {seed}: no draw was equally near two counts");
    // No count asked for: the largest measured.
    assert_eq!(nearest_threads([4, 1, 16, 8], u32::MAX), Some(16));
    assert_eq!(nearest_threads([], 4), None);
    assert_eq!(nearest_threads([2, 4], 3), Some(4));
}

/// A file of an older version (the report fixture's: no machine, no top-level thread counts,
/// no mode, no write-allocate figure, no spread) reads with the defaults.
#[test]
fn an_older_file_reads_with_defaults() {
    let text = include_str!("../../tests/fixtures/reports/ceilings.json");
    let c = Ceilings::from_json(text, "fixture").unwrap();
    assert!(c.threads.is_empty() && c.machine.fingerprint.is_empty() && c.sweep.is_none());
    assert_eq!(c.measured_threads(), vec![1, 2]);
    assert!(c.compute.iter().all(|f| f.mode.is_empty() && f.spread == 0.0));
    assert!(c.bandwidth.iter().all(|b| b.gbs_write_allocate == 0.0 && b.traffic_gbs() == b.gbs));
    let r = c.roofs(3);
    assert_eq!(r.threads, Some(2));
    assert_eq!(r.compute_gflops["double.avx512.fma"], 150.0);
    assert_eq!(r.compute_gflops["double.avx512.mul_add"], 75.0);
    assert_eq!(r.bandwidth_gbs["l1"], 580.0);
    assert_eq!(r.bandwidth_traffic_gbs["dram"], 38.0);
    // Only the schema and each figure's name and value are required.
    let bare = r#"{"schema": "roofline.ceilings/1", "bandwidth": [{"level": "L2", "gbs": 90.5}]}"#;
    let c = Ceilings::from_json(bare, "bare").unwrap();
    assert_eq!((c.bandwidth[0].threads, c.roofs(1).bandwidth_gbs["l2"]), (1, 90.5));
    let by_hand = r#"{"schema": "roofline.ceilings/1", "bandwidth": [{"level": "DRAM", "gbs": 20.0, "working_set_bytes": 1e9}]}"#;
    assert_eq!(
        Ceilings::from_json(by_hand, "by hand").unwrap().bandwidth[0].working_set_bytes,
        1_000_000_000
    );
    assert!(Ceilings::from_json(&by_hand.replace("1e9", "1.5"), "half a byte").is_err());
    let missing = r#"{"schema": "roofline.ceilings/1", "bandwidth": [{"level": "L2"}]}"#;
    let e = Ceilings::from_json(missing, "missing").unwrap_err().to_string();
    assert!(
        e.starts_with("missing: not a valid roofline.ceilings/1 document") && e.contains("gbs"),
        "{e}"
    );
}

/// A level measured only with non-temporal stores: its traffic is its core-side roof too.
#[test]
fn a_level_of_only_streamed_stores_has_a_core_side_roof() {
    let text = r#"{"schema": "roofline.ceilings/1", "bandwidth": [
        {"level": "DRAM", "kernel": "store_nt", "gbs": 25.0, "gbs_write_allocate": 25.0},
        {"level": "L1", "kernel": "load", "gbs": 150.0, "gbs_write_allocate": 150.0}]}"#;
    let r = Ceilings::from_json(text, "nt").unwrap().roofs(1);
    assert_eq!(r.bandwidth_gbs["dram"], 25.0);
    assert_eq!(r.bandwidth_gbs["l1"], 150.0);
}

/// A disturbed compute ceiling (spread over 5 %) gives its best sample as the roof; a steady
/// one its median. Random figures; the rule is checked from the numbers drawn.
#[test]
fn a_disturbed_compute_ceiling_gives_its_best_sample() {
    let text = include_str!("../../tests/fixtures/reports/ceilings.json");
    let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
    for _ in 0..50 {
        let mut c = Ceilings::from_json(text, "fixture").unwrap();
        let f = c
            .compute
            .iter_mut()
            .find(|f| f.key() == "double.avx512.fma" && f.threads == 1)
            .unwrap();
        let (median, best, spread) = (f.gflops, f.gflops * (1.0 + rng.unit()), 0.2 * rng.unit());
        f.gflops_best = best;
        f.spread = spread;
        let want = if spread > NOISY_COMPUTE_CEILING { best } else { median };
        assert_eq!(c.roofs(1).compute_gflops["double.avx512.fma"], want, "spread {spread}");
    }
}
