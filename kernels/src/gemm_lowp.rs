//! `bf16_gemm` and `int8_gemm`: C = A·B for n×n row-major matrices in low precision, on the
//! AMX tile unit (variant `amx`, Sapphire Rapids and later) or with SIMD dot products
//! (variant `avx512`: AVX-512 BF16 `vdpbf16ps` / AVX-512 VNNI `vpdpbusd`, Cooper Lake, Ice
//! Lake, Zen 4, Zen 5; `avx2`, int8 only: AVX-VNNI `{vex} vpdpbusd`, Alder Lake and later).
//!
//! - `bf16_gemm`: A, B bf16, C fp32. W = 2n³ flops, class `tile_bf16` (AMX) or
//!   `packed512_bf16`.
//! - `int8_gemm`: A u8, B s8, C int32 (VNNI's operand signs: `tdpbusd`, `vpdpbusd`). W = 2n³
//!   integer operations, class `tile_int8`, `packed512_int8` or `packed256_int8` (operations,
//!   not flops: `flops.int_ops`).
//!
//! B is packed once per call into 32-column panels of tile steps (`KS` = k values per step:
//! 32 bf16 or 64 int8; per step two 16-row × 64-byte halves, a row holding 16 columns × one
//! dword of 2 (bf16) or 4 (int8) consecutive k): the AMX B tile layout, which is also what one
//! `vdpbf16ps` / `vpdpbusd` reads as its B operand (a zmm row = 16 columns, a ymm = 8).
//!
//! Loop nest (n a multiple of 64; MR × NR micro-tile: AMX 32 × 32, zmm 8 × 32, ymm 4 × 16):
//! ```text
//! pack B into tile rows (pairs / quads of k per dword, VNNI layout), 32-column panels
//! AMX: for jb in 0..n step NC            (the B panels of a k block, KC × NC, stay in L2)
//! for pc in 0..n step KC                 (SIMD: KC = 512 bf16, 1024 int8: 32 rows of A × KC
//!   for ic in 0..n step MR                = 32 KiB stay in L1; the B panels stream from L2;
//!                                          AMX: KC 2 KiB of a row, `AmxBlocking::of`)
//!     AMX: pack A[ic..+32, pc..+KC] into tile order (per step two 1 KiB tiles, contiguous)
//!     for jc in 0..n step NR             micro-kernel: C[ic..+MR, jc..+NR] in registers
//!       C from zero (pc = 0) or loaded; per k dword group: AMX: per 16 of them A tiles
//!       tmm4/5 from the packed block, B tiles tmm6/7 from the
//!       packed panel, 4 tile dot products. SIMD: the B row (NR columns) from the panel, per
//!       row of A one dword broadcast, one dot product per register of the row; C stored
//! ```
//! The AMX tiles and the SIMD micro-kernels are `asm!` (Rust's AMX intrinsics are not
//! stable, and the loads must be exactly the ones counted), the permission request and
//! configuration are `crate::lowp`'s. A CPU without the variant's unit refuses the instance
//! with the reason.
//!
//! Counts (what the trace backend must reproduce): W = 2n³ in dot products of the variant's
//! class. Core bytes: packing B loads and stores n² elements (AMX: packing A as many again per
//! block of NC columns);
//! AMX: each micro-kernel step loads
//! 4 tiles of 1 KiB (two of A, two of B), `ldtilecfg` 64 bytes; SIMD: per micro-kernel call and
//! k dword group, the B row (4·NR bytes) and MR dwords of A; C: MR × NR fp32/int32 stored per
//! micro-kernel call, loaded on every k block but the first.

use crate::api::{Instance, Kernel};
use crate::check::require_memory;
use crate::lowp::Unit;
use crate::rng::Rng;
use crate::types::{Counts, FlopClass, Precision, Variant};
use std::sync::Arc;

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
    pub fn class(self) -> FlopClass {
        match self {
            Lowp::Bf16 => FlopClass::TileBf16,
            Lowp::Int8 => FlopClass::TileInt8,
        }
    }
}

/// How the products run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// AMX tiles (`tdpbf16ps` / `tdpbusd`): variant `amx`.
    Amx,
    /// AVX-512 BF16 `vdpbf16ps` / AVX-512 VNNI `vpdpbusd` on zmm: variant `avx512`.
    Zmm,
    /// AVX-VNNI `{vex} vpdpbusd` on ymm (int8 only): variant `avx2`.
    Ymm,
}

impl Path {
    /// The path of variant `v` of `kind` (None: the kernel has no such variant).
    pub fn of(kind: Lowp, v: Variant) -> Option<Path> {
        match (v, kind) {
            (Variant::Amx, _) => Some(Path::Amx),
            (Variant::Avx512, _) => Some(Path::Zmm),
            (Variant::Avx2, Lowp::Int8) => Some(Path::Ymm),
            _ => None,
        }
    }
    /// The unit the path needs (its CPUID flag and OS state: `Unit::available`).
    pub fn unit(self, kind: Lowp) -> Unit {
        match (self, kind) {
            (Path::Amx, Lowp::Bf16) => Unit::AmxBf16,
            (Path::Amx, Lowp::Int8) => Unit::AmxInt8,
            (Path::Zmm, Lowp::Bf16) => Unit::Avx512Bf16,
            (Path::Zmm, Lowp::Int8) => Unit::Avx512Vnni8,
            (Path::Ymm, _) => Unit::AvxVnni8,
        }
    }
    /// Rows × columns of C a micro-kernel call keeps in registers.
    pub fn tile(self) -> (usize, usize) {
        match self {
            Path::Amx => (32, 32),
            Path::Zmm => (8, 32),
            Path::Ymm => (4, 16),
        }
    }
    /// The class of the path's dot products.
    pub fn class(self, kind: Lowp) -> FlopClass {
        match (self, kind) {
            (Path::Amx, _) => kind.class(),
            (Path::Zmm, Lowp::Bf16) => FlopClass::Packed512Bf16,
            (Path::Zmm, Lowp::Int8) => FlopClass::Packed512Int8,
            (Path::Ymm, _) => FlopClass::Packed256Int8,
        }
    }
}

/// The smallest order, and the granule of orders (n/2 of a valid size stays valid).
pub const MIN_N: usize = 64;

/// Analytic counts of one call at order `n` (a multiple of 64) on `path`.
pub fn counts(kind: Lowp, n: usize, path: Path) -> Counts {
    counts_block(kind, n, n, n, path)
}

/// Analytic counts of the part of a split problem of order `n` that computes `rows` × `cols`
/// of C (multiples of 32): it packs its own `cols` columns of B (n × cols).
pub fn counts_block(kind: Lowp, n: usize, rows: usize, cols: usize, path: Path) -> Counts {
    counts_block_with(kind, n, rows, cols, path, AmxBlocking::of(kind))
}

/// [`counts_block`] with the AMX path's blocking `blk` (the SIMD paths use `kind.kc()`).
pub fn counts_block_with(kind: Lowp, n: usize, rows: usize, cols: usize, path: Path, blk: AmxBlocking) -> Counts {
    let (n64, r64, c64) = (n as u64, rows as u64, cols as u64);
    let e = kind.esize() as u64;
    let kc = if path == Path::Amx { blk.kc } else { kind.kc() };
    let blocks = n.div_ceil(kc) as u64;
    let mut c = Counts::default();
    // Dot products (tile, bf16 pair or int8 quad), no FP FMA: `fma_flops` stays 0.
    c.add_flops(path.class(kind), 2 * r64 * c64 * n64);
    // Packing B: every element of its columns loaded and stored once. C: stored per k block,
    // loaded on every block but the first (4-byte elements).
    c.core_load_bytes = n64 * c64 * e + r64 * c64 * 4 * (blocks - 1);
    c.core_store_bytes = n64 * c64 * e + r64 * c64 * 4 * blocks;
    let (mr, nr) = path.tile();
    let calls = (r64 / mr as u64) * (c64 / nr as u64);
    if path == Path::Amx {
        // Packing A: its rows, every element loaded and stored once per block of `blk.nc`
        // columns (per k block, each 32-row block of it once).
        let col_blocks = cols.div_ceil(blk.nc) as u64;
        c.core_load_bytes += col_blocks * r64 * n64 * e;
        c.core_store_bytes += col_blocks * r64 * n64 * e;
    }
    c.core_load_bytes += match path {
        // Per step of KS k values: two A tiles and two B tiles of 1 KiB; `ldtilecfg` 64 bytes.
        Path::Amx => calls * (n64 / kind.k_step() as u64) * 4 * 1024 + 64,
        // Per dword group of k (n/g of them): the B row of NR dwords, MR dwords of A.
        Path::Zmm | Path::Ymm => calls * (n64 / kind.group() as u64) * 4 * (nr + mr) as u64,
    };
    // Compulsory: its rows of A and columns of B read, the packed columns written (+
    // allocated) and read, its block of C written + allocated.
    c.dram_bytes = r64 * n64 * e + n64 * c64 * e + 3 * n64 * c64 * e + 2 * r64 * c64 * 4;
    c
}

/// A block of C: its rows and its columns (half-open ranges).
pub type Block = ((usize, usize), (usize, usize));

/// The team's blocks of C for a problem of order `n` split over `threads`: a grid of row ×
/// column groups as near square as `threads` allows (more column groups where not), each
/// group a run of 32-row / 32-column blocks. Err where `threads` exceeds the blocks.
pub fn split_grid(n: usize, threads: usize) -> Result<Vec<Block>, String> {
    let units = n / 32;
    let pr = (1..=threads)
        .filter(|d| threads.is_multiple_of(*d) && d * d <= threads)
        .max()
        .unwrap_or(1);
    let pc = threads / pr;
    if pr > units || pc > units {
        return Err(format!(
            "{threads} threads need a grid of {pr} × {pc} blocks of C; order {n} has {units} × {units} blocks of 32"
        ));
    }
    let range = |i: usize, parts: usize| (32 * (i * units / parts), 32 * ((i + 1) * units / parts));
    Ok((0..pr).flat_map(|i| (0..pc).map(move |j| (range(i, pr), range(j, pc)))).collect())
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

// SAFETY: the buffer is owned by its instance, or shared (`Arc`) by the parts of one split
// problem: A and B are only read after construction, and each part writes its own block of C.
unsafe impl Send for Aligned {}
// SAFETY: as above: shared parts never write the same bytes.
unsafe impl Sync for Aligned {}

/// bf16 of an f32 (round to nearest even; inputs here are finite).
pub fn bf16_of(x: f32) -> u16 {
    let b = x.to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (r >> 16) as u16
}

pub fn f32_of_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Bytes of the packed A block of `path` (32 rows of up to [`AmxBlocking::MAX_KC_BYTES`] on
/// AMX, any blocking; none on the SIMD paths).
fn apack_len(path: Path) -> usize {
    if path == Path::Amx { 32 * AmxBlocking::MAX_KC_BYTES } else { 0 }
}

/// One instance: A, B, C (shared by the parts of a split problem), the packed columns of B,
/// and the block of C it computes (rows × columns, multiples of 32; all of C unless split).
pub struct LowpMats {
    kind: Lowp,
    path: Path,
    n: usize,
    a: Arc<Aligned>,
    b: Arc<Aligned>,
    bpack: Aligned,
    /// The AMX path's packed block of A: 32 rows × KC in tile order (empty on the SIMD paths).
    apack: Aligned,
    /// The AMX path's blocking.
    blk: AmxBlocking,
    c: Arc<Aligned>,
    rows: (usize, usize),
    cols: (usize, usize),
}

impl LowpMats {
    pub fn new(kind: Lowp, n: usize, seed: u64, path: Path) -> Result<LowpMats, String> {
        let e = kind.esize();
        require_memory((5 * n * n * e + 4 * n * n) as u64)?;
        let (mut a, mut b) = (Aligned::new(n * n * e)?, Aligned::new(n * n * e)?);
        let mut rng = Rng::new(seed);
        for buf in [&mut a, &mut b] {
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
        Ok(LowpMats {
            kind,
            path,
            n,
            a: Arc::new(a),
            b: Arc::new(b),
            bpack: Aligned::new(n * n * e)?,
            apack: Aligned::new(apack_len(path))?,
            blk: AmxBlocking::of(kind),
            c: Arc::new(Aligned::new(n * n * 4)?),
            rows: (0, n),
            cols: (0, n),
        })
    }

    /// Another blocking for the AMX path (experiments: `examples/amx_shapes.rs`); the counts
    /// follow it. Err where `kc` is not a multiple of the tile step or its A rows exceed
    /// [`AmxBlocking::MAX_KC_BYTES`], or `nc` is not a positive multiple of 32.
    pub fn set_amx_blocking(&mut self, blk: AmxBlocking) -> Result<(), String> {
        let ks = self.kind.k_step();
        if blk.kc == 0 || !blk.kc.is_multiple_of(ks) || blk.kc * self.kind.esize() > AmxBlocking::MAX_KC_BYTES {
            return Err(format!(
                "kc {}: a multiple of {ks} up to {} bytes of A a row",
                blk.kc,
                AmxBlocking::MAX_KC_BYTES
            ));
        }
        if blk.nc == 0 || !blk.nc.is_multiple_of(32) {
            return Err(format!("nc {}: a positive multiple of 32", blk.nc));
        }
        self.blk = blk;
        Ok(())
    }

    /// The part of `whole` (a full problem) that computes C[rows, cols]: the same A, B and C,
    /// its own packed columns of B.
    fn part(whole: &LowpMats, rows: (usize, usize), cols: (usize, usize)) -> Result<LowpMats, String> {
        Ok(LowpMats {
            kind: whole.kind,
            path: whole.path,
            n: whole.n,
            a: whole.a.clone(),
            b: whole.b.clone(),
            bpack: Aligned::new(whole.n * (cols.1 - cols.0) * whole.kind.esize())?,
            apack: Aligned::new(apack_len(whole.path))?,
            blk: whole.blk,
            c: whole.c.clone(),
            rows,
            cols,
        })
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
    /// Only the columns of this instance's block, panel (j − first column)/32.
    fn pack_b(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512bw") && std::arch::is_x86_feature_detected!("avx512vbmi") {
            // SAFETY: the features were checked just above; B holds n²·e bytes, the packed
            // buffer n·(its columns)·e, the columns are a multiple-of-32 range inside 0..n.
            unsafe { pack_b_vbmi(self.kind, self.n, self.cols, self.b.ptr, self.bpack.ptr) };
            return;
        }
        self.pack_b_scalar();
    }

    /// [`LowpMats::pack_b`] one element at a time.
    fn pack_b_scalar(&mut self) {
        let (n, e, g, ks) = (self.n, self.kind.esize(), self.kind.group(), self.kind.k_step());
        let src = self.b.ptr as *const u8;
        let dst = self.bpack.ptr;
        let (j0, j1) = self.cols;
        for k in 0..n {
            let (step, row, within) = (k / ks, (k % ks) / g, k % g);
            for j in j0..j1 {
                let off = ((j - j0) / 32) * (n * 32 * e) + step * 2048 + ((j % 32) / 16) * 1024 + row * 64 + ((j % 16) * g + within) * e;
                // SAFETY: (k, j) < n², `off` < n·(j1 − j0)·e (a permutation); element
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
        assert!(
            self.path.unit(self.kind).available(),
            "low-precision GEMM dispatched on a CPU without its unit"
        );
        self.pack_b();
        if self.path != Path::Amx {
            self.gemm_dot();
            return;
        }
        let (n, e) = (self.n, self.kind.esize());
        let AmxBlocking { kc, nc } = self.blk;
        let ks = self.kind.k_step();
        let cfg = crate::lowp::TileConfig::uniform(16, 64);
        // The buffers' addresses in locals: the tile `asm!` blocks may write memory, so fields
        // read through `self` inside the loops would be reloaded per call (bytes that grow
        // with n and that the analytic counts leave out); locals at worst spill to the stack.
        let (a0, b0, c0) = (self.a.ptr as *const u8, self.bpack.ptr as *const u8, self.c.ptr);
        let ap = self.apack.ptr;
        let (kind, (r0, r1), (j0, j1)) = (self.kind, self.rows, self.cols);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AMX is available and permitted (asserted above); every pointer below stays
        // inside A (n²·e), the packed A block (32·KC·e), the packed columns (n·(j1 − j0)·e)
        // or C (n²·4): ic in r0..r1 and jc in j0..j1 step 32 (multiples of 32 inside 0..n),
        // pc < n step kc, steps·ks ≤ n − pc; C tiles of 16 rows × 64 bytes at stride n·4.
        unsafe {
            crate::lowp::load_tile_config(&cfg);
            for jb in (j0..j1).step_by(nc) {
                let jend = (jb + nc).min(j1);
                for pc in (0..n).step_by(kc) {
                    let steps = kc.min(n - pc) / ks;
                    for ic in (r0..r1).step_by(32) {
                        // 32 rows of A × KC packed into tile order (64 KiB, contiguous) for
                        // every call of the column block. Read in place at a row stride of n·e
                        // (2 or 4 KiB at n = 1024 or 2048) its tile rows fell into a few sets
                        // of the caches.
                        pack_a_tiles(steps, a0.add((ic * n + pc) * e), n * e, ap);
                        for jc in (jb..jend).step_by(32) {
                            let bp = b0.add(((jc - j0) / 32) * (n * 32 * e) + (pc / ks) * 2048);
                            let cp = c0.add((ic * n + jc) * 4);
                            // The next call's C tile, asked for in L2 during this call (not L1:
                            // its 32 rows at a stride of n·4 bytes share a few L1 sets).
                            let next = if jc + 32 < jend {
                                cp.add(32 * 4)
                            } else if ic + 32 < r1 {
                                c0.add(((ic + 32) * n + jb) * 4)
                            } else {
                                cp
                            };
                            micro(kind, steps, ap, bp, cp, n * 4, pc > 0, next);
                        }
                    }
                }
            }
            crate::lowp::release_tiles();
        }
    }

    /// The SIMD path: the loop nest of the module comment with an MR × NR micro-tile in
    /// registers (B packed already).
    fn gemm_dot(&mut self) {
        let (n, e) = (self.n, self.kind.esize());
        let (kc, ks) = (self.kind.kc(), self.kind.k_step());
        let (mr, nr) = self.path.tile();
        // Locals, not fields, inside the loops (see `gemm`).
        let (a0, b0, c0) = (self.a.ptr as *const u8, self.bpack.ptr as *const u8, self.c.ptr);
        let (kind, path, (r0, r1), (j0, j1)) = (self.kind, self.path, self.rows, self.cols);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the path's unit is available (asserted in `gemm`); every pointer stays
        // inside A (n²·e), the packed columns (n·(j1 − j0)·e) or C (n²·4): ic in r0..r1 step
        // MR, jc in j0..j1 step NR (MR, NR divide 32, the block's granule), pc < n step kc,
        // steps·ks ≤ n − pc; the micro-kernels read steps·16 B rows of NR dwords from `bp` on
        // (stride 64 B, 2 KiB per step) and MR rows of A at stride n·e, and load/store MR rows
        // of NR C elements at stride n·4.
        unsafe {
            for pc in (0..n).step_by(kc) {
                let steps = kc.min(n - pc) / ks;
                for ic in (r0..r1).step_by(mr) {
                    let ap = a0.add((ic * n + pc) * e);
                    for jc in (j0..j1).step_by(nr) {
                        // Panel (jc − j0)/32, its half (jc%32)/16 for a 16-column micro-tile.
                        let bp = b0.add(((jc - j0) / 32) * (n * 32 * e) + (pc / ks) * 2048 + ((jc % 32) / 16) * 1024);
                        let cp = c0.add((ic * n + jc) * 4);
                        match (path, kind) {
                            (Path::Zmm, Lowp::Bf16) => dot_zmm_bf16(steps, ap, n * e, bp, cp, n * 4, pc > 0),
                            (Path::Zmm, Lowp::Int8) => dot_zmm_int8(steps, ap, n * e, bp, cp, n * 4, pc > 0),
                            _ => dot_ymm_int8(steps, ap, n * e, bp, cp, n * 4, pc > 0),
                        }
                    }
                }
            }
        }
    }
}

/// [`LowpMats::pack_b`] with AVX-512 VBMI: per tile row of a 32-column panel, two rows of B
/// (bf16: 32 u16 each, one 64-byte load) or four (int8: 32 bytes each) are interleaved by
/// `vpermt2w` / `vpermt2b` into the two 64-byte rows of the panel's two tiles.
///
/// # Safety
/// AVX-512 BW and VBMI present; `src` holds n²·e bytes, `dst` n·(cols.1 − cols.0)·e, n a
/// multiple of 64, the columns a multiple-of-32 range inside 0..n.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn pack_b_vbmi(kind: Lowp, n: usize, cols: (usize, usize), src: *const u8, dst: *mut u8) {
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
                    for j0 in (cols.0..cols.1).step_by(32) {
                        let x = _mm512_loadu_si512(src.add(2 * (k * n + j0)).cast());
                        let y = _mm512_loadu_si512(src.add(2 * ((k + 1) * n + j0)).cast());
                        let base = dst.add(((j0 - cols.0) / 32) * (n * 32 * e) + step * 2048 + row * 64);
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
                    for j0 in (cols.0..cols.1).step_by(32) {
                        let r = |i: usize| _mm256_loadu_si256(src.add((k + i) * n + j0).cast());
                        let x = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r(0)), r(1));
                        let y = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r(2)), r(3));
                        let base = dst.add(((j0 - cols.0) / 32) * (n * 32 * e) + step * 2048 + row * 64);
                        _mm512_storeu_si512(base.cast(), _mm512_permutex2var_epi8(x, ilo, y));
                        _mm512_storeu_si512(base.add(1024).cast(), _mm512_permutex2var_epi8(x, ihi, y));
                    }
                }
            }
        }
    }
}

/// The AMX loop nest's blocking: k values per block (`kc`, a multiple of the tile step) and
/// columns per block (`nc`, a multiple of 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmxBlocking {
    pub kc: usize,
    pub nc: usize,
}

impl AmxBlocking {
    /// The largest packed A row segment (bytes) any blocking may use: 32 rows of it are the
    /// packed A block.
    pub const MAX_KC_BYTES: usize = 2048;

    /// The production blocking of `kind`: k blocks of 2 KiB of each row of A (bf16 1024,
    /// int8 2048), so C, which is not blocked and comes from L3 or DRAM, is loaded and stored
    /// once per 2 KiB of k; the packed A block (32 rows, 64 KiB) then sits in L2, not L1.
    /// Columns in blocks whose B panels of one k block take 512 KiB (bf16, 256 columns) or
    /// 1 MiB (int8, 512 columns) of a 2 MiB L2. Measured on the Emerald Rapids guest, one
    /// thread, blockings interleaved (`examples/amx_shapes.rs`): bf16 at n = 1024 / 2048 ran
    /// 876 / 758 GFLOP/s against 622 / 545 with the SIMD paths' k block (512) over 1024
    /// columns; int8 2039 GOP/s at n = 2048 against 1622.
    pub fn of(kind: Lowp) -> AmxBlocking {
        match kind {
            Lowp::Bf16 => AmxBlocking { kc: 1024, nc: 256 },
            Lowp::Int8 => AmxBlocking { kc: 2048, nc: 512 },
        }
    }
}

/// A[32 rows at `src`, row stride `lda` bytes, steps·64 bytes each] into tile order at `dst`:
/// per step two tiles of 16 rows × 64 bytes (rows 0–15, then 16–31), 2 KiB a step. A tile row
/// of A is 64 contiguous bytes of one row (32 bf16 or 64 u8 k values), so packing is a
/// 64-byte copy: one zmm load and one zmm store per tile row, volatile so that the compiler
/// keeps exactly those (no `memcpy` call: the analytic bytes, and what the tracer counts).
///
/// # Safety
/// AVX-512F present; `src` valid for 32 rows of steps·64 bytes at stride `lda`, `dst` for
/// steps·2048 bytes; `src`, `lda` and `dst` multiples of 64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_a_tiles(steps: usize, src: *const u8, lda: usize, dst: *mut u8) {
    use std::arch::x86_64::__m512i;
    // SAFETY: guaranteed by the caller (see above): every access is 64 bytes at a multiple of
    // 64, inside the rows of A or the packed block.
    unsafe {
        // Row by row: each row's steps·64 bytes are one contiguous run that the hardware
        // prefetchers follow (step by step, the 32 rows were 32 streams a page apart).
        for r in 0..32 {
            for step in 0..steps {
                let s = src.add(r * lda + step * 64) as *const __m512i;
                let d = dst.add(step * 2048 + r * 64) as *mut __m512i;
                std::ptr::write_volatile(d, std::ptr::read_volatile(s));
            }
        }
    }
}

/// C[32×32] (+)= A[32 rows, steps·KS] · B: tmm0–3 accumulate, tmm4/5 A rows 0–15/16–31 from
/// the packed A block (2 KiB per step), tmm6/7 B columns 0–15/16–31 from the packed panel.
/// Each step also asks for two rows of the next call's C tile at `next_c` (stride `ldc`) in
/// L2: C is not blocked and comes from L3 or DRAM; spread over the steps, these requests do
/// not hold the line fill buffers that the B tiles need all at once. A hint: no
/// architectural effect, no bytes for the counting model or the tracer.
///
/// # Safety
/// Tiles configured 16 × 64 B; the pointers valid for the accesses described; steps ≥ 1.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn micro(kind: Lowp, steps: usize, a: *const u8, b: *const u8, c: *mut u8, ldc: usize, load_c: bool, next_c: *const u8) {
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
                "tileloadd tmm4, [{a} + {s}*1]",
                "tileloadd tmm5, [{a} + {s}*1 + 1024]",
                "tileloadd tmm6, [{b} + {s}*1]",
                "tileloadd tmm7, [{b} + {s}*1 + 1024]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                "prefetcht1 [{p}]", "prefetcht1 [{p} + 64]", "add {p}, {ldc}",
                "prefetcht1 [{p}]", "prefetcht1 [{p} + 64]", "add {p}, {ldc}",
                "add {a}, 2048", "add {b}, 2048",
                "dec {n}", "jnz 2b",
                a = inout(reg) a => _, b = inout(reg) b => _, p = inout(reg) next_c => _, ldc = in(reg) ldc,
                s = in(reg) 64usize, n = inout(reg) steps => _,
                options(nostack, readonly)
            ),
            Lowp::Int8 => asm!(
                "2:",
                "tileloadd tmm4, [{a} + {s}*1]",
                "tileloadd tmm5, [{a} + {s}*1 + 1024]",
                "tileloadd tmm6, [{b} + {s}*1]",
                "tileloadd tmm7, [{b} + {s}*1 + 1024]",
                "tdpbusd tmm0, tmm4, tmm6",
                "tdpbusd tmm1, tmm4, tmm7",
                "tdpbusd tmm2, tmm5, tmm6",
                "tdpbusd tmm3, tmm5, tmm7",
                "prefetcht1 [{p}]", "prefetcht1 [{p} + 64]", "add {p}, {ldc}",
                "prefetcht1 [{p}]", "prefetcht1 [{p} + 64]", "add {p}, {ldc}",
                "add {a}, 2048", "add {b}, 2048",
                "dec {n}", "jnz 2b",
                a = inout(reg) a => _, b = inout(reg) b => _, p = inout(reg) next_c => _, ldc = in(reg) ldc,
                s = in(reg) 64usize, n = inout(reg) steps => _,
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

/// C[8×32] (+)= A[8 rows, steps·KS] · B (packed panel), bf16 `vdpbf16ps`: zmm(2i + h) holds row i,
/// columns 16h..16h+16; per dword group of k, zmm16/17 the B row (both halves) and one
/// broadcast dword of A per row.
///
/// # Safety
/// AVX-512F and the unit present; `a` valid for 8 rows (stride `lda`) of 4·16·steps bytes,
/// `b` for `steps` panel steps (2 KiB each), `c` for 8 rows (stride `ldc`) of 128 bytes;
/// steps ≥ 1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn dot_zmm_bf16(steps: usize, a: *const u8, lda: usize, b: *const u8, c: *mut u8, ldc: usize, load_c: bool) {
    // SAFETY: guaranteed by the caller (see above).
    unsafe {
        std::arch::asm!(
            "test {lc}, {lc}",
            "jz 3f",
            "mov {t}, {c}",
            "vmovups zmm0, [{t}]", "vmovups zmm1, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm2, [{t}]", "vmovups zmm3, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm4, [{t}]", "vmovups zmm5, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm6, [{t}]", "vmovups zmm7, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm8, [{t}]", "vmovups zmm9, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm10, [{t}]", "vmovups zmm11, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm12, [{t}]", "vmovups zmm13, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm14, [{t}]", "vmovups zmm15, [{t} + 64]", "add {t}, {ldc}",
            "jmp 4f",
            "3:",
            "vpxord zmm0, zmm0, zmm0", "vpxord zmm1, zmm1, zmm1", "vpxord zmm2, zmm2, zmm2", "vpxord zmm3, zmm3, zmm3",
            "vpxord zmm4, zmm4, zmm4", "vpxord zmm5, zmm5, zmm5", "vpxord zmm6, zmm6, zmm6", "vpxord zmm7, zmm7, zmm7",
            "vpxord zmm8, zmm8, zmm8", "vpxord zmm9, zmm9, zmm9", "vpxord zmm10, zmm10, zmm10", "vpxord zmm11, zmm11, zmm11",
            "vpxord zmm12, zmm12, zmm12", "vpxord zmm13, zmm13, zmm13", "vpxord zmm14, zmm14, zmm14", "vpxord zmm15, zmm15, zmm15",
            "4:",
            "lea {lda3}, [{lda} + {lda}*2]",
            "lea {a4}, [{a} + {lda}*4]",
            "5:",
            "mov {r}, 16",
            "6:",
            "vmovups zmm16, [{b}]",
            "vmovups zmm17, [{b} + 1024]",
            "vpbroadcastd zmm18, dword ptr [{a}]",
            "vdpbf16ps zmm0, zmm16, zmm18", "vdpbf16ps zmm1, zmm17, zmm18",
            "vpbroadcastd zmm19, dword ptr [{a} + {lda}]",
            "vdpbf16ps zmm2, zmm16, zmm19", "vdpbf16ps zmm3, zmm17, zmm19",
            "vpbroadcastd zmm18, dword ptr [{a} + {lda}*2]",
            "vdpbf16ps zmm4, zmm16, zmm18", "vdpbf16ps zmm5, zmm17, zmm18",
            "vpbroadcastd zmm19, dword ptr [{a} + {lda3}]",
            "vdpbf16ps zmm6, zmm16, zmm19", "vdpbf16ps zmm7, zmm17, zmm19",
            "vpbroadcastd zmm18, dword ptr [{a4}]",
            "vdpbf16ps zmm8, zmm16, zmm18", "vdpbf16ps zmm9, zmm17, zmm18",
            "vpbroadcastd zmm19, dword ptr [{a4} + {lda}]",
            "vdpbf16ps zmm10, zmm16, zmm19", "vdpbf16ps zmm11, zmm17, zmm19",
            "vpbroadcastd zmm18, dword ptr [{a4} + {lda}*2]",
            "vdpbf16ps zmm12, zmm16, zmm18", "vdpbf16ps zmm13, zmm17, zmm18",
            "vpbroadcastd zmm19, dword ptr [{a4} + {lda3}]",
            "vdpbf16ps zmm14, zmm16, zmm19", "vdpbf16ps zmm15, zmm17, zmm19",
            "add {a}, 4", "add {a4}, 4", "add {b}, 64",
            "dec {r}", "jnz 6b",
            "add {b}, 1024",
            "dec {steps}", "jnz 5b",
            "mov {t}, {c}",
            "vmovups [{t}], zmm0", "vmovups [{t} + 64], zmm1", "add {t}, {ldc}",
            "vmovups [{t}], zmm2", "vmovups [{t} + 64], zmm3", "add {t}, {ldc}",
            "vmovups [{t}], zmm4", "vmovups [{t} + 64], zmm5", "add {t}, {ldc}",
            "vmovups [{t}], zmm6", "vmovups [{t} + 64], zmm7", "add {t}, {ldc}",
            "vmovups [{t}], zmm8", "vmovups [{t} + 64], zmm9", "add {t}, {ldc}",
            "vmovups [{t}], zmm10", "vmovups [{t} + 64], zmm11", "add {t}, {ldc}",
            "vmovups [{t}], zmm12", "vmovups [{t} + 64], zmm13", "add {t}, {ldc}",
            "vmovups [{t}], zmm14", "vmovups [{t} + 64], zmm15", "add {t}, {ldc}",
            // Clean upper state before the SSE-encoded code around (no transition stalls).
            "vzeroupper",
            a = inout(reg) a => _, a4 = out(reg) _, lda = in(reg) lda, lda3 = out(reg) _,
            b = inout(reg) b => _, r = out(reg) _, steps = inout(reg) steps => _,
            c = in(reg) c, t = out(reg) _, ldc = in(reg) ldc, lc = in(reg) usize::from(load_c),
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _, out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,
            options(nostack)
        );
    }
}

/// C[8×32] (+)= A[8 rows, steps·KS] · B (packed panel), u8 × s8 `vpdpbusd` (A the unsigned source): zmm(2i + h) holds row i,
/// columns 16h..16h+16; per dword group of k, zmm16/17 the B row (both halves) and one
/// broadcast dword of A per row.
///
/// # Safety
/// AVX-512F and the unit present; `a` valid for 8 rows (stride `lda`) of 4·16·steps bytes,
/// `b` for `steps` panel steps (2 KiB each), `c` for 8 rows (stride `ldc`) of 128 bytes;
/// steps ≥ 1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn dot_zmm_int8(steps: usize, a: *const u8, lda: usize, b: *const u8, c: *mut u8, ldc: usize, load_c: bool) {
    // SAFETY: guaranteed by the caller (see above).
    unsafe {
        std::arch::asm!(
            "test {lc}, {lc}",
            "jz 3f",
            "mov {t}, {c}",
            "vmovups zmm0, [{t}]", "vmovups zmm1, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm2, [{t}]", "vmovups zmm3, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm4, [{t}]", "vmovups zmm5, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm6, [{t}]", "vmovups zmm7, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm8, [{t}]", "vmovups zmm9, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm10, [{t}]", "vmovups zmm11, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm12, [{t}]", "vmovups zmm13, [{t} + 64]", "add {t}, {ldc}",
            "vmovups zmm14, [{t}]", "vmovups zmm15, [{t} + 64]", "add {t}, {ldc}",
            "jmp 4f",
            "3:",
            "vpxord zmm0, zmm0, zmm0", "vpxord zmm1, zmm1, zmm1", "vpxord zmm2, zmm2, zmm2", "vpxord zmm3, zmm3, zmm3",
            "vpxord zmm4, zmm4, zmm4", "vpxord zmm5, zmm5, zmm5", "vpxord zmm6, zmm6, zmm6", "vpxord zmm7, zmm7, zmm7",
            "vpxord zmm8, zmm8, zmm8", "vpxord zmm9, zmm9, zmm9", "vpxord zmm10, zmm10, zmm10", "vpxord zmm11, zmm11, zmm11",
            "vpxord zmm12, zmm12, zmm12", "vpxord zmm13, zmm13, zmm13", "vpxord zmm14, zmm14, zmm14", "vpxord zmm15, zmm15, zmm15",
            "4:",
            "lea {lda3}, [{lda} + {lda}*2]",
            "lea {a4}, [{a} + {lda}*4]",
            "5:",
            "mov {r}, 16",
            "6:",
            "vmovups zmm16, [{b}]",
            "vmovups zmm17, [{b} + 1024]",
            "vpbroadcastd zmm18, dword ptr [{a}]",
            "vpdpbusd zmm0, zmm18, zmm16", "vpdpbusd zmm1, zmm18, zmm17",
            "vpbroadcastd zmm19, dword ptr [{a} + {lda}]",
            "vpdpbusd zmm2, zmm19, zmm16", "vpdpbusd zmm3, zmm19, zmm17",
            "vpbroadcastd zmm18, dword ptr [{a} + {lda}*2]",
            "vpdpbusd zmm4, zmm18, zmm16", "vpdpbusd zmm5, zmm18, zmm17",
            "vpbroadcastd zmm19, dword ptr [{a} + {lda3}]",
            "vpdpbusd zmm6, zmm19, zmm16", "vpdpbusd zmm7, zmm19, zmm17",
            "vpbroadcastd zmm18, dword ptr [{a4}]",
            "vpdpbusd zmm8, zmm18, zmm16", "vpdpbusd zmm9, zmm18, zmm17",
            "vpbroadcastd zmm19, dword ptr [{a4} + {lda}]",
            "vpdpbusd zmm10, zmm19, zmm16", "vpdpbusd zmm11, zmm19, zmm17",
            "vpbroadcastd zmm18, dword ptr [{a4} + {lda}*2]",
            "vpdpbusd zmm12, zmm18, zmm16", "vpdpbusd zmm13, zmm18, zmm17",
            "vpbroadcastd zmm19, dword ptr [{a4} + {lda3}]",
            "vpdpbusd zmm14, zmm19, zmm16", "vpdpbusd zmm15, zmm19, zmm17",
            "add {a}, 4", "add {a4}, 4", "add {b}, 64",
            "dec {r}", "jnz 6b",
            "add {b}, 1024",
            "dec {steps}", "jnz 5b",
            "mov {t}, {c}",
            "vmovups [{t}], zmm0", "vmovups [{t} + 64], zmm1", "add {t}, {ldc}",
            "vmovups [{t}], zmm2", "vmovups [{t} + 64], zmm3", "add {t}, {ldc}",
            "vmovups [{t}], zmm4", "vmovups [{t} + 64], zmm5", "add {t}, {ldc}",
            "vmovups [{t}], zmm6", "vmovups [{t} + 64], zmm7", "add {t}, {ldc}",
            "vmovups [{t}], zmm8", "vmovups [{t} + 64], zmm9", "add {t}, {ldc}",
            "vmovups [{t}], zmm10", "vmovups [{t} + 64], zmm11", "add {t}, {ldc}",
            "vmovups [{t}], zmm12", "vmovups [{t} + 64], zmm13", "add {t}, {ldc}",
            "vmovups [{t}], zmm14", "vmovups [{t} + 64], zmm15", "add {t}, {ldc}",
            // Clean upper state before the SSE-encoded code around (no transition stalls).
            "vzeroupper",
            a = inout(reg) a => _, a4 = out(reg) _, lda = in(reg) lda, lda3 = out(reg) _,
            b = inout(reg) b => _, r = out(reg) _, steps = inout(reg) steps => _,
            c = in(reg) c, t = out(reg) _, ldc = in(reg) ldc, lc = in(reg) usize::from(load_c),
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _, out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,
            options(nostack)
        );
    }
}

/// C[4×16] (+)= A[4 rows, steps·64] · B (one half of a packed panel), u8 × s8 AVX-VNNI
/// `{vex} vpdpbusd`: ymm(2i + h) holds row i, columns 8h..8h+8; per dword group of k, ymm8/9
/// the B row and one broadcast dword of A per row.
///
/// # Safety
/// AVX2 and AVX-VNNI present; `a` valid for 4 rows (stride `lda`) of 64·steps bytes, `b` for
/// `steps` panel steps (2 KiB each, 1 KiB read), `c` for 4 rows (stride `ldc`) of 64 bytes;
/// steps ≥ 1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn dot_ymm_int8(steps: usize, a: *const u8, lda: usize, b: *const u8, c: *mut u8, ldc: usize, load_c: bool) {
    // SAFETY: guaranteed by the caller (see above).
    unsafe {
        std::arch::asm!(
            "test {lc}, {lc}",
            "jz 3f",
            "mov {t}, {c}",
            "vmovdqu ymm0, [{t}]", "vmovdqu ymm1, [{t} + 32]", "add {t}, {ldc}",
            "vmovdqu ymm2, [{t}]", "vmovdqu ymm3, [{t} + 32]", "add {t}, {ldc}",
            "vmovdqu ymm4, [{t}]", "vmovdqu ymm5, [{t} + 32]", "add {t}, {ldc}",
            "vmovdqu ymm6, [{t}]", "vmovdqu ymm7, [{t} + 32]", "add {t}, {ldc}",
            "jmp 4f",
            "3:",
            "vpxor ymm0, ymm0, ymm0", "vpxor ymm1, ymm1, ymm1", "vpxor ymm2, ymm2, ymm2", "vpxor ymm3, ymm3, ymm3",
            "vpxor ymm4, ymm4, ymm4", "vpxor ymm5, ymm5, ymm5", "vpxor ymm6, ymm6, ymm6", "vpxor ymm7, ymm7, ymm7",
            "4:",
            "lea {lda3}, [{lda} + {lda}*2]",
            "5:",
            "mov {r}, 16",
            "6:",
            "vmovdqu ymm8, [{b}]",
            "vmovdqu ymm9, [{b} + 32]",
            "vpbroadcastd ymm10, dword ptr [{a}]",
            "{{vex}} vpdpbusd ymm0, ymm10, ymm8", "{{vex}} vpdpbusd ymm1, ymm10, ymm9",
            "vpbroadcastd ymm11, dword ptr [{a} + {lda}]",
            "{{vex}} vpdpbusd ymm2, ymm11, ymm8", "{{vex}} vpdpbusd ymm3, ymm11, ymm9",
            "vpbroadcastd ymm10, dword ptr [{a} + {lda}*2]",
            "{{vex}} vpdpbusd ymm4, ymm10, ymm8", "{{vex}} vpdpbusd ymm5, ymm10, ymm9",
            "vpbroadcastd ymm11, dword ptr [{a} + {lda3}]",
            "{{vex}} vpdpbusd ymm6, ymm11, ymm8", "{{vex}} vpdpbusd ymm7, ymm11, ymm9",
            "add {a}, 4", "add {b}, 64",
            "dec {r}", "jnz 6b",
            "add {b}, 1024",
            "dec {steps}", "jnz 5b",
            "mov {t}, {c}",
            "vmovdqu [{t}], ymm0", "vmovdqu [{t} + 32], ymm1", "add {t}, {ldc}",
            "vmovdqu [{t}], ymm2", "vmovdqu [{t} + 32], ymm3", "add {t}, {ldc}",
            "vmovdqu [{t}], ymm4", "vmovdqu [{t} + 32], ymm5", "add {t}, {ldc}",
            "vmovdqu [{t}], ymm6", "vmovdqu [{t} + 32], ymm7", "add {t}, {ldc}",
            // Clean upper state before the SSE-encoded code around (no transition stalls).
            "vzeroupper",
            a = inout(reg) a => _, lda = in(reg) lda, lda3 = out(reg) _,
            b = inout(reg) b => _, r = out(reg) _, steps = inout(reg) steps => _,
            c = in(reg) c, t = out(reg) _, ldc = in(reg) ldc, lc = in(reg) usize::from(load_c),
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack)
        );
    }
}

impl Instance for LowpMats {
    fn run(&mut self) {
        self.gemm();
    }
    /// Poison this instance's block of C, run, and check sampled entries of the block (all of
    /// them up to 128 × 128) against an f64 reference: int8 exactly; bf16 within fp32
    /// accumulation error (products of bf16 are exact in fp32).
    fn verify(&mut self) -> Result<(), String> {
        let n = self.n;
        let ((r0, r1), (j0, j1)) = (self.rows, self.cols);
        for i in r0..r1 {
            // SAFETY: row i, columns j0..j1 of C (n·4 bytes per row) lie inside its n²·4 bytes,
            // and only this instance writes them.
            unsafe { std::ptr::write_bytes(self.c.ptr.add(4 * (i * n + j0)), 0xff, 4 * (j1 - j0)) };
        }
        self.gemm();
        let mut rng = Rng::new(0x5eed ^ n as u64);
        let (h, w) = (r1 - r0, j1 - j0);
        let samples: Vec<(usize, usize)> = if h * w <= 128 * 128 {
            (0..h * w).map(|x| (r0 + x / w, j0 + x % w)).collect()
        } else {
            (0..512)
                .map(|_| (r0 + (rng.next_u64() % h as u64) as usize, j0 + (rng.next_u64() % w as u64) as usize))
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
            // bf16 products are exact in fp32, so the fp32 sum of n of them in any order is off
            // by ≤ γ_n·Σ|a·b|, γ_n = n·u/(1 − n·u), u = 2⁻²⁴ (Higham 3.1); the f64 reference
            // adds its own γ_n at u = 2⁻⁵³. (4·ε·√n was a typical error, not a bound.)
            let gamma = |u: f64| n as f64 * u / (1.0 - n as f64 * u);
            let tol = match self.kind {
                Lowp::Int8 => 0.0,
                Lowp::Bf16 => (gamma(f64::from(f32::EPSILON) / 2.0) + gamma(f64::EPSILON / 2.0)) * mag * (1.0 + 1e-9) + 1e-30,
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
        counts_block_with(
            self.kind,
            self.n,
            self.rows.1 - self.rows.0,
            self.cols.1 - self.cols.0,
            self.path,
            self.blk,
        )
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
            Lowp::Bf16 => "C = A·B, n×n, bf16 inputs, fp32 C: AMX tiles (tdpbf16ps) or AVX-512 BF16 (vdpbf16ps), B packed into tile rows",
            Lowp::Int8 => {
                "C = A·B, n×n, u8 × s8 inputs, int32 C: AMX tiles (tdpbusd), AVX-512 VNNI or AVX-VNNI (vpdpbusd): integer ops, not flops"
            }
        }
    }
    /// The storage of C (fp32 for bf16; int32 has no Precision, and its ops are not flops).
    fn precision(&self) -> Precision {
        Precision::F32
    }
    /// `amx` (tiles), `avx512` (AVX-512 BF16 / VNNI dot products) and, for int8, `avx2`
    /// (AVX-VNNI); the unit beyond the ISA is checked by `unavailable` and the instance.
    fn variants(&self) -> &'static [Variant] {
        match self.0 {
            Lowp::Bf16 => &[Variant::Avx512, Variant::Amx],
            Lowp::Int8 => &[Variant::Avx2, Variant::Avx512, Variant::Amx],
        }
    }
    fn formula(&self, v: Variant) -> String {
        let Some(path) = Path::of(self.0, v) else {
            return format!("{} has no {v} variant", self.name());
        };
        let e = self.0.esize();
        let class = path.class(self.0).key();
        let what = if self.0 == Lowp::Int8 { "integer ops, not flops" } else { "flops" };
        let operands = match path {
            Path::Amx => format!(
                "2·{e}·n²·⌈n/{nc}⌉ (packing A per {nc} columns) + (n/32)²·4 KiB·n/{} (A, B tiles) + 64 B",
                self.0.k_step(),
                nc = AmxBlocking::of(self.0).nc
            ),
            _ => {
                let (mr, nr) = path.tile();
                format!("(n/{mr})·(n/{nr})·(n/{})·{} B (B rows, A dwords)", self.0.group(), 4 * (mr + nr))
            }
        };
        format!(
            "W = 2·n³ {what} ({class}); core Q = 2·{e}·n² (packing B) + {operands} + 4·n²·(2·⌈n/{kc}⌉ − 1) (C); \
             DRAM = {}·n² B; n a multiple of {MIN_N}",
            5 * e + 8,
            kc = if path == Path::Amx {
                AmxBlocking::of(self.0).kc
            } else {
                self.0.kc()
            }
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
    fn counts(&self, n: usize, v: Variant) -> Counts {
        counts(self.0, n, Path::of(self.0, v).unwrap_or(Path::Amx))
    }
    fn unavailable(&self, v: Variant) -> Option<String> {
        let unit = Path::of(self.0, v)?.unit(self.0);
        (!unit.available()).then(|| unit.why_unavailable())
    }
    fn instance(&self, n: usize, v: Variant, seed: u64) -> Result<Box<dyn Instance>, String> {
        let path = self.check(n, v)?;
        Ok(Box::new(LowpMats::new(self.0, n, seed, path)?))
    }
    /// The parts of [`split_grid`]: one problem, each team thread its block of C (it packs
    /// its own columns of B: no part waits for another).
    fn split(&self, n: usize, v: Variant, seed: u64, threads: usize) -> Option<Result<Vec<Box<dyn Instance>>, String>> {
        Some((|| {
            let path = self.check(n, v)?;
            let grid = split_grid(n, threads)?;
            let whole = LowpMats::new(self.0, n, seed, path)?;
            grid.into_iter()
                .map(|(rows, cols)| LowpMats::part(&whole, rows, cols).map(|p| Box::new(p) as Box<dyn Instance>))
                .collect()
        })())
    }
}

impl LowpGemm {
    /// The path of variant `v` at order `n`, or why it cannot run here.
    fn check(&self, n: usize, v: Variant) -> Result<Path, String> {
        let Some(path) = Path::of(self.0, v) else {
            return Err(format!(
                "{} has no {v} variant (its variants: {})",
                self.name(),
                self.variants().iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
            ));
        };
        if n < MIN_N || !n.is_multiple_of(MIN_N) {
            return Err(format!(
                "size {n}: {} needs a matrix order that is a multiple of {MIN_N}",
                self.name()
            ));
        }
        let unit = path.unit(self.0);
        if !unit.available() {
            return Err(format!("{} {v}: {}", self.name(), unit.why_unavailable()));
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_loop_nest() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            for n in [64usize, 128, 576, 1024, 1088] {
                let c = counts(kind, n, Path::Amx);
                let n64 = n as u64;
                // 2n³ by tile dot products: (n/16)² tiles of C, n/KS steps, 16·16·KS·2 each.
                let ks = kind.k_step() as u64;
                let tdp = (n64 / 16) * (n64 / 16) * (n64 / ks);
                assert_eq!(c.flops[&kind.class()], tdp * 16 * 16 * ks * 2);
                assert_eq!(c.flops[&kind.class()], 2 * n64 * n64 * n64);
                // Tile loads of A and B: one of each per dot product pair... 4 tiles per step
                // of a 32×32 call = one KiB per tile dot product.
                let blk = AmxBlocking::of(kind);
                let blocks = n.div_ceil(blk.kc) as u64;
                let c_tiles = (n64 / 16) * (n64 / 16);
                let e = kind.esize() as u64;
                // Packing B: each element loaded and stored once; A: once per block of columns.
                let packs = 1 + n.div_ceil(blk.nc) as u64;
                assert_eq!(
                    c.core_load_bytes,
                    packs * n64 * n64 * e + tdp * 1024 + c_tiles * (blocks - 1) * 1024 + 64
                );
                assert_eq!(c.core_store_bytes, packs * n64 * n64 * e + c_tiles * blocks * 1024);
            }
        }
        assert!(Lowp::Int8.class().is_integer());
        assert!(!Lowp::Bf16.class().is_integer());
    }

    #[test]
    fn amx_blockings_are_checked_counted_and_computed() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            let ks = kind.k_step();
            let e = kind.esize() as u64;
            for n in [128usize, 640, 1088] {
                let n64 = n as u64;
                let default = counts(kind, n, Path::Amx);
                assert_eq!(counts_block_with(kind, n, n, n, Path::Amx, AmxBlocking::of(kind)), default);
                // Narrower column blocks pack A once per block; a shallower kc reloads C more.
                let prod = AmxBlocking::of(kind);
                for nc in [32usize, 96, 128] {
                    let blk = AmxBlocking { kc: prod.kc, nc };
                    let c = counts_block_with(kind, n, n, n, Path::Amx, blk);
                    let extra = (n.div_ceil(nc) as u64 - n.div_ceil(prod.nc) as u64) * n64 * n64 * e;
                    assert_eq!(c.core_load_bytes, default.core_load_bytes + extra, "{kind:?} n={n} nc={nc}");
                    assert_eq!(c.core_store_bytes, default.core_store_bytes + extra, "{kind:?} n={n} nc={nc}");
                }
                let shallow = AmxBlocking {
                    kc: prod.kc / 4,
                    nc: prod.nc,
                };
                let c = counts_block_with(kind, n, n, n, Path::Amx, shallow);
                let c_tile_bytes = n64 * n64 * 4;
                let more = (n.div_ceil(prod.kc / 4) - n.div_ceil(prod.kc)) as u64 * c_tile_bytes;
                assert_eq!(c.core_store_bytes - default.core_store_bytes, more, "{kind:?} n={n}");
            }
            let mut m = LowpMats::new(kind, 128, 3, Path::Zmm).unwrap_or_else(|_| LowpMats::new(kind, 128, 3, Path::Amx).unwrap());
            for bad in [
                AmxBlocking { kc: ks + 1, nc: 64 },
                AmxBlocking { kc: 0, nc: 64 },
                AmxBlocking {
                    kc: 2 * AmxBlocking::MAX_KC_BYTES,
                    nc: 64,
                },
                AmxBlocking { kc: ks, nc: 48 },
                AmxBlocking { kc: ks, nc: 0 },
            ] {
                assert!(m.set_amx_blocking(bad).is_err(), "{bad:?}");
            }
            assert!(m.set_amx_blocking(AmxBlocking { kc: ks, nc: 32 }).is_ok());
            // Where AMX runs, every blocking computes the product (n with partial blocks of
            // columns and of k).
            if Path::Amx.unit(kind).available() {
                let seed = crate::rng::fresh_seed();
                for (kc, nc) in [(ks, 32), (AmxBlocking::of(kind).kc, 96), (kind.kc(), 512)] {
                    let mut m = LowpMats::new(kind, 640, seed, Path::Amx).unwrap();
                    m.set_amx_blocking(AmxBlocking { kc, nc }).unwrap();
                    m.verify().unwrap_or_else(|e| panic!("seed {seed} {kind:?} kc={kc} nc={nc}: {e}"));
                }
            }
        }
    }

    /// The SIMD paths, counted by instruction: per micro-kernel call and dword group of k, one
    /// B row load per register of NR columns, one broadcast dword per row of A, and one dot
    /// product per row and register (lanes × 2 × the k values of a dword).
    #[test]
    fn simd_counts_follow_their_micro_kernels() {
        for (kind, path, lanes, reg_bytes) in [
            (Lowp::Bf16, Path::Zmm, 16u64, 64u64),
            (Lowp::Int8, Path::Zmm, 16, 64),
            (Lowp::Int8, Path::Ymm, 8, 32),
        ] {
            let (mr, nr) = path.tile();
            let (mr, nr) = (mr as u64, nr as u64);
            for n in [64usize, 192, 1024, 1536] {
                let n64 = n as u64;
                let c = counts(kind, n, path);
                let g = (4 / kind.esize()) as u64;
                let groups = (n64 / mr) * (n64 / nr) * (n64 / g);
                let regs_per_row = nr / lanes;
                let dots = groups * mr * regs_per_row;
                assert_eq!(c.flops[&path.class(kind)], dots * lanes * 2 * g, "{kind:?} {path:?} n={n}");
                assert_eq!(c.flops[&path.class(kind)], 2 * n64 * n64 * n64);
                assert_eq!(c.flops.len(), 1);
                let blocks = n.div_ceil(kind.kc()) as u64;
                let e = kind.esize() as u64;
                let b_rows = groups * regs_per_row * reg_bytes;
                let a_dwords = groups * mr * 4;
                let c_tiles = (n64 / mr) * (n64 / nr) * mr * nr * 4;
                assert_eq!(c.core_load_bytes, n64 * n64 * e + b_rows + a_dwords + c_tiles * (blocks - 1));
                assert_eq!(c.core_store_bytes, n64 * n64 * e + c_tiles * blocks);
            }
        }
        assert_eq!(
            Path::of(Lowp::Bf16, Variant::Avx2),
            None,
            "no bf16 dot product on ymm without AVX-512"
        );
        assert_eq!(Path::of(Lowp::Int8, Variant::Avx2), Some(Path::Ymm));
    }

    /// The blocks of a split problem cover C once, each a run of whole 32 × 32 blocks, and
    /// the parts' work sums to the problem's; more threads than blocks is refused.
    #[test]
    fn split_parts_cover_c_once_and_sum_to_the_problem() {
        for n in [64usize, 256, 2048] {
            for threads in 1..=20usize {
                let units = n / 32;
                let grid = match split_grid(n, threads) {
                    Ok(g) => g,
                    Err(e) => {
                        assert!(threads > units, "n={n} threads={threads}: {e}");
                        continue;
                    }
                };
                assert_eq!(grid.len(), threads);
                let mut seen = vec![0u8; units * units];
                let mut work = 0u64;
                for ((r0, r1), (c0, c1)) in &grid {
                    assert!(r0 % 32 == 0 && r1 % 32 == 0 && c0 % 32 == 0 && c1 % 32 == 0 && r1 > r0 && c1 > c0);
                    for i in r0 / 32..r1 / 32 {
                        for j in c0 / 32..c1 / 32 {
                            seen[i * units + j] += 1;
                        }
                    }
                    let c = counts_block(Lowp::Bf16, n, r1 - r0, c1 - c0, Path::Amx);
                    work += c.flops[&FlopClass::TileBf16];
                }
                assert!(seen.iter().all(|&x| x == 1), "n={n} threads={threads}: {grid:?}");
                assert_eq!(work, 2 * (n as u64).pow(3));
            }
        }
        assert!(split_grid(64, 5).is_err(), "64 has 2 × 2 blocks of 32");
    }

    /// Where a path's unit exists, every part of a split problem computes its block right
    /// (each part verifies its own block: together all of C).
    #[test]
    fn split_parts_match_the_reference_or_skip() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            let k = LowpGemm(kind);
            for &v in k.variants() {
                if !crate::check::runnable(v) || !Path::of(kind, v).unwrap().unit(kind).available() {
                    assert!(k.split(256, v, 5, 6).unwrap().is_err());
                    continue;
                }
                let mut parts = k.split(256, v, 5, 6).unwrap().unwrap();
                assert_eq!(parts.len(), 6);
                for p in &mut parts {
                    p.verify().unwrap_or_else(|e| panic!("{} {v} split: {e}", k.name()));
                }
            }
        }
    }

    #[test]
    fn sizes_halve_to_valid_sizes() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            let k = LowpGemm(kind);
            for bytes in [1u64 << 16, 1 << 20, 3 << 20, 1 << 26] {
                let n = k.size_for_bytes(bytes);
                assert_eq!(n % (2 * MIN_N), 0);
                assert!(k.instance(n / 2, Variant::Amx, 1).is_ok() || !Path::Amx.unit(kind).available());
            }
            for &v in k.variants() {
                assert!(k.instance(96, v, 1).is_err(), "not a multiple of 64");
            }
            assert!(k.instance(128, Variant::Scalar, 1).err().unwrap().contains("no scalar variant"));
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
                let mut m = LowpMats::new(kind, n, 11 + n as u64, Path::Amx).unwrap();
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

    /// Every variant whose unit this CPU has matches the reference at several orders (AMX on
    /// Sapphire Rapids; the AVX-512 BF16 / VNNI and AVX-VNNI paths there too, and on Zen 4/5);
    /// a variant without its unit is refused with the unit's flag named, and the test says it
    /// skipped.
    #[test]
    fn gemms_match_the_reference_or_skip() {
        for kind in [Lowp::Bf16, Lowp::Int8] {
            let k = LowpGemm(kind);
            for &v in k.variants() {
                let unit = Path::of(kind, v).unwrap().unit(kind);
                if !crate::check::runnable(v) || !unit.available() {
                    let e = k.instance(128, v, 3).err().unwrap();
                    assert!(e.contains(unit.flag()) || e.contains("refused") || e.contains("OS"), "{e}");
                    eprintln!("skipped {} {v}: {e}", k.name());
                    continue;
                }
                for n in [64usize, 128, 192, 640, 1088] {
                    let mut inst = k.instance(n, v, n as u64).unwrap();
                    inst.verify().unwrap_or_else(|e| panic!("{} {v} n={n}: {e}", k.name()));
                }
            }
        }
    }
}
