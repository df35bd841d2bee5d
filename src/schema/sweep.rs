//! Sweeps: performance against working-set size (`roofline sweep`, `roofline ceilings
//! --sweep`), the plateaus detected along it and the levels they are matched to. The measuring
//! code and the plateau detector live in `ceilings::sweep` and `ceilings::plateau`.

use serde::{Deserialize, Serialize};

/// One measured size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub working_set_bytes: u64,
    /// Elements (or the kernel's size unit) per thread.
    pub n: u64,
    /// Median seconds of one invocation.
    pub seconds: f64,
    pub spread: f64,
    pub gflops: f64,
    /// Core-side GB/s (explicit loads + stores).
    pub gbs: f64,
    /// Flops per core-side byte.
    pub ai: Option<f64>,
    /// The cache level the working set fits in by CPUID sizes (per-thread share): `L1`…`DRAM`.
    pub cpuid_level: String,
    /// Index of the detected plateau this point lies on, if any.
    pub plateau: Option<usize>,
    /// `overhead`, `compute`, or `memory (L2)` etc. (filled when ceilings are known).
    pub bound: Option<String>,
}

/// Least-squares fit T(n) = a + b·n with relative weights (each point's error relative to
/// its time), so that small sizes, where the overhead `a` shows, count as much as large ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinearFit {
    /// Fixed overhead per invocation, seconds.
    pub a: f64,
    /// Seconds per unit of n.
    pub b: f64,
    /// Weighted coefficient of determination.
    pub r2: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plateau {
    /// 0 for the fastest level (L1 on a CPU), 1 for the next, …
    pub index: usize,
    /// First and last working-set size on the plateau.
    pub from_bytes: u64,
    pub to_bytes: u64,
    /// Median value of the plateau's points.
    pub value: f64,
    pub points: usize,
}

/// A detected boundary between two plateaus: the capacity lies between `last_inside` and
/// `first_outside`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    pub last_inside_bytes: u64,
    pub first_outside_bytes: u64,
    /// Geometric mean of the two: the estimate compared with CPUID.
    pub estimate_bytes: u64,
}

/// A detected boundary against the CPUID capacity of the level it ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelBoundary {
    pub level: String,
    #[serde(flatten)]
    pub detected: Boundary,
    /// CPUID capacity of that level (per-thread share).
    pub cpuid_bytes: Option<u64>,
    /// detected estimate / CPUID capacity.
    pub ratio: Option<f64>,
}

/// A sweep's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub kernel: String,
    pub variant: String,
    pub threads: u32,
    pub factor: f64,
    pub points: Vec<SweepPoint>,
    /// Plateaus of core-side GB/s.
    pub plateaus: Vec<Plateau>,
    pub boundaries: Vec<LevelBoundary>,
    pub fit: Option<LinearFit>,
}
