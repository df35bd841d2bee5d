//! Run-ahead: the blocks a trapped thread will certainly run next, emulated from its registers
//! and memory and counted at the trap, and the check of the exit state the emulator predicted.

use iced_x86::InstructionInfoFactory;
use nix::libc;
use nix::unistd::Pid;
use std::rc::Rc;

use crate::counters::trace::classify::{Flow, Insn};
use crate::counters::trace::emu::{Emu, VectorSeed};
use crate::counters::trace::interleave::Access;
use crate::counters::trace::sys;

use super::Tracer;
use super::block::{Block, Exit, ends_in_sigreturn, ends_in_stop};
use super::feed::emulated_accesses;
use super::space::{FastSet, Space};

/// A run-ahead path (see `Tracer::run_ahead`).
pub(super) struct RunAhead {
    /// The trapped block as it is now.
    pub(super) first: Rc<Block>,
    /// The blocks run after it, in order, with repeats: counted at the trap.
    pub(super) members: Vec<Rc<Block>>,
    /// Per member, the opmask values of its masked instructions (empty for unmasked blocks).
    pub(super) member_masks: Vec<Vec<Option<u64>>>,
    /// The addresses control leaves the path to (the exit, and the successors the path does
    /// not take that are not on it): their breakpoints go in.
    pub(super) keep: Vec<u64>,
    /// Memory mode: the addresses of `first` and the members in program order.
    pub(super) accesses: Option<Vec<Access>>,
    /// The general registers the emulator expects at the exit trap (None: not checked).
    pub(super) exit_regs: Option<[Option<u64>; 16]>,
    /// Where the path ends in a system call: the general registers at its `syscall`.
    pub(super) call_regs: Option<[Option<u64>; 16]>,
    /// The path ends in `rt_sigreturn`: where the thread traps next is not checked.
    pub(super) exit_unknown: bool,
    /// The path ends before a block the code cache translated or wants (`cache.rs`).
    pub(super) ends_at_cache: bool,
}

impl Tracer<'_> {
    /// An emulator for stopped thread `pid` of space `si` from `regs`. Its rseq(2) area reads
    /// as unknown: the kernel rewrites `cpu_id` there whenever the thread comes back to user
    /// space on another CPU, between the stop and the code that reads it (glibc's
    /// `pthread_create` and `sched_getcpu` do), so the value at the stop predicts nothing.
    pub(super) fn emulator(&mut self, pid: Pid, si: usize, regs: &libc::user_regs_struct) -> Emu {
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

    /// The vector registers of stopped thread `pid`, read from its XSAVE state only if an
    /// emulation asks for them.
    pub(super) fn vector_seed(&self, pid: Pid) -> Rc<VectorSeed> {
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
    pub(super) fn run_ahead(
        &mut self,
        pid: Pid,
        si: usize,
        pc: u64,
        regs: &libc::user_regs_struct,
        want_accesses: bool,
    ) -> Option<RunAhead> {
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
        // (2²⁴: about 1 s of emulation, 50 MB of path) before it gives up (or at
        // `MAX_LOOP_PATH_ACCESSES`).
        let max_loop_path_insns = max_path_insns << 4;
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
        let from = PathFrom {
            pc,
            regs,
            want_accesses,
            held,
            max_path_insns,
            max_loop_path_insns,
            may_extend,
            short,
            cache_hot: if self.cache_on(si) { self.cache_hot } else { 0 },
        };
        // (No thread of the space runs during these rounds, and nothing is written to it.)
        let pages = crate::counters::trace::emu::PageCache::default();
        'rounds: for _round in 0..8 {
            let f = &mut self.factory;
            let sp = &mut self.spaces[si];
            let mut emu = Emu::new(regs, sp.mem.clone())
                .with_volatile(volatile)
                .with_vectors(seed.clone())
                .with_page_cache(pages.clone());
            let first = sp.block_at(pc, f);
            let mut round = Round::new(first);
            match round.walk(&mut emu, sp, f, &from, &mut limit)? {
                Walk::Ended => {}
                Walk::NoPath(why) => {
                    self.stats.path_end(why);
                    return None;
                }
            }
            emulated += round.insns;
            self.stats.emulated_instructions += round.insns;
            self.stats.emulator_page_reads += emu.page_reads;
            // (A path through a block that a new start split is cut before the block, which
            // is decoded anew when the thread traps there; one that starts in it is
            // emulated again.)
            if round.new_marks && !round.truncate_to(round.first_split) {
                *self.stats.emulated_again.entry("blocks split by a new start").or_insert(0) += round.insns;
                continue;
            }
            // (What the path is up to the cut is what it was: it is cut, not emulated again,
            // where the registers there were kept.)
            if round.cut && !round.truncate_to(limit) {
                *self.stats.emulated_again.entry("counted loop cut out to run natively").or_insert(0) += round.insns;
                continue;
            }
            if self.debug {
                let (seq, nexts) = (&round.seq, &round.nexts);
                let b = seq.last().cloned()?;
                let why = match (nexts.len() == seq.len(), nexts.last().copied().flatten()) {
                    (false, _) => "addresses unknown".to_string(),
                    (true, None) => format!(
                        "{:?} unknown, last unmodelled {:x?}",
                        b.insns.last().map(|l| l.instr.mnemonic()),
                        emu.last_generic
                    ),
                    (true, Some(n)) => format!("next {n:#x} not joined ({} insns)", round.insns),
                };
                eprintln!("path from {pc:#x}: {} blocks, ends after {:#x}: {why}", seq.len(), b.start);
            }
            let mut exits = round.trim();
            // An exit that is also a member would trap at the member's earlier occurrence, in
            // the middle of the path. End the path instead before its last block that occurs in
            // it for the first time (that block's start becomes the only exit, and is no member
            // of what is left; a function called twice on the path no longer ends it at the
            // first call): cut there, or emulate again to there.
            while let Some(cut) = round.cut_before_member_exit(&exits) {
                if self.debug {
                    let seq = &round.seq;
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
                if !round.truncate_to(cut) {
                    *self.stats.emulated_again.entry("an exit among the members").or_insert(0) += round.insns;
                    continue 'rounds;
                }
                exits = round.trim();
            }
            return self.commit_path(round, exits, si, &from, emulated);
        }
        None
    }

    /// The path of a round that ends where it may (`Round::trim`, no exit among its members):
    /// the addresses its breakpoints must keep, the back-off of wasteful emulations from the
    /// trap, the per-cause figures; None where it is only the trapped block, whose dynamic exit
    /// was read at entry already.
    fn commit_path(&mut self, round: Round, exits: Vec<u64>, si: usize, from: &PathFrom, emulated: u64) -> Option<RunAhead> {
        let pc = from.pc;
        let Round {
            mut seq,
            nexts,
            accesses,
            mut seq_masks,
            exit_regs,
            call_regs,
            why,
            ..
        } = round;
        let members: FastSet = seq[1..].iter().map(|b| b.start).collect();
        let keep = path_exits(&seq, exits, pc, &members);
        if !from.short {
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
        Some(RunAhead {
            ends_at_cache: why == CODE_CACHE,
            call_regs,
            first,
            members: seq,
            member_masks: seq_masks,
            keep,
            accesses: from.want_accesses.then_some(accesses),
            exit_regs,
            exit_unknown,
        })
    }
}

/// Why a path ended before a block the code cache translated or wants.
const CODE_CACHE: &str = "code cache";
/// Accesses a path inside a loop of several blocks may collect in memory mode before it gives
/// up (16 bytes each).
const MAX_LOOP_PATH_ACCESSES: usize = 1 << 22;
/// Registers at the start of the last few path blocks (to know the state at an earlier exit).
const SNAPSHOTS: usize = 8;
/// Iterations of a counted loop emulated before it is left to run natively instead.
const NATIVE_AFTER: u64 = 64;
/// A full emulation that commits less than 1/4 of what it emulated (plus this) is wasted.
const WASTE_SLACK: u64 = 4096;

/// Where a run-ahead starts and how far it may go (`Tracer::run_ahead_from`).
struct PathFrom<'r> {
    /// The trap.
    pc: u64,
    /// The thread's registers there.
    regs: &'r libc::user_regs_struct,
    /// Memory mode: every address on the path, which ends before a block whose addresses the
    /// emulator cannot compute.
    want_accesses: bool,
    /// The space's other threads are held stopped.
    held: bool,
    max_path_insns: u64,
    max_loop_path_insns: u64,
    /// The longer limit may be used from here.
    may_extend: bool,
    /// Back-off after wasted emulations from here: stop where a loop of several blocks comes
    /// round.
    short: bool,
    /// The code cache's hot threshold where it is on (0: off): a path ends before a block
    /// that is translated or hot, so the thread traps there and runs the translation.
    cache_hot: u32,
}

/// One emulation of a run-ahead path: the blocks the thread will run from the trap, and what
/// the emulator found along them.
struct Round {
    seq: Vec<Rc<Block>>,
    /// The next address after each path block, where known.
    nexts: Vec<Option<u64>>,
    accesses: Vec<Access>,
    /// `accesses.len()` after each path block.
    acc_ends: Vec<usize>,
    /// Flops mode: the opmask values of each path block's masked instructions, read
    /// from the emulator before each (what `add_block` counts the block with).
    seq_masks: Vec<Vec<Option<u64>>>,
    snapshots: std::collections::VecDeque<[Option<u64>; 16]>,
    /// The registers at the start of the path's blocks where it may be cut (`truncate_to`):
    /// the first occurrence of each block, and the block before each run of one block
    /// repeated (where a counted loop is cut), by index in `seq`, in order.
    cut_points: Vec<(usize, [Option<u64>; 16])>,
    /// The block pushed last may be cut before (`cut_points`).
    pushed_cut_point: bool,
    exit_regs: Option<[Option<u64>; 16]>,
    call_regs: Option<[Option<u64>; 16]>,
    insns: u64,
    /// Consecutive executions of the last block (a single-block loop's iterations).
    repeats: u64,
    /// Unique per round: the blocks it went through carry it (`Block::on_path_round`).
    id: u64,
    /// A counted loop was cut out of the path (the walk's `limit` set before it).
    cut: bool,
    /// A new block start that splits a decoded block may split one on the path: the
    /// round is emulated again with the blocks decoded anew. (A new start that splits
    /// nothing changes no block: code seen for the first time is emulated once.)
    new_marks: bool,
    /// The first index in `seq` of a block split by a new start (`usize::MAX`: none): the path
    /// before it stands as it is.
    first_split: usize,
    /// Why the path ended (the per-cause figures in `extra.trace.path_ends`).
    why: &'static str,
}

/// How a walk along a run-ahead path ended.
enum Walk {
    /// As far as `Round::why` says.
    Ended,
    /// Not even the trapped block could be emulated (why): no path.
    NoPath(&'static str),
}

impl Round {
    fn new(first: Rc<Block>) -> Round {
        // (Room for a typical path: growing these showed in profiles of start-up code.)
        let mut seq = Vec::with_capacity(64);
        seq.push(first);
        Round {
            seq,
            nexts: Vec::with_capacity(64),
            accesses: Vec::new(),
            acc_ends: Vec::with_capacity(64),
            seq_masks: Vec::with_capacity(64),
            snapshots: std::collections::VecDeque::new(),
            cut_points: Vec::new(),
            pushed_cut_point: false,
            exit_regs: None,
            call_regs: None,
            insns: 0,
            repeats: 1,
            id: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            cut: false,
            new_marks: false,
            first_split: usize::MAX,
            why: "empty block",
        }
    }

    /// Cut the path back to before its last blocks whose dynamic exit is unknown (nothing
    /// would trap after them); the addresses control leaves what is left to.
    fn trim(&mut self) -> Vec<u64> {
        // A member whose exit is dynamic and unknown cannot end the path: nothing would trap after it.
        while self.seq.len() > 1 && self.nexts[self.seq.len() - 1].is_none() && self.seq.last().is_some_and(|b| b.exit != Exit::Static) {
            self.seq.pop();
            self.exit_regs = self.snapshots.pop_back();
        }
        self.nexts.truncate(self.seq.len());
        self.accesses.truncate(self.acc_ends.get(self.seq.len() - 1).copied().unwrap_or(0));
        let last = self.seq.len() - 1;
        match self.nexts[last] {
            Some(n) => vec![n],
            None => self.seq[last].succ.clone(),
        }
    }

    /// A block repeats itself (a single-block loop's second iteration): keep the registers
    /// where a counted loop's cut would end the path (`stops_before`'s `run_start`, the block
    /// before the run: the snapshot before last).
    fn keep_run_cut_point(&mut self) {
        let (Some(at), Some(regs)) = (self.seq.len().checked_sub(2), self.snapshots.iter().rev().nth(1).copied()) else {
            return;
        };
        let i = self.cut_points.partition_point(|(j, _)| *j < at);
        if self.cut_points.get(i).is_none_or(|(j, _)| *j != at) {
            self.cut_points.insert(i, (at, regs));
        }
    }

    /// Cut the path to its first `k` blocks (k ≥ 1), as a round emulated again up to `k`
    /// blocks would have ended: false where the registers at the cut were not kept (then it
    /// must be emulated again).
    fn truncate_to(&mut self, k: usize) -> bool {
        if k == 0 || k >= self.seq.len() {
            return false;
        }
        let Ok(at) = self.cut_points.binary_search_by_key(&k, |(j, _)| *j) else {
            return false;
        };
        let regs = self.cut_points[at].1;
        self.cut_points.truncate(at);
        self.seq.truncate(k);
        self.nexts.truncate(k);
        self.seq_masks.truncate(k);
        self.acc_ends.truncate(k);
        self.accesses.truncate(self.acc_ends.last().copied().unwrap_or(0));
        self.insns = self.seq.iter().map(|b| b.insns.len() as u64).sum();
        // (Block k-1 went on to block k: it ends in no system call.)
        self.call_regs = None;
        self.exit_regs = Some(regs);
        self.snapshots.clear();
        self.cut = false;
        self.why = "cut back (an exit that is a member, or a counted loop left to run natively)";
        true
    }

    /// Where an exit among the path's members, if any, cuts it back to: before its last block
    /// that occurs in it for the first time.
    fn cut_before_member_exit(&self, exits: &[u64]) -> Option<usize> {
        let seq = &self.seq;
        if !seq.iter().skip(1).any(|b| exits.contains(&b.start)) {
            return None;
        }
        let mut seen = FastSet::default();
        Some((1..seq.len()).filter(|&k| seen.insert(seq[k].start)).last().unwrap_or(1))
    }

    /// Emulate the path block by block from the trapped one, as far as the emulator knows
    /// where control goes and `from`'s limits (and `limit` blocks) allow.
    fn walk(&mut self, emu: &mut Emu, sp: &mut Space, f: &mut InstructionInfoFactory, from: &PathFrom, limit: &mut usize) -> Option<Walk> {
        let pc = from.pc;
        loop {
            let b = self.seq.last().cloned()?;
            if self.snapshots.len() == SNAPSHOTS {
                self.snapshots.pop_front();
            }
            self.snapshots.push_back(emu.gprs());
            if self.pushed_cut_point {
                self.cut_points.push((self.seq.len() - 1, emu.gprs()));
                self.pushed_cut_point = false;
            }
            let Some((last, _)) = b.insns.split_last() else {
                // (An empty block: the exit is where the block before it left the registers.)
                if self.seq.len() > 1 {
                    self.exit_regs = Some(emu.gprs());
                }
                return Some(Walk::Ended);
            };
            let bmasks = match emulate_member(emu, f, &b, from, self.seq.len() > 1, &mut self.accesses) {
                Ok(m) => m,
                Err(why) => {
                    self.why = why;
                    // The path ends before this block (it traps and is fed another way).
                    if self.seq.len() == 1 {
                        return Some(Walk::NoPath(why));
                    }
                    self.seq.pop();
                    self.accesses.truncate(self.acc_ends.last().copied().unwrap_or(0));
                    self.exit_regs = self.snapshots.pop_back();
                    return Some(Walk::Ended);
                }
            };
            self.acc_ends.push(self.accesses.len());
            self.seq_masks.push(bmasks);
            self.insns += b.insns.len() as u64;
            let next = follow_exit(emu, f, &b, last, &mut self.call_regs);
            if b.succ_marked.get() != sp.uid {
                for &s in &b.succ {
                    let split = sp.mark_block_start_splitting(s);
                    self.new_marks |= self.splits_path(split);
                }
                b.succ_marked.set(sp.uid);
            }
            // (A block a path went to from here before is marked as a start already.)
            let linked = next.and_then(|n| sp.linked_block(&b, n));
            if let Some(n) = next.filter(|n| linked.is_none() && !b.succ.contains(n)) {
                let split = sp.mark_block_start_splitting(n);
                self.new_marks |= self.splits_path(split);
            }
            self.nexts.push(next);
            let Some(n) = next else {
                self.why = match last.flow {
                    Flow::Stop => "system call",
                    Flow::CondJump(_) => "branch unknown",
                    Flow::Return => "return target unknown",
                    _ => "indirect target unknown",
                };
                break;
            };
            if self.seq.len() >= *limit {
                self.why = "cut back (an exit that is a member, or a counted loop left to run natively)";
                break;
            }
            if sp.is_sticky(n) {
                self.why = "sticky breakpoint";
                break;
            }
            if from.cache_hot > 0 && sp.cache.wanted(n, sp.blocks.get(&n).map_or(0, |x| x.hits.get()), from.cache_hot) {
                self.why = CODE_CACHE;
                break;
            }
            if self.insns >= from.max_path_insns {
                let in_loop = n == pc || sp.blocks.get(&n).is_some_and(|x| x.on_path_round.get() == self.id);
                // (A block that jumps to itself unconditionally never leaves.)
                let endless = n == b.start && matches!(last.flow, Flow::Jump(_));
                if !from.may_extend
                    || !in_loop
                    || endless
                    || self.insns >= from.max_loop_path_insns
                    || self.accesses.len() >= MAX_LOOP_PATH_ACCESSES
                {
                    self.why = "length limit";
                    break;
                }
            }
            let nb = match linked {
                Some(nb) => nb,
                None => sp.next_block(&b, n, f),
            };
            if let Some(why) = self.stops_before(&nb, &b, from, limit) {
                self.why = why;
                break;
            }
            self.seq.push(nb);
        }
        // (The registers after the last block emulated: those the exit trap must show.)
        self.exit_regs = Some(emu.gprs());
        Some(Walk::Ended)
    }

    /// Whether a new block start split a block this round went through (`split`: what
    /// `Space::mark_block_start_splitting` dropped): then it is emulated again with the
    /// blocks decoded anew. A block split elsewhere changes nothing on this path.
    fn splits_path(&mut self, split: Option<Option<Rc<Block>>>) -> bool {
        match split {
            None => false,
            Some(Some(h)) => {
                let on_path = Rc::ptr_eq(&h, &self.seq[0]) || h.on_path_round.get() == self.id;
                if on_path {
                    let first = self.seq.iter().position(|b| Rc::ptr_eq(b, &h)).unwrap_or(0);
                    self.first_split = self.first_split.min(first);
                }
                on_path
            }
            Some(None) => {
                self.first_split = 0;
                true
            }
        }
    }

    /// Why the path cannot go on into `nb`, the block after `b`, if it cannot: a block the
    /// emulator does not follow, the back-off of a `short` path, or a counted loop that has run
    /// long enough to be cut out of the path (`limit` and `cut` set), to run natively.
    fn stops_before(&mut self, nb: &Rc<Block>, b: &Rc<Block>, from: &PathFrom, limit: &mut usize) -> Option<&'static str> {
        // (Flops mode follows masked blocks, their masks computed as they are emulated.)
        let masks_ok = !from.want_accesses && (!nb.needs_step || nb.emu_masks);
        if nb.rep || ((nb.needs_step || !nb.masked.is_empty()) && !masks_ok) {
            return Some(if nb.rep {
                "next block: rep string instruction"
            } else if nb.needs_step {
                "next block: stepped (masks, tiles)"
            } else {
                "next block: masked"
            });
        }
        // (After wasted emulations from here: stop where a loop of several blocks
        // comes round, where the path would be cut back to anyway.)
        let repeated = nb.on_path_round.replace(self.id) == self.id;
        self.pushed_cut_point = !repeated;
        // (A counted single-block loop goes on to be cut out for native execution.)
        if from.short && repeated && !(Rc::ptr_eq(nb, b) && nb.induction.is_some()) {
            return Some("short path (back-off after wasted emulation)");
        }
        // A counted loop is emulated while short; one that can run natively (every
        // counted loop in flops mode, affine ones in memory mode) and goes on past
        // `NATIVE_AFTER` iterations is cut out of the path, to run natively from its trap.
        if Rc::ptr_eq(nb, b) {
            self.repeats += 1;
            if self.repeats == 2 {
                self.keep_run_cut_point();
            }
            if nb.induction.is_some() && (!from.want_accesses || nb.affine.is_some()) && self.repeats >= NATIVE_AFTER {
                let run_start = self.seq.len() - self.repeats as usize;
                if run_start > 0 {
                    *limit = run_start;
                    self.cut = true;
                }
                return Some("counted loop left to run natively");
            }
        } else {
            self.repeats = 1;
        }
        None
    }
}

/// Emulate path block `b` up to its last instruction (not stepped: `follow_exit`), collecting
/// its accesses (memory mode) and, for a block after the trapped one (`member`), the opmasks of
/// its masked instructions. Err: why the path must end before the block.
fn emulate_member(
    emu: &mut Emu,
    f: &mut InstructionInfoFactory,
    b: &Block,
    from: &PathFrom,
    member: bool,
    accesses: &mut Vec<Access>,
) -> Result<Vec<Option<u64>>, &'static str> {
    let (want_accesses, regs) = (from.want_accesses, from.regs);
    let Some((last, body)) = b.insns.split_last() else {
        return Ok(Vec::new());
    };
    // With the other threads held, a system call could wait for one of them
    // forever: the path ends before it.
    let mut known = !(from.held && last.flow == Flow::Stop);
    // (Not for the trapped block: `block_enter` counts it with its own masks.)
    let track = !want_accesses && member && !b.masked.is_empty();
    let mut bmasks: Vec<Option<u64>> = Vec::new();
    let mut mask_unknown = false;
    for (idx, insn) in body.iter().enumerate() {
        if want_accesses && !emulated_accesses(emu, insn, regs, accesses) {
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
    if known && want_accesses && !emulated_accesses(emu, last, regs, accesses) {
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
        return Err(if mask_unknown {
            "masks unknown"
        } else if from.held && last.flow == Flow::Stop {
            "system call while others held"
        } else {
            "addresses unknown"
        });
    }
    Ok(bmasks)
}

/// Where control goes after `b`'s last instruction `last`, as the emulator computes it (None
/// where it does not know), with `last` emulated where what follows depends on it.
fn follow_exit(
    emu: &mut Emu,
    f: &mut InstructionInfoFactory,
    b: &Block,
    last: &Insn,
    call_regs: &mut Option<[Option<u64>; 16]>,
) -> Option<u64> {
    match last.flow {
        Flow::Next => {
            emu.step(&last.instr, f);
            Some(b.end)
        }
        Flow::Stop => {
            // (A syscall: the registers after it are the kernel's; the emulator
            // forgets them all.)
            *call_regs = Some(emu.gprs());
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
    }
}

/// The addresses control can leave path `seq` to, whose breakpoints must be in: its `exits`,
/// and every successor of a path block that the path does not take (a safety net: the emulator
/// decided they are not taken), neither a member nor the trapped block at `pc`.
fn path_exits(seq: &[Rc<Block>], exits: Vec<u64>, pc: u64, members: &FastSet) -> Vec<u64> {
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
    keep
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

pub(super) fn regs_differing(expected: &[Option<u64>; 16], regs: &libc::user_regs_struct) -> Vec<(&'static str, u64, u64)> {
    expected
        .iter()
        .zip(gpr_values(regs))
        .zip(GPR_NAMES)
        .filter_map(|((e, a), name)| e.filter(|e| *e != a).map(|e| (name, e, a)))
        .collect()
}

/// Whether the registers at a trap agree with every register the emulator knew for it.
pub(super) fn regs_agree(expected: &[Option<u64>; 16], regs: &libc::user_regs_struct) -> bool {
    expected.iter().zip(gpr_values(regs)).all(|(e, a)| e.is_none_or(|e| e == a))
}
