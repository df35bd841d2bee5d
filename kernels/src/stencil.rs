//! `stencil2d`: one 5-point Jacobi sweep over an n×n grid of doubles,
//! `out[i][j] = ((in[i-1][j] + in[i+1][j]) + (in[i][j-1] + in[i][j+1])) · 0.25` for the
//! interior points; the boundary of `out` is never written.
//!
//! Loops (per interior row): full vectors of `L` points, then the `(n-2) mod L` tail — one
//! masked vector on AVX-512, a scalar loop otherwise. The constant 0.25 is loaded once per
//! sweep from the instance's constant array (so no constant-pool loads hide in the loop).

use crate::api::{Instance, Kernel};
use crate::check::{Buf, compare, require, require_memory};
use crate::rng::Rng;
use crate::simd::{F64Ops, Lanes, Sc};
use crate::suite::{ALL_VARIANTS, class, dispatch, lanes, masked, require_size};
use crate::types::{Counts, Precision, Variant};

pub struct Stencil2d;

/// Pointers and size of one sweep.
pub struct Args {
    pub n: usize,
    pub inp: *const f64,
    pub out: *mut f64,
    pub quarter: *const f64,
}

/// One sweep. `n ≥ 3`; `inp`, `out` hold n×n values; `quarter` points at 0.25.
#[inline(always)]
pub fn sweep<V: F64Ops>(a: &Args) {
    let n = a.n;
    let l = V::LANES;
    let m = n - 2;
    // SAFETY: every pointer below stays inside the n×n grids (rows 0..n, columns 0..n).
    unsafe {
        let q = V::bcast(a.quarter);
        let qs = <V::Sc as F64Ops>::splat(q.first());
        for i in 1..n - 1 {
            let c = a.inp.add(i * n + 1);
            let o = a.out.add(i * n + 1);
            let mut j = 0;
            while j + l <= m {
                let ns = V::add(V::load(c.add(j).sub(n)), V::load(c.add(j + n)));
                let we = V::add(V::load(c.add(j).sub(1)), V::load(c.add(j + 1)));
                V::store(o.add(j), V::mul(V::add(ns, we), q));
                j += l;
            }
            let r = m - j;
            if V::MASKED {
                if r > 0 {
                    let ns = V::add(V::load_part(c.add(j).sub(n), r), V::load_part(c.add(j + n), r));
                    let we = V::add(V::load_part(c.add(j).sub(1), r), V::load_part(c.add(j + 1), r));
                    V::store_part(o.add(j), r, V::mul(V::add(ns, we), q));
                }
            } else {
                while j < m {
                    let ns = V::Sc::add(V::Sc::load(c.add(j).sub(n)), V::Sc::load(c.add(j + n)));
                    let we = V::Sc::add(V::Sc::load(c.add(j).sub(1)), V::Sc::load(c.add(j + 1)));
                    V::Sc::store(o.add(j), V::Sc::mul(V::Sc::add(ns, we), qs));
                    j += 1;
                }
            }
        }
    }
}

fn run_variant(v: Variant, a: &Args) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::{F64x2, F64x4, F64x8};
        dispatch!(v, sweep, [Sc<false>, F64x2, F64x4, F64x8], a, Args)
    }
}

/// Analytic counts of one sweep at order `n` (see the module doc for the loops).
pub fn counts(n: usize, v: Variant) -> Counts {
    let mut c = Counts::default();
    if n < 3 {
        return c;
    }
    let l = lanes(v);
    let rows = (n - 2) as u64;
    let m = n - 2;
    let (full, r) = (m / l, m % l);
    let chunks = if masked(v) { m.div_ceil(l) } else { full };
    // Three adds and a multiply per point: no FMA on any variant (`fma_flops` stays 0).
    c.add_flops(class(v, Precision::F64), rows * (chunks * 4 * l) as u64);
    if !masked(v) {
        c.add_flops(class(Variant::Scalar, Precision::F64), rows * (r * 4) as u64);
    }
    let points = rows * m as u64;
    c.core_load_bytes = 8 + points * 4 * 8;
    c.core_store_bytes = points * 8;
    c.dram_bytes = 8 * (n * n) as u64 + 2 * 8 * points;
    c
}

impl Kernel for Stencil2d {
    fn name(&self) -> &'static str {
        "stencil2d"
    }
    fn description(&self) -> &'static str {
        "5-point Jacobi sweep over an n×n grid (double)"
    }
    fn precision(&self) -> Precision {
        Precision::F64
    }
    fn variants(&self) -> &'static [Variant] {
        ALL_VARIANTS
    }
    /// Row i of the output reads rows i-1, i and i+1 of the input: three input rows and one
    /// output row must stay cached for each input row to come in once.
    fn reuse_footprint_bytes(&self, n: usize) -> Option<u64> {
        Some(4 * 8 * n as u64)
    }
    fn formula(&self, v: Variant) -> String {
        let tail = if masked(v) {
            "masked tail, full-width flops"
        } else {
            "scalar tail"
        };
        format!("W = 4·(n-2)² flops ({tail}); core Q = 40·(n-2)² + 8 B (4 loads + 1 store per point); DRAM = 8n² + 16·(n-2)² B")
    }
    fn size_unit(&self) -> &'static str {
        "grid order (n×n)"
    }
    fn working_set_bytes(&self, n: usize) -> u64 {
        16u64.saturating_mul(n as u64).saturating_mul(n as u64)
    }
    fn size_for_bytes(&self, bytes: u64) -> usize {
        (((bytes / 16) as f64).sqrt() as usize).max(3)
    }
    fn counts(&self, n: usize, v: Variant) -> Counts {
        counts(n, v)
    }
    fn effective_flops(&self, n: usize, v: Variant) -> Option<u64> {
        // Masked-off lanes excluded: the work of the unmasked loops (4 flops per point).
        masked(v).then(|| counts(n, Variant::Scalar).flops_total())
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(Grid::new(n, v, seed, 0)?))
    }
}

/// One grid pair and its constant, ready to sweep.
pub struct Grid {
    n: usize,
    v: Variant,
    inp: Buf<f64>,
    out: Buf<f64>,
    quarter: Buf<f64>,
}

// SAFETY: the buffers are owned; the raw pointers only live during `run`.
unsafe impl Send for Grid {}

impl Grid {
    /// `misalign`: elements past a 64-byte boundary for both grids (tests use 1..7).
    pub fn new(n: usize, v: Variant, seed: u64, misalign: usize) -> Result<Grid, String> {
        require_size(n, 3, "points per side")?;
        require(v)?;
        let nn = n.checked_mul(n).ok_or("grid size overflows")?;
        require_memory(16 * nn as u64)?;
        let mut rng = Rng::new(seed);
        let mut inp = Buf::new(nn, misalign)?;
        inp.fill_random(&mut rng, -1.0, 1.0);
        let mut out = Buf::new(nn, misalign)?;
        out.fill_random(&mut rng, -1.0, 1.0);
        let mut quarter = Buf::new(1, 0)?;
        quarter.as_mut_slice()[0] = 0.25;
        Ok(Grid { n, v, inp, out, quarter })
    }

    /// The scalar f64 reference of the interior.
    fn reference(&self) -> Vec<f64> {
        let (n, x) = (self.n, self.inp.as_slice());
        let mut want = Vec::with_capacity((n - 2) * (n - 2));
        for i in 1..n - 1 {
            for j in 1..n - 1 {
                want.push(((x[(i - 1) * n + j] + x[(i + 1) * n + j]) + (x[i * n + j - 1] + x[i * n + j + 1])) * 0.25);
            }
        }
        want
    }

    fn interior(&self) -> Vec<f64> {
        let (n, y) = (self.n, self.out.as_slice());
        (1..n - 1).flat_map(|i| y[i * n + 1..i * n + n - 1].to_vec()).collect()
    }

    fn args(&mut self) -> Args {
        Args {
            n: self.n,
            inp: self.inp.ptr(),
            out: self.out.mut_ptr(),
            quarter: self.quarter.ptr(),
        }
    }
}

impl Instance for Grid {
    fn run(&mut self) {
        let a = self.args();
        run_variant(self.v, &a);
    }
    fn verify(&mut self) -> Result<(), String> {
        self.out.poison();
        self.run();
        compare("stencil2d out", &self.interior(), &self.reference(), 1e-15, 1e-300)
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
        let mut g = Grid::new(n, Variant::Scalar, 1, 0).unwrap();
        let a = g.args();
        tally_reset();
        sweep::<V>(&a);
        let mut c = tally_take();
        // The model counts what the loops do in the core; DRAM is the formula's business.
        c.dram_bytes = counts(n, Variant::Scalar).dram_bytes;
        c
    }

    #[test]
    fn counts_match_the_instrumented_loops() {
        for n in [3, 4, 5, 9, 10, 11, 13, 18, 19] {
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
            for (n, mis) in [(3, 0), (12, 1), (19, 3), (33, 7)] {
                let mut g = Grid::new(n, v, seed ^ n as u64, mis).unwrap();
                g.verify().unwrap_or_else(|e| panic!("seed {seed} {v} n={n} misalign={mis}: {e}"));
            }
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(Stencil2d.instance(0, Variant::Scalar, 1).is_err());
        assert!(Stencil2d.instance(2, Variant::Scalar, 1).is_err());
        assert!(Stencil2d.instance(1 << 40, Variant::Scalar, 1).is_err());
    }
}
