//! `roofline plot REPORT… [--ceilings FILE] [--kind carm|dram|hierarchical|all] [-o FILE]`:
//! roofline plots of one or more reports (overlaid, before → after arrows between reports).

use clap::Args as ClapArgs;
use std::path::PathBuf;

use super::common::OutputArgs;
use super::report_cmd::{load_reports, print_skipped};
use crate::report::{self, PlotKind, View};
use crate::util::OutputFile;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Reports to draw (roofline.report/1); several are overlaid in distinct colours, with
    /// arrows from each report's points to the next report's points of the same name.
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Roofs from a `roofline ceilings` file instead of the reports' own.
    #[arg(long, value_name = "FILE")]
    pub ceilings: Option<PathBuf>,
    /// Which view: carm (core-side AI), dram (classic), hierarchical (per level), all (side by side).
    #[arg(long, value_enum, default_value = "all")]
    pub kind: PlotKind,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub const PLOT_EXTENSIONS: &[&str] = &["svg", "png", "html"];

pub fn run(args: Args) -> anyhow::Result<i32> {
    // Check the output before reading anything; default roofline.svg here.
    let (out, ext) = match args.output.check(PLOT_EXTENSIONS)? {
        Some(o) => o,
        None => OutputFile::check(std::path::Path::new("roofline.svg"), PLOT_EXTENSIONS)?,
    };
    let reports = load_reports(&args.reports)?;
    let ceilings = args.ceilings.as_deref().map(|p| report::read_ceilings(p, None)).transpose()?;
    let view = View::new(reports, ceilings.as_ref(), args.kind);
    if ext != "html" {
        // Points a view cannot place and labels that found no free spot, on stderr.
        for line in report::plot::drawn_panels(&view).1 {
            eprintln!("roofline: {line}");
        }
        let (_, panels) = report::plot::svg_with_layout(&view)?;
        for p in &panels {
            for n in &p.not_shown {
                eprintln!("roofline: {:?} view: not shown: {n}", p.kind);
            }
            for h in &p.hidden {
                eprintln!("roofline: {:?} view: label '{h}' hidden (no free spot)", p.kind);
            }
        }
    }
    report::write_view(&view, &out.path)?;
    if args.output.json {
        println!("{}", report::json::document(&view).to_json());
        print_skipped(&view);
    } else {
        print!("{}", report::table::render(&view));
    }
    eprintln!("roofline: wrote {}", out.path.display());
    Ok(0)
}
