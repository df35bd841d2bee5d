//! `roofline report show REPORT [--json] [-o FILE]`,
//! `roofline report merge A.json B.json … [-o all.json]` and `roofline report merge JOB/ [-o job.json]`.

use clap::{Args as ClapArgs, Subcommand};
use std::path::{Path, PathBuf};

use super::common::OutputArgs;
use crate::report::{self, Environment, PlotKind, Report, View, merge};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// The terminal summary of a report (or export it: -o x.csv|x.html|x.json|x.svg|x.png|x.txt).
    Show(ShowArgs),
    /// Combine reports (runs, nodes, ranks) into one; every point names its source. A job
    /// directory (`measure -o JOB/` under a launcher) gives per-rank, per-node and job points
    /// with the imbalance of every region.
    Merge(MergeArgs),
}

#[derive(Debug, ClapArgs)]
pub struct ShowArgs {
    #[arg(value_name = "REPORT")]
    pub report: PathBuf,
    /// Roofs from a `roofline ceilings` file instead of the report's own.
    #[arg(long, value_name = "FILE")]
    pub ceilings: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, ClapArgs)]
pub struct MergeArgs {
    /// Two or more reports, or one job directory of rank files.
    #[arg(required = true, num_args = 1.., value_name = "REPORT|JOB_DIR")]
    pub reports: Vec<PathBuf>,
    /// Write the merged report here (JSON, or its page: HTML); without it, print it.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub const SHOW_EXTENSIONS: &[&str] = &["csv", "html", "json", "svg", "png", "txt"];

/// Read every report, failing on the first bad one (file + problem).
pub fn load_reports(paths: &[PathBuf]) -> crate::error::Result<Vec<(String, Report)>> {
    paths
        .iter()
        .map(|p| Ok((display_name(p, paths), report::read_report(p)?)))
        .collect()
}

/// A report's name in legends and headings: its file name (`before.json`), or the path as
/// given where two of the reports share a file name (`run1/report.json`, `run2/report.json`).
fn display_name(p: &Path, all: &[PathBuf]) -> String {
    let name = |q: &Path| q.file_name().map(|n| n.to_string_lossy().into_owned());
    match name(p) {
        Some(n) if all.iter().filter(|q| name(q).as_deref() == Some(n.as_str())).count() == 1 => n,
        _ => p.display().to_string(),
    }
}

/// Skipped points, on stderr.
pub fn print_skipped(view: &View) {
    for (r, p, why) in view.skipped() {
        eprintln!("roofline: skipped point '{p}' of {r}: {why}");
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.command {
        ReportCommand::Show(a) => show(a),
        ReportCommand::Merge(a) => merge_cmd(a),
    }
}

fn show(args: ShowArgs) -> anyhow::Result<i32> {
    let out = args.output.check(SHOW_EXTENSIONS)?;
    let reports = load_reports(std::slice::from_ref(&args.report))?;
    let ceilings = args.ceilings.as_deref().map(|p| report::read_ceilings(p, None)).transpose()?;
    let view = View::new(reports, ceilings.as_ref(), PlotKind::All);
    if let Some((file, _)) = out {
        report::write_view(&view, &file.path)?;
        eprintln!("roofline: wrote {}", file.path.display());
    }
    // A merged job's nodes and ranks each against their own roofs (the page has its own
    // charts for them).
    if args.output.json {
        let view = report::job_page::by_own_roofs(&view).unwrap_or(view);
        println!("{}", report::json::document(&view).to_json());
        print_skipped(&view);
    } else if let Some(text) = report::job_page::table_by_own_roofs(&view) {
        print!("{text}");
    } else {
        print!("{}", report::table::render(&view));
        // Energy beside time, where the reports carry it (`--energy`).
        for r in &view.reports {
            print!("{}", report::tables::energy::energy_table(&r.report.points));
            print!("{}", report::tables::energy::energy_roofline_table(&r.report));
            print!("{}", report::tables::energy::command_energy_lines(&r.report));
        }
    }
    Ok(0)
}

fn merge_cmd(args: MergeArgs) -> anyhow::Result<i32> {
    let out = args
        .output
        .as_deref()
        .map(|p| crate::util::OutputFile::check(p, &["json", "html"]))
        .transpose()?;
    let job_dir = match args.reports.as_slice() {
        [one] if one.is_dir() => Some(job_files(one)?),
        [one] if one.exists() => {
            return Err(crate::error::Error::input(
                format!("{}: one report is nothing to merge", one.display()),
                "give two or more reports, or a job directory (`roofline measure -o JOB/` under a launcher)",
            )
            .into());
        }
        _ => None,
    };
    let inputs = load_reports(job_dir.as_deref().unwrap_or(&args.reports))?;
    let env = Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: std::env::args().collect(),
        ..Default::default()
    };
    let (merged, warnings) = if job_dir.is_some() || crate::jobs::merge::all_ranks(&inputs) {
        crate::jobs::merge::merge_job(inputs, env)?
    } else {
        merge::merge(inputs, env)
    };
    for w in warnings {
        eprintln!("roofline: warning: {w}");
    }
    let text = merged.to_json() + "\n";
    match out {
        // The page of the merged report (a job's: nodes, ranks, the job and its balance).
        Some((file, ext)) if ext == "html" => {
            let points = merged.points.len();
            let sources = merged.sources.len();
            let name = file
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "job".into());
            let view = View::new(vec![(name, merged)], None, PlotKind::All);
            report::write_view(&view, &file.path)?;
            eprintln!(
                "roofline: merged {points} points from {sources} sources into {}",
                file.path.display()
            );
        }
        Some((file, _)) => {
            file.write(text.as_bytes())?;
            eprintln!(
                "roofline: merged {} points from {} sources into {}",
                merged.points.len(),
                merged.sources.len(),
                file.path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(0)
}

/// The rank files of a job directory: its `*.json` files (temporary and lock files, which
/// start with a dot, left out), by name.
fn job_files(dir: &Path) -> crate::error::Result<Vec<PathBuf>> {
    let io = |e| crate::error::Error::Io {
        context: format!("reading the job directory {}", dir.display()),
        source: e,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.starts_with('.') && name.ends_with(".json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(crate::error::Error::input(
            format!("{}: no rank files (*.json) in the job directory", dir.display()),
            "run the job as `mpirun … roofline measure -o JOB/ -- ./app` (or srun, mpiexec) first",
        ));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    #[test]
    fn report_names_are_file_names_unless_two_share_one() {
        use std::path::PathBuf;
        let all: Vec<PathBuf> = ["/a/b/before.json", "x/after.json", "r1/report.json", "r2/report.json"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let names: Vec<String> = all.iter().map(|p| super::display_name(p, &all)).collect();
        assert_eq!(names, ["before.json", "after.json", "r1/report.json", "r2/report.json"]);
    }
}
