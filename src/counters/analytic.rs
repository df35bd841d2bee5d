//! The analytic backend: W and Q from the kernel suite's own formulas, T from a native run.
//!
//! [`run`] is the one entry point `roofline run`, `roofline sweep` and the profile job
//! use: one instance per thread (each its own data), a pinned team timed by
//! `roofline_kernels::runner::time_team`, and a [`Measurement`] whose provenance says
//! flops = analytic, bytes (core, dram) = analytic, seconds = native.

use std::collections::BTreeMap;

use roofline_kernels::runner::{Repeat, TeamHooks};
use roofline_kernels::{Counts, Kernel, Variant};

use crate::counters::Measurement;
use crate::error::{Error, Result};
use crate::machine::Cache;
use crate::schema::report::level;
use crate::schema::{Flops, Provenance, Source};

/// What to run: a kernel at a size and variant on a team of threads.
#[derive(Clone, Copy)]
pub struct KernelRun<'a> {
    pub kernel: &'a dyn Kernel,
    /// Size in the kernel's unit (`Kernel::size_unit`).
    pub n: usize,
    pub variant: Variant,
    pub threads: usize,
    pub repeat: Repeat,
    /// Check one instance against the scalar f64 reference before timing.
    pub verify: bool,
    /// One problem of size `n` shared by the team (`Kernel::split`: each thread its part),
    /// rather than one independent instance per thread.
    pub split: bool,
}

/// Run `kernel` at size `n` and `variant` on `threads` pinned threads and measure it:
/// W and Q analytic (summed over the threads' instances), T native (every repetition). The
/// unit tests' shorthand for [`run`].
#[cfg(test)]
fn run_kernel(kernel: &dyn Kernel, n: usize, variant: Variant, threads: usize, repeat: Repeat) -> Result<Measurement> {
    run(
        &KernelRun {
            kernel,
            n,
            variant,
            threads,
            repeat,
            verify: false,
            split: false,
        },
        &|_, _| {},
    )
}

/// Run a kernel as `spec` says, with a per-sample callback (`(count, seconds)`, for progress).
pub fn run(spec: &KernelRun, on_sample: &(dyn Fn(usize, f64) + Sync)) -> Result<Measurement> {
    run_hooked(spec, on_sample, None)
}

/// [`run`] with hooks around each team thread's timed calls (the perf backend's counters).
pub fn run_hooked(spec: &KernelRun, on_sample: &(dyn Fn(usize, f64) + Sync), hooks: Option<&dyn TeamHooks>) -> Result<Measurement> {
    let k = spec.kernel;
    if spec.threads == 0 {
        return Err(Error::input("0 threads", "use --threads 1 or more"));
    }
    if !k.variants().contains(&spec.variant) {
        return Err(Error::input(
            format!("{} has no {} variant", k.name(), spec.variant),
            "see `roofline kernels` for its variants",
        ));
    }
    if !roofline_kernels::check::runnable(spec.variant) {
        return Err(Error::input(
            format!("this CPU cannot run the {} variant of {}", spec.variant, k.name()),
            "pick a variant `roofline kernels` lists as runnable",
        ));
    }
    let copies = if spec.split { 1 } else { spec.threads as u64 };
    let total = k.working_set_bytes(spec.n).saturating_mul(copies);
    roofline_kernels::check::require_memory(total).map_err(|e| {
        Error::input(
            format!("{} at size {}: {e}", k.name(), spec.n),
            "use a smaller --size or --bytes, or fewer threads",
        )
    })?;
    let mut instances = Vec::with_capacity(spec.threads);
    if spec.split {
        instances = k
            .split(spec.n, spec.variant, 0x5EED, spec.threads)
            .ok_or_else(|| {
                Error::input(
                    format!("{} has no shared mode: its threads run independent instances", k.name()),
                    "drop --split (only the low-precision GEMMs split one problem over a team)",
                )
            })?
            .map_err(|e| {
                Error::input(
                    format!("{} at size {} split over {} threads: {e}", k.name(), spec.n, spec.threads),
                    "use a larger --size or fewer threads",
                )
            })?;
    } else {
        for t in 0..spec.threads {
            let inst = k
                .instance(spec.n, spec.variant, 0x5EED + t as u64)
                .map_err(|e| Error::input(format!("{} at size {}: {e}", k.name(), spec.n), "use a valid --size or --bytes"))?;
            instances.push(inst);
        }
    }
    if spec.verify
        && let Some(first) = instances.first_mut()
        && let Err(e) = first.verify()
    {
        return Err(Error::CheckFailed(format!(
            "{} {} n={}: wrong result ({e}); this is a bug in the kernel suite",
            k.name(),
            spec.variant,
            spec.n
        )));
    }
    let counts: Counts = instances.iter().fold(Counts::default(), |mut acc, i| {
        acc.add(&i.counts());
        acc
    });
    let timing = roofline_kernels::runner::time_team_per_thread(instances, spec.repeat, on_sample, hooks);
    let mut m = measurement(&counts, k.effective_flops(spec.n, spec.variant).map(|e| e * copies), spec.threads);
    m.seconds_samples = timing.samples;
    if timing.threads.len() > 1 {
        let own: Vec<serde_json::Value> = timing
            .threads
            .iter()
            .map(|t| serde_json::json!({"cpu": t.cpu, "seconds_per_call": t.seconds_per_call}))
            .collect();
        m.extra.insert("team_threads", own);
        if let (Some(w), Some(p)) = (team_wait(&timing.threads), m.provenance.as_mut()) {
            p.notes.push(w.note());
        }
    }
    let extra = &mut m.extra;
    extra.kernel = Some(k.name().to_string());
    extra.insert("variant", spec.variant.name());
    extra.insert("size", spec.n);
    extra.insert("size_unit", k.size_unit());
    extra.insert("working_set_bytes", k.working_set_bytes(spec.n));
    if spec.split {
        extra.insert("split", true);
    }
    extra.insert("core_load_bytes", counts.core_load_bytes);
    extra.insert("core_store_bytes", counts.core_store_bytes);
    Ok(m)
}

/// A team held back by one of its threads: each repetition ends when the slowest ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TeamWait {
    /// The slowest thread's CPU.
    pub cpu: usize,
    /// Its time per call over the median thread's.
    pub slowest_over_median: f64,
}

/// Above this ratio of the slowest thread's time to the median thread's, a team point says
/// that it waited for one CPU.
pub const TEAM_WAIT_NOTED: f64 = 1.2;

/// The wait of a team whose slowest thread took more than [`TEAM_WAIT_NOTED`] times the (lower)
/// median thread's time per call (threads' own times, [`roofline_kernels::runner::ThreadTime`]).
pub fn team_wait(threads: &[roofline_kernels::runner::ThreadTime]) -> Option<TeamWait> {
    let mut times: Vec<f64> = threads
        .iter()
        .map(|t| t.seconds_per_call)
        .filter(|t| t.is_finite() && *t > 0.0)
        .collect();
    if times.len() < 2 || times.len() != threads.len() {
        return None;
    }
    times.sort_by(f64::total_cmp);
    // The lower median: of two threads, the faster one.
    let median = times[(times.len() - 1) / 2];
    let slowest = threads.iter().max_by(|a, b| a.seconds_per_call.total_cmp(&b.seconds_per_call))?;
    let ratio = slowest.seconds_per_call / median;
    (ratio > TEAM_WAIT_NOTED).then_some(TeamWait {
        cpu: slowest.cpu,
        slowest_over_median: ratio,
    })
}

impl TeamWait {
    /// The point's note.
    pub fn note(&self) -> String {
        format!(
            "the team waited for its slowest thread: CPU {} took {:.2}x the median thread's time per call (a neighbour on its core, a lower clock, or a smaller share of a shared cache or of memory); at the median thread's pace the run would take {:.0} % of its time: balance the work dynamically, or leave that CPU out (extra.team_threads)",
            self.cpu,
            self.slowest_over_median,
            100.0 / self.slowest_over_median
        )
    }
}

/// W and Q of `counts` as a measurement (no samples yet), analytic provenance.
pub fn measurement(counts: &Counts, effective: Option<u64>, threads: usize) -> Measurement {
    let by_class: BTreeMap<String, f64> = counts.flops.iter().map(|(c, f)| (c.key().to_string(), *f as f64)).collect();
    let mut flops = Flops::of_classes(by_class);
    flops.effective = Some(effective.map(|e| e as f64).unwrap_or(flops.total));
    // The suite's formulas tell FMAs apart (`Counts::fma_flops`); integer-only work (VNNI,
    // AMX int8) has no flops for an FMA share to be a part of.
    if counts.flops_total() > 0 || counts.int_ops_total() == 0 {
        flops.fma = Some(counts.fma_flops as f64);
    }
    let mut bytes = BTreeMap::new();
    bytes.insert(level::CORE.to_string(), counts.core_bytes() as f64);
    bytes.insert(level::DRAM.to_string(), counts.dram_bytes as f64);
    let prov = Provenance {
        flops: Some(Source::Analytic),
        bytes: [
            (level::CORE.to_string(), Source::Analytic),
            (level::DRAM.to_string(), Source::Analytic),
        ]
        .into(),
        seconds: Some(Source::Native),
        notes: vec![
            "dram = compulsory traffic of a cold working set (write-allocate included); caches serve it when the working set fits".into(),
        ],
        untrusted: Vec::new(),
    };
    Measurement {
        flops,
        bytes,
        provenance: Some(prov),
        seconds_samples: Vec::new(),
        threads: threads as u32,
        extra: Default::default(),
        regions: Vec::new(),
    }
}

/// One level's analytic traffic under the cache model: the bytes per call (all threads), or
/// why none is claimed.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelTraffic {
    /// `l2`, `l3` or `dram`: the level that serves the bytes.
    pub level: &'static str,
    pub bytes: Option<u64>,
    /// One line: which cache holds the working set, or why the level is not modelled.
    pub why: String,
}

/// Capacity of `cache` one thread of a team of `threads` can count on: its instance divided
/// by the team's threads that share it (the runner pins threads to CPUs in order).
fn share(cache: &Cache, threads: usize) -> u64 {
    cache.size_bytes / (threads.max(1) as u64).min(cache.shared_by_threads.max(1) as u64)
}

/// The analytic L2/L3/DRAM traffic of repeated calls of `kernel` at size `n` on `threads`
/// threads (one instance each), on a machine with `caches`.
///
/// The traffic a level serves is what the cache in front of it (closer to the core) misses:
/// - the working set fits in half the closer cache's per-thread share: 0 (after the first call
///   every access hits closer);
/// - it exceeds twice that share and the kernel's reuse footprint fits in half of it: the
///   compulsory traffic (`Counts::dram_bytes`: reads, write-allocate and write-back), since
///   with LRU-like replacement a cyclic sweep over more than the capacity hits nothing;
/// - otherwise (within 2× of the capacity, where adaptive replacement keeps part of the set,
///   or reuse the model does not describe): no figure.
///
/// Inclusive-hierarchy view: on victim (exclusive) L3s the L3 figure is the traffic the L2
/// misses, which is what the cache-aware model's L3 roof is measured with.
pub fn cache_model(kernel: &dyn Kernel, n: usize, variant: Variant, threads: usize, caches: &[Cache]) -> Vec<LevelTraffic> {
    let data: Vec<&Cache> = {
        let mut v: Vec<&Cache> = caches.iter().filter(|c| c.kind != "instruction" && c.size_bytes > 0).collect();
        v.sort_by_key(|c| c.level);
        v.dedup_by_key(|c| c.level);
        v
    };
    let ws = kernel.working_set_bytes(n);
    let compulsory = kernel.counts(n, variant).dram_bytes.saturating_mul(threads as u64);
    let reuse = kernel.reuse_footprint_bytes(n);
    let mut out = Vec::new();
    for (i, closer) in data.iter().enumerate() {
        let level = match data.get(i + 1) {
            Some(c) if c.level == 2 => level::L2,
            Some(c) if c.level == 3 => level::L3,
            Some(_) => continue,
            None => level::DRAM,
        };
        let cap = share(closer, threads);
        let fmt = |b: u64| crate::schema::units::fmt_bytes(b as f64);
        let (bytes, why) = if ws.saturating_mul(2) <= cap {
            (
                Some(0),
                format!(
                    "{level} = 0: the working set ({}) fits in L{} ({} per thread)",
                    fmt(ws),
                    closer.level,
                    fmt(cap)
                ),
            )
        } else if ws < cap.saturating_mul(2) {
            (
                None,
                format!(
                    "{level}: not modelled (working set {} within 2x of L{}'s {} per thread: partly cached)",
                    fmt(ws),
                    closer.level,
                    fmt(cap)
                ),
            )
        } else {
            match reuse {
                Some(r) if r.saturating_mul(2) <= cap => (
                    Some(compulsory),
                    format!(
                        "{level} = compulsory traffic (working set {} > 2x L{}'s {} per thread; write-allocate included)",
                        fmt(ws),
                        closer.level,
                        fmt(cap)
                    ),
                ),
                Some(r) => (
                    None,
                    format!(
                        "{level}: not modelled (the kernel's reuse footprint {} exceeds half of L{})",
                        fmt(r),
                        closer.level
                    ),
                ),
                None => (
                    None,
                    format!("{level}: not modelled ({}'s reuse is blocked or irregular)", kernel.name()),
                ),
            }
        };
        out.push(LevelTraffic { level, bytes, why });
    }
    out
}

/// Fill `m`'s L2/L3/DRAM bytes from [`cache_model`] where no measured figure (trace, perf)
/// is there already; a level the model cannot describe loses its analytic figure (the cold
/// compulsory DRAM traffic would be wrong for a partly cached set) and says why in the notes.
pub fn apply_cache_model(m: &mut Measurement, kernel: &dyn Kernel, n: usize, variant: Variant, threads: usize, caches: &[Cache]) {
    let levels = cache_model(kernel, n, variant, threads, caches);
    if levels.is_empty() {
        return;
    }
    let Some(prov) = m.provenance.as_mut() else { return };
    prov.notes
        .retain(|n| !n.starts_with("dram = compulsory traffic of a cold working set"));
    for t in levels {
        let measured = prov.bytes.get(t.level).is_some_and(|s| *s != Source::Analytic);
        if measured {
            continue;
        }
        match t.bytes {
            Some(b) => {
                m.bytes.insert(t.level.to_string(), b as f64);
                prov.bytes.insert(t.level.to_string(), Source::Analytic);
            }
            None => {
                m.bytes.remove(t.level);
                prov.bytes.remove(t.level);
            }
        }
        prov.notes.push(t.why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A team whose slowest thread took more than 1.2x the (lower) median thread's time names that
    /// thread's CPU and the ratio; a balanced team, one thread, or a thread without a time
    /// gives no note.
    #[test]
    fn a_team_held_back_by_one_cpu_says_which() {
        use roofline_kernels::runner::ThreadTime;
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        for _ in 0..500 {
            let n = 2 + rng.below(31);
            let base = 1e-4 * (1.0 + rng.unit());
            // Most threads within 5 % of the base; one (maybe) slowed by 1-2.5x.
            let mut threads: Vec<ThreadTime> = (0..n)
                .map(|i| ThreadTime {
                    thread: i,
                    cpu: 3 * i + 1,
                    seconds_per_call: base * (1.0 + 0.05 * rng.unit()),
                })
                .collect();
            let slow_at = rng.below(n);
            let factor = 1.0 + 1.5 * rng.unit();
            threads[slow_at].seconds_per_call = base * 1.05 * factor;
            let mut sorted: Vec<f64> = threads.iter().map(|t| t.seconds_per_call).collect();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[(n - 1) / 2];
            let ratio = threads[slow_at].seconds_per_call / median;
            match team_wait(&threads) {
                Some(w) => {
                    assert!(ratio > TEAM_WAIT_NOTED, "{ratio}");
                    assert_eq!(w.cpu, 3 * slow_at + 1);
                    assert!((w.slowest_over_median - ratio).abs() < 1e-12 * ratio);
                    let note = w.note();
                    assert!(note.contains(&format!("CPU {} took {:.2}x", w.cpu, ratio)), "{note}");
                }
                None => assert!(ratio <= TEAM_WAIT_NOTED, "{ratio} from {threads:?}"),
            }
            assert_eq!(team_wait(&threads[..1]), None, "one thread waits for no one");
            let mut missing = threads.clone();
            missing[0].seconds_per_call = 0.0;
            assert_eq!(team_wait(&missing), None, "a thread without a time: no claim");
        }
    }
    use std::time::Duration;

    fn quick() -> Repeat {
        Repeat {
            min_total: Duration::from_millis(1),
            min_samples: 3,
            max_samples: 5,
            warmup: 1,
        }
    }

    #[test]
    fn measurement_sums_instances_and_says_where_numbers_came_from() {
        let k = roofline_kernels::api::find("stencil2d").unwrap();
        let threads = 2.min(crate::util::available_cpus()).max(1);
        let m = run(
            &KernelRun {
                kernel: k.as_ref(),
                n: 40,
                variant: Variant::Scalar,
                threads,
                repeat: quick(),
                verify: true,
                split: false,
            },
            &|_, _| {},
        )
        .unwrap();
        let one = k.counts(40, Variant::Scalar);
        assert_eq!(m.flops.total, (one.flops_total() * threads as u64) as f64);
        assert_eq!(m.bytes["core"], (one.core_bytes() * threads as u64) as f64);
        assert_eq!(m.bytes["dram"], (one.dram_bytes * threads as u64) as f64);
        assert!((3..=5).contains(&m.seconds_samples.len()));
        assert!(m.seconds_samples.iter().all(|s| *s > 0.0));
        let p = m.provenance.clone().unwrap();
        assert_eq!(p.flops, Some(Source::Analytic));
        assert_eq!(p.seconds, Some(Source::Native));
        assert_eq!(p.bytes["core"], Source::Analytic);
        let point = m.into_point("stencil2d");
        assert_eq!(point.threads, threads as u32);
        assert!(point.gflops.unwrap() > 0.0);
    }

    #[test]
    fn refusals_are_input_errors() {
        let k = roofline_kernels::api::find("spmv").unwrap();
        let e = run_kernel(k.as_ref(), 0, Variant::Scalar, 1, quick()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = run_kernel(k.as_ref(), usize::MAX / 64, Variant::Scalar, 1, quick()).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(run_kernel(k.as_ref(), 10, Variant::Scalar, 0, quick()).is_err());
    }

    fn cache(level: u32, size: u64, shared_by: u32) -> Cache {
        Cache {
            level,
            kind: if level == 1 { "data".into() } else { "unified".into() },
            size_bytes: size,
            line_bytes: 64,
            ways: 8,
            sets: (size / 64 / 8) as u32,
            shared_by_threads: shared_by,
            shared_by_source: "test".into(),
            instances: None,
        }
    }

    /// L1 32 KiB and L2 1 MiB private, L3 32 MiB shared by 8, plus an L1i that must be ignored.
    fn hierarchy() -> Vec<Cache> {
        let mut i = cache(1, 32 << 10, 1);
        i.kind = "instruction".into();
        vec![cache(3, 32 << 20, 8), cache(1, 32 << 10, 1), i, cache(2, 1 << 20, 1)]
    }

    fn seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    fn by_level(v: &[LevelTraffic]) -> BTreeMap<&'static str, Option<u64>> {
        v.iter().map(|t| (t.level, t.bytes)).collect()
    }

    #[test]
    fn cache_model_places_streams_by_working_set() {
        let k = roofline_kernels::api::find("triad").unwrap();
        let caches = hierarchy();
        let mut rng = roofline_kernels::rng::Rng::new(seed());
        for _ in 0..20 {
            // (working-set range, expected l2, l3, dram: true = compulsory, false = 0)
            let regimes: [(u64, u64, [bool; 3]); 3] = [
                (1 << 10, 16 << 10, [false, false, false]),
                (64 << 10, 512 << 10, [true, false, false]),
                (128 << 20, 512 << 20, [true, true, true]),
            ];
            for (lo, hi, expect) in regimes {
                let bytes = lo + rng.next_u64() % (hi - lo);
                let n = k.size_for_bytes(bytes);
                let got = by_level(&cache_model(k.as_ref(), n, Variant::Scalar, 1, &caches));
                let comp = k.counts(n, Variant::Scalar).dram_bytes;
                assert!(comp > 0);
                for (lvl, c) in ["l2", "l3", "dram"].iter().zip(expect) {
                    assert_eq!(got[lvl], Some(if c { comp } else { 0 }), "{lvl} at {bytes} B: {got:?}");
                }
            }
        }
    }

    #[test]
    fn cache_model_claims_nothing_near_a_capacity_or_for_unmodelled_reuse() {
        let caches = hierarchy();
        let triad = roofline_kernels::api::find("triad").unwrap();
        // 1.5x the L2: partly cached, no L3 figure; still far beyond L1 and inside L3
        let n = triad.size_for_bytes(3 << 19);
        let got = by_level(&cache_model(triad.as_ref(), n, Variant::Scalar, 1, &caches));
        assert_eq!(got["l3"], None);
        assert!(got["l2"].unwrap() > 0);
        assert_eq!(got["dram"], Some(0));
        // dgemm: 0 where it fits, nothing claimed beyond (blocked reuse)
        let g = roofline_kernels::api::find("dgemm").unwrap();
        let got = by_level(&cache_model(g.as_ref(), 16, Variant::Scalar, 1, &caches));
        assert_eq!(got["l2"], Some(0));
        let got = by_level(&cache_model(g.as_ref(), 1500, Variant::Scalar, 1, &caches));
        assert_eq!((got["l2"], got["l3"], got["dram"]), (None, None, None));
        // a stencil whose four rows exceed half of L1 (n = 1000: 32 KB): no L2 figure, but
        // its rows fit L2, so the L3 and DRAM figures stand
        let st = roofline_kernels::api::find("stencil2d").unwrap();
        let got = by_level(&cache_model(st.as_ref(), 4000, Variant::Scalar, 1, &caches));
        assert_eq!(got["l2"], None);
        let comp = st.counts(4000, Variant::Scalar).dram_bytes;
        assert_eq!(got["dram"], Some(comp));
        // non-temporal stores bypass caches at any size: never modelled
        let nt = roofline_kernels::api::find("copy_nt").unwrap();
        let got = by_level(&cache_model(nt.as_ref(), 1 << 24, Variant::Scalar, 1, &caches));
        assert_eq!(got["dram"], None);
    }

    #[test]
    fn shared_caches_are_divided_among_the_team() {
        let caches = hierarchy();
        let k = roofline_kernels::api::find("daxpy").unwrap();
        // 10 MiB per thread: fits half the L3 alone, but exceeds twice 8 threads' share (4 MiB)
        let n = k.size_for_bytes(10 << 20);
        let one = by_level(&cache_model(k.as_ref(), n, Variant::Scalar, 1, &caches));
        assert_eq!(one["dram"], Some(0));
        let eight = by_level(&cache_model(k.as_ref(), n, Variant::Scalar, 8, &caches));
        assert_eq!(eight["dram"], Some(8 * k.counts(n, Variant::Scalar).dram_bytes));
        // private L2: the same per-thread capacity at any team size
        assert_eq!(one["l2"].map(|b| b * 8), eight["l2"]);
    }

    #[test]
    fn the_model_fills_analytic_levels_and_keeps_measured_ones() {
        let k = roofline_kernels::api::find("triad").unwrap();
        let n = k.size_for_bytes(1 << 28);
        let mut m = measurement(&k.counts(n, Variant::Scalar), None, 1);
        let prov = m.provenance.as_mut().unwrap();
        prov.bytes.insert("l2".into(), Source::Trace);
        m.bytes.insert("l2".into(), 12345.0);
        apply_cache_model(&mut m, k.as_ref(), n, Variant::Scalar, 1, &hierarchy());
        assert_eq!(m.bytes["l2"], 12345.0, "a traced figure was overwritten");
        let comp = k.counts(n, Variant::Scalar).dram_bytes as f64;
        assert_eq!(m.bytes["l3"], comp);
        assert_eq!(m.bytes["dram"], comp);
        let prov = m.provenance.as_ref().unwrap();
        assert_eq!(prov.bytes["l3"], Source::Analytic);
        assert!(prov.notes.iter().any(|n| n.starts_with("l3 = compulsory")), "{:?}", prov.notes);
        // partly cached in L3: the cold DRAM figure goes, with the reason
        let n = k.size_for_bytes(40 << 20);
        let mut m = measurement(&k.counts(n, Variant::Scalar), None, 1);
        apply_cache_model(&mut m, k.as_ref(), n, Variant::Scalar, 1, &hierarchy());
        assert!(!m.bytes.contains_key("dram"));
        assert!(!m.provenance.as_ref().unwrap().bytes.contains_key("dram"));
        assert!(
            m.provenance
                .as_ref()
                .unwrap()
                .notes
                .iter()
                .any(|n| n.starts_with("dram: not modelled"))
        );
    }
}
