//! `roofline gate` (issue 8): compare a report against a baseline under rules; exit 0 pass,
//! 1 regression, 2 usage or input error.

use anyhow::Result;
use clap::Args as ClapArgs;
use std::path::{Path, PathBuf};

use crate::cli::common::OutputArgs;
use crate::counters::BackendKind;
use crate::error::Error;
use crate::gate::{self, Format, RuleSet};
use crate::report::Report;

#[derive(Debug, ClapArgs)]
#[command(after_help = "\
Metrics: flops.total, flops.effective, flops.by_class.<class>, bytes.<level>, ai.<level>, gbs.<level>, \
seconds, gflops, roof_fraction, threads.
Default rules: flops.* exact; bytes.core and bytes.stack may grow 1 %, bytes.l2/l3/dram 2 %; seconds may grow 5 % \
and gflops drop 5 %, judged by a one-sided Mann-Whitney U test (α = 0.05) over all repetitions when there are enough, \
else on the medians. Rules file format: see examples/ci-gate/rules.toml.
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

/// Measure `cmd` with a backend into a report.
///
/// The perf and trace backends (issues 5 and 6) expose no library entry point for measuring a
/// command yet; until they do, this mode reports that plainly (exit 2).
fn measure_command(backend: BackendKind, cmd: &[String]) -> Result<Report, Error> {
    let has_pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists()
        || std::path::Path::new("/sys/bus/event_source/devices/cpu_core").exists();
    let use_trace = match backend {
        BackendKind::Trace => true,
        BackendKind::Auto => !has_pmu,
        _ => false,
    };
    if !use_trace {
        return measure_with_perf(backend, cmd);
    }
    let opts = crate::counters::trace::TraceOptions::default();
    let m = crate::counters::trace::measure_command(cmd, &opts)?;
    let name = cmd
        .first()
        .map(|c| {
            std::path::Path::new(c)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| c.clone())
        })
        .unwrap_or_default();
    let machine = crate::machine::detect_static(&Default::default())
        .ok()
        .and_then(|m| serde_json::to_value(m).ok())
        .unwrap_or_default();
    let mut r = Report::new(machine, crate::report::environment::collect(cmd));
    r.points.push(m.into_point(name));
    Ok(r)
}

/// `roofline measure --backend perf|auto -- CMD` of this very binary, so a gate measures
/// exactly as `measure` does (events, groups, multiplexing, plausibility, exit codes); its
/// report is read back from a temporary file. Its progress and warnings pass through; a
/// failure comes back as its own one-line cause, hint and exit status.
fn measure_with_perf(backend: BackendKind, cmd: &[String]) -> Result<Report, Error> {
    let exe = std::env::current_exe().map_err(|e| Error::io("locating the roofline binary", e))?;
    let dir = tempfile_dir()?;
    let out = dir.join("current.json");
    let backend = if backend == BackendKind::Auto { "auto" } else { "perf" };
    let run = std::process::Command::new(exe)
        .args(["measure", "--backend", backend, "-o"])
        .arg(&out)
        .arg("--")
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::io("running roofline measure", e))?;
    let err = String::from_utf8_lossy(&run.stderr).to_string();
    let result = if run.status.success() {
        eprint!("{err}");
        crate::report::read_report(&out)
    } else {
        let cause = err
            .lines()
            .find_map(|l| l.strip_prefix("roofline: "))
            .unwrap_or("the measurement failed")
            .to_string();
        let hint = err.lines().find_map(|l| l.trim().strip_prefix("hint: ")).unwrap_or("").to_string();
        Err(match run.status.code() {
            Some(2) | None => Error::input(cause, hint),
            Some(status) => Error::Child { cause, status },
        })
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A fresh private directory under the system temp dir.
fn tempfile_dir() -> Result<std::path::PathBuf, Error> {
    let base = std::env::temp_dir();
    for i in 0..100u32 {
        let d = base.join(format!("roofline-gate-{}-{i}", std::process::id()));
        if std::fs::create_dir(&d).is_ok() {
            return Ok(d);
        }
    }
    Err(Error::io(
        "creating a temporary directory",
        std::io::Error::other(format!("{} is not writable", base.display())),
    ))
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
        (None, false) => (measure_command(args.backend, &args.command)?, args.command.join(" ")),
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
