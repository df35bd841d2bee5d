//! Run-ahead: a small, conservative emulator of general-purpose integer code, used by the
//! driver at a block trap to decide where the thread will go next without trapping again.
//!
//! From the registers at the trap it follows the blocks the thread is about to run, computing
//! the values of general-purpose registers, the arithmetic flags and the memory it reads (from
//! the tracee, or from what the path itself stored). Anything it does not model exactly
//! becomes *unknown*: a register written by an instruction it does not emulate, the flags after
//! one, a load after a store to an unknown address. A conditional branch, return or indirect
//! jump whose outcome depends on something unknown ends the path, so the driver only ever
//! skips traps whose outcome is certain (the tracee is single-threaded in block mode, and
//! nothing else runs between the trap and the path's execution).

use iced_x86::{ConditionCode, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use super::sys::Memory;

/// Arithmetic flags, each possibly unknown.
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    cf: Option<bool>,
    zf: Option<bool>,
    sf: Option<bool>,
    of: Option<bool>,
    pf: Option<bool>,
}

fn gpr_index(r: Register) -> Option<usize> {
    use Register::*;
    Some(match r.full_register() {
        RAX => 0,
        RCX => 1,
        RDX => 2,
        RBX => 3,
        RSP => 4,
        RBP => 5,
        RSI => 6,
        RDI => 7,
        R8 => 8,
        R9 => 9,
        R10 => 10,
        R11 => 11,
        R12 => 12,
        R13 => 13,
        R14 => 14,
        R15 => 15,
        _ => return Option::None,
    })
}

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

fn high8(r: Register) -> bool {
    matches!(r, Register::AH | Register::BH | Register::CH | Register::DH)
}

fn mask(bytes: u32) -> u64 {
    if bytes >= 8 { u64::MAX } else { (1u64 << (8 * bytes)) - 1 }
}

fn sign(v: u64, bytes: u32) -> bool {
    (v >> (8 * bytes - 1)) & 1 == 1
}

fn sext(v: u64, bytes: u32) -> u64 {
    if bytes >= 8 {
        v
    } else {
        let s = 64 - 8 * bytes;
        (((v << s) as i64) >> s) as u64
    }
}

/// Words of memory a path may store before the emulator stops tracking memory (a long loop
/// writing an array): loads then become unknown, which ends a path only where a branch or an
/// address depends on one.
const MAX_OVERLAY_WORDS: usize = 1 << 18;

/// Eight bytes of the path's view of memory: `present` bytes were stored by the path or read
/// from the tracee, `known` ones have a value (a vector store's bytes are present, unknown).
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    val: u64,
    present: u8,
    known: u8,
}

/// A multiplicative hash of a word index (the default SipHash dominated long paths).
#[derive(Default)]
struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95).rotate_left(26);
    }
}

/// The emulated state of one thread along a path.
pub struct Emu {
    regs: [Option<u64>; 16],
    flags: Flags,
    fs: u64,
    gs: u64,
    /// Memory the path stored or read from the tracee, by 8-byte word (`address >> 3`).
    overlay: HashMap<u64, Word, BuildHasherDefault<WordHasher>>,
    /// A store went to an unknown address: no memory value is known any more.
    poisoned: bool,
    /// The last instruction not modelled (its results became unknown): what a path that ends
    /// on an unknown branch most likely ends on (`ROOFLINE_TRACE_DEBUG`).
    pub last_generic: Option<(u64, Mnemonic)>,
    mem: Rc<Memory>,
}

impl Emu {
    pub fn new(regs: &nix::libc::user_regs_struct, mem: Rc<Memory>) -> Emu {
        let r = [
            regs.rax, regs.rcx, regs.rdx, regs.rbx, regs.rsp, regs.rbp, regs.rsi, regs.rdi, regs.r8, regs.r9, regs.r10, regs.r11, regs.r12,
            regs.r13, regs.r14, regs.r15,
        ];
        let fl = regs.eflags;
        let bit = |b: u32| Some(fl >> b & 1 == 1);
        Emu {
            regs: r.map(Some),
            flags: Flags {
                cf: bit(0),
                pf: bit(2),
                zf: bit(6),
                sf: bit(7),
                of: bit(11),
            },
            fs: regs.fs_base,
            gs: regs.gs_base,
            overlay: HashMap::with_capacity_and_hasher(256, Default::default()),
            poisoned: false,
            last_generic: None,
            mem,
        }
    }

    /// Value of a general register now (None: unknown), zero-extended from its width.
    pub fn reg(&self, r: Register) -> Option<u64> {
        self.get(r)
    }

    /// The sixteen general registers in `user_regs_struct` order of `Emu::new` (rax, rcx, rdx,
    /// rbx, rsp, rbp, rsi, rdi, r8..r15), each None where unknown.
    pub fn gprs(&self) -> [Option<u64>; 16] {
        self.regs
    }

    /// Value of a register operand (any GPR width but the high bytes), zero-extended.
    fn get(&self, r: Register) -> Option<u64> {
        if high8(r) {
            return None;
        }
        let v = self.regs[gpr_index(r)?]?;
        Some(v & mask(r.size() as u32))
    }

    /// Write a register with x86 semantics: 32-bit writes zero-extend, 8/16-bit ones merge.
    fn set(&mut self, r: Register, v: Option<u64>) {
        let Some(i) = gpr_index(r) else { return };
        if high8(r) {
            self.regs[i] = None;
            return;
        }
        let sz = r.size() as u32;
        self.regs[i] = match (sz, v) {
            (_, None) => None,
            (8, Some(v)) => Some(v),
            (4, Some(v)) => Some(v & 0xffff_ffff),
            (_, Some(v)) => self.regs[i].map(|old| (old & !mask(sz)) | (v & mask(sz))),
        };
    }

    fn unknown_flags(&mut self) {
        self.flags = Flags::default();
    }

    /// One byte of memory as the path sees it: stored by the path (None: value unknown), or
    /// the tracee's, read 256 bytes at a time (one syscall for the stack slots and array
    /// elements a path reads near each other). None when unreadable or unknown.
    fn byte(&mut self, a: u64) -> Option<u8> {
        let bit = 1u8 << (a & 7);
        if let Some(w) = self.overlay.get(&(a >> 3))
            && w.present & bit != 0
        {
            return (w.known & bit != 0).then(|| (w.val >> (8 * (a & 7))) as u8);
        }
        // Four lines at once: the stack slots a path reads (saved registers, return addresses,
        // spilled locals) usually span several.
        let line = a & !255;
        let mut buf = [0u8; 256];
        let n = self.mem.read(line, &mut buf);
        if n <= (a - line) as usize {
            return None;
        }
        // Fill what the path has not stored itself.
        for (k, chunk) in buf[..n].chunks(8).enumerate() {
            let w = self.overlay.entry((line >> 3) + k as u64).or_default();
            for (j, x) in chunk.iter().enumerate() {
                let b = 1u8 << j;
                if w.present & b == 0 {
                    w.present |= b;
                    w.known |= b;
                    w.val = (w.val & !(0xff << (8 * j))) | (u64::from(*x) << (8 * j));
                }
            }
        }
        self.byte(a)
    }

    fn read_mem(&mut self, addr: u64, bytes: u32) -> Option<u64> {
        if self.poisoned || bytes == 0 || bytes > 8 {
            return None;
        }
        // The common case: an aligned-enough value inside one word already known.
        let off = addr & 7;
        if off + u64::from(bytes) <= 8
            && let Some(w) = self.overlay.get(&(addr >> 3))
        {
            let bits = (((1u16 << bytes) - 1) << off) as u8;
            if w.present & bits == bits {
                if w.known & bits != bits {
                    return None;
                }
                return Some((w.val >> (8 * off)) & mask(bytes));
            }
        }
        let mut v = 0u64;
        for k in 0..u64::from(bytes) {
            v |= u64::from(self.byte(addr.wrapping_add(k))?) << (8 * k);
        }
        Some(v)
    }

    fn write_mem(&mut self, addr: Option<u64>, bytes: u32, v: Option<u64>) {
        if self.poisoned {
            // Nothing will be read from memory any more: what is stored does not matter.
            return;
        }
        let Some(a) = addr else {
            self.poisoned = true;
            return;
        };
        if bytes == 0 || bytes > 64 || self.overlay.len() > MAX_OVERLAY_WORDS {
            self.poisoned = true;
            return;
        }
        for k in 0..u64::from(bytes) {
            let at = a.wrapping_add(k);
            let bit = 1u8 << (at & 7);
            let w = self.overlay.entry(at >> 3).or_default();
            w.present |= bit;
            match v.filter(|_| k < 8) {
                Some(v) => {
                    w.known |= bit;
                    let sh = 8 * (at & 7);
                    w.val = (w.val & !(0xff << sh)) | (((v >> (8 * k)) & 0xff) << sh);
                }
                None => w.known &= !bit,
            }
        }
    }

    /// The effective address of the instruction's memory operand.
    fn ea(&self, i: &Instruction) -> Option<u64> {
        let base = i.memory_base();
        let index = i.memory_index();
        if index.is_vector_register() {
            return None;
        }
        let mut a = i.memory_displacement64();
        if base != Register::None && base != Register::RIP && base != Register::EIP {
            a = a.wrapping_add(self.get(base)?);
        }
        if index != Register::None {
            a = a.wrapping_add(self.get(index)?.wrapping_mul(u64::from(i.memory_index_scale())));
        }
        match i.memory_segment() {
            Register::FS => a = a.wrapping_add(self.fs),
            Register::GS => a = a.wrapping_add(self.gs),
            _ => {}
        }
        if i.memory_base().is_gpr32() {
            a &= 0xffff_ffff;
        }
        Some(a)
    }

    /// Value of operand `o` (register, immediate or memory) at `bytes` width.
    fn operand(&mut self, i: &Instruction, o: u32, bytes: u32) -> Option<u64> {
        match i.op_kind(o) {
            OpKind::Register => self.get(i.op_register(o)),
            OpKind::Memory => {
                let a = self.ea(i)?;
                self.read_mem(a, bytes)
            }
            OpKind::Immediate8
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate64
            | OpKind::Immediate8to16
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64 => Some(i.immediate(o) & mask(bytes)),
            _ => None,
        }
    }

    fn op_bytes(i: &Instruction, o: u32) -> Option<u32> {
        match i.op_kind(o) {
            OpKind::Register => {
                let r = i.op_register(o);
                (r.is_gpr() && !high8(r)).then_some(r.size() as u32)
            }
            OpKind::Memory => {
                let s = i.memory_size().size() as u32;
                matches!(s, 1 | 2 | 4 | 8).then_some(s)
            }
            _ => None,
        }
    }

    fn store(&mut self, i: &Instruction, o: u32, bytes: u32, v: Option<u64>) {
        match i.op_kind(o) {
            OpKind::Register => self.set(i.op_register(o), v),
            OpKind::Memory => {
                let a = self.ea(i);
                self.write_mem(a, bytes, v);
            }
            _ => {}
        }
    }

    fn logic_flags(&mut self, r: Option<u64>, bytes: u32) {
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

    fn add_flags(&mut self, a: Option<u64>, b: Option<u64>, bytes: u32, sub: bool, keep_cf: bool) -> Option<u64> {
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

    /// Whether the condition of a jcc holds (None: unknown).
    fn condition(&self, cc: ConditionCode) -> Option<bool> {
        let f = &self.flags;
        use ConditionCode as C;
        Some(match cc {
            C::o => f.of?,
            C::no => !f.of?,
            C::b => f.cf?,
            C::ae => !f.cf?,
            C::e => f.zf?,
            C::ne => !f.zf?,
            C::be => f.cf? || f.zf?,
            C::a => !f.cf? && !f.zf?,
            C::s => f.sf?,
            C::ns => !f.sf?,
            C::p => f.pf?,
            C::np => !f.pf?,
            C::l => f.sf? != f.of?,
            C::ge => f.sf? == f.of?,
            C::le => f.zf? || f.sf? != f.of?,
            C::g => !f.zf? && f.sf? == f.of?,
            C::None => return None,
        })
    }

    fn push(&mut self, v: Option<u64>) {
        let sp = self.regs[4].map(|s| s.wrapping_sub(8));
        self.regs[4] = sp;
        self.write_mem(sp, 8, v);
    }

    fn pop(&mut self) -> Option<u64> {
        let sp = self.regs[4];
        let v = match sp {
            Some(s) => self.read_mem(s, 8),
            None => None,
        };
        self.regs[4] = sp.map(|s| s.wrapping_add(8));
        v
    }

    /// Where the block's last instruction `i` (a jcc) goes: Some(true) taken.
    pub fn taken(&self, i: &Instruction) -> Option<bool> {
        self.condition(i.condition_code())
    }

    /// Target of the block's last instruction when it is a return or an indirect jump/call
    /// (evaluated before it executes; a call also pushes its return address).
    pub fn dynamic_target(&mut self, i: &Instruction) -> Option<u64> {
        match i.mnemonic() {
            Mnemonic::Ret => {
                let t = self.pop();
                if i.op_count() == 1 {
                    let n = i.immediate(0);
                    self.regs[4] = self.regs[4].map(|s| s.wrapping_add(n));
                }
                t
            }
            Mnemonic::Jmp | Mnemonic::Call => {
                let t = match i.op0_kind() {
                    OpKind::Register => self.get(i.op0_register()),
                    OpKind::Memory => {
                        let a = self.ea(i)?;
                        self.read_mem(a, 8)
                    }
                    _ => None,
                }?;
                if i.mnemonic() == Mnemonic::Call {
                    self.push(Some(i.next_ip()));
                }
                Some(t)
            }
            _ => None,
        }
    }

    /// Execute one instruction that is not the block's control transfer (a direct call or
    /// jump at the end is fine: its effect on the stack is modelled here).
    pub fn step(&mut self, i: &Instruction, factory: &mut InstructionInfoFactory) {
        use Mnemonic as M;
        let m = i.mnemonic();
        let b0 = Self::op_bytes(i, 0);
        if m == M::Nop || m == M::Endbr64 || i.is_jcc_short_or_near() || i.is_jmp_short_or_near() {
            return;
        }
        if i.is_call_near() {
            self.push(Some(i.next_ip()));
            return;
        }
        if matches!(
            i.flow_control(),
            FlowControl::Interrupt | FlowControl::Exception | FlowControl::XbeginXabortXend
        ) || matches!(
            m,
            M::Syscall | M::Sysenter | M::Int | M::Int3 | M::Cpuid | M::Rdtsc | M::Rdtscp | M::Xgetbv | M::Rdrand | M::Rdseed
        ) {
            // The kernel or the CPU decides: nothing is known afterwards.
            self.regs = [None; 16];
            self.unknown_flags();
            self.poisoned = true;
            return;
        }
        if i.has_rep_prefix() || i.has_repne_prefix() || i.has_lock_prefix() {
            return self.generic(i, factory);
        }
        match (m, b0) {
            (M::Mov, Some(n)) if i.op_count() == 2 => {
                let src_ok = match i.op1_kind() {
                    OpKind::Register | OpKind::Memory => Self::op_bytes(i, 1) == Some(n),
                    _ => true,
                };
                if !src_ok {
                    return self.generic(i, factory);
                }
                let v = self.operand(i, 1, n);
                self.store(i, 0, n, v);
            }
            (M::Movzx | M::Movsx | M::Movsxd, Some(n)) if i.op0_kind() == OpKind::Register => {
                let Some(s) = Self::op_bytes(i, 1) else {
                    return self.generic(i, factory);
                };
                let v = self.operand(i, 1, s);
                let v = if m == M::Movzx { v } else { v.map(|v| sext(v, s) & mask(n)) };
                self.set(i.op0_register(), v);
            }
            (M::Lea, Some(n)) if i.op0_kind() == OpKind::Register => {
                let v = self.ea_lea(i).map(|v| v & mask(n));
                self.set(i.op0_register(), v);
            }
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
            (M::Shl | M::Shr | M::Sar, Some(n))
                if i.op_count() == 2
                    && (i.op1_kind() == OpKind::Immediate8 || (i.op1_kind() == OpKind::Register && i.op1_register() == Register::CL)) =>
            {
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
            (M::Neg, Some(n)) if i.op_count() == 1 => {
                let a = self.operand(i, 0, n);
                let r = self.add_flags(Some(0), a, n, true, false);
                self.store(i, 0, n, r);
            }
            (M::Not, Some(n)) if i.op_count() == 1 => {
                let a = self.operand(i, 0, n);
                self.store(i, 0, n, a.map(|a| !a & mask(n)));
            }
            (M::Imul, Some(n)) if (i.op_count() == 2 || i.op_count() == 3) && i.op0_kind() == OpKind::Register => {
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
            (M::Adc | M::Sbb, Some(n)) if i.op_count() == 2 => {
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
            (M::Tzcnt | M::Lzcnt | M::Bsf | M::Bsr, Some(n)) if i.op_count() == 2 && i.op0_kind() == OpKind::Register => {
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
            (M::Movbe, Some(n)) if i.op_count() == 2 && matches!(n, 2 | 4 | 8) => {
                let v = self.operand(i, 1, n).map(|v| (v & mask(n)).swap_bytes() >> (64 - 8 * n));
                self.store(i, 0, n, v);
            }
            _ if i.op_count() == 2 && i.condition_code() != ConditionCode::None && is_cmov(m) => {
                let Some(n) = b0 else { return self.generic(i, factory) };
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
            (M::Push, _) if i.op_count() == 1 => {
                let v = match i.op0_kind() {
                    OpKind::Register if i.op0_register().is_gpr64() => self.get(i.op0_register()),
                    OpKind::Memory if i.memory_size().size() == 8 => self.ea(i).and_then(|a| self.read_mem(a, 8)),
                    OpKind::Immediate8to64 | OpKind::Immediate32to64 => Some(i.immediate(0)),
                    _ => return self.generic(i, factory),
                };
                self.push(v);
            }
            (M::Pop, Some(8)) if i.op0_kind() == OpKind::Register => {
                let v = self.pop();
                self.set(i.op0_register(), v);
            }
            (M::Leave, _) => {
                self.regs[4] = self.regs[5];
                let v = self.pop();
                self.regs[5] = v;
            }
            _ => self.generic(i, factory),
        }
    }

    /// `lea`: the address computation without a segment base.
    fn ea_lea(&self, i: &Instruction) -> Option<u64> {
        let base = i.memory_base();
        let index = i.memory_index();
        let mut a = i.memory_displacement64();
        if base != Register::None && base != Register::RIP && base != Register::EIP {
            a = a.wrapping_add(self.get(base)?);
        }
        if index != Register::None {
            a = a.wrapping_add(self.get(index)?.wrapping_mul(u64::from(i.memory_index_scale())));
        }
        Some(a)
    }

    /// Any other instruction: what it writes becomes unknown.
    fn generic(&mut self, i: &Instruction, factory: &mut InstructionInfoFactory) {
        self.last_generic = Some((i.ip(), i.mnemonic()));
        if i.rflags_modified() != 0 {
            self.unknown_flags();
        }
        let info = factory.info(i);
        let mut stores: Vec<(Option<u64>, u32)> = Vec::new();
        for u in info.used_memory() {
            if matches!(
                u.access(),
                OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
            ) {
                let a = if u.index().is_vector_register() {
                    None
                } else {
                    u.virtual_address(0, |r, _, _| match r {
                        Register::FS => Some(self.fs),
                        Register::GS => Some(self.gs),
                        Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
                        r => self.get(r),
                    })
                };
                stores.push((a, u.memory_size().size() as u32));
            }
        }
        let writes: Vec<Register> = info
            .used_registers()
            .iter()
            .filter(|u| {
                matches!(
                    u.access(),
                    OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
                )
            })
            .map(|u| u.register())
            .collect();
        for (a, n) in stores {
            self.write_mem(a, n, None);
        }
        for r in writes {
            if let Some(k) = gpr_index(r) {
                self.regs[k] = None;
            }
            if matches!(r, Register::FS | Register::GS) {
                self.poisoned = true;
            }
        }
        if i.is_string_instruction() {
            self.poisoned = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    fn emu_run(bytes: &[u8], set: &[(usize, u64)]) -> (Option<bool>, [Option<u64>; 16]) {
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut e = Emu::new(&regs, mem);
        for (k, v) in set {
            e.regs[*k] = Some(*v);
        }
        let mut f = InstructionInfoFactory::new();
        let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
        let mut taken = None;
        while d.can_decode() {
            let i = d.decode();
            if i.is_jcc_short_or_near() {
                taken = e.taken(&i);
            } else {
                e.step(&i, &mut f);
            }
        }
        (taken, e.regs)
    }

    #[test]
    fn mixed_precision_and_amx_instructions_are_not_mis_emulated() {
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let run = |bytes: &[u8]| {
            let mut e = Emu::new(&regs, mem.clone());
            for k in 0..16 {
                e.regs[k] = Some(0x1000 * (k as u64 + 1));
            }
            let mut f = InstructionInfoFactory::new();
            let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
            while d.can_decode() {
                e.step(&d.decode(), &mut f);
            }
            e
        };
        let known = |e: &Emu| e.regs.iter().enumerate().all(|(k, r)| *r == Some(0x1000 * (k as u64 + 1)));
        // Register-only vector and tile work writes no general register and no memory.
        for bytes in [
            &[0x62, 0xf2, 0x76, 0x49, 0x52, 0xc2][..], // vdpbf16ps zmm0{k1}, zmm1, zmm2
            &[0xc4, 0xe2, 0x75, 0x50, 0xc2],           // {vex} vpdpbusd ymm0, ymm1, ymm2
            &[0x62, 0xf2, 0x76, 0x08, 0x52, 0x00],     // vdpbf16ps xmm0, xmm1, [rax] (a load)
            &[0xc4, 0xe2, 0x6a, 0x5c, 0xc1],           // tdpbf16ps tmm0, tmm1, tmm2
            &[0xc4, 0xe2, 0x7b, 0x4b, 0x0c, 0x16],     // tileloadd tmm1, [rsi+rdx]
            &[0xc4, 0xe2, 0x78, 0x49, 0xc0],           // tilerelease
        ] {
            let e = run(bytes);
            assert!(known(&e) && !e.poisoned, "{bytes:x?}");
        }
        // A tile store writes rows × colsb bytes, strided, of a shape the emulator does not
        // know: nothing read from memory after it may be trusted.
        let e = run(&[0xc4, 0xe2, 0x7a, 0x4b, 0x04, 0x0f]); // tilestored [rdi+rcx], tmm0
        assert!(e.poisoned && known(&e));
    }

    #[test]
    fn compare_and_branch() {
        // cmp rax, rsi; jb
        let (t, _) = emu_run(&[0x48, 0x39, 0xf0, 0x72, 0x00], &[(0, 3), (6, 5)]);
        assert_eq!(t, Some(true));
        let (t, _) = emu_run(&[0x48, 0x39, 0xf0, 0x72, 0x00], &[(0, 5), (6, 5)]);
        assert_eq!(t, Some(false));
        // add rax, 4; cmp rax, rsi; jl (signed)
        let (t, r) = emu_run(
            &[0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x7c, 0x00],
            &[(0, u64::MAX - 10), (6, 0)],
        );
        assert_eq!((t, r[0]), (Some(true), Some(u64::MAX - 6)));
        // and eax, 0xfff; cmp eax, 0xfe0; ja
        let (t, r) = emu_run(
            &[0x25, 0xff, 0x0f, 0x00, 0x00, 0x3d, 0xe0, 0x0f, 0x00, 0x00, 0x77, 0x00],
            &[(0, 0x1234_5ff0)],
        );
        assert_eq!((t, r[0]), (Some(true), Some(0xff0)));
        // test eax, eax (eax = 0x100000000 low part 0); je
        let (t, _) = emu_run(&[0x85, 0xc0, 0x74, 0x00], &[(0, 1 << 32)]);
        assert_eq!(t, Some(true));
        // dec ecx; jne   (ecx = 1 -> 0)
        let (t, r) = emu_run(&[0xff, 0xc9, 0x75, 0x00], &[(1, 1)]);
        assert_eq!((t, r[1]), (Some(false), Some(0)));
    }

    /// Encode instructions (iced's encoder) and run them through the emulator.
    fn emu_asm(code: &[iced_x86::Instruction], set: &[(usize, u64)]) -> (Option<bool>, [Option<u64>; 16]) {
        let mut bytes = Vec::new();
        for i in code {
            let mut e = iced_x86::Encoder::new(64);
            e.encode(i, 0x1000).unwrap();
            bytes.extend(e.take_buffer());
        }
        emu_run(&bytes, set)
    }

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    #[test]
    fn integer_extras_match_their_definitions() {
        use iced_x86::{Code as C, Instruction as I, Register as R};
        let mut seed = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
        let jcc = |c: C| I::with_branch(c, 0x1000).unwrap();
        for _ in 0..200 {
            let (a, b) = (xorshift(&mut seed), xorshift(&mut seed));
            // Small values too, where flags and counts have their edges.
            let (a, b) = if a % 3 == 0 { (a % 7, b % 7) } else { (a, b) };
            let (_, r) = emu_asm(&[I::with2(C::Imul_r64_rm64, R::RAX, R::RSI).unwrap()], &[(0, a), (6, b)]);
            assert_eq!(r[0], Some(a.wrapping_mul(b)));
            let (t, r) = emu_asm(
                &[
                    I::with3(C::Imul_r32_rm32_imm32, R::ECX, R::ESI, b as i32).unwrap(),
                    jcc(C::Jo_rel32_64),
                ],
                &[(6, a)],
            );
            let full = i64::from(a as i32) * i64::from(b as i32);
            assert_eq!(r[1], Some(u64::from(full as u32)));
            assert_eq!(t, Some(full != i64::from(full as i32)));
            let (_, r) = emu_asm(&[I::with1(C::Neg_rm64, R::RAX).unwrap()], &[(0, a)]);
            assert_eq!(r[0], Some(a.wrapping_neg()));
            let (_, r) = emu_asm(&[I::with1(C::Not_rm32, R::EAX).unwrap()], &[(0, a)]);
            assert_eq!(r[0], Some(u64::from(!(a as u32))));
            // cmp sets CF; adc/sbb use it; jb reads the new CF.
            let c = a < b;
            let (t, r) = emu_asm(
                &[
                    I::with2(C::Cmp_rm64_r64, R::RAX, R::RSI).unwrap(),
                    I::with2(C::Adc_rm64_r64, R::RCX, R::RDX).unwrap(),
                    jcc(C::Jb_rel32_64),
                ],
                &[(0, a), (6, b), (1, a ^ b), (2, b)],
            );
            let wide = u128::from(a ^ b) + u128::from(b) + u128::from(c);
            assert_eq!((r[1], t), (Some(wide as u64), Some(wide > u128::from(u64::MAX))));
            let (t, r) = emu_asm(
                &[
                    I::with2(C::Cmp_rm64_r64, R::RAX, R::RSI).unwrap(),
                    I::with2(C::Sbb_rm32_r32, R::ECX, R::EDX).unwrap(),
                    jcc(C::Jb_rel32_64),
                ],
                &[(0, a), (6, b), (1, a >> 7), (2, b >> 3)],
            );
            let (x, y) = (u64::from((a >> 7) as u32), u64::from((b >> 3) as u32));
            assert_eq!(r[1], Some(x.wrapping_sub(y).wrapping_sub(u64::from(c)) & 0xffff_ffff));
            assert_eq!(t, Some(u128::from(x) < u128::from(y) + u128::from(c)));
            // cmovb / setb after cmp.
            let (_, r) = emu_asm(
                &[
                    I::with2(C::Cmp_rm64_r64, R::RAX, R::RSI).unwrap(),
                    I::with2(C::Cmovb_r64_rm64, R::RCX, R::RDX).unwrap(),
                    I::with1(C::Setb_rm8, R::BL).unwrap(),
                ],
                &[(0, a), (6, b), (1, 11), (2, 22), (3, 0xff00)],
            );
            assert_eq!(r[1], Some(if c { 22 } else { 11 }));
            assert_eq!(r[3], Some(0xff00 | u64::from(c)));
            // Bit scans and counts.
            let v = a >> (b % 64);
            let (_, r) = emu_asm(&[I::with2(C::Tzcnt_r64_rm64, R::RCX, R::RAX).unwrap()], &[(0, v)]);
            assert_eq!(r[1], Some(u64::from(v.trailing_zeros())));
            let (_, r) = emu_asm(&[I::with2(C::Lzcnt_r32_rm32, R::ECX, R::EAX).unwrap()], &[(0, v)]);
            assert_eq!(r[1], Some(u64::from((v as u32).leading_zeros())));
            let (_, r) = emu_asm(&[I::with2(C::Bsr_r64_rm64, R::RCX, R::RAX).unwrap()], &[(0, v), (1, 5)]);
            assert_eq!(r[1], (v != 0).then(|| u64::from(63 - v.leading_zeros())));
            let k = b % 80;
            let (_, r) = emu_asm(
                &[I::with3(C::VEX_Bzhi_r64_rm64_r64, R::RCX, R::RAX, R::RDX).unwrap()],
                &[(0, a), (2, k)],
            );
            assert_eq!(r[1], Some(if k < 64 { a & ((1u64 << k) - 1) } else { a }));
            let (_, r) = emu_asm(&[I::with2(C::Shr_rm64_CL, R::RAX, R::CL).unwrap()], &[(0, a), (1, b)]);
            assert_eq!(r[0], Some(a >> (b % 64)));
            let (_, r) = emu_asm(
                &[I::with3(C::VEX_Sarx_r32_rm32_r32, R::ECX, R::EAX, R::EDX).unwrap()],
                &[(0, a), (2, b)],
            );
            assert_eq!(r[1], Some(u64::from(((a as i32) >> (b % 32)) as u32)));
        }
    }

    #[test]
    fn unknown_stays_unknown() {
        // vpmovmskb eax, ymm1; test eax, eax; je
        let (t, r) = emu_run(&[0xc5, 0xfd, 0xd7, 0xc1, 0x85, 0xc0, 0x74, 0x00], &[(0, 0)]);
        assert_eq!((t, r[0]), (None, None));
        // mov al, 1 merges; ah writes make rax unknown
        let (_, r) = emu_run(&[0xb0, 0x01], &[(0, 0x1200)]);
        assert_eq!(r[0], Some(0x1201));
        let (_, r) = emu_run(&[0xb4, 0x01], &[(0, 0x1200)]);
        assert_eq!(r[0], None);
        // push rbx; pop rcx
        let mut stack = [0u64; 8];
        let sp = stack.as_mut_ptr() as u64 + 32;
        let (_, r) = emu_run(&[0x53, 0x59], &[(4, sp), (3, 77)]);
        assert_eq!((r[1], r[4]), (Some(77), Some(sp)));
        std::hint::black_box(&stack);
    }
}
