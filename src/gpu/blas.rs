//! Vendor GEMMs through cuBLASLt (cudarc, loaded at run time): the tensor-core ceilings of
//! `gpu ceilings` (a roof that bounds what cuBLAS reaches must come from
//! cuBLAS-class kernels, not from our WMMA loop) and the cuBLAS DGEMM point of `gpu run
//! dgemm` (the GPU side of a CPU-vs-GPU comparison at its library's best).
//!
//! Each measurement asks cuBLASLt's heuristic for up to [`ALGOS`] algorithms per (type,
//! size, layout), times every one (CUDA events, median of the repetitions) and keeps the
//! fastest: the rate a tuned library reaches on this GPU in this run.

use std::ffi::c_void;

use cudarc::cublaslt::{result as lt, sys};
use cudarc::driver::{DevicePtr, DevicePtrMut};

use super::kernels::{KArg, Suite, cuda_err, grid_for};
use crate::error::{Error, Result};

/// Algorithms asked of the heuristic per configuration.
pub const ALGOS: usize = 6;

/// One GEMM type: the operand types, the compute type and the scale type of cuBLASLt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmType {
    Bf16,
    Fp16,
    /// FP32 operands, TF32 tensor cores (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    /// e4m3 inputs, bf16 output (cuBLASLt wants A transposed: TN only).
    Fp8,
    /// FP64 through DMMA (`CUBLAS_COMPUTE_64F`).
    Fp64,
}

impl GemmType {
    /// The report's precision key (`tensor_bf16`, …) and ncu's tensor type.
    pub fn key(self) -> &'static str {
        match self {
            GemmType::Bf16 => "bf16",
            GemmType::Fp16 => "fp16",
            GemmType::Tf32 => "tf32",
            GemmType::Fp8 => "fp8",
            GemmType::Fp64 => "fp64",
        }
    }
    fn ab_bytes(self) -> usize {
        match self {
            GemmType::Bf16 | GemmType::Fp16 => 2,
            GemmType::Tf32 => 4,
            GemmType::Fp8 => 1,
            GemmType::Fp64 => 8,
        }
    }
    fn cd_bytes(self) -> usize {
        match self {
            GemmType::Bf16 | GemmType::Fp16 | GemmType::Fp8 => 2,
            GemmType::Tf32 => 4,
            GemmType::Fp64 => 8,
        }
    }
    /// `fill_random`'s kind for A/B and for C/D (kernels/gpu/kernels.cu).
    fn fill_kinds(self) -> (i32, i32) {
        match self {
            GemmType::Fp64 => (0, 0),
            GemmType::Tf32 => (1, 1),
            GemmType::Fp16 => (2, 2),
            GemmType::Bf16 => (3, 3),
            GemmType::Fp8 => (4, 3),
        }
    }
    fn types(self) -> (sys::cudaDataType, sys::cudaDataType, sys::cublasComputeType_t, sys::cudaDataType) {
        use sys::cublasComputeType_t as C;
        use sys::cudaDataType as D;
        match self {
            GemmType::Bf16 => (D::CUDA_R_16BF, D::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F, D::CUDA_R_32F),
            GemmType::Fp16 => (D::CUDA_R_16F, D::CUDA_R_16F, C::CUBLAS_COMPUTE_32F, D::CUDA_R_32F),
            GemmType::Tf32 => (D::CUDA_R_32F, D::CUDA_R_32F, C::CUBLAS_COMPUTE_32F_FAST_TF32, D::CUDA_R_32F),
            GemmType::Fp8 => (D::CUDA_R_8F_E4M3, D::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F, D::CUDA_R_32F),
            GemmType::Fp64 => (D::CUDA_R_64F, D::CUDA_R_64F, C::CUBLAS_COMPUTE_64F, D::CUDA_R_64F),
        }
    }
}

/// The fastest GEMM found for one type: n×n×n, its layout and algorithm, the median time.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmRate {
    pub ty: GemmType,
    pub n: usize,
    /// `NN` or `TN` (A transposed), in cuBLAS's column-major terms.
    pub layout: &'static str,
    /// The heuristic's rank of the algorithm that won (0: its first choice).
    pub algo_rank: usize,
    /// At the fastest launch.
    pub gflops: f64,
    pub median_ms: f64,
    pub samples_ms: Vec<f64>,
}

impl GemmRate {
    /// The rate at the median launch time.
    pub fn median_gflops(&self) -> f64 {
        2.0 * (self.n as f64).powi(3) / (self.median_ms * 1e-3) / 1e9
    }

    pub fn describe(&self) -> String {
        format!(
            "cuBLASLt {} {}^3 {} (heuristic algo #{}; median {:.1} TFLOP/s)",
            self.ty.key(),
            self.n,
            self.layout,
            self.algo_rank,
            self.median_gflops() / 1e3
        )
    }
}

/// Whether libcublasLt can be loaded.
pub fn present() -> bool {
    // SAFETY: only attempts to dlopen the cuBLASLt library; no call into it.
    unsafe { sys::is_culib_present() }
}

fn blas_err(what: &'static str) -> impl FnOnce(lt::CublasError) -> Error {
    move |e| Error::unavailable(format!("cuBLASLt {what}: {e}"), "check the CUDA toolkit's libcublasLt")
}

/// Descriptors of one GEMM configuration, destroyed on drop.
struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    a: sys::cublasLtMatrixLayout_t,
    b: sys::cublasLtMatrixLayout_t,
    c: sys::cublasLtMatrixLayout_t,
    pref: sys::cublasLtMatmulPreference_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each handle was created once by `Plan::new` and is destroyed once here;
        // errors on destruction are ignored (nothing to do about them).
        unsafe {
            let _ = lt::destroy_matmul_pref(self.pref);
            let _ = lt::destroy_matrix_layout(self.c);
            let _ = lt::destroy_matrix_layout(self.b);
            let _ = lt::destroy_matrix_layout(self.a);
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

impl Plan {
    /// n×n×n, column-major, `trans_a` for the TN layout; C = D.
    fn new(ty: GemmType, n: usize, trans_a: bool, workspace: usize) -> Result<Plan> {
        let (ab, cd, compute, scale) = ty.types();
        let nn = n as u64;
        let desc = lt::create_matmul_desc(compute, scale).map_err(blas_err("matmul descriptor"))?;
        let layouts = (|| -> std::result::Result<_, lt::CublasError> {
            Ok((
                lt::create_matrix_layout(ab, nn, nn, n as i64)?,
                lt::create_matrix_layout(ab, nn, nn, n as i64)?,
                lt::create_matrix_layout(cd, nn, nn, n as i64)?,
                lt::create_matmul_pref()?,
            ))
        })();
        let (a, b, c, pref) = match layouts {
            Ok(x) => x,
            Err(e) => {
                // SAFETY: created just above, not used since.
                unsafe {
                    let _ = lt::destroy_matmul_desc(desc);
                }
                return Err(blas_err("matrix layouts")(e));
            }
        };
        let plan = Plan { desc, a, b, c, pref };
        let op: i32 = if trans_a { 1 } else { 0 }; // CUBLAS_OP_T : CUBLAS_OP_N
        // SAFETY: the attribute values point at live locals of exactly the size passed
        // (cublasOperation_t is a C enum, 4 bytes; the workspace size a size_t).
        unsafe {
            lt::set_matmul_desc_attribute(
                plan.desc,
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                (&op) as *const i32 as *const c_void,
                std::mem::size_of::<i32>(),
            )
            .map_err(blas_err("TRANSA"))?;
            lt::set_matmul_pref_attribute(
                plan.pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace) as *const usize as *const c_void,
                std::mem::size_of::<usize>(),
            )
            .map_err(blas_err("workspace preference"))?;
        }
        Ok(plan)
    }

    /// Up to `count` algorithms, the heuristic's best first.
    fn algorithms(&self, handle: sys::cublasLtHandle_t, count: usize) -> Result<Vec<sys::cublasLtMatmulHeuristicResult_t>> {
        let mut out: Vec<sys::cublasLtMatmulHeuristicResult_t> = Vec::with_capacity(count);
        let mut returned: i32 = 0;
        // SAFETY: `out` has room for `count` results; cuBLASLt writes `returned` ≤ count of
        // them; the descriptors are live (owned by self).
        let status = unsafe {
            sys::cublasLtMatmulAlgoGetHeuristic(
                handle,
                self.desc,
                self.a,
                self.b,
                self.c,
                self.c,
                self.pref,
                count as i32,
                out.as_mut_ptr(),
                &mut returned,
            )
        };
        status.result().map_err(blas_err("algorithm heuristic"))?;
        // SAFETY: the first `returned` entries were initialised by the call above.
        unsafe { out.set_len((returned.max(0) as usize).min(count)) };
        out.retain(|h| h.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
        Ok(out)
    }
}

/// A cuBLASLt handle with its workspace on the suite's stream.
pub struct Blas<'a> {
    suite: &'a Suite,
    handle: sys::cublasLtHandle_t,
    workspace: cudarc::driver::CudaSlice<u8>,
}

impl Drop for Blas<'_> {
    fn drop(&mut self) {
        // SAFETY: created once in `Blas::new`, destroyed once here.
        unsafe {
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

impl<'a> Blas<'a> {
    pub fn new(suite: &'a Suite) -> Result<Blas<'a>> {
        if !present() {
            return Err(Error::unavailable(
                "cuBLASLt (libcublasLt.so) could not be loaded",
                "install the CUDA toolkit's cuBLAS or add its lib64 folder to LD_LIBRARY_PATH",
            ));
        }
        let handle = lt::create_handle().map_err(blas_err("create"))?;
        // NVIDIA's recommendation for Hopper: 32 MiB of workspace.
        let workspace = suite.stream.alloc_zeros::<u8>(32 << 20).map_err(cuda_err("alloc"))?;
        Ok(Blas { suite, handle, workspace })
    }

    /// The fastest of every (size, layout, algorithm) for `ty`: `reps` timed launches each
    /// after 2 warm-ups, the median per configuration, the best median overall. Operands are
    /// random values (not zeros: a GEMM of zeros draws less power and clocks higher).
    pub fn best(&self, ty: GemmType, sizes: &[usize], reps: usize) -> Result<GemmRate> {
        let mut best: Option<GemmRate> = None;
        for &n in sizes {
            let s = &self.suite.stream;
            let (ab_kind, cd_kind) = ty.fill_kinds();
            let mut a = s.alloc_zeros::<u8>(n * n * ty.ab_bytes()).map_err(cuda_err("alloc"))?;
            let mut b = s.alloc_zeros::<u8>(n * n * ty.ab_bytes()).map_err(cuda_err("alloc"))?;
            let mut d = s.alloc_zeros::<u8>(n * n * ty.cd_bytes()).map_err(cuda_err("alloc"))?;
            self.fill(&mut a, n * n, ab_kind, 1)?;
            self.fill(&mut b, n * n, ab_kind, 2)?;
            self.fill(&mut d, n * n, cd_kind, 3)?;
            let layouts: &[(&'static str, bool)] = if ty == GemmType::Fp8 {
                &[("TN", true)]
            } else {
                &[("NN", false), ("TN", true)]
            };
            for &(layout, trans_a) in layouts {
                let plan = Plan::new(ty, n, trans_a, self.workspace.len())?;
                let algos = plan.algorithms(self.handle, ALGOS)?;
                for (rank, h) in algos.iter().enumerate() {
                    let Ok(samples) = self.time(ty, &plan, h, &a, &b, &mut d, reps) else {
                        continue; // an algorithm the heuristic offered but that refuses to run
                    };
                    let ms = crate::schema::stats::median(&samples).unwrap_or(0.0);
                    let fastest = samples.iter().copied().fold(f64::INFINITY, f64::min);
                    if ms <= 0.0 || fastest.is_nan() || fastest <= 0.0 {
                        continue;
                    }
                    // A ceiling is what the GPU was seen to reach: the fastest launch (the
                    // median is kept beside it). Clocks and power vary by a few percent
                    // between launches; a median would sit under a median measured in a
                    // luckier moment of the same run.
                    let gflops = 2.0 * (n as f64).powi(3) / (fastest * 1e-3) / 1e9;
                    if best.as_ref().is_none_or(|g| gflops > g.gflops) {
                        best = Some(GemmRate {
                            ty,
                            n,
                            layout,
                            algo_rank: rank,
                            gflops,
                            median_ms: ms,
                            samples_ms: samples,
                        });
                    }
                }
            }
        }
        best.ok_or_else(|| {
            Error::unavailable(
                format!("cuBLASLt offered no working {} GEMM algorithm", ty.key()),
                "this GPU or cuBLAS version may lack that type",
            )
        })
    }

    fn fill(&self, buf: &mut cudarc::driver::CudaSlice<u8>, n: usize, kind: i32, seed: u64) -> Result<()> {
        let f = self.suite.function("fill_random")?;
        let (p, _sync) = buf.device_ptr_mut(&self.suite.stream);
        let cfg = grid_for(n.min(1 << 24), 256);
        super::kernels::timed_launch(
            self.suite,
            &f,
            cfg,
            &[KArg::Ptr(p), KArg::U64(n as u64), KArg::I32(kind), KArg::U64(seed)],
        )?;
        Ok(())
    }

    /// `reps` timed launches of one algorithm after 2 warm-ups, in ms.
    #[allow(clippy::too_many_arguments)]
    fn time(
        &self,
        ty: GemmType,
        plan: &Plan,
        h: &sys::cublasLtMatmulHeuristicResult_t,
        a: &cudarc::driver::CudaSlice<u8>,
        b: &cudarc::driver::CudaSlice<u8>,
        d: &mut cudarc::driver::CudaSlice<u8>,
        reps: usize,
    ) -> Result<Vec<f64>> {
        self.with_launch(ty, plan, h, (a, b, d), |launch| {
            let s = &self.suite.stream;
            let ev = || {
                self.suite
                    .ctx
                    .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(cuda_err("event"))
            };
            for _ in 0..2 {
                launch()?;
            }
            s.synchronize().map_err(cuda_err("GEMM"))?;
            let mut v = Vec::with_capacity(reps);
            for _ in 0..reps {
                let (e0, e1) = (ev()?, ev()?);
                e0.record(s).map_err(cuda_err("event record"))?;
                launch()?;
                e1.record(s).map_err(cuda_err("event record"))?;
                e1.synchronize().map_err(cuda_err("GEMM"))?;
                v.push(e0.elapsed_ms(&e1).map_err(cuda_err("event timing"))? as f64);
            }
            Ok(v)
        })
    }

    /// The GEMM `g` describes (type, size, layout, algorithm) set up again on fresh random
    /// operands, and `body` given its launch (one GEMM on the stream, not waited for): what
    /// `gpu run --energy` and `gpu ceilings --energy` repeat under the energy counter.
    pub fn with_gemm<T>(&self, g: &GemmRate, body: impl FnOnce(&dyn Fn() -> Result<()>) -> Result<T>) -> Result<T> {
        let (ty, n) = (g.ty, g.n);
        let s = &self.suite.stream;
        let (ab_kind, cd_kind) = ty.fill_kinds();
        let mut a = s.alloc_zeros::<u8>(n * n * ty.ab_bytes()).map_err(cuda_err("alloc"))?;
        let mut b = s.alloc_zeros::<u8>(n * n * ty.ab_bytes()).map_err(cuda_err("alloc"))?;
        let mut d = s.alloc_zeros::<u8>(n * n * ty.cd_bytes()).map_err(cuda_err("alloc"))?;
        self.fill(&mut a, n * n, ab_kind, 1)?;
        self.fill(&mut b, n * n, ab_kind, 2)?;
        self.fill(&mut d, n * n, cd_kind, 3)?;
        let plan = Plan::new(ty, n, g.layout == "TN", self.workspace.len())?;
        let algos = plan.algorithms(self.handle, ALGOS)?;
        let h = algos.get(g.algo_rank).ok_or_else(|| {
            Error::unavailable(
                format!("cuBLASLt no longer offers algorithm {} of the {} GEMM", g.algo_rank, ty.key()),
                "run again",
            )
        })?;
        self.with_launch(ty, &plan, h, (&a, &b, &mut d), body)
    }

    /// `body` given the launch of one algorithm on operands (A, B, D).
    fn with_launch<T>(
        &self,
        ty: GemmType,
        plan: &Plan,
        h: &sys::cublasLtMatmulHeuristicResult_t,
        operands: (
            &cudarc::driver::CudaSlice<u8>,
            &cudarc::driver::CudaSlice<u8>,
            &mut cudarc::driver::CudaSlice<u8>,
        ),
        body: impl FnOnce(&dyn Fn() -> Result<()>) -> Result<T>,
    ) -> Result<T> {
        let (a, b, d) = operands;
        let s = &self.suite.stream;
        let (pa, _ra) = a.device_ptr(s);
        let (pb, _rb) = b.device_ptr(s);
        let (pd, _rd) = d.device_ptr_mut(s);
        let (pw, _rw) = self.workspace.device_ptr(s);
        let (one_f, zero_f) = (1.0f32, 0.0f32);
        let (one_d, zero_d) = (1.0f64, 0.0f64);
        let (alpha, beta): (*const c_void, *const c_void) = if ty == GemmType::Fp64 {
            (&one_d as *const f64 as *const c_void, &zero_d as *const f64 as *const c_void)
        } else {
            (&one_f as *const f32 as *const c_void, &zero_f as *const f32 as *const c_void)
        };
        let launch = || -> Result<()> {
            // SAFETY: A and B hold n·n operands of the plan's A/B type and D n·n of its C/D
            // type (allocated by `best` for this n and type); the workspace is as large as the
            // preference told the heuristic; alpha/beta point at live scalars of the scale
            // type; the algorithm came from the heuristic for exactly these descriptors.
            unsafe {
                lt::matmul(
                    self.handle,
                    plan.desc,
                    alpha,
                    beta,
                    pa as *const c_void,
                    plan.a,
                    pb as *const c_void,
                    plan.b,
                    pd as *const c_void,
                    plan.c,
                    pd as *mut c_void,
                    plan.c,
                    &h.algo,
                    pw as *mut c_void,
                    self.workspace.len(),
                    s.cu_stream() as sys::cudaStream_t,
                )
            }
            .map_err(blas_err("matmul"))
        };
        body(&launch)
    }
}
