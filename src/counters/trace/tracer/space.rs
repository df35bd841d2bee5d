//! An address space of the tracee: its code (read once per page, decoded once per
//! instruction and block), its breakpoints (wanted and armed) and what it knows of its functions
//! and source sites.

use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, Mnemonic, Register};
use nix::unistd::Pid;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::counters::trace::classify::{Flow, Insn, classify};
use crate::counters::trace::sources::{Site, Sources};
use crate::counters::trace::symbols::ProcessSymbols;
use crate::counters::trace::sys::Memory;
use crate::counters::trace::xol::Xol;

use super::block::{Block, MAX_BLOCK, build_block};
use super::cache_state::CodeCache;

pub(super) const INT3: u8 = 0xcc;

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Bp {
    pub(super) orig: u8,
    /// `orig` has been read from the tracee.
    pub(super) has_orig: bool,
    /// Wanted in: the tracer's view, changed freely while the tracee is stopped.
    pub(super) installed: bool,
    /// In the tracee's memory now: `Space::flush` makes it `installed` before any thread of the
    /// space runs (an install undone within one stop, as a run-ahead path's followed successor
    /// is, never costs a write).
    pub(super) armed: bool,
    pub(super) block: bool,
    pub(super) entry: bool,
    pub(super) begin: bool,
    pub(super) end: bool,
    /// Lies inside another instruction that may run (a branch over a `lock` prefix): never
    /// installed, its predecessor is stepped through instead (`Space::block_at`).
    pub(super) inside: bool,
}

impl Bp {
    pub(super) fn sticky(&self) -> bool {
        self.entry || self.begin || self.end
    }
}

/// Which sticky role a breakpoint takes (`Space::set_sticky`).
#[derive(Clone, Copy)]
pub(super) enum Sticky {
    Entry,
    Begin,
    End,
}

pub(super) struct Space {
    pub(super) leader: Pid,
    pub(super) mem: Rc<Memory>,
    pub(super) syms: ProcessSymbols,
    pub(super) insns: FastMap<Rc<Insn>>,
    /// Decoded blocks by start (looked up for every block a path runs through).
    pub(super) blocks: FastMap<Rc<Block>>,
    /// Their extents in address order, start to end: which block a new start splits.
    pub(super) block_ends: BTreeMap<u64, u64>,
    pub(super) bps: FastMap<Bp>,
    /// The tracee's code, by 4 KiB page, as it is without our breakpoints: read once, since
    /// code is not rewritten under us (`insns` caches its decoding on the same assumption).
    /// A program's first run decodes tens of thousands of instructions (the dynamic linker,
    /// libc's start-up): one read per page instead of one per instruction.
    pub(super) code_pages: FastMap<Rc<[u8; CODE_PAGE]>>,
    pub(super) funcs: FastMap<(Rc<str>, bool)>,
    pub(super) func_start: FastMap<(Rc<str>, u64)>,
    pub(super) missed_pages: FastSet,
    pub(super) threads: usize,
    pub(super) entered: bool,
    /// Count only while `depth > 0`: between the forked child's markers (`run_forked`). A
    /// command's named regions leave it off (the whole run is counted).
    pub(super) region_mode: bool,
    pub(super) depth: i64,
    /// Every instruction is single-stepped (memory and reference modes), not just blocks.
    pub(super) stepping: bool,
    pub(super) markers_known: bool,
    /// The markers are the region API's (`roofline_region_begin(name)`): their first
    /// argument names the region (the forked child's markers have none).
    pub(super) named_markers: bool,
    /// Scratch areas for displaced execution (threads pass breakpoints without removing them).
    pub(super) xol: Xol,
    /// Breakpoints whose wanted state changed since the last `flush`.
    pub(super) dirty: Vec<u64>,
    /// `--by-function`: DWARF readers (shared by every space of the run) and each
    /// instruction address's source site.
    pub(super) sources: Option<Rc<RefCell<Sources>>>,
    pub(super) site_cache: FastMap<Rc<Site>>,
    /// Trap addresses whose last full run-ahead was mostly thrown away (a long loop that
    /// ends inside itself: its path is cut back to before its repeated blocks), with how
    /// many more traps there emulate only to the first repeated block, and the back-off level.
    pub(super) short_paths: FastMap<(u32, u32)>,
    /// Trap addresses whose last run-ahead with the other threads held committed almost
    /// nothing: traps left there without holding, and the back-off level. (A hold costs a
    /// stop of every other thread; held at every trap of a tight loop, they would starve.)
    pub(super) hold_skip: FastMap<(u32, u32)>,
    /// Unique per space (`Block::succ_marked`).
    pub(super) uid: u64,
    /// Bumped whenever a decoded block is dropped (split by a new start): every block's
    /// `links` made before are stale.
    pub(super) block_gen: u64,
    /// Addresses whose breakpoint is sticky (entry point, region markers): a handful, looked
    /// up at every block a path runs into (the breakpoint map was a cache miss each time).
    pub(super) sticky_addrs: FastSet,
    /// Translations of hot blocks (`cache.rs`; flops mode).
    pub(super) cache: CodeCache,
}

impl Space {
    pub(super) fn new(pid: Pid) -> Space {
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
            cache: CodeCache::default(),
            dirty: Vec::new(),
            sources: None,
            site_cache: FastMap::default(),
            short_paths: FastMap::default(),
            hold_skip: FastMap::default(),
            block_gen: 0,
            sticky_addrs: FastSet::default(),
            uid: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
        }
    }

    /// A copy for a forked child: same code, same breakpoints (the child's memory is a copy).
    pub(super) fn fork_copy(&self, pid: Pid) -> Space {
        let mut s = Space::new(pid);
        s.insns = self.insns.clone();
        s.blocks = self.blocks.clone();
        s.block_ends = self.block_ends.clone();
        s.bps = self.bps.clone();
        s.sticky_addrs = self.sticky_addrs.clone();
        s.code_pages = self.code_pages.clone();
        s.funcs = self.funcs.clone();
        s.func_start = self.func_start.clone();
        s.entered = self.entered;
        s.region_mode = self.region_mode;
        s.depth = self.depth;
        s.markers_known = self.markers_known;
        s.named_markers = self.named_markers;
        s.xol = self.xol.clone();
        s.cache = self.cache.clone();
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
    pub(super) fn sync_memory_to_record(&mut self) {
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

    /// Code unmapped (`munmap`, `mremap` of `[lo, hi)`): what was read, decoded or put there
    /// goes with it. A library mapped there later is other code: Open MPI opens its components
    /// with `dlopen` and closes the unused ones, and the next component may land where one was.
    /// Kept, its stale blocks would be counted and its breakpoints' original bytes written into
    /// the new code. Returns whether anything was known there.
    pub(super) fn forget_code(&mut self, lo: u64, hi: u64) -> bool {
        if hi <= lo {
            return false;
        }
        let page = CODE_PAGE as u64;
        let (first, last) = (lo / page, (hi - 1) / page);
        let known = if last - first < self.code_pages.len() as u64 {
            (first..=last).any(|p| self.code_pages.contains_key(&p))
        } else {
            self.code_pages.keys().any(|p| (first..=last).contains(p))
        } || self.block_ends.range(..hi).next_back().is_some_and(|(_, end)| *end > lo);
        if !known {
            return false;
        }
        let outside = |a: &u64| *a < lo || *a >= hi;
        self.insns.retain(|a, _| outside(a));
        let apart = |a: u64, end: u64| (a < lo && end <= lo) || a >= hi;
        self.blocks.retain(|a, b| apart(*a, b.end));
        self.block_ends.retain(|a, end| apart(*a, *end));
        self.bps.retain(|a, _| outside(a));
        self.sticky_addrs.retain(outside);
        self.dirty.retain(outside);
        // Blocks' links to the next block may lead into the range: all made before are stale.
        self.block_gen += 1;
        self.code_pages.retain(|p, _| !(first..=last).contains(p));
        self.funcs.retain(|a, _| outside(a));
        self.func_start.retain(|a, _| outside(a));
        self.site_cache.retain(|a, _| outside(a));
        self.short_paths.retain(|a, _| outside(a));
        self.hold_skip.retain(|a, _| outside(a));
        self.missed_pages.retain(|p| !(lo >> 12..=(hi - 1) >> 12).contains(p));
        self.cache.forget(lo, hi);
        self.syms.forget_maps();
        true
    }

    pub(super) fn active(&self) -> bool {
        self.entered && (!self.region_mode || self.depth > 0)
    }

    pub(super) fn install(&mut self, addr: u64) {
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

    pub(super) fn uninstall(&mut self, addr: u64) {
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
    pub(super) fn flush(&mut self) {
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

    pub(super) fn uninstall_blocks(&mut self, keep_sticky: bool) {
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
    pub(super) fn mark_block_start(&mut self, addr: u64) -> bool {
        self.mark_block_start_splitting(addr).is_some()
    }

    /// `mark_block_start`, saying which decoded block it split (dropped): Some(None) where the
    /// split block was not in the map.
    pub(super) fn mark_block_start_splitting(&mut self, addr: u64) -> Option<Option<Rc<Block>>> {
        let bp = self.bps.entry(addr).or_default();
        if bp.block {
            // (Blocks are decoded up to a block start: none holds this one.)
            return None;
        }
        bp.block = true;
        let holder = self
            .block_ends
            .range(..addr)
            .next_back()
            .filter(|(_, end)| addr < **end)
            .map(|(s, _)| *s);
        let s = holder?;
        self.block_ends.remove(&s);
        self.block_gen += 1;
        Some(self.blocks.remove(&s))
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
    pub(super) fn function_of(&mut self, addr: u64) -> (Rc<str>, bool) {
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
            Some(f) => Rc::from(format!("{} ({})", crate::counters::trace::symbols::demangle(f), loc.module)),
            None => Rc::from(format!("[{}]", loc.module)),
        };
        self.funcs.insert(start, (name.clone(), frame));
        (name, frame)
    }

    /// The source site of the instruction at `addr`: the innermost frame of the program's own
    /// code through DWARF under `--by-function` (`sources.rs`), else the function's symbol.
    pub(super) fn site_of(&mut self, addr: u64) -> Rc<Site> {
        if let Some(s) = self.site_cache.get(&addr) {
            return s.clone();
        }
        let site = match self.sources.clone() {
            Some(src) => {
                let place = self.syms.place(addr);
                let mut src = src.borrow_mut();
                match place {
                    Some(p) => {
                        let symbol = p.symbol.as_deref().map(crate::counters::trace::symbols::demangle);
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

    pub(super) fn insn_at(&mut self, addr: u64, factory: &mut InstructionInfoFactory) -> Rc<Insn> {
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

    /// Give the breakpoint at `a` a sticky role (it is not installed here).
    pub(super) fn set_sticky(&mut self, a: u64, role: Sticky) {
        let bp = self.bps.entry(a).or_default();
        match role {
            Sticky::Entry => bp.entry = true,
            Sticky::Begin => bp.begin = true,
            Sticky::End => bp.end = true,
        }
        self.sticky_addrs.insert(a);
    }

    /// The entry point was reached: its breakpoint is sticky no more (unless it is a marker).
    pub(super) fn clear_entry(&mut self, a: u64) {
        if let Some(b) = self.bps.get_mut(&a) {
            b.entry = false;
            if !b.sticky() {
                self.sticky_addrs.remove(&a);
            }
        }
    }

    /// Whether the breakpoint at `a` is sticky (`Bp::sticky`).
    pub(super) fn is_sticky(&self, a: u64) -> bool {
        !self.sticky_addrs.is_empty() && self.sticky_addrs.contains(&a)
    }

    /// The block at `next` that a path reaches from `from`, if a path went there before and
    /// no block was split since (then `next` was marked as a block start already, and the
    /// block is the one `block_at` gives).
    pub(super) fn linked_block(&self, from: &Block, next: u64) -> Option<Rc<Block>> {
        if from.links_stamp.get() != (self.uid, self.block_gen) {
            return None;
        }
        from.links.borrow().iter().find(|(a, _)| *a == next).and_then(|(_, b)| b.upgrade())
    }

    /// `block_at(next)`, remembered in `from`'s links for the next path that goes there.
    pub(super) fn next_block(&mut self, from: &Block, next: u64, factory: &mut InstructionInfoFactory) -> Rc<Block> {
        let b = self.block_at(next, factory);
        let stamp = (self.uid, self.block_gen);
        let mut links = from.links.borrow_mut();
        if from.links_stamp.get() != stamp {
            links.clear();
            from.links_stamp.set(stamp);
        }
        // (Most blocks have one or two successors; an indirect jump's table is not kept whole.)
        if links.len() < 4 {
            links.push((next, Rc::downgrade(&b)));
        }
        b
    }

    pub(super) fn block_at(&mut self, pc: u64, factory: &mut InstructionInfoFactory) -> Rc<Block> {
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

pub(super) use crate::counters::trace::emu::{FastMap, FastSet};

/// Bytes of code read at once (`Space::code_pages`).
const CODE_PAGE: usize = 4096;
