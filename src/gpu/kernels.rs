//! Our GPU kernels (`kernels/gpu/kernels.cu`), compiled at run time with NVRTC for the
//! device at hand, and launched with CUDA-event timing.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::CompileOptions;

use crate::error::{Error, Result};

pub const SOURCE: &str = include_str!("../../kernels/gpu/kernels.cu");

/// A compiled module of the suite on one device.
pub struct Suite {
    /// The CUDA context of the device.
    pub ctx: Arc<CudaContext>,
    /// The stream every launch goes on.
    pub stream: Arc<CudaStream>,
    /// The compiled kernels.
    pub module: Arc<CudaModule>,
}

fn cuda_include_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(v) = std::env::var(var) {
            dirs.push(format!("{v}/include"));
        }
    }
    dirs.push("/usr/local/cuda/include".into());
    dirs.into_iter()
        .filter(|d| std::path::Path::new(d).join("cuda_fp16.h").exists())
        .collect()
}

fn nvrtc_present() -> bool {
    // SAFETY: only attempts to dlopen the NVRTC library; no call into it.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

impl Suite {
    /// Compile the suite (NVRTC) for the device of `ctx`.
    pub fn compile(ctx: Arc<CudaContext>) -> Result<Suite> {
        if !nvrtc_present() {
            return Err(Error::unavailable(
                "NVRTC (libnvrtc.so) could not be loaded",
                "install the CUDA toolkit's NVRTC library or set LD_LIBRARY_PATH to it",
            ));
        }
        let (maj, min) = ctx
            .compute_capability()
            .map_err(|e| Error::unavailable(format!("GPU query failed: {e}"), "check the driver"))?;
        let arch = format!("--gpu-architecture=compute_{maj}{min}");
        let opts = CompileOptions {
            include_paths: cuda_include_dirs(),
            options: vec![arch, "--std=c++17".into()],
            ..Default::default()
        };
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(SOURCE, opts).map_err(|e| {
            Error::unavailable(
                format!("NVRTC could not compile kernels/gpu/kernels.cu: {e}"),
                "set CUDA_HOME to the CUDA toolkit (for cuda_fp16.h and mma.h)",
            )
        })?;
        let module = ctx.load_module(ptx).map_err(|e| {
            Error::unavailable(
                format!("loading the compiled kernels failed: {e}"),
                "driver too old for this toolkit?",
            )
        })?;
        let stream = ctx.default_stream();
        Ok(Suite { ctx, stream, module })
    }

    /// The kernel named `name`.
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        self.module
            .load_function(name)
            .map_err(|e| Error::unavailable(format!("kernel {name} not in the module: {e}"), "rebuild roofline"))
    }
}

pub fn cuda_err(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::unavailable(format!("{what}: {e}"), "check nvidia-smi and the driver")
}

/// A kernel argument: a raw device pointer or a scalar, in the kernel's parameter order.
#[derive(Debug, Clone, Copy)]
pub enum KArg {
    Ptr(u64),
    F64(f64),
    F32(f32),
    I32(i32),
    I64(i64),
    U64(u64),
}

impl Suite {
    /// The raw device address of a buffer, for `KArg::Ptr`. The buffer must outlive the
    /// launches that use it (the callers keep it in scope and synchronize after each launch).
    pub fn ptr<T: DeviceRepr>(&self, s: &CudaSlice<T>) -> KArg {
        let (p, _sync) = s.device_ptr(&self.stream);
        KArg::Ptr(p)
    }
}

/// One kernel launch with `args`; timed with CUDA events. Returns milliseconds.
pub fn timed_launch(suite: &Suite, f: &CudaFunction, cfg: LaunchConfig, args: &[KArg]) -> Result<f64> {
    timed_launches(suite, f, cfg, args, 1)
}

/// `count` back-to-back launches with `args` between one pair of CUDA events; milliseconds
/// for all of them.
pub fn timed_launches(suite: &Suite, f: &CudaFunction, cfg: LaunchConfig, args: &[KArg], count: usize) -> Result<f64> {
    let start = suite
        .ctx
        .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda_err("event"))?;
    let end = suite
        .ctx
        .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda_err("event"))?;
    start.record(&suite.stream).map_err(cuda_err("event record"))?;
    for _ in 0..count.max(1) {
        launch_once(suite, f, cfg, args)?;
    }
    end.record(&suite.stream).map_err(cuda_err("event record"))?;
    end.synchronize().map_err(cuda_err("kernel"))?;
    Ok(start.elapsed_ms(&end).map_err(cuda_err("event timing"))? as f64)
}

/// One launch of `f` with `args` on the suite's stream, not waited for.
pub fn launch_once(suite: &Suite, f: &CudaFunction, cfg: LaunchConfig, args: &[KArg]) -> Result<()> {
    let mut b = suite.stream.launch_builder(f);
    for a in args {
        match a {
            KArg::Ptr(p) | KArg::U64(p) => b.arg(p),
            KArg::F64(x) => b.arg(x),
            KArg::F32(x) => b.arg(x),
            KArg::I32(x) => b.arg(x),
            KArg::I64(x) => b.arg(x),
        };
    }
    launch(&mut b, cfg)
}

/// Launch with the pushed arguments.
fn launch(b: &mut cudarc::driver::LaunchArgs<'_>, cfg: LaunchConfig) -> Result<()> {
    // SAFETY: every caller passes exactly the arguments, in order and type, of the kernel's
    // signature in kernels/gpu/kernels.cu (device pointers as 64-bit addresses), with device
    // buffers alive and at least as large as the element counts passed alongside them.
    unsafe { b.launch(cfg) }.map(|_| ()).map_err(cuda_err("kernel launch"))
}

/// Median of `reps` timed launches after `warmup` untimed ones; all samples in ms.
pub fn time_median(
    suite: &Suite,
    f: &CudaFunction,
    cfg: LaunchConfig,
    warmup: usize,
    reps: usize,
    args: &[KArg],
) -> Result<(f64, Vec<f64>)> {
    for _ in 0..warmup {
        timed_launch(suite, f, cfg, args)?;
    }
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(timed_launch(suite, f, cfg, args)?);
    }
    let med = crate::schema::stats::median(&v).unwrap_or(0.0);
    Ok((med, v))
}

/// Like [`time_median`], but launch `i` takes the arguments `arg_sets[i % len]`: buffers
/// rotated between launches, so a working set that fits in L2 is not still there from the
/// previous launch (the sets together span several L2 sizes). The warm-up goes once through
/// every set.
pub fn time_median_rotated(
    suite: &Suite,
    f: &CudaFunction,
    cfg: LaunchConfig,
    reps: usize,
    arg_sets: &[Vec<KArg>],
) -> Result<(f64, Vec<f64>)> {
    if arg_sets.is_empty() {
        return Ok((0.0, Vec::new()));
    }
    for a in arg_sets {
        timed_launch(suite, f, cfg, a)?;
    }
    let mut v = Vec::with_capacity(reps);
    for i in 0..reps {
        v.push(timed_launch(suite, f, cfg, &arg_sets[i % arg_sets.len()])?);
    }
    let med = crate::schema::stats::median(&v).unwrap_or(0.0);
    Ok((med, v))
}

/// How many buffer copies a sweep rotates through at `set_bytes`: enough that together they
/// span `span_bytes` (4 × L2), at most what `room_bytes` holds, at least 1.
pub fn rotation_count(set_bytes: u64, span_bytes: u64, room_bytes: u64) -> u64 {
    if set_bytes == 0 {
        return 1;
    }
    span_bytes.div_ceil(set_bytes).min(room_bytes / set_bytes).max(1)
}

pub fn grid_for(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(block as usize).max(1) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}
