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
//!
//! The vector registers (xmm/ymm, and zmm where the CPU has them) are modelled too, for the
//! instructions that decide branches in string and memory functions and in compiled
//! comparisons (vector loads and stores, byte/word/dword/qword compares, min/max, add/sub, the
//! bitwise operations, `pmovmskb`/`movmskp*`, `ptest`, `(u)comis*`, `cvtts*2si`): their
//! values are seeded from the thread's XSAVE image, read only when a path first needs a value
//! it did not compute itself ([`VectorSeed`]). AVX-512 (EVEX) forms and opmask registers are
//! not modelled: what they write is unknown.

use iced_x86::{ConditionCode, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use std::rc::Rc;

use super::sys::Memory;

mod control;
mod evex;
mod integer;
mod memory;
mod vector;

use evex::{KREG_AT_TRAP, KReg, k_index};
use integer::{is_cmov, is_setcc};
use memory::Overlay;
pub(super) use memory::WordHasher;
pub use vector::VectorSeed;
use vector::{VREG_AT_TRAP, VReg, is_vec};

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

/// The emulated state of one thread along a path.
pub struct Emu {
    regs: [Option<u64>; 16],
    /// xmm/ymm/zmm 0–31 (each as 64 bytes).
    vregs: [VReg; 32],
    /// k0–k7 (AVX-512 opmasks).
    kregs: [KReg; 8],
    /// MXCSR (rounding, DAZ, exception masks): None when unknown.
    mxcsr: Option<u32>,
    mxcsr_fresh: bool,
    vseed: Option<Rc<VectorSeed>>,
    flags: Flags,
    /// The direction flag (string instructions step down when set): None when unknown.
    df: Option<bool>,
    fs: u64,
    gs: u64,
    /// Memory the path stored or read from the tracee, by 8-byte word (`address >> 3`).
    overlay: Overlay,
    /// A store went to an unknown address: no memory value is known any more.
    poisoned: bool,
    /// The last instruction not modelled (its results became unknown): what a path that ends
    /// on an unknown branch most likely ends on (`ROOFLINE_TRACE_DEBUG`).
    pub last_generic: Option<(u64, Mnemonic)>,
    /// Pages of the tracee's memory read into the overlay (`extra.trace.emulator_page_reads`).
    pub page_reads: u64,
    /// Pages already read from the tracee while it has not run since (shared by the
    /// emulations of one trap: a path cut back is emulated again over the same pages).
    page_cache: Option<PageCache>,
    /// Tracee memory the kernel rewrites behind the thread's back ([start, end)): read as
    /// unknown whatever it holds at the stop.
    volatile: Vec<(u64, u64)>,
    mem: Rc<Memory>,
}

/// The tracee's pages read during one stop (`Emu::with_page_cache`): its base address to its
/// readable bytes. Valid only while no thread of the space runs and nothing is written to it.
pub type PageCache = Rc<std::cell::RefCell<std::collections::HashMap<u64, Rc<[u8]>>>>;

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
            df: bit(10),
            fs: regs.fs_base,
            gs: regs.gs_base,
            overlay: Overlay::default(),
            poisoned: false,
            page_reads: 0,
            page_cache: None,
            volatile: Vec::new(),
            last_generic: None,
            mem,
            vregs: [VREG_AT_TRAP; 32],
            kregs: [KREG_AT_TRAP; 8],
            mxcsr: None,
            mxcsr_fresh: true,
            vseed: None,
        }
    }

    /// Vector registers and MXCSR at the trap come from `seed` when a path needs them
    /// (without one they are unknown).
    /// Share `cache` of the tracee's pages with the other emulations of this stop.
    pub fn with_page_cache(mut self, cache: PageCache) -> Emu {
        self.page_cache = Some(cache);
        self
    }

    /// Memory whose contents at the stop are not what the thread will read: its rseq(2) area,
    /// whose `cpu_id` the kernel rewrites when the thread runs on another CPU.
    pub fn with_volatile(mut self, ranges: &[(u64, u64)]) -> Emu {
        self.volatile.extend_from_slice(ranges);
        self
    }

    pub fn with_vectors(mut self, seed: Rc<VectorSeed>) -> Emu {
        self.vseed = Some(seed);
        self
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
            self.forget_vectors();
            self.unknown_flags();
            self.poisoned = true;
            return;
        }
        // (A lock prefix changes nothing for one thread: a path is emulated only while its
        // thread runs alone, and its exit registers are checked.)
        if i.has_rep_prefix() || i.has_repne_prefix() {
            return self.generic(i, factory);
        }
        if i.is_string_instruction() {
            if !self.string_step(i) {
                self.generic(i, factory);
            }
            return;
        }
        if self.vector_step(i, factory) {
            return;
        }
        // Each family models its own mnemonics (no mnemonic is in two) and changes nothing where
        // it does not model the form: the first to say so is the only one that could.
        let modelled = self.move_op(i, b0)
            || self.add_sub_op(i, b0)
            || self.logic_op(i, b0)
            || self.shift_op(i, b0)
            || self.mul_div_op(i, b0)
            || self.control_op(i, b0);
        if !modelled {
            self.generic(i, factory);
        }
    }

    /// Moves and conversions that set no flags: `mov`, `movzx`/`movsx`, `lea`, `movbe`, `cmovcc`,
    /// `setcc`, the accumulator's sign extensions, `xchg`. False when `i` is none of these or
    /// its form is not modelled (nothing changed).
    fn move_op(&mut self, i: &Instruction, b0: Option<u32>) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
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
    fn add_sub_op(&mut self, i: &Instruction, b0: Option<u32>) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
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
    fn logic_op(&mut self, i: &Instruction, b0: Option<u32>) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
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
    fn shift_op(&mut self, i: &Instruction, b0: Option<u32>) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
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
    fn mul_div_op(&mut self, i: &Instruction, b0: Option<u32>) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
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

    /// The stack (`push`, `pop`, `leave`) and the direction flag the string instructions step by
    /// (`cld`, `std`). False when `i` is none of these or its form is not modelled (nothing
    /// changed).
    fn control_op(&mut self, i: &Instruction, b0: Option<u32>) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        match (m, b0) {
            (M::Push, _) if i.op_count() == 1 => {
                let v = match i.op0_kind() {
                    OpKind::Register if i.op0_register().is_gpr64() => self.get(i.op0_register()),
                    OpKind::Memory if i.memory_size().size() == 8 => self.ea(i).and_then(|a| self.read_mem(a, 8)),
                    OpKind::Immediate8to64 | OpKind::Immediate32to64 => Some(i.immediate(0)),
                    _ => return false,
                };
                self.push(v);
            }
            (M::Pop, Some(8)) if i.op0_kind() == OpKind::Register => {
                let v = self.pop();
                self.set(i.op0_register(), v);
            }
            (M::Cld | M::Std, _) => self.df = Some(m == M::Std),
            (M::Leave, _) => {
                self.regs[4] = self.regs[5];
                let v = self.pop();
                self.regs[5] = v;
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
        if i.rflags_modified() & iced_x86::RflagsBits::DF != 0 {
            self.df = None;
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
        if matches!(
            i.mnemonic(),
            Mnemonic::Ldmxcsr
                | Mnemonic::Vldmxcsr
                | Mnemonic::Fxrstor
                | Mnemonic::Fxrstor64
                | Mnemonic::Xrstor
                | Mnemonic::Xrstor64
                | Mnemonic::Xrstors
                | Mnemonic::Xrstors64
        ) {
            // (Restores write registers iced-x86 does not list one by one.)
            self.forget_vectors();
        }
        for r in writes {
            if let Some(k) = gpr_index(r) {
                self.regs[k] = None;
            }
            if is_vec(r) {
                self.vregs[r.number()] = VReg {
                    known: 0,
                    fresh: 0,
                    ..self.vregs[r.number()]
                };
            }
            if r.is_k() {
                self.kregs[k_index(r)] = KReg {
                    known: false,
                    fresh: false,
                    ..self.kregs[k_index(r)]
                };
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
mod tests;
