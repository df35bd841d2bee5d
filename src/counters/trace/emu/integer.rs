//! General-purpose integer instructions by family: moves, additions and subtractions, logic and
//! bits, shifts and rotates, multiplies and divides; the arithmetic flags they set.

use iced_x86::{ConditionCode, Instruction, Mnemonic, OpKind, Register};

use super::{Emu, Flags, mask, sext, sign};

fn is_cmov(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Cmovo
            | Cmovno
            | Cmovb
            | Cmovae
            | Cmove
            | Cmovne
            | Cmovbe
            | Cmova
            | Cmovs
            | Cmovns
            | Cmovp
            | Cmovnp
            | Cmovl
            | Cmovge
            | Cmovle
            | Cmovg
    )
}

fn is_setcc(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Seto | Setno | Setb | Setae | Sete | Setne | Setbe | Seta | Sets | Setns | Setp | Setnp | Setl | Setge | Setle | Setg
    )
}

impl Emu {
    pub(super) fn logic_flags(&mut self, r: Option<u64>, bytes: u32) {
        self.flags = match r {
            Some(r) => Flags {
                cf: Some(false),
                of: Some(false),
                zf: Some(r & mask(bytes) == 0),
                sf: Some(sign(r, bytes)),
                pf: Some((r as u8).count_ones().is_multiple_of(2)),
            },
            None => Flags::default(),
        };
    }

    pub(super) fn add_flags(&mut self, a: Option<u64>, b: Option<u64>, bytes: u32, sub: bool, keep_cf: bool) -> Option<u64> {
        let cf = self.flags.cf;
        let (Some(a), Some(b)) = (a, b) else {
            self.flags = Flags::default();
            if keep_cf {
                self.flags.cf = cf;
            }
            return None;
        };
        let m = mask(bytes);
        let (a, b) = (a & m, b & m);
        let r = if sub { a.wrapping_sub(b) } else { a.wrapping_add(b) } & m;
        let carry = if sub { a < b } else { (a as u128 + b as u128) > m as u128 };
        let of = if sub {
            sign((a ^ b) & (a ^ r), bytes)
        } else {
            sign((a ^ r) & (b ^ r), bytes)
        };
        self.flags = Flags {
            cf: if keep_cf { cf } else { Some(carry) },
            zf: Some(r == 0),
            sf: Some(sign(r, bytes)),
            of: Some(of),
            pf: Some((r as u8).count_ones().is_multiple_of(2)),
        };
        Some(r)
    }

    /// Moves and conversions that set no flags: `mov`, `movzx`/`movsx`, `lea`, `movbe`, `cmovcc`,
    /// `setcc`, the accumulator's sign extensions, `xchg`. False when `i` is none of these or
    /// its form is not modelled (nothing changed).
    pub(super) fn move_op(&mut self, i: &Instruction, m: Mnemonic, b0: Option<u32>) -> bool {
        use Mnemonic as M;

        match (m, b0) {
            (M::Mov, Some(n)) if i.op_count() == 2 => {
                let src_ok = match i.op1_kind() {
                    OpKind::Register | OpKind::Memory => Self::op_bytes(i, 1) == Some(n),
                    _ => true,
                };
                if !src_ok {
                    return false;
                }
                let v = self.operand(i, 1, n);
                self.store(i, 0, n, v);
            }
            (M::Movzx | M::Movsx | M::Movsxd, Some(n)) if i.op0_kind() == OpKind::Register => {
                let Some(s) = Self::op_bytes(i, 1) else {
                    return false;
                };
                let v = self.operand(i, 1, s);
                let v = if m == M::Movzx { v } else { v.map(|v| sext(v, s) & mask(n)) };
                self.set(i.op0_register(), v);
            }
            (M::Lea, Some(n)) if i.op0_kind() == OpKind::Register => {
                let v = self.ea_lea(i).map(|v| v & mask(n));
                self.set(i.op0_register(), v);
            }
            (M::Movbe, Some(n)) if i.op_count() == 2 && matches!(n, 2 | 4 | 8) => {
                let v = self.operand(i, 1, n).map(|v| (v & mask(n)).swap_bytes() >> (64 - 8 * n));
                self.store(i, 0, n, v);
            }
            _ if i.op_count() == 2 && i.condition_code() != ConditionCode::None && is_cmov(m) => {
                let Some(n) = b0 else { return false };
                let c = self.condition(i.condition_code());
                let src = self.operand(i, 1, n);
                let dst = self.get(i.op0_register());
                // (A 32-bit cmov zero-extends its destination whether it moves or not: `set`.)
                let v = match c {
                    Some(true) => src,
                    Some(false) => dst,
                    None => None,
                };
                self.set(i.op0_register(), v);
            }
            _ if i.op_count() == 1 && i.condition_code() != ConditionCode::None && is_setcc(m) => {
                let c = self.condition(i.condition_code());
                self.store(i, 0, 1, c.map(u64::from));
            }
            (M::Cbw | M::Cwde | M::Cdqe, _) => {
                // ax/eax/rax = sign extension of al/ax/eax.
                let (from, to) = match m {
                    M::Cbw => (1, Register::AX),
                    M::Cwde => (2, Register::EAX),
                    _ => (4, Register::RAX),
                };
                let v = self.regs[0].map(|a| sext(a & mask(from), from) & mask(to.size() as u32));
                self.set(to, v);
            }
            (M::Cwd | M::Cdq | M::Cqo, _) => {
                // dx/edx/rdx = the sign of ax/eax/rax, repeated.
                let (n, to) = match m {
                    M::Cwd => (2, Register::DX),
                    M::Cdq => (4, Register::EDX),
                    _ => (8, Register::RDX),
                };
                let v = self.regs[0].map(|a| if sign(a, n) { mask(n) } else { 0 });
                self.set(to, v);
            }
            (M::Xchg, Some(n)) if i.op_count() == 2 && i.op1_kind() == OpKind::Register => {
                let a = self.operand(i, 0, n);
                let b = self.operand(i, 1, n);
                self.store(i, 0, n, b);
                self.set(i.op1_register(), a);
            }
            _ => return false,
        }
        true
    }

    /// Additions and subtractions and the flags they set: `add`, `sub`, `cmp`, `inc`, `dec`, `neg`,
    /// `adc`, `sbb`, `cmpxchg`, `xadd`. False when `i` is none of these or its form is not
    /// modelled (nothing changed).
    pub(super) fn add_sub_op(&mut self, i: &Instruction, m: Mnemonic, b0: Option<u32>) -> bool {
        use Mnemonic as M;

        match (m, b0) {
            (M::Add | M::Sub | M::Cmp, Some(n)) if i.op_count() == 2 => {
                let a = self.operand(i, 0, n);
                let b = self.operand(i, 1, n);
                let r = self.add_flags(a, b, n, m != M::Add, false);
                if m != M::Cmp {
                    self.store(i, 0, n, r);
                }
            }
            (M::Inc | M::Dec, Some(n)) => {
                let a = self.operand(i, 0, n);
                let r = self.add_flags(a, Some(1), n, m == M::Dec, true);
                self.store(i, 0, n, r);
            }
            (M::Neg, Some(n)) if i.op_count() == 1 => {
                let a = self.operand(i, 0, n);
                let r = self.add_flags(Some(0), a, n, true, false);
                self.store(i, 0, n, r);
            }
            (M::Adc | M::Sbb, Some(n)) if i.op_count() == 2 => {
                self.add_with_carry(i, m, n);
            }
            (M::Cmpxchg, Some(n)) if i.op_count() == 2 && i.op1_kind() == OpKind::Register => {
                self.compare_exchange(i, n);
            }
            (M::Xadd, Some(n)) if i.op_count() == 2 && i.op1_kind() == OpKind::Register => {
                let dst = self.operand(i, 0, n);
                let src = self.get(i.op1_register());
                let r = self.add_flags(dst, src, n, false, false);
                self.set(i.op1_register(), dst);
                self.store(i, 0, n, r);
            }
            _ => return false,
        }
        true
    }

    /// Bitwise logic and single bits: `and`, `or`, `xor`, `test`, `not`, bit scans and counts,
    /// `bzhi`, `bt`/`bts`/`btr`/`btc`, `blsmsk`/`blsr`/`blsi`. False when `i` is none of these or
    /// its form is not modelled (nothing changed).
    pub(super) fn logic_op(&mut self, i: &Instruction, m: Mnemonic, b0: Option<u32>) -> bool {
        use Mnemonic as M;

        match (m, b0) {
            (M::And | M::Or | M::Xor | M::Test, Some(n)) if i.op_count() == 2 => {
                // xor r, r is zero whatever r holds.
                let same = i.op0_kind() == OpKind::Register && i.op1_kind() == OpKind::Register && i.op0_register() == i.op1_register();
                let a = self.operand(i, 0, n);
                let b = self.operand(i, 1, n);
                let r = match (m, a, b) {
                    (M::Xor, _, _) if same => Some(0),
                    (_, Some(a), Some(b)) => Some(match m {
                        M::And | M::Test => a & b,
                        M::Or => a | b,
                        _ => a ^ b,
                    }),
                    _ => None,
                };
                self.logic_flags(r, n);
                if m != M::Test {
                    self.store(i, 0, n, r);
                }
            }
            (M::Not, Some(n)) if i.op_count() == 1 => {
                let a = self.operand(i, 0, n);
                self.store(i, 0, n, a.map(|a| !a & mask(n)));
            }
            (M::Tzcnt | M::Lzcnt | M::Bsf | M::Bsr, Some(n)) if i.op_count() == 2 && i.op0_kind() == OpKind::Register => {
                self.bit_scan(i, m, n);
            }
            (M::Bzhi, Some(n)) if i.op_count() == 3 && i.op2_kind() == OpKind::Register => {
                let src = self.operand(i, 1, n);
                let idx = self.get(i.op2_register()).map(|v| (v & 0xff) as u32);
                let bits = 8 * n;
                let r = match (src, idx) {
                    (Some(v), Some(k)) => Some(if k < bits { v & ((1u64 << k) - 1) } else { v & mask(n) }),
                    _ => None,
                };
                self.logic_flags(r, n);
                self.flags.cf = idx.map(|k| k > bits - 1);
                self.flags.pf = None;
                self.set(i.op0_register(), r);
            }
            (M::Bt, Some(n)) if i.op_count() == 2 && i.op0_kind() == OpKind::Register => {
                // (Register bit base only: a memory base with a register offset addresses a
                // bit string beyond the operand.)
                let a = self.get(i.op0_register());
                let k = self.operand(i, 1, n);
                // CF = the bit (offset modulo the operand width); ZF unchanged; OF SF PF undefined.
                self.flags.cf = a.zip(k).map(|(a, k)| (a >> (k % (8 * u64::from(n)))) & 1 == 1);
                self.flags.of = None;
                self.flags.sf = None;
                self.flags.pf = None;
            }
            (M::Bts | M::Btr | M::Btc, Some(n)) if i.op_count() == 2 && i.op0_kind() == OpKind::Register => {
                let d = i.op0_register();
                let a = self.get(d);
                let k = self.operand(i, 1, n).map(|k| k % (8 * u64::from(n)));
                self.flags.cf = a.zip(k).map(|(a, k)| (a >> k) & 1 == 1);
                self.flags.of = None;
                self.flags.sf = None;
                self.flags.pf = None;
                let r = a.zip(k).map(|(a, k)| match m {
                    M::Bts => a | 1 << k,
                    M::Btr => a & !(1 << k),
                    _ => a ^ 1 << k,
                });
                self.set(d, r);
            }
            (M::Blsmsk | M::Blsr | M::Blsi, Some(n)) if i.op_count() == 2 && i.op0_kind() == OpKind::Register => {
                self.lowest_set_bit_op(i, m, n);
            }
            _ => return false,
        }
        true
    }

    /// Shifts and rotates by an immediate or cl, and the BMI2 shifts by a register. False when
    /// `i` is none of these or its form is not modelled (nothing changed).
    pub(super) fn shift_op(&mut self, i: &Instruction, m: Mnemonic, b0: Option<u32>) -> bool {
        use Mnemonic as M;

        match (m, b0) {
            (M::Shl | M::Shr | M::Sar, Some(n))
                if i.op_count() == 2
                    && (i.op1_kind() == OpKind::Immediate8 || (i.op1_kind() == OpKind::Register && i.op1_register() == Register::CL)) =>
            {
                self.shift(i, m, n);
            }
            // Rotates (SipHash in CPython's `_Py_HashBytes`, other hashes): CF from the result,
            // OF for a count of 1, ZF SF PF unchanged; a count of 0 (after masking) changes nothing.
            (M::Rol | M::Ror, Some(n))
                if i.op_count() == 2
                    && (i.op1_kind() == OpKind::Immediate8 || (i.op1_kind() == OpKind::Register && i.op1_register() == Register::CL)) =>
            {
                self.rotate(i, m, n);
            }
            (M::Shlx | M::Shrx | M::Sarx, Some(n)) if i.op_count() == 3 && i.op2_kind() == OpKind::Register => {
                let a = self.operand(i, 1, n);
                let c = self.get(i.op2_register()).map(|c| (c as u32) & if n == 8 { 63 } else { 31 });
                let r = match (a, c) {
                    (Some(a), Some(c)) => Some(
                        (match m {
                            M::Shlx => a << c,
                            M::Shrx => a >> c,
                            _ => ((sext(a, n) as i64) >> c) as u64,
                        }) & mask(n),
                    ),
                    _ => None,
                };
                self.set(i.op0_register(), r);
            }
            _ => return false,
        }
        true
    }

    /// Multiplies and divides: `imul` of two or three operands, and the one-operand forms on
    /// rdx:rax (edx:eax). False when `i` is none of these or its form is not modelled (nothing
    /// changed).
    pub(super) fn mul_div_op(&mut self, i: &Instruction, m: Mnemonic, b0: Option<u32>) -> bool {
        use Mnemonic as M;

        match (m, b0) {
            (M::Imul, Some(n)) if (i.op_count() == 2 || i.op_count() == 3) && i.op0_kind() == OpKind::Register => {
                self.imul_truncated(i, n);
            }
            // One-operand multiply and divide on rdx:rax (edx:eax): compilers use them for
            // division by constants (`mul` high half) and `%`. 8- and 16-bit forms (AH, DX:AX)
            // go to `generic`.
            (M::Mul | M::Imul, Some(n @ (4 | 8))) if i.op_count() == 1 => {
                self.mul_wide(i, m, n);
            }
            (M::Div | M::Idiv, Some(n @ (4 | 8))) if i.op_count() == 1 => {
                self.div_wide(i, m, n);
            }
            _ => return false,
        }
        true
    }

    /// `shl`, `shr`, `sar` by an immediate or cl: ZF SF PF from the result, CF OF unknown.
    fn shift(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let count = if i.op1_kind() == OpKind::Immediate8 {
            Some(i.immediate(1))
        } else {
            self.get(Register::CL)
        };
        let a = self.operand(i, 0, n);
        let Some(count) = count else {
            // A count of 0 would leave everything as it was: unknown either way.
            self.unknown_flags();
            self.store(i, 0, n, None);
            return;
        };
        let c = (count as u32) & if n == 8 { 63 } else { 31 };
        if c == 0 {
            // (As for rotates: a 32-bit register is written, zero-extended.)
            if n == 4 && i.op0_kind() == OpKind::Register {
                self.set(i.op0_register(), a.map(|a| a & mask(4)));
            }
            return;
        }
        let r = a.map(|a| {
            let a = a & mask(n);
            (match m {
                M::Shl => a.checked_shl(c).unwrap_or(0),
                M::Shr => a.checked_shr(c).unwrap_or(0),
                _ => ((sext(a, n) as i64) >> c.min(63)) as u64,
            }) & mask(n)
        });
        // CF/OF after shifts: not modelled; ZF/SF/PF from the result.
        self.logic_flags(r, n);
        self.flags.cf = None;
        self.flags.of = None;
        self.store(i, 0, n, r);
    }

    /// `rol`, `ror` by an immediate or cl.
    fn rotate(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let count = if i.op1_kind() == OpKind::Immediate8 {
            Some(i.immediate(1))
        } else {
            self.get(Register::CL)
        };
        let a = self.operand(i, 0, n);
        let Some(count) = count else {
            self.flags.cf = None;
            self.flags.of = None;
            self.store(i, 0, n, None);
            return;
        };
        let c = (count as u32) & if n == 8 { 63 } else { 31 };
        if c == 0 {
            // (Flags as they were; a 32-bit register is still written: zero-extended.)
            if n == 4 && i.op0_kind() == OpKind::Register {
                self.set(i.op0_register(), a.map(|a| a & mask(4)));
            }
            return;
        }
        let bits = 8 * n;
        let r = a.map(|a| {
            let a = a & mask(n);
            let k = c % bits;
            if k == 0 {
                a
            } else if m == M::Rol {
                ((a << k) | (a >> (bits - k))) & mask(n)
            } else {
                ((a >> k) | (a << (bits - k))) & mask(n)
            }
        });
        let msb = |r: u64| (r >> (bits - 1)) & 1 == 1;
        let cf = r.map(|r| if m == M::Rol { r & 1 == 1 } else { msb(r) });
        let of = match (r, cf) {
            (Some(r), Some(cf)) if c == 1 => Some(if m == M::Rol {
                msb(r) ^ cf
            } else {
                msb(r) ^ ((r >> (bits - 2)) & 1 == 1)
            }),
            _ => None,
        };
        self.flags.cf = cf;
        self.flags.of = of;
        self.store(i, 0, n, r);
    }

    /// `imul` of two or three operands: the product truncated to `n` bytes.
    fn imul_truncated(&mut self, i: &Instruction, n: u32) {
        let (a, b) = if i.op_count() == 3 {
            (self.operand(i, 1, n), self.operand(i, 2, n))
        } else {
            (self.operand(i, 0, n), self.operand(i, 1, n))
        };
        let (r, overflow) = match (a, b) {
            (Some(a), Some(b)) => {
                let full = i128::from(sext(a, n) as i64) * i128::from(sext(b, n) as i64);
                let r = (full as u64) & mask(n);
                (Some(r), Some(full != i128::from(sext(r, n) as i64)))
            }
            _ => (None, None),
        };
        // CF = OF = the signed product does not fit; SF, ZF, PF undefined.
        self.flags = Flags {
            cf: overflow,
            of: overflow,
            ..Flags::default()
        };
        self.set(i.op0_register(), r);
    }

    /// One-operand `mul`/`imul` of `n` (4 or 8) bytes: the double-width product in rdx:rax (edx:eax).
    fn mul_wide(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let (a, b) = (self.get(if n == 8 { Register::RAX } else { Register::EAX }), self.operand(i, 0, n));
        let bits = 8 * n;
        let (lo, hi, overflow) = match (a, b) {
            (Some(a), Some(b)) if m == M::Mul => {
                let full = u128::from(a & mask(n)) * u128::from(b & mask(n));
                let hi = ((full >> bits) as u64) & mask(n);
                ((full as u64) & mask(n), hi, hi != 0)
            }
            (Some(a), Some(b)) => {
                let full = i128::from(sext(a, n) as i64) * i128::from(sext(b, n) as i64);
                let lo = (full as u64) & mask(n);
                ((lo), ((full >> bits) as u64) & mask(n), full != i128::from(sext(lo, n) as i64))
            }
            _ => {
                self.set(if n == 8 { Register::RAX } else { Register::EAX }, None);
                self.set(if n == 8 { Register::RDX } else { Register::EDX }, None);
                self.unknown_flags();
                return;
            }
        };
        // CF = OF = the high half is significant; SF, ZF, PF undefined.
        self.flags = Flags {
            cf: Some(overflow),
            of: Some(overflow),
            ..Flags::default()
        };
        self.set(if n == 8 { Register::RAX } else { Register::EAX }, Some(lo));
        self.set(if n == 8 { Register::RDX } else { Register::EDX }, Some(hi));
    }

    /// One-operand `div`/`idiv` of `n` (4 or 8) bytes: rdx:rax (edx:eax) by the operand.
    fn div_wide(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let (rax, rdx) = if n == 8 {
            (Register::RAX, Register::RDX)
        } else {
            (Register::EAX, Register::EDX)
        };
        let (lo, hi, d) = (self.get(rax), self.get(rdx), self.operand(i, 0, n));
        let bits = 8 * n;
        // (None also where the CPU raises #DE: a zero divisor or a quotient too wide.)
        let qr = match (lo, hi, d) {
            (Some(lo), Some(hi), Some(d)) if m == M::Div => {
                let num = (u128::from(hi & mask(n)) << bits) | u128::from(lo & mask(n));
                let d = u128::from(d & mask(n));
                (d != 0 && num / d <= u128::from(mask(n))).then(|| ((num / d) as u64, (num % d) as u64))
            }
            (Some(lo), Some(hi), Some(d)) => {
                let num = (((u128::from(hi & mask(n)) << bits) | u128::from(lo & mask(n))) << (128 - 2 * bits)) as i128 >> (128 - 2 * bits);
                let d = i128::from(sext(d, n) as i64);
                let q = if d == 0 { None } else { num.checked_div(d) };
                let lim = 1i128 << (bits - 1);
                q.filter(|q| *q >= -lim && *q < lim)
                    .map(|q| ((q as u64) & mask(n), ((num - q * d) as u64) & mask(n)))
            }
            _ => None,
        };
        self.unknown_flags();
        self.set(rax, qr.map(|x| x.0));
        self.set(rdx, qr.map(|x| x.1));
    }

    /// `adc`/`sbb`: the carry flag in, all flags out (unknown with an unknown carry).
    fn add_with_carry(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let a = self.operand(i, 0, n);
        let b = self.operand(i, 1, n);
        let r = match (a, b, self.flags.cf) {
            (Some(a), Some(b), Some(c)) => {
                let (a, b, c) = (a & mask(n), b & mask(n), u64::from(c));
                let m_ = mask(n);
                let (r, carry) = if m == M::Adc {
                    let wide = u128::from(a) + u128::from(b) + u128::from(c);
                    ((wide as u64) & m_, wide > u128::from(m_))
                } else {
                    (
                        a.wrapping_sub(b).wrapping_sub(c) & m_,
                        u128::from(a) < u128::from(b) + u128::from(c),
                    )
                };
                let (sa, sb, sr) = (sign(a, n), sign(b, n), sign(r, n));
                let of = if m == M::Adc { sa == sb && sr != sa } else { sa != sb && sr != sa };
                self.flags = Flags {
                    cf: Some(carry),
                    of: Some(of),
                    zf: Some(r == 0),
                    sf: Some(sr),
                    pf: Some((r as u8).count_ones().is_multiple_of(2)),
                };
                Some(r)
            }
            _ => {
                self.unknown_flags();
                None
            }
        };
        self.store(i, 0, n, r);
    }

    /// `tzcnt`, `lzcnt`, `bsf`, `bsr`.
    fn bit_scan(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let src = self.operand(i, 1, n).map(|v| v & mask(n));
        let bits = 8 * n;
        self.unknown_flags();
        match (m, src) {
            (_, None) => self.set(i.op0_register(), None),
            (M::Tzcnt | M::Lzcnt, Some(v)) => {
                let r = if m == M::Tzcnt {
                    if v == 0 { bits } else { v.trailing_zeros() }
                } else {
                    v.leading_zeros() - (64 - bits)
                };
                self.flags.cf = Some(v == 0);
                self.flags.zf = Some(r == 0);
                self.set(i.op0_register(), Some(u64::from(r)));
            }
            (_, Some(0)) => {
                // The destination is left as it was by the CPUs this runs on, but the
                // manuals call it undefined: unknown.
                self.flags.zf = Some(true);
                self.set(i.op0_register(), None);
            }
            (_, Some(v)) => {
                let r = if m == M::Bsf { v.trailing_zeros() } else { 63 - v.leading_zeros() };
                self.flags.zf = Some(false);
                self.set(i.op0_register(), Some(u64::from(r)));
            }
        }
    }

    /// `blsmsk`, `blsr`, `blsi`: the lowest set bit of the source as a mask, cleared, or isolated.
    fn lowest_set_bit_op(&mut self, i: &Instruction, m: Mnemonic, n: u32) {
        use Mnemonic as M;
        let v = self.operand(i, 1, n).map(|v| v & mask(n));
        let r = v.map(|v| {
            let r = match m {
                M::Blsmsk => v ^ v.wrapping_sub(1),
                M::Blsr => v & v.wrapping_sub(1),
                _ => v & v.wrapping_neg(),
            };
            r & mask(n)
        });
        // ZF SF from the result (blsmsk: ZF cleared), OF cleared, CF from the source
        // (blsi: source not zero; the others: source zero), PF undefined.
        self.logic_flags(r, n);
        self.flags.pf = None;
        if m == M::Blsmsk {
            self.flags.zf = r.map(|_| false);
        }
        self.flags.cf = v.map(|v| if m == M::Blsi { v != 0 } else { v == 0 });
        self.set(i.op0_register(), r);
    }

    /// `cmpxchg` of `n` bytes.
    fn compare_exchange(&mut self, i: &Instruction, n: u32) {
        // Compare rax with the destination: equal, the destination takes the source;
        // not, rax takes the destination. Flags as `cmp rax, dst`.
        let acc = match n {
            1 => Register::AL,
            2 => Register::AX,
            4 => Register::EAX,
            _ => Register::RAX,
        };
        let dst = self.operand(i, 0, n);
        let src = self.get(i.op1_register());
        self.add_flags(self.get(acc), dst, n, true, false);
        match self.flags.zf {
            Some(true) => self.store(i, 0, n, src),
            // (The destination is written back unchanged; a register destination
            // keeps its upper half.)
            Some(false) => self.set(acc, dst),
            None => {
                self.store(i, 0, n, None);
                self.set(acc, None);
            }
        }
    }
}
