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
//! it did not compute itself ([`VectorSeed`]). The opmask registers (k0–k7) are seeded the same
//! way; of the AVX-512 (EVEX) forms, the moves (masked ones too), compares into an opmask,
//! bitwise and lane operations, `vpternlog` and broadcasts are modelled, and whatever else
//! writes a vector or opmask register makes it unknown.
//!
//! The rooms, by instruction family: this file holds the state, operand access, the `step`
//! dispatcher and the fallback for what is not modelled (`generic`); `memory` the path's view
//! of memory; `integer` the general-purpose families and their flags; `control` conditions,
//! returns, indirect jumps, the stack and the string instructions; `vector` SSE and AVX with
//! MXCSR and the XSAVE seed; `evex` AVX-512 and the opmasks. The tests beside, in `tests/`, by
//! the same families.

use iced_x86::{FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use std::rc::Rc;

use super::sys::Memory;

mod arith;
mod control;
mod evex;
mod integer;
mod memory;
mod vector;

use evex::{KREG_AT_TRAP, KReg, k_index};
use memory::Overlay;
pub(super) use memory::WordHasher;

/// A set of addresses hashed by a multiply (SipHash showed in long paths' profiles).
pub(super) type FastSet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<WordHasher>>;

/// A map keyed by address (SipHash, the default, showed in profiles of start-up).
pub(super) type FastMap<V> = std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<WordHasher>>;
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

/// Mnemonics whose every form takes general registers, memory or immediates only: no vector
/// or opmask register and no MXCSR (the vector families need not look at them; they are most of
/// what interpreters and start-up code run).
fn names_no_vector_register(m: Mnemonic) -> bool {
    use Mnemonic as M;
    matches!(
        m,
        M::Mov
            | M::Movzx
            | M::Movsx
            | M::Movsxd
            | M::Lea
            | M::Add
            | M::Sub
            | M::Cmp
            | M::Inc
            | M::Dec
            | M::Neg
            | M::And
            | M::Or
            | M::Xor
            | M::Test
            | M::Not
            | M::Shl
            | M::Shr
            | M::Sar
            | M::Rol
            | M::Ror
            | M::Push
            | M::Pop
            | M::Imul
            | M::Cmove
            | M::Cmovne
            | M::Sete
            | M::Setne
            | M::Leave
    )
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
    /// Whether MXCSR's sticky exception flags are known (its control bits may be while they
    /// are not: `arith::raised` could not tell what an operation raised).
    mxcsr_flags_known: bool,
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
            mxcsr_flags_known: true,
            mxcsr_fresh: true,
            vseed: None,
        }
    }

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

    /// Vector registers, opmasks and MXCSR at the trap come from `seed` when a path needs
    /// them (without one they are unknown).
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

    /// Value of a register operand (any GPR width, AH/BH/CH/DH included), zero-extended.
    fn get(&self, r: Register) -> Option<u64> {
        let v = self.regs[gpr_index(r)?]?;
        if high8(r) {
            return Some(v >> 8 & 0xff);
        }
        Some(v & mask(r.size() as u32))
    }

    /// Write a register with x86 semantics: 32-bit writes zero-extend, 8/16-bit ones merge.
    fn set(&mut self, r: Register, v: Option<u64>) {
        let Some(i) = gpr_index(r) else { return };
        if high8(r) {
            self.regs[i] = self.regs[i].zip(v).map(|(old, v)| (old & !0xff00) | (v & 0xff) << 8);
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
                r.is_gpr().then_some(r.size() as u32)
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
        if !names_no_vector_register(m) && (self.mxcsr_move(i) || self.vector_step(i, factory)) {
            return;
        }
        // Each family models its own mnemonics (no mnemonic is in two) and changes nothing where
        // it does not model the form: the first to say so is the only one that could.
        let modelled = self.move_op(i, m, b0)
            || self.add_sub_op(i, m, b0)
            || self.logic_op(i, m, b0)
            || self.shift_op(i, m, b0)
            || self.mul_div_op(i, m, b0)
            || self.control_op(i, m, b0);
        if !modelled {
            self.generic(i, factory);
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
