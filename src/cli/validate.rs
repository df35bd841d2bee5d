//! `roofline validate`: the kernel suite under a backend, against the analytic W (its FMA
//! flops included), explicit-operand core Q and DRAM Q — the paper's validation table. Exit 1 on a mismatch.
//! The validation itself is the library's (`crate::validate`); this prints it.

use anyhow::Context;
use clap::Args as ClapArgs;

use crate::cli::common::{OutputArgs, PlatformArg};
use crate::counters::BackendKind;
use crate::counters::cachesim;
use crate::counters::trace::TraceMode;
use crate::error::Error;
use crate::report::tables::validate::table;
use crate::report::tables::validate_perf;
use crate::schema::documents::{Document, Tolerance, VALIDATE_PERF_SCHEMA, VALIDATE_SCHEMA, ValidateDocument, ValidatePerfDocument};
use crate::validate::{DEFAULT_VALIDATE_CACHE, DRAM_TOLERANCE, rows_report, validate_suite};

/// The backends `validate` validates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    Trace,
    Analytic,
    /// This machine's hardware counters: a verdict per event class, kept in a trust table.
    Perf,
    /// The perf validation on the simulated PMU (a test instrument; faults from
    /// ROOFLINE_SIMULATED_PMU).
    Simulated,
}

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Backend to validate against the analytic counts.
    #[arg(long, value_enum, default_value = "trace")]
    pub backend: BackendArg,
    /// Only these kernels (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub kernels: Vec<String>,
    /// Working set per kernel instance (small: the trace counts every instruction).
    #[arg(long, default_value = "48KiB")]
    pub working_set: String,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Seed of the kernels' random inputs (default: fresh per run). Fix it to make the counts
    /// of data-dependent kernels (spmv's sparsity) reproducible, e.g. for a CI gate.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Also write the traced W and core Q as a `roofline.report/1` (one point per kernel and
    /// variant, no timing), for `roofline gate`.
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// `memory`: single-step every instruction (a slow cross-check of the block counting) and
    /// feed a small simulated cache hierarchy (`--cache`); the streaming kernels then run at 4×
    /// its last level and their DRAM Q must be within 2 % of their compulsory traffic
    /// (write-allocate included).
    #[arg(long = "trace", alias = "trace-mode", value_enum, default_value = "flops")]
    pub trace_mode: TraceMode,
    /// The simulated hierarchy of `--trace memory`, as `measure --cache` takes it
    /// (default: a small one, `L1=4KiB:4,L2=32KiB:8`, so the streaming kernels are traced at 128 KiB).
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
}

fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(spec) = &args.platform.platform {
        crate::machine::set_platform(spec)?;
    }
    let out = args.output.check(&["json"])?;
    let report_out = match &args.report {
        Some(p) => Some(crate::util::OutputFile::check(p, &["json"])?.0),
        None => None,
    };
    let ws = crate::util::parse_bytes(&args.working_set).context("--working-set")?;
    let backend = match args.backend {
        BackendArg::Trace => BackendKind::Trace,
        BackendArg::Analytic => BackendKind::Analytic,
        BackendArg::Perf | BackendArg::Simulated => return run_perf(&args, ws, out),
    };
    let seed = args.seed.unwrap_or_else(fresh_seed);
    if args.cache.is_some() && (args.trace_mode != TraceMode::Memory || backend != BackendKind::Trace) {
        anyhow::bail!(Error::input(
            "--cache needs --trace memory (and the trace backend)",
            "roofline validate --trace memory --cache L1=4KiB:4,L2=32KiB:8"
        ));
    }
    let sim = if backend == BackendKind::Trace && args.trace_mode == TraceMode::Memory {
        let h = cachesim::parse_cache_hierarchy(args.cache.as_deref().unwrap_or(DEFAULT_VALIDATE_CACHE))?;
        let llc = h.levels().last().map(|l| l.size_bytes).unwrap_or(0);
        eprintln!(
            "roofline validate: --trace memory feeds every address into a simulated hierarchy ({}); \
             streaming kernels at 4× its last level ({}), DRAM Q within {:.0} % of their compulsory traffic; \
             each kernel also against single-stepping on a small instance",
            h.note(),
            crate::schema::units::fmt_bytes((4 * llc) as f64),
            100.0 * DRAM_TOLERANCE
        );
        Some((h, llc))
    } else {
        None
    };
    let (rows, not_run) = validate_suite(&args.kernels, ws, backend, seed, args.trace_mode, sim.as_ref().map(|(h, _)| h))?;
    if rows.is_empty() {
        eprintln!("roofline validate: no kernel variant to validate (the suite is empty or none runs on this CPU)");
    }
    let all_ok = rows.iter().all(|r| r.ok);
    let doc = ValidateDocument {
        schema: VALIDATE_SCHEMA.into(),
        backend: backend.name().into(),
        seed,
        tolerance: Tolerance {
            flops: 0.0,
            core_bytes: Some(0.0),
            dram_bytes: sim.is_some().then_some(DRAM_TOLERANCE),
        },
        cache: sim.as_ref().map(|(h, _)| h.note()),
        ok: all_ok,
        rows: rows.iter().collect(),
    };
    let text = doc.to_json();
    if let Some((file, _)) = out {
        file.write(text.as_bytes())?;
    }
    if let Some(file) = report_out {
        let mut report = rows_report(&rows, backend);
        report.not_run = not_run;
        file.write(report.to_json().as_bytes())?;
    }
    if args.output.json {
        println!("{text}");
    } else {
        print!("{}", table(&rows, backend));
    }
    if !all_ok {
        anyhow::bail!(Error::CheckFailed(format!(
            "{} of {} kernel variants do not match the analytic counts",
            rows.iter().filter(|r| !r.ok).count(),
            rows.len()
        )));
    }
    Ok(0)
}

/// `--backend perf|simulated`: the counters against kernels of known W and DRAM Q, a verdict
/// per event class, the trust table saved beside the ceilings cache. Exit 1 when an event
/// class is off or not counted.
fn run_perf(args: &Args, working_set: u64, out: Option<(crate::util::OutputFile, String)>) -> anyhow::Result<i32> {
    use crate::counters::simulated::SimulatedPmu;
    use crate::validate::perf::{self, Counters};
    if args.trace_mode != TraceMode::Flops {
        anyhow::bail!(Error::input(
            "--trace belongs to --backend trace",
            "drop --trace, or use `roofline validate --backend trace --trace memory`"
        ));
    }
    let counters = match args.backend {
        BackendArg::Simulated => Counters::Simulated {
            pmu: Box::new(SimulatedPmu::from_env(args.platform.platform.as_deref())?),
            hierarchy: Box::new(cachesim::parse_cache_hierarchy(
                args.cache.as_deref().unwrap_or(DEFAULT_VALIDATE_CACHE),
            )?),
        },
        _ => {
            if let Some(spec) = &args.cache {
                anyhow::bail!(Error::input(
                    format!("--cache {spec}: real counters count the real caches"),
                    "drop --cache (it sets the simulated hierarchy of --backend simulated or trace memory mode)"
                ));
            }
            Counters::Perf
        }
    };
    let opts = perf::Options {
        kernels: args.kernels.clone(),
        dram_kernels: Vec::new(),
        working_set,
        platform: args.platform.platform.clone(),
        min_time: 0.05,
    };
    let v = perf::validate(&counters, &opts)?;
    let table = v.trust_table(&crate::counters::trust::this_machine());
    match table.save() {
        Ok(path) => eprintln!("roofline validate: trust table written to {}", path.display()),
        Err(e) => eprintln!("roofline validate: trust table not saved: {}", e.to_string().replace('\n', ";")),
    }
    let doc = ValidatePerfDocument {
        schema: VALIDATE_PERF_SCHEMA.into(),
        backend: v.source.name().into(),
        tolerance: Tolerance {
            flops: perf::FLOPS_TOLERANCE,
            core_bytes: None,
            dram_bytes: Some(perf::DRAM_TOLERANCE),
        },
        ok: v.all_passed(),
        validation: &v,
    };
    let text = doc.to_json();
    if let Some((file, _)) = out {
        file.write(text.as_bytes())?;
    }
    if args.output.json {
        println!("{text}");
    } else {
        print!("{}", validate_perf::table(&v));
    }
    if !v.all_passed() {
        anyhow::bail!(Error::CheckFailed(format!(
            "{} of {} event classes failed validation: numbers from their events are marked untrusted on this machine",
            v.rows.iter().filter(|r| !r.verdict.passed()).count(),
            v.rows.len()
        )));
    }
    Ok(0)
}
