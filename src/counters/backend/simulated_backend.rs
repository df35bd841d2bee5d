//! `--backend simulated`: the simulated PMU (a test instrument) counts the perf path end to
//! end, with counts made from a trace of the same run and faults a test injects. Never
//! chosen by `auto`.

use roofline_kernels::{Kernel, Variant};

use super::*;
use crate::counters::analytic::{self, KernelRun};
use crate::counters::command::CommandSpec;
use crate::counters::perf::{self, CounterSpec, EventCount};
use crate::counters::team::EventSet;
use crate::counters::{BackendKind, Measurement, region_times, simulated};
use crate::error::{Error, Result};
use crate::schema::Source;

/// The simulated PMU as a backend.
#[derive(Default)]
pub struct SimulatedBackend {
    /// What it counts suite kernels with: set by [`for_kernels`], events chosen and opened once.
    pub kernel: Option<Box<SimulatedKernel>>,
}

/// What the simulated PMU counts a suite kernel with: each team thread's instance traced once
/// (memory mode, cold simulated caches) by [`Backend::prepare_kernel`]; the simulated counters
/// count that truth per call, through perf's formulas, in place of perf's counters around
/// the timed calls.
pub struct SimulatedKernel {
    pub pmu: simulated::SimulatedPmu,
    pub selection: simulated::Selection,
    pub hierarchy: crate::counters::cachesim::CacheHierarchy,
    /// The truth of one call per instance (thread).
    pub truths: Vec<simulated::Truth>,
}

impl SimulatedKernel {
    /// The platform's events of `platform` (else CPUID's) on the simulated PMU, opened once
    /// now so that open faults fail before anything runs, as perf's do.
    pub fn select(events: EventSet, platform: Option<&str>, optional: bool) -> Result<SimulatedKernel> {
        if events == EventSet::Software {
            return Err(Error::input(
                "--backend simulated simulates the platform's hardware events, not software ones",
                "drop `--events software`, or use `--backend perf --events software`",
            ));
        }
        let pmu = simulated::SimulatedPmu::from_env(platform)?;
        let selection = pmu.counters(optional, true)?;
        pmu.open(selection.0.clone(), &perf::plan_groups(&selection.0, selection.1))?;
        Ok(SimulatedKernel {
            pmu,
            selection,
            hierarchy: cache_hierarchy(None)?,
            truths: Vec::new(),
        })
    }
}

impl Backend for SimulatedBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Simulated
    }

    /// The perf path of a command with the simulated PMU. The command is traced once (memory
    /// mode: W per class, bytes per level), then run natively `repeat` times (T); each run's
    /// counts are the simulated counters' over that run, read, scaled and turned into W and Q
    /// exactly as perf's are. The regions of the region API's markers are counted the same
    /// way, each from its traced truth. With `single_run` (a rank of a launcher's job) the
    /// traced run is the one run: its counts are reported, without T.
    fn measure_command(&self, program: &Path, argv: &[String], opts: &CommandOptions) -> Result<CommandOutcome> {
        let cmd = CommandSpec {
            program: program.to_path_buf(),
            argv: argv.to_vec(),
            env: Vec::new(),
        };
        if opts.events == EventSet::Software {
            return Err(Error::input(
                "--backend simulated simulates the platform's hardware events, not software ones",
                "drop `--events software`, or use `--backend perf --events software`",
            ));
        }
        let pmu = simulated::SimulatedPmu::from_env(opts.platform.as_deref())?;
        let (specs, counters, notes) = pmu.counters(opts.optional_events, opts.uncore)?;
        let plan = perf::plan_groups(&specs, counters);
        say_multiplexed_groups(&specs, &plan);
        for n in &notes {
            eprintln!("roofline: {n}");
        }
        let mut set = pmu.open(specs.clone(), &plan)?;
        let hierarchy = cache_hierarchy(opts.cache.as_deref())?;
        let started = std::time::Instant::now();
        let mut traced = simulated::trace_command_truth(&cmd, hierarchy)?;
        let traced_seconds = started.elapsed().as_secs_f64();
        let split = traced.extra.simulated_dram_split;
        let traced_regions = std::mem::take(&mut traced.regions);
        let (samples, region_runs) = if opts.single_run {
            (vec![traced_seconds], Vec::new())
        } else {
            let collector = region_times::Collector::new()?;
            match native_runs_with_regions(&cmd, opts.repeat, "after the trace", Some(&collector))? {
                Ok(x) => x,
                Err(status) => return Ok(CommandOutcome::Failed { status }),
            }
        };
        let mut runs = Vec::with_capacity(samples.len());
        for &secs in &samples {
            let counts = set.counts_of(&simulated::Truth::from_trace(&traced, split, secs))?;
            for w in perf::multiplex_warnings(&counts) {
                eprintln!("roofline: {w}");
            }
            runs.push((secs, counts));
        }
        let mut m = counted_measurement(&specs, &plan, runs, notes, opts.repeat, Source::Simulated)?;
        let seconds = m.seconds_samples.iter().copied().fold(f64::NAN, f64::max);
        check_plausible(&m, seconds, Some(&pmu.platform.key))?;
        if opts.idle_baseline {
            // The simulated machine runs nothing else: its idle background is zero, counted
            // through the same path (and the same faults) as real counters.
            let idle = |specs: &[CounterSpec], d: std::time::Duration| -> Result<Vec<EventCount>> {
                let mut idle_set = pmu.open(specs.to_vec(), &perf::plan_groups(specs, counters))?;
                idle_set.counts_of(&simulated::Truth {
                    seconds: d.as_secs_f64(),
                    ..simulated::Truth::default()
                })
            };
            idle_baseline(&specs, &mut m, seconds, &idle)?;
        }
        m.regions = count_regions(&mut set, &specs, &traced_regions, traced_seconds)?;
        if opts.single_run {
            without_time(&mut m);
        } else {
            regions_timed(&mut m.regions, &region_runs);
            if let Some(note) = regions_not_traced(&m.regions, &region_runs) {
                eprintln!("roofline: {note}");
                m.provenance.get_or_insert_with(Default::default).notes.push(note);
            }
        }
        m.extra.insert("traced_instructions", serde_json::json!(traced.extra.instructions));
        simulated::mark_simulated(&mut m, &pmu);
        for r in &mut m.regions {
            simulated::mark_simulated(&mut r.measurement, &pmu);
        }
        Ok(CommandOutcome::Measured(Box::new(m)))
    }

    fn prepare_kernel(&mut self, kernel: &dyn Kernel, n: usize, variant: Variant, most_threads: usize) -> Result<()> {
        let state = self.kernel.as_mut().ok_or_else(not_for_kernels)?;
        eprintln!(
            "roofline: tracing {} {} n={} ({} instance(s)) for the simulated PMU (memory mode)",
            kernel.name(),
            variant,
            n,
            most_threads
        );
        state.truths.clear();
        for t in 0..most_threads {
            let mut inst = kernel
                .instance(n, variant, ANALYTIC_SEED + t as u64)
                .map_err(|e| Error::input(format!("{} at size {n}: {e}", kernel.name()), "use a valid --size or --bytes"))?;
            let mut work = || inst.run();
            state.truths.push(simulated::trace_work_truth(&mut work, &state.hierarchy, 0.0)?);
        }
        Ok(())
    }

    /// T native (the analytic runner), W and the counted levels from the simulated counters
    /// counting the instances' truth per call, merged as perf's counts are.
    fn count_kernel(&self, spec: &KernelRun, on_sample: &OnSample<'_>) -> Result<Measurement> {
        let kernel = self.kernel.as_ref().ok_or_else(not_for_kernels)?;
        let m = analytic::run(spec, on_sample)?;
        let mut truth = simulated::Truth::default();
        for t in kernel.truths.iter().take(spec.threads) {
            truth.add(t);
        }
        let samples = &m.seconds_samples;
        truth.seconds = samples.get(median_index(samples)).copied().unwrap_or(0.0);
        let (specs, counters, notes) = &kernel.selection;
        let plan = perf::plan_groups(specs, *counters);
        let mut set = kernel.pmu.open(specs.clone(), &plan)?;
        let counts = set.counts_of(&truth)?;
        for w in perf::multiplex_warnings(&counts) {
            eprintln!("roofline: {w}");
        }
        let mut counted = perf::to_measurement(specs, &counts, Vec::new());
        crate::counters::trust::mark(&mut counted, specs, &counts, crate::schema::Source::Simulated);
        let mut m = crate::counters::team::merge(m, counted, notes.clone());
        if let Some(p) = m.provenance.as_mut() {
            p.notes
                .push("simulated counts are per call: one traced call per thread's instance, from cold simulated caches".into());
        }
        simulated::mark_simulated(&mut m, &kernel.pmu);
        Ok(m)
    }
}

/// Each traced region counted by the simulated counters from its own truth (W by class and
/// the cache simulator's bytes while it was open), through perf's formulas, as the program's
/// own counting session would count it on real counters. Its DRAM read/write split is the
/// whole run's only: on platforms whose DRAM events count reads and writes apart, a region's
/// DRAM is not counted (said).
fn count_regions(
    set: &mut simulated::SimulatedCounterSet,
    specs: &[CounterSpec],
    traced: &[crate::counters::RegionMeasurement],
    seconds: f64,
) -> Result<Vec<crate::counters::RegionMeasurement>> {
    let split_dram = specs
        .iter()
        .any(|s| s.quantity == "bytes.dram_read" || s.quantity == "bytes.dram_write");
    let mut out = Vec::with_capacity(traced.len());
    for r in traced {
        let t = &r.measurement;
        let counts = set.counts_of(&simulated::Truth::from_trace(t, None, seconds))?;
        let mut m = perf::to_measurement(specs, &counts, Vec::new());
        crate::counters::trust::mark(&mut m, specs, &counts, Source::Simulated);
        m.threads = t.threads;
        m.extra.calls = t.extra.calls;
        m.extra.region = t.extra.region.clone();
        let notes = &mut m.provenance.get_or_insert_with(Default::default).notes;
        notes.extend(
            t.provenance
                .iter()
                .flat_map(|p| p.notes.iter().filter(|n| n.starts_with("region '")).cloned()),
        );
        if split_dram && t.bytes.contains_key("dram") {
            notes.push(format!(
                "bytes.dram: not counted for region '{}': this platform's DRAM events count reads and writes apart, and the simulated PMU has the cache simulator's split for the whole run only",
                r.name
            ));
        }
        out.push(crate::counters::RegionMeasurement {
            name: r.name.clone(),
            calls: r.calls,
            measurement: m,
        });
    }
    Ok(out)
}

/// The one traced run's counts without T: a traced run's wall time is the tracer's, not the
/// command's (the counters were enabled for it; the rates are left out).
fn without_time(m: &mut Measurement) {
    let strip = |m: &mut Measurement| {
        m.seconds_samples.clear();
        let p = m.provenance.get_or_insert_with(Default::default);
        p.seconds = None;
        p.notes.push(
            "no T: the command ran once, traced (the simulated counters counted that run); a rank of a launcher's job is not run again natively"
                .into(),
        );
    };
    for r in &mut m.regions {
        strip(&mut r.measurement);
    }
    strip(m);
}

fn not_for_kernels() -> Error {
    Error::unavailable(
        "this simulated backend was opened for commands: no events are chosen for suite kernels",
        "open it with counters::backend::for_kernels",
    )
}
