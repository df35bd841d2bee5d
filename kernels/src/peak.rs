//! Floating-point peak loops: independent FMA, multiply and add chains at every vector width,
//! enough chains to fill every pipe (latency × pipes), and a clock probe per width.
//!
//! Chains: `fma` 12 chains `acc = acc·m + acc`; `mul_add` 6 multiply chains `acc = acc·m` and
//! 6 add chains `acc = acc + m`; `fma_add` 8 FMA chains and 7 add chains (8 on AVX-512, whose
//! 32 registers allow it) for machines with separate adders (Zen: 2 FMA + 2 FADD pipes).
//! `m` is 0 at run time (hidden from the compiler), so every value stays constant and finite.
//! After every round each accumulator passes through an empty `asm!` barrier: the compiler can
//! neither merge chains into wider vectors nor drop a round.

use crate::types::{FlopClass, Precision};

/// The instruction set (vector width, and for 256 bits whether FMA is available).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PeakIsa {
    Scalar,
    Sse,
    Avx,
    Avx2,
    Avx512,
}

impl PeakIsa {
    pub const ALL: [PeakIsa; 5] = [PeakIsa::Scalar, PeakIsa::Sse, PeakIsa::Avx, PeakIsa::Avx2, PeakIsa::Avx512];

    pub fn name(self) -> &'static str {
        match self {
            PeakIsa::Scalar => "scalar",
            PeakIsa::Sse => "sse",
            PeakIsa::Avx => "avx",
            PeakIsa::Avx2 => "avx2",
            PeakIsa::Avx512 => "avx512",
        }
    }

    pub fn width_bits(self) -> u32 {
        match self {
            PeakIsa::Scalar => 64,
            PeakIsa::Sse => 128,
            PeakIsa::Avx | PeakIsa::Avx2 => 256,
            PeakIsa::Avx512 => 512,
        }
    }

    /// Elements per instruction.
    pub fn lanes(self, p: Precision) -> u64 {
        match self {
            PeakIsa::Scalar => 1,
            i => i.width_bits() as u64 / 8 / p.bytes(),
        }
    }
}

/// Which instructions the chains use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PeakMode {
    /// FMA only.
    Fma,
    /// Separate multiplies and adds, one of each per pair of chains.
    MulAdd,
    /// FMAs and adds together (machines with separate adders).
    FmaAdd,
}

impl PeakMode {
    pub const ALL: [PeakMode; 3] = [PeakMode::Fma, PeakMode::MulAdd, PeakMode::FmaAdd];

    pub fn name(self) -> &'static str {
        match self {
            PeakMode::Fma => "fma",
            PeakMode::MulAdd => "mul+add",
            PeakMode::FmaAdd => "fma+add",
        }
    }
}

/// One peak loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeakSpec {
    pub precision: Precision,
    pub isa: PeakIsa,
    pub mode: PeakMode,
}

/// Chains of each kind: (fma, mul, add).
fn chains(isa: PeakIsa, mode: PeakMode) -> (u64, u64, u64) {
    match mode {
        PeakMode::Fma => (12, 0, 0),
        PeakMode::MulAdd => (0, 6, 6),
        PeakMode::FmaAdd if isa == PeakIsa::Avx512 => (8, 0, 8),
        PeakMode::FmaAdd => (8, 0, 7),
    }
}

#[cfg(target_arch = "x86_64")]
fn has(f: &str) -> bool {
    match f {
        "sse2" => std::arch::is_x86_feature_detected!("sse2"),
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "fma" => std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn has(_f: &str) -> bool {
    false
}

impl PeakSpec {
    /// The combinations that exist: AVX (256-bit, no FMA) only mul+add; AVX2 only the FMA forms.
    pub fn all() -> Vec<PeakSpec> {
        let mut v = Vec::new();
        for precision in [Precision::F64, Precision::F32] {
            for isa in PeakIsa::ALL {
                for mode in PeakMode::ALL {
                    let s = PeakSpec { precision, isa, mode };
                    if s.exists() {
                        v.push(s);
                    }
                }
            }
        }
        v
    }

    fn exists(&self) -> bool {
        !matches!(
            (self.isa, self.mode),
            (PeakIsa::Avx, PeakMode::Fma) | (PeakIsa::Avx, PeakMode::FmaAdd) | (PeakIsa::Avx2, PeakMode::MulAdd)
        )
    }

    /// Whether this CPU can run it (checked at run time: never a SIGILL).
    pub fn supported(&self) -> bool {
        if !self.exists() {
            return false;
        }
        let fma = self.mode != PeakMode::MulAdd;
        match self.isa {
            PeakIsa::Scalar | PeakIsa::Sse => has(if fma { "fma" } else { "sse2" }),
            PeakIsa::Avx => has("avx"),
            PeakIsa::Avx2 => has("avx2"),
            PeakIsa::Avx512 => has("avx512f"),
        }
    }

    /// Flops of one round (FMA = 2 per lane).
    pub fn flops_per_round(&self) -> u64 {
        let (f, m, a) = chains(self.isa, self.mode);
        (2 * f + m + a) * self.isa.lanes(self.precision)
    }

    /// Of [`PeakSpec::flops_per_round`], the flops of FMA instructions (the `fma` chains: an
    /// FMA on every ISA that has the mode, scalar and SSE included, which need FMA3 for it).
    pub fn fma_flops_per_round(&self) -> u64 {
        let (f, _, _) = chains(self.isa, self.mode);
        2 * f * self.isa.lanes(self.precision)
    }

    /// Instructions of one round.
    pub fn instructions_per_round(&self) -> u64 {
        let (f, m, a) = chains(self.isa, self.mode);
        f + m + a
    }

    /// The flop class of its instructions.
    pub fn class(&self) -> FlopClass {
        FlopClass::of(self.precision, self.isa.width_bits(), self.isa == PeakIsa::Scalar)
    }

    /// Run `rounds` rounds; returns a value derived from the accumulators (keep it alive).
    /// An unsupported spec runs nothing and returns NaN.
    pub fn run(&self, rounds: u64) -> f64 {
        if !self.supported() {
            return f64::NAN;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let m = std::hint::black_box(0.0);
            // SAFETY: `supported()` checked the CPU features each function is compiled for.
            unsafe { imp::run(*self, rounds, m) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = rounds;
            f64::NAN
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{PeakIsa, PeakMode, PeakSpec, chains};
    use crate::types::Precision;
    use std::arch::x86_64::*;

    /// One peak loop: FMA/mul/add chains of vector type `$V` with `$feat` enabled.
    macro_rules! peak_loop {
        ($name:ident, $feat:literal, $V:ty, $reg:ident, $set1:path, $fma:path, $mul:path, $add:path, $lane0:expr) => {
            #[target_feature(enable = $feat)]
            fn $name(rounds: u64, m: f64, nf: usize, nm: usize, na: usize) -> f64 {
                #[inline]
                #[target_feature(enable = $feat)]
                fn keep(mut v: $V) -> $V {
                    // SAFETY: the asm is empty; it only claims to modify the register holding `v`.
                    unsafe { std::arch::asm!("/* {0} */", inout($reg) v, options(pure, nomem, nostack, preserves_flags)) };
                    v
                }
                let mv = $set1(m as _);
                let one = $set1(1.0 as _);
                let mut f = [one; 12];
                let mut p = [one; 6];
                let mut a = [one; 8];
                // The chain counts are fixed per spec; the branches below are resolved once.
                macro_rules! body {
                    ($nf:literal, $nm:literal, $na:literal) => {
                        for _ in 0..rounds {
                            for x in f.iter_mut().take($nf) {
                                *x = keep($fma(*x, mv, *x));
                            }
                            for x in p.iter_mut().take($nm) {
                                *x = keep($mul(*x, mv));
                            }
                            for x in a.iter_mut().take($na) {
                                *x = keep($add(*x, mv));
                            }
                        }
                    };
                }
                match (nf, nm, na) {
                    (12, 0, 0) => body!(12, 0, 0),
                    (0, 6, 6) => body!(0, 6, 6),
                    (8, 0, 8) => body!(8, 0, 8),
                    _ => body!(8, 0, 7),
                }
                let mut s = 0.0f64;
                for v in f.iter().chain(&p).chain(&a) {
                    #[allow(clippy::redundant_closure_call)]
                    let x: f64 = ($lane0)(*v);
                    s += x;
                }
                s
            }
        };
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    fn mul_sd(a: __m128d, b: __m128d) -> __m128d {
        _mm_mul_sd(a, b)
    }
    #[inline]
    #[target_feature(enable = "sse2")]
    fn add_sd(a: __m128d, b: __m128d) -> __m128d {
        _mm_add_sd(a, b)
    }
    #[inline]
    #[target_feature(enable = "sse")]
    fn mul_ss(a: __m128, b: __m128) -> __m128 {
        _mm_mul_ss(a, b)
    }
    #[inline]
    #[target_feature(enable = "sse")]
    fn add_ss(a: __m128, b: __m128) -> __m128 {
        _mm_add_ss(a, b)
    }
    /// An unused FMA slot for the mul+add-only loops (never called: their fma count is 0).
    #[inline]
    #[target_feature(enable = "sse2")]
    fn no_fma_pd(a: __m128d, _b: __m128d, _c: __m128d) -> __m128d {
        a
    }
    #[inline]
    #[target_feature(enable = "sse")]
    fn no_fma_ps(a: __m128, _b: __m128, _c: __m128) -> __m128 {
        a
    }
    #[inline]
    #[target_feature(enable = "avx")]
    fn no_fma256_pd(a: __m256d, _b: __m256d, _c: __m256d) -> __m256d {
        a
    }
    #[inline]
    #[target_feature(enable = "avx")]
    fn no_fma256_ps(a: __m256, _b: __m256, _c: __m256) -> __m256 {
        a
    }

    peak_loop!(
        scalar_muladd_d,
        "sse2",
        __m128d,
        xmm_reg,
        _mm_set1_pd,
        no_fma_pd,
        mul_sd,
        add_sd,
        |v| _mm_cvtsd_f64(v)
    );
    peak_loop!(
        scalar_fma_d,
        "fma,avx",
        __m128d,
        xmm_reg,
        _mm_set1_pd,
        _mm_fmadd_sd,
        _mm_mul_sd,
        _mm_add_sd,
        |v| _mm_cvtsd_f64(v)
    );
    peak_loop!(
        sse_muladd_d,
        "sse2",
        __m128d,
        xmm_reg,
        _mm_set1_pd,
        no_fma_pd,
        _mm_mul_pd,
        _mm_add_pd,
        |v| _mm_cvtsd_f64(v)
    );
    peak_loop!(
        sse_fma_d,
        "fma,avx",
        __m128d,
        xmm_reg,
        _mm_set1_pd,
        _mm_fmadd_pd,
        _mm_mul_pd,
        _mm_add_pd,
        |v| _mm_cvtsd_f64(v)
    );
    peak_loop!(
        avx_muladd_d,
        "avx",
        __m256d,
        ymm_reg,
        _mm256_set1_pd,
        no_fma256_pd,
        _mm256_mul_pd,
        _mm256_add_pd,
        |v| { _mm256_cvtsd_f64(v) }
    );
    peak_loop!(
        avx2_fma_d,
        "avx2,fma",
        __m256d,
        ymm_reg,
        _mm256_set1_pd,
        _mm256_fmadd_pd,
        _mm256_mul_pd,
        _mm256_add_pd,
        |v| { _mm256_cvtsd_f64(v) }
    );
    peak_loop!(
        avx512_d,
        "avx512f",
        __m512d,
        zmm_reg,
        _mm512_set1_pd,
        _mm512_fmadd_pd,
        _mm512_mul_pd,
        _mm512_add_pd,
        |v| { _mm512_reduce_add_pd(v) }
    );

    peak_loop!(
        scalar_muladd_s,
        "sse",
        __m128,
        xmm_reg,
        _mm_set1_ps,
        no_fma_ps,
        mul_ss,
        add_ss,
        |v| _mm_cvtss_f32(v) as f64
    );
    peak_loop!(
        scalar_fma_s,
        "fma,avx",
        __m128,
        xmm_reg,
        _mm_set1_ps,
        _mm_fmadd_ss,
        _mm_mul_ss,
        _mm_add_ss,
        |v| { _mm_cvtss_f32(v) as f64 }
    );
    peak_loop!(
        sse_muladd_s,
        "sse",
        __m128,
        xmm_reg,
        _mm_set1_ps,
        no_fma_ps,
        _mm_mul_ps,
        _mm_add_ps,
        |v| _mm_cvtss_f32(v) as f64
    );
    peak_loop!(
        sse_fma_s,
        "fma,avx",
        __m128,
        xmm_reg,
        _mm_set1_ps,
        _mm_fmadd_ps,
        _mm_mul_ps,
        _mm_add_ps,
        |v| { _mm_cvtss_f32(v) as f64 }
    );
    peak_loop!(
        avx_muladd_s,
        "avx",
        __m256,
        ymm_reg,
        _mm256_set1_ps,
        no_fma256_ps,
        _mm256_mul_ps,
        _mm256_add_ps,
        |v| { _mm256_cvtss_f32(v) as f64 }
    );
    peak_loop!(
        avx2_fma_s,
        "avx2,fma",
        __m256,
        ymm_reg,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_mul_ps,
        _mm256_add_ps,
        |v| { _mm256_cvtss_f32(v) as f64 }
    );
    peak_loop!(
        avx512_s,
        "avx512f",
        __m512,
        zmm_reg,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_mul_ps,
        _mm512_add_ps,
        |v| { _mm512_reduce_add_ps(v) as f64 }
    );

    /// # Safety
    /// The CPU must have the features of `spec` (`PeakSpec::supported`).
    pub unsafe fn run(spec: PeakSpec, rounds: u64, m: f64) -> f64 {
        let (nf, nm, na) = chains(spec.isa, spec.mode);
        let (nf, nm, na) = (nf as usize, nm as usize, na as usize);
        let fma = spec.mode != PeakMode::MulAdd;
        // SAFETY: the caller checked the features of the function chosen here.
        unsafe {
            match (spec.precision, spec.isa, fma) {
                (Precision::F32, PeakIsa::Scalar, false) => scalar_muladd_s(rounds, m, nf, nm, na),
                (Precision::F32, PeakIsa::Scalar, true) => scalar_fma_s(rounds, m, nf, nm, na),
                (Precision::F32, PeakIsa::Sse, false) => sse_muladd_s(rounds, m, nf, nm, na),
                (Precision::F32, PeakIsa::Sse, true) => sse_fma_s(rounds, m, nf, nm, na),
                (Precision::F32, PeakIsa::Avx, _) => avx_muladd_s(rounds, m, nf, nm, na),
                (Precision::F32, PeakIsa::Avx2, _) => avx2_fma_s(rounds, m, nf, nm, na),
                (Precision::F32, PeakIsa::Avx512, _) => avx512_s(rounds, m, nf, nm, na),
                (_, PeakIsa::Scalar, false) => scalar_muladd_d(rounds, m, nf, nm, na),
                (_, PeakIsa::Scalar, true) => scalar_fma_d(rounds, m, nf, nm, na),
                (_, PeakIsa::Sse, false) => sse_muladd_d(rounds, m, nf, nm, na),
                (_, PeakIsa::Sse, true) => sse_fma_d(rounds, m, nf, nm, na),
                (_, PeakIsa::Avx, _) => avx_muladd_d(rounds, m, nf, nm, na),
                (_, PeakIsa::Avx2, _) => avx2_fma_d(rounds, m, nf, nm, na),
                (_, PeakIsa::Avx512, _) => avx512_d(rounds, m, nf, nm, na),
            }
        }
    }

    /// A chain of 16 dependent integer adds (1 cycle each on every x86 core) per round, with
    /// four independent instructions of `isa`'s width beside it (they keep that unit, and any
    /// frequency licence it carries, busy without lengthening the chain).
    macro_rules! clock_loop {
        ($name:ident, $feat:literal, $zero:literal, $vec:literal, $($clobber:tt)*) => {
            #[target_feature(enable = $feat)]
            fn $name(rounds: u64) {
                let mut x: u64 = 0;
                // SAFETY: register-only arithmetic on the named operands and clobbered vector
                // registers; no memory is touched.
                unsafe {
                    std::arch::asm!(
                        $zero,
                        "2:",
                        "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                        $vec,
                        "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                        "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                        "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                        "dec {n}",
                        "jnz 2b",
                        x = inout(reg) x,
                        one = in(reg) 1u64,
                        n = inout(reg) rounds.max(1) => _,
                        $($clobber)*
                        options(nostack, nomem),
                    );
                }
                std::hint::black_box(x);
            }
        };
    }

    clock_loop!(clock_scalar, "sse2", "xorpd xmm0, xmm0", "", out("xmm0") _,);
    clock_loop!(clock_sse, "sse2", "xorpd xmm0, xmm0\nxorpd xmm1, xmm1\nxorpd xmm2, xmm2\nxorpd xmm3, xmm3",
        "mulpd xmm0, xmm0\nmulpd xmm1, xmm1\nmulpd xmm2, xmm2\nmulpd xmm3, xmm3",
        out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,);
    clock_loop!(clock_avx, "avx", "vxorpd ymm0, ymm0, ymm0\nvxorpd ymm1, ymm1, ymm1\nvxorpd ymm2, ymm2, ymm2\nvxorpd ymm3, ymm3, ymm3",
        "vmulpd ymm0, ymm0, ymm0\nvmulpd ymm1, ymm1, ymm1\nvmulpd ymm2, ymm2, ymm2\nvmulpd ymm3, ymm3, ymm3",
        out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,);
    clock_loop!(clock_avx2, "avx2,fma", "vxorpd ymm0, ymm0, ymm0\nvxorpd ymm1, ymm1, ymm1\nvxorpd ymm2, ymm2, ymm2\nvxorpd ymm3, ymm3, ymm3",
        "vfmadd231pd ymm0, ymm0, ymm0\nvfmadd231pd ymm1, ymm1, ymm1\nvfmadd231pd ymm2, ymm2, ymm2\nvfmadd231pd ymm3, ymm3, ymm3",
        out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,);
    clock_loop!(clock_avx512, "avx512f",
        "vpxord zmm16, zmm16, zmm16\nvpxord zmm17, zmm17, zmm17\nvpxord zmm18, zmm18, zmm18\nvpxord zmm19, zmm19, zmm19",
        "vfmadd231pd zmm16, zmm16, zmm16\nvfmadd231pd zmm17, zmm17, zmm17\nvfmadd231pd zmm18, zmm18, zmm18\nvfmadd231pd zmm19, zmm19, zmm19",
        out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,);

    /// # Safety
    /// The CPU must have `isa`.
    pub unsafe fn clock_rounds(isa: PeakIsa, rounds: u64) {
        // SAFETY: the caller checked the features.
        unsafe {
            match isa {
                PeakIsa::Scalar => clock_scalar(rounds),
                PeakIsa::Sse => clock_sse(rounds),
                PeakIsa::Avx => clock_avx(rounds),
                PeakIsa::Avx2 => clock_avx2(rounds),
                PeakIsa::Avx512 => clock_avx512(rounds),
            }
        }
    }
}

/// Cycles of one round of the clock probe.
pub const CLOCK_CYCLES_PER_ROUND: u64 = 16;

/// Run the clock probe for `isa` (`rounds` × 16 cycles). `None` when the CPU lacks the ISA.
pub fn clock_probe(isa: PeakIsa, rounds: u64) -> Option<()> {
    let feat = match isa {
        PeakIsa::Scalar | PeakIsa::Sse => "sse2",
        PeakIsa::Avx => "avx",
        PeakIsa::Avx2 => "avx2",
        PeakIsa::Avx512 => "avx512f",
    };
    if !has(feat) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the feature was checked just above.
    unsafe {
        imp::clock_rounds(isa, rounds)
    };
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_loop_runs_and_keeps_finite_values() {
        for s in PeakSpec::all() {
            let r = s.run(1000);
            if s.supported() {
                assert!(r.is_finite(), "{s:?} gave {r}");
                assert!(r > 0.0, "{s:?}: accumulators start at 1 and must stay there ({r})");
            } else {
                assert!(r.is_nan());
            }
        }
    }

    #[test]
    fn flops_per_round() {
        let s = PeakSpec {
            precision: Precision::F64,
            isa: PeakIsa::Avx512,
            mode: PeakMode::Fma,
        };
        assert_eq!(s.flops_per_round(), 12 * 2 * 8);
        let s = PeakSpec {
            precision: Precision::F32,
            isa: PeakIsa::Avx,
            mode: PeakMode::MulAdd,
        };
        assert_eq!(s.flops_per_round(), 12 * 8);
        let s = PeakSpec {
            precision: Precision::F64,
            isa: PeakIsa::Avx2,
            mode: PeakMode::FmaAdd,
        };
        assert_eq!(s.flops_per_round(), (16 + 7) * 4);
        assert_eq!(s.fma_flops_per_round(), 16 * 4);
        for s in PeakSpec::all() {
            let fma = s.fma_flops_per_round();
            assert!(fma <= s.flops_per_round(), "{s:?}");
            // The FMA mode is all FMA, mul+add none of it, fma+add part of it.
            match s.mode {
                PeakMode::Fma => assert_eq!(fma, s.flops_per_round(), "{s:?}"),
                PeakMode::MulAdd => assert_eq!(fma, 0, "{s:?}"),
                PeakMode::FmaAdd => assert!(fma > 0 && fma < s.flops_per_round(), "{s:?}"),
            }
        }
        assert!(!PeakSpec::all().iter().any(|s| s.isa == PeakIsa::Avx && s.mode == PeakMode::Fma));
    }
}
