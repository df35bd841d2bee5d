//! The results of `roofline validate`: the suite's counts against the analytic ones (a row per
//! kernel variant) and, for `--backend perf|simulated`, a verdict per event class. The
//! validation runs in `validate`; the tables that print these are in the report views.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::Source;

/// A verdict on one event class (`roofline validate --backend perf`), as the trust table
/// keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict", content = "relative_error")]
pub enum Verdict {
    Exact,
    WithinTolerance(f64),
    /// Off by this relative error (signed: -0.5 is half the true count).
    Off(f64),
    NotCounted,
}

impl Verdict {
    /// Whether numbers from events of this verdict can be trusted.
    pub fn passed(self) -> bool {
        matches!(self, Verdict::Exact | Verdict::WithinTolerance(_))
    }

    pub fn describe(self) -> String {
        match self {
            Verdict::Exact => "exact".into(),
            Verdict::WithinTolerance(e) => format!("within tolerance ({:+.2} %)", 100.0 * e),
            Verdict::Off(e) => format!("off by {:+.1} %", 100.0 * e),
            Verdict::NotCounted => "not counted".into(),
        }
    }

    /// The worse of two (not counted, then the largest error).
    pub fn worse(self, o: Verdict) -> Verdict {
        let rank = |v: Verdict| match v {
            Verdict::Exact => (0, 0.0),
            Verdict::WithinTolerance(e) => (1, e.abs()),
            Verdict::Off(e) => (2, e.abs()),
            Verdict::NotCounted => (3, 0.0),
        };
        if rank(o) > rank(self) { o } else { self }
    }
}

/// One row of the validation table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub kernel: String,
    pub variant: String,
    pub n: usize,
    pub flops_analytic: BTreeMap<String, u64>,
    pub flops_measured: BTreeMap<String, u64>,
    /// The part of W done by fused multiply-adds (`Counts::fma_flops`; 2 per lane), analytic…
    pub fma_analytic: u64,
    /// …and measured (trace: `Tally::fma_flops`): must be equal, like the classes of W.
    pub fma_measured: u64,
    pub core_analytic: u64,
    pub core_measured: u64,
    pub dram_analytic: u64,
    /// None: this backend does not measure DRAM traffic here (trace: only `--trace memory`
    /// measures it, for the streaming kernels, through the cache simulator).
    pub dram_measured: Option<u64>,
    /// Trace: bytes of the call path around the kernel (trace(n) - analytic(n)), shown to be
    /// size-independent by a second trace at n/2.
    pub core_harness_bytes: Option<i64>,
    /// `--trace memory`: whether memory mode (addresses per block from the registers at its
    /// entry, loops replayed) gave the same bytes per level as single-stepping every
    /// instruction, on a small instance of the kernel (None: not checked).
    pub memory_matches_stepping: Option<bool>,
    pub ok: bool,
    pub detail: Option<String>,
}

pub fn rel_err(a: u64, m: u64) -> f64 {
    if a == 0 {
        if m == 0 { 0.0 } else { f64::INFINITY }
    } else {
        (m as f64 - a as f64).abs() / a as f64
    }
}

/// One measurement of one kernel variant for one event class.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub kernel: String,
    pub variant: String,
    pub n: usize,
    pub analytic: f64,
    pub measured: Option<f64>,
    pub verdict: Verdict,
}

/// One event class (`flops.packed256_double`, `bytes.dram`): its events, its samples, and
/// the worst verdict.
#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    pub class: String,
    pub events: Vec<String>,
    pub samples: Vec<Sample>,
    pub verdict: Verdict,
    /// Why, where the verdict needs a reason (the errno of an event that failed to open, a
    /// zero reading, multiplexing, the idle background).
    pub detail: Vec<String>,
}

/// The whole validation.
#[derive(Debug, Clone, Serialize)]
pub struct PerfValidation {
    pub source: Source,
    pub platform: String,
    pub rows: Vec<ClassRow>,
    /// Events that failed to open, with the cause.
    pub failed_to_open: BTreeMap<String, String>,
    /// Bytes per second the uncore DRAM events counted with nothing running (subtracted).
    pub idle_dram_bytes_per_second: Option<f64>,
    pub notes: Vec<String>,
}

impl PerfValidation {
    pub fn all_passed(&self) -> bool {
        self.rows.iter().all(|r| r.verdict.passed())
    }
}
