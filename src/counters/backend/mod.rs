//! One interface to the backends, the [`Backend`] trait: "measure this command / count this
//! suite kernel". Its peers, one file each:
//!
//! - [`PerfBackend`]: perf_event counters (`perf/`, `team.rs`), W and Q through the event formulas;
//! - [`TraceBackend`]: ptrace + decoding (`trace/`), exact W and core Q, Q per level with `cachesim`;
//! - [`AnalyticBackend`]: the kernel suite's own formulas (suite kernels only);
//! - [`SimulatedBackend`]: the simulated PMU (`simulated.rs`): the perf path end to end, with
//!   counts made from a trace of the same run and faults a test injects. Never chosen by `auto`.
//!
//! `roofline measure`, `gate -- CMD`, `run`, `profile` and `validate` open one with
//! [`for_commands`] or [`for_kernels`] after [`crate::counters::choose`] resolved `auto`; the
//! CLI only parses arguments and prints.
//!
//! Timing is native in every backend (the command or kernel run again, uncounted, where the
//! counting itself would distort it). The region API ([`crate::region::Session`]) and the
//! criterion support take the same [`BackendKind`].

use std::path::Path;

use roofline_kernels::{Kernel, Variant};

use crate::counters::analytic::{self, KernelRun};
use crate::counters::perf;
use crate::counters::team::EventSet;
use crate::counters::trace::TraceMode;
use crate::counters::{BackendKind, Measurement, Target, choose};
use crate::error::{Error, Result};
use crate::machine::Cache;

mod analytic_backend;
mod native;
mod perf_backend;
mod report;
mod simulated_backend;
mod trace_backend;

pub use analytic_backend::AnalyticBackend;
pub(crate) use native::*;
pub use perf_backend::*;
pub use report::*;
pub use simulated_backend::{SimulatedBackend, SimulatedKernel};
pub use trace_backend::TraceBackend;
use trace_backend::*;

/// Called with each timed sample of a suite kernel: (sample index, seconds).
pub type OnSample<'a> = dyn Fn(usize, f64) + Sync + 'a;

/// One way of counting W and Q, T timed natively in every one (the command or kernel run
/// again, uncounted, where counting would distort it). Perf, trace, analytic and the
/// simulated PMU implement it as peers; a test double is one more implementation.
pub trait Backend {
    /// Which backend this is (never `Auto`).
    fn kind(&self) -> BackendKind;

    /// Measure `argv` (run directly, never through a shell), `program` being its `argv[0]`
    /// as [`crate::counters::command::resolve_program`] found it, once, before anything
    /// started. The command's own failure (said on stderr) comes back as
    /// [`CommandOutcome::Failed`] with the status to pass on.
    fn measure_command(&self, program: &Path, argv: &[String], opts: &CommandOptions) -> Result<CommandOutcome>;

    /// Work done before any timing thread exists, for `most_threads` instances of `kernel`
    /// (the trace backend and the simulated PMU trace them here: the traced child is forked
    /// from this process, which must not have other threads yet).
    fn prepare_kernel(&mut self, kernel: &dyn Kernel, n: usize, variant: Variant, most_threads: usize) -> Result<()> {
        let _ = (kernel, n, variant, most_threads);
        Ok(())
    }

    /// Run `spec` natively (T) and count its W and Q.
    fn count_kernel(&self, spec: &KernelRun, on_sample: &OnSample<'_>) -> Result<Measurement>;

    /// [`Backend::count_kernel`], then L2/L3/DRAM Q that nothing counted from the cache model
    /// of `caches` (0 below half a cache, the compulsory traffic beyond twice it).
    fn measure_kernel(&self, spec: &KernelRun, caches: &[Cache], on_sample: &OnSample<'_>) -> Result<Measurement> {
        let mut m = self.count_kernel(spec, on_sample)?;
        analytic::apply_cache_model(&mut m, spec.kernel, spec.n, spec.variant, spec.threads, caches);
        Ok(m)
    }
}

/// The backend `kind` for commands; `Auto` must be resolved first ([`crate::counters::choose`]).
pub fn for_commands(kind: BackendKind) -> Result<Box<dyn Backend>> {
    Ok(match kind {
        BackendKind::Perf => Box::new(PerfBackend {
            pmus: perf::SYSFS_PMUS.into(),
            kernel_events: None,
        }),
        BackendKind::Trace => Box::new(TraceBackend::default()),
        BackendKind::Analytic => Box::new(AnalyticBackend),
        BackendKind::Simulated => Box::new(SimulatedBackend::default()),
        BackendKind::Auto => return Err(auto_unresolved()),
    })
}

/// The backend `kind` for suite kernels, its events chosen and checked now (one line and
/// exit 2 without a PMU), before anything runs. `optional`: the platform's opt-in events
/// too (single precision, FP16, AMD's FMA flops). `Auto` must be resolved first.
pub fn for_kernels(kind: BackendKind, events: EventSet, platform: Option<&str>, optional: bool) -> Result<Box<dyn Backend>> {
    Ok(match kind {
        BackendKind::Perf => {
            let pmus = Path::new(perf::SYSFS_PMUS);
            let selection = crate::counters::team::select_events(events, pmus, platform, optional, true)?;
            Box::new(PerfBackend {
                pmus: pmus.into(),
                kernel_events: Some(selection),
            })
        }
        BackendKind::Simulated => Box::new(SimulatedBackend {
            kernel: Some(Box::new(SimulatedKernel::select(events, platform, optional)?)),
        }),
        BackendKind::Trace | BackendKind::Analytic => for_commands(kind)?,
        BackendKind::Auto => return Err(auto_unresolved()),
    })
}

/// The profile's choice for suite kernels: the platform's events when a core PMU exists and
/// they can be opened, else analytic and why.
pub fn for_profile() -> (Box<dyn Backend>, Option<String>) {
    let pmus = Path::new(perf::SYSFS_PMUS);
    match crate::counters::choose(BackendKind::Auto, Target::Kernel, pmus) {
        Ok((BackendKind::Perf, _)) => match for_kernels(BackendKind::Perf, EventSet::Platform, None, false) {
            Ok(b) => (b, None),
            Err(e) => (
                Box::new(AnalyticBackend),
                Some(format!("W and Q analytic: perf events unavailable ({e})")),
            ),
        },
        Ok((_, why)) => (Box::new(AnalyticBackend), Some(format!("W and Q analytic: {why}"))),
        Err(e) => (Box::new(AnalyticBackend), Some(format!("W and Q analytic: {e}"))),
    }
}

fn auto_unresolved() -> Error {
    Error::input("backend `auto` was not resolved", "resolve it with counters::choose first")
}

/// How to measure a command (the options of `roofline measure`).
#[derive(Debug, Clone)]
pub struct CommandOptions {
    /// Runs of the command; T is the median. Trace: traced once, then run natively this often.
    pub repeat: u32,
    /// Subtract the system-wide background (same duration, no command) from uncore traffic.
    pub idle_baseline: bool,
    pub events: EventSet,
    /// The platform's opt-in events (single precision, FP16).
    pub optional_events: bool,
    /// System-wide uncore (memory) events.
    pub uncore: bool,
    /// `--platform NAME|FILE`.
    pub platform: Option<String>,
    pub trace: TraceMode,
    pub by_function: bool,
    /// The cache simulator's hierarchy (`--cache SPEC`), trace memory mode.
    pub cache: Option<String>,
    /// Trace: time the command natively after the trace (`repeat` runs). Without it the
    /// measurement has W and Q only (a gate on exact counts).
    pub trace_timing: bool,
    /// The command runs exactly once (a rank of a launcher's job: its ranks meet once, in
    /// `MPI_Init`): the trace backend and the simulated PMU count their traced run and run
    /// nothing natively after it, so the measurement has no T.
    pub single_run: bool,
}

impl Default for CommandOptions {
    fn default() -> CommandOptions {
        CommandOptions {
            repeat: 1,
            idle_baseline: false,
            events: EventSet::Platform,
            optional_events: false,
            uncore: true,
            platform: None,
            trace: TraceMode::Flops,
            by_function: false,
            cache: None,
            trace_timing: true,
            single_run: false,
        }
    }
}

/// What measuring a command gave: its measurement, or the command's own failure (said on
/// stderr already) with the status to pass on.
#[derive(Debug)]
pub enum CommandOutcome {
    Measured(Box<Measurement>),
    Failed { status: i32 },
}

/// `--cache` only means something to the cache simulator: `--backend trace --trace memory`
/// (it does not switch memory mode on by itself, which single-steps and is far slower), or
/// the simulated PMU (whose DRAM bytes come from it). Called with the backend asked for and
/// again with the one `auto` chose.
pub fn check_command_options(opts: &CommandOptions, backend: BackendKind) -> Result<()> {
    if let Some(spec) = &opts.cache {
        if backend == BackendKind::Perf || backend == BackendKind::Analytic {
            return Err(Error::input(
                format!(
                    "--cache {spec}: the cache simulator belongs to the trace backend, not --backend {}",
                    if backend == BackendKind::Perf { "perf" } else { "analytic" }
                ),
                "use `--backend trace --trace memory --cache SPEC`",
            ));
        }
        if backend == BackendKind::Simulated {
            return Ok(());
        }
        if opts.trace == TraceMode::Flops {
            return Err(Error::input(
                format!("--cache {spec} needs --trace memory (flops mode simulates no cache)"),
                "add `--trace memory` (it single-steps the command: much slower), or drop --cache",
            ));
        }
    }
    Ok(())
}

/// Measure `argv` (run directly, never through a shell) with `asked` (`auto` resolved here).
/// A missing or non-executable command is an input error before anything starts; the
/// command's own failure comes back as [`CommandOutcome::Failed`].
pub fn measure_command(asked: BackendKind, argv: &[String], opts: &CommandOptions) -> Result<CommandOutcome> {
    let Some(program) = argv.first() else {
        return Err(Error::input("no command given", "roofline measure -- CMD [ARGS…]"));
    };
    // Missing, not executable, a directory: said with the path before anything starts.
    let program = crate::counters::command::resolve_program(program)?;
    let pmus = Path::new(perf::SYSFS_PMUS);
    check_command_options(opts, asked)?;
    let (backend, why) = choose(
        asked,
        Target::Command {
            software_only: opts.events == EventSet::Software,
        },
        pmus,
    )?;
    if asked == BackendKind::Auto {
        eprintln!("roofline: backend auto → {} ({why})", backend.name());
    }
    check_command_options(opts, backend)?;
    for_commands(backend)?.measure_command(&program, argv, opts)
}

/// The cache hierarchy the simulator uses: `--cache SPEC`, else this machine's caches.
pub fn cache_hierarchy(spec: Option<&str>) -> Result<crate::counters::cachesim::CacheHierarchy> {
    use crate::counters::cachesim;
    match spec {
        Some(spec) => cachesim::parse_cache_hierarchy(spec),
        None => cachesim::CacheHierarchy::from_machine(&crate::machine::detect_static(&Default::default())?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Platform;

    #[test]
    fn cache_needs_trace_memory_and_the_trace_backend() {
        let with = |trace, cache: Option<&str>| CommandOptions {
            trace,
            cache: cache.map(String::from),
            ..CommandOptions::default()
        };
        let flops = with(TraceMode::Flops, Some("L1=32KiB:8"));
        let e = check_command_options(&flops, BackendKind::Trace).unwrap_err();
        assert!(e.to_string().contains("needs --trace memory"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let memory = with(TraceMode::Memory, Some("L1=32KiB:8"));
        assert!(check_command_options(&memory, BackendKind::Perf).is_err());
        assert!(check_command_options(&memory, BackendKind::Analytic).is_err());
        assert!(check_command_options(&memory, BackendKind::Trace).is_ok());
        // The simulated PMU's DRAM bytes come from the cache simulator: --cache is its own.
        assert!(check_command_options(&flops, BackendKind::Simulated).is_ok());
        assert!(check_command_options(&with(TraceMode::Flops, None), BackendKind::Perf).is_ok());
    }

    fn with_dram(bytes: f64) -> Measurement {
        let mut m = Measurement::default();
        m.bytes.insert("dram".into(), bytes);
        m
    }

    #[test]
    fn dram_plausibility_is_the_platforms_not_a_flat_10_tb_s() {
        // A client Haswell moves ~60 GB/s: 1 TB in one second is impossible there (the
        // flat 10 TB/s check let it through) but fine for a Sapphire Rapids system.
        let e = check_plausible(&with_dram(1e12), 1.0, Some("hsw")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cannot be true") && msg.contains("phantom memory channel"), "{msg}");
        assert_eq!(e.exit_code(), 2);
        assert!(check_plausible(&with_dram(5e10), 1.0, Some("hsw")).is_ok());
        // 50 TB/s: over the flat limit, under 10x eight SPR sockets with HBM.
        assert!(check_plausible(&with_dram(5e13), 1.0, Some("spr")).is_ok());
        // LIKWID's phantom channel is refused everywhere, unknown platforms included.
        assert!(check_plausible(&with_dram(1.88e19), 10.0, None).is_err());
        assert!(check_plausible(&Measurement::default(), 1.0, Some("hsw")).is_ok());
    }

    #[test]
    fn zen1_says_q_dram_is_unavailable() {
        // The notes perf_backend prints and keeps: Zen 1 says Q_dram is unavailable.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("cpu")).unwrap();
        std::fs::write(dir.path().join("cpu/type"), "4\n").unwrap();
        let zen1 = Platform::load("zen1").unwrap();
        let (specs, notes) = perf::counters_for_platform(&zen1, dir.path(), false, true, false).unwrap();
        assert!(notes.iter().any(|n| n.starts_with("Q_dram unavailable")), "{notes:?}");
        assert!(specs.iter().any(|s| s.quantity == "cycles") && specs.iter().any(|s| s.name == "task-clock"));
    }

    #[test]
    fn the_median_run_is_the_middle_time() {
        assert_eq!(median_index(&[3.0, 1.0, 2.0]), 2);
        assert_eq!(median_index(&[5.0]), 0);
        assert_eq!(median_index(&[4.0, 1.0, 3.0, 2.0]), 2);
    }
}
