//! The ptrace driver: runs the tracee natively between breakpoints at basic-block entries,
//! counts each block's static work once per execution, runs counted single-block loops natively
//! between an entry and an exit trap (trip count from the induction register), and falls back
//! to single-stepping where it must (several threads in one address space, dynamic opmasks,
//! indirect exits it cannot resolve at block entry, and `--trace memory`).
//!
//! Invariant of block mode: when a thread leaves a block, every place it can go next carries an
//! installed breakpoint (static successors are installed at block entry, return and indirect
//! targets are read at block entry, anything else is single-stepped), so every block execution
//! starts with a trap. The breakpoint of the block being left may stay removed until a
//! predecessor reinstalls it, which saves the classic step-over (one stop per block instead of two).
//!
//! Run-ahead: at a block trap, [`super::emu`] follows the blocks the thread will run next from
//! its registers and memory (branches, returns and indirect jumps whose outcome it can compute
//! exactly; static successors always). Those blocks are counted at this trap with their
//! breakpoints left out; every address control can leave the path to keeps one. A trap
//! anywhere else afterwards is counted in `DriverStats::mispredicts` (and noted in the report).

use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use nix::errno::Errno;
use nix::libc;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use super::classify::{Flow, Insn, MaskWrite, TileConfig, TileOp, classify};
use super::emu::{Emu, VectorSeed};
use super::interleave::{Access, Call, Interleave};
use super::lockstep::{Lockstep, SLEEP_IDLE, Turn};
use super::regions::{Regions, Snapshot};
use super::sources::{Site, Sources};
use super::symbols::ProcessSymbols;
use super::sys::{self, Memory, XsaveLayout};
use super::tally::Tally;
use super::xol::{self, Stub, Xol};
use super::{AccessKind, AccessSink, TraceMode};
use crate::error::{Error, Result};

const INT3: u8 = 0xcc;
/// Longest block decoded in one go (a block may be longer: it continues as the next block).
const MAX_BLOCK: usize = 96;

#[derive(Debug, Clone, Copy, Default)]
struct Bp {
    orig: u8,
    /// `orig` has been read from the tracee.
    has_orig: bool,
    /// Wanted in: the tracer's view, changed freely while the tracee is stopped.
    installed: bool,
    /// In the tracee's memory now: `Space::flush` makes it `installed` before any thread of the
    /// space runs (an install undone within one stop, as a run-ahead path's followed successor
    /// is, never costs a write).
    armed: bool,
    block: bool,
    entry: bool,
    begin: bool,
    end: bool,
    /// Lies inside another instruction that may run (a branch over a `lock` prefix): never
    /// installed, its predecessor is stepped through instead (`Space::block_at`).
    inside: bool,
}

impl Bp {
    fn sticky(&self) -> bool {
        self.entry || self.begin || self.end
    }
}

/// Where the value an opmask has at a masked instruction comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MaskSrc {
    Entry(u8),
    Const(u64),
    Dynamic,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RspAt {
    Rsp(i64),
    Rbp(i64),
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Exit {
    Static,
    Ret(RspAt),
    /// Indirect jump/call whose target can be computed from the registers at block entry.
    Indirect {
        at_entry: bool,
    },
}

#[derive(Debug, Clone, Copy)]
struct Induction {
    reg: Register,
    stride: i64,
    width32: bool,
}

#[derive(Debug)]
struct Block {
    start: u64,
    end: u64,
    insns: Vec<Rc<Insn>>,
    stat: Tally,
    masked: Vec<(usize, MaskSrc)>,
    needs_step: bool,
    /// `needs_step` only because a mask is written inside the block: the emulator may compute
    /// each masked instruction's mask from the registers at entry instead (flops mode).
    emu_masks: bool,
    /// The `uid` of the last space that marked this block's static successors as block starts
    /// (marks are never taken back, so a path through the block need not mark them again;
    /// blocks are shared with forked children, whose marks are their own).
    succ_marked: std::cell::Cell<u64>,
    succ: Vec<u64>,
    exit: Exit,
    induction: Option<Induction>,
    /// Memory mode: the loop's address registers as functions of the iteration (see `affine_strides`).
    affine: Option<Vec<Stride>>,
    rep: bool,
    /// Where the block starts in the source (its function without `--by-function`).
    site: Rc<Site>,
    /// `--by-function`: the block's static tally split by source site (instructions of one
    /// site in a row grouped), and each instruction's index into it. Empty otherwise.
    sites: Vec<(Rc<Site>, Tally)>,
    insn_site: Vec<u16>,
}

struct Space {
    leader: Pid,
    mem: Rc<Memory>,
    syms: ProcessSymbols,
    insns: FastMap<Rc<Insn>>,
    /// Decoded blocks by start (looked up for every block a path runs through).
    blocks: FastMap<Rc<Block>>,
    /// Their extents in address order, start to end: which block a new start splits.
    block_ends: BTreeMap<u64, u64>,
    bps: FastMap<Bp>,
    /// The tracee's code, by 4 KiB page, as it is without our breakpoints: read once, since
    /// code is not rewritten under us (`insns` caches its decoding on the same assumption).
    /// A program's first run decodes tens of thousands of instructions (the dynamic linker,
    /// libc's start-up): one read per page instead of one per instruction.
    code_pages: FastMap<Rc<[u8; CODE_PAGE]>>,
    funcs: FastMap<(Rc<str>, bool)>,
    func_start: FastMap<(Rc<str>, u64)>,
    missed_pages: FastSet,
    threads: usize,
    entered: bool,
    /// Count only while `depth > 0`: between the forked child's markers (`run_forked`). A
    /// command's named regions leave it off (the whole run is counted).
    region_mode: bool,
    depth: i64,
    /// Every instruction is single-stepped (memory and reference modes), not just blocks.
    stepping: bool,
    markers_known: bool,
    /// The markers are the region API's (`roofline_region_begin(name)`): their first
    /// argument names the region (the forked child's markers have none).
    named_markers: bool,
    /// Scratch areas for displaced execution (threads pass breakpoints without removing them).
    xol: Xol,
    /// Breakpoints whose wanted state changed since the last `flush`.
    dirty: Vec<u64>,
    /// `--by-function`: DWARF readers (shared by every space of the run) and each
    /// instruction address's source site.
    sources: Option<Rc<RefCell<Sources>>>,
    site_cache: FastMap<Rc<Site>>,
    /// Trap addresses whose last full run-ahead was mostly thrown away (a long loop that
    /// ends inside itself: its path is cut back to before its repeated blocks), with how
    /// many more traps there emulate only to the first repeated block, and the back-off level.
    short_paths: FastMap<(u32, u32)>,
    /// Trap addresses whose last run-ahead with the other threads held committed almost
    /// nothing: traps left there without holding, and the back-off level. (A hold costs a
    /// stop of every other thread; held at every trap of a tight loop, they would starve.)
    hold_skip: FastMap<(u32, u32)>,
    /// Unique per space (`Block::succ_marked`).
    uid: u64,
}

impl Space {
    fn new(pid: Pid) -> Space {
        Space {
            leader: pid,
            mem: Rc::new(Memory::open(pid)),
            syms: ProcessSymbols::new(pid.as_raw()),
            insns: FastMap::default(),
            blocks: FastMap::default(),
            block_ends: BTreeMap::new(),
            bps: FastMap::default(),
            code_pages: FastMap::default(),
            funcs: FastMap::default(),
            func_start: FastMap::default(),
            missed_pages: FastSet::default(),
            threads: 1,
            entered: false,
            region_mode: false,
            depth: 0,
            stepping: false,
            markers_known: false,
            named_markers: false,
            xol: Xol::default(),
            dirty: Vec::new(),
            sources: None,
            site_cache: FastMap::default(),
            short_paths: FastMap::default(),
            hold_skip: FastMap::default(),
            uid: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
        }
    }

    /// A copy for a forked child: same code, same breakpoints (the child's memory is a copy).
    fn fork_copy(&self, pid: Pid) -> Space {
        let mut s = Space::new(pid);
        s.insns = self.insns.clone();
        s.blocks = self.blocks.clone();
        s.block_ends = self.block_ends.clone();
        s.bps = self.bps.clone();
        s.code_pages = self.code_pages.clone();
        s.funcs = self.funcs.clone();
        s.func_start = self.func_start.clone();
        s.entered = self.entered;
        s.region_mode = self.region_mode;
        s.depth = self.depth;
        s.markers_known = self.markers_known;
        s.named_markers = self.named_markers;
        s.xol = self.xol.clone();
        // The child's memory holds what was armed at the fork; what changed since is written
        // into it at its first resume.
        s.dirty = self.dirty.clone();
        s.sources = self.sources.clone();
        s.site_cache = self.site_cache.clone();
        s
    }

    /// Make memory agree with the breakpoint record, in a forked child's space. The child's
    /// memory is the parent's at the moment of the fork, but its record is copied when the
    /// fork is handled: meanwhile another thread of the parent may have had breakpoints put in
    /// or taken out (with several threads they are written at once). A stray `int3` left in
    /// the child would trap where nothing expects one (a run-ahead mispredict), a missing one
    /// would let the child run past a block uncounted. One read per page holding
    /// breakpoints, a write only where memory and record disagree.
    fn sync_memory_to_record(&mut self) {
        let mut by_page: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (a, b) in &self.bps {
            if b.has_orig {
                by_page.entry(a / CODE_PAGE as u64).or_default().push(*a);
            }
        }
        let mut bytes = vec![0u8; CODE_PAGE];
        for (page, addrs) in by_page {
            let base = page * CODE_PAGE as u64;
            if self.mem.read(base, &mut bytes) != CODE_PAGE {
                continue;
            }
            for a in addrs {
                let Some(bp) = self.bps.get(&a) else { continue };
                let want = if bp.armed { INT3 } else { bp.orig };
                if bytes[(a - base) as usize] != want {
                    self.mem.write_byte(a, want);
                }
            }
        }
    }

    fn active(&self) -> bool {
        self.entered && (!self.region_mode || self.depth > 0)
    }

    fn install(&mut self, addr: u64) {
        let bp = self.bps.entry(addr).or_default();
        if bp.installed || bp.inside {
            return;
        }
        // The original byte is read once (code is not rewritten under us: decoded instructions
        // are cached on the same assumption), from the page of code already read for
        // decoding; re-installs then cost one write.
        if !bp.has_orig {
            let mut b = [0u8; 1];
            let readable = match self.code_page(addr / CODE_PAGE as u64) {
                Some(page) => {
                    b[0] = page[(addr % CODE_PAGE as u64) as usize];
                    true
                }
                None => self.mem.read(addr, &mut b) == 1,
            };
            if !readable {
                return;
            }
            let bp = self.bps.entry(addr).or_default();
            if b[0] == INT3 && bp.orig != 0 {
                // Ours, left by a copy (fork) whose record said otherwise: keep the known byte.
            } else {
                bp.orig = b[0];
            }
            bp.has_orig = true;
        }
        self.bps.entry(addr).or_default().installed = true;
        self.dirty.push(addr);
        self.write_now_if_shared();
    }

    /// With several threads in the space, breakpoint writes are not deferred: other threads
    /// run while this one's stop is handled. (Deferred writes there coincided with a crashed
    /// and a miscounted OpenBLAS run under 2 threads in CI.)
    fn write_now_if_shared(&mut self) {
        if self.threads > 1 {
            self.flush();
        }
    }

    fn uninstall(&mut self, addr: u64) {
        if let Some(bp) = self.bps.get_mut(&addr)
            && bp.installed
        {
            bp.installed = false;
            self.dirty.push(addr);
            self.write_now_if_shared();
        }
    }

    /// Write the breakpoints changed since the last flush into the tracee's memory. Called
    /// before any thread of the space runs (`Tracer::cont`, `Tracer::step` and every other
    /// resume).
    fn flush(&mut self) {
        for addr in std::mem::take(&mut self.dirty) {
            let Some(bp) = self.bps.get_mut(&addr) else { continue };
            if bp.installed == bp.armed {
                continue;
            }
            let byte = if bp.installed { INT3 } else { bp.orig };
            if self.mem.write_byte(addr, byte) {
                bp.armed = bp.installed;
            } else {
                // Not writable: it is not in.
                bp.installed = bp.armed;
            }
        }
    }

    fn uninstall_blocks(&mut self, keep_sticky: bool) {
        let addrs: Vec<u64> = self
            .bps
            .iter()
            .filter(|(_, b)| b.installed && !(keep_sticky && b.sticky()))
            .map(|(a, _)| *a)
            .collect();
        for a in addrs {
            self.uninstall(a);
        }
    }

    /// Make `addr` a block start (a breakpoint record, and the block holding it split there);
    /// true when that split a decoded block (which is dropped, to be decoded again in two).
    fn mark_block_start(&mut self, addr: u64) -> bool {
        let bp = self.bps.entry(addr).or_default();
        if bp.block {
            // (Blocks are decoded up to a block start: none holds this one.)
            return false;
        }
        bp.block = true;
        let holder = self
            .block_ends
            .range(..addr)
            .next_back()
            .filter(|(_, end)| addr < **end)
            .map(|(s, _)| *s);
        if let Some(s) = holder {
            self.blocks.remove(&s);
            self.block_ends.remove(&s);
        }
        holder.is_some()
    }

    /// Up to `buf.len()` bytes of code at `addr` without our breakpoints; how many were
    /// readable.
    fn read_code(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let mut done = 0;
        while done < buf.len() {
            let a = addr + done as u64;
            let Some(page) = self.code_page(a / CODE_PAGE as u64) else {
                // Not readable as a whole page (a mapping's end inside it, or no
                // /proc/pid/mem): read what there is directly.
                return done + self.read_code_uncached(a, &mut buf[done..]);
            };
            let off = (a % CODE_PAGE as u64) as usize;
            let n = (CODE_PAGE - off).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&page[off..off + n]);
            done += n;
        }
        done
    }

    /// Page `page` of the code, read once; None when it cannot be read whole.
    fn code_page(&mut self, page: u64) -> Option<Rc<[u8; CODE_PAGE]>> {
        if let Some(p) = self.code_pages.get(&page) {
            return Some(p.clone());
        }
        let mut bytes = Box::new([0u8; CODE_PAGE]);
        if self.mem.read(page * CODE_PAGE as u64, &mut bytes[..]) != CODE_PAGE {
            return None;
        }
        self.restore_armed(page * CODE_PAGE as u64, &mut bytes[..]);
        let p: Rc<[u8; CODE_PAGE]> = Rc::from(bytes);
        self.code_pages.insert(page, p.clone());
        Some(p)
    }

    fn read_code_uncached(&self, addr: u64, buf: &mut [u8]) -> usize {
        let n = self.mem.read(addr, buf);
        self.restore_armed(addr, &mut buf[..n]);
        n
    }

    /// Put back the original bytes under our armed breakpoints in `code`, read at `addr`.
    fn restore_armed(&self, addr: u64, code: &mut [u8]) {
        for (i, b) in code.iter_mut().enumerate() {
            if *b == INT3
                && let Some(bp) = self.bps.get(&(addr + i as u64))
                && bp.armed
            {
                *b = bp.orig;
            }
        }
    }

    /// Function name and whether it keeps rbp as a frame pointer.
    fn function_of(&mut self, addr: u64) -> (Rc<str>, bool) {
        let page = addr >> 12;
        let loc = if self.missed_pages.contains(&page) {
            None
        } else {
            self.syms.locate(addr)
        };
        let Some(loc) = loc else {
            self.missed_pages.insert(page);
            return (Rc::from("[unknown]"), true);
        };
        let Some(start) = loc.function_start else {
            return (Rc::from(format!("[{}]", loc.module)), true);
        };
        // A stripped function (its start from the unwind table) keeps the module's name.
        let fname = loc.function.clone();
        if let Some(f) = self.funcs.get(&start) {
            return f.clone();
        }
        let mut buf = [0u8; 8];
        let n = self.read_code(start, &mut buf);
        // `push rbp; mov rbp, rsp` (optionally after endbr64) sets up a frame pointer.
        let frame = {
            let mut d = Decoder::with_ip(64, &buf[..n], start, DecoderOptions::NONE);
            let mut ins: Vec<Mnemonic> = Vec::new();
            let mut regs = Vec::new();
            for _ in 0..3 {
                if !d.can_decode() {
                    break;
                }
                let i = d.decode();
                ins.push(i.mnemonic());
                regs.push((i.op0_register(), if i.op_count() > 1 { i.op1_register() } else { Register::None }));
            }
            let skip = usize::from(ins.first() == Some(&Mnemonic::Endbr64));
            ins.get(skip) == Some(&Mnemonic::Push)
                && regs.get(skip).map(|r| r.0) == Some(Register::RBP)
                && ins.get(skip + 1) == Some(&Mnemonic::Mov)
                && regs.get(skip + 1) == Some(&(Register::RBP, Register::RSP))
        };
        let name: Rc<str> = match &fname {
            Some(f) => Rc::from(format!("{} ({})", super::symbols::demangle(f), loc.module)),
            None => Rc::from(format!("[{}]", loc.module)),
        };
        self.funcs.insert(start, (name.clone(), frame));
        (name, frame)
    }

    /// The source site of the instruction at `addr`: the innermost frame of the program's own
    /// code through DWARF under `--by-function` (`sources.rs`), else the function's symbol.
    fn site_of(&mut self, addr: u64) -> Rc<Site> {
        if let Some(s) = self.site_cache.get(&addr) {
            return s.clone();
        }
        let site = match self.sources.clone() {
            Some(src) => {
                let place = self.syms.place(addr);
                let mut src = src.borrow_mut();
                match place {
                    Some(p) => {
                        let symbol = p.symbol.as_deref().map(super::symbols::demangle);
                        let site = src.site(&p.path, &p.module, p.vaddr, symbol.as_deref());
                        src.intern(site)
                    }
                    None => src.intern(Site::symbol(self.function_of(addr).0)),
                }
            }
            None => Rc::new(Site::symbol(self.function_of(addr).0)),
        };
        if self.sources.is_some() {
            self.site_cache.insert(addr, site.clone());
        }
        site
    }

    fn insn_at(&mut self, addr: u64, factory: &mut InstructionInfoFactory) -> Rc<Insn> {
        if let Some(i) = self.insns.get(&addr) {
            return i.clone();
        }
        let mut buf = [0u8; 16];
        let n = self.read_code(addr, &mut buf);
        let mut d = Decoder::with_ip(64, &buf[..n], addr, DecoderOptions::NONE);
        let instr = d.decode();
        let (_, frame) = self.function_of(addr);
        let insn = Rc::new(classify(&instr, factory, frame));
        self.insns.insert(addr, insn.clone());
        insn
    }

    fn block_at(&mut self, pc: u64, factory: &mut InstructionInfoFactory) -> Rc<Block> {
        if let Some(b) = self.blocks.get(&pc) {
            return b.clone();
        }
        let mut insns: Vec<Rc<Insn>> = Vec::new();
        let mut a = pc;
        loop {
            if a != pc && self.bps.get(&a).is_some_and(|b| b.block || b.sticky()) {
                break;
            }
            let insn = self.insn_at(a, factory);
            let rep = insn.string.is_some_and(|s| s.rep);
            if rep && a != pc {
                break;
            }
            a = insn.next();
            let ends = insn.flow.ends_block() || rep;
            insns.push(insn);
            if ends || insns.len() >= MAX_BLOCK {
                break;
            }
        }
        let sites: Vec<Rc<Site>> = if self.sources.is_some() {
            insns.iter().map(|i| self.site_of(i.addr)).collect()
        } else {
            Vec::new()
        };
        let site = match sites.first() {
            Some(s) => s.clone(),
            None => self.site_of(pc),
        };
        let mut block = build_block(pc, insns, site, sites, factory);
        // A branch into the middle of the instruction after it: glibc's `je 1f; lock; 1:
        // cmpxchg …`, which skips the lock prefix while the process has one thread. A
        // breakpoint at the target would sit inside the locked instruction and break it
        // (SIGILL), so the target never gets one: the block is stepped through, and the thread
        // arrives at either start by a step.
        if let Some(l) = block.insns.last()
            && let Flow::CondJump(t) = l.flow
            && t > block.end
            && t < block.end + 15
            && self.insn_at(block.end, factory).next() > t
        {
            block.needs_step = true;
            block.emu_masks = false;
            self.bps.entry(t).or_default().inside = true;
        }
        let block = Rc::new(block);
        self.block_ends.insert(pc, block.end);
        self.blocks.insert(pc, block.clone());
        block
    }
}

fn full_gpr(r: Register) -> Register {
    r.full_register()
}

fn reg_value(regs: &libc::user_regs_struct, r: Register) -> Option<u64> {
    use Register::*;
    Some(match full_gpr(r) {
        RAX => regs.rax,
        RBX => regs.rbx,
        RCX => regs.rcx,
        RDX => regs.rdx,
        RSI => regs.rsi,
        RDI => regs.rdi,
        RBP => regs.rbp,
        RSP => regs.rsp,
        R8 => regs.r8,
        R9 => regs.r9,
        R10 => regs.r10,
        R11 => regs.r11,
        R12 => regs.r12,
        R13 => regs.r13,
        R14 => regs.r14,
        R15 => regs.r15,
        RIP => regs.rip,
        _ => return Option::None,
    })
}

fn writes_of(insn: &Insn, factory: &mut InstructionInfoFactory) -> Vec<Register> {
    factory
        .info(&insn.instr)
        .used_registers()
        .iter()
        .filter(|u| {
            matches!(
                u.access(),
                OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
            )
        })
        .map(|u| full_gpr(u.register()))
        .collect()
}

/// The static tally of each instruction not counted per execution (masked ones are, through
/// `dynamic_tally`), grouped by source site: `(sites, the site index of each instruction)`.
fn split_by_site(insns: &[Rc<Insn>], sites: Vec<Rc<Site>>) -> (Vec<(Rc<Site>, Tally)>, Vec<u16>) {
    let mut groups: Vec<(Rc<Site>, Tally)> = Vec::new();
    let mut index = Vec::with_capacity(insns.len());
    for (insn, site) in insns.iter().zip(sites) {
        if !groups.last().is_some_and(|(s, _)| Rc::ptr_eq(s, &site)) {
            groups.push((site, Tally::default()));
        }
        index.push((groups.len() - 1) as u16);
        let t = &mut groups.last_mut().expect("pushed above").1;
        if insn.mask.is_none() {
            t.add_insn(insn, None);
            if insn.string.is_some_and(|s| !s.rep) {
                t.add_string(insn, 1);
            }
        }
    }
    (groups, index)
}

fn build_block(start: u64, insns: Vec<Rc<Insn>>, site: Rc<Site>, sites: Vec<Rc<Site>>, factory: &mut InstructionInfoFactory) -> Block {
    let (sites, insn_site) = if sites.len() == insns.len() {
        split_by_site(&insns, sites)
    } else {
        (Vec::new(), Vec::new())
    };
    let end = insns.last().map(|i| i.next()).unwrap_or(start + 1);
    let last = insns.last().cloned();
    let mut stat = Tally::default();
    let mut masked = Vec::new();
    let mut needs_step = false;
    let mut tiles = false;
    let mut kstate: [MaskSrc; 8] = std::array::from_fn(|k| MaskSrc::Entry(k as u8));
    let mut kwritten = [false; 8];
    let mut rep = false;
    for (idx, insn) in insns.iter().enumerate() {
        // AMX work depends on the tile shapes in force: stepped, the configuration read at
        // each tile instruction (`step_one`).
        if insn.tile.is_some_and(|t| t.shaped()) {
            needs_step = true;
            tiles = true;
        }
        if let Some(k) = insn.mask {
            let src = kstate[k as usize];
            if src == MaskSrc::Dynamic {
                needs_step = true;
            }
            masked.push((idx, src));
        } else if insn.string.is_some_and(|s| s.rep) {
            rep = true;
            stat.add_insn(insn, None);
        } else {
            stat.add_insn(insn, None);
            if insn.string.is_some() {
                stat.add_string(insn, 1);
            }
        }
        for w in &insn.mask_writes {
            match *w {
                MaskWrite::Const(k, v) => {
                    kstate[k as usize] = MaskSrc::Const(v);
                    kwritten[k as usize] = true;
                }
                MaskWrite::Copy(d, s) => {
                    kstate[d as usize] = kstate[s as usize];
                    kwritten[d as usize] = true;
                }
                MaskWrite::Dynamic(k) => {
                    kstate[k as usize] = MaskSrc::Dynamic;
                    kwritten[k as usize] = true;
                }
            }
        }
    }
    let mut succ = Vec::new();
    let mut exit = Exit::Static;
    if let Some(l) = &last {
        match l.flow {
            Flow::Next | Flow::Stop => succ.push(end),
            Flow::Jump(t) => succ.push(t),
            Flow::CondJump(t) | Flow::Call(t) => {
                succ.push(t);
                succ.push(end);
            }
            Flow::IndirectJump | Flow::IndirectCall => {
                if l.flow == Flow::IndirectCall {
                    succ.push(end);
                }
                // The target is computable at entry when no earlier instruction writes the registers it reads.
                let mut read: Vec<Register> = Vec::new();
                let i = &l.instr;
                for o in 0..i.op_count() {
                    match i.op_kind(o) {
                        OpKind::Register => read.push(full_gpr(i.op_register(o))),
                        OpKind::Memory => {
                            read.push(full_gpr(i.memory_base()));
                            read.push(full_gpr(i.memory_index()));
                        }
                        _ => {}
                    }
                }
                let clobbered = insns[..insns.len() - 1]
                    .iter()
                    .flat_map(|x| writes_of(x, factory))
                    .any(|w| w != Register::None && read.contains(&w));
                exit = Exit::Indirect { at_entry: !clobbered };
            }
            Flow::Return => {
                let mut at = RspAt::Rsp(0);
                let mut rbp_written = false;
                for x in &insns[..insns.len() - 1] {
                    let m = x.instr.mnemonic();
                    let writes = writes_of(x, factory);
                    let inc = x.instr.stack_pointer_increment() as i64;
                    at = match (at, m) {
                        (_, Mnemonic::Leave) => {
                            if rbp_written {
                                RspAt::Unknown
                            } else {
                                RspAt::Rbp(8)
                            }
                        }
                        (RspAt::Rsp(d), Mnemonic::Add | Mnemonic::Sub)
                            if x.instr.op0_register() == Register::RSP
                                && matches!(x.instr.op1_kind(), OpKind::Immediate8to64 | OpKind::Immediate32to64) =>
                        {
                            let v = x.instr.immediate(1) as i64;
                            RspAt::Rsp(if m == Mnemonic::Add { d + v } else { d - v })
                        }
                        (RspAt::Rsp(d), Mnemonic::Lea)
                            if x.instr.op0_register() == Register::RSP
                                && x.instr.memory_base() == Register::RSP
                                && x.instr.memory_index() == Register::None =>
                        {
                            RspAt::Rsp(d + x.instr.memory_displacement64() as i64)
                        }
                        (RspAt::Rsp(d), _) if inc != 0 => RspAt::Rsp(d + inc),
                        (RspAt::Rbp(d), _) if inc != 0 => RspAt::Rbp(d + inc),
                        (a, _) if writes.contains(&Register::RSP) => {
                            let _ = a;
                            RspAt::Unknown
                        }
                        (a, _) => a,
                    };
                    if writes.contains(&Register::RBP) && m != Mnemonic::Leave {
                        rbp_written = true;
                    }
                }
                exit = Exit::Ret(at);
            }
        }
    }
    // A counted loop that is one block: `…; add r, imm; …; jcc start`, r written only there.
    let mut induction = None;
    let mut affine = None;
    if let Some(l) = &last
        && l.flow == Flow::CondJump(start)
        && !needs_step
        && !rep
        && masked.iter().all(|(_, s)| match s {
            MaskSrc::Entry(k) => !kwritten[*k as usize],
            MaskSrc::Const(_) => true,
            MaskSrc::Dynamic => false,
        })
    {
        let mut writers: HashMap<Register, Vec<usize>> = HashMap::new();
        for (idx, x) in insns.iter().enumerate() {
            for w in writes_of(x, factory) {
                writers.entry(w).or_default().push(idx);
            }
        }
        for (reg, ws) in &writers {
            if ws.len() != 1 || reg_value(&unsafe_zero_regs(), *reg).is_none() || *reg == Register::RSP || *reg == Register::RIP {
                continue;
            }
            if let Some((stride, width32)) = stride_of(&insns[ws[0]].instr, *reg) {
                induction = Some(Induction {
                    reg: *reg,
                    stride,
                    width32,
                });
                break;
            }
        }
        if induction.is_some() {
            affine = affine_strides(&insns, &writers);
        }
    }
    Block {
        start,
        end,
        insns,
        stat,
        masked,
        needs_step,
        emu_masks: needs_step && !tiles,
        succ_marked: std::cell::Cell::new(0),
        succ,
        exit,
        induction,
        affine,
        rep,
        site,
        sites,
        insn_site,
    }
}

/// The per-iteration stride of `reg` when `x` (its only writer in a loop) is `add/sub reg, imm`,
/// `inc/dec reg` or `lea reg, [reg+imm]`, and whether the write is 32-bit (zero-extending).
fn stride_of(x: &iced_x86::Instruction, reg: Register) -> Option<(i64, bool)> {
    let dst = x.op0_register();
    if x.op0_kind() != OpKind::Register || full_gpr(dst) != reg || !(dst.is_gpr64() || dst.is_gpr32()) {
        return None;
    }
    let stride = match x.mnemonic() {
        Mnemonic::Add | Mnemonic::Sub
            if x.op_count() == 2
                && matches!(
                    x.op1_kind(),
                    OpKind::Immediate8to64 | OpKind::Immediate32to64 | OpKind::Immediate8to32 | OpKind::Immediate32
                ) =>
        {
            let v = x.immediate(1) as i64;
            let v = if dst.is_gpr32() { v as i32 as i64 } else { v };
            if x.mnemonic() == Mnemonic::Add { v } else { -v }
        }
        Mnemonic::Inc => 1,
        Mnemonic::Dec => -1,
        Mnemonic::Lea if full_gpr(x.memory_base()) == reg && x.memory_index() == Register::None => x.memory_displacement64() as i64,
        _ => return None,
    };
    (stride != 0).then_some((stride, dst.is_gpr32()))
}

/// A register that addresses memory in a single-block loop, as a function of the iteration:
/// written once per iteration by instruction `writer` (`add/sub/inc/dec/lea` by `stride`), or
/// never (`stride` 0).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stride {
    reg: Register,
    stride: i64,
    writer: usize,
    width32: bool,
}

/// Memory mode's view of a single-block loop: when every register its memory operands use is
/// invariant or advanced once per iteration by a constant, the whole address stream follows from
/// the registers at its entry and its trip count (replayed at its exit, in program order).
/// None when one is not (a gather's vector index, a register loaded or computed in the loop,
/// string instructions): the loop then traps every iteration.
fn affine_strides(insns: &[Rc<Insn>], writers: &HashMap<Register, Vec<usize>>) -> Option<Vec<Stride>> {
    let mut regs: Vec<Register> = Vec::new();
    for x in insns {
        if x.string.is_some() {
            return None;
        }
        for m in &x.mem {
            if m.used.index().is_vector_register() {
                return None;
            }
            regs.push(full_gpr(m.used.base()));
            regs.push(full_gpr(m.used.index()));
        }
        if x.prefetch {
            regs.push(full_gpr(x.instr.memory_base()));
            regs.push(full_gpr(x.instr.memory_index()));
        }
    }
    regs.sort_by_key(|r| *r as u32);
    regs.dedup();
    let mut out = Vec::new();
    for r in regs {
        if r == Register::None || r == Register::RIP || r.is_segment_register() {
            continue;
        }
        reg_value(&unsafe_zero_regs(), r)?;
        match writers.get(&r) {
            None => out.push(Stride {
                reg: r,
                stride: 0,
                writer: usize::MAX,
                width32: false,
            }),
            Some(ws) if ws.len() == 1 => {
                let (stride, width32) = stride_of(&insns[ws[0]].instr, r)?;
                out.push(Stride {
                    reg: r,
                    stride,
                    writer: ws[0],
                    width32,
                });
            }
            _ => return None,
        }
    }
    Some(out)
}

fn unsafe_zero_regs() -> libc::user_regs_struct {
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// The other threads of a space held stopped while one runs a run-ahead path
/// (`Tracer::hold_others`, docs/trace.md "Run-ahead with several threads").
struct Hold {
    space: usize,
    holder: Pid,
    /// Stopped by the tracer's SIGSTOP, to be let go as that stop would have been.
    held: Vec<Pid>,
    /// Wait statuses of the space's other threads that arrived meanwhile, handled after.
    events: Vec<WaitStatus>,
    /// Breakpoints taken out for the path (its members, the trapped block): back in at release.
    reinstall: Vec<u64>,
}

/// A set of addresses hashed by a multiply (SipHash showed in long paths' profiles).
type FastSet = HashSet<u64, std::hash::BuildHasherDefault<super::emu::WordHasher>>;
/// A map keyed by address (SipHash, the default, showed in profiles of start-up).
type FastMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<super::emu::WordHasher>>;

/// Bytes of code read at once (`Space::code_pages`).
const CODE_PAGE: usize = 4096;

/// A run-ahead path (see `Tracer::run_ahead`).
struct RunAhead {
    /// The trapped block as it is now.
    first: Rc<Block>,
    /// The blocks run after it, in order, with repeats: counted at the trap.
    members: Vec<Rc<Block>>,
    /// Per member, the opmask values of its masked instructions (empty for unmasked blocks).
    member_masks: Vec<Vec<Option<u64>>>,
    /// The addresses control leaves the path to (the exit, and the successors the path does
    /// not take that are not on it): their breakpoints go in.
    keep: Vec<u64>,
    /// Memory mode: the addresses of `first` and the members in program order.
    accesses: Option<Vec<Access>>,
    /// The general registers the emulator expects at the exit trap (None: not checked).
    exit_regs: Option<[Option<u64>; 16]>,
    /// Where the path ends in a system call: the general registers at its `syscall`.
    call_regs: Option<[Option<u64>; 16]>,
    /// The path ends in `rt_sigreturn`: where the thread traps next is not checked.
    exit_unknown: bool,
}

/// Per access of an iteration, the constant its address moves by from one iteration to the
/// next, where that holds: the same accesses (sizes, kinds) at iterations 0, 1, the middle and
/// the last, each at its iteration-0 address plus its step times the iteration (in 64-bit
/// wrapping arithmetic, which is the emulator's; a 32-bit address register that wraps in
/// between breaks the line at the last or middle point). None for fewer than 4 iterations.
fn affine_steps(trips: u64, iteration: &dyn Fn(u64, &mut Vec<Access>)) -> Option<Vec<u64>> {
    if trips < 4 {
        return None;
    }
    let at = |t: u64| {
        let mut v = Vec::new();
        iteration(t, &mut v);
        v
    };
    let (first, second) = (at(0), at(1));
    let steps: Vec<u64> = first.iter().zip(&second).map(|(a, b)| b.addr.wrapping_sub(a.addr)).collect();
    let fits = |t: u64, v: &[Access]| {
        v.len() == first.len()
            && v.iter()
                .zip(&first)
                .zip(&steps)
                .all(|((a, f), d)| a.size == f.size && a.kind == f.kind && a.addr == f.addr.wrapping_add(d.wrapping_mul(t)))
    };
    let (mid, last) = (trips / 2, trips - 1);
    (fits(1, &second) && fits(mid, &at(mid)) && fits(last, &at(last))).then_some(steps)
}

/// Whether a block ends in a system call (or another instruction after which the kernel, not
/// the block, decides what comes next).
fn ends_in_stop(block: &Block) -> bool {
    block.insns.last().is_some_and(|i| i.flow == Flow::Stop)
}

/// A block ending in `rt_sigreturn` (glibc's `__restore_rt`: `mov rax, 15; syscall`): the thread
/// goes on where its signal interrupted it, not after the `syscall`, so a path ending there has
/// no exit to predict (checking one reported every return from a signal handler as a
/// misprediction: 40 on a bash script that waits for its children).
fn ends_in_sigreturn(block: &Block) -> bool {
    const RT_SIGRETURN: u64 = 15;
    let n = block.insns.len();
    if n < 2 || block.insns[n - 1].instr.mnemonic() != Mnemonic::Syscall {
        return false;
    }
    let m = &block.insns[n - 2].instr;
    m.mnemonic() == Mnemonic::Mov
        && m.op_count() == 2
        && matches!(m.op0_register(), Register::RAX | Register::EAX)
        && matches!(m.op1_kind(), OpKind::Immediate32to64 | OpKind::Immediate32)
        && m.immediate(1) == RT_SIGRETURN
}

/// What the next SIGTRAP of a thread means.
#[derive(Debug, Clone, Copy, PartialEq)]
enum StepKind {
    None,
    /// Stepping the first instruction of a block whose breakpoint must come back (one thread
    /// in the space). `counting`: the space was counting when the step was asked for.
    Over {
        counting: bool,
    },
    /// Stepping through the displaced copy of the instruction at `orig` (its breakpoint stays
    /// in): once out of the copy, go on as `then` says.
    Displaced {
        orig: u64,
        then: Then,
    },
    /// Stepping through a block one instruction at a time.
    Through {
        start: u64,
        end: u64,
    },
    /// Stepping through a block counted at its entry, only to feed its addresses (memory mode).
    Feed {
        start: u64,
        end: u64,
    },
    /// The address space is single-stepped (threads, or `--trace memory`).
    Single,
    /// A signal was injected with a step: did it enter a handler?
    Signal {
        old_pc: u64,
        old_rsp: u64,
        counted: bool,
    },
}

/// What a thread does once it is out of a displaced copy it was stepped through.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Then {
    /// Counted as it arrives at the next instruction (stepping mode, or joining counting).
    Arrive,
    /// Stepping through the block `start..end`.
    Through { start: u64, end: u64 },
    /// Feeding the addresses of the block `start..end`.
    Feed { start: u64, end: u64 },
}

impl Then {
    /// How the thread is stepped once out of the copy.
    fn step_kind(self) -> StepKind {
        match self {
            Then::Arrive => StepKind::Single,
            Then::Through { start, end } => StepKind::Through { start, end },
            Then::Feed { start, end } => StepKind::Feed { start, end },
        }
    }
}

/// What a thread's native execution means since it was last resumed without a step: the
/// tracer's account of every instruction it did not see one by one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunAs {
    /// Not counting (before the entry point, outside regions): nothing it runs is counted.
    Outside,
    /// Block mode: the block it is in was counted at its entry, and every place it can go
    /// next carries a breakpoint.
    Blocks,
    /// A counted loop, run natively (trip count at its exit trap).
    Loop,
}

#[derive(Debug, Clone)]
struct Native {
    head: u64,
    /// The loop's block as it was when the loop started: another thread may split it (a jump
    /// into its middle found meanwhile) while this one runs it whole.
    block: Rc<Block>,
    exit: u64,
    ind: Induction,
    entry: u64,
    masks: Vec<Option<u64>>,
    /// Memory mode: the registers at the loop's entry, to replay its addresses at its exit.
    regs: Option<Box<libc::user_regs_struct>>,
}

struct Thread {
    space: usize,
    started: bool,
    step: StepKind,
    reinstall: Vec<u64>,
    pending_rep: Option<(Rc<Insn>, u64, Rc<Site>)>,
    native: Option<Native>,
    /// A SIGSTOP was sent to bring it into the current counting state.
    stop_requested: bool,
    run_as: RunAs,
    /// Index in `Tracer::per_thread`.
    index: usize,
    /// After a run-ahead path: the only addresses the next trap may be at.
    expect: Option<Vec<u64>>,
    /// After a run-ahead path: the general registers the emulator computed for its exit
    /// (`Emu::gprs` order, None where unknown), checked at the next trap.
    expect_regs: Option<Box<[Option<u64>; 16]>>,
    /// The path those registers were predicted on: (its trap address, blocks, last block).
    expect_path: (u64, usize, u64),
    /// The block this thread was let run natively after counting it whole at its entry
    /// (start, end), while its space has several threads: a breakpoint another thread's stop
    /// placed inside it meanwhile is passed, not counted again.
    counted: Option<(u64, u64)>,
    /// The AMX tile load or store this thread was last single-stepped over (counted before the
    /// step): a trap back at the same address means it did not complete (see
    /// `Tracer::tile_restart`).
    stepped_tile: Option<u64>,
    /// Memory mode with several threads: it entered a system call at its last trap, whose
    /// return value the next trap reads (rax) for the interleaving (`interleave.rs`).
    in_call: Option<u64>,
    /// Its rseq(2) area [start, end), once registered: what its emulations read as unknown.
    rseq: Option<(u64, u64)>,
}

impl Thread {
    fn new(space: usize) -> Thread {
        Thread {
            space,
            started: false,
            step: StepKind::None,
            reinstall: Vec::new(),
            pending_rep: None,
            native: None,
            stop_requested: false,
            run_as: RunAs::Outside,
            index: 0,
            expect: None,
            expect_regs: None,
            expect_path: (0, 0, 0),
            in_call: None,
            rseq: None,
            counted: None,
            stepped_tile: None,
        }
    }
}

/// How the traced program ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    Exited(i32),
    Signaled(Signal),
    Interrupted,
}

/// Counters of the driver itself, for the report's `extra` and the bench.
#[derive(Debug, Clone, Default)]
pub struct DriverStats {
    pub stops: u64,
    pub steps: u64,
    pub blocks_decoded: u64,
    pub native_loops: u64,
    pub loop_count_errors: u64,
    /// Step-overs of a block's first instruction (block re-entered itself, or a sticky breakpoint).
    pub step_overs: u64,
    /// Blocks stepped through (dynamic masks, unresolved exits): their executions.
    pub step_throughs: u64,
    /// Run-ahead emulations that read the thread's vector registers (XSAVE state).
    pub xstate_reads: u64,
    /// Blocks counted ahead of execution by the run-ahead emulator (no trap of their own).
    pub run_ahead_blocks: u64,
    /// Instructions the run-ahead emulator went through, those of paths emulated again (cut
    /// back, or blocks split by a new start) included: its work beside what it counted.
    pub emulated_instructions: u64,
    /// Traps that were not among the exits a run-ahead path predicted, or whose registers
    /// differ from those the emulator computed for the exit (must stay 0).
    pub mispredicts: u64,
    /// Of those, exits reached with registers other than the emulator's.
    pub exit_state_mismatches: u64,
    pub processes: u64,
    pub threads: u64,
    /// Breakpoints passed through a displaced copy (several threads in one address space).
    pub displaced: u64,
    /// Breakpoints passed the one-thread way (removed while stepping) although other threads
    /// ran: each is a window in which another thread could pass there uncounted. Noted.
    pub racy_passes: u64,
    /// Steps that ran one of our `int3`s armed meanwhile by another thread's stop (redone).
    pub stepped_into_bps: u64,
    /// Traps inside a block a thread had counted whole, at a breakpoint another thread's stop
    /// armed meanwhile (passed, not counted again).
    pub inside_counted: u64,
    /// Single-steps of an AMX tile load or store that trapped back at the same instruction
    /// (a restartable event, such as the page fault of a first-touched row, stopped it at
    /// `start_row`): counted once, not again when it resumes.
    pub tile_restarts: u64,
    pub racy_at: Vec<u64>,
    /// Threads stopped to start counting where they stood (entry point, region begin).
    pub joined: u64,
    /// Threads seen running natively, uncounted, while their space was counting (must stay
    /// empty): (thread id, address where it was seen).
    pub gaps: Vec<(i32, u64)>,
    /// Per thread, in order of creation.
    pub per_thread: Vec<ThreadStats>,
    /// Memory mode: blocks whose addresses came from the emulator at their entry, and blocks
    /// stepped through to feed them.
    pub emulated_blocks: u64,
    pub fed_by_steps: u64,
    /// Memory mode: natively run loops whose addresses were replayed from their entry registers.
    pub replayed_loops: u64,
    /// Run-ahead paths taken with the space's other threads held stopped (`Tracer::hold_others`).
    pub held_paths: u64,
    /// Holds given up because another thread did not stop in time (run-ahead skipped there).
    pub hold_timeouts: u64,
    /// Single-steps cut short inside a system call that the kernel restarts (a signal, our
    /// own SIGSTOP included, woke a thread blocked in it): the call is restarted where it
    /// ran and the step asked again.
    pub interrupted_steps: u64,
    /// Moves of a thread's `rip` asked while the kernel could still restart its system call,
    /// which would run the restart 2 bytes before the new `rip` (must stay empty:
    /// docs/trace.md, "Code the tracer writes"): (thread id, rip asked).
    pub restart_hazards: Vec<(i32, u64)>,
    /// The first mispredicted run-ahead paths (at most 4): a trap at no exit of the path, or
    /// exit registers that differ from the emulator's; what an investigation needs.
    pub exit_state_details: Vec<ExitStateDetail>,
    /// Displaced copies whose reserved slot was found written already (must stay 0: slots are
    /// never reused).
    pub scratch_overwrites: u64,
    /// Why each block was stepped through, by cause (`step_throughs` split up).
    pub step_through_causes: std::collections::BTreeMap<&'static str, u64>,
    /// Why each run-ahead path ended (or why none was run at a block trap), by cause.
    pub path_ends: std::collections::BTreeMap<&'static str, u64>,
    /// Pages of the tracee's memory the run-ahead's emulator read (4 KiB each).
    pub emulator_page_reads: u64,
}

impl DriverStats {
    fn path_end(&mut self, why: &'static str) {
        *self.path_ends.entry(why).or_insert(0) += 1;
    }
}

/// What one traced thread did: counted work, and how the tracer let it run.
#[derive(Debug, Clone, Default)]
pub struct ThreadStats {
    pub tid: i32,
    pub process: i32,
    pub instructions: u64,
    pub flops: u64,
    pub core_bytes: u64,
    /// Block traps (one per block execution counted at its entry).
    pub block_traps: u64,
    pub steps: u64,
    pub native_loops: u64,
    /// Resumes while its space was not counting (before the entry point, outside regions).
    pub outside_resumes: u64,
}

pub struct Tracer<'s> {
    mode: TraceMode,
    by_function: bool,
    sink: Option<&'s mut dyn AccessSink>,
    spaces: Vec<Space>,
    threads: HashMap<Pid, Thread>,
    early: HashSet<Pid>,
    main: Pid,
    factory: InstructionInfoFactory,
    xsave: XsaveLayout,
    pub total: Tally,
    /// `--by-function`: work per source site, keyed by the interned site's address.
    pub per_site: HashMap<*const Site, (Rc<Site>, Tally)>,
    /// `--by-function`: the DWARF readers of the run (modules without lines are noted).
    pub sources: Option<Rc<RefCell<Sources>>>,
    pub stats: DriverStats,
    ending: Option<Ending>,
    /// Dense thread ids for the access sink (private cache levels per thread), and the ids
    /// of exited threads, reused lowest first.
    sink_ids: HashMap<Pid, usize>,
    free_sink_ids: std::collections::BTreeSet<usize>,
    /// Memory mode with several threads: the order their accesses reach the shared levels.
    interleave: Interleave,
    /// Reference mode with several threads: whose step is next (`lockstep.rs`).
    lockstep: Lockstep,
    /// Wait statuses seen while injecting a system call, handled before the next waitpid.
    deferred: std::collections::VecDeque<WaitStatus>,
    /// Test instrument (`ROOFLINE_TRACE_FAULT=no-join`): threads are not stopped to join
    /// counting, so the tests can see the gap check report what that loses.
    fault_no_join: bool,
    /// The site given to work when nothing is attributed (no `--by-function`).
    no_site: Rc<Site>,
    /// `ROOFLINE_TRACE_DEBUG`: the driver says on stderr where it steps over and mispredicts.
    debug: bool,
    /// A run-ahead path in a space of several threads: the others held stopped until the
    /// path's thread stops again.
    hold: Option<Hold>,
    /// Traps left before holding is tried again after a thread did not stop in time.
    hold_cooldown: u32,
    releasing: bool,
    /// Instructions a run-ahead path emulates before it ends, 16× that inside a loop of several
    /// blocks (`ROOFLINE_TRACE_PATH_INSNS` makes it small, so tests reach both limits with
    /// programs quick to single-step).
    path_insns: u64,
    /// Per region name: what was counted while it was open (`regions.rs`).
    pub regions: Regions,
    /// The thread and address of an AMX tile load or store whose single-step trapped back at
    /// the same instruction, for the handling of that trap. TILELOADD and TILESTORED are
    /// restartable (Intel SDM): a restartable event, such as the page fault of a row not yet
    /// mapped, stops them at row `start_row` with RIP unchanged, and a single-step reports
    /// that stop. The instruction was counted in full before its step (its rows from the
    /// `start_row` in force then); when it resumes it moves only the rows left, so it is not
    /// counted again (before this, first-touched pages of a GEMM's C added rows to core Q).
    tile_restart: Option<(Pid, u64)>,
}

/// Memory mode: whether the thread of sink id `id` sleeps in the kernel now (`interleave.rs`).
fn asleep_in(ids: &HashMap<Pid, usize>) -> impl FnMut(usize) -> bool + '_ {
    move |id| ids.iter().find(|(_, v)| **v == id).is_some_and(|(p, _)| sys::task_sleeps(*p))
}

/// Between two looks at a thread that runs: yield the CPU, then sleep a little.
fn short_pause(rounds: &mut u32) {
    *rounds += 1;
    if *rounds < 64 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

fn opts() -> Options {
    Options::PTRACE_O_EXITKILL
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_TRACEEXIT
}

fn io(ctx: &str, e: Errno) -> Error {
    Error::io(ctx.to_string(), std::io::Error::from_raw_os_error(e as i32))
}

impl<'s> Tracer<'s> {
    fn new(main: Pid, mode: TraceMode, by_function: bool, sink: Option<&'s mut dyn AccessSink>) -> Tracer<'s> {
        Tracer {
            mode,
            by_function,
            sink,
            spaces: Vec::new(),
            threads: HashMap::new(),
            early: HashSet::new(),
            main,
            factory: InstructionInfoFactory::new(),
            xsave: XsaveLayout::of_this_cpu(),
            total: Tally::default(),
            per_site: HashMap::new(),
            sources: by_function.then(|| Rc::new(RefCell::new(Sources::new()))),
            stats: DriverStats::default(),
            ending: None,
            sink_ids: HashMap::new(),
            free_sink_ids: std::collections::BTreeSet::new(),
            interleave: Interleave::default(),
            lockstep: Lockstep::new(std::env::var("ROOFLINE_TRACE_FAULT").is_ok_and(|v| v == "free-steps")),
            deferred: std::collections::VecDeque::new(),
            fault_no_join: std::env::var("ROOFLINE_TRACE_FAULT").is_ok_and(|v| v == "no-join"),
            no_site: Rc::new(Site::symbol(Rc::from(""))),
            debug: std::env::var_os("ROOFLINE_TRACE_DEBUG").is_some(),
            hold: None,
            hold_cooldown: 0,
            releasing: false,
            path_insns: std::env::var("ROOFLINE_TRACE_PATH_INSNS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n| n >= 16)
                .unwrap_or(1 << 20),
            regions: Regions::default(),
            tile_restart: None,
        }
    }

    /// Trace a command from its exec: counting starts at its entry point (AT_ENTRY).
    pub fn run_command(
        argv: &[String],
        mode: TraceMode,
        by_function: bool,
        sink: Option<&'s mut dyn AccessSink>,
    ) -> Result<(Tracer<'s>, Ending)> {
        let child = sys::spawn_traced(argv)?;
        match waitpid(child, Some(WaitPidFlag::__WALL)).map_err(|e| io("waitpid", e))? {
            WaitStatus::Stopped(_, Signal::SIGTRAP) => {}
            other => {
                return Err(Error::Child {
                    cause: format!("{} did not start under the tracer ({other:?})", argv[0]),
                    status: 2,
                });
            }
        }
        ptrace::setoptions(child, opts()).map_err(|e| io("ptrace(SETOPTIONS)", e))?;
        let mut t = Tracer::new(child, mode, by_function, sink);
        t.exec_space(child);
        t.stats.processes = 1;
        t.stats.threads = 1;
        if let Some(th) = t.threads.get_mut(&child) {
            th.started = true;
        }
        t.flush_all();
        ptrace::cont(child, None).map_err(|e| io("ptrace(CONT)", e))?;
        let end = t.run_loop()?;
        t.finish_feeding();
        Ok((t, end))
    }

    /// Trace an already-forked child stopped by its own SIGSTOP, counting only between the
    /// `begin`/`end` marker functions it calls.
    pub fn run_forked(
        child: Pid,
        begin: u64,
        end: u64,
        mode: TraceMode,
        by_function: bool,
        sink: Option<&'s mut dyn AccessSink>,
    ) -> Result<(Tracer<'s>, Ending)> {
        match waitpid(child, Some(WaitPidFlag::__WALL)).map_err(|e| io("waitpid", e))? {
            WaitStatus::Stopped(_, Signal::SIGSTOP) => {}
            WaitStatus::Exited(_, 127) => return Err(sys::ptrace_refused(libc::EPERM)),
            other => {
                return Err(Error::Child {
                    cause: format!("the kernel child did not stop for the tracer ({other:?})"),
                    status: 2,
                });
            }
        }
        ptrace::setoptions(child, opts()).map_err(|e| io("ptrace(SETOPTIONS)", e))?;
        let mut t = Tracer::new(child, mode, by_function, sink);
        let mut sp = Space::new(child);
        sp.sources = t.sources.clone();
        sp.entered = true;
        sp.region_mode = true;
        sp.markers_known = true;
        sp.stepping = mode.single_steps();
        sp.bps.entry(begin).or_default().begin = true;
        sp.bps.entry(end).or_default().end = true;
        sp.install(begin);
        sp.install(end);
        t.spaces.push(sp);
        let mut th = t.new_thread(child, 0);
        th.started = true;
        t.threads.insert(child, th);
        t.stats.processes = 1;
        t.stats.threads = 1;
        t.flush_all();
        ptrace::cont(child, None).map_err(|e| io("ptrace(CONT)", e))?;
        let e = t.run_loop()?;
        t.finish_feeding();
        Ok((t, e))
    }

    /// A fresh address space after exec: breakpoint at AT_ENTRY, nothing counted before it.
    fn exec_space(&mut self, pid: Pid) {
        let mut sp = Space::new(pid);
        sp.sources = self.sources.clone();
        if let Some(entry) = sys::auxv_entry(pid) {
            sp.bps.entry(entry).or_default().entry = true;
            sp.install(entry);
        } else {
            sp.entered = true;
        }
        self.spaces.push(sp);
        let idx = self.spaces.len() - 1;
        if !self.threads.contains_key(&pid) {
            let th = self.new_thread(pid, idx);
            self.threads.insert(pid, th);
        }
        let th = self.threads.get_mut(&pid).expect("inserted above");
        th.space = idx;
        th.step = StepKind::None;
        th.native = None;
        th.pending_rep = None;
        th.reinstall.clear();
        // A run-ahead path that ended in the execve predicted exits in the old image.
        th.expect = None;
        th.expect_regs = None;
    }

    /// A thread record with its per-thread statistics slot.
    fn new_thread(&mut self, pid: Pid, space: usize) -> Thread {
        let mut th = Thread::new(space);
        th.index = self.stats.per_thread.len();
        let process = self.spaces.get(space).map(|s| s.leader.as_raw()).unwrap_or(pid.as_raw());
        self.stats.per_thread.push(ThreadStats {
            tid: pid.as_raw(),
            process,
            ..ThreadStats::default()
        });
        th
    }

    fn run_loop(&mut self) -> Result<Ending> {
        sys::catch_interrupt();
        loop {
            if sys::interrupted() {
                self.kill_all();
                return Ok(Ending::Interrupted);
            }
            let st = if let Some(d) = self.deferred.pop_front() {
                d
            } else if self.lockstep.busy() {
                match self.lockstep_wait() {
                    Ok(Some(s)) => s,
                    Ok(None) | Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => break,
                    Err(e) => return Err(io("waitpid", e)),
                }
            } else {
                match waitpid(None, Some(WaitPidFlag::__WALL)) {
                    Ok(s) => s,
                    Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => break,
                    Err(e) => return Err(io("waitpid", e)),
                }
            };
            self.stats.stops += 1;
            // Reference mode: after a stepped system call, the idle threads it woke rejoin.
            let woke = st.pid().and_then(|p| self.lockstep.seen(p)).is_some_and(|f| f.turn.syscall);
            if let Some(h) = &mut self.hold
                && let Some(pid) = st.pid()
            {
                if pid == h.holder {
                    // The path's thread traps (at its exit) or ends. Stopping after a
                    // step-over of the trapped block, or for a signal (its handler runs, then
                    // the path goes on with its breakpoints still out), the hold goes on.
                    let stepping = self.threads.get(&pid).is_some_and(|t| t.step != StepKind::None);
                    let ends = match st {
                        WaitStatus::Stopped(_, Signal::SIGTRAP) => !stepping,
                        WaitStatus::Stopped(..) => false,
                        _ => true,
                    };
                    if ends {
                        self.release_hold();
                    }
                } else if self.threads.get(&pid).is_some_and(|t| t.space == h.space) {
                    h.events.push(st);
                    continue;
                }
            }
            match st {
                WaitStatus::Exited(pid, code) => {
                    self.gone(pid);
                    if pid == self.main {
                        self.ending.get_or_insert(Ending::Exited(code));
                    }
                }
                WaitStatus::Signaled(pid, sig, _) => {
                    self.gone(pid);
                    if pid == self.main {
                        self.ending.get_or_insert(Ending::Signaled(sig));
                    }
                }
                WaitStatus::PtraceEvent(pid, _, ev) => self.on_event(pid, ev),
                WaitStatus::Stopped(pid, sig) => self.on_stop(pid, sig),
                WaitStatus::PtraceSyscall(pid) => {
                    self.flush_all();
                    let _ = ptrace::cont(pid, None);
                }
                _ => {}
            }
            if woke {
                self.take_woken();
            }
        }
        Ok(self.ending.unwrap_or(Ending::Exited(0)))
    }

    /// Reference mode with several threads: the next thread in turn steps (`lockstep.rs`), and
    /// the next wait status comes. None when the stepping thread went idle (asleep in a system
    /// call) or the wait was interrupted: ask again.
    fn lockstep_wait(&mut self) -> std::result::Result<Option<WaitStatus>, Errno> {
        let now_only = Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG);
        // Statuses already there first: threads outside the turns, idle threads woken.
        match waitpid(None, now_only)? {
            WaitStatus::StillAlive => {}
            st => return Ok(Some(st)),
        }
        if let Some(t) = self.lockstep.next() {
            self.flush_all();
            if ptrace::step(t.pid, t.sig).is_err() {
                // Gone meanwhile (killed with its process): its end is on its way.
                self.lockstep.seen(t.pid);
                return Ok(None);
            }
        }
        let Some(turn) = self.lockstep.flight().map(|f| f.turn) else {
            return Ok(None);
        };
        if !turn.syscall {
            // One instruction: its stop comes.
            return waitpid(None, Some(WaitPidFlag::__WALL)).map(Some);
        }
        let mut rounds = 0u32;
        loop {
            match waitpid(None, now_only)? {
                WaitStatus::StillAlive => {}
                st => return Ok(Some(st)),
            }
            if sys::interrupted() || self.lockstep.flight_sleeps(sys::task_sleeps(turn.pid), std::time::Instant::now()) {
                return Ok(None);
            }
            short_pause(&mut rounds);
        }
    }

    /// After a stepped system call (a `futex` wake, a signal sent): an idle thread it woke is
    /// awake now (a wake-up makes it runnable before the call returns); its stop is taken and
    /// handled before the next turn, so it rejoins the turns at the same point on every run.
    fn take_woken(&mut self) {
        for pid in self.lockstep.idle() {
            if sys::task_sleeps(pid) {
                continue;
            }
            let mut rounds = 0u32;
            let mut asleep_since = None;
            loop {
                match waitpid(pid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
                    Ok(st) => {
                        self.deferred.push_back(st);
                        break;
                    }
                    Err(_) => break,
                }
                // Asleep again without a stop (a spurious wake-up the kernel waits out): idle.
                if sys::task_sleeps(pid) {
                    if asleep_since.get_or_insert_with(std::time::Instant::now).elapsed() >= SLEEP_IDLE {
                        break;
                    }
                } else {
                    asleep_since = None;
                }
                if sys::interrupted() {
                    break;
                }
                short_pause(&mut rounds);
            }
        }
    }

    fn kill_all(&mut self) {
        let pids: Vec<Pid> = self.threads.keys().copied().collect();
        for p in pids {
            let _ = nix::sys::signal::kill(p, Signal::SIGKILL);
        }
        while let Ok(s) = waitpid(None, Some(WaitPidFlag::__WALL)) {
            match s {
                WaitStatus::StillAlive => break,
                // Killed tracees stop once more at their exit event (PTRACE_O_TRACEEXIT):
                // let them go on dying.
                WaitStatus::PtraceEvent(p, ..) | WaitStatus::Stopped(p, _) => {
                    let _ = ptrace::cont(p, None);
                }
                _ => {}
            }
        }
    }

    /// The sink's dense id of thread `pid` (assigned at its first access).
    fn sink_id(&mut self, pid: Pid) -> usize {
        self.sink_id_of(pid, None)
    }

    /// The sink's id of thread `pid`, created by thread `parent` where known (a new thread
    /// starts at its creator's clock in the interleaving).
    fn sink_id_of(&mut self, pid: Pid, parent: Option<Pid>) -> usize {
        if let Some(&id) = self.sink_ids.get(&pid) {
            return id;
        }
        let parent = parent.and_then(|p| self.sink_ids.get(&p).copied());
        let id = match self.free_sink_ids.pop_first() {
            Some(id) => id,
            None => self.sink_ids.len(),
        };
        self.sink_ids.insert(pid, id);
        if let Some(sink) = self.sink.as_deref_mut() {
            self.interleave.join(id, parent, sink, &mut asleep_in(&self.sink_ids));
        }
        id
    }

    /// Memory mode: thread `pid` is about to enter a system call: the other threads' accesses
    /// need not wait for its next ones while it sleeps there (`interleave.rs`).
    /// `call` is what it is (a `futex` wait or wake, or another), `back` the address after the
    /// `syscall` instruction.
    fn enters_call(&mut self, pid: Pid, call: Call, back: u64) {
        if let (Some(&id), Some(sink)) = (self.sink_ids.get(&pid), self.sink.as_deref_mut()) {
            self.interleave.call(id, call, sink, &mut asleep_in(&self.sink_ids));
            if let Some(t) = self.threads.get_mut(&pid) {
                t.in_call = Some(back);
            }
        }
    }

    /// Memory mode: thread `pid` traps at `pc` for the first time since it entered a system
    /// call: right after the `syscall` instruction, rax is what the call returned (elsewhere,
    /// a signal handler or a stepped block, it is not known).
    fn returns_from_call(&mut self, pid: Pid, pc: u64, rax: u64) {
        let Some(t) = self.threads.get_mut(&pid) else { return };
        let Some(back) = t.in_call.take() else { return };
        if let (Some(&id), Some(sink)) = (self.sink_ids.get(&pid), self.sink.as_deref_mut()) {
            let ret = (pc == back).then_some(rax as i64);
            self.interleave.returned(id, ret, sink, &mut asleep_in(&self.sink_ids));
        }
    }

    /// Memory mode: thread `pid` adds no accesses for a while (it runs outside counting), so
    /// the other threads' accesses need not wait for its next ones.
    fn feeds_nothing_soon(&mut self, pid: Pid) {
        if let (Some(&id), Some(sink)) = (self.sink_ids.get(&pid), self.sink.as_deref_mut()) {
            self.interleave.idle(id, sink, &mut asleep_in(&self.sink_ids));
        }
    }

    fn gone(&mut self, pid: Pid) {
        if let Some(id) = self.sink_ids.remove(&pid) {
            // Its id may be reused by the next thread: what it left waiting goes first.
            if let Some(sink) = self.sink.as_deref_mut() {
                self.interleave.leave(id, sink, &mut asleep_in(&self.sink_ids));
            }
            self.free_sink_ids.insert(id);
        }
        if let Some(th) = self.threads.remove(&pid) {
            let sp = &mut self.spaces[th.space];
            sp.threads = sp.threads.saturating_sub(1);
        }
    }

    /// Let a thread run natively; what that means (`RunAs`) follows from its space's state.
    fn cont(&mut self, pid: Pid, sig: Option<Signal>) {
        let mut outside = false;
        if let Some(th) = self.threads.get_mut(&pid) {
            let sp = &self.spaces[th.space];
            th.run_as = if th.native.is_some() {
                RunAs::Loop
            } else if sp.active() && !sp.stepping {
                RunAs::Blocks
            } else {
                // Outside counting, or (a flaw the gap check reports) a stepping space.
                if let Some(s) = self.stats.per_thread.get_mut(th.index) {
                    s.outside_resumes += 1;
                }
                RunAs::Outside
            };
            outside = th.run_as == RunAs::Outside;
        }
        if outside {
            self.feeds_nothing_soon(pid);
        }
        self.flush_all();
        let _ = ptrace::cont(pid, sig);
    }

    /// Write every space's changed breakpoints (before any tracee runs).
    fn flush_all(&mut self) {
        for sp in &mut self.spaces {
            if !sp.dirty.is_empty() {
                sp.flush();
            }
        }
    }

    fn step(&mut self, pid: Pid, sig: Option<Signal>) {
        self.stats.steps += 1;
        if let Some(th) = self.threads.get(&pid)
            && let Some(s) = self.stats.per_thread.get_mut(th.index)
        {
            s.steps += 1;
        }
        if let Some((order, syscall)) = self.takes_turns(pid) {
            self.lockstep.queue(order, Turn { pid, sig, syscall });
            return;
        }
        self.flush_all();
        let _ = ptrace::step(pid, sig);
    }

    /// Reference mode with several threads: a thread counting in a single-stepped space steps
    /// in its turn (`lockstep.rs`). Its order of creation, and whether its next instruction is
    /// a system call (which may sleep).
    fn takes_turns(&mut self, pid: Pid) -> Option<(usize, bool)> {
        if !self.mode.single_steps() || self.threads.len() < 2 || self.lockstep.off {
            return None;
        }
        let th = self.threads.get(&pid)?;
        let (si, order) = (th.space, th.index);
        if !th.started || !self.spaces[si].stepping || !self.spaces[si].active() {
            return None;
        }
        let rip = ptrace::getregs(pid).ok()?.rip;
        let sp = &mut self.spaces[si];
        let syscall = !sp.xol.in_areas(rip) && sp.insn_at(rip, &mut self.factory).flow == Flow::Stop;
        Some((order, syscall))
    }

    /// The invariant check: a thread that stops while its space counts must have been let run
    /// in a counted way (blocks, a counted loop, a step), or have been asked to stop to join
    /// counting. Anything else is a stretch nobody counted: recorded, and said in the report.
    fn check_gap(&mut self, pid: Pid) {
        let Some(th) = self.threads.get(&pid) else { return };
        if !th.started || th.stop_requested || th.step != StepKind::None || th.run_as != RunAs::Outside {
            return;
        }
        if self.spaces[th.space].active() {
            let pc = ptrace::getregs(pid).map(|r| r.rip).unwrap_or(0);
            self.stats.gaps.push((pid.as_raw(), pc));
        }
    }

    /// Counting just started in space `si` (entry point, a region begun) in thread `by`: every
    /// other thread of the space running natively outside counting is stopped, to start
    /// counting where it stands (`on_requested_stop`). Threads not yet started are left alone:
    /// their first stop starts them in the state of that moment.
    fn bring_in_others(&mut self, si: usize, by: Pid) {
        if self.fault_no_join {
            return;
        }
        let leader = self.spaces[si].leader;
        for (p, t) in self.threads.iter_mut() {
            if t.space == si && *p != by && t.started && t.step == StepKind::None && t.run_as == RunAs::Outside && !t.stop_requested {
                t.stop_requested = sys::tgkill(leader, *p, Signal::SIGSTOP);
            }
        }
    }

    /// Counting just ended in space `si`: block breakpoints go, so threads in block mode now
    /// run uncounted (a later start of counting must stop them).
    fn let_others_go(&mut self, si: usize, by: Pid) {
        let mut uncounted = Vec::new();
        for (p, t) in self.threads.iter_mut() {
            if t.space != si || *p == by {
                continue;
            }
            if t.started && t.run_as == RunAs::Outside && t.step == StepKind::None && !t.stop_requested {
                // Ran natively through the whole counting window without being asked to join:
                // the invariant is broken (where it is now cannot be read: it runs).
                self.stats.gaps.push((p.as_raw(), 0));
            }
            if t.run_as == RunAs::Blocks {
                t.run_as = RunAs::Outside;
                uncounted.push(*p);
            }
        }
        for p in uncounted {
            self.feeds_nothing_soon(p);
        }
    }

    fn on_event(&mut self, pid: Pid, ev: i32) {
        let Some(space) = self.threads.get(&pid).map(|t| t.space) else {
            {
                self.flush_all();
                let _ = ptrace::cont(pid, None);
            }
            return;
        };
        self.check_gap(pid);
        if ev == Event::PTRACE_EVENT_EXIT as i32 {
            // The thread is about to die (its own exit, or killed with its process): a counted
            // loop it is in gets the trips it ran, a pending `rep` its iterations.
            if let Ok(regs) = ptrace::getregs(pid) {
                let nat = self.threads.get_mut(&pid).and_then(|t| t.native.take());
                if let Some(nat) = nat {
                    self.finish_loop(pid, space, &nat, &regs);
                }
                self.resolve_rep(pid, &regs);
            }
            {
                self.flush_all();
                let _ = ptrace::cont(pid, None);
            }
            return;
        }
        if ev == Event::PTRACE_EVENT_EXEC as i32 {
            // Other threads of the old image are gone; the exec'ing thread is now `pid`.
            let old = &mut self.spaces[space];
            old.threads = old.threads.saturating_sub(1);
            self.exec_space(pid);
            if let Some(t) = self.threads.get_mut(&pid) {
                t.started = true;
            }
            self.cont(pid, None);
            return;
        }
        if ev == Event::PTRACE_EVENT_CLONE as i32 || ev == Event::PTRACE_EVENT_FORK as i32 || ev == Event::PTRACE_EVENT_VFORK as i32 {
            let Ok(new) = ptrace::getevent(pid) else {
                self.resume(pid);
                return;
            };
            let new = Pid::from_raw(new as i32);
            self.stats.threads += u64::from(ev != Event::PTRACE_EVENT_FORK as i32);
            let idx = if ev == Event::PTRACE_EVENT_FORK as i32 {
                if self.debug {
                    eprintln!("[{pid}] fork: child {new}");
                }
                self.stats.processes += 1;
                let mut copy = self.spaces[space].fork_copy(new);
                copy.stepping = self.spaces[space].stepping;
                copy.sync_memory_to_record();
                // The parent's own pending reinstalls were not in memory when the child was copied.
                self.spaces.push(copy);
                self.spaces.len() - 1
            } else {
                let sp = &mut self.spaces[space];
                sp.threads += 1;
                if sp.threads == 2 && sp.active() && !sp.stepping {
                    // From one thread to several: breakpoints the lone thread left out (its
                    // own block, run-ahead paths) go back in, and from now on none is removed
                    // while counting (breakpoints are passed through displaced copies). The
                    // cloning thread is in a system call, which ends a block and a run-ahead
                    // path: nothing it has counted ahead lies behind a reinstalled breakpoint.
                    let addrs: Vec<u64> = sp.bps.iter().filter(|(_, b)| b.block && !b.installed).map(|(a, _)| *a).collect();
                    for a in addrs {
                        sp.install(a);
                    }
                }
                space
            };
            let th = self.new_thread(new, idx);
            self.threads.insert(new, th);
            if self.mode == TraceMode::Memory {
                // Known from its creation on: the creator's next accesses wait for its first
                // (both run on from the `clone` in lockstep; `interleave.rs`).
                self.sink_id_of(new, Some(pid));
            }
            if self.early.remove(&new) {
                self.start_thread(new);
            } else if self.mode.single_steps()
                && let Ok(st) = waitpid(new, Some(WaitPidFlag::__WALL))
            {
                // Reference mode: the new thread's first stop (it starts with a SIGSTOP) is
                // taken now, so it takes its first turn right after the `clone` on every run.
                self.deferred.push_back(st);
            }
        }
        self.resume(pid);
    }

    /// Resume a thread stopped in a syscall or event stop.
    fn resume(&mut self, pid: Pid) {
        self.do_reinstall(pid);
        let Some(th) = self.threads.get_mut(&pid) else { return };
        let sp = &self.spaces[th.space];
        let step = match th.step {
            StepKind::None => {
                if sp.stepping && sp.active() {
                    th.step = StepKind::Single;
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        if step {
            self.step(pid, None);
        } else {
            self.cont(pid, None);
        }
    }

    fn do_reinstall(&mut self, pid: Pid) {
        let Some(th) = self.threads.get_mut(&pid) else { return };
        if th.reinstall.is_empty() {
            return;
        }
        let list = std::mem::take(&mut th.reinstall);
        let sp = &mut self.spaces[th.space];
        for a in list {
            if !sp.stepping || sp.bps.get(&a).is_some_and(|b| b.sticky()) {
                sp.install(a);
            }
        }
    }

    fn start_thread(&mut self, pid: Pid) {
        if let Some(t) = self.threads.get_mut(&pid) {
            t.started = true;
            t.stop_requested = false;
        }
        let Ok(regs) = ptrace::getregs(pid) else {
            self.cont(pid, None);
            return;
        };
        self.arrive(pid, regs.rip, regs);
    }

    /// Several threads share space `si`'s text, so a run-ahead path, which takes its members'
    /// breakpoints out, may run only while no other thread runs: stop them all (SIGSTOP, as
    /// `bring_in_others` does) and keep them stopped until `holder` stops again
    /// (`release_hold`). Their wait statuses that arrive meanwhile wait too. False, with
    /// nothing held, when one has not stopped within 20 ms (a `vfork` parent waits for its
    /// child in a state no signal interrupts): holding is then not tried for the next 1000
    /// traps.
    fn hold_others(&mut self, si: usize, holder: Pid) -> bool {
        if self.hold.is_some() || self.releasing || self.spaces[si].stepping || !self.spaces[si].active() || self.fault_no_join {
            return false;
        }
        if self.hold_cooldown > 0 {
            self.hold_cooldown -= 1;
            return false;
        }
        // A SIGSTOP on its way to the holder would stop it before its path.
        if self.threads.get(&holder).is_none_or(|t| t.stop_requested) {
            return false;
        }
        let leader = self.spaces[si].leader;
        // Threads whose status is waiting to be handled are stopped already.
        let pending: HashSet<Pid> = self.deferred.iter().filter_map(|st| st.pid()).collect();
        let mut waiting: Vec<Pid> = Vec::new();
        for (p, t) in self.threads.iter_mut() {
            if t.space != si || *p == holder || !t.started || pending.contains(p) {
                continue;
            }
            if !t.stop_requested {
                t.stop_requested = sys::tgkill(leader, *p, Signal::SIGSTOP);
            }
            waiting.push(*p);
        }
        let mut hold = Hold {
            space: si,
            holder,
            held: Vec::new(),
            events: Vec::new(),
            reinstall: Vec::new(),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(20);
        let mut rounds = 0u32;
        while !waiting.is_empty() {
            let mut k = 0;
            while k < waiting.len() {
                let p = waiting[k];
                match waitpid(p, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => k += 1,
                    Ok(WaitStatus::Stopped(_, Signal::SIGSTOP)) => {
                        hold.held.push(p);
                        waiting.swap_remove(k);
                    }
                    // Stopped for something else (its SIGSTOP still comes, and is swallowed
                    // then), or gone: handled after the hold.
                    Ok(st) => {
                        hold.events.push(st);
                        waiting.swap_remove(k);
                    }
                    Err(_) => {
                        waiting.swap_remove(k);
                    }
                }
            }
            if waiting.is_empty() {
                break;
            }
            if std::time::Instant::now() > deadline {
                self.stats.hold_timeouts += 1;
                self.hold_cooldown = 1000;
                self.hold = Some(hold);
                self.release_hold();
                return false;
            }
            rounds += 1;
            if rounds < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        if self.debug {
            eprintln!("[{holder}] holds {:?}", hold.held);
        }
        self.hold = Some(hold);
        true
    }

    /// Whether a trap at `pc` may hold the other threads (`Space::hold_skip`).
    fn hold_worth_trying(&mut self, si: usize, pc: u64) -> bool {
        match self.spaces[si].hold_skip.get_mut(&pc) {
            Some((left, _)) if *left > 0 => {
                *left -= 1;
                false
            }
            _ => true,
        }
    }

    /// The hold ends (its thread stopped again, or its run-ahead came to nothing): breakpoints
    /// taken out go back in, statuses that waited are handled next, and the held threads go
    /// on as their SIGSTOP says (`on_requested_stop`).
    fn release_hold(&mut self) {
        let Some(h) = self.hold.take() else { return };
        if self.debug {
            eprintln!("[{}] hold released: reinstall {:x?}, held {:?}", h.holder, h.reinstall, h.held);
        }
        // (A held thread let go may start counting and trap: no new hold while the others
        // are still stopped.)
        self.releasing = true;
        let sp = &mut self.spaces[h.space];
        for a in h.reinstall {
            sp.install(a);
        }
        for st in h.events.into_iter().rev() {
            self.deferred.push_front(st);
        }
        for p in h.held {
            if self.threads.contains_key(&p) {
                self.on_requested_stop(p);
            }
        }
        self.releasing = false;
    }

    /// A SIGSTOP the tracer sent (`bring_in_others`) arrived.
    fn on_requested_stop(&mut self, pid: Pid) {
        let Some(th) = self.threads.get_mut(&pid) else { return };
        th.stop_requested = false;
        let (si, step, run_as) = (th.space, th.step, th.run_as);
        if step != StepKind::None {
            // Asked to step, it stopped for the signal before running anything: step again.
            self.step(pid, None);
            return;
        }
        if !(run_as == RunAs::Outside && self.spaces[si].active()) {
            // It joined counting already (it trapped first), or counting ended again.
            self.cont(pid, None);
            return;
        }
        let Ok(mut regs) = ptrace::getregs(pid) else {
            self.cont(pid, None);
            return;
        };
        // Stopped inside a system call the kernel would restart at rip - 2: restart it here,
        // so that the counted path starts at the `syscall` instruction itself.
        if let Some(r) = sys::restarted_syscall(&regs)
            && ptrace::setregs(pid, r).is_ok()
        {
            regs = r;
        }
        self.stats.joined += 1;
        // In the middle of a displaced copy (passing a marker breakpoint outside counting):
        // step out of it first; the copied instruction is counted if it has not run yet.
        if let Some(stub) = self.stub_holding(si, regs.rip) {
            if regs.rip == stub.1.at {
                self.count_one(pid, si, stub.0, &libc::user_regs_struct { rip: stub.0, ..regs });
            }
            self.set_step(
                pid,
                StepKind::Displaced {
                    orig: stub.0,
                    then: Then::Arrive,
                },
            );
            self.step(pid, None);
            return;
        }
        self.arrive(pid, regs.rip, regs);
    }

    /// The displaced copy holding `addr` in space `si`: (original address, stub).
    fn stub_holding(&self, si: usize, addr: u64) -> Option<(u64, Stub)> {
        let sp = &self.spaces[si];
        if !sp.xol.in_areas(addr) {
            return None;
        }
        sp.xol.stub_at(addr)
    }

    fn on_stop(&mut self, pid: Pid, sig: Signal) {
        let Some(th) = self.threads.get_mut(&pid) else {
            // A new task reported before its parent's event.
            self.early.insert(pid);
            return;
        };
        if !th.started {
            if sig == Signal::SIGSTOP {
                self.start_thread(pid);
            } else {
                {
                    self.flush_all();
                    let _ = ptrace::cont(pid, Some(sig));
                }
            }
            return;
        }
        if sig == Signal::SIGSTOP && th.stop_requested {
            self.on_requested_stop(pid);
            return;
        }
        self.check_gap(pid);
        let Some(th) = self.threads.get_mut(&pid) else { return };
        let Ok(mut regs) = ptrace::getregs(pid) else {
            {
                self.flush_all();
                let _ = ptrace::cont(pid, Some(sig));
            }
            return;
        };
        // Only the stop right after its step can be a restart of the tile instruction stepped.
        let stepped_tile = th.stepped_tile.take();
        if sig == Signal::SIGTRAP {
            let step = th.step;
            let si = th.space;
            if step != StepKind::None
                && let sys::StepStop::Interrupted(restart) = sys::judge_step_stop(&regs)
            {
                // Nothing after the interrupted call ran: restart it where it is and ask the
                // same step again (its instruction was counted when the step was asked).
                self.stats.interrupted_steps += 1;
                if ptrace::setregs(pid, *restart).is_ok() {
                    self.step(pid, None);
                    return;
                }
            }
            if matches!(
                step,
                StepKind::Through { .. } | StepKind::Feed { .. } | StepKind::Single | StepKind::Over { .. }
            ) && let Some(at) = self.stepped_into_bp(pid, si, &regs)
            {
                // Nothing ran: step again from `at`, through the breakpoint's displaced copy.
                // (Its instruction was already counted or fed when the step was asked for.)
                self.stats.stepped_into_bps += 1;
                if self.debug {
                    eprintln!("stepped into a breakpoint armed meanwhile at {at:#x} ({step:?})");
                }
                if let Some(t) = self.threads.get_mut(&pid) {
                    t.step = StepKind::None;
                }
                self.move_rip(pid, &mut regs, at);
                let then = match step {
                    StepKind::Through { start, end } => Some(Then::Through { start, end }),
                    StepKind::Feed { start, end } => Some(Then::Feed { start, end }),
                    StepKind::Single => Some(Then::Arrive),
                    _ => None,
                };
                self.pass_bp(pid, si, at, regs, then);
                return;
            }
            if step != StepKind::None {
                self.resolve_rep(pid, &regs);
                self.do_reinstall(pid);
                if stepped_tile == Some(regs.rip) {
                    self.tile_restart = Some((pid, regs.rip));
                }
                self.on_step(pid, step, regs);
                self.tile_restart = None;
                return;
            }
            let at = regs.rip.wrapping_sub(1);
            if self.debug {
                eprintln!("[{pid}] trap at {at:#x} (space {si})");
            }
            // The exit trap of a counted loop's displaced copy.
            if let Some(nat) = self.threads.get(&pid).and_then(|t| t.native.clone())
                && nat.exit == at
                && self.spaces[si].xol.loop_of_exit(at) == Some(nat.head)
            {
                if let Some(t) = self.threads.get_mut(&pid) {
                    t.native = None;
                }
                self.finish_loop(pid, si, &nat, &regs);
                let resume = nat.block.end;
                self.move_rip(pid, &mut regs, resume);
                self.arrive(pid, resume, regs);
                return;
            }
            let counted = self.threads.get_mut(&pid).and_then(|t| t.counted.take());
            let sp = &self.spaces[si];
            // Ours: installed now, or removed (counting ended) after this thread hit it.
            if sp.bps.get(&at).is_some_and(|b| b.installed || (b.has_orig && b.orig != INT3)) {
                if let Some((start, end)) = counted
                    && start < at
                    && at < end
                    && sp.active()
                {
                    // Inside the block counted whole at its entry: a breakpoint another
                    // thread's stop armed meanwhile (a jump into this block's middle). The
                    // rest of the block is counted already.
                    self.stats.inside_counted += 1;
                    if let Some(t) = self.threads.get_mut(&pid) {
                        t.counted = Some((start, end));
                    }
                    let installed = sp.bps.get(&at).is_some_and(|b| b.installed);
                    self.move_rip(pid, &mut regs, at);
                    if installed {
                        self.pass_bp(pid, si, at, regs, None);
                    } else {
                        self.cont(pid, None);
                    }
                    return;
                }
                if let Some(th) = self.threads.get_mut(&pid) {
                    let exp = th.expect.take();
                    let exp_regs = th.expect_regs.take();
                    if let Some(e) = exp.as_ref().filter(|e| !e.contains(&at)) {
                        if self.debug {
                            eprintln!("[{pid}] mispredict: trap at {at:#x}, expected {e:x?}");
                        }
                        self.stats.mispredicts += 1;
                        if self.stats.exit_state_details.len() < 4 {
                            let (from, blocks, last) = th.expect_path;
                            // (No register differs: the trap itself was not an exit of the path.)
                            self.stats.exit_state_details.push(ExitStateDetail {
                                at,
                                from,
                                blocks,
                                last,
                                differing: Vec::new(),
                            });
                        }
                    } else if let Some(er) = exp_regs
                        && !regs_agree(&er, &regs)
                    {
                        if self.debug {
                            eprintln!("exit state: trap at {at:#x}, expected {er:x?}, regs {regs:x?}");
                        }
                        self.stats.mispredicts += 1;
                        self.stats.exit_state_mismatches += 1;
                        if self.stats.exit_state_details.len() < 4 {
                            let (from, blocks, last) = th.expect_path;
                            self.stats.exit_state_details.push(ExitStateDetail {
                                at,
                                from,
                                blocks,
                                last,
                                differing: regs_differing(&er, &regs),
                            });
                        }
                    }
                }
                self.move_rip(pid, &mut regs, at);
                self.resolve_rep(pid, &regs);
                self.do_reinstall(pid);
                self.on_bp(pid, at, regs);
                return;
            }
        }
        self.deliver(pid, sig, regs);
    }

    /// An emulator for stopped thread `pid` of space `si` from `regs`. Its rseq(2) area reads
    /// as unknown: the kernel rewrites `cpu_id` there whenever the thread comes back to user
    /// space on another CPU, between the stop and the code that reads it (glibc's
    /// `pthread_create` and `sched_getcpu` do), so the value at the stop predicts nothing.
    fn emulator(&mut self, pid: Pid, si: usize, regs: &libc::user_regs_struct) -> Emu {
        let rseq = self.rseq_of(pid);
        Emu::new(regs, self.spaces[si].mem.clone()).with_volatile(rseq.as_slice())
    }

    /// Thread `pid`'s rseq(2) area [start, end), asked of the kernel until it has one.
    fn rseq_of(&mut self, pid: Pid) -> Option<(u64, u64)> {
        let t = self.threads.get_mut(&pid)?;
        if t.rseq.is_none() {
            t.rseq = sys::rseq_area(pid).map(|(a, n)| (a, a.saturating_add(n)));
        }
        t.rseq
    }

    /// Deliver `sig` with a single step, judged from `old_pc` (nothing counted before it).
    fn step_into_signal(&mut self, pid: Pid, sig: Signal, old_pc: u64, old_rsp: u64) {
        if let Some(t) = self.threads.get_mut(&pid) {
            t.step = StepKind::Signal {
                old_pc,
                old_rsp,
                counted: false,
            };
        }
        self.step(pid, Some(sig));
    }

    /// Point a stopped thread's `rip` at `to` (a displaced copy, the code after one, a block
    /// start). The invariant of docs/trace.md ("Code the tracer writes"): never while the
    /// kernel may still restart the thread's system call, since the restart runs at the new
    /// rip - 2 (inside another copy's padding or the middle of an instruction). The registers
    /// are in hand, so the check costs nothing; a breach is recorded for the report and
    /// stops a debug build.
    fn move_rip(&mut self, pid: Pid, regs: &mut libc::user_regs_struct, to: u64) {
        if sys::restarted_syscall(regs).is_some() {
            debug_assert!(
                false,
                "tracer moved rip {:#x} -> {to:#x} with a system call restart pending",
                regs.rip
            );
            if self.stats.restart_hazards.len() < 8 {
                self.stats.restart_hazards.push((pid.as_raw(), to));
            }
        }
        regs.rip = to;
        let _ = ptrace::setregs(pid, *regs);
    }

    /// `ROOFLINE_TRACE_DEBUG`: where a fault the program is about to receive happened, and in
    /// what state the tracer had left the thread.
    fn debug_fault(&self, pid: Pid, sig: Signal, regs: &libc::user_regs_struct) {
        let Some(th) = self.threads.get(&pid) else { return };
        let sp = &self.spaces[th.space];
        let addr = ptrace::getsiginfo(pid).map(|i| unsafe { i.si_addr() } as u64).unwrap_or(0);
        let mut code = [0u8; 16];
        let n = sp.mem.read(regs.rip, &mut code);
        eprintln!(
            "fault {sig:?} tid {pid} rip {:#x} addr {addr:#x} rsp {:#x} step {:?} native {:?} threads {} in_area {} stub {:x?} bp {:?} code {:02x?}",
            regs.rip,
            regs.rsp,
            th.step,
            th.native.as_ref().map(|n| (n.head, n.exit)),
            sp.threads,
            sp.xol.in_areas(regs.rip),
            sp.xol.stub_at(regs.rip),
            sp.bps.get(&regs.rip),
            &code[..n]
        );
        eprintln!("  regs {regs:x?}");
    }

    /// Pass a signal on. With a handler, the step lands on its first instruction, which
    /// becomes a block start; without one, the step executed one instruction.
    fn deliver(&mut self, pid: Pid, sig: Signal, regs: libc::user_regs_struct) {
        if let Some(t) = self.threads.get_mut(&pid) {
            t.expect = None;
            t.expect_regs = None;
            t.counted = None;
        }
        let Some(th) = self.threads.get(&pid) else { return };
        let si = th.space;
        if self.debug && matches!(sig, Signal::SIGSEGV | Signal::SIGBUS | Signal::SIGILL | Signal::SIGTRAP) {
            self.debug_fault(pid, sig, &regs);
        }
        let Some(th) = self.threads.get(&pid) else { return };
        if th.step != StepKind::None {
            self.step(pid, Some(sig));
            return;
        }
        let sp = &mut self.spaces[si];
        if !sp.active() || sp.stepping || matches!(sig, Signal::SIGKILL | Signal::SIGSTOP) {
            self.cont(pid, Some(sig));
            return;
        }
        // Interrupted inside a system call: the thread is not at rip. It resumes at the
        // `syscall` again (rip - 2) when the kernel restarts the call, or in the handler, or
        // after the call with -EINTR; the kernel decides after the step, so nothing is
        // counted or taken out here and the step is judged from where the call sits.
        if sys::restarted_syscall(&regs).is_some() {
            self.step_into_signal(pid, sig, regs.rip.wrapping_sub(2), regs.rsp);
            return;
        }
        let pc = regs.rip;
        let counted = sp.bps.get(&pc).is_some_and(|b| b.installed);
        if sp.threads > 1 && counted {
            // Another thread may pass `pc` meanwhile: the breakpoint stays. The signal is
            // delivered with a step; where the step lands tells whether a handler runs.
            self.step_into_signal(pid, sig, pc, regs.rsp);
            return;
        }
        sp.uninstall(pc);
        if let Some(th) = self.threads.get_mut(&pid) {
            th.step = StepKind::Signal {
                old_pc: pc,
                old_rsp: regs.rsp,
                counted,
            };
        }
        self.step(pid, Some(sig));
    }

    fn resolve_rep(&mut self, pid: Pid, regs: &libc::user_regs_struct) {
        let Some(th) = self.threads.get_mut(&pid) else { return };
        if let Some((insn, rcx, func)) = th.pending_rep.take() {
            let iters = rcx.wrapping_sub(regs.rcx).min(rcx);
            let mut t = Tally::default();
            t.add_string(&insn, iters);
            self.add(pid, &t, 1, &func);
        }
    }

    /// Work `t` done `n` times by `pid`, at one source site.
    fn add(&mut self, pid: Pid, t: &Tally, n: u64, site: &Rc<Site>) {
        if n == 0 {
            return;
        }
        self.add_totals(pid, t, n);
        if self.by_function {
            self.attribute(site, t, n);
        }
    }

    /// A block run `n` times (`masks`: its masked instructions' opmasks, or none where it has
    /// none or they are not known): totals, and per source site under `--by-function`.
    fn add_block(&mut self, pid: Pid, block: &Block, masks: &[Option<u64>], n: u64) {
        if n == 0 {
            return;
        }
        let once = dynamic_tally(block, masks);
        self.add_totals(pid, &block.stat, n);
        self.add_totals(pid, &once, n);
        if self.by_function {
            if block.sites.is_empty() {
                self.attribute(&block.site, &block.stat, n);
                self.attribute(&block.site, &once, n);
                return;
            }
            for (site, t) in &block.sites {
                self.attribute(site, t, n);
            }
            for ((idx, _), m) in block.masked.iter().zip(masks.iter()) {
                let mut t = Tally::default();
                t.add_insn(&block.insns[*idx], *m);
                let site = &block.sites[usize::from(block.insn_site[*idx])].0;
                self.attribute(site, &t, n);
            }
        }
    }

    fn add_totals(&mut self, pid: Pid, t: &Tally, n: u64) {
        self.total.add_scaled(t, n);
        if let Some(th) = self.threads.get(&pid)
            && let Some(s) = self.stats.per_thread.get_mut(th.index)
        {
            s.instructions += t.instructions * n;
            s.flops += t.flops_total() * n;
            s.core_bytes += (t.core_load + t.core_store) * n;
        }
    }

    fn attribute(&mut self, site: &Rc<Site>, t: &Tally, n: u64) {
        self.per_site
            .entry(Rc::as_ptr(site))
            .or_insert_with(|| (site.clone(), Tally::default()))
            .1
            .add_scaled(t, n);
    }

    fn xstate(&self, pid: Pid) -> Option<Vec<u8>> {
        sys::get_xstate(pid, self.xsave.size)
    }

    /// Count one instruction executed by single-stepping (and feed its addresses to the sink).
    fn count_one(&mut self, pid: Pid, si: usize, pc: u64, regs: &libc::user_regs_struct) {
        self.step_one(pid, si, pc, regs, true);
    }

    /// One single-stepped instruction: counted (`count`) and its addresses fed to the sink.
    fn step_one(&mut self, pid: Pid, si: usize, pc: u64, regs: &libc::user_regs_struct, count: bool) {
        let insn = self.spaces[si].insn_at(pc, &mut self.factory);
        let func = if self.by_function {
            self.spaces[si].site_of(pc)
        } else {
            self.no_site.clone()
        };
        let shaped = insn.tile.is_some_and(|t| t.shaped());
        if matches!(insn.tile, Some(TileOp::Load { .. } | TileOp::Store { .. })) {
            if self.tile_restart == Some((pid, pc)) {
                // Resuming after a restartable event: already counted (and fed) in full.
                self.tile_restart = None;
                self.stats.tile_restarts += 1;
                if let Some(th) = self.threads.get_mut(&pid) {
                    th.stepped_tile = Some(pc);
                }
                return;
            }
            if let Some(th) = self.threads.get_mut(&pid) {
                th.stepped_tile = Some(pc);
            }
        }
        let need_x = insn.mask.is_some() || shaped || (self.sink.is_some() && insn.mem.iter().any(|m| m.used.index().is_vector_register()));
        let xs = if need_x { self.xstate(pid) } else { None };
        let mask = insn.mask.and_then(|k| xs.as_ref().and_then(|x| self.xsave.opmask(x, k)));
        let tiles = if shaped {
            xs.as_ref().and_then(|x| self.xsave.tile_config(x))
        } else {
            None
        };
        if count {
            let mut t = Tally::default();
            t.add_insn(&insn, mask);
            t.add_tile(&insn, tiles.as_ref());
            if let Some(s) = insn.string {
                if s.rep {
                    if let Some(th) = self.threads.get_mut(&pid) {
                        th.pending_rep = Some((insn.clone(), regs.rcx, func.clone()));
                    }
                } else {
                    t.add_string(&insn, 1);
                }
            }
            self.add(pid, &t, 1, &func);
        }
        if self.sink.is_some() {
            let tid = self.sink_id(pid);
            let xsave = self.xsave;
            let xs = xs.as_deref();
            let mut reg = |r: Register, elem: usize, esize: usize| -> Option<u64> {
                if r.is_vector_register() {
                    let v = xsave.vector(xs?, r.number());
                    let o = elem * esize;
                    let b = v.get(o..o + esize)?;
                    return Some(if esize == 4 {
                        u32::from_le_bytes(b.try_into().ok()?) as u64
                    } else {
                        u64::from_le_bytes(b.try_into().ok()?)
                    });
                }
                match r {
                    Register::FS => Some(regs.fs_base),
                    Register::GS => Some(regs.gs_base),
                    Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
                    Register::RIP => Some(insn.next()),
                    _ => reg_value(regs, r).map(|v| if r.is_gpr32() { v & 0xffff_ffff } else { v }),
                }
            };
            let mut out = Vec::new();
            accesses_of(&insn, &mut reg, mask, true, &mut out);
            if let Some(cfg) = &tiles {
                tile_accesses(&insn, cfg, &mut reg, &mut out);
            }
            self.feed(tid, &out);
        }
    }

    /// Memory mode: the addresses of `trips` iterations of an affine single-block loop, in
    /// program order, from the registers at its entry (fed in chunks).
    fn replay_loop(
        &mut self,
        pid: Pid,
        block: &Block,
        strides: &[Stride],
        entry: &libc::user_regs_struct,
        masks: &[Option<u64>],
        trips: u64,
    ) {
        let tid = self.sink_id(pid);
        self.stats.replayed_loops += 1;
        let mut mask_of: Vec<Option<u64>> = vec![None; block.insns.len()];
        for ((idx, _), m) in block.masked.iter().zip(masks.iter()) {
            mask_of[*idx] = *m;
        }
        // The accesses of iteration `t`, from the registers at entry and the strides.
        let iteration = |t: u64, acc: &mut Vec<Access>| {
            for (idx, insn) in block.insns.iter().enumerate() {
                if insn.mem.is_empty() && !insn.prefetch {
                    continue;
                }
                let mut reg = |r: Register, _: usize, _: usize| -> Option<u64> {
                    match r {
                        Register::FS => Some(entry.fs_base),
                        Register::GS => Some(entry.gs_base),
                        Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
                        Register::RIP => Some(insn.next()),
                        _ => {
                            let full = full_gpr(r);
                            let s = strides.iter().find(|s| s.reg == full)?;
                            let base = reg_value(entry, full)?;
                            let k = t as i64 + i64::from(s.writer < idx);
                            let v = base.wrapping_add(s.stride.wrapping_mul(k) as u64);
                            let v = if s.width32 || r.is_gpr32() { v & 0xffff_ffff } else { v };
                            Some(v)
                        }
                    }
                };
                accesses_of(insn, &mut reg, mask_of[idx], true, acc);
            }
        };
        let mut acc: Vec<Access> = Vec::with_capacity(4096 + 64);
        if let Some(steps) = affine_steps(trips, &iteration) {
            // Each access moves by a constant per iteration (checked at four iterations, 32-bit
            // wrap-around included): the stream is generated by addition, without decoding
            // operands again (the decoding was most of the time of a long replay).
            let mut next: Vec<Access> = Vec::new();
            iteration(0, &mut next);
            for _ in 0..trips {
                // (Pushed one by one: `extend_from_slice` of a few accesses called `memcpy`.)
                for (a, d) in next.iter_mut().zip(&steps) {
                    acc.push(*a);
                    a.addr = a.addr.wrapping_add(*d);
                }
                if acc.len() >= 4096 {
                    self.feed(tid, &acc);
                    acc.clear();
                }
            }
        } else {
            for t in 0..trips {
                iteration(t, &mut acc);
                if acc.len() >= 4096 {
                    self.feed(tid, &acc);
                    acc.clear();
                }
            }
        }
        self.feed(tid, &acc);
    }

    /// Accesses of thread `tid` (a sink id) to the simulated hierarchy: directly while one
    /// thread is traced or every instruction is stepped (the observed order), else through
    /// the interleaving memory mode defines (`interleave.rs`).
    fn feed(&mut self, tid: usize, accesses: &[Access]) {
        let Some(sink) = self.sink.as_deref_mut() else { return };
        if self.mode == TraceMode::Memory && (self.sink_ids.len() > 1 || !self.interleave.is_empty()) {
            self.interleave.push(tid, accesses, sink, &mut asleep_in(&self.sink_ids));
            return;
        }
        for a in accesses {
            sink.access_by(tid, a.addr, a.size, a.kind);
        }
    }

    /// The counters now, for a region's window: the accesses threads have queued are fed to
    /// the cache simulator first (they ran before this instant).
    pub fn snapshot(&mut self) -> Snapshot {
        self.finish_feeding();
        Snapshot {
            total: self.total.clone(),
            levels: self.sink.as_deref().map(|s| s.bytes_so_far()).unwrap_or_default(),
            threads: self.stats.per_thread.iter().map(|t| (t.tid, t.instructions)).collect(),
        }
    }

    /// Feed every access still waiting for its turn (a thread ended, or the trace).
    fn finish_feeding(&mut self) {
        if let Some(sink) = self.sink.as_deref_mut() {
            self.interleave.finish(sink, &mut asleep_in(&self.sink_ids));
        }
    }

    /// The general registers at the `syscall` that ends `block`, emulated from `regs` at its
    /// entry (None where the block has nothing else or the emulator does not know them).
    fn regs_at_syscall(&mut self, pid: Pid, si: usize, block: &Block, regs: &libc::user_regs_struct) -> Option<[Option<u64>; 16]> {
        let (_, body) = block.insns.split_last()?;
        let mut emu = self.emulator(pid, si, regs);
        for insn in body {
            emu.step(&insn.instr, &mut self.factory);
        }
        Some(emu.gprs())
    }

    /// Memory mode without stepping: the effective addresses of a block, in program order,
    /// from the registers at its entry through the emulator (`emu.rs`, exact or unknown).
    /// None when one cannot be computed (the caller steps through the block instead).
    fn block_accesses(
        &mut self,
        pid: Pid,
        si: usize,
        block: &Block,
        masks: &[Option<u64>],
        regs: &libc::user_regs_struct,
    ) -> Option<Vec<Access>> {
        if block.rep {
            return rep_accesses(block, regs);
        }
        let seed = self.vector_seed(pid);
        let mut emu = self.emulator(pid, si, regs).with_vectors(seed);
        let mut out = Vec::new();
        let mut masked = block.masked.iter().zip(masks.iter());
        let mut next_masked = masked.next();
        for (idx, insn) in block.insns.iter().enumerate() {
            let mask = match next_masked {
                Some(((i, _), m)) if *i == idx => {
                    let m = *m;
                    next_masked = masked.next();
                    Some(m?)
                }
                _ => None,
            };
            if !emulated_accesses_masked(&emu, insn, mask, regs, &mut out) {
                return None;
            }
            if idx + 1 < block.insns.len() {
                emu.step(&insn.instr, &mut self.factory);
            }
        }
        Some(out)
    }

    fn on_step(&mut self, pid: Pid, step: StepKind, mut regs: libc::user_regs_struct) {
        let Some(si) = self.threads.get(&pid).map(|t| t.space) else {
            return;
        };
        if let Some(t) = self.threads.get_mut(&pid) {
            t.step = StepKind::None;
        }
        let pc = regs.rip;
        match step {
            StepKind::None => self.cont(pid, None),
            StepKind::Over { counting } => {
                let sp = &self.spaces[si];
                if sp.active() && (sp.stepping || !counting) {
                    // Counting started (or single-stepping did) while it stepped over a
                    // breakpoint outside counting: it joins here.
                    self.arrive(pid, pc, regs);
                } else {
                    self.cont(pid, None);
                }
            }
            StepKind::Displaced { orig, then } => {
                let stub = self.spaces[si].xol.stub(orig).flatten();
                match stub {
                    Some(stub) if pc == stub.back => {
                        // Fell through: on at the next original instruction.
                        self.move_rip(pid, &mut regs, stub.resume);
                    }
                    Some(stub) if pc >= stub.at && pc < stub.end => {
                        // Still inside the copy (a call's push sequence).
                        self.set_step(pid, StepKind::Displaced { orig, then });
                        self.step(pid, None);
                        return;
                    }
                    _ => {}
                }
                self.on_step(pid, then.step_kind(), regs);
            }
            StepKind::Through { start, end } => {
                if pc > start && pc < end {
                    self.count_one(pid, si, pc, &regs);
                    self.step_on(pid, si, pc, regs, Then::Through { start, end });
                } else {
                    self.arrive(pid, pc, regs);
                }
            }
            StepKind::Feed { start, end } => {
                if pc > start && pc < end {
                    self.step_one(pid, si, pc, &regs, false);
                    self.step_on(pid, si, pc, regs, Then::Feed { start, end });
                } else {
                    self.arrive(pid, pc, regs);
                }
            }
            StepKind::Single => self.arrive(pid, pc, regs),
            StepKind::Signal { old_pc, old_rsp, counted } => {
                let handler = regs.rsp < old_rsp.wrapping_sub(128);
                if counted {
                    self.spaces[si].install(old_pc);
                }
                if handler {
                    self.arrive(pid, pc, regs);
                } else if counted {
                    // The instruction at a block start ran during the step: count it alone,
                    // and the rest of its block as a block of its own.
                    let before = libc::user_regs_struct { rip: old_pc, ..regs };
                    self.count_one(pid, si, old_pc, &before);
                    self.arrive(pid, pc, regs);
                } else if pc == old_pc.wrapping_add(1) && self.spaces[si].bps.get(&old_pc).is_some_and(|b| b.installed) {
                    // No handler, and the step ran our breakpoint (left in for other threads):
                    // the thread is at that block start.
                    self.move_rip(pid, &mut regs, old_pc);
                    self.on_bp(pid, old_pc, regs);
                } else {
                    self.cont(pid, None);
                }
            }
        }
    }

    /// Single-step `pid` at `pc` (its instruction already accounted for), on as `then` says.
    /// A block stepped through may hold a breakpoint installed after the block was entered
    /// (another thread found a jump into its middle): that one is passed, never executed.
    fn step_on(&mut self, pid: Pid, si: usize, pc: u64, regs: libc::user_regs_struct, then: Then) {
        if self.spaces[si].bps.get(&pc).is_some_and(|b| b.installed) {
            self.pass_bp(pid, si, pc, regs, Some(then));
        } else {
            self.set_step(pid, then.step_kind());
            self.step(pid, None);
        }
    }

    /// A step stopped one byte past one of our armed breakpoints and the kernel reports an
    /// `int3` (`SI_KERNEL`), not a completed step (`TRAP_TRACE`): the thread ran our `int3`
    /// instead of the instruction under it. That happens when, after the thread was told to
    /// step there, the stop of another thread of the space armed the breakpoint (one tracer,
    /// threads that run while it works). Returns the address the thread is really at.
    fn stepped_into_bp(&self, pid: Pid, si: usize, regs: &libc::user_regs_struct) -> Option<u64> {
        let at = regs.rip.wrapping_sub(1);
        if !self.spaces[si].bps.get(&at).is_some_and(|b| b.armed) {
            return None;
        }
        let info = ptrace::getsiginfo(pid).ok()?;
        (info.si_code == libc::SI_KERNEL).then_some(at)
    }

    /// Let `pid`, at `pc` where one of our breakpoints is installed (its instruction already
    /// accounted for by the caller), go on without taking the breakpoint out: through the
    /// instruction's displaced copy. `then`: None to run natively, else single-step on as it says.
    /// With one thread in the space, or when no copy can be made, the breakpoint is stepped
    /// over the classic way (a window other threads could pass uncounted: recorded and noted).
    fn pass_bp(&mut self, pid: Pid, si: usize, pc: u64, mut regs: libc::user_regs_struct, then: Option<Then>) {
        // A lone thread passing a breakpoint while counting runs the displaced copy too: the
        // breakpoint stays in, and the step (a stop) and the two writes that take it out and
        // put it back are saved. (Passing outside counting keeps the step: `StepKind::Over`
        // looks at the state after it, and counting may have started meanwhile.)
        let sp = &self.spaces[si];
        let lone_counting = sp.threads <= 1 && then.is_none() && sp.active() && !sp.stepping;
        if (sp.threads > 1 || lone_counting)
            && let Some(stub) = self.stub_for(pid, si, pc)
        {
            self.stats.displaced += 1;
            self.move_rip(pid, &mut regs, stub.at);
            match then {
                None => self.cont(pid, None),
                Some(then) => {
                    self.set_step(pid, StepKind::Displaced { orig: pc, then });
                    self.step(pid, None);
                }
            }
            return;
        }
        if self.spaces[si].threads > 1 {
            self.stats.racy_passes += 1;
            if self.stats.racy_at.len() < 8 && !self.stats.racy_at.contains(&pc) {
                self.stats.racy_at.push(pc);
            }
        }
        let counting = self.spaces[si].active();
        self.spaces[si].uninstall(pc);
        if let Some(t) = self.threads.get_mut(&pid) {
            t.reinstall.push(pc);
        }
        let kind = match then {
            None => StepKind::Over { counting },
            Some(t) => t.step_kind(),
        };
        self.set_step(pid, kind);
        self.step(pid, None);
    }

    /// The displaced copy of the instruction at `pc`, made on first use (a scratch area mapped
    /// in the tracee near `pc` when none is within reach). None when it cannot be made.
    fn stub_for(&mut self, pid: Pid, si: usize, pc: u64) -> Option<Stub> {
        if let Some(s) = self.spaces[si].xol.stub(pc) {
            return s;
        }
        let insn = self.spaces[si].insn_at(pc, &mut self.factory);
        let made = self
            .place(pid, si, pc, xol::STUB_MAX, |at| xol::encode_stub(&insn.instr, at))
            .map(|(at, len, back)| Stub {
                at,
                back: at + back,
                end: at + len,
                resume: insn.instr.next_ip(),
            });
        self.spaces[si].xol.set_stub(pc, made);
        made
    }

    /// Encode something at a reserved place near `near` and write it into the tracee:
    /// (address, length, the encoder's offset).
    fn place(
        &mut self,
        pid: Pid,
        si: usize,
        near: u64,
        room: u64,
        encode: impl Fn(u64) -> Option<(Vec<u8>, u64)>,
    ) -> Option<(u64, u64, u64)> {
        let at = match self.spaces[si].xol.reserve(near, room) {
            Some(a) => a,
            None => {
                if !self.map_area(pid, si, near) {
                    return None;
                }
                self.spaces[si].xol.reserve(near, room)?
            }
        };
        let (bytes, off) = encode(at)?;
        if bytes.len() as u64 > room {
            return None;
        }
        // Slots are handed out once and never reused, moved or freed (a thread may sit in
        // any copy, blocked in a system call, for as long as it likes): the slot must still
        // be blank, as the anonymous mapping made it.
        let mut was = vec![0u8; bytes.len()];
        if self.spaces[si].mem.read(at, &mut was) != was.len() || was.iter().any(|b| *b != 0) {
            self.stats.scratch_overwrites += 1;
            return None;
        }
        if !self.spaces[si].mem.write(at, &bytes) {
            return None;
        }
        Some((at, bytes.len() as u64, off))
    }

    /// Map a scratch area (read + execute, private, anonymous) in the tracee within reach of
    /// `near`, by running mmap in the stopped thread `pid`.
    fn map_area(&mut self, pid: Pid, si: usize, near: u64) -> bool {
        if self.spaces[si].xol.area_failed_near(near) {
            return false;
        }
        let ok_at = |mem: &sys::Memory, a: u64| {
            let mut b = [0u8; 2];
            mem.read(a, &mut b) == 2 && b == [0x0f, 0x05]
        };
        let sc = match self.spaces[si].xol.syscall_at {
            Some(a) if ok_at(&self.spaces[si].mem, a) => Some(a),
            _ => {
                let leader = self.spaces[si].leader;
                let a = sys::find_syscall_insn(leader, &self.spaces[si].mem);
                self.spaces[si].xol.syscall_at = a;
                a
            }
        };
        if let Some(sc) = sc {
            const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
            let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64 | MAP_FIXED_NOREPLACE;
            let prot = (libc::PROT_READ | libc::PROT_EXEC) as u64;
            for hint in Xol::hints(near) {
                self.flush_all();
                let (r, seen) = sys::inject_syscall(pid, sc, libc::SYS_mmap as u64, [hint, xol::AREA_SIZE, prot, flags, u64::MAX, 0]);
                self.requeue(pid, seen);
                let Some(r) = r else { break };
                if (r as i64) < 0 && (r as i64) > -4096 {
                    continue; // EEXIST (taken) or a kernel without NOREPLACE: next hint
                }
                if r.abs_diff(near) < xol::REACH {
                    self.spaces[si].xol.add_area(r);
                    return true;
                }
            }
        }
        self.spaces[si].xol.area_failed(near);
        false
    }

    /// Wait statuses seen while a system call was injected: exits are handled later, signals
    /// are sent again (they had not been delivered).
    fn requeue(&mut self, pid: Pid, seen: Vec<WaitStatus>) {
        for st in seen {
            match st {
                WaitStatus::Stopped(_, sig) => {
                    if let Some(th) = self.threads.get(&pid) {
                        let leader = self.spaces[th.space].leader;
                        sys::tgkill(leader, pid, sig);
                    }
                }
                other => self.deferred.push_back(other),
            }
        }
    }

    fn set_step(&mut self, pid: Pid, s: StepKind) {
        if let Some(t) = self.threads.get_mut(&pid) {
            t.step = s;
        }
    }

    /// The thread is about to execute `pc` (not through an int3): treat it as reaching a breakpoint there.
    fn arrive(&mut self, pid: Pid, pc: u64, regs: libc::user_regs_struct) {
        self.on_bp(pid, pc, regs);
    }

    /// The thread is about to execute `pc`, which may carry a breakpoint.
    fn on_bp(&mut self, pid: Pid, pc: u64, regs: libc::user_regs_struct) {
        let Some(si) = self.threads.get(&pid).map(|t| t.space) else {
            return;
        };
        // 1. The exit of a natively run loop.
        let native = self.threads.get(&pid).and_then(|t| t.native.clone());
        if let Some(nat) = native
            && nat.exit == pc
        {
            if let Some(t) = self.threads.get_mut(&pid) {
                t.native = None;
            }
            self.finish_loop(pid, si, &nat, &regs);
        }
        let bp = self.spaces[si].bps.get(&pc).copied().unwrap_or_default();
        let was_active = self.spaces[si].active();
        // 2. Entry point and region markers.
        if bp.entry {
            let sp = &mut self.spaces[si];
            sp.entered = true;
            if let Some(b) = sp.bps.get_mut(&pc) {
                b.entry = false;
            }
            if !sp.markers_known {
                sp.markers_known = true;
                let begin = sp.syms.lookup("roofline_region_begin");
                let end = sp.syms.lookup("roofline_region_end");
                if let (Some(b), Some(e)) = (begin, end) {
                    // The region API's markers: counting stays on for the whole run (its
                    // point counts every instruction, as perf does); each name's window is
                    // the difference of two snapshots (`regions.rs`). Only the forked
                    // child's markers bound counting itself (`region_mode`).
                    sp.named_markers = true;
                    sp.bps.entry(b).or_default().begin = true;
                    sp.bps.entry(e).or_default().end = true;
                    sp.install(b);
                    sp.install(e);
                }
            }
            if self.mode.single_steps() {
                sp.stepping = true;
            }
        }
        if bp.begin {
            if self.spaces[si].named_markers {
                let name = self.spaces[si].mem.read_cstr(regs.rdi);
                let now = self.regions.opens(&name).then(|| self.snapshot());
                self.regions.begin(&name, now);
            }
            let sp = &mut self.spaces[si];
            sp.depth += 1;
        }
        if bp.end {
            if self.spaces[si].named_markers {
                let name = self.spaces[si].mem.read_cstr(regs.rdi);
                let now = self.regions.closes(&name).then(|| self.snapshot());
                self.regions.end(&name, now.as_ref());
            }
            let sp = &mut self.spaces[si];
            sp.depth = (sp.depth - 1).max(0);
            if !sp.active() && !sp.stepping {
                sp.uninstall_blocks(true);
            }
        }
        let active = self.spaces[si].active();
        if active && !was_active {
            // Every thread of the space counts from now on, wherever it stands.
            self.bring_in_others(si, pid);
        } else if was_active && !active {
            self.let_others_go(si, pid);
        }
        let sp = &self.spaces[si];
        let stepping = sp.stepping;
        let installed = sp.bps.get(&pc).is_some_and(|b| b.installed);
        if active && stepping {
            // Single-step mode: count this instruction, step it (a sticky breakpoint stays).
            self.count_one(pid, si, pc, &regs);
            if installed {
                self.pass_bp(pid, si, pc, regs, Some(Then::Arrive));
            } else {
                self.set_step(pid, StepKind::Single);
                self.step(pid, None);
            }
            return;
        }
        if !active {
            if installed {
                if bp.sticky() {
                    self.pass_bp(pid, si, pc, regs, None);
                    return;
                }
                // A block breakpoint left from counting: not needed outside it.
                self.spaces[si].uninstall(pc);
            }
            self.cont(pid, None);
            return;
        }
        self.block_enter(pid, si, pc, regs, bp.sticky());
    }

    fn block_enter(&mut self, pid: Pid, si: usize, pc: u64, mut regs: libc::user_regs_struct, sticky: bool) {
        self.returns_from_call(pid, pc, regs.rax);
        if let Some(th) = self.threads.get(&pid)
            && let Some(s) = self.stats.per_thread.get_mut(th.index)
        {
            s.block_traps += 1;
        }
        let f = &mut self.factory;
        let sp = &mut self.spaces[si];
        let known = sp.blocks.contains_key(&pc);
        sp.mark_block_start(pc);
        let mut block = sp.block_at(pc, f);
        if !known {
            self.stats.blocks_decoded += 1;
        }
        for &s in &block.succ {
            sp.mark_block_start(s);
            sp.install(s);
        }
        // Return and indirect targets, read now.
        let mut targets = block.succ.clone();
        let mut unresolved = false;
        match block.exit {
            Exit::Static => {}
            Exit::Ret(at) => {
                let slot = match at {
                    RspAt::Rsp(d) => Some(regs.rsp.wrapping_add(d as u64)),
                    RspAt::Rbp(d) => Some(regs.rbp.wrapping_add(d as u64)),
                    RspAt::Unknown => None,
                };
                match slot.and_then(|a| sp.mem.read_u64(a)) {
                    Some(t) => targets.push(t),
                    None => unresolved = true,
                }
            }
            Exit::Indirect { at_entry } => {
                let last = block.insns.last().cloned();
                let target = last.filter(|_| at_entry).and_then(|l| {
                    let i = &l.instr;
                    match i.op0_kind() {
                        OpKind::Register => reg_value(&regs, i.op0_register()),
                        OpKind::Memory => {
                            let um = iced_x86::UsedMemory::new(
                                i.memory_segment(),
                                i.memory_base(),
                                i.memory_index(),
                                i.memory_index_scale(),
                                i.memory_displacement64(),
                                iced_x86::MemorySize::UInt64,
                                OpAccess::Read,
                            );
                            let a = um.virtual_address(0, |r, _, _| match r {
                                Register::FS => Some(regs.fs_base),
                                Register::GS => Some(regs.gs_base),
                                Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
                                _ => reg_value(&regs, r),
                            })?;
                            sp.mem.read_u64(a)
                        }
                        _ => None,
                    }
                });
                match target {
                    Some(t) => targets.push(t),
                    None => unresolved = true,
                }
            }
        }
        for &t in &targets[block.succ.len()..] {
            sp.mark_block_start(t);
            sp.install(t);
        }
        if !sp.blocks.contains_key(&pc) {
            block = sp.block_at(pc, f);
        }
        // An exit not computable from the registers at entry (a computed `goto` whose target
        // the block loads, a `ret` after the block moved rsp in a way not followed): the
        // run-ahead's emulator may compute it, from the same registers and memory, exactly or
        // not at all; the block is stepped through only where it does not.
        // A mask written inside the block: computed by the emulator where it can be.
        let Some(masks) = self.masks_at(pid, si, &block, &regs) else {
            let why = if block.emu_masks && self.mode == TraceMode::Flops {
                "masks unknown to the emulator"
            } else {
                "masks, tiles or a branch into an instruction"
            };
            self.step_through(pid, si, pc, &block, regs, why);
            return;
        };
        let emulate_exit = unresolved && !block.rep && !sticky;
        if unresolved && !emulate_exit {
            self.step_through(pid, si, pc, &block, regs, "exit unknown (rep, sticky)");
            return;
        }
        let sp = &mut self.spaces[si];
        // A counted single-block loop on a single thread: run it natively to its exit.
        let memory = self.mode == TraceMode::Memory;
        // Memory mode runs a loop natively only when its addresses can be replayed.
        let native_ok = !memory || block.affine.is_some();
        let replay = memory.then(|| Box::new(regs));
        if let Some(ind) = block.induction
            && !emulate_exit
            && native_ok
            && sp.threads <= 1
            && !sticky
            && let Some(entry) = reg_value(&regs, ind.reg)
        {
            sp.uninstall(pc);
            sp.install(block.end);
            self.stats.native_loops += 1;
            if let Some(t) = self.threads.get_mut(&pid) {
                t.native = Some(Native {
                    head: pc,
                    block: block.clone(),
                    exit: block.end,
                    ind,
                    entry,
                    masks,
                    regs: replay,
                });
            }
            self.cont(pid, None);
            return;
        }
        // The same with other threads in the space: the loop runs as a displaced copy (its head
        // breakpoint stays in for them), and its exit falls into a trap of the copy.
        if let Some(ind) = block.induction
            && !emulate_exit
            && native_ok
            && self.spaces[si].threads > 1
            && !sticky
            && let Some(entry) = reg_value(&regs, ind.reg)
            && let Some(lc) = self.loop_for(pid, si, &block)
        {
            self.stats.native_loops += 1;
            if let Some(th) = self.threads.get(&pid)
                && let Some(s) = self.stats.per_thread.get_mut(th.index)
            {
                s.native_loops += 1;
            }
            if let Some(t) = self.threads.get_mut(&pid) {
                t.native = Some(Native {
                    head: pc,
                    block: block.clone(),
                    exit: lc.exit_trap,
                    ind,
                    entry,
                    masks,
                    regs: replay,
                });
            }
            self.move_rip(pid, &mut regs, lc.at);
            self.cont(pid, None);
            return;
        }
        let mut masks = masks;
        // Run ahead: the blocks this thread will certainly run next (static single successors,
        // and branches, returns and indirect jumps whose outcome the emulator computes from the
        // registers and memory now, through as many loop iterations as it can decide) are
        // counted at this trap, their breakpoints left out, so only the path's exits trap. In
        // memory mode the emulator also gives every address on the path.
        let feed = memory && self.sink.is_some();
        let mut path_accesses: Option<Vec<Access>> = None;
        let eligible = !block.rep && (!memory || (feed && block.masked.is_empty())) && !sticky;
        let alone = eligible && (self.spaces[si].threads <= 1 || (self.hold_worth_trying(si, pc) && self.hold_others(si, pid)));
        let ra = if alone { self.run_ahead(pid, si, pc, &regs, feed) } else { None };
        if !alone {
            self.stats.path_end(if !eligible {
                "none: not eligible (rep, sticky, memory mode masks)"
            } else {
                "none: other threads not held"
            });
        }
        // Only a hold this thread made is this trap's: a thread of another process (a forked
        // child) traps while its parent's hold lasts, and must neither end that hold nor hand
        // it its breakpoints (they would go back in when the holder has not passed them, and
        // into the wrong process).
        let my_hold = self.hold.as_ref().is_some_and(|h| h.holder == pid);
        if my_hold {
            // Worth the stops of the other threads only where a path runs far.
            let members = ra.as_ref().map_or(0, |r| r.members.len());
            let skip = &mut self.spaces[si].hold_skip;
            if members < 4 {
                let e = skip.entry(pc).or_insert((0, 0));
                e.1 = (e.1 + 1).min(8);
                e.0 = 8 << e.1;
            } else {
                skip.remove(&pc);
            }
            if ra.is_some() {
                self.stats.held_paths += 1;
            } else {
                self.release_hold();
            }
        }
        if emulate_exit && ra.is_none() {
            // The emulator could not compute the exit either: step through.
            self.step_through(pid, si, pc, &block, regs, "exit unknown to the emulator");
            return;
        }
        // Whether the blocks counted at this trap end in a system call.
        let mut path_ends_in_stop = None;
        // Where they do: the registers at its `syscall` (the path's emulator has them), and
        // the address after it.
        let mut path_call: Option<(Option<[Option<u64>; 16]>, u64)> = None;
        if let Some(ra) = ra {
            let last = ra.members.last().unwrap_or(&ra.first);
            path_ends_in_stop = Some(ends_in_stop(last));
            path_call = path_ends_in_stop.filter(|e| *e).map(|_| (ra.call_regs, last.end));
            let sp = &mut self.spaces[si];
            for &t in &ra.keep {
                sp.install(t);
            }
            // Each member counted once per occurrence on the path.
            let mut times: FastMap<(Rc<Block>, u64)> = FastMap::default();
            // (Masked members each with the masks of their occurrence.)
            let mut masked: Vec<(&Rc<Block>, &[Option<u64>])> = Vec::new();
            for (b, m) in ra.members.iter().zip(ra.member_masks.iter()) {
                if b.masked.is_empty() {
                    times.entry(b.start).or_insert_with(|| (b.clone(), 0)).1 += 1;
                } else {
                    masked.push((b, m));
                    times.entry(b.start).or_insert_with(|| (b.clone(), 0));
                }
            }
            for (start, _) in times.values() {
                sp.uninstall(start.start);
                if let Some(h) = self.hold.as_mut().filter(|_| my_hold) {
                    h.reinstall.push(start.start);
                }
            }
            for (b, n) in times.values() {
                self.add_block(pid, b, &[], *n);
            }
            for (b, m) in masked {
                self.add_block(pid, b, m, 1);
            }
            self.stats.run_ahead_blocks += ra.members.len() as u64;
            let first = ra.first;
            if !Rc::ptr_eq(&first, &block) {
                block = first;
                masks = self.masks_at(pid, si, &block, &regs).unwrap_or_else(|| self.masks_for(pid, &block));
            }
            if feed {
                self.stats.emulated_blocks += ra.members.len() as u64;
                path_accesses = ra.accesses;
            }
            // The path's exits replace the block's own successors (those not taken are
            // still installed: harmless).
            targets = ra.keep;
            if let Some(t) = self.threads.get_mut(&pid) {
                t.expect = (!ra.exit_unknown).then(|| targets.clone());
                t.expect_regs = ra.exit_regs.filter(|_| !ra.exit_unknown).map(Box::new);
                t.expect_path = (pc, ra.members.len(), ra.members.last().map_or(block.start, |b| b.start));
            }
        }
        if !self.spaces[si].blocks.get(&pc).is_some_and(|b| Rc::ptr_eq(b, &block)) {
            // Installing successors split this block: count what is left of it.
            block = self.spaces[si].block_at(pc, &mut self.factory);
            masks = self.masks_at(pid, si, &block, &regs).unwrap_or_else(|| self.masks_for(pid, &block));
            for &t in &block.succ {
                self.spaces[si].install(t);
            }
            if !block.succ.iter().all(|t| targets.contains(t)) {
                targets.extend(block.succ.iter().copied());
            }
            if let Some(t) = self.threads.get_mut(&pid) {
                t.expect = None;
                t.expect_regs = None;
            }
        }
        self.add_block(pid, &block, &masks, 1);
        let func = block.site.clone();
        if let Some(acc) = path_accesses {
            let tid = self.sink_id(pid);
            self.feed(tid, &acc);
            self.stats.emulated_blocks += 1;
        } else if feed {
            match self.block_accesses(pid, si, &block, &masks, &regs) {
                Some(acc) => {
                    let tid = self.sink_id(pid);
                    self.feed(tid, &acc);
                    self.stats.emulated_blocks += 1;
                }
                None => {
                    // Addresses not computable at entry: step through the block feeding each
                    // instruction's (its W is counted above).
                    self.stats.fed_by_steps += 1;
                    if block.rep
                        && let Some(insn) = block.insns.first()
                        && let Some(t) = self.threads.get_mut(&pid)
                    {
                        t.pending_rep = Some((insn.clone(), regs.rcx, func.clone()));
                    }
                    let (start, end) = (block.start, block.end);
                    self.step_one(pid, si, pc, &regs, false);
                    self.step_block(pid, si, pc, regs, Then::Feed { start, end });
                    return;
                }
            }
        }
        if feed && path_ends_in_stop.unwrap_or_else(|| ends_in_stop(&block)) {
            // A `futex` wait or wake, a `read`: how the thread's clock goes on after it
            // (`interleave.rs`).
            let (gprs, back) = match path_call {
                Some(c) => c,
                None => (self.regs_at_syscall(pid, si, &block, &regs), block.end),
            };
            let call = gprs.map_or(Call::Other, |r| Call::from_regs(r[0], r[7], r[6]));
            self.enters_call(pid, call, back);
        }
        if block.rep
            && let Some(insn) = block.insns.first()
            && let Some(t) = self.threads.get_mut(&pid)
        {
            t.pending_rep = Some((insn.clone(), regs.rcx, func.clone()));
        }
        let sp = &mut self.spaces[si];
        let installed = sp.bps.get(&pc).is_some_and(|b| b.installed);
        if let Some(h) = self.hold.as_mut().filter(|_| my_hold)
            && !targets.contains(&pc)
            && !sticky
        {
            // The other threads are held: as alone, the breakpoint is left out (back in when
            // the hold ends).
            sp.uninstall(pc);
            h.reinstall.push(pc);
            self.cont(pid, None);
        } else if sp.threads > 1 {
            // Other threads must keep trapping here: the breakpoint stays.
            // Not installed (reached by a step): put it in first and pass it too. Let run
            // from an address without one, the thread could meet one that another thread's
            // stop arms before this thread has run, and count the block twice.
            if !installed {
                sp.mark_block_start(pc);
                sp.install(pc);
            }
            if let Some(t) = self.threads.get_mut(&pid) {
                t.counted = Some((block.start, block.end));
            }
            self.pass_bp(pid, si, pc, regs, None);
        } else if !targets.contains(&pc) && !sticky {
            // Leave our own breakpoint out until a predecessor puts it back.
            sp.uninstall(pc);
            self.cont(pid, None);
        } else {
            self.stats.step_overs += 1;
            if self.debug {
                eprintln!("step-over at {pc:#x} ({}) targets {targets:x?}", block.site.function);
            }
            self.pass_bp(pid, si, pc, regs, None);
        }
    }

    /// Count the first instruction of `block` (at `pc`) and single-step `pid` through the block,
    /// one instruction at a time (masks read before each); `why` goes to the per-cause figures.
    fn step_through(&mut self, pid: Pid, si: usize, pc: u64, block: &Block, regs: libc::user_regs_struct, why: &'static str) {
        self.stats.step_throughs += 1;
        *self.stats.step_through_causes.entry(why).or_insert(0) += 1;
        if self.debug {
            eprintln!("step-through at {pc:#x} ({}): {why}", block.site.function);
        }
        let (start, end) = (block.start, block.end);
        self.count_one(pid, si, pc, &regs);
        self.step_block(pid, si, pc, regs, Then::Through { start, end });
    }

    /// Single-step `pid` through the block at `pc` (its first instruction handled by the caller)
    /// as `then` says: past an installed breakpoint through its displaced copy when other
    /// threads share the text; alone, with the breakpoint left out until a predecessor puts it back.
    fn step_block(&mut self, pid: Pid, si: usize, pc: u64, regs: libc::user_regs_struct, then: Then) {
        let installed = self.spaces[si].bps.get(&pc).is_some_and(|b| b.installed);
        if self.spaces[si].threads > 1 && installed {
            self.pass_bp(pid, si, pc, regs, Some(then));
            return;
        }
        self.spaces[si].uninstall(pc);
        self.set_step(pid, then.step_kind());
        self.step(pid, None);
    }

    /// The displaced copy of the single-block loop `block`, made on first use.
    fn loop_for(&mut self, pid: Pid, si: usize, block: &Block) -> Option<xol::LoopCopy> {
        if let Some(l) = self.spaces[si].xol.loop_copy(block.start) {
            return l;
        }
        let insns: Vec<iced_x86::Instruction> = block.insns.iter().map(|i| i.instr).collect();
        let room = (block.end - block.start) * 2 + 64;
        let made = self
            .place(pid, si, block.start, room, |at| xol::encode_loop(&insns, at))
            .map(|(at, _, off)| xol::LoopCopy { at, exit_trap: at + off });
        self.spaces[si].xol.set_loop(block.start, made);
        made
    }

    /// The opmask values `block`'s masked instructions will run with, from the thread at the
    /// block's entry (`regs`): read at entry, or, for a block that writes a mask before using
    /// it (glibc's `*_evex` string functions: `kmovd k1, ecx` then a masked load), computed by
    /// the emulator from the entry state (flops mode). None: the block must be stepped.
    fn masks_at(&mut self, pid: Pid, si: usize, block: &Block, regs: &libc::user_regs_struct) -> Option<Vec<Option<u64>>> {
        if !block.needs_step {
            return Some(self.masks_for(pid, block));
        }
        if !block.emu_masks || self.mode != TraceMode::Flops {
            return None;
        }
        let seed = self.vector_seed(pid);
        let mut emu = self.emulator(pid, si, regs).with_vectors(seed.clone());
        let masks = emulate_masks(&mut emu, block, &mut self.factory);
        if seed.was_read() {
            self.stats.xstate_reads += 1;
        }
        masks
    }

    /// Opmask values of a block's masked instructions, read at its entry.
    fn masks_for(&self, pid: Pid, block: &Block) -> Vec<Option<u64>> {
        if block.masked.iter().any(|(_, s)| matches!(s, MaskSrc::Entry(_))) {
            let xs = self.xstate(pid);
            block
                .masked
                .iter()
                .map(|(_, s)| match s {
                    MaskSrc::Entry(k) => xs.as_ref().and_then(|x| self.xsave.opmask(x, *k)),
                    MaskSrc::Const(v) => Some(*v),
                    MaskSrc::Dynamic => None,
                })
                .collect()
        } else {
            block
                .masked
                .iter()
                .map(|(_, s)| match s {
                    MaskSrc::Const(v) => Some(*v),
                    _ => None,
                })
                .collect()
        }
    }

    /// The vector registers of stopped thread `pid`, read from its XSAVE state only if an
    /// emulation asks for them.
    fn vector_seed(&self, pid: Pid) -> Rc<VectorSeed> {
        let layout = self.xsave;
        VectorSeed::new(layout, Box::new(move || sys::get_xstate(pid, layout.size)))
    }

    /// The path from the block at `pc` (trapped, registers `regs`): the block as it is now, the
    /// blocks after it the thread will certainly run, in order and with repeats (a loop whose
    /// branches the emulator decides runs all its iterations here), and the addresses control
    /// leaves the path to (their breakpoints must be installed). With `want_accesses` (memory
    /// mode) also the addresses of every instruction on the path, in program order; the path
    /// ends before a block whose addresses the emulator cannot compute. None when the blocks
    /// keep being split by new block starts, or when the first block's addresses are unknown.
    ///
    /// Exactness: a path member's breakpoint is left out, so the thread runs the path without
    /// trapping; nothing on the path may be an exit (a member whose start is an exit would trap
    /// mid-path), so a path whose exit is one of its own members is cut before that member's
    /// first occurrence. Successors the path does not take are installed too (a safety net:
    /// the emulator decided they are not taken), and the registers the emulator expects at the
    /// exit are checked when the thread traps there (`Thread::expect_regs`).
    fn run_ahead(&mut self, pid: Pid, si: usize, pc: u64, regs: &libc::user_regs_struct, want_accesses: bool) -> Option<RunAhead> {
        // (One XSAVE read at most for every round's emulation.)
        let seed = self.vector_seed(pid);
        let rseq = self.rseq_of(pid);
        let ra = self.run_ahead_from(&seed, rseq.as_slice(), si, pc, regs, want_accesses);
        if seed.was_read() {
            self.stats.xstate_reads += 1;
        }
        ra
    }

    fn run_ahead_from(
        &mut self,
        seed: &Rc<VectorSeed>,
        volatile: &[(u64, u64)],
        si: usize,
        pc: u64,
        regs: &libc::user_regs_struct,
        want_accesses: bool,
    ) -> Option<RunAhead> {
        // A path is emulated in one go (2²⁰ instructions by default); long loops come back for
        // more at their next trap.
        let max_path_insns = self.path_insns;
        // A path inside a loop of several blocks can be committed past the loop's first
        // iteration only if it leaves the loop (an exit inside the loop is one of its own
        // members, so the path would be cut back to before it): there it goes on to 16× that
        // (2²⁴: about 1 s of emulation, 50 MB of path) before it gives up...
        let max_loop_path_insns = max_path_insns << 4;
        // ...or, in memory mode, to this many accesses (16 bytes each).
        const MAX_LOOP_PATH_ACCESSES: usize = 1 << 22;
        // Registers at the start of the last few path blocks (to know the state at an earlier exit).
        const SNAPSHOTS: usize = 8;
        // Iterations of a counted loop emulated before it is left to run natively instead.
        const NATIVE_AFTER: u64 = 64;
        // A full emulation that commits less than 1/4 of what it emulated (plus this) is wasted.
        const WASTE_SLACK: u64 = 4096;
        let mut limit = usize::MAX;
        // The longer limit once per trap address until a full emulation from it is committed
        // (an endless loop, or one waiting for another thread, would waste it at every trap).
        let may_extend = !self.spaces[si].short_paths.contains_key(&pc);
        let short = match self.spaces[si].short_paths.get_mut(&pc) {
            Some((left, _)) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        };
        let mut emulated = 0u64;
        let held = self.hold.is_some();
        // (No thread of the space runs during these rounds, and nothing is written to it.)
        let pages = crate::counters::trace::emu::PageCache::default();
        for _round in 0..8 {
            let f = &mut self.factory;
            let sp = &mut self.spaces[si];
            let mut emu = Emu::new(regs, sp.mem.clone())
                .with_volatile(volatile)
                .with_vectors(seed.clone())
                .with_page_cache(pages.clone());
            let first = sp.block_at(pc, f);
            let mut seq: Vec<Rc<Block>> = vec![first];
            // The next address after each path block, where known.
            let mut nexts: Vec<Option<u64>> = Vec::new();
            let mut accesses: Vec<Access> = Vec::new();
            // `accesses.len()` after each path block.
            let mut acc_ends: Vec<usize> = Vec::new();
            // Flops mode: the opmask values of each path block's masked instructions, read
            // from the emulator before each (what `add_block` counts the block with).
            let mut seq_masks: Vec<Vec<Option<u64>>> = Vec::new();
            let mut snapshots: std::collections::VecDeque<[Option<u64>; 16]> = std::collections::VecDeque::new();
            let mut exit_regs: Option<[Option<u64>; 16]> = None;
            let mut call_regs: Option<[Option<u64>; 16]> = None;
            let mut insns = 0u64;
            // Consecutive executions of the last block (a single-block loop's iterations).
            let mut repeats = 1u64;
            let mut on_path: FastSet = FastSet::default();
            let mut cut = false;
            // A new block start that splits a decoded block may split one on the path: the
            // round is emulated again with the blocks decoded anew. (A new start that splits
            // nothing changes no block: code seen for the first time is emulated once.)
            let mut new_marks = false;
            // Why the path ended (the per-cause figures in `extra.trace.path_ends`).
            let mut why: &'static str = "empty block";
            let mut mark = |sp: &mut Space, a: u64| {
                new_marks |= sp.mark_block_start(a);
            };
            loop {
                let b = seq.last().cloned()?;
                if snapshots.len() == SNAPSHOTS {
                    snapshots.pop_front();
                }
                snapshots.push_back(emu.gprs());
                let Some((last, body)) = b.insns.split_last() else { break };
                // With the other threads held, a system call could wait for one of them
                // forever: the path ends before it.
                let mut known = !(held && last.flow == Flow::Stop);
                // (Not for the trapped block: `block_enter` counts it with its own masks.)
                let track = !want_accesses && seq.len() > 1 && !b.masked.is_empty();
                let mut bmasks: Vec<Option<u64>> = Vec::new();
                let mut mask_unknown = false;
                for (idx, insn) in body.iter().enumerate() {
                    if want_accesses && !emulated_accesses(&emu, insn, regs, &mut accesses) {
                        known = false;
                        break;
                    }
                    if track && b.masked.get(bmasks.len()).is_some_and(|m| m.0 == idx) {
                        match insn.mask.and_then(|k| emu.opmask(k)) {
                            Some(v) => bmasks.push(Some(v)),
                            None => {
                                known = false;
                                mask_unknown = true;
                                break;
                            }
                        }
                    }
                    emu.step(&insn.instr, f);
                }
                if known && want_accesses && !emulated_accesses(&emu, last, regs, &mut accesses) {
                    known = false;
                }
                if known && track && b.masked.get(bmasks.len()).is_some_and(|m| m.0 == body.len()) {
                    match last.mask.and_then(|k| emu.opmask(k)) {
                        Some(v) => bmasks.push(Some(v)),
                        None => {
                            known = false;
                            mask_unknown = true;
                        }
                    }
                }
                if known && track && bmasks.len() != b.masked.len() {
                    known = false;
                    mask_unknown = true;
                }
                if !known {
                    why = if mask_unknown {
                        "masks unknown"
                    } else if held && last.flow == Flow::Stop {
                        "system call while others held"
                    } else {
                        "addresses unknown"
                    };
                    // The path ends before this block (it traps and is fed another way).
                    if seq.len() == 1 {
                        self.stats.path_end(why);
                        return None;
                    }
                    seq.pop();
                    accesses.truncate(acc_ends.last().copied().unwrap_or(0));
                    exit_regs = snapshots.pop_back();
                    break;
                }
                acc_ends.push(accesses.len());
                seq_masks.push(bmasks);
                insns += b.insns.len() as u64;
                let next = match last.flow {
                    Flow::Next => {
                        emu.step(&last.instr, f);
                        Some(b.end)
                    }
                    Flow::Stop => {
                        // (A syscall: the registers after it are the kernel's; the emulator
                        // forgets them all.)
                        call_regs = Some(emu.gprs());
                        emu.step(&last.instr, f);
                        None
                    }
                    Flow::Jump(t) => Some(t),
                    Flow::Call(t) => {
                        emu.step(&last.instr, f);
                        Some(t)
                    }
                    Flow::CondJump(t) => emu.taken(&last.instr).map(|tk| if tk { t } else { b.end }),
                    Flow::Return | Flow::IndirectJump | Flow::IndirectCall => emu.dynamic_target(&last.instr),
                };
                if b.succ_marked.get() != sp.uid {
                    for &s in &b.succ {
                        mark(sp, s);
                    }
                    b.succ_marked.set(sp.uid);
                }
                if let Some(n) = next.filter(|n| !b.succ.contains(n)) {
                    mark(sp, n);
                }
                nexts.push(next);
                exit_regs = Some(emu.gprs());
                let Some(n) = next else {
                    why = match last.flow {
                        Flow::Stop => "system call",
                        Flow::CondJump(_) => "branch unknown",
                        Flow::Return => "return target unknown",
                        _ => "indirect target unknown",
                    };
                    break;
                };
                if seq.len() >= limit {
                    why = "cut back (an exit that is a member, or a counted loop left to run natively)";
                    break;
                }
                if sp.bps.get(&n).is_some_and(|x| x.sticky()) {
                    why = "sticky breakpoint";
                    break;
                }
                if insns >= max_path_insns {
                    let in_loop = n == pc || on_path.contains(&n);
                    // (A block that jumps to itself unconditionally never leaves.)
                    let endless = n == b.start && matches!(last.flow, Flow::Jump(_));
                    if !may_extend || !in_loop || endless || insns >= max_loop_path_insns || accesses.len() >= MAX_LOOP_PATH_ACCESSES {
                        why = "length limit";
                        break;
                    }
                }
                let nb = sp.block_at(n, f);
                // (Flops mode follows masked blocks, their masks computed as they are emulated.)
                let masks_ok = !want_accesses && (!nb.needs_step || nb.emu_masks);
                if nb.rep || ((nb.needs_step || !nb.masked.is_empty()) && !masks_ok) {
                    why = if nb.rep {
                        "next block: rep string instruction"
                    } else if nb.needs_step {
                        "next block: stepped (masks, tiles)"
                    } else {
                        "next block: masked"
                    };
                    break;
                }
                // (After wasted emulations from here: stop where a loop of several blocks
                // comes round, where the path would be cut back to anyway.)
                let repeated = !on_path.insert(nb.start);
                // (A counted single-block loop goes on to be cut out for native execution.)
                if short && repeated && !(Rc::ptr_eq(&nb, &b) && nb.induction.is_some()) {
                    why = "short path (back-off after wasted emulation)";
                    break;
                }
                // A counted loop is emulated while short; one that can run natively (every
                // counted loop in flops mode, affine ones in memory mode) and goes on past
                // `NATIVE_AFTER` iterations is cut out of the path, to run natively from its trap.
                if Rc::ptr_eq(&nb, &b) {
                    repeats += 1;
                    if nb.induction.is_some() && (!want_accesses || nb.affine.is_some()) && repeats >= NATIVE_AFTER {
                        let run_start = seq.len() - repeats as usize;
                        if run_start > 0 {
                            limit = run_start;
                            cut = true;
                        }
                        why = "counted loop left to run natively";
                        break;
                    }
                } else {
                    repeats = 1;
                }
                seq.push(nb);
            }
            emulated += insns;
            self.stats.emulated_instructions += insns;
            self.stats.emulator_page_reads += emu.page_reads;
            if new_marks || cut {
                continue;
            }
            if self.debug {
                let b = seq.last().cloned()?;
                let why = match (nexts.len() == seq.len(), nexts.last().copied().flatten()) {
                    (false, _) => "addresses unknown".to_string(),
                    (true, None) => format!(
                        "{:?} unknown, last unmodelled {:x?}",
                        b.insns.last().map(|l| l.instr.mnemonic()),
                        emu.last_generic
                    ),
                    (true, Some(n)) => format!("next {n:#x} not joined ({} insns)", insns),
                };
                eprintln!("path from {pc:#x}: {} blocks, ends after {:#x}: {why}", seq.len(), b.start);
            }
            // A member whose exit is dynamic and unknown cannot end the path: nothing would trap after it.
            while seq.len() > 1 && nexts[seq.len() - 1].is_none() && seq.last().is_some_and(|b| b.exit != Exit::Static) {
                seq.pop();
                exit_regs = snapshots.pop_back();
            }
            nexts.truncate(seq.len());
            accesses.truncate(acc_ends.get(seq.len() - 1).copied().unwrap_or(0));
            let members: FastSet = seq[1..].iter().map(|b| b.start).collect();
            let last = seq.len() - 1;
            let exits: Vec<u64> = match nexts[last] {
                Some(n) => vec![n],
                None => seq[last].succ.clone(),
            };
            // An exit that is also a member would trap at the member's earlier occurrence, in
            // the middle of the path. End the path instead before its last block that occurs in
            // it for the first time (that block's start becomes the only exit, and is no member
            // of what is left; a function called twice on the path no longer ends it at the
            // first call) and emulate again.
            if seq.iter().skip(1).any(|b| exits.contains(&b.start)) {
                let mut seen = FastSet::default();
                let cut = (1..seq.len()).filter(|&k| seen.insert(seq[k].start)).last().unwrap_or(1);
                if self.debug {
                    let b = seq.last().cloned()?;
                    eprintln!(
                        "path from {pc:#x}: cut at {cut} of {} blocks (exits {exits:x?}; last {:#x} {:?}, last unmodelled {:x?})",
                        seq.len(),
                        b.start,
                        b.insns.last().map(|l| l.instr.mnemonic()),
                        emu.last_generic
                    );
                }
                limit = cut;
                continue;
            }
            let mut keep = exits;
            // (A set beside the list: a long path's untaken successors number in the hundreds.)
            let mut kept: FastSet = keep.iter().copied().collect();
            for (k, b) in seq.iter().enumerate() {
                let following = seq.get(k + 1).map(|x| x.start);
                // (A followed call's fall-through is reached only by a return, which traps or
                // is itself on the path.)
                if matches!(b.insns.last().map(|l| l.flow), Some(Flow::Call(t)) if Some(t) == following) {
                    continue;
                }
                for &s in &b.succ {
                    // (Not the trapped block itself: its breakpoint would have to stay in and
                    // be stepped over, two stops where one does; a predecessor reinstalls it.)
                    if Some(s) != following && s != pc && !members.contains(&s) && kept.insert(s) {
                        keep.push(s);
                    }
                }
            }
            if !short {
                let committed: u64 = seq.iter().map(|b| b.insns.len() as u64).sum();
                let sp = &mut self.spaces[si];
                if emulated > 4 * committed + WASTE_SLACK {
                    let e = sp.short_paths.entry(pc).or_insert((0, 0));
                    e.1 = (e.1 + 1).min(10);
                    e.0 = 4 << e.1;
                } else {
                    sp.short_paths.remove(&pc);
                }
            }
            let first = seq.remove(0);
            seq_masks.resize(seq.len() + 1, Vec::new());
            seq_masks.remove(0);
            self.stats.path_end(why);
            if seq.is_empty() {
                self.stats.path_end("(of these: no block beyond the trapped one)");
            }
            if seq.is_empty() && first.exit != Exit::Static && nexts[0].is_none() {
                // The first block's dynamic target was read at entry already.
                return None;
            }
            let exit_unknown = ends_in_sigreturn(seq.last().unwrap_or(&first));
            let call_regs = call_regs.filter(|_| ends_in_stop(seq.last().unwrap_or(&first)));
            return Some(RunAhead {
                call_regs,
                first,
                members: seq,
                member_masks: seq_masks,
                keep,
                accesses: want_accesses.then_some(accesses),
                exit_regs,
                exit_unknown,
            });
        }
        None
    }

    fn finish_loop(&mut self, pid: Pid, si: usize, nat: &Native, regs: &libc::user_regs_struct) {
        let sp = &mut self.spaces[si];
        sp.install(nat.head);
        let block = nat.block.clone();
        let now = reg_value(regs, nat.ind.reg).unwrap_or(nat.entry);
        let (diff, stride) = if nat.ind.stride > 0 {
            (now.wrapping_sub(nat.entry), nat.ind.stride as u64)
        } else {
            (nat.entry.wrapping_sub(now), nat.ind.stride.unsigned_abs())
        };
        let diff = if nat.ind.width32 { diff & 0xffff_ffff } else { diff };
        if diff % stride != 0 {
            self.stats.loop_count_errors += 1;
        }
        let trips = diff / stride;
        self.add_block(pid, &block, &nat.masks, trips);
        if let Some(entry) = &nat.regs
            && let Some(strides) = &block.affine
            && self.sink.is_some()
        {
            self.replay_loop(pid, &block, strides, entry, &nat.masks, trips);
        }
    }

    /// How the traced program ended, once it has.
    pub fn ending(&self) -> Option<Ending> {
        self.ending
    }
}

/// A run-ahead path whose exit registers differed from the emulator's prediction.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExitStateDetail {
    /// The exit the thread trapped at (one the path expected).
    pub at: u64,
    /// The trap the path was emulated from.
    pub from: u64,
    /// Blocks on the path.
    pub blocks: usize,
    /// The path's last block.
    pub last: u64,
    /// (register, predicted, actual) of each register that differs.
    pub differing: Vec<(&'static str, u64, u64)>,
}

const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
];

fn gpr_values(regs: &libc::user_regs_struct) -> [u64; 16] {
    [
        regs.rax, regs.rcx, regs.rdx, regs.rbx, regs.rsp, regs.rbp, regs.rsi, regs.rdi, regs.r8, regs.r9, regs.r10, regs.r11, regs.r12,
        regs.r13, regs.r14, regs.r15,
    ]
}

fn regs_differing(expected: &[Option<u64>; 16], regs: &libc::user_regs_struct) -> Vec<(&'static str, u64, u64)> {
    expected
        .iter()
        .zip(gpr_values(regs))
        .zip(GPR_NAMES)
        .filter_map(|((e, a), name)| e.filter(|e| *e != a).map(|e| (name, e, a)))
        .collect()
}

/// Whether the registers at a trap agree with every register the emulator knew for it.
fn regs_agree(expected: &[Option<u64>; 16], regs: &libc::user_regs_struct) -> bool {
    expected.iter().zip(gpr_values(regs)).all(|(e, a)| e.is_none_or(|e| e == a))
}

/// The accesses of `insn` with the addresses from the emulator's registers before it executes
/// (segment bases from the trap's registers); false when one cannot be computed.
fn emulated_accesses(emu: &Emu, insn: &Insn, trap: &libc::user_regs_struct, out: &mut Vec<Access>) -> bool {
    emulated_accesses_masked(emu, insn, None, trap, out)
}

fn emulated_accesses_masked(emu: &Emu, insn: &Insn, mask: Option<u64>, trap: &libc::user_regs_struct, out: &mut Vec<Access>) -> bool {
    if insn.mem.is_empty() && insn.string.is_none() && !insn.prefetch {
        return true;
    }
    let mut reg = |r: Register, _elem: usize, _esize: usize| -> Option<u64> {
        if r.is_vector_register() {
            return None;
        }
        match r {
            Register::FS => Some(trap.fs_base),
            Register::GS => Some(trap.gs_base),
            Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
            Register::RIP => Some(insn.next()),
            _ => emu.reg(r),
        }
    };
    accesses_of(insn, &mut reg, mask, false, out)
}

/// The accesses of a `rep movs`/`rep stos` block from the registers at its entry: exactly rcx
/// iterations (a signal may interrupt it; it resumes where it was), rsi/rdi advancing by the
/// element size, backwards when the direction flag is set. None for `repe/repne cmps/scas`
/// (they stop on a comparison) and for more than 16 M elements.
fn rep_accesses(block: &Block, regs: &libc::user_regs_struct) -> Option<Vec<Access>> {
    let insn = block.insns.first()?;
    let s = insn.string?;
    let i = &insn.instr;
    let fixed = matches!(
        i.mnemonic(),
        Mnemonic::Movsb
            | Mnemonic::Movsw
            | Mnemonic::Movsd
            | Mnemonic::Movsq
            | Mnemonic::Stosb
            | Mnemonic::Stosw
            | Mnemonic::Stosd
            | Mnemonic::Stosq
    );
    if !fixed || i.has_repne_prefix() || s.elem == 0 {
        return None;
    }
    // An address-size prefix (67h) makes rcx/rsi/rdi 32-bit: rare, left to stepping.
    if (0..i.op_count()).any(|o| matches!(i.op_kind(o), OpKind::MemoryESEDI | OpKind::MemorySegESI)) {
        return None;
    }
    let count = regs.rcx;
    if count > 1 << 24 {
        return None;
    }
    let step = if regs.eflags >> 10 & 1 == 1 {
        -i64::from(s.elem)
    } else {
        i64::from(s.elem)
    };
    let mut out = Vec::with_capacity((count as usize) * ((s.loads > 0) as usize + (s.stores > 0) as usize));
    for k in 0..count as i64 {
        let d = (k * step) as u64;
        if s.loads > 0 {
            out.push(Access {
                addr: regs.rsi.wrapping_add(d),
                size: s.elem,
                kind: AccessKind::Load,
            });
        }
        if s.stores > 0 {
            out.push(Access {
                addr: regs.rdi.wrapping_add(d),
                size: s.elem,
                kind: AccessKind::Store,
            });
        }
    }
    Some(out)
}

/// The rows a tile load or store moves: one access of `colsb` bytes per row from `start_row`
/// on, row r at base + displacement + r × stride (the index register times the scale).
fn tile_accesses(insn: &Insn, cfg: &TileConfig, reg: &mut dyn FnMut(Register, usize, usize) -> Option<u64>, out: &mut Vec<Access>) {
    let (tile, kind) = match insn.tile {
        Some(TileOp::Load { tile, .. }) => (tile, AccessKind::Load),
        Some(TileOp::Store { tile, .. }) => (tile, AccessKind::Store),
        _ => return,
    };
    let i = &insn.instr;
    let base = iced_x86::UsedMemory::new(
        i.memory_segment(),
        i.memory_base(),
        Register::None,
        1,
        i.memory_displacement64(),
        iced_x86::MemorySize::UInt8,
        OpAccess::Read,
    )
    .virtual_address(0, &mut *reg);
    let stride = match i.memory_index() {
        Register::None => Some(0),
        r => reg(r, 0, 0).map(|v| v.wrapping_mul(u64::from(i.memory_index_scale()))),
    };
    let (Some(base), Some(stride)) = (base, stride) else { return };
    let (rows, colsb) = cfg.shape(tile);
    for r in u64::from(cfg.start_row)..rows {
        out.push(Access {
            addr: base.wrapping_add(r.wrapping_mul(stride)),
            size: colsb as u32,
            kind,
        });
    }
}

/// The accesses of `insn` in program order, addresses from `reg` (a register's value, or a
/// vector register's element `elem` of `esize` bytes), per active element where a mask
/// applies. With `lenient`, an address that cannot be computed is left out (single-stepping
/// always has the registers); otherwise it makes the answer false.
fn accesses_of(
    insn: &Insn,
    reg: &mut dyn FnMut(Register, usize, usize) -> Option<u64>,
    mask: Option<u64>,
    lenient: bool,
    out: &mut Vec<Access>,
) -> bool {
    let push = |a: Option<u64>, size: u32, kind: AccessKind, out: &mut Vec<Access>| -> bool {
        match a {
            Some(addr) => {
                out.push(Access { addr, size, kind });
                true
            }
            None => lenient,
        }
    };
    for m in &insn.mem {
        let kind = if m.nt {
            AccessKind::NtStore
        } else if m.store {
            AccessKind::Store
        } else {
            AccessKind::Load
        };
        if m.used.index().is_vector_register() {
            for e in 0..m.elems {
                if m.per_mask_element && mask.is_some_and(|k| k >> e & 1 == 0) {
                    continue;
                }
                let a = m.used.virtual_address(e as usize, &mut *reg);
                if !push(a, m.elem, kind, out) {
                    return false;
                }
            }
        } else {
            let a = m.used.virtual_address(0, &mut *reg);
            if m.per_mask_element {
                if a.is_none() && !lenient {
                    return false;
                }
                for e in 0..m.elems {
                    if mask.is_none_or(|k| k >> e & 1 == 1) {
                        push(a.map(|a| a + u64::from(e * m.elem)), m.elem, kind, out);
                    }
                }
            } else {
                if m.load && m.store && !push(a, m.elem * m.elems, AccessKind::Load, out) {
                    return false;
                }
                if !push(a, m.elem * m.elems, kind, out) {
                    return false;
                }
            }
        }
    }
    if let Some(s) = insn.string {
        if s.rep && !lenient {
            return false;
        }
        if s.loads > 0 && !push(reg(Register::RSI, 0, 8), s.elem, AccessKind::Load, out) {
            return false;
        }
        if s.stores > 0 && !push(reg(Register::RDI, 0, 8), s.elem, AccessKind::Store, out) {
            return false;
        }
    }
    if insn.prefetch {
        let used = iced_x86::UsedMemory::new(
            insn.instr.memory_segment(),
            insn.instr.memory_base(),
            insn.instr.memory_index(),
            insn.instr.memory_index_scale(),
            insn.instr.memory_displacement64(),
            iced_x86::MemorySize::UInt8,
            OpAccess::Read,
        );
        if !push(used.virtual_address(0, &mut *reg), 64, AccessKind::Prefetch, out) {
            return false;
        }
    }
    true
}

/// Emulate `block` from `emu`'s state up to its last masked instruction, reading each masked
/// instruction's opmask just before it: the masks it runs with, or None where one is unknown.
/// (The emulator is exact or unknown, and the thread runs the block from the same state.)
fn emulate_masks(emu: &mut Emu, block: &Block, f: &mut InstructionInfoFactory) -> Option<Vec<Option<u64>>> {
    let mut out = Vec::with_capacity(block.masked.len());
    let mut next = 0usize;
    for &(idx, _) in &block.masked {
        while next < idx {
            emu.step(&block.insns.get(next)?.instr, f);
            next += 1;
        }
        let insn = block.insns.get(idx)?;
        out.push(Some(emu.opmask(insn.mask?)?));
    }
    Some(out)
}

/// The masked instructions of one block execution.
fn dynamic_tally(block: &Block, masks: &[Option<u64>]) -> Tally {
    let mut t = Tally::default();
    for ((idx, _), m) in block.masked.iter().zip(masks.iter()) {
        t.add_insn(&block.insns[*idx], *m);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_steps_only_where_every_iteration_is_on_the_line() {
        let mut next = crate::util::xorshift(0x853c_49e6_748f_ea9b);
        for _ in 0..200 {
            let trips = 4 + next() % 5000;
            let n = 1 + (next() % 4) as usize;
            let bases: Vec<u64> = (0..n).map(|_| next() >> 8).collect();
            let strides: Vec<i64> = (0..n).map(|_| (next() % 129) as i64 - 64).collect();
            let access = |i: usize, t: u64| Access {
                addr: bases[i].wrapping_add((strides[i] * t as i64) as u64),
                size: 8 << (i % 3),
                kind: if i == 0 { AccessKind::Store } else { AccessKind::Load },
            };
            let linear = |t: u64, v: &mut Vec<Access>| v.extend((0..n).map(|i| access(i, t)));
            let steps = affine_steps(trips, &linear).expect("a linear stream");
            // The generated stream equals the general one at every iteration.
            let mut at: Vec<Access> = (0..n).map(|i| access(i, 0)).collect();
            for t in 0..trips {
                let mut want = Vec::new();
                linear(t, &mut want);
                assert_eq!(at, want, "iteration {t}");
                for (a, d) in at.iter_mut().zip(&steps) {
                    a.addr = a.addr.wrapping_add(*d);
                }
            }
            // A 32-bit index register that wraps somewhere in the loop: not affine.
            let wrap_at = 1 + next() % (trips - 1);
            let start = 0x1_0000_0000u64 - wrap_at * 8;
            let wrapped = |t: u64, v: &mut Vec<Access>| {
                linear(t, v);
                v[0].addr = 0x7f00_0000_0000 + ((start + 8 * t) & 0xffff_ffff);
            };
            assert!(affine_steps(trips, &wrapped).is_none(), "wrap at {wrap_at} of {trips}");
            // A masked access that appears only in some iterations: not affine.
            let gone = trips / 2 + next() % (trips - trips / 2);
            let varying = |t: u64, v: &mut Vec<Access>| {
                linear(t, v);
                if t >= gone {
                    v.pop();
                }
            };
            assert!(affine_steps(trips, &varying).is_none(), "access gone from {gone} of {trips}");
        }
        assert!(affine_steps(3, &|_, v: &mut Vec<Access>| v.clear()).is_none());
    }

    fn block_of(bytes: &[u8]) -> Block {
        let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
        let mut f = InstructionInfoFactory::new();
        let mut v = Vec::new();
        while d.can_decode() {
            let i = d.decode();
            v.push(Rc::new(classify(&i, &mut f, false)));
        }
        build_block(0x1000, v, site("f", None), Vec::new(), &mut f)
    }

    fn site(function: &str, line: Option<&str>) -> Rc<Site> {
        Rc::new(Site {
            line: line.map(Rc::from),
            ..Site::symbol(Rc::from(function))
        })
    }

    /// `--by-function`: a block's tally split by source site adds up to the block's, and
    /// instructions of one site in a row are one group.
    #[test]
    fn sites_split_a_block_exactly() {
        // vaddpd ymm0,ymm0,[rdi+rax*8]; vmulpd ymm1,ymm1,[rsi+rax*8]; add rax,4; cmp rax,rsi; jb
        let bytes = [
            0xc5, 0xfd, 0x58, 0x04, 0xc7, 0xc5, 0xf5, 0x59, 0x0c, 0xc6, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xec,
        ];
        let mut d = Decoder::with_ip(64, &bytes, 0x1000, DecoderOptions::NONE);
        let mut f = InstructionInfoFactory::new();
        let mut v = Vec::new();
        while d.can_decode() {
            v.push(Rc::new(classify(&d.decode(), &mut f, false)));
        }
        let (a, b) = (site("closure", Some("src/main.rs:37")), site("helper", Some("mod.rs:470")));
        let per_insn = vec![a.clone(), b.clone(), b.clone(), a.clone(), a.clone()];
        let block = build_block(0x1000, v, a.clone(), per_insn, &mut f);
        assert_eq!(block.sites.len(), 3, "a, b b, a a");
        assert_eq!(block.insn_site, [0, 1, 1, 2, 2]);
        let mut sum = Tally::default();
        for (_, t) in &block.sites {
            sum.add_scaled(t, 1);
        }
        assert_eq!(sum.instructions, block.stat.instructions);
        assert_eq!(sum.flops_total(), block.stat.flops_total());
        assert_eq!(sum.core_load + sum.core_store, block.stat.core_load + block.stat.core_store);
        assert_eq!((block.sites[0].1.flops_total(), block.sites[1].1.flops_total()), (4, 4));
        assert!(Rc::ptr_eq(&block.sites[1].0, &b));
    }

    #[test]
    fn counted_loop_induction_found() {
        // 1000: vaddpd ymm0, ymm0, [rdi+rax*8]; add rax, 4; cmp rax, rsi; jb 1000
        let b = block_of(&[0xc5, 0xfd, 0x58, 0x04, 0xc7, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xf2]);
        assert_eq!(b.succ, vec![0x1000, b.end]);
        let ind = b.induction.expect("induction");
        assert_eq!((ind.reg, ind.stride, ind.width32), (Register::RAX, 4, false));
        assert_eq!(b.stat.flops_total(), 4);
        assert_eq!(b.stat.core_load, 32);
    }

    #[test]
    fn loop_with_two_writers_is_not_counted_natively() {
        // 1000: add rax, 4; add rax, 1; cmp rax, rsi; jb 1000
        let b = block_of(&[0x48, 0x83, 0xc0, 0x04, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf0, 0x72, 0xf4]);
        assert!(b.induction.is_none());
    }

    #[test]
    fn ret_slot_tracks_pops_and_adds() {
        // add rsp, 8; pop rbx; ret
        let b = block_of(&[0x48, 0x83, 0xc4, 0x08, 0x5b, 0xc3]);
        assert_eq!(b.exit, Exit::Ret(RspAt::Rsp(16)));
        // leave; ret
        let b = block_of(&[0xc9, 0xc3]);
        assert_eq!(b.exit, Exit::Ret(RspAt::Rbp(8)));
    }

    #[test]
    fn dynamic_masks_need_stepping_constant_ones_do_not() {
        // kmovw k1, eax; vaddpd zmm0{k1}, zmm0, zmm1
        let b = block_of(&[0xc5, 0xf8, 0x92, 0xc8, 0x62, 0xf1, 0xfd, 0x49, 0x58, 0xc1]);
        assert!(b.needs_step);
        // kxnorw k1, k1, k1; vaddpd zmm0{k1}, zmm0, zmm1
        let b = block_of(&[0xc5, 0xf4, 0x46, 0xc9, 0x62, 0xf1, 0xfd, 0x49, 0x58, 0xc1]);
        assert!(!b.needs_step);
        assert_eq!(b.masked[0].1, MaskSrc::Const(0xffff));
        // vaddpd zmm0{k2}, zmm0, zmm1 with k2 from entry
        let b = block_of(&[0x62, 0xf1, 0xfd, 0x4a, 0x58, 0xc1]);
        assert_eq!(b.masked[0].1, MaskSrc::Entry(2));
        let t = dynamic_tally(&b, &[Some(0b1011)]);
        assert_eq!((t.flops_total(), t.effective), (8, 3));
        assert_eq!(crate::counters::trace::tally::active(0xff, 8), 8);
    }

    #[test]
    fn amx_blocks_are_stepped_vnni_loops_are_not() {
        // 1000: tileloadd tmm1, [rsi+rdx]; tdpbf16ps tmm0, tmm1, tmm2; add rsi, 64; cmp rsi, rdi; jb 1000
        let b = block_of(&[
            0xc4, 0xe2, 0x7b, 0x4b, 0x0c, 0x16, 0xc4, 0xe2, 0x6a, 0x5c, 0xc1, 0x48, 0x83, 0xc6, 0x40, 0x48, 0x39, 0xfe, 0x72, 0xec,
        ]);
        assert!(b.needs_step, "tile shapes are read at each tile instruction");
        assert!(b.induction.is_none());
        assert_eq!(b.stat.flops_total(), 0);
        // 1000: vpdpbusd zmm0, zmm1, zmm2; add rax, 4; cmp rax, rsi; jb 1000: a counted loop.
        let b = block_of(&[
            0x62, 0xf2, 0x75, 0x48, 0x50, 0xc2, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xf1,
        ]);
        assert!(!b.needs_step && b.induction.is_some());
        assert_eq!((b.stat.int_ops_total(), b.stat.flops_total()), (128, 0));
        // ldtilecfg alone changes shapes but does no shaped work: not stepped.
        let b = block_of(&[0xc4, 0xe2, 0x78, 0x49, 0x00, 0xc3]);
        assert!(!b.needs_step);
        assert_eq!(b.stat.core_load, 64);
    }
}
