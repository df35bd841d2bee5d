//! The vector vocabulary the suite kernels are written in: one generic loop body per kernel,
//! instantiated for scalar, SSE2, AVX2+FMA and AVX-512 types built on `std::arch` intrinsics,
//! and for [`Tally`], a counting model that executes the same loop body lane by lane and
//! records every flop and every byte its loads and stores move.
//!
//! Why a counting type: the analytic counts of each kernel are closed formulas written by
//! hand from its loops; the unit tests run the very same generic loop body with `Tally` and
//! compare, so a formula that forgets a remainder loop or a reduction fails a test.
//!
//! Rules every implementation follows (the trace backend counts the compiled code, so they
//! are what makes the analytic counts exact):
//! - one method = one instruction class: `add`/`sub`/`mul`/`div`/`sqrt` count `LANES` flops,
//!   `fma`/`fnma` `2 × LANES` (scalar and SSE have no FMA: they issue a multiply and an add,
//!   the same flop total; only the AVX2 and AVX-512 types, and `Sc<true>`, the scalar type
//!   of their remainder loops, issue FMA instructions, whose flops `Counts::fma_flops` holds);
//! - `hsum` is a tree of halving adds: 512 → one 256-bit add, 256 → one 128-bit add,
//!   128 → one scalar add;
//! - loads and stores move `LANES × size` bytes; masked (`*_part`) ones move only the active
//!   elements (a masked AVX-512 op still counts full-width flops: hardware-counter semantics);
//! - bit operations (`cos_select`), broadcasts from a register and zeroing are not flops;
//! - scalar arithmetic goes through `asm!` so LLVM cannot auto-vectorize the scalar variant
//!   or a remainder loop behind our back.

#![allow(clippy::missing_safety_doc)]
// The counting model works lane by lane over parallel arrays: index loops read best.
#![allow(clippy::needless_range_loop)]

use std::cell::RefCell;
use std::marker::PhantomData;

use crate::types::{Counts, FlopClass, Precision};

/// An element type of the suite (f64, f32).
pub trait Elem: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    const PRECISION: Precision;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Elem for f64 {
    const PRECISION: Precision = Precision::F64;
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
}

impl Elem for f32 {
    const PRECISION: Precision = Precision::F32;
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

/// Memory and FMA: what the GEMM micro-kernel and the packing routines need (f64 and f32).
///
/// # Safety
/// Values of the x86 vector types only exist inside functions compiled with the matching
/// `#[target_feature]`, reached after a run-time feature check (see each kernel's dispatch).
pub unsafe trait Lanes: Copy {
    type E: Elem;
    const LANES: usize;
    fn zero() -> Self;
    /// # Safety: `p` valid for `LANES` reads.
    unsafe fn load(p: *const Self::E) -> Self;
    /// # Safety: `p` valid for `LANES` writes.
    unsafe fn store(p: *mut Self::E, v: Self);
    /// Broadcast one element loaded from memory (one load of one element).
    /// # Safety: `p` valid for one read.
    unsafe fn bcast(p: *const Self::E) -> Self;
    /// `a * b + c`.
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// Copy one element (a volatile scalar load and store: never turned into a `memcpy`
    /// call, whose overlapping tail tricks would move more bytes than counted).
    /// # Safety: both pointers valid for one element.
    unsafe fn copy_elem(src: *const Self::E, dst: *mut Self::E) {
        // SAFETY: the caller guarantees both pointers are valid for one element.
        unsafe { std::ptr::write_volatile(dst, std::ptr::read_volatile(src)) }
    }
}

/// Double-precision arithmetic, reductions and masked tails on top of [`Lanes`].
///
/// # Safety
/// As for [`Lanes`].
pub unsafe trait F64Ops: Lanes<E = f64> {
    /// Remainder loops use masks (AVX-512) instead of the scalar type.
    const MASKED: bool;
    /// The scalar type remainder loops and reductions continue in.
    type Sc: F64Ops;
    fn splat(x: f64) -> Self;
    fn add(a: Self, b: Self) -> Self;
    fn sub(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn div(a: Self, b: Self) -> Self;
    fn sqrt(a: Self) -> Self;
    /// `c - a * b`.
    fn fnma(a: Self, b: Self, c: Self) -> Self;
    /// Sum of the lanes by halving adds.
    fn hsum(self) -> f64;
    /// First lane (a register move: no load).
    fn first(self) -> f64;
    /// Masked load of the first `n < LANES` elements, zeros elsewhere (only when `MASKED`).
    /// # Safety: `p` valid for `n` reads.
    unsafe fn load_part(p: *const f64, n: usize) -> Self;
    /// Masked store of the first `n < LANES` lanes (only when `MASKED`).
    /// # Safety: `p` valid for `n` writes.
    unsafe fn store_part(p: *mut f64, n: usize, v: Self);
    /// Gather `x[idx[0..LANES]]`: loads `LANES` 4-byte indices and `LANES` elements.
    /// # Safety: `idx` valid for `LANES` reads, every index in bounds of `x`.
    unsafe fn gather(x: *const f64, idx: *const u32) -> Self;
    /// Masked gather of the first `n < LANES` (only when `MASKED`): `n` indices, `n` elements.
    /// # Safety: `idx` valid for `n` reads, those indices in bounds of `x`.
    unsafe fn gather_part(x: *const f64, idx: *const u32, n: usize) -> Self;
    /// The cosine's quadrant fix-up, by bit operations only (no flops): `t` holds the
    /// rounded quadrant `k` in its low mantissa bits; returns `[c, -s, -c, s][k & 3]`.
    /// `sign` holds −0.0 (the sign-bit mask) in every lane, loaded by the caller: with no
    /// constant in the code LLVM cannot fold one into a constant-pool operand (an uncounted
    /// core load).
    fn cos_select(t: Self, c: Self, s: Self, sign: Self) -> Self;
    /// Load one 8-byte index (CSR row pointers), counted like any core load.
    /// # Safety: `p` valid for one read.
    #[inline(always)]
    unsafe fn load_index(p: *const usize) -> usize {
        // SAFETY: caller guarantees `p` is valid.
        unsafe { p.read() }
    }
}

// ---------------------------------------------------------------------------------------
// Scalar types: one element in an xmm register, arithmetic through asm! (never vectorized).

/// Scalar double; `VEX` selects the AVX encoding (used inside AVX2/AVX-512 functions, which
/// also guarantees FMA).
#[derive(Clone, Copy, Debug)]
pub struct Sc<const VEX: bool>(pub f64);

macro_rules! scalar_asm {
    ($a:expr, $b:expr, $legacy:literal, $vex:literal) => {{
        let mut r: f64 = $a;
        let b: f64 = $b;
        if VEX {
            // SAFETY: register-only AVX instruction; `Sc<true>` is only used in functions
            // compiled for (and dispatched after checking) AVX2+FMA or AVX-512.
            unsafe { std::arch::asm!($vex, r = inout(xmm_reg) r, b = in(xmm_reg) b, options(pure, nomem, nostack, preserves_flags)) }
        } else {
            // SAFETY: register-only SSE2 instruction, part of the x86-64 baseline.
            unsafe { std::arch::asm!($legacy, r = inout(xmm_reg) r, b = in(xmm_reg) b, options(pure, nomem, nostack, preserves_flags)) }
        }
        r
    }};
}

unsafe impl<const VEX: bool> Lanes for Sc<VEX> {
    type E = f64;
    const LANES: usize = 1;
    #[inline(always)]
    fn zero() -> Self {
        Sc(0.0)
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> Self {
        // SAFETY: caller guarantees `p` is valid.
        Sc(unsafe { p.read_unaligned() })
    }
    #[inline(always)]
    unsafe fn store(p: *mut f64, v: Self) {
        // SAFETY: caller guarantees `p` is valid.
        unsafe { p.write_unaligned(v.0) }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const f64) -> Self {
        // SAFETY: caller guarantees `p` is valid.
        Sc(unsafe { p.read_unaligned() })
    }
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        if VEX {
            let mut r = c.0;
            // SAFETY: register-only FMA3 instruction, only reached from FMA-enabled code.
            unsafe {
                std::arch::asm!("vfmadd231sd {r}, {a}, {b}", r = inout(xmm_reg) r, a = in(xmm_reg) a.0, b = in(xmm_reg) b.0,
                    options(pure, nomem, nostack, preserves_flags))
            }
            Sc(r)
        } else {
            Self::add(Self::mul(a, b), c)
        }
    }
}

unsafe impl<const VEX: bool> F64Ops for Sc<VEX> {
    const MASKED: bool = false;
    type Sc = Self;
    #[inline(always)]
    fn splat(x: f64) -> Self {
        Sc(x)
    }
    #[inline(always)]
    fn add(a: Self, b: Self) -> Self {
        Sc(scalar_asm!(a.0, b.0, "addsd {r}, {b}", "vaddsd {r}, {r}, {b}"))
    }
    #[inline(always)]
    fn sub(a: Self, b: Self) -> Self {
        Sc(scalar_asm!(a.0, b.0, "subsd {r}, {b}", "vsubsd {r}, {r}, {b}"))
    }
    #[inline(always)]
    fn mul(a: Self, b: Self) -> Self {
        Sc(scalar_asm!(a.0, b.0, "mulsd {r}, {b}", "vmulsd {r}, {r}, {b}"))
    }
    #[inline(always)]
    fn div(a: Self, b: Self) -> Self {
        Sc(scalar_asm!(a.0, b.0, "divsd {r}, {b}", "vdivsd {r}, {r}, {b}"))
    }
    #[inline(always)]
    fn sqrt(a: Self) -> Self {
        Sc(scalar_asm!(a.0, a.0, "sqrtsd {r}, {b}", "vsqrtsd {r}, {r}, {b}"))
    }
    #[inline(always)]
    fn fnma(a: Self, b: Self, c: Self) -> Self {
        if VEX {
            let mut r = c.0;
            // SAFETY: register-only FMA3 instruction, only reached from FMA-enabled code.
            unsafe {
                std::arch::asm!("vfnmadd231sd {r}, {a}, {b}", r = inout(xmm_reg) r, a = in(xmm_reg) a.0, b = in(xmm_reg) b.0,
                    options(pure, nomem, nostack, preserves_flags))
            }
            Sc(r)
        } else {
            Self::sub(c, Self::mul(a, b))
        }
    }
    #[inline(always)]
    fn hsum(self) -> f64 {
        self.0
    }
    #[inline(always)]
    fn first(self) -> f64 {
        self.0
    }
    unsafe fn load_part(_p: *const f64, _n: usize) -> Self {
        unreachable!("scalar remainders never mask")
    }
    unsafe fn store_part(_p: *mut f64, _n: usize, _v: Self) {
        unreachable!("scalar remainders never mask")
    }
    #[inline(always)]
    unsafe fn gather(x: *const f64, idx: *const u32) -> Self {
        // SAFETY: caller guarantees the index and the element are in bounds.
        unsafe { Sc(x.add(idx.read_unaligned() as usize).read_unaligned()) }
    }
    unsafe fn gather_part(_x: *const f64, _idx: *const u32, _n: usize) -> Self {
        unreachable!("scalar remainders never mask")
    }
    #[inline(always)]
    fn cos_select(t: Self, c: Self, s: Self, sign: Self) -> Self {
        let k = t.0.to_bits();
        let v = if k & 1 == 1 { s.0 } else { c.0 };
        // Negative in quadrants 1 and 2: bit 1 xor bit 0, at the sign bit.
        Sc(f64::from_bits(v.to_bits() ^ (((k << 62) ^ (k << 63)) & sign.0.to_bits())))
    }
}

/// Scalar single (sgemm's scalar variant: only memory and FMA-by-two-ops).
#[derive(Clone, Copy, Debug)]
pub struct Sc32(pub f32);

unsafe impl Lanes for Sc32 {
    type E = f32;
    const LANES: usize = 1;
    #[inline(always)]
    fn zero() -> Self {
        Sc32(0.0)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: caller guarantees `p` is valid.
        Sc32(unsafe { p.read_unaligned() })
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: caller guarantees `p` is valid.
        unsafe { p.write_unaligned(v.0) }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const f32) -> Self {
        // SAFETY: caller guarantees `p` is valid.
        Sc32(unsafe { p.read_unaligned() })
    }
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        let mut m = a.0;
        // SAFETY: register-only SSE instructions, part of the x86-64 baseline.
        unsafe {
            std::arch::asm!("mulss {m}, {b}", "addss {m}, {c}", m = inout(xmm_reg) m, b = in(xmm_reg) b.0, c = in(xmm_reg) c.0,
                options(pure, nomem, nostack, preserves_flags))
        }
        Sc32(m)
    }
}

// ---------------------------------------------------------------------------------------
// x86 vector types.

#[cfg(target_arch = "x86_64")]
pub use x86::*;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// SSE2 double ×2.
    #[derive(Clone, Copy, Debug)]
    pub struct F64x2(pub __m128d);
    /// AVX2 double ×4 (with FMA).
    #[derive(Clone, Copy, Debug)]
    pub struct F64x4(pub __m256d);
    /// AVX-512 double ×8.
    #[derive(Clone, Copy, Debug)]
    pub struct F64x8(pub __m512d);
    /// SSE single ×4.
    #[derive(Clone, Copy, Debug)]
    pub struct F32x4(pub __m128);
    /// AVX2 single ×8 (with FMA).
    #[derive(Clone, Copy, Debug)]
    pub struct F32x8(pub __m256);
    /// AVX-512 single ×16.
    #[derive(Clone, Copy, Debug)]
    pub struct F32x16(pub __m512);

    // SAFETY (every `unsafe` block below): the intrinsics need the type's target feature,
    // which holds because these values are only created inside functions compiled with that
    // feature and dispatched after `is_x86_feature_detected!` (see `crate::check::runnable`);
    // pointer validity is the caller's contract, stated on each trait method.

    unsafe impl Lanes for F64x2 {
        type E = f64;
        const LANES: usize = 2;
        #[inline(always)]
        fn zero() -> Self {
            F64x2(unsafe { _mm_setzero_pd() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            F64x2(unsafe { _mm_loadu_pd(p) })
        }
        #[inline(always)]
        unsafe fn store(p: *mut f64, v: Self) {
            unsafe { _mm_storeu_pd(p, v.0) }
        }
        #[inline(always)]
        unsafe fn bcast(p: *const f64) -> Self {
            F64x2(unsafe { _mm_load1_pd(p) })
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            F64x2(unsafe { _mm_add_pd(_mm_mul_pd(a.0, b.0), c.0) })
        }
    }

    unsafe impl F64Ops for F64x2 {
        const MASKED: bool = false;
        type Sc = Sc<false>;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            F64x2(unsafe { _mm_set1_pd(x) })
        }
        #[inline(always)]
        fn add(a: Self, b: Self) -> Self {
            F64x2(unsafe { _mm_add_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn sub(a: Self, b: Self) -> Self {
            F64x2(unsafe { _mm_sub_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn mul(a: Self, b: Self) -> Self {
            F64x2(unsafe { _mm_mul_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn div(a: Self, b: Self) -> Self {
            F64x2(unsafe { _mm_div_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn sqrt(a: Self) -> Self {
            F64x2(unsafe { _mm_sqrt_pd(a.0) })
        }
        #[inline(always)]
        fn fnma(a: Self, b: Self, c: Self) -> Self {
            F64x2(unsafe { _mm_sub_pd(c.0, _mm_mul_pd(a.0, b.0)) })
        }
        #[inline(always)]
        fn hsum(self) -> f64 {
            let hi = unsafe { _mm_unpackhi_pd(self.0, self.0) };
            Sc::<false>::add(Sc(self.first()), Sc(unsafe { _mm_cvtsd_f64(hi) })).0
        }
        #[inline(always)]
        fn first(self) -> f64 {
            unsafe { _mm_cvtsd_f64(self.0) }
        }
        unsafe fn load_part(_p: *const f64, _n: usize) -> Self {
            unreachable!("SSE remainders are scalar")
        }
        unsafe fn store_part(_p: *mut f64, _n: usize, _v: Self) {
            unreachable!("SSE remainders are scalar")
        }
        #[inline(always)]
        unsafe fn gather(x: *const f64, idx: *const u32) -> Self {
            unsafe {
                let i0 = idx.read_unaligned() as usize;
                let i1 = idx.add(1).read_unaligned() as usize;
                F64x2(_mm_loadh_pd(_mm_load_sd(x.add(i0)), x.add(i1)))
            }
        }
        unsafe fn gather_part(_x: *const f64, _idx: *const u32, _n: usize) -> Self {
            unreachable!("SSE remainders are scalar")
        }
        #[inline(always)]
        fn cos_select(t: Self, c: Self, s: Self, sign: Self) -> Self {
            unsafe {
                let k = _mm_castpd_si128(t.0);
                // Shifts only, no vector constants (a constant-pool operand would be an
                // uncounted core load): bit 0 → all-ones lanes via the high dword's sign.
                let b0 = _mm_slli_epi64::<63>(k);
                let odd = _mm_shuffle_epi32::<0b11_11_01_01>(_mm_srai_epi32::<31>(b0));
                let pick = _mm_or_si128(
                    _mm_and_si128(odd, _mm_castpd_si128(s.0)),
                    _mm_andnot_si128(odd, _mm_castpd_si128(c.0)),
                );
                // Negative in quadrants 1 and 2: bit 1 xor bit 0, at the sign bit.
                let sign = _mm_and_si128(_mm_xor_si128(_mm_slli_epi64::<62>(k), b0), _mm_castpd_si128(sign.0));
                F64x2(_mm_castsi128_pd(_mm_xor_si128(pick, sign)))
            }
        }
    }

    unsafe impl Lanes for F64x4 {
        type E = f64;
        const LANES: usize = 4;
        #[inline(always)]
        fn zero() -> Self {
            F64x4(unsafe { _mm256_setzero_pd() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            F64x4(unsafe { _mm256_loadu_pd(p) })
        }
        #[inline(always)]
        unsafe fn store(p: *mut f64, v: Self) {
            unsafe { _mm256_storeu_pd(p, v.0) }
        }
        #[inline(always)]
        unsafe fn bcast(p: *const f64) -> Self {
            F64x4(unsafe { _mm256_broadcast_sd(&*p) })
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            F64x4(unsafe { _mm256_fmadd_pd(a.0, b.0, c.0) })
        }
    }

    unsafe impl F64Ops for F64x4 {
        const MASKED: bool = false;
        type Sc = Sc<true>;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            F64x4(unsafe { _mm256_set1_pd(x) })
        }
        #[inline(always)]
        fn add(a: Self, b: Self) -> Self {
            F64x4(unsafe { _mm256_add_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn sub(a: Self, b: Self) -> Self {
            F64x4(unsafe { _mm256_sub_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn mul(a: Self, b: Self) -> Self {
            F64x4(unsafe { _mm256_mul_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn div(a: Self, b: Self) -> Self {
            F64x4(unsafe { _mm256_div_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn sqrt(a: Self) -> Self {
            F64x4(unsafe { _mm256_sqrt_pd(a.0) })
        }
        #[inline(always)]
        fn fnma(a: Self, b: Self, c: Self) -> Self {
            F64x4(unsafe { _mm256_fnmadd_pd(a.0, b.0, c.0) })
        }
        #[inline(always)]
        fn hsum(self) -> f64 {
            let s = unsafe { _mm_add_pd(_mm256_castpd256_pd128(self.0), _mm256_extractf128_pd::<1>(self.0)) };
            let hi = unsafe { _mm_unpackhi_pd(s, s) };
            Sc::<true>::add(Sc(unsafe { _mm_cvtsd_f64(s) }), Sc(unsafe { _mm_cvtsd_f64(hi) })).0
        }
        #[inline(always)]
        fn first(self) -> f64 {
            unsafe { _mm256_cvtsd_f64(self.0) }
        }
        unsafe fn load_part(_p: *const f64, _n: usize) -> Self {
            unreachable!("AVX2 remainders are scalar")
        }
        unsafe fn store_part(_p: *mut f64, _n: usize, _v: Self) {
            unreachable!("AVX2 remainders are scalar")
        }
        #[inline(always)]
        unsafe fn gather(x: *const f64, idx: *const u32) -> Self {
            unsafe {
                let i = _mm_loadu_si128(idx as *const __m128i);
                F64x4(_mm256_i32gather_pd::<8>(x, i))
            }
        }
        unsafe fn gather_part(_x: *const f64, _idx: *const u32, _n: usize) -> Self {
            unreachable!("AVX2 remainders are scalar")
        }
        #[inline(always)]
        fn cos_select(t: Self, c: Self, s: Self, sign: Self) -> Self {
            unsafe {
                let k = _mm256_castpd_si256(t.0);
                // Shifts only, no vector constants (see F64x2): blendv reads the sign bit.
                let b0 = _mm256_slli_epi64::<63>(k);
                let pick = _mm256_castpd_si256(_mm256_blendv_pd(c.0, s.0, _mm256_castsi256_pd(b0)));
                let sign = _mm256_and_si256(_mm256_xor_si256(_mm256_slli_epi64::<62>(k), b0), _mm256_castpd_si256(sign.0));
                F64x4(_mm256_castsi256_pd(_mm256_xor_si256(pick, sign)))
            }
        }
    }

    #[inline(always)]
    fn mask8(n: usize) -> __mmask8 {
        ((1u32 << n) - 1) as __mmask8
    }

    unsafe impl Lanes for F64x8 {
        type E = f64;
        const LANES: usize = 8;
        #[inline(always)]
        fn zero() -> Self {
            F64x8(unsafe { _mm512_setzero_pd() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            F64x8(unsafe { _mm512_loadu_pd(p) })
        }
        #[inline(always)]
        unsafe fn store(p: *mut f64, v: Self) {
            unsafe { _mm512_storeu_pd(p, v.0) }
        }
        #[inline(always)]
        unsafe fn bcast(p: *const f64) -> Self {
            F64x8(unsafe { _mm512_set1_pd(p.read_unaligned()) })
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            F64x8(unsafe { _mm512_fmadd_pd(a.0, b.0, c.0) })
        }
    }

    unsafe impl F64Ops for F64x8 {
        const MASKED: bool = true;
        type Sc = Sc<true>;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            F64x8(unsafe { _mm512_set1_pd(x) })
        }
        #[inline(always)]
        fn add(a: Self, b: Self) -> Self {
            F64x8(unsafe { _mm512_add_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn sub(a: Self, b: Self) -> Self {
            F64x8(unsafe { _mm512_sub_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn mul(a: Self, b: Self) -> Self {
            F64x8(unsafe { _mm512_mul_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn div(a: Self, b: Self) -> Self {
            F64x8(unsafe { _mm512_div_pd(a.0, b.0) })
        }
        #[inline(always)]
        fn sqrt(a: Self) -> Self {
            F64x8(unsafe { _mm512_sqrt_pd(a.0) })
        }
        #[inline(always)]
        fn fnma(a: Self, b: Self, c: Self) -> Self {
            F64x8(unsafe { _mm512_fnmadd_pd(a.0, b.0, c.0) })
        }
        #[inline(always)]
        fn hsum(self) -> f64 {
            let h = unsafe { _mm256_add_pd(_mm512_castpd512_pd256(self.0), _mm512_extractf64x4_pd::<1>(self.0)) };
            F64x4(h).hsum()
        }
        #[inline(always)]
        fn first(self) -> f64 {
            unsafe { _mm512_cvtsd_f64(self.0) }
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f64, n: usize) -> Self {
            F64x8(unsafe { _mm512_maskz_loadu_pd(mask8(n), p) })
        }
        #[inline(always)]
        unsafe fn store_part(p: *mut f64, n: usize, v: Self) {
            unsafe { _mm512_mask_storeu_pd(p, mask8(n), v.0) }
        }
        #[inline(always)]
        unsafe fn gather(x: *const f64, idx: *const u32) -> Self {
            unsafe {
                let i = _mm256_loadu_si256(idx as *const __m256i);
                F64x8(_mm512_i32gather_pd::<8>(i, x))
            }
        }
        #[inline(always)]
        unsafe fn gather_part(x: *const f64, idx: *const u32, n: usize) -> Self {
            unsafe {
                let m = mask8(n);
                // A 512-bit masked load (AVX-512F; the 256-bit form needs AVX-512VL) of the
                // n active indices; its lower half feeds the gather.
                let i = _mm512_castsi512_si256(_mm512_maskz_loadu_epi32(
                    (1u32 << n).wrapping_sub(1) as __mmask16,
                    idx as *const i32,
                ));
                F64x8(_mm512_mask_i32gather_pd::<8>(_mm512_setzero_pd(), m, i, x))
            }
        }
        #[inline(always)]
        fn cos_select(t: Self, c: Self, s: Self, sign: Self) -> Self {
            unsafe {
                let k = _mm512_castpd_si512(t.0);
                // Shifts only, no vector constants (see F64x2).
                let b0 = _mm512_slli_epi64::<63>(k);
                let odd = _mm512_test_epi64_mask(b0, b0);
                let pick = _mm512_mask_blend_pd(odd, c.0, s.0);
                let sign = _mm512_and_si512(_mm512_xor_si512(_mm512_slli_epi64::<62>(k), b0), _mm512_castpd_si512(sign.0));
                F64x8(_mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(pick), sign)))
            }
        }
    }

    unsafe impl Lanes for F32x4 {
        type E = f32;
        const LANES: usize = 4;
        #[inline(always)]
        fn zero() -> Self {
            F32x4(unsafe { _mm_setzero_ps() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            F32x4(unsafe { _mm_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: Self) {
            unsafe { _mm_storeu_ps(p, v.0) }
        }
        #[inline(always)]
        unsafe fn bcast(p: *const f32) -> Self {
            F32x4(unsafe { _mm_load1_ps(p) })
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            F32x4(unsafe { _mm_add_ps(_mm_mul_ps(a.0, b.0), c.0) })
        }
    }

    unsafe impl Lanes for F32x8 {
        type E = f32;
        const LANES: usize = 8;
        #[inline(always)]
        fn zero() -> Self {
            F32x8(unsafe { _mm256_setzero_ps() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            F32x8(unsafe { _mm256_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: Self) {
            unsafe { _mm256_storeu_ps(p, v.0) }
        }
        #[inline(always)]
        unsafe fn bcast(p: *const f32) -> Self {
            F32x8(unsafe { _mm256_broadcast_ss(&*p) })
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            F32x8(unsafe { _mm256_fmadd_ps(a.0, b.0, c.0) })
        }
    }

    unsafe impl Lanes for F32x16 {
        type E = f32;
        const LANES: usize = 16;
        #[inline(always)]
        fn zero() -> Self {
            F32x16(unsafe { _mm512_setzero_ps() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            F32x16(unsafe { _mm512_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: Self) {
            unsafe { _mm512_storeu_ps(p, v.0) }
        }
        #[inline(always)]
        unsafe fn bcast(p: *const f32) -> Self {
            F32x16(unsafe { _mm512_set1_ps(p.read_unaligned()) })
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            F32x16(unsafe { _mm512_fmadd_ps(a.0, b.0, c.0) })
        }
    }
}

// ---------------------------------------------------------------------------------------
// The counting model.

thread_local! {
    static TALLY: RefCell<Counts> = RefCell::new(Counts::default());
}

/// Start counting on this thread (clears the tally).
pub fn tally_reset() {
    TALLY.with(|t| *t.borrow_mut() = Counts::default());
}

/// What [`Tally`] operations counted on this thread since the last reset.
pub fn tally_take() -> Counts {
    TALLY.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

fn tally_flops(class: FlopClass, n: u64) {
    TALLY.with(|t| t.borrow_mut().add_flops(class, n));
}

fn tally_fma(n: u64) {
    TALLY.with(|t| t.borrow_mut().fma_flops += n);
}

fn tally_load(bytes: usize) {
    TALLY.with(|t| t.borrow_mut().core_load_bytes += bytes as u64);
}

fn tally_store(bytes: usize) {
    TALLY.with(|t| t.borrow_mut().core_store_bytes += bytes as u64);
}

/// The counting model: `L` lanes of `E`, masked tails when `M`, fused multiply-adds when `F`
/// (the type it models issues FMA instructions: AVX2, AVX-512 and their scalar remainder type
/// `Sc<true>`; else a multiply then an add); every operation executes lane by lane in plain
/// Rust and tallies its flops (by class, FMA flops apart too) and bytes.
#[derive(Clone, Copy, Debug)]
pub struct Tally<E: Elem, const L: usize, const M: bool, const F: bool> {
    pub v: [f64; L],
    _e: PhantomData<E>,
}

impl<E: Elem, const L: usize, const M: bool, const F: bool> Tally<E, L, M, F> {
    fn new(v: [f64; L]) -> Self {
        Tally { v, _e: PhantomData }
    }
    fn class() -> FlopClass {
        FlopClass::of(E::PRECISION, (L * E::PRECISION.bytes() as usize * 8) as u32, L == 1)
    }
    fn op(flops_per_lane: u64) {
        tally_flops(Self::class(), flops_per_lane * L as u64);
    }
    /// One `fma`/`fnma`: 2 flops per lane, FMA flops when the modelled type fuses.
    fn fused_op() {
        Self::op(2);
        if F {
            tally_fma(2 * L as u64);
        }
    }
    fn round(x: f64) -> f64 {
        E::from_f64(x).to_f64()
    }
    fn map2(a: Self, b: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        let mut v = [0.0; L];
        for i in 0..L {
            v[i] = Self::round(f(a.v[i], b.v[i]));
        }
        Self::new(v)
    }
}

unsafe impl<E: Elem, const L: usize, const M: bool, const F: bool> Lanes for Tally<E, L, M, F> {
    type E = E;
    const LANES: usize = L;
    fn zero() -> Self {
        Self::new([0.0; L])
    }
    unsafe fn load(p: *const E) -> Self {
        tally_load(L * size_of::<E>());
        let mut v = [0.0; L];
        for (i, x) in v.iter_mut().enumerate() {
            // SAFETY: caller guarantees `p` valid for L reads.
            *x = unsafe { p.add(i).read_unaligned() }.to_f64();
        }
        Self::new(v)
    }
    unsafe fn store(p: *mut E, v: Self) {
        tally_store(L * size_of::<E>());
        for i in 0..L {
            // SAFETY: caller guarantees `p` valid for L writes.
            unsafe { p.add(i).write_unaligned(E::from_f64(v.v[i])) }
        }
    }
    unsafe fn bcast(p: *const E) -> Self {
        tally_load(size_of::<E>());
        // SAFETY: caller guarantees `p` valid for one read.
        Self::new([unsafe { p.read_unaligned() }.to_f64(); L])
    }
    fn fma(a: Self, b: Self, c: Self) -> Self {
        Self::fused_op();
        let mut v = [0.0; L];
        for i in 0..L {
            v[i] = Self::round(a.v[i].mul_add(b.v[i], c.v[i]));
        }
        Self::new(v)
    }
    unsafe fn copy_elem(src: *const E, dst: *mut E) {
        tally_load(size_of::<E>());
        tally_store(size_of::<E>());
        // SAFETY: caller guarantees both pointers valid for one element.
        unsafe { dst.write_unaligned(src.read_unaligned()) }
    }
}

unsafe impl<const L: usize, const M: bool, const F: bool> F64Ops for Tally<f64, L, M, F> {
    const MASKED: bool = M;
    type Sc = Tally<f64, 1, false, F>;
    fn splat(x: f64) -> Self {
        Self::new([x; L])
    }
    fn add(a: Self, b: Self) -> Self {
        Self::op(1);
        Self::map2(a, b, |x, y| x + y)
    }
    fn sub(a: Self, b: Self) -> Self {
        Self::op(1);
        Self::map2(a, b, |x, y| x - y)
    }
    fn mul(a: Self, b: Self) -> Self {
        Self::op(1);
        Self::map2(a, b, |x, y| x * y)
    }
    fn div(a: Self, b: Self) -> Self {
        Self::op(1);
        Self::map2(a, b, |x, y| x / y)
    }
    fn sqrt(a: Self) -> Self {
        Self::op(1);
        Self::map2(a, a, |x, _| x.sqrt())
    }
    fn fnma(a: Self, b: Self, c: Self) -> Self {
        Self::fused_op();
        let mut v = [0.0; L];
        for i in 0..L {
            v[i] = (-a.v[i]).mul_add(b.v[i], c.v[i]);
        }
        Self::new(v)
    }
    fn hsum(self) -> f64 {
        // The halving tree: each level is one add of half the current width.
        let mut v = self.v.to_vec();
        while v.len() > 1 {
            let h = v.len() / 2;
            let class = FlopClass::of(Precision::F64, (h * 64) as u32, h == 1);
            tally_flops(class, h as u64);
            v = (0..h).map(|i| v[i] + v[i + h]).collect();
        }
        v[0]
    }
    fn first(self) -> f64 {
        self.v[0]
    }
    unsafe fn load_part(p: *const f64, n: usize) -> Self {
        assert!(M && n < L, "masked load in an unmasked model");
        tally_load(n * 8);
        let mut v = [0.0; L];
        for (i, x) in v.iter_mut().enumerate().take(n) {
            // SAFETY: caller guarantees `p` valid for n reads.
            *x = unsafe { p.add(i).read_unaligned() };
        }
        Self::new(v)
    }
    unsafe fn store_part(p: *mut f64, n: usize, v: Self) {
        assert!(M && n < L, "masked store in an unmasked model");
        tally_store(n * 8);
        for i in 0..n {
            // SAFETY: caller guarantees `p` valid for n writes.
            unsafe { p.add(i).write_unaligned(v.v[i]) }
        }
    }
    unsafe fn gather(x: *const f64, idx: *const u32) -> Self {
        tally_load(L * 12);
        let mut v = [0.0; L];
        for (i, e) in v.iter_mut().enumerate() {
            // SAFETY: caller guarantees indices and elements in bounds.
            *e = unsafe { x.add(idx.add(i).read_unaligned() as usize).read_unaligned() };
        }
        Self::new(v)
    }
    unsafe fn gather_part(x: *const f64, idx: *const u32, n: usize) -> Self {
        assert!(M && n < L, "masked gather in an unmasked model");
        tally_load(n * 12);
        let mut v = [0.0; L];
        for (i, e) in v.iter_mut().enumerate().take(n) {
            // SAFETY: caller guarantees indices and elements in bounds.
            *e = unsafe { x.add(idx.add(i).read_unaligned() as usize).read_unaligned() };
        }
        Self::new(v)
    }
    unsafe fn load_index(p: *const usize) -> usize {
        tally_load(8);
        // SAFETY: caller guarantees `p` is valid.
        unsafe { p.read() }
    }
    fn cos_select(t: Self, c: Self, s: Self, sign: Self) -> Self {
        let mut v = [0.0; L];
        for i in 0..L {
            v[i] = Sc::<false>::cos_select(Sc(t.v[i]), Sc(c.v[i]), Sc(s.v[i]), Sc(sign.v[i])).0;
        }
        Self::new(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_hsum_counts_the_halving_tree() {
        tally_reset();
        let v = Tally::<f64, 8, true, true>::new([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        assert_eq!(v.hsum(), 36.0);
        let c = tally_take();
        assert_eq!(c.flops.get(&FlopClass::Packed256Double), Some(&4));
        assert_eq!(c.flops.get(&FlopClass::Packed128Double), Some(&2));
        assert_eq!(c.flops.get(&FlopClass::ScalarDouble), Some(&1));
        assert_eq!(c.fma_flops, 0, "a halving tree of adds has no FMA");
    }

    #[test]
    fn tally_counts_fma_flops_only_where_the_type_fuses() {
        fn ops<V: F64Ops>() -> Counts {
            tally_reset();
            let (a, b) = (V::splat(1.5), V::splat(-2.0));
            let c = V::fma(a, b, V::splat(4.0));
            let d = V::fnma(a, b, c);
            let e = V::mul(V::add(c, d), a);
            let _ = <V::Sc as Lanes>::fma(V::Sc::splat(e.first()), V::Sc::splat(2.0), V::Sc::splat(1.0));
            tally_take()
        }
        // Fused: 2 vector FMA-class ops of 2·L flops and one scalar FMA of 2.
        let f = ops::<Tally<f64, 4, false, true>>();
        assert_eq!(f.fma_flops, 2 * 2 * 4 + 2);
        assert_eq!(f.flops_total(), 2 * 2 * 4 + 2 * 4 + 2);
        // The same loop body as a multiply then an add: the same flops, none of them FMA.
        let u = ops::<Tally<f64, 2, false, false>>();
        assert_eq!(u.fma_flops, 0);
        assert_eq!(u.flops_total(), 2 * 2 * 2 + 2 * 2 + 2);
        // f32 (sgemm's Lanes): fused at 16 lanes.
        tally_reset();
        let x = Tally::<f32, 16, true, true>::new([0.5; 16]);
        let _ = Tally::<f32, 16, true, true>::fma(x, x, x);
        assert_eq!(tally_take().fma_flops, 32);
    }

    #[test]
    fn scalar_cos_select_quadrants() {
        // t's low mantissa bits carry k: 1.5·2^52 + k.
        let magic = 6755399441055744.0f64;
        for k in 0..8i64 {
            let t = Sc::<false>(magic + k as f64);
            let r = Sc::<false>::cos_select(t, Sc(2.0), Sc(3.0), Sc(-0.0)).0;
            let want = [2.0, -3.0, -2.0, 3.0][(k & 3) as usize];
            assert_eq!(r, want, "k={k}");
        }
    }
}
