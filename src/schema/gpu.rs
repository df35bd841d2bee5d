//! The GPU documents: `roofline.gpu-machine/1` (what `roofline gpu machine` reports of a
//! device: its shape, clocks and peaks) and `roofline.gpu-ceilings/1` (what `roofline gpu
//! ceilings` measured on it). The model's GPU rates and roofs (`model::gpu`) and the CUDA side
//! (`gpu/`) build and read them; both are data only, readable without a driver.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const GPU_MACHINE_SCHEMA: &str = "roofline.gpu-machine/1";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuPeaks {
    pub fp64_gflops: Option<f64>,
    pub fp32_gflops: Option<f64>,
    pub fp16_gflops: Option<f64>,
    /// Dense tensor peaks by input type.
    pub tensor_gflops: BTreeMap<String, f64>,
    /// HBM bandwidth: memory clock × 2 (double data rate) × bus width.
    pub dram_gbs: Option<f64>,
    /// From ncu's `*.peak_sustained` (bytes/cycle × SM clock) where measured.
    pub l2_gbs: Option<f64>,
    pub l1_gbs: Option<f64>,
    /// The SM clock the peaks assume, GHz.
    pub at_sm_ghz: Option<f64>,
}

/// `roofline.gpu-machine/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuMachine {
    pub schema: String,
    pub kind: String,
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: String,
    pub sms: u32,
    pub sm_clock_max_ghz: Option<f64>,
    pub memory_clock_ghz: Option<f64>,
    pub memory_bus_bits: Option<u32>,
    pub memory_bytes: u64,
    pub l2_bytes: Option<u64>,
    pub shared_per_sm_bytes: Option<u64>,
    pub peaks: GpuPeaks,
    /// Raw `*.peak_sustained` figures from ncu, when `--ncu` ran.
    #[serde(default)]
    pub ncu_peaks: BTreeMap<String, f64>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Where each figure came from (driver, capture, datasheet table), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<String>,
}

pub const GPU_CEILINGS_SCHEMA: &str = "roofline.gpu-ceilings/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeCeiling {
    /// `fp64`, `fp32`, `fp16`, `tensor_bf16`.
    pub precision: String,
    pub kernel: String,
    pub gflops: f64,
    /// Theoretical peak at the SM clock measured during the run (at most the driver's
    /// maximum SM clock).
    pub peak_at_clock_gflops: Option<f64>,
    pub pct_of_peak_at_clock: Option<f64>,
    pub samples_ms: Vec<f64>,
    /// What ran, where the kernel name does not say it all (the cuBLASLt GEMM's type, size,
    /// layout and algorithm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthCeiling {
    /// `dram`, `l2`, `shared`.
    pub level: String,
    pub kernel: String,
    pub working_set_bytes: u64,
    pub gbs: f64,
    pub bytes_convention: String,
    pub samples_ms: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub working_set_bytes: u64,
    /// One pass per launch, buffers rotated (see `rotated_buffers`): a set that fits in L2
    /// is read from DRAM, not from the previous launch's L2 lines.
    pub gbs: f64,
    /// How many copies of the set the launches went round (together 4 × L2, or 1).
    #[serde(default)]
    pub rotated_buffers: u64,
    /// The same set swept many times inside one launch (loads through L2, not L1): the L2
    /// rate where the set fits, DRAM beyond.
    #[serde(default)]
    pub gbs_l2_resident: Option<f64>,
}

/// `roofline.gpu-ceilings/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuCeilings {
    /// `roofline.gpu-ceilings/1`.
    pub schema: String,
    /// The device measured.
    pub machine: GpuMachine,
    /// The SM clock measured by a kernel spinning on every SM, GHz.
    pub sm_clock_ghz_measured: Option<f64>,
    /// Compute ceilings, one per kernel and precision.
    pub compute: Vec<ComputeCeiling>,
    /// Bandwidth ceilings, one per level.
    pub bandwidth: Vec<BandwidthCeiling>,
    /// The working-set sweep the bandwidth levels were read from.
    pub sweep: Vec<SweepPoint>,
    /// The launch floor: seconds per launch of an empty kernel launched back to back (CUDA
    /// events around 200 launches, median of the batches).
    /// Kernels whose time per launch is near it are overhead-bound (`model::gpu::regime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_floor_s: Option<f64>,
    /// What could not be measured, and why (no cuBLASLt, a GEMM type cuBLASLt refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The energy roofs (`gpu ceilings --energy`): pJ per flop of each precision's kernels, pJ
    /// per HBM byte, the board's constant power, from its NVML counter (docs/energy.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::schema::energy::EnergyRoofs>,
}
