//! `roofline gate`: compare a report against a baseline under rules; exit 0 pass,
//! 1 regression, 2 usage or input error.

use anyhow::Result;
use clap::Args as ClapArgs;
use std::path::{Path, PathBuf};

use crate::cli::common::OutputArgs;
use crate::counters::BackendKind;
use crate::counters::backend::CommandOutcome;
use crate::error::Error;
use crate::gate::{self, Format, RuleSet};
use crate::schema::Report;

#[derive(Debug, ClapArgs)]
#[command(after_help = "\
Metrics: flops.total, flops.effective, flops.fma, flops.by_class.<class>, bytes.<level>, ai.<level>, gbs.<level>, \
seconds, gflops, roof_fraction, threads; on a merged job's points (`report merge JOB/`) imbalance.flops and \
imbalance.seconds (largest over mean across ranks); its rank and node points are `NAME @ rank R` and `NAME @ node HOST`.
Default rules: flops.* exact; bytes.core and bytes.stack may grow 1 %, bytes.l2/l3/dram 2 %; seconds may grow 5 % \
and gflops drop 5 %, judged by a one-sided Mann-Whitney U test (α = 0.05) over all repetitions when there are enough, \
else on the medians; imbalance.flops exact, imbalance.seconds may grow 10 % (a threshold). Rules file format: see examples/ci-gate/rules.toml.
Exit status: 0 pass, 1 regression, 2 usage or input error.")]
pub struct Args {
    /// The baseline report (roofline.report/1 JSON).
    #[arg(long, value_name = "FILE")]
    pub baseline: PathBuf,
    /// The current report; or give a command after `--` to measure it now.
    #[arg(long, value_name = "FILE")]
    pub current: Option<PathBuf>,
    /// Backend measuring `-- CMD`.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Rules file (TOML); without it, the default rules.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Output format on stdout (`--json` is `--format json`).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Write the current report over the baseline (accepting its changes); exits 0.
    #[arg(long)]
    pub update_baseline: bool,
    /// The command to measure (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn read_report(path: &Path, role: &str) -> Result<Report, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::input(
            format!("{role} {}: cannot read ({e})", path.display()),
            if role == "--baseline" {
                "create one with `roofline gate --update-baseline …` or `roofline measure … -o FILE`"
            } else {
                "pass a report written by `roofline … -o report.json`"
            },
        )
    })?;
    Report::from_json(&text, &path.display().to_string())
}

/// Measure `cmd` with a backend into a report, exactly as `roofline measure` does (one
/// library path: events, groups, multiplexing, plausibility, native timing). The command's
/// own stdout goes to stderr meanwhile: stdout is the gate's verdict. `Err(status)`: the
/// command failed (said on stderr); its status is passed on.
fn measure_command(backend: BackendKind, cmd: &[String]) -> anyhow::Result<Result<Report, i32>> {
    let _stdout = crate::cli::common::StdoutToStderr::new()?;
    // The trace backend gates exact W and Q: no native timing (a single run's time of a short
    // command is noise against a baseline); perf and the simulated PMU time their counted run.
    let opts = crate::counters::backend::CommandOptions {
        trace_timing: false,
        ..Default::default()
    };
    Ok(match crate::counters::backend::measure_command(backend, cmd, &opts)? {
        CommandOutcome::Measured(m) => Ok(crate::counters::backend::command_report(cmd, *m)),
        CommandOutcome::Failed { status } => Err(status),
    })
}

pub fn run(args: Args) -> Result<i32> {
    let format = match (args.format, args.output.json) {
        (Some(f), true) if f != Format::Json => {
            return Err(Error::input("--json and --format disagree", "give one of them").into());
        }
        (_, true) => Format::Json,
        (Some(f), false) => f,
        (None, false) => Format::Text,
    };
    // Output file checked before anything is measured.
    let out = args.output.check(&Format::EXTENSIONS)?;
    let rules = match &args.rules {
        Some(p) => RuleSet::load(p)?,
        None => RuleSet::default(),
    };
    let (current, cur_name) = match (&args.current, args.command.is_empty()) {
        (Some(_), false) => return Err(Error::input("both --current and a command given", "give one of them").into()),
        (Some(p), true) => (read_report(p, "--current")?, p.display().to_string()),
        (None, false) => match measure_command(args.backend, &args.command)? {
            Ok(r) => (r, args.command.join(" ")),
            Err(status) => return Ok(status),
        },
        (None, true) => {
            return Err(Error::input("nothing to compare", "give --current FILE or a command after `--`").into());
        }
    };
    let base_name = args.baseline.display().to_string();
    if args.update_baseline && !args.baseline.exists() {
        crate::util::write_atomic(&args.baseline, current.to_json().as_bytes())?;
        eprintln!("roofline gate: no baseline yet; wrote {base_name} from {cur_name}");
        return Ok(0);
    }
    let baseline = read_report(&args.baseline, "--baseline")?;
    let outcome = gate::compare(&baseline, &base_name, &current, &cur_name, &rules)?;
    print!("{}", gate::render(&outcome, format));
    if let Some((file, ext)) = out {
        let f = Format::from_extension(&ext).unwrap_or(Format::Text);
        file.write(gate::render(&outcome, f).as_bytes())?;
    }
    if args.update_baseline {
        crate::util::write_atomic(&args.baseline, current.to_json().as_bytes())?;
        eprintln!(
            "roofline gate: baseline {base_name} updated from {cur_name} ({} failing checks accepted)",
            outcome.summary.failed
        );
        return Ok(0);
    }
    Ok(if outcome.passed { 0 } else { 1 })
}
