//! `roofline run KERNEL`: run a suite kernel on pinned threads; W and Q from a backend
//! (analytic by default), T always native: warm-up, then repetitions until both
//! `--repeat` samples and `--min-time` seconds are reached; median, min and spread.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args as ClapArgs;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::common::{EnergyArg, OutputArgs, PlatformArg, ThreadsArg};
use crate::cli::kernels_cmd::widest_runnable;
use crate::counters::BackendKind;
use crate::counters::analytic::KernelRun;
use crate::counters::backend;
use crate::error::Error;
use crate::kernels::runner::Repeat;
use crate::kernels::{Kernel, Variant, api, check};
use crate::report::tables::run::run_table;
use crate::schema::Report;
use crate::schema::environment::{StealClock, collect, own_compiler};

/// Default working set when neither --size nor --bytes is given.
pub const DEFAULT_BYTES: u64 = 32 << 20;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Kernel name (see `roofline kernels`).
    pub kernel: String,
    /// Size in the kernel's unit: elements, matrix order (dgemm), rows (spmv, normalize).
    #[arg(long, conflicts_with = "bytes")]
    pub size: Option<usize>,
    /// Working-set size instead of --size: 4KiB, 64MiB, 1GiB … (default 32MiB).
    #[arg(long, value_name = "BYTES")]
    pub bytes: Option<String>,
    /// scalar, sse, avx2, avx512, or amx for the low-precision GEMMs (default: the widest this
    /// CPU runs).
    #[arg(long)]
    pub variant: Option<String>,
    #[command(flatten)]
    pub threads: ThreadsArg,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Timed repetitions, at least (more until --min-time is reached).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Seconds the timed repetitions add up to, at least.
    #[arg(long, default_value_t = 0.2, value_name = "SECONDS")]
    pub min_time: f64,
    /// Where W and Q come from (timing is always native). `trace` counts W and core Q of one
    /// run per thread's instance under the tracer; `perf` counts W and the levels the
    /// platform's events cover on every team thread around exactly the timed calls (core Q
    /// and the rest stay analytic); `auto` = perf where a core PMU exists, else analytic.
    /// `simulated` = the perf path on the simulated PMU (a test instrument, docs/validate.md).
    /// L2/L3/DRAM Q that nothing counted come from the cache model.
    #[arg(long, value_enum, default_value = "analytic")]
    pub backend: BackendKind,
    /// Which events `--backend perf` counts: the platform's (needs a PMU) or kernel software
    /// events only (task-clock, page-faults: T cross-checks on any machine).
    #[arg(long, value_enum, default_value = "platform")]
    pub events: crate::counters::team::EventSet,
    /// Also count the platform's opt-in events (`--backend perf|simulated`): single precision,
    /// FP16, and the FMA flops (`flops.fma`) of AMD Zen 1–4's MAC umasks.
    #[arg(long)]
    pub optional_events: bool,
    /// Skip the check of one run against the scalar f64 reference.
    #[arg(long)]
    pub no_verify: bool,
    /// One problem of the size shared by the team of `--threads` (each thread computes its
    /// block of the result; the time is the whole problem's) instead of one independent
    /// problem per thread. Kernels with a shared mode: bf16_gemm, int8_gemm. Analytic and
    /// perf backends.
    #[arg(long)]
    pub split: bool,
    #[command(flatten)]
    pub energy: EnergyArg,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Everything checked before any measuring.
struct Plan {
    kernel: Box<dyn Kernel>,
    n: usize,
    variant: Variant,
    threads: Vec<usize>,
    repeat: Repeat,
}

fn plan(args: &Args) -> crate::Result<Plan> {
    let kernel = api::find(&args.kernel).ok_or_else(|| {
        let names: Vec<&str> = api::all().iter().map(|k| k.name()).collect();
        Error::input(format!("unknown kernel '{}'", args.kernel), format!("one of: {}", names.join(", ")))
    })?;
    let variant = match &args.variant {
        Some(name) => {
            let v = Variant::from_name(name).filter(|v| kernel.variants().contains(v)).ok_or_else(|| {
                Error::input(
                    format!("unknown variant '{name}' of {}", kernel.name()),
                    "one of: scalar, sse, avx2, avx512 (amx: the low-precision GEMMs)",
                )
            })?;
            if !check::runnable(v) {
                return Err(Error::input(
                    format!("this CPU cannot run the {v} variant"),
                    "`roofline kernels` marks the runnable variants with *",
                ));
            }
            v
        }
        None => widest_runnable(kernel.variants())
            .ok_or_else(|| Error::unavailable(format!("this CPU runs no variant of {}", kernel.name()), "see `roofline kernels`"))?,
    };
    let n = match (args.size, &args.bytes) {
        (Some(0), _) => {
            return Err(Error::input(
                "--size 0: nothing to run",
                format!("give a positive size in {}", kernel.size_unit()),
            ));
        }
        (Some(n), _) => n,
        (None, Some(b)) => kernel.size_for_bytes(crate::util::parse_bytes(b)?),
        (None, None) => kernel.size_for_bytes(DEFAULT_BYTES),
    };
    let threads = args.threads.parse()?;
    if args.repeat == 0 {
        return Err(Error::input("--repeat 0: nothing would be timed", "use --repeat 1 or more"));
    }
    if !(args.min_time.is_finite() && args.min_time >= 0.0 && args.min_time <= 3600.0) {
        return Err(Error::input(
            format!("--min-time {}: not a duration", args.min_time),
            "give seconds, e.g. 0.2",
        ));
    }
    let most = threads.iter().copied().max().unwrap_or(1) as u64;
    let copies = if args.split { 1 } else { most };
    check::require_memory(kernel.working_set_bytes(n).saturating_mul(copies)).map_err(|e| {
        Error::input(
            format!("{} at size {n}: {e}", kernel.name()),
            "use a smaller --size or --bytes, or fewer threads",
        )
    })?;
    let repeat = Repeat {
        min_total: Duration::from_secs_f64(args.min_time),
        min_samples: args.repeat,
        max_samples: args.repeat.max(1000),
        warmup: 1,
    };
    Ok(Plan {
        kernel,
        n,
        variant,
        threads,
        repeat,
    })
}

/// The point name: kernel, variant and size (threads are a field of the point).
pub fn point_name(kernel: &str, variant: Variant, n: usize) -> String {
    format!("{kernel}/{variant}/n={n}")
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(spec) = &args.platform.platform {
        crate::machine::set_platform(spec)?;
    }
    let out = args.output.check(&["json"])?;
    let plan = plan(&args)?;
    let (backend, _) = crate::counters::choose(
        args.backend,
        crate::counters::Target::Kernel,
        std::path::Path::new(crate::counters::perf::SYSFS_PMUS),
    )?;
    if args.split && matches!(backend, BackendKind::Trace | BackendKind::Simulated) {
        return Err(Error::input(
            "--split: the trace backend counts one independent instance per thread",
            "use --backend analytic or perf with --split",
        )
        .into());
    }
    // Events chosen and checked before anything runs (one line and exit 2 without a PMU).
    let mut counting = backend::for_kernels(backend, args.events, args.platform.platform.as_deref(), args.optional_events)?;
    let command_line: Vec<String> = std::env::args().collect();
    let mut env = collect(&command_line);
    env.compiler = Some(own_compiler());
    let steal = StealClock::start();
    // The static machine model (milliseconds; no clock measurement): the report says what ran it.
    let model = crate::machine::detect_static(&Default::default())?;
    let machine = serde_json::to_value(&model)?;
    let mut report = Report::new(machine, env);
    // Trace before any timing thread exists (the traced child is forked from this process).
    let most = plan.threads.iter().copied().max().unwrap_or(1);
    counting.prepare_kernel(plan.kernel.as_ref(), plan.n, plan.variant, most)?;
    // The idle power is measured here, with nothing of ours running.
    let energy = args.energy.start()?;
    for (i, &threads) in plan.threads.iter().enumerate() {
        let spec = KernelRun {
            kernel: plan.kernel.as_ref(),
            n: plan.n,
            variant: plan.variant,
            threads,
            repeat: plan.repeat,
            verify: !args.no_verify && i == 0,
            split: args.split,
        };
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("static template"));
        let started = Instant::now();
        let label = format!("{} {} n={} threads={threads}", plan.kernel.name(), plan.variant, plan.n);
        let window = energy.as_ref().map(|e| e.window()).transpose()?;
        let on_sample = |count: usize, secs: f64| {
            if let (Some(e), Some(w)) = (&energy, &window) {
                // A failed read leaves the stretch longer; the window's end is read below.
                let _ = e.mark(w);
            }
            // Runs longer than a second get a progress line on stderr.
            if bar.is_hidden() && started.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            bar.set_message(format!("{label}: {count} samples, last {secs:.3e} s"));
            bar.tick();
        };
        let m = counting.measure_kernel(&spec, &model.caches, &on_sample)?;
        bar.finish_and_clear();
        let mut point = m.into_point(point_name(plan.kernel.name(), plan.variant, plan.n));
        if let (Some(e), Some(w)) = (&energy, &window) {
            e.mark(w)?;
            point.extra.energy = Some(e.kernel_energy(w, point.seconds, point.flops.total)?);
        }
        report.points.push(point);
    }
    report.environment.steal_fraction = steal.finish();
    let json = report.to_json();
    if let Some((file, _)) = &out {
        file.write(json.as_bytes()).context("writing the report")?;
    }
    if args.output.json {
        println!("{json}");
    } else {
        print!("{}", run_table(&report.points, plan.kernel.size_unit()));
        print!("{}", crate::report::tables::energy::energy_table(&report.points));
    }
    Ok(0)
}
