//! The code cache, tracer side (flops mode; `ROOFLINE_TRACE_CACHE=K`, 2 unless set, 0 turns it
//! off): a block seen `K` times (at traps and on run-ahead paths) is translated (`cache_code.rs`) into a cache
//! area of the tracee, and a thread that traps at its start is sent into the translation
//! instead of being counted and run ahead. Translations run natively, chained to each other,
//! and count themselves (one counter per translation); the tracer sees the thread again only
//! at an exit stub (a target not translated yet, linked once it is) or at a lookup's miss.
//!
//! Counts: each translation's counter is read (`flush_cache`) at every region marker, before
//! a block that ends in a system call runs (an `exit`, `execve` or `munmap` may follow), and at
//! every thread's exit; what it gained since the last read is counted as that many executions
//! of the block (its static tally: translated blocks have no dynamic counts). A forked child
//! starts from the counters its memory holds.
//!
//! What the tracer writes into a cache area is written once and never reused, moved or freed
//! while the process lives (the areas are never unmapped): a translation's slot must be blank
//! when it is written (else `scratch_overwrites`), and the only bytes changed later are an exit
//! stub's, from `int3` to a `jmp` to another translation (rel32 first, then the opcode), and
//! the counters and lookup-table entries, which are data.

use nix::libc;
use nix::unistd::Pid;
use std::rc::Rc;

use crate::counters::trace::TraceMode;
use crate::counters::trace::cache_code::{self, AREA_SIZE, ExitKind, HEADER, ORIGIN, TABLE_BYTES, WAYS};
use crate::counters::trace::tally::Tally;
use crate::counters::trace::xol::{REACH, Xol};

use super::Tracer;
use crate::counters::trace::classify::Flow;

use super::block::{Block, ends_in_sigreturn};
use super::cache_state::{Area, Entry, MaskedCount, RepCount, ThreadCounters};
use super::count::indirect_target;
use super::run_ahead::RunAhead;
use super::threads::Then;

impl Tracer<'_> {
    /// Whether threads of space `si` may be sent into translations now.
    pub(super) fn cache_on(&self, si: usize) -> bool {
        let sp = &self.spaces[si];
        self.cache_hot > 0 && self.mode == TraceMode::Flops && sp.active() && !sp.stepping && !sp.region_mode && !sp.cache.failed
    }

    /// At a block trap (the block decoded at `pc`): send the thread into the block's
    /// translation where it is hot, or translated already. True when it went.
    pub(super) fn enter_cache(&mut self, pid: Pid, si: usize, pc: u64, block: &Block, regs: libc::user_regs_struct) -> bool {
        if !self.cache_on(si) {
            return false;
        }
        let known = self.spaces[si].cache.trans.get(&pc).copied();
        if known == Some(None) || (known.is_none() && block.hits.get() < self.cache_hot) {
            return false;
        }
        let Some(at) = self.translation(pid, si, pc) else { return false };
        self.send_into(pid, si, pc, at, regs)
    }

    /// Send stopped thread `pid` (at the start of block `pc`) into `pc`'s translation at `at`.
    /// False where it gets no counter area (the thread counts as before).
    fn send_into(&mut self, pid: Pid, si: usize, pc: u64, at: u64, mut regs: libc::user_regs_struct) -> bool {
        if !self.thread_counters(pid, si, &mut regs) {
            return false;
        }
        if let Some(t) = self.threads.get_mut(&pid) {
            t.expect = None;
            t.expect_regs = None;
            t.counted = None;
        }
        self.spaces[si].cache.used = true;
        self.stats.cache_entries += 1;
        if self.debug {
            eprintln!("[{pid}] cache: enter {pc:#x} -> {at:#x}");
        }
        self.move_rip(pid, &mut regs, at);
        self.cont(pid, None);
        true
    }

    /// At a block trap whose run-ahead path `ra` ends before a translated or hot block: the
    /// path's blocks are translated (up to `cache_path` different ones, each translatable) and
    /// the thread is sent into the first, where it runs on into the translations the path led
    /// to, with no trap at the path's end (and none the next time it takes the path). The path
    /// is not counted: its translations count it. False where the first block is not
    /// translated (the path is then counted and run as before).
    pub(super) fn cache_path(&mut self, pid: Pid, si: usize, pc: u64, ra: &RunAhead, my_hold: bool, regs: libc::user_regs_struct) -> bool {
        if !ra.ends_at_cache || ra.exit_unknown || self.cache_path == 0 || !self.cache_on(si) {
            return false;
        }
        let mut blocks: Vec<u64> = Vec::with_capacity(ra.members.len() + 1);
        for b in std::iter::once(&ra.first).chain(&ra.members) {
            if !blocks.contains(&b.start) {
                blocks.push(b.start);
                if blocks.len() > self.cache_path {
                    return false;
                }
            }
        }
        // Last first: each translation's exits find the next one made already.
        for &b in blocks.iter().rev() {
            if b != pc {
                self.translation(pid, si, b);
            }
        }
        let Some(at) = self.translation(pid, si, pc) else { return false };
        if my_hold {
            self.release_hold();
        }
        self.stats.cache_paths += 1;
        self.send_into(pid, si, pc, at, regs)
    }

    /// A trap inside a cache area at `at` (the `int3`'s address). False when it is no stub's.
    pub(super) fn on_cache_trap(&mut self, pid: Pid, si: usize, at: u64, mut regs: libc::user_regs_struct) -> bool {
        let Some((stub, kind)) = self.spaces[si].cache.stub_at(at) else {
            return false;
        };
        self.stats.cache_exits += 1;
        if self.debug {
            let to = match kind {
                ExitKind::Direct(x) | ExitKind::Miss(x) => x,
            };
            let function = self.spaces[si].function_of(to).0;
            eprintln!("[{pid}] cache: exit at {at:#x} (stub {stub:#x}) to {kind:x?} in {function}");
        }
        match kind {
            ExitKind::Direct(x) => {
                if self.cache_on(si) {
                    let hot = self.spaces[si].blocks.get(&x).is_some_and(|b| b.hits.get() >= self.cache_hot);
                    let known = self.spaces[si].cache.trans.get(&x).copied();
                    if (hot || known.is_some_and(|t| t.is_some()))
                        && let Some(t) = self.translation(pid, si, x)
                        && self.thread_counters(pid, si, &mut regs)
                    {
                        self.link(si, stub, t);
                        self.spaces[si].cache.used = true;
                        self.move_rip(pid, &mut regs, t);
                        self.cont(pid, None);
                        return true;
                    }
                }
                self.move_rip(pid, &mut regs, x);
                self.arrive(pid, x, regs);
            }
            ExitKind::Miss(l) => {
                // Before the original return or indirect branch (counted with its block): done
                // here (a return's target popped, an indirect `call`'s return address pushed)
                // and the thread arrives at its target. One the tracer cannot do runs there,
                // one step, and the thread arrives at its target.
                self.stats.cache_misses += 1;
                if let Some((target, rsp)) = self.branch_done_here(si, l, &regs) {
                    if self.spaces[si].cache.trans.get(&target).is_some_and(|t| t.is_some()) {
                        self.stats.cache_misses_translated += 1;
                    }
                    regs.rsp = rsp;
                    self.move_rip(pid, &mut regs, target);
                    self.arrive(pid, target, regs);
                    return true;
                }
                self.stats.cache_misses_stepped += 1;
                if self.debug {
                    let i = self.spaces[si].insn_at(l, &mut self.factory);
                    eprintln!("[{pid}] cache: miss at {l:#x} stepped: {} ({:?})", i.instr, i.instr.code());
                }
                self.move_rip(pid, &mut regs, l);
                self.step_on(pid, si, l, regs, Then::Arrive);
            }
        }
        true
    }

    /// The return or indirect `jmp`/`call` at `at`, done from `regs` (those before it): its
    /// target and the `rsp` it leaves (a return's target read from the stack, `rsp` past it
    /// and the bytes `ret imm16` releases; a `call`'s return address written below `rsp`).
    /// None for any other branch, or where memory cannot be read or written.
    fn branch_done_here(&mut self, si: usize, at: u64, regs: &libc::user_regs_struct) -> Option<(u64, u64)> {
        let insn = self.spaces[si].insn_at(at, &mut self.factory);
        let mem = &self.spaces[si].mem;
        match insn.instr.code() {
            iced_x86::Code::Retnq | iced_x86::Code::Retnq_imm16 => {
                let release = if insn.instr.code() == iced_x86::Code::Retnq {
                    0
                } else {
                    u64::from(insn.instr.immediate16())
                };
                let target = mem.read_u64(regs.rsp)?;
                Some((target, regs.rsp.wrapping_add(8 + release)))
            }
            iced_x86::Code::Jmp_rm64 => Some((indirect_target(mem, &insn.instr, regs)?, regs.rsp)),
            iced_x86::Code::Call_rm64 => {
                let target = indirect_target(mem, &insn.instr, regs)?;
                let rsp = regs.rsp.wrapping_sub(8);
                let back = insn.instr.next_ip();
                self.spaces[si].mem.write(rsp, &back.to_le_bytes()).then_some((target, rsp))
            }
            _ => None,
        }
    }

    /// Link the exit stub at `stub` to the translation at `to` (when in reach), once.
    fn link(&mut self, si: usize, stub: u64, to: u64) {
        let sp = &mut self.spaces[si];
        let Some((kind, linked)) = sp.cache.stubs.get(&stub).copied() else {
            return;
        };
        if linked {
            return;
        }
        let Some((rel, opcode)) = cache_code::link_bytes(stub, to) else {
            return;
        };
        // (In this order: a thread reaching the stub meanwhile meets the `int3` and traps.)
        sp.cache.pending.push((stub + 1, rel.to_vec()));
        sp.cache.pending.push((stub, vec![opcode]));
        sp.cache.stubs.insert(stub, (kind, true));
        self.stats.cache_links += 1;
    }

    /// The translation of the block starting at `pc`, made on first use (with its return
    /// site's where it ends in a call).
    fn translation(&mut self, pid: Pid, si: usize, pc: u64) -> Option<u64> {
        if let Some(t) = self.spaces[si].cache.trans.get(&pc) {
            return *t;
        }
        let made = self.new_translation(pid, si, pc);
        if made.is_some() {
            self.translate_return_site(pid, si, pc);
        }
        made
    }

    /// A call's return site is translated with the call's block, before it ever ran: the
    /// callee's return then finds it in the table, where it would trap at a miss (the site
    /// would be cold the first times, as run-once code is). One level: the site's own return
    /// site waits for its block to be translated.
    fn translate_return_site(&mut self, pid: Pid, si: usize, pc: u64) {
        let Some(last) = self.spaces[si].blocks.get(&pc).and_then(|b| b.insns.last().cloned()) else {
            return;
        };
        if !matches!(last.flow, Flow::Call(_) | Flow::IndirectCall) {
            return;
        }
        let site = last.next();
        if self.spaces[si].cache.trans.contains_key(&site) {
            return;
        }
        self.spaces[si].block_at(site, &mut self.factory);
        self.stats.cache_return_sites += 1;
        self.new_translation(pid, si, site);
    }

    /// A translation of the block at `pc` (decoded), remembered either way.
    fn new_translation(&mut self, pid: Pid, si: usize, pc: u64) -> Option<u64> {
        let made = self.translate_block(pid, si, pc);
        if made.is_none() {
            self.stats.cache_refused += 1;
        }
        self.spaces[si].cache.trans.insert(pc, made);
        // The exits of other translations that lead here jump here from now on, without a trap.
        if let Some(at) = made
            && let Some(stubs) = self.spaces[si].cache.waiting.remove(&pc)
        {
            for stub in stubs {
                self.link(si, stub, at);
            }
        }
        made
    }

    fn translate_block(&mut self, pid: Pid, si: usize, pc: u64) -> Option<u64> {
        let sp = &self.spaces[si];
        let block = sp.blocks.get(&pc).cloned()?;
        let bp = sp.bps.get(&pc).copied().unwrap_or_default();
        if (block.needs_step && !block.emu_masks) || bp.sticky() || bp.inside || sp.is_sticky(pc) || ends_in_sigreturn(&block) {
            return None;
        }
        if !cache_code::translatable(&block.insns) {
            return None;
        }
        let lanes = cache_code::lane_counted(&block.insns);
        let reps = cache_code::rep_counted(&block.insns);
        let counter = self.spaces[si].cache.counters_used;
        let counters = 1 + lanes.len() + reps.len();
        if (counter + counters) as u64 > self.thread_counters {
            self.stats.cache_counters_full += 1;
            return None;
        }
        let code_len: u64 = block.insns.iter().map(|i| u64::from(i.len)).sum();
        let room = code_len * 2 + 256 + ORIGIN + LANE_COUNT_BYTES * (lanes.len() + reps.len()) as u64;
        let ai = self.cache_area(pid, si, pc, room)?;
        let sp = &mut self.spaces[si];
        let area = sp.cache.areas[ai];
        let slot_at = area.base + HEADER + area.code_used;
        let at = slot_at + ORIGIN;
        let cache = &sp.cache;
        let tr = cache_code::translate(&block.insns, at, 8 * counter as u64, area.base, &|x| {
            cache.trans.get(&x).copied().flatten()
        })?;
        if tr.bytes.len() as u64 > room {
            return None;
        }
        // Written once: the slot must still be blank.
        let mut bytes = pc.to_le_bytes().to_vec();
        bytes.extend_from_slice(&tr.bytes);
        let used = (bytes.len() as u64).next_multiple_of(16);
        if !blank_to(&sp.mem, &mut sp.cache.areas[ai], used) {
            self.stats.scratch_overwrites += 1;
            sp.cache.failed = true;
            return None;
        }
        sp.cache.pending.push((slot_at, bytes));
        let a = &mut sp.cache.areas[ai];
        a.code_used += used;
        for (off, kind) in &tr.stubs {
            sp.cache.stubs.insert(at + off, (*kind, false));
            if let ExitKind::Direct(x) = kind {
                sp.cache.waiting.entry(*x).or_default().push(at + off);
            }
        }
        let masked = masked_counts(&block, &lanes, counter);
        let reps = reps
            .iter()
            .enumerate()
            .map(|(j, &idx)| {
                let mut per_iteration = Tally::default();
                per_iteration.add_string(&block.insns[idx], 1);
                RepCount {
                    idx,
                    counter: counter + 1 + lanes.len() + j,
                    per_iteration,
                }
            })
            .collect();
        sp.cache.entries.push(Entry {
            block: block.clone(),
            counter,
            masked,
            reps,
        });
        sp.cache.counters_used = counter + counters;
        // The table entry (one 8-byte write): the first free way of the block's bucket, else
        // the last way, whose translation is then reached through traps and links only.
        if let Some(table) = sp.cache.table {
            let b = cache_code::table_bucket(pc);
            let s = (0..WAYS)
                .map(|w| b * WAYS + w)
                .find(|s| !sp.cache.slots.contains_key(s))
                .unwrap_or(b * WAYS + WAYS - 1);
            sp.cache.pending.push((table + s * 8, at.to_le_bytes().to_vec()));
            sp.cache.slots.insert(s, pc);
        }
        self.stats.cache_translations += 1;
        if self.debug {
            eprintln!(
                "cache: {pc:#x} translated at {at:#x} ({} bytes, counter {counter:#x})",
                tr.bytes.len()
            );
            for i in &block.insns {
                eprintln!("  orig {:#x}: {}", i.addr, i.instr);
            }
            let mut d = iced_x86::Decoder::with_ip(64, &tr.bytes, at, iced_x86::DecoderOptions::NONE);
            while d.can_decode() {
                let i = d.decode();
                eprintln!("  copy {:#x}: {}", i.ip(), i);
            }
        }
        Some(at)
    }

    /// An area within reach of `near` with room for a counter and `room` bytes of code (mapped
    /// in the tracee, with the lookup table, where none has it).
    fn cache_area(&mut self, pid: Pid, si: usize, near: u64, room: u64) -> Option<usize> {
        let fits = |a: &Area| a.base.abs_diff(near) < REACH && HEADER + a.code_used + room <= AREA_SIZE;
        if let Some(i) = self.spaces[si].cache.areas.iter().position(fits) {
            return Some(i);
        }
        if self.spaces[si].cache.failed {
            return None;
        }
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        if self.spaces[si].cache.table.is_none() {
            let t = self.mmap_in(pid, si, 0, TABLE_BYTES, rw, false);
            if t.is_none() {
                self.spaces[si].cache.failed = true;
            }
            self.spaces[si].cache.table = t;
        }
        let table = self.spaces[si].cache.table?;
        let rwx = rw | libc::PROT_EXEC as u64;
        let mut base = None;
        for hint in Xol::hints(near) {
            if let Some(b) = self.mmap_in(pid, si, hint, AREA_SIZE, rwx, true)
                && b.abs_diff(near) < REACH
            {
                base = Some(b);
                break;
            }
        }
        let Some(base) = base else {
            self.spaces[si].cache.failed = true;
            return None;
        };
        if !self.spaces[si].mem.write(base, &table.to_le_bytes()) {
            return None;
        }
        let c = &mut self.spaces[si].cache;
        c.areas.push(Area {
            base,
            code_used: 0,
            checked: 0,
        });
        Some(c.areas.len() - 1)
    }

    /// `pid`'s counter area, its `gs` base in `regs` (written back by the caller's `move_rip`),
    /// made where the thread has none yet (a new thread inherits its parent's `gs` base). False
    /// where the thread's `gs` base is the program's own (then the space gets no more cache).
    fn thread_counters(&mut self, pid: Pid, si: usize, regs: &mut libc::user_regs_struct) -> bool {
        let tid = pid.as_raw();
        let cache = &self.spaces[si].cache;
        if let Some(c) = cache.counters.get(&tid)
            && c.base == regs.gs_base
        {
            return true;
        }
        if regs.gs_base != 0 && !cache.counters.values().any(|c| c.base == regs.gs_base) {
            self.spaces[si].cache.failed = true;
            return false;
        }
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let Some(base) = self.mmap_in(pid, si, 0, 8 * self.thread_counters, rw, false) else {
            self.spaces[si].cache.failed = true;
            return false;
        };
        let n = self.spaces[si].cache.counters_used;
        self.spaces[si]
            .cache
            .counters
            .insert(tid, ThreadCounters { base, last: vec![0; n] });
        regs.gs_base = base;
        true
    }

    /// Read every thread's counters of space `si` and count what each translation ran since
    /// the last read, as that thread's work.
    pub(super) fn flush_cache(&mut self, _pid: Pid, si: usize) {
        if !self.spaces[si].cache.used {
            return;
        }
        self.stats.cache_flushes += 1;
        let n = self.spaces[si].cache.counters_used;
        // Per thread and entry: the executions, each lane counter's sum and each string
        // instruction's iterations since the last read (read in one go: a thread still running
        // may be between the two, and its next read counts the rest).
        let mut runs: Vec<EntryRun> = Vec::new();
        let sp = &mut self.spaces[si];
        let mut buf = vec![0u8; 8 * n];
        for (tid, c) in sp.cache.counters.iter_mut() {
            if sp.mem.read(c.base, &mut buf) != buf.len() {
                continue;
            }
            c.last.resize(n, 0);
            let mut gained = |k: usize| {
                let v = u64::from_le_bytes(buf[8 * k..8 * k + 8].try_into().expect("8 bytes"));
                let d = v.wrapping_sub(c.last[k]);
                c.last[k] = v;
                d
            };
            for (ei, e) in sp.cache.entries.iter().enumerate() {
                let d = gained(e.counter);
                let sums: Vec<u64> = e.masked.iter().map(|m| m.lanes.as_ref().map_or(0, |(k, _)| gained(*k))).collect();
                let iterations: Vec<u64> = e.reps.iter().map(|r| gained(r.counter)).collect();
                if d > 0 || sums.iter().any(|s| *s > 0) || iterations.iter().any(|i| *i > 0) {
                    runs.push(EntryRun {
                        tid: *tid,
                        entry: ei,
                        executions: d,
                        lane_sums: sums,
                        iterations,
                    });
                }
            }
        }
        // With one thread, nobody runs a translation until this one is let go again.
        if self.spaces[si].threads <= 1 {
            self.spaces[si].cache.used = false;
        }
        for run in runs {
            let (n, sums, iterations) = (run.executions, run.lane_sums, run.iterations);
            let entry = self.spaces[si].cache.entries[run.entry].clone();
            let pid = Pid::from_raw(run.tid);
            self.stats.cache_blocks += n;
            self.add_block(pid, &entry.block, &[], n);
            for (m, sum) in entry.masked.iter().zip(sums) {
                self.add_masked(pid, &entry.block, m.idx, &m.base, n);
                if let Some((_, per_lane)) = &m.lanes {
                    self.add_masked(pid, &entry.block, m.idx, per_lane, sum);
                }
            }
            for (r, i) in entry.reps.iter().zip(iterations) {
                self.add_masked(pid, &entry.block, r.idx, &r.per_iteration, i);
            }
        }
    }

    /// A thread is gone (after its last flush): its counter area is left as it is, unread.
    pub(super) fn drop_thread_counters(&mut self, pid: Pid, si: usize) {
        self.spaces[si].cache.counters.remove(&pid.as_raw());
    }

    /// Every space's counters (a region marker's snapshot).
    pub(super) fn flush_all_caches(&mut self, pid: Pid) {
        for si in 0..self.spaces.len() {
            self.flush_cache(pid, si);
        }
    }

    /// A forked child's space (its one thread `child`, forked by `parent`): it counts into the
    /// copy of `parent`'s counter area (its `gs` base is the parent's), starting from the
    /// values the copy holds; the other threads' areas are not the child's.
    pub(super) fn rebase_cache(&mut self, si: usize, parent: Pid, child: Pid) {
        let sp = &mut self.spaces[si];
        let Some(mut c) = sp.cache.counters.remove(&parent.as_raw()) else {
            sp.cache.counters.clear();
            return;
        };
        sp.cache.counters.clear();
        let n = sp.cache.counters_used;
        let mut buf = vec![0u8; 8 * n];
        if sp.mem.read(c.base, &mut buf) == buf.len() {
            c.last = buf
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect();
        }
        sp.cache.counters.insert(child.as_raw(), c);
    }
}

/// What one thread ran of one translation since the counters' last read.
struct EntryRun {
    tid: i32,
    entry: usize,
    executions: u64,
    lane_sums: Vec<u64>,
    iterations: Vec<u64>,
}

/// Whether the next `used` bytes of `area` (from its `code_used`) were blank before the tracer
/// wrote any: read back a page at a time as the slots reach them (one read per page, not one
/// per translation), so a slot is never written over anything.
fn blank_to(mem: &crate::counters::trace::sys::Memory, area: &mut Area, used: u64) -> bool {
    let end = area.code_used + used;
    if end <= area.checked {
        return true;
    }
    let from = area.checked.max(area.code_used);
    let to = (HEADER + end).next_multiple_of(BLANK_CHECK) - HEADER;
    let to = to.min(AREA_SIZE - HEADER);
    let mut was = vec![0u8; (to - from) as usize];
    if mem.read(area.base + HEADER + from, &mut was) != was.len() || was.iter().any(|b| *b != 0) {
        return false;
    }
    area.checked = to;
    end <= to
}

/// Bytes of a cache area read back blank at a time.
const BLANK_CHECK: u64 = 4096;

/// Upper bound of the bytes `cache_code` adds before a lane-counted masked instruction or a
/// rep-counted string instruction.
const LANE_COUNT_BYTES: u64 = 64;

/// The masked instructions of `block` as a translation at counter `counter` counts them: each
/// one's tally with no lane active, and where it is lane-counted (`lanes`, in the order of
/// their counters after `counter`) what one active lane adds.
fn masked_counts(block: &Block, lanes: &[(usize, u32)], counter: usize) -> Rc<[MaskedCount]> {
    block
        .masked
        .iter()
        .map(|(idx, _)| {
            let insn = &block.insns[*idx];
            let mut base = Tally::default();
            base.add_insn(insn, Some(0));
            let lanes = lanes.iter().position(|(at, _)| at == idx).map(|k| {
                let mut one = Tally::default();
                one.add_insn(insn, Some(1));
                (counter + 1 + k, one.since(&base))
            });
            MaskedCount { idx: *idx, base, lanes }
        })
        .collect()
}
