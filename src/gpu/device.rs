//! The GPU machine model: what the driver says (through cudarc, loaded at run time so the
//! binary runs where CUDA is absent) and theoretical peaks from a per-architecture table.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, sys::CUdevice_attribute as Attr};

pub const GPU_MACHINE_SCHEMA: &str = "roofline.gpu-machine/1";

/// Per-SM, per-cycle throughput of one architecture (dense, not sparse: ncu's generic tensor
/// peak metrics are the sparse ones, twice these).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArchRates {
    pub fp64_flops: f64,
    pub fp32_flops: f64,
    /// Packed HFMA2: 2 halves × FMA.
    pub fp16_flops: f64,
    pub tensor_bf16: f64,
    pub tensor_fp16: f64,
    pub tensor_tf32: f64,
    pub tensor_fp8: Option<f64>,
    pub tensor_int8: f64,
    pub tensor_fp64: f64,
}

/// Dense per-SM-per-cycle rates by compute capability (from NVIDIA's architecture
/// whitepapers; H100: 64 FP64 and 128 FP32 lanes per SM, 1024 dense bf16 FMA/cycle/SM).
pub fn arch_rates(cc: (i32, i32)) -> Option<ArchRates> {
    Some(match cc {
        (9, 0) => ArchRates {
            fp64_flops: 128.0,
            fp32_flops: 256.0,
            // Non-tensor FP16 (HFMA2) at the FP32 flop rate, not twice it: on GH100 "FP16x2
            // operations are dual-issued to both FMAheavy and FMAlite pipe" (NVIDIA, Nsight
            // Compute team, https://forums.developer.nvidia.com/t/separate-cuda-core-pipeline-for-fp16-and-fp32/302018/7),
            // so one HFMA2 warp instruction takes both FP32 pipes: 64 HFMA2 × 4 flops per SM
            // and cycle. NVIDIA's H100 tables print 2 × FP32 (133.8 TFLOP/s for the SXM5), which
            // no HFMA2 kernel reaches: ours measured 49 % of that on the H200, with the FMA
            // pipes saturated (tests/fixtures/ncu/fp16_pipes.csv: both pipes count every HFMA2).
            fp16_flops: 256.0,
            tensor_bf16: 4096.0,
            tensor_fp16: 4096.0,
            tensor_tf32: 2048.0,
            tensor_fp8: Some(8192.0),
            tensor_int8: 8192.0,
            tensor_fp64: 256.0,
        },
        (8, 0) => ArchRates {
            fp64_flops: 64.0,
            fp32_flops: 128.0,
            fp16_flops: 512.0,
            tensor_bf16: 2048.0,
            tensor_fp16: 2048.0,
            tensor_tf32: 1024.0,
            tensor_fp8: None,
            tensor_int8: 4096.0,
            tensor_fp64: 128.0,
        },
        (8, 6) | (8, 9) => ArchRates {
            fp64_flops: 4.0,
            fp32_flops: 256.0,
            fp16_flops: 256.0,
            tensor_bf16: 1024.0,
            tensor_fp16: 1024.0,
            tensor_tf32: 512.0,
            tensor_fp8: if cc.1 == 9 { Some(2048.0) } else { None },
            tensor_int8: 2048.0,
            tensor_fp64: 0.0,
        },
        (10, 0) => ArchRates {
            fp64_flops: 128.0,
            fp32_flops: 256.0,
            fp16_flops: 512.0,
            tensor_bf16: 8192.0,
            tensor_fp16: 8192.0,
            tensor_tf32: 4096.0,
            tensor_fp8: Some(16384.0),
            tensor_int8: 16384.0,
            tensor_fp64: 256.0,
        },
        _ => return None,
    })
}

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
}

/// Whether the CUDA driver library can be loaded (cudarc panics on first use otherwise).
pub fn driver_present() -> bool {
    // SAFETY: is_culib_present only tries to dlopen the driver library and reports success;
    // it does not call into the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

pub fn no_driver() -> Error {
    Error::unavailable(
        "no NVIDIA driver: libcuda.so could not be loaded",
        "run on a machine with an NVIDIA GPU and its driver (CPU reports need no GPU)",
    )
}

/// Open device `ordinal`, checking for the driver first.
pub fn open(ordinal: usize) -> Result<Arc<CudaContext>> {
    if !driver_present() {
        return Err(no_driver());
    }
    CudaContext::new(ordinal).map_err(|e| {
        Error::unavailable(
            format!("cannot open GPU {ordinal}: {e}"),
            "check nvidia-smi; is the device visible (CUDA_VISIBLE_DEVICES)?",
        )
    })
}

/// Query the driver and compute theoretical peaks at `sm_ghz` (default: the maximum clock).
pub fn query(ctx: &Arc<CudaContext>, sm_ghz: Option<f64>) -> Result<GpuMachine> {
    let attr = |a: Attr| ctx.attribute(a).ok().filter(|v| *v > 0);
    let name = ctx.name().unwrap_or_else(|_| "unknown NVIDIA GPU".into());
    let cc = ctx
        .compute_capability()
        .map_err(|e| Error::unavailable(format!("GPU query failed: {e}"), "check the driver"))?;
    let sms = attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).unwrap_or(0) as u32;
    let sm_clock_max_ghz = attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).map(|khz| khz as f64 / 1e6);
    let memory_clock_ghz = attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).map(|khz| khz as f64 / 1e6);
    let memory_bus_bits = attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).map(|b| b as u32);
    let mut m = GpuMachine {
        schema: GPU_MACHINE_SCHEMA.into(),
        kind: "gpu".into(),
        ordinal: ctx.ordinal(),
        name,
        compute_capability: format!("{}.{}", cc.0, cc.1),
        sms,
        sm_clock_max_ghz,
        memory_clock_ghz,
        memory_bus_bits,
        memory_bytes: ctx.total_mem().unwrap_or(0) as u64,
        l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).map(|b| b as u64),
        shared_per_sm_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR).map(|b| b as u64),
        peaks: GpuPeaks::default(),
        ncu_peaks: BTreeMap::new(),
        warnings: Vec::new(),
    };
    m.peaks = theoretical_peaks(cc, sms, sm_ghz.or(sm_clock_max_ghz), memory_clock_ghz, memory_bus_bits);
    if arch_rates(cc).is_none() {
        m.warnings.push(format!(
            "compute capability {}.{} is not in the peak table: compute peaks unknown",
            cc.0, cc.1
        ));
    }
    Ok(m)
}

/// Theoretical peaks (GFLOP/s, GB/s) from the architecture table.
pub fn theoretical_peaks(cc: (i32, i32), sms: u32, sm_ghz: Option<f64>, mem_ghz: Option<f64>, bus_bits: Option<u32>) -> GpuPeaks {
    let mut p = GpuPeaks {
        at_sm_ghz: sm_ghz,
        ..Default::default()
    };
    if let (Some(r), Some(ghz)) = (arch_rates(cc), sm_ghz) {
        let f = |per_sm: f64| per_sm * sms as f64 * ghz;
        p.fp64_gflops = Some(f(r.fp64_flops));
        p.fp32_gflops = Some(f(r.fp32_flops));
        p.fp16_gflops = Some(f(r.fp16_flops));
        p.tensor_gflops.insert("bf16".into(), f(r.tensor_bf16));
        p.tensor_gflops.insert("fp16".into(), f(r.tensor_fp16));
        p.tensor_gflops.insert("tf32".into(), f(r.tensor_tf32));
        if let Some(fp8) = r.tensor_fp8 {
            p.tensor_gflops.insert("fp8".into(), f(fp8));
        }
        p.tensor_gflops.insert("int8".into(), f(r.tensor_int8));
        if r.tensor_fp64 > 0.0 {
            p.tensor_gflops.insert("fp64".into(), f(r.tensor_fp64));
        }
    }
    if let (Some(mem), Some(bits)) = (mem_ghz, bus_bits) {
        p.dram_gbs = Some(mem * 2.0 * bits as f64 / 8.0);
    }
    p
}

/// Theoretical roofs (a report's `ceilings`) from a `roofline.gpu-machine/1` block: FP64 and
/// FP32 FMA peaks (no-FMA: half, one add or multiply per FMA slot), HBM bandwidth as the `dram`
/// roof, and the L2/L1 bandwidths when `gpu machine --ncu` measured them. None for any other
/// machine block, or one without peaks.
pub fn roofs_from_machine(machine: &serde_json::Value) -> Option<crate::report::Roofs> {
    if machine.get("schema").and_then(|s| s.as_str()) != Some(GPU_MACHINE_SCHEMA) {
        return None;
    }
    let p: GpuPeaks = serde_json::from_value(machine.get("peaks")?.clone()).ok()?;
    let ok = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    let mut compute = BTreeMap::new();
    for (precision, peak) in [("double", p.fp64_gflops), ("single", p.fp32_gflops)] {
        if let Some(g) = ok(peak) {
            compute.insert(format!("{precision}.gpu.fma"), g);
            compute.insert(format!("{precision}.gpu.nofma"), g / 2.0);
        }
    }
    let bandwidth: BTreeMap<String, f64> = [("dram", p.dram_gbs), ("l2", p.l2_gbs), ("l1", p.l1_gbs)]
        .into_iter()
        .filter_map(|(l, g)| ok(g).map(|g| (l.to_string(), g)))
        .collect();
    if compute.is_empty() && bandwidth.is_empty() {
        return None;
    }
    Some(crate::report::Roofs {
        kind: "theoretical".into(),
        compute_gflops: compute,
        bandwidth_traffic_gbs: bandwidth.clone(),
        bandwidth_gbs: bandwidth,
        threads: None,
        ..Default::default()
    })
}

/// Fold ncu's `*.peak_sustained` figures (per cycle) into the peaks at the SM clock.
pub fn apply_ncu_peaks(m: &mut GpuMachine, ncu: &BTreeMap<String, f64>) {
    let ghz = m.peaks.at_sm_ghz.or(m.sm_clock_max_ghz);
    let get = |k: &str| ncu.get(k).copied();
    if let Some(ghz) = ghz {
        if let Some(b) = get("lts__t_bytes.sum.peak_sustained") {
            m.peaks.l2_gbs = Some(b * ghz);
        }
        if let Some(b) = get("l1tex__t_bytes.sum.peak_sustained") {
            m.peaks.l1_gbs = Some(b * ghz);
        }
    }
    // DRAM bytes/cycle are per DRAM cycle.
    if let (Some(b), Some(hz)) = (get("dram__bytes.sum.peak_sustained"), get("dram__cycles_elapsed.avg.per_second")) {
        m.peaks.dram_gbs = Some(b * hz / 1e9);
    }
    m.ncu_peaks = ncu.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h100_h200_peaks_from_the_table() {
        // H200: 132 SMs at 1.98 GHz: FP64 = 132·128·1.98 = 33,454 GFLOP/s; bf16 dense 1,070 TFLOP/s;
        // HBM3e: 3.201 GHz × 2 × 6144 bits / 8 = 4,917 GB/s.
        let p = theoretical_peaks((9, 0), 132, Some(1.98), Some(3.201), Some(6144));
        assert!((p.fp64_gflops.unwrap() - 33454.08).abs() < 0.1);
        assert!((p.fp32_gflops.unwrap() - 66908.16).abs() < 0.1);
        assert!((p.tensor_gflops["bf16"] - 1_070_530.56).abs() < 1.0);
        assert!((p.dram_gbs.unwrap() - 4917.0).abs() < 1.0);
        // FP16 (HFMA2, non-tensor) on sm_90 at FP32's flop rate: 132 · 256 · 1.98.
        assert_eq!(p.fp16_gflops, p.fp32_gflops);
        let unknown = theoretical_peaks((3, 0), 10, Some(1.0), None, None);
        assert!(unknown.fp64_gflops.is_none() && unknown.dram_gbs.is_none());
    }

    #[test]
    fn roofs_from_a_gpu_machine_block() {
        let peaks = theoretical_peaks((9, 0), 132, Some(1.98), Some(3.201), Some(6144));
        let m = serde_json::json!({"schema": GPU_MACHINE_SCHEMA, "kind": "gpu", "peaks": peaks});
        let r = roofs_from_machine(&m).unwrap();
        // 132 SMs × 128 FP64 flops/cycle × 1.98 GHz; FP32 twice that; HBM 3.201 × 2 × 6144 / 8.
        assert!((r.compute_gflops["double.gpu.fma"] - 33454.08).abs() < 1e-6);
        assert!((r.compute_gflops["double.gpu.nofma"] - 16727.04).abs() < 1e-6);
        assert!((r.compute_gflops["single.gpu.fma"] - 66908.16).abs() < 1e-6);
        assert!((r.bandwidth_gbs["dram"] - 4916.736).abs() < 1e-6);
        assert_eq!(r.bandwidth_traffic_gbs["dram"], r.bandwidth_gbs["dram"]);
        assert!(!r.bandwidth_gbs.contains_key("l2"));
        assert_eq!(r.kind, "theoretical");
        // Not a GPU machine block, or no peaks: no roofs.
        assert!(roofs_from_machine(&serde_json::json!({"kind": "gpu", "device": "H200"})).is_none());
        assert!(roofs_from_machine(&serde_json::json!({"schema": GPU_MACHINE_SCHEMA, "peaks": {}})).is_none());
    }

    #[test]
    fn sparse_ncu_tensor_peak_is_twice_the_dense_table() {
        // peaks.csv (H200): sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained = 1,081,344
        // ops/cycle for the whole device, i.e. 8192 per SM: the sparse rate.
        let dense = arch_rates((9, 0)).unwrap().tensor_bf16;
        assert_eq!(1_081_344.0 / 132.0, 2.0 * dense);
    }
}
