//! Backends producing W, Q and T: one file per backend.
//!
//! - `perf`: Linux perf_event (core FP events, per-level traffic, uncore CAS counts);
//! - `trace`: ptrace + x86 decoding (exact W, core-side Q) with `cachesim` for Q per level;
//! - `analytic`: the kernel suite's own formulas;
//! - `energy`: RAPL joules per run and domain through perf's `power` PMU, beside W, Q and T;
//! - `command`: the commands measured, found once the way `execvp` will (one cause and hint for
//!   every backend);
//! - `events`: event → W/Q formulas shared by perf and the perf-stat import (`perf::stat_import`).

#[cfg(feature = "analysis")]
pub mod analytic;
#[cfg(feature = "trace")]
pub mod backend;
#[cfg(feature = "analysis")]
pub mod cachesim;
pub mod choose;
pub mod command;
pub mod energy;
pub mod events;
pub mod perf;
pub mod region_times;
#[cfg(feature = "trace")]
pub mod simulated;
#[cfg(feature = "analysis")]
pub mod team;
#[cfg(feature = "trace")]
pub mod trace;
pub mod trust;

/// The `perf stat` import under its old path (`counters::perf_stat`).
#[cfg(feature = "analysis")]
pub use perf::stat_import as perf_stat;

use serde::Serialize;
use std::collections::BTreeMap;

pub use choose::{Target, choose};

use crate::error::{Error, Result};
use crate::schema::{Bytes, Flops, Point, Provenance};

/// Which backend to use; `Auto` picks perf when a usable core PMU exists, else trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Perf when a usable core PMU exists, else trace (`counters::choose`).
    Auto,
    /// perf_event hardware counters: W and Q from the PMU, T native.
    Perf,
    /// ptrace single-stepping with instruction decoding: W exact, Q from the addresses touched (a cache simulator for the levels below the core).
    Trace,
    /// W and Q from the kernel suite's own formulas, T native: kernels of the suite only.
    Analytic,
    /// The simulated PMU (`simulated.rs`): the perf path with counts from a trace of the same
    /// run and injected faults, for tests. Never chosen by `auto`.
    Simulated,
}

impl BackendKind {
    /// Every backend, in the order the CLI lists them.
    pub const ALL: [BackendKind; 5] = [
        BackendKind::Auto,
        BackendKind::Perf,
        BackendKind::Trace,
        BackendKind::Analytic,
        BackendKind::Simulated,
    ];

    /// The name the CLI, the reports and `ROOFLINE_BACKEND` use.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Perf => "perf",
            BackendKind::Trace => "trace",
            BackendKind::Analytic => "analytic",
            BackendKind::Simulated => "simulated",
        }
    }

    /// The backend of that name.
    pub fn from_name(name: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// W, Q and T of one measured thing, with the provenance of each: what every backend
/// produces, and what becomes a [`Point`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measurement {
    /// Floating-point work W, by class.
    pub flops: Flops,
    /// Traffic Q in bytes, per level (`core`, `l1`, …, `dram`).
    pub bytes: Bytes,
    /// Where each figure came from; None where the backend claims none.
    pub provenance: Option<Provenance>,
    /// Wall time of each repetition, seconds.
    pub seconds_samples: Vec<f64>,
    /// Threads that ran the work.
    pub threads: u32,
    /// Figures beside W, Q and T (they become the point's `extra`).
    pub extra: crate::schema::PointExtras,
    /// The command's regions (the region API's markers), when the backend tells them apart:
    /// each becomes a point of its own beside the whole run's.
    pub regions: Vec<RegionMeasurement>,
}

/// One named region of a measured command: how often it began, and its W, Q and T (T: the
/// region's wall time per run, summed over its calls).
#[derive(Debug, Clone, PartialEq)]
pub struct RegionMeasurement {
    pub name: String,
    pub calls: u64,
    pub measurement: Measurement,
}

/// A point back as a measurement (a region counted by the program's own session and read
/// back by `measure`): W, Q, T and their provenance, the derived figures dropped.
impl From<Point> for Measurement {
    fn from(p: Point) -> Measurement {
        Measurement {
            flops: p.flops,
            bytes: p.bytes,
            provenance: Some(p.provenance),
            seconds_samples: p.seconds_samples,
            threads: p.threads,
            extra: p.extra,
            regions: Vec::new(),
        }
    }
}

impl Measurement {
    /// The point named `name` this measurement makes: W, Q and T with their provenance (an absent provenance: none claimed), at least one thread.
    pub fn into_point(self, name: impl Into<String>) -> Point {
        let prov = self.provenance.unwrap_or(Provenance {
            flops: None,
            bytes: BTreeMap::new(),
            seconds: None,
            notes: vec![],
            untrusted: Vec::new(),
        });
        let mut p = Point::new(name, prov, self.flops, self.bytes, self.threads.max(1), self.seconds_samples);
        p.extra = self.extra;
        p
    }
}

/// The identified platform (or `--platform`).
pub fn platform(spec: Option<&str>) -> Result<crate::machine::Platform> {
    if let Some(spec) = spec {
        return crate::machine::Platform::load(spec);
    }
    perf::identify_platform().ok_or_else(|| {
        Error::input(
            "unknown microarchitecture: no platform file matches this CPU's vendor, family and model",
            "pass `--platform NAME|FILE` (see `platforms/`), or use `--backend trace`",
        )
    })
}
