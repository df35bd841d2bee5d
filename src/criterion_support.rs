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
use crate::schema::report::level;
use crate::schema::{Bytes, Environment, Flops, Point, Provenance, Report, Source};

/// W and Q of one benchmark iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchWork {
    /// Floating-point work of one iteration, by class.
    pub flops: Flops,
    /// Bytes of one iteration, per level.
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
    /// A cache in directory `dir` (created when first written).
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
///
/// [`Roof::from_machine`] gives this machine's roofs with no configuration: the ceilings that
/// `roofline ceilings` caches, measured (quickly, once) when no cache fits this machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Roof {
    /// Compute roof for the benchmark's ISA and precision, GFLOP/s (from the machine: its
    /// double-precision peak).
    pub peak_gflops: f64,
    /// Compute roofs per precision (`double`, `single`), GFLOP/s: a point is read against
    /// its own precision's roof where one is given, else against `peak_gflops`.
    pub peak_gflops_by_precision: BTreeMap<String, f64>,
    /// Bandwidth roofs, GB/s, keyed by level (`l1`/`core`, `l2`, `l3`, `dram`).
    pub bandwidth_gbs: BTreeMap<String, f64>,
    /// The measured roofs this roof came from, written into the report so that `roofline
    /// plot` draws the same roofs (None for a roof given by hand).
    pub ceilings: Option<crate::schema::Roofs>,
}

/// The environment variable that replaces the machine's compute roof: a peak in GFLOP/s.
pub const PEAK_ENV: &str = "ROOFLINE_PEAK_GFLOPS";
/// The environment variable that replaces the machine's bandwidth roofs: `level=GB/s` pairs
/// separated by commas (`l1=300,dram=20`).
pub const BANDWIDTH_ENV: &str = "ROOFLINE_ROOF_GBS";

impl Roof {
    /// Attainable GFLOP/s of a point, and the level (or `compute`) that bounds it.
    pub fn attainable(&self, p: &Point) -> (f64, String) {
        let peak = self
            .peak_gflops_by_precision
            .get(crate::model::point_precision(p))
            .copied()
            .unwrap_or(self.peak_gflops);
        let mut best = (peak, "compute".to_string());
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

    /// This machine's roofs for a single-threaded benchmark, with no configuration:
    /// [`PEAK_ENV`] (and [`BANDWIDTH_ENV`]) when set, else the one-thread ceilings cached by
    /// `roofline ceilings` (`~/.cache/roofline/ceilings.json`), measured in quick mode (about
    /// ten seconds, said on stderr) when no cache fits this machine, and cached for next time.
    pub fn from_machine() -> Result<Roof> {
        if let Some(r) = Roof::from_env()? {
            return Ok(r);
        }
        let opts = crate::ceilings::Options {
            quick: true,
            threads: vec![1],
            sweep: false,
            progress: false,
        };
        let host = crate::schema::ceilings::Host::detect();
        let path = crate::ceilings::cache_path();
        let cached = match &path {
            Some(p) => matches!(crate::ceilings::read_cache(p, &host, &opts).0, crate::ceilings::CacheState::Usable),
            None => false,
        };
        if !cached {
            eprintln!(
                "roofline: no ceilings of this machine cached{}: measuring them once (quick, about 10 s; `roofline ceilings` does the same)",
                path.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default()
            );
        }
        let c = crate::ceilings::load_or_measure_with(&opts, false)?;
        Ok(Roof::from_ceilings(&c, 1))
    }

    /// The roofs of measured ceilings at `threads`: per precision the best compute figure of
    /// any ISA (the double one as `peak_gflops`), the core-side L1 bandwidth for core bytes,
    /// and for bytes counted at L2, L3 or DRAM the traffic each level serves.
    pub fn from_ceilings(c: &crate::schema::ceilings::Ceilings, threads: u32) -> Roof {
        let roofs = c.roofs(threads);
        let mut by_precision: BTreeMap<String, f64> = BTreeMap::new();
        for (key, g) in &roofs.compute_gflops {
            let precision = key.split('.').next().unwrap_or(key).to_string();
            let e = by_precision.entry(precision).or_insert(0.0);
            *e = e.max(*g);
        }
        let peak = by_precision
            .get("double")
            .copied()
            .unwrap_or_else(|| by_precision.values().copied().fold(0.0, f64::max));
        let mut bandwidth_gbs = BTreeMap::new();
        for (lvl, gbs) in &roofs.bandwidth_gbs {
            let traffic = roofs.bandwidth_traffic_gbs.get(lvl).copied().unwrap_or(*gbs);
            bandwidth_gbs.insert(lvl.clone(), if lvl == level::L1 { *gbs } else { traffic });
        }
        Roof {
            peak_gflops: peak,
            peak_gflops_by_precision: by_precision,
            bandwidth_gbs,
            ceilings: Some(roofs),
        }
    }

    /// The roof given by [`PEAK_ENV`] and [`BANDWIDTH_ENV`]; None when the peak is not set.
    /// A value that does not parse is an input error naming the variable.
    pub fn from_env() -> Result<Option<Roof>> {
        let text = |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        Roof::from_env_values(text(PEAK_ENV).as_deref(), text(BANDWIDTH_ENV).as_deref())
    }

    /// [`from_env`](Self::from_env) on the variables' values.
    fn from_env_values(peak: Option<&str>, bandwidth: Option<&str>) -> Result<Option<Roof>> {
        let Some(peak_text) = peak else {
            return Ok(None);
        };
        let peak_gflops: f64 = peak_text
            .trim()
            .parse()
            .ok()
            .filter(|g: &f64| g.is_finite() && *g > 0.0)
            .ok_or_else(|| {
                Error::input(
                    format!("{PEAK_ENV}={peak_text}: not a positive number"),
                    format!("e.g. {PEAK_ENV}=150 (GFLOP/s), or unset it to use this machine's measured roofs"),
                )
            })?;
        let mut bandwidth_gbs = BTreeMap::new();
        let spec = bandwidth.unwrap_or_default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let parsed = part
                .split_once('=')
                .and_then(|(lvl, gbs)| Some((lvl.trim().to_ascii_lowercase(), gbs.trim().parse::<f64>().ok()?)))
                .filter(|(lvl, gbs)| {
                    [level::L1, level::L2, level::L3, level::DRAM].contains(&lvl.as_str()) && gbs.is_finite() && *gbs > 0.0
                });
            let Some((lvl, gbs)) = parsed else {
                return Err(Error::input(
                    format!("{BANDWIDTH_ENV}={spec}: `{part}` is not level=GB/s"),
                    format!("levels l1, l2, l3, dram, e.g. {BANDWIDTH_ENV}=l1=300,dram=20"),
                ));
            };
            bandwidth_gbs.insert(lvl, gbs);
        }
        Ok(Some(Roof {
            peak_gflops,
            bandwidth_gbs,
            ..Roof::default()
        }))
    }
}

/// This machine's model (`roofline.machine/1`: CPU, caches, measured clocks, theoretical
/// peaks) for [`report_from_criterion`], so the report names the machine it was measured on.
pub fn this_machine() -> Result<serde_json::Value> {
    let m = crate::machine::detect(&crate::machine::DetectOptions::default())?;
    serde_json::to_value(&m).map_err(|e| Error::input(format!("machine model does not serialize: {e}"), "report this as a bug"))
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
    if let Some(r) = roof {
        report.ceilings = r.ceilings.clone();
    }
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
                p.extra.roof_gflops = Some(attainable);
                p.extra.roof_bound = Some(bound);
            }
        }
        report.points.push(p);
    }
    Ok(report)
}

/// One line per point for a bench's output: `id: 12.3 GFLOP/s, 81.0 % of roof (dram)`.
pub fn summary_line(p: &Point) -> String {
    let g = p.gflops.map(|g| format!("{g:.3} GFLOP/s")).unwrap_or_else(|| "no time".into());
    match (p.roof_fraction, p.extra.roof_bound.as_deref()) {
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
            ..Roof::default()
        };
        let r = report_from_criterion(dir.path(), &[("g/triad", work.clone())], Some(&roof), serde_json::json!({})).unwrap();
        let p = &r.points[0];
        assert_eq!(p.seconds_samples, vec![1e-3, 1e-3, 1e-3, 2e-3]);
        assert_eq!(p.seconds, 1e-3);
        let gflops = 2.0 * (1 << 20) as f64 / 1e-3 / 1e9;
        assert!((p.gflops.unwrap() - gflops).abs() < 1e-9);
        // AI dram = 2n / 32n = 1/16 → dram roof 2.5 GFLOP/s (below l1's 1000 × 1/12 and the peak)
        assert!((p.roof_fraction.unwrap() - gflops / 2.5).abs() < 1e-9);
        assert_eq!(p.extra.roof_bound.as_deref(), Some("dram"));
        assert!(summary_line(p).contains("% of roof (dram)"));
        assert_eq!(p.provenance.flops, Some(Source::Analytic));
        // the report is a valid roofline.report/1 document
        Report::from_json(&r.to_json(), "r.json").unwrap();
    }

    #[test]
    fn env_roof_replaces_the_machines_and_bad_values_are_input_errors() {
        assert_eq!(Roof::from_env_values(None, Some("l1=300")).unwrap(), None);
        let peak = 10.0 + (std::process::id() % 500) as f64;
        let r = Roof::from_env_values(Some(&format!(" {peak} ")), Some("l1=300, DRAM=20.5"))
            .unwrap()
            .unwrap();
        assert_eq!(r.peak_gflops, peak);
        assert_eq!(
            r.bandwidth_gbs,
            BTreeMap::from([("dram".to_string(), 20.5), ("l1".to_string(), 300.0)])
        );
        assert_eq!(r.ceilings, None);
        for (peak, bw, names) in [
            ("fast", "", PEAK_ENV),
            ("-3", "", PEAK_ENV),
            ("100", "l1:300", BANDWIDTH_ENV),
            ("100", "l9=300", BANDWIDTH_ENV),
            ("100", "dram=NaN", BANDWIDTH_ENV),
        ] {
            let e = Roof::from_env_values(Some(peak), Some(bw)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            assert!(e.to_string().contains(names), "{e}");
        }
    }

    fn compute(precision: &str, isa: &str, mode: &str, threads: u32, gflops: f64) -> crate::schema::ceilings::ComputeCeiling {
        crate::schema::ceilings::ComputeCeiling {
            precision: precision.into(),
            isa: isa.into(),
            fma: mode.contains("fma"),
            mode: mode.into(),
            threads,
            gflops,
            gflops_best: gflops,
            spread: 0.01,
            samples: 5,
            ghz: None,
            flop_per_cycle: None,
            theoretical_gflops: None,
            percent_of_theoretical: None,
            cpu: None,
            set_aside: Vec::new(),
            unequal_threads: None,
        }
    }

    fn bandwidth(level: &str, kernel: &str, threads: u32, gbs: f64, with_wa: f64) -> crate::schema::ceilings::BandwidthCeiling {
        crate::schema::ceilings::BandwidthCeiling {
            level: level.into(),
            kernel: kernel.into(),
            isa: "avx2".into(),
            threads,
            working_set_bytes: 1 << 20,
            working_set_per_thread_bytes: 1 << 20,
            gbs,
            bytes_convention: "core".into(),
            gbs_write_allocate: with_wa,
            gbs_best: gbs,
            spread: 0.01,
            samples: 5,
        }
    }

    #[test]
    fn machine_roof_takes_each_precisions_best_and_level_traffic_below_l1() {
        let x = 1.0 + (std::process::id() % 89) as f64 / 100.0; // a random scale
        let c = crate::schema::ceilings::Ceilings {
            schema: crate::schema::ceilings::CEILINGS_SCHEMA.into(),
            tool_version: "t".into(),
            measured_at_unix: 0,
            quick: true,
            threads: vec![1, 2],
            machine: crate::schema::ceilings::Host::detect(),
            compute: vec![
                compute("double", "avx2", "fma", 1, 50.0 * x),
                compute("double", "sse", "fma", 1, 25.0 * x),
                compute("double", "avx2", "fma", 2, 100.0 * x),
                compute("single", "avx2", "fma", 1, 101.0 * x),
                compute("single", "avx2", "mul+add", 1, 51.0 * x),
            ],
            bandwidth: vec![
                bandwidth("L1", "load", 1, 200.0 * x, 200.0 * x),
                bandwidth("L1", "store_nt", 1, 900.0 * x, 900.0 * x),
                bandwidth("DRAM", "triad", 1, 15.0 * x, 20.0 * x),
                bandwidth("DRAM", "load", 1, 18.0 * x, 18.0 * x),
                bandwidth("DRAM", "load", 2, 30.0 * x, 30.0 * x),
            ],
            sweep: None,
            energy: Vec::new(),
            notes: vec![],
            warnings: vec![],
        };
        let r = Roof::from_ceilings(&c, 1);
        assert_eq!(r.peak_gflops, 50.0 * x);
        assert_eq!(r.peak_gflops_by_precision["single"], 101.0 * x);
        // L1: core-side, non-temporal stores aside; DRAM: the traffic the level serves.
        assert_eq!(r.bandwidth_gbs["l1"], 200.0 * x);
        assert_eq!(r.bandwidth_gbs["dram"], 20.0 * x);
        assert!(r.ceilings.as_ref().is_some_and(|c| c.threads == Some(1)));
        // A single-precision point is read against the single-precision peak.
        let mut single = Counts::default();
        single.add_flops(FlopClass::Packed256Single, 1 << 30);
        single.core_load_bytes = 64;
        let w = BenchWork::from_counts(&single);
        let p = Point::new("s", Provenance::default(), w.flops, w.bytes, 1, vec![1.0]);
        assert_eq!(r.attainable(&p), (101.0 * x, "compute".to_string()));
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
