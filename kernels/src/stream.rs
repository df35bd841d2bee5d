//! Streaming kernels (copy, scale, add, triad, daxpy, dot, sum, load, store, and the
//! non-temporal-store copy_nt, triad_nt, store_nt), f64 and f32 (`triad_f32`, …).
//!
//! Loop structure, identical in every SIMD variant of width W (elements per vector):
//! - element-wise kernels: a main loop of 4 vectors per iteration, then single vectors, then
//!   the remainder `n % W`;
//! - reductions (`dot`, `sum`, `load`): K = 8 independent accumulators (one per vector of an
//!   iteration), leftover full vectors into accumulator 0, then the remainder; the
//!   accumulators are combined with K−1 vector operations, and the W lanes of the result
//!   with W−1 scalar operations, in order;
//! - remainder: AVX-512 uses ONE masked instruction per operand (masked loads/stores move
//!   only the active elements: counted as active elements × size; a masked arithmetic
//!   instruction counts its full width in flops, as the hardware counters do); SSE and
//!   AVX2 use a scalar loop (scalar flops);
//! - non-temporal kernels first peel scalar elements (ordinary stores) up to the vector
//!   alignment of the output, then stream whole vectors, then the remainder as above
//!   (ordinary stores), then `sfence`.
//!
//! `triad`, `daxpy` and `dot` use FMA where the variant has it (AVX2, AVX-512) and a
//! multiply then an add otherwise (scalar, SSE): 2 flops per element either way. Their FMA
//! flops (`Counts::fma_flops`) are those of the vector loops and the masked AVX-512
//! remainder; scalar peels and remainders multiply then add (no FMA) on every variant, and
//! the reductions' accumulator and lane combinations are adds.
//! The scalar variant and every scalar remainder pass each value through an empty `asm!`
//! barrier so that the compiler cannot vectorize them (the counts say "scalar").

use crate::api::{Instance, Kernel};
use crate::buffer_pool::BufferPool;
use crate::types::{Counts, FlopClass, Precision, Variant};

/// Vectors per iteration of the element-wise main loops.
const UNROLL: usize = 4;
/// Independent accumulators of the reductions.
const ACCS: usize = 8;

/// One streaming operation. Arrays: `a` is the output (and `daxpy`'s y), `b` and `c` inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Copy,
    Scale,
    Add,
    Triad,
    Daxpy,
    Dot,
    Sum,
    Load,
    Store,
    CopyNt,
    TriadNt,
    StoreNt,
}

impl Op {
    pub const ALL: [Op; 12] = [
        Op::Copy,
        Op::Scale,
        Op::Add,
        Op::Triad,
        Op::Daxpy,
        Op::Dot,
        Op::Sum,
        Op::Load,
        Op::Store,
        Op::CopyNt,
        Op::TriadNt,
        Op::StoreNt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::Scale => "scale",
            Op::Add => "add",
            Op::Triad => "triad",
            Op::Daxpy => "daxpy",
            Op::Dot => "dot",
            Op::Sum => "sum",
            Op::Load => "load",
            Op::Store => "store",
            Op::CopyNt => "copy_nt",
            Op::TriadNt => "triad_nt",
            Op::StoreNt => "store_nt",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Op::Copy => "a[i] = b[i]",
            Op::Scale => "a[i] = s·b[i]",
            Op::Add => "a[i] = b[i] + c[i]",
            Op::Triad => "a[i] = b[i] + s·c[i]",
            Op::Daxpy => "y[i] = s·x[i] + y[i]",
            Op::Dot => "s = Σ b[i]·c[i]",
            Op::Sum => "s = Σ b[i]",
            Op::Load => "read-only: x = XOR of the bits of b[i] (no flops)",
            Op::Store => "write-only: a[i] = s",
            Op::CopyNt => "a[i] = b[i] with non-temporal stores",
            Op::TriadNt => "a[i] = b[i] + s·c[i] with non-temporal stores",
            Op::StoreNt => "a[i] = s with non-temporal stores",
        }
    }

    /// Arrays read per element (daxpy reads y).
    pub fn reads(self) -> u64 {
        match self {
            Op::Copy | Op::Scale | Op::Sum | Op::Load | Op::CopyNt => 1,
            Op::Add | Op::Triad | Op::Daxpy | Op::Dot | Op::TriadNt => 2,
            Op::Store | Op::StoreNt => 0,
        }
    }

    /// Arrays written per element.
    pub fn writes(self) -> u64 {
        match self {
            Op::Dot | Op::Sum | Op::Load => 0,
            _ => 1,
        }
    }

    /// Distinct arrays touched (the working set is this × n × element size).
    pub fn arrays(self) -> u64 {
        match self {
            Op::Daxpy => 2,
            o => o.reads() + o.writes(),
        }
    }

    pub fn non_temporal(self) -> bool {
        matches!(self, Op::CopyNt | Op::TriadNt | Op::StoreNt)
    }

    fn reduction(self) -> bool {
        matches!(self, Op::Dot | Op::Sum | Op::Load)
    }

    /// Flops per element (FMA = 2).
    pub fn flops_per_element(self) -> u64 {
        match self {
            Op::Scale | Op::Add | Op::Sum => 1,
            Op::Triad | Op::Daxpy | Op::Dot | Op::TriadNt => 2,
            _ => 0,
        }
    }

    /// Whether the per-element work is one multiply-add (an FMA where the variant has one).
    fn multiply_add(self) -> bool {
        matches!(self, Op::Triad | Op::Daxpy | Op::Dot | Op::TriadNt)
    }

    /// Flops of combining two accumulators (a reduction's tree step).
    fn combine_flops(self) -> u64 {
        match self {
            Op::Dot | Op::Sum => 1,
            _ => 0,
        }
    }

    fn variants(self) -> &'static [Variant] {
        if self.non_temporal() {
            &[Variant::Sse, Variant::Avx2, Variant::Avx512]
        } else {
            &Variant::ALL
        }
    }
}

/// Elements per vector of `variant` for elements of `elem_bytes`.
fn lanes(variant: Variant, elem_bytes: u64) -> u64 {
    match variant {
        Variant::Scalar => 1,
        v => v.width_bits() as u64 / 8 / elem_bytes,
    }
}

/// Analytic counts of one invocation on `n` elements whose output starts `peel` elements
/// before its vector alignment (non-temporal kernels only; 0 for 64-byte-aligned arrays).
pub fn stream_counts(op: Op, prec: Precision, variant: Variant, n: usize, peel: usize) -> Counts {
    let n = n as u64;
    let size = prec.bytes();
    let w = lanes(variant, size);
    let scalar_class = FlopClass::of(prec, 64, true);
    let vector_class = FlopClass::of(prec, variant.width_bits(), variant == Variant::Scalar);
    let fpe = op.flops_per_element();
    let peel = if op.non_temporal() { (peel as u64).min(n) } else { 0 };
    let body = n - peel;
    let full = body / w;
    let rem = body % w;
    let masked = variant == Variant::Avx512;
    // The vector multiply-adds are FMAs on AVX2 and AVX-512; the scalar ones never are.
    let vector_fma = op.multiply_add() && matches!(variant, Variant::Avx2 | Variant::Avx512);
    let mut c = Counts::default();
    let add_vector = |c: &mut Counts, n: u64| {
        if vector_fma {
            c.add_fma_flops(vector_class, n)
        } else {
            c.add_flops(vector_class, n)
        }
    };
    c.add_flops(scalar_class, fpe * peel);
    add_vector(&mut c, fpe * w * full);
    if rem > 0 {
        if masked {
            add_vector(&mut c, fpe * w);
        } else {
            c.add_flops(scalar_class, fpe * rem);
        }
    }
    if op.reduction() {
        let k = ACCS as u64;
        c.add_flops(vector_class, op.combine_flops() * w * (k - 1));
        if w > 1 {
            c.add_flops(scalar_class, op.combine_flops() * (w - 1));
        }
    }
    c.core_load_bytes = op.reads() * n * size;
    c.core_store_bytes = op.writes() * n * size;
    let streamed = if op.non_temporal() { full * w } else { 0 };
    let ordinary_stored = op.writes() * n - streamed;
    c.dram_bytes = (op.reads() * n + 2 * ordinary_stored + streamed) * size;
    if op == Op::Daxpy {
        // y is read and written back: its read is the write-allocate.
        c.dram_bytes = 3 * n * size;
    }
    c
}

/// Mask-aware flops of one invocation: the total less the lanes a masked AVX-512 remainder
/// switches off (`None` where nothing is masked: same as the total).
pub fn stream_effective_flops(op: Op, prec: Precision, variant: Variant, n: usize) -> Option<u64> {
    let w = lanes(variant, prec.bytes());
    let rem = n as u64 % w;
    if variant != Variant::Avx512 || rem == 0 || op.flops_per_element() == 0 {
        return None;
    }
    let total = stream_counts(op, prec, variant, n, 0).flops_total();
    Some(total - op.flops_per_element() * (w - rem))
}

/// Element types of the streaming kernels.
pub trait Elem: Copy + Send + Sync + std::fmt::Debug + PartialEq + 'static {
    const PREC: Precision;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn bits(self) -> u64;
    /// Run `op` with `variant` on the slices (already checked: same length, variant supported);
    /// `passes` repeats `load` inside one call (1 for every other kernel).
    fn dispatch(variant: Variant, op: Op, a: &mut [Self], b: &[Self], c: &[Self], s: Self, passes: usize) -> u64;
    /// This type's freed arrays, kept while a [`ReusedArrays`] scope is open.
    fn pool() -> &'static BufferPool<Self>;
}

/// While one of these lives, the large arrays of the stream kernels are kept when freed and
/// handed to the next kernel that needs as much ([`crate::buffer_pool`]), up to a quarter of
/// the memory available at each release; when the last one is dropped, they are freed. A
/// ceilings run or the main job opens one around its kernels; outside any, arrays are freed
/// as usual.
#[derive(Debug)]
#[must_use = "arrays are reused only while the scope lives"]
pub struct ReusedArrays(());

static REUSE_SCOPES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl ReusedArrays {
    /// Open a scope (scopes nest).
    pub fn open() -> ReusedArrays {
        REUSE_SCOPES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ReusedArrays(())
    }
    fn active() -> bool {
        REUSE_SCOPES.load(std::sync::atomic::Ordering::SeqCst) > 0
    }
}

impl Drop for ReusedArrays {
    fn drop(&mut self) {
        if REUSE_SCOPES.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            f64::pool().release();
            f32::pool().release();
        }
    }
}

/// Pass a value through an empty asm statement: the compiler must treat it as unknown,
/// which keeps scalar loops scalar (no auto-vectorization) and copy loops out of memcpy.
/// Not `pure`: a loop-invariant value must still pass through it once per element.
#[inline(always)]
fn opaque_f64(mut x: f64) -> f64 {
    // SAFETY: the asm is empty; it only claims to modify the register holding `x`.
    unsafe { std::arch::asm!("/* {0} */", inout(xmm_reg) x, options(nomem, nostack, preserves_flags)) };
    x
}

#[inline(always)]
fn opaque_f32(mut x: f32) -> f32 {
    // SAFETY: as in `opaque_f64`.
    unsafe { std::arch::asm!("/* {0} */", inout(xmm_reg) x, options(nomem, nostack, preserves_flags)) };
    x
}

#[inline(always)]
fn opaque_u64(mut x: u64) -> u64 {
    // SAFETY: as in `opaque_f64`.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags)) };
    x
}

/// Scalar loops, one element per step, written generically over the element's primitive
/// operations (the `opaque` barrier keeps each value scalar).
macro_rules! scalar_module {
    ($name:ident, $T:ty, $opaque:path, $bits:expr) => {
        mod $name {
            use super::{ACCS, opaque_u64, $opaque as opaque};
            type T = $T;
            #[allow(clippy::redundant_closure_call)]
            fn bits(x: T) -> u64 {
                ($bits)(x)
            }
            pub fn copy(a: &mut [T], b: &[T]) {
                for (x, y) in a.iter_mut().zip(b) {
                    *x = opaque(*y);
                }
            }
            pub fn scale(a: &mut [T], b: &[T], s: T) {
                for (x, y) in a.iter_mut().zip(b) {
                    *x = opaque(s * *y);
                }
            }
            pub fn add(a: &mut [T], b: &[T], c: &[T]) {
                for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                    *x = opaque(*y + *z);
                }
            }
            pub fn triad(a: &mut [T], b: &[T], c: &[T], s: T) {
                for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                    *x = opaque(*y + opaque(s * *z));
                }
            }
            pub fn daxpy(a: &mut [T], b: &[T], s: T) {
                for (x, y) in a.iter_mut().zip(b) {
                    *x = opaque(opaque(s * *y) + *x);
                }
            }
            pub fn store(a: &mut [T], s: T) {
                for x in a.iter_mut() {
                    *x = opaque(s);
                }
            }
            pub fn dot(b: &[T], c: &[T]) -> T {
                let mut acc = [0.0 as T; ACCS];
                let mut bi = b.chunks_exact(ACCS);
                let mut ci = c.chunks_exact(ACCS);
                for (bb, cc) in (&mut bi).zip(&mut ci) {
                    for k in 0..ACCS {
                        acc[k] = opaque(acc[k] + opaque(bb[k] * cc[k]));
                    }
                }
                for (y, z) in bi.remainder().iter().zip(ci.remainder()) {
                    acc[0] = opaque(acc[0] + opaque(*y * *z));
                }
                let mut r = acc[0];
                for v in &acc[1..] {
                    r = opaque(r + *v);
                }
                r
            }
            pub fn sum(b: &[T]) -> T {
                let mut acc = [0.0 as T; ACCS];
                let mut bi = b.chunks_exact(ACCS);
                for bb in &mut bi {
                    for k in 0..ACCS {
                        acc[k] = opaque(acc[k] + bb[k]);
                    }
                }
                for y in bi.remainder() {
                    acc[0] = opaque(acc[0] + *y);
                }
                let mut r = acc[0];
                for v in &acc[1..] {
                    r = opaque(r + *v);
                }
                r
            }
            pub fn load(b: &[T]) -> u64 {
                let mut acc = [0u64; ACCS];
                let mut bi = b.chunks_exact(ACCS);
                for bb in &mut bi {
                    for k in 0..ACCS {
                        acc[k] = opaque_u64(acc[k] ^ bits(bb[k]));
                    }
                }
                for y in bi.remainder() {
                    acc[0] = opaque_u64(acc[0] ^ bits(*y));
                }
                acc.iter().fold(0, |r, v| r ^ v)
            }
        }
    };
}

scalar_module!(scalar_f64, f64, opaque_f64, |x: f64| x.to_bits());
scalar_module!(scalar_f32, f32, opaque_f32, |x: f32| x.to_bits() as u64);

/// The SIMD kernels of one (ISA, precision), generated from its primitive operations `$p`
/// (a module defining T, V, VI, W, MASKED and the operations used below).
macro_rules! simd_module {
    ($name:ident, $p:ident, $feat:literal, $opaque:path) => {
        mod $name {
            #![allow(clippy::missing_safety_doc)]
            use super::$p::*;
            use super::{ACCS, UNROLL, $opaque as opaque_s};

            /// The scalar remainder/peel loop body of an element-wise kernel.
            macro_rules! scalar_loop {
                ($i:ident, $end:expr, $body:expr) => {
                    while $i < $end {
                        $body;
                        $i += 1;
                    }
                };
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn copy(a: *mut T, b: *const T, n: usize) {
                // SAFETY: `a` and `b` are valid for `n` elements (checked by the caller); every
                // access below is at an index < n (full vectors end at i + W ≤ n).
                unsafe {
                    let mut i = 0;
                    while i + UNROLL * W <= n {
                        for u in 0..UNROLL {
                            st(a.add(i + u * W), opaque(ld(b.add(i + u * W))));
                        }
                        i += UNROLL * W;
                    }
                    while i + W <= n {
                        st(a.add(i), opaque(ld(b.add(i))));
                        i += W;
                    }
                    if MASKED && i < n {
                        stp(a.add(i), n - i, ldp(b.add(i), n - i));
                    } else {
                        scalar_loop!(i, n, *a.add(i) = opaque_s(*b.add(i)));
                    }
                }
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn scale(a: *mut T, b: *const T, n: usize, s: T) {
                // SAFETY: as in `copy`.
                unsafe {
                    let sv = splat(s);
                    let mut i = 0;
                    while i + UNROLL * W <= n {
                        for u in 0..UNROLL {
                            st(a.add(i + u * W), mul(sv, ld(b.add(i + u * W))));
                        }
                        i += UNROLL * W;
                    }
                    while i + W <= n {
                        st(a.add(i), mul(sv, ld(b.add(i))));
                        i += W;
                    }
                    if MASKED && i < n {
                        stp(a.add(i), n - i, mul(sv, ldp(b.add(i), n - i)));
                    } else {
                        scalar_loop!(i, n, *a.add(i) = opaque_s(s * *b.add(i)));
                    }
                }
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn add(a: *mut T, b: *const T, c: *const T, n: usize) {
                // SAFETY: as in `copy`.
                unsafe {
                    let mut i = 0;
                    while i + UNROLL * W <= n {
                        for u in 0..UNROLL {
                            let j = i + u * W;
                            st(a.add(j), vadd(ld(b.add(j)), ld(c.add(j))));
                        }
                        i += UNROLL * W;
                    }
                    while i + W <= n {
                        st(a.add(i), vadd(ld(b.add(i)), ld(c.add(i))));
                        i += W;
                    }
                    if MASKED && i < n {
                        stp(a.add(i), n - i, vadd(ldp(b.add(i), n - i), ldp(c.add(i), n - i)));
                    } else {
                        scalar_loop!(i, n, *a.add(i) = opaque_s(*b.add(i) + *c.add(i)));
                    }
                }
            }

            /// a = b + s·c; `nt` streams the full vectors after peeling to alignment.
            #[target_feature(enable = $feat)]
            pub unsafe fn triad(a: *mut T, b: *const T, c: *const T, n: usize, s: T, nt: bool) {
                // SAFETY: as in `copy`; streamed stores are at vector-aligned addresses (peeled).
                unsafe {
                    let sv = splat(s);
                    let mut i = 0;
                    if nt {
                        let peel = peel_count(a, n);
                        scalar_loop!(i, peel, *a.add(i) = opaque_s(*b.add(i) + opaque_s(s * *c.add(i))));
                    }
                    while i + UNROLL * W <= n {
                        for u in 0..UNROLL {
                            let j = i + u * W;
                            let v = fmadd(sv, ld(c.add(j)), ld(b.add(j)));
                            if nt { stnt(a.add(j), v) } else { st(a.add(j), v) }
                        }
                        i += UNROLL * W;
                    }
                    while i + W <= n {
                        let v = fmadd(sv, ld(c.add(i)), ld(b.add(i)));
                        if nt {
                            stnt(a.add(i), v)
                        } else {
                            st(a.add(i), v)
                        }
                        i += W;
                    }
                    if MASKED && i < n {
                        stp(a.add(i), n - i, fmadd(sv, ldp(c.add(i), n - i), ldp(b.add(i), n - i)));
                    } else {
                        scalar_loop!(i, n, *a.add(i) = opaque_s(*b.add(i) + opaque_s(s * *c.add(i))));
                    }
                    if nt {
                        fence();
                    }
                }
            }

            /// y = s·x + y (y = a, x = b).
            #[target_feature(enable = $feat)]
            pub unsafe fn daxpy(a: *mut T, b: *const T, n: usize, s: T) {
                // SAFETY: as in `copy`.
                unsafe {
                    let sv = splat(s);
                    let mut i = 0;
                    while i + UNROLL * W <= n {
                        for u in 0..UNROLL {
                            let j = i + u * W;
                            st(a.add(j), fmadd(sv, ld(b.add(j)), ld(a.add(j))));
                        }
                        i += UNROLL * W;
                    }
                    while i + W <= n {
                        st(a.add(i), fmadd(sv, ld(b.add(i)), ld(a.add(i))));
                        i += W;
                    }
                    if MASKED && i < n {
                        stp(a.add(i), n - i, fmadd(sv, ldp(b.add(i), n - i), ldp(a.add(i), n - i)));
                    } else {
                        scalar_loop!(i, n, *a.add(i) = opaque_s(opaque_s(s * *b.add(i)) + *a.add(i)));
                    }
                }
            }

            /// a = s, or a = b when `copy` (the copy_nt kernel), with ordinary or non-temporal stores.
            #[target_feature(enable = $feat)]
            pub unsafe fn store(a: *mut T, b: *const T, n: usize, s: T, copy: bool, nt: bool) {
                // SAFETY: as in `triad`.
                unsafe {
                    let sv = splat(s);
                    macro_rules! val {
                        ($j:expr) => {
                            if copy { opaque(ld(b.add($j))) } else { sv }
                        };
                    }
                    macro_rules! sval {
                        ($j:expr) => {
                            if copy { opaque_s(*b.add($j)) } else { opaque_s(s) }
                        };
                    }
                    let mut i = 0;
                    if nt {
                        let peel = peel_count(a, n);
                        scalar_loop!(i, peel, *a.add(i) = sval!(i));
                    }
                    while i + UNROLL * W <= n {
                        for u in 0..UNROLL {
                            let j = i + u * W;
                            if nt { stnt(a.add(j), val!(j)) } else { st(a.add(j), val!(j)) }
                        }
                        i += UNROLL * W;
                    }
                    while i + W <= n {
                        if nt {
                            stnt(a.add(i), val!(i))
                        } else {
                            st(a.add(i), val!(i))
                        }
                        i += W;
                    }
                    if MASKED && i < n {
                        let v = if copy { ldp(b.add(i), n - i) } else { sv };
                        stp(a.add(i), n - i, v);
                    } else {
                        scalar_loop!(i, n, *a.add(i) = sval!(i));
                    }
                    if nt {
                        fence();
                    }
                }
            }

            /// Σ b·c, or Σ b when `!product`.
            #[target_feature(enable = $feat)]
            pub unsafe fn dot(b: *const T, c: *const T, n: usize, product: bool) -> T {
                // SAFETY: as in `copy`.
                unsafe {
                    let mut acc = [zero(); ACCS];
                    macro_rules! step {
                        ($acc:expr, $x:expr, $j:expr) => {
                            if product {
                                fmadd($x, ld(c.add($j)), $acc)
                            } else {
                                vadd($acc, $x)
                            }
                        };
                    }
                    let mut i = 0;
                    while i + ACCS * W <= n {
                        for (k, a) in acc.iter_mut().enumerate() {
                            let j = i + k * W;
                            *a = step!(*a, ld(b.add(j)), j);
                        }
                        i += ACCS * W;
                    }
                    while i + W <= n {
                        acc[0] = step!(acc[0], ld(b.add(i)), i);
                        i += W;
                    }
                    if MASKED && i < n {
                        let x = ldp(b.add(i), n - i);
                        acc[0] = if product {
                            fmadd(x, ldp(c.add(i), n - i), acc[0])
                        } else {
                            vadd(acc[0], x)
                        };
                        i = n;
                    }
                    let mut v = acc[0];
                    for a in &acc[1..] {
                        v = vadd(v, *a);
                    }
                    let l = lanes(v);
                    let mut r = l[0];
                    for x in &l[1..] {
                        r = opaque_s(r + *x);
                    }
                    if product {
                        scalar_loop!(i, n, r = opaque_s(r + opaque_s(*b.add(i) * *c.add(i))));
                    } else {
                        scalar_loop!(i, n, r = opaque_s(r + *b.add(i)));
                    }
                    r
                }
            }

            /// XOR of the bits of every element (a read-only stream without flops).
            #[target_feature(enable = $feat)]
            /// `passes` > 1 reads the array that many times before the one final reduction
            /// (the ceilings' L1 figure: no per-call epilogue between passes).
            pub unsafe fn load(b: *const T, n: usize, passes: usize) -> u64 {
                // SAFETY: as in `copy`.
                unsafe {
                    let mut acc = [zeroi(); ACCS];
                    let mut tail = 0u64;
                    let full = n - n % (ACCS * W);
                    for _ in 0..passes.max(1) {
                        // A bumped pointer, not an index: `[p + disp]` keeps each folded load
                        // micro-fused, where `[b + i*8 + disp]` splits a three-operand op
                        // in two at rename on Intel cores (SPR: +8 % at L1).
                        let mut p = b;
                        let end = b.add(full);
                        while p < end {
                            // Two loads per accumulator update: on AVX-512 the pair folds into
                            // one vpternlog (one ALU op per two loads: 512-bit ALU ops have
                            // two ports, the same count as the load ports).
                            for (k, a) in acc.iter_mut().take(ACCS / 2).enumerate() {
                                *a = xori(*a, xori(ldi(p.add(2 * k * W)), ldi(p.add((2 * k + 1) * W))));
                            }
                            p = p.add(ACCS * W);
                        }
                        let mut i = full;
                        while i + W <= n {
                            acc[0] = xori(acc[0], ldi(b.add(i)));
                            i += W;
                        }
                        if MASKED && i < n {
                            acc[0] = xori(acc[0], ldip(b.add(i), n - i));
                            i = n;
                        }
                        while i < n {
                            tail = super::opaque_u64(tail ^ elem_bits(*b.add(i)));
                            i += 1;
                        }
                    }
                    let mut v = acc[0];
                    for a in &acc[1..] {
                        v = xori(v, *a);
                    }
                    fold_bits(v) ^ tail
                }
            }

            /// Elements before `a` reaches vector alignment (at most n).
            fn peel_count(a: *mut T, n: usize) -> usize {
                let off = a.align_offset(W * std::mem::size_of::<T>());
                if off == usize::MAX { n } else { off.min(n) }
            }
        }
    };
}

/// Primitive operations of one (ISA, precision): each a one-instruction wrapper.
macro_rules! prims {
    (
        $name:ident, $feat:literal, T = $T:ty, V = $V:ty, VI = $VI:ty, W = $W:expr, masked = $masked:expr, reg = $reg:ident,
        load = $ld:path, store = $st:path, stream = $nt:path, set1 = $set1:path, zero = $zero:path,
        add = $add:path, mul = $mul:path, fma = $fma:tt, loadi = $ldi:path, xor = $xor:path, zeroi = $zeroi:path,
        part = $part:tt, fold = $fold:tt, bits = $bits:expr
    ) => {
        mod $name {
            #![allow(dead_code, unused_imports, clippy::missing_safety_doc)]
            #[allow(unused_imports)]
            use std::arch::x86_64::*;
            pub type T = $T;
            pub type V = $V;
            pub type VI = $VI;
            pub const W: usize = $W;
            pub const MASKED: bool = $masked;

            // SAFETY (all pointer functions below): the caller guarantees `p` is valid for
            // W elements (or `k` for the partial forms) and, for `stnt`, vector-aligned.
            #[inline]
            #[target_feature(enable = $feat)]
            pub unsafe fn ld(p: *const T) -> V {
                unsafe { $ld(p) }
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub unsafe fn st(p: *mut T, v: V) {
                unsafe { $st(p, v) }
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub unsafe fn stnt(p: *mut T, v: V) {
                unsafe { $nt(p, v) }
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub unsafe fn ldi(p: *const T) -> VI {
                unsafe { $ldi(p as *const _) }
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn fence() {
                _mm_sfence()
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn splat(s: T) -> V {
                $set1(s)
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn zero() -> V {
                $zero()
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn zeroi() -> VI {
                $zeroi()
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn vadd(a: V, b: V) -> V {
                $add(a, b)
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn mul(a: V, b: V) -> V {
                $mul(a, b)
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn xori(a: VI, b: VI) -> VI {
                $xor(a, b)
            }
            /// a·b + c: one FMA, or a multiply then an add where the ISA has no FMA.
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn fmadd(a: V, b: V, c: V) -> V {
                prims!(@fma $fma, a, b, c)
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn opaque(mut v: V) -> V {
                // SAFETY: the asm is empty; it only claims to modify the register holding `v`.
                unsafe { std::arch::asm!("/* {0} */", inout($reg) v, options(pure, nomem, nostack, preserves_flags)) };
                v
            }
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn lanes(v: V) -> [T; W] {
                let mut out = [0.0 as T; W];
                // SAFETY: `out` holds exactly W elements.
                unsafe { $st(out.as_mut_ptr(), v) };
                out
            }
            pub fn elem_bits(x: T) -> u64 {
                #[allow(clippy::redundant_closure_call)]
                ($bits)(x)
            }
            /// XOR of all element-sized lanes of `v`.
            #[inline]
            #[target_feature(enable = $feat)]
            pub fn fold_bits(v: VI) -> u64 {
                prims!(@fold $fold, v)
            }
            prims!(@part $part, $feat);
        }
    };
    (@fma mul_add, $a:ident, $b:ident, $c:ident) => { vadd(mul($a, $b), $c) };
    (@fma $f:path, $a:ident, $b:ident, $c:ident) => { $f($a, $b, $c) };
    (@fold ($lane:ty, $n:expr), $v:ident) => {{
        let mut l = [0 as $lane; $n];
        // SAFETY: `l` is exactly one vector long.
        unsafe { std::ptr::copy_nonoverlapping(&$v as *const VI as *const $lane, l.as_mut_ptr(), $n) };
        l.iter().fold(0u64, |r, x| r ^ (*x as u64))
    }};
    (@part none, $feat:literal) => {
        /// Partial forms exist only where the remainder is masked (never called here).
        pub unsafe fn ldp(_p: *const T, _k: usize) -> V {
            unreachable!("no masked remainder for this ISA")
        }
        pub unsafe fn stp(_p: *mut T, _k: usize, _v: V) {
            unreachable!("no masked remainder for this ISA")
        }
        pub unsafe fn ldip(_p: *const T, _k: usize) -> VI {
            unreachable!("no masked remainder for this ISA")
        }
    };
    (@part ($mt:ty, $mld:path, $mst:path, $mldi:path), $feat:literal) => {
        fn mask(k: usize) -> $mt {
            ((1u64 << k) - 1) as $mt
        }
        /// The first `k` < W elements; the others read as zero.
        #[inline]
        #[target_feature(enable = $feat)]
        pub unsafe fn ldp(p: *const T, k: usize) -> V {
            unsafe { $mld(mask(k), p) }
        }
        #[inline]
        #[target_feature(enable = $feat)]
        pub unsafe fn stp(p: *mut T, k: usize, v: V) {
            unsafe { $mst(p, mask(k), v) }
        }
        #[inline]
        #[target_feature(enable = $feat)]
        pub unsafe fn ldip(p: *const T, k: usize) -> VI {
            unsafe { $mldi(mask(k), p as *const _) }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod isa {
    use super::*;

    prims!(
        p_sse_f64,
        "sse2",
        T = f64,
        V = __m128d,
        VI = __m128i,
        W = 2,
        masked = false,
        reg = xmm_reg,
        load = _mm_loadu_pd,
        store = _mm_storeu_pd,
        stream = _mm_stream_pd,
        set1 = _mm_set1_pd,
        zero = _mm_setzero_pd,
        add = _mm_add_pd,
        mul = _mm_mul_pd,
        fma = mul_add,
        loadi = _mm_loadu_si128,
        xor = _mm_xor_si128,
        zeroi = _mm_setzero_si128,
        part = none,
        fold = (u64, 2),
        bits = |x: f64| x.to_bits()
    );
    prims!(
        p_sse_f32,
        "sse2",
        T = f32,
        V = __m128,
        VI = __m128i,
        W = 4,
        masked = false,
        reg = xmm_reg,
        load = _mm_loadu_ps,
        store = _mm_storeu_ps,
        stream = _mm_stream_ps,
        set1 = _mm_set1_ps,
        zero = _mm_setzero_ps,
        add = _mm_add_ps,
        mul = _mm_mul_ps,
        fma = mul_add,
        loadi = _mm_loadu_si128,
        xor = _mm_xor_si128,
        zeroi = _mm_setzero_si128,
        part = none,
        fold = (u32, 4),
        bits = |x: f32| x.to_bits() as u64
    );
    prims!(
        p_avx2_f64,
        "avx2,fma",
        T = f64,
        V = __m256d,
        VI = __m256i,
        W = 4,
        masked = false,
        reg = ymm_reg,
        load = _mm256_loadu_pd,
        store = _mm256_storeu_pd,
        stream = _mm256_stream_pd,
        set1 = _mm256_set1_pd,
        zero = _mm256_setzero_pd,
        add = _mm256_add_pd,
        mul = _mm256_mul_pd,
        fma = _mm256_fmadd_pd,
        loadi = _mm256_loadu_si256,
        xor = _mm256_xor_si256,
        zeroi = _mm256_setzero_si256,
        part = none,
        fold = (u64, 4),
        bits = |x: f64| x.to_bits()
    );
    prims!(
        p_avx2_f32,
        "avx2,fma",
        T = f32,
        V = __m256,
        VI = __m256i,
        W = 8,
        masked = false,
        reg = ymm_reg,
        load = _mm256_loadu_ps,
        store = _mm256_storeu_ps,
        stream = _mm256_stream_ps,
        set1 = _mm256_set1_ps,
        zero = _mm256_setzero_ps,
        add = _mm256_add_ps,
        mul = _mm256_mul_ps,
        fma = _mm256_fmadd_ps,
        loadi = _mm256_loadu_si256,
        xor = _mm256_xor_si256,
        zeroi = _mm256_setzero_si256,
        part = none,
        fold = (u32, 8),
        bits = |x: f32| x.to_bits() as u64
    );
    prims!(
        p_avx512_f64,
        "avx512f",
        T = f64,
        V = __m512d,
        VI = __m512i,
        W = 8,
        masked = true,
        reg = zmm_reg,
        load = _mm512_loadu_pd,
        store = _mm512_storeu_pd,
        stream = _mm512_stream_pd,
        set1 = _mm512_set1_pd,
        zero = _mm512_setzero_pd,
        add = _mm512_add_pd,
        mul = _mm512_mul_pd,
        fma = _mm512_fmadd_pd,
        loadi = _mm512_loadu_si512,
        xor = _mm512_xor_si512,
        zeroi = _mm512_setzero_si512,
        part = (__mmask8, _mm512_maskz_loadu_pd, _mm512_mask_storeu_pd, _mm512_maskz_loadu_epi64),
        fold = (u64, 8),
        bits = |x: f64| x.to_bits()
    );
    prims!(
        p_avx512_f32,
        "avx512f",
        T = f32,
        V = __m512,
        VI = __m512i,
        W = 16,
        masked = true,
        reg = zmm_reg,
        load = _mm512_loadu_ps,
        store = _mm512_storeu_ps,
        stream = _mm512_stream_ps,
        set1 = _mm512_set1_ps,
        zero = _mm512_setzero_ps,
        add = _mm512_add_ps,
        mul = _mm512_mul_ps,
        fma = _mm512_fmadd_ps,
        loadi = _mm512_loadu_si512,
        xor = _mm512_xor_si512,
        zeroi = _mm512_setzero_si512,
        part = (__mmask16, _mm512_maskz_loadu_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_epi32),
        fold = (u32, 16),
        bits = |x: f32| x.to_bits() as u64
    );

    simd_module!(sse_f64, p_sse_f64, "sse2", opaque_f64);
    simd_module!(sse_f32, p_sse_f32, "sse2", opaque_f32);
    simd_module!(avx2_f64, p_avx2_f64, "avx2,fma", opaque_f64);
    simd_module!(avx2_f32, p_avx2_f32, "avx2,fma", opaque_f32);
    simd_module!(avx512_f64, p_avx512_f64, "avx512f", opaque_f64);
    simd_module!(avx512_f32, p_avx512_f32, "avx512f", opaque_f32);

    /// Run one SIMD module's kernel (the module is chosen by the caller).
    macro_rules! run_simd {
        ($m:ident, $op:expr, $a:expr, $b:expr, $c:expr, $s:expr, $passes:expr) => {{
            // The caller's arrays: those the kernel touches hold n elements, the others one.
            let n = $a.len().max($b.len());
            let (a, b, c) = ($a.as_mut_ptr(), $b.as_ptr(), $c.as_ptr());
            // SAFETY: the caller checked that the variant is supported by this CPU and that
            // each of `a`, `b` and `c` the kernel touches holds n elements (an array it does
            // not touch may be shorter; its pointer is never read or written).
            unsafe {
                match $op {
                    Op::Copy => $m::copy(a, b, n),
                    Op::Scale => $m::scale(a, b, n, $s),
                    Op::Add => $m::add(a, b, c, n),
                    Op::Triad => $m::triad(a, b, c, n, $s, false),
                    Op::TriadNt => $m::triad(a, b, c, n, $s, true),
                    Op::Daxpy => $m::daxpy(a, b, n, $s),
                    Op::Store => $m::store(a, b, n, $s, false, false),
                    Op::StoreNt => $m::store(a, b, n, $s, false, true),
                    Op::CopyNt => $m::store(a, b, n, $s, true, true),
                    Op::Dot => return ($m::dot(b, c, n, true) as f64).to_bits(),
                    Op::Sum => return ($m::dot(b, c, n, false) as f64).to_bits(),
                    Op::Load => return $m::load(b, n, $passes),
                }
            }
            0
        }};
    }

    macro_rules! run_scalar {
        ($m:ident, $op:expr, $a:expr, $b:expr, $c:expr, $s:expr, $passes:expr) => {{
            match $op {
                Op::Copy | Op::CopyNt => $m::copy($a, $b),
                Op::Scale => $m::scale($a, $b, $s),
                Op::Add => $m::add($a, $b, $c),
                Op::Triad | Op::TriadNt => $m::triad($a, $b, $c, $s),
                Op::Daxpy => $m::daxpy($a, $b, $s),
                Op::Store | Op::StoreNt => $m::store($a, $s),
                Op::Dot => return ($m::dot($b, $c) as f64).to_bits(),
                Op::Sum => return ($m::sum($b) as f64).to_bits(),
                Op::Load => return (0..$passes.max(1)).fold(0, |r, _| r ^ $m::load($b)),
            }
            0
        }};
    }

    impl Elem for f64 {
        const PREC: Precision = Precision::F64;
        fn pool() -> &'static BufferPool<f64> {
            static POOL: BufferPool<f64> = BufferPool::new();
            &POOL
        }
        fn from_f64(x: f64) -> f64 {
            x
        }
        fn to_f64(self) -> f64 {
            self
        }
        fn bits(self) -> u64 {
            self.to_bits()
        }
        fn dispatch(variant: Variant, op: Op, a: &mut [f64], b: &[f64], c: &[f64], s: f64, passes: usize) -> u64 {
            match variant {
                Variant::Scalar => run_scalar!(scalar_f64, op, a, b, c, s, passes),
                Variant::Sse => run_simd!(sse_f64, op, a, b, c, s, passes),
                Variant::Avx2 => run_simd!(avx2_f64, op, a, b, c, s, passes),
                Variant::Avx512 | Variant::Amx => run_simd!(avx512_f64, op, a, b, c, s, passes),
            }
        }
    }

    impl Elem for f32 {
        const PREC: Precision = Precision::F32;
        fn pool() -> &'static BufferPool<f32> {
            static POOL: BufferPool<f32> = BufferPool::new();
            &POOL
        }
        fn from_f64(x: f64) -> f32 {
            x as f32
        }
        fn to_f64(self) -> f64 {
            self as f64
        }
        fn bits(self) -> u64 {
            self.to_bits() as u64
        }
        fn dispatch(variant: Variant, op: Op, a: &mut [f32], b: &[f32], c: &[f32], s: f32, passes: usize) -> u64 {
            match variant {
                Variant::Scalar => run_scalar!(scalar_f32, op, a, b, c, s, passes),
                Variant::Sse => run_simd!(sse_f32, op, a, b, c, s, passes),
                Variant::Avx2 => run_simd!(avx2_f32, op, a, b, c, s, passes),
                Variant::Avx512 | Variant::Amx => run_simd!(avx512_f32, op, a, b, c, s, passes),
            }
        }
    }
}

/// A buffer whose first element sits `page_offset` bytes (a multiple of 64) past a 4 KiB
/// boundary, plus `misalign` elements.
struct Buf<T: Elem> {
    data: Vec<T>,
    start: usize,
    n: usize,
}

/// Where each array of a stream kernel starts within a 4 KiB page: a third of a page apart
/// (like STREAM's OFFSET and likwid-bench's stream offsets). Left to malloc, arrays of an
/// L1-sized kernel land a fixed 64–128 B apart modulo 4 KiB; a load then matches the low 12
/// bits of a store still in flight (Intel's 4K aliasing: the load waits), which cost the
/// L1 triad up to a third of its bandwidth on Sapphire Rapids.
const PAGE_OFFSETS: [usize; 3] = [0, 1344, 2688];

impl<T: Elem> Buf<T> {
    /// `n` elements drawn from `fill` (zeros without one), written once: the arrays of a
    /// DRAM-sized ceiling are gigabytes, and a zero fill before the random one doubled the
    /// cost of making them.
    fn new(n: usize, misalign: usize, page_offset: usize, mut fill: Option<SplitMix>) -> Result<Buf<T>, String> {
        const PAGE: usize = 4096;
        let size = std::mem::size_of::<T>();
        let pad = PAGE / size + misalign;
        let pooled = if ReusedArrays::active() { T::pool().take(n + pad) } else { None };
        let mut data = match pooled {
            Some(v) => v,
            None => {
                let mut v: Vec<T> = Vec::new();
                v.try_reserve_exact(n + pad)
                    .map_err(|e| format!("cannot allocate {} elements: {e}", n + pad))?;
                crate::check::advise_huge_pages(v.as_ptr() as usize, v.capacity() * size);
                v
            }
        };
        // Elements from the allocation to the next page boundary, then to the offset (Vec<T>
        // is aligned to T, so both are whole elements).
        let addr = data.as_ptr() as usize;
        let to_page = (addr.next_multiple_of(PAGE) - addr) / size;
        let start = (to_page + page_offset / size) % (PAGE / size) + misalign;
        let zero = T::from_f64(0.0);
        data.extend((0..n + pad).map(|i| match fill.as_mut() {
            Some(rng) if (start..start + n).contains(&i) => T::from_f64(rng.next_f64()),
            _ => zero,
        }));
        Ok(Buf { data, start, n })
    }
    fn s(&self) -> &[T] {
        &self.data[self.start..self.start + self.n]
    }
    fn m(&mut self) -> &mut [T] {
        &mut self.data[self.start..self.start + self.n]
    }
}

impl<T: Elem> Drop for Buf<T> {
    fn drop(&mut self) {
        let bytes = self.data.capacity() * size_of::<T>();
        if bytes >= crate::buffer_pool::POOLED_FROM_BYTES && ReusedArrays::active() {
            let budget = available_memory_bytes().map_or(0, |b| b / 4) as usize;
            T::pool().give(std::mem::take(&mut self.data), budget);
        }
    }
}

/// SplitMix64: seeded random inputs without a dependency.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// One streaming kernel at one precision.
#[derive(Debug, Clone, Copy)]
pub struct StreamKernel {
    pub op: Op,
    pub precision: Precision,
}

impl StreamKernel {
    fn suffix(&self) -> &'static str {
        match self.precision {
            Precision::F32 => "_f32",
            _ => "",
        }
    }

    /// A `load` instance that reads its array `passes` times per `run()` with one final
    /// reduction (the L1 ceiling: no per-call epilogue between passes).
    pub fn load_instance(&self, n: usize, variant: Variant, seed: u64, passes: usize) -> Result<Box<dyn Instance>, String> {
        if self.op != Op::Load {
            return Err(format!("{}: only load takes several passes per call", self.name()));
        }
        self.check(n, variant)?;
        let mut i = match self.precision {
            Precision::F32 => return Err("load_instance: f64 only".to_string()),
            _ => StreamInstance::<f64>::new(self.op, n, variant, seed, 0)?,
        };
        i.passes = passes.max(1);
        Ok(Box::new(i))
    }

    /// An instance whose arrays start `misalign` elements past a 64-byte boundary.
    pub fn instance_misaligned(&self, n: usize, variant: Variant, seed: u64, misalign: usize) -> Result<Box<dyn Instance>, String> {
        self.check(n, variant)?;
        match self.precision {
            Precision::F32 => Ok(Box::new(StreamInstance::<f32>::new(self.op, n, variant, seed, misalign)?)),
            _ => Ok(Box::new(StreamInstance::<f64>::new(self.op, n, variant, seed, misalign)?)),
        }
    }

    /// Size, variant and memory checks of an instance (one-line causes).
    fn check(&self, n: usize, variant: Variant) -> Result<(), String> {
        let name = self.name();
        if n == 0 {
            return Err(format!("{name}: size 0 (give at least 1 element)"));
        }
        if !self.op.variants().contains(&variant) {
            return Err(format!(
                "{name}: no {variant} variant (variants: {})",
                variant_list(self.op.variants())
            ));
        }
        if !variant.supported() {
            return Err(format!("{name}: this CPU cannot run the {variant} variant"));
        }
        let bytes = (n as u64).checked_mul(self.op.arrays() * self.precision.bytes());
        let avail = available_memory_bytes();
        match (bytes, avail) {
            (None, _) => return Err(format!("{name}: size {n} overflows")),
            (Some(b), Some(m)) if b > m => {
                return Err(format!("{name}: size {n} needs {b} bytes but only {m} are available"));
            }
            _ => {}
        }
        Ok(())
    }
}

fn variant_list(v: &[Variant]) -> String {
    v.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
}

/// MemAvailable from /proc/meminfo, where readable.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

impl Kernel for StreamKernel {
    fn name(&self) -> &'static str {
        let names: &'static [&'static str] = match self.precision {
            Precision::F32 => &[
                "copy_f32",
                "scale_f32",
                "add_f32",
                "triad_f32",
                "daxpy_f32",
                "dot_f32",
                "sum_f32",
                "load_f32",
                "store_f32",
                "copy_nt_f32",
                "triad_nt_f32",
                "store_nt_f32",
            ],
            _ => &[
                "copy", "scale", "add", "triad", "daxpy", "dot", "sum", "load", "store", "copy_nt", "triad_nt", "store_nt",
            ],
        };
        let i = Op::ALL.iter().position(|o| *o == self.op).unwrap_or(0);
        debug_assert!(names[i].starts_with(self.op.name()) && names[i].ends_with(self.suffix()));
        names[i]
    }

    fn description(&self) -> &'static str {
        self.op.description()
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn variants(&self) -> &'static [Variant] {
        self.op.variants()
    }

    /// Single pass, no reuse beyond a line. Non-temporal stores bypass every cache at any
    /// size, which the level model (cached when the set fits) does not describe: not modelled.
    fn reuse_footprint_bytes(&self, _n: usize) -> Option<u64> {
        (!self.op.non_temporal()).then_some(0)
    }

    fn formula(&self, variant: Variant) -> String {
        let size = self.precision.bytes();
        let w = lanes(variant, size);
        let fpe = self.op.flops_per_element();
        let rem = if variant == Variant::Avx512 {
            format!("remainder n%{w}: one masked instruction ({} flops counted full width)", fpe * w)
        } else if w > 1 {
            format!("remainder n%{w}: scalar, {fpe} flop(s) each")
        } else {
            "no remainder".to_string()
        };
        let red = if self.op.reduction() && self.op.combine_flops() > 0 {
            format!(" + {} ({} accumulators) + {} scalar (lanes)", (ACCS as u64 - 1) * w, ACCS, w - 1)
        } else {
            String::new()
        };
        let fma = if !self.op.multiply_add() {
            ""
        } else if matches!(variant, Variant::Avx2 | Variant::Avx512) {
            "; the vector multiply-adds are FMAs"
        } else {
            "; multiply then add (no FMA)"
        };
        let nt = if self.op.non_temporal() {
            "; DRAM without write-allocate for streamed vectors (scalar peel to alignment)"
        } else {
            ""
        };
        format!(
            "W = {fpe}·n flops{red} ({rem}{fma}); core loads {}·{size}·n B, stores {}·{size}·n B; DRAM {}·{size}·n B{nt}",
            self.op.reads(),
            self.op.writes(),
            stream_counts(self.op, self.precision, Variant::Scalar, 1 << 20, 0).dram_bytes / (1 << 20) / size
        )
    }

    fn working_set_bytes(&self, n: usize) -> u64 {
        n as u64 * self.op.arrays() * self.precision.bytes()
    }

    fn size_for_bytes(&self, bytes: u64) -> usize {
        ((bytes / (self.op.arrays() * self.precision.bytes())) as usize).max(1)
    }

    fn counts(&self, n: usize, variant: Variant) -> Counts {
        stream_counts(self.op, self.precision, variant, n, 0)
    }

    fn instance(&self, n: usize, variant: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        self.instance_misaligned(n, variant, seed, 0)
    }
}

/// The arrays and scalar of one run, plus what `verify` needs.
///
/// Only the arrays the kernel touches have `n` elements (`a` written, or read and written by
/// daxpy; `b` read; `c` read second); the others are one element, so a DRAM-sized `load` or
/// `store` allocates and fills its working set, not twice it.
pub struct StreamInstance<T: Elem> {
    op: Op,
    variant: Variant,
    n: usize,
    a: Buf<T>,
    b: Buf<T>,
    c: Buf<T>,
    /// The seed `a` was filled from (daxpy reads `a`; `verify` refills it from the seed).
    a_seed: u64,
    s: T,
    /// The last run's result word (reductions and `load`).
    pub result: u64,
    peel: usize,
    /// Passes over the array per `run()` (`load` only; 1 otherwise).
    passes: usize,
}

impl<T: Elem> StreamInstance<T> {
    fn new(op: Op, n: usize, variant: Variant, seed: u64, misalign: usize) -> Result<Self, String> {
        let mut seeds = SplitMix(seed);
        let (a_seed, b_seed, c_seed) = (seeds.next_u64(), seeds.next_u64(), seeds.next_u64());
        let s = T::from_f64(seeds.next_f64());
        let len = |used: bool| if used { n } else { 1 };
        let a_read = op == Op::Daxpy;
        let a = Buf::<T>::new(len(op.writes() > 0), misalign, PAGE_OFFSETS[0], a_read.then_some(SplitMix(a_seed)))?;
        let b = Buf::<T>::new(len(op.reads() > 0), misalign, PAGE_OFFSETS[1], Some(SplitMix(b_seed)))?;
        let c_read = op.reads() == 2 && op != Op::Daxpy;
        let c = Buf::<T>::new(len(c_read), misalign, PAGE_OFFSETS[2], Some(SplitMix(c_seed)))?;
        let peel = if op.non_temporal() && variant != Variant::Scalar {
            let align = (variant.width_bits() / 8) as usize;
            let off = a.s().as_ptr().align_offset(align);
            if off == usize::MAX { n } else { off.min(n) }
        } else {
            0
        };
        Ok(StreamInstance {
            op,
            variant,
            n,
            a,
            b,
            c,
            a_seed,
            s,
            result: 0,
            peel,
            passes: 1,
        })
    }

    /// `c` where the kernel reads a second array, else `b` (unused by the kernel, or read
    /// twice by `sum`-like uses).
    fn second(&self) -> &[T] {
        if self.c.n == self.n { self.c.s() } else { self.b.s() }
    }

    /// daxpy's `y` as it was made (its runs overwrite it).
    fn a_initial(&self) -> Vec<T> {
        let mut rng = SplitMix(self.a_seed);
        (0..self.n).map(|_| T::from_f64(rng.next_f64())).collect()
    }

    fn run_once(&mut self) -> u64 {
        let n = self.n;
        // Every array the kernel touches has n elements, the others one (the SIMD loops take
        // the longer of a and b as n, and pointers).
        assert!(self.a.n == n || (self.op.writes() == 0 && self.a.n == 1));
        assert!(self.b.n == n || (self.op.reads() == 0 && self.b.n == 1));
        let c: &[T] = if self.c.n == n { self.c.s() } else { self.b.s() };
        let (a, b) = (
            &mut self.a.data[self.a.start..self.a.start + self.a.n],
            &self.b.data[self.b.start..self.b.start + self.b.n],
        );
        T::dispatch(self.variant, self.op, a, b, c, self.s, self.passes)
    }

    /// The scalar f64 reference of the current inputs: (expected output array, expected result).
    fn reference(&self) -> (Vec<f64>, f64) {
        let b: Vec<f64> = self.b.s().iter().map(|x| x.to_f64()).collect();
        let c: Vec<f64> = self.second().iter().map(|x| x.to_f64()).collect();
        let a: Vec<f64> = if self.op == Op::Daxpy {
            self.a_initial().iter().map(|x| x.to_f64()).collect()
        } else {
            vec![0.0; self.n]
        };
        let s = self.s.to_f64();
        let out: Vec<f64> = match self.op {
            Op::Copy | Op::CopyNt => b.clone(),
            Op::Scale => b.iter().map(|x| s * x).collect(),
            Op::Add => b.iter().zip(&c).map(|(x, y)| x + y).collect(),
            Op::Triad | Op::TriadNt => b.iter().zip(&c).map(|(x, y)| x + s * y).collect(),
            Op::Daxpy => a.iter().zip(&b).map(|(y, x)| s * x + y).collect(),
            Op::Store | Op::StoreNt => vec![s; self.n],
            _ => Vec::new(),
        };
        let res = match self.op {
            Op::Dot => b.iter().zip(&c).map(|(x, y)| x * y).sum(),
            Op::Sum => b.iter().sum(),
            _ => 0.0,
        };
        (out, res)
    }
}

impl<T: Elem> Instance for StreamInstance<T> {
    fn run(&mut self) {
        self.result = self.run_once();
    }

    fn verify(&mut self) -> Result<(), String> {
        let eps = match T::PREC {
            Precision::F64 => f64::EPSILON,
            _ => f32::EPSILON as f64,
        };
        let name = format!(
            "{}{} ({})",
            self.op.name(),
            if T::PREC == Precision::F32 { "_f32" } else { "" },
            self.variant
        );
        if self.op == Op::Daxpy {
            let a0 = self.a_initial();
            self.a.m().copy_from_slice(&a0);
        } else if self.op.writes() > 0 {
            for x in self.a.m() {
                *x = T::from_f64(f64::NAN);
            }
        }
        let (want, want_res) = self.reference();
        let passes = std::mem::replace(&mut self.passes, 1);
        self.run();
        self.passes = passes;
        match self.op {
            Op::Load => {
                let expect = self.b.s().iter().fold(0u64, |r, x| r ^ x.bits());
                if self.result != expect {
                    return Err(format!("{name}: XOR {:#x}, reference {:#x}", self.result, expect));
                }
            }
            Op::Dot | Op::Sum => {
                let got = f64::from_bits(self.result);
                let mag: f64 = match self.op {
                    Op::Dot => {
                        let c = self.second();
                        self.b.s().iter().zip(c).map(|(x, y)| (x.to_f64() * y.to_f64()).abs()).sum()
                    }
                    _ => self.b.s().iter().map(|x| x.to_f64().abs()).sum(),
                };
                // Worst-case bound of a recursive sum of n terms in precision eps.
                let tol = 2.0 * eps * (self.n as f64 + ACCS as f64 + 16.0) * mag + f64::MIN_POSITIVE;
                let within = (got - want_res).abs() <= tol; // false for NaN
                if !within {
                    return Err(format!("{name}: result {got}, reference {want_res} (tolerance {tol:e})"));
                }
            }
            _ => {
                for (i, (g, w)) in self.a.s().iter().zip(&want).enumerate() {
                    let g = g.to_f64();
                    // One rounding per operation (FMA: one for two), relative to the operands.
                    let tol = 4.0 * eps * (w.abs() + 1.0);
                    let within = (g - w).abs() <= tol; // false for NaN
                    if !within {
                        return Err(format!("{name}: a[{i}] = {g}, reference {w}"));
                    }
                }
            }
        }
        Ok(())
    }

    fn counts(&self) -> Counts {
        // Only `load` takes several passes, and it has no reduction flops: counts scale exactly.
        stream_counts(self.op, T::PREC, self.variant, self.n, self.peel).scaled(self.passes as u64)
    }
}

/// The streaming kernels of the suite.
pub fn kernels() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for precision in [Precision::F64, Precision::F32] {
        for op in Op::ALL {
            v.push(Box::new(StreamKernel { op, precision }));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    /// Each array starts at its own third of a 4 KiB page (plus the asked misalignment), so
    /// no two streams alias in their low 12 address bits, whatever malloc returned.
    #[test]
    fn arrays_start_a_third_of_a_page_apart() {
        let mut rng = super::SplitMix(std::process::id() as u64);
        for _ in 0..50 {
            let n = 1 + (rng.next_u64() % 5000) as usize;
            let mis = (rng.next_u64() % 8) as usize;
            let i = super::StreamInstance::<f64>::new(super::Op::Triad, n, super::Variant::Scalar, rng.next_u64(), mis).unwrap();
            for (buf, off) in [&i.a, &i.b, &i.c].into_iter().zip(super::PAGE_OFFSETS) {
                assert_eq!(buf.s().as_ptr() as usize % 4096, off + 8 * mis, "n={n} misalign={mis}");
                assert!(buf.start + buf.n <= buf.data.len());
            }
        }
    }

    use super::*;

    fn seed() -> u64 {
        let s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        eprintln!("stream test seed: {s}");
        s
    }

    #[test]
    fn every_supported_variant_matches_the_reference() {
        let mut rng = SplitMix(seed());
        for k in kernels() {
            for &v in k.variants().iter().filter(|v| v.supported()) {
                for n in [1usize, 3, 7, 17, 33, 127, 1000 + (rng.next_u64() % 64) as usize] {
                    let mis = (rng.next_u64() % 8) as usize;
                    let sk = StreamKernel {
                        op: Op::ALL[Op::ALL.iter().position(|o| o.name() == k.name().trim_end_matches("_f32")).unwrap()],
                        precision: k.precision(),
                    };
                    let mut inst = sk.instance_misaligned(n, v, rng.next_u64(), mis).unwrap();
                    inst.verify().unwrap_or_else(|e| panic!("n={n} misalign={mis}: {e}"));
                }
            }
        }
    }

    /// An instance holds its working set, not more: the arrays a kernel does not touch are
    /// one element (a DRAM-sized ceiling allocates and fills gigabytes per instance), and
    /// daxpy's `y` is refilled from its seed for `verify` after runs changed it, not copied.
    #[test]
    fn instances_hold_only_the_arrays_they_touch() {
        let mut rng = SplitMix(seed());
        for op in Op::ALL {
            let n = 2 + (rng.next_u64() % 5000) as usize;
            let mut i = StreamInstance::<f64>::new(op, n, Variant::Scalar, rng.next_u64(), 0).unwrap();
            let held: usize = [&i.a, &i.b, &i.c].iter().map(|b| b.n).filter(|&len| len == n).sum();
            assert_eq!(held as u64, op.arrays() * n as u64, "{op:?} n={n}");
            assert!([&i.a, &i.b, &i.c].iter().all(|b| b.n == n || b.n == 1), "{op:?}");
            for _ in 0..1 + rng.next_u64() % 3 {
                i.run();
            }
            i.verify().unwrap_or_else(|e| panic!("{op:?} n={n} after runs: {e}"));
        }
    }

    /// Arrays reused within a scope hold what fresh ones would: every kernel on arrays a
    /// kernel of another op and seed left behind (larger, on the same pooled memory) computes
    /// the reference result, before and after runs; when the scope closes, the pools are
    /// empty. (Only this test opens a scope in this crate, so no other test's arrays are
    /// kept after it.)
    #[test]
    fn reused_arrays_hold_what_fresh_ones_would() {
        let mut rng = SplitMix(seed());
        let scope = ReusedArrays::open();
        let big = crate::buffer_pool::POOLED_FROM_BYTES / 8;
        for _ in 0..2 {
            for op in Op::ALL {
                let n = big + (rng.next_u64() % (big as u64 / 2)) as usize;
                let mut i = StreamInstance::<f64>::new(op, n, crate::cpu_probe::widest_variant(), rng.next_u64(), 0).unwrap();
                i.verify().unwrap_or_else(|e| panic!("{op:?} n={n}: {e}"));
                i.run();
                i.verify().unwrap_or_else(|e| panic!("{op:?} n={n} after a run: {e}"));
            }
        }
        assert!(f64::pool().bytes() > 0, "nothing was kept");
        drop(scope);
        assert_eq!(f64::pool().bytes(), 0);
    }

    #[test]
    fn counts_of_small_sizes() {
        // triad, AVX-512 f64, n = 19: 2 full vectors (32 flops), 1 masked (16 flops).
        let c = stream_counts(Op::Triad, Precision::F64, Variant::Avx512, 19, 0);
        assert_eq!(c.flops.get(&FlopClass::Packed512Double), Some(&48));
        assert_eq!(c.flops.get(&FlopClass::ScalarDouble), None);
        assert_eq!(c.core_load_bytes, 2 * 19 * 8);
        assert_eq!(c.core_store_bytes, 19 * 8);
        assert_eq!(c.dram_bytes, 4 * 19 * 8);
        assert_eq!(c.fma_flops, 48, "the full and the masked vector are FMAs");
        // triad, AVX2 f64, n = 19: 4 vector FMAs (32 flops), the 3 scalar ones multiply then add.
        let c = stream_counts(Op::Triad, Precision::F64, Variant::Avx2, 19, 0);
        assert_eq!((c.flops_total(), c.fma_flops), (38, 32));
        // dot, AVX-512 f32, n = 37: 2 full + 1 masked FMA of 16 lanes (96), the combining adds not.
        let c = stream_counts(Op::Dot, Precision::F32, Variant::Avx512, 37, 0);
        assert_eq!(c.fma_flops, 96);
        assert_eq!(c.flops_total(), 96 + 7 * 16 + 15);
        // SSE multiplies then adds: no FMA flops.
        assert_eq!(stream_counts(Op::Daxpy, Precision::F64, Variant::Sse, 19, 0).fma_flops, 0);
        // sum, AVX2 f32, n = 21: 2 vectors (16 flops) + 7 accumulator adds (56) ; 5 scalar tail + 7 lane adds.
        let c = stream_counts(Op::Sum, Precision::F32, Variant::Avx2, 21, 0);
        assert_eq!(c.flops.get(&FlopClass::Packed256Single), Some(&72));
        assert_eq!(c.flops.get(&FlopClass::ScalarSingle), Some(&12));
        // store_nt, SSE f64, 3 peeled: 1 peeled scalar store + 2 streamed vectors + 1 scalar.
        let c = stream_counts(Op::StoreNt, Precision::F64, Variant::Sse, 6, 1);
        assert_eq!(c.dram_bytes, (2 * 2 + 4) * 8);
        assert_eq!(c.flops_total(), 0);
        // daxpy DRAM: x read, y read and written.
        assert_eq!(stream_counts(Op::Daxpy, Precision::F64, Variant::Scalar, 10, 0).dram_bytes, 240);
    }

    #[test]
    fn bad_instances_are_refused() {
        let k = StreamKernel {
            op: Op::Triad,
            precision: Precision::F64,
        };
        assert!(k.instance(0, Variant::Scalar, 1).is_err());
        assert!(k.instance(usize::MAX / 4, Variant::Scalar, 1).is_err());
        let nt = StreamKernel {
            op: Op::StoreNt,
            precision: Precision::F64,
        };
        assert!(nt.instance(10, Variant::Scalar, 1).is_err());
    }

    #[test]
    fn effective_flops_drop_the_masked_lanes() {
        // triad, AVX-512 f64, n = 19: 48 flops counted, 3 lanes active of the masked 8.
        assert_eq!(stream_effective_flops(Op::Triad, Precision::F64, Variant::Avx512, 19), Some(38));
        assert_eq!(stream_effective_flops(Op::Triad, Precision::F64, Variant::Avx512, 16), None);
        assert_eq!(stream_effective_flops(Op::Triad, Precision::F64, Variant::Avx2, 19), None);
        assert_eq!(stream_effective_flops(Op::Copy, Precision::F64, Variant::Avx512, 19), None);
    }

    #[test]
    fn load_passes_count_and_verify() {
        let k = StreamKernel {
            op: Op::Load,
            precision: Precision::F64,
        };
        for &v in Variant::ALL.iter().filter(|v| v.supported()) {
            let mut one = k.instance(37, v, 9).unwrap();
            let mut three = k.load_instance(37, v, 9, 3).unwrap();
            assert_eq!(three.counts(), one.counts().scaled(3));
            one.run();
            three.run();
            // XOR over an odd number of passes equals one pass.
            three.verify().unwrap();
        }
        assert!(
            StreamKernel {
                op: Op::Triad,
                precision: Precision::F64
            }
            .load_instance(8, Variant::Scalar, 1, 2)
            .is_err()
        );
    }

    #[test]
    fn names_are_unique_and_f32_suffixed() {
        let names: Vec<&str> = kernels().iter().map(|k| k.name()).collect();
        let mut d = names.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), names.len());
        assert!(names.contains(&"triad_f32") && names.contains(&"triad"));
    }
}
