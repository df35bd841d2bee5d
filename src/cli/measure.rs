//! `roofline measure`: W, Q and T of a command, from hardware counters (perf) or
//! by tracing (trace), as a `roofline.report/1` document.

use anyhow::Context;
use clap::Args as ClapArgs;
use std::io::Write;

use crate::cli::common::{EnergyArg, OutputArgs, PlatformArg};
use crate::counters::BackendKind;
use crate::counters::backend::{self, CommandOptions, CommandOutcome};
use crate::report::tables::measure::{Show, measure_table};

pub use crate::counters::team::EventSet;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// perf: hardware counters; trace: ptrace + decoding; auto: perf when a usable core PMU exists;
    /// simulated: the simulated PMU, a test instrument (faults from ROOFLINE_SIMULATED_PMU, see
    /// docs/validate.md), never chosen by auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Run the command this many times; T is the median, every run is kept. With the trace
    /// backend the command is traced once (W, Q) and then run natively this many times (T).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Also count the system-wide (uncore) events for as long as the command ran, with no
    /// command, and subtract that background from the memory traffic.
    #[arg(long)]
    pub idle_baseline: bool,
    /// Which events the perf backend counts.
    #[arg(long, value_enum, default_value = "platform")]
    pub events: EventSet,
    /// Also count the platform's opt-in events (single precision, FP16, and the FMA flops
    /// (`flops.fma`) of AMD Zen 1–4's MAC umasks).
    #[arg(long)]
    pub optional_events: bool,
    /// Leave out system-wide uncore (memory) events: no DRAM traffic, no paranoid 0 needed.
    #[arg(long)]
    pub no_uncore: bool,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// With --energy the command is also run natively `--repeat` times, each run between two
    /// readings of the energy counters.
    #[command(flatten)]
    pub energy: EnergyArg,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The command and its arguments (run directly, never through a shell).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Trace backend: `flops` counts W and core Q by block (fast); `memory` also feeds every
    /// address, in program order, to the cache simulator for Q per level (computed per block
    /// and per loop; single-stepped only where an address cannot be computed).
    #[arg(long, value_enum, default_value = "flops")]
    pub trace: crate::counters::trace::TraceMode,
    /// Trace backend: attribute W and Q to functions: the innermost frame of the program's
    /// own code through DWARF (inlined closures included), else the ELF symbol.
    #[arg(long = "by-function")]
    pub by_function: bool,
    /// Trace backend: attribute W and Q to source lines (`file:line`, needs line tables;
    /// JSON `extra.by_line`). Implies the per-function attribution.
    #[arg(long = "by-line")]
    pub by_line: bool,
    /// Trace memory mode (needs `--trace memory`): the simulated hierarchy, e.g.
    /// `L1=48KiB:12,L2=2MiB:16,L3=8MiB:16:inclusive` (default: this machine's caches).
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
}

/// With `--json` the document owns stdout: the measured command's stdout (traced runs, native
/// runs, perf runs: every child inherits it) goes to stderr instead, as hyperfine does with its
/// export options. Returns the real stdout, to print the document on.
fn stdout_for_json_only() -> anyhow::Result<std::fs::File> {
    let saved = nix::unistd::dup(std::io::stdout()).context("dup(stdout)")?;
    nix::unistd::dup2_stdout(std::io::stderr()).context("dup2(stderr, stdout)")?;
    Ok(std::fs::File::from(saved))
}

impl Args {
    fn command_options(&self) -> CommandOptions {
        CommandOptions {
            repeat: self.repeat,
            idle_baseline: self.idle_baseline,
            events: self.events,
            optional_events: self.optional_events,
            uncore: !self.no_uncore,
            platform: self.platform.platform.clone(),
            trace: self.trace,
            by_function: self.by_function || self.by_line,
            cache: self.cache.clone(),
            trace_timing: true,
            single_run: false,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    // `-o DIR/` inside a launcher: this instance is one rank of a job.
    if let Some((rank, dir)) = super::measure_rank::rank_for(args.output.output.as_deref()) {
        let asked = super::measure_rank::RankMeasure {
            backend: args.backend,
            command: &args.command,
            options: args.command_options(),
            repeat: args.repeat,
            no_uncore: args.no_uncore,
        };
        return super::measure_rank::run(asked, rank, &dir);
    }
    let out = args.output.check(&["json"])?;
    let mut json_stdout = if args.output.json { Some(stdout_for_json_only()?) } else { None };
    // The meter opens (and the idle power is measured) before anything of the command runs.
    let energy = args.energy.start()?;
    let measurement = match backend::measure_command(args.backend, &args.command, &args.command_options())? {
        CommandOutcome::Measured(m) => *m,
        CommandOutcome::Failed { status } => return Ok(status),
    };
    let mut report = backend::command_report(&args.command, measurement);
    if let Some(e) = &energy {
        // Marker regions (points after the whole run's) get their joules from the same runs.
        let regions = report.points.len() > 1;
        let runs = match backend::energy_runs(e, &args.command, args.repeat, regions)? {
            Ok(runs) => runs,
            Err(status) => return Ok(status),
        };
        let ends: Vec<_> = runs.iter().map(|r| (r.before.clone(), r.after.clone())).collect();
        if let Some(p) = report.points.first_mut() {
            p.extra.energy = Some(e.runs_energy(&ends, p.flops.total)?);
        }
        for p in report.points.iter_mut().skip(1) {
            let per_run: Vec<_> = runs.iter().filter_map(|r| r.regions.get(&p.name).cloned()).collect();
            if per_run.is_empty() {
                continue;
            }
            let mut energy = e.region_energy(&p.name, &per_run, p.flops.total)?;
            if per_run.len() < runs.len() {
                energy.notes.push(format!(
                    "region '{}' logged no calls in {} of {} energy run(s)",
                    p.name,
                    runs.len() - per_run.len(),
                    runs.len()
                ));
            }
            p.extra.energy = Some(energy);
        }
    }
    let json = report.to_json();
    if let Some((file, _)) = out {
        file.write(json.as_bytes())?;
    }
    if let Some(f) = json_stdout.as_mut() {
        writeln!(f, "{json}").context("writing the JSON document")?;
    } else {
        let show = Show {
            functions: args.by_function,
            lines: args.by_line,
        };
        let _ = std::io::stdout()
            .write_all(measure_table(&report, show).as_bytes())
            .context("writing the table");
        let _ = std::io::stdout().write_all(crate::report::tables::energy::energy_table(&report.points).as_bytes());
    }
    Ok(0)
}
