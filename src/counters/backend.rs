//! One interface to the backends: "measure this command / this suite kernel with backend B".
//!
//! `roofline measure`, `gate -- CMD`, `run`, `profile` and `validate` call these functions; the
//! CLI only parses arguments and prints. A backend is a [`BackendKind`]:
//!
//! - `perf`: perf_event counters (`perf/`, `team.rs`), W and Q through the event formulas;
//! - `trace`: ptrace + decoding (`trace/`), exact W and core Q, Q per level with `cachesim`;
//! - `analytic`: the kernel suite's own formulas (suite kernels only);
//! - `simulated`: the simulated PMU (`simulated.rs`): the perf path end to end, with counts
//!   made from a trace of the same run and faults a test injects. Never chosen by `auto`.
//!
//! Timing is native in every backend (the command or kernel run again, uncounted, where the
//! counting itself would distort it). The region API ([`crate::region::Session`]) and the
//! criterion support take the same [`BackendKind`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use roofline_kernels::{Kernel, Variant};

use crate::counters::analytic::{self, KernelRun};
use crate::counters::perf::{self, CommandSpec, CounterSpec, EventCount, Scope};
use crate::counters::team::EventSet;
use crate::counters::trace::{self, TraceMode, tally::Tally};
use crate::counters::{BackendKind, Measurement, RegionMeasurement, events, region_times, simulated};
use crate::error::{Error, Result};
use crate::machine::Cache;
use crate::report::{Environment, Report};

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
    let program = crate::counters::command::resolve_program(program)?;
    let pmus = Path::new(perf::SYSFS_PMUS);
    check_command_options(opts, asked)?;
    let backend = choose_backend(asked, opts.events, pmus);
    check_command_options(opts, backend)?;
    match backend {
        BackendKind::Trace => trace_command(argv, opts),
        BackendKind::Perf => perf_command(program, argv, opts, pmus),
        BackendKind::Simulated => simulated::measure_command(argv, opts),
        BackendKind::Analytic => Err(Error::input(
            "`--backend analytic` counts suite kernels, not commands",
            "use `roofline run KERNEL --backend analytic`, or `--backend perf|trace` here",
        )),
        BackendKind::Auto => unreachable!("resolved by choose_backend"),
    }
}

/// The cache hierarchy the simulator uses: `--cache SPEC`, else this machine's caches.
pub fn cache_hierarchy(spec: Option<&str>) -> Result<crate::counters::cachesim::CacheHierarchy> {
    use crate::counters::cachesim;
    match spec {
        Some(spec) => cachesim::parse_cache_hierarchy(spec),
        None => cachesim::CacheHierarchy::from_machine(&crate::machine::detect_static(&Default::default())?),
    }
}

/// `--backend trace`: W and core Q by tracing the command once; with `--trace memory`, Q per
/// level from the cache simulator. T from `--repeat` native runs of the command afterwards
/// (argv, no shell, stdin/stdout/stderr inherited as in the perf path). The command's own
/// failure is passed through as its status.
fn trace_command(argv: &[String], opts: &CommandOptions) -> Result<CommandOutcome> {
    let mut m = if opts.trace == TraceMode::Memory || (opts.trace == TraceMode::Reference && opts.cache.is_some()) {
        let sim = cache_hierarchy(opts.cache.as_deref())?;
        // The levels' bytes and the simulator's note are in `m` already (trace_command).
        trace::measure_command_with_sink(argv, opts.by_function, Box::new(sim), opts.trace == TraceMode::Reference)?.0
    } else {
        let o = trace::TraceOptions {
            mode: opts.trace,
            by_function: opts.by_function,
            sink: None,
        };
        trace::measure_command(argv, &o)?
    };
    if !opts.trace_timing {
        return Ok(CommandOutcome::Measured(Box::new(m)));
    }
    let collector = if m.regions.is_empty() {
        None
    } else {
        Some(region_times::Collector::new()?)
    };
    let (samples, runs) = match native_runs_with_regions(argv, opts.repeat, "after the trace", collector.as_ref())? {
        Ok(x) => x,
        Err(status) => return Ok(CommandOutcome::Failed { status }),
    };
    m.seconds_samples = samples;
    regions_timed(&mut m.regions, &runs);
    m.extra.insert("repeats".into(), serde_json::json!(opts.repeat));
    if let Some(p) = m.provenance.as_mut() {
        p.seconds = Some(crate::report::Source::Native);
        p.notes.push(format!(
            "W and Q from one traced run; T from {} native run(s) after it",
            opts.repeat
        ));
    }
    Ok(CommandOutcome::Measured(Box::new(m)))
}

/// `repeat` native runs of `argv`, timed: the samples, or the status to pass on when one
/// failed (said on stderr).
pub(crate) fn native_runs(argv: &[String], repeat: u32, after: &str) -> Result<std::result::Result<Vec<f64>, i32>> {
    Ok(native_runs_with_regions(argv, repeat, after, None)?.map(|(samples, _)| samples))
}

/// Region times of one native run, per name.
type RunRegions = BTreeMap<String, region_times::RegionTime>;

/// The runs' times and region times, or the status to pass on.
type TimedRuns = std::result::Result<(Vec<f64>, Vec<RunRegions>), i32>;

/// [`native_runs`], each run also handing its region times back through `collector`.
fn native_runs_with_regions(argv: &[String], repeat: u32, after: &str, collector: Option<&region_times::Collector>) -> Result<TimedRuns> {
    let mut samples = Vec::with_capacity(repeat as usize);
    let mut regions = Vec::new();
    for rep in 0..repeat {
        match native_run(argv, collector.map(|c| c.env()))? {
            Ok(secs) => {
                samples.push(secs);
                if let Some(c) = collector {
                    regions.push(c.take_run().times);
                }
            }
            Err((code, what)) => {
                eprintln!(
                    "roofline: {} {what} in its native run {} of {} ({after}); no report written",
                    argv[0],
                    rep + 1,
                    repeat
                );
                return Ok(Err(code));
            }
        }
    }
    Ok(Ok((samples, regions)))
}

/// Each traced region's T: its wall time in every native run that reported it (its
/// calls there should be the traced run's; a mismatch is said).
fn regions_timed(regions: &mut [RegionMeasurement], runs: &[RunRegions]) {
    for r in regions {
        let times: Vec<&region_times::RegionTime> = runs.iter().filter_map(|run| run.get(&r.name)).collect();
        let m = &mut r.measurement;
        let notes = &mut m.provenance.get_or_insert_with(Default::default).notes;
        if times.len() < runs.len() || runs.is_empty() {
            notes.push(format!(
                "no wall time for region '{}' from {} of {} native run(s): its session was not dropped there (process::exit?), or the region ran only under the tracer",
                r.name,
                runs.len() - times.len(),
                runs.len()
            ));
        }
        if times.is_empty() {
            continue;
        }
        if let Some(t) = times.iter().find(|t| t.calls != r.calls) {
            notes.push(format!(
                "region '{}' began {} time(s) in a native run but {} in the traced one: its W and T may describe different work",
                r.name, t.calls, r.calls
            ));
        }
        m.seconds_samples = times.iter().map(|t| t.seconds).collect();
        if let Some(p) = m.provenance.as_mut() {
            p.seconds = Some(crate::report::Source::Native);
        }
        m.extra.insert("repeats".into(), serde_json::json!(times.len()));
    }
}

/// One native run of `argv` (no shell, stdio inherited), timed from spawn to exit:
/// `Ok(Ok(seconds))`, or `Ok(Err((exit code to pass on, what happened)))` when it failed.
fn native_run(argv: &[String], env: Option<(&str, &Path)>) -> Result<std::result::Result<f64, (i32, String)>> {
    let program = crate::counters::command::resolve_program(&argv[0])?;
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&argv[1..]);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let t0 = std::time::Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        Error::input(
            format!("cannot run {}: {e}", program.display()),
            "check the command and its permissions",
        )
    })?;
    let status = child.wait().map_err(|e| Error::io("waiting for the command", e))?;
    let secs = t0.elapsed().as_secs_f64();
    let (code, signal) = perf::exit_code(&status);
    Ok(match signal {
        Some(sig) => Err((code, format!("was killed by {}", signal_name(sig)))),
        None if code != 0 => Err((code, format!("exited with status {code}"))),
        None => Ok(secs),
    })
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
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

fn perf_command(program: std::path::PathBuf, argv: &[String], opts: &CommandOptions, pmus: &Path) -> Result<CommandOutcome> {
    let (specs, counters, notes) =
        crate::counters::team::select_events(opts.events, pmus, opts.platform.as_deref(), opts.optional_events, opts.uncore)?;
    let plat = match opts.events {
        EventSet::Software => None,
        EventSet::Platform => Some(platform(opts.platform.as_deref())?),
    };
    let plan = perf::plan_groups(&specs, counters);
    say_multiplexed_groups(&specs, &plan);
    for n in &notes {
        eprintln!("roofline: {n}");
    }
    // The program's own sessions hand their regions back through this directory: counted
    // points from a roofline::Session with counters, times from any session or marker.
    let collector = region_times::Collector::new()?;
    let (k, v) = collector.env();
    let cmd = CommandSpec {
        program,
        argv: argv.to_vec(),
        env: vec![(k.to_string(), v.to_string_lossy().into_owned())],
    };
    let mut runs: Vec<(f64, Vec<EventCount>)> = Vec::new();
    let mut taken: Vec<region_times::TakenRun> = Vec::new();
    for rep in 0..opts.repeat {
        let run = perf::run_command(&specs, &plan, &cmd)?;
        taken.push(collector.take_run());
        let (code, signal) = perf::exit_code(&run.status);
        if let Some(sig) = signal {
            eprintln!(
                "roofline: {} was killed by {} (run {} of {}); no report written",
                argv[0],
                signal_name(sig),
                rep + 1,
                opts.repeat
            );
            return Ok(CommandOutcome::Failed { status: code });
        }
        if code != 0 {
            eprintln!(
                "roofline: {} exited with status {code} (run {} of {}); no report written",
                argv[0],
                rep + 1,
                opts.repeat
            );
            return Ok(CommandOutcome::Failed { status: code });
        }
        for w in perf::multiplex_warnings(&run.counts) {
            eprintln!("roofline: {w}");
        }
        runs.push((run.wall_seconds, run.counts));
    }
    let m = counted_measurement(&specs, &plan, runs, notes, opts.repeat, crate::report::Source::Perf)?;
    let median_run = median_index(&m.seconds_samples);
    let seconds = m.seconds_samples.get(median_run).copied().unwrap_or(0.0);
    let mut m = m;
    regions_counted_in_process(&mut m, &taken, median_run);
    // On the counts as read, before a background is subtracted (which could hide a phantom).
    check_plausible(&m, seconds, plat.as_ref().map(|p| p.key.as_str()))?;
    if opts.idle_baseline {
        idle_baseline(&specs, &mut m, seconds, &|s, d| perf::idle_baseline(s, d))?;
    }
    Ok(CommandOutcome::Measured(Box::new(m)))
}

/// The command's regions under perf: counters outside the program count the whole run only,
/// so a region's W and Q are what the program's own `roofline::Session` counted (written
/// when it was dropped), from the run whose whole-run counts are reported; its T samples are
/// every run's. Regions that were only timed (the dependency-free roofline-marker crate, a
/// time-only session) are named in a note: they have no W or Q here.
fn regions_counted_in_process(m: &mut Measurement, taken: &[region_times::TakenRun], median_run: usize) {
    let Some(run) = taken.get(median_run) else { return };
    let mut notes = Vec::new();
    for (name, (point, sessions, counting)) in &run.counted {
        let mut r = Measurement::from(point.clone());
        let calls = r.extra.get("calls").and_then(|c| c.as_u64()).unwrap_or(0);
        // T: this region's summed wall time in every run that counted it.
        let samples: Vec<f64> = taken
            .iter()
            .filter_map(|t| t.counted.get(name).map(|c| c.0.seconds_samples.iter().sum::<f64>()))
            .collect();
        let p = r.provenance.get_or_insert_with(Default::default);
        p.notes.push(format!(
            "counted in the program by its roofline::Session ({}), in the run whose whole-run counts are reported; T from {} run(s)",
            if counting == "thread" {
                "its own thread"
            } else {
                "every thread while the region was open"
            },
            samples.len()
        ));
        if *sessions > 1 {
            p.notes.push(format!(
                "{sessions} sessions counted region '{name}' in that run: the first one's counts are reported (each whole-process session counts everything in its window)"
            ));
        }
        if samples.len() < taken.len() {
            p.notes.push(format!(
                "region '{name}' was not counted in {} of {} run(s): its session was not dropped there (process::exit?)",
                taken.len() - samples.len(),
                taken.len()
            ));
        }
        r.seconds_samples = samples;
        r.extra.insert("repeats".into(), serde_json::json!(r.seconds_samples.len()));
        m.regions.push(RegionMeasurement {
            name: name.clone(),
            calls,
            measurement: r,
        });
    }
    let timed_only: Vec<String> = run
        .times
        .keys()
        .filter(|n| !run.counted.contains_key(*n))
        .map(|n| format!("'{n}'"))
        .collect();
    if !timed_only.is_empty() {
        notes.push(format!(
            "region(s) {}: marked, but no counts came back from the program (roofline-marker, a session without counters, or the C marker API, whose merged counts go to ROOFLINE_OUTPUT): per-region W and Q under perf need a roofline::Session with counters (Backend::Auto or Perf); --backend trace counts them at the markers",
            timed_only.join(", ")
        ));
    }
    if let Some(p) = m.provenance.as_mut() {
        p.notes.extend(notes);
    }
}

/// More than one hardware group: the kernel multiplexes them, said before the run.
pub(crate) fn say_multiplexed_groups(specs: &[CounterSpec], plan: &[Vec<usize>]) {
    let hw_groups = plan.iter().filter(|g| specs[g[0]].scope == Scope::Core).count();
    if hw_groups > 1 {
        eprintln!(
            "roofline: {hw_groups} hardware event groups do not fit the counters at once: the kernel multiplexes them (ratios below)"
        );
    }
}

/// Index of the median of `samples` (the upper one of an even count), in the given order.
fn median_index(samples: &[f64]) -> usize {
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by(|&a, &b| samples[a].total_cmp(&samples[b]));
    order.get(order.len() / 2).copied().unwrap_or(0)
}

/// W and Q from the counted runs of a command (perf or the simulated PMU): the run with the
/// median time gives the counts, every run's counts are kept in `extra.runs`.
pub(crate) fn counted_measurement(
    specs: &[CounterSpec],
    plan: &[Vec<usize>],
    runs: Vec<(f64, Vec<EventCount>)>,
    notes: Vec<String>,
    repeat: u32,
    source: crate::report::Source,
) -> Result<Measurement> {
    let samples: Vec<f64> = runs.iter().map(|r| r.0).collect();
    let median_run = median_index(&samples);
    let mut m = perf::to_measurement(specs, &runs[median_run].1, samples.clone());
    crate::counters::trust::mark(&mut m, specs, &runs[median_run].1, source);
    m.extra.insert("repeats".into(), serde_json::json!(repeat));
    if runs.len() > 1 {
        let per_run: Vec<serde_json::Value> = runs
            .iter()
            .map(|(wall, counts)| {
                let c: serde_json::Map<String, serde_json::Value> = counts
                    .iter()
                    .map(|c| (c.name.clone(), serde_json::json!(c.scaled.map(|s| s.value))))
                    .collect();
                serde_json::json!({ "seconds": wall, "counts": c })
            })
            .collect();
        m.extra.insert("runs".into(), serde_json::Value::Array(per_run));
    }
    m.extra.insert(
        "hardware_groups".into(),
        serde_json::json!(
            plan.iter()
                .filter(|g| specs[g[0]].scope == Scope::Core)
                .map(|g| g.iter().map(|&i| specs[i].name.clone()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        ),
    );
    if let Some(prov) = m.provenance.as_mut() {
        prov.notes.extend(notes);
    }
    Ok(m)
}

/// Counts `specs` for a duration with no command running (the idle background).
pub(crate) type IdleCounter<'a> = dyn Fn(&[CounterSpec], Duration) -> Result<Vec<EventCount>> + 'a;

/// `--idle-baseline`: count the system-wide events for `seconds` with no command (through
/// `count_idle`: perf's, or the simulated PMU's) and subtract that background.
pub(crate) fn idle_baseline(specs: &[CounterSpec], m: &mut Measurement, seconds: f64, count_idle: &IdleCounter<'_>) -> Result<()> {
    if !specs.iter().any(|s| matches!(s.scope, Scope::Uncore { .. })) {
        eprintln!("roofline: --idle-baseline: no system-wide events are counted, nothing to baseline");
        return Ok(());
    }
    eprintln!("roofline: measuring the idle background for {seconds:.2} s (--idle-baseline)");
    let idle = count_idle(specs, Duration::from_secs_f64(seconds))?;
    let base = perf::to_measurement(specs, &idle, vec![seconds]);
    let mut subtracted = serde_json::Map::new();
    for (lvl, b) in &base.bytes {
        if let Some(v) = m.bytes.get_mut(lvl) {
            *v = (*v - b).max(0.0);
            subtracted.insert(lvl.clone(), serde_json::json!(b));
        }
    }
    m.extra.insert("idle_baseline_bytes".into(), serde_json::Value::Object(subtracted));
    if let Some(prov) = m.provenance.as_mut() {
        prov.notes
            .push("system-wide bytes have the idle background (same duration, no command) subtracted".into());
    }
    Ok(())
}

/// Reject counts that cannot be true, like LIKWID's phantom-channel 1.88e19 bytes: more
/// DRAM bytes than `seconds` × 10× the platform's peak bandwidth (the check `import` makes;
/// an unknown platform gets the most generous ceiling).
pub fn check_plausible(m: &Measurement, seconds: f64, platform_key: Option<&str>) -> Result<()> {
    let Some(&b) = m.bytes.get("dram") else { return Ok(()) };
    events::check_dram_plausible(b, seconds, platform_key.unwrap_or("unknown")).map_err(|e| match e {
        Error::Input { cause, .. } => Error::unavailable(
            cause,
            "an uncore event is miscounting (a phantom memory channel?) or --platform is wrong: check the memory events with `perf stat -a`",
        ),
        other => other,
    })
}

/// The report of a measured command: this machine's summary, the environment, one point
/// named after the program. A point whose W was not counted has no rate either.
pub fn command_report(argv: &[String], measurement: Measurement) -> Report {
    let name = Path::new(&argv[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| argv[0].clone());
    let mut env = environment();
    env.measured_ghz = measurement.extra.get("effective_ghz").and_then(|g| g.as_f64());
    let mut report = Report::new(machine_summary(), env);
    let mut measurement = measurement;
    let measurement_regions = std::mem::take(&mut measurement.regions);
    let mut point = measurement.into_point(name);
    if point.provenance.flops.is_none() {
        point.gflops = None; // W was not counted: no rate either.
    }
    report.points.push(point);
    // One point per region of the region API's markers, after the whole run's.
    for r in measurement_regions {
        let mut p = r.measurement.into_point(r.name);
        if p.provenance.flops.is_none() {
            p.gflops = None;
        }
        report.points.push(p);
    }
    report
}

fn machine_summary() -> serde_json::Value {
    let cpuid = raw_cpuid::CpuId::new();
    serde_json::json!({
        "vendor": cpuid.get_vendor_info().map(|v| v.as_str().to_string()),
        "brand": cpuid.get_processor_brand_string().map(|b| b.as_str().trim().to_string()),
        "microarchitecture": perf::identify_platform().map(|p| p.key),
    })
}

fn environment() -> Environment {
    let cpuid = raw_cpuid::CpuId::new();
    Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        // roofline's own argv, which holds the measured command after `--`.
        command_line: std::env::args().collect(),
        hypervisor: cpuid.get_hypervisor_info().map(|h| format!("{:?}", h.identify())),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string()),
        ..Environment::default()
    }
}

/// How a suite kernel's W and Q are counted (its timing is always native, by the team runner).
pub enum KernelCounting {
    /// The kernel's own formulas.
    Analytic,
    /// perf_event counters on every team thread around exactly the timed calls.
    Perf(crate::counters::team::Selection),
    /// W and core Q of one traced `run()` per team thread's instance (traced by
    /// [`KernelCounting::prepare`]), the rest analytic.
    Trace(Vec<Tally>),
    /// The simulated PMU: each team thread's instance traced once (memory mode, cold simulated
    /// caches) by [`KernelCounting::prepare`]; the simulated counters count that truth per
    /// call, through perf's formulas, in place of perf's counters around the timed calls.
    Simulated(Box<SimulatedKernel>),
}

/// What [`KernelCounting::Simulated`] counts with.
pub struct SimulatedKernel {
    pub pmu: simulated::SimulatedPmu,
    pub selection: simulated::Selection,
    pub hierarchy: crate::counters::cachesim::CacheHierarchy,
    /// The truth of one call per instance (thread).
    pub truths: Vec<simulated::Truth>,
}

/// The backend a suite kernel uses for `asked`: `auto` is perf where a core PMU exists, else
/// analytic (tracing a kernel is asked for, never assumed).
pub fn resolve_kernel_backend(asked: BackendKind) -> BackendKind {
    match asked {
        BackendKind::Auto if perf::core_pmu(Path::new(perf::SYSFS_PMUS)).is_ok() => BackendKind::Perf,
        BackendKind::Auto => BackendKind::Analytic,
        b => b,
    }
}

impl KernelCounting {
    /// What `backend` (resolved) counts with; perf's events chosen and checked now (one line
    /// and exit 2 without a PMU), before anything runs. `optional`: the platform's opt-in
    /// events too (single precision, FP16, AMD's FMA flops).
    pub fn select(backend: BackendKind, events: EventSet, platform: Option<&str>, optional: bool) -> Result<KernelCounting> {
        Ok(match backend {
            BackendKind::Perf => KernelCounting::Perf(crate::counters::team::select_events(
                events,
                Path::new(perf::SYSFS_PMUS),
                platform,
                optional,
                true,
            )?),
            BackendKind::Trace => KernelCounting::Trace(Vec::new()),
            BackendKind::Simulated => {
                if events == EventSet::Software {
                    return Err(Error::input(
                        "--backend simulated simulates the platform's hardware events, not software ones",
                        "drop `--events software`, or use `--backend perf --events software`",
                    ));
                }
                let pmu = simulated::SimulatedPmu::from_env(platform)?;
                let selection = pmu.counters(optional, true)?;
                // Open faults fail now, before anything runs, as perf's do.
                pmu.open(selection.0.clone(), &perf::plan_groups(&selection.0, selection.1))?;
                KernelCounting::Simulated(Box::new(SimulatedKernel {
                    pmu,
                    selection,
                    hierarchy: cache_hierarchy(None)?,
                    truths: Vec::new(),
                }))
            }
            _ => KernelCounting::Analytic,
        })
    }

    /// The profile's choice: the platform's events when a core PMU exists and they can be
    /// opened, else analytic and why.
    pub fn perf_or_analytic() -> (KernelCounting, Option<String>) {
        let pmus = Path::new(perf::SYSFS_PMUS);
        if let Err(e) = perf::core_pmu(pmus) {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            return (KernelCounting::Analytic, Some(format!("W and Q analytic: {first}")));
        }
        match crate::counters::team::select_events(EventSet::Platform, pmus, None, false, true) {
            Ok(ev) => (KernelCounting::Perf(ev), None),
            Err(e) => (
                KernelCounting::Analytic,
                Some(format!("W and Q analytic: perf events unavailable ({e})")),
            ),
        }
    }

    /// Work done before any timing thread exists: the trace backend traces one instance per
    /// thread of the largest team (the traced child is forked from this process), each with
    /// the seed the analytic runner gives it.
    pub fn prepare(&mut self, kernel: &dyn Kernel, n: usize, variant: Variant, most_threads: usize) -> Result<()> {
        if let KernelCounting::Trace(tallies) = self {
            eprintln!(
                "roofline: tracing {} {} n={} ({} instance(s)) for W and core Q",
                kernel.name(),
                variant,
                n,
                most_threads
            );
            tallies.clear();
            for t in 0..most_threads {
                tallies.push(trace_instance(kernel, n, variant, ANALYTIC_SEED + t as u64)?);
            }
        }
        if let KernelCounting::Simulated(sim) = self {
            eprintln!(
                "roofline: tracing {} {} n={} ({} instance(s)) for the simulated PMU (memory mode)",
                kernel.name(),
                variant,
                n,
                most_threads
            );
            sim.truths.clear();
            for t in 0..most_threads {
                let mut inst = kernel
                    .instance(n, variant, ANALYTIC_SEED + t as u64)
                    .map_err(|e| Error::input(format!("{} at size {n}: {e}", kernel.name()), "use a valid --size or --bytes"))?;
                let mut work = || inst.run();
                sim.truths.push(simulated::trace_work_truth(&mut work, &sim.hierarchy, 0.0)?);
            }
        }
        Ok(())
    }

    /// Run `spec` natively (T) and count its W and Q; L2/L3/DRAM Q that nothing counted come
    /// from the cache model of `caches`.
    pub fn measure(&self, spec: &KernelRun, caches: &[Cache], on_sample: &(dyn Fn(usize, f64) + Sync)) -> Result<Measurement> {
        let mut m = match self {
            KernelCounting::Perf((specs, counters, notes)) => {
                crate::counters::team::run_kernel(spec, specs.clone(), *counters, notes.clone(), on_sample)?
            }
            KernelCounting::Analytic | KernelCounting::Trace(_) => analytic::run(spec, on_sample)?,
            KernelCounting::Simulated(sim) => sim.measure(spec, on_sample)?,
        };
        if let KernelCounting::Trace(tallies) = self {
            use_traced_counts(&mut m, &tallies[..spec.threads.min(tallies.len())]);
        }
        // L2/L3/DRAM by the cache model (only where no counted figure exists).
        analytic::apply_cache_model(&mut m, spec.kernel, spec.n, spec.variant, spec.threads, caches);
        Ok(m)
    }
}

impl SimulatedKernel {
    /// T native (the analytic runner), W and the counted levels from the simulated counters
    /// counting the instances' truth per call, merged as perf's counts are.
    fn measure(&self, spec: &KernelRun, on_sample: &(dyn Fn(usize, f64) + Sync)) -> Result<Measurement> {
        let m = analytic::run(spec, on_sample)?;
        let mut truth = simulated::Truth::default();
        for t in self.truths.iter().take(spec.threads) {
            truth.add(t);
        }
        let samples = &m.seconds_samples;
        truth.seconds = samples.get(median_index(samples)).copied().unwrap_or(0.0);
        let (specs, counters, notes) = &self.selection;
        let plan = perf::plan_groups(specs, *counters);
        let mut set = self.pmu.open(specs.clone(), &plan)?;
        let counts = set.counts_of(&truth)?;
        for w in perf::multiplex_warnings(&counts) {
            eprintln!("roofline: {w}");
        }
        let mut counted = perf::to_measurement(specs, &counts, Vec::new());
        crate::counters::trust::mark(&mut counted, specs, &counts, crate::report::Source::Simulated);
        let mut m = crate::counters::team::merge(m, counted, notes.clone());
        if let Some(p) = m.provenance.as_mut() {
            p.notes
                .push("simulated counts are per call: one traced call per thread's instance, from cold simulated caches".into());
        }
        simulated::mark_simulated(&mut m, &self.pmu);
        Ok(m)
    }
}

/// The seed `counters::analytic::run` gives thread `t`'s instance: `ANALYTIC_SEED + t`.
const ANALYTIC_SEED: u64 = 0x5EED;

/// W and core Q of one `run()` of a fresh instance, traced in a forked child (as `roofline
/// validate` does). The count includes the few bytes of the call path around `run()`.
fn trace_instance(kernel: &dyn Kernel, n: usize, variant: Variant, seed: u64) -> Result<Tally> {
    let mut inst = kernel
        .instance(n, variant, seed)
        .map_err(|e| Error::input(format!("{} at size {n}: {e}", kernel.name()), "use a valid --size or --bytes"))?;
    let mut work = || inst.run();
    Ok(trace::trace_forked(&mut work, TraceMode::Flops, false)?.total)
}

/// Replace the analytic W and core Q of `m` by the traced ones, summed over the team's
/// instances; DRAM Q stays analytic (the trace backend has no cache model in flops mode).
fn use_traced_counts(m: &mut Measurement, tallies: &[Tally]) {
    use crate::report::Source;
    use crate::report::schema::level;
    let mut sum = Tally::default();
    for t in tallies {
        sum.add_scaled(t, 1);
    }
    let by_class: BTreeMap<String, f64> = sum
        .flops
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .map(|(i, v)| (trace::tally::class_key(i).to_string(), *v as f64))
        .collect();
    m.flops = crate::report::Flops::of_classes(by_class);
    m.flops.effective = (sum.effective_unknown == 0).then_some(sum.effective as f64);
    m.flops.fma = Some(sum.fma_flops as f64);
    if m.flops.int_ops.is_some() {
        m.flops.int_ops_effective = (sum.effective_unknown == 0).then_some(sum.effective_int as f64);
    }
    m.bytes.insert(level::CORE.to_string(), (sum.core_load + sum.core_store) as f64);
    m.extra.insert("core_load_bytes".into(), sum.core_load.into());
    m.extra.insert("core_store_bytes".into(), sum.core_store.into());
    m.extra.insert("traced_instructions".into(), sum.instructions.into());
    if let Some(p) = m.provenance.as_mut() {
        p.flops = Some(Source::Trace);
        p.bytes.insert(level::CORE.to_string(), Source::Trace);
        p.notes.push(
            "W and core Q traced (one run() per thread's instance; core Q includes the call path's few bytes around run(), under 1 KiB per instance, see `roofline validate`); dram analytic; T native"
                .into(),
        );
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
        // The notes perf_command prints and keeps: Zen 1 says Q_dram is unavailable.
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
