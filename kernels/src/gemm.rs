//! `dgemm` / `sgemm`: C = A·B for n×n row-major matrices, cache-blocked with packed panels
//! and a register-blocked FMA micro-kernel (the GotoBLAS/BLIS loop nest).
//!
//! Loop nest (blocking `mc × kc × nc`, micro-tile `MR × NR`, `NR = NB · lanes`):
//! ```text
//! for jc in 0..n step nc            B panel kc×nc packed into NR-wide micro-panels (L3)
//!   for pc in 0..k step kc          (pc = 0 starts C from zero: beta = 0; later blocks add)
//!     pack B[pc.., jc..]
//!     for ic in 0..m step mc        A block mc×kc packed into MR-tall micro-panels (L2)
//!       pack A[ic.., pc..]
//!       for jr in 0..nc step NR     B micro-panel kc×NR stays in L1
//!         for ir in 0..mc step MR   micro-kernel: MR×NB accumulators in registers
//! ```
//! Edge tiles are computed in full in a small tile buffer and the valid part copied to C
//! (padded rows/columns of the packed panels hold stale finite values; their results are
//! never copied out). So W counts `2·MR·NR·kc` per micro-kernel call, padding included: what
//! the hardware executes. Packing and edge copies are element copies through volatile
//! loads/stores (never turned into `memcpy` calls), except full B rows (vector copies).
//!
//! Micro-tiles: dgemm scalar 4×2, SSE 4×4, AVX2 6×8, AVX-512 8×16 (16 zmm accumulators,
//! written out in `asm!`: each FMA takes its A element as an embedded broadcast, so A is loaded
//! twice per row and update, `a_loads_per_row`); sgemm scalar 4×2, SSE 4×8, AVX2 6×16,
//! AVX-512 8×32.

use std::marker::PhantomData;

use crate::api::{Instance, Kernel};
use crate::check::{Buf, require, require_memory};
use crate::rng::Rng;
use crate::simd::{Elem, Lanes, Sc, Sc32};
use crate::suite::{ALL_VARIANTS, class, fused, require_size};
use crate::types::{Counts, Precision, Variant};

/// Cache blocking: rows of A per block, depth, columns of B per panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocking {
    pub mc: usize,
    pub kc: usize,
    pub nc: usize,
}

impl Blocking {
    /// The production blocking for a micro-tile `mr × nr`: the A block (mc×kc) sized for L2,
    /// the B micro-panel (kc×nr) for L1; mc a multiple of mr, nc of nr.
    pub fn for_tile(mr: usize, nr: usize, esize: usize) -> Blocking {
        let kc = if esize == 4 { 384 } else { 256 };
        Blocking {
            mc: (144 / mr).max(1) * mr,
            kc,
            nc: (4096 / nr).max(1) * nr,
        }
    }
}

/// Pointers, sizes and scratch of one C = A·B.
pub struct Args<E> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: *const E,
    pub lda: usize,
    pub b: *const E,
    pub ldb: usize,
    pub c: *mut E,
    pub ldc: usize,
    pub apack: *mut E,
    pub bpack: *mut E,
    pub ctile: *mut E,
    pub blk: Blocking,
}

/// The loop nest for vector type `V` and micro-tile `MR × (NB·lanes)`, no software prefetch
/// inside the micro-kernel.
#[inline(always)]
pub fn gemm<V: Lanes, const MR: usize, const NB: usize>(a: &Args<V::E>) {
    gemm_pf::<V, MR, NB, 0, 0>(a)
}

/// [`gemm`] whose micro-kernel asks, on every rank-1 update, for the A panel `PFA` updates
/// ahead and the B panel `PFB` updates ahead in L1 (0: not that panel). Hints only: the same
/// loads, stores and flops.
#[inline(always)]
pub fn gemm_pf<V: Lanes, const MR: usize, const NB: usize, const PFA: usize, const PFB: usize>(a: &Args<V::E>) {
    nest::<V, MR, NB, Generic<V, MR, NB, PFA, PFB, 1>>(a)
}

/// A micro-kernel: C[MR × NR] (+)= A panel (kc·MR) · B panel (kc·NR), the tile at `c` with
/// row stride `ldc`, from zero where `first`. Its loads, stores and flops must be [`micro`]'s
/// (the counts follow them). A type, not a closure, so that it inlines into the loop nest's
/// target features.
pub trait Micro<E> {
    /// # Safety
    /// `ap`, `bp` valid for the panels, `c` for the tile; the CPU has the kernel's features.
    unsafe fn run(kc: usize, ap: *const E, bp: *const E, c: *mut E, ldc: usize, first: bool, cnext: *const E);
    /// Where the macro-kernel asks for the next call's C tile (`cnext`) when this one starts:
    /// L1 (the kernel itself asks for nothing), or L2 (the kernel asks for it in L1 near its end).
    const NEXT_C_IN_L2: bool = false;
    /// The nest packs B with [`pack_b_by_rows`] (else [`pack_b`]): the same layout and counts.
    const PACK_B_BY_ROWS: bool = false;
    /// A's block into this kernel's micro-panels, as [`pack_a`] lays them out.
    ///
    /// # Safety
    /// As [`pack_a`]; the CPU has the kernel's features.
    unsafe fn pack_a(mc: usize, kc: usize, src: *const E, ld: usize, dst: *mut E);
}

/// [`micro`] for vector type `V`, tile `MR × (NB·lanes)`, software prefetch `PFA`/`PFB`,
/// `UK` rank-1 updates per loop trip (1: not unrolled).
pub struct Generic<V, const MR: usize, const NB: usize, const PFA: usize, const PFB: usize, const UK: usize>(PhantomData<V>);

impl<V: Lanes, const MR: usize, const NB: usize, const PFA: usize, const PFB: usize, const UK: usize> Micro<V::E>
    for Generic<V, MR, NB, PFA, PFB, UK>
{
    #[inline(always)]
    unsafe fn run(kc: usize, ap: *const V::E, bp: *const V::E, c: *mut V::E, ldc: usize, first: bool, _cnext: *const V::E) {
        // SAFETY: forwarded from the caller.
        unsafe { micro::<V, MR, NB, PFA, PFB, UK>(kc, ap, bp, c, ldc, first) }
    }
    #[inline(always)]
    unsafe fn pack_a(mc: usize, kc: usize, src: *const V::E, ld: usize, dst: *mut V::E) {
        // SAFETY: forwarded from the caller.
        unsafe { pack_a::<V, MR>(mc, kc, src, ld, dst) }
    }
}

/// [`micro_zmm_8x16_eb`] as a [`Micro`] (AVX-512F).
#[cfg(target_arch = "x86_64")]
pub struct Zmm8x16Eb;

#[cfg(target_arch = "x86_64")]
impl Micro<f64> for Zmm8x16Eb {
    #[inline(always)]
    unsafe fn run(kc: usize, ap: *const f64, bp: *const f64, c: *mut f64, ldc: usize, first: bool, _cnext: *const f64) {
        // SAFETY: forwarded from the caller, who runs it on an AVX-512F CPU.
        unsafe { micro_zmm_8x16_eb(kc, ap, bp, c, ldc, first) }
    }
    #[inline(always)]
    unsafe fn pack_a(mc: usize, kc: usize, src: *const f64, ld: usize, dst: *mut f64) {
        // SAFETY: forwarded from the caller, who runs it on an AVX-512F CPU.
        unsafe { pack_a_8_zmm(mc, kc, src, ld, dst) }
    }
}

/// [`micro_zmm_8x16_eb_late`] as a [`Micro`] (AVX-512F): the next C tile asked for in L2 when
/// a call starts and in L1 `T` loop trips (4·T rank-1 updates) before its end; B packed row by
/// row. The AVX-512 dgemm on Intel CPUs (T = 16): on the Emerald Rapids guest, 2026-11-29,
/// 86.0 % of the FMA peak loop against 84.1 % for [`Zmm8x16Eb`] (11 rounds interleaved, CPU 3);
/// the row-wise packing alone +0.6 points.
#[cfg(target_arch = "x86_64")]
pub struct Zmm8x16EbLate<const T: usize>;

#[cfg(target_arch = "x86_64")]
impl<const T: usize> Micro<f64> for Zmm8x16EbLate<T> {
    const NEXT_C_IN_L2: bool = true;
    const PACK_B_BY_ROWS: bool = true;
    #[inline(always)]
    unsafe fn run(kc: usize, ap: *const f64, bp: *const f64, c: *mut f64, ldc: usize, first: bool, cnext: *const f64) {
        // SAFETY: forwarded from the caller, who runs it on an AVX-512F CPU.
        unsafe { micro_zmm_8x16_eb_late::<T>(kc, ap, bp, c, ldc, first, cnext) }
    }
    #[inline(always)]
    unsafe fn pack_a(mc: usize, kc: usize, src: *const f64, ld: usize, dst: *mut f64) {
        // SAFETY: forwarded from the caller, who runs it on an AVX-512F CPU.
        unsafe { pack_a_8_zmm(mc, kc, src, ld, dst) }
    }
}

/// The loop nest for vector type `V` and micro-tile `MR × (NB·lanes)` around the micro-kernel
/// `M`.
#[inline(always)]
pub fn nest<V: Lanes, const MR: usize, const NB: usize, M: Micro<V::E>>(a: &Args<V::E>) {
    let Blocking { mc, kc, nc } = a.blk;
    // SAFETY: all offsets stay inside A (m×k, lda), B (k×n, ldb), C (m×n, ldc) and the
    // scratch buffers, which `Mats::new` sizes as roundup(mc, MR)·kc, roundup(nc, NR)·kc and
    // MR·NR elements.
    unsafe {
        for jc in (0..a.n).step_by(nc) {
            let ncb = nc.min(a.n - jc);
            for pc in (0..a.k).step_by(kc) {
                let kcb = kc.min(a.k - pc);
                if M::PACK_B_BY_ROWS {
                    pack_b_by_rows::<V, NB>(kcb, ncb, a.b.add(pc * a.ldb + jc), a.ldb, a.bpack);
                } else {
                    pack_b::<V, NB>(kcb, ncb, a.b.add(pc * a.ldb + jc), a.ldb, a.bpack);
                }
                for ic in (0..a.m).step_by(mc) {
                    let mcb = mc.min(a.m - ic);
                    M::pack_a(mcb, kcb, a.a.add(ic * a.lda + pc), a.lda, a.apack);
                    let block = Block {
                        mc: mcb,
                        kc: kcb,
                        nc: ncb,
                        c: a.c.add(ic * a.ldc + jc),
                        ldc: a.ldc,
                        first: pc == 0,
                    };
                    macro_kernel::<V, MR, NB, M>(&block, a.apack, a.bpack, a.ctile);
                }
            }
        }
    }
}

/// One block of C that a packed A block (mc × kc) and a packed B panel (kc × nc) update.
pub struct Block<E> {
    pub mc: usize,
    pub kc: usize,
    pub nc: usize,
    /// The block's first element in C, rows `ldc` elements apart.
    pub c: *mut E,
    pub ldc: usize,
    /// The first k block: C is written, not updated.
    pub first: bool,
}

/// The micro-kernel `M` over every MR × NR tile of a block: B's micro-panels outside (each stays
/// in L1 while A's micro-panels pass from L2), A's inside; edge tiles through `ctile`.
///
/// # Safety
/// `apack` holds roundup(mc, MR)·kc packed elements, `bpack` roundup(nc, NR)·kc, `ctile` MR·NR;
/// `b.c` is valid for mc rows of nc elements at a stride of `b.ldc`; the CPU has `M`'s features.
#[inline(always)]
pub unsafe fn macro_kernel<V: Lanes, const MR: usize, const NB: usize, M: Micro<V::E>>(
    b: &Block<V::E>,
    apack: *const V::E,
    bpack: *const V::E,
    ctile: *mut V::E,
) {
    let nr = NB * V::LANES;
    let (mc, kc, nc, c, ldc, first) = (b.mc, b.kc, b.nc, b.c, b.ldc, b.first);
    // SAFETY: forwarded from the caller (see above).
    unsafe {
        for jr in (0..nc).step_by(nr) {
            let nrv = nr.min(nc - jr);
            let bp = bpack.add(jr * kc);
            for ir in (0..mc).step_by(MR) {
                let mrv = MR.min(mc - ir);
                let ap = apack.add(ir * kc);
                let cp = c.add(ir * ldc + jr);
                // C is not blocked: its tiles come from L3 or DRAM. Fetch the next
                // call's tile while this one's kc rank-1 updates run, rather than
                // stall on its first loads (SPR, n=1024: +10-13 % median).
                // The next call's tile: the one below, or the first of the next column.
                let next = if ir + MR < mc {
                    Some((cp.add(MR * ldc), MR.min(mc - ir - MR), nrv))
                } else if jr + nr < nc {
                    Some((c.add(jr + nr), MR.min(mc), nr.min(nc - jr - nr)))
                } else {
                    None
                };
                let cnext = next.map_or(cp as *const V::E, |(p, _, _)| p as *const V::E);
                if let Some((p, rows, cols)) = next {
                    if M::NEXT_C_IN_L2 {
                        prefetch_tile_l2(p, rows, cols, ldc);
                    } else {
                        prefetch_tile(p, rows, cols, ldc);
                    }
                }
                if mrv == MR && nrv == nr {
                    M::run(kc, ap, bp, cp, ldc, first, cnext);
                } else {
                    if !first {
                        copy_tile::<V>(mrv, nrv, cp, ldc, ctile, nr);
                    }
                    // The tile buffer's stride is not C's: no next tile to ask for.
                    M::run(kc, ap, bp, ctile, nr, first, ctile);
                    copy_tile::<V>(mrv, nrv, ctile, nr, cp, ldc);
                }
            }
        }
    }
}

/// `MR × NB` vector accumulators over `kc` rank-1 updates.
#[inline(always)]
unsafe fn micro<V: Lanes, const MR: usize, const NB: usize, const PFA: usize, const PFB: usize, const UK: usize>(
    kc: usize,
    ap: *const V::E,
    bp: *const V::E,
    c: *mut V::E,
    ldc: usize,
    first: bool,
) {
    let l = V::LANES;
    let mut acc = [[V::zero(); NB]; MR];
    // SAFETY: the caller passes panels of kc·MR and kc·NB·l elements and an MR×(NB·l) tile.
    unsafe {
        if !first {
            for (r, row) in acc.iter_mut().enumerate() {
                for (j, x) in row.iter_mut().enumerate() {
                    *x = V::load(c.add(r * ldc + j * l));
                }
            }
        }
        // One rank-1 update from the panels at `ap`, `bp`.
        macro_rules! update {
            ($ap:expr, $bp:expr) => {{
                let (ap, bp) = ($ap, $bp);
                if PFA > 0 {
                    prefetch_line(ap.wrapping_add(PFA * MR));
                }
                if PFB > 0 {
                    for j in 0..NB {
                        prefetch_line(bp.wrapping_add((PFB * NB + j) * l));
                    }
                }
                let mut b = [V::zero(); NB];
                for (j, x) in b.iter_mut().enumerate() {
                    *x = V::load(bp.add(j * l));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let av = V::bcast(ap.add(r));
                    for (j, x) in row.iter_mut().enumerate() {
                        *x = V::fma(av, b[j], *x);
                    }
                }
            }};
        }
        let (mut ap, mut bp, mut left) = (ap, bp, kc);
        // UK updates per loop trip (the loop's own index and branch once per UK).
        while left >= UK.max(1) {
            for u in 0..UK.max(1) {
                update!(ap.add(u * MR), bp.add(u * NB * l));
            }
            ap = ap.add(UK.max(1) * MR);
            bp = bp.add(UK.max(1) * NB * l);
            left -= UK.max(1);
        }
        while left > 0 {
            update!(ap, bp);
            ap = ap.add(MR);
            bp = bp.add(NB * l);
            left -= 1;
        }
        for (r, row) in acc.iter().enumerate() {
            for (j, x) in row.iter().enumerate() {
                V::store(c.add(r * ldc + j * l), *x);
            }
        }
    }
}

/// The asm lines of rank-1 update `u` of the 8 × 16 micro-kernel (offsets from the panel
/// pointers `{a}`, `{b}`, which the loop advances): B's row in zmm16/17, then row r's two
/// accumulators zmm(2r), zmm(2r + 1) take A's element r as an embedded broadcast.
#[cfg(target_arch = "x86_64")]
macro_rules! rank1_update {
    ($u:literal) => {
        concat!(
            "vmovupd zmm16, [{b} + ",
            $u,
            "*128]\n",
            "vmovupd zmm17, [{b} + ",
            $u,
            "*128 + 64]\n",
            rank1_row!($u, 0, 0, 1),
            rank1_row!($u, 1, 2, 3),
            rank1_row!($u, 2, 4, 5),
            rank1_row!($u, 3, 6, 7),
            rank1_row!($u, 4, 8, 9),
            rank1_row!($u, 5, 10, 11),
            rank1_row!($u, 6, 12, 13),
            rank1_row!($u, 7, 14, 15),
        )
    };
}

/// Row `r` of [`rank1_update`]: its two FMAs into zmm`lo` and zmm`hi`.
#[cfg(target_arch = "x86_64")]
macro_rules! rank1_row {
    ($u:literal, $r:literal, $lo:literal, $hi:literal) => {
        concat!(
            "vfmadd231pd zmm",
            $lo,
            ", zmm16, qword ptr [{a} + ",
            $u,
            "*64 + ",
            $r,
            "*8]{{1to8}}\n",
            "vfmadd231pd zmm",
            $hi,
            ", zmm17, qword ptr [{a} + ",
            $u,
            "*64 + ",
            $r,
            "*8]{{1to8}}\n",
        )
    };
}

/// The AVX-512 dgemm micro-kernel of an 8 × 16 tile written out: zmm0–15 accumulate (row r,
/// half h in zmm(2r + h)), zmm16/17 the B row; each FMA takes its A element as an embedded
/// broadcast (`{1to8}`), so no separate broadcast instruction competes for the ports: per
/// rank-1 update 2 vector loads and 16 FMAs that each load 8 bytes; 4 updates per loop trip.
///
/// # Safety
/// AVX-512F present; `ap` valid for 8·kc elements, `bp` for 16·kc, `c` for 8 rows of 16 at a
/// stride of `ldc` elements; kc ≥ 1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn micro_zmm_8x16_eb(kc: usize, ap: *const f64, bp: *const f64, c: *mut f64, ldc: usize, first: bool) {
    // SAFETY: guaranteed by the caller (see above); every access is inside the panels or the
    // 8 × 16 tile of C (rows c + r·ldc, r < 8, through c4 = c + 4·ldc).
    unsafe {
        std::arch::asm!(
            "lea {l3}, [{l} + {l}*2]",
            "lea {c4}, [{c} + {l}*4]",
            "test {first}, {first}",
            "jnz 3f",
            "vmovupd zmm0, [{c}]", "vmovupd zmm1, [{c} + 64]",
            "vmovupd zmm2, [{c} + {l}]", "vmovupd zmm3, [{c} + {l} + 64]",
            "vmovupd zmm4, [{c} + {l}*2]", "vmovupd zmm5, [{c} + {l}*2 + 64]",
            "vmovupd zmm6, [{c} + {l3}]", "vmovupd zmm7, [{c} + {l3} + 64]",
            "vmovupd zmm8, [{c4}]", "vmovupd zmm9, [{c4} + 64]",
            "vmovupd zmm10, [{c4} + {l}]", "vmovupd zmm11, [{c4} + {l} + 64]",
            "vmovupd zmm12, [{c4} + {l}*2]", "vmovupd zmm13, [{c4} + {l}*2 + 64]",
            "vmovupd zmm14, [{c4} + {l3}]", "vmovupd zmm15, [{c4} + {l3} + 64]",
            "jmp 4f",
            "3:",
            ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "vpxord zmm\\i, zmm\\i, zmm\\i", ".endr",
            "4:",
            // kc/4 trips of 4 updates (displacements, one index update per trip), then the rest.
            "mov {q}, {k}",
            "shr {q}, 2",
            "jz 5f",
            ".p2align 5",
            "2:",
            rank1_update!(0),
            rank1_update!(1),
            rank1_update!(2),
            rank1_update!(3),
            "add {a}, 256",
            "add {b}, 512",
            "dec {q}",
            "jnz 2b",
            "5:",
            "and {k}, 3",
            "jz 6f",
            "7:",
            rank1_update!(0),
            "add {a}, 64",
            "add {b}, 128",
            "dec {k}",
            "jnz 7b",
            "6:",
            "vmovupd [{c}], zmm0", "vmovupd [{c} + 64], zmm1",
            "vmovupd [{c} + {l}], zmm2", "vmovupd [{c} + {l} + 64], zmm3",
            "vmovupd [{c} + {l}*2], zmm4", "vmovupd [{c} + {l}*2 + 64], zmm5",
            "vmovupd [{c} + {l3}], zmm6", "vmovupd [{c} + {l3} + 64], zmm7",
            "vmovupd [{c4}], zmm8", "vmovupd [{c4} + 64], zmm9",
            "vmovupd [{c4} + {l}], zmm10", "vmovupd [{c4} + {l} + 64], zmm11",
            "vmovupd [{c4} + {l}*2], zmm12", "vmovupd [{c4} + {l}*2 + 64], zmm13",
            "vmovupd [{c4} + {l3}], zmm14", "vmovupd [{c4} + {l3} + 64], zmm15",
            a = inout(reg) ap => _, b = inout(reg) bp => _, k = inout(reg) kc => _, q = out(reg) _,
            c = in(reg) c, l = in(reg) ldc * 8, l3 = out(reg) _, c4 = out(reg) _,
            first = in(reg) usize::from(first),
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _,
            out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _,
            out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _, out("zmm16") _, out("zmm17") _,
            options(nostack)
        );
    }
}

/// The 24 `prefetcht0` of an 8 × 16 C tile at `{n}` (rows `{l}` bytes apart, rows 4-7 from
/// `{n4}`): each row's first, second and last byte's line (a misaligned row spans three).
#[cfg(target_arch = "x86_64")]
macro_rules! prefetch_c_tile {
    () => {
        concat!(
            "lea {n4}, [{n} + {l}*4]\n",
            "prefetcht0 [{n}]\n",
            "prefetcht0 [{n} + 64]\n",
            "prefetcht0 [{n} + 127]\n",
            "prefetcht0 [{n} + {l}]\n",
            "prefetcht0 [{n} + {l} + 64]\n",
            "prefetcht0 [{n} + {l} + 127]\n",
            "prefetcht0 [{n} + {l}*2]\n",
            "prefetcht0 [{n} + {l}*2 + 64]\n",
            "prefetcht0 [{n} + {l}*2 + 127]\n",
            "prefetcht0 [{n} + {l3}]\n",
            "prefetcht0 [{n} + {l3} + 64]\n",
            "prefetcht0 [{n} + {l3} + 127]\n",
            "prefetcht0 [{n4}]\n",
            "prefetcht0 [{n4} + 64]\n",
            "prefetcht0 [{n4} + 127]\n",
            "prefetcht0 [{n4} + {l}]\n",
            "prefetcht0 [{n4} + {l} + 64]\n",
            "prefetcht0 [{n4} + {l} + 127]\n",
            "prefetcht0 [{n4} + {l}*2]\n",
            "prefetcht0 [{n4} + {l}*2 + 64]\n",
            "prefetcht0 [{n4} + {l}*2 + 127]\n",
            "prefetcht0 [{n4} + {l3}]\n",
            "prefetcht0 [{n4} + {l3} + 64]\n",
            "prefetcht0 [{n4} + {l3} + 127]\n",
        )
    };
}

/// [`micro_zmm_8x16_eb`] that asks for the next call's C tile (`cnext`, the same row stride) in
/// L1 when `T` loop trips (4·T rank-1 updates) are left, or at the start when there are fewer:
/// late enough that the A and B panels streaming through L1 do not evict it before the next
/// call loads it (the macro-kernel asks for it in L2 when this call starts). Prefetches only:
/// the same loads, stores and flops as [`micro_zmm_8x16_eb`].
///
/// # Safety
/// As [`micro_zmm_8x16_eb`] (`cnext` is never dereferenced: prefetches do not fault).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn micro_zmm_8x16_eb_late<const T: usize>(
    kc: usize,
    ap: *const f64,
    bp: *const f64,
    c: *mut f64,
    ldc: usize,
    first: bool,
    cnext: *const f64,
) {
    // SAFETY: as micro_zmm_8x16_eb; prefetch instructions never fault.
    unsafe {
        std::arch::asm!(
            "lea {l3}, [{l} + {l}*2]",
            "lea {c4}, [{c} + {l}*4]",
            "test {first}, {first}",
            "jnz 3f",
            "vmovupd zmm0, [{c}]", "vmovupd zmm1, [{c} + 64]",
            "vmovupd zmm2, [{c} + {l}]", "vmovupd zmm3, [{c} + {l} + 64]",
            "vmovupd zmm4, [{c} + {l}*2]", "vmovupd zmm5, [{c} + {l}*2 + 64]",
            "vmovupd zmm6, [{c} + {l3}]", "vmovupd zmm7, [{c} + {l3} + 64]",
            "vmovupd zmm8, [{c4}]", "vmovupd zmm9, [{c4} + 64]",
            "vmovupd zmm10, [{c4} + {l}]", "vmovupd zmm11, [{c4} + {l} + 64]",
            "vmovupd zmm12, [{c4} + {l}*2]", "vmovupd zmm13, [{c4} + {l}*2 + 64]",
            "vmovupd zmm14, [{c4} + {l3}]", "vmovupd zmm15, [{c4} + {l3} + 64]",
            "jmp 4f",
            "3:",
            ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "vpxord zmm\\i, zmm\\i, zmm\\i", ".endr",
            "4:",
            "mov {q}, {k}",
            "shr {q}, 2",
            // Fewer than T trips: ask for the next tile now.
            "cmp {q}, {t}",
            "jae 8f",
            prefetch_c_tile!(),
            "8:",
            "test {q}, {q}",
            "jz 5f",
            ".p2align 5",
            "2:",
            "cmp {q}, {t}",
            "jne 9f",
            prefetch_c_tile!(),
            "9:",
            rank1_update!(0),
            rank1_update!(1),
            rank1_update!(2),
            rank1_update!(3),
            "add {a}, 256",
            "add {b}, 512",
            "dec {q}",
            "jnz 2b",
            "5:",
            "and {k}, 3",
            "jz 6f",
            "7:",
            rank1_update!(0),
            "add {a}, 64",
            "add {b}, 128",
            "dec {k}",
            "jnz 7b",
            "6:",
            "vmovupd [{c}], zmm0", "vmovupd [{c} + 64], zmm1",
            "vmovupd [{c} + {l}], zmm2", "vmovupd [{c} + {l} + 64], zmm3",
            "vmovupd [{c} + {l}*2], zmm4", "vmovupd [{c} + {l}*2 + 64], zmm5",
            "vmovupd [{c} + {l3}], zmm6", "vmovupd [{c} + {l3} + 64], zmm7",
            "vmovupd [{c4}], zmm8", "vmovupd [{c4} + 64], zmm9",
            "vmovupd [{c4} + {l}], zmm10", "vmovupd [{c4} + {l} + 64], zmm11",
            "vmovupd [{c4} + {l}*2], zmm12", "vmovupd [{c4} + {l}*2 + 64], zmm13",
            "vmovupd [{c4} + {l3}], zmm14", "vmovupd [{c4} + {l3} + 64], zmm15",
            a = inout(reg) ap => _, b = inout(reg) bp => _, k = inout(reg) kc => _, q = out(reg) _,
            c = in(reg) c, l = in(reg) ldc * 8, l3 = out(reg) _, c4 = out(reg) _,
            n = in(reg) cnext, n4 = out(reg) _, t = const T,
            first = in(reg) usize::from(first),
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _,
            out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _,
            out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _, out("zmm16") _, out("zmm17") _,
            options(nostack)
        );
    }
}

/// B (kc×nc at `src`, row stride `ld`) into NR-wide micro-panels, each kc×NR contiguous.
///
/// # Safety
/// `src` valid for kc rows of nc elements at stride `ld`; `dst` for roundup(nc, NR)·kc.
#[inline(always)]
pub unsafe fn pack_b<V: Lanes, const NB: usize>(kc: usize, nc: usize, src: *const V::E, ld: usize, dst: *mut V::E) {
    let l = V::LANES;
    let nr = NB * l;
    // SAFETY: reads stay in the kc×nc block, writes in roundup(nc, NR)·kc elements.
    unsafe {
        for jr in (0..nc).step_by(nr) {
            let nrv = nr.min(nc - jr);
            let d = dst.add(jr * kc);
            for kk in 0..kc {
                let s = src.add(kk * ld + jr);
                if nrv == nr {
                    for j in 0..NB {
                        V::store(d.add(kk * nr + j * l), V::load(s.add(j * l)));
                    }
                } else {
                    for j in 0..nrv {
                        V::copy_elem(s.add(j), d.add(kk * nr + j));
                    }
                }
            }
        }
    }
}

/// [`pack_b`] row by row: each of B's kc rows read once from start to end (one sequential
/// stream the hardware prefetcher follows, where [`pack_b`] reads a column strip of NR
/// elements from every row, rows `ld` apart), its NR-wide pieces stored into every
/// micro-panel. The same layout, loads and stores as [`pack_b`], in another order.
///
/// # Safety
/// As [`pack_b`].
#[inline(always)]
pub unsafe fn pack_b_by_rows<V: Lanes, const NB: usize>(kc: usize, nc: usize, src: *const V::E, ld: usize, dst: *mut V::E) {
    let l = V::LANES;
    let nr = NB * l;
    let full = nc / nr * nr;
    // SAFETY: reads stay in the kc×nc block, writes in roundup(nc, NR)·kc elements.
    unsafe {
        for kk in 0..kc {
            let s = src.add(kk * ld);
            for jr in (0..full).step_by(nr) {
                let d = dst.add(jr * kc + kk * nr);
                for j in 0..NB {
                    V::store(d.add(j * l), V::load(s.add(jr + j * l)));
                }
            }
            if full < nc {
                let d = dst.add(full * kc + kk * nr);
                for j in 0..nc - full {
                    V::copy_elem(s.add(full + j), d.add(j));
                }
            }
        }
    }
}

/// A (mc×kc at `src`, row stride `ld`) into MR-tall micro-panels, each kc×MR, column by column.
///
/// # Safety
/// `src` valid for mc rows of kc elements at stride `ld`; `dst` for roundup(mc, MR)·kc.
#[inline(always)]
pub unsafe fn pack_a<V: Lanes, const MR: usize>(mc: usize, kc: usize, src: *const V::E, ld: usize, dst: *mut V::E) {
    // SAFETY: reads stay in the mc×kc block, writes in roundup(mc, MR)·kc elements.
    unsafe {
        for ir in (0..mc).step_by(MR) {
            let mrv = MR.min(mc - ir);
            let d = dst.add(ir * kc);
            for r in 0..mrv {
                let s = src.add((ir + r) * ld);
                for kk in 0..kc {
                    V::copy_elem(s.add(kk), d.add(kk * MR + r));
                }
            }
        }
    }
}

/// [`pack_a`] for 8-row micro-panels of f64 with AVX-512: each 8 × 8 block of A (8 rows, 8
/// consecutive k) loaded as 8 vectors, transposed in registers (unpack, then two 128-bit lane
/// shuffles) and stored as 8 columns of the panel; the k remainder and a short last panel
/// element by element. The same bytes as [`pack_a`], in 64-byte loads and stores instead of
/// 8-byte ones (the scalar copy took about 7 % of an n = 1024 product on the Emerald Rapids
/// guest).
///
/// # Safety
/// As [`pack_a`] with MR = 8; AVX-512F present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn pack_a_8_zmm(mc: usize, kc: usize, src: *const f64, ld: usize, dst: *mut f64) {
    use std::arch::x86_64::{_mm512_loadu_pd, _mm512_shuffle_f64x2, _mm512_storeu_pd, _mm512_unpackhi_pd, _mm512_unpacklo_pd};
    // SAFETY: reads stay in the mc×kc block, writes in roundup(mc, 8)·kc elements (the caller's).
    unsafe {
        for ir in (0..mc).step_by(8) {
            let d = dst.add(ir * kc);
            if mc - ir < 8 {
                pack_a::<crate::simd::F64x8, 8>(mc - ir, kc, src.add(ir * ld), ld, d);
                continue;
            }
            let row = |r: usize| src.add((ir + r) * ld);
            let full = kc / 8 * 8;
            for kk in (0..full).step_by(8) {
                let r: [_; 8] = std::array::from_fn(|i| _mm512_loadu_pd(row(i).add(kk)));
                let t = [
                    _mm512_unpacklo_pd(r[0], r[1]),
                    _mm512_unpackhi_pd(r[0], r[1]),
                    _mm512_unpacklo_pd(r[2], r[3]),
                    _mm512_unpackhi_pd(r[2], r[3]),
                    _mm512_unpacklo_pd(r[4], r[5]),
                    _mm512_unpackhi_pd(r[4], r[5]),
                    _mm512_unpacklo_pd(r[6], r[7]),
                    _mm512_unpackhi_pd(r[6], r[7]),
                ];
                // Lanes 0 and 2 of each pair (0x88), lanes 1 and 3 (0xDD).
                let u = [
                    _mm512_shuffle_f64x2::<0x88>(t[0], t[2]),
                    _mm512_shuffle_f64x2::<0xDD>(t[0], t[2]),
                    _mm512_shuffle_f64x2::<0x88>(t[1], t[3]),
                    _mm512_shuffle_f64x2::<0xDD>(t[1], t[3]),
                    _mm512_shuffle_f64x2::<0x88>(t[4], t[6]),
                    _mm512_shuffle_f64x2::<0xDD>(t[4], t[6]),
                    _mm512_shuffle_f64x2::<0x88>(t[5], t[7]),
                    _mm512_shuffle_f64x2::<0xDD>(t[5], t[7]),
                ];
                // Column j of the block (k = kk + j), rows 0-7.
                let cols = [
                    _mm512_shuffle_f64x2::<0x88>(u[0], u[4]),
                    _mm512_shuffle_f64x2::<0x88>(u[2], u[6]),
                    _mm512_shuffle_f64x2::<0x88>(u[1], u[5]),
                    _mm512_shuffle_f64x2::<0x88>(u[3], u[7]),
                    _mm512_shuffle_f64x2::<0xDD>(u[0], u[4]),
                    _mm512_shuffle_f64x2::<0xDD>(u[2], u[6]),
                    _mm512_shuffle_f64x2::<0xDD>(u[1], u[5]),
                    _mm512_shuffle_f64x2::<0xDD>(u[3], u[7]),
                ];
                for (j, c) in cols.iter().enumerate() {
                    _mm512_storeu_pd(d.add((kk + j) * 8), *c);
                }
            }
            for kk in full..kc {
                for r in 0..8 {
                    *d.add(kk * 8 + r) = *row(r).add(kk);
                }
            }
        }
    }
}

/// Ask for the `rows × cols` tile at `p` (row stride `ld` elements) in L1. A hint: no
/// architectural effect, no flops and no load bytes for the counting model or the tracer.
#[inline(always)]
fn prefetch_tile<E>(p: *const E, rows: usize, cols: usize, ld: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = cols * std::mem::size_of::<E>();
        for r in 0..rows {
            let row = p.wrapping_add(r * ld) as *const i8;
            let mut off = 0;
            while off < bytes {
                // SAFETY: PREFETCHT0 never faults and changes no architectural state.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(off)) };
                off += 64;
            }
            // The row's last line, when a misaligned row straddles one more.
            // SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(bytes - 1)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, rows, cols, ld);
}

/// [`prefetch_tile`] into L2.
#[inline(always)]
fn prefetch_tile_l2<E>(p: *const E, rows: usize, cols: usize, ld: usize) {
    let bytes = cols * std::mem::size_of::<E>();
    for r in 0..rows {
        let row = p.wrapping_add(r * ld) as *const i8;
        let mut off = 0;
        while off < bytes {
            prefetch_l2(row.wrapping_add(off));
            off += 64;
        }
        prefetch_l2(row.wrapping_add(bytes - 1));
    }
}

/// Ask for the line at `p` in L2 (a hint).
#[inline(always)]
fn prefetch_l2(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT1 never faults and changes no architectural state.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Ask for the line at `p` in L1 (a hint: past a panel's end it fetches a harmless line).
#[inline(always)]
fn prefetch_line<E>(p: *const E) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and changes no architectural state.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Copy the valid `mr × nr` corner between C and the tile buffer.
#[inline(always)]
unsafe fn copy_tile<V: Lanes>(mr: usize, nr: usize, src: *const V::E, lds: usize, dst: *mut V::E, ldd: usize) {
    // SAFETY: both tiles hold at least mr rows of nr elements at their strides.
    unsafe {
        for r in 0..mr {
            for j in 0..nr {
                V::copy_elem(src.add(r * lds + j), dst.add(r * ldd + j));
            }
        }
    }
}

/// True on an Intel CPU (CPUID vendor "GenuineIntel"): the AVX-512 dgemm's kernel choice.
pub fn intel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *INTEL.get_or_init(|| {
            // CPUID leaf 0 exists on every x86-64 CPU: the vendor in ebx, edx, ecx.
            let r = std::arch::x86_64::__cpuid(0);
            (r.ebx, r.edx, r.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// An element type with its variant dispatch and micro-tile shapes.
pub trait GemmElem: Elem {
    const NAME: &'static str;
    /// `(MR, NR)` of the micro-tile of `v`.
    fn tile(v: Variant) -> (usize, usize);
    fn run(v: Variant, a: &Args<Self>);
}

impl GemmElem for f64 {
    const NAME: &'static str = "dgemm";
    fn tile(v: Variant) -> (usize, usize) {
        match v {
            Variant::Scalar => (4, 2),
            Variant::Sse => (4, 4),
            Variant::Avx2 => (6, 8),
            Variant::Avx512 | Variant::Amx => (8, 16),
        }
    }
    fn run(v: Variant, a: &Args<f64>) {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd::{F64x2, F64x4, F64x8};
            #[target_feature(enable = "avx2,fma")]
            fn avx2(a: &Args<f64>) {
                gemm::<F64x4, 6, 2>(a)
            }
            #[target_feature(enable = "avx512f,avx2,fma")]
            fn avx512(a: &Args<f64>) {
                // Written out with embedded broadcasts: 7-15 % above the generic kernel on
                // the Emerald Rapids guest (interleaved, examples/gemm_shapes.rs). On Intel
                // the next C tile is asked for late and B packed row by row; AMD's Zen 4/5
                // keep the kernel measured against OpenBLAS there (0.98x).
                if intel() {
                    nest::<F64x8, 8, 2, Zmm8x16EbLate<16>>(a)
                } else {
                    nest::<F64x8, 8, 2, Zmm8x16Eb>(a)
                }
            }
            match v {
                Variant::Scalar => gemm::<Sc<false>, 4, 2>(a),
                Variant::Sse => gemm::<F64x2, 4, 2>(a),
                Variant::Avx2 => {
                    assert!(crate::check::runnable(v), "dispatching an AVX2 kernel on a CPU without AVX2+FMA");
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    unsafe { avx2(a) }
                }
                Variant::Avx512 | Variant::Amx => {
                    assert!(crate::check::runnable(v), "dispatching an AVX-512 kernel on a CPU without AVX-512F");
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
                    unsafe { avx512(a) }
                }
            }
        }
    }
}

impl GemmElem for f32 {
    const NAME: &'static str = "sgemm";
    fn tile(v: Variant) -> (usize, usize) {
        match v {
            Variant::Scalar => (4, 2),
            Variant::Sse => (4, 8),
            Variant::Avx2 => (6, 16),
            Variant::Avx512 | Variant::Amx => (8, 32),
        }
    }
    fn run(v: Variant, a: &Args<f32>) {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd::{F32x4, F32x8, F32x16};
            #[target_feature(enable = "avx2,fma")]
            fn avx2(a: &Args<f32>) {
                gemm::<F32x8, 6, 2>(a)
            }
            #[target_feature(enable = "avx512f,avx2,fma")]
            fn avx512(a: &Args<f32>) {
                gemm::<F32x16, 8, 2>(a)
            }
            match v {
                Variant::Scalar => gemm::<Sc32, 4, 2>(a),
                Variant::Sse => gemm::<F32x4, 4, 2>(a),
                Variant::Avx2 => {
                    assert!(crate::check::runnable(v), "dispatching an AVX2 kernel on a CPU without AVX2+FMA");
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    unsafe { avx2(a) }
                }
                Variant::Avx512 | Variant::Amx => {
                    assert!(crate::check::runnable(v), "dispatching an AVX-512 kernel on a CPU without AVX-512F");
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
                    unsafe { avx512(a) }
                }
            }
        }
    }
}

/// Loads of each A element per rank-1 update in the micro-kernel of `v` at `prec` with tile
/// width `nr`: 1 (one broadcast per row), except the written-out AVX-512 dgemm kernel, whose
/// FMAs each load their A element (an embedded broadcast): nr/8 per row.
pub fn a_loads_per_row(v: Variant, prec: Precision, nr: usize) -> usize {
    if prec == Precision::F64 && matches!(v, Variant::Avx512 | Variant::Amx) {
        nr / 8
    } else {
        1
    }
}

/// Analytic counts of C = A·B (m×k times k×n) with tile `mr × nr` and blocking `blk`.
#[allow(clippy::too_many_arguments)]
pub fn counts_for(m: usize, n: usize, k: usize, mr: usize, nr: usize, blk: Blocking, v: Variant, prec: Precision) -> Counts {
    counts_with_a_loads(m, n, k, mr, nr, blk, v, prec, a_loads_per_row(v, prec, nr))
}

/// [`counts_for`] with `a_per_row` loads of each A element per rank-1 update.
#[allow(clippy::too_many_arguments)]
fn counts_with_a_loads(
    m: usize,
    n: usize,
    k: usize,
    mr: usize,
    nr: usize,
    blk: Blocking,
    v: Variant,
    prec: Precision,
    a_per_row: usize,
) -> Counts {
    let e = prec.bytes();
    let mut c = Counts::default();
    let (mut flops, mut loads, mut stores) = (0u64, 0u64, 0u64);
    let blocks = |len: usize, step: usize| (0..len).step_by(step).map(move |s| step.min(len - s));
    for ncb in blocks(n, blk.nc) {
        for (p, kcb) in blocks(k, blk.kc).enumerate() {
            let first = p == 0;
            let (ncb64, kcb64) = (ncb as u64, kcb as u64);
            // pack B
            loads += kcb64 * ncb64 * e;
            stores += kcb64 * ncb64 * e;
            for mcb in blocks(m, blk.mc) {
                let mcb64 = mcb as u64;
                // pack A
                loads += mcb64 * kcb64 * e;
                stores += mcb64 * kcb64 * e;
                let (tm, tn) = (mcb.div_ceil(mr) as u64, ncb.div_ceil(nr) as u64);
                let tiles = tm * tn;
                let (mr64, nr64) = (mr as u64, nr as u64);
                flops += tiles * 2 * mr64 * nr64 * kcb64;
                loads += tiles * kcb64 * (mr64 * a_per_row as u64 + nr64) * e;
                if !first {
                    loads += tiles * mr64 * nr64 * e;
                }
                stores += tiles * mr64 * nr64 * e;
                // Edge tiles: their valid elements are copied out (and in, after the first block).
                let full = (mcb / mr * mr * (ncb / nr * nr)) as u64;
                let edge_valid = mcb64 * ncb64 - full;
                let copies = if first { 1 } else { 2 };
                loads += copies * edge_valid * e;
                stores += copies * edge_valid * e;
            }
        }
    }
    // Every flop is the micro-kernel's `fma`: FMA instructions where the variant fuses.
    if fused(v) {
        c.add_fma_flops(class(v, prec), flops);
    } else {
        c.add_flops(class(v, prec), flops);
    }
    c.core_load_bytes = loads;
    c.core_store_bytes = stores;
    c.dram_bytes = (m * k + k * n + 2 * m * n) as u64 * e;
    c
}

/// Analytic counts of the square kernel at order `n` with its production blocking.
pub fn counts<E: GemmElem>(n: usize, v: Variant) -> Counts {
    let (mr, nr) = E::tile(v);
    counts_for(n, n, n, mr, nr, production_blocking::<E>(n, v), v, E::PRECISION)
}

/// The blocking the suite's square kernel uses at order `n`: [`Blocking::for_tile`], except
/// that Intel's AVX-512 dgemm shares the rows evenly between its row blocks
/// ([`balanced_mc`]: n = 1024 in 8 blocks of 128 rows, not 7 of 144 and one of 16 that reuses
/// each B micro-panel twice; on the Emerald Rapids guest 88.5 % of the FMA peak loop against
/// 86.3 %, 9 rounds interleaved).
pub fn production_blocking<E: GemmElem>(n: usize, v: Variant) -> Blocking {
    let (mr, nr) = E::tile(v);
    let mut b = Blocking::for_tile(mr, nr, size_of::<E>());
    if E::PRECISION == Precision::F64 && matches!(v, Variant::Avx512 | Variant::Amx) && intel() {
        b.mc = balanced_mc(n, b.mc, mr);
    }
    b
}

/// Rows per block for `m` rows in as many blocks as `mc` gives, shared evenly: a multiple of
/// `mr` (itself a multiple of `mr`) no larger than `mc`.
pub fn balanced_mc(m: usize, mc: usize, mr: usize) -> usize {
    let blocks = m.div_ceil(mc.max(1)).max(1);
    (m.div_ceil(blocks).div_ceil(mr.max(1)) * mr.max(1)).clamp(mr.max(1), mc.max(mr.max(1)))
}

pub struct Gemm<E>(PhantomData<E>);

impl<E> Gemm<E> {
    pub fn new() -> Self {
        Gemm(PhantomData)
    }
}

impl<E> Default for Gemm<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: GemmElem> Kernel for Gemm<E> {
    fn name(&self) -> &'static str {
        E::NAME
    }
    fn description(&self) -> &'static str {
        if E::PRECISION == Precision::F64 {
            "C = A·B, n×n, blocked + packed, register-tiled FMA micro-kernel (double)"
        } else {
            "C = A·B, n×n, blocked + packed, register-tiled FMA micro-kernel (single)"
        }
    }
    fn precision(&self) -> Precision {
        E::PRECISION
    }
    fn variants(&self) -> &'static [Variant] {
        ALL_VARIANTS
    }
    fn formula(&self, v: Variant) -> String {
        let (mr, nr) = E::tile(v);
        let e = size_of::<E>();
        let blk = Blocking::for_tile(mr, nr, e);
        let a = mr * a_loads_per_row(v, E::PRECISION, nr);
        format!(
            "W = 2·⌈n/{mr}⌉{mr}·⌈n/{nr}⌉{nr}·n flops (tile {mr}×{nr}, padding executed; {fma}); core Q ≈ {e}·n²·(n·({a}+{nr})/({mr}·{nr}) + 2·⌈n/{kc}⌉ + 2 + ⌈n/{nc}⌉) B \
             (panels{eb}, C tile per kc={kc} block, packing); DRAM = {}·n² B (A, B read; C written + allocated)",
            4 * e,
            eb = if a > mr { ", A by each FMA's embedded broadcast" } else { "" },
            kc = blk.kc,
            nc = blk.nc,
            fma = if fused(v) { "all FMA" } else { "multiply + add, no FMA" }
        )
    }
    fn size_unit(&self) -> &'static str {
        "matrix order"
    }
    fn working_set_bytes(&self, n: usize) -> u64 {
        (3 * size_of::<E>() as u64).saturating_mul(n as u64).saturating_mul(n as u64)
    }
    fn size_for_bytes(&self, bytes: u64) -> usize {
        (((bytes / (3 * size_of::<E>() as u64)) as f64).sqrt() as usize).max(1)
    }
    fn counts(&self, n: usize, v: Variant) -> Counts {
        counts::<E>(n, v)
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(Mats::<E>::new(n, v, seed, 0, production_blocking::<E>(n, v))?))
    }
}

/// A, B, C and the packing scratch of one square product.
pub struct Mats<E: GemmElem> {
    n: usize,
    v: Variant,
    blk: Blocking,
    a: Buf<E>,
    b: Buf<E>,
    c: Buf<E>,
    apack: Buf<E>,
    bpack: Buf<E>,
    ctile: Buf<E>,
}

// SAFETY: the buffers are owned; the raw pointers only live during `run`.
unsafe impl<E: GemmElem> Send for Mats<E> {}

impl<E: GemmElem> Mats<E> {
    pub fn new(n: usize, v: Variant, seed: u64, misalign: usize, blk: Blocking) -> Result<Mats<E>, String> {
        require_size(n, 1, "matrix order")?;
        require(v)?;
        let nn = n.checked_mul(n).ok_or("matrix size overflows")?;
        require_memory(Gemm::<E>::new().working_set_bytes(n))?;
        let (mr, nr) = E::tile(v);
        let mut rng = Rng::new(seed);
        let mut a = Buf::new(nn, misalign)?;
        a.fill_random(&mut rng, -1.0, 1.0);
        let mut b = Buf::new(nn, misalign)?;
        b.fill_random(&mut rng, -1.0, 1.0);
        let c = Buf::new(nn, misalign)?;
        Ok(Mats {
            n,
            v,
            blk,
            a,
            b,
            c,
            apack: Buf::new(blk.mc.div_ceil(mr) * mr * blk.kc, 0)?,
            bpack: Buf::new(blk.nc.div_ceil(nr) * nr * blk.kc, 0)?,
            ctile: Buf::new(mr * nr, 0)?,
        })
    }

    fn args(&mut self) -> Args<E> {
        Args {
            m: self.n,
            n: self.n,
            k: self.n,
            a: self.a.ptr(),
            lda: self.n,
            b: self.b.ptr(),
            ldb: self.n,
            c: self.c.mut_ptr(),
            ldc: self.n,
            apack: self.apack.mut_ptr(),
            bpack: self.bpack.mut_ptr(),
            ctile: self.ctile.mut_ptr(),
            blk: self.blk,
        }
    }

    fn reference_at(&self, i: usize, j: usize) -> f64 {
        let (a, b, n) = (self.a.as_slice(), self.b.as_slice(), self.n);
        (0..n).map(|k| a[i * n + k].to_f64() * b[k * n + j].to_f64()).sum()
    }
}

impl<E: GemmElem> Instance for Mats<E> {
    fn run(&mut self) {
        let a = self.args();
        E::run(self.v, &a);
    }
    fn verify(&mut self) -> Result<(), String> {
        self.c.poison();
        self.run();
        let n = self.n;
        // Up to 96×96 every entry; beyond, every entry must be finite and 512 seeded
        // entries must match the reference.
        let picks: Vec<(usize, usize)> = if n <= 96 {
            (0..n * n).map(|t| (t / n, t % n)).collect()
        } else {
            if let Some(t) = self.c.as_slice().iter().position(|x| !x.to_f64().is_finite()) {
                return Err(format!("{} C[{}][{}] was not written", E::NAME, t / n, t % n));
            }
            let mut rng = Rng::new(n as u64);
            (0..512).map(|_| (rng.below(n), rng.below(n))).collect()
        };
        // Any order of n multiply-adds (FMA or not, blocked or not) is off the exact dot
        // product by ≤ γ_n·Σ|a·b|, γ_n = n·u/(1 − n·u) (Higham, Accuracy and Stability, 3.1):
        // the kernel's in E's precision plus the f64 reference's, for every input drawn.
        let u = if E::PRECISION == Precision::F64 {
            f64::EPSILON / 2.0
        } else {
            f64::from(f32::EPSILON) / 2.0
        };
        let gamma = |u: f64| n as f64 * u / (1.0 - n as f64 * u);
        let (a, b) = (self.a.as_slice(), self.b.as_slice());
        for &(i, j) in &picks {
            let got = self.c.as_slice()[i * n + j].to_f64();
            let want = self.reference_at(i, j);
            let mag: f64 = (0..n).map(|k| (a[i * n + k].to_f64() * b[k * n + j].to_f64()).abs()).sum();
            let tol = (gamma(u) + gamma(f64::EPSILON / 2.0)) * mag * (1.0 + 1e-9) + f64::MIN_POSITIVE;
            let within = (got - want).abs() <= tol; // false for NaN
            if !within {
                return Err(format!("{}[{i}][{j}] = {got:e}, reference {want:e} (tolerance {tol:e})", E::NAME));
            }
        }
        Ok(())
    }
    fn counts(&self) -> Counts {
        let (mr, nr) = E::tile(self.v);
        counts_for(self.n, self.n, self.n, mr, nr, self.blk, self.v, E::PRECISION)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::fresh_seed;
    use crate::simd::{Tally, tally_reset, tally_take};

    /// Run the loop nest with the counting type; small blocking so every edge case occurs.
    fn model<E: GemmElem, V: Lanes<E = E>, const MR: usize, const NB: usize>(n: usize, blk: Blocking) -> Counts {
        let mut m = Mats::<E>::new(n, Variant::Scalar, 5, 1, blk).unwrap();
        // Scratch sized for the model's tile, not the scalar variant's.
        let nr = NB * V::LANES;
        m.apack = Buf::new(blk.mc.div_ceil(MR) * MR * blk.kc, 0).unwrap();
        m.bpack = Buf::new(blk.nc.div_ceil(nr) * nr * blk.kc, 0).unwrap();
        m.ctile = Buf::new(MR * nr, 0).unwrap();
        m.c.poison();
        let a = m.args();
        tally_reset();
        gemm::<V, MR, NB>(&a);
        let mut c = tally_take();
        // The model also computes: its C must be the product.
        for i in 0..n {
            for j in 0..n {
                let want = m.reference_at(i, j);
                let got = m.c.as_slice()[i * n + j].to_f64();
                assert!((got - want).abs() <= 1e-5 * n as f64, "model C[{i}][{j}] = {got}, want {want}");
            }
        }
        c.dram_bytes = 0;
        c
    }

    fn formula(n: usize, mr: usize, nr: usize, blk: Blocking, v: Variant, p: Precision) -> Counts {
        let mut c = counts_for(n, n, n, mr, nr, blk, v, p);
        c.dram_bytes = 0;
        c
    }

    #[test]
    fn counts_match_the_instrumented_loops() {
        let blk = |mr: usize, nr: usize| Blocking {
            mc: 2 * mr,
            kc: 5,
            nc: 2 * nr,
        };
        for n in [1, 3, 8, 13, 17, 33] {
            let b = blk(4, 2);
            assert_eq!(
                model::<f64, Tally<f64, 1, false, false>, 4, 2>(n, b),
                formula(n, 4, 2, b, Variant::Scalar, Precision::F64),
                "n={n}"
            );
            let b = blk(4, 4);
            assert_eq!(
                model::<f64, Tally<f64, 2, false, false>, 4, 2>(n, b),
                formula(n, 4, 4, b, Variant::Sse, Precision::F64),
                "n={n}"
            );
            let b = blk(6, 8);
            assert_eq!(
                model::<f64, Tally<f64, 4, false, true>, 6, 2>(n, b),
                formula(n, 6, 8, b, Variant::Avx2, Precision::F64),
                "n={n}"
            );
            // The AVX-512 dgemm kernel is `asm!`: the counting type runs the generic kernel
            // of the same tile, one broadcast per row; the production counts add the second
            // load of each A element per update, flops·(NB − 1)·8 / (2·NR) bytes.
            let b = blk(8, 16);
            let mut generic = counts_with_a_loads(n, n, n, 8, 16, b, Variant::Avx512, Precision::F64, 1);
            generic.dram_bytes = 0;
            assert_eq!(model::<f64, Tally<f64, 8, true, true>, 8, 2>(n, b), generic, "n={n}");
            let prod = formula(n, 8, 16, b, Variant::Avx512, Precision::F64);
            let w = prod.flops.values().sum::<u64>();
            assert_eq!(prod.core_load_bytes - generic.core_load_bytes, w * 8 / (2 * 16), "n={n}");
            assert_eq!(prod.core_store_bytes, generic.core_store_bytes, "n={n}");
            let b = blk(8, 32);
            assert_eq!(
                model::<f32, Tally<f32, 16, true, true>, 8, 2>(n, b),
                formula(n, 8, 32, b, Variant::Avx512, Precision::F32),
                "n={n}"
            );
            let b = blk(4, 2);
            assert_eq!(
                model::<f32, Tally<f32, 1, false, false>, 4, 2>(n, b),
                formula(n, 4, 2, b, Variant::Scalar, Precision::F32),
                "n={n}"
            );
            let b = blk(4, 8);
            assert_eq!(
                model::<f32, Tally<f32, 4, false, false>, 4, 2>(n, b),
                formula(n, 4, 8, b, Variant::Sse, Precision::F32),
                "n={n}"
            );
            let b = blk(6, 16);
            assert_eq!(
                model::<f32, Tally<f32, 8, false, true>, 6, 2>(n, b),
                formula(n, 6, 16, b, Variant::Avx2, Precision::F32),
                "n={n}"
            );
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx512_packing_of_a_lays_out_what_the_scalar_one_does() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipping: no AVX-512F");
            return;
        }
        let mut rng = Rng::new(crate::rng::fresh_seed());
        for _ in 0..40 {
            // Short last panels and k remainders included.
            let (mc, kc) = (1 + rng.below(40), 1 + rng.below(70));
            let ld = kc + rng.below(9);
            let src: Vec<f64> = (0..mc * ld).map(|_| rng.unit()).collect();
            let len = mc.div_ceil(8) * 8 * kc;
            let (mut want, mut got) = (vec![f64::NAN; len], vec![f64::NAN; len]);
            // SAFETY: src holds mc rows of ld ≥ kc elements; both outputs roundup(mc, 8)·kc.
            unsafe {
                pack_a::<crate::simd::F64x8, 8>(mc, kc, src.as_ptr(), ld, want.as_mut_ptr());
                pack_a_8_zmm(mc, kc, src.as_ptr(), ld, got.as_mut_ptr());
            }
            let same = want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "mc {mc} kc {kc} ld {ld}");
        }
    }

    #[test]
    fn balanced_row_blocks_keep_their_count_and_share_the_rows_evenly() {
        let mut rng = Rng::new(fresh_seed());
        for _ in 0..1000 {
            let mr = 1 + rng.below(16);
            let mc = mr * (1 + rng.below(40));
            let m = 1 + rng.below(5000);
            let b = balanced_mc(m, mc, mr);
            assert!(b.is_multiple_of(mr) && b >= mr && b <= mc, "m {m} mc {mc} mr {mr}: {b}");
            assert_eq!(m.div_ceil(b), m.div_ceil(mc), "m {m} mc {mc} mr {mr}: {b}");
            // Every block but the last is full; the last is short by less than one block's
            // share rounded to mr, plus the rounding of the others.
            let blocks = m.div_ceil(mc);
            let last = m - (blocks - 1) * b;
            assert!(last + mr * blocks > b || blocks == 1, "m {m} mc {mc} mr {mr}: {b}, last {last}");
        }
        assert_eq!(balanced_mc(1024, 144, 8), 128);
        assert_eq!(balanced_mc(160, 144, 8), 80);
    }

    #[test]
    fn packing_b_by_rows_lays_out_what_packing_by_panels_does() {
        let mut rng = Rng::new(crate::rng::fresh_seed());
        for _ in 0..40 {
            // Short last micro-panels included (nc not a multiple of 16).
            let (kc, nc) = (1 + rng.below(40), 1 + rng.below(70));
            let ld = nc + rng.below(9);
            let src: Vec<f64> = (0..kc * ld).map(|_| rng.unit()).collect();
            let len = nc.div_ceil(16) * 16 * kc;
            let (mut want, mut got) = (vec![0.0f64; len], vec![0.0f64; len]);
            // SAFETY: src holds kc rows of ld ≥ nc elements; both outputs roundup(nc, 16)·kc.
            unsafe {
                pack_b::<Sc<false>, 16>(kc, nc, src.as_ptr(), ld, want.as_mut_ptr());
                pack_b_by_rows::<Sc<false>, 16>(kc, nc, src.as_ptr(), ld, got.as_mut_ptr());
            }
            let same = want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "kc {kc} nc {nc} ld {ld}");
        }
    }

    /// Intel's kernel (the next C tile asked for late, B packed by rows) computes bit for bit
    /// what the kernel it extends does: the same FMAs in the same order, for every shape drawn
    /// (k remainders, edge tiles, k shorter than the prefetch distance, several k blocks).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_late_prefetch_kernel_matches_the_embedded_broadcast_one_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipping: no AVX-512F");
            return;
        }
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn run<M: Micro<f64>>(a: &Args<f64>) {
            nest::<crate::simd::F64x8, 8, 2, M>(a)
        }
        let seed = fresh_seed();
        let mut rng = Rng::new(seed);
        for _ in 0..12 {
            let n = 1 + rng.below(90);
            let blk = Blocking {
                mc: 8 * (1 + rng.below(4)),
                kc: 1 + rng.below(160),
                nc: 16 * (1 + rng.below(4)),
            };
            let mut outs = Vec::new();
            for late in [false, true] {
                let mut m = Mats::<f64>::new(n, Variant::Avx512, seed ^ n as u64, rng.below(3), blk).unwrap();
                m.c.poison();
                let a = m.args();
                // SAFETY: the CPU has AVX-512F (checked above); Mats sizes the scratch for blk.
                unsafe { if late { run::<Zmm8x16EbLate<16>>(&a) } else { run::<Zmm8x16Eb>(&a) } }
                outs.push(m.c.as_slice().to_vec());
            }
            let same = outs[0].iter().zip(&outs[1]).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "seed {seed} n {n} {blk:?}");
        }
    }

    #[test]
    fn every_runnable_variant_matches_the_reference() {
        let seed = fresh_seed();
        for v in ALL_VARIANTS.iter().copied().filter(|v| crate::check::runnable(*v)) {
            let (mr, nr) = f64::tile(v);
            for (n, mis, blk) in [
                (1, 0, Blocking::for_tile(mr, nr, 8)),
                (
                    37,
                    1,
                    Blocking {
                        mc: 2 * mr,
                        kc: 7,
                        nc: 2 * nr,
                    },
                ),
                (61, 3, Blocking::for_tile(mr, nr, 8)),
            ] {
                let mut m = Mats::<f64>::new(n, v, seed ^ n as u64, mis, blk).unwrap();
                m.verify().unwrap_or_else(|e| panic!("seed {seed} dgemm {v} n={n}: {e}"));
                // A second run accumulates nothing stale: C = A·B again.
                m.run();
                m.verify().unwrap_or_else(|e| panic!("seed {seed} dgemm {v} n={n} rerun: {e}"));
            }
            let (mr, nr) = f32::tile(v);
            for (n, mis) in [(5, 2), (45, 1)] {
                let blk = Blocking {
                    mc: 2 * mr,
                    kc: 9,
                    nc: 2 * nr,
                };
                let mut m = Mats::<f32>::new(n, v, seed ^ n as u64, mis, blk).unwrap();
                m.verify().unwrap_or_else(|e| panic!("seed {seed} sgemm {v} n={n}: {e}"));
            }
        }
    }

    #[test]
    fn large_orders_verify_by_sampling() {
        let seed = fresh_seed();
        let v = [Variant::Avx512, Variant::Avx2, Variant::Sse]
            .into_iter()
            .find(|v| crate::check::runnable(*v))
            .unwrap();
        let mut m = Gemm::<f64>::new().instance(131, v, seed).unwrap();
        m.verify().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
