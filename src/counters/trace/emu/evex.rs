//! AVX-512: the opmask registers, the opmask instructions and the EVEX forms modelled.

use iced_x86::{Instruction, Mnemonic, OpKind, Register};

use super::vector::{Bits, Lane, bits, bits_op, elem, is_vec, lane_op, lanes, put_elem};
use super::{Emu, Flags, mask, sext};

/// One opmask register (k0–k7) along a path: `fresh` while it still holds what the thread
/// had at the trap (not yet read from the XSAVE image).
#[derive(Debug, Clone, Copy)]
pub(super) struct KReg {
    pub(super) val: u64,
    pub(super) known: bool,
    pub(super) fresh: bool,
}

pub(super) const KREG_AT_TRAP: KReg = KReg {
    val: 0,
    known: false,
    fresh: true,
};

/// A compare of two elements (values zero-extended, their width in bytes) into one mask bit.
type ElemPredicate = fn(u64, u64, u32) -> bool;

/// The index of opmask register `r` (k0–k7).
pub(super) fn k_index(r: Register) -> usize {
    (r as usize - Register::K0 as usize) & 7
}

/// The EVEX bitwise operations (element size matters only under a mask, not modelled).
fn evex_bits_op(m: Mnemonic) -> Option<Bits> {
    use Mnemonic as M;
    Some(match m {
        M::Vpandd | M::Vpandq => Bits::And,
        M::Vpandnd | M::Vpandnq => Bits::AndN,
        M::Vpord | M::Vporq => Bits::Or,
        M::Vpxord | M::Vpxorq => Bits::Xor,
        _ => return bits_op(m),
    })
}

/// The compares into an opmask by kind (0: `f` decides; 1 and 2: `vpcmp*` and `vpcmpu*`,
/// signed and unsigned, by the predicate in the immediate) and predicate.
fn evex_compare_of(m: Mnemonic) -> Option<(usize, ElemPredicate)> {
    use Mnemonic as M;
    match m {
        M::Vpcmpeqb | M::Vpcmpeqw | M::Vpcmpeqd | M::Vpcmpeqq => Some((0, |x, y, _| x == y)),
        M::Vpcmpgtb | M::Vpcmpgtw | M::Vpcmpgtd | M::Vpcmpgtq => Some((0, |x, y, n| (sext(x, n) as i64) > (sext(y, n) as i64))),
        M::Vptestmb | M::Vptestmw | M::Vptestmd | M::Vptestmq => Some((0, |x, y, _| x & y != 0)),
        M::Vptestnmb | M::Vptestnmw | M::Vptestnmd | M::Vptestnmq => Some((0, |x, y, _| x & y == 0)),
        M::Vpcmpb | M::Vpcmpw | M::Vpcmpd | M::Vpcmpq => Some((1, |_, _, _| false)),
        M::Vpcmpub | M::Vpcmpuw | M::Vpcmpud | M::Vpcmpuq => Some((2, |_, _, _| false)),
        _ => None,
    }
}

/// The element size (bytes) an EVEX move's masking works in.
fn elem_of(m: Mnemonic) -> usize {
    use Mnemonic as M;
    match m {
        M::Vmovdqu8 => 1,
        M::Vmovdqu16 => 2,
        M::Vmovdqu32 | M::Vmovdqa32 | M::Vmovups | M::Vmovaps => 4,
        _ => 8,
    }
}

impl Emu {
    /// Opmask register k`k` as the next instruction reads it, when known (the run-ahead reads
    /// the masks of masked instructions before stepping them, `Tracer::run_ahead_from`).
    pub fn opmask(&mut self, k: u8) -> Option<u64> {
        self.kregs.get(usize::from(k))?;
        self.kread(usize::from(k))
    }

    /// Opmask register k`n` when known.
    pub(super) fn kread(&mut self, n: usize) -> Option<u64> {
        if self.kregs[n].fresh {
            self.load_vectors();
        }
        let k = self.kregs[n];
        k.known.then_some(k.val)
    }

    pub(super) fn kwrite(&mut self, n: usize, v: Option<u64>) {
        self.kregs[n] = KReg {
            val: v.unwrap_or(0),
            known: v.is_some(),
            fresh: false,
        };
    }

    /// The opmask instructions (VEX-encoded, k registers only or with a general register or
    /// memory); false when this form is not modelled (nothing changed yet).
    pub(super) fn k_op(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        // The operation width in bits, from the mnemonic's last letter.
        let bits = match m {
            M::Kmovb
            | M::Kortestb
            | M::Ktestb
            | M::Kandb
            | M::Kandnb
            | M::Korb
            | M::Kxorb
            | M::Kxnorb
            | M::Knotb
            | M::Kshiftlb
            | M::Kshiftrb
            | M::Kaddb => 8,
            M::Kmovw
            | M::Kortestw
            | M::Ktestw
            | M::Kandw
            | M::Kandnw
            | M::Korw
            | M::Kxorw
            | M::Kxnorw
            | M::Knotw
            | M::Kshiftlw
            | M::Kshiftrw
            | M::Kaddw
            | M::Kunpckbw => 16,
            M::Kmovd
            | M::Kortestd
            | M::Ktestd
            | M::Kandd
            | M::Kandnd
            | M::Kord
            | M::Kxord
            | M::Kxnord
            | M::Knotd
            | M::Kshiftld
            | M::Kshiftrd
            | M::Kaddd
            | M::Kunpckwd => 32,
            M::Kmovq
            | M::Kortestq
            | M::Ktestq
            | M::Kandq
            | M::Kandnq
            | M::Korq
            | M::Kxorq
            | M::Kxnorq
            | M::Knotq
            | M::Kshiftlq
            | M::Kshiftrq
            | M::Kaddq
            | M::Kunpckdq => 64,
            _ => return false,
        };
        let wm = mask(bits / 8);
        let kreg = |o: u32| (i.op_kind(o) == OpKind::Register && i.op_register(o).is_k()).then(|| k_index(i.op_register(o)));
        match m {
            M::Kmovb | M::Kmovw | M::Kmovd | M::Kmovq if i.op_count() == 2 => match (kreg(0), i.op0_kind(), i.op1_kind()) {
                (Some(d), _, OpKind::Register) if i.op1_register().is_k() => {
                    let v = self.kread(k_index(i.op1_register())).map(|v| v & wm);
                    self.kwrite(d, v);
                }
                (Some(d), _, OpKind::Register) if i.op1_register().is_gpr() => {
                    let v = self.get(i.op1_register()).map(|v| v & wm);
                    self.kwrite(d, v);
                }
                (Some(d), _, OpKind::Memory) => {
                    let v = self.ea(i).and_then(|a| self.read_mem(a, bits / 8));
                    self.kwrite(d, v);
                }
                (None, OpKind::Register, OpKind::Register) if i.op0_register().is_gpr() && i.op1_register().is_k() => {
                    // (To a 32-bit register: zero-extended like any 32-bit write.)
                    let v = self.kread(k_index(i.op1_register())).map(|v| v & wm);
                    self.set(i.op0_register(), v);
                }
                (None, OpKind::Memory, OpKind::Register) if i.op1_register().is_k() => {
                    let v = self.kread(k_index(i.op1_register())).map(|v| v & wm);
                    let a = self.ea(i);
                    self.write_mem(a, bits / 8, v);
                }
                _ => return false,
            },
            M::Kortestb | M::Kortestw | M::Kortestd | M::Kortestq | M::Ktestb | M::Ktestw | M::Ktestd | M::Ktestq => {
                let (Some(a), Some(b)) = (kreg(0), kreg(1)) else { return false };
                let (x, y) = (self.kread(a), self.kread(b));
                let ortest = matches!(m, M::Kortestb | M::Kortestw | M::Kortestd | M::Kortestq);
                // kortest: ZF when (a|b) is all zeros, CF when all ones; ktest: ZF when a&b is
                // zero, CF when !a&b is. OF SF AF PF cleared.
                let (zf, cf) = match (x, y) {
                    (Some(x), Some(y)) if ortest => (Some((x | y) & wm == 0), Some((x | y) & wm == wm)),
                    (Some(x), Some(y)) => (Some(x & y & wm == 0), Some(!x & y & wm == 0)),
                    _ => (None, None),
                };
                self.flags = Flags {
                    zf,
                    cf,
                    of: Some(false),
                    sf: Some(false),
                    pf: Some(false),
                };
            }
            M::Knotb | M::Knotw | M::Knotd | M::Knotq => {
                let (Some(d), Some(a)) = (kreg(0), kreg(1)) else { return false };
                let v = self.kread(a).map(|v| !v & wm);
                self.kwrite(d, v);
            }
            M::Kshiftlb | M::Kshiftlw | M::Kshiftld | M::Kshiftlq | M::Kshiftrb | M::Kshiftrw | M::Kshiftrd | M::Kshiftrq => {
                let (Some(d), Some(a)) = (kreg(0), kreg(1)) else { return false };
                let n = u32::from(i.immediate8());
                let left = matches!(m, M::Kshiftlb | M::Kshiftlw | M::Kshiftld | M::Kshiftlq);
                let v = self.kread(a).map(|v| match (n >= bits, left) {
                    (true, _) => 0,
                    (false, true) => (v << n) & wm,
                    (false, false) => (v & wm) >> n,
                });
                self.kwrite(d, v);
            }
            _ => {
                let (Some(d), Some(a), Some(b)) = (kreg(0), kreg(1), kreg(2)) else {
                    return false;
                };
                let v = self.kread(a).zip(self.kread(b)).map(|(x, y)| match m {
                    M::Kandb | M::Kandw | M::Kandd | M::Kandq => x & y,
                    M::Kandnb | M::Kandnw | M::Kandnd | M::Kandnq => !x & y,
                    M::Korb | M::Korw | M::Kord | M::Korq => x | y,
                    M::Kxorb | M::Kxorw | M::Kxord | M::Kxorq => x ^ y,
                    M::Kxnorb | M::Kxnorw | M::Kxnord | M::Kxnorq => !(x ^ y),
                    M::Kaddb | M::Kaddw | M::Kaddd | M::Kaddq => x.wrapping_add(y),
                    // kunpck: the low halves of both sources, the first one's above.
                    _ => {
                        let h = bits / 2;
                        ((x & mask(h / 8)) << h) | (y & mask(h / 8))
                    }
                } & wm);
                self.kwrite(d, v);
            }
        }
        true
    }

    /// EVEX-encoded (AVX-512) forms: moves, bitwise and lane operations, compares into an
    /// opmask, broadcasts; an opmask on a move or compare is applied (merging or zeroing).
    /// False when not modelled (before any effect), e.g. broadcasts, embedded rounding, other
    /// masked operations, 512-bit forms where the XSAVE area has no zmm upper halves.
    pub(super) fn evex_op(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        if i.is_broadcast() || i.rounding_control() != iced_x86::RoundingControl::None || i.suppress_all_exceptions() {
            return false;
        }
        if let Some(cmp) = evex_compare_of(m) {
            return self.evex_compare(i, cmp);
        }
        let masked = i.op_mask() != Register::None;
        match m {
            M::Vmovdqu8
            | M::Vmovdqu16
            | M::Vmovdqu32
            | M::Vmovdqu64
            | M::Vmovdqa32
            | M::Vmovdqa64
            | M::Vmovups
            | M::Vmovaps
            | M::Vmovupd
            | M::Vmovapd
                if i.op_count() == 2 =>
            {
                self.evex_move(i)
            }
            M::Vpbroadcastb | M::Vpbroadcastw | M::Vpbroadcastd | M::Vpbroadcastq if i.op_count() == 2 && !masked => self.evex_broadcast(i),
            M::Vpternlogd | M::Vpternlogq if i.op_count() == 4 && !masked => self.evex_ternlog(i),
            _ if !masked && (evex_bits_op(m).is_some() || lane_op(m).is_some()) => self.evex_lanes(i),
            _ => false,
        }
    }

    /// A compare into an opmask (`vpcmpeq*`, `vpcmpgt*`, `vptestm*`, `vptestnm*`, `vpcmp*`,
    /// `vpcmpu*`): one bit per element, zero above, and-ed with the mask.
    fn evex_compare(&mut self, i: &Instruction, (kind, f): (usize, ElemPredicate)) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let mem_len = i.memory_size().size();
        if !(i.op0_kind() == OpKind::Register && i.op0_register().is_k()) || i.op_count() < 3 {
            return false;
        }
        let e = match m {
            M::Vpcmpeqb | M::Vpcmpgtb | M::Vptestmb | M::Vptestnmb | M::Vpcmpb | M::Vpcmpub => 1,
            M::Vpcmpeqw | M::Vpcmpgtw | M::Vptestmw | M::Vptestnmw | M::Vpcmpw | M::Vpcmpuw => 2,
            M::Vpcmpeqd | M::Vpcmpgtd | M::Vptestmd | M::Vptestnmd | M::Vpcmpd | M::Vpcmpud => 4,
            _ => 8,
        };
        let w = i.op1_register().size();
        if !is_vec(i.op1_register()) || (i.op2_kind() == OpKind::Memory && mem_len != w) {
            return false;
        }
        let a = self.vsrc(i, 1, w, 1);
        let b = self.vsrc(i, 2, w, 1);
        let k = self.evex_mask(i);
        let imm = if kind == 0 { 0 } else { i.immediate8() & 7 };
        let v = a.zip(b).zip(k).map(|((a, b), k)| {
            let mut bits = 0u64;
            for j in 0..w / e {
                let (x, y) = (elem(&a, j, e), elem(&b, j, e));
                let t = match kind {
                    0 => f(x, y, e as u32),
                    _ => {
                        let (lt, eq) = if kind == 1 {
                            ((sext(x, e as u32) as i64) < (sext(y, e as u32) as i64), x == y)
                        } else {
                            (x < y, x == y)
                        };
                        match imm {
                            0 => eq,
                            1 => lt,
                            2 => lt || eq,
                            3 => false,
                            4 => !eq,
                            5 => !lt,
                            6 => !(lt || eq),
                            _ => true,
                        }
                    }
                };
                bits |= u64::from(t) << j;
            }
            bits & k
        });
        self.kwrite(k_index(i.op0_register()), v);
        true
    }

    /// Whole-register moves: loads (masked ones read only their active elements), stores
    /// (masked ones write only their active elements) and copies, merging or zeroing.
    fn evex_move(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let mem_len = i.memory_size().size();
        let masked = i.op_mask() != Register::None;
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register()).filter(|r| is_vec(*r));
        let aligned = matches!(m, M::Vmovdqa32 | M::Vmovdqa64 | M::Vmovaps | M::Vmovapd);
        match (reg0, i.op1_kind()) {
            (Some(d), k1) if k1 == OpKind::Register || mem_len == d.size() => {
                let w = d.size();
                if k1 == OpKind::Register && !is_vec(i.op1_register()) {
                    return false;
                }
                let src = if masked && k1 == OpKind::Memory {
                    // Masked-off elements are not read (and cannot fault): read the
                    // active ones only, the others count as zero.
                    let e = elem_of(m);
                    let a = self.vector_ea(i, if aligned { w } else { 1 });
                    match (a, self.evex_mask(i)) {
                        (Some(a), Some(k)) => {
                            let mut out = Some([0u8; 64]);
                            for j in 0..w / e {
                                if k >> j & 1 == 1 {
                                    let x = self.read_mem(a.wrapping_add((j * e) as u64), e as u32);
                                    out = out.zip(x).map(|(mut o, x)| {
                                        put_elem(&mut o, j, e, x);
                                        o
                                    });
                                }
                            }
                            out
                        }
                        _ => None,
                    }
                } else {
                    self.vsrc(i, 1, w, if aligned { w } else { 1 })
                };
                let v = if masked { self.apply_mask(i, d, src, elem_of(m), w) } else { src };
                self.vwrite(d.number(), v, w, true);
            }
            (None, OpKind::Register)
                if k0 == OpKind::Memory && is_vec(i.op1_register()) && mem_len == i.op1_register().size() && !masked =>
            {
                let s = i.op1_register();
                let w = s.size();
                let v = self.vread(s, w);
                let a = self.vector_ea(i, if aligned { w } else { 1 });
                self.write_bytes(a, v, w);
            }
            // A masked store (glibc's `*_evex` memcpy and memset tails): only the active
            // elements are written; the others keep their bytes (and cannot fault).
            (None, OpKind::Register)
                if k0 == OpKind::Memory && is_vec(i.op1_register()) && mem_len == i.op1_register().size() && !i.zeroing_masking() =>
            {
                let s = i.op1_register();
                let (w, e) = (s.size(), elem_of(m));
                let v = self.vread(s, w);
                let a = self.vector_ea(i, if aligned { w } else { 1 });
                match (a, self.evex_mask(i)) {
                    (Some(a), Some(k)) => {
                        for j in 0..w / e {
                            if k >> j & 1 == 1 {
                                self.write_mem(Some(a.wrapping_add((j * e) as u64)), e as u32, v.map(|v| elem(&v, j, e)));
                            }
                        }
                    }
                    // (Which bytes it writes is unknown: all of them unknown.)
                    (Some(a), None) => self.write_mem(Some(a), w as u32, None),
                    (None, _) => self.write_mem(None, w as u32, None),
                }
            }
            _ => return false,
        }
        true
    }

    /// `vpbroadcast*` from a general register, memory or a vector register, unmasked.
    fn evex_broadcast(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let mem_len = i.memory_size().size();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register()).filter(|r| is_vec(*r));
        let Some(d) = reg0 else { return false };
        let e = match m {
            M::Vpbroadcastb => 1,
            M::Vpbroadcastw => 2,
            M::Vpbroadcastd => 4,
            _ => 8,
        };
        let src = match i.op1_kind() {
            OpKind::Register if i.op1_register().is_gpr() => self.get(i.op1_register()).map(|x| {
                let mut b = [0u8; 64];
                put_elem(&mut b, 0, 8, x);
                b
            }),
            OpKind::Memory if mem_len == e => self.vsrc(i, 1, e, 1),
            OpKind::Register if is_vec(i.op1_register()) => self.vsrc(i, 1, e, 1),
            _ => return false,
        };
        let w = d.size();
        let v = src.map(|s| {
            let mut out = [0u8; 64];
            for k in 0..w / e {
                out[k * e..k * e + e].copy_from_slice(&s[..e]);
            }
            out
        });
        self.vwrite(d.number(), v, w, true);
        true
    }

    /// `vpternlogd`/`vpternlogq`, unmasked.
    fn evex_ternlog(&mut self, i: &Instruction) -> bool {
        let mem_len = i.memory_size().size();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register()).filter(|r| is_vec(*r));
        let Some(d) = reg0 else { return false };
        let w = d.size();
        if i.op2_kind() == OpKind::Memory && mem_len != w {
            return false;
        }
        let imm = i.immediate8();
        let (a, b, c) = (self.vread(d, w), self.vsrc(i, 1, w, 1), self.vsrc(i, 2, w, 1));
        // Bit j of the result is bit (a<<2 | b<<1 | c) of the immediate, a the destination.
        let v = a.zip(b).zip(c).map(|((a, b), c)| {
            let mut out = [0u8; 64];
            for k in 0..w {
                let mut r = 0u8;
                for idx in 0..8u8 {
                    if imm >> idx & 1 == 1 {
                        let pa = if idx & 4 != 0 { a[k] } else { !a[k] };
                        let pb = if idx & 2 != 0 { b[k] } else { !b[k] };
                        let pc = if idx & 1 != 0 { c[k] } else { !c[k] };
                        r |= pa & pb & pc;
                    }
                }
                out[k] = r;
            }
            out
        });
        self.vwrite(d.number(), v, w, true);
        true
    }

    /// The bitwise and element-wise lane operations, unmasked.
    fn evex_lanes(&mut self, i: &Instruction) -> bool {
        let m = i.mnemonic();
        let mem_len = i.memory_size().size();
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register()).filter(|r| is_vec(*r));
        let Some(d) = reg0 else { return false };
        if i.op_count() != 3 || (i.op2_kind() == OpKind::Memory && mem_len != d.size()) {
            return false;
        }
        let w = d.size();
        let same = i.op1_kind() == OpKind::Register && i.op2_kind() == OpKind::Register && i.op1_register() == i.op2_register();
        let v = match (evex_bits_op(m), lane_op(m)) {
            (Some(Bits::Xor | Bits::AndN), _) if same => Some([0u8; 64]),
            (_, Some((Lane::Sub, _))) if same => Some([0u8; 64]),
            (op, lane) => {
                let a = self.vsrc(i, 1, w, 1);
                let b = self.vsrc(i, 2, w, 1);
                a.zip(b).map(|(a, b)| match (op, lane) {
                    (Some(op), _) => bits(op, w, &a, &b),
                    (None, Some((lane, e))) => lanes(lane, e, w, &a, &b),
                    (None, None) => [0u8; 64],
                })
            }
        };
        self.vwrite(d.number(), v, w, true);
        true
    }

    /// The instruction's opmask (all ones without one), when known.
    fn evex_mask(&mut self, i: &Instruction) -> Option<u64> {
        let op_mask = i.op_mask();
        if op_mask != Register::None {
            self.kread(k_index(op_mask))
        } else {
            Some(u64::MAX)
        }
    }

    /// `src` under the instruction's opmask, elements of `e` bytes: masked-off ones zero
    /// (`{z}`) or kept from the destination (merging). None when the mask or a kept byte is
    /// unknown.
    fn apply_mask(&mut self, i: &Instruction, d: Register, src: Option<[u8; 64]>, e: usize, w: usize) -> Option<[u8; 64]> {
        let k = self.kread(k_index(i.op_mask()))?;
        let old = if i.zeroing_masking() { Some([0u8; 64]) } else { self.vread(d, w) }?;
        let src = src?;
        let mut out = old;
        for j in 0..w / e {
            if k >> j & 1 == 1 {
                out[j * e..j * e + e].copy_from_slice(&src[j * e..j * e + e]);
            }
        }
        Some(out)
    }
}
