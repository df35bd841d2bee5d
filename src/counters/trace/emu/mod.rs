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
mod tests;
