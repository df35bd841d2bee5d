//! `spmv`: y = A·x for an n×n CSR matrix with seeded random sparsity (4 to 28 nonzeros per
//! row, uniform columns, sorted within a row).
//!
//! The sparsity pattern depends on `n` only (seeded from it), so the analytic counts are a
//! function of size and variant; the values come from the instance's seed.
//!
//! Loops (per row): `rowptr[i+1]` is loaded (the row start is carried from the previous row),
//! full vectors of `L` nonzeros (value load, index load + gather of x, FMA), then the tail —
//! one masked FMA with a masked gather on AVX-512, a scalar loop otherwise — then the lane
//! sum (`hsum`) and one scalar store of `y[i]`. Bytes per nonzero: 8 (value) + 4 (index) +
//! 8 (x): 20 on every variant; the masked tail moves only its active elements.

use crate::api::{Instance, Kernel};
use crate::check::{Buf, compare, require, require_memory};
use crate::rng::Rng;
use crate::simd::{F64Ops, Lanes, Sc};
use crate::suite::{ALL_VARIANTS, add_hsum, class, dispatch, fused, lanes, masked, require_size};
use crate::types::{Counts, Precision, Variant};

pub struct Spmv;

/// Fewest and most nonzeros per row.
pub const MIN_ROW: usize = 4;
pub const MAX_ROW: usize = 28;

/// The row lengths of the size-`n` pattern (seeded from `n`).
pub fn row_lengths(n: usize) -> impl Iterator<Item = usize> {
    let mut rng = Rng::new(0x5EED_0000_0000_0000 ^ n as u64);
    (0..n).map(move |_| MIN_ROW + rng.below(MAX_ROW - MIN_ROW + 1))
}

pub struct Args {
    pub n: usize,
    pub rowptr: *const usize,
    pub col: *const u32,
    pub val: *const f64,
    pub x: *const f64,
    pub y: *mut f64,
}

#[inline(always)]
pub fn spmv<V: F64Ops>(a: &Args) {
    let l = V::LANES;
    // SAFETY: rowptr has n+1 monotone entries ≤ nnz; col/val hold nnz entries; every column
    // index is < n, the length of x; y holds n entries.
    unsafe {
        let mut start = V::load_index(a.rowptr);
        for i in 0..a.n {
            let end = V::load_index(a.rowptr.add(i + 1));
            let mut acc = V::zero();
            let mut k = start;
            while k + l <= end {
                acc = V::fma(V::load(a.val.add(k)), V::gather(a.x, a.col.add(k)), acc);
                k += l;
            }
            let sum = if V::MASKED {
                let r = end - k;
                if r > 0 {
                    acc = V::fma(V::load_part(a.val.add(k), r), V::gather_part(a.x, a.col.add(k), r), acc);
                }
                V::Sc::splat(acc.hsum())
            } else {
                let mut s = V::Sc::splat(acc.hsum());
                while k < end {
                    s = V::Sc::fma(V::Sc::load(a.val.add(k)), V::Sc::gather(a.x, a.col.add(k)), s);
                    k += 1;
                }
                s
            };
            V::Sc::store(a.y.add(i), sum);
            start = end;
        }
    }
}

fn run_variant(v: Variant, a: &Args) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::{F64x2, F64x4, F64x8};
        dispatch!(v, spmv, [Sc<false>, F64x2, F64x4, F64x8], a, Args)
    }
}

/// Analytic counts of one y = A·x at size `n`.
pub fn counts(n: usize, v: Variant) -> Counts {
    let mut c = Counts::default();
    let l = lanes(v);
    let mut nnz = 0u64;
    let (mut vec_flops, mut scalar_flops) = (0u64, 0u64);
    for len in row_lengths(n) {
        nnz += len as u64;
        if masked(v) {
            vec_flops += (len.div_ceil(l) * 2 * l) as u64;
        } else {
            vec_flops += (len / l * 2 * l) as u64;
            scalar_flops += (len % l * 2) as u64;
        }
        add_hsum(&mut c, l);
    }
    // Every product is an `fma` (vector, masked or scalar tail): FMAs where the variant fuses.
    if fused(v) {
        c.add_fma_flops(class(v, Precision::F64), vec_flops);
        c.add_fma_flops(class(Variant::Scalar, Precision::F64), scalar_flops);
    } else {
        c.add_flops(class(v, Precision::F64), vec_flops);
        c.add_flops(class(Variant::Scalar, Precision::F64), scalar_flops);
    }
    let n = n as u64;
    c.core_load_bytes = 8 * (n + 1) + 20 * nnz;
    c.core_store_bytes = 8 * n;
    c.dram_bytes = 12 * nnz + 8 * (n + 1) + 8 * n + 16 * n;
    c
}

/// Nonzeros of the size-`n` pattern: exact up to 2^26 rows, beyond that the expectation
/// (such sizes only get here to be refused for memory: the exact sum would take minutes).
fn nnz(n: usize) -> u64 {
    if n <= 1 << 26 {
        row_lengths(n).map(|l| l as u64).sum()
    } else {
        (n as u64).saturating_mul(((MIN_ROW + MAX_ROW) / 2) as u64)
    }
}

impl Kernel for Spmv {
    fn name(&self) -> &'static str {
        "spmv"
    }
    fn description(&self) -> &'static str {
        "CSR sparse matrix × vector, 4–28 random nonzeros per row (double)"
    }
    fn precision(&self) -> Precision {
        Precision::F64
    }
    fn variants(&self) -> &'static [Variant] {
        ALL_VARIANTS
    }
    fn formula(&self, v: Variant) -> String {
        let w = match v {
            Variant::Scalar => "2·nnz".to_string(),
            Variant::Avx512 => "Σrows (16·⌈len/8⌉ + 7) (masked tail, full-width flops)".to_string(),
            _ => format!("2·nnz + rows·{} (lane sums)", if v == Variant::Sse { 1 } else { 3 }),
        };
        format!("W = {w}; core Q = 20·nnz + 16·n + 8 B; DRAM = 12·nnz + 32·n + 8 B (nnz ≈ 16·n)")
    }
    fn size_unit(&self) -> &'static str {
        "rows"
    }
    fn working_set_bytes(&self, n: usize) -> u64 {
        12u64
            .saturating_mul(nnz(n))
            .saturating_add(24u64.saturating_mul(n as u64))
            .saturating_add(8)
    }
    fn size_for_bytes(&self, bytes: u64) -> usize {
        // ≈ 16 nonzeros per row: 12·16 + 24 bytes per row; then step down to an exact fit.
        let mut n = ((bytes / 216) as usize).max(1);
        while n > 1 && self.working_set_bytes(n) > bytes {
            n = n * 99 / 100;
        }
        n
    }
    fn counts(&self, n: usize, v: Variant) -> Counts {
        counts(n, v)
    }
    fn effective_flops(&self, n: usize, v: Variant) -> Option<u64> {
        // Masked-off lanes excluded: 2 per nonzero plus the 7-flop lane sum per row.
        masked(v).then(|| 2 * nnz(n) + 7 * n as u64)
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(Csr::new(n, v, seed, 0)?))
    }
}

/// A CSR matrix, x and y.
pub struct Csr {
    n: usize,
    v: Variant,
    rowptr: Vec<usize>,
    col: Vec<u32>,
    val: Buf<f64>,
    x: Buf<f64>,
    y: Buf<f64>,
}

// SAFETY: the buffers are owned; the raw pointers only live during `run`.
unsafe impl Send for Csr {}

impl Csr {
    pub fn new(n: usize, v: Variant, seed: u64, misalign: usize) -> Result<Csr, String> {
        require_size(n, 1, "row")?;
        require(v)?;
        if n > i32::MAX as usize {
            return Err(format!("size {n} exceeds the 32-bit column indices (at most {})", i32::MAX));
        }
        require_memory(Spmv.working_set_bytes(n))?;
        let mut rng = Rng::new(seed);
        let mut rowptr = Vec::with_capacity(n + 1);
        rowptr.push(0);
        let mut col = Vec::new();
        let mut pattern = Rng::new(0xC015 ^ n as u64);
        for len in row_lengths(n) {
            let mut row: Vec<u32> = (0..len).map(|_| pattern.below(n) as u32).collect();
            row.sort_unstable();
            col.extend(row);
            rowptr.push(col.len());
        }
        let mut val = Buf::new(col.len(), misalign)?;
        val.fill_random(&mut rng, -1.0, 1.0);
        let mut x = Buf::new(n, misalign)?;
        x.fill_random(&mut rng, -1.0, 1.0);
        let y = Buf::new(n, misalign)?;
        Ok(Csr {
            n,
            v,
            rowptr,
            col,
            val,
            x,
            y,
        })
    }

    fn reference(&self) -> Vec<f64> {
        let (val, x) = (self.val.as_slice(), self.x.as_slice());
        (0..self.n)
            .map(|i| (self.rowptr[i]..self.rowptr[i + 1]).map(|k| val[k] * x[self.col[k] as usize]).sum())
            .collect()
    }

    fn args(&mut self) -> Args {
        Args {
            n: self.n,
            rowptr: self.rowptr.as_ptr(),
            col: self.col.as_ptr(),
            val: self.val.ptr(),
            x: self.x.ptr(),
            y: self.y.mut_ptr(),
        }
    }
}

impl Instance for Csr {
    fn run(&mut self) {
        let a = self.args();
        run_variant(self.v, &a);
    }
    fn verify(&mut self) -> Result<(), String> {
        self.y.poison();
        self.run();
        // ≤ 28 products of values in [-1, 1): summation order differs by variant.
        compare("spmv y", self.y.as_slice(), &self.reference(), 1e-13, 1e-13)
    }
    fn counts(&self) -> Counts {
        counts(self.n, self.v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::fresh_seed;
    use crate::simd::{Tally, tally_reset, tally_take};

    fn model<V: F64Ops>(n: usize) -> Counts {
        let mut m = Csr::new(n, Variant::Scalar, 7, 0).unwrap();
        let a = m.args();
        tally_reset();
        spmv::<V>(&a);
        let mut c = tally_take();
        c.dram_bytes = counts(n, Variant::Scalar).dram_bytes;
        c
    }

    #[test]
    fn counts_match_the_instrumented_loops() {
        for n in [1, 2, 7, 31, 64] {
            assert_eq!(model::<Tally<f64, 1, false, false>>(n), counts(n, Variant::Scalar), "n={n} scalar");
            assert_eq!(model::<Tally<f64, 2, false, false>>(n), counts(n, Variant::Sse), "n={n} sse");
            assert_eq!(model::<Tally<f64, 4, false, true>>(n), counts(n, Variant::Avx2), "n={n} avx2");
            assert_eq!(model::<Tally<f64, 8, true, true>>(n), counts(n, Variant::Avx512), "n={n} avx512");
        }
    }

    #[test]
    fn every_runnable_variant_matches_the_reference() {
        let seed = fresh_seed();
        for v in ALL_VARIANTS.iter().copied().filter(|v| crate::check::runnable(*v)) {
            for (n, mis) in [(1, 0), (13, 1), (100, 3), (257, 5)] {
                let mut m = Csr::new(n, v, seed ^ n as u64, mis).unwrap();
                m.verify().unwrap_or_else(|e| panic!("seed {seed} {v} n={n} misalign={mis}: {e}"));
            }
        }
    }

    #[test]
    fn effective_flops_drop_only_masked_lanes() {
        for n in [1, 9, 100] {
            let scalar = counts(n, Variant::Scalar).flops_total();
            // scalar: 2 per nonzero; AVX-512 effective adds its 7-flop lane sum per row.
            assert_eq!(Spmv.effective_flops(n, Variant::Avx512), Some(scalar + 7 * n as u64));
            assert!(Spmv.effective_flops(n, Variant::Avx512).unwrap() <= counts(n, Variant::Avx512).flops_total());
            assert_eq!(Spmv.effective_flops(n, Variant::Avx2), None);
        }
    }

    #[test]
    fn pattern_is_within_bounds_and_sized_right() {
        let n = 500;
        let m = Csr::new(n, Variant::Scalar, 3, 0).unwrap();
        assert_eq!(m.rowptr.len(), n + 1);
        assert!(m.col.iter().all(|&c| (c as usize) < n));
        assert!(row_lengths(n).all(|l| (MIN_ROW..=MAX_ROW).contains(&l)));
        assert_eq!(Spmv.working_set_bytes(n), 12 * m.col.len() as u64 + 8 * 501 + 16 * 500);
        let fit = Spmv.size_for_bytes(1 << 20);
        assert!(Spmv.working_set_bytes(fit) <= 1 << 20);
        assert!(Spmv.working_set_bytes(fit * 11 / 10) > 1 << 20);
    }
}
