//! `roofline gpu run KERNEL`: the GPU versions of the suite's comparable kernels with their
//! analytic W and compulsory DRAM Q, timed with CUDA events.

use std::collections::BTreeMap;

use super::device;
use super::kernels::{KArg, Suite, cuda_err, grid_for, time_median};
use crate::error::{Error, Result};
use crate::schema::gpu::GpuMachine;
use crate::schema::{Bytes, Flops, Point, Provenance, Source};
use cudarc::driver::{CudaSlice, LaunchConfig};

/// Flops of one `poly_cos` in kernels.cu: x·(1/2π), r², and 9 FMAs (range reduction, 7
/// polynomial steps, the last step) = 2 + 18.
pub const POLY_COS_FLOPS: f64 = 20.0;

/// A GPU kernel of the suite: name, description, default size, and analytic (W, Q_dram)
/// as a function of the size `n` (elements; the matrix order for dgemm).
pub struct GpuKernel {
    pub name: &'static str,
    pub description: &'static str,
    pub default_n: usize,
    pub counts: fn(f64) -> (f64, f64),
}

/// The GPU kernels `roofline gpu run` offers.
pub const KERNELS: &[GpuKernel] = &[
    GpuKernel {
        name: "triad",
        description: "a = b + s·c (FP64)",
        default_n: 1 << 27,
        counts: |n| (2.0 * n, 24.0 * n),
    },
    GpuKernel {
        name: "daxpy",
        description: "y = a·x + y (FP64)",
        default_n: 1 << 27,
        counts: |n| (2.0 * n, 24.0 * n),
    },
    GpuKernel {
        name: "dgemm",
        description: "C = A·B (FP64) by cuBLASLt: the library's fastest algorithm at this size (DMMA where the GPU has it)",
        default_n: 4096,
        counts: |n| (2.0 * n * n * n, 24.0 * n * n),
    },
    GpuKernel {
        name: "dgemm_tiled",
        description: "C = A·B (FP64), our shared-memory tiles of 32, one output per thread; cuBLASLt at the same size beside it",
        default_n: 4096,
        counts: |n| (2.0 * n * n * n, 24.0 * n * n),
    },
    GpuKernel {
        name: "normalize_naive",
        description: "per-row normalize, rows of 512, one thread per row, 3 passes",
        default_n: 1 << 25,
        counts: |n| (6.0 * n, 16.0 * n),
    },
    GpuKernel {
        name: "normalize_fused",
        description: "per-row normalize, a warp per row, Welford + shuffles, 16-byte loads",
        default_n: 1 << 25,
        counts: |n| (8.0 * n, 16.0 * n),
    },
    GpuKernel {
        name: "cos_chain_unfused",
        description: "y = cos(cos(x)) through a temporary (two kernels)",
        default_n: 1 << 26,
        counts: |n| (2.0 * POLY_COS_FLOPS * n, 32.0 * n),
    },
    GpuKernel {
        name: "cos_chain_fused",
        description: "y = cos(cos(x)) in one kernel",
        default_n: 1 << 26,
        counts: |n| (2.0 * POLY_COS_FLOPS * n, 16.0 * n),
    },
];

pub fn find(name: &str) -> Result<&'static GpuKernel> {
    KERNELS.iter().find(|k| k.name == name).ok_or_else(|| {
        Error::input(
            format!("no GPU kernel '{name}'"),
            format!("known: {}", KERNELS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")),
        )
    })
}

/// Run `kernel` at size `n`, `reps` timed repetitions; one report point. With `energy`, the
/// GPU's idle power is measured first (the context open, nothing run) and the kernel then
/// repeated under its energy counter (`extra.energy`).
pub fn run(
    kernel: &GpuKernel,
    n: usize,
    reps: usize,
    ordinal: usize,
    energy: Option<crate::counters::energy::EnergyOptions>,
) -> Result<(GpuMachine, Point)> {
    if n == 0 {
        return Err(Error::input("size 0", "give --size N with N > 0"));
    }
    let ctx = device::open(ordinal)?;
    let machine = device::query(&ctx, None)?;
    check_fits(kernel, n, &machine)?;
    let meter = energy.map(|o| super::energy::start(&ctx, o)).transpose()?;
    let suite = Suite::compile(ctx)?;
    let len = if kernel.name.starts_with("dgemm") { n * n } else { n };
    let arrays = Operands::upload(&suite, len)?;
    let (samples, library) = time_kernel(&suite, kernel, n, reps, &arrays)?;
    let mut point = to_point(kernel, n, &machine, &samples, library.as_ref());
    if let Some(e) = &meter {
        let seconds = point.seconds;
        let flops = point.flops.total;
        point.extra.energy = Some(kernel_energy(&suite, e, kernel, n, &arrays, library.as_ref(), seconds, flops)?);
    }
    Ok((machine, point))
}

/// An input error where the kernel's three arrays at size `n` would take more than 90 % of the
/// GPU's memory.
fn check_fits(kernel: &GpuKernel, n: usize, machine: &GpuMachine) -> Result<()> {
    let need = match kernel.name {
        "dgemm" | "dgemm_tiled" => 3 * n * n * 8,
        _ => 3 * n * 8,
    } as u64;
    if need > machine.memory_bytes * 9 / 10 {
        return Err(Error::input(
            format!(
                "size {n} needs {} of GPU memory, the GPU has {}",
                crate::schema::units::fmt_bytes(need as f64),
                crate::schema::units::fmt_bytes(machine.memory_bytes as f64)
            ),
            "choose a smaller --size",
        ));
    }
    Ok(())
}

/// `len` pseudo-random values in [-0.5, 0.5) (xorshift from `seed`).
fn pseudo_random(len: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

/// The three FP64 arrays the kernels read and write, on the GPU.
struct Operands {
    a: CudaSlice<f64>,
    b: CudaSlice<f64>,
    c: CudaSlice<f64>,
}

impl Operands {
    /// Three arrays of `len` pseudo-random values each (seeds 1, 2, 3), copied to the GPU.
    fn upload(suite: &Suite, len: usize) -> Result<Operands> {
        let s = &suite.stream;
        let a = s.clone_htod(&pseudo_random(len, 1)).map_err(cuda_err("copy to GPU"))?;
        let b = s.clone_htod(&pseudo_random(len, 2)).map_err(cuda_err("copy to GPU"))?;
        let c = s.clone_htod(&pseudo_random(len, 3)).map_err(cuda_err("copy to GPU"))?;
        Ok(Operands { a, b, c })
    }
}

/// One launch of a suite kernel: the function, its grid and its arguments.
struct Launch {
    f: cudarc::driver::CudaFunction,
    cfg: LaunchConfig,
    args: Vec<KArg>,
}

/// The launches of one repetition of `kernel` (two for `cos_chain_unfused`); none for
/// `dgemm`, which is cuBLAS's.
fn launches(suite: &Suite, kernel: &GpuKernel, n: usize, arrays: &Operands) -> Result<Vec<Launch>> {
    let Operands { a, b, c } = arrays;
    let un = n as u64;
    let one = |name: &str, cfg: LaunchConfig, args: Vec<KArg>| -> Result<Vec<Launch>> {
        Ok(vec![Launch {
            f: suite.function(name)?,
            cfg,
            args,
        }])
    };
    match kernel.name {
        "triad" => one(
            "triad",
            grid_for(n, 256),
            vec![suite.ptr(c), suite.ptr(a), suite.ptr(b), KArg::F64(3.0), KArg::U64(un)],
        ),
        "daxpy" => one(
            "daxpy",
            grid_for(n, 256),
            vec![KArg::F64(3.0), suite.ptr(a), suite.ptr(c), KArg::U64(un)],
        ),
        "dgemm" => Ok(Vec::new()),
        "dgemm_tiled" => {
            let t = n.div_ceil(32) as u32;
            let cfg = LaunchConfig {
                grid_dim: (t, t, 1),
                block_dim: (32, 32, 1),
                shared_mem_bytes: 0,
            };
            one("dgemm", cfg, vec![suite.ptr(a), suite.ptr(b), suite.ptr(c), KArg::I32(n as i32)])
        }
        "normalize_naive" | "normalize_fused" => {
            let rows = n / 512;
            let (name, cfg) = if kernel.name == "normalize_fused" {
                ("normalize_warp", grid_for(rows * 32, 256))
            } else {
                ("normalize_naive", grid_for(rows, 128))
            };
            one(name, cfg, vec![suite.ptr(a), suite.ptr(c), KArg::I32(rows as i32), KArg::I32(512)])
        }
        "cos_chain_fused" => one("cos_cos_fused", grid_for(n, 256), vec![suite.ptr(a), suite.ptr(c), KArg::U64(un)]),
        // Two launches per repetition through a temporary: each pass timed, the times added.
        "cos_chain_unfused" => {
            let f = suite.function("cos_pass")?;
            Ok(vec![
                Launch {
                    f: f.clone(),
                    cfg: grid_for(n, 256),
                    args: vec![suite.ptr(a), suite.ptr(b), KArg::U64(un)],
                },
                Launch {
                    f,
                    cfg: grid_for(n, 256),
                    args: vec![suite.ptr(b), suite.ptr(c), KArg::U64(un)],
                },
            ])
        }
        other => Err(Error::input(format!("no GPU kernel '{other}'"), "see `roofline gpu run --help`")),
    }
}

/// The kernel's timed repetitions (ms each) and, for dgemm and dgemm_tiled, the library's GEMM
/// at this size (the point itself for dgemm, beside it for dgemm_tiled).
fn time_kernel(
    suite: &Suite,
    kernel: &GpuKernel,
    n: usize,
    reps: usize,
    arrays: &Operands,
) -> Result<(Vec<f64>, Option<super::blas::GemmRate>)> {
    let library = match kernel.name {
        "dgemm" => Some(super::blas::Blas::new(suite)?.best(super::blas::GemmType::Fp64, &[n], reps)?),
        "dgemm_tiled" => Some(super::blas::Blas::new(suite)?.best(super::blas::GemmType::Fp64, &[n], reps.min(5))?),
        _ => None,
    };
    if kernel.name == "dgemm" {
        let samples = library.as_ref().map(|g| g.samples_ms.clone()).unwrap_or_default();
        return Ok((samples, library));
    }
    let warmup = if kernel.name == "dgemm_tiled" { 1 } else { 2 };
    let mut samples = vec![0.0; reps];
    for l in launches(suite, kernel, n, arrays)? {
        let (_, s) = time_median(suite, &l.f, l.cfg, warmup, reps, &l.args)?;
        for (sum, x) in samples.iter_mut().zip(s) {
            *sum += x;
        }
    }
    Ok((samples, library))
}

/// The point's energy: one repetition of the kernel (cuBLAS's GEMM for dgemm) launched back
/// to back under the GPU's energy counter, each stretch's power × the median repetition's
/// time (`seconds_per_run`) one sample.
#[allow(clippy::too_many_arguments)]
fn kernel_energy(
    suite: &Suite,
    energy: &crate::counters::energy::Energy,
    kernel: &GpuKernel,
    n: usize,
    arrays: &Operands,
    library: Option<&super::blas::GemmRate>,
    seconds_per_run: f64,
    flops: f64,
) -> Result<crate::schema::energy::PointEnergy> {
    let repeated = match (kernel.name, library) {
        ("dgemm", Some(g)) => super::blas::Blas::new(suite)?.with_gemm(g, |launch| {
            let mut launch = || launch();
            super::energy::repeat(energy, suite, seconds_per_run, flops, &mut launch)
        })?,
        _ => {
            let ls = launches(suite, kernel, n, arrays)?;
            let mut launch = || -> Result<()> {
                for l in &ls {
                    super::kernels::launch_once(suite, &l.f, l.cfg, &l.args)?;
                }
                Ok(())
            };
            super::energy::repeat(energy, suite, seconds_per_run, flops, &mut launch)?
        }
    };
    let stretch = super::energy::stretch_seconds(energy);
    let mut e = energy.steady_energy(&repeated.window, repeated.from, repeated.to, stretch, seconds_per_run, flops)?;
    e.source = format!(
        "{}; the kernel launched back to back {} times after a warm-up stretch, the counter read every few ms",
        e.source, repeated.timed_launches,
    );
    Ok(e)
}

/// The report point of a run: the kernel's analytic W and compulsory DRAM Q, the timed
/// repetitions (ms) as T, and the library's GEMM beside it where one ran.
fn to_point(kernel: &GpuKernel, n: usize, machine: &GpuMachine, samples: &[f64], library: Option<&super::blas::GemmRate>) -> Point {
    let nn = n as f64;
    let (w, q) = (kernel.counts)(nn);
    let mut by_class = BTreeMap::new();
    // cuBLAS's DGEMM runs on the FP64 tensor cores (DMMA) where the GPU has them: read
    // against the FP64 tensor roof, not the FP64 FMA roof it exceeds (H100: 56 vs 33.5 TFLOP/s).
    let cc: Vec<i32> = machine.compute_capability.split('.').filter_map(|x| x.parse().ok()).collect();
    let dmma = crate::model::gpu::arch_rates((cc.first().copied().unwrap_or(0), cc.get(1).copied().unwrap_or(0)))
        .is_some_and(|r| r.tensor_fp64 > 0.0);
    let tensor_fp64 = kernel.name == "dgemm" && dmma;
    by_class.insert(if tensor_fp64 { "tensor" } else { "double_any_width" }.to_string(), w);
    let mut bytes = Bytes::new();
    bytes.insert("dram".into(), q);
    let prov = Provenance {
        flops: Some(Source::Analytic),
        bytes: [("dram".to_string(), Source::Analytic)].into_iter().collect(),
        seconds: Some(Source::Native),
        notes: vec!["T: CUDA events around each launch; Q: compulsory DRAM bytes".into()],
        untrusted: Vec::new(),
    };
    let secs: Vec<f64> = samples.iter().map(|ms| ms * 1e-3).collect();
    let mut p = Point::new(
        kernel.name,
        prov,
        Flops {
            total: w,
            effective: None,
            by_class,
            ..Default::default()
        },
        bytes,
        1,
        secs,
    );
    p.threads = 0;
    p.extra.insert("size", n as u64);
    p.extra.insert("device", machine.name.clone());
    if tensor_fp64 {
        p.extra.tensor_ops_by_type = Some([("fp64".to_string(), w)].into());
    }
    if let Some(g) = library {
        add_library(&mut p, kernel, w, samples, g);
    }
    p
}

/// What the vendor library reaches on the same GEMM in the same process, on the point:
/// `compare` says when a point is not near it.
fn add_library(p: &mut Point, kernel: &GpuKernel, w: f64, samples: &[f64], g: &super::blas::GemmRate) {
    p.extra.library = Some(g.describe());
    p.extra.library_gflops = Some(g.median_gflops());
    if kernel.name == "dgemm" {
        p.provenance.notes.push(format!("the GEMM is cuBLAS's: {}", g.describe()));
    } else {
        let own = w / (crate::schema::stats::median(samples).unwrap_or(0.0) * 1e-3) / 1e9;
        p.provenance.notes.push(format!(
            "our tiled kernel: {:.0} GFLOP/s, {:.2}x of {} ({:.0} GFLOP/s)",
            own,
            own / g.median_gflops(),
            g.describe(),
            g.median_gflops()
        ));
    }
}
