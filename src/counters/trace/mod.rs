//! The trace backend: exact W and core-side Q of any x86-64 Linux program without a
//! PMU, by running it under ptrace and decoding what it executes with iced-x86.
//!
//! - [`classify`]: per instruction, FP_ARITH_INST_RETIRED class and flops, memory operands;
//! - [`tracer`]: the ptrace driver (block breakpoints, run-ahead over the blocks whose path it
//!   can compute, native counted loops, single-step fallback); `emu`: the run-ahead's emulator;
//! - [`symbols`]: ELF symbols and /proc/PID/maps for per-function attribution;
//! - [`tally`]: the running totals; [`sys`]: raw ptrace/XSAVE/procfs helpers.
//!
//! `--trace memory` also hands every effective address, in program order, to an
//! [`AccessSink`] (the cache simulator implements it): computed from the registers at each
//! block's entry or by the run-ahead emulator, replayed for affine loops, single-stepped only
//! where an address cannot be computed. See docs/trace.md.

mod cache_code;
pub mod classify;
mod emu;
mod interleave;
mod lockstep;
pub mod regions;
pub mod sources;
pub mod symbols;
pub mod sys;
pub mod tally;
pub mod tracer;
pub mod xol;

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::counters::command::CommandSpec;
use crate::counters::{Measurement, RegionMeasurement};
use crate::error::{Error, Result};
use crate::schema::extras::WorkRow;
use crate::schema::report::level;
use crate::schema::{Flops, PointExtras, Provenance, Source};
use sources::ChainFrame;
use tally::Tally;
use tracer::{DriverStats, Ending, Tracer};

/// `extra.by_line[].chains`: the inline chains listed per row, most flops first; the count of
/// the others is `chains_left_off`.
const CHAINS_PER_LINE: usize = 8;

/// What the trace counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceMode {
    /// W and core-side Q only: block breakpoints, loops run natively (fast).
    #[default]
    Flops,
    /// Also every effective address, for a cache simulator: computed per block from the
    /// registers at its entry; blocks whose addresses cannot be computed are single-stepped.
    Memory,
    /// W and core-side Q by single-stepping every instruction of every thread, with no
    /// shortcut (no block counting, run-ahead or native loops): the ground truth the fast
    /// paths are tested against. Slow (10⁴× native).
    Reference,
}

impl TraceMode {
    /// Whether every instruction is single-stepped once counting starts.
    pub fn single_steps(self) -> bool {
        matches!(self, TraceMode::Reference)
    }
}

/// What an access does, for a cache model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    Store,
    /// Non-temporal store: bypasses the caches.
    NtStore,
    /// Software prefetch of one line.
    Prefetch,
}

/// Receiver of effective addresses in `--trace memory` mode (implemented by the cache simulator).
pub trait AccessSink {
    /// An access of `size` bytes at `addr`.
    fn access(&mut self, addr: u64, size: u32, kind: AccessKind);
    /// An access by traced thread `thread`: a dense id (0 for the first thread seen, the lowest
    /// free one for a new thread; an exited thread's id is reused, as a core runs the next
    /// thread). The tracer calls this; by default it is [`AccessSink::access`].
    fn access_by(&mut self, thread: usize, addr: u64, size: u32, kind: AccessKind) {
        let _ = thread;
        self.access(addr, size, kind);
    }
    /// Bytes per memory level (`l2`, `l3`, `dram`) once the trace is over. Called once, at
    /// the end: a cache model may write back what is still dirty in place.
    fn bytes_per_level(&mut self) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// Bytes per memory level moved so far (no write-back of what is still dirty): the
    /// difference of two is a region's traffic.
    fn bytes_so_far(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// A caveat for the report's provenance notes.
    fn note(&self) -> Option<String> {
        None
    }
}

/// Counts accesses and bytes (tests, and a sanity figure when no cache model is attached).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CountingSink {
    /// Load accesses.
    pub loads: u64,
    /// Store accesses (non-temporal ones included).
    pub stores: u64,
    /// Non-temporal store accesses.
    pub nt_stores: u64,
    /// Software prefetches.
    pub prefetches: u64,
    /// Bytes loaded.
    pub load_bytes: u64,
    /// Bytes stored.
    pub store_bytes: u64,
}

impl AccessSink for CountingSink {
    fn access(&mut self, _addr: u64, size: u32, kind: AccessKind) {
        match kind {
            AccessKind::Load => {
                self.loads += 1;
                self.load_bytes += u64::from(size);
            }
            AccessKind::Store | AccessKind::NtStore => {
                if kind == AccessKind::NtStore {
                    self.nt_stores += 1;
                }
                self.stores += 1;
                self.store_bytes += u64::from(size);
            }
            AccessKind::Prefetch => self.prefetches += 1,
        }
    }
}

/// Options of a trace run.
#[derive(Default)]
pub struct TraceOptions {
    /// What to count (instructions only, or memory accesses too).
    pub mode: TraceMode,
    /// Attribute W and Q to the function holding each instruction (`--by function`).
    pub by_function: bool,
    /// Receiver of effective addresses in memory mode (the cache simulator).
    pub sink: Option<Box<dyn AccessSink>>,
}

impl std::fmt::Debug for TraceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceOptions")
            .field("mode", &self.mode)
            .field("by_function", &self.by_function)
            .field("sink", &self.sink.is_some())
            .finish()
    }
}

/// The result of one trace: totals, per function, and the driver's own figures.
#[derive(Debug, Clone, Default)]
pub struct TraceResult {
    pub total: Tally,
    /// `--by-function`: work per function (the innermost frame of the program's own code,
    /// `sources.rs`), most flops first.
    pub per_function: Vec<(String, Tally)>,
    /// `--by-function`: work per source line, most flops first (only where DWARF gives lines).
    pub per_line: Vec<SourceLine>,
    pub stats: DriverStats,
    pub levels: Vec<(String, f64)>,
    pub notes: Vec<String>,
    /// Per region name of the region API's markers (`regions.rs`), in first-begin order.
    pub regions: Vec<regions::TracedRegion>,
}

/// Work counted at one source line of one function.
#[derive(Debug, Clone)]
pub struct SourceLine {
    /// `file:line`.
    pub line: String,
    pub function: String,
    pub tally: Tally,
    /// The row's work per inline chain (`Site::chain`: every frame, innermost first, the
    /// row's own among them), most flops first.
    pub chains: Vec<(Rc<[ChainFrame]>, Tally)>,
}

fn ending_to_result(argv0: &str, e: Ending) -> Result<()> {
    match e {
        Ending::Exited(0) => Ok(()),
        Ending::Exited(code) => Err(Error::Child {
            cause: format!("{argv0} exited with status {code}"),
            status: code,
        }),
        Ending::Signaled(sig) => Err(Error::Child {
            cause: format!("{argv0} was killed by {sig} (no report written)"),
            status: 128 + sig as i32,
        }),
        Ending::Interrupted => Err(Error::Child {
            cause: "interrupted: the traced command was killed".to_string(),
            status: 130,
        }),
    }
}

fn collect(t: &mut Tracer<'_>) -> TraceResult {
    let now = t.snapshot();
    let regions = std::mem::take(&mut t.regions).finish(&now);
    // Sites are interned per run, but two spaces (a fork, an exec) may resolve the same
    // place: sum by content.
    let mut by_function: BTreeMap<String, Tally> = BTreeMap::new();
    type Chains = BTreeMap<Rc<[ChainFrame]>, Tally>;
    let mut by_line: BTreeMap<(String, String), (Tally, Chains)> = BTreeMap::new();
    for (site, tally) in t.per_site.values() {
        by_function.entry(site.function.to_string()).or_default().add_scaled(tally, 1);
        if let Some(line) = &site.line {
            let row = by_line.entry((line.to_string(), site.function.to_string())).or_default();
            row.0.add_scaled(tally, 1);
            row.1.entry(site.chain.clone()).or_default().add_scaled(tally, 1);
        }
    }
    let most_work_first = |a: &Tally, b: &Tally| b.flops_total().cmp(&a.flops_total()).then(b.instructions.cmp(&a.instructions));
    let mut per_function: Vec<(String, Tally)> = by_function.into_iter().collect();
    per_function.sort_by(|a, b| most_work_first(&a.1, &b.1));
    let mut per_line: Vec<SourceLine> = by_line
        .into_iter()
        .map(|((line, function), (tally, chains))| {
            let mut chains: Vec<(Rc<[ChainFrame]>, Tally)> = chains.into_iter().collect();
            chains.sort_by(|a, b| most_work_first(&a.1, &b.1));
            SourceLine {
                line,
                function,
                tally,
                chains,
            }
        })
        .collect();
    per_line.sort_by(|a, b| most_work_first(&a.tally, &b.tally));
    let mut notes = Vec::new();
    if let Some(src) = &t.sources {
        let src = src.borrow();
        let bare: Vec<&str> = src.without_lines().collect();
        if !bare.is_empty() {
            notes.push(format!(
                "by function: no debug info in {}; work there is attributed to symbols, without source lines (build with line tables, e.g. `debug = \"line-tables-only\"`, or install the library's debug symbols)",
                bare.join(", ")
            ));
        }
    }
    TraceResult {
        total: t.total.clone(),
        per_function,
        per_line,
        stats: t.stats.clone(),
        levels: Vec::new(),
        notes,
        regions,
    }
}

/// Trace `cmd` to its end. The command's failure (non-zero exit, a signal, Ctrl-C) is an
/// `Error::Child` carrying its status.
pub fn trace_command(cmd: &CommandSpec, opts: &mut TraceOptions) -> Result<TraceResult> {
    let argv = &cmd.argv;
    if argv.is_empty() {
        return Err(Error::input("no command given", "roofline measure --backend trace -- CMD [ARGS…]"));
    }
    let mut sink = opts.sink.take();
    let r = {
        let s: Option<&mut dyn AccessSink> = match sink.as_mut() {
            Some(b) => Some(b.as_mut()),
            None => None,
        };
        let (mut t, end) = Tracer::run_command(cmd, opts.mode, opts.by_function, s)?;
        ending_to_result(&argv[0], end)?;
        collect(&mut t)
    };
    let mut r = r;
    if let Some(s) = &mut sink {
        r.levels = s.bytes_per_level();
        r.notes.extend(s.note());
    }
    opts.sink = sink;
    Ok(r)
}

/// The marker functions a forked child calls around the traced work: exported (so they are
/// emitted and never inlined away) with distinct opaque bodies (so no linker folds them).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn roofline_trace_child_begin() {
    // SAFETY: a no-op instruction; touches no memory or registers.
    unsafe { std::arch::asm!("nop", options(nomem, nostack, preserves_flags)) }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn roofline_trace_child_end() {
    // SAFETY: two no-op instructions; touch no memory or registers.
    unsafe { std::arch::asm!("nop", "nop", options(nomem, nostack, preserves_flags)) }
}

/// Run `work` in a forked child under the tracer, counting only the work itself (the child
/// calls two marker functions around it, whose addresses the parent breakpoints: fork keeps
/// them at the same place). Prepare data BEFORE calling this: the child must not allocate.
pub fn trace_forked(work: &mut dyn FnMut(), mode: TraceMode, by_function: bool) -> Result<TraceResult> {
    trace_forked_with_sink(work, mode, by_function, None)
}

/// Like [`trace_forked`], handing every effective address of the work to `sink` in memory
/// mode (a cache simulator starts cold at the begin marker); its per-level bytes (at the end,
/// dirty lines written back) and its note land in the result's `levels` and `notes`.
pub fn trace_forked_with_sink(
    work: &mut dyn FnMut(),
    mode: TraceMode,
    by_function: bool,
    mut sink: Option<&mut dyn AccessSink>,
) -> Result<TraceResult> {
    use nix::sys::signal::{Signal, raise};
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child calls only ptrace, raise, the work (which must not allocate or lock)
    // and _exit.
    match unsafe { fork() }.map_err(|e| Error::io("fork", e.into()))? {
        ForkResult::Child => {
            if nix::sys::ptrace::traceme().is_err() {
                // SAFETY: _exit never returns and is async-signal-safe.
                unsafe { nix::libc::_exit(127) };
            }
            let _ = raise(Signal::SIGSTOP);
            roofline_trace_child_begin();
            work();
            roofline_trace_child_end();
            // SAFETY: as above; skip atexit handlers and buffered IO of the parent's copy.
            unsafe { nix::libc::_exit(0) }
        }
        ForkResult::Parent { child } => {
            let begin = roofline_trace_child_begin as *const () as u64;
            let end = roofline_trace_child_end as *const () as u64;
            if begin == end {
                return Err(Error::unavailable(
                    "the trace markers were folded into one function",
                    "a build-setting problem: report it",
                ));
            }
            let r = {
                let s: Option<&mut dyn AccessSink> = match sink.as_mut() {
                    Some(b) => Some(&mut **b),
                    None => None,
                };
                let (mut t, ending) = Tracer::run_forked(child, begin, end, mode, by_function, s)?;
                ending_to_result("the kernel child", ending)?;
                collect(&mut t)
            };
            let mut r = r;
            if let Some(s) = &mut sink {
                r.levels = s.bytes_per_level();
                r.notes.extend(s.note());
            }
            Ok(r)
        }
    }
}

/// W by class and Q per level of a tally (and the simulator's levels), all from the trace.
fn work_and_traffic(t: &Tally, levels: &[(String, f64)]) -> (Flops, BTreeMap<String, f64>, BTreeMap<String, Source>) {
    let mut by_class = BTreeMap::new();
    for (i, v) in t.flops.iter().enumerate() {
        if *v > 0 {
            by_class.insert(tally::class_key(i).to_string(), *v as f64);
        }
    }
    let mut flops = Flops::of_classes(by_class);
    flops.effective = (t.effective_unknown == 0).then_some(t.effective as f64);
    flops.fma = Some(t.fma_flops as f64);
    if flops.int_ops.is_some() {
        flops.int_ops_effective = (t.effective_unknown == 0).then_some(t.effective_int as f64);
    }
    let mut bytes = BTreeMap::new();
    bytes.insert(level::CORE.to_string(), (t.core_load + t.core_store) as f64);
    bytes.insert(level::STACK.to_string(), t.stack as f64);
    let mut prov_bytes = BTreeMap::new();
    prov_bytes.insert(level::CORE.to_string(), Source::Trace);
    prov_bytes.insert(level::STACK.to_string(), Source::Trace);
    for (k, v) in levels {
        bytes.insert(k.clone(), *v);
        prov_bytes.insert(k.clone(), Source::Trace);
    }
    (flops, bytes, prov_bytes)
}

/// One region's W and Q (T comes from native runs, see `counters::backend`).
fn region_measurement(reg: &regions::TracedRegion, memory: bool) -> RegionMeasurement {
    let mut notes = vec![format!(
        "region '{}': what every thread ran while it was open ({} call(s); nested regions included)",
        reg.name, reg.calls
    )];
    if memory {
        notes.push(
            "per-level bytes moved while the region was open; dirty lines it left are written back (and counted) when evicted, as a hardware counter counts them"
                .into(),
        );
    }
    if reg.open_at_exit {
        notes.push(format!("region '{}' was still open when the program ended: closed there", reg.name));
    }
    let extra = PointExtras {
        calls: Some(reg.calls),
        instructions: Some(reg.tally.instructions.into()),
        region: Some(reg.name.clone()),
        ..PointExtras::default()
    };
    RegionMeasurement {
        name: reg.name.clone(),
        calls: reg.calls,
        measurement: traced_measurement(&reg.tally, &reg.levels, notes, reg.threads, extra),
    }
}

/// W and Q of a trace as a [`Measurement`].
pub fn to_measurement(r: &TraceResult, by_function: bool) -> Measurement {
    let t = &r.total;
    let memory = !r.levels.is_empty();
    let mut notes = r.notes.clone();
    notes.extend(counting_notes(t));
    notes.extend(tracer_notes(&r.stats));
    let mut extra = PointExtras {
        instructions: Some(t.instructions.into()),
        ..PointExtras::default()
    };
    let mut put = |k: &str, v: serde_json::Value| extra.insert(k, v);
    put("core_load_bytes", t.core_load.into());
    put("core_store_bytes", t.core_store.into());
    put("nt_store_bytes", t.nt_store.into());
    put("prefetch_bytes", t.prefetch.into());
    put("unclassified", t.unclassified.into());
    if t.tile_unknown > 0 {
        put("tile_unknown", t.tile_unknown.into());
    }
    put("trace", trace_stats_json(&r.stats));
    // Per thread: what it counted and how it was let run (docs/trace.md, "Every thread").
    put("per_thread", per_thread_json(&r.stats));
    if by_function {
        extra.by_function = Some(by_function_rows(&r.per_function));
        extra.by_line = Some(by_line_rows(&r.per_line));
    }
    // Threads that ran counted work (a process whose main thread only waits counts its workers).
    let threads = r.stats.per_thread.iter().filter(|t| t.instructions > 0).count();
    Measurement {
        regions: r.regions.iter().map(|g| region_measurement(g, memory)).collect(),
        ..traced_measurement(t, &r.levels, notes, threads, extra)
    }
}

/// A measurement whose W and Q the trace counted (`t`, and the cache simulator's `levels`),
/// with the trace as their provenance; no time (native runs time it) and no regions.
/// `threads`: those that ran counted work, at least one.
fn traced_measurement(
    t: &Tally,
    levels: &[(String, f64)],
    notes: Vec<String>,
    threads: usize,
    extra: crate::schema::PointExtras,
) -> Measurement {
    let (flops, bytes, prov_bytes) = work_and_traffic(t, levels);
    Measurement {
        flops,
        bytes,
        provenance: Some(Provenance {
            flops: Some(Source::Trace),
            bytes: prov_bytes,
            seconds: None,
            notes,
            untrusted: Vec::new(),
        }),
        seconds_samples: Vec::new(),
        threads: threads.max(1) as u32,
        extra,
        regions: Vec::new(),
    }
}

/// Notes on what the count leaves out: instructions not decoded, opmasks and tile
/// configurations not read.
fn counting_notes(t: &Tally) -> Vec<String> {
    let mut notes = Vec::new();
    if t.unclassified > 0 {
        notes.push(format!(
            "{} executed instructions could not be decoded (see extra.unclassified)",
            t.unclassified
        ));
    }
    if t.effective_unknown > 0 {
        notes.push("flops.effective unknown: some opmask values could not be read".into());
    }
    if t.tile_unknown > 0 {
        notes.push(format!(
            "{} AMX tile instructions ran while the tile configuration could not be read (see extra.tile_unknown): their work and bytes are not counted",
            t.tile_unknown
        ));
    }
    notes
}

/// Notes on where the tracer itself may have counted wrongly: mispredicted traps, stretches run
/// natively while counting, racy step-overs, broken invariants, inexact loop trip counts.
fn tracer_notes(stats: &DriverStats) -> Vec<String> {
    let mut notes = Vec::new();
    if stats.mispredicts > 0 {
        notes.push(format!(
            "{} traps were not where the run-ahead predicted: counts may be inexact (please report)",
            stats.mispredicts
        ));
    }
    if !stats.gaps.is_empty() {
        let at: Vec<String> = stats
            .gaps
            .iter()
            .take(4)
            .map(|(t, a)| {
                if *a == 0 {
                    format!("thread {t}, running")
                } else {
                    format!("thread {t} at {a:#x}")
                }
            })
            .collect();
        notes.push(format!(
            "NOT COUNTED: {} stretch(es) ran natively while counting was on ({}): W and Q miss their work (please report)",
            stats.gaps.len(),
            at.join(", ")
        ));
    }
    if stats.racy_passes > 0 {
        let at: Vec<String> = stats.racy_at.iter().map(|a| format!("{a:#x}")).collect();
        notes.push(format!(
            "{} breakpoint(s) were stepped over with other threads running (no displaced copy could be made, at {}): \
             a thread passing there meanwhile ran uncounted; W and Q may be low",
            stats.racy_passes,
            at.join(", ")
        ));
    }
    if !stats.restart_hazards.is_empty() || stats.scratch_overwrites > 0 {
        let at: Vec<String> = stats.restart_hazards.iter().map(|(t, a)| format!("thread {t} to {a:#x}")).collect();
        notes.push(format!(
            "TRACER INVARIANT BROKEN: {} move(s) of a thread with a system call restart pending ({}), {} scratch slot(s) \
             found written: the program may have run wrongly under trace (please report)",
            stats.restart_hazards.len(),
            at.join(", "),
            stats.scratch_overwrites
        ));
    }
    if stats.cache_counters_full > 0 {
        notes.push(format!(
            "the code cache ran out of counters after {} translations: {} blocks hot after that ran by traps \
             (exact, slower)",
            stats.cache_translations, stats.cache_counters_full
        ));
    }
    if stats.loop_count_errors > 0 {
        notes.push(format!("{} native loop trip counts were inexact", stats.loop_count_errors));
    }
    notes
}

/// `extra.trace`: how the tracer ran (stops, steps, blocks, run-ahead, displaced execution)
/// and what went wrong.
fn trace_stats_json(stats: &DriverStats) -> serde_json::Value {
    // Its own object: one json! of every key would pass the macro recursion limit.
    let cache = serde_json::json!({
        "translations": stats.cache_translations,
        "refused": stats.cache_refused,
        "counters_full": stats.cache_counters_full,
        "entries": stats.cache_entries,
        "exits": stats.cache_exits,
        "misses": stats.cache_misses,
        "misses_translated": stats.cache_misses_translated,
        "misses_stepped": stats.cache_misses_stepped,
        "paths": stats.cache_paths,
        "return_sites": stats.cache_return_sites,
        "links": stats.cache_links,
        "flushes": stats.cache_flushes,
        "blocks": stats.cache_blocks,
    });
    serde_json::json!({
        "stops": stats.stops,
        "single_steps": stats.steps,
        "blocks_decoded": stats.blocks_decoded,
        "native_loops": stats.native_loops,
        "step_overs": stats.step_overs,
        "step_throughs": stats.step_throughs,
        "run_ahead_blocks": stats.run_ahead_blocks,
        "emulated_instructions": stats.emulated_instructions,
        "xstate_reads": stats.xstate_reads,
        "mispredicts": stats.mispredicts,
        "exit_state_mismatches": stats.exit_state_mismatches,
        "processes": stats.processes,
        "threads": stats.threads,
        "displaced": stats.displaced,
        "racy_passes": stats.racy_passes,
        "stepped_into_breakpoints": stats.stepped_into_bps,
        "inside_counted_blocks": stats.inside_counted,
        "tile_restarts": stats.tile_restarts,
        "joined": stats.joined,
        "emulated_blocks": stats.emulated_blocks,
        "fed_by_steps": stats.fed_by_steps,
        "replayed_loops": stats.replayed_loops,
        "held_paths": stats.held_paths,
        "polled_waits": stats.polled_waits,
        "idle_ends_unwoken": stats.idle_ends_unwoken,
        "polls_caught": stats.polls_caught,
        "hold_timeouts": stats.hold_timeouts,
        "interrupted_steps": stats.interrupted_steps,
        "restart_hazards": stats.restart_hazards.len(),
        "exit_state_details": stats.exit_state_details.iter().map(|d| serde_json::json!({
            "at": format!("{:#x}", d.at),
            "from": format!("{:#x}", d.from),
            "blocks": d.blocks,
            "last": format!("{:#x}", d.last),
            "differing": d.differing.iter().map(|(r, e, a)| format!("{r}: predicted {e:#x}, actual {a:#x}")).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "scratch_overwrites": stats.scratch_overwrites,
        "step_through_causes": stats.step_through_causes,
        "path_ends": stats.path_ends,
        "emulated_again": stats.emulated_again,
        "emulator_page_reads": stats.emulator_page_reads,
        "cache": cache,
        "gaps": stats.gaps.iter().map(|(t, a)| serde_json::json!({"thread": t, "address": format!("{a:#x}")})).collect::<Vec<_>>(),
    })
}

/// `extra.per_thread`: what each thread counted and how it was let run.
fn per_thread_json(stats: &DriverStats) -> serde_json::Value {
    let per_thread: Vec<serde_json::Value> = stats
        .per_thread
        .iter()
        .map(|t| {
            serde_json::json!({
                "thread": t.tid,
                "process": t.process,
                "instructions": t.instructions,
                "flops": t.flops,
                "core_bytes": t.core_bytes,
                "block_traps": t.block_traps,
                "single_steps": t.steps,
                "native_loops": t.native_loops,
                "resumed_outside_counting": t.outside_resumes,
                "turn_syscalls": t.turn_syscalls,
            })
        })
        .collect();
    per_thread.into()
}

/// `extra.by_function` (`--by-function`): work per function.
fn by_function_rows(per_function: &[(String, Tally)]) -> Vec<WorkRow> {
    per_function
        .iter()
        .map(|(name, f)| WorkRow {
            function: name.clone(),
            instructions: f.instructions,
            flops: f.flops_total(),
            flops_by_class: Some(
                f.flops
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v > 0)
                    .map(|(i, v)| (tally::class_key(i).to_string(), *v))
                    .collect(),
            ),
            core_bytes: f.core_load + f.core_store,
            stack_bytes: Some(f.stack),
            ..WorkRow::default()
        })
        .collect()
}

/// `extra.by_line` (`--by-function`): work per source line, with its first
/// `CHAINS_PER_LINE` inline chains.
fn by_line_rows(per_line: &[SourceLine]) -> Vec<WorkRow> {
    per_line
        .iter()
        .map(|l| WorkRow {
            line: Some(l.line.clone()),
            function: l.function.clone(),
            instructions: l.tally.instructions,
            flops: l.tally.flops_total(),
            core_bytes: l.tally.core_load + l.tally.core_store,
            chains: Some(
                l.chains
                    .iter()
                    .take(CHAINS_PER_LINE)
                    .map(|(frames, t)| serde_json::json!({
                        "frames": frames.iter().map(|f| serde_json::json!({"function": &*f.function, "line": f.line.as_deref()})).collect::<Vec<_>>(),
                        "instructions": t.instructions,
                        "flops": t.flops_total(),
                    }))
                    .collect(),
            ),
            chains_left_off: (l.chains.len() > CHAINS_PER_LINE).then(|| (l.chains.len() - CHAINS_PER_LINE) as u64),
            ..WorkRow::default()
        })
        .collect()
}

/// `roofline measure --backend trace -- CMD`: trace CMD and return its W and Q. With a sink
/// in `opts` (memory mode, or the reference mode reading each step's addresses), the sink
/// gets every effective address and gives the bytes per level; it is left in `opts`, to be
/// read after.
pub fn measure_command(cmd: &CommandSpec, opts: &mut TraceOptions) -> Result<Measurement> {
    let addresses_fed = opts.sink.is_some() || opts.mode == TraceMode::Memory;
    let r = trace_command(cmd, opts)?;
    let mut m = to_measurement(&r, opts.by_function);
    // A sink's own note (the cache simulator's) may say it already; said once.
    if addresses_fed
        && let Some(p) = m.provenance.as_mut()
        && !p.notes.iter().any(|n| n.contains("prefetchers"))
    {
        p.notes.push("hardware prefetchers are not modelled".into());
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Counts the accesses it gets where the test can read them, and names a level and a note
    /// of its own.
    struct SharedCount(Rc<Cell<u64>>);

    impl AccessSink for SharedCount {
        fn access(&mut self, _addr: u64, _size: u32, _kind: AccessKind) {
            self.0.set(self.0.get() + 1);
        }
        fn bytes_per_level(&mut self) -> Vec<(String, f64)> {
            vec![("dram".to_string(), self.0.get() as f64)]
        }
        fn note(&self) -> Option<String> {
            Some("the test's sink".into())
        }
    }

    /// The sink given in the options gets the command's addresses, its levels and note reach
    /// the measurement, and it is left in the options.
    #[test]
    fn measure_command_feeds_the_sink_it_is_given() {
        let accesses = Rc::new(Cell::new(0));
        let mut opts = TraceOptions {
            mode: TraceMode::Memory,
            by_function: false,
            sink: Some(Box::new(SharedCount(accesses.clone()))),
        };
        let cmd = CommandSpec::resolve(&["true".to_string()]).unwrap();
        let m = match measure_command(&cmd, &mut opts) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("skipping: {e}");
                return;
            }
        };
        assert!(accesses.get() > 0, "the sink got no access");
        assert_eq!(m.bytes.get("dram"), Some(&(accesses.get() as f64)));
        let notes = &m.provenance.as_ref().unwrap().notes;
        assert!(notes.iter().any(|n| n == "the test's sink"), "{notes:?}");
        assert!(opts.sink.is_some(), "the sink is handed back");
    }
}
