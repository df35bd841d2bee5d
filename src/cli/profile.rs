//! `roofline profile` (and `roofline` with no subcommand): a quick profile of this machine —
//! machine model, `--quick` ceilings, the kernel suite with native timing — written to
//! `roofline-report/` (`index.html`, `roofline.svg`, `report.json`), with the summary and
//! the path printed.
//!
//! The measuring steps live in other modules; [`Steps`] is the seam. [`Wired`] is the real
//! implementation: each method is one call into its module (see the comments there for the
//! exact calls expected). Everything after the steps (assembling the report, analysing it,
//! rendering and writing the bundle atomically) is done here and tested with fake steps.

use clap::Args as ClapArgs;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

use super::common::PlatformArg;
use crate::ceilings::PointAbove;
use crate::counters::backend::{self, AnalyticBackend, Backend};
use crate::error::Error;
use crate::machine::MachineModel;
use crate::model::RoofSet;
use crate::report::{self, Environment, Point, Report, bundle};

#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Directory for index.html, roofline.svg and report.json (created if missing).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = "roofline-report")]
    pub dir: PathBuf,
    /// Print the report JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Render the bundle from an existing report instead of measuring.
    #[arg(long, value_name = "REPORT")]
    pub from: Option<PathBuf>,
    /// Only these kernels of the profile's suite (comma-separated, e.g. `triad,dgemm`): a
    /// shorter look at the machine. Default: all of them.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub kernels: Vec<String>,
    /// Thread counts to measure roofs and place the suite at: 1, 1,2, 1-4 or all (default:
    /// one thread and every core; the report has a roof set for each).
    #[arg(long, value_name = "LIST", default_value = DEFAULT_THREADS)]
    pub threads: String,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Each suite point's joules beside its time (the idle power measured before the ceilings).
    #[command(flatten)]
    pub energy: super::common::EnergyArg,
}

/// One core, and the whole machine.
const DEFAULT_THREADS: &str = "1,all";

impl Default for Args {
    /// What `roofline` with no subcommand runs.
    fn default() -> Args {
        Args {
            dir: PathBuf::from(bundle_default_dir()),
            json: false,
            from: None,
            kernels: Vec::new(),
            threads: DEFAULT_THREADS.into(),
            platform: PlatformArg { platform: None },
            energy: Default::default(),
        }
    }
}

fn bundle_default_dir() -> &'static str {
    "roofline-report"
}

/// The measuring steps of a profile, in order. Each reports progress on `bar` (a spinner or
/// its own length) and returns a one-line error (`crate::Error`) when it cannot run.
pub trait Steps {
    /// This machine's model (`roofline.machine/1`).
    fn machine(&mut self, bar: &ProgressBar) -> anyhow::Result<MachineModel>;
    /// The run environment (host, kernel, governor, VM, clocks, rank).
    fn environment(&mut self, machine: &MachineModel) -> Environment;
    /// Quick empirical roofs for `threads` threads.
    fn ceilings(&mut self, machine: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<RoofSet>;
    /// The kernel suite: one point per kernel (W from perf where the PMU exists, else traced in
    /// flops mode at small sizes; core Q traced; L2/L3/DRAM Q from perf, else analytic; T
    /// native), each quantity labelled with its provenance.
    fn points(&mut self, machine: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<Vec<Point>>;
    /// The energy roofs measured beside the ceilings (`--energy`); none by default.
    fn energy_roofs(&mut self) -> Vec<crate::schema::energy::EnergyRoofs> {
        Vec::new()
    }
    /// The CPU one-thread runs pin to, chosen before anything is measured; none by default
    /// (the affinity mask's first CPU).
    fn choose_cpu(&mut self) -> Option<crate::schema::report::CpuChoice> {
        None
    }
    /// The roofs of `threads` measured again, because the suite's points `why` are above them:
    /// where they were read from a cache (measured at another moment of a shared machine).
    /// None where they were measured in this run already, or cannot be again (by default).
    /// `above`: the memory-bound ones, each with the roof level it is bound by (`l2`, `dram`):
    /// where the roofs were measured in this run already, those levels are measured once more.
    fn remeasure_ceilings(
        &mut self,
        _threads: u32,
        _above: &[PointAbove],
        _why: &str,
        _bar: &ProgressBar,
    ) -> Option<anyhow::Result<RoofSet>> {
        None
    }
}

/// A CPU within this fraction of the fastest probe rate counts as fast: the first such CPU is
/// chosen (the probe's own run-to-run spread is 1-2 % on an idle core).
const CPU_TOLERANCE: f64 = 0.03;

/// The real steps: machine detection, cached quick ceilings, and the kernel suite run
/// natively (analytic W/Q, native T), each kernel's W and core Q checked by a flops-mode trace
/// at a small size (the same check as `roofline validate`).
pub struct Wired {
    /// `--kernels`: the suite's kernels to run (empty: all of [`PROFILE_KERNELS`]).
    pub kernels: Vec<String>,
    /// Each kernel's trace check (the note and the row), done at the first thread count and
    /// reused at the others: it checks the formulas, which do not depend on the threads.
    trace_checks: std::collections::HashMap<String, (String, Option<serde_json::Value>)>,
    /// Every thread count of the run: the ceilings of all are measured (or read from the cache)
    /// in one go, so the cache holds them together.
    pub thread_counts: Vec<u32>,
    ceilings: Option<crate::schema::ceilings::Ceilings>,
    /// The thread counts whose ceilings were measured in this run (not read from the cache).
    measured_now: Vec<u32>,
    /// The thread counts whose ceilings (or some levels of them) were measured again.
    remeasured: Vec<u32>,
    /// `--energy`: the meter, its idle power measured; each point read around its runs.
    pub energy: Option<crate::counters::energy::Energy>,
}

impl Wired {
    /// Checks `--kernels` against the profile's suite before anything is measured.
    pub fn new(kernels: Vec<String>) -> Result<Wired, Error> {
        if let Some(bad) = kernels.iter().find(|k| !PROFILE_KERNELS.iter().any(|(n, _)| n == k)) {
            let mut known: Vec<&str> = Vec::new();
            for (n, _) in PROFILE_KERNELS {
                if !known.contains(n) {
                    known.push(n);
                }
            }
            return Err(Error::input(
                format!("--kernels: '{bad}' is not a kernel of the profile"),
                format!("known: {}", known.join(", ")),
            ));
        }
        Ok(Wired {
            kernels,
            trace_checks: Default::default(),
            thread_counts: vec![1],
            ceilings: None,
            measured_now: Vec::new(),
            remeasured: Vec::new(),
            energy: None,
        })
    }
}

/// The kernels a quick profile runs, and the working set each runs at: the streaming kernels
/// beyond the LLC of most machines (DRAM), the others at a cache-resident size.
const PROFILE_KERNELS: &[(&str, u64)] = &[
    ("triad", 256 << 20),
    ("daxpy", 256 << 20),
    ("dot", 256 << 20),
    ("load", 256 << 20),
    ("copy", 256 << 20),
    ("triad", 256 << 10),
    ("stencil2d", 8 << 20),
    ("spmv", 8 << 20),
    ("dgemm", 24 << 20),
    ("normalize_naive", 4 << 20),
    ("normalize_fused", 4 << 20),
    ("cos_chain_unfused", 4 << 20),
    ("cos_chain_fused", 4 << 20),
];

impl Steps for Wired {
    fn choose_cpu(&mut self) -> Option<crate::schema::report::CpuChoice> {
        use roofline_kernels::cpu_probe;
        let cpus = roofline_kernels::cpus::allowed_cpus();
        if cpus.len() < 2 {
            return None;
        }
        let (seconds, rounds) = (0.02, 2);
        let rates = cpu_probe::probe(&cpus, seconds, rounds);
        let cpu = cpu_probe::choose(&rates, CPU_TOLERANCE)?;
        roofline_kernels::cpus::prefer_cpu(Some(cpu));
        Some(crate::schema::report::CpuChoice {
            cpu,
            probe: format!(
                "dgemm n={} ({}), best of {rounds} × {:.0} ms",
                cpu_probe::PROBE_ORDER,
                cpu_probe::widest_variant().name(),
                seconds * 1e3
            ),
            rates: rates
                .iter()
                .map(|r| crate::schema::report::CpuGflops {
                    cpu: r.cpu,
                    gflops: r.gflops,
                })
                .collect(),
        })
    }
    fn energy_roofs(&mut self) -> Vec<crate::schema::energy::EnergyRoofs> {
        match (&self.energy, &self.ceilings) {
            (Some(_), Some(c)) => c
                .energy
                .iter()
                .filter(|e| e.threads.is_some_and(|t| self.thread_counts.contains(&t)))
                .cloned()
                .collect(),
            _ => Vec::new(),
        }
    }
    fn machine(&mut self, _bar: &ProgressBar) -> anyhow::Result<MachineModel> {
        Ok(crate::machine::detect(&crate::machine::DetectOptions::default())?)
    }
    fn environment(&mut self, _machine: &MachineModel) -> Environment {
        crate::schema::environment::collect(&std::env::args().collect::<Vec<_>>())
    }
    fn ceilings(&mut self, _machine: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<RoofSet> {
        // The ceilings module draws its own progress bar (and cache messages): the spinner
        // must be gone first, or the two redraw the same terminal line alternately.
        if self.ceilings.is_none() {
            let mut all: Vec<usize> = self.thread_counts.iter().map(|&t| t as usize).collect();
            if !all.contains(&(threads as usize)) {
                all.push(threads as usize);
            }
            let before = crate::util::unix_seconds();
            let mut c = with_own_progress(bar, || crate::ceilings::load_or_measure(true, &all, false))?;
            if c.measured_at_unix >= before {
                self.measured_now = all.iter().map(|&t| t as u32).collect();
            }
            if let Some(e) = &self.energy {
                let opts = crate::ceilings::Options {
                    quick: true,
                    threads: all.clone(),
                    sweep: false,
                    progress: true,
                };
                crate::ceilings::energy_roofs(&mut c, e, &opts, false)?;
            }
            self.ceilings = Some(c);
        }
        let c = self.ceilings.as_ref().ok_or_else(|| anyhow::anyhow!("no ceilings"))?;
        Ok(RoofSet::from_roofs(&c.roofs(threads)))
    }
    fn remeasure_ceilings(&mut self, threads: u32, above: &[PointAbove], why: &str, bar: &ProgressBar) -> Option<anyhow::Result<RoofSet>> {
        if self.remeasured.contains(&threads) {
            return None;
        }
        let c = self.ceilings.as_mut()?;
        self.remeasured.push(threads);
        let done = if self.measured_now.contains(&threads) {
            // Measured minutes ago: only the bandwidth levels the points contradict, the higher
            // figure kept (a whole new set would cost the main job its time limit on 2 vCPUs).
            if above.is_empty() {
                return None;
            }
            let levels = crate::ceilings::levels_of(above);
            bar.suspend(|| {
                eprintln!(
                    "roofline: {why}: measuring the {} roofs of {threads} thread(s) once more (a shared machine's bandwidth moves within seconds; each kernel keeps its higher figure)",
                    levels.join(", ")
                )
            });
            let done = with_own_progress(bar, || crate::ceilings::remeasure_levels(c, threads as usize, above, why));
            crate::ceilings::write_cache(c);
            done
        } else {
            bar.suspend(|| eprintln!("roofline: {why}: re-measuring the cached ceilings of {threads} thread(s)"));
            with_own_progress(bar, || {
                crate::ceilings::remeasure_threads(c, threads as usize, why)?;
                // The points' own stream kernels that the level's set lacks (`dot` at DRAM).
                let missing = crate::ceilings::kernels_new_to_levels(c, threads as usize, above);
                if missing.is_empty() {
                    return Ok(());
                }
                crate::ceilings::remeasure_levels(c, threads as usize, &missing, why)?;
                crate::ceilings::write_cache(c);
                Ok(())
            })
        };
        Some(done.map(|()| RoofSet::from_roofs(&c.roofs(threads))).map_err(Into::into))
    }
    fn points(&mut self, machine: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<Vec<Point>> {
        use crate::counters::analytic;
        use crate::kernels::{api, runner::Repeat};
        // W and the cache/memory levels from perf where a core PMU exists; otherwise (or when
        // the events cannot be opened) analytic, each point saying why.
        let (counting, no_perf) = backend::for_profile();
        let mut points = Vec::new();
        for (name, bytes) in PROFILE_KERNELS {
            if !self.kernels.is_empty() && !self.kernels.iter().any(|k| k == name) {
                continue;
            }
            let Some(k) = api::find(name) else { continue };
            let Some(v) = k.variants().iter().rev().copied().find(|v| v.supported()) else {
                continue;
            };
            let dram = *bytes >= 256 << 20;
            let bytes = if dram {
                dram_working_set(*bytes, &machine.caches, threads)
            } else {
                *bytes
            };
            let n = k.size_for_bytes(bytes);
            bar.set_message(format!(
                "kernel suite: {name} ({v}, {})",
                crate::schema::units::fmt_bytes(k.working_set_bytes(n) as f64)
            ));
            let repeat = Repeat {
                min_total: std::time::Duration::from_millis(150),
                min_samples: 5,
                max_samples: 200,
                warmup: 1,
            };
            let spec = analytic::KernelRun {
                kernel: k.as_ref(),
                n,
                variant: v,
                threads: threads as usize,
                repeat,
                verify: false,
                split: false,
            };
            // L2/L3/DRAM analytic by the cache model where perf did not count them: 0 below half a cache, the compulsory
            // traffic beyond twice it, nothing claimed in between (each level says why).
            let window = self.energy.as_ref().map(|e| e.window()).transpose()?;
            let on_sample = |_: usize, _: f64| {
                if let (Some(e), Some(w)) = (&self.energy, &window) {
                    // A failed read leaves the stretch longer; the window's end is read below.
                    let _ = e.mark(w);
                }
            };
            let mut m = match counting.measure_kernel(&spec, &machine.caches, &on_sample) {
                Ok(m) => m,
                Err(e) if counting.kind() == crate::counters::BackendKind::Perf => {
                    let mut m = AnalyticBackend.measure_kernel(&spec, &machine.caches, &|_, _| {})?;
                    if let Some(p) = m.provenance.as_mut() {
                        p.notes.push(format!("perf: {e}; W and Q analytic"));
                    }
                    m
                }
                Err(e) => return Err(e.into()),
            };
            if let (Some(why), Some(p)) = (&no_perf, m.provenance.as_mut()) {
                p.notes.push(why.clone());
            }
            let mut label = if dram {
                format!("{name}@dram")
            } else {
                format!(
                    "{name}@{}",
                    crate::schema::units::fmt_bytes(k.working_set_bytes(n) as f64).replace(' ', "")
                )
            };
            if threads > 1 {
                label.push_str(&format!("×{threads}"));
            }
            let mut p = m.into_point(label);
            if let (Some(e), Some(w)) = (&self.energy, &window) {
                e.mark(w)?;
                p.extra.energy = Some(e.kernel_energy(w, p.seconds, p.flops.total)?);
            }
            p.extra.kernel = Some(name.to_string());
            p.extra.insert("variant", v.name());
            p.extra.insert("size", n as u64);
            // The machine's speed right after the point, read against its roofs in `collect`.
            if let Some(spec) = super::machine_check::probe_spec() {
                super::machine_check::record(&mut p, spec, threads as usize);
            }
            // W and core Q checked by a flops-mode trace at a small size (skipped where ptrace
            // is not permitted: the point then says so).
            let key = format!("{name}/{v}");
            if !self.trace_checks.contains_key(&key) {
                let small = k.size_for_bytes(64 << 10);
                bar.set_message(format!("kernel suite: tracing {name} ({v}) at n = {small}"));
                let check = match crate::validate::validate_one(
                    k.as_ref(),
                    v,
                    small,
                    crate::counters::BackendKind::Trace,
                    0x5eed,
                    crate::counters::trace::TraceMode::Flops,
                ) {
                    Ok(row) => (
                        format!(
                            "W and core Q: analytic formulas; a flops-mode trace at n = {small} {} them exactly",
                            if row.ok { "reproduced" } else { "did NOT reproduce" }
                        ),
                        Some(serde_json::to_value(&row).unwrap_or_default()),
                    ),
                    Err(e) => (format!("trace check unavailable: {e}"), None),
                };
                self.trace_checks.insert(key.clone(), check);
            }
            if let Some((note, row)) = self.trace_checks.get(&key) {
                p.provenance.notes.push(note.clone());
                if let Some(row) = row {
                    p.extra.insert("trace_check", row.clone());
                }
            }
            points.push(p);
        }
        if points.is_empty() {
            return Err(Error::unavailable("no suite kernel runs on this CPU", "see `roofline kernels`").into());
        }
        Ok(points)
    }
}

/// Each thread's working set for a kernel placed in DRAM: together the team streams at least
/// `nominal` and 4× the last level (the shared level cannot hold it), at most 1 GiB; each
/// thread's share is at least 4× the largest level below the last (its private caches cannot
/// hold it either). Every thread works on its own copy, so giving each the whole set would
/// allocate and first-touch `threads` GiB to learn what a GiB shared out shows.
fn dram_working_set(nominal: u64, caches: &[crate::machine::Cache], threads: u32) -> u64 {
    let llc = caches.iter().map(|c| c.size_bytes).max().unwrap_or(32 << 20);
    let inner = caches.iter().map(|c| c.size_bytes).filter(|&b| b < llc).max().unwrap_or(0);
    let team = nominal.max(4 * llc).min(1 << 30);
    (team / u64::from(threads.max(1))).max(4 * inner).min(team)
}

/// Run a step that draws its own progress (a bar of its own, messages on stderr): the
/// spinner is finished and cleared first, so its steady tick stops and nothing redraws the
/// line the step's bar is on.
fn with_own_progress<T>(bar: &ProgressBar, f: impl FnOnce() -> T) -> T {
    bar.finish_and_clear();
    f()
}

fn spinner(msg: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed}] {msg}") {
        bar.set_style(style);
    }
    bar.set_message(msg.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Run the steps and assemble the report. A failing ceilings step falls back to the machine's
/// theoretical roofs (with a warning); a failing machine or kernel step is an error.
pub fn collect(steps: &mut dyn Steps, thread_counts: &[u32]) -> anyhow::Result<Report> {
    // The stream kernels' large arrays reused from one ceiling or point to the next.
    let _reuse = roofline_kernels::stream::ReusedArrays::open();
    // The CPU first: the clocks, the roofs and the points of one thread are all measured there.
    let bar = spinner("choosing the CPU for one thread");
    let cpu_choice = steps.choose_cpu();
    bar.finish_and_clear();
    let bar = spinner("machine model");
    let machine = steps.machine(&bar)?;
    bar.finish_and_clear();
    let mut env = steps.environment(&machine);
    env.cpu_choice = cpu_choice;
    let machine_json = serde_json::to_value(&machine).map_err(|e| anyhow::anyhow!("machine model does not serialize: {e}"))?;
    let mut report = Report::new(machine_json, env);
    // Each thread count: its roofs, then the suite placed under them.
    for (i, &threads) in thread_counts.iter().enumerate() {
        let bar = spinner(&format!("quick ceilings ({threads} thread(s))"));
        let mut roofs = match steps.ceilings(&machine, threads, &bar) {
            Ok(r) => r,
            Err(e) => {
                bar.suspend(|| {
                    eprintln!("roofline: warning: ceilings at {threads} thread(s) unavailable ({e:#}); using theoretical peaks")
                });
                RoofSet::theoretical(&machine, threads)
            }
        };
        bar.finish_and_clear();
        let bar = spinner(&format!("kernel suite ({threads} thread(s))"));
        let mut points = steps.points(&machine, threads, &bar)?;
        bar.finish_and_clear();
        let (above, bound) = points_above(&points, &roofs);
        if !above.is_empty() {
            let bar = spinner(&format!("quick ceilings ({threads} thread(s)), again"));
            let why = format!("{} above the roofs", above.join(", "));
            match steps.remeasure_ceilings(threads, &bound, &why, &bar) {
                Some(Ok(fresh)) => roofs = fresh,
                Some(Err(e)) => {
                    bar.suspend(|| eprintln!("roofline: warning: could not re-measure the ceilings ({e:#}); the cached ones stay"))
                }
                None => {}
            }
            bar.finish_and_clear();
        }
        let phased = super::machine_check::judge(&mut points, &roofs);
        if !phased.is_empty() {
            eprintln!(
                "roofline: {} of {} point(s) at {threads} thread(s) ran while the machine was slower or faster than when its roofs were measured (the FMA loop run beside each; their notes say by how much): {}",
                phased.len(),
                points.len(),
                phased.join(", ")
            );
        }
        if !roofs.is_empty() {
            let mut r = roofs.to_roofs();
            r.threads = Some(threads);
            if i == 0 {
                report.ceilings = Some(r);
            } else {
                report.ceilings_by_threads.push(r);
            }
        }
        report.points.extend(points);
    }
    report.energy_roofs = steps.energy_roofs();
    Ok(report)
}

/// The points above their roofs beyond both spreads (`model::above_roof`), by name, and the
/// memory-bound ones among them with the bandwidth level each is bound by (each level and
/// kernel once).
fn points_above(points: &[Point], roofs: &RoofSet) -> (Vec<String>, Vec<PointAbove>) {
    let (mut names, mut bound) = (Vec::new(), Vec::<PointAbove>::new());
    for p in points {
        let mut p = p.clone();
        p.derive();
        let a = crate::model::analyse(&p, roofs);
        if crate::model::above_roof(&p, &a, roofs).is_none() {
            continue;
        }
        let limiter = a
            .primary
            .and_then(|m| a.attainable.iter().find(|x| x.model == m))
            .map(|x| &x.limiter);
        if let Some(crate::model::Limiter::Memory { level }) = limiter {
            let a = PointAbove {
                level: level.clone(),
                kernel: p.name.split(['@', '×']).next().unwrap_or_default().to_string(),
            };
            if !bound.contains(&a) {
                bound.push(a);
            }
        }
        names.push(p.name);
    }
    (names, bound)
}

/// The thread counts of `--threads`, each once, in order, capped by the machine's CPUs (`all`
/// on a one-CPU machine is one thread).
fn thread_counts(list: &str) -> anyhow::Result<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    for t in crate::util::parse_threads(list, crate::util::available_cpus())? {
        let t = t.max(1) as u32;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    if out.is_empty() {
        out.push(1);
    }
    Ok(out)
}

/// Profile with the given steps, writing the bundle into `args.dir`.
pub fn run_with(args: Args, steps: &mut dyn Steps) -> anyhow::Result<i32> {
    // Output first: nothing is measured if the bundle cannot be written.
    bundle::check_dir(&args.dir)?;
    let threads = thread_counts(&args.threads)?;
    let (report, name) = match &args.from {
        Some(p) => (report::read_report(p)?, p.display().to_string()),
        None => (collect(steps, &threads)?, "profile".to_string()),
    };
    let (view, written) = bundle::write_bundle(report, &args.dir, &name)?;
    if args.json {
        println!("{}", report::json::document(&view).to_json());
    } else {
        print!("{}", report::table::render(&view));
        for r in &view.reports {
            print!("{}", report::tables::energy::energy_table(&r.report.points));
            print!("{}", report::tables::energy::energy_roofline_table(&r.report));
        }
    }
    let index = written.iter().find(|p| p.ends_with(bundle::INDEX)).cloned().unwrap_or_default();
    eprintln!("roofline: report written to {} (open {})", args.dir.display(), index.display());
    Ok(0)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(spec) = &args.platform.platform {
        crate::machine::set_platform(spec)?;
    }
    let mut steps = Wired::new(args.kernels.clone())?;
    steps.thread_counts = thread_counts(&args.threads)?;
    // The idle power is measured first, with nothing of the profile running.
    steps.energy = args.energy.start()?;
    run_with(args, &mut steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Bytes, Flops, Provenance, Source};
    use std::collections::BTreeMap;

    /// Fake steps: a two-core machine, roofs and two kernels, the way the real ones report.
    #[derive(Default)]
    struct Fake {
        ceilings_fail: bool,
        /// The FMA loop beside dgemm, as a fraction of the 1-thread AVX2 FMA roof (28.8
        /// GFLOP/s); none recorded when None.
        dgemm_loop_fraction: Option<f64>,
    }

    fn machine() -> MachineModel {
        let doc = serde_json::json!({
            "schema": "roofline.machine/1", "vendor": "Test", "family": 1, "model": 2, "stepping": 0,
            "brand": "Test CPU", "microarchitecture": "generic", "microarchitecture_name": "Generic",
            "identified_by": "generic", "hypervisor": null, "sockets": 1, "cores": 2, "threads": 2, "smt": false,
            "caches": [], "isa": ["avx2"], "fp_pipes": {}, "fp_pipes_source": "generic guess",
            "frequency_ghz": {"nominal": 2.0, "nominal_source": "test", "measured": null, "by_isa": {}, "by_isa_all_threads": {}, "override_ghz": null},
            "peak_gflops": {"double": {"avx2": 64.0}, "single": {}},
            "peak_gflops_per_core": {"double": {"scalar": 8.0, "avx2": 32.0}, "single": {}},
            "bytes_per_cycle": {"l1": 64.0, "dram": 8.0}
        });
        serde_json::from_value(doc).unwrap()
    }

    impl Steps for Fake {
        fn machine(&mut self, _bar: &ProgressBar) -> anyhow::Result<MachineModel> {
            Ok(machine())
        }
        fn environment(&mut self, _m: &MachineModel) -> Environment {
            Environment {
                host: Some("fake".into()),
                ..Default::default()
            }
        }
        fn ceilings(&mut self, m: &MachineModel, threads: u32, _bar: &ProgressBar) -> anyhow::Result<RoofSet> {
            if self.ceilings_fail {
                anyhow::bail!("no ceilings")
            }
            let mut r = RoofSet::theoretical(m, threads);
            for c in &mut r.compute {
                c.empirical = true;
                c.gflops *= 0.9;
            }
            for b in &mut r.bandwidth {
                b.empirical = true;
            }
            Ok(r)
        }
        fn points(&mut self, _m: &MachineModel, threads: u32, _bar: &ProgressBar) -> anyhow::Result<Vec<Point>> {
            let mk = |name: &str, flops: f64, core: f64, dram: f64, t: f64| {
                let mut b = Bytes::new();
                b.insert("core".into(), core);
                b.insert("dram".into(), dram);
                let mut prov = BTreeMap::new();
                prov.insert("core".to_string(), Source::Trace);
                prov.insert("dram".to_string(), Source::Analytic);
                Point::new(
                    name,
                    Provenance {
                        flops: Some(Source::Trace),
                        bytes: prov,
                        seconds: Some(Source::Native),
                        notes: vec![],
                        untrusted: Vec::new(),
                    },
                    Flops {
                        total: flops,
                        effective: None,
                        by_class: [("packed256_double".to_string(), flops)].into_iter().collect(),
                        ..Default::default()
                    },
                    b,
                    threads,
                    vec![t, t * 1.1, t * 0.95],
                )
            };
            let mut points = vec![mk("triad", 2e7, 3.2e8, 3.2e8, 0.02), mk("dgemm", 2e9, 2e9, 2e7, 0.05)];
            if let Some(f) = self.dgemm_loop_fraction {
                let check = serde_json::json!({ "roof": "double.avx2.fma", "gflops": 28.8 * f });
                points[1].extra.insert(super::super::machine_check::KEY, check);
            }
            Ok(points)
        }
    }

    #[test]
    fn a_team_streams_beyond_the_last_level_from_working_sets_its_private_caches_cannot_hold() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut draw = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..2000 {
            let l1 = (16 + draw(64)) << 10;
            let l2 = (256 + draw(4096)) << 10;
            let l3 = l2 + ((1 + draw(1024)) << 20);
            let cache = |level: u32, size_bytes: u64| crate::machine::Cache {
                level,
                kind: "data".into(),
                size_bytes,
                line_bytes: 64,
                ways: 8,
                sets: 64,
                shared_by_threads: 1,
                shared_by_source: "test".into(),
                instances: None,
            };
            let caches = vec![cache(1, l1), cache(2, l2), cache(3, l3)];
            let threads = 1 + draw(256) as u32;
            let nominal = 256 << 20;
            let each = dram_working_set(nominal, &caches, threads);
            let team_goal = (4 * l3).max(nominal).min(1 << 30);
            // One thread: the whole set, as before teams shared it out.
            if threads == 1 {
                assert_eq!(each, team_goal);
            }
            // The team together streams the goal (up to the rounding of one byte per thread).
            assert!(
                each * u64::from(threads) + u64::from(threads) > team_goal,
                "{each} × {threads} < {team_goal}"
            );
            // No thread's share fits its private levels, and none exceeds the goal.
            assert!(each >= (4 * l2).min(team_goal), "{each} under 4 × L2 {l2}");
            assert!(each <= team_goal);
            // Shared out: the team allocates no more than the goal or its private floors.
            let team_total = each * u64::from(threads);
            assert!(
                team_total <= team_goal.max(4 * l2 * u64::from(threads)),
                "{threads} threads allocate {team_total} for a goal of {team_goal}"
            );
        }
    }

    /// The main job reads the loop run beside a point against the roofs it places the point
    /// under: a slow or fast phase is noted on that point alone, a steady one on none.
    #[test]
    fn a_point_measured_in_a_slow_or_fast_phase_says_so() {
        use super::super::machine_check::{FAST, KEY, SLOW};
        let mut rng = crate::kernels::rng::Rng::new(0x9a5e);
        for _ in 0..20 {
            let fraction = rng.range(0.3, 1.6);
            let mut steps = Fake {
                dgemm_loop_fraction: Some(fraction),
                ..Fake::default()
            };
            let r = collect(&mut steps, &[1]).unwrap();
            let dgemm = r.points.iter().find(|p| p.name == "dgemm").unwrap();
            let kept = dgemm.extra.other[KEY]["fraction"].as_f64().unwrap();
            assert!((kept - fraction).abs() < 1e-9, "{kept} vs {fraction}");
            let noted: Vec<&String> = dgemm
                .provenance
                .notes
                .iter()
                .filter(|n| n.contains("while this point ran"))
                .collect();
            let want = if fraction < SLOW {
                Some("slower")
            } else if fraction > FAST {
                Some("faster")
            } else {
                None
            };
            assert_eq!(noted.len(), usize::from(want.is_some()), "{fraction}: {noted:?}");
            if let Some(w) = want {
                assert!(noted[0].contains(w), "{noted:?}");
            }
            let triad = r.points.iter().find(|p| p.name == "triad").unwrap();
            assert!(!triad.provenance.notes.iter().any(|n| n.contains("while this point ran")));
        }
    }

    #[test]
    fn profile_writes_the_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("roofline-report");
        let args = Args {
            dir: out.clone(),
            threads: "1".into(),
            ..Args::default()
        };
        assert_eq!(run_with(args, &mut Fake::default()).unwrap(), 0);
        for f in [bundle::INDEX, bundle::SVG, bundle::JSON] {
            assert!(out.join(f).is_file(), "{f} missing");
        }
        let r = report::read_report(&out.join(bundle::JSON)).unwrap();
        assert_eq!(r.points.len(), 2);
        assert!(r.ceilings_by_threads.is_empty());
        assert_eq!(r.environment.host.as_deref(), Some("fake"));
        // the model ran: bounds and roof fractions filled, empirical roofs kept
        assert!(r.points.iter().all(|p| p.bound.is_some() && p.roof_fraction.is_some()));
        let c = r.ceilings.as_ref().unwrap();
        assert_eq!(c.kind, "empirical");
        // 32 GFLOP/s per core × 1 thread × 0.9
        assert_eq!(c.compute_gflops["double.avx2.fma"], 28.8);
        let html = std::fs::read_to_string(out.join(bundle::INDEX)).unwrap();
        assert!(html.contains("triad") && html.contains("<svg"));
        // no temp files left
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
    }

    #[test]
    fn the_main_job_places_the_suite_under_one_core_and_every_core() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("roofline-report");
        // (What `all` means on the machine running the test: the default is "1,all".)
        assert_eq!(Args::default().threads, "1,all");
        let args = Args {
            dir: out.clone(),
            threads: "1,2".into(),
            ..Args::default()
        };
        assert_eq!(run_with(args, &mut Fake::default()).unwrap(), 0);
        let r = report::read_report(&out.join(bundle::JSON)).unwrap();
        // Both roof sets, each at its thread count: the fake's 0.9 × 32 GFLOP/s per core.
        let one = r.ceilings.as_ref().unwrap();
        assert_eq!((one.threads, one.compute_gflops["double.avx2.fma"]), (Some(1), 28.8));
        assert_eq!(r.ceilings_by_threads.len(), 1);
        let all = &r.ceilings_by_threads[0];
        assert_eq!((all.threads, all.compute_gflops["double.avx2.fma"]), (Some(2), 57.6));
        // The suite at both, each point read against its own thread count's roofs: dgemm's
        // 2e9 flop in 0.05 s (40 GFLOP/s) is above the 1-thread roof (28.8), within the 2-thread one.
        assert_eq!(r.points.iter().filter(|p| p.threads == 1).count(), 2);
        assert_eq!(r.points.iter().filter(|p| p.threads == 2).count(), 2);
        for p in r.points.iter().filter(|p| p.name == "dgemm") {
            let f = p.roof_fraction.unwrap();
            let want = 40.0 / (28.8 * f64::from(p.threads));
            assert!((f - want).abs() < 1e-9, "{} threads: {f} vs {want}", p.threads);
        }
        // The table and the page show a section per roof set.
        let view = crate::report::View::new(vec![("r".into(), r)], None, crate::report::PlotKind::Carm);
        let text = crate::report::table::render(&view);
        assert!(text.contains("== 1 thread(s) ==") && text.contains("== 2 thread(s) =="), "{text}");
        assert!(text.contains("2 thread(s)): peak double 57.6 GFLOP/s"), "{text}");
        let html = std::fs::read_to_string(out.join(bundle::INDEX)).unwrap();
        // The page: a chart and a folded roof section per roof set, each headed by its threads.
        for t in ["1 thread(s)", "2 thread(s)"] {
            assert!(html.contains(&format!("<b>{t}</b>")), "no chart headed {t}");
            assert!(
                html.contains(&format!("<h2>Roofs and the other views — {t}</h2>")),
                "no roofs for {t}"
            );
        }
        assert!(html.contains("id=\"chart0-box\"") && html.contains("id=\"chart1-box\"") && !html.contains("id=\"chart2-box\""));
    }

    /// The fake's steps, with roofs that can be measured again (`factor` × the fake's) and a
    /// record of each call.
    struct Remeasuring {
        fake: Fake,
        factor: f64,
        calls: Vec<(u32, String)>,
    }

    impl Steps for Remeasuring {
        fn machine(&mut self, bar: &ProgressBar) -> anyhow::Result<MachineModel> {
            self.fake.machine(bar)
        }
        fn environment(&mut self, m: &MachineModel) -> Environment {
            self.fake.environment(m)
        }
        fn ceilings(&mut self, m: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<RoofSet> {
            self.fake.ceilings(m, threads, bar)
        }
        fn points(&mut self, m: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<Vec<Point>> {
            self.fake.points(m, threads, bar)
        }
        fn remeasure_ceilings(
            &mut self,
            threads: u32,
            above: &[PointAbove],
            why: &str,
            bar: &ProgressBar,
        ) -> Option<anyhow::Result<RoofSet>> {
            // dgemm, the fake's point above its roof, is compute-bound: no level to name.
            assert!(above.is_empty(), "{above:?}");
            self.calls.push((threads, why.to_string()));
            let mut r = self.fake.ceilings(&machine(), threads, bar).ok()?;
            for c in &mut r.compute {
                c.gflops *= self.factor;
            }
            Some(Ok(r))
        }
    }

    /// The points above their roofs and the levels the memory-bound ones are bound by: the
    /// fake's triad (16 GB/s from DRAM, its label drawn from the forms the main job gives) is
    /// above a DRAM roof cut to a random share under half, and names `dram` and its kernel;
    /// its dgemm (40 GFLOP/s) is above the 28.8 compute roof and names no level; with the DRAM
    /// roof raised instead only dgemm is above.
    #[test]
    fn points_above_their_roofs_name_the_levels_they_are_bound_by() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        let bar = ProgressBar::hidden();
        for _ in 0..20 {
            let mut fake = Fake::default();
            let mut points = fake.points(&machine(), 1, &bar).unwrap();
            let label = ["triad", "triad@dram", "triad@dram×16", "triad@256.0KiB×2"][rng.below(4)];
            points[0].name = label.to_string();
            let roofs = fake.ceilings(&machine(), 1, &bar).unwrap();
            let scaled = |k: f64| {
                let mut r = roofs.clone();
                for b in r.bandwidth.iter_mut().filter(|b| b.level == "dram") {
                    (b.gbs, b.traffic_gbs) = (b.gbs * k, b.traffic_gbs * k);
                }
                r
            };
            let (names, bound) = points_above(&points, &scaled(0.1 + 0.35 * rng.unit()));
            let triad = PointAbove {
                level: "dram".into(),
                kernel: "triad".into(),
            };
            assert_eq!((names, bound), (vec![label.to_string(), "dgemm".to_string()], vec![triad]));
            let (names, bound) = points_above(&points, &scaled(2.0 + rng.unit()));
            assert_eq!((names, bound), (vec!["dgemm".to_string()], Vec::new()));
        }
    }

    /// A point above roofs read from the cache makes the main job measure that thread count's
    /// roofs again and read its points against the new ones; a count with no point above is
    /// left alone. (dgemm's 40 GFLOP/s is above the fake's 1-thread roof of 28.8, under the
    /// 2-thread one.)
    #[test]
    fn a_point_above_cached_roofs_has_them_measured_again() {
        for (factor, still_above) in [(1.5, false), (1.2, true)] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("roofline-report");
            let args = Args {
                dir: out.clone(),
                threads: "1,2".into(),
                ..Args::default()
            };
            let mut steps = Remeasuring {
                fake: Fake::default(),
                factor,
                calls: Vec::new(),
            };
            assert_eq!(run_with(args, &mut steps).unwrap(), 0);
            assert_eq!(steps.calls.len(), 1, "{:?}", steps.calls);
            assert_eq!(steps.calls[0].0, 1);
            assert!(
                steps.calls[0].1.contains("dgemm") && !steps.calls[0].1.contains("triad"),
                "{:?}",
                steps.calls
            );
            let r = report::read_report(&out.join(bundle::JSON)).unwrap();
            let roof = 28.8 * factor;
            assert!((r.ceilings.as_ref().unwrap().compute_gflops["double.avx2.fma"] - roof).abs() < 1e-9);
            let dgemm = r.points.iter().find(|p| p.name == "dgemm" && p.threads == 1).unwrap();
            assert!((dgemm.roof_fraction.unwrap() - 40.0 / roof).abs() < 1e-9);
            let noted = dgemm.provenance.notes.iter().any(|n| n.starts_with("above its roof:"));
            assert_eq!(noted, still_above, "{:?}", dgemm.provenance.notes);
        }
    }

    /// The fake's steps with a CPU choice of random probe rates.
    struct ChoosingFake {
        choice: crate::schema::report::CpuChoice,
    }

    impl Steps for ChoosingFake {
        fn machine(&mut self, bar: &ProgressBar) -> anyhow::Result<MachineModel> {
            Fake::default().machine(bar)
        }
        fn environment(&mut self, m: &MachineModel) -> Environment {
            Fake::default().environment(m)
        }
        fn ceilings(&mut self, m: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<RoofSet> {
            Fake::default().ceilings(m, threads, bar)
        }
        fn points(&mut self, m: &MachineModel, threads: u32, bar: &ProgressBar) -> anyhow::Result<Vec<Point>> {
            Fake::default().points(m, threads, bar)
        }
        fn choose_cpu(&mut self) -> Option<crate::schema::report::CpuChoice> {
            Some(self.choice.clone())
        }
    }

    #[test]
    fn the_chosen_cpu_is_recorded_and_unequal_cpus_are_named() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        for _ in 0..20 {
            let n = 2 + rng.below(15);
            let rates: Vec<crate::schema::report::CpuGflops> = (0..n)
                .map(|cpu| crate::schema::report::CpuGflops {
                    cpu,
                    gflops: 20.0 + 60.0 * rng.unit(),
                })
                .collect();
            let (fastest, slowest) = rates
                .iter()
                .fold((f64::MIN, f64::MAX), |(hi, lo), r| (hi.max(r.gflops), lo.min(r.gflops)));
            let slow_cpu = rates.iter().find(|r| r.gflops == slowest).unwrap().cpu;
            let cpu = rng.below(n);
            let choice = crate::schema::report::CpuChoice {
                cpu,
                probe: "dgemm probe".into(),
                rates,
            };
            let r = collect(&mut ChoosingFake { choice: choice.clone() }, &[1]).unwrap();
            assert_eq!(r.environment.cpu_choice.as_ref(), Some(&choice));
            let view = crate::report::View::new(vec![("r".into(), r)], None, crate::report::PlotKind::Carm);
            let text = crate::report::table::render(&view);
            let first = text.lines().next().unwrap();
            assert!(
                first.starts_with(&format!("one thread ran on CPU {cpu} (dgemm probe on each of {n} CPU(s)")),
                "{first}"
            );
            let share = slowest / fastest;
            assert_eq!(
                first.contains(&format!("the CPUs are unequal: CPU {slow_cpu} ran it at {:.0} %", 100.0 * share)),
                share < crate::report::table::UNEQUAL_CPUS,
                "{first} (slowest {slowest}, fastest {fastest})"
            );
        }
    }

    #[test]
    fn the_probe_chooses_an_allowed_cpu_and_puts_it_first() {
        let allowed = roofline_kernels::cpus::allowed_cpus();
        let choice = Wired::new(Vec::new()).unwrap().choose_cpu();
        let first = roofline_kernels::cpus::allowed_cpus()[0];
        roofline_kernels::cpus::prefer_cpu(None);
        match choice {
            None => assert_eq!(allowed.len(), 1, "more than one CPU and no choice"),
            Some(c) => {
                assert_eq!(c.rates.iter().map(|r| r.cpu).collect::<Vec<_>>(), allowed);
                assert!(c.rates.iter().all(|r| r.gflops > 0.0), "{c:?}");
                assert_eq!(first, c.cpu, "the chosen CPU leads the list");
            }
        }
    }

    #[test]
    fn spinner_is_finished_before_a_step_draws_its_own_bar() {
        let bar = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        bar.enable_steady_tick(std::time::Duration::from_millis(5));
        assert!(!bar.is_finished());
        // what the step sees while its own bar would draw
        let finished_inside = with_own_progress(&bar, || bar.is_finished());
        assert!(finished_inside, "the spinner still ticks while the step's bar draws");
    }

    #[test]
    fn failing_ceilings_fall_back_to_theory() {
        let r = collect(
            &mut Fake {
                ceilings_fail: true,
                ..Fake::default()
            },
            &[2],
        )
        .unwrap();
        let c = r.ceilings.unwrap();
        assert_eq!(c.kind, "theoretical");
        // 32 GFLOP/s per core × 2 threads
        assert_eq!(c.compute_gflops["double.avx2.fma"], 64.0);
        // 8 B/cycle × 2 GHz × 2 threads
        assert_eq!(c.bandwidth_gbs["dram"], 32.0);
    }

    #[test]
    fn missing_output_parent_is_refused_before_measuring() {
        let dir = tempfile::tempdir().unwrap();
        let args = Args {
            dir: dir.path().join("missing/bundle"),
            ..Args::default()
        };
        let e = run_with(args, &mut Fake::default()).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
