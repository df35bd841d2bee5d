//! `roofline validate --backend perf`: the counters of this machine against kernels
//! of known W and Q, the key step of Ofenbeck et al. Counters lie in known ways (LIKWID's Zen 5
//! FLOPS_DP group 50 % off, Sandy Bridge counting executed not retired operations, cloud VMs
//! whose uncore reads zero), so each event class gets a verdict before anyone trusts it:
//!
//! - W: the suite's FP kernels in every ISA variant this CPU runs, double and single, at a
//!   cache-resident size, measured through the same path as `roofline run --backend perf`
//!   (counters on the team thread around exactly the timed calls, per call); where the
//!   platform has FMA (MAC) events (`flops.fma`, AMD Zen 1–4), their flops against the
//!   kernels' analytic FMA flops (`Counts::fma_flops`: the AVX2/AVX-512 variants fuse, the
//!   scalar and SSE ones multiply then add, so those must read 0);
//! - Q_dram: the streaming kernels at 4x the last-level cache, whose DRAM traffic is their
//!   compulsory traffic, with the system-wide uncore counts' idle background (the same events,
//!   no kernel, for as long) subtracted.
//!
//! Per event class the measured figure against the analytic one: **exact**, **within
//! tolerance**, **off by X %**, or **not counted** (the event failed to open, was never on a
//! counter, or no event counts the class). The verdicts are kept in a trust table beside the
//! machine's cached ceilings ([`crate::counters::trust`]); afterwards every measurement that
//! uses an event which failed here says so.
//!
//! The simulated PMU (`--backend simulated`) runs the same validation on machines without a
//! PMU, with the faults a test injects.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::counters::backend::{Backend, PerfBackend, SimulatedBackend, SimulatedKernel};
use crate::counters::cachesim::CacheHierarchy;
use crate::counters::perf::{self, CounterSet, CounterSpec, Scope, Target};
use crate::counters::simulated::{self, SimulatedPmu, class_covers};
use crate::counters::trust::{TrustEntry, TrustTable};
use crate::counters::{Measurement, analytic::KernelRun};
use crate::error::{Error, Result};
use crate::kernels::runner::Repeat;
use crate::kernels::{Kernel, Variant, api};
use crate::schema::Source;

/// The counters validated: this machine's PMU, or the simulated one.
pub enum Counters {
    Perf,
    Simulated {
        pmu: Box<SimulatedPmu>,
        /// The simulated hierarchy the traces feed (its last level sets the DRAM kernels' size).
        hierarchy: Box<CacheHierarchy>,
    },
}

impl Counters {
    pub fn source(&self) -> Source {
        match self {
            Counters::Perf => Source::Perf,
            Counters::Simulated { .. } => Source::Simulated,
        }
    }
}

/// What to validate.
#[derive(Debug, Clone)]
pub struct Options {
    /// W kernels (empty: [`DEFAULT_W_KERNELS`]).
    pub kernels: Vec<String>,
    /// DRAM kernels, streamed at 4x the LLC (empty: [`DEFAULT_DRAM_KERNELS`]).
    pub dram_kernels: Vec<String>,
    /// Working set of the W kernels (cache-resident).
    pub working_set: u64,
    /// `--platform NAME|FILE`.
    pub platform: Option<String>,
    /// Timed seconds per kernel variant (the counters' window).
    pub min_time: f64,
}

/// Kernels of known W, double and single precision (FMA where the ISA has it).
pub const DEFAULT_W_KERNELS: &[&str] = &["triad", "dot", "triad_f32", "dot_f32"];
/// Streaming kernels of known DRAM Q.
pub const DEFAULT_DRAM_KERNELS: &[&str] = &["triad", "load"];
/// W may differ this much (relative) and still be "within tolerance" (multiplex scaling,
/// per-call averaging of the counts).
pub const FLOPS_TOLERANCE: f64 = 0.01;
/// DRAM Q tolerance (hardware prefetchers, page walks, the background's noise).
pub const DRAM_TOLERANCE: f64 = 0.10;

use crate::schema::validation::{ClassRow, PerfValidation, Sample, Verdict};

/// The verdict of a measured figure against the analytic one.
pub fn judge(analytic: f64, measured: Option<f64>, tolerance: f64) -> Verdict {
    let Some(m) = measured else { return Verdict::NotCounted };
    let diff = m - analytic;
    if diff.abs() <= (1e-6 * analytic.abs()).max(0.5) {
        return Verdict::Exact;
    }
    let rel = if analytic == 0.0 {
        f64::INFINITY.copysign(diff)
    } else {
        diff / analytic
    };
    if rel.abs() <= tolerance {
        Verdict::WithinTolerance(rel)
    } else {
        Verdict::Off(rel)
    }
}

impl PerfValidation {
    /// The trust table these verdicts give (one entry per event).
    pub fn trust_table(&self, fingerprint: &str) -> TrustTable {
        let mut events = BTreeMap::new();
        for r in &self.rows {
            for e in &r.events {
                let prev = events.get(e).map(|t: &TrustEntry| t.verdict).unwrap_or(Verdict::Exact);
                events.insert(
                    e.clone(),
                    TrustEntry {
                        class: r.class.clone(),
                        verdict: prev.worse(r.verdict),
                        detail: r.detail.first().cloned(),
                    },
                );
            }
        }
        TrustTable::new(fingerprint, &self.platform, self.source, events)
    }
}

/// The cause `validate --backend perf` gives on a machine without a usable core PMU.
fn no_pmu(e: &Error) -> Error {
    let first = e.to_string().lines().next().unwrap_or_default().to_string();
    Error::unavailable(
        format!(
            "validate --backend perf needs hardware counters: {first}; `roofline doctor` says what this machine can measure, and `roofline validate --backend trace` validates the trace backend instead"
        ),
        "on a VM, enable the hypervisor's vPMU; `--backend simulated` runs this validation on the simulated PMU (a test instrument)",
    )
}

/// The platform's events this validation counts (optional ones included: single precision),
/// each opened alone first so one failing event cannot hide the others.
/// The events that opened, the counters per core, the notes, and the events that failed to
/// open with their cause.
type Selected = (Vec<CounterSpec>, u32, Vec<String>, BTreeMap<String, String>);

fn select(counters: &Counters, platform: Option<&str>) -> Result<Selected> {
    match counters {
        Counters::Perf => {
            let pmus = Path::new(perf::SYSFS_PMUS);
            perf::core_pmu(pmus).map_err(|e| no_pmu(&e))?;
            perf::check_paranoid(perf::paranoid(), false).map_err(|e| no_pmu(&e))?;
            let plat = crate::counters::platform(platform)?;
            let uncore = perf::check_paranoid(perf::paranoid(), true).is_ok();
            let (specs, mut notes) = perf::counters_for_platform(&plat, pmus, true, uncore, perf::nmi_watchdog_on())?;
            if !uncore {
                notes.push("perf_event_paranoid forbids system-wide events: DRAM Q not validated (0 or CAP_PERFMON needed)".into());
            }
            let mut ok = Vec::new();
            let mut failed = BTreeMap::new();
            for s in specs {
                let plan = vec![vec![0]];
                match CounterSet::open(vec![s.clone()], &plan, Target::ThisThread) {
                    Ok(_) => ok.push(s),
                    Err(e) => {
                        failed.insert(s.name.clone(), e.to_string().lines().next().unwrap_or_default().to_string());
                    }
                }
            }
            Ok((ok, perf::core_counters(&plat), notes, failed))
        }
        Counters::Simulated { pmu, .. } => {
            let (specs, n, notes) = pmu.counters(true, true)?;
            let (ok, failed) = pmu.open_each(&specs);
            let failed = failed
                .into_iter()
                .map(|(n, e)| (n, e.to_string().lines().next().unwrap_or_default().to_string()))
                .collect();
            Ok((ok, n, notes, failed))
        }
    }
}

/// Analytic W of one call by event class: the classes each event class covers.
fn analytic_by_event_class(k: &dyn Kernel, n: usize, v: Variant, event_class: &str) -> f64 {
    k.counts(n, v)
        .flops
        .iter()
        .filter(|(c, _)| class_covers(event_class, c.key()))
        .map(|(_, f)| *f as f64)
        .sum()
}

fn find_kernels(names: &[String], default: &[&str]) -> Result<Vec<Box<dyn Kernel>>> {
    let names: Vec<String> = if names.is_empty() {
        default.iter().map(|s| s.to_string()).collect()
    } else {
        names.to_vec()
    };
    names
        .iter()
        .map(|n| api::find(n).ok_or_else(|| Error::input(format!("no kernel named {n}"), "see `roofline kernels`")))
        .collect()
}

/// Measure `k` at `n`, `v` on one thread with the validated counters.
fn measure(
    counters: &Counters,
    selection: &(Vec<CounterSpec>, u32, Vec<String>),
    k: &dyn Kernel,
    n: usize,
    v: Variant,
    min_time: f64,
) -> Result<Measurement> {
    let spec = KernelRun {
        kernel: k,
        n,
        variant: v,
        threads: 1,
        repeat: Repeat {
            min_total: Duration::from_secs_f64(min_time),
            min_samples: 3,
            max_samples: 1000,
            warmup: 1,
        },
        verify: false,
        split: false,
    };
    let mut counting = match counters {
        Counters::Perf => Box::new(PerfBackend {
            pmus: crate::counters::perf::SYSFS_PMUS.into(),
            kernel_events: Some(selection.clone()),
        }) as Box<dyn Backend>,
        Counters::Simulated { pmu, hierarchy } => Box::new(SimulatedBackend {
            kernel: Some(Box::new(SimulatedKernel {
                pmu: pmu.as_ref().clone(),
                selection: selection.clone(),
                hierarchy: hierarchy.as_ref().clone(),
                truths: Vec::new(),
            })),
        }),
    };
    counting.prepare_kernel(k, n, v, 1)?;
    // No cache model: only what the counters counted is judged.
    counting.measure_kernel(&spec, &[], &|_, _| {})
}

/// W of `k` by event class, the FP events counted group by group (as LIKWID validates one
/// group at a time): each group fits the counters, so no verdict is the multiplexer's.
fn measure_w(
    counters: &Counters,
    selection: &(Vec<CounterSpec>, u32, Vec<String>),
    k: &dyn Kernel,
    n: usize,
    v: Variant,
    min_time: f64,
) -> Result<Measurement> {
    let (specs, n_counters, notes) = selection;
    // W's events and the FMA (MAC) events, a part of W's work.
    let fp: Vec<CounterSpec> = specs
        .iter()
        .filter(|s| s.quantity == "flops" || s.quantity == "flops.fma")
        .cloned()
        .collect();
    if fp.is_empty() {
        return measure(counters, selection, k, n, v, min_time);
    }
    let mut out: Option<Measurement> = None;
    // The MAC events' flops, whichever group counted them (a group of MAC events alone has no
    // W to be a part of, so its measurement carries them in `extra.fma_flops_counted` only).
    let mut fma: Option<f64> = None;
    for group in perf::plan_groups(&fp, *n_counters) {
        let group_specs: Vec<CounterSpec> = group.iter().map(|&i| fp[i].clone()).collect();
        let m = measure(counters, &(group_specs, *n_counters, notes.clone()), k, n, v, min_time)?;
        if let Some(f) = m.extra.get("fma_flops_counted").and_then(|v| v.as_f64()) {
            *fma.get_or_insert(0.0) += f;
        }
        match out.as_mut() {
            None => out = Some(m),
            Some(acc) => {
                for (c, f) in &m.flops.by_class {
                    acc.flops.by_class.insert(c.clone(), *f);
                }
                let (effective, int_effective) = (acc.flops.effective, acc.flops.int_ops_effective);
                acc.flops = crate::schema::Flops::of_classes(std::mem::take(&mut acc.flops.by_class));
                (acc.flops.effective, acc.flops.int_ops_effective) = (effective, int_effective);
                for key in ["multiplex_running_ratio", "counts"] {
                    if let Some(serde_json::Value::Object(more)) = m.extra.get(key) {
                        let entry = acc.extra.entry(key.to_string()).or_insert_with(|| serde_json::json!({}));
                        if let Some(obj) = entry.as_object_mut() {
                            obj.extend(more.clone());
                        }
                    }
                }
                if let Some(serde_json::Value::Array(more)) = m.extra.get("not_counted") {
                    let entry = acc.extra.entry("not_counted".to_string()).or_insert_with(|| serde_json::json!([]));
                    if let Some(arr) = entry.as_array_mut() {
                        arr.extend(more.clone());
                    }
                }
            }
        }
    }
    let mut out = out.ok_or_else(|| Error::unavailable("no FP event group to count", "report this"))?;
    // Group by group, each count alone on its counters: exact, no multiplex rounding.
    out.flops.fma = fma;
    Ok(out)
}

/// The DRAM bytes per second the uncore events count with nothing running (`None`: no
/// uncore DRAM event), counted for `seconds` through the validated counters.
fn idle_dram_rate(counters: &Counters, specs: &[CounterSpec], seconds: f64) -> Result<Option<f64>> {
    let dram: Vec<CounterSpec> = specs
        .iter()
        .filter(|s| matches!(s.scope, Scope::Uncore { .. }) && s.quantity.starts_with("bytes.dram"))
        .cloned()
        .collect();
    if dram.is_empty() {
        return Ok(None);
    }
    let d = Duration::from_secs_f64(seconds);
    let counts = match counters {
        Counters::Perf => perf::idle_baseline(&dram, d)?,
        Counters::Simulated { pmu, .. } => {
            let plan: Vec<Vec<usize>> = (0..dram.len()).map(|i| vec![i]).collect();
            pmu.open(dram.clone(), &plan)?.counts_of(&simulated::Truth {
                seconds,
                ..Default::default()
            })?
        }
    };
    let m = perf::to_measurement(&dram, &counts, vec![seconds]);
    Ok(m.bytes.get("dram").map(|b| b / seconds))
}

/// Run the validation.
pub fn validate(counters: &Counters, opts: &Options) -> Result<PerfValidation> {
    let (specs, n_counters, mut notes, failed_to_open) = select(counters, opts.platform.as_deref())?;
    let platform = match counters {
        Counters::Perf => crate::counters::platform(opts.platform.as_deref())?.key,
        Counters::Simulated { pmu, .. } => pmu.platform.key.clone(),
    };
    let w_kernels = find_kernels(&opts.kernels, DEFAULT_W_KERNELS)?;
    let dram_kernels = find_kernels(&opts.dram_kernels, DEFAULT_DRAM_KERNELS)?;
    let selection = (specs.clone(), n_counters, notes.clone());
    let mut rows = class_rows(counters, &specs, &failed_to_open)?;
    validate_w(&mut rows, counters, &selection, &w_kernels, opts)?;
    add_uncovered_flops(&mut rows, &w_kernels, opts.working_set, &platform);
    let idle_rate = if rows.contains_key("bytes.dram") {
        validate_dram(&mut rows, counters, &selection, &dram_kernels, opts.min_time)?
    } else {
        None
    };
    let rows = judged_rows(rows);
    if let Counters::Simulated { pmu, .. } = counters {
        notes.retain(|n| *n != pmu.note());
        notes.insert(0, pmu.note());
    }
    Ok(PerfValidation {
        source: counters.source(),
        platform,
        rows,
        failed_to_open,
        idle_dram_bytes_per_second: idle_rate,
        notes,
    })
}

/// The row of `class` in `rows`, added empty where it is not there yet.
fn row_of<'a>(rows: &'a mut BTreeMap<String, ClassRow>, class: &str) -> &'a mut ClassRow {
    rows.entry(class.to_string()).or_insert_with(|| ClassRow {
        class: class.to_string(),
        events: Vec::new(),
        samples: Vec::new(),
        verdict: Verdict::Exact,
        detail: Vec::new(),
    })
}

/// One row per event class (W's classes, the FMA events' row, `bytes.dram`) with its events,
/// those that failed to open included and said in the row's detail.
fn class_rows(counters: &Counters, specs: &[CounterSpec], failed_to_open: &BTreeMap<String, String>) -> Result<BTreeMap<String, ClassRow>> {
    let all_specs: Vec<CounterSpec> = {
        // Every event of the platform, opened or not, for the class rows.
        let mut v = specs.to_vec();
        if let Counters::Simulated { pmu, .. } = counters {
            v = pmu.counters(true, true)?.0;
        }
        v
    };
    let mut rows: BTreeMap<String, ClassRow> = BTreeMap::new();
    // Classes and their events, failed ones included.
    for s in all_specs.iter().chain(specs.iter()) {
        let class = match s.quantity.as_str() {
            "flops" => format!("flops.{}", s.class.as_deref().unwrap_or("any_precision")),
            "flops.fma" => FMA_ROW.to_string(),
            q if q.starts_with("bytes.dram") => "bytes.dram".to_string(),
            _ => continue,
        };
        let r = row_of(&mut rows, &class);
        if !r.events.contains(&s.name) {
            r.events.push(s.name.clone());
        }
    }
    for (name, why) in failed_to_open {
        if let Some(r) = rows.values_mut().find(|r| r.events.contains(name)) {
            r.detail.push(format!("{name} failed to open: {why}"));
        }
    }
    Ok(rows)
}

/// W: every runnable variant of the W kernels, at a cache-resident size, a sample in the FMA
/// row and in every W class row the variant says something about.
fn validate_w(
    rows: &mut BTreeMap<String, ClassRow>,
    counters: &Counters,
    selection: &(Vec<CounterSpec>, u32, Vec<String>),
    w_kernels: &[Box<dyn Kernel>],
    opts: &Options,
) -> Result<()> {
    let specs = &selection.0;
    for k in w_kernels {
        let n = k.size_for_bytes(opts.working_set);
        for &v in k.variants().iter().filter(|v| v.supported()) {
            eprintln!("roofline validate: {} {} n={n} (W)", k.name(), v);
            let m = measure_w(counters, selection, k.as_ref(), n, v, opts.min_time)?;
            if let Some(r) = rows.get_mut(FMA_ROW)
                && let Some(sample) = fma_sample(k.as_ref(), n, v, specs, &m)
            {
                r.samples.push(sample);
            }
            for r in rows.values_mut().filter(|r| r.class.starts_with("flops.") && r.class != FMA_ROW) {
                if let Some(sample) = flops_sample(r, k.as_ref(), n, v, specs, &m) {
                    r.samples.push(sample);
                }
            }
            note_multiplexing(rows, &m);
        }
    }
    Ok(())
}

/// The W of `k` at `n`, `v` in the class of row `r` against what its events read: None where
/// this kernel variant says nothing about the class (no analytic flops there, none counted).
/// The events count nothing where none opened or the measurement says none was counted.
fn flops_sample(r: &ClassRow, k: &dyn Kernel, n: usize, v: Variant, specs: &[CounterSpec], m: &Measurement) -> Option<Sample> {
    let class = &r.class["flops.".len()..];
    let analytic = analytic_by_event_class(k, n, v, class);
    if analytic == 0.0 && !m.flops.by_class.get(class).is_some_and(|x| *x > 0.5) {
        return None;
    }
    let counted = r.events.iter().any(|e| specs.iter().any(|s| &s.name == e))
        && !m
            .extra
            .get("not_counted")
            .and_then(|v| v.as_array())
            .is_some_and(|nc| r.events.iter().all(|e| nc.iter().any(|x| x.as_str() == Some(e))));
    let measured = if counted {
        Some(m.flops.by_class.get(class).copied().unwrap_or(0.0))
    } else {
        None
    };
    let verdict = judge(analytic, measured, FLOPS_TOLERANCE);
    Some(Sample {
        kernel: k.name().into(),
        variant: v.name().into(),
        n,
        analytic,
        measured,
        verdict,
    })
}

/// Analytic flops no event class covers at all: a row per such class, its samples not counted.
fn add_uncovered_flops(rows: &mut BTreeMap<String, ClassRow>, w_kernels: &[Box<dyn Kernel>], working_set: u64, platform: &str) {
    let covered: Vec<String> = rows
        .keys()
        .filter(|c| *c != FMA_ROW)
        .filter_map(|c| c.strip_prefix("flops.").map(String::from))
        .collect();
    for k in w_kernels {
        let n = k.size_for_bytes(working_set);
        for &v in k.variants().iter().filter(|v| v.supported()) {
            for (c, f) in k.counts(n, v).flops.iter().filter(|(_, f)| **f > 0) {
                if !covered.iter().any(|e| class_covers(e, c.key())) {
                    let class = format!("flops.{}", c.key());
                    let r = row_of(rows, &class);
                    if r.detail.is_empty() {
                        r.detail.push(format!("no event of platform {platform} counts {}", c.key()));
                    }
                    r.samples.push(Sample {
                        kernel: k.name().into(),
                        variant: v.name().into(),
                        n,
                        analytic: *f as f64,
                        measured: None,
                        verdict: Verdict::NotCounted,
                    });
                }
            }
        }
    }
}

/// DRAM Q: the streaming kernels past the last level (their last runnable variant), the idle
/// background subtracted; samples in the `bytes.dram` row, which must be there. Returns the
/// idle background's rate.
fn validate_dram(
    rows: &mut BTreeMap<String, ClassRow>,
    counters: &Counters,
    selection: &(Vec<CounterSpec>, u32, Vec<String>),
    dram_kernels: &[Box<dyn Kernel>],
    min_time: f64,
) -> Result<Option<f64>> {
    let llc = match counters {
        Counters::Perf => crate::schema::ceilings::Host::detect().llc_total_bytes(),
        Counters::Simulated { hierarchy, .. } => hierarchy.levels().last().map(|l| l.size_bytes).unwrap_or(0),
    };
    let idle_rate = idle_dram_rate(counters, &selection.0, 0.2)?;
    for k in dram_kernels {
        let Some(v) = k.variants().iter().rev().copied().find(|v| v.supported()) else {
            continue;
        };
        let n = k.size_for_bytes(4 * llc.max(1 << 16));
        eprintln!("roofline validate: {} {} n={n} (DRAM Q at 4x the last level)", k.name(), v);
        let m = measure(counters, selection, k.as_ref(), n, v, min_time)?;
        let analytic = k.counts(n, v).dram_bytes as f64;
        let r = rows.get_mut("bytes.dram").expect("present");
        let measured = dram_bytes_less_idle(&m, idle_rate);
        if measured == Some(0.0) && analytic > 0.0 && !r.detail.iter().any(|d| d.contains("reads zero")) {
            r.detail.push(
                "the uncore DRAM events read zero: an uncore PMU the hypervisor does not pass through, or a wrong NPS/channel mapping"
                    .into(),
            );
        }
        let verdict = judge(analytic, measured, DRAM_TOLERANCE);
        r.samples.push(Sample {
            kernel: k.name().into(),
            variant: v.name().into(),
            n,
            analytic,
            measured,
            verdict,
        });
    }
    if let Some(rate) = idle_rate {
        rows.get_mut("bytes.dram").expect("present").detail.push(format!(
            "idle background {:.3} MB/s subtracted (system-wide events, nothing running)",
            rate / 1e6
        ));
    }
    Ok(idle_rate)
}

/// The DRAM bytes the counters read in `m`, less the idle background over the fastest
/// sample's time (`None`: DRAM bytes not counted).
fn dram_bytes_less_idle(m: &Measurement, idle_rate: Option<f64>) -> Option<f64> {
    let counted = m
        .provenance
        .as_ref()
        .and_then(|p| p.bytes.get("dram"))
        .is_some_and(|s| *s != Source::Analytic);
    if counted {
        let raw = m.bytes.get("dram").copied().unwrap_or(0.0);
        let secs = m.seconds_samples.iter().copied().fold(f64::NAN, f64::min);
        let background = idle_rate.unwrap_or(0.0) * if secs.is_finite() { secs } else { 0.0 };
        Some((raw - background).max(0.0))
    } else {
        None
    }
}

/// Each row's verdict, the worst of its samples; the rows that say something (samples, or
/// events that failed to open), in class order.
fn judged_rows(mut rows: BTreeMap<String, ClassRow>) -> Vec<ClassRow> {
    for r in rows.values_mut() {
        r.verdict = r.samples.iter().fold(Verdict::Exact, |v, s| v.worse(s.verdict));
        if r.samples.is_empty() {
            // An event class no kernel exercised (e.g. 512-bit on an AVX2 machine) says
            // nothing: not judged, kept out of the table.
            r.verdict = if r.detail.iter().any(|d| d.contains("failed to open")) {
                Verdict::NotCounted
            } else {
                Verdict::Exact
            };
        }
    }
    rows.into_values()
        .filter(|r| !r.samples.is_empty() || r.verdict == Verdict::NotCounted)
        .collect()
}

/// The row of the FMA (MAC) events.
const FMA_ROW: &str = "flops.fma";

/// The FMA flops of `k` at `n`, `v` against what the counted FMA events (`flops.fma`) read:
/// None where no FMA event opened, or where the kernel's FP work is partly inside and partly
/// outside the classes those events cover (its analytic FMA flops are not split by class).
fn fma_sample(k: &dyn Kernel, n: usize, v: Variant, specs: &[CounterSpec], m: &Measurement) -> Option<Sample> {
    let fma_classes: Vec<&str> = specs
        .iter()
        .filter(|s| s.quantity == "flops.fma")
        .map(|s| s.class.as_deref().unwrap_or("any_precision"))
        .collect();
    if fma_classes.is_empty() {
        return None;
    }
    let c = k.counts(n, v);
    let fp: Vec<&str> = c
        .flops
        .iter()
        .filter(|(cl, f)| **f > 0 && !cl.is_integer())
        .map(|(cl, _)| cl.key())
        .collect();
    let inside = |cl: &&str| fma_classes.iter().any(|e| class_covers(e, cl));
    let analytic = if fp.iter().all(inside) {
        c.fma_flops as f64
    } else if !fp.iter().any(inside) {
        0.0
    } else {
        return None;
    };
    let measured = m.flops.fma;
    Some(Sample {
        kernel: k.name().into(),
        variant: v.name().into(),
        n,
        analytic,
        measured,
        verdict: judge(analytic, measured, FLOPS_TOLERANCE),
    })
}

/// Multiplexed events (scaled counts) are said in their class's detail, once.
fn note_multiplexing(rows: &mut BTreeMap<String, ClassRow>, m: &Measurement) {
    let Some(mux) = m.extra.get("multiplex_running_ratio").and_then(|v| v.as_object()) else {
        return;
    };
    for (event, ratio) in mux {
        let Some(r) = rows.values_mut().find(|r| r.events.contains(event)) else {
            continue;
        };
        if r.detail.iter().any(|d| d.starts_with(&format!("{event} multiplexed"))) {
            continue;
        }
        let ratio = ratio.as_f64().unwrap_or(1.0);
        r.detail.push(format!(
            "{event} multiplexed: on a counter {:.1} % of the time, counts scaled x{:.2}",
            100.0 * ratio,
            1.0 / ratio.max(1e-9)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_error() {
        assert_eq!(judge(1000.0, Some(1000.2), 0.01), Verdict::Exact);
        assert!(matches!(judge(1000.0, Some(1005.0), 0.01), Verdict::WithinTolerance(e) if (e - 0.005).abs() < 1e-12));
        assert!(matches!(judge(1000.0, Some(500.0), 0.01), Verdict::Off(e) if (e + 0.5).abs() < 1e-12));
        assert_eq!(judge(1000.0, None, 0.01), Verdict::NotCounted);
        assert_eq!(judge(1000.0, Some(0.0), 0.1).describe(), "off by -100.0 %");
        assert_eq!(Verdict::Exact.worse(Verdict::NotCounted), Verdict::NotCounted);
        assert_eq!(Verdict::Off(0.2).worse(Verdict::Off(-0.5)), Verdict::Off(-0.5));
        assert!(Verdict::WithinTolerance(0.001).passed() && !Verdict::Off(0.02).passed());
    }
}
