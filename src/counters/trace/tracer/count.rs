//! Counting at block traps: markers and the entry point, a block counted at its entry (run
//! natively, as a counted loop, with a run-ahead path, or stepped through), and single-stepped
//! instructions.

use iced_x86::{InstructionInfoFactory, OpAccess, OpKind, Register};
use nix::libc;
use nix::unistd::Pid;
use std::rc::Rc;

use crate::counters::trace::TraceMode;
use crate::counters::trace::classify::TileOp;
use crate::counters::trace::emu::Emu;
use crate::counters::trace::interleave::{Access, Call};
use crate::counters::trace::sources::Site;
use crate::counters::trace::sys::{self, Memory};
use crate::counters::trace::tally::Tally;

use super::Tracer;
use super::block::{Block, Exit, MaskSrc, RspAt, dynamic_tally, ends_in_stop, reg_value};
use super::feed::{accesses_of, tile_accesses};
use super::run_ahead::RunAhead;
use super::space::{FastMap, Sticky};
use super::threads::{Native, StepKind, Then};

impl Tracer<'_> {
    pub(super) fn resolve_rep(&mut self, pid: Pid, regs: &libc::user_regs_struct) {
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
    pub(super) fn add_block(&mut self, pid: Pid, block: &Block, masks: &[Option<u64>], n: u64) {
        if n == 0 {
            return;
        }
        block.hits.set(block.hits.get().saturating_add(n.min(u64::from(u32::MAX)) as u32));
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

    /// `n` times `t`, the work of the masked instruction `idx` of `block` (a translation's
    /// count: per execution, or per active lane).
    pub(super) fn add_masked(&mut self, pid: Pid, block: &Block, idx: usize, t: &Tally, n: u64) {
        if n == 0 {
            return;
        }
        self.add_totals(pid, t, n);
        if self.by_function {
            let site = match block.insn_site.get(idx) {
                Some(s) if !block.sites.is_empty() => block.sites[usize::from(*s)].0.clone(),
                _ => block.site.clone(),
            };
            self.attribute(&site, t, n);
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
    pub(super) fn count_one(&mut self, pid: Pid, si: usize, pc: u64, regs: &libc::user_regs_struct) {
        self.step_one(pid, si, pc, regs, true);
    }

    /// One single-stepped instruction: counted (`count`) and its addresses fed to the sink.
    pub(super) fn step_one(&mut self, pid: Pid, si: usize, pc: u64, regs: &libc::user_regs_struct, count: bool) {
        if self.step_log_dir.is_some() {
            self.log_step(pid, pc, count);
        }
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

    /// `ROOFLINE_TRACE_STEP_LOG`: one line per single-stepped instruction, `thread-order
    /// address counted`, in DIR/steps-PID.txt (PID: the traced program's).
    fn log_step(&mut self, pid: Pid, pc: u64, count: bool) {
        if self.step_log.is_none()
            && let Some(dir) = &self.step_log_dir
        {
            let path = std::path::Path::new(dir).join(format!("steps-{}.txt", self.main.as_raw()));
            self.step_log = std::fs::File::create(path).ok().map(std::io::BufWriter::new);
        }
        let order = self.threads.get(&pid).map_or(usize::MAX, |t| t.index);
        if let Some(w) = &mut self.step_log {
            let _ = std::io::Write::write_fmt(w, format_args!("{order} {pc:x} {count}\n"));
        }
    }

    /// The thread is about to execute `pc`, which may carry a breakpoint.
    pub(super) fn on_bp(&mut self, pid: Pid, pc: u64, regs: libc::user_regs_struct) {
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
            sp.clear_entry(pc);
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
                    sp.set_sticky(b, Sticky::Begin);
                    sp.set_sticky(e, Sticky::End);
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

    fn block_enter(&mut self, pid: Pid, si: usize, pc: u64, regs: libc::user_regs_struct, sticky: bool) {
        let at = BlockTrap { pid, si, pc, sticky };
        self.returns_from_call(pid, pc, regs.rax);
        if let Some(th) = self.threads.get(&pid)
            && let Some(s) = self.stats.per_thread.get_mut(th.index)
        {
            s.block_traps += 1;
        }
        let (mut block, mut targets, unresolved) = self.decode_at_trap(si, pc, &regs);
        if !sticky && self.enter_cache(pid, si, pc, &block, regs) {
            return;
        }
        // An exit not computable from the registers at entry (a computed `goto` whose target
        // the block loads, a `ret` after the block moved rsp in a way not followed): the
        // run-ahead's emulator may compute it, from the same registers and memory, exactly or
        // not at all; the block is stepped through only where it does not.
        // A mask written inside the block: computed by the emulator where it can be.
        let Some(mut masks) = self.masks_at(pid, si, &block, &regs) else {
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
        if !emulate_exit && !sticky && self.run_loop_natively(at, &block, regs, &mut masks) {
            return;
        }
        let feed = self.mode == TraceMode::Memory && self.sink.is_some();
        let mut path_accesses: Option<Vec<Access>> = None;
        let (ra, my_hold) = self.try_run_ahead(at, &block, &regs);
        if let Some(r) = &ra
            && !sticky
            && self.cache_path(pid, si, pc, r, my_hold, regs)
        {
            return;
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
            self.count_path(at, &ra, my_hold);
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
        } else if feed && !self.feed_block(at, &block, &masks, regs) {
            return;
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
        if path_ends_in_stop.unwrap_or_else(|| ends_in_stop(&block)) {
            let gprs = match &path_call {
                Some((g, _)) => *g,
                None => self.regs_at_syscall(pid, si, &block, &regs),
            };
            if gprs.and_then(|r| r[0]).is_none_or(sys::may_end_the_address_space) {
                // The translations' counts first: their counter areas go with the space.
                self.flush_cache(pid, si);
            }
            self.forget_unmapped_code(si, gprs);
        }
        if block.rep
            && let Some(insn) = block.insns.first()
            && let Some(t) = self.threads.get_mut(&pid)
        {
            t.pending_rep = Some((insn.clone(), regs.rcx, func.clone()));
        }
        self.leave_block(at, &block, regs, &targets, my_hold);
    }

    /// Before a `munmap` or `mremap` (its registers at the `syscall`, where known): forget the
    /// code of the range (`Space::forget_code`).
    fn forget_unmapped_code(&mut self, si: usize, gprs: Option<[Option<u64>; 16]>) {
        let Some([Some(nr), ..]) = gprs else { return };
        if nr != libc::SYS_munmap as u64 && nr != libc::SYS_mremap as u64 {
            return;
        }
        let g = gprs.expect("matched above");
        if let (Some(addr), Some(len)) = (g[7], g[6])
            && self.spaces[si].forget_code(addr, addr.saturating_add(len))
        {
            self.stats.unmapped_code += 1;
        }
    }

    /// The block at the trap's `pc`, made a block start and decoded, with its static successors
    /// and its return or indirect target (read from the registers at entry) installed; decoded
    /// anew where installing one split it. (The block, those targets, whether the return or
    /// indirect target could not be read.)
    fn decode_at_trap(&mut self, si: usize, pc: u64, regs: &libc::user_regs_struct) -> (Rc<Block>, Vec<u64>, bool) {
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
        if block.exit != Exit::Static {
            match exit_target(&sp.mem, &block, regs) {
                Some(t) => targets.push(t),
                None => unresolved = true,
            }
        }
        for &t in &targets[block.succ.len()..] {
            sp.mark_block_start(t);
            sp.install(t);
        }
        if !sp.blocks.contains_key(&pc) {
            block = sp.block_at(pc, f);
        }
        (block, targets, unresolved)
    }

    /// A counted single-block loop on a single thread: run it natively to its exit. With other
    /// threads in the space the loop runs as a displaced copy (its head breakpoint stays in for
    /// them), and its exit falls into a trap of the copy. False, with nothing done, where the
    /// block is no such loop or cannot run so (`masks` are taken only when it runs).
    fn run_loop_natively(
        &mut self,
        at: BlockTrap,
        block: &Rc<Block>,
        mut regs: libc::user_regs_struct,
        masks: &mut Vec<Option<u64>>,
    ) -> bool {
        let BlockTrap { pid, si, pc, .. } = at;
        let sp = &mut self.spaces[si];
        let memory = self.mode == TraceMode::Memory;
        // Memory mode runs a loop natively only when its addresses can be replayed.
        let native_ok = !memory || block.affine.is_some();
        let replay = memory.then(|| Box::new(regs));
        if let Some(ind) = block.induction
            && native_ok
            && sp.threads <= 1
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
                    masks: std::mem::take(masks),
                    regs: replay,
                });
            }
            self.cont(pid, None);
            return true;
        }
        if let Some(ind) = block.induction
            && native_ok
            && self.spaces[si].threads > 1
            && let Some(entry) = reg_value(&regs, ind.reg)
            && let Some(lc) = self.loop_for(pid, si, block)
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
                    masks: std::mem::take(masks),
                    regs: replay,
                });
            }
            self.move_rip(pid, &mut regs, lc.at);
            self.cont(pid, None);
            return true;
        }
        false
    }

    /// Run ahead from the trap where the block may start a path and the thread is alone in its
    /// space or holds the others: the path (`run_ahead`), and whether the other threads are held
    /// for it (the hold ends here when no path came of it).
    fn try_run_ahead(&mut self, at: BlockTrap, block: &Block, regs: &libc::user_regs_struct) -> (Option<RunAhead>, bool) {
        let BlockTrap { pid, si, pc, sticky } = at;
        let memory = self.mode == TraceMode::Memory;
        // Run ahead: the blocks this thread will certainly run next (static single successors,
        // and branches, returns and indirect jumps whose outcome the emulator computes from the
        // registers and memory now, through as many loop iterations as it can decide) are
        // counted at this trap, their breakpoints left out, so only the path's exits trap. In
        // memory mode the emulator also gives every address on the path.
        let feed = memory && self.sink.is_some();
        let eligible = !block.rep && (!memory || (feed && block.masked.is_empty())) && !sticky;
        let alone = eligible && (self.spaces[si].threads <= 1 || (self.hold_worth_trying(si, pc) && self.hold_others(si, pid)));
        let ra = if alone { self.run_ahead(pid, si, pc, regs, feed) } else { None };
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
        (ra, my_hold)
    }

    /// Count the blocks of run-ahead path `ra` at this trap, each once per occurrence, with
    /// their breakpoints taken out (back in when this trap's hold ends, where it holds the
    /// other threads) and those of the path's exits put in.
    fn count_path(&mut self, at: BlockTrap, ra: &RunAhead, my_hold: bool) {
        let BlockTrap { pid, si, .. } = at;
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
    }

    /// Memory mode: feed the addresses of the block counted at this trap, emulated from the
    /// registers at its entry. Where they cannot be, the thread steps through the block feeding
    /// each instruction's (its W is counted already), and this trap is done: false.
    fn feed_block(&mut self, at: BlockTrap, block: &Block, masks: &[Option<u64>], regs: libc::user_regs_struct) -> bool {
        let BlockTrap { pid, si, pc, .. } = at;
        match self.block_accesses(pid, si, block, masks, &regs) {
            Some(acc) => {
                let tid = self.sink_id(pid);
                self.feed(tid, &acc);
                self.stats.emulated_blocks += 1;
                true
            }
            None => {
                // Addresses not computable at entry: step through the block feeding each
                // instruction's (its W is counted above).
                self.stats.fed_by_steps += 1;
                if block.rep
                    && let Some(insn) = block.insns.first()
                    && let Some(t) = self.threads.get_mut(&pid)
                {
                    t.pending_rep = Some((insn.clone(), regs.rcx, block.site.clone()));
                }
                let (start, end) = (block.start, block.end);
                self.step_one(pid, si, pc, &regs, false);
                self.step_block(pid, si, pc, regs, Then::Feed { start, end });
                false
            }
        }
    }

    /// The thread goes on from the block counted at its trap (`targets`: where it can trap
    /// next): with the block's breakpoint left out until a predecessor puts it back (alone in
    /// its space, or holding the others), past it through its displaced copy (other threads
    /// must keep trapping there), or stepped over it (the block is one of its own exits, or the
    /// breakpoint is sticky).
    fn leave_block(&mut self, at: BlockTrap, block: &Block, regs: libc::user_regs_struct, targets: &[u64], my_hold: bool) {
        let BlockTrap { pid, si, pc, sticky } = at;
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

    pub(super) fn finish_loop(&mut self, pid: Pid, si: usize, nat: &Native, regs: &libc::user_regs_struct) {
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
}

/// A thread at the breakpoint that starts a block, as the steps of `Tracer::block_enter` see it.
#[derive(Clone, Copy)]
struct BlockTrap {
    pid: Pid,
    /// Its address space.
    si: usize,
    /// The block's start.
    pc: u64,
    /// The breakpoint there is sticky (entry point, region marker).
    sticky: bool,
}

/// The target of `block`'s return or indirect exit, from the registers at its entry and memory;
/// None where it cannot be computed (and for a static exit).
fn exit_target(mem: &Memory, block: &Block, regs: &libc::user_regs_struct) -> Option<u64> {
    match block.exit {
        Exit::Static => None,
        Exit::Ret(at) => {
            let slot = match at {
                RspAt::Rsp(d) => Some(regs.rsp.wrapping_add(d as u64)),
                RspAt::Rbp(d) => Some(regs.rbp.wrapping_add(d as u64)),
                RspAt::Unknown => None,
            };
            slot.and_then(|a| mem.read_u64(a))
        }
        Exit::Indirect { at_entry } => {
            let last = block.insns.last().cloned();
            last.filter(|_| at_entry).and_then(|l| indirect_target(mem, &l.instr, regs))
        }
    }
}

/// Where indirect `jmp`/`call` `i` goes from `regs` (those just before it) and memory: its
/// register, or the 8 bytes its memory operand names. None for other operands.
pub(super) fn indirect_target(mem: &Memory, i: &iced_x86::Instruction, regs: &libc::user_regs_struct) -> Option<u64> {
    match i.op0_kind() {
        OpKind::Register => reg_value(regs, i.op0_register()),
        // (RIP-relative, a PLT's `jmp [rip+x]`: the decoder made the displacement absolute.)
        OpKind::Memory if i.is_ip_rel_memory_operand() => mem.read_u64(i.ip_rel_memory_address()),
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
                _ => reg_value(regs, r),
            })?;
            mem.read_u64(a)
        }
        _ => None,
    }
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
