//! The non-streaming kernels: stencil2d, spmv, dgemm/sgemm, normalize_{naive,fused},
//! cos_chain_{unfused,fused}; and what their count formulas share.
//!
//! `normalize` and `cos_chain` are each TWO kernels (naive/fused, unfused/fused), because
//! the variant axis is the instruction set: `roofline run normalize_fused --variant avx2`.
//!
//! # Counting conventions (what the trace backend must reproduce)
//! - W: hardware-counter semantics. Every executed FP arithmetic instruction counts its full
//!   width (a masked AVX-512 tail counts 8 lanes), an FMA 2 per lane; scalar and SSE code
//!   has no FMA and issues a multiply and an add (same total). Reductions are halving trees
//!   (512→256→128→scalar adds). Bit operations (and/xor/blend/shifts), broadcasts and
//!   zeroing are not flops.
//! - Core bytes: what the kernel's explicit load/store operands move. Masked loads, stores
//!   and gathers count active elements only; a gather counts its 4-byte indices and its
//!   8-byte elements; CSR row pointers are 8-byte loads. Constants (0.25, the cosine's 19,
//!   normalize's 1/len, eps, 1, 1/lanes) are loaded from the instance once per call or pass
//!   and counted: the code holds no constant-pool operands. Register spills, if the compiler
//!   makes any, are stack traffic, not core.
//! - FMA flops (`Counts::fma_flops`): the flops of the `fma`/`fnma` calls where the variant
//!   fuses ([`fused`]: AVX2 and AVX-512, their scalar remainders included); 0 on scalar and
//!   SSE code, and in the halving trees (adds).
//! - Remainders: scalar loops on scalar/SSE/AVX2 (and on AVX-512 for normalize), masks on
//!   AVX-512 (stencil2d, spmv, cos_chain); gemm pads its tiles instead and counts the padding.
//! - DRAM: compulsory traffic of a cold working set much larger than the LLC, at element
//!   granularity, write-allocate included (a store costs 2× its bytes).

use crate::api::Kernel;
use crate::types::{Counts, FlopClass, Precision, Variant};

/// The non-streaming kernels of the suite.
pub fn kernels() -> Vec<Box<dyn Kernel>> {
    vec![
        Box::new(crate::stencil::Stencil2d),
        Box::new(crate::spmv::Spmv),
        Box::new(crate::gemm::Gemm::<f64>::new()),
        Box::new(crate::gemm::Gemm::<f32>::new()),
        Box::new(crate::normalize::Normalize { fused: false }),
        Box::new(crate::normalize::Normalize { fused: true }),
        Box::new(crate::cos_chain::CosChain { fused: false }),
        Box::new(crate::cos_chain::CosChain { fused: true }),
    ]
}

/// Every variant, in width order.
pub const ALL_VARIANTS: &[Variant] = &[Variant::Scalar, Variant::Sse, Variant::Avx2, Variant::Avx512];

/// Double-precision lanes of a variant's vectors.
pub fn lanes(v: Variant) -> usize {
    (v.width_bits() / 64) as usize
}

/// The flop class of one full-width double-precision instruction of `v`.
pub fn class(v: Variant, precision: Precision) -> FlopClass {
    FlopClass::of(precision, v.width_bits(), v == Variant::Scalar)
}

/// Whether `v` finishes loops with AVX-512 masks (else with scalar remainder loops).
pub fn masked(v: Variant) -> bool {
    v == Variant::Avx512
}

/// Whether the code of `v` fuses: its `fma`/`fnma` are FMA instructions, in the vector loops
/// and in the scalar remainders (`Sc<true>`) alike. Scalar and SSE code issues a multiply
/// then an add: the same flops, no FMA flops.
pub fn fused(v: Variant) -> bool {
    matches!(v, Variant::Avx2 | Variant::Avx512 | Variant::Amx)
}

/// Add the flops of one `hsum` of `lanes` doubles (the halving tree).
pub fn add_hsum(c: &mut Counts, lanes: usize) {
    let mut h = lanes / 2;
    while h >= 1 {
        c.add_flops(FlopClass::of(Precision::F64, (h * 64) as u32, h == 1), h as u64);
        h /= 2;
    }
}

/// Run `$body::<T>(&args)` with the vector type `T` of `variant`; each SIMD instantiation lives in
/// a `#[target_feature]` function reached only after [`crate::check::runnable`] said yes.
/// `$body` is `#[inline(always)]`, so the whole loop nest is compiled with the feature.
macro_rules! dispatch {
    ($variant:expr, $body:ident, [$sc:ty, $sse:ty, $avx2:ty, $avx512:ty], $args:expr, $argty:ty) => {{
        use $crate::types::Variant;
        #[target_feature(enable = "avx2,fma")]
        fn avx2(a: &$argty) {
            $body::<$avx2>(a)
        }
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn avx512(a: &$argty) {
            $body::<$avx512>(a)
        }
        let a: &$argty = $args;
        match $variant {
            Variant::Scalar => $body::<$sc>(a),
            Variant::Sse => $body::<$sse>(a),
            Variant::Avx2 => {
                assert!(
                    $crate::check::runnable(Variant::Avx2),
                    "dispatching an AVX2 kernel on a CPU without AVX2+FMA"
                );
                // SAFETY: the CPU has AVX2 and FMA (checked just above).
                unsafe { avx2(a) }
            }
            // No SIMD kernel lists the tile variant (`Variant::ALL`): its AVX-512 code.
            Variant::Avx512 | Variant::Amx => {
                assert!(
                    $crate::check::runnable(Variant::Avx512),
                    "dispatching an AVX-512 kernel on a CPU without AVX-512F"
                );
                // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
                unsafe { avx512(a) }
            }
        }
    }};
}
pub(crate) use dispatch;

/// A standard one-line refusal for size 0.
pub fn require_size(n: usize, min: usize, unit: &str) -> Result<(), String> {
    if n < min {
        return Err(format!("size {n} is too small (at least {min} {unit})"));
    }
    Ok(())
}
