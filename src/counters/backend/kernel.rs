//! How a suite kernel's W and Q are counted (its timing is always native, by the team
//! runner).

use std::path::Path;

use roofline_kernels::{Kernel, Variant};

use super::*;
use crate::counters::analytic::{self, KernelRun};
use crate::counters::perf::{self};
use crate::counters::team::EventSet;
use crate::counters::trace::tally::Tally;
use crate::counters::{BackendKind, Measurement, simulated};
use crate::error::{Error, Result};
use crate::machine::Cache;

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
        crate::counters::trust::mark(&mut counted, specs, &counts, crate::schema::Source::Simulated);
        let mut m = crate::counters::team::merge(m, counted, notes.clone());
        if let Some(p) = m.provenance.as_mut() {
            p.notes
                .push("simulated counts are per call: one traced call per thread's instance, from cold simulated caches".into());
        }
        simulated::mark_simulated(&mut m, &self.pmu);
        Ok(m)
    }
}
