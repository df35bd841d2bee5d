//! Thread states: what each thread's next stop means (`StepKind`), how it runs natively (`RunAs`),
//! joining and leaving counting, holding the other threads for a run-ahead path, and the
//! handling of stops, steps and signals.

use nix::errno::Errno;
use nix::libc;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::rc::Rc;

use crate::counters::trace::classify::Insn;
use crate::counters::trace::sources::Site;
use crate::counters::trace::sys;

use super::block::{Block, Induction};
use super::run_ahead::{regs_agree, regs_differing};
use super::space::INT3;
use super::{ExitStateDetail, Tracer};

/// The other threads of a space held stopped while one runs a run-ahead path
/// (`Tracer::hold_others`, docs/trace.md "Run-ahead with several threads").
pub(super) struct Hold {
    pub(super) space: usize,
    pub(super) holder: Pid,
    /// Stopped by the tracer's SIGSTOP, to be let go as that stop would have been.
    pub(super) held: Vec<Pid>,
    /// Wait statuses of the space's other threads that arrived meanwhile, handled after.
    pub(super) events: Vec<WaitStatus>,
    /// Breakpoints taken out for the path (its members, the trapped block): back in at release.
    pub(super) reinstall: Vec<u64>,
}

/// What the next SIGTRAP of a thread means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum StepKind {
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
pub(super) enum Then {
    /// Counted as it arrives at the next instruction (stepping mode, or joining counting).
    Arrive,
    /// Stepping through the block `start..end`.
    Through { start: u64, end: u64 },
    /// Feeding the addresses of the block `start..end`.
    Feed { start: u64, end: u64 },
}

impl Then {
    /// How the thread is stepped once out of the copy.
    pub(super) fn step_kind(self) -> StepKind {
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
pub(super) enum RunAs {
    /// Not counting (before the entry point, outside regions): nothing it runs is counted.
    Outside,
    /// Block mode: the block it is in was counted at its entry, and every place it can go
    /// next carries a breakpoint.
    Blocks,
    /// A counted loop, run natively (trip count at its exit trap).
    Loop,
}

#[derive(Debug, Clone)]
pub(super) struct Native {
    pub(super) head: u64,
    /// The loop's block as it was when the loop started: another thread may split it (a jump
    /// into its middle found meanwhile) while this one runs it whole.
    pub(super) block: Rc<Block>,
    pub(super) exit: u64,
    pub(super) ind: Induction,
    pub(super) entry: u64,
    pub(super) masks: Vec<Option<u64>>,
    /// Memory mode: the registers at the loop's entry, to replay its addresses at its exit.
    pub(super) regs: Option<Box<libc::user_regs_struct>>,
}

pub(super) struct Thread {
    pub(super) space: usize,
    pub(super) started: bool,
    pub(super) step: StepKind,
    pub(super) reinstall: Vec<u64>,
    pub(super) pending_rep: Option<(Rc<Insn>, u64, Rc<Site>)>,
    pub(super) native: Option<Native>,
    /// A SIGSTOP was sent to bring it into the current counting state.
    pub(super) stop_requested: bool,
    pub(super) run_as: RunAs,
    /// Index in `Tracer::per_thread`.
    pub(super) index: usize,
    /// After a run-ahead path: the only addresses the next trap may be at.
    pub(super) expect: Option<Vec<u64>>,
    /// After a run-ahead path: the general registers the emulator computed for its exit
    /// (`Emu::gprs` order, None where unknown), checked at the next trap.
    pub(super) expect_regs: Option<Box<[Option<u64>; 16]>>,
    /// The path those registers were predicted on: (its trap address, blocks, last block).
    pub(super) expect_path: (u64, usize, u64),
    /// The block this thread was let run natively after counting it whole at its entry
    /// (start, end), while its space has several threads: a breakpoint another thread's stop
    /// placed inside it meanwhile is passed, not counted again.
    pub(super) counted: Option<(u64, u64)>,
    /// The AMX tile load or store this thread was last single-stepped over (counted before the
    /// step): a trap back at the same address means it did not complete (see
    /// `Tracer::tile_restart`).
    pub(super) stepped_tile: Option<u64>,
    /// Memory mode with several threads: it entered a system call at its last trap, whose
    /// return value the next trap reads (rax) for the interleaving (`interleave.rs`).
    pub(super) in_call: Option<u64>,
    /// Its rseq(2) area [start, end), once registered: what its emulations read as unknown.
    pub(super) rseq: Option<(u64, u64)>,
}

impl Thread {
    pub(super) fn new(space: usize) -> Thread {
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

impl Tracer<'_> {
    /// The invariant check: a thread that stops while its space counts must have been let run
    /// in a counted way (blocks, a counted loop, a step), or have been asked to stop to join
    /// counting. Anything else is a stretch nobody counted: recorded, and said in the report.
    pub(super) fn check_gap(&mut self, pid: Pid) {
        let Some(th) = self.threads.get(&pid) else { return };
        if !th.started || th.stop_requested || th.step != StepKind::None || th.run_as != RunAs::Outside {
            return;
        }
        if self.spaces[th.space].active() {
            let pc = self.regs(pid).map(|r| r.rip).unwrap_or(0);
            self.stats.gaps.push((pid.as_raw(), pc));
        }
    }

    /// Counting just started in space `si` (entry point, a region begun) in thread `by`: every
    /// other thread of the space running natively outside counting is stopped, to start
    /// counting where it stands (`on_requested_stop`). Threads not yet started are left alone:
    /// their first stop starts them in the state of that moment.
    pub(super) fn bring_in_others(&mut self, si: usize, by: Pid) {
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
    pub(super) fn let_others_go(&mut self, si: usize, by: Pid) {
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

    /// Several threads share space `si`'s text, so a run-ahead path, which takes its members'
    /// breakpoints out, may run only while no other thread runs: stop them all (SIGSTOP, as
    /// `bring_in_others` does) and keep them stopped until `holder` stops again
    /// (`release_hold`). Their wait statuses that arrive meanwhile wait too. False, with
    /// nothing held, when one has not stopped within 20 ms (a `vfork` parent waits for its
    /// child in a state no signal interrupts): holding is then not tried for the next 1000
    /// traps.
    pub(super) fn hold_others(&mut self, si: usize, holder: Pid) -> bool {
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
    pub(super) fn hold_worth_trying(&mut self, si: usize, pc: u64) -> bool {
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
    pub(super) fn release_hold(&mut self) {
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
        let Ok(mut regs) = self.regs(pid) else {
            self.cont(pid, None);
            return;
        };
        // Stopped inside a system call the kernel would restart at rip - 2: restart it here,
        // so that the counted path starts at the `syscall` instruction itself.
        if let Some(r) = sys::restarted_syscall(&regs) {
            regs = r;
            self.set_regs(pid, &regs);
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

    pub(super) fn on_stop(&mut self, pid: Pid, sig: Signal) {
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
        let Ok(mut regs) = self.regs(pid) else {
            {
                self.flush_all();
                let _ = ptrace::cont(pid, Some(sig));
            }
            return;
        };
        let Some(th) = self.threads.get_mut(&pid) else { return };
        // Only the stop right after its step can be a restart of the tile instruction stepped.
        let stepped_tile = th.stepped_tile.take();
        if sig == Signal::SIGTRAP {
            let step = th.step;
            let si = th.space;
            if step != StepKind::None {
                self.on_step_stop(pid, si, step, regs, stepped_tile);
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
            // An exit of a translation in the code cache.
            if self.spaces[si].cache.holds(at) && self.on_cache_trap(pid, si, at, regs) {
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
                self.check_prediction(pid, at, &regs);
                self.move_rip(pid, &mut regs, at);
                self.resolve_rep(pid, &regs);
                self.do_reinstall(pid);
                self.on_bp(pid, at, regs);
                return;
            }
        }
        self.deliver(pid, sig, regs);
    }

    /// The SIGTRAP of a thread that was single-stepped (`step`, not `StepKind::None`): a step the
    /// kernel cut short inside a system call is asked again, a step that ran one of our
    /// breakpoints armed meanwhile is redone through its displaced copy, and a completed step
    /// goes on as `step` says (`on_step`). `stepped_tile`: the AMX tile load or store stepped.
    fn on_step_stop(&mut self, pid: Pid, si: usize, step: StepKind, mut regs: libc::user_regs_struct, stepped_tile: Option<u64>) {
        if let sys::StepStop::Interrupted(restart) = sys::judge_step_stop(&regs) {
            // Nothing after the interrupted call ran: restart it where it is and ask the
            // same step again (its instruction was counted when the step was asked).
            self.stats.interrupted_steps += 1;
            self.set_regs(pid, &restart);
            self.step(pid, None);
            return;
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
        self.resolve_rep(pid, &regs);
        self.do_reinstall(pid);
        if stepped_tile == Some(regs.rip) {
            self.tile_restart = Some((pid, regs.rip));
        }
        self.on_step(pid, step, regs);
        self.tile_restart = None;
    }

    /// A trap of `pid` at our breakpoint `at` after a run-ahead path: a trap at no exit the path
    /// predicted, or registers other than the emulator computed for the exit, is a mispredict
    /// (counted, and the first few kept for the report).
    fn check_prediction(&mut self, pid: Pid, at: u64, regs: &libc::user_regs_struct) {
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
                && !regs_agree(&er, regs)
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
                        differing: regs_differing(&er, regs),
                    });
                }
            }
        }
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
    pub(super) fn move_rip(&mut self, pid: Pid, regs: &mut libc::user_regs_struct, to: u64) {
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
        self.set_regs(pid, regs);
    }

    /// Registers for the stopped thread `pid`, written in `flush_all` before anything runs:
    /// a stop that moves `rip` twice (back over the trap, then into a translation) costs one
    /// SETREGS, not two.
    pub(super) fn set_regs(&mut self, pid: Pid, regs: &libc::user_regs_struct) {
        match self.regs_out.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, r)) => *r = *regs,
            None => self.regs_out.push((pid, *regs)),
        }
    }

    /// The registers of the stopped thread `pid`: those set and not yet written, else the
    /// kernel's.
    pub(super) fn regs(&self, pid: Pid) -> nix::Result<libc::user_regs_struct> {
        match self.regs_out.iter().find(|(p, _)| *p == pid) {
            Some((_, r)) => Ok(*r),
            None => ptrace::getregs(pid),
        }
    }

    /// `ROOFLINE_TRACE_DEBUG`: where a fault the program is about to receive happened, and in
    /// what state the tracer had left the thread.
    fn debug_fault(&self, pid: Pid, sig: Signal, regs: &libc::user_regs_struct) {
        let Some(th) = self.threads.get(&pid) else { return };
        let sp = &self.spaces[th.space];
        let addr = fault_address(pid);
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
    pub(super) fn step_on(&mut self, pid: Pid, si: usize, pc: u64, regs: libc::user_regs_struct, then: Then) {
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

    pub(super) fn set_step(&mut self, pid: Pid, s: StepKind) {
        if let Some(t) = self.threads.get_mut(&pid) {
            t.step = s;
        }
    }

    /// The thread is about to execute `pc` (not through an int3): treat it as reaching a breakpoint there.
    pub(super) fn arrive(&mut self, pid: Pid, pc: u64, regs: libc::user_regs_struct) {
        self.on_bp(pid, pc, regs);
    }
}

/// The address the kernel reported with the signal thread `pid` is stopped for (0 where it
/// cannot be read).
fn fault_address(pid: Pid) -> u64 {
    // SAFETY: `si_addr` reads a union member of the siginfo_t that PTRACE_GETSIGINFO copied
    // whole from the kernel: for the fault signals `debug_fault` reports (SIGSEGV, SIGBUS,
    // SIGILL, SIGTRAP) the address the kernel gives with them, otherwise the bytes of another
    // member; initialised plain integers either way.
    ptrace::getsiginfo(pid).map(|i| unsafe { i.si_addr() } as u64).unwrap_or(0)
}
