//! GPU ceilings measured with our own kernels (NVRTC-compiled `kernels/gpu/kernels.cu`):
//! HBM/L2/shared bandwidth (load, copy, triad; a working-set sweep) and FP64/FP32/FP16 FMA
//! and bf16 tensor peaks. CUDA-event timing, warm-up, median of many launches, and the SM
//! clock measured during the run (clock64 against %globaltimer), so each peak is also given
//! as a percentage of the theoretical peak at that clock.
//!
//! Bytes convention: what the kernel's loads and stores request (triad 24 B/element, copy
//! 16, load 8). GPUs write whole sectors without reading them first: no write-allocate term.

use serde::{Deserialize, Serialize};

use super::device::{self, GpuMachine};
use super::kernels::{KArg, Suite, cuda_err, grid_for, time_median};
use crate::error::Result;
use cudarc::driver::LaunchConfig;

pub const GPU_CEILINGS_SCHEMA: &str = "roofline.gpu-ceilings/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeCeiling {
    /// `fp64`, `fp32`, `fp16`, `tensor_bf16`.
    pub precision: String,
    pub kernel: String,
    pub gflops: f64,
    /// Theoretical peak at the SM clock measured during the run.
    pub peak_at_clock_gflops: Option<f64>,
    pub pct_of_peak_at_clock: Option<f64>,
    pub samples_ms: Vec<f64>,
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
    pub gbs: f64,
}

/// `roofline.gpu-ceilings/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuCeilings {
    pub schema: String,
    pub machine: GpuMachine,
    pub sm_clock_ghz_measured: Option<f64>,
    pub compute: Vec<ComputeCeiling>,
    pub bandwidth: Vec<BandwidthCeiling>,
    pub sweep: Vec<SweepPoint>,
}

/// Options: `quick` uses fewer repetitions and a shorter sweep.
pub struct Options {
    pub quick: bool,
    pub ordinal: usize,
}

/// The SM clock while a kernel spins for `spin_ns` on every SM: cycles over nanoseconds.
pub fn measure_sm_clock(suite: &Suite, sms: u32) -> Result<f64> {
    let f = suite.function("sm_clock")?;
    let blocks = sms.max(1) as usize;
    let out = suite.stream.alloc_zeros::<i64>(2 * blocks).map_err(cuda_err("alloc"))?;
    let spin_ns: i64 = 20_000_000;
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    time_median(suite, &f, cfg, 1, 1, &[suite.ptr(&out), KArg::I64(spin_ns)])?;
    let host = suite.stream.clone_dtoh(&out).map_err(cuda_err("copy back"))?;
    let mut ghz: Vec<f64> = host.chunks(2).filter(|c| c[1] > 0).map(|c| c[0] as f64 / c[1] as f64).collect();
    ghz.sort_by(|a, b| a.total_cmp(b));
    Ok(ghz.get(ghz.len() / 2).copied().unwrap_or(0.0))
}

pub fn measure(opts: &Options, progress: &dyn Fn(&str)) -> Result<GpuCeilings> {
    let ctx = device::open(opts.ordinal)?;
    let mut machine = device::query(&ctx, None)?;
    let suite = Suite::compile(ctx)?;
    let reps = if opts.quick { 5 } else { 20 };
    progress("SM clock");
    let clock0 = measure_sm_clock(&suite, machine.sms)?;

    // Compute peaks: 8 SM-resident blocks of 1024 threads per SM.
    let threads = machine.sms as usize * 8 * 1024;
    let cfg = LaunchConfig {
        grid_dim: (machine.sms * 8, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut compute = Vec::new();
    let out_f64 = suite.stream.alloc_zeros::<f64>(threads).map_err(cuda_err("alloc"))?;
    let out_f32 = suite
        .stream
        .alloc_zeros::<f32>(threads * 256 / 32 + threads)
        .map_err(cuda_err("alloc"))?;
    let iters: i32 = if opts.quick { 4000 } else { 20000 };
    progress("FP64 FMA peak");
    let f = suite.function("dfma_peak")?;
    let (ms, s) = time_median(&suite, &f, cfg, 1, reps, &[suite.ptr(&out_f64), KArg::I32(iters)])?;
    compute.push((
        "fp64",
        "dfma_peak",
        2.0 * 8.0 * iters as f64 * threads as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    progress("FP32 FMA peak");
    let f = suite.function("ffma_peak")?;
    let (ms, s) = time_median(&suite, &f, cfg, 1, reps, &[suite.ptr(&out_f32), KArg::I32(iters)])?;
    compute.push((
        "fp32",
        "ffma_peak",
        2.0 * 8.0 * iters as f64 * threads as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    progress("FP16 HFMA2 peak");
    let f = suite.function("hfma2_peak")?;
    let out_h = suite.stream.alloc_zeros::<u32>(threads).map_err(cuda_err("alloc"))?;
    let (ms, s) = time_median(&suite, &f, cfg, 1, reps, &[suite.ptr(&out_h), KArg::I32(iters)])?;
    compute.push((
        "fp16",
        "hfma2_peak",
        4.0 * 8.0 * iters as f64 * threads as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    progress("bf16 tensor peak");
    let f = suite.function("bf16_mma_peak")?;
    let warps = threads / 32;
    let (ms, s) = time_median(&suite, &f, cfg, 1, reps, &[suite.ptr(&out_f32), KArg::I32(iters)])?;
    compute.push((
        "tensor_bf16",
        "bf16_mma_peak",
        2.0 * 4096.0 * 4.0 * iters as f64 * warps as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    let clock1 = measure_sm_clock(&suite, machine.sms)?;
    let clock = if clock0 > 0.0 && clock1 > 0.0 {
        Some(0.5 * (clock0 + clock1))
    } else {
        None
    };
    let cc: Vec<i32> = machine.compute_capability.split('.').filter_map(|x| x.parse().ok()).collect();
    let at_clock = device::theoretical_peaks((cc[0], cc.get(1).copied().unwrap_or(0)), machine.sms, clock, None, None);
    let compute: Vec<ComputeCeiling> = compute
        .into_iter()
        .map(|(prec, kernel, gflops, samples_ms)| {
            let peak = match prec {
                "fp64" => at_clock.fp64_gflops,
                "fp32" => at_clock.fp32_gflops,
                "fp16" => at_clock.fp16_gflops,
                _ => at_clock.tensor_gflops.get("bf16").copied(),
            };
            ComputeCeiling {
                precision: prec.into(),
                kernel: kernel.into(),
                gflops,
                peak_at_clock_gflops: peak,
                pct_of_peak_at_clock: peak.map(|p| 100.0 * gflops / p),
                samples_ms,
            }
        })
        .collect();

    // Bandwidth at HBM size: arrays far beyond L2 (1 GiB each in the full run).
    let n: usize = if opts.quick { 1 << 25 } else { 1 << 27 };
    let mut bandwidth = Vec::new();
    let a = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
    let b = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
    let c = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
    progress("HBM triad/copy/load");
    let ul = n as u64;
    let s_val = 3.0f64;
    let f = suite.function("triad")?;
    let (ms, s) = time_median(
        &suite,
        &f,
        grid_for(n, 256),
        2,
        reps,
        &[suite.ptr(&c), suite.ptr(&a), suite.ptr(&b), KArg::F64(s_val), KArg::U64(ul)],
    )?;
    bandwidth.push(BandwidthCeiling {
        level: "dram".into(),
        kernel: "triad".into(),
        working_set_bytes: 24 * ul,
        gbs: 24.0 * n as f64 / (ms * 1e-3) / 1e9,
        bytes_convention: "requested bytes (no write-allocate on GPUs)".into(),
        samples_ms: s,
    });
    let n2 = (n / 2) as u64;
    let f = suite.function("copy_f64")?;
    let (ms, s) = time_median(
        &suite,
        &f,
        grid_for(n / 2, 256),
        2,
        reps,
        &[suite.ptr(&a), suite.ptr(&c), KArg::U64(n2)],
    )?;
    bandwidth.push(BandwidthCeiling {
        level: "dram".into(),
        kernel: "copy".into(),
        working_set_bytes: 16 * ul,
        gbs: 16.0 * n as f64 / (ms * 1e-3) / 1e9,
        bytes_convention: "requested bytes (no write-allocate on GPUs)".into(),
        samples_ms: s,
    });
    let f = suite.function("load_f64")?;
    let sink = suite.stream.alloc_zeros::<f64>(1).map_err(cuda_err("alloc"))?;
    let load_cfg = LaunchConfig {
        grid_dim: (machine.sms * 16, 1, 1),
        block_dim: (512, 1, 1),
        shared_mem_bytes: 0,
    };
    let (ms, s) = time_median(&suite, &f, load_cfg, 2, reps, &[suite.ptr(&a), suite.ptr(&sink), KArg::U64(n2)])?;
    bandwidth.push(BandwidthCeiling {
        level: "dram".into(),
        kernel: "load".into(),
        working_set_bytes: 8 * ul,
        gbs: 8.0 * n as f64 / (ms * 1e-3) / 1e9,
        bytes_convention: "requested bytes".into(),
        samples_ms: s,
    });

    // Working-set sweep with the load kernel: L2-resident sets (repeated launches over the
    // same buffer) up to HBM-sized ones.
    progress("working-set sweep");
    let mut sweep = Vec::new();
    let mut bytes: u64 = 1 << 20;
    let top = 8 * ul;
    while bytes <= top {
        let m2 = bytes / 16;
        let (ms, _) = time_median(
            &suite,
            &f,
            load_cfg,
            2,
            if opts.quick { 5 } else { 15 },
            &[suite.ptr(&a), suite.ptr(&sink), KArg::U64(m2)],
        )?;
        sweep.push(SweepPoint {
            working_set_bytes: bytes,
            gbs: bytes as f64 / (ms * 1e-3) / 1e9,
        });
        bytes *= 2;
    }
    // L2: a buffer of a quarter of the L2, swept many times inside one launch.
    if let Some(l2) = machine.l2_bytes {
        progress("L2 bandwidth");
        let f = suite.function("load_passes_f64")?;
        let l2_n2 = (l2 / 4 / 16).max(1);
        let passes: i32 = 64;
        let (ms, s) = time_median(
            &suite,
            &f,
            load_cfg,
            2,
            reps,
            &[suite.ptr(&a), suite.ptr(&sink), KArg::U64(l2_n2), KArg::I32(passes)],
        )?;
        let bytes = 16.0 * l2_n2 as f64 * passes as f64;
        bandwidth.push(BandwidthCeiling {
            level: "l2".into(),
            kernel: "load_passes".into(),
            working_set_bytes: 16 * l2_n2,
            gbs: bytes / (ms * 1e-3) / 1e9,
            bytes_convention: "requested bytes".into(),
            samples_ms: s,
        });
    }
    progress("shared-memory bandwidth");
    let f = suite.function("shared_load")?;
    let sh_iters: i32 = if opts.quick { 20000 } else { 100000 };
    let sh_cfg = LaunchConfig {
        grid_dim: (machine.sms * 2, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    let (ms, s) = time_median(&suite, &f, sh_cfg, 1, reps, &[suite.ptr(&out_f32), KArg::I32(sh_iters)])?;
    let sh_bytes = 16.0 * sh_iters as f64 * (machine.sms as f64 * 2.0 * 1024.0);
    bandwidth.push(BandwidthCeiling {
        level: "shared".into(),
        kernel: "shared_load".into(),
        working_set_bytes: 16 * 1024,
        gbs: sh_bytes / (ms * 1e-3) / 1e9,
        bytes_convention: "bytes read from shared memory".into(),
        samples_ms: s,
    });
    machine.peaks = device::theoretical_peaks(
        (cc[0], cc.get(1).copied().unwrap_or(0)),
        machine.sms,
        machine.sm_clock_max_ghz,
        machine.memory_clock_ghz,
        machine.memory_bus_bits,
    );
    Ok(GpuCeilings {
        schema: GPU_CEILINGS_SCHEMA.into(),
        machine,
        sm_clock_ghz_measured: clock,
        compute,
        bandwidth,
        sweep,
    })
}
