//! `--backend perf` on a command: the platform's events counted around every run, the
//! median run's counts reported; the checks and the idle baseline shared with the simulated PMU.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::counters::analytic::KernelRun;
use crate::counters::command::CommandSpec;
use crate::counters::perf::{self, CounterSpec, EventCount, Scope};
use crate::counters::team::EventSet;
use crate::counters::{BackendKind, Measurement, RegionMeasurement, command, events, region_times};
use crate::error::{Error, Result};

/// perf_event counters: the platform's events around a command's runs, or on every team
/// thread around exactly the timed calls of a suite kernel.
pub struct PerfBackend {
    /// Where the kernel lists its PMUs (`/sys/bus/event_source/devices`).
    pub pmus: std::path::PathBuf,
    /// The events a suite kernel is counted with: set by [`for_kernels`], chosen and checked
    /// before anything runs.
    pub kernel_events: Option<crate::counters::team::Selection>,
}

impl Backend for PerfBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Perf
    }

    fn measure_command(&self, program: &Path, argv: &[String], opts: &CommandOptions) -> Result<CommandOutcome> {
        perf_command(program, argv, opts, &self.pmus)
    }

    fn count_kernel(&self, spec: &KernelRun, on_sample: &OnSample<'_>) -> Result<Measurement> {
        let Some((specs, counters, notes)) = &self.kernel_events else {
            return Err(Error::unavailable(
                "this perf backend was opened for commands: no events are chosen for suite kernels",
                "open it with counters::backend::for_kernels",
            ));
        };
        crate::counters::team::run_kernel(spec, specs.clone(), *counters, notes.clone(), on_sample)
    }
}

pub(super) fn perf_command(program: &Path, argv: &[String], opts: &CommandOptions, pmus: &Path) -> Result<CommandOutcome> {
    let (specs, counters, notes) =
        crate::counters::team::select_events(opts.events, pmus, opts.platform.as_deref(), opts.optional_events, opts.uncore)?;
    let plat = match opts.events {
        EventSet::Software => None,
        EventSet::Platform => Some(crate::counters::platform(opts.platform.as_deref())?),
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
        program: program.to_path_buf(),
        argv: argv.to_vec(),
        env: vec![(k.to_string(), v.to_string_lossy().into_owned())],
    };
    let mut runs: Vec<(f64, Vec<EventCount>)> = Vec::new();
    let mut taken: Vec<region_times::TakenRun> = Vec::new();
    for rep in 0..opts.repeat {
        let run = perf::run_command(&specs, &plan, &cmd)?;
        taken.push(collector.take_run());
        let (code, signal) = command::exit_code(&run.status);
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
    let m = counted_measurement(&specs, &plan, runs, notes, opts.repeat, crate::schema::Source::Perf)?;
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
pub(super) fn regions_counted_in_process(m: &mut Measurement, taken: &[region_times::TakenRun], median_run: usize) {
    let Some(run) = taken.get(median_run) else { return };
    let mut notes = Vec::new();
    for (name, (point, sessions, counting)) in &run.counted {
        let mut r = Measurement::from(point.clone());
        let calls = r.extra.calls.unwrap_or(0);
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
        r.extra.insert("repeats", serde_json::json!(r.seconds_samples.len()));
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
pub(super) fn median_index(samples: &[f64]) -> usize {
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
    source: crate::schema::Source,
) -> Result<Measurement> {
    let samples: Vec<f64> = runs.iter().map(|r| r.0).collect();
    let median_run = median_index(&samples);
    let mut m = perf::to_measurement(specs, &runs[median_run].1, samples.clone());
    crate::counters::trust::mark(&mut m, specs, &runs[median_run].1, source);
    m.extra.insert("repeats", serde_json::json!(repeat));
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
        m.extra.insert("runs", serde_json::Value::Array(per_run));
    }
    m.extra.insert(
        "hardware_groups",
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
    m.extra.insert("idle_baseline_bytes", serde_json::Value::Object(subtracted));
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
