//! `extra` of a `roofline.report/1` point: the backend-specific figures beside W, Q and T.
//!
//! The figures this program reads back (a view, the model, a command, a merge) are typed
//! fields of [`PointExtras`]; every other key (figures written for users and other tools, and
//! whatever a newer or foreign producer added) stays in [`PointExtras::other`] and is written
//! back as it came. In JSON both share one object with the keys in sorted order, as the plain
//! map of earlier versions wrote them, so a report keeps its bytes through a read and a write.
//! Each key is listed in `docs/report-schema.md`.

use serde::{Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;

/// The `extra` object of a point. Absent figures stay absent in JSON.
///
/// Serialized through a JSON value (whose maps sort their keys) so the typed keys and the
/// keys of [`other`](PointExtras::other) interleave in sorted order, as one map's would.
/// Read leniently, as the plain map was: a known key whose value does not have its field's
/// type (a report edited by hand, another producer) stays in `other` as it came, unread,
/// instead of failing the whole report.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(remote = "Self")]
pub struct PointExtras {
    /// Every other key: figures written for users and other tools (listed in
    /// `docs/report-schema.md`), and keys a newer or foreign producer added. Written back as
    /// they came. (First, so a typed field set beside a key of the same name read here with
    /// another type is the value written.)
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
    /// Per-function attribution of a traced run (`measure --by-function` or `--by-line`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_function: Option<Vec<WorkRow>>,
    /// Per-source-line attribution of a traced run, each row with its inline chains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_line: Option<Vec<WorkRow>>,
    /// A merged job's point (`report merge DIR/`): the largest over the mean of its ranks'
    /// `seconds` and `flops` (W); 1 is perfect balance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<BTreeMap<String, f64>>,
    /// Times a region began (region points; the region API's and the tracer's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// GPU global-memory coalescing, sectors per request (`load_sectors_per_request`,
    /// `store_sectors_per_request`; 4 is ideal for 4-byte words).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalescing: Option<BTreeMap<String, f64>>,
    /// Counter events and their counts (scaled for multiplexing), by event name; null where
    /// a count is not a number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<BTreeMap<String, Option<f64>>>,
    /// Joules per run and energy domain, the idle power and where they came from
    /// (`--energy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::schema::energy::PointEnergy>,
    /// Effective core clock during the run, GHz: cycles over task-clock (perf, perf stat).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_ghz: Option<f64>,
    /// Fixed cost `a` of `T(n) = a + b·n` fitted over a sweep, seconds: the model calls the
    /// point overhead-bound when it is a large share of T.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_seconds: Option<f64>,
    /// Flops counted by the FMA (MAC) events, hardware semantics (2 per lane), whichever
    /// group counted them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fma_flops_counted: Option<f64>,
    /// NVTX region points: stretches of consecutive launches inside the region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<u64>,
    /// The GPU instruction roofline (Ding & Williams) of a kernel: warp instructions, GIPS,
    /// transactions and ceilings per level. Kept as JSON: its figures are null where the
    /// capture lacked them, and the view reads each one where it draws it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_roofline: Option<Value>,
    /// Instructions executed: exact (an integer) where traced, a region's while it was open;
    /// scaled for multiplexing (a float) in an imported `perf stat`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<serde_json::Number>,
    /// The kernel measured: the suite's kernel name, or a GPU kernel's full (mangled) name.
    /// Absent on NVTX region points (not a kernel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// A GPU kernel's demangled name, where ncu gave it mangled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_demangled: Option<String>,
    /// NVTX region points: the kernels under the region, each once, by GPU time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels: Option<Vec<RegionKernel>>,
    /// GPU launches summed into the point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launches: Option<u64>,
    /// The vendor library run beside a GPU kernel on the same problem (cuBLASLt's algorithm).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// The vendor library's median rate on the same problem, GFLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library_gflops: Option<f64>,
    /// Multiplexed counter events: the fraction of the run each was on a counter
    /// (`time_running / time_enabled`, 0–1), by event name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplex_running_ratio: Option<BTreeMap<String, f64>>,
    /// Counter events that were asked for and did not count (their quantities are missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_counted: Option<Vec<String>>,
    /// GPU regime: `compute`, `bandwidth` or `overhead`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
    /// Why the regime is what it is, one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regime_reason: Option<String>,
    /// The region a point measures: a region API marker's name (trace), or an NVTX range's
    /// path (`step/layer1/norm`, GPU region points).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// criterion support: the level (or ISA) whose roof bounds the point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roof_bound: Option<String>,
    /// criterion support: the attainable rate at the point's AI, GFLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roof_gflops: Option<f64>,
    /// The simulated PMU's truth: DRAM bytes read and written at the end of a traced run
    /// (`[read, write]`), for its CAS events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_dram_split: Option<(f64, f64)>,
    /// GPU tensor-core operations by input type (`bf16`, `fp16`, `tf32`, `fp64`, `fp8`,
    /// `int8`, …; hardware semantics): picks the tensor roof of the point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_ops_by_type: Option<BTreeMap<String, f64>>,
    /// Whether a GPU kernel did tensor-core work (absent when ncu did not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_used: Option<bool>,
    /// A GPU kernel's share of the capture's kernel time, 0–1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_share: Option<f64>,
}

impl Serialize for PointExtras {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Through a JSON value: its object sorts the typed and the other keys together.
        let value = PointExtras::serialize(self, serde_json::value::Serializer).map_err(serde::ser::Error::custom)?;
        value.serialize(serializer)
    }
}

#[cfg(feature = "analysis")]
impl<'de> serde::Deserialize<'de> for PointExtras {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<PointExtras, D::Error> {
        let map = <BTreeMap<String, Value> as serde::Deserialize>::deserialize(deserializer)?;
        Ok(PointExtras::from_map(map))
    }
}

/// The typed fields of [`PointExtras`], once: their JSON keys and how one set of extras
/// takes another's.
macro_rules! typed_fields {
    ($($field:ident),* $(,)?) => {
        impl PointExtras {
            /// The keys with a typed field (the others go in [`other`](PointExtras::other)).
            pub const TYPED_KEYS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// The extras of a JSON object: each known key whose value reads as its field's
            /// type goes in the field, every other key (a known one with a value of another
            /// type included) in [`other`](PointExtras::other).
            #[cfg(feature = "analysis")]
            pub fn from_map(mut map: BTreeMap<String, Value>) -> PointExtras {
                let mut extras = PointExtras::default();
                $(
                    if let Some(v) = map.remove(stringify!($field)) {
                        match serde_json::from_value(v.clone()) {
                            Ok(typed) => extras.$field = Some(typed),
                            Err(_) => {
                                map.insert(stringify!($field).to_string(), v);
                            }
                        }
                    }
                )*
                extras.other = map;
                extras
            }

            /// Take every figure `more` sets, typed and other, over this one's.
            pub fn extend(&mut self, more: PointExtras) {
                $(
                    if more.$field.is_some() {
                        self.$field = more.$field;
                    }
                )*
                self.other.extend(more.other);
            }
        }
    };
}

typed_fields!(
    by_function,
    by_line,
    calls,
    coalescing,
    counts,
    effective_ghz,
    energy,
    fixed_seconds,
    fma_flops_counted,
    imbalance,
    instances,
    instruction_roofline,
    instructions,
    kernel,
    kernel_demangled,
    kernels,
    launches,
    library,
    library_gflops,
    multiplex_running_ratio,
    not_counted,
    regime,
    regime_reason,
    region,
    roof_bound,
    roof_gflops,
    simulated_dram_split,
    tensor_ops_by_type,
    tensor_used,
    time_share,
);

impl PointExtras {
    /// Set a key of [`other`](PointExtras::other). A key with a typed field is set in its
    /// field, never here (debug builds check).
    pub fn insert(&mut self, key: &str, value: impl Into<Value>) {
        debug_assert!(!Self::TYPED_KEYS.contains(&key), "extra.{key} has a typed field: set the field");
        self.other.insert(key.to_string(), value.into());
    }

    /// The `extra` object as a report writes it (typed and other keys together).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("extras always serialize")
    }
}

/// A row of the trace backend's work attribution (`by_function`, `by_line`): counts are exact
/// integers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct WorkRow {
    /// `file:line` (`by_line` rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// The function (demangled symbol; on a line row, the innermost frame's).
    #[serde(default)]
    pub function: String,
    /// Instructions executed in the row.
    #[serde(default)]
    pub instructions: u64,
    /// Flops of the row, hardware semantics.
    #[serde(default)]
    pub flops: u64,
    /// Bytes the row's load and store instructions moved (stack traffic excluded).
    #[serde(default)]
    pub core_bytes: u64,
    /// `by_function` rows: flops by class (`FlopClass::key`), classes with none left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_by_class: Option<BTreeMap<String, u64>>,
    /// `by_function` rows: stack bytes (push/pop, spills).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_bytes: Option<u64>,
    /// `by_line` rows: the row's work per inline chain (`frames`: function and line of each
    /// frame, innermost first; `instructions`; `flops`), most flops first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chains: Option<Vec<Value>>,
    /// `by_line` rows: the chains beyond the ones listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chains_left_off: Option<u64>,
    /// Keys of other producers, kept.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A kernel under an NVTX region point (`kernels`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct RegionKernel {
    /// The kernel's display name.
    #[serde(default)]
    pub name: String,
    /// Its launches inside the region.
    #[serde(default)]
    pub launches: u64,
    /// Its GPU time inside the region, seconds.
    #[serde(default)]
    pub seconds: f64,
    /// Its share of the region's GPU time, 0–1; null when the region took no time.
    #[serde(default)]
    pub time_share: Option<f64>,
    /// Keys of other producers, kept.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

#[cfg(all(test, feature = "analysis"))]
#[path = "extras_tests.rs"]
mod tests;
