//! `roofline.ceilings/1`: the empirical roofs `roofline ceilings` measures and caches per
//! machine, with the machine summary it was measured on ([`Host`]). The measuring code lives in
//! `ceilings` (benchmarks) and `machine::host` (identification); this is the document they
//! write and every reader reads.

#[cfg(feature = "analysis")]
use serde::Deserialize;
use serde::Serialize;

#[cfg(feature = "analysis")]
use super::sweep::Sweep;
#[cfg(feature = "analysis")]
use crate::error::{Error, Result};
#[cfg(feature = "analysis")]
use crate::schema::Roofs;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct CacheLevel {
    pub level: u32,
    pub size_bytes: u64,
    /// Logical CPUs sharing one instance.
    pub shared_by_threads: u32,
}

/// The machine summary written into `roofline.ceilings/1`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Host {
    pub fingerprint: String,
    pub vendor: String,
    pub brand: String,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
    pub logical_cpus: u32,
    /// Data and unified caches, L1 first.
    pub caches: Vec<CacheLevel>,
    /// Platform key (`zen4`, `spr`, …) when the platform tables know this CPU.
    pub microarchitecture: Option<String>,
    pub hypervisor: Option<String>,
    /// Where the cache sizes came from: `sysfs` or `default` (with a warning).
    pub caches_source: String,
}

/// The schema name and major version of [`Ceilings`] documents.
pub const CEILINGS_SCHEMA: &str = "roofline.ceilings/1";
#[cfg(feature = "analysis")]
const CEILINGS_MAJOR: u32 = 1;

/// `roofline.ceilings/1`. Only `schema` and, per figure, what names it and its value are
/// required: files of older versions (and hand-written ones) lack the rest, which reads as
/// empty, zero or absent (a figure's `threads` as 1).
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// [`CEILINGS_SCHEMA`].
    pub schema: String,
    /// The version of roofline that measured them.
    #[serde(default)]
    pub tool_version: String,
    /// Seconds since the Unix epoch when measured.
    #[serde(default)]
    pub measured_at_unix: u64,
    /// Measured with `--quick` (fewer loops, shorter samples).
    #[serde(default)]
    pub quick: bool,
    /// The thread counts asked for (older files: absent; the figures' own counts are what
    /// [`Ceilings::measured_threads`] reads).
    #[serde(default)]
    pub threads: Vec<u32>,
    /// Absent in hand-written files: then empty, with no fingerprint.
    #[serde(default)]
    pub machine: Host,
    /// Compute ceilings: each precision × ISA × mix at each thread count.
    #[serde(default)]
    pub compute: Vec<ComputeCeiling>,
    /// Bandwidth ceilings: each level at each thread count.
    #[serde(default)]
    pub bandwidth: Vec<BandwidthCeiling>,
    /// The working-set sweep the bandwidth levels were read from, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// Energy roofs per thread count (`ceilings --energy`): pJ per flop and per byte, the
    /// constant power.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub energy: Vec<crate::schema::energy::EnergyRoofs>,
    /// How the figures were measured, one line each.
    #[serde(default)]
    pub notes: Vec<String>,
    /// What went wrong or looks doubtful, one line each.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One compute ceiling: a precision × ISA × instruction mix at a thread count.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeCeiling {
    /// `double` or `single`; for the low-precision units `half`, `bf16`, `int8`, `int16`
    /// (integer units: `gflops` and its companions are GOP/s, operations not flops).
    pub precision: String,
    /// `scalar`, `sse`, `avx`, `avx2`, `avx512`, or `amx` (tiles).
    pub isa: String,
    /// Whether FMA instructions are used.
    pub fma: bool,
    /// `fma`, `mul+add` or `fma+add` (absent in older files: then `fma` says which).
    #[serde(default)]
    pub mode: String,
    #[serde(default = "one_thread")]
    pub threads: u32,
    /// Median over the samples.
    pub gflops: f64,
    /// Best sample.
    #[serde(default)]
    pub gflops_best: f64,
    /// (Q3 − Q1) / median of the sample times.
    #[serde(default)]
    pub spread: f64,
    #[serde(default)]
    pub samples: usize,
    /// Clock measured while running this ISA on `threads` threads (GHz).
    pub ghz: Option<f64>,
    /// Flops per cycle per thread at that clock (the mean over the threads of each one's median).
    pub flop_per_cycle: Option<f64>,
    /// Pipes × lanes × flops per instruction × measured clock × threads.
    pub theoretical_gflops: Option<f64>,
    pub percent_of_theoretical: Option<f64>,
    /// The CPU a one-thread ceiling was kept from, where it was measured more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Earlier measurements set aside as slow phases of the unit (AMX below 90 % of its rate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<SetAsideAttempt>,
    /// A team whose threads ran unequally while all ran: absent where every thread ran within
    /// [`SLOW_THREAD_SHARE`] of the fastest (and at one thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unequal_threads: Option<UnequalThreads>,
}

/// A thread of a team below this share of the fastest thread's rate counts as slow. CPUs that
/// share a core's units (two hyperthreads; on a guest, vCPUs the hypervisor put on one core's
/// two hyperthreads, which the guest's CPUID does not show) run a peak loop at about half.
#[cfg(feature = "analysis")]
pub const SLOW_THREAD_SHARE: f64 = 0.7;

/// Why the threads of a team run unequally, as the reports say it.
#[cfg(feature = "analysis")]
pub const UNEQUAL_THREADS_WHY: &str = "CPUs that share one core's units, such as two hyperthreads, or on a guest two vCPUs the hypervisor runs on one host core, which the guest's CPUID does not show; or a neighbour on their cores";

/// The threads of a team ceiling that ran slower than the fastest one, each thread's rate
/// being the median over its samples.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnequalThreads {
    /// Threads below [`SLOW_THREAD_SHARE`] of the fastest thread's rate.
    pub slow: u32,
    /// Their median rate over the fastest thread's.
    pub slow_share: f64,
    /// The team's rate over the fastest thread's: how many of its fastest thread it is worth.
    pub fastest_threads_worth: f64,
}

#[cfg(feature = "analysis")]
impl UnequalThreads {
    /// From each thread's rate (any unit); None for one thread, or where none is slow.
    pub fn from_rates(rates: &[f64]) -> Option<UnequalThreads> {
        let fastest = rates.iter().copied().filter(|r| r.is_finite()).fold(0.0, f64::max);
        if rates.len() < 2 || fastest <= 0.0 {
            return None;
        }
        let mut slow: Vec<f64> = rates.iter().map(|r| r / fastest).filter(|s| *s < SLOW_THREAD_SHARE).collect();
        if slow.is_empty() {
            return None;
        }
        slow.sort_by(f64::total_cmp);
        Some(UnequalThreads {
            slow: slow.len() as u32,
            slow_share: crate::schema::stats::quantile(&slow, 0.5),
            fastest_threads_worth: rates.iter().map(|r| r / fastest).sum(),
        })
    }
}

/// A measurement of a compute ceiling read as a slow phase of its unit and measured again.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetAsideAttempt {
    /// The CPU it ran on (one thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    pub gflops: f64,
    pub percent_of_theoretical: Option<f64>,
}

/// One bandwidth ceiling: a kernel at a memory level's working set and a thread count.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthCeiling {
    /// `L1`, `L2`, `L3`, `DRAM`.
    pub level: String,
    /// Suite kernel: `load`, `copy`, `triad`, `store`, `store_nt`.
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub isa: String,
    #[serde(default = "one_thread")]
    pub threads: u32,
    /// All threads together.
    #[serde(default, deserialize_with = "byte_count")]
    pub working_set_bytes: u64,
    #[serde(default, deserialize_with = "byte_count")]
    pub working_set_per_thread_bytes: u64,
    /// GB/s (10⁹ bytes), median, in the `bytes_convention` of this figure.
    pub gbs: f64,
    /// `core`: explicit loads + stores, write-allocate excluded (what STREAM reports).
    #[serde(default)]
    pub bytes_convention: String,
    /// GB/s counting write-allocate reads too (equal to `gbs` for load-only, daxpy and NT
    /// stores). Absent (0) in older files: then `gbs` stands for both ([`Self::traffic_gbs`]).
    #[serde(default)]
    pub gbs_write_allocate: f64,
    #[serde(default)]
    pub gbs_best: f64,
    /// (Q3 − Q1) / median of the sample times.
    #[serde(default)]
    pub spread: f64,
    #[serde(default)]
    pub samples: usize,
}

#[cfg(feature = "analysis")]
impl Ceilings {
    /// Parse and check a ceilings document (the one reader of `roofline.ceilings/1`: the
    /// cache, `--ceilings FILE`, the model); `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Ceilings> {
        const HINT: &str = "re-create it with `roofline ceilings -o FILE.json` (the cache: `roofline ceilings --refresh`)";
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::input(format!("{origin}: not JSON ({e})"), HINT))?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        crate::schema::report::check_schema(schema, "roofline.ceilings", CEILINGS_MAJOR, origin)?;
        serde_json::from_value(v).map_err(|e| Error::input(format!("{origin}: not a valid {CEILINGS_SCHEMA} document ({e})"), HINT))
    }

    /// The document as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The thread counts that have figures (compute or bandwidth), ascending.
    pub fn measured_threads(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self
            .compute
            .iter()
            .map(|c| c.threads)
            .chain(self.bandwidth.iter().map(|b| b.threads))
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The measured thread count whose roofs serve work at `threads` (`nearest_threads`).
    pub fn threads_for(&self, threads: u32) -> Option<u32> {
        nearest_threads(self.measured_threads(), threads)
    }

    /// The roofs for a report at `threads`, read at [`Ceilings::threads_for`]: the best
    /// compute figure per `precision.isa.mode`, and per level the best core-side bandwidth of
    /// the kernels with ordinary stores or none, and the best traffic (write-allocate reads
    /// included, every kernel) for bytes counted at the level. A level measured only with
    /// non-temporal stores has that traffic as its core-side roof too.
    pub fn roofs(&self, threads: u32) -> Roofs {
        let t = self.threads_for(threads).unwrap_or(threads);
        let mut r = Roofs {
            kind: "empirical".to_string(),
            compute_gflops: Default::default(),
            bandwidth_gbs: Default::default(),
            bandwidth_traffic_gbs: Default::default(),
            theoretical: Default::default(),
            spread: Default::default(),
            threads: Some(t),
            notes: Vec::new(),
        };
        for c in self.compute.iter().filter(|c| c.threads == t) {
            let key = c.key();
            let e = r.compute_gflops.entry(key.clone()).or_insert(0.0);
            let g = c.roof_gflops();
            if g > *e {
                *e = g;
                r.spread.insert(key, c.spread);
            }
        }
        for b in self.bandwidth.iter().filter(|b| b.threads == t) {
            let level = b.level.to_ascii_lowercase();
            if !b.kernel.contains("_nt") {
                let e = r.bandwidth_gbs.entry(level.clone()).or_insert(0.0);
                if b.gbs > *e {
                    *e = b.gbs;
                    r.spread.insert(level.clone(), b.spread);
                }
            }
            let e = r.bandwidth_traffic_gbs.entry(level).or_insert(0.0);
            *e = e.max(b.traffic_gbs());
        }
        for (level, traffic) in &r.bandwidth_traffic_gbs {
            r.bandwidth_gbs.entry(level.clone()).or_insert(*traffic);
        }
        // Said of each precision's peak (the roof a point of that precision meets first); the
        // `ceilings` table lists every ceiling.
        let mut peaks: Vec<&ComputeCeiling> = Vec::new();
        for c in self.compute.iter().filter(|c| c.threads == t) {
            match peaks.iter_mut().find(|p| p.precision == c.precision) {
                Some(p) if p.gflops < c.gflops => *p = c,
                Some(_) => {}
                None => peaks.push(c),
            }
        }
        let unequal: Vec<String> = peaks
            .iter()
            .filter_map(|c| {
                let u = c.unequal_threads.as_ref()?;
                Some(format!(
                    "{} {} {}: {} of {t} at {:.0} %",
                    c.precision,
                    c.isa,
                    c.mode,
                    u.slow,
                    100.0 * u.slow_share
                ))
            })
            .collect();
        if !unequal.is_empty() {
            r.notes.push(format!(
                "{t} threads: some ran their precision's peak loop well below the fastest thread's rate while all ran ({}; {UNEQUAL_THREADS_WHY}); each roof is the team's sum, which a kernel that balances its work dynamically can reach and a static split cannot",
                unequal.join(", ")
            ));
        }
        r
    }
}

/// The thread-count rule of every reader of ceilings: work at `threads` is read against the
/// figures measured at `threads` where there are some, else at the nearest measured count, the
/// larger of two equally near (a roof measured with more threads is never below what the work
/// can reach, so a point is not pushed above a roof that is too low). None when nothing was
/// measured. Callers without a thread count ask for `u32::MAX`: the largest measured.
#[cfg(feature = "analysis")]
pub fn nearest_threads(measured: impl IntoIterator<Item = u32>, threads: u32) -> Option<u32> {
    measured.into_iter().min_by_key(|&t| (t.abs_diff(threads), std::cmp::Reverse(t)))
}

/// A compute ceiling whose samples spread more than this (interquartile range over median) was
/// disturbed while it ran: its roof is the best sample, not the median.
pub const NOISY_COMPUTE_CEILING: f64 = 0.05;

#[cfg(feature = "analysis")]
impl ComputeCeiling {
    /// The roof this ceiling gives: the median of its samples, or, where they spread more than
    /// [`NOISY_COMPUTE_CEILING`] (a neighbour took the core for part of the run, as on a shared
    /// guest), the best sample: a peak loop cannot run faster than its unit, so its fastest
    /// sample is the unit's rate and the slower ones are the disturbance.
    pub fn roof_gflops(&self) -> f64 {
        if self.spread > NOISY_COMPUTE_CEILING && self.gflops_best.is_finite() && self.gflops_best > self.gflops {
            self.gflops_best
        } else {
            self.gflops
        }
    }

    /// `precision.isa.mode` as in a report's `compute_gflops` (`double.avx512.fma`,
    /// `double.avx2.mul_add`, `double.avx2.fma_add`); a figure without a mode (older files) is
    /// `fma` or `mul_add` by its `fma` flag.
    pub fn key(&self) -> String {
        let mode = match (self.mode.as_str(), self.fma) {
            ("", true) => "fma".to_string(),
            ("", false) => "mul_add".to_string(),
            (m, _) => m.replace('+', "_"),
        };
        format!("{}.{}.{mode}", self.precision.to_ascii_lowercase(), self.isa.to_ascii_lowercase())
    }
}

#[cfg(feature = "analysis")]
impl BandwidthCeiling {
    /// The traffic the level serves: `gbs_write_allocate`, or `gbs` where that is absent (0).
    pub fn traffic_gbs(&self) -> f64 {
        if self.gbs_write_allocate.is_finite() && self.gbs_write_allocate > 0.0 {
            self.gbs_write_allocate
        } else {
            self.gbs
        }
    }
}

#[cfg(feature = "analysis")]
fn one_thread() -> u32 {
    1
}

/// A byte count: an integer as the tool writes it, or a whole number in exponent form (`1e9`)
/// as written by hand.
#[cfg(feature = "analysis")]
fn byte_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Count {
        Integer(u64),
        Number(f64),
    }
    match Count::deserialize(d)? {
        Count::Integer(n) => Ok(n),
        Count::Number(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < u64::MAX as f64 => Ok(x as u64),
        Count::Number(x) => Err(serde::de::Error::custom(format!("{x} is not a byte count"))),
    }
}

#[cfg(all(test, feature = "analysis"))]
#[path = "ceilings_tests.rs"]
mod tests;
