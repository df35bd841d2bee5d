//! The documents commands write besides reports: `roofline.sweep/1`, `roofline.events/1`,
//! `roofline.validate/1`, `roofline.validate-perf/1`, `roofline.compare/1`, and the kernel
//! list of `roofline kernels --json`. One struct per document, one constant per schema name,
//! one writer and one reader for all of them ([`Document`]).
//!
//! Rows whose type belongs to the layer that produces them (a sweep, a validation row) are a
//! type parameter here, so this floor imports nothing from above it.
//!
//! The writer goes through `serde_json::Value`, whose maps sort their keys: every object of
//! these documents, nested rows included, has its keys in alphabetical order, as these
//! documents have always been written. The field order of the structs does not matter.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::kernels::Precision;
use crate::schema::report::check_schema;

/// `roofline sweep`: one kernel against working-set size.
pub const SWEEP_SCHEMA: &str = "roofline.sweep/1";
/// `roofline events`: the perf-stat line and the events it counts.
pub const EVENTS_SCHEMA: &str = "roofline.events/1";
/// `roofline validate` (trace, analytic): the suite's counts against the analytic ones.
pub const VALIDATE_SCHEMA: &str = "roofline.validate/1";
/// `roofline validate --backend perf|simulated`: a verdict per event class.
pub const VALIDATE_PERF_SCHEMA: &str = "roofline.validate-perf/1";
/// `roofline compare`: the same kernels on a CPU and a GPU.
pub const COMPARE_SCHEMA: &str = "roofline.compare/1";

/// A document with a `schema` field: its schema name, its writer and its reader.
// The library writes these documents; within the crate only the unit tests read them back
// (`from_json`, which needs `SCHEMA`).
#[cfg_attr(not(test), allow(dead_code))]
pub trait Document: Sized {
    /// `name/MAJOR`, the value of the document's `schema` field.
    const SCHEMA: &'static str;

    /// Pretty-printed JSON, keys sorted (see the module's documentation), no final newline.
    fn to_json(&self) -> String
    where
        Self: Serialize,
    {
        sorted_pretty(self)
    }

    /// Parse a document and check its schema name and major version; `origin` names the
    /// text in errors.
    fn from_json(text: &str, origin: &str) -> Result<Self, Error>
    where
        Self: DeserializeOwned,
    {
        let (name, major) = schema_parts(Self::SCHEMA);
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::input(format!("{origin}: not JSON ({e})"), format!("pass a {name} document")))?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        check_schema(schema, name, major, origin)?;
        serde_json::from_value(v).map_err(|e| {
            Error::input(
                format!("{origin}: not a valid {} document ({e})", Self::SCHEMA),
                "re-create it with this roofline version",
            )
        })
    }
}

/// Pretty-printed JSON with every object's keys sorted.
fn sorted_pretty<T: Serialize>(doc: &T) -> String {
    let value = serde_json::to_value(doc).expect("a document always serializes");
    serde_json::to_string_pretty(&value).expect("a JSON value always serializes")
}

/// `roofline.sweep/1` → (`roofline.sweep`, 1).
#[cfg_attr(not(test), allow(dead_code))]
fn schema_parts(schema: &'static str) -> (&'static str, u32) {
    let (name, major) = schema.split_once('/').expect("schema constants are name/MAJOR");
    (name, major.parse().expect("schema constants are name/MAJOR"))
}

/// `roofline.sweep/1`: the sweep (`ceilings::sweep::Sweep`) under its schema name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepDocument<S> {
    pub schema: String,
    pub sweep: S,
}

impl<S> SweepDocument<S> {
    pub fn new(sweep: S) -> SweepDocument<S> {
        SweepDocument {
            schema: SWEEP_SCHEMA.into(),
            sweep,
        }
    }
}

impl<S> Document for SweepDocument<S> {
    const SCHEMA: &'static str = SWEEP_SCHEMA;
}

/// `roofline.events/1`: the `perf stat` command line that collects a platform's events, and
/// the events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsDocument {
    pub schema: String,
    /// The platform's key (`skx`, `zen4`, …).
    pub platform: String,
    pub platform_name: String,
    /// How the platform was chosen (the option, or this machine's CPUID).
    pub platform_from: String,
    /// Whether the target runs with SMT on.
    pub smt: bool,
    /// General-purpose counters per thread.
    pub gp_counters: u32,
    pub perf_command: String,
    /// Each `-e` argument, in order (groups in `{}`).
    pub event_args: Vec<String>,
    /// Whether `-a` is needed (uncore events cannot be counted per task).
    pub system_wide: bool,
    pub events: Vec<EventEntry>,
    pub notes: Vec<String>,
}

impl Document for EventsDocument {
    const SCHEMA: &'static str = EVENTS_SCHEMA;
}

/// One event of an [`EventsDocument`], as the platform file declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEntry {
    pub name: String,
    /// The event in `perf stat -e` syntax.
    pub perf: String,
    pub pmu: String,
    /// What it counts toward (`flops`, `bytes.dram`, …).
    pub quantity: String,
    pub class: Option<String>,
    pub weight: f64,
    /// The counters it can run on (None: any).
    pub counters: Option<Vec<u32>>,
    pub paired: bool,
    pub unreliable: bool,
    pub optional: bool,
    pub caveat: Option<String>,
}

/// `roofline.validate/1`: the suite under a backend against the analytic counts, one row
/// (`validate::Row`) per kernel variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateDocument<R> {
    pub schema: String,
    pub backend: String,
    /// The seed of the kernels' random inputs.
    pub seed: u64,
    pub tolerance: Tolerance,
    /// The simulated hierarchy of `--trace memory` (None: not in memory mode).
    pub cache: Option<String>,
    /// Whether every row matched.
    pub ok: bool,
    pub rows: Vec<R>,
}

impl<R> Document for ValidateDocument<R> {
    const SCHEMA: &'static str = VALIDATE_SCHEMA;
}

/// The relative errors a validation accepts, per quantity; a quantity not judged is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub flops: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_bytes: Option<f64>,
}

/// `roofline.validate-perf/1`: hardware (or simulated) counters against kernels of known
/// counts; the validation (`validate::perf::PerfValidation`) holds a verdict per event class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidatePerfDocument<V> {
    pub schema: String,
    pub backend: String,
    pub tolerance: Tolerance,
    /// Whether every event class passed.
    pub ok: bool,
    pub validation: V,
}

impl<V> Document for ValidatePerfDocument<V> {
    const SCHEMA: &'static str = VALIDATE_PERF_SCHEMA;
}

/// `roofline.compare/1`: kernels present in a CPU and a GPU report, one row each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareDocument {
    pub schema: String,
    pub rows: Vec<CompareRow>,
}

impl Document for CompareDocument {
    const SCHEMA: &'static str = COMPARE_SCHEMA;
}

/// One kernel on both machines. Unknown values (no rate, a zero time) are None.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    /// The kernel, `CPU=GPU` when the two are paired under different names.
    pub kernel: String,
    /// The CPU point's name.
    pub cpu: String,
    /// The GPU point's name.
    pub gpu: String,
    pub cpu_seconds: f64,
    pub gpu_seconds: f64,
    pub cpu_gflops: Option<f64>,
    pub gpu_gflops: Option<f64>,
    pub cpu_roof_fraction: Option<f64>,
    pub gpu_roof_fraction: Option<f64>,
    /// CPU time over GPU time.
    pub speedup_time: Option<f64>,
    /// GPU rate over CPU rate (per unit of work, when the two ran different sizes).
    pub speedup_rate: Option<f64>,
    /// Why a side may not be near its best.
    pub caveats: Vec<String>,
    /// The precision each side is compared at.
    pub cpu_precision: String,
    pub gpu_precision: String,
    /// Each machine's highest roof of that precision.
    pub cpu_roof: Option<CompareRoof>,
    pub gpu_roof: Option<CompareRoof>,
    /// Whether the two sides ran the same family of precision.
    pub same_precision: bool,
    /// Energy per unit of work on each side, where both points carry energy (`--energy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<CompareEnergy>,
}

/// Energy per unit of work of a compared pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareEnergy {
    /// GFLOP per joule of the CPU point's whole domain.
    pub cpu_gflop_per_joule: f64,
    /// GFLOP per joule of the GPU point's whole domain.
    pub gpu_gflop_per_joule: f64,
    /// The domain each figure is of (`psys`, `pkg+ram`; `gpu0`, the board).
    pub cpu_domain: String,
    pub gpu_domain: String,
    /// Joules per unit of work on the CPU over those on the GPU (above 1: the GPU spends
    /// less energy on the same work).
    pub ratio: f64,
}

/// A compute roof a compared point was read against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRoof {
    /// `precision.isa.mode`, as in the ceilings.
    pub key: String,
    pub label: String,
    /// GFLOP/s (GOP/s for integer work).
    pub gflops: f64,
    /// Measured (true) or theoretical.
    pub empirical: bool,
}

/// `roofline kernels --json`: the suite (no schema field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelsDocument {
    pub kernels: Vec<KernelInfo>,
}

impl KernelsDocument {
    /// Pretty-printed JSON, keys sorted, as [`Document::to_json`] writes.
    pub fn to_json(&self) -> String {
        sorted_pretty(self)
    }
}

/// One kernel of the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub name: String,
    pub description: String,
    pub precision: Precision,
    pub size_unit: String,
    /// The variant `roofline run` picks by default: the widest runnable one.
    pub default_variant: Option<String>,
    pub variants: Vec<VariantInfo>,
}

/// One variant of a kernel: whether this CPU runs it, and its W/Q formula.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantInfo {
    pub name: String,
    pub runnable: bool,
    pub formula: String,
}

#[cfg(test)]
#[path = "documents_tests.rs"]
mod tests;
