//! Criterion integration: GFLOP/s and % of roof for benchmark closures, and a
//! `roofline.report/1` written from criterion's results.
//!
//! Criterion measures the time; roofline supplies W and Q, from the kernel's analytic counts or
//! from one traced iteration cached per benchmark ([`WorkCache`]: tracing every iteration would
//! take hours). The pattern, in a `benches/*.rs` (see `examples/criterion_roofline.rs`):
//!
//! ```ignore
//! use roofline::criterion_support::{BenchWork, Roof, report_from_criterion};
//! let work = BenchWork::from_counts(&counts);                 // W and Q of ONE iteration
//! let mut g = c.benchmark_group("suite");
//! g.throughput(criterion::Throughput::Elements(work.flop_count()));  // criterion prints flop/s
//! g.bench_function("triad", |b| b.iter(|| triad(&mut a, &x, &y)));
//! g.finish();
//! // after the group ran: one point per benchmark, GFLOP/s and % of roof
//! let report = report_from_criterion("target/criterion".as_ref(), &[("suite/triad", work)], Some(&roof), machine)?;
//! ```
//!
//! With `Throughput::Elements(W)` criterion's own "thrpt" line reads in flop/s (its "Gelem/s"
//! is GFLOP/s); the report adds AI per level, GB/s and the fraction of the attainable roof, and
//! keeps every criterion sample in `seconds_samples`, so `roofline gate` can judge it
//! statistically. The library does not depend on criterion: it reads the files criterion writes
//! (`<criterion dir>/<benchmark id>/new/sample.json`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::kernels::Counts;
use crate::report::schema::level;
use crate::report::{Bytes, Environment, Flops, Point, Provenance, Report, Source};

/// W and Q of one benchmark iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchWork {
    pub flops: Flops,
    pub bytes: Bytes,
    /// Where W and Q came from: `analytic` or `trace`.
    pub source: Source,
}

impl BenchWork {
    /// From a suite kernel's analytic counts of one invocation.
    pub fn from_counts(c: &Counts) -> BenchWork {
        let mut bytes = Bytes::new();
        bytes.insert(level::CORE.into(), c.core_bytes() as f64);
        if c.dram_bytes > 0 {
            bytes.insert(level::DRAM.into(), c.dram_bytes as f64);
        }
        BenchWork {
            flops: Flops::of_classes(c.flops.iter().map(|(k, v)| (k.key().to_string(), *v as f64)).collect()),
            bytes,
            source: Source::Analytic,
        }
    }

    /// W and core/stack Q of one call of `work`, traced (flops mode) in a forked child: exact
    /// counts for a closure with no analytic formula. Costs one traced call (seconds for a
    /// large one): cache it per benchmark with [`WorkCache::get_or_measure`]. Prepare the
    /// inputs before calling; the closure must not allocate (it runs in a fork of this
    /// process, see [`crate::counters::trace::trace_forked`]).
    pub fn from_trace(work: &mut dyn FnMut()) -> Result<BenchWork> {
        use crate::counters::trace;
        let r = trace::trace_forked(work, trace::TraceMode::Flops, false)?;
        let m = trace::to_measurement(&r, false);
        Ok(BenchWork {
            flops: m.flops,
            bytes: m.bytes,
            source: Source::Trace,
        })
    }

    /// W and Q of one call of `work` from `backend`: `trace` as [`from_trace`](Self::from_trace);
    /// `perf` and `simulated` through a region of a [`crate::region::Session`] on this thread
    /// (the levels the platform's events count; the simulated PMU traces the call once in a
    /// forked child, so the same rules as `from_trace` apply). `analytic` has no closure form:
    /// use [`from_counts`](Self::from_counts).
    pub fn from_backend(backend: crate::counters::BackendKind, work: &mut dyn FnMut()) -> Result<BenchWork> {
        use crate::counters::BackendKind;
        let source = match backend {
            BackendKind::Trace => return BenchWork::from_trace(work),
            BackendKind::Analytic | BackendKind::Auto => {
                return Err(Error::input(
                    format!("BenchWork::from_backend: {backend:?} counts no closure"),
                    "use BenchWork::from_counts for analytic counts, or pick perf, trace or simulated",
                ));
            }
            BackendKind::Perf => Source::Perf,
            BackendKind::Simulated => Source::Simulated,
        };
        let mut session = crate::region::Session::new(backend)?;
        let ((), m) = session.measure("bench", work)?;
        Ok(BenchWork {
            flops: m.flops,
            bytes: m.bytes,
            source,
        })
    }

    /// Flops per iteration, for `criterion::Throughput::Elements`.
    pub fn flop_count(&self) -> u64 {
        self.flops.total.round() as u64
    }
}

/// Caches W and Q per benchmark in a directory (one JSON file each), keyed by a fingerprint the
/// caller chooses (e.g. the problem size and the binary's build id), so a traced iteration is
/// paid once per change, not once per `cargo bench`.
#[derive(Debug, Clone)]
pub struct WorkCache {
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct CachedWork {
    schema: String,
    fingerprint: String,
    work: BenchWork,
}

const WORK_SCHEMA: &str = "roofline.benchwork/1";

impl WorkCache {
    pub fn new(dir: impl Into<PathBuf>) -> WorkCache {
        WorkCache { dir: dir.into() }
    }

    fn file(&self, bench: &str) -> PathBuf {
        let safe: String = bench
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
            .collect();
        self.dir.join(format!("{safe}.json"))
    }

    /// The cached work of `bench` if its fingerprint matches, else `measure()` (e.g. one traced
    /// iteration), stored for next time. A corrupt or stale cache file is replaced, not an error.
    pub fn get_or_measure(&self, bench: &str, fingerprint: &str, measure: impl FnOnce() -> Result<BenchWork>) -> Result<BenchWork> {
        let path = self.file(bench);
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(c) = serde_json::from_str::<CachedWork>(&text)
            && c.schema == WORK_SCHEMA
            && c.fingerprint == fingerprint
        {
            return Ok(c.work);
        }
        let work = measure()?;
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(format!("creating {}", self.dir.display()), e))?;
        let doc = CachedWork {
            schema: WORK_SCHEMA.into(),
            fingerprint: fingerprint.into(),
            work: work.clone(),
        };
        crate::util::write_atomic(&path, serde_json::to_string_pretty(&doc).expect("serializes").as_bytes())?;
        Ok(work)
    }
}

/// The roof a benchmark is measured against: the attainable performance is
/// min(peak, AI_level × bandwidth_level) over the levels with a bandwidth and an AI.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Roof {
    /// Compute roof for the benchmark's ISA and precision, GFLOP/s.
    pub peak_gflops: f64,
    /// Bandwidth roofs, GB/s, keyed by level (`l1`/`core`, `l2`, `l3`, `dram`).
    pub bandwidth_gbs: BTreeMap<String, f64>,
}

impl Roof {
    /// Attainable GFLOP/s of a point, and the level (or `compute`) that bounds it.
    pub fn attainable(&self, p: &Point) -> (f64, String) {
        let mut best = (self.peak_gflops, "compute".to_string());
        for (lvl, bw) in &self.bandwidth_gbs {
            let key = if lvl == level::L1 { level::CORE } else { lvl.as_str() };
            if let Some(ai) = p.ai.get(key) {
                let bound = ai * bw;
                if bound < best.0 {
                    best = (bound, lvl.clone());
                }
            }
        }
        best
    }
}

#[derive(Deserialize)]
struct CriterionSample {
    iters: Vec<f64>,
    times: Vec<f64>,
}

/// Seconds per iteration of each of criterion's samples of `bench_id` (`group/function`), from
/// `<criterion_dir>/<bench_id>/new/sample.json` (times in ns, summed over `iters` iterations).
pub fn criterion_samples(criterion_dir: &Path, bench_id: &str) -> Result<Vec<f64>> {
    let path = criterion_dir.join(bench_id).join("new").join("sample.json");
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::input(
            format!("{origin}: cannot read ({e})"),
            "run the benchmark first (`cargo bench`); ids are `group/function` as criterion prints them",
        )
    })?;
    let s: CriterionSample = serde_json::from_str(&text)
        .map_err(|e| Error::input(format!("{origin}: not a criterion sample file ({e})"), "re-run `cargo bench`"))?;
    if s.iters.len() != s.times.len() || s.iters.is_empty() {
        return Err(Error::input(
            format!("{origin}: iters and times differ in length or are empty"),
            "re-run `cargo bench`",
        ));
    }
    let samples: Vec<f64> = s.iters.iter().zip(&s.times).map(|(i, t)| t / i / 1e9).collect();
    if samples.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return Err(Error::input(format!("{origin}: impossible sample times"), "re-run `cargo bench`"));
    }
    Ok(samples)
}

/// A `roofline.report/1` from criterion's results: one point per `(benchmark id, work)`, with
/// every sample's time per iteration, GFLOP/s, GB/s, AI and (given a roof) the roof fraction.
pub fn report_from_criterion(
    criterion_dir: &Path,
    benches: &[(&str, BenchWork)],
    roof: Option<&Roof>,
    machine: serde_json::Value,
) -> Result<Report> {
    let mut report = Report::new(
        machine,
        Environment {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command_line: std::env::args().collect(),
            ..Environment::default()
        },
    );
    for (id, work) in benches {
        let samples = criterion_samples(criterion_dir, id)?;
        let prov = Provenance {
            flops: Some(work.source),
            bytes: work.bytes.keys().map(|k| (k.clone(), work.source)).collect(),
            seconds: Some(Source::Native),
            notes: vec!["time per iteration of each criterion sample".into()],
            untrusted: Vec::new(),
        };
        let mut p = Point::new(*id, prov, work.flops.clone(), work.bytes.clone(), 1, samples);
        if let (Some(roof), Some(g)) = (roof, p.gflops) {
            let (attainable, bound) = roof.attainable(&p);
            if attainable > 0.0 {
                p.roof_fraction = Some(g / attainable);
                p.extra.insert("roof_gflops".into(), serde_json::json!(attainable));
                p.extra.insert("roof_bound".into(), serde_json::json!(bound));
            }
        }
        report.points.push(p);
    }
    Ok(report)
}

/// One line per point for a bench's output: `id: 12.3 GFLOP/s, 81.0 % of roof (dram)`.
pub fn summary_line(p: &Point) -> String {
    let g = p.gflops.map(|g| format!("{g:.3} GFLOP/s")).unwrap_or_else(|| "no time".into());
    match (p.roof_fraction, p.extra.get("roof_bound").and_then(|b| b.as_str())) {
        (Some(f), Some(b)) => format!("{}: {g}, {:.1} % of roof ({b})", p.name, f * 100.0),
        _ => format!("{}: {g}", p.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::FlopClass;

    fn write_sample(dir: &Path, id: &str, iters: &[f64], times_ns: &[f64]) {
        let d = dir.join(id).join("new");
        std::fs::create_dir_all(&d).unwrap();
        let doc = serde_json::json!({"sampling_mode": "Linear", "iters": iters, "times": times_ns});
        std::fs::write(d.join("sample.json"), doc.to_string()).unwrap();
    }

    fn triad_work(n: u64) -> BenchWork {
        let mut c = Counts::default();
        c.add_flops(FlopClass::Packed256Double, 2 * n);
        c.core_load_bytes = 16 * n;
        c.core_store_bytes = 8 * n;
        c.dram_bytes = 32 * n;
        BenchWork::from_counts(&c)
    }

    #[test]
    fn one_traced_call_gives_the_closures_work_and_is_cached() {
        // A scalar loop of known work behind an optimisation barrier: n multiplies and n adds
        // in double precision, loads of x and y, stores of y.
        let n = 1000 + (std::process::id() as usize % 97);
        let x: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 1e-3).collect();
        let mut y: Vec<f64> = (0..n).map(|i| 2.0 - i as f64 * 1e-3).collect();
        let mut work = || {
            for i in 0..n {
                let xi = std::hint::black_box(x[i]);
                y[i] += std::hint::black_box(xi * 3.0);
            }
        };
        let w = match BenchWork::from_trace(&mut work) {
            Ok(w) => w,
            Err(e) if e.to_string().contains("ptrace") => {
                eprintln!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(w.source, Source::Trace);
        assert_eq!(w.flops.by_class.get("scalar_double").copied(), Some(2.0 * n as f64), "{w:?}");
        assert_eq!(w.flop_count(), 2 * n as u64);
        // x and y read, y written; black_box adds stack traffic, which is kept apart.
        assert!(w.bytes[level::CORE] >= 24.0 * n as f64, "{w:?}");
        // Cached: the second call with the same fingerprint does not trace again.
        let dir = tempfile::tempdir().unwrap();
        let cache = WorkCache::new(dir.path());
        let first = cache.get_or_measure("g/axpy", "n=1", || Ok(w.clone())).unwrap();
        let again = cache
            .get_or_measure("g/axpy", "n=1", || panic!("must come from the cache"))
            .unwrap();
        assert_eq!(first, again);
    }

    #[test]
    fn report_from_samples_with_roof() {
        let dir = tempfile::tempdir().unwrap();
        // 4 samples: 10, 20, 30, 40 iterations taking 1 ms per iteration, one at 2 ms.
        write_sample(dir.path(), "g/triad", &[10.0, 20.0, 30.0, 40.0], &[1e7, 2e7, 3e7, 8e7]);
        let work = triad_work(1 << 20);
        let roof = Roof {
            peak_gflops: 100.0,
            bandwidth_gbs: BTreeMap::from([("dram".to_string(), 40.0), ("l1".to_string(), 1000.0)]),
        };
        let r = report_from_criterion(dir.path(), &[("g/triad", work.clone())], Some(&roof), serde_json::json!({})).unwrap();
        let p = &r.points[0];
        assert_eq!(p.seconds_samples, vec![1e-3, 1e-3, 1e-3, 2e-3]);
        assert_eq!(p.seconds, 1e-3);
        let gflops = 2.0 * (1 << 20) as f64 / 1e-3 / 1e9;
        assert!((p.gflops.unwrap() - gflops).abs() < 1e-9);
        // AI dram = 2n / 32n = 1/16 → dram roof 2.5 GFLOP/s (below l1's 1000 × 1/12 and the peak)
        assert!((p.roof_fraction.unwrap() - gflops / 2.5).abs() < 1e-9);
        assert_eq!(p.extra["roof_bound"], "dram");
        assert!(summary_line(p).contains("% of roof (dram)"));
        assert_eq!(p.provenance.flops, Some(Source::Analytic));
        // the report is a valid roofline.report/1 document
        Report::from_json(&r.to_json(), "r.json").unwrap();
    }

    #[test]
    fn bad_criterion_files_are_input_errors() {
        let dir = tempfile::tempdir().unwrap();
        let e = criterion_samples(dir.path(), "g/none").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        write_sample(dir.path(), "g/short", &[1.0, 2.0], &[1.0]);
        assert!(criterion_samples(dir.path(), "g/short").unwrap_err().to_string().contains("differ"));
        write_sample(dir.path(), "g/zero", &[1.0], &[0.0]);
        assert!(criterion_samples(dir.path(), "g/zero").is_err());
    }

    #[test]
    fn work_cache_measures_once_per_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let cache = WorkCache::new(dir.path().join("work"));
        let mut calls = 0;
        for fp in ["n=1024", "n=1024", "n=2048", "n=2048"] {
            let w = cache
                .get_or_measure("g/triad", fp, || {
                    calls += 1;
                    Ok(triad_work(if fp == "n=1024" { 1024 } else { 2048 }))
                })
                .unwrap();
            assert_eq!(w.flop_count(), if fp == "n=1024" { 2048 } else { 4096 });
        }
        assert_eq!(calls, 2);
        // a corrupt cache file is replaced
        std::fs::write(cache.file("g/triad"), "{").unwrap();
        cache.get_or_measure("g/triad", "n=2048", || Ok(triad_work(2048))).unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(cache.file("g/triad")).unwrap()).is_ok());
    }
}
