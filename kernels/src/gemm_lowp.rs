//! `bf16_gemm` and `int8_gemm`: C = A·B for n×n row-major matrices in low precision, on the
//! AMX tile unit where this CPU has it (Sapphire Rapids and later).
//!
//! - `bf16_gemm`: A, B bf16, C fp32 (`tdpbf16ps`). W = 2n³ flops, class `tile_bf16`.
//! - `int8_gemm`: A u8, B s8, C int32 (`tdpbusd`, VNNI's operand signs). W = 2n³ integer
//!   operations, class `tile_int8` (operations, not flops: `flops.int_ops`).
//!
//! Loop nest (n a multiple of 64; `KS` = k values per tile step: 32 bf16 or 64 int8):
//! ```text
//! pack B into tile rows (pairs / quads of k per row, VNNI layout), 32-column panels
//! for pc in 0..n step KC                 (KC = 512 bf16, 1024 int8: 32 rows of A × KC
//!   for ic in 0..n step 32                = 32 KiB stay in L1; the B panels stream from L2)
//!     for jc in 0..n step 32             micro-kernel: C[ic..+32, jc..+32] in tmm0–3
//!       C tiles from zero (pc = 0) or loaded; per k step: A tiles tmm4/5 straight from A
//!       (16 rows × 64 B, stride n·size), B tiles tmm6/7 from the packed panel, 4 dot
//!       products; C tiles stored
//! ```
//! The AMX tiles are `asm!` (Rust's AMX intrinsics are not stable), the permission request
//! and configuration are `crate::lowp`'s. On a CPU without the AMX unit the instance is
//! refused with the reason (no AVX-512 BF16 / VNNI path yet).
//!
//! Counts (what the trace backend must reproduce): W = (n/16)² · (n/KS) tile dot products of
//! 16 × 16 × KS × 2 = 2n³. Core bytes: packing loads and stores n² elements; each micro-kernel
//! step loads 4 tiles of 1 KiB (two of A, two of B); C: 4 tiles of 1 KiB stored per
//! micro-kernel call, loaded on every k block but the first; `ldtilecfg` loads 64 bytes.

use crate::api::{Instance, Kernel};
use crate::check::require_memory;
use crate::lowp::Unit;
use crate::rng::Rng;
use crate::types::{Counts, FlopClass, Precision, Variant};

/// Which low-precision GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lowp {
    Bf16,
    Int8,
}

impl Lowp {
    /// Bytes of one A/B element.
    pub fn esize(self) -> usize {
        match self {
            Lowp::Bf16 => 2,
            Lowp::Int8 => 1,
        }
    }
    /// k values per tile row of B (a dword of pairs or quads).
    fn group(self) -> usize {
        4 / self.esize()
    }
    /// k values of one tile step: 16 rows of B × the group.
    pub fn k_step(self) -> usize {
        16 * self.group()
    }
    /// k block: 32 columns × KC elements of B = 32 KiB.
    pub fn kc(self) -> usize {
        match self {
            Lowp::Bf16 => 512,
            Lowp::Int8 => 1024,
        }
    }
    pub fn unit(self) -> Unit {
        match self {
            Lowp::Bf16 => Unit::AmxBf16,
            Lowp::Int8 => Unit::AmxInt8,
        }
    }
    pub fn class(self) -> FlopClass {
        match self {
            Lowp::Bf16 => FlopClass::TileBf16,
            Lowp::Int8 => FlopClass::TileInt8,
        }
    }
}

/// The smallest order, and the granule of orders (n/2 of a valid size stays valid).
pub const MIN_N: usize = 64;

/// Analytic counts of one call at order `n` (a multiple of 64).
pub fn counts(kind: Lowp, n: usize) -> Counts {
    let n64 = n as u64;
    let e = kind.esize() as u64;
    let ks = kind.k_step() as u64;
    let blocks = n.div_ceil(kind.kc()) as u64;
    let calls_per_block = (n64 / 32) * (n64 / 32);
    let mut c = Counts::default();
    c.add_flops(kind.class(), 2 * n64 * n64 * n64);
    let tile = 1024u64;
    // Packing B: every element loaded and stored once; A and B tiles per k step.
    let steps = calls_per_block * (n64 / ks);
    c.core_load_bytes = n64 * n64 * e + steps * 4 * tile + calls_per_block * (blocks - 1) * 4 * tile + 64;
    c.core_store_bytes = n64 * n64 * e + calls_per_block * blocks * 4 * tile;
    // Compulsory: A and B read, the packed B written (+ allocated) and read, C written + allocated.
    c.dram_bytes = 2 * n64 * n64 * e + 3 * n64 * n64 * e + 2 * n64 * n64 * 4;
    c
}

/// A 64-byte-aligned zeroed byte buffer.
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Result<Aligned, String> {
        let layout = std::alloc::Layout::from_size_align(len.max(64), 64).map_err(|e| e.to_string())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("could not allocate {len} bytes"));
        }
        Ok(Aligned { ptr, len })
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialized (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        if let Ok(layout) = std::alloc::Layout::from_size_align(self.len.max(64), 64) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

// SAFETY: the buffer is owned exclusively by its instance.
unsafe impl Send for Aligned {}

/// bf16 of an f32 (round to nearest even; inputs here are finite).
pub fn bf16_of(x: f32) -> u16 {
    let b = x.to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (r >> 16) as u16
}

pub fn f32_of_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// One instance: A, B, the packed B, C.
pub struct LowpMats {
    kind: Lowp,
    n: usize,
    a: Aligned,
    b: Aligned,
    bpack: Aligned,
    c: Aligned,
}

impl LowpMats {
    pub fn new(kind: Lowp, n: usize, seed: u64) -> Result<LowpMats, String> {
        let e = kind.esize();
        require_memory((5 * n * n * e + 4 * n * n) as u64)?;
        let mut m = LowpMats {
            kind,
            n,
            a: Aligned::new(n * n * e)?,
            b: Aligned::new(n * n * e)?,
            bpack: Aligned::new(n * n * e)?,
            c: Aligned::new(n * n * 4)?,
        };
        let mut rng = Rng::new(seed);
        for buf in [&mut m.a, &mut m.b] {
            let bytes = buf.bytes_mut();
            match kind {
                Lowp::Bf16 => {
                    for ch in bytes.chunks_exact_mut(2) {
                        let v = bf16_of(rng.range(-1.0, 1.0) as f32);
                        ch.copy_from_slice(&v.to_le_bytes());
                    }
                }
                Lowp::Int8 => {
                    for x in bytes.iter_mut() {
                        *x = (rng.next_u64() >> 56) as u8;
                    }
                }
            }
        }
        Ok(m)
    }

    /// A[i][k] as f64 (bf16, or u8: A is unsigned in `tdpbusd`).
    fn a_at(&self, i: usize, k: usize) -> f64 {
        let at = i * self.n + k;
        match self.kind {
            Lowp::Bf16 => {
                let b = self.a.bytes();
                f64::from(f32_of_bf16(u16::from_le_bytes([b[2 * at], b[2 * at + 1]])))
            }
            Lowp::Int8 => f64::from(self.a.bytes()[at]),
        }
    }

    /// B[k][j] as f64 (bf16, or s8).
    fn b_at(&self, k: usize, j: usize) -> f64 {
        let at = k * self.n + j;
        match self.kind {
            Lowp::Bf16 => {
                let b = self.b.bytes();
                f64::from(f32_of_bf16(u16::from_le_bytes([b[2 * at], b[2 * at + 1]])))
            }
            Lowp::Int8 => f64::from(self.b.bytes()[at] as i8),
        }
    }

    fn c_at(&self, i: usize, j: usize) -> f64 {
        let at = 4 * (i * self.n + j);
        let b = &self.c.bytes()[at..at + 4];
        let w = [b[0], b[1], b[2], b[3]];
        match self.kind {
            Lowp::Bf16 => f64::from(f32::from_le_bytes(w)),
            Lowp::Int8 => f64::from(i32::from_le_bytes(w)),
        }
    }

    /// Pack B into 32-column panels of tile steps (see the module comment): element (k, j)
    /// to panel j/32, step k/KS, half (j%32)/16, row (k%KS)/g, byte ((j%16)·g + k%g)·e. With
    /// AVX-512 VBMI (every AMX CPU so far) two (bf16) or four (int8) rows of 32 columns are
    /// interleaved in registers: each element is still loaded once and stored once.
    fn pack_b(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512bw") && std::arch::is_x86_feature_detected!("avx512vbmi") {
            // SAFETY: the features were checked just above; the buffers hold n²·e bytes.
            unsafe { pack_b_vbmi(self.kind, self.n, self.b.ptr, self.bpack.ptr) };
            return;
        }
        self.pack_b_scalar();
    }

    /// [`LowpMats::pack_b`] one element at a time.
    fn pack_b_scalar(&mut self) {
        let (n, e, g, ks) = (self.n, self.kind.esize(), self.kind.group(), self.kind.k_step());
        let src = self.b.ptr as *const u8;
        let dst = self.bpack.ptr;
        for k in 0..n {
            let (step, row, within) = (k / ks, (k % ks) / g, k % g);
            for j in 0..n {
                let off = (j / 32) * (n * 32 * e) + step * 2048 + ((j % 32) / 16) * 1024 + row * 64 + ((j % 16) * g + within) * e;
                // SAFETY: (k, j) < n², `off` < n²·e (a permutation of the elements); element
                // copies through volatile accesses so the compiler keeps one load and one store
                // of `e` bytes per element (the analytic bytes).
                unsafe {
                    if e == 2 {
                        let v = std::ptr::read_volatile(src.add(2 * (k * n + j)) as *const u16);
                        std::ptr::write_volatile(dst.add(off) as *mut u16, v);
                    } else {
                        let v = std::ptr::read_volatile(src.add(k * n + j));
                        std::ptr::write_volatile(dst.add(off), v);
                    }
                }
            }
        }
    }

    fn gemm(&mut self) {
        assert!(self.kind.unit().available(), "AMX GEMM dispatched on a CPU without the unit");
        self.pack_b();
        let (n, e) = (self.n, self.kind.esize());
        let kc = self.kind.kc();
        let ks = self.kind.k_step();
        let cfg = crate::lowp::TileConfig::uniform(16, 64);
        // The buffers' addresses in locals: the tile `asm!` blocks may write memory, so fields
        // read through `self` inside the loops would be reloaded per call (bytes that grow
        // with n and that the analytic counts leave out); locals at worst spill to the stack.
        let (a0, b0, c0) = (self.a.ptr as *const u8, self.bpack.ptr as *const u8, self.c.ptr);
        let kind = self.kind;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AMX is available and permitted (asserted above); every pointer below stays
        // inside A (n²·e), the packed B (n²·e) or C (n²·4): ic, jc < n step 32, pc < n step kc,
        // steps·ks ≤ n − pc; tiles of 16 rows × 64 bytes at strides n·e (A) and n·4 (C).
        unsafe {
            crate::lowp::load_tile_config(&cfg);
            for pc in (0..n).step_by(kc) {
                let steps = kc.min(n - pc) / ks;
                // 32 rows of A × KC (32 KiB) stay in L1 while the B panels stream from L2.
                for ic in (0..n).step_by(32) {
                    let ap = a0.add((ic * n + pc) * e);
                    for jc in (0..n).step_by(32) {
                        let bp = b0.add((jc / 32) * (n * 32 * e) + (pc / ks) * 2048);
                        let cp = c0.add((ic * n + jc) * 4);
                        micro(kind, steps, ap, n * e, bp, cp, n * 4, pc > 0);
                    }
                }
            }
            crate::lowp::release_tiles();
        }
    }
}

/// [`LowpMats::pack_b`] with AVX-512 VBMI: per tile row of a 32-column panel, two rows of B
/// (bf16: 32 u16 each, one 64-byte load) or four (int8: 32 bytes each) are interleaved by
/// `vpermt2w` / `vpermt2b` into the two 64-byte rows of the panel's two tiles.
///
/// # Safety
/// AVX-512 BW and VBMI present; `src` and `dst` hold n²·e bytes, n a multiple of 64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn pack_b_vbmi(kind: Lowp, n: usize, src: *const u8, dst: *mut u8) {
    use std::arch::x86_64::*;
    let e = kind.esize();
    let ks = kind.k_step();
    // SAFETY (whole body): every load reads 32 columns of one row of B (j0 + 32 ≤ n), every
    // store writes one 64-byte tile row inside the packed panel (offsets as in `pack_b`).
    unsafe {
        match kind {
            Lowp::Bf16 => {
                // Output half h, position 2c + r: row r's column 16h + c (x = row 0, y = row 1:
                // index bit 5 picks y).
                let mut lo = [0u16; 32];
                let mut hi = [0u16; 32];
                for c in 0..16u16 {
                    lo[2 * c as usize] = c;
                    lo[2 * c as usize + 1] = 32 + c;
                    hi[2 * c as usize] = 16 + c;
                    hi[2 * c as usize + 1] = 48 + c;
                }
                let (ilo, ihi) = (_mm512_loadu_si512(lo.as_ptr().cast()), _mm512_loadu_si512(hi.as_ptr().cast()));
                for k in (0..n).step_by(2) {
                    let (step, row) = (k / ks, (k % ks) / 2);
                    for j0 in (0..n).step_by(32) {
                        let x = _mm512_loadu_si512(src.add(2 * (k * n + j0)).cast());
                        let y = _mm512_loadu_si512(src.add(2 * ((k + 1) * n + j0)).cast());
                        let base = dst.add((j0 / 32) * (n * 32 * e) + step * 2048 + row * 64);
                        _mm512_storeu_si512(base.cast(), _mm512_permutex2var_epi16(x, ilo, y));
                        _mm512_storeu_si512(base.add(1024).cast(), _mm512_permutex2var_epi16(x, ihi, y));
                    }
                }
            }
            Lowp::Int8 => {
                // x = rows 0|1 (32 bytes each), y = rows 2|3; output half h, position 4c + r:
                // row r's column 16h + c (index bit 6 picks y).
                let mut lo = [0u8; 64];
                let mut hi = [0u8; 64];
                for c in 0..16u8 {
                    for r in 0..4u8 {
                        let at = (4 * c + r) as usize;
                        lo[at] = (r / 2) * 64 + (r % 2) * 32 + c;
                        hi[at] = (r / 2) * 64 + (r % 2) * 32 + 16 + c;
                    }
                }
                let (ilo, ihi) = (_mm512_loadu_si512(lo.as_ptr().cast()), _mm512_loadu_si512(hi.as_ptr().cast()));
                for k in (0..n).step_by(4) {
                    let (step, row) = (k / ks, (k % ks) / 4);
                    for j0 in (0..n).step_by(32) {
                        let r = |i: usize| _mm256_loadu_si256(src.add((k + i) * n + j0).cast());
                        let x = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r(0)), r(1));
                        let y = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r(2)), r(3));
                        let base = dst.add((j0 / 32) * (n * 32 * e) + step * 2048 + row * 64);
                        _mm512_storeu_si512(base.cast(), _mm512_permutex2var_epi8(x, ilo, y));
                        _mm512_storeu_si512(base.add(1024).cast(), _mm512_permutex2var_epi8(x, ihi, y));
                    }
                }
            }
        }
    }
}

/// C[32×32] (+)= A[32 rows, steps·KS] · B (packed steps × 2 tiles): tmm0–3 accumulate,
/// tmm4/5 A rows 0–15/16–31, tmm6/7 B columns 0–15/16–31.
///
/// # Safety
/// Tiles configured 16 × 64 B; the pointers valid for the accesses described; steps ≥ 1.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn micro(kind: Lowp, steps: usize, a: *const u8, lda: usize, b: *const u8, c: *mut u8, ldc: usize, load_c: bool) {
    use std::arch::asm;
    // SAFETY: guaranteed by the caller (see above).
    unsafe {
        if load_c {
            asm!(
                "tileloadd tmm0, [{c} + {ldc}*1]",
                "tileloadd tmm1, [{c} + {ldc}*1 + 64]",
                "tileloadd tmm2, [{c2} + {ldc}*1]",
                "tileloadd tmm3, [{c2} + {ldc}*1 + 64]",
                c = in(reg) c, c2 = in(reg) c.add(16 * ldc), ldc = in(reg) ldc,
                options(nostack, readonly)
            );
        } else {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, nomem)
            );
        }
        match kind {
            Lowp::Bf16 => asm!(
                "2:",
                "tileloadd tmm4, [{a} + {lda}*1]",
                "tileloadd tmm5, [{a2} + {lda}*1]",
                "tileloadd tmm6, [{b} + {s}*1]",
                "tileloadd tmm7, [{b} + {s}*1 + 1024]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                "add {a}, 64", "add {a2}, 64", "add {b}, 2048",
                "dec {n}", "jnz 2b",
                a = inout(reg) a => _, a2 = inout(reg) a.add(16 * lda) => _, b = inout(reg) b => _,
                lda = in(reg) lda, s = in(reg) 64usize, n = inout(reg) steps => _,
                options(nostack, readonly)
            ),
            Lowp::Int8 => asm!(
                "2:",
                "tileloadd tmm4, [{a} + {lda}*1]",
                "tileloadd tmm5, [{a2} + {lda}*1]",
                "tileloadd tmm6, [{b} + {s}*1]",
                "tileloadd tmm7, [{b} + {s}*1 + 1024]",
                "tdpbusd tmm0, tmm4, tmm6",
                "tdpbusd tmm1, tmm4, tmm7",
                "tdpbusd tmm2, tmm5, tmm6",
                "tdpbusd tmm3, tmm5, tmm7",
                "add {a}, 64", "add {a2}, 64", "add {b}, 2048",
                "dec {n}", "jnz 2b",
                a = inout(reg) a => _, a2 = inout(reg) a.add(16 * lda) => _, b = inout(reg) b => _,
                lda = in(reg) lda, s = in(reg) 64usize, n = inout(reg) steps => _,
                options(nostack, readonly)
            ),
        }
        asm!(
            "tilestored [{c} + {ldc}*1], tmm0",
            "tilestored [{c} + {ldc}*1 + 64], tmm1",
            "tilestored [{c2} + {ldc}*1], tmm2",
            "tilestored [{c2} + {ldc}*1 + 64], tmm3",
            c = in(reg) c, c2 = in(reg) c.add(16 * ldc), ldc = in(reg) ldc,
            options(nostack)
        );
    }
}

impl Instance for LowpMats {
    fn run(&mut self) {
        self.gemm();
    }
    /// Poison C, run, and check sampled entries (all of them up to n = 128) against an f64
    /// reference: int8 exactly; bf16 within fp32 accumulation error (products of bf16 are
    /// exact in fp32).
    fn verify(&mut self) -> Result<(), String> {
        self.c.bytes_mut().fill(0xff);
        self.gemm();
        let n = self.n;
        let mut rng = Rng::new(0x5eed ^ n as u64);
        let samples: Vec<(usize, usize)> = if n <= 128 {
            (0..n * n).map(|x| (x / n, x % n)).collect()
        } else {
            (0..512)
                .map(|_| ((rng.next_u64() % n as u64) as usize, (rng.next_u64() % n as u64) as usize))
                .collect()
        };
        for (i, j) in samples {
            let (mut want, mut mag) = (0.0f64, 0.0f64);
            for k in 0..n {
                let t = self.a_at(i, k) * self.b_at(k, j);
                want += t;
                mag += t.abs();
            }
            let got = self.c_at(i, j);
            let tol = match self.kind {
                Lowp::Int8 => 0.0,
                Lowp::Bf16 => 4.0 * f64::from(f32::EPSILON) * mag * (n as f64).sqrt() + 1e-30,
            };
            if (got - want).abs() > tol || got.is_nan() {
                return Err(format!(
                    "{} C[{i}][{j}] = {got}, reference {want} (tolerance {tol:e})",
                    if self.kind == Lowp::Bf16 { "bf16_gemm" } else { "int8_gemm" }
                ));
            }
        }
        Ok(())
    }
    fn counts(&self) -> Counts {
        counts(self.kind, self.n)
    }
}

/// The low-precision kernels of the suite (`api::all`; apart from `suite::kernels`, whose
/// kernels run on every CPU at every size).
pub fn kernels() -> Vec<Box<dyn Kernel>> {
    vec![Box::new(LowpGemm(Lowp::Bf16)), Box::new(LowpGemm(Lowp::Int8))]
}

/// The suite kernel.
pub struct LowpGemm(pub Lowp);

impl Kernel for LowpGemm {
    fn name(&self) -> &'static str {
        match self.0 {
            Lowp::Bf16 => "bf16_gemm",
            Lowp::Int8 => "int8_gemm",
        }
    }
    fn description(&self) -> &'static str {
        match self.0 {
            Lowp::Bf16 => "C = A·B, n×n, bf16 inputs, fp32 C, AMX tiles (tdpbf16ps), B packed into tile rows",
            Lowp::Int8 => "C = A·B, n×n, u8 × s8 inputs, int32 C, AMX tiles (tdpbusd): integer ops, not flops",
        }
    }
    /// The storage of C (fp32 for bf16; int32 has no Precision, and its ops are not flops).
    fn precision(&self) -> Precision {
        Precision::F32
    }
    /// One variant: the AMX tile path needs AVX-512 too (the Sapphire Rapids family); the
    /// instance checks the unit itself.
    fn variants(&self) -> &'static [Variant] {
        &[Variant::Avx512]
    }
    fn formula(&self, _v: Variant) -> String {
        let (e, what) = match self.0 {
            Lowp::Bf16 => (2, "flops (tile_bf16)"),
            Lowp::Int8 => (1, "integer ops (tile_int8, not flops)"),
        };
        format!(
            "W = 2·n³ {what}; core Q = 2·{e}·n² (packing B) + (n/32)²·(4 KiB·n/{ks} (A, B tiles) + 4 KiB·(2·⌈n/{kc}⌉ − 1) (C tiles)) + 64 B; \
             DRAM = {}·n² B; n a multiple of {MIN_N}",
            5 * e + 8,
            ks = self.0.k_step(),
            kc = self.0.kc()
        )
    }
    fn size_unit(&self) -> &'static str {
        "matrix order"
    }
    fn working_set_bytes(&self, n: usize) -> u64 {
        (n * n * (3 * self.0.esize() + 4)) as u64
    }
    fn size_for_bytes(&self, bytes: u64) -> usize {
        let per = (3 * self.0.esize() + 4) as f64;
        let n = ((bytes as f64 / per).sqrt() as usize) / (2 * MIN_N) * (2 * MIN_N);
        n.max(2 * MIN_N)
    }
    fn counts(&self, n: usize, _v: Variant) -> Counts {
        counts(self.0, n)
    }
    fn unavailable(&self, _v: Variant) -> Option<String> {
        let unit = self.0.unit();
        (!unit.available()).then(|| format!("{} (no AVX-512 BF16 / VNNI path yet)", unit.why_unavailable()))
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        if v != Variant::Avx512 {
            return Err(format!("{} has only the avx512 variant (AMX tiles)", self.name()));
        }
        if n < MIN_N || !n.is_multiple_of(MIN_N) {
            return Err(format!(
                "size {n}: {} needs a matrix order that is a multiple of {MIN_N}",
                self.name()
            ));
        }
        let unit = self.0.unit();
        if !unit.available() {
            return Err(format!(
                "{}: {} (the AVX-512 BF16 / VNNI path is not written yet)",
                self.name(),
                unit.why_unavailable()
            ));
        }
        Ok(Box::new(LowpMats::new(self.0, n, seed)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_loop_nest() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            for n in [64usize, 128, 576, 1024, 1088] {
                let c = counts(kind, n);
                let n64 = n as u64;
                // 2n³ by tile dot products: (n/16)² tiles of C, n/KS steps, 16·16·KS·2 each.
                let ks = kind.k_step() as u64;
                let tdp = (n64 / 16) * (n64 / 16) * (n64 / ks);
                assert_eq!(c.flops[&kind.class()], tdp * 16 * 16 * ks * 2);
                assert_eq!(c.flops[&kind.class()], 2 * n64 * n64 * n64);
                // Tile loads of A and B: one of each per dot product pair... 4 tiles per step
                // of a 32×32 call = one KiB per tile dot product.
                let blocks = n.div_ceil(kind.kc()) as u64;
                let c_tiles = (n64 / 16) * (n64 / 16);
                let e = kind.esize() as u64;
                assert_eq!(c.core_load_bytes, n64 * n64 * e + tdp * 1024 + c_tiles * (blocks - 1) * 1024 + 64);
                assert_eq!(c.core_store_bytes, n64 * n64 * e + c_tiles * blocks * 1024);
            }
        }
        assert!(Lowp::Int8.class().is_integer());
        assert!(!Lowp::Bf16.class().is_integer());
    }

    #[test]
    fn sizes_halve_to_valid_sizes() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            let k = LowpGemm(kind);
            for bytes in [1u64 << 16, 1 << 20, 3 << 20, 1 << 26] {
                let n = k.size_for_bytes(bytes);
                assert_eq!(n % (2 * MIN_N), 0);
                assert!(k.instance(n / 2, Variant::Avx512, 1).is_ok() || !kind.unit().available());
            }
            assert!(k.instance(96, Variant::Avx512, 1).is_err(), "not a multiple of 64");
        }
    }

    /// Where AVX-512 VBMI is present, the register packer writes exactly what the
    /// element-by-element one writes (elsewhere only the latter runs, and the test says so).
    #[test]
    fn packers_agree_or_skip() {
        #[cfg(target_arch = "x86_64")]
        for kind in [Lowp::Bf16, Lowp::Int8] {
            if !(std::arch::is_x86_feature_detected!("avx512bw") && std::arch::is_x86_feature_detected!("avx512vbmi")) {
                eprintln!("skipped: no AVX-512 VBMI here, only the element packer runs");
                return;
            }
            for n in [64usize, 192] {
                let mut m = LowpMats::new(kind, n, 11 + n as u64).unwrap();
                m.pack_b_scalar();
                let want = m.bpack.bytes().to_vec();
                m.bpack.bytes_mut().fill(0xa5);
                m.pack_b();
                assert!(m.bpack.bytes() == want.as_slice(), "{kind:?} n={n}: the packers differ");
            }
        }
    }

    #[test]
    fn bf16_round_trip() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            let x = rng.range(-4.0, 4.0) as f32;
            let y = f32_of_bf16(bf16_of(x));
            assert!((x - y).abs() <= x.abs() * (1.0 / 256.0), "{x} {y}");
        }
    }

    /// On a CPU with AMX: both GEMMs at several orders match the reference; elsewhere the
    /// instance is refused with the reason, and the test says it skipped.
    #[test]
    fn amx_gemms_match_the_reference_or_skip() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            let k = LowpGemm(kind);
            if !kind.unit().available() {
                assert!(k.unavailable(Variant::Avx512).is_some());
                let e = k.instance(128, Variant::Avx512, 3).err().unwrap();
                assert!(e.contains(kind.unit().flag()) || e.contains("refused"), "{e}");
                eprintln!("skipped {}: {e}", k.name());
                continue;
            }
            for n in [64usize, 128, 192, 640] {
                let mut inst = k.instance(n, Variant::Avx512, n as u64).unwrap();
                inst.verify().unwrap_or_else(|e| panic!("{} n={n}: {e}", k.name()));
            }
        }
    }
}
