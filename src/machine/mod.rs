//! The machine model: CPUID identification, topology, caches, clocks and theoretical peaks.
//! `roofline.machine/1` is its JSON form (documented in `docs/machine-schema.md`).

//!
//! Other commands call [`detect`] (full model, clocks measured, ~1 s) or [`detect_static`]
//! (CPUID, topology, caches and platform only, a few milliseconds; peaks at the nominal or
//! `--frequency` clock). [`from_dump`] builds the static model from a recorded CPUID dump.

// Building and showing the machine model (`roofline machine`, the analytic backend, ceilings)
// comes with `analysis`; a program that only marks regions identifies its CPU's platform
// (`identify::this_platform`) and needs none of it.
#[cfg(feature = "analysis")]
pub mod clock;
pub mod cpuid;
#[cfg(feature = "analysis")]
pub mod detect;
#[cfg(feature = "analysis")]
pub mod dump;
pub mod host;
pub mod identify;
#[cfg(feature = "analysis")]
pub mod peaks;
pub mod platform;
// platforms/*.toml as Rust data (static `TableData`), written by build.rs into OUT_DIR; the
// tests of src/machine/platform.rs check it against what the `toml` crate reads.
mod platform_tables {
    include!(concat!(env!("OUT_DIR"), "/platform_tables.rs"));
}
pub mod topology;

use serde::Serialize;
use std::collections::BTreeMap;

#[cfg(feature = "analysis")]
pub use detect::{DetectOptions, detect, detect_static, from_dump};
pub use identify::{set_platform, this_platform};
pub use platform::{EventSpec, Pipes, Platform};

pub const MACHINE_SCHEMA: &str = "roofline.machine/1";

/// How the microarchitecture was identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub enum IdentifiedBy {
    #[serde(rename = "cpuid model")]
    CpuidModel,
    #[serde(rename = "feature flags")]
    FeatureFlags,
    #[serde(rename = "platform option")]
    PlatformOption,
    /// No platform matched: a generic model from CPUID alone.
    #[serde(rename = "generic")]
    Generic,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Cache {
    /// 1, 2, 3 (L1 is the data cache).
    pub level: u32,
    /// `data`, `instruction`, `unified`.
    pub kind: String,
    pub size_bytes: u64,
    pub line_bytes: u32,
    pub ways: u32,
    pub sets: u32,
    /// Threads actually sharing one instance (sysfs `shared_cpu_list`), else CPUID's maximum.
    pub shared_by_threads: u32,
    /// Where `shared_by_threads` came from: `sysfs` or `cpuid`.
    pub shared_by_source: String,
    /// Instances on this machine.
    pub instances: Option<u32>,
}

/// Per-ISA figures: `scalar`, `sse`, `avx`, `avx2`, `avx512` (null where the CPU lacks it).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct ByIsa {
    pub scalar: Option<f64>,
    pub sse: Option<f64>,
    pub avx: Option<f64>,
    pub avx2: Option<f64>,
    pub avx512: Option<f64>,
}

impl ByIsa {
    pub fn get(&self, isa: &str) -> Option<f64> {
        match isa {
            "scalar" => self.scalar,
            "sse" => self.sse,
            "avx" => self.avx,
            "avx2" => self.avx2,
            "avx512" => self.avx512,
            _ => None,
        }
    }
    pub fn set(&mut self, isa: &str, v: Option<f64>) {
        match isa {
            "scalar" => self.scalar = v,
            "sse" => self.sse = v,
            "avx" => self.avx = v,
            "avx2" => self.avx2 = v,
            "avx512" => self.avx512 = v,
            _ => {}
        }
    }
    pub const ISAS: [&'static str; 5] = ["scalar", "sse", "avx", "avx2", "avx512"];
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Frequency {
    pub nominal: Option<f64>,
    /// Where `nominal` came from: `cpuid 0x16`, `brand string`, `/proc/cpuinfo`, `tsc calibration`.
    pub nominal_source: Option<String>,
    /// Measured effective clock on one thread (scalar dependent chains).
    pub measured: Option<f64>,
    /// The chains that measured it and what each found (they must agree).
    #[serde(default)]
    pub chains: BTreeMap<String, f64>,
    /// Clock while running dependent FMA chains of each width.
    pub by_isa: ByIsa,
    /// Same, with all threads busy.
    pub by_isa_all_threads: ByIsa,
    /// `--frequency` override, if given (peaks then use it).
    pub override_ghz: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Peaks {
    pub double: ByIsa,
    pub single: ByIsa,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct ThreadScaling {
    pub threads: u32,
    /// FMA throughput (GFLOP/s, double, widest ISA) with this many threads.
    pub gflops: f64,
    /// Relative to threads × the one-thread figure.
    pub efficiency: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct CoreType {
    /// `P` or `E` (hybrid parts), `core` otherwise.
    pub kind: String,
    pub cpus: Vec<u32>,
}

/// `roofline.machine/1`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct MachineModel {
    pub schema: String,
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
    pub brand: String,
    /// Platform key (`gnr`, `zen4`, …) or `generic`.
    pub microarchitecture: String,
    pub microarchitecture_name: String,
    pub identified_by: IdentifiedBy,
    /// Other platforms the flags could not rule out, when identification was ambiguous.
    #[serde(default)]
    pub candidates: Vec<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
    pub hypervisor: Option<String>,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub smt: bool,
    #[serde(default)]
    pub core_types: Vec<CoreType>,
    pub caches: Vec<Cache>,
    pub isa: Vec<String>,
    /// FP pipes per core per vector width: `{"128": {"fma": n, "add": n, "mul": n}, …}`.
    pub fp_pipes: BTreeMap<String, Pipes>,
    /// Hybrid parts: the E-cores' pipes (`fp_pipes` are the P-cores'); all-core peaks add
    /// each core type at its own pipes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fp_pipes_e_core: BTreeMap<String, Pipes>,
    /// How `fp_pipes` was decided: `platform table`, `measured`, `generic guess`.
    pub fp_pipes_source: String,
    pub frequency_ghz: Frequency,
    /// All cores, GFLOP/s.
    pub peak_gflops: Peaks,
    pub peak_gflops_per_core: Peaks,
    #[serde(default)]
    pub thread_scaling: Vec<ThreadScaling>,
    /// Theoretical bytes/cycle per core per level, where the platform knows them.
    #[serde(default)]
    pub bytes_per_cycle: BTreeMap<String, f64>,
    /// Measured FMA (or, without FMA, add) instructions retired per cycle on one core, per
    /// vector width (`"128"`, `"256"`, `"512"`): the pipes as the hardware shows them.
    #[serde(default)]
    pub fp_ops_per_cycle_measured: BTreeMap<String, f64>,
    /// Operations per cycle per core of the mixed-precision units this CPU has (CPUID) and the
    /// platform table rates, keyed `precision.isa` (`bf16.amx`, `int8.amx`, `half.avx512`,
    /// `int8.avx512`, …: `platform::MIXED_UNITS`). A unit the CPU lacks, or the table does not
    /// rate, is absent: no theoretical roof for it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mixed_ops_per_cycle: BTreeMap<String, f64>,
    /// Units this CPU has that the platform table deliberately leaves unrated, with why
    /// (`mixed_unrated` of the table): a ceiling can be measured, but there is no theoretical
    /// peak to read it against.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mixed_unrated: BTreeMap<String, String>,
    /// Theoretical peaks of those units on one core at the clock of their ISA (AMX at the
    /// AVX-512 clock): GFLOP/s, GOP/s for `int8`/`int16`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peak_mixed_per_core: BTreeMap<String, f64>,
    /// The same, all cores (all-threads clock).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peak_mixed: BTreeMap<String, f64>,
    /// Whether clocks were measured (`detect`) or not (`detect_static`, dumps).
    #[serde(default)]
    pub measured: bool,
}
