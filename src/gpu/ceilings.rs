//! GPU ceilings measured with our own kernels (NVRTC-compiled `kernels/gpu/kernels.cu`):
//! HBM/L2/shared bandwidth (load, copy, triad; a working-set sweep) and FP64/FP32/FP16 FMA
//! and bf16 tensor (WMMA) peaks; beside them the tensor ceilings of cuBLASLt GEMMs (`blas`). CUDA-event timing, warm-up, median of many launches, and the SM
//! clock measured during the run (clock64 against %globaltimer), so each peak is also given
//! as a percentage of the theoretical peak at that clock.
//!
//! Bytes convention: what the kernel's loads and stores request (triad 24 B/element, copy
//! 16, load 8). GPUs write whole sectors without reading them first: no write-allocate term.

use super::device;
use super::kernels::{KArg, Suite, cuda_err, grid_for, rotation_count, time_median, time_median_rotated};
use crate::error::Result;
use crate::model::gpu::theoretical_peaks;
use crate::schema::gpu::{BandwidthCeiling, ComputeCeiling, GPU_CEILINGS_SCHEMA, GpuCeilings, GpuMachine, GpuPeaks, SweepPoint};
use cudarc::driver::CudaSlice;
use cudarc::driver::DevicePtr;
use cudarc::driver::LaunchConfig;

/// Options: `quick` uses fewer repetitions and a shorter sweep.
pub struct Options {
    /// Fewer repetitions and a shorter sweep.
    pub quick: bool,
    /// The CUDA device ordinal.
    pub ordinal: usize,
    /// Also the energy roofs, from the board's NVML counter.
    pub energy: Option<crate::counters::energy::EnergyOptions>,
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
    let ghz: Vec<f64> = host.chunks(2).filter(|c| c[1] > 0).map(|c| c[0] as f64 / c[1] as f64).collect();
    Ok(crate::schema::stats::median(&ghz).unwrap_or(0.0))
}

/// The largest power of two not above `x` (0 for 0).
pub fn pow2_floor(x: u64) -> u64 {
    if x == 0 { 0 } else { 1 << (63 - x.leading_zeros()) }
}

/// Measure the device's ceilings (compute per precision, bandwidth per level); `progress` gets one line per step.
pub fn measure(opts: &Options, progress: &dyn Fn(&str)) -> Result<GpuCeilings> {
    let ctx = device::open(opts.ordinal)?;
    let mut machine = device::query(&ctx, None)?;
    // The idle power first, the context open and nothing run yet.
    let energy = match opts.energy {
        Some(o) => {
            progress("idle power (NVML energy counter)");
            Some(super::energy::start(&ctx, o)?)
        }
        None => None,
    };
    let suite = Suite::compile(ctx)?;
    let reps = if opts.quick { 5 } else { 20 };
    progress("SM clock");
    let clock0 = measure_sm_clock(&suite, machine.sms)?;
    progress("launch floor (empty kernel)");
    let launch_floor_s = measure_launch_floor(&suite, opts.quick)?;

    let threads = compute_threads(machine.sms);
    let out_f64 = suite.stream.alloc_zeros::<f64>(threads).map_err(cuda_err("alloc"))?;
    let out_f32 = suite
        .stream
        .alloc_zeros::<f32>(threads * 256 / 32 + threads)
        .map_err(cuda_err("alloc"))?;
    let mut compute = measure_fma_peaks(&suite, machine.sms, (&out_f64, &out_f32), opts.quick, reps, progress)?;
    // The clock of the FMA kernels: measured before and right after them, not after the
    // GEMMs below (which run power-limited, clocks lowered, and would pull the average under
    // the clock the FMA kernels ran at: FFMA read 102.6 % of a peak "at 1.880 GHz").
    let clock1 = measure_sm_clock(&suite, machine.sms)?;
    let mut notes = Vec::new();
    let gemm_rates = measure_gemm_ceilings(&suite, &machine, opts.quick, progress, &mut notes);
    compute.extend(
        gemm_rates
            .iter()
            .map(|g| (gemm_precision(g.ty), "cublaslt_gemm", g.gflops, g.samples_ms.clone())),
    );
    let clock = if clock0 > 0.0 && clock1 > 0.0 {
        Some(0.5 * (clock0 + clock1))
    } else {
        None
    };
    let peak_clock = clock_for_peaks(clock, machine.sm_clock_max_ghz, &mut notes);
    let cc: Vec<i32> = machine.compute_capability.split('.').filter_map(|x| x.parse().ok()).collect();
    let at_clock = theoretical_peaks((cc[0], cc.get(1).copied().unwrap_or(0)), machine.sms, peak_clock, None, None);
    let compute = compute_ceilings(compute, &at_clock, &gemm_rates);

    let arrays = StreamArrays::alloc(&suite, opts.quick)?;
    progress("HBM triad/copy/load");
    let mut bandwidth = measure_dram_bandwidth(&suite, &arrays, machine.sms, reps)?;
    // Working-set sweep with one pass of the load kernel per launch, buffers rotated: at each
    // set size the launches go round enough windows of the big array to span 4 × L2, so a set
    // that fits in L2 is read from DRAM again, not hit in L2 from the previous launch
    // (`gbs`); beside it the same set swept many times inside one launch, L2-resident where it
    // fits (`gbs_l2_resident`).
    progress("working-set sweep (rotated buffers, and L2-resident passes)");
    let sweep = measure_sweep(&suite, &arrays, &machine, opts.quick)?;
    if let Some(l2) = machine.l2_bytes {
        progress("L2 bandwidth (load, copy, triad)");
        bandwidth.extend(measure_l2_bandwidth(&suite, &arrays, machine.sms, l2, opts.quick, reps)?);
    }
    progress("shared-memory bandwidth (load, copy, triad)");
    bandwidth.extend(measure_shared_bandwidth(&suite, machine.sms, &out_f32, opts.quick, reps)?);
    let energy = match &energy {
        Some(e) => Some(super::energy::measure_roofs(&suite, e, machine.sms, &gemm_rates, progress)?),
        None => None,
    };
    machine.peaks = theoretical_peaks(
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
        launch_floor_s,
        notes,
        energy,
    })
}

/// The launch floor in seconds, median of the batches (`None` where the timing read zero).
fn measure_launch_floor(suite: &Suite, quick: bool) -> Result<Option<f64>> {
    let f = suite.function("empty_kernel")?;
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    // Back-to-back launches between one pair of events, per launch: the spacing a stream
    // of launches cannot go under (one launch between events would add the events' cost).
    let per_batch = 200;
    super::kernels::timed_launches(suite, &f, cfg, &[KArg::U64(0)], per_batch)?;
    let mut v = Vec::new();
    for _ in 0..if quick { 5 } else { 21 } {
        v.push(super::kernels::timed_launches(suite, &f, cfg, &[KArg::U64(0)], per_batch)? / per_batch as f64);
    }
    let ms = crate::schema::stats::median(&v).unwrap_or(0.0);
    Ok((ms > 0.0).then_some(ms * 1e-3))
}

/// A compute rate before it is set against the theoretical peak: precision, kernel, GFLOP/s
/// and the samples (ms).
type MeasuredCompute = (&'static str, &'static str, f64, Vec<f64>);

/// Threads of the compute-peak launches: 8 SM-resident blocks of 1024 threads per SM.
fn compute_threads(sms: u32) -> usize {
    sms as usize * 8 * 1024
}

/// The FP64, FP32 and FP16 FMA peaks and the bf16 WMMA peak of our own kernels, each launch
/// `compute_threads` threads writing into `outs` (an f64 and an f32 buffer of that many).
fn measure_fma_peaks(
    suite: &Suite,
    sms: u32,
    outs: (&CudaSlice<f64>, &CudaSlice<f32>),
    quick: bool,
    reps: usize,
    progress: &dyn Fn(&str),
) -> Result<Vec<MeasuredCompute>> {
    let (out_f64, out_f32) = outs;
    let threads = compute_threads(sms);
    let cfg = LaunchConfig {
        grid_dim: (sms * 8, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut compute = Vec::new();
    let iters: i32 = if quick { 4000 } else { 20000 };
    progress("FP64 FMA peak");
    let f = suite.function("dfma_peak")?;
    let (ms, s) = time_median(suite, &f, cfg, 1, reps, &[suite.ptr(out_f64), KArg::I32(iters)])?;
    compute.push((
        "fp64",
        "dfma_peak",
        2.0 * 8.0 * iters as f64 * threads as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    progress("FP32 FMA peak");
    let f = suite.function("ffma_peak")?;
    let (ms, s) = time_median(suite, &f, cfg, 1, reps, &[suite.ptr(out_f32), KArg::I32(iters)])?;
    compute.push((
        "fp32",
        "ffma_peak",
        2.0 * 8.0 * iters as f64 * threads as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    progress("FP16 HFMA2 peak");
    let f = suite.function("hfma2_peak")?;
    let out_h = suite.stream.alloc_zeros::<u32>(threads).map_err(cuda_err("alloc"))?;
    let (ms, s) = time_median(suite, &f, cfg, 1, reps, &[suite.ptr(&out_h), KArg::I32(iters)])?;
    compute.push((
        "fp16",
        "hfma2_peak",
        4.0 * 8.0 * iters as f64 * threads as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    progress("bf16 tensor peak");
    let f = suite.function("bf16_mma_peak")?;
    let warps = threads / 32;
    let (ms, s) = time_median(suite, &f, cfg, 1, reps, &[suite.ptr(out_f32), KArg::I32(iters)])?;
    compute.push((
        "tensor_bf16",
        "bf16_mma_peak",
        2.0 * 4096.0 * 4.0 * iters as f64 * warps as f64 / (ms * 1e-3) / 1e9,
        s,
    ));
    Ok(compute)
}

/// Tensor ceilings from cuBLASLt GEMMs at sizes that fill the GPU (a roof below what
/// cuBLAS reaches is no roof): bf16, fp16, tf32, fp8 where the architecture has it, FP64
/// DMMA; each the fastest (size, layout, algorithm) found. Where cuBLASLt cannot be
/// loaded the WMMA figure stays alone, said in `notes`; so is a type cuBLASLt refused.
fn measure_gemm_ceilings(
    suite: &Suite,
    machine: &GpuMachine,
    quick: bool,
    progress: &dyn Fn(&str),
    notes: &mut Vec<String>,
) -> Vec<super::blas::GemmRate> {
    let cc_pair = {
        let v: Vec<i32> = machine.compute_capability.split('.').filter_map(|x| x.parse().ok()).collect();
        (v.first().copied().unwrap_or(0), v.get(1).copied().unwrap_or(0))
    };
    let blas = match super::blas::Blas::new(suite) {
        Ok(blas) => blas,
        Err(e) => {
            notes.push(format!("no cuBLASLt tensor ceilings: {e}"));
            return Vec::new();
        }
    };
    let has_fp8 = crate::model::gpu::arch_rates(cc_pair).is_some_and(|r| r.tensor_fp8.is_some());
    let has_dmma = crate::model::gpu::arch_rates(cc_pair).is_some_and(|r| r.tensor_fp64 > 0.0);
    let sizes: &[usize] = if quick { &[8192] } else { &[8192, 16384] };
    let mut best: Vec<super::blas::GemmRate> = Vec::new();
    for ty in gemm_order(has_dmma, has_fp8, quick) {
        if notes.iter().any(|n: &String| n.starts_with(&format!("cuBLASLt {}:", ty.key()))) {
            continue;
        }
        progress(&format!("cuBLASLt {} GEMM", ty.key()));
        std::thread::sleep(std::time::Duration::from_secs(1));
        // FP64 at 16384 takes ~0.16 s a launch: 8192 is enough to fill the GPU.
        let sz: &[usize] = if ty == super::blas::GemmType::Fp64 { &sizes[..1] } else { sizes };
        match blas.best(ty, sz, if quick { 5 } else { 20 }) {
            Ok(g) => match best.iter_mut().find(|b| b.ty == ty) {
                Some(b) if g.gflops > b.gflops => *b = g,
                Some(_) => {}
                None => best.push(g),
            },
            Err(e) => notes.push(format!("cuBLASLt {}: {e}", ty.key())),
        }
    }
    best
}

/// The GEMM types in the order they are measured.
///
/// A roof bounds every rate a kernel can reach, a short burst on a cool GPU included: GEMMs
/// run power-limited, their rate falls as the GPU heats (the same bf16 GEMM: 805 TFLOP/s in
/// one session, 758 in another; fp8 1354 and 685). So each type is measured after a second
/// of idle, in two passes (the second in reverse order; one pass when `quick`), and its
/// ceiling is the fastest launch seen. FP64 first: DMMA draws the most power.
fn gemm_order(has_dmma: bool, has_fp8: bool, quick: bool) -> Vec<super::blas::GemmType> {
    let mut types: Vec<super::blas::GemmType> = [
        super::blas::GemmType::Fp64,
        super::blas::GemmType::Bf16,
        super::blas::GemmType::Fp16,
        super::blas::GemmType::Tf32,
        super::blas::GemmType::Fp8,
    ]
    .into_iter()
    .filter(|ty| (has_dmma || *ty != super::blas::GemmType::Fp64) && (has_fp8 || *ty != super::blas::GemmType::Fp8))
    .collect();
    if !quick {
        let back: Vec<_> = types.iter().rev().copied().collect();
        types.extend(back);
    }
    types
}

/// The `precision` a cuBLASLt GEMM type's ceiling is filed under.
fn gemm_precision(ty: super::blas::GemmType) -> &'static str {
    match ty {
        super::blas::GemmType::Bf16 => "tensor_bf16",
        super::blas::GemmType::Fp16 => "tensor_fp16",
        super::blas::GemmType::Tf32 => "tensor_tf32",
        super::blas::GemmType::Fp8 => "tensor_fp8",
        super::blas::GemmType::Fp64 => "tensor_fp64",
    }
}

/// The SM clock the theoretical peaks are taken at: the measured one, or the driver's maximum
/// where the measurement reads above it (said in `notes`).
///
/// No SM runs above the driver's maximum clock: a measured clock above it is the
/// clock64-against-%globaltimer comparison overstating (2.033 GHz on an H100 whose
/// maximum is 1.980), and the peaks are taken at the maximum.
fn clock_for_peaks(clock: Option<f64>, sm_clock_max_ghz: Option<f64>, notes: &mut Vec<String>) -> Option<f64> {
    match (clock, sm_clock_max_ghz) {
        (Some(c), Some(max)) if c > max => {
            notes.push(format!(
                "SM clock measured {c:.3} GHz, above the driver's maximum {max:.3} GHz: peaks at {max:.3} GHz"
            ));
            Some(max)
        }
        (c, _) => c,
    }
}

/// The measured compute rates as ceilings, each against the theoretical peak at the clock
/// (`at_clock`), the cuBLASLt ones with what ran.
fn compute_ceilings(measured: Vec<MeasuredCompute>, at_clock: &GpuPeaks, gemm_rates: &[super::blas::GemmRate]) -> Vec<ComputeCeiling> {
    measured
        .into_iter()
        .map(|(prec, kernel, gflops, samples_ms)| {
            let peak = match prec {
                "fp64" => at_clock.fp64_gflops,
                "fp32" => at_clock.fp32_gflops,
                "fp16" => at_clock.fp16_gflops,
                t => at_clock.tensor_gflops.get(t.trim_start_matches("tensor_")).copied(),
            };
            let gemm = (kernel == "cublaslt_gemm")
                .then(|| gemm_rates.iter().find(|g| format!("tensor_{}", g.ty.key()) == prec))
                .flatten();
            ComputeCeiling {
                precision: prec.into(),
                kernel: kernel.into(),
                detail: gemm.map(|g| g.describe()),
                gflops,
                peak_at_clock_gflops: peak,
                pct_of_peak_at_clock: peak.map(|p| 100.0 * gflops / p),
                samples_ms,
            }
        })
        .collect()
}

/// The triad's scalar, in HBM and in L2.
const TRIAD_SCALAR: f64 = 3.0;

/// The arrays of the bandwidth measurements: three of `n` f64 at HBM size (far beyond L2,
/// 1 GiB each in the full run) and the load kernels' one-element sink.
struct StreamArrays {
    n: usize,
    a: CudaSlice<f64>,
    b: CudaSlice<f64>,
    c: CudaSlice<f64>,
    sink: CudaSlice<f64>,
}

impl StreamArrays {
    fn alloc(suite: &Suite, quick: bool) -> Result<StreamArrays> {
        let n: usize = if quick { 1 << 25 } else { 1 << 27 };
        let a = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
        let b = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
        let c = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
        let sink = suite.stream.alloc_zeros::<f64>(1).map_err(cuda_err("alloc"))?;
        Ok(StreamArrays { n, a, b, c, sink })
    }
}

/// HBM bandwidth: triad, copy and load over the arrays at HBM size.
fn measure_dram_bandwidth(suite: &Suite, arrays: &StreamArrays, sms: u32, reps: usize) -> Result<Vec<BandwidthCeiling>> {
    let StreamArrays { n, a, b, c, sink } = arrays;
    let n = *n;
    let mut bandwidth = Vec::new();
    let ul = n as u64;
    let f = suite.function("triad")?;
    let (ms, s) = time_median(
        suite,
        &f,
        grid_for(n, 256),
        2,
        reps,
        &[suite.ptr(c), suite.ptr(a), suite.ptr(b), KArg::F64(TRIAD_SCALAR), KArg::U64(ul)],
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
        suite,
        &f,
        grid_for(n / 2, 256),
        2,
        reps,
        &[suite.ptr(a), suite.ptr(c), KArg::U64(n2)],
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
    let load_cfg = LaunchConfig {
        grid_dim: (sms * 16, 1, 1),
        block_dim: (512, 1, 1),
        shared_mem_bytes: 0,
    };
    let (ms, s) = time_median(suite, &f, load_cfg, 2, reps, &[suite.ptr(a), suite.ptr(sink), KArg::U64(n2)])?;
    bandwidth.push(BandwidthCeiling {
        level: "dram".into(),
        kernel: "load".into(),
        working_set_bytes: 8 * ul,
        gbs: 8.0 * n as f64 / (ms * 1e-3) / 1e9,
        bytes_convention: "requested bytes".into(),
        samples_ms: s,
    });
    Ok(bandwidth)
}

/// The launch of the wrapping (`*_wrap_f64`) kernels of the sweep and the L2 measurements.
fn wrap_launch_config(sms: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (sms.max(1) * 8, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The working-set sweep, from 1 MiB up to the room of the first array, doubling: at each set
/// one pass per launch with buffers rotated over 4 × L2 (`gbs`), and many passes inside one
/// launch (`gbs_l2_resident`).
fn measure_sweep(suite: &Suite, arrays: &StreamArrays, machine: &GpuMachine, quick: bool) -> Result<Vec<SweepPoint>> {
    let wrap_cfg = wrap_launch_config(machine.sms);
    let f_load = suite.function("load_wrap_f64")?;
    let l2_bytes = machine.l2_bytes.unwrap_or(64 << 20);
    let room = 8 * arrays.n as u64;
    let resident_target: u64 = if quick { 256 << 20 } else { 1 << 30 };
    let base = {
        let (p, _sync) = arrays.a.device_ptr(&suite.stream);
        p
    };
    let mut sweep = Vec::new();
    let mut bytes: u64 = 1 << 20;
    while bytes <= room {
        let n2 = bytes / 16;
        let k = rotation_count(bytes, 4 * l2_bytes, room);
        let sets: Vec<Vec<KArg>> = (0..k)
            .map(|i| {
                vec![
                    KArg::Ptr(base + i * bytes),
                    suite.ptr(&arrays.sink),
                    KArg::U64(n2 - 1),
                    KArg::U64(n2),
                ]
            })
            .collect();
        let (ms, _) = time_median_rotated(suite, &f_load, wrap_cfg, if quick { 7 } else { 21 }, &sets)?;
        let total = (resident_target / 16).max(n2);
        let (ms_hot, _) = time_median(
            suite,
            &f_load,
            wrap_cfg,
            1,
            if quick { 3 } else { 7 },
            &[KArg::Ptr(base), suite.ptr(&arrays.sink), KArg::U64(n2 - 1), KArg::U64(total)],
        )?;
        sweep.push(SweepPoint {
            working_set_bytes: bytes,
            gbs: bytes as f64 / (ms * 1e-3) / 1e9,
            rotated_buffers: k,
            gbs_l2_resident: Some(16.0 * total as f64 / (ms_hot * 1e-3) / 1e9),
        });
        bytes *= 2;
    }
    Ok(sweep)
}

/// L2 bandwidth: load, copy and triad over L2-resident arrays (together at most a quarter
/// of the L2 of `l2` bytes, each a power of two), many passes inside one launch.
fn measure_l2_bandwidth(
    suite: &Suite,
    buffers: &StreamArrays,
    sms: u32,
    l2: u64,
    quick: bool,
    reps: usize,
) -> Result<Vec<BandwidthCeiling>> {
    let StreamArrays { a, b, c, sink, .. } = buffers;
    let wrap_cfg = wrap_launch_config(sms);
    let f_load = suite.function("load_wrap_f64")?;
    let f_copy = suite.function("copy_wrap_f64")?;
    let f_triad = suite.function("triad_wrap_f64")?;
    let l2_target: u64 = if quick { 1 << 30 } else { 4 << 30 };
    let mut bandwidth = Vec::new();
    for (kernel, arrays, bytes_per_step) in [("load", 1u64, 16u64), ("copy", 2, 32), ("triad", 3, 48)] {
        let per_array = pow2_floor(l2 / (4 * arrays)).max(1 << 16);
        let n2 = per_array / 16;
        let total = (l2_target / bytes_per_step).max(n2);
        let (ms, s) = match kernel {
            "load" => time_median(
                suite,
                &f_load,
                wrap_cfg,
                2,
                reps,
                &[suite.ptr(a), suite.ptr(sink), KArg::U64(n2 - 1), KArg::U64(total)],
            )?,
            "copy" => time_median(
                suite,
                &f_copy,
                wrap_cfg,
                2,
                reps,
                &[suite.ptr(a), suite.ptr(b), KArg::U64(n2 - 1), KArg::U64(total)],
            )?,
            _ => time_median(
                suite,
                &f_triad,
                wrap_cfg,
                2,
                reps,
                &[
                    suite.ptr(c),
                    suite.ptr(a),
                    suite.ptr(b),
                    KArg::F64(TRIAD_SCALAR),
                    KArg::U64(n2 - 1),
                    KArg::U64(total),
                ],
            )?,
        };
        bandwidth.push(BandwidthCeiling {
            level: "l2".into(),
            kernel: kernel.into(),
            working_set_bytes: arrays * per_array,
            gbs: bytes_per_step as f64 * total as f64 / (ms * 1e-3) / 1e9,
            bytes_convention: "requested bytes; loads through ld.global.cg (L2, not L1)".into(),
            samples_ms: s,
        });
    }
    Ok(bandwidth)
}

/// Shared-memory bandwidth: load, copy and triad kernels looping inside shared memory, two
/// blocks of 1024 threads per SM writing their result into `out_f32`.
fn measure_shared_bandwidth(suite: &Suite, sms: u32, out_f32: &CudaSlice<f32>, quick: bool, reps: usize) -> Result<Vec<BandwidthCeiling>> {
    let sh_iters: i32 = if quick { 20000 } else { 100000 };
    let sh_cfg = LaunchConfig {
        grid_dim: (sms * 2, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    let sh_threads = sms as f64 * 2.0 * 1024.0;
    let mut bandwidth = Vec::new();
    for (kernel, bytes_per_iter, set) in [("load", 16.0, 16u64 << 10), ("copy", 32.0, 32 << 10), ("triad", 48.0, 48 << 10)] {
        let f = suite.function(&format!("shared_{kernel}"))?;
        let mut args = vec![suite.ptr(out_f32), KArg::I32(sh_iters)];
        if kernel == "triad" {
            args.push(KArg::F32(3.0));
        }
        let (ms, s) = time_median(suite, &f, sh_cfg, 1, reps, &args)?;
        bandwidth.push(BandwidthCeiling {
            level: "shared".into(),
            kernel: kernel.into(),
            working_set_bytes: set,
            gbs: bytes_per_iter * sh_iters as f64 * sh_threads / (ms * 1e-3) / 1e9,
            bytes_convention: "bytes read and written in shared memory".into(),
            samples_ms: s,
        });
    }
    Ok(bandwidth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_and_rotation_counts() {
        assert_eq!(pow2_floor(0), 0);
        assert_eq!(pow2_floor(1), 1);
        // A 50 MiB L2 (H100) / 4 = 12.5 MiB: the L2 load set is 8 MiB; / 12 (triad): 4 MiB.
        assert_eq!(pow2_floor((50 << 20) / 4), 8 << 20);
        assert_eq!(pow2_floor((50 << 20) / 12), 4 << 20);
        // 1 MiB sets rotated over 4 × 50 MiB: 200 copies; a 64 MiB set: 4 (ceil of 3.125);
        // 256 MiB and more: one; never more than the room holds (a 1 GiB array: 1024 × 1 MiB).
        let (l2, room) = (50u64 << 20, 1u64 << 30);
        assert_eq!(super::super::kernels::rotation_count(1 << 20, 4 * l2, room), 200);
        assert_eq!(super::super::kernels::rotation_count(64 << 20, 4 * l2, room), 4);
        assert_eq!(super::super::kernels::rotation_count(256 << 20, 4 * l2, room), 1);
        assert_eq!(super::super::kernels::rotation_count(1 << 20, 4 * l2, 100 << 20), 100);
        assert_eq!(super::super::kernels::rotation_count(0, 4 * l2, room), 1);
    }

    #[test]
    fn h100_ceilings_capture_reads_back() {
        // `roofline gpu ceilings` on an H100 (tests/fixtures/ncu/gpu_ceilings_h100.json): the
        // document deserializes, L2 and shared have load, copy and triad, and the sweep rotated
        // its buffers while the set fitted in the 50 MiB L2.
        let text = include_str!("../../tests/fixtures/ncu/gpu_ceilings_h100.json");
        let c: GpuCeilings = serde_json::from_str(text).unwrap();
        for level in ["l2", "shared"] {
            let kernels: Vec<&str> = c.bandwidth.iter().filter(|b| b.level == level).map(|b| b.kernel.as_str()).collect();
            assert_eq!(kernels, ["load", "copy", "triad"], "{level}");
        }
        let l2 = c.machine.l2_bytes.unwrap();
        assert_eq!(l2, 50 << 20);
        for p in &c.sweep {
            assert_eq!(
                p.rotated_buffers,
                super::super::kernels::rotation_count(p.working_set_bytes, 4 * l2, 1 << 30)
            );
        }
    }
}
