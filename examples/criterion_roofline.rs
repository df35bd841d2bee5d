//! Criterion + roofline: benchmark a closure with criterion, report GFLOP/s and % of roof, and
//! write a `roofline.report/1` that `roofline gate` can compare against a baseline.
//!
//! ```text
//! cargo run --release --example criterion_roofline -- --bench --sample-size 20
//! roofline gate --baseline bench-baseline.json --current target/criterion-roofline.json
//! ```
//! The report goes beside criterion's files: in `$CARGO_TARGET_DIR` when set, else `target/`.
//!
//! The roof is this machine's ([`Roof::from_machine`]): the ceilings `roofline ceilings`
//! caches, measured once in quick mode when there is no cache yet. To use other roofs, set
//! `ROOFLINE_PEAK_GFLOPS=150 ROOFLINE_ROOF_GBS=l1=300,dram=20`: `l1` is read against the
//! core-side bytes every benchmark has; `l2`, `l3`, `dram` only against benchmarks whose work
//! counts bytes at that level (analytic DRAM bytes, or a memory-mode trace).
//!
//! `triad`'s W and Q are analytic (two flops and 24 bytes per element); `dot`'s are counted by
//! tracing one call (the compiler picks its instructions), cached per fingerprint in
//! `target/roofline-work/` so later runs do not trace again.

use criterion::{Criterion, Throughput};
use roofline::criterion_support::{BenchWork, Roof, WorkCache, report_from_criterion, summary_line, this_machine};
use roofline::kernels::{Counts, FlopClass};
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

fn main() {
    if let Err(e) = run() {
        eprintln!("criterion_roofline: {e}");
        std::process::exit(e.exit_code());
    }
}

fn run() -> roofline::Result<()> {
    // This machine's roofs, before anything runs: the ceilings `roofline ceilings` cached,
    // measured once when there are none (ROOFLINE_PEAK_GFLOPS / ROOFLINE_ROOF_GBS override).
    let roof = Roof::from_machine()?;
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

    // Where criterion wrote its samples: $CRITERION_HOME, else $CARGO_TARGET_DIR/criterion,
    // else target/criterion (criterion's own rule).
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let criterion_dir = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir.join("criterion"));
    let benches = [("example/triad", work), ("example/dot", dot_work)];
    let report = report_from_criterion(&criterion_dir, &benches, Some(&roof), this_machine()?)?;
    for p in &report.points {
        println!("{}", summary_line(p));
    }
    let out = target_dir.join("criterion-roofline.json");
    std::fs::create_dir_all(&target_dir).map_err(|e| roofline::Error::io(format!("creating {}", target_dir.display()), e))?;
    std::fs::write(&out, report.to_json()).map_err(|e| roofline::Error::io(format!("writing {}", out.display()), e))?;
    println!("wrote {}", out.display());
    Ok(())
}
