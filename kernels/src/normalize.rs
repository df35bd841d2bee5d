//! `normalize_naive` and `normalize_fused`: per-row mean/variance normalization of a batch
//! of rows (`y = (x − mean) / sqrt(var + eps)`, population variance), the operator-fusion
//! example. Two kernels rather than two variants, because the variant axis is the ISA.
//!
//! - naive, three passes over each row: sum → mean; Σ(x − mean)² → variance; normalize.
//! - fused, two passes: one-pass Welford statistics (vector lanes each run Welford on their
//!   column of chunks with a shared count, then merge by Chan's formula; the row's tail
//!   continues Welford in scalar), then normalize. More flops, one read of x fewer.
//!
//! Every vector variant finishes a row with a scalar remainder loop (no masks, AVX-512
//! included: a masked Welford update would need masked arithmetic). Constants (1/len, eps,
//! 1, 1/lanes) are loaded once per call from the instance; the fused kernel loads the
//! reciprocal counts 1/t and counts t from two tables (no int→float conversion, no division
//! in the loop).

use crate::api::{Instance, Kernel};
use crate::check::{Buf, compare, require, require_memory};
use crate::rng::Rng;
use crate::simd::{F64Ops, Lanes, Sc};
use crate::suite::{ALL_VARIANTS, add_hsum, class, dispatch, lanes, require_size};
use crate::types::{Counts, Precision, Variant};

/// Values per row of the suite kernels (within 128–1024, not a multiple of any vector width).
pub const ROW: usize = 500;
/// Added to the variance.
pub const EPS: f64 = 1e-5;

pub struct Normalize {
    pub fused: bool,
}

pub struct Args {
    pub rows: usize,
    pub len: usize,
    pub x: *const f64,
    pub y: *mut f64,
    /// [1/len, eps, 1, 1/lanes]
    pub consts: *const f64,
    /// recip[t] = 1/t (t = 1..=len; recip[0] unused)
    pub recip: *const f64,
    /// count[t] = t (t = 0..=len)
    pub count: *const f64,
}

/// `y = (x − mean)·rstd` over one row: full vectors, then a scalar tail.
#[inline(always)]
unsafe fn scale_row<V: F64Ops>(len: usize, x: *const f64, y: *mut f64, mean: V::Sc, rstd: V::Sc) {
    let l = V::LANES;
    let (mv, rv) = (V::splat(mean.first()), V::splat(rstd.first()));
    let mut j = 0;
    // SAFETY: x and y hold `len` elements.
    unsafe {
        while j + l <= len {
            V::store(y.add(j), V::mul(V::sub(V::load(x.add(j)), mv), rv));
            j += l;
        }
        while j < len {
            V::Sc::store(y.add(j), V::Sc::mul(V::Sc::sub(V::Sc::load(x.add(j)), mean), rstd));
            j += 1;
        }
    }
}

/// `1 / sqrt(var + eps)`: three scalar ops.
#[inline(always)]
fn rstd<S: F64Ops>(var: S, eps: S, one: S) -> S {
    S::div(one, S::sqrt(S::add(var, eps)))
}

#[inline(always)]
pub fn naive<V: F64Ops>(a: &Args) {
    let l = V::LANES;
    // SAFETY: x, y hold rows·len elements; consts 4.
    unsafe {
        let inv_len = V::Sc::bcast(a.consts);
        let eps = V::Sc::bcast(a.consts.add(1));
        let one = V::Sc::bcast(a.consts.add(2));
        for row in 0..a.rows {
            let x = a.x.add(row * a.len);
            let y = a.y.add(row * a.len);
            // pass 1: mean
            let mut acc = V::zero();
            let mut j = 0;
            while j + l <= a.len {
                acc = V::add(acc, V::load(x.add(j)));
                j += l;
            }
            let mut s = V::Sc::splat(acc.hsum());
            while j < a.len {
                s = V::Sc::add(s, V::Sc::load(x.add(j)));
                j += 1;
            }
            let mean = V::Sc::mul(s, inv_len);
            // pass 2: variance
            let mv = V::splat(mean.first());
            let mut acc = V::zero();
            let mut j = 0;
            while j + l <= a.len {
                let d = V::sub(V::load(x.add(j)), mv);
                acc = V::fma(d, d, acc);
                j += l;
            }
            let mut q = V::Sc::splat(acc.hsum());
            while j < a.len {
                let d = V::Sc::sub(V::Sc::load(x.add(j)), mean);
                q = V::Sc::fma(d, d, q);
                j += 1;
            }
            let r = rstd(V::Sc::mul(q, inv_len), eps, one);
            // pass 3
            scale_row::<V>(a.len, x, y, mean, r);
        }
    }
}

#[inline(always)]
pub fn fused<V: F64Ops>(a: &Args) {
    let l = V::LANES;
    // SAFETY: x, y hold rows·len elements; consts 4; recip and count len+1.
    unsafe {
        let inv_len = V::Sc::bcast(a.consts);
        let eps = V::Sc::bcast(a.consts.add(1));
        let one = V::Sc::bcast(a.consts.add(2));
        let inv_lanes = V::Sc::bcast(a.consts.add(3));
        for row in 0..a.rows {
            let x = a.x.add(row * a.len);
            let y = a.y.add(row * a.len);
            // Welford per lane: after c chunks every lane has seen c values.
            let mut mean = V::zero();
            let mut m2 = V::zero();
            let mut c = 0;
            let mut j = 0;
            while j + l <= a.len {
                c += 1;
                let xv = V::load(x.add(j));
                let d = V::sub(xv, mean);
                mean = V::fma(d, V::bcast(a.recip.add(c)), mean);
                m2 = V::fma(d, V::sub(xv, mean), m2);
                j += l;
            }
            // Merge the lanes (Chan et al.): equal counts c.
            let (mut mu, mut s2) = if l > 1 {
                let mu = V::Sc::mul(V::Sc::splat(mean.hsum()), inv_lanes);
                let dm = V::sub(mean, V::splat(mu.first()));
                let spread = V::Sc::splat(V::mul(dm, dm).hsum());
                (mu, V::Sc::fma(V::Sc::bcast(a.count.add(c)), spread, V::Sc::splat(m2.hsum())))
            } else {
                (V::Sc::splat(mean.first()), V::Sc::splat(m2.first()))
            };
            // Tail: scalar Welford continues at count c·lanes.
            let mut t = c * l;
            while j < a.len {
                t += 1;
                let xs = V::Sc::load(x.add(j));
                let d = V::Sc::sub(xs, mu);
                mu = V::Sc::fma(d, V::Sc::bcast(a.recip.add(t)), mu);
                s2 = V::Sc::fma(d, V::Sc::sub(xs, mu), s2);
                j += 1;
            }
            let r = rstd(V::Sc::mul(s2, inv_len), eps, one);
            scale_row::<V>(a.len, x, y, mu, r);
        }
    }
}

fn run_variant(fused_kernel: bool, v: Variant, a: &Args) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::{F64x2, F64x4, F64x8};
        if fused_kernel {
            dispatch!(v, fused, [Sc<false>, F64x2, F64x4, F64x8], a, Args)
        } else {
            dispatch!(v, naive, [Sc<false>, F64x2, F64x4, F64x8], a, Args)
        }
    }
}

/// Analytic counts of one call over `rows` rows of `len` values.
pub fn counts_for(fused: bool, rows: usize, len: usize, v: Variant) -> Counts {
    let l = lanes(v);
    let (full, rem) = ((len / l) as u64, (len % l) as u64);
    let (rows64, len64, l64) = (rows as u64, len as u64, l as u64);
    let vclass = class(v, Precision::F64);
    let sclass = class(Variant::Scalar, Precision::F64);
    let mut row = Counts::default();
    // The `fma` calls: FMA instructions where the variant fuses (AVX2, AVX-512, their scalar
    // tails too), a multiply then an add on scalar and SSE code.
    let fma = |row: &mut Counts, class, n| {
        if crate::suite::fused(v) {
            row.add_fma_flops(class, n)
        } else {
            row.add_flops(class, n)
        }
    };
    if fused {
        // Welford chunks: sub, fma, sub, fma.
        row.add_flops(vclass, full * 2 * l64);
        fma(&mut row, vclass, full * 4 * l64);
        if l > 1 {
            add_hsum(&mut row, l); // Σ mean
            row.add_flops(sclass, 1); // × 1/lanes
            row.add_flops(vclass, 2 * l64); // dm, dm²
            add_hsum(&mut row, l); // Σ dm²
            add_hsum(&mut row, l); // Σ m2
            fma(&mut row, sclass, 2); // count·spread + Σ m2
        }
        row.add_flops(sclass, rem * 2);
        fma(&mut row, sclass, rem * 4);
        row.core_load_bytes += full * (8 * l64 + 8) + if l > 1 { 8 } else { 0 } + rem * 16;
    } else {
        row.add_flops(vclass, full * l64); // Σx
        add_hsum(&mut row, l);
        row.add_flops(sclass, rem + 1); // tail, × 1/len
        row.add_flops(vclass, full * l64); // sub
        fma(&mut row, vclass, full * 2 * l64); // d·d + acc
        add_hsum(&mut row, l);
        row.add_flops(sclass, rem);
        fma(&mut row, sclass, rem * 2);
        row.core_load_bytes += 2 * 8 * len64;
    }
    row.add_flops(sclass, 1 + 3); // variance × 1/len; + eps, sqrt, div
    row.add_flops(vclass, full * 2 * l64); // normalize
    row.add_flops(sclass, rem * 2);
    row.core_load_bytes += 8 * len64;
    row.core_store_bytes += 8 * len64;
    let mut c = row.scaled(rows64);
    let consts = if fused { 4 } else { 3 };
    c.core_load_bytes += 8 * consts;
    c.dram_bytes = 24 * rows64 * len64 + 32 + if fused { 16 * (len64 + 1) } else { 0 };
    c
}

impl Kernel for Normalize {
    fn name(&self) -> &'static str {
        if self.fused { "normalize_fused" } else { "normalize_naive" }
    }
    fn description(&self) -> &'static str {
        if self.fused {
            "per-row mean/variance normalization, one-pass Welford statistics + normalize (rows of 500 doubles)"
        } else {
            "per-row mean/variance normalization, three passes: mean, variance, normalize (rows of 500 doubles)"
        }
    }
    fn precision(&self) -> Precision {
        Precision::F64
    }
    fn variants(&self) -> &'static [Variant] {
        ALL_VARIANTS
    }
    /// The passes over a row reuse that row of x (and write its row of y): one row of each.
    fn reuse_footprint_bytes(&self, _n: usize) -> Option<u64> {
        Some(16 * ROW as u64)
    }
    fn formula(&self, v: Variant) -> String {
        let c = counts_for(self.fused, 1, ROW, v);
        format!(
            "per row of {ROW}: W = {} flops, core Q = {} B (loads {} + stores {}); DRAM = {} B/row (x read once, y written + allocated); n = rows",
            c.flops_total(),
            c.core_bytes(),
            c.core_load_bytes,
            c.core_store_bytes,
            24 * ROW
        )
    }
    fn size_unit(&self) -> &'static str {
        "rows of 500"
    }
    fn working_set_bytes(&self, n: usize) -> u64 {
        (16 * ROW as u64).saturating_mul(n as u64)
    }
    fn size_for_bytes(&self, bytes: u64) -> usize {
        ((bytes / (16 * ROW as u64)) as usize).max(1)
    }
    fn counts(&self, n: usize, v: Variant) -> Counts {
        counts_for(self.fused, n, ROW, v)
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(Batch::new(self.fused, n, ROW, v, seed, 0)?))
    }
}

/// A batch of rows, its output and the constant tables.
pub struct Batch {
    fused: bool,
    rows: usize,
    len: usize,
    v: Variant,
    x: Buf<f64>,
    y: Buf<f64>,
    consts: Buf<f64>,
    recip: Buf<f64>,
    count: Buf<f64>,
}

// SAFETY: the buffers are owned; the raw pointers only live during `run`.
unsafe impl Send for Batch {}

impl Batch {
    pub fn new(fused: bool, rows: usize, len: usize, v: Variant, seed: u64, misalign: usize) -> Result<Batch, String> {
        require_size(rows, 1, "row")?;
        require_size(len, 1, "value per row")?;
        require(v)?;
        let total = rows.checked_mul(len).ok_or("size overflows")?;
        require_memory(16 * total as u64)?;
        let mut rng = Rng::new(seed);
        let mut x = Buf::new(total, misalign)?;
        // Offset and scale differ per row so mean and variance matter.
        for r in 0..rows {
            let (off, scale) = (rng.range(-5.0, 5.0), rng.range(0.1, 3.0));
            for e in &mut x.as_mut_slice()[r * len..(r + 1) * len] {
                *e = off + scale * rng.range(-1.0, 1.0);
            }
        }
        let y = Buf::new(total, misalign)?;
        let mut consts = Buf::new(4, 0)?;
        consts
            .as_mut_slice()
            .copy_from_slice(&[1.0 / len as f64, EPS, 1.0, 1.0 / lanes(v) as f64]);
        let mut recip = Buf::new(len + 1, 0)?;
        let mut count = Buf::new(len + 1, 0)?;
        for t in 1..=len {
            recip.as_mut_slice()[t] = 1.0 / t as f64;
            count.as_mut_slice()[t] = t as f64;
        }
        Ok(Batch {
            fused,
            rows,
            len,
            v,
            x,
            y,
            consts,
            recip,
            count,
        })
    }

    fn args(&mut self) -> Args {
        Args {
            rows: self.rows,
            len: self.len,
            x: self.x.ptr(),
            y: self.y.mut_ptr(),
            consts: self.consts.ptr(),
            recip: self.recip.ptr(),
            count: self.count.ptr(),
        }
    }

    /// Two-pass f64 reference.
    fn reference(&self) -> Vec<f64> {
        let x = self.x.as_slice();
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks(self.len) {
            let mean = row.iter().sum::<f64>() / self.len as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / self.len as f64;
            let r = 1.0 / (var + EPS).sqrt();
            out.extend(row.iter().map(|v| (v - mean) * r));
        }
        out
    }
}

impl Instance for Batch {
    fn run(&mut self) {
        let a = self.args();
        run_variant(self.fused, self.v, &a);
    }
    fn verify(&mut self) -> Result<(), String> {
        self.y.poison();
        self.run();
        let what = if self.fused { "normalize_fused y" } else { "normalize_naive y" };
        compare(what, self.y.as_slice(), &self.reference(), 1e-10, 1e-10)
    }
    fn counts(&self) -> Counts {
        counts_for(self.fused, self.rows, self.len, self.v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::fresh_seed;
    use crate::simd::{Tally, tally_reset, tally_take};

    fn model<V: F64Ops>(fused_kernel: bool, rows: usize, len: usize) -> Counts {
        let v = match V::LANES {
            1 => Variant::Scalar,
            2 => Variant::Sse,
            4 => Variant::Avx2,
            _ => Variant::Avx512,
        };
        // The instance of `v` only for its tables (1/lanes); the model never dispatches.
        let mut b = Batch::new(fused_kernel, rows, len, Variant::Scalar, 3, 1).unwrap();
        b.consts.as_mut_slice()[3] = 1.0 / lanes(v) as f64;
        let a = b.args();
        tally_reset();
        if fused_kernel {
            fused::<V>(&a)
        } else {
            naive::<V>(&a)
        }
        let mut c = tally_take();
        c.dram_bytes = counts_for(fused_kernel, rows, len, v).dram_bytes;
        // The model computes too: compare with the reference.
        compare("model y", b.y.as_slice(), &b.reference(), 1e-10, 1e-10).unwrap();
        c
    }

    #[test]
    fn counts_match_the_instrumented_loops() {
        for fused_kernel in [false, true] {
            for (rows, len) in [(1, 1), (2, 7), (3, 8), (2, 17), (1, 128), (2, 133)] {
                let f = |v| counts_for(fused_kernel, rows, len, v);
                assert_eq!(
                    model::<Tally<f64, 1, false, false>>(fused_kernel, rows, len),
                    f(Variant::Scalar),
                    "{fused_kernel} {rows}×{len}"
                );
                assert_eq!(
                    model::<Tally<f64, 2, false, false>>(fused_kernel, rows, len),
                    f(Variant::Sse),
                    "{fused_kernel} {rows}×{len}"
                );
                assert_eq!(
                    model::<Tally<f64, 4, false, true>>(fused_kernel, rows, len),
                    f(Variant::Avx2),
                    "{fused_kernel} {rows}×{len}"
                );
                assert_eq!(
                    model::<Tally<f64, 8, true, true>>(fused_kernel, rows, len),
                    f(Variant::Avx512),
                    "{fused_kernel} {rows}×{len}"
                );
            }
        }
    }

    #[test]
    fn every_runnable_variant_matches_the_reference() {
        let seed = fresh_seed();
        for fused_kernel in [false, true] {
            for v in ALL_VARIANTS.iter().copied().filter(|v| crate::check::runnable(*v)) {
                for (rows, len, mis) in [(1, 1, 0), (3, 129, 1), (5, 500, 3), (2, 1024, 5), (4, 131, 7)] {
                    let mut b = Batch::new(fused_kernel, rows, len, v, seed ^ len as u64, mis).unwrap();
                    b.verify()
                        .unwrap_or_else(|e| panic!("seed {seed} fused={fused_kernel} {v} {rows}×{len} misalign={mis}: {e}"));
                }
            }
        }
    }

    #[test]
    fn fusion_trades_a_read_for_flops() {
        let naive = counts_for(false, 10, ROW, Variant::Avx512);
        let fused = counts_for(true, 10, ROW, Variant::Avx512);
        assert!(fused.core_load_bytes < naive.core_load_bytes);
        assert!(fused.flops_total() > naive.flops_total());
    }
}
