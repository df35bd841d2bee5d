//! The perf backend for the kernel suite (`roofline run --backend perf`, the profile where a
//! PMU exists): counters opened on each pinned team thread around exactly its timed calls
//! (warm-up, calibration, allocation and verification are outside), read on that thread, and
//! divided by the calls it made, so W and Q are per call like the analytic figures.
//!
//! System-wide (uncore) events count the whole socket: only team thread 0 opens them, or a
//! team of T threads would count the memory traffic T times.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Mutex;

use roofline_kernels::runner::TeamHooks;

use crate::counters::Measurement;
use crate::counters::analytic::{self, KernelRun};
use crate::counters::perf::{self, CounterSet, CounterSpec, EventCount, Scaled, Scope, Target};
use crate::error::{Error, Result};
use crate::schema::Source;

/// Which events a kernel run counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSet {
    /// The identified platform's FP, cache and memory events (needs a hardware PMU).
    Platform,
    /// Kernel software events only (task-clock, page-faults, context-switches, msr/tsc):
    /// T without W or Q, on any machine.
    Software,
}

/// What a team counts: the events, the general-purpose counters per core, and what the
/// events cannot count (notes for every point's provenance).
pub type Selection = (Vec<CounterSpec>, u32, Vec<String>);

/// The events to count, the general-purpose counters per core, and what the events cannot
/// count (notes for the provenance). `platform`: `--platform NAME|FILE`, else identified.
pub fn select_events(set: EventSet, pmus: &Path, platform: Option<&str>, optional: bool, uncore: bool) -> Result<Selection> {
    match set {
        EventSet::Software => Ok((perf::software_events(pmus, true), 4, vec![])),
        EventSet::Platform => {
            perf::core_pmu(pmus)?;
            perf::check_paranoid(perf::paranoid(), false)?;
            let plat = match platform {
                Some(spec) => crate::machine::Platform::load(spec)?,
                None => perf::identify_platform().ok_or_else(|| {
                    Error::input(
                        "unknown microarchitecture: no platform file matches this CPU's vendor, family and model",
                        "pass `--platform NAME|FILE` (see `platforms/`), or use `--backend trace`",
                    )
                })?,
            };
            let (specs, notes) = perf::counters_for_platform(&plat, pmus, optional, uncore, perf::nmi_watchdog_on())?;
            if specs.iter().any(|s| matches!(s.scope, Scope::Uncore { .. })) {
                perf::check_paranoid(perf::paranoid(), true)?;
            }
            Ok((specs, perf::core_counters(&plat), notes))
        }
    }
}

thread_local! {
    /// The counters of the team thread this runs on, between `begin` and `end`.
    static OPEN: RefCell<Option<(CounterSet, Vec<usize>)>> = const { RefCell::new(None) };
}

/// One team thread's final counts (indices into the team's specs) and its timed calls.
struct ThreadCounts {
    calls: u64,
    counts: Vec<(usize, EventCount)>,
}

/// [`TeamHooks`] that count `specs` on every team thread.
pub struct PerfTeam {
    specs: Vec<CounterSpec>,
    counters: u32,
    results: Mutex<Vec<ThreadCounts>>,
    errors: Mutex<Vec<String>>,
}

impl PerfTeam {
    /// Check that every event opens here (the one-line cause now, before anything runs).
    pub fn new(specs: Vec<CounterSpec>, counters: u32) -> Result<PerfTeam> {
        let plan = perf::plan_groups(&specs, counters);
        drop(CounterSet::open(specs.clone(), &plan, Target::ThisThread)?);
        Ok(PerfTeam {
            specs,
            counters,
            results: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        })
    }

    /// The specs team thread `i` opens: all on thread 0, the per-task ones elsewhere.
    fn indices(&self, i: usize) -> Vec<usize> {
        (0..self.specs.len())
            .filter(|&s| i == 0 || !matches!(self.specs[s].scope, Scope::Uncore { .. }))
            .collect()
    }

    fn open(&self, i: usize) -> Result<(CounterSet, Vec<usize>)> {
        let idx = self.indices(i);
        let specs: Vec<CounterSpec> = idx.iter().map(|&s| self.specs[s].clone()).collect();
        let plan = perf::plan_groups(&specs, self.counters);
        let mut set = CounterSet::open(specs, &plan, Target::ThisThread)?;
        set.enable(false)?;
        Ok((set, idx))
    }

    fn error(&self, e: impl ToString) {
        if let Ok(mut v) = self.errors.lock() {
            v.push(e.to_string());
        }
    }

    /// Per-call counts of every spec: Σ over the threads that counted it of count / calls.
    /// The running ratio is the smallest any thread saw; an event no thread had on a
    /// counter stays uncounted.
    pub fn per_call(&self) -> Result<Vec<EventCount>> {
        if let Some(e) = self.errors.lock().ok().and_then(|v| v.first().cloned()) {
            return Err(Error::unavailable(
                format!("counting on a team thread failed: {e}"),
                "run with --threads 1, or --backend analytic",
            ));
        }
        let results = self
            .results
            .lock()
            .map_err(|_| Error::unavailable("a team thread panicked", "run again"))?;
        Ok(combine(&self.specs, &results))
    }
}

fn combine(specs: &[CounterSpec], results: &[ThreadCounts]) -> Vec<EventCount> {
    specs
        .iter()
        .enumerate()
        .map(|(s, spec)| {
            let mut acc: Option<Scaled> = None;
            for r in results.iter().filter(|r| r.calls > 0) {
                for (_, c) in r.counts.iter().filter(|(i, _)| *i == s) {
                    let Some(x) = c.scaled else { continue };
                    let a = acc.get_or_insert(Scaled {
                        raw: 0,
                        value: 0.0,
                        running_ratio: 1.0,
                    });
                    a.raw += x.raw;
                    a.value += x.value / r.calls as f64;
                    a.running_ratio = a.running_ratio.min(x.running_ratio);
                }
            }
            EventCount {
                name: spec.name.clone(),
                scaled: acc,
            }
        })
        .collect()
}

impl TeamHooks for PerfTeam {
    fn begin(&self, i: usize) {
        match self.open(i) {
            Ok(set) => OPEN.with(|o| *o.borrow_mut() = Some(set)),
            Err(e) => self.error(e),
        }
    }

    fn end(&self, _i: usize, calls: u64) {
        let Some((mut set, idx)) = OPEN.with(|o| o.borrow_mut().take()) else {
            return;
        };
        let read = set.disable().and_then(|_| set.scaled());
        match read {
            Ok(counts) => {
                if let Ok(mut v) = self.results.lock() {
                    v.push(ThreadCounts {
                        calls,
                        counts: idx.into_iter().zip(counts).collect(),
                    });
                }
            }
            Err(e) => self.error(e),
        }
    }
}

/// Run `spec` natively with `specs` counted on every team thread: W and the levels the
/// events count from perf, everything else (core Q, levels no event counts) analytic, T
/// native. The analytic W stays in `extra.analytic_flops` for comparison. Levels nothing
/// counted keep the analytic cold figure: apply [`analytic::apply_cache_model`] after.
pub fn run_kernel(
    spec: &KernelRun,
    specs: Vec<CounterSpec>,
    counters: u32,
    notes: Vec<String>,
    on_sample: &(dyn Fn(usize, f64) + Sync),
) -> Result<Measurement> {
    let team = PerfTeam::new(specs, counters)?;
    let m = analytic::run_hooked(spec, on_sample, Some(&team))?;
    let counts = team.per_call()?;
    let mut counted = perf::to_measurement(&team.specs, &counts, Vec::new());
    crate::counters::trust::mark(&mut counted, &team.specs, &counts, Source::Perf);
    Ok(merge(m, counted, notes))
}

/// The analytic measurement `m` with what perf counted put in its place.
pub(crate) fn merge(mut m: Measurement, counted: Measurement, notes: Vec<String>) -> Measurement {
    let cprov = counted.provenance.unwrap_or_default();
    let prov = m.provenance.get_or_insert_with(Default::default);
    if cprov.flops == Some(Source::Perf) {
        m.extra.insert("analytic_flops", serde_json::json!(m.flops.total));
        m.flops = counted.flops;
        prov.flops = Some(Source::Perf);
    }
    for (level, src) in &cprov.bytes {
        if let Some(b) = counted.bytes.get(level) {
            m.bytes.insert(level.clone(), *b);
            prov.bytes.insert(level.clone(), *src);
            // the model's line for a level perf counted no longer applies
            prov.notes
                .retain(|n| !n.starts_with(&format!("{level} ")) && !n.starts_with(&format!("{level}:")));
        }
    }
    prov.notes
        .extend(cprov.notes.into_iter().filter(|n| !n.starts_with("bytes.core is not counted")));
    prov.untrusted.extend(cprov.untrusted);
    prov.notes.extend(notes);
    prov.notes
        .push("perf counts are per timed call: the team threads' counts around exactly the timed calls, divided by the calls".into());
    m.extra.extend(counted.extra);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, scope: Scope) -> CounterSpec {
        let mut s = CounterSpec::software("task-clock").unwrap();
        s.name = name.into();
        s.scope = scope;
        s
    }

    fn count(value: f64, ratio: f64) -> EventCount {
        EventCount {
            name: String::new(),
            scaled: Some(Scaled {
                raw: value as u64,
                value,
                running_ratio: ratio,
            }),
        }
    }

    /// Per call: each thread's count over its own calls, summed; uncore from thread 0 only.
    #[test]
    fn counts_are_per_call_and_summed_over_threads() {
        let specs = vec![spec("core", Scope::Software), spec("imc", Scope::Uncore { cpus: vec![0] })];
        let results = vec![
            ThreadCounts {
                calls: 40,
                counts: vec![(0, count(4000.0, 1.0)), (1, count(9000.0, 0.5))],
            },
            ThreadCounts {
                calls: 20,
                counts: vec![(0, count(3000.0, 0.8))],
            },
            // a thread that made no call adds nothing (no division by zero)
            ThreadCounts {
                calls: 0,
                counts: vec![(0, count(7.0, 1.0))],
            },
        ];
        let c = combine(&specs, &results);
        let core = c[0].scaled.unwrap();
        assert_eq!(core.value, 4000.0 / 40.0 + 3000.0 / 20.0);
        assert_eq!(core.running_ratio, 0.8);
        assert_eq!(c[1].scaled.unwrap().value, 9000.0 / 40.0);
        // an event nobody counted stays uncounted
        let c = combine(&[spec("x", Scope::Software)], &[]);
        assert!(c[0].scaled.is_none());
    }

    #[test]
    fn only_thread_zero_opens_system_wide_events() {
        let team = PerfTeam {
            specs: vec![
                spec("a", Scope::Software),
                spec("imc", Scope::Uncore { cpus: vec![0] }),
                spec("b", Scope::Core),
            ],
            counters: 4,
            results: Mutex::new(vec![]),
            errors: Mutex::new(vec![]),
        };
        assert_eq!(team.indices(0), vec![0, 1, 2]);
        assert_eq!(team.indices(3), vec![0, 2]);
    }

    #[test]
    fn perf_figures_replace_analytic_ones_level_by_level() {
        let k = roofline_kernels::api::find("triad").unwrap();
        let counts = k.counts(1 << 20, roofline_kernels::Variant::Scalar);
        let mut m = analytic::measurement(&counts, None, 1);
        m.provenance.as_mut().unwrap().notes.push("l2 = compulsory traffic (test)".into());
        m.bytes.insert("l2".into(), 1.0);
        let mut counted = Measurement::default();
        counted.flops.total = 123.0;
        counted.flops.by_class.insert("double_any_width".into(), 123.0);
        counted.bytes.insert("l2".into(), 456.0);
        counted.provenance = Some(crate::schema::Provenance {
            flops: Some(Source::Perf),
            bytes: [("l2".to_string(), Source::Perf)].into(),
            seconds: Some(Source::Native),
            notes: vec!["bytes.core is not counted by hardware".into()],
            untrusted: Vec::new(),
        });
        assert_eq!(m.flops.fma, Some(0.0), "the analytic scalar triad multiplies then adds");
        let out = merge(m, counted, vec!["platform note".into()]);
        assert_eq!(out.flops.total, 123.0);
        assert_eq!(out.flops.fma, None, "counted flops replace the analytic FMA share with theirs");
        assert_eq!(out.extra.other["analytic_flops"], serde_json::json!(counts.flops_total() as f64));
        assert_eq!(out.bytes["l2"], 456.0);
        assert_eq!(out.bytes["core"], counts.core_bytes() as f64, "core Q stays analytic");
        let p = out.provenance.unwrap();
        assert_eq!(p.flops, Some(Source::Perf));
        assert_eq!(p.bytes["l2"], Source::Perf);
        assert_eq!(p.bytes["core"], Source::Analytic);
        assert!(!p.notes.iter().any(|n| n.starts_with("l2 =")), "{:?}", p.notes);
        assert!(p.notes.iter().any(|n| n == "platform note"));
    }
}
