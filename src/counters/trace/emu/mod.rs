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

use iced_x86::{ConditionCode, EncodingKind, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use super::sys::{Memory, XsaveLayout};

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

/// Pages of memory (read or stored) a path may hold before the emulator stops tracking
/// memory (a long loop writing an array; 8 MiB of overlay): loads then become unknown, which
/// ends a path only where a branch or an address depends on one.
const MAX_OVERLAY_PAGES: usize = 1 << 10;

/// Eight bytes of the path's view of memory: `present` bytes were stored by the path or read
/// from the tracee, `known` ones have a value (a vector store's bytes are present, unknown).
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    val: u64,
    present: u8,
    known: u8,
}

/// The path's view of memory, by 4 KiB page of words: a lookup in the page used last is one
/// compare (a hash lookup per word dominated paths through string functions).
#[derive(Default)]
struct Overlay {
    index: HashMap<u64, usize, BuildHasherDefault<WordHasher>>,
    pages: Vec<Box<[Word; PAGE_WORDS]>>,
    /// (page number + 1, its index in `pages`) of the page used last; 0: none.
    last: std::cell::Cell<(u64, usize)>,
}

const PAGE_WORDS: usize = 512;

impl Overlay {
    fn page(&self, page: u64) -> Option<usize> {
        let (p, i) = self.last.get();
        if p == page.wrapping_add(1) {
            return Some(i);
        }
        let i = *self.index.get(&page)?;
        self.last.set((page.wrapping_add(1), i));
        Some(i)
    }

    /// The word at index `w` (`address >> 3`), if its page was touched (absent bytes are not
    /// `present`).
    fn get(&self, w: u64) -> Option<&Word> {
        let i = self.page(w / PAGE_WORDS as u64)?;
        Some(&self.pages[i][(w % PAGE_WORDS as u64) as usize])
    }

    /// The index in `pages` of page `page`, added (no byte present) if new.
    fn page_or_add(&mut self, page: u64) -> usize {
        match self.page(page) {
            Some(i) => i,
            None => {
                self.pages.push(Box::new([Word::default(); PAGE_WORDS]));
                let i = self.pages.len() - 1;
                self.index.insert(page, i);
                self.last.set((page.wrapping_add(1), i));
                i
            }
        }
    }

    /// The word at index `w` to make (some of) its bytes present.
    fn entry(&mut self, w: u64) -> &mut Word {
        let i = self.page_or_add(w / PAGE_WORDS as u64);
        &mut self.pages[i][(w % PAGE_WORDS as u64) as usize]
    }

    /// The tracee's bytes of page `page` (`bytes` from its start, whole words), where the
    /// path has not stored itself.
    fn fill_page(&mut self, page: u64, bytes: &[u8]) {
        let i = self.page_or_add(page);
        for (w, chunk) in self.pages[i].iter_mut().zip(bytes.chunks_exact(8)) {
            let v = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            if w.present == 0 {
                *w = Word {
                    val: v,
                    present: 0xff,
                    known: 0xff,
                };
            } else if w.present != 0xff {
                // Bytes the path stored stay; the others come from the tracee.
                let keep = byte_mask(w.present);
                w.val = (w.val & keep) | (v & !keep);
                w.known |= !w.present;
                w.present = 0xff;
            }
        }
    }

    /// Bytes `[start, end)` of page `page` present but unknown (memory another agent rewrites).
    fn forget_in_page(&mut self, page: u64, start: u64, end: u64) {
        let base = page * PAGE_WORDS as u64 * 8;
        let (lo, hi) = (start.max(base), end.min(base + PAGE_WORDS as u64 * 8));
        for at in lo..hi {
            let w = self.entry(at >> 3);
            let bit = 1u8 << (at & 7);
            w.present |= bit;
            w.known &= !bit;
        }
    }

    /// Pages held (each 4 KiB of the tracee's address space).
    fn pages(&self) -> usize {
        self.pages.len()
    }
}

/// The bits of a word's bytes that `present` (one bit per byte) names.
fn byte_mask(present: u8) -> u64 {
    (0..8).filter(|j| present >> j & 1 == 1).fold(0, |m, j| m | 0xff << (8 * j))
}

/// A multiplicative hash of a word index (the default SipHash dominated long paths).
#[derive(Default)]
pub(super) struct WordHasher(u64);

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
struct VReg {
    val: [u8; 64],
    known: u64,
    fresh: u64,
}

const VREG_AT_TRAP: VReg = VReg {
    val: [0; 64],
    known: 0,
    fresh: u64::MAX,
};

/// One opmask register (k0–k7) along a path: `fresh` while it still holds what the thread
/// had at the trap (not yet read from the XSAVE image).
#[derive(Debug, Clone, Copy)]
struct KReg {
    val: u64,
    known: bool,
    fresh: bool,
}

const KREG_AT_TRAP: KReg = KReg {
    val: 0,
    known: false,
    fresh: true,
};

/// A compare of two elements (values zero-extended, their width in bytes) into one mask bit.
type ElemPredicate = fn(u64, u64, u32) -> bool;

/// The index of opmask register `r` (k0–k7).
fn k_index(r: Register) -> usize {
    (r as usize - Register::K0 as usize) & 7
}

/// The low `bytes` bits set.
fn low_bits(bytes: usize) -> u64 {
    if bytes >= 64 { u64::MAX } else { (1u64 << bytes) - 1 }
}

fn is_vec(r: Register) -> bool {
    r.is_xmm() || r.is_ymm() || r.is_zmm()
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

    /// Read the tracee's page holding `a` into the overlay where the path has not stored
    /// itself; false when the byte at `a` cannot be read. A whole page per read: a path's
    /// stack slots and the array elements it reads lie near each other, and the system call,
    /// not the copy, is the cost (a path used to read 256 bytes at a time, 16 reads a stop
    /// on a program's start-up).
    fn fill_lines(&mut self, a: u64) -> bool {
        let page = a / (PAGE_WORDS as u64 * 8);
        let base = page * PAGE_WORDS as u64 * 8;
        let cached = self.page_cache.as_ref().and_then(|c| c.borrow().get(&base).cloned());
        let bytes = match cached {
            Some(b) => b,
            None => {
                let mut buf = [0u8; PAGE_WORDS * 8];
                // Mappings are whole pages: the page reads whole or not at all.
                let n = self.mem.read(base, &mut buf);
                self.page_reads += 1;
                let b: Rc<[u8]> = Rc::from(&buf[..n - n % 8]);
                if let Some(c) = &self.page_cache {
                    c.borrow_mut().insert(base, b.clone());
                }
                b
            }
        };
        if bytes.len() <= (a - base) as usize {
            return false;
        }
        self.overlay.fill_page(page, &bytes);
        for &(start, end) in &self.volatile {
            if start < base + bytes.len() as u64 && end > base {
                self.overlay.forget_in_page(page, start, end);
            }
        }
        true
    }

    /// `bytes` (1–8) at `addr` from the overlay alone: Ok(None) when present but not all known,
    /// Err(a) when the byte at `a` is not in the overlay yet. A value spans at most two words
    /// (string functions read unaligned).
    fn overlay_value(&self, addr: u64, bytes: u32) -> Result<Option<u64>, u64> {
        let off = (addr & 7) as u32;
        let lo_n = bytes.min(8 - off);
        let lo_bits = (((1u16 << lo_n) - 1) << off) as u8;
        let lo = match self.overlay.get(addr >> 3) {
            Some(w) if w.present & lo_bits == lo_bits => *w,
            Some(w) => return Err((addr & !7) + u64::from((!w.present & lo_bits).trailing_zeros())),
            None => return Err(addr),
        };
        if lo.known & lo_bits != lo_bits {
            return Ok(None);
        }
        let mut v = lo.val >> (8 * off);
        if lo_n < bytes {
            let hi_n = bytes - lo_n;
            let hi_bits = ((1u16 << hi_n) - 1) as u8;
            let next = (addr | 7).wrapping_add(1);
            let hi = match self.overlay.get(next >> 3) {
                Some(w) if w.present & hi_bits == hi_bits => *w,
                Some(w) => return Err(next + u64::from((!w.present & hi_bits).trailing_zeros())),
                None => return Err(next),
            };
            if hi.known & hi_bits != hi_bits {
                return Ok(None);
            }
            v |= hi.val << (8 * lo_n);
        }
        Ok(Some(v & mask(bytes)))
    }

    fn read_mem(&mut self, addr: u64, bytes: u32) -> Option<u64> {
        if self.poisoned || bytes == 0 || bytes > 8 {
            return None;
        }
        // (Each round fills the lines of one missing byte: two at most for two words.)
        for _ in 0..3 {
            match self.overlay_value(addr, bytes) {
                Ok(v) => return v,
                Err(missing) => {
                    if !self.fill_lines(missing) {
                        return None;
                    }
                }
            }
        }
        None
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
        if bytes == 0 || bytes > 64 || self.overlay.pages() > MAX_OVERLAY_PAGES {
            self.poisoned = true;
            return;
        }
        for k in 0..u64::from(bytes) {
            let at = a.wrapping_add(k);
            let bit = 1u8 << (at & 7);
            let w = self.overlay.entry(at >> 3);
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
            // Rotates (SipHash in CPython's `_Py_HashBytes`, other hashes): CF from the result,
            // OF for a count of 1, ZF SF PF unchanged; a count of 0 (after masking) changes nothing.
            (M::Rol | M::Ror, Some(n))
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
            // One-operand multiply and divide on rdx:rax (edx:eax): compilers use them for
            // division by constants (`mul` high half) and `%`. 8- and 16-bit forms (AH, DX:AX)
            // go to `generic`.
            (M::Mul | M::Imul, Some(n @ (4 | 8))) if i.op_count() == 1 => {
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
            (M::Div | M::Idiv, Some(n @ (4 | 8))) if i.op_count() == 1 => {
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
                        let num = (((u128::from(hi & mask(n)) << bits) | u128::from(lo & mask(n))) << (128 - 2 * bits)) as i128
                            >> (128 - 2 * bits);
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
            (M::Xchg, Some(n)) if i.op_count() == 2 && i.op1_kind() == OpKind::Register => {
                let a = self.operand(i, 0, n);
                let b = self.operand(i, 1, n);
                self.store(i, 0, n, b);
                self.set(i.op1_register(), a);
            }
            (M::Cmpxchg, Some(n)) if i.op_count() == 2 && i.op1_kind() == OpKind::Register => {
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
            (M::Xadd, Some(n)) if i.op_count() == 2 && i.op1_kind() == OpKind::Register => {
                let dst = self.operand(i, 0, n);
                let src = self.get(i.op1_register());
                let r = self.add_flags(dst, src, n, false, false);
                self.set(i.op1_register(), dst);
                self.store(i, 0, n, r);
            }
            (M::Cld | M::Std, _) => self.df = Some(m == M::Std),
            (M::Leave, _) => {
                self.regs[4] = self.regs[5];
                let v = self.pop();
                self.regs[5] = v;
            }
            _ => self.generic(i, factory),
        }
    }

    /// `movs`, `stos`, `lods`, `scas` or `cmps` without a repeat prefix: one element, and
    /// rsi/rdi moved by its size the way the direction flag says. False where the emulator
    /// does not model the form (a 32-bit address size, a segment override).
    fn string_step(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let n: u32 = match m {
            M::Movsb | M::Stosb | M::Lodsb | M::Scasb | M::Cmpsb => 1,
            M::Movsw | M::Stosw | M::Lodsw | M::Scasw | M::Cmpsw => 2,
            M::Movsd | M::Stosd | M::Lodsd | M::Scasd | M::Cmpsd => 4,
            M::Movsq | M::Stosq | M::Lodsq | M::Scasq | M::Cmpsq => 8,
            _ => return false,
        };
        let flat = (0..i.op_count()).all(|o| matches!(i.op_kind(o), OpKind::MemorySegRSI | OpKind::MemoryESRDI | OpKind::Register));
        if !flat || !matches!(i.segment_prefix(), Register::None | Register::DS | Register::ES) {
            return false;
        }
        let step = self.df.map(|down| if down { u64::from(n).wrapping_neg() } else { u64::from(n) });
        let (rsi, rdi) = (self.regs[6], self.regs[7]);
        let acc = match n {
            1 => Register::AL,
            2 => Register::AX,
            4 => Register::EAX,
            _ => Register::RAX,
        };
        let (moves_rsi, moves_rdi) = match m {
            M::Movsb | M::Movsw | M::Movsd | M::Movsq => {
                let v = rsi.and_then(|a| self.read_mem(a, n));
                self.write_mem(rdi, n, v);
                (true, true)
            }
            M::Stosb | M::Stosw | M::Stosd | M::Stosq => {
                let v = self.get(acc);
                self.write_mem(rdi, n, v);
                (false, true)
            }
            M::Lodsb | M::Lodsw | M::Lodsd | M::Lodsq => {
                let v = rsi.and_then(|a| self.read_mem(a, n));
                self.set(acc, v);
                (true, false)
            }
            M::Scasb | M::Scasw | M::Scasd | M::Scasq => {
                let b = rdi.and_then(|a| self.read_mem(a, n));
                self.add_flags(self.get(acc), b, n, true, false);
                (false, true)
            }
            _ => {
                let a = rsi.and_then(|a| self.read_mem(a, n));
                let b = rdi.and_then(|a| self.read_mem(a, n));
                self.add_flags(a, b, n, true, false);
                (true, true)
            }
        };
        if moves_rsi {
            self.regs[6] = rsi.zip(step).map(|(a, d)| a.wrapping_add(d));
        }
        if moves_rdi {
            self.regs[7] = rdi.zip(step).map(|(a, d)| a.wrapping_add(d));
        }
        true
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

/// What a lane operation computes per element.
#[derive(Debug, Clone, Copy)]
enum Lane {
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
enum Bits {
    And,
    AndN,
    Or,
    Xor,
}

fn lane_op(m: Mnemonic) -> Option<(Lane, usize)> {
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

fn bits_op(m: Mnemonic) -> Option<Bits> {
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
fn writes_only_op0(i: &Instruction) -> bool {
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
fn elem(v: &[u8; 64], k: usize, e: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..e].copy_from_slice(&v[k * e..k * e + e]);
    u64::from_le_bytes(b)
}

fn put_elem(v: &mut [u8; 64], k: usize, e: usize, x: u64) {
    v[k * e..k * e + e].copy_from_slice(&x.to_le_bytes()[..e]);
}

fn lanes(op: Lane, e: usize, w: usize, a: &[u8; 64], b: &[u8; 64]) -> [u8; 64] {
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

/// Opmask register k`n` from an XSAVE image (zero while the component is in its initial
/// state, XSTATE_BV bit 5 clear; None without AVX-512).
fn opmask_in_image(layout: &XsaveLayout, xs: &[u8], n: usize) -> Option<u64> {
    let v = layout.opmask(xs, n as u8)?;
    let bv = xs.get(512..520).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    Some(if bv >> 5 & 1 == 0 { 0 } else { v })
}

/// MXCSR bits the modelled FP instructions depend on.
const MXCSR_DAZ: u32 = 1 << 6;
const MXCSR_IM: u32 = 1 << 7;
const MXCSR_DM: u32 = 1 << 8;
const MXCSR_PM: u32 = 1 << 12;

impl Emu {
    /// Every vector register and MXCSR unknown (after a system call, an XRSTOR, …).
    fn forget_vectors(&mut self) {
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
    }

    /// Fill every byte still `fresh` from the thread's XSAVE image (unknown without one).
    fn load_vectors(&mut self) {
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
        }
    }

    fn mxcsr_now(&mut self) -> Option<u32> {
        if self.mxcsr_fresh {
            self.load_vectors();
        }
        self.mxcsr
    }

    /// The low `len` bytes of vector register `r` when all are known.
    fn vread(&mut self, r: Register, len: usize) -> Option<[u8; 64]> {
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
    fn vwrite(&mut self, n: usize, data: Option<[u8; 64]>, len: usize, zero_upper: bool) {
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
    fn vwrite_part(&mut self, n: usize, off: usize, data: Option<&[u8]>, len: usize) {
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

    /// `len` bytes of memory as the path sees them (None if any is unknown).
    fn read_bytes(&mut self, a: u64, len: usize) -> Option<[u8; 64]> {
        let mut out = [0u8; 64];
        let mut k = 0;
        while k < len {
            let c = (len - k).min(8);
            let v = self.read_mem(a.wrapping_add(k as u64), c as u32)?;
            out[k..k + c].copy_from_slice(&v.to_le_bytes()[..c]);
            k += c;
        }
        Some(out)
    }

    /// Store `len` bytes (None: their values unknown; an unknown address poisons memory).
    fn write_bytes(&mut self, a: Option<u64>, data: Option<[u8; 64]>, len: usize) {
        match (a, data) {
            (Some(a), Some(d)) => {
                let mut k = 0;
                while k < len {
                    let c = (len - k).min(8);
                    let mut b = [0u8; 8];
                    b[..c].copy_from_slice(&d[k..k + c]);
                    self.write_mem(Some(a.wrapping_add(k as u64)), c as u32, Some(u64::from_le_bytes(b)));
                    k += c;
                }
            }
            _ => self.write_mem(a, len as u32, None),
        }
    }

    /// The memory operand's address, None when the instruction would fault on it for
    /// alignment (`align` bytes; such a load is unknown, such a store poisons memory).
    fn vector_ea(&self, i: &Instruction, align: usize) -> Option<u64> {
        let a = self.ea(i)?;
        (a % align as u64 == 0).then_some(a)
    }

    /// Operand `o` as `len` bytes: a vector register's low bytes or memory.
    fn vsrc(&mut self, i: &Instruction, o: u32, len: usize, align: usize) -> Option<[u8; 64]> {
        match i.op_kind(o) {
            OpKind::Register if is_vec(i.op_register(o)) => self.vread(i.op_register(o), len),
            OpKind::Memory => {
                let a = self.vector_ea(i, align)?;
                self.read_bytes(a, len)
            }
            _ => None,
        }
    }

    /// An instruction that names a vector register (or `vzeroupper`/`vzeroall`): modelled, or
    /// made unknown by `generic`. False when it names none (the integer code handles it).
    fn vector_step(&mut self, i: &Instruction, factory: &mut InstructionInfoFactory) -> bool {
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
                    self.generic(i, factory);
                }
                return true;
            }
            EncodingKind::Legacy => false,
            EncodingKind::VEX => true,
            EncodingKind::EVEX => {
                if !self.evex_op(i) {
                    self.generic(i, factory);
                }
                return true;
            }
            // XOP, …: not modelled.
            _ => {
                self.generic(i, factory);
                return true;
            }
        };
        if !self.vector_op(i, vex) {
            if writes_only_op0(i) {
                // (What `generic` would conclude, without asking iced-x86 for the
                // instruction's register and memory use: BLAS kernels are mostly these.)
                self.last_generic = Some((i.ip(), i.mnemonic()));
                let n = i.op0_register().number();
                self.vregs[n].known = 0;
                self.vregs[n].fresh = 0;
            } else {
                self.generic(i, factory);
            }
        }
        true
    }

    /// Opmask register k`k` as the next instruction reads it, when known (the run-ahead reads
    /// the masks of masked instructions before stepping them, `Tracer::run_ahead_from`).
    pub fn opmask(&mut self, k: u8) -> Option<u64> {
        self.kregs.get(usize::from(k))?;
        self.kread(usize::from(k))
    }

    /// Opmask register k`n` when known.
    fn kread(&mut self, n: usize) -> Option<u64> {
        if self.kregs[n].fresh {
            self.load_vectors();
        }
        let k = self.kregs[n];
        k.known.then_some(k.val)
    }

    fn kwrite(&mut self, n: usize, v: Option<u64>) {
        self.kregs[n] = KReg {
            val: v.unwrap_or(0),
            known: v.is_some(),
            fresh: false,
        };
    }

    /// The opmask instructions (VEX-encoded, k registers only or with a general register or
    /// memory); false when this form is not modelled (nothing changed yet).
    fn k_op(&mut self, i: &Instruction) -> bool {
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
    fn evex_op(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        if i.is_broadcast() || i.rounding_control() != iced_x86::RoundingControl::None || i.suppress_all_exceptions() {
            return false;
        }
        let mem_len = i.memory_size().size();
        let op_mask = i.op_mask();
        let masked = op_mask != Register::None;
        let kmask = |e: &mut Emu| if masked { e.kread(k_index(op_mask)) } else { Some(u64::MAX) };
        // Compares into an opmask: one bit per element, zero above, and-ed with the mask.
        let cmp: Option<(usize, ElemPredicate)> = match m {
            M::Vpcmpeqb | M::Vpcmpeqw | M::Vpcmpeqd | M::Vpcmpeqq => Some((0, |x, y, _| x == y)),
            M::Vpcmpgtb | M::Vpcmpgtw | M::Vpcmpgtd | M::Vpcmpgtq => Some((0, |x, y, n| (sext(x, n) as i64) > (sext(y, n) as i64))),
            M::Vptestmb | M::Vptestmw | M::Vptestmd | M::Vptestmq => Some((0, |x, y, _| x & y != 0)),
            M::Vptestnmb | M::Vptestnmw | M::Vptestnmd | M::Vptestnmq => Some((0, |x, y, _| x & y == 0)),
            M::Vpcmpb | M::Vpcmpw | M::Vpcmpd | M::Vpcmpq => Some((1, |_, _, _| false)),
            M::Vpcmpub | M::Vpcmpuw | M::Vpcmpud | M::Vpcmpuq => Some((2, |_, _, _| false)),
            _ => None,
        };
        if let Some((kind, f)) = cmp {
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
            let k = kmask(self);
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
            return true;
        }
        let k0 = i.op0_kind();
        let reg0 = (k0 == OpKind::Register).then(|| i.op0_register()).filter(|r| is_vec(*r));
        // The element size masking works in.
        let elem_of = |m: M| match m {
            M::Vmovdqu8 => 1,
            M::Vmovdqu16 => 2,
            M::Vmovdqu32 | M::Vmovdqa32 | M::Vmovups | M::Vmovaps => 4,
            _ => 8,
        };
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
                            match (a, kmask(self)) {
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
                        if k0 == OpKind::Memory
                            && is_vec(i.op1_register())
                            && mem_len == i.op1_register().size()
                            && !i.zeroing_masking() =>
                    {
                        let s = i.op1_register();
                        let (w, e) = (s.size(), elem_of(m));
                        let v = self.vread(s, w);
                        let a = self.vector_ea(i, if aligned { w } else { 1 });
                        match (a, kmask(self)) {
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
            }
            M::Vpbroadcastb | M::Vpbroadcastw | M::Vpbroadcastd | M::Vpbroadcastq if i.op_count() == 2 && !masked => {
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
            }
            M::Vpternlogd | M::Vpternlogq if i.op_count() == 4 && !masked => {
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
            }
            _ if !masked && (evex_bits_op(m).is_some() || lane_op(m).is_some()) => {
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
                            (Some(op), _) => {
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
                            (None, Some((lane, e))) => lanes(lane, e, w, &a, &b),
                            (None, None) => [0u8; 64],
                        })
                    }
                };
                self.vwrite(d.number(), v, w, true);
            }
            _ => return false,
        }
        true
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
            _ if bits_op(m).is_some() || lane_op(m).is_some() => {
                let Some(d) = reg0.filter(|d| is_vec(*d)) else { return false };
                let (a_op, b_op) = if vex { (1, 2) } else { (0, 1) };
                if i.op_count() != b_op + 1 || (i.op_kind(b_op) == OpKind::Memory && mem_len != d.size()) {
                    return false;
                }
                let w = d.size();
                // The same register twice: `pxor x, x` is zero and `pcmpeqb x, x` all ones
                // whatever x holds.
                let same = i.op_kind(a_op) == OpKind::Register
                    && i.op_kind(b_op) == OpKind::Register
                    && i.op_register(a_op) == i.op_register(b_op);
                let v = match (bits_op(m), lane_op(m)) {
                    (Some(Bits::Xor | Bits::AndN), _) if same => Some([0u8; 64]),
                    (_, Some((Lane::Eq, _))) if same => Some([0xff; 64]),
                    (_, Some((Lane::GtSigned | Lane::Sub, _))) if same => Some([0u8; 64]),
                    (op, lane) => {
                        let a = self.vsrc(i, a_op, w, 1);
                        let b = self.vsrc(i, b_op, w, Self::align_of(i, vex, w));
                        a.zip(b).map(|(a, b)| match (op, lane) {
                            (Some(op), _) => {
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
                            (None, Some((lane, e))) => lanes(lane, e, w, &a, &b),
                            (None, None) => unreachable!("one of bits_op and lane_op matched"),
                        })
                    }
                };
                self.vwrite(d.number(), v, w, vex);
            }
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
    fn fp_compare(&mut self, a: u64, b: u64, n: u32, signaling: bool) -> Option<Option<std::cmp::Ordering>> {
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
    fn volatile_memory_reads_as_unknown_and_the_rest_of_its_page_as_itself() {
        // A thread's rseq area beside ordinary data in one page: cpu_id (what glibc's
        // pthread_create reads) must come out unknown, the word after it as stored.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let cells: Box<[u64; 8]> = Box::new(std::array::from_fn(|k| seed.rotate_left(k as u32 * 7) | 1));
        let base = cells.as_ptr() as u64;
        // (The volatile range: bytes 8..16; the reads: [rax+8] and [rax+16], 4 bytes each.)
        let code = [0x8b, 0x78, 0x08, 0x8b, 0x70, 0x10]; // mov edi,[rax+8]; mov esi,[rax+16]
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        for volatile in [false, true] {
            let ranges = if volatile { vec![(base + 8, base + 16)] } else { Vec::new() };
            let mut e = Emu::new(&regs, mem.clone()).with_volatile(&ranges);
            e.regs[0] = Some(base);
            let mut f = InstructionInfoFactory::new();
            let mut d = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
            while d.can_decode() {
                e.step(&d.decode(), &mut f);
            }
            let want_edi = (!volatile).then_some(cells[1] & 0xffff_ffff);
            assert_eq!(e.regs[7], want_edi, "edi, volatile {volatile}");
            assert_eq!(e.regs[6], Some(cells[2] & 0xffff_ffff), "esi, volatile {volatile}");
        }
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

    /// One-operand mul/imul/div/idiv (64- and 32-bit) against the CPU on random operands, and
    /// unknown where the CPU would raise #DE.
    #[test]
    fn multiply_and_divide_match_the_cpu() {
        use iced_x86::{Code as C, Instruction as I, Register as R};
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
        let jc = || I::with_branch(C::Jb_rel32_64, 0x1000).unwrap();
        for round in 0..400 {
            let (a, b) = (xorshift(&mut seed), xorshift(&mut seed));
            let b = if round % 4 == 0 { b % 1000 + 1 } else { b | 1 };
            // mul / imul rsi: rdx:rax, CF = OF = high half significant.
            let (hi, lo, cf): (u64, u64, u64);
            // SAFETY: register-only arithmetic; pushf/pop balanced.
            unsafe {
                std::arch::asm!("mul rsi", "pushfq", "pop {f}", f = out(reg) cf, inout("rax") a => lo, out("rdx") hi, in("rsi") b, options(nomem));
            }
            let (t, r) = emu_asm(&[I::with1(C::Mul_rm64, R::RSI).unwrap(), jc()], &[(0, a), (6, b)]);
            assert_eq!((r[0], r[2], t), (Some(lo), Some(hi), Some(cf & 1 == 1)), "mul {a:#x} {b:#x}");
            let (ihi, ilo, icf): (u64, u64, u64);
            // SAFETY: as above.
            unsafe {
                std::arch::asm!("imul rsi", "pushfq", "pop {f}", f = out(reg) icf, inout("rax") a => ilo, out("rdx") ihi, in("rsi") b, options(nomem));
            }
            let (t, r) = emu_asm(&[I::with1(C::Imul_rm64, R::RSI).unwrap(), jc()], &[(0, a), (6, b)]);
            assert_eq!((r[0], r[2], t), (Some(ilo), Some(ihi), Some(icf & 1 == 1)), "imul {a:#x} {b:#x}");
            let (h32, l32): (u64, u64);
            // SAFETY: as above.
            unsafe {
                std::arch::asm!("mul esi", inout("rax") a => l32, out("rdx") h32, in("rsi") b, options(nomem));
            }
            let (_, r) = emu_asm(&[I::with1(C::Mul_rm32, R::ESI).unwrap()], &[(0, a), (6, b)]);
            assert_eq!((r[0], r[2]), (Some(l32), Some(h32)), "mul32 {a:#x} {b:#x}");
            // div rsi with rdx < rsi (no #DE): quotient rax, remainder rdx.
            let d = b;
            let h = xorshift(&mut seed) % d;
            let (q, rem): (u64, u64);
            // SAFETY: rdx < rsi, so the quotient fits; register-only.
            unsafe {
                std::arch::asm!("div rsi", inout("rax") a => q, inout("rdx") h => rem, in("rsi") d, options(nomem));
            }
            let (_, r) = emu_asm(&[I::with1(C::Div_rm64, R::RSI).unwrap()], &[(0, a), (2, h), (6, d)]);
            assert_eq!((r[0], r[2]), (Some(q), Some(rem)), "div {h:#x}:{a:#x} / {d:#x}");
            // idiv after cqo (rdx the sign of rax): never #DE for d != 0, -1.
            let sd = if round % 2 == 0 { d } else { d.wrapping_neg() };
            let sh = ((a as i64) >> 63) as u64;
            let (iq, irem): (u64, u64);
            // SAFETY: rdx:rax is rax sign-extended and the divisor is neither 0 nor -1.
            unsafe {
                std::arch::asm!("idiv rsi", inout("rax") a => iq, inout("rdx") sh => irem, in("rsi") sd, options(nomem));
            }
            let (_, r) = emu_asm(&[I::with1(C::Idiv_rm64, R::RSI).unwrap()], &[(0, a), (2, sh), (6, sd)]);
            assert_eq!((r[0], r[2]), (Some(iq), Some(irem)), "idiv {a:#x} / {sd:#x}");
            let (iq32, irem32): (u64, u64);
            let sh32 = u64::from(((a as i32) >> 31) as u32);
            // SAFETY: as above, 32-bit.
            unsafe {
                std::arch::asm!("idiv esi", inout("rax") a => iq32, inout("rdx") sh32 => irem32, in("rsi") sd, options(nomem));
            }
            let sd32 = sd as u32;
            if sd32 != 0 && sd32 != u32::MAX {
                let (_, r) = emu_asm(&[I::with1(C::Idiv_rm32, R::ESI).unwrap()], &[(0, a), (2, sh32), (6, sd)]);
                assert_eq!((r[0], r[2]), (Some(iq32), Some(irem32)), "idiv32 {a:#x} / {sd:#x}");
            }
            // Where the CPU faults (#DE), the emulator knows nothing.
            let (_, r) = emu_asm(&[I::with1(C::Div_rm64, R::RSI).unwrap()], &[(0, a), (2, h), (6, 0)]);
            assert_eq!((r[0], r[2]), (None, None), "div by zero");
            let (_, r) = emu_asm(&[I::with1(C::Div_rm64, R::RSI).unwrap()], &[(0, a), (2, d), (6, d)]);
            assert_eq!((r[0], r[2]), (None, None), "div quotient too wide");
            let (_, r) = emu_asm(&[I::with1(C::Idiv_rm64, R::RSI).unwrap()], &[(0, 0), (2, 1 << 62), (6, 3)]);
            assert_eq!((r[0], r[2]), (None, None), "idiv quotient too wide");
        }
    }

    /// `rol`/`ror` by an immediate and by cl, 64, 32, 16 and 8 bits: value, CF, and OF where
    /// the count is 1, against the CPU on random operands and counts (0 and multiples of the
    /// width included); ZF is left as it was (set by a `cmp` before).
    #[test]
    fn rotates_match_the_cpu() {
        use iced_x86::{Code as C, Instruction as I, Register as R};
        let mut seed = 0x6a09_e667_f3bc_c908u64 ^ u64::from(std::process::id());
        let jcc = |c: C| I::with_branch(c, 0x1000).unwrap();
        for round in 0..400u64 {
            let a = xorshift(&mut seed);
            let c = match round % 4 {
                0 => 1,
                1 => 0,
                2 => 16 * (xorshift(&mut seed) % 3),
                _ => xorshift(&mut seed) % 256,
            } as u8;
            // Shifts by cl of a 32-bit register: written (zero-extended) even for a count of 0.
            for code in [C::Shl_rm32_CL, C::Shr_rm32_CL, C::Sar_rm32_CL] {
                let r: u64;
                // SAFETY: register-only shifts.
                unsafe {
                    match code {
                        C::Shl_rm32_CL => std::arch::asm!("shl eax, cl", inout("rax") a => r, in("cl") c, options(nomem, nostack)),
                        C::Shr_rm32_CL => std::arch::asm!("shr eax, cl", inout("rax") a => r, in("cl") c, options(nomem, nostack)),
                        _ => std::arch::asm!("sar eax, cl", inout("rax") a => r, in("cl") c, options(nomem, nostack)),
                    }
                }
                let (_, r1) = emu_asm(&[I::with2(code, R::EAX, R::CL).unwrap()], &[(0, a), (1, u64::from(c))]);
                assert_eq!(r1[0], Some(r), "{code:?} a={a:#x} c={c}");
            }
            for (ror, width) in [
                (false, 8),
                (true, 8),
                (false, 4),
                (true, 4),
                (false, 2),
                (true, 2),
                (false, 1),
                (true, 1),
            ] {
                let (r, f): (u64, u64);
                // SAFETY: register-only rotates; pushf/pop balanced. ZF is set (cmp of equals)
                // before, so an unchanged ZF shows.
                unsafe {
                    match (ror, width) {
                        (false, 8) => {
                            std::arch::asm!("cmp rax, rax", "rol rax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (true, 8) => {
                            std::arch::asm!("cmp rax, rax", "ror rax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (false, 4) => {
                            std::arch::asm!("cmp rax, rax", "rol eax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (true, 4) => {
                            std::arch::asm!("cmp rax, rax", "ror eax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (false, 2) => {
                            std::arch::asm!("cmp rax, rax", "rol ax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (true, 2) => {
                            std::arch::asm!("cmp rax, rax", "ror ax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (false, _) => {
                            std::arch::asm!("cmp rax, rax", "rol al, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                        (true, _) => {
                            std::arch::asm!("cmp rax, rax", "ror al, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                        }
                    }
                }
                let (code_cl, code_imm, reg) = match (ror, width) {
                    (false, 8) => (C::Rol_rm64_CL, C::Rol_rm64_imm8, R::RAX),
                    (true, 8) => (C::Ror_rm64_CL, C::Ror_rm64_imm8, R::RAX),
                    (false, 4) => (C::Rol_rm32_CL, C::Rol_rm32_imm8, R::EAX),
                    (true, 4) => (C::Ror_rm32_CL, C::Ror_rm32_imm8, R::EAX),
                    (false, 2) => (C::Rol_rm16_CL, C::Rol_rm16_imm8, R::AX),
                    (true, 2) => (C::Ror_rm16_CL, C::Ror_rm16_imm8, R::AX),
                    (false, _) => (C::Rol_rm8_CL, C::Rol_rm8_imm8, R::AL),
                    (true, _) => (C::Ror_rm8_CL, C::Ror_rm8_imm8, R::AL),
                };
                let cmp = I::with2(C::Cmp_rm64_r64, R::RAX, R::RAX).unwrap();
                let forms = [
                    I::with2(code_cl, reg, R::CL).unwrap(),
                    I::with2(code_imm, reg, u32::from(c)).unwrap(),
                ];
                for form in forms {
                    let (cf, r1) = emu_asm(&[cmp, form, jcc(C::Jb_rel32_64)], &[(0, a), (1, u64::from(c))]);
                    assert_eq!(r1[0], Some(r), "{form} a={a:#x} c={c}");
                    assert_eq!(cf, Some(f & 1 == 1), "CF {form} a={a:#x} c={c}");
                    let (zf, _) = emu_asm(&[cmp, form, jcc(C::Je_rel32_64)], &[(0, a), (1, u64::from(c))]);
                    assert_eq!(zf, Some(f >> 6 & 1 == 1), "ZF {form} a={a:#x} c={c}");
                    let (of, _) = emu_asm(&[cmp, form, jcc(C::Jo_rel32_64)], &[(0, a), (1, u64::from(c))]);
                    if c & if width == 8 { 63 } else { 31 } == 1 || c & if width == 8 { 63 } else { 31 } == 0 {
                        assert_eq!(of, Some(f >> 11 & 1 == 1), "OF {form} a={a:#x} c={c}");
                    }
                }
            }
        }
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
            // Sign extensions of the accumulator, and bt.
            let (_, r) = emu_asm(&[I::with(C::Cdqe)], &[(0, a)]);
            assert_eq!(r[0], Some(a as i32 as i64 as u64));
            let (_, r) = emu_asm(&[I::with(C::Cwde)], &[(0, a)]);
            assert_eq!(r[0], Some(u64::from(a as i16 as i32 as u32)));
            let (_, r) = emu_asm(&[I::with(C::Cqo)], &[(0, a), (2, b)]);
            assert_eq!(r[2], Some(((a as i64) >> 63) as u64));
            let (_, r) = emu_asm(&[I::with(C::Cdq)], &[(0, a), (2, b)]);
            assert_eq!(r[2], Some(u64::from(((a as i32) >> 31) as u32)));
            let (t, _) = emu_asm(
                &[I::with2(C::Bt_rm64_r64, R::RAX, R::RSI).unwrap(), jcc(C::Jb_rel32_64)],
                &[(0, a), (6, b)],
            );
            assert_eq!(t, Some(a >> (b % 64) & 1 == 1));
            let (t, _) = emu_asm(
                &[I::with2(C::Bt_rm32_imm8, R::EAX, (b % 256) as u32).unwrap(), jcc(C::Jae_rel32_64)],
                &[(0, a)],
            );
            assert_eq!(t, Some((a as u32) >> (b % 256 % 32) & 1 == 0));
            let (_, r) = emu_asm(&[I::with2(C::Shr_rm64_CL, R::RAX, R::CL).unwrap()], &[(0, a), (1, b)]);
            assert_eq!(r[0], Some(a >> (b % 64)));
            let (_, r) = emu_asm(
                &[I::with3(C::VEX_Sarx_r32_rm32_r32, R::ECX, R::EAX, R::EDX).unwrap()],
                &[(0, a), (2, b)],
            );
            assert_eq!(r[1], Some(u64::from(((a as i32) >> (b % 32)) as u32)));
        }
    }

    /// Registers a string, exchange or bit snippet reads and writes, and the flags after it.
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    struct IntState {
        rax: u64,
        rcx: u64,
        rsi: u64,
        rdi: u64,
        r8: u64,
        r9: u64,
        r10: u64,
    }

    macro_rules! native_int {
        ($s:expr; $($code:literal),+) => {{
            let mut s: IntState = $s;
            let flags: u64;
            // SAFETY: the snippet reads and writes only the buffers its registers point into
            // (the caller's), leaves the direction flag clear and balances its push and pop.
            unsafe {
                std::arch::asm!(
                    $($code,)+
                    "pushfq",
                    "pop r11",
                    inout("rax") s.rax,
                    inout("rcx") s.rcx,
                    inout("rsi") s.rsi,
                    inout("rdi") s.rdi,
                    inout("r8") s.r8,
                    inout("r9") s.r9,
                    inout("r10") s.r10,
                    out("r11") flags,
                )
            };
            (s, flags)
        }};
    }

    #[test]
    fn string_exchange_and_bit_instructions_match_the_cpu() {
        const CF: u64 = 1;
        const ZF: u64 = 1 << 6;
        const SF: u64 = 1 << 7;
        type Native = fn(IntState) -> (IntState, u64);
        // Each case: the snippet's bytes, the native run of the same text, and the flags it
        // defines at its end.
        let cases: Vec<(&[u8], Native, u64)> = vec![
            (
                // movsq; movsb; lodsw; stosd; mov r9, [r8]; mov r10, [r8+8]; cmpsb
                b"\x48\xa5\xa4\x66\xad\xab\x4d\x8b\x08\x4d\x8b\x50\x08\xa6",
                |s| native_int!(s; "movsq", "movsb", "lodsw", "stosd", "mov r9, [r8]", "mov r10, [r8+8]", "cmpsb"),
                CF | ZF | SF,
            ),
            // scasw
            (b"\x66\xaf", |s| native_int!(s; "scasw"), CF | ZF | SF),
            // std; movsq; lodsd; stosb; cld; mov r9, [r8]
            (
                b"\xfd\x48\xa5\xad\xaa\xfc\x4d\x8b\x08",
                |s| native_int!(s; "std", "movsq", "lodsd", "stosb", "cld", "mov r9, [r8]"),
                0,
            ),
            // lock cmpxchg [r8], rcx; mov r9, [r8]
            (
                b"\xf0\x49\x0f\xb1\x08\x4d\x8b\x08",
                |s| native_int!(s; "lock cmpxchg [r8], rcx", "mov r9, [r8]"),
                CF | ZF | SF,
            ),
            // cmpxchg r9d, ecx (a register destination, 32-bit)
            (b"\x41\x0f\xb1\xc9", |s| native_int!(s; "cmpxchg r9d, ecx"), CF | ZF | SF),
            // xchg [r8], rcx; mov r9, [r8]
            (b"\x49\x87\x08\x4d\x8b\x08", |s| native_int!(s; "xchg [r8], rcx", "mov r9, [r8]"), 0),
            // lock xadd [r8], rcx; mov r9, [r8]
            (
                b"\xf0\x49\x0f\xc1\x08\x4d\x8b\x08",
                |s| native_int!(s; "lock xadd [r8], rcx", "mov r9, [r8]"),
                CF | ZF | SF,
            ),
            // blsmsk rcx, rax
            (b"\xc4\xe2\xf0\xf3\xd0", |s| native_int!(s; "blsmsk rcx, rax"), CF | ZF | SF),
            // blsr rcx, rax
            (b"\xc4\xe2\xf0\xf3\xc8", |s| native_int!(s; "blsr rcx, rax"), CF | ZF | SF),
            // blsi rcx, rax
            (b"\xc4\xe2\xf0\xf3\xd8", |s| native_int!(s; "blsi rcx, rax"), CF | ZF | SF),
            // bts rax, rcx
            (b"\x48\x0f\xab\xc8", |s| native_int!(s; "bts rax, rcx"), CF),
            // btr eax, ecx
            (b"\x0f\xb3\xc8", |s| native_int!(s; "btr eax, ecx"), CF),
            // btc rax, 5
            (b"\x48\x0f\xba\xf8\x05", |s| native_int!(s; "btc rax, 5"), CF),
        ];
        if !is_x86_feature_detected!("bmi1") {
            eprintln!("skipped: needs BMI1");
            return;
        }
        let mut seed = 0x3c6e_f372_fe94_f82bu64 ^ u64::from(std::process::id());
        for _ in 0..100 {
            for (bytes, native, defined) in &cases {
                let src: [u64; 4] = std::array::from_fn(|_| xorshift(&mut seed));
                let dst: [u64; 4] = std::array::from_fn(|_| xorshift(&mut seed));
                let mut native_dst = dst;
                // Equal operands half of the time, where compares and exchanges branch.
                let r = xorshift(&mut seed);
                let rax = if r.is_multiple_of(2) { dst[0] } else { xorshift(&mut seed) };
                let rax = if r.is_multiple_of(3) { rax & 0xff } else { rax };
                let rcx = if r.is_multiple_of(5) { 0 } else { xorshift(&mut seed) };
                // The direction-down snippet starts in the middle of the buffers.
                let mid = if bytes.starts_with(b"\xfd") { 16 } else { 0 };
                let at = |p: *const u64| p as u64 + mid;
                let start = IntState {
                    rax,
                    rcx,
                    rsi: at(src.as_ptr()),
                    rdi: at(dst.as_ptr()),
                    r8: dst.as_ptr() as u64,
                    ..IntState::default()
                };
                let set = |s: &IntState| [(0, s.rax), (1, s.rcx), (6, s.rsi), (7, s.rdi), (8, s.r8), (9, s.r9), (10, s.r10)];
                let with_jcc = |jcc: &[u8]| {
                    let mut code = bytes.to_vec();
                    code.extend_from_slice(jcc);
                    emu_run(&code, &set(&start))
                };
                // (Emulated first: the emulator only reads the buffers.)
                let (cf, regs) = with_jcc(b"\x72\x00");
                let (zf, _) = with_jcc(b"\x74\x00");
                let (sf, _) = with_jcc(b"\x78\x00");
                let native_start = IntState {
                    rsi: at(src.as_ptr()),
                    rdi: at(native_dst.as_mut_ptr()),
                    r8: native_dst.as_ptr() as u64,
                    ..start
                };
                let (want, flags) = native(native_start);
                let shift = |v: u64| v.wrapping_sub(native_dst.as_ptr() as u64).wrapping_add(dst.as_ptr() as u64);
                let got = IntState {
                    rax: regs[0].expect("rax"),
                    rcx: regs[1].expect("rcx"),
                    rsi: regs[6].expect("rsi"),
                    rdi: regs[7].expect("rdi"),
                    r8: regs[8].expect("r8"),
                    r9: regs[9].expect("r9"),
                    r10: regs[10].expect("r10"),
                };
                let want = IntState {
                    rdi: shift(want.rdi),
                    r8: shift(want.r8),
                    ..want
                };
                assert_eq!(got, want, "{bytes:02x?} from {start:x?}");
                for (bit, emulated) in [(CF, cf), (ZF, zf), (SF, sf)] {
                    if defined & bit != 0 {
                        assert_eq!(emulated, Some(flags & bit != 0), "{bytes:02x?} flag {bit:#x} from {start:x?}");
                    }
                }
            }
        }
    }

    /// Registers around one vector instruction: ymm0–ymm3, rax (rdi points at `mem`).
    #[derive(Debug, Clone, Copy, PartialEq)]
    #[repr(C, align(32))]
    struct VecState {
        y: [[u8; 32]; 4],
        /// 32-byte aligned (for the aligned moves).
        mem: [u8; 64],
        rax: u64,
    }

    /// Run `insn` natively with ymm0–3, rax and [rdi] from `s`; flags (ZF CF PF SF OF) come back.
    macro_rules! native {
        ($insn:literal, $s:expr) => {{
            let mut s: VecState = $s;
            let mut rax = s.rax;
            let fl: u64;
            let y = s.y.as_mut_ptr();
            let mem = s.mem.as_mut_ptr();
            // SAFETY: the asm reads and writes only the 128 bytes of `s.y` and the 64 of
            // `s.mem` (through rdi), clobbers the registers it names, and balances its push/pop.
            unsafe {
                std::arch::asm!(
                    "vmovdqu ymm0, [{y}]",
                    "vmovdqu ymm1, [{y} + 32]",
                    "vmovdqu ymm2, [{y} + 64]",
                    "vmovdqu ymm3, [{y} + 96]",
                    $insn,
                    "pushfq",
                    "pop {fl}",
                    "vmovdqu [{y}], ymm0",
                    "vmovdqu [{y} + 32], ymm1",
                    "vmovdqu [{y} + 64], ymm2",
                    "vmovdqu [{y} + 96], ymm3",
                    y = in(reg) y,
                    fl = out(reg) fl,
                    inout("rax") rax,
                    in("rdi") mem,
                    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
                );
            }
            s.rax = rax;
            (s, fl)
        }};
    }

    fn mxcsr_now() -> u32 {
        let mut m = 0u32;
        // SAFETY: stmxcsr writes the 4 bytes of `m`.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut m, options(nostack)) };
        m
    }

    /// The same instruction through the emulator, from the same state; the result where known
    /// (`None` for a register or memory byte it does not know) and its flags.
    fn emulated(i: iced_x86::Instruction, s: &VecState) -> (Option<VecState>, Flags) {
        let mut enc = iced_x86::Encoder::new(64);
        enc.encode(&i, 0x1000).unwrap();
        let bytes = enc.take_buffer();
        let mut d = Decoder::with_ip(64, &bytes, 0x1000, DecoderOptions::NONE);
        let insn = d.decode();
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut e = Emu::new(&regs, mem);
        // rdi points at a copy of the memory the native run used (the emulator reads this process).
        let buf = Box::new(*s);
        e.regs[0] = Some(s.rax);
        e.regs[7] = Some(buf.mem.as_ptr() as u64);
        for (n, y) in s.y.iter().enumerate() {
            e.vregs[n].val[..32].copy_from_slice(y);
            e.vregs[n].known = low_bits(32);
            e.vregs[n].fresh = 0;
        }
        e.mxcsr = Some(mxcsr_now());
        e.mxcsr_fresh = false;
        e.step(&insn, &mut InstructionInfoFactory::new());
        let mut out = *s;
        out.rax = match e.regs[0] {
            Some(v) => v,
            None => return (None, e.flags),
        };
        for n in 0..4 {
            match e.vread(Register::YMM0 + n as u32, 32) {
                Some(v) => out.y[n].copy_from_slice(&v[..32]),
                None => return (None, e.flags),
            }
        }
        match e.read_bytes(buf.mem.as_ptr() as u64, 64) {
            Some(m) => out.mem = m,
            None => return (None, e.flags),
        }
        std::hint::black_box(&buf);
        (Some(out), e.flags)
    }

    /// Random lanes with many equal bytes and words between registers (so compares see both).
    fn vec_state(seed: &mut u64) -> VecState {
        let mut s = VecState {
            y: [[0; 32]; 4],
            rax: xorshift(seed),
            mem: [0; 64],
        };
        for b in s.mem.iter_mut() {
            *b = xorshift(seed) as u8;
        }
        for n in 0..4 {
            for k in 0..32 {
                let r = xorshift(seed);
                s.y[n][k] = match r % 5 {
                    0 if n > 0 => s.y[0][k],
                    1 => s.mem[k],
                    2 => 0,
                    _ => (r >> 8) as u8,
                };
            }
        }
        // Scalars worth comparing and converting in the low lanes of xmm0/xmm1 and the memory.
        let pool = |r: u64| -> u64 {
            match r % 10 {
                0 => f64::NAN.to_bits(),
                1 => 0x7ff0_0000_0000_0001,       // signalling NaN
                2 => (r >> 20) & ((1 << 52) - 1), // denormal (or zero)
                3 => (-0.0f64).to_bits(),
                4 => ((r >> 8) as i32 as f64).to_bits(),
                5 => (((r >> 8) % 1000) as f64 / 8.0 - 60.0).to_bits(),
                6 => (((r >> 8) as i64 as f64) * 3.0).to_bits(),
                7 => f64::INFINITY.to_bits(),
                _ => r,
            }
        };
        let (a, b) = (pool(xorshift(seed)), pool(xorshift(seed)));
        let b = if xorshift(seed).is_multiple_of(4) { a } else { b };
        s.y[0][..8].copy_from_slice(&a.to_le_bytes());
        s.y[1][..8].copy_from_slice(&b.to_le_bytes());
        s.mem[..8].copy_from_slice(&b.to_le_bytes());
        // The same for singles.
        let f = |r: u64| -> u32 {
            match r % 6 {
                0 => f32::NAN.to_bits(),
                1 => (r >> 40) as u32 & 0x7f_ffff,
                2 => ((r >> 8) as i16 as f32 / 4.0).to_bits(),
                3 => 0x7f80_0001,
                _ => r as u32,
            }
        };
        let (x, z) = (f(xorshift(seed)), f(xorshift(seed)));
        let z = if xorshift(seed).is_multiple_of(4) { x } else { z };
        s.y[2][..4].copy_from_slice(&x.to_le_bytes());
        s.y[3][..4].copy_from_slice(&z.to_le_bytes());
        s
    }

    #[test]
    fn vector_ops_match_the_cpu() {
        use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("sse4.2")) {
            eprintln!("skipped: needs AVX2 and SSE4.2");
            return;
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
        let m = || MemoryOperand::with_base(R::RDI);
        let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
        let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
        let (x0, x1, x2, x3) = (R::XMM0, R::XMM1, R::XMM2, R::XMM3);
        let (y0, y1, y2) = (R::YMM0, R::YMM1, R::YMM2);
        // Each case: the instruction for the emulator and the native run of the same text.
        type Native = fn(VecState) -> (VecState, u64);
        let cases: Vec<(I, Native)> = vec![
            (r2(C::Pcmpeqb_xmm_xmmm128, x0, x1), |s| native!("pcmpeqb xmm0, xmm1", s)),
            (r2(C::Pcmpeqw_xmm_xmmm128, x0, x1), |s| native!("pcmpeqw xmm0, xmm1", s)),
            (r2(C::Pcmpeqd_xmm_xmmm128, x0, x1), |s| native!("pcmpeqd xmm0, xmm1", s)),
            (r2(C::Pcmpeqq_xmm_xmmm128, x0, x1), |s| native!("pcmpeqq xmm0, xmm1", s)),
            (r2(C::Pcmpgtb_xmm_xmmm128, x0, x1), |s| native!("pcmpgtb xmm0, xmm1", s)),
            (r2(C::Pcmpgtw_xmm_xmmm128, x0, x1), |s| native!("pcmpgtw xmm0, xmm1", s)),
            (r2(C::Pcmpgtd_xmm_xmmm128, x0, x1), |s| native!("pcmpgtd xmm0, xmm1", s)),
            (r2(C::Pcmpgtq_xmm_xmmm128, x0, x1), |s| native!("pcmpgtq xmm0, xmm1", s)),
            (r2(C::Pminub_xmm_xmmm128, x0, x1), |s| native!("pminub xmm0, xmm1", s)),
            (r2(C::Pmaxub_xmm_xmmm128, x0, x1), |s| native!("pmaxub xmm0, xmm1", s)),
            (r2(C::Pminuw_xmm_xmmm128, x0, x1), |s| native!("pminuw xmm0, xmm1", s)),
            (r2(C::Pmaxud_xmm_xmmm128, x0, x1), |s| native!("pmaxud xmm0, xmm1", s)),
            (r2(C::Pminsb_xmm_xmmm128, x0, x1), |s| native!("pminsb xmm0, xmm1", s)),
            (r2(C::Pminsw_xmm_xmmm128, x0, x1), |s| native!("pminsw xmm0, xmm1", s)),
            (r2(C::Pmaxsd_xmm_xmmm128, x0, x1), |s| native!("pmaxsd xmm0, xmm1", s)),
            (r2(C::Paddb_xmm_xmmm128, x0, x1), |s| native!("paddb xmm0, xmm1", s)),
            (r2(C::Paddq_xmm_xmmm128, x0, x1), |s| native!("paddq xmm0, xmm1", s)),
            (r2(C::Psubw_xmm_xmmm128, x0, x1), |s| native!("psubw xmm0, xmm1", s)),
            (r2(C::Psubd_xmm_xmmm128, x0, x1), |s| native!("psubd xmm0, xmm1", s)),
            (r2(C::Pand_xmm_xmmm128, x0, x1), |s| native!("pand xmm0, xmm1", s)),
            (r2(C::Pandn_xmm_xmmm128, x0, x1), |s| native!("pandn xmm0, xmm1", s)),
            (r2(C::Por_xmm_xmmm128, x0, x1), |s| native!("por xmm0, xmm1", s)),
            (r2(C::Pxor_xmm_xmmm128, x0, x1), |s| native!("pxor xmm0, xmm1", s)),
            (r2(C::Andnpd_xmm_xmmm128, x0, x1), |s| native!("andnpd xmm0, xmm1", s)),
            (r2(C::Xorps_xmm_xmmm128, x2, x2), |s| native!("xorps xmm2, xmm2", s)),
            (r2(C::Pcmpeqb_xmm_xmmm128, x3, x3), |s| native!("pcmpeqb xmm3, xmm3", s)),
            (I::with2(C::Pcmpeqb_xmm_xmmm128, x0, m()).unwrap(), |s| {
                native!("pcmpeqb xmm0, [rdi]", s)
            }),
            (I::with2(C::Pminub_xmm_xmmm128, x0, m()).unwrap(), |s| {
                native!("pminub xmm0, [rdi]", s)
            }),
            (r2(C::Pmovmskb_r32_xmm, R::EAX, x1), |s| native!("pmovmskb eax, xmm1", s)),
            (r2(C::Movmskps_r32_xmm, R::EAX, x1), |s| native!("movmskps eax, xmm1", s)),
            (r2(C::Movmskpd_r32_xmm, R::EAX, x1), |s| native!("movmskpd eax, xmm1", s)),
            (r2(C::Ptest_xmm_xmmm128, x0, x1), |s| native!("ptest xmm0, xmm1", s)),
            (r2(C::Ptest_xmm_xmmm128, x2, x3), |s| native!("ptest xmm2, xmm3", s)),
            (r2(C::Ucomisd_xmm_xmmm64, x0, x1), |s| native!("ucomisd xmm0, xmm1", s)),
            (r2(C::Comisd_xmm_xmmm64, x0, x1), |s| native!("comisd xmm0, xmm1", s)),
            (I::with2(C::Ucomisd_xmm_xmmm64, x0, m()).unwrap(), |s| {
                native!("ucomisd xmm0, [rdi]", s)
            }),
            (r2(C::Ucomiss_xmm_xmmm32, x2, x3), |s| native!("ucomiss xmm2, xmm3", s)),
            (r2(C::Comiss_xmm_xmmm32, x2, x3), |s| native!("comiss xmm2, xmm3", s)),
            (r2(C::Cvttsd2si_r64_xmmm64, R::RAX, x1), |s| native!("cvttsd2si rax, xmm1", s)),
            (r2(C::Cvttsd2si_r32_xmmm64, R::EAX, x0), |s| native!("cvttsd2si eax, xmm0", s)),
            (r2(C::Cvttss2si_r32_xmmm32, R::EAX, x2), |s| native!("cvttss2si eax, xmm2", s)),
            (r2(C::Cvttss2si_r64_xmmm32, R::RAX, x3), |s| native!("cvttss2si rax, xmm3", s)),
            (r2(C::Movd_xmm_rm32, x0, R::EAX), |s| native!("movd xmm0, eax", s)),
            (r2(C::Movq_xmm_rm64, x0, R::RAX), |s| native!("movq xmm0, rax", s)),
            (r2(C::Movd_rm32_xmm, R::EAX, x1), |s| native!("movd eax, xmm1", s)),
            (r2(C::Movq_rm64_xmm, R::RAX, x1), |s| native!("movq rax, xmm1", s)),
            (r2(C::Movq_xmm_xmmm64, x0, x1), |s| native!("movq xmm0, xmm1", s)),
            (I::with2(C::Movq_xmm_xmmm64, x0, m()).unwrap(), |s| native!("movq xmm0, [rdi]", s)),
            (I::with2(C::Movhpd_xmm_m64, x1, m()).unwrap(), |s| native!("movhpd xmm1, [rdi]", s)),
            (I::with2(C::Movlpd_xmm_m64, x1, m()).unwrap(), |s| native!("movlpd xmm1, [rdi]", s)),
            (I::with2(C::Movhps_xmm_m64, x2, m()).unwrap(), |s| native!("movhps xmm2, [rdi]", s)),
            (I::with2(C::Movlps_xmm_m64, x2, m()).unwrap(), |s| native!("movlps xmm2, [rdi]", s)),
            (I::with2(C::Movhpd_m64_xmm, m(), x1).unwrap(), |s| native!("movhpd [rdi], xmm1", s)),
            (I::with2(C::Movlps_m64_xmm, m(), x2).unwrap(), |s| native!("movlps [rdi], xmm2", s)),
            (I::with2(C::Pslldq_xmm_imm8, x0, 5).unwrap(), |s| native!("pslldq xmm0, 5", s)),
            (I::with2(C::Psrldq_xmm_imm8, x0, 11).unwrap(), |s| native!("psrldq xmm0, 11", s)),
            (r2(C::Punpcklqdq_xmm_xmmm128, x0, x1), |s| native!("punpcklqdq xmm0, xmm1", s)),
            (r2(C::Punpckhqdq_xmm_xmmm128, x0, x1), |s| native!("punpckhqdq xmm0, xmm1", s)),
            (I::with2(C::Punpcklqdq_xmm_xmmm128, x2, m()).unwrap(), |s| {
                native!("punpcklqdq xmm2, [rdi]", s)
            }),
            (r2(C::Movss_xmm_xmmm32, x0, x1), |s| native!("movss xmm0, xmm1", s)),
            (r2(C::Movsd_xmm_xmmm64, x0, x1), |s| native!("movsd xmm0, xmm1", s)),
            (I::with2(C::Movsd_xmm_xmmm64, x0, m()).unwrap(), |s| native!("movsd xmm0, [rdi]", s)),
            (I::with2(C::Movss_xmm_xmmm32, x0, m()).unwrap(), |s| native!("movss xmm0, [rdi]", s)),
            (I::with2(C::Movdqu_xmm_xmmm128, x0, m()).unwrap(), |s| {
                native!("movdqu xmm0, [rdi]", s)
            }),
            (I::with2(C::Movdqa_xmm_xmmm128, x0, m()).unwrap(), |s| {
                native!("movdqa xmm0, [rdi]", s)
            }),
            (r2(C::Movups_xmm_xmmm128, x0, x1), |s| native!("movups xmm0, xmm1", s)),
            (I::with2(C::Movdqu_xmmm128_xmm, m(), x1).unwrap(), |s| {
                native!("movdqu [rdi], xmm1", s)
            }),
            (I::with2(C::Movq_xmmm64_xmm, m(), x1).unwrap(), |s| native!("movq [rdi], xmm1", s)),
            (I::with2(C::Movd_rm32_xmm, m(), x1).unwrap(), |s| native!("movd [rdi], xmm1", s)),
            (I::with2(C::Movsd_xmmm64_xmm, m(), x1).unwrap(), |s| native!("movsd [rdi], xmm1", s)),
            (I::with2(C::Movss_xmmm32_xmm, m(), x1).unwrap(), |s| native!("movss [rdi], xmm1", s)),
            (r3(C::VEX_Vpcmpeqb_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpcmpeqb ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpcmpeqb_xmm_xmm_xmmm128, x0, x1, x2), |s| {
                native!("vpcmpeqb xmm0, xmm1, xmm2", s)
            }),
            (I::with3(C::VEX_Vpcmpeqb_ymm_ymm_ymmm256, y0, y1, m()).unwrap(), |s| {
                native!("vpcmpeqb ymm0, ymm1, [rdi]", s)
            }),
            (r3(C::VEX_Vpcmpgtd_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpcmpgtd ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpminub_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpminub ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpmaxsw_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpmaxsw ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpsubb_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpsubb ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpandn_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpandn ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpor_ymm_ymm_ymmm256, y0, y1, y2), |s| native!("vpor ymm0, ymm1, ymm2", s)),
            (r3(C::VEX_Vandps_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vandps ymm0, ymm1, ymm2", s)
            }),
            (r3(C::VEX_Vpxor_xmm_xmm_xmmm128, x2, x2, x2), |s| {
                native!("vpxor xmm2, xmm2, xmm2", s)
            }),
            (r3(C::VEX_Vpxor_ymm_ymm_ymmm256, y0, y1, y2), |s| {
                native!("vpxor ymm0, ymm1, ymm2", s)
            }),
            (r2(C::VEX_Vpmovmskb_r32_ymm, R::EAX, y1), |s| native!("vpmovmskb eax, ymm1", s)),
            (r2(C::VEX_Vmovmskps_r32_ymm, R::EAX, y1), |s| native!("vmovmskps eax, ymm1", s)),
            (r2(C::VEX_Vptest_ymm_ymmm256, y0, y1), |s| native!("vptest ymm0, ymm1", s)),
            (I::with2(C::VEX_Vmovdqu_ymm_ymmm256, y0, m()).unwrap(), |s| {
                native!("vmovdqu ymm0, [rdi]", s)
            }),
            (I::with2(C::VEX_Vmovdqu_ymmm256_ymm, m(), y1).unwrap(), |s| {
                native!("vmovdqu [rdi], ymm1", s)
            }),
            (I::with2(C::VEX_Vmovdqu_xmmm128_xmm, m(), x1).unwrap(), |s| {
                native!("vmovdqu [rdi], xmm1", s)
            }),
            (r2(C::VEX_Vmovd_xmm_rm32, x0, R::EAX), |s| native!("vmovd xmm0, eax", s)),
            (r2(C::VEX_Vmovq_xmm_rm64, x0, R::RAX), |s| native!("vmovq xmm0, rax", s)),
            (r3(C::VEX_Vmovsd_xmm_xmm_xmm, x0, x1, x2), |s| native!("vmovsd xmm0, xmm1, xmm2", s)),
            (I::with2(C::VEX_Vmovsd_xmm_m64, x0, m()).unwrap(), |s| {
                native!("vmovsd xmm0, [rdi]", s)
            }),
            (r2(C::VEX_Vpbroadcastb_ymm_xmmm8, y0, x1), |s| native!("vpbroadcastb ymm0, xmm1", s)),
            (I::with2(C::VEX_Vpbroadcastd_ymm_xmmm32, y0, m()).unwrap(), |s| {
                native!("vpbroadcastd ymm0, [rdi]", s)
            }),
            (I::with(C::VEX_Vzeroupper), |s| native!("vzeroupper", s)),
            (r2(C::VEX_Vucomisd_xmm_xmmm64, x0, x1), |s| native!("vucomisd xmm0, xmm1", s)),
            (r2(C::VEX_Vcvttsd2si_r64_xmmm64, R::RAX, x1), |s| native!("vcvttsd2si rax, xmm1", s)),
        ];
        for (i, run) in &cases {
            for _ in 0..64 {
                let mut s = vec_state(&mut seed);
                let (want, fl) = run(s);
                let (got, flags) = emulated(*i, &s);
                // The emulator must know every result from known inputs, and agree.
                let got = got.unwrap_or_else(|| panic!("{i}: result unknown from {s:x?}"));
                assert_eq!(got, want, "{i} from {s:x?}");
                // The flags of those that set them: all five known and the CPU's.
                if i.rflags_modified() != 0 {
                    for (f, bit) in [(flags.cf, 0), (flags.pf, 2), (flags.zf, 6), (flags.sf, 7), (flags.of, 11)] {
                        assert_eq!(f, Some(fl >> bit & 1 == 1), "{i} flag bit {bit} from {s:x?}");
                    }
                }
                s.rax = 0;
            }
        }
    }

    #[test]
    fn vectors_seeded_lazily_and_forgotten_exactly() {
        use iced_x86::{Code as C, Instruction as I, Register as R};
        let layout = XsaveLayout::of_this_cpu();
        let mut seed = 0x1234_5678_9abc_def1u64 ^ u64::from(std::process::id());
        // An XSAVE image with random xmm/ymm contents.
        let mut img = vec![0u8; layout.size];
        for b in img.iter_mut() {
            *b = xorshift(&mut seed) as u8;
        }
        img[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
        // XSTATE_BV: x87, SSE, AVX and the AVX-512 components in use.
        img[512..520].copy_from_slice(&0xe7u64.to_le_bytes());
        let reads = Rc::new(std::cell::Cell::new(0));
        let r = reads.clone();
        let image = img.clone();
        let vs = VectorSeed::new(
            layout,
            Box::new(move || {
                r.set(r.get() + 1);
                Some(image.clone())
            }),
        );
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut e = Emu::new(&regs, mem.clone()).with_vectors(vs.clone());
        let mut f = InstructionInfoFactory::new();
        // A path that zeroes xmm15 and compares it with itself reads nothing from the image.
        e.step(
            &I::with3(C::VEX_Vpxor_xmm_xmm_xmmm128, R::XMM15, R::XMM15, R::XMM15).unwrap(),
            &mut f,
        );
        e.step(&I::with2(C::VEX_Vpmovmskb_r32_ymm, R::EAX, R::YMM15).unwrap(), &mut f);
        assert_eq!((e.regs[0], reads.get(), vs.was_read()), (Some(0), 0, false));
        // Reading xmm3 loads the image once, for every register.
        e.step(&I::with2(C::Pmovmskb_r32_xmm, R::ECX, R::XMM3).unwrap(), &mut f);
        e.step(&I::with2(C::Movq_rm64_xmm, R::RDX, R::XMM7).unwrap(), &mut f);
        let v = layout.vector(&img, 3);
        let want = (0..16).fold(0u64, |a, k| a | (u64::from(v[k] >> 7) << k));
        let x7 = u64::from_le_bytes(layout.vector(&img, 7)[..8].try_into().unwrap());
        assert_eq!((e.regs[1], e.regs[2], reads.get()), (Some(want), Some(x7), 1));
        // A second emulation of the same trap shares the image.
        let mut e2 = Emu::new(&regs, mem.clone()).with_vectors(vs.clone());
        e2.step(&I::with2(C::Movq_rm64_xmm, R::RDX, R::XMM7).unwrap(), &mut f);
        assert_eq!((e2.regs[2], reads.get()), (Some(x7), 1));
        // An instruction not modelled makes its destination unknown (pcmpistrm: xmm0,
        // implicitly), and so does anything after a system call.
        e.step(&I::with3(C::Pcmpistrm_xmm_xmmm128_imm8, R::XMM1, R::XMM2, 0x08).unwrap(), &mut f);
        e.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM0).unwrap(), &mut f);
        assert_eq!(e.regs[0], None);
        e.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM1).unwrap(), &mut f);
        assert!(e.regs[0].is_some());
        e.step(&I::with(C::Syscall), &mut f);
        e.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM1).unwrap(), &mut f);
        assert_eq!(e.regs[0], None);
        // With the AVX component in its initial state (XSTATE_BV bit 2 clear), the upper
        // halves are zero whatever the image's bytes.
        let mut init = img.clone();
        init[512..520].copy_from_slice(&0x3u64.to_le_bytes());
        let vs_init = VectorSeed::new(layout, Box::new(move || Some(init.clone())));
        let mut e4 = Emu::new(&regs, mem.clone()).with_vectors(vs_init);
        e4.step(&I::with2(C::VEX_Vpmovmskb_r32_ymm, R::ECX, R::YMM3).unwrap(), &mut f);
        if layout.ymm_hi != 0 {
            assert_eq!(e4.regs[1], Some(want));
        }
        // Without a seed, a vector value from before the path is unknown.
        let mut e3 = Emu::new(&regs, mem);
        e3.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM1).unwrap(), &mut f);
        assert_eq!(e3.regs[0], None);
        // ucomisd on normal values needs no MXCSR; on a denormal it reads it (here: image's).
        assert_eq!(
            e3.fp_compare(1.0f64.to_bits(), 2.0f64.to_bits(), 8, false),
            Some(Some(std::cmp::Ordering::Less))
        );
        assert_eq!(e3.fp_compare(1, 2, 8, false), None);
    }

    /// ymm16–ymm19, k1–k3, rax and [rdi] around one AVX-512 instruction.
    #[derive(Debug, Clone, Copy, PartialEq)]
    #[repr(C, align(64))]
    struct EvexState {
        y: [[u8; 32]; 4],
        mem: [u8; 64],
        k: [u64; 3],
        rax: u64,
    }

    /// Run `insn` natively from `s` (ymm16–19, k1–k3, rax, rdi → mem); flags come back.
    macro_rules! native_evex {
        ($insn:literal, $s:expr) => {{
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
            unsafe fn run(s: &mut EvexState) -> u64 {
                let fl: u64;
                let y = s.y.as_mut_ptr();
                let k = s.k.as_mut_ptr();
                let mem = s.mem.as_mut_ptr();
                let mut rax = s.rax;
                // SAFETY: reads and writes only `s` (its vectors, masks and memory, through
                // rdi), clobbers the registers it names, balances its push/pop.
                unsafe {
                    std::arch::asm!(
                        "vmovdqu64 ymm16, [{y}]",
                        "vmovdqu64 ymm17, [{y} + 32]",
                        "vmovdqu64 ymm18, [{y} + 64]",
                        "vmovdqu64 ymm19, [{y} + 96]",
                        "kmovq k1, [{k}]",
                        "kmovq k2, [{k} + 8]",
                        "kmovq k3, [{k} + 16]",
                        $insn,
                        "pushfq",
                        "pop {fl}",
                        "vmovdqu64 [{y}], ymm16",
                        "vmovdqu64 [{y} + 32], ymm17",
                        "vmovdqu64 [{y} + 64], ymm18",
                        "vmovdqu64 [{y} + 96], ymm19",
                        "kmovq [{k}], k1",
                        "kmovq [{k} + 8], k2",
                        "kmovq [{k} + 16], k3",
                        y = in(reg) y,
                        k = in(reg) k,
                        fl = out(reg) fl,
                        inout("rax") rax,
                        in("rdi") mem,
                        out("ymm16") _, out("ymm17") _, out("ymm18") _, out("ymm19") _,
                        out("k1") _, out("k2") _, out("k3") _,
                    );
                }
                s.rax = rax;
                fl
            }
            let mut s: EvexState = $s;
            // SAFETY: the caller checked AVX-512 F/BW/VL/DQ.
            let fl = unsafe { run(&mut s) };
            (s, fl)
        }};
    }

    /// The same instruction through the emulator from the same state.
    fn emulated_evex(i: iced_x86::Instruction, s: &EvexState) -> (Option<EvexState>, Flags) {
        let mut enc = iced_x86::Encoder::new(64);
        enc.encode(&i, 0x1000).unwrap();
        let bytes = enc.take_buffer();
        let mut d = Decoder::with_ip(64, &bytes, 0x1000, DecoderOptions::NONE);
        let insn = d.decode();
        assert_eq!(insn.code(), i.code(), "{i} round trip");
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut e = Emu::new(&regs, mem);
        let buf = Box::new(*s);
        e.regs[0] = Some(s.rax);
        e.regs[7] = Some(buf.mem.as_ptr() as u64);
        for (n, y) in s.y.iter().enumerate() {
            e.vregs[16 + n].val[..32].copy_from_slice(y);
            e.vregs[16 + n].known = low_bits(32);
            e.vregs[16 + n].fresh = 0;
        }
        for (n, k) in s.k.iter().enumerate() {
            e.kwrite(n + 1, Some(*k));
        }
        e.step(&insn, &mut InstructionInfoFactory::new());
        let mut out = *s;
        let Some(rax) = e.regs[0] else { return (None, e.flags) };
        out.rax = rax;
        for n in 0..4 {
            match e.vread(Register::YMM16 + n as u32, 32) {
                Some(v) => out.y[n].copy_from_slice(&v[..32]),
                None => return (None, e.flags),
            }
        }
        for n in 0..3 {
            match e.kread(n + 1) {
                Some(v) => out.k[n] = v,
                None => return (None, e.flags),
            }
        }
        match e.read_bytes(buf.mem.as_ptr() as u64, 64) {
            Some(m) => out.mem = m,
            None => return (None, e.flags),
        }
        std::hint::black_box(&buf);
        (Some(out), e.flags)
    }

    fn evex_state(seed: &mut u64) -> EvexState {
        let mut s = EvexState {
            y: [[0; 32]; 4],
            mem: [0; 64],
            k: [0; 3],
            rax: xorshift(seed),
        };
        for b in s.mem.iter_mut() {
            *b = xorshift(seed) as u8;
        }
        for n in 0..4 {
            for j in 0..32 {
                let r = xorshift(seed);
                s.y[n][j] = match r % 5 {
                    0 if n > 0 => s.y[0][j],
                    1 => s.mem[j],
                    2 => 0,
                    _ => (r >> 8) as u8,
                };
            }
        }
        for k in s.k.iter_mut() {
            let r = xorshift(seed);
            *k = match r % 6 {
                0 => 0,
                1 => u64::MAX,
                2 => u64::from(u32::MAX),
                3 => r >> 32,
                _ => xorshift(seed),
            };
        }
        s
    }

    #[test]
    fn avx512_mask_and_evex_ops_match_the_cpu() {
        use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};
        if !["avx512f", "avx512bw", "avx512vl", "avx512dq"].iter().all(|f| match *f {
            "avx512f" => is_x86_feature_detected!("avx512f"),
            "avx512bw" => is_x86_feature_detected!("avx512bw"),
            "avx512vl" => is_x86_feature_detected!("avx512vl"),
            _ => is_x86_feature_detected!("avx512dq"),
        }) {
            eprintln!("skipped: needs AVX-512 F/BW/VL/DQ");
            return;
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
        let m = || MemoryOperand::with_base(R::RDI);
        let (y16, y17, y18) = (R::YMM16, R::YMM17, R::YMM18);
        let (k1, k2, k3) = (R::K1, R::K2, R::K3);
        let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
        let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
        let masked = |mut i: I, k: R, z: bool| {
            i.set_op_mask(k);
            i.set_zeroing_masking(z);
            i
        };
        let cmpi = |c: C, imm: u32| I::with4(c, k1, y16, y17, imm).unwrap();
        type Native = fn(EvexState) -> (EvexState, u64);
        let cases: Vec<(I, Native)> = vec![
            (r3(C::EVEX_Vpcmpeqb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
                native_evex!("vpcmpeqb k1, ymm16, ymm17", s)
            }),
            (masked(r3(C::EVEX_Vpcmpeqb_kr_k1_ymm_ymmm256, k1, y16, y17), k2, false), |s| {
                native_evex!("vpcmpeqb k1{{k2}}, ymm16, ymm17", s)
            }),
            (I::with3(C::EVEX_Vpcmpeqb_kr_k1_ymm_ymmm256, k1, y16, m()).unwrap(), |s| {
                native_evex!("vpcmpeqb k1, ymm16, [rdi]", s)
            }),
            (r3(C::EVEX_Vpcmpeqd_kr_k1_ymm_ymmm256b32, k1, y16, y17), |s| {
                native_evex!("vpcmpeqd k1, ymm16, ymm17", s)
            }),
            (r3(C::EVEX_Vpcmpgtb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
                native_evex!("vpcmpgtb k1, ymm16, ymm17", s)
            }),
            (r3(C::EVEX_Vpcmpeqb_kr_k1_xmm_xmmm128, k1, R::XMM16, R::XMM17), |s| {
                native_evex!("vpcmpeqb k1, xmm16, xmm17", s)
            }),
            (r3(C::EVEX_Vptestmb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
                native_evex!("vptestmb k1, ymm16, ymm17", s)
            }),
            (r3(C::EVEX_Vptestnmb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
                native_evex!("vptestnmb k1, ymm16, ymm17", s)
            }),
            (r3(C::EVEX_Vptestnmd_kr_k1_ymm_ymmm256b32, k1, y16, y17), |s| {
                native_evex!("vptestnmd k1, ymm16, ymm17", s)
            }),
            (r3(C::EVEX_Vptestmd_kr_k1_ymm_ymmm256b32, k1, y16, y17), |s| {
                native_evex!("vptestmd k1, ymm16, ymm17", s)
            }),
            (cmpi(C::EVEX_Vpcmpub_kr_k1_ymm_ymmm256_imm8, 1), |s| {
                native_evex!("vpcmpub k1, ymm16, ymm17, 1", s)
            }),
            (cmpi(C::EVEX_Vpcmpub_kr_k1_ymm_ymmm256_imm8, 4), |s| {
                native_evex!("vpcmpub k1, ymm16, ymm17, 4", s)
            }),
            (cmpi(C::EVEX_Vpcmpub_kr_k1_ymm_ymmm256_imm8, 6), |s| {
                native_evex!("vpcmpub k1, ymm16, ymm17, 6", s)
            }),
            (cmpi(C::EVEX_Vpcmpb_kr_k1_ymm_ymmm256_imm8, 1), |s| {
                native_evex!("vpcmpb k1, ymm16, ymm17, 1", s)
            }),
            (cmpi(C::EVEX_Vpcmpb_kr_k1_ymm_ymmm256_imm8, 2), |s| {
                native_evex!("vpcmpb k1, ymm16, ymm17, 2", s)
            }),
            (cmpi(C::EVEX_Vpcmpb_kr_k1_ymm_ymmm256_imm8, 5), |s| {
                native_evex!("vpcmpb k1, ymm16, ymm17, 5", s)
            }),
            (cmpi(C::EVEX_Vpcmpud_kr_k1_ymm_ymmm256b32_imm8, 4), |s| {
                native_evex!("vpcmpud k1, ymm16, ymm17, 4", s)
            }),
            (cmpi(C::EVEX_Vpcmpuw_kr_k1_ymm_ymmm256_imm8, 2), |s| {
                native_evex!("vpcmpuw k1, ymm16, ymm17, 2", s)
            }),
            (cmpi(C::EVEX_Vpcmpq_kr_k1_ymm_ymmm256b64_imm8, 6), |s| {
                native_evex!("vpcmpq k1, ymm16, ymm17, 6", s)
            }),
            (r2(C::VEX_Kmovd_r32_kr, R::EAX, k1), |s| native_evex!("kmovd eax, k1", s)),
            (r2(C::VEX_Kmovq_r64_kr, R::RAX, k1), |s| native_evex!("kmovq rax, k1", s)),
            (r2(C::VEX_Kmovb_r32_kr, R::EAX, k1), |s| native_evex!("kmovb eax, k1", s)),
            (r2(C::VEX_Kmovw_kr_r32, k1, R::EAX), |s| native_evex!("kmovw k1, eax", s)),
            (r2(C::VEX_Kmovd_kr_r32, k1, R::EAX), |s| native_evex!("kmovd k1, eax", s)),
            (r2(C::VEX_Kmovq_kr_r64, k1, R::RAX), |s| native_evex!("kmovq k1, rax", s)),
            (r2(C::VEX_Kmovq_kr_km64, k1, k2), |s| native_evex!("kmovq k1, k2", s)),
            (r2(C::VEX_Kmovb_kr_km8, k1, k2), |s| native_evex!("kmovb k1, k2", s)),
            (I::with2(C::VEX_Kmovd_kr_km32, k1, m()).unwrap(), |s| {
                native_evex!("kmovd k1, [rdi]", s)
            }),
            (I::with2(C::VEX_Kmovq_m64_kr, m(), k2).unwrap(), |s| {
                native_evex!("kmovq [rdi], k2", s)
            }),
            (r2(C::VEX_Kortestd_kr_kr, k1, k2), |s| native_evex!("kortestd k1, k2", s)),
            (r2(C::VEX_Kortestq_kr_kr, k1, k2), |s| native_evex!("kortestq k1, k2", s)),
            (r2(C::VEX_Kortestb_kr_kr, k1, k2), |s| native_evex!("kortestb k1, k2", s)),
            (r2(C::VEX_Kortestw_kr_kr, k3, k3), |s| native_evex!("kortestw k3, k3", s)),
            (r2(C::VEX_Ktestd_kr_kr, k1, k2), |s| native_evex!("ktestd k1, k2", s)),
            (r2(C::VEX_Ktestq_kr_kr, k1, k2), |s| native_evex!("ktestq k1, k2", s)),
            (r3(C::VEX_Kord_kr_kr_kr, k1, k2, k3), |s| native_evex!("kord k1, k2, k3", s)),
            (r3(C::VEX_Kandnq_kr_kr_kr, k1, k2, k3), |s| native_evex!("kandnq k1, k2, k3", s)),
            (r3(C::VEX_Kxnorq_kr_kr_kr, k1, k2, k3), |s| native_evex!("kxnorq k1, k2, k3", s)),
            (r3(C::VEX_Kxorw_kr_kr_kr, k1, k2, k3), |s| native_evex!("kxorw k1, k2, k3", s)),
            (r3(C::VEX_Kaddd_kr_kr_kr, k1, k2, k3), |s| native_evex!("kaddd k1, k2, k3", s)),
            (r3(C::VEX_Kunpckbw_kr_kr_kr, k1, k2, k3), |s| native_evex!("kunpckbw k1, k2, k3", s)),
            (r3(C::VEX_Kunpckdq_kr_kr_kr, k1, k2, k3), |s| native_evex!("kunpckdq k1, k2, k3", s)),
            (r2(C::VEX_Knotd_kr_kr, k1, k2), |s| native_evex!("knotd k1, k2", s)),
            (I::with3(C::VEX_Kshiftlq_kr_kr_imm8, k1, k2, 13u32).unwrap(), |s| {
                native_evex!("kshiftlq k1, k2, 13", s)
            }),
            (I::with3(C::VEX_Kshiftrd_kr_kr_imm8, k1, k2, 7u32).unwrap(), |s| {
                native_evex!("kshiftrd k1, k2, 7", s)
            }),
            (I::with3(C::VEX_Kshiftrw_kr_kr_imm8, k1, k2, 40u32).unwrap(), |s| {
                native_evex!("kshiftrw k1, k2, 40", s)
            }),
            (I::with2(C::EVEX_Vmovdqu64_ymm_k1z_ymmm256, y16, m()).unwrap(), |s| {
                native_evex!("vmovdqu64 ymm16, [rdi]", s)
            }),
            (I::with2(C::EVEX_Vmovdqa64_ymm_k1z_ymmm256, y16, m()).unwrap(), |s| {
                native_evex!("vmovdqa64 ymm16, [rdi]", s)
            }),
            (
                masked(I::with2(C::EVEX_Vmovdqu8_ymm_k1z_ymmm256, y16, m()).unwrap(), k1, true),
                |s| native_evex!("vmovdqu8 ymm16{{k1}}{{z}}, [rdi]", s),
            ),
            (masked(r2(C::EVEX_Vmovdqu8_ymm_k1z_ymmm256, y16, y17), k2, false), |s| {
                native_evex!("vmovdqu8 ymm16{{k2}}, ymm17", s)
            }),
            (masked(r2(C::EVEX_Vmovdqu32_ymm_k1z_ymmm256, y16, y17), k2, true), |s| {
                native_evex!("vmovdqu32 ymm16{{k2}}{{z}}, ymm17", s)
            }),
            (I::with2(C::EVEX_Vmovdqu64_ymmm256_k1z_ymm, m(), y17).unwrap(), |s| {
                native_evex!("vmovdqu64 [rdi], ymm17", s)
            }),
            (I::with2(C::EVEX_Vmovdqu64_xmmm128_k1z_xmm, m(), R::XMM18).unwrap(), |s| {
                native_evex!("vmovdqu64 [rdi], xmm18", s)
            }),
            (
                masked(I::with2(C::EVEX_Vmovdqu8_ymmm256_k1z_ymm, m(), y17).unwrap(), k1, false),
                |s| native_evex!("vmovdqu8 [rdi]{{k1}}, ymm17", s),
            ),
            (
                masked(I::with2(C::EVEX_Vmovdqu32_xmmm128_k1z_xmm, m(), R::XMM18).unwrap(), k2, false),
                |s| native_evex!("vmovdqu32 [rdi]{{k2}}, xmm18", s),
            ),
            (
                masked(I::with2(C::EVEX_Vmovups_ymmm256_k1z_ymm, m(), y17).unwrap(), k3, false),
                |s| native_evex!("vmovups [rdi]{{k3}}, ymm17", s),
            ),
            (r3(C::EVEX_Vpxorq_ymm_k1z_ymm_ymmm256b64, y16, y17, y18), |s| {
                native_evex!("vpxorq ymm16, ymm17, ymm18", s)
            }),
            (r3(C::EVEX_Vpxord_xmm_k1z_xmm_xmmm128b32, R::XMM16, R::XMM16, R::XMM16), |s| {
                native_evex!("vpxord xmm16, xmm16, xmm16", s)
            }),
            (r3(C::EVEX_Vpord_ymm_k1z_ymm_ymmm256b32, y16, y17, y18), |s| {
                native_evex!("vpord ymm16, ymm17, ymm18", s)
            }),
            (r3(C::EVEX_Vpandnq_ymm_k1z_ymm_ymmm256b64, y16, y17, y18), |s| {
                native_evex!("vpandnq ymm16, ymm17, ymm18", s)
            }),
            (r3(C::EVEX_Vpminub_ymm_k1z_ymm_ymmm256, y16, y17, y18), |s| {
                native_evex!("vpminub ymm16, ymm17, ymm18", s)
            }),
            (r3(C::EVEX_Vpminud_ymm_k1z_ymm_ymmm256b32, y16, y17, y18), |s| {
                native_evex!("vpminud ymm16, ymm17, ymm18", s)
            }),
            (r3(C::EVEX_Vpsubb_ymm_k1z_ymm_ymmm256, y16, y17, y18), |s| {
                native_evex!("vpsubb ymm16, ymm17, ymm18", s)
            }),
            (I::with3(C::EVEX_Vpminub_ymm_k1z_ymm_ymmm256, y16, y17, m()).unwrap(), |s| {
                native_evex!("vpminub ymm16, ymm17, [rdi]", s)
            }),
            (
                I::with4(C::EVEX_Vpternlogd_ymm_k1z_ymm_ymmm256b32_imm8, y16, y17, y18, 0x96u32).unwrap(),
                |s| native_evex!("vpternlogd ymm16, ymm17, ymm18, 0x96", s),
            ),
            (
                I::with4(C::EVEX_Vpternlogd_ymm_k1z_ymm_ymmm256b32_imm8, y16, y17, y18, 0xdeu32).unwrap(),
                |s| native_evex!("vpternlogd ymm16, ymm17, ymm18, 0xde", s),
            ),
            (
                I::with4(C::EVEX_Vpternlogq_ymm_k1z_ymm_ymmm256b64_imm8, y16, y17, y18, 0x81u32).unwrap(),
                |s| native_evex!("vpternlogq ymm16, ymm17, ymm18, 0x81", s),
            ),
            (r2(C::EVEX_Vpbroadcastb_ymm_k1z_r32, y16, R::EAX), |s| {
                native_evex!("vpbroadcastb ymm16, eax", s)
            }),
            (r2(C::EVEX_Vpbroadcastd_ymm_k1z_r32, y16, R::EAX), |s| {
                native_evex!("vpbroadcastd ymm16, eax", s)
            }),
            (r2(C::EVEX_Vpbroadcastq_ymm_k1z_r64, y16, R::RAX), |s| {
                native_evex!("vpbroadcastq ymm16, rax", s)
            }),
        ];
        for (i, run) in &cases {
            for _ in 0..64 {
                let s = evex_state(&mut seed);
                let (want, fl) = run(s);
                let (got, flags) = emulated_evex(*i, &s);
                let got = got.unwrap_or_else(|| panic!("{i}: result unknown from {s:x?}"));
                assert_eq!(got, want, "{i} from {s:x?}");
                if i.rflags_modified() != 0 {
                    for (f, bit) in [(flags.cf, 0), (flags.pf, 2), (flags.zf, 6), (flags.sf, 7), (flags.of, 11)] {
                        assert_eq!(f, Some(fl >> bit & 1 == 1), "{i} flag bit {bit} from {s:x?}");
                    }
                }
            }
        }
    }

    /// Without AVX-512 hardware: opmasks come from the XSAVE image (zero in their initial
    /// state), a compare into k1 feeds kortest, and an unmodelled write makes k unknown.
    #[test]
    fn opmasks_seeded_from_the_image_and_forgotten() {
        use iced_x86::{Code as C, Instruction as I, Register as R};
        let mut layout = XsaveLayout::of_this_cpu();
        if layout.opmask == 0 {
            // (A layout as an AVX-512 CPU has it, for the decoding and seeding logic.)
            layout = XsaveLayout {
                size: 2696,
                ymm_hi: 576,
                opmask: 1088,
                zmm_hi: 1152,
                hi16_zmm: 1664,
                tilecfg: 0,
            };
        }
        let mut seed = 0x51a7_e0f1_c3b2_a190u64 ^ u64::from(std::process::id());
        let mut img = vec![0u8; layout.size];
        for b in img.iter_mut() {
            *b = xorshift(&mut seed) as u8;
        }
        img[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
        img[512..520].copy_from_slice(&0xe7u64.to_le_bytes());
        let k5 = u64::from_le_bytes(img[layout.opmask + 40..layout.opmask + 48].try_into().unwrap());
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut f = InstructionInfoFactory::new();
        let image = img.clone();
        let vs = VectorSeed::new(layout, Box::new(move || Some(image.clone())));
        let mut e = Emu::new(&regs, mem.clone()).with_vectors(vs);
        e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K5).unwrap(), &mut f);
        assert_eq!(e.regs[1], Some(k5));
        e.step(&I::with2(C::VEX_Kortestq_kr_kr, R::K5, R::K5).unwrap(), &mut f);
        assert_eq!(e.flags.zf, Some(k5 == 0));
        // XSTATE_BV bit 5 clear: every opmask is zero whatever the image's bytes.
        let mut init = img.clone();
        init[512..520].copy_from_slice(&0xc7u64.to_le_bytes());
        let vs0 = VectorSeed::new(layout, Box::new(move || Some(init.clone())));
        let mut e0 = Emu::new(&regs, mem.clone()).with_vectors(vs0);
        e0.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K5).unwrap(), &mut f);
        assert_eq!(e0.regs[1], Some(0));
        // An unmodelled masked EVEX op writing k (vfpclasspd) leaves k unknown; so does a syscall.
        e.step(
            &I::with3(C::EVEX_Vfpclasspd_kr_k1_ymmm256b64_imm8, R::K5, R::YMM1, 0x22u32).unwrap(),
            &mut f,
        );
        e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K5).unwrap(), &mut f);
        assert_eq!(e.regs[1], None);
        e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RDX, R::K4).unwrap(), &mut f);
        assert!(e.regs[2].is_some());
        e.step(&I::with(C::Syscall), &mut f);
        e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RDX, R::K4).unwrap(), &mut f);
        assert_eq!(e.regs[2], None);
        // Without a seed, an opmask from before the path is unknown; one the path wrote is known.
        let mut e3 = Emu::new(&regs, mem);
        e3.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K1).unwrap(), &mut f);
        assert_eq!(e3.regs[1], None);
        let v = xorshift(&mut seed);
        e3.regs[0] = Some(v);
        e3.step(&I::with2(C::VEX_Kmovd_kr_r32, R::K1, R::EAX).unwrap(), &mut f);
        e3.step(&I::with2(C::VEX_Knotd_kr_kr, R::K2, R::K1).unwrap(), &mut f);
        e3.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K2).unwrap(), &mut f);
        assert_eq!(e3.regs[1], Some(u64::from(!(v as u32))));
        e3.step(&I::with2(C::VEX_Kortestd_kr_kr, R::K1, R::K2).unwrap(), &mut f);
        assert_eq!((e3.flags.zf, e3.flags.cf), (Some(false), Some(true)));
    }

    #[test]
    fn writes_only_op0_agrees_with_iced() {
        use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};
        let m = || MemoryOperand::with_base(R::RDI);
        let cases = [
            I::with3(C::VEX_Vfmadd231pd_ymm_ymm_ymmm256, R::YMM0, R::YMM1, R::YMM2).unwrap(),
            I::with3(C::VEX_Vfmadd231sd_xmm_xmm_xmmm64, R::XMM3, R::XMM1, m()).unwrap(),
            I::with2(C::VEX_Vbroadcastsd_ymm_m64, R::YMM4, m()).unwrap(),
            I::with2(C::Mulsd_xmm_xmmm64, R::XMM0, R::XMM1).unwrap(),
            I::with4(C::VEX_Vinsertf128_ymm_ymm_xmmm128_imm8, R::YMM0, R::YMM1, R::XMM2, 1).unwrap(),
            I::with3(C::VEX_Vmovhpd_xmm_xmm_m64, R::XMM0, R::XMM1, m()).unwrap(),
            I::with2(C::Cvtsi2sd_xmm_rm64, R::XMM5, R::RAX).unwrap(),
            I::with4(C::VEX_Vperm2f128_ymm_ymm_ymmm256_imm8, R::YMM0, R::YMM1, R::YMM2, 0x21).unwrap(),
            I::with3(C::Shufps_xmm_xmmm128_imm8, R::XMM1, R::XMM2, 0x1b).unwrap(),
            I::with3(C::VEX_Vaddpd_ymm_ymm_ymmm256, R::YMM7, R::YMM7, m()).unwrap(),
        ];
        let mut f = InstructionInfoFactory::new();
        for i in &cases {
            assert!(writes_only_op0(i), "{i}");
            let info = f.info(i);
            let w = |a: OpAccess| {
                matches!(
                    a,
                    OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
                )
            };
            let regs: Vec<Register> = info
                .used_registers()
                .iter()
                .filter(|u| w(u.access()))
                .map(|u| u.register())
                .collect();
            assert!(
                regs.iter().all(|r| r.number() == i.op0_register().number() && is_vec(*r)),
                "{i}: {regs:?}"
            );
            assert!(!info.used_memory().iter().any(|u| w(u.access())), "{i}");
            assert_eq!(i.rflags_modified(), 0, "{i}");
        }
    }

    #[test]
    fn vector_stores_feed_later_integer_loads() {
        use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};
        let mut seed = 0x5151_7c7c_a0a0_3b3bu64 ^ u64::from(std::process::id());
        for _ in 0..50 {
            let mut s = vec_state(&mut seed);
            s.rax = 0;
            let off = (xorshift(&mut seed) % 24) as i64;
            let buf = Box::new([0u8; 64]);
            let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
            // SAFETY: user_regs_struct is plain integers.
            let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
            let mut e = Emu::new(&regs, mem);
            e.regs[7] = Some(buf.as_ptr() as u64);
            e.vregs[1].val[..32].copy_from_slice(&s.y[1]);
            e.vregs[1].known = low_bits(32);
            e.vregs[1].fresh = 0;
            let mut f = InstructionInfoFactory::new();
            // vmovdqu [rdi+off], ymm1; mov rax, [rdi+off+k]
            e.step(
                &I::with2(C::VEX_Vmovdqu_ymmm256_ymm, MemoryOperand::with_base_displ(R::RDI, off), R::YMM1).unwrap(),
                &mut f,
            );
            let k = (xorshift(&mut seed) % 25) as i64;
            e.step(
                &I::with2(C::Mov_r64_rm64, R::RAX, MemoryOperand::with_base_displ(R::RDI, off + k)).unwrap(),
                &mut f,
            );
            let want = u64::from_le_bytes(s.y[1][k as usize..k as usize + 8].try_into().unwrap());
            assert_eq!(e.regs[0], Some(want));
            std::hint::black_box(&buf);
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
