//! `cos_chain_unfused` and `cos_chain_fused`: `y = cos(cos(x))`, the operator-fusion example.
//! Unfused writes `tmp = cos(x)` for the whole array, then `y = cos(tmp)`; fused computes
//! both cosines per element in registers. Same flops, half the core traffic and a third of
//! the DRAM traffic (no temporary written, allocated and read back).
//!
//! Our own cosine, so the work never depends on the C library: `k = round(x·2/π)` by the
//! 1.5·2⁵² trick (an FMA and a subtraction), Cody–Waite reduction `r = x − k·π/2` in two
//! parts (two FNMAs), then both minimax polynomials of Cephes on [−π/4, π/4] (cosine: 5 FMAs
//! Horner + `1 − z/2` + `z²·Q`; sine: 5 FMAs + `r·z·P + r`) and a quadrant select by bit
//! operations only (no flops). Per element: 16 FMAs, 1 add, 3 multiplies = 36 flops.
//! Accurate to a few ulps for |x| up to ~10⁵ (the tests check |x| ≤ 100).
//!
//! Loops: full vectors, then the tail — one masked vector on AVX-512, scalar otherwise.
//! The 19 constants are loaded once per pass (broadcasts from the instance's array).

use crate::api::{Instance, Kernel};
use crate::check::{Buf, compare, require, require_memory};
use crate::rng::Rng;
use crate::simd::{F64Ops, Lanes, Sc};
use crate::suite::{ALL_VARIANTS, class, dispatch, fused, lanes, masked, require_size};
use crate::types::{Counts, Precision, Variant};

/// Flops of one cosine per lane.
pub const COS_FLOPS: u64 = 36;
/// Of which in its 16 `fma` calls: FMA flops where the variant fuses (AVX2, AVX-512).
pub const COS_FMA_FLOPS: u64 = 32;

/// 2/π, 1.5·2⁵², −π/2 in two parts (fdlibm), −½, 1, sine then cosine coefficients (Cephes),
/// written as published; last −0.0, the sign-bit mask of the quadrant select.
#[allow(clippy::excessive_precision)]
pub const CONSTS: [f64; NK] = [
    std::f64::consts::FRAC_2_PI,
    6755399441055744.0,
    -1.570_796_326_734_125_6,
    -6.077_100_506_506_192e-11,
    -0.5,
    1.0,
    1.589_623_015_765_465_7e-10,
    -2.505_074_776_285_780_7e-8,
    2.755_731_362_138_572_5e-6,
    -1.984_126_982_958_953_9e-4,
    8.333_333_333_322_118e-3,
    -1.666_666_666_666_663e-1,
    -1.135_853_652_138_768_2e-11,
    2.087_570_084_197_473_2e-9,
    -2.755_731_417_929_673_8e-7,
    2.480_158_728_885_170_5e-5,
    -1.388_888_888_887_305_6e-3,
    4.166_666_666_666_659_3e-2,
    -0.0,
];

/// Constants loaded per pass.
pub const NK: usize = 19;

pub struct CosChain {
    pub fused: bool,
}

/// The constants in registers.
#[derive(Clone, Copy)]
struct K<V> {
    c: [V; NK],
}

impl<V: F64Ops> K<V> {
    /// 19 broadcast loads.
    #[inline(always)]
    unsafe fn load(p: *const f64) -> K<V> {
        // SAFETY: the caller passes NK constants.
        K {
            c: std::array::from_fn(|i| unsafe { V::bcast(p.add(i)) }),
        }
    }
    /// The same constants as scalars: register moves, no loads.
    #[inline(always)]
    fn scalar(&self) -> K<V::Sc> {
        K {
            c: std::array::from_fn(|i| V::Sc::splat(self.c[i].first())),
        }
    }
}

#[inline(always)]
fn cos<V: F64Ops>(x: V, k: &K<V>) -> V {
    let c = &k.c;
    let t = V::fma(x, c[0], c[1]);
    let kq = V::sub(t, c[1]);
    // Negated constants, so every step is a plain FMA: an FNMA by a loop-invariant constant
    // makes LLVM hoist a negation through a constant-pool sign mask (an uncounted load).
    let r = V::fma(kq, c[2], x);
    let r = V::fma(kq, c[3], r);
    let z = V::mul(r, r);
    let mut q = V::fma(c[12], z, c[13]);
    for &ci in &c[14..18] {
        q = V::fma(q, z, ci);
    }
    let cos_r = V::fma(V::mul(z, z), q, V::fma(c[4], z, c[5]));
    let mut p = V::fma(c[6], z, c[7]);
    for &ci in &c[8..12] {
        p = V::fma(p, z, ci);
    }
    let sin_r = V::fma(V::mul(r, z), p, r);
    V::cos_select(t, cos_r, sin_r, c[18])
}

#[derive(Clone, Copy)]
pub struct Args {
    pub n: usize,
    pub src: *const f64,
    pub dst: *mut f64,
    pub consts: *const f64,
    /// Apply the cosine twice per element (the fused chain).
    pub twice: bool,
}

/// One pass `dst = cos(src)` (or `cos(cos(src))` when `twice`).
#[inline(always)]
pub fn pass<V: F64Ops>(a: &Args) {
    let l = V::LANES;
    // SAFETY: src and dst hold n elements; consts NK.
    unsafe {
        let k = K::<V>::load(a.consts);
        let f = |x: V| if a.twice { cos(cos(x, &k), &k) } else { cos(x, &k) };
        let mut i = 0;
        while i + l <= a.n {
            V::store(a.dst.add(i), f(V::load(a.src.add(i))));
            i += l;
        }
        let r = a.n - i;
        if V::MASKED {
            if r > 0 {
                V::store_part(a.dst.add(i), r, f(V::load_part(a.src.add(i), r)));
            }
        } else {
            let ks = k.scalar();
            while i < a.n {
                let x = V::Sc::load(a.src.add(i));
                let y = if a.twice { cos(cos(x, &ks), &ks) } else { cos(x, &ks) };
                V::Sc::store(a.dst.add(i), y);
                i += 1;
            }
        }
    }
}

fn run_pass(v: Variant, a: &Args) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::{F64x2, F64x4, F64x8};
        dispatch!(v, pass, [Sc<false>, F64x2, F64x4, F64x8], a, Args)
    }
}

/// Counts of one pass over `n` elements with `cosines` per element.
fn pass_counts(n: usize, cosines: u64, v: Variant) -> Counts {
    let l = lanes(v);
    let mut c = Counts::default();
    let chunks = if masked(v) { n.div_ceil(l) } else { n / l };
    let fma_per_lane = if fused(v) { COS_FMA_FLOPS } else { 0 };
    let mut add = |class, lanes: u64| {
        c.add_flops(class, lanes * (COS_FLOPS - fma_per_lane) * cosines);
        c.add_fma_flops(class, lanes * fma_per_lane * cosines);
    };
    add(class(v, Precision::F64), (chunks * l) as u64);
    if !masked(v) {
        add(class(Variant::Scalar, Precision::F64), (n % l) as u64);
    }
    c.core_load_bytes = NK as u64 * 8 + 8 * n as u64;
    c.core_store_bytes = 8 * n as u64;
    c
}

/// Analytic counts of one call at `n` elements.
pub fn counts(fused: bool, n: usize, v: Variant) -> Counts {
    let n64 = n as u64;
    if fused {
        let mut c = pass_counts(n, 2, v);
        c.dram_bytes = 24 * n64 + 8 * NK as u64;
        c
    } else {
        let mut c = pass_counts(n, 1, v);
        c.add(&pass_counts(n, 1, v));
        c.dram_bytes = 48 * n64 + 8 * NK as u64;
        c
    }
}

impl Kernel for CosChain {
    fn name(&self) -> &'static str {
        if self.fused { "cos_chain_fused" } else { "cos_chain_unfused" }
    }
    fn description(&self) -> &'static str {
        if self.fused {
            "y = cos(cos(x)) in one pass, own polynomial cosine (double)"
        } else {
            "tmp = cos(x); y = cos(tmp): two passes through a temporary (double)"
        }
    }
    fn precision(&self) -> Precision {
        Precision::F64
    }
    fn variants(&self) -> &'static [Variant] {
        ALL_VARIANTS
    }
    /// Each pass streams its arrays once (the temporary's reuse distance is the whole array,
    /// which the compulsory figure already counts as written, allocated and read back).
    fn reuse_footprint_bytes(&self, _n: usize) -> Option<u64> {
        Some(0)
    }
    fn formula(&self, v: Variant) -> String {
        let tail = if masked(v) {
            "masked tail, full-width flops"
        } else {
            "scalar tail"
        };
        if self.fused {
            format!("W = 72·n flops ({tail}); core Q = 16·n + 152 B; DRAM = 24·n + 152 B")
        } else {
            format!("W = 72·n flops ({tail}); core Q = 32·n + 304 B; DRAM = 48·n + 152 B (tmp written, allocated, read back)")
        }
    }
    fn working_set_bytes(&self, n: usize) -> u64 {
        (if self.fused { 16u64 } else { 24 }).saturating_mul(n as u64)
    }
    fn size_for_bytes(&self, bytes: u64) -> usize {
        ((bytes / if self.fused { 16 } else { 24 }) as usize).max(1)
    }
    fn counts(&self, n: usize, v: Variant) -> Counts {
        counts(self.fused, n, v)
    }
    fn effective_flops(&self, n: usize, v: Variant) -> Option<u64> {
        // Masked-off lanes excluded: 72 flops per element.
        masked(v).then(|| counts(self.fused, n, Variant::Scalar).flops_total())
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(Chain::new(self.fused, n, v, seed, 0, 10.0)?))
    }
}

pub struct Chain {
    fused: bool,
    n: usize,
    v: Variant,
    x: Buf<f64>,
    tmp: Buf<f64>,
    y: Buf<f64>,
    consts: Buf<f64>,
}

// SAFETY: the buffers are owned; the raw pointers only live during `run`.
unsafe impl Send for Chain {}

impl Chain {
    /// Inputs uniform in [−range, range).
    pub fn new(fused: bool, n: usize, v: Variant, seed: u64, misalign: usize, range: f64) -> Result<Chain, String> {
        require_size(n, 1, "element")?;
        require(v)?;
        require_memory(CosChain { fused }.working_set_bytes(n))?;
        let mut rng = Rng::new(seed);
        let mut x = Buf::new(n, misalign)?;
        x.fill_random(&mut rng, -range, range);
        let tmp = Buf::new(if fused { 0 } else { n }, misalign)?;
        let y = Buf::new(n, misalign)?;
        let mut consts = Buf::new(NK, 0)?;
        consts.as_mut_slice().copy_from_slice(&CONSTS);
        Ok(Chain {
            fused,
            n,
            v,
            x,
            tmp,
            y,
            consts,
        })
    }

    /// The passes of one run: one fused, or two through `tmp`. A fixed array, not a Vec: a
    /// run must not allocate (its heap traffic is not the kernel's, and a traced run's heap
    /// layout must not depend on the tracer's own allocations).
    fn passes(&mut self) -> ([Args; 2], usize) {
        let consts = self.consts.ptr();
        let first = Args {
            n: self.n,
            src: self.x.ptr(),
            dst: if self.fused { self.y.mut_ptr() } else { self.tmp.mut_ptr() },
            consts,
            twice: self.fused,
        };
        let second = Args {
            n: self.n,
            src: self.tmp.ptr(),
            dst: self.y.mut_ptr(),
            consts,
            twice: false,
        };
        ([first, second], if self.fused { 1 } else { 2 })
    }
}

impl Instance for Chain {
    fn run(&mut self) {
        let (passes, k) = self.passes();
        for a in &passes[..k] {
            run_pass(self.v, a);
        }
    }
    fn verify(&mut self) -> Result<(), String> {
        self.tmp.poison();
        self.y.poison();
        self.run();
        let want: Vec<f64> = self.x.as_slice().iter().map(|x| x.cos().cos()).collect();
        compare(self.name(), self.y.as_slice(), &want, 0.0, 1e-14)
    }
    fn counts(&self) -> Counts {
        counts(self.fused, self.n, self.v)
    }
}

impl Chain {
    fn name(&self) -> &'static str {
        if self.fused { "cos_chain_fused y" } else { "cos_chain_unfused y" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::fresh_seed;
    use crate::simd::{Tally, tally_reset, tally_take};

    fn model<V: F64Ops>(fused_kernel: bool, n: usize) -> Counts {
        let mut ch = Chain::new(fused_kernel, n, Variant::Scalar, 11, 1, 10.0).unwrap();
        ch.y.poison();
        tally_reset();
        let (passes, k) = ch.passes();
        for a in &passes[..k] {
            pass::<V>(a);
        }
        let mut c = tally_take();
        c.dram_bytes = counts(fused_kernel, n, Variant::Scalar).dram_bytes;
        let want: Vec<f64> = ch.x.as_slice().iter().map(|x| x.cos().cos()).collect();
        compare("model y", ch.y.as_slice(), &want, 0.0, 1e-14).unwrap();
        c
    }

    #[test]
    fn counts_match_the_instrumented_loops() {
        for fused_kernel in [false, true] {
            for n in [1, 2, 3, 7, 8, 9, 31, 64] {
                let f = |v| counts(fused_kernel, n, v);
                assert_eq!(
                    model::<Tally<f64, 1, false, false>>(fused_kernel, n),
                    f(Variant::Scalar),
                    "{fused_kernel} n={n}"
                );
                assert_eq!(
                    model::<Tally<f64, 2, false, false>>(fused_kernel, n),
                    f(Variant::Sse),
                    "{fused_kernel} n={n}"
                );
                assert_eq!(
                    model::<Tally<f64, 4, false, true>>(fused_kernel, n),
                    f(Variant::Avx2),
                    "{fused_kernel} n={n}"
                );
                assert_eq!(
                    model::<Tally<f64, 8, true, true>>(fused_kernel, n),
                    f(Variant::Avx512),
                    "{fused_kernel} n={n}"
                );
            }
        }
    }

    #[test]
    fn every_runnable_variant_matches_the_reference() {
        let seed = fresh_seed();
        for fused_kernel in [false, true] {
            for v in ALL_VARIANTS.iter().copied().filter(|v| crate::check::runnable(*v)) {
                for (n, mis, range) in [(1, 0, 1.0), (13, 1, 10.0), (100, 3, 100.0), (1001, 5, 3.2)] {
                    let mut ch = Chain::new(fused_kernel, n, v, seed ^ n as u64, mis, range).unwrap();
                    ch.verify()
                        .unwrap_or_else(|e| panic!("seed {seed} fused={fused_kernel} {v} n={n} misalign={mis}: {e}"));
                }
            }
        }
    }

    #[test]
    fn our_cosine_is_accurate_at_quadrant_edges() {
        let k = K::<Sc<false>> {
            c: std::array::from_fn(|i| Sc(CONSTS[i])),
        };
        for i in -400..400 {
            let x = i as f64 * std::f64::consts::FRAC_PI_4 + 1e-9 * (i % 3) as f64;
            let got = cos(Sc::<false>(x), &k).0;
            assert!((got - x.cos()).abs() < 4e-16, "cos({x}) = {got}, libm {}", x.cos());
        }
    }

    #[test]
    fn fusion_halves_core_traffic_at_equal_work() {
        let (u, f) = (counts(false, 1000, Variant::Avx2), counts(true, 1000, Variant::Avx2));
        assert_eq!(u.flops_total(), f.flops_total());
        assert!(f.core_bytes() * 2 < u.core_bytes() + 300);
        assert_eq!(f.dram_bytes * 2 - 8 * NK as u64, u.dram_bytes);
    }
}
