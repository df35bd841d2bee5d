//! SSE and AVX: the vector registers (seeded lazily from the thread's XSAVE image), MXCSR,
//! and the legacy and VEX instructions modelled.

use iced_x86::{EncodingKind, Instruction, InstructionInfoFactory, Mnemonic, OpKind, Register};
use std::cell::RefCell;
use std::rc::Rc;

use super::{Emu, Flags, mask, sext};
use crate::counters::trace::sys::XsaveLayout;

/// Where the vector registers' values at the trap come from: the thread's XSAVE image, read
/// at most once per trap (`PTRACE_GETREGSET` costs a system call and a copy of a few KiB, so
/// only paths that read a vector value they did not compute pay for it). Shared by every
/// emulation of one trap.
pub struct VectorSeed {
    layout: XsaveLayout,
    load: Box<dyn Fn() -> Option<Vec<u8>>>,
    image: RefCell<Option<Option<Rc<[u8]>>>>,
}

impl VectorSeed {
    pub fn new(layout: XsaveLayout, load: Box<dyn Fn() -> Option<Vec<u8>>>) -> Rc<VectorSeed> {
        Rc::new(VectorSeed {
            layout,
            load,
            image: RefCell::new(None),
        })
    }

    fn image(&self) -> Option<Rc<[u8]>> {
        self.image.borrow_mut().get_or_insert_with(|| (self.load)().map(Rc::from)).clone()
    }

    /// Whether the image was read (the trap's emulation needed a vector value).
    pub fn was_read(&self) -> bool {
        self.image.borrow().is_some()
    }

    /// Bytes of each vector register the CPU has (16 with SSE only, 32 with AVX, 64 with AVX-512).
    fn vlmax(&self) -> usize {
        if self.layout.zmm_hi != 0 {
            64
        } else if self.layout.ymm_hi != 0 {
            32
        } else {
            16
        }
    }
}

/// One vector register along a path: `known` bytes have a value; `fresh` bytes still hold
/// what the thread had at the trap (not yet read from the XSAVE image).
#[derive(Debug, Clone, Copy)]
pub(super) struct VReg {
    pub(super) val: [u8; 64],
    pub(super) known: u64,
    pub(super) fresh: u64,
}

pub(super) const VREG_AT_TRAP: VReg = VReg {
    val: [0; 64],
    known: 0,
    fresh: u64::MAX,
};

/// The low `bytes` bits set.
pub(super) fn low_bits(bytes: usize) -> u64 {
    if bytes >= 64 { u64::MAX } else { (1u64 << bytes) - 1 }
}

pub(super) fn is_vec(r: Register) -> bool {
    r.is_xmm() || r.is_ymm() || r.is_zmm()
}

/// What a lane operation computes per element.
#[derive(Debug, Clone, Copy)]
pub(super) enum Lane {
    Eq,
    GtSigned,
    MinU,
    MaxU,
    MinS,
    MaxS,
    Add,
    Sub,
}

/// Which bitwise operation (`andn` is `!a & b`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Bits {
    And,
    AndN,
    Or,
    Xor,
}

pub(super) fn lane_op(m: Mnemonic) -> Option<(Lane, usize)> {
    use Lane::*;
    use Mnemonic as M;
    Some(match m {
        M::Pcmpeqb | M::Vpcmpeqb => (Eq, 1),
        M::Pcmpeqw | M::Vpcmpeqw => (Eq, 2),
        M::Pcmpeqd | M::Vpcmpeqd => (Eq, 4),
        M::Pcmpeqq | M::Vpcmpeqq => (Eq, 8),
        M::Pcmpgtb | M::Vpcmpgtb => (GtSigned, 1),
        M::Pcmpgtw | M::Vpcmpgtw => (GtSigned, 2),
        M::Pcmpgtd | M::Vpcmpgtd => (GtSigned, 4),
        M::Pcmpgtq | M::Vpcmpgtq => (GtSigned, 8),
        M::Pminub | M::Vpminub => (MinU, 1),
        M::Pminuw | M::Vpminuw => (MinU, 2),
        M::Pminud | M::Vpminud => (MinU, 4),
        M::Pmaxub | M::Vpmaxub => (MaxU, 1),
        M::Pmaxuw | M::Vpmaxuw => (MaxU, 2),
        M::Pmaxud | M::Vpmaxud => (MaxU, 4),
        M::Pminsb | M::Vpminsb => (MinS, 1),
        M::Pminsw | M::Vpminsw => (MinS, 2),
        M::Pminsd | M::Vpminsd => (MinS, 4),
        M::Pmaxsb | M::Vpmaxsb => (MaxS, 1),
        M::Pmaxsw | M::Vpmaxsw => (MaxS, 2),
        M::Pmaxsd | M::Vpmaxsd => (MaxS, 4),
        M::Paddb | M::Vpaddb => (Add, 1),
        M::Paddw | M::Vpaddw => (Add, 2),
        M::Paddd | M::Vpaddd => (Add, 4),
        M::Paddq | M::Vpaddq => (Add, 8),
        M::Psubb | M::Vpsubb => (Sub, 1),
        M::Psubw | M::Vpsubw => (Sub, 2),
        M::Psubd | M::Vpsubd => (Sub, 4),
        M::Psubq | M::Vpsubq => (Sub, 8),
        _ => return None,
    })
}

pub(super) fn bits_op(m: Mnemonic) -> Option<Bits> {
    use Mnemonic as M;
    Some(match m {
        M::Pand | M::Vpand | M::Andps | M::Vandps | M::Andpd | M::Vandpd => Bits::And,
        M::Pandn | M::Vpandn | M::Andnps | M::Vandnps | M::Andnpd | M::Vandnpd => Bits::AndN,
        M::Por | M::Vpor | M::Orps | M::Vorps | M::Orpd | M::Vorpd => Bits::Or,
        M::Pxor | M::Vpxor | M::Xorps | M::Vxorps | M::Xorpd | M::Vxorpd => Bits::Xor,
        _ => return None,
    })
}

/// Legacy SSE and VEX floating-point arithmetic, shuffles and inserts into a vector register:
/// they write their first operand (a register) and nothing else, neither flags nor memory nor
/// another register.
pub(super) fn writes_only_op0(i: &Instruction) -> bool {
    use Mnemonic as M;
    i.op_count() >= 2
        && i.op0_kind() == OpKind::Register
        && is_vec(i.op0_register())
        && matches!(
            i.mnemonic(),
            M::Vfmadd132pd
                | M::Vfmadd213pd
                | M::Vfmadd231pd
                | M::Vfmadd132ps
                | M::Vfmadd213ps
                | M::Vfmadd231ps
                | M::Vfmadd132sd
                | M::Vfmadd213sd
                | M::Vfmadd231sd
                | M::Vfmadd132ss
                | M::Vfmadd213ss
                | M::Vfmadd231ss
                | M::Vfnmadd132pd
                | M::Vfnmadd213pd
                | M::Vfnmadd231pd
                | M::Vfnmadd132ps
                | M::Vfnmadd213ps
                | M::Vfnmadd231ps
                | M::Vfnmadd231sd
                | M::Vfnmadd231ss
                | M::Vfmsub231pd
                | M::Vfmsub231ps
                | M::Vfmaddpd
                | M::Vfmaddps
                | M::Vfnmaddpd
                | M::Vfnmaddps
                | M::Vaddpd
                | M::Vaddps
                | M::Vaddsd
                | M::Vaddss
                | M::Vsubpd
                | M::Vsubps
                | M::Vsubsd
                | M::Vsubss
                | M::Vmulpd
                | M::Vmulps
                | M::Vmulsd
                | M::Vmulss
                | M::Vdivpd
                | M::Vdivsd
                | M::Vbroadcastsd
                | M::Vbroadcastss
                | M::Vmovddup
                | M::Vinsertf128
                | M::Vinsertps
                | M::Vunpcklpd
                | M::Vunpcklps
                | M::Vunpckhpd
                | M::Vunpckhps
                | M::Vshufpd
                | M::Vshufps
                | M::Vpermilpd
                | M::Vpermilps
                | M::Vperm2f128
                | M::Vpermpd
                | M::Vmovlhps
                | M::Vmovhlps
                | M::Vmovhpd
                | M::Vmovlpd
                | M::Vblendpd
                | M::Vblendps
                | M::Addpd
                | M::Addps
                | M::Addsd
                | M::Addss
                | M::Subpd
                | M::Subps
                | M::Subsd
                | M::Subss
                | M::Mulpd
                | M::Mulps
                | M::Mulsd
                | M::Mulss
                | M::Divpd
                | M::Divsd
                | M::Divss
                | M::Sqrtsd
                | M::Unpcklpd
                | M::Unpckhpd
                | M::Unpcklps
                | M::Shufpd
                | M::Shufps
                | M::Movhpd
                | M::Movlpd
                | M::Movhps
                | M::Movlps
                | M::Cvtsi2sd
                | M::Cvtsi2ss
                | M::Cvtss2sd
                | M::Cvtsd2ss
        )
}

/// One element of `e` bytes at element index `k`, zero-extended.
pub(super) fn elem(v: &[u8; 64], k: usize, e: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..e].copy_from_slice(&v[k * e..k * e + e]);
    u64::from_le_bytes(b)
}

pub(super) fn put_elem(v: &mut [u8; 64], k: usize, e: usize, x: u64) {
    v[k * e..k * e + e].copy_from_slice(&x.to_le_bytes()[..e]);
}

/// The bitwise operation `op` on the first `w` bytes of `a` and `b`; the bytes past `w` zero.
pub(super) fn bits(op: Bits, w: usize, a: &[u8; 64], b: &[u8; 64]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for k in 0..w {
        out[k] = match op {
            Bits::And => a[k] & b[k],
            Bits::AndN => !a[k] & b[k],
            Bits::Or => a[k] | b[k],
            Bits::Xor => a[k] ^ b[k],
        };
    }
    out
}

pub(super) fn lanes(op: Lane, e: usize, w: usize, a: &[u8; 64], b: &[u8; 64]) -> [u8; 64] {
    let mut out = [0u8; 64];
    if e == 1 {
        // Bytes, what string functions compare, without the general element path.
        for k in 0..w {
            let (x, y) = (a[k], b[k]);
            let (sx, sy) = (x as i8, y as i8);
            out[k] = match op {
                Lane::Eq => 0u8.wrapping_sub(u8::from(x == y)),
                Lane::GtSigned => 0u8.wrapping_sub(u8::from(sx > sy)),
                Lane::MinU => x.min(y),
                Lane::MaxU => x.max(y),
                Lane::MinS => sx.min(sy) as u8,
                Lane::MaxS => sx.max(sy) as u8,
                Lane::Add => x.wrapping_add(y),
                Lane::Sub => x.wrapping_sub(y),
            };
        }
        return out;
    }
    let bytes = e as u32;
    for k in 0..w / e {
        let (x, y) = (elem(a, k, e), elem(b, k, e));
        let (sx, sy) = (sext(x, bytes) as i64, sext(y, bytes) as i64);
        let r = match op {
            Lane::Eq => {
                if x == y {
                    u64::MAX
                } else {
                    0
                }
            }
            Lane::GtSigned => {
                if sx > sy {
                    u64::MAX
                } else {
                    0
                }
            }
            Lane::MinU => x.min(y),
            Lane::MaxU => x.max(y),
            Lane::MinS => sx.min(sy) as u64,
            Lane::MaxS => sx.max(sy) as u64,
            Lane::Add => x.wrapping_add(y),
            Lane::Sub => x.wrapping_sub(y),
        };
        put_elem(&mut out, k, e, r);
    }
    out
}

/// The class of an IEEE value of `n` bytes (4 or 8) that decides MXCSR's part in an operation.
struct FpClass {
    value: f64,
    nan: bool,
    snan: bool,
    denormal: bool,
}

fn fp_class(bits: u64, n: u32) -> FpClass {
    if n == 4 {
        let x = f32::from_bits(bits as u32);
        let (exp, frac) = ((bits >> 23) & 0xff, bits & 0x7f_ffff);
        FpClass {
            value: f64::from(x),
            nan: x.is_nan(),
            snan: x.is_nan() && frac >> 22 == 0,
            denormal: exp == 0 && frac != 0,
        }
    } else {
        let x = f64::from_bits(bits);
        let (exp, frac) = ((bits >> 52) & 0x7ff, bits & ((1 << 52) - 1));
        FpClass {
            value: x,
            nan: x.is_nan(),
            snan: x.is_nan() && frac >> 51 == 0,
            denormal: exp == 0 && frac != 0,
        }
    }
}

/// Vector register `n` from an XSAVE image: a component whose XSTATE_BV bit is clear is in
/// its initial state (zeros) whatever its bytes in the image hold (kernels before 5.14 copy
/// the area as XSAVEOPT left it).
fn vector_in_image(layout: &XsaveLayout, xs: &[u8], n: usize) -> [u8; 64] {
    let mut v = layout.vector(xs, n);
    let bv = xs
        .get(512..520)
        .map_or(0, |b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]));
    let init = |bit: u32| bv >> bit & 1 == 0;
    if n < 16 {
        if init(1) {
            v[..16].fill(0);
        }
        if init(2) {
            v[16..32].fill(0);
        }
        if init(6) {
            v[32..].fill(0);
        }
    } else if init(7) {
        v.fill(0);
    }
    v
}

/// MXCSR bits the modelled FP instructions depend on.
const MXCSR_DAZ: u32 = 1 << 6;

const MXCSR_IM: u32 = 1 << 7;

const MXCSR_DM: u32 = 1 << 8;

const MXCSR_PM: u32 = 1 << 12;

impl Emu {
    /// Every vector register and MXCSR unknown (after a system call, an XRSTOR, …).
    pub(super) fn forget_vectors(&mut self) {
        for r in &mut self.vregs {
            r.known = 0;
            r.fresh = 0;
        }
        for k in &mut self.kregs {
            k.known = false;
            k.fresh = false;
        }
        self.mxcsr = None;
        self.mxcsr_fresh = false;
        self.mxcsr_flags_known = true;
    }

    /// Fill every byte still `fresh` from the thread's XSAVE image (unknown without one).
    pub(super) fn load_vectors(&mut self) {
        let img = self.vseed.as_ref().and_then(|s| s.image().map(|x| (x, s.layout, s.vlmax())));
        for (n, r) in self.vregs.iter_mut().enumerate() {
            if r.fresh == 0 {
                continue;
            }
            match &img {
                Some((xs, layout, vl)) if n < 16 || layout.hi16_zmm != 0 => {
                    let v = vector_in_image(layout, xs, n);
                    for (b, x) in v.iter().enumerate() {
                        if r.fresh >> b & 1 == 1 {
                            r.val[b] = *x;
                            if b < *vl {
                                r.known |= 1 << b;
                            } else {
                                r.known &= !(1 << b);
                            }
                        }
                    }
                }
                _ => r.known &= !r.fresh,
            }
            r.fresh = 0;
        }
        for (n, k) in self.kregs.iter_mut().enumerate() {
            if !k.fresh {
                continue;
            }
            let v = img.as_ref().and_then(|(xs, layout, _)| opmask_in_image(layout, xs, n));
            k.val = v.unwrap_or(0);
            k.known = v.is_some();
            k.fresh = false;
        }
        if self.mxcsr_fresh {
            self.mxcsr = img.and_then(|(xs, _, _)| xs.get(24..28).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            self.mxcsr_fresh = false;
            self.mxcsr_flags_known = true;
        }
    }

    pub(super) fn mxcsr_now(&mut self) -> Option<u32> {
        if self.mxcsr_fresh {
            self.load_vectors();
        }
        self.mxcsr
    }

    /// The low `len` bytes of vector register `r` when all are known.
    pub(super) fn vread(&mut self, r: Register, len: usize) -> Option<[u8; 64]> {
        let n = r.number();
        let m = low_bits(len);
        if self.vregs[n].fresh & m != 0 {
            self.load_vectors();
        }
        let v = &self.vregs[n];
        (v.known & m == m).then_some(v.val)
    }

    /// Write the low `len` bytes of vector register `n` (None: unknown); with `zero_upper`
    /// (VEX encodings) every byte above is zeroed, else (legacy SSE) kept.
    pub(super) fn vwrite(&mut self, n: usize, data: Option<[u8; 64]>, len: usize, zero_upper: bool) {
        let m = low_bits(len);
        let r = &mut self.vregs[n];
        match data {
            Some(d) => {
                r.val[..len].copy_from_slice(&d[..len]);
                r.known |= m;
            }
            None => r.known &= !m,
        }
        r.fresh &= !m;
        if zero_upper {
            r.val[len..].fill(0);
            r.known |= !m;
            r.fresh = 0;
        }
    }

    /// Write bytes `off..off + len` of vector register `n` (None: unknown), the others kept
    /// (legacy SSE partial moves: `movhpd`, `movlps`, …).
    pub(super) fn vwrite_part(&mut self, n: usize, off: usize, data: Option<&[u8]>, len: usize) {
        let m = low_bits(off + len) & !low_bits(off);
        let r = &mut self.vregs[n];
        match data {
            Some(d) => {
                r.val[off..off + len].copy_from_slice(&d[..len]);
                r.known |= m;
            }
            None => r.known &= !m,
        }
        r.fresh &= !m;
    }

    /// The memory operand's address, None when the instruction would fault on it for
    /// alignment (`align` bytes; such a load is unknown, such a store poisons memory).
    pub(super) fn vector_ea(&self, i: &Instruction, align: usize) -> Option<u64> {
        let a = self.ea(i)?;
        (a % align as u64 == 0).then_some(a)
    }

    /// Operand `o` as `len` bytes: a vector register's low bytes or memory.
    pub(super) fn vsrc(&mut self, i: &Instruction, o: u32, len: usize, align: usize) -> Option<[u8; 64]> {
        match i.op_kind(o) {
            OpKind::Register if is_vec(i.op_register(o)) => self.vread(i.op_register(o), len),
            OpKind::Memory => {
                let a = self.vector_ea(i, align)?;
                self.read_bytes(a, len)
            }
            _ => None,
        }
    }

    /// A vector instruction left to `generic`: it may raise SIMD floating-point exceptions,
    /// so MXCSR's flags become unknown too.
    fn vector_generic(&mut self, i: &Instruction, factory: &mut InstructionInfoFactory) {
        self.mxcsr_flags_known = false;
        self.generic(i, factory);
    }

    /// An instruction that names a vector register (or `vzeroupper`/`vzeroall`): modelled, or
    /// made unknown by `generic`. False when it names none (the integer code handles it).
    pub(super) fn vector_step(&mut self, i: &Instruction, factory: &mut InstructionInfoFactory) -> bool {
        let m = i.mnemonic();
        let names_vector = (0..i.op_count()).any(|o| i.op_kind(o) == OpKind::Register && is_vec(i.op_register(o)));
        let names_k = (0..i.op_count()).any(|o| i.op_kind(o) == OpKind::Register && i.op_register(o).is_k());
        if !names_vector && !names_k && !matches!(m, Mnemonic::Vzeroupper | Mnemonic::Vzeroall) {
            return false;
        }
        let vex = match i.encoding() {
            // The opmask instructions (kmov, kortest, kand, …) are VEX-encoded.
            EncodingKind::VEX if names_k && !names_vector => {
                if !self.k_op(i) {
                    self.vector_generic(i, factory);
                }
                return true;
            }
            EncodingKind::Legacy => false,
            EncodingKind::VEX => true,
            EncodingKind::EVEX => {
                if !self.evex_op(i) {
                    self.vector_generic(i, factory);
                }
                return true;
            }
            // XOP, …: not modelled.
            _ => {
                self.vector_generic(i, factory);
                return true;
            }
        };
        if !self.vector_op(i, vex) {
            if writes_only_op0(i) {
                // (What `generic` would conclude, without asking iced-x86 for the
                // instruction's register and memory use: BLAS kernels are mostly these.)
                self.mxcsr_flags_known = false;
                self.last_generic = Some((i.ip(), i.mnemonic()));
                let n = i.op0_register().number();
                self.vregs[n].known = 0;
                self.vregs[n].fresh = 0;
            } else {
                self.vector_generic(i, factory);
            }
        }
        true
    }

    /// Alignment a legacy SSE memory operand of `len` bytes needs (VEX forms need none but
    /// the aligned moves').
    fn align_of(i: &Instruction, vex: bool, len: usize) -> usize {
        use Mnemonic as M;
        let aligned_move = matches!(
            i.mnemonic(),
            M::Movdqa
                | M::Movaps
                | M::Movapd
                | M::Movntdq
                | M::Movntdqa
                | M::Movntps
                | M::Movntpd
                | M::Vmovdqa
                | M::Vmovaps
                | M::Vmovapd
                | M::Vmovntdq
                | M::Vmovntdqa
                | M::Vmovntps
                | M::Vmovntpd
        );
        let unaligned = matches!(i.mnemonic(), M::Movdqu | M::Movups | M::Movupd | M::Lddqu);
        if aligned_move || (!vex && !unaligned && len == 16) {
            len
        } else {
            1
        }
    }

    /// Model a legacy SSE or VEX instruction; false when this form is not modelled (before
    /// any effect that `generic` would not also undo).
    fn vector_op(&mut self, i: &Instruction, vex: bool) -> bool {
        // Each family models its own mnemonics (no mnemonic is in two).
        self.vector_move(i, vex)
            || self.scalar_move(i, vex)
            || self.vector_shuffle(i, vex)
            || self.vector_lanes(i, vex)
            || self.vector_to_integer(i, vex)
            || self.vector_arith(i, vex)
    }

    /// Whole-register loads, stores and copies, and the legacy moves of one half. False when
    /// `i` is none of these or its form is not modelled.
    fn vector_move(&mut self, i: &Instruction, vex: bool) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register());
        let mem_len = i.memory_size().size();
        match m {
            // Legacy moves of one half: the other half of the register stays.
            M::Movlpd | M::Movlps | M::Movhpd | M::Movhps if !vex && i.op_count() == 2 && mem_len == 8 => {
                let off = if matches!(m, M::Movhpd | M::Movhps) { 8 } else { 0 };
                match (reg0, i.op1_kind()) {
                    (Some(d), OpKind::Memory) if is_vec(d) => {
                        let v = self.ea(i).and_then(|a| self.read_bytes(a, 8));
                        self.vwrite_part(d.number(), off, v.as_ref().map(|b| &b[..8]), 8);
                    }
                    (None, OpKind::Register) if k0 == OpKind::Memory && is_vec(i.op1_register()) => {
                        let v = self.vread(i.op1_register(), 16).map(|b| {
                            let mut h = [0u8; 64];
                            h[..8].copy_from_slice(&b[off..off + 8]);
                            h
                        });
                        let a = self.ea(i);
                        self.write_bytes(a, v, 8);
                    }
                    _ => return false,
                }
            }
            M::Movdqa
            | M::Movdqu
            | M::Movaps
            | M::Movups
            | M::Movapd
            | M::Movupd
            | M::Lddqu
            | M::Movntdqa
            | M::Movntdq
            | M::Movntps
            | M::Movntpd
            | M::Vmovdqa
            | M::Vmovdqu
            | M::Vmovaps
            | M::Vmovups
            | M::Vmovapd
            | M::Vmovupd
            | M::Vlddqu
            | M::Vmovntdqa
            | M::Vmovntdq
            | M::Vmovntps
            | M::Vmovntpd
                if i.op_count() == 2 =>
            {
                match (reg0, i.op1_kind()) {
                    (Some(d), k1) if is_vec(d) && (k1 == OpKind::Register || mem_len == d.size()) => {
                        let w = d.size();
                        let v = self.vsrc(i, 1, w, Self::align_of(i, vex, w));
                        self.vwrite(d.number(), v, w, vex);
                    }
                    (None, OpKind::Register) if k0 == OpKind::Memory && is_vec(i.op1_register()) && mem_len == i.op1_register().size() => {
                        let s = i.op1_register();
                        let w = s.size();
                        let v = self.vread(s, w);
                        let a = self.vector_ea(i, Self::align_of(i, vex, w));
                        self.write_bytes(a, v, w);
                    }
                    _ => return false,
                }
            }
            _ => return false,
        }
        true
    }

    /// Moves of one element: `movd`/`movq` (to and from general registers and memory),
    /// `movss`/`movsd`. False when `i` is none of these or its form is not modelled.
    fn scalar_move(&mut self, i: &Instruction, vex: bool) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register());
        let mem_len = i.memory_size().size();
        match m {
            M::Movd | M::Movq | M::Vmovd | M::Vmovq if i.op_count() == 2 => {
                let n = if matches!(m, M::Movd | M::Vmovd) { 4 } else { 8 };
                match (reg0, i.op1_kind()) {
                    (Some(d), k1) if is_vec(d) => {
                        let v = match k1 {
                            OpKind::Register if is_vec(i.op1_register()) => self.vread(i.op1_register(), n).map(|b| elem(&b, 0, n)),
                            OpKind::Register if i.op1_register().is_gpr() && i.op1_register().size() == n => self.get(i.op1_register()),
                            OpKind::Memory if mem_len == n => self.ea(i).and_then(|a| self.read_mem(a, n as u32)),
                            _ => return false,
                        };
                        let data = v.map(|v| {
                            let mut b = [0u8; 64];
                            put_elem(&mut b, 0, 8, v);
                            b
                        });
                        self.vwrite(d.number(), data, 16, vex);
                    }
                    (_, OpKind::Register) if is_vec(i.op1_register()) => {
                        let v = self.vread(i.op1_register(), n).map(|b| elem(&b, 0, n));
                        match (reg0, k0) {
                            (Some(d), _) if d.is_gpr() && d.size() == n => self.set(d, v),
                            (None, OpKind::Memory) if mem_len == n => {
                                let a = self.ea(i);
                                self.write_mem(a, n as u32, v);
                            }
                            _ => return false,
                        }
                    }
                    _ => return false,
                }
            }
            M::Movss | M::Movsd | M::Vmovss | M::Vmovsd if !i.is_string_instruction() => {
                let n = if matches!(m, M::Movss | M::Vmovss) { 4 } else { 8 };
                match (reg0, i.op_count()) {
                    (Some(d), 2) if is_vec(d) && i.op1_kind() == OpKind::Memory => {
                        // A load zeroes the rest of the low 128 bits.
                        let v = self.vsrc(i, 1, n, 1).map(|b| {
                            let mut z = [0u8; 64];
                            z[..n].copy_from_slice(&b[..n]);
                            z
                        });
                        self.vwrite(d.number(), v, 16, vex);
                    }
                    (Some(d), 2) if is_vec(d) && !vex => {
                        // Register to register (legacy): only the low element moves.
                        let v = self.vsrc(i, 1, n, 1);
                        self.vwrite(d.number(), v, n, false);
                    }
                    (Some(d), 3) if is_vec(d) => {
                        let hi = self.vsrc(i, 1, 16, 1);
                        let lo = self.vsrc(i, 2, n, 1);
                        let v = hi.zip(lo).map(|(mut h, l)| {
                            h[..n].copy_from_slice(&l[..n]);
                            h
                        });
                        self.vwrite(d.number(), v, 16, true);
                    }
                    (None, 2) if k0 == OpKind::Memory && mem_len == n => {
                        let v = self.vsrc(i, 1, n, 1);
                        let a = self.ea(i);
                        self.write_bytes(a, v, n);
                    }
                    _ => return false,
                }
            }
            _ => return false,
        }
        true
    }

    /// Zeroing (`vzeroupper`, `vzeroall`), byte shifts of 128 bits, quadword interleaves and
    /// broadcasts. False when `i` is none of these or its form is not modelled.
    fn vector_shuffle(&mut self, i: &Instruction, vex: bool) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register());
        let mem_len = i.memory_size().size();
        match m {
            M::Vzeroupper | M::Vzeroall => {
                for r in &mut self.vregs[..16] {
                    let keep = if m == M::Vzeroupper { 16 } else { 0 };
                    r.val[keep..].fill(0);
                    r.known |= !low_bits(keep);
                    r.fresh &= low_bits(keep);
                }
            }
            // Byte shifts of the whole 128 bits.
            M::Pslldq | M::Psrldq if !vex && i.op_count() == 2 && i.op1_kind() == OpKind::Immediate8 => {
                let Some(d) = reg0.filter(|d| is_vec(*d)) else { return false };
                let k = (i.immediate8() as usize).min(16);
                let v = self.vread(d, 16).map(|a| {
                    let mut r = [0u8; 64];
                    if m == M::Pslldq {
                        r[k..16].copy_from_slice(&a[..16 - k]);
                    } else {
                        r[..16 - k].copy_from_slice(&a[k..16]);
                    }
                    r
                });
                self.vwrite(d.number(), v, 16, false);
            }
            // Interleave one quadword of each: [dst, src], low or high halves.
            M::Punpcklqdq | M::Punpckhqdq if !vex && i.op_count() == 2 => {
                let Some(d) = reg0.filter(|d| is_vec(*d)) else { return false };
                let off = if m == M::Punpckhqdq { 8 } else { 0 };
                let a = self.vread(d, 16);
                let b = self.vsrc(i, 1, 16, 16);
                let v = a.zip(b).map(|(a, b)| {
                    let mut r = [0u8; 64];
                    r[..8].copy_from_slice(&a[off..off + 8]);
                    r[8..16].copy_from_slice(&b[off..off + 8]);
                    r
                });
                self.vwrite(d.number(), v, 16, false);
            }
            M::Vpbroadcastb | M::Vpbroadcastw | M::Vpbroadcastd | M::Vpbroadcastq if i.op_count() == 2 => {
                let Some(d) = reg0.filter(|d| is_vec(*d)) else { return false };
                let e = match m {
                    M::Vpbroadcastb => 1,
                    M::Vpbroadcastw => 2,
                    M::Vpbroadcastd => 4,
                    _ => 8,
                };
                if i.op1_kind() == OpKind::Memory && mem_len != e {
                    return false;
                }
                let w = d.size();
                let v = self.vsrc(i, 1, e, 1).map(|s| {
                    let mut out = [0u8; 64];
                    for k in 0..w / e {
                        out[k * e..k * e + e].copy_from_slice(&s[..e]);
                    }
                    out
                });
                self.vwrite(d.number(), v, w, true);
            }
            _ => return false,
        }
        true
    }

    /// Element-wise operations: the bitwise ones and the compares, minimums, maximums, additions
    /// and subtractions by lane. False when `i` is none of these or its form is not modelled.
    fn vector_lanes(&mut self, i: &Instruction, vex: bool) -> bool {
        let m = i.mnemonic();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register());
        let mem_len = i.memory_size().size();
        if bits_op(m).is_none() && lane_op(m).is_none() {
            return false;
        }
        let Some(d) = reg0.filter(|d| is_vec(*d)) else { return false };
        let (a_op, b_op) = if vex { (1, 2) } else { (0, 1) };
        if i.op_count() != b_op + 1 || (i.op_kind(b_op) == OpKind::Memory && mem_len != d.size()) {
            return false;
        }
        let w = d.size();
        // The same register twice: `pxor x, x` is zero and `pcmpeqb x, x` all ones
        // whatever x holds.
        let same = i.op_kind(a_op) == OpKind::Register && i.op_kind(b_op) == OpKind::Register && i.op_register(a_op) == i.op_register(b_op);
        let v = match (bits_op(m), lane_op(m)) {
            (Some(Bits::Xor | Bits::AndN), _) if same => Some([0u8; 64]),
            (_, Some((Lane::Eq, _))) if same => Some([0xff; 64]),
            (_, Some((Lane::GtSigned | Lane::Sub, _))) if same => Some([0u8; 64]),
            (op, lane) => {
                let a = self.vsrc(i, a_op, w, 1);
                let b = self.vsrc(i, b_op, w, Self::align_of(i, vex, w));
                a.zip(b).map(|(a, b)| match (op, lane) {
                    (Some(op), _) => bits(op, w, &a, &b),
                    (None, Some((lane, e))) => lanes(lane, e, w, &a, &b),
                    (None, None) => unreachable!("one of bits_op and lane_op matched"),
                })
            }
        };
        self.vwrite(d.number(), v, w, vex);
        true
    }

    /// What leaves the vector registers: sign masks (`pmovmskb`, `movmskp*`) into a general
    /// register, `ptest` and `(u)comis*` into the flags, `cvtts*2si` into a general register.
    /// False when `i` is none of these or its form is not modelled.
    fn vector_to_integer(&mut self, i: &Instruction, vex: bool) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register());
        let mem_len = i.memory_size().size();
        match m {
            M::Pmovmskb | M::Vpmovmskb | M::Movmskps | M::Vmovmskps | M::Movmskpd | M::Vmovmskpd if i.op_count() == 2 => {
                let Some(d) = reg0.filter(|d| d.is_gpr32() || d.is_gpr64()) else {
                    return false;
                };
                if !(i.op1_kind() == OpKind::Register && is_vec(i.op1_register())) {
                    return false;
                }
                let s = i.op1_register();
                let e = match m {
                    M::Pmovmskb | M::Vpmovmskb => 1,
                    M::Movmskps | M::Vmovmskps => 4,
                    _ => 8,
                };
                let w = s.size();
                let v = self
                    .vread(s, w)
                    .map(|b| (0..w / e).fold(0u64, |acc, k| acc | (u64::from(b[k * e + e - 1] >> 7) << k)));
                self.set(d, v);
            }
            M::Ptest | M::Vptest if i.op_count() == 2 && reg0.is_some_and(is_vec) => {
                let w = i.op0_register().size();
                if i.op1_kind() == OpKind::Memory && mem_len != w {
                    return false;
                }
                let a = self.vsrc(i, 0, w, 1);
                let b = self.vsrc(i, 1, w, Self::align_of(i, vex, w));
                self.flags = match a.zip(b) {
                    Some((a, b)) => Flags {
                        zf: Some((0..w).all(|k| a[k] & b[k] == 0)),
                        cf: Some((0..w).all(|k| !a[k] & b[k] == 0)),
                        of: Some(false),
                        sf: Some(false),
                        pf: Some(false),
                    },
                    None => Flags::default(),
                };
            }
            M::Ucomisd | M::Comisd | M::Ucomiss | M::Comiss | M::Vucomisd | M::Vcomisd | M::Vucomiss | M::Vcomiss
                if i.op_count() == 2 && reg0.is_some_and(is_vec) =>
            {
                let n = if matches!(m, M::Ucomiss | M::Comiss | M::Vucomiss | M::Vcomiss) {
                    4
                } else {
                    8
                };
                if i.op1_kind() == OpKind::Memory && mem_len != n {
                    return false;
                }
                let signaling = matches!(m, M::Comisd | M::Comiss | M::Vcomisd | M::Vcomiss);
                let a = self.vsrc(i, 0, n, 1).map(|b| elem(&b, 0, n));
                let b = self.vsrc(i, 1, n, 1).map(|b| elem(&b, 0, n));
                let order = match (a, b) {
                    (Some(a), Some(b)) => self.fp_compare(a, b, n as u32, signaling),
                    _ => None,
                };
                // Unordered: ZF PF CF = 111; greater 000; less 001; equal 100; OF SF AF = 0.
                self.flags = match order {
                    Some(o) => {
                        let (zf, pf, cf) = match o {
                            None => (true, true, true),
                            Some(std::cmp::Ordering::Greater) => (false, false, false),
                            Some(std::cmp::Ordering::Less) => (false, false, true),
                            Some(std::cmp::Ordering::Equal) => (true, false, false),
                        };
                        Flags {
                            zf: Some(zf),
                            pf: Some(pf),
                            cf: Some(cf),
                            of: Some(false),
                            sf: Some(false),
                        }
                    }
                    None => Flags::default(),
                };
            }
            M::Cvttsd2si | M::Cvttss2si | M::Vcvttsd2si | M::Vcvttss2si if i.op_count() == 2 => {
                let Some(d) = reg0.filter(|d| d.is_gpr32() || d.is_gpr64()) else {
                    return false;
                };
                let n = if matches!(m, M::Cvttss2si | M::Vcvttss2si) { 4 } else { 8 };
                if i.op1_kind() == OpKind::Memory && mem_len != n {
                    return false;
                }
                let x = self.vsrc(i, 1, n, 1).map(|b| elem(&b, 0, n));
                let v = x.and_then(|x| self.truncate(x, n as u32, d.size() as u32));
                self.set(d, v);
            }
            _ => return false,
        }
        true
    }

    /// `(u)comis*`: the order of two scalars (Some(None): unordered), None where MXCSR would
    /// decide and is unknown, or where the CPU would raise an unmasked exception instead.
    pub(super) fn fp_compare(&mut self, a: u64, b: u64, n: u32, signaling: bool) -> Option<Option<std::cmp::Ordering>> {
        // (The flags a compare raises are not followed.)
        self.mxcsr_flags_known = false;
        let (x, y) = (fp_class(a, n), fp_class(b, n));
        let invalid = (x.nan || y.nan) && (signaling || x.snan || y.snan);
        let denormal = x.denormal || y.denormal;
        if invalid || denormal {
            let csr = self.mxcsr_now()?;
            if invalid && csr & MXCSR_IM == 0 {
                return None;
            }
            // With DAZ a denormal operand is zero (which compares equal to any zero, as the
            // denormal's sign does not matter); without it, #D must be masked.
            if denormal && csr & MXCSR_DAZ == 0 && csr & MXCSR_DM == 0 {
                return None;
            }
            if denormal && csr & MXCSR_DAZ != 0 {
                let z = |c: &FpClass| if c.denormal { 0.0 } else { c.value };
                return Some(z(&x).partial_cmp(&z(&y)));
            }
        }
        Some(x.value.partial_cmp(&y.value))
    }

    /// `cvtts*2si`: the truncated integer of `dst` bytes (the "integer indefinite" 1 << 31 or
    /// 1 << 63 for NaN and out of range), None where MXCSR would decide and is unknown or the
    /// CPU would raise an unmasked exception.
    fn truncate(&mut self, bits: u64, n: u32, dst: u32) -> Option<u64> {
        // (The flags a conversion raises are not followed.)
        self.mxcsr_flags_known = false;
        let c = fp_class(bits, n);
        let limit = 2f64.powi(8 * dst as i32 - 1);
        let indefinite = 1u64 << (8 * dst - 1);
        let x = if c.denormal {
            let csr = self.mxcsr_now()?;
            if csr & MXCSR_DAZ != 0 { 0.0 } else { c.value }
        } else {
            c.value
        };
        if c.nan || !(x.trunc() >= -limit && x.trunc() < limit) {
            let csr = self.mxcsr_now()?;
            return (csr & MXCSR_IM != 0).then_some(indefinite);
        }
        let t = x.trunc();
        if t != x {
            let csr = self.mxcsr_now()?;
            if csr & MXCSR_PM == 0 {
                return None;
            }
        }
        Some((t as i64 as u64) & mask(dst))
    }
}

/// Opmask register k`n` from an XSAVE image (zero while the component is in its initial
/// state, XSTATE_BV bit 5 clear; None without AVX-512).
pub(super) fn opmask_in_image(layout: &XsaveLayout, xs: &[u8], n: usize) -> Option<u64> {
    let v = layout.opmask(xs, n as u8)?;
    let bv = xs.get(512..520).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    Some(if bv >> 5 & 1 == 0 { 0 } else { v })
}
