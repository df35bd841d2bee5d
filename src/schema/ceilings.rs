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

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct CacheLevel {
    pub level: u32,
    pub size_bytes: u64,
    /// Logical CPUs sharing one instance.
    pub shared_by_threads: u32,
}

/// The machine summary written into `roofline.ceilings/1`.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

pub const CEILINGS_SCHEMA: &str = "roofline.ceilings/1";
#[cfg(feature = "analysis")]
const CEILINGS_MAJOR: u32 = 1;

/// `roofline.ceilings/1`.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    pub schema: String,
    pub tool_version: String,
    /// Seconds since the Unix epoch when measured.
    pub measured_at_unix: u64,
    /// Measured with `--quick` (fewer loops, shorter samples).
    pub quick: bool,
    pub threads: Vec<u32>,
    pub machine: Host,
    pub compute: Vec<ComputeCeiling>,
    pub bandwidth: Vec<BandwidthCeiling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    #[serde(default)]
    pub notes: Vec<String>,
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
    /// `fma`, `mul+add` or `fma+add`.
    pub mode: String,
    pub threads: u32,
    /// Median over the samples.
    pub gflops: f64,
    /// Best sample.
    pub gflops_best: f64,
    /// (Q3 − Q1) / median of the sample times.
    pub spread: f64,
    pub samples: usize,
    /// Clock measured while running this ISA on `threads` threads (GHz).
    pub ghz: Option<f64>,
    /// Flops per cycle per thread at that clock.
    pub flop_per_cycle: Option<f64>,
    /// Pipes × lanes × flops per instruction × measured clock × threads.
    pub theoretical_gflops: Option<f64>,
    pub percent_of_theoretical: Option<f64>,
}

/// One bandwidth ceiling: a kernel at a memory level's working set and a thread count.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthCeiling {
    /// `L1`, `L2`, `L3`, `DRAM`.
    pub level: String,
    /// Suite kernel: `load`, `copy`, `triad`, `store`, `store_nt`.
    pub kernel: String,
    pub isa: String,
    pub threads: u32,
    /// All threads together.
    pub working_set_bytes: u64,
    pub working_set_per_thread_bytes: u64,
    /// GB/s (10⁹ bytes), median, in the `bytes_convention` of this figure.
    pub gbs: f64,
    /// `core`: explicit loads + stores, write-allocate excluded (what STREAM reports).
    pub bytes_convention: String,
    /// GB/s counting write-allocate reads too (equal to `gbs` for load-only, daxpy and NT stores).
    pub gbs_write_allocate: f64,
    pub gbs_best: f64,
    /// (Q3 − Q1) / median of the sample times.
    pub spread: f64,
    pub samples: usize,
}

#[cfg(feature = "analysis")]
impl Ceilings {
    /// Parse and check a ceilings document; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Ceilings> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::input(format!("{origin}: not JSON ({e})"), "re-measure with --refresh"))?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        crate::schema::report::check_schema(schema, "roofline.ceilings", CEILINGS_MAJOR, origin)?;
        serde_json::from_value(v).map_err(|e| Error::input(format!("{origin}: not a ceilings document ({e})"), "re-measure with --refresh"))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The roofs for a report at `threads` (the nearest measured thread count): the best
    /// compute figure per `precision.isa.mode`, and per level the best core-side bandwidth of
    /// the kernels with ordinary stores or none, and the best traffic (write-allocate reads
    /// included, every kernel) for bytes counted at the level.
    pub fn roofs(&self, threads: u32) -> Roofs {
        let t = self
            .threads
            .iter()
            .copied()
            .min_by_key(|&t| (t as i64 - threads as i64).abs())
            .unwrap_or(threads);
        let mut r = Roofs {
            kind: "empirical".to_string(),
            compute_gflops: Default::default(),
            bandwidth_gbs: Default::default(),
            bandwidth_traffic_gbs: Default::default(),
            theoretical: Default::default(),
            spread: Default::default(),
            threads: Some(t),
        };
        for c in self.compute.iter().filter(|c| c.threads == t) {
            let key = format!("{}.{}.{}", c.precision, c.isa, c.mode.replace('+', "_"));
            let e = r.compute_gflops.entry(key.clone()).or_insert(0.0);
            if c.gflops > *e {
                *e = c.gflops;
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
            *e = e.max(b.gbs_write_allocate);
        }
        r
    }
}
