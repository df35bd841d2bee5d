//! Criterion + roofline: benchmark a closure with criterion, report GFLOP/s and % of roof, and
//! write a `roofline.report/1` that `roofline gate` can compare against a baseline.
//!
//! ```text
//! ROOFLINE_PEAK_GFLOPS=150 ROOFLINE_ROOF_GBS=l1=300 \
//!   cargo run --release --example criterion_roofline -- --bench --sample-size 20
//! roofline gate --baseline bench-baseline.json --current target/criterion-roofline.json
//! ```
//! `ROOFLINE_ROOF_GBS` keys are levels: `l1` is read against the core-side bytes every
//! benchmark has; `l2`, `l3`, `dram` only against benchmarks whose work counts bytes at that
//! level (analytic DRAM bytes, or a memory-mode trace).
//!
//! `triad`'s W and Q are analytic (two flops and 24 bytes per element); `dot`'s are counted by
//! tracing one call (the compiler picks its instructions), cached per fingerprint in
//! `target/roofline-work/` so later runs do not trace again.

use criterion::{Criterion, Throughput};
use roofline::criterion_support::{BenchWork, Roof, WorkCache, report_from_criterion, summary_line};
use roofline::kernels::{Counts, FlopClass};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;

fn triad(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = b + s * c;
    }
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

fn roof_from_env() -> Option<Roof> {
    let peak: f64 = std::env::var("ROOFLINE_PEAK_GFLOPS").ok()?.parse().ok()?;
    let mut bandwidth_gbs = BTreeMap::new();
    for part in std::env::var("ROOFLINE_ROOF_GBS")
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
    {
        let (lvl, gbs) = part.split_once('=')?;
        bandwidth_gbs.insert(lvl.trim().to_string(), gbs.trim().parse().ok()?);
    }
    Some(Roof {
        peak_gflops: peak,
        bandwidth_gbs,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 1usize << 14; // 384 KiB: an L2-resident triad
    let (mut a, b, c) = (vec![0.0f64; n], vec![1.5f64; n], vec![2.5f64; n]);

    // W and Q of one iteration, from the loop's structure (the compiler picks the vector width).
    let mut counts = Counts::default();
    counts.add_flops(FlopClass::DoubleAnyWidth, 2 * n as u64);
    counts.core_load_bytes = 16 * n as u64;
    counts.core_store_bytes = 8 * n as u64;
    let work = BenchWork::from_counts(&counts);

    // dot: no formula written; one traced call gives W and Q (cached per size and build).
    let fingerprint = format!("n={n};{}", env!("CARGO_PKG_VERSION"));
    let dot_work = WorkCache::new("target/roofline-work").get_or_measure("example/dot", &fingerprint, || {
        let mut sink = 0.0;
        BenchWork::from_trace(&mut || sink += dot(black_box(&b), black_box(&c)))
    })?;

    let mut crit = Criterion::default().without_plots().configure_from_args();
    let mut group = crit.benchmark_group("example");
    group.throughput(Throughput::Elements(work.flop_count())); // criterion's elem/s = flop/s
    group.bench_function("triad", |bench| {
        bench.iter(|| triad(black_box(&mut a), black_box(&b), black_box(&c), 3.0))
    });
    group.throughput(Throughput::Elements(dot_work.flop_count()));
    group.bench_function("dot", |bench| bench.iter(|| dot(black_box(&b), black_box(&c))));
    group.finish();
    crit.final_summary();

    let criterion_dir = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    let roof = roof_from_env();
    let benches = [("example/triad", work), ("example/dot", dot_work)];
    let report = report_from_criterion(&criterion_dir, &benches, roof.as_ref(), serde_json::json!({}))?;
    for p in &report.points {
        println!("{}", summary_line(p));
    }
    let out = PathBuf::from("target/criterion-roofline.json");
    std::fs::create_dir_all("target")?;
    roofline::util::write_atomic(&out, report.to_json().as_bytes())?;
    println!("wrote {}", out.display());
    Ok(())
}
