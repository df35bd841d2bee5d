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
//!
//! Rooms: this file drives (the run loop, ptrace events, resuming threads); `threads.rs` keeps
//! the thread states (stops, steps, signals, joining counting, holds); `space.rs` an address
//! space's code and breakpoints; `block.rs` decodes blocks; `count.rs` counts at block traps;
//! `run_ahead.rs` emulates the paths ahead; `displaced.rs` places the scratch-slot copies;
//! `feed.rs` feeds addresses to the cache simulator.

mod block;
mod cache;
mod cache_state;
mod count;
mod displaced;
mod feed;
mod run_ahead;
mod space;
mod spin;
mod threads;

use iced_x86::InstructionInfoFactory;
use nix::errno::Errno;
use nix::libc;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::cache_code;
use super::classify::Flow;
use super::interleave::Interleave;
use super::lockstep::{Lockstep, SLEEP_IDLE, Turn};
use super::regions::Regions;
use super::sources::{Site, Sources};
use super::sys::{self, XsaveLayout};
use super::tally::Tally;
use super::{AccessSink, TraceMode};
use crate::counters::command::CommandSpec;
use crate::error::{Error, Result};
use spin::Spin;

use feed::asleep_in;
use space::{Space, Sticky};
use threads::{Hold, RunAs, StepKind, Thread};

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
    /// Ranges of known code unmapped (`munmap`/`mremap`: a library closed), forgotten.
    pub unmapped_code: u64,
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
    /// Reference mode: idle threads (asleep in a stepped system call) that stopped without a
    /// stepped call waking them: they rejoined the turns at a moment the run did not decide.
    pub idle_ends_unwoken: u64,
    /// Waits for a stop that polled first (`spin.rs`), and of these the ones whose stop came
    /// while polling.
    pub polled_waits: u64,
    pub polls_caught: u64,
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
    /// Instructions of run-ahead rounds thrown away and emulated again, by cause (part of
    /// `emulated_instructions`).
    pub emulated_again: std::collections::BTreeMap<&'static str, u64>,
    /// Code cache (`ROOFLINE_TRACE_CACHE`): blocks translated, translations refused, threads
    /// sent in at a trap, exit-stub and miss traps (of these, misses whose target had a
    /// translation that the table did not hold), return sites translated with their call's
    /// block, stubs linked, counter reads, and block
    /// executions counted from the counters.
    pub cache_translations: u64,
    pub cache_refused: u64,
    /// Of those, refused because the threads' counter areas were full.
    pub cache_counters_full: u64,
    pub cache_entries: u64,
    pub cache_exits: u64,
    pub cache_misses: u64,
    pub cache_misses_translated: u64,
    /// Lookup misses whose branch the tracer could not do itself (single-stepped).
    pub cache_misses_stepped: u64,
    /// Run-ahead paths translated whole at their trap (`Tracer::cache_path`).
    pub cache_paths: u64,
    pub cache_return_sites: u64,
    pub cache_links: u64,
    pub cache_flushes: u64,
    pub cache_blocks: u64,
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
    /// Reference mode with several threads: its stepped system calls, the first
    /// `TURN_SYSCALLS_KEPT`, each `number=result`, and how one that slept ended (what two runs
    /// that differ are compared by first).
    pub turn_syscalls: Vec<String>,
}

/// How many stepped system calls a thread's stats keep.
const TURN_SYSCALLS_KEPT: usize = 64;

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
    /// Registers set for stopped threads and not yet written (`move_rip`): written once, in
    /// `flush_all` before anything runs, however often the stop moved `rip`.
    regs_out: Vec<(Pid, libc::user_regs_struct)>,
    /// Whether and how long `wait_any` polls before it sleeps (`spin.rs`).
    spin: Spin,
    /// Test instrument (`ROOFLINE_TRACE_FAULT=no-join`): threads are not stopped to join
    /// counting, so the tests can see the gap check report what that loses.
    fault_no_join: bool,
    /// The site given to work when nothing is attributed (no `--by-function`).
    no_site: Rc<Site>,
    /// `ROOFLINE_TRACE_DEBUG`: the driver says on stderr where it steps over and mispredicts.
    debug: bool,
    /// `ROOFLINE_TRACE_STEP_LOG=DIR`: every single-stepped instruction, `thread-order address`,
    /// into DIR/steps-PID.txt (two reference runs that differ are compared by it).
    step_log: Option<std::io::BufWriter<std::fs::File>>,
    step_log_dir: Option<std::ffi::OsString>,
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
    /// `ROOFLINE_TRACE_CACHE=K`: executions that make a block hot enough to translate into the
    /// code cache (`cache.rs`): 2 unless set; 0 leaves the cache off.
    cache_hot: u32,
    /// `ROOFLINE_TRACE_CACHE_PATH=N`: a run-ahead path of at most N different blocks that ends
    /// before the code cache is translated whole at its trap (`Tracer::cache_path`); 0: never.
    cache_path: usize,
    /// `ROOFLINE_TRACE_COUNTERS=N` (tests): counters per thread (`THREAD_COUNTERS` unless set),
    /// so that running out of them can be tried on a small program.
    thread_counters: u64,
}

/// Run-ahead paths of up to this many different blocks, ending before the code cache, are
/// translated whole where `ROOFLINE_TRACE_CACHE_PATH` does not say.
const DEFAULT_CACHE_PATH: usize = 64;

/// Executions that make a block hot enough for the code cache where `ROOFLINE_TRACE_CACHE`
/// does not say: blocks run once stay with the run-ahead, which emulates a path of them per
/// stop; 1 and 2 cost the same on a start-up-heavy program (CPython with numpy), 3 more.
const DEFAULT_CACHE_HOT: u32 = 2;

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
            regs_out: Vec::new(),
            spin: Spin::new(std::time::Duration::from_micros(
                std::env::var("ROOFLINE_TRACE_SPIN_US")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(200),
            )),
            fault_no_join: std::env::var("ROOFLINE_TRACE_FAULT").is_ok_and(|v| v == "no-join"),
            no_site: Rc::new(Site::symbol(Rc::from(""))),
            debug: std::env::var_os("ROOFLINE_TRACE_DEBUG").is_some(),
            step_log: None,
            step_log_dir: std::env::var_os("ROOFLINE_TRACE_STEP_LOG"),
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
            cache_hot: std::env::var("ROOFLINE_TRACE_CACHE")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_CACHE_HOT),
            cache_path: std::env::var("ROOFLINE_TRACE_CACHE_PATH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_CACHE_PATH),
            thread_counters: std::env::var("ROOFLINE_TRACE_COUNTERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n| (16..=cache_code::THREAD_COUNTERS).contains(&n))
                .unwrap_or(cache_code::THREAD_COUNTERS),
        }
    }

    /// Trace a command from its exec: counting starts at its entry point (AT_ENTRY).
    pub fn run_command(
        cmd: &CommandSpec,
        mode: TraceMode,
        by_function: bool,
        sink: Option<&'s mut dyn AccessSink>,
    ) -> Result<(Tracer<'s>, Ending)> {
        let child = sys::spawn_traced(cmd)?;
        match waitpid(child, Some(WaitPidFlag::__WALL)).map_err(|e| io("waitpid", e))? {
            WaitStatus::Stopped(_, Signal::SIGTRAP) => {}
            other => {
                return Err(Error::Child {
                    cause: format!("{} did not start under the tracer ({other:?})", cmd.argv[0]),
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
        sp.set_sticky(begin, Sticky::Begin);
        sp.set_sticky(end, Sticky::End);
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
            sp.set_sticky(entry, Sticky::Entry);
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
                match self.wait_any() {
                    Ok(s) => s,
                    Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => break,
                    Err(e) => return Err(io("waitpid", e)),
                }
            };
            self.stats.stops += 1;
            // Reference mode: after a stepped system call, the idle threads it woke rejoin.
            let idle_ended = st.pid().and_then(|p| self.lockstep.idle_ends(p));
            let woke = st.pid().and_then(|p| self.lockstep.seen(p)).is_some_and(|f| f.turn.syscall);
            if woke || idle_ended.is_some() {
                self.note_turn_syscall(&st, idle_ended);
            }
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
        if let Some(w) = &mut self.step_log {
            let _ = std::io::Write::flush(w);
        }
        Ok(self.ending.unwrap_or(Ending::Exited(0)))
    }

    /// The next wait status of any tracee: polled for a while first where that pays, then
    /// slept for (`spin.rs`).
    fn wait_any(&mut self) -> nix::Result<WaitStatus> {
        let window = self.spin.next_window();
        let mut seen = None;
        if !window.is_zero() {
            let until = std::time::Instant::now() + window;
            self.stats.polled_waits += 1;
            seen = loop {
                match waitpid(None, Some(any_own_child() | WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) => {}
                    other => break Some(other),
                }
                if std::time::Instant::now() >= until {
                    break None;
                }
                std::hint::spin_loop();
            };
            self.stats.polls_caught += u64::from(seen.is_some());
        }
        let st = seen.unwrap_or_else(|| waitpid(None, Some(any_own_child())));
        self.spin.stopped(std::time::Instant::now());
        st
    }

    /// Reference mode with several threads: the next thread in turn steps (`lockstep.rs`), and
    /// the next wait status comes. None when the stepping thread went idle (asleep in a system
    /// call) or the wait was interrupted: ask again.
    fn lockstep_wait(&mut self) -> std::result::Result<Option<WaitStatus>, Errno> {
        let now_only = Some(any_own_child() | WaitPidFlag::WNOHANG);
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
            return self.wait_any().map(Some);
        }
        let mut rounds = 0u32;
        loop {
            match waitpid(None, now_only)? {
                WaitStatus::StillAlive => {}
                st => return Ok(Some(st)),
            }
            if sys::interrupted() || self.lockstep.flight_sleeps(sys::task_sleep(turn.pid), std::time::Instant::now()) {
                return Ok(None);
            }
            short_pause(&mut rounds);
        }
    }

    /// Reference mode: a stepped system call's stop, or an idle thread's (`idle_ended`: woken
    /// by a stepped call, or not), in its thread's `turn_syscalls`.
    fn note_turn_syscall(&mut self, st: &WaitStatus, idle_ended: Option<bool>) {
        let Some(pid) = st.pid() else { return };
        let Some(index) = self.threads.get(&pid).map(|t| t.index) else {
            return;
        };
        let entry = match (st, self.regs(pid)) {
            (WaitStatus::Stopped(..), Ok(r)) => format!("{}={}", r.orig_rax as i64, r.rax as i64),
            _ => format!("{st:?}"),
        };
        let how = match idle_ended {
            None => "",
            Some(true) => " (slept, woken by a stepped call)",
            Some(false) => " (slept, ended on its own)",
        };
        if idle_ended == Some(false) {
            self.stats.idle_ends_unwoken += 1;
        }
        if let Some(s) = self.stats.per_thread.get_mut(index)
            && s.turn_syscalls.len() < TURN_SYSCALLS_KEPT
        {
            s.turn_syscalls.push(format!("{entry}{how}"));
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
                        self.lockstep.mark_woken(pid);
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
        while let Ok(s) = waitpid(None, Some(any_own_child())) {
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

    fn gone(&mut self, pid: Pid) {
        self.regs_out.retain(|(p, _)| *p != pid);
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

    /// Write every space's changed breakpoints and code cache, and the registers set for
    /// stopped threads (before any tracee runs).
    fn flush_all(&mut self) {
        for (pid, regs) in self.regs_out.drain(..) {
            let _ = ptrace::setregs(pid, regs);
        }
        for sp in &mut self.spaces {
            if !sp.dirty.is_empty() {
                sp.flush();
            }
            if !sp.cache.pending.is_empty() && !sp.cache.write_pending(&sp.mem) {
                // (A translation half written is never entered: none from now on.)
                sp.cache.failed = true;
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
        let rip = self.regs(pid).ok()?.rip;
        let sp = &mut self.spaces[si];
        let syscall = !sp.xol.in_areas(rip) && sp.insn_at(rip, &mut self.factory).flow == Flow::Stop;
        Some((order, syscall))
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
            if let Ok(regs) = self.regs(pid) {
                let nat = self.threads.get_mut(&pid).and_then(|t| t.native.take());
                if let Some(nat) = nat {
                    self.finish_loop(pid, space, &nat, &regs);
                }
                self.resolve_rep(pid, &regs);
            }
            self.flush_cache(pid, space);
            self.drop_thread_counters(pid, space);
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
                self.spaces.push(copy);
                let child = self.spaces.len() - 1;
                self.rebase_cache(child, pid, new);
                let copy = self.spaces.pop().expect("pushed above");
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
        let Ok(regs) = self.regs(pid) else {
            self.cont(pid, None);
            return;
        };
        self.arrive(pid, regs.rip, regs);
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

/// The flags of a wait for any tracee of this tracer: every thread (`__WALL`), and only the
/// children of the calling thread (`__WNOTHREAD`). The tracer forks or spawns its tracee
/// from the thread that then waits, and the kernel attaches the tracee's new threads to that
/// thread; without `__WNOTHREAD` a wait for "any child" also takes the stops of children
/// another thread of this process traces or waits for (two tracers in one test binary, or a
/// program's own child), and both hang.
fn any_own_child() -> WaitPidFlag {
    WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD
}
