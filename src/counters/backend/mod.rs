//! One interface to the backends: "measure this command / this suite kernel with backend B".
//!
//! `roofline measure`, `gate -- CMD`, `run`, `profile` and `validate` call these functions; the
//! CLI only parses arguments and prints. A backend is a [`BackendKind`]:
//!
//! - `perf`: perf_event counters (`perf.rs`, `team.rs`), W and Q through the event formulas;
//! - `trace`: ptrace + decoding (`trace/`), exact W and core Q, Q per level with `cachesim`;
//! - `analytic`: the kernel suite's own formulas (suite kernels only);
//! - `simulated`: the simulated PMU (`simulated.rs`): the perf path end to end, with counts
//!   made from a trace of the same run and faults a test injects. Never chosen by `auto`.
//!
//! Timing is native in every backend (the command or kernel run again, uncounted, where the
//! counting itself would distort it). The region API ([`crate::region::Session`]) and the
//! criterion support take the same [`BackendKind`].

use std::path::Path;

use crate::counters::perf::{self};
use crate::counters::team::EventSet;
use crate::counters::trace::{self, TraceMode};
use crate::counters::{BackendKind, Measurement, simulated};
use crate::error::{Error, Result};

mod kernel;
mod native;
mod perf_backend;
mod report;
mod trace_backend;

pub use kernel::*;
pub(crate) use native::*;
pub use perf_backend::*;
pub use report::*;
use trace_backend::*;

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

/// `auto`: perf when a usable core PMU exists (or only software events are asked for),
/// else trace; says which and why on stderr. Never the simulated PMU.
pub fn choose_backend(asked: BackendKind, events: EventSet, pmus: &Path) -> BackendKind {
    if asked != BackendKind::Auto {
        return asked;
    }
    if events == EventSet::Software {
        eprintln!("roofline: backend auto → perf (software events need no hardware PMU)");
        return BackendKind::Perf;
    }
    let paranoid = perf::paranoid();
    match perf::core_pmu(pmus).and_then(|pmu| perf::check_paranoid(paranoid, false).map(|_| pmu)) {
        Ok(pmu) => {
            let lvl = paranoid.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into());
            eprintln!("roofline: backend auto → perf (core PMU `{pmu}` present, perf_event_paranoid {lvl})");
            BackendKind::Perf
        }
        Err(e) => {
            let why = e.to_string();
            eprintln!("roofline: backend auto → trace ({})", why.lines().next().unwrap_or(""));
            BackendKind::Trace
        }
    }
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
    trace::sys::resolve_command(program)?;
    let pmus = Path::new(perf::SYSFS_PMUS);
    check_command_options(opts, asked)?;
    let backend = choose_backend(asked, opts.events, pmus);
    check_command_options(opts, backend)?;
    match backend {
        BackendKind::Trace => trace_command(argv, opts),
        BackendKind::Perf => perf_command(argv, opts, pmus),
        BackendKind::Simulated => simulated::measure_command(argv, opts),
        BackendKind::Analytic => Err(Error::input(
            "`--backend analytic` counts suite kernels, not commands",
            "use `roofline run KERNEL --backend analytic`, or `--backend perf|trace` here",
        )),
        BackendKind::Auto => unreachable!("resolved by choose_backend"),
    }
}

/// The identified platform (or `--platform`).
pub fn platform(spec: Option<&str>) -> Result<crate::machine::Platform> {
    if let Some(spec) = spec {
        return crate::machine::Platform::load(spec);
    }
    perf::identify_platform().ok_or_else(|| {
        Error::input(
            "unknown microarchitecture: no platform file matches this CPU's vendor, family and model",
            "pass `--platform NAME|FILE` (see `platforms/`), or use `--backend trace`",
        )
    })
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

    #[test]
    fn auto_never_chooses_the_simulated_pmu() {
        let dir = tempfile::tempdir().unwrap();
        for events in [EventSet::Platform, EventSet::Software] {
            let b = choose_backend(BackendKind::Auto, events, dir.path());
            assert!(matches!(b, BackendKind::Perf | BackendKind::Trace), "{b:?}");
        }
        std::fs::create_dir(dir.path().join("cpu")).unwrap();
        std::fs::write(dir.path().join("cpu/type"), "4\n").unwrap();
        assert_ne!(
            choose_backend(BackendKind::Auto, EventSet::Platform, dir.path()),
            BackendKind::Simulated
        );
        assert_eq!(
            choose_backend(BackendKind::Simulated, EventSet::Platform, dir.path()),
            BackendKind::Simulated
        );
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
