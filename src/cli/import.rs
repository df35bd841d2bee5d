//! `roofline import perf-stat FILE`: counts measured elsewhere with `perf stat -x,` (see
//! `roofline events`) become a `roofline.report/1` point with provenance `perf-stat`.

use clap::{Args as ClapArgs, Subcommand};
use std::path::PathBuf;

use super::common::{OutputArgs, PlatformArg};
use crate::counters::perf_stat::{self, ImportOptions};
use crate::error::Error;
use crate::report::tables::perf_stat::perf_stat_table;

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, Subcommand)]
pub enum What {
    /// `perf stat -x,` output (a file written with `-o`, or its captured stderr).
    #[command(name = "perf-stat")]
    PerfStat(PerfStatArgs),
}

#[derive(Debug, ClapArgs)]
pub struct PerfStatArgs {
    /// The perf stat output file.
    pub file: PathBuf,
    /// Wall time of the measured run in seconds (default: the file's duration_time).
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Point name (default: the file name).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub platform: PlatformArg,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.what {
        What::PerfStat(a) => run_perf_stat(a),
    }
}

fn run_perf_stat(a: PerfStatArgs) -> anyhow::Result<i32> {
    let out = a.output.check(&["json"])?;
    if let Some(s) = a.seconds
        && !(s > 0.0 && s.is_finite())
    {
        anyhow::bail!(Error::input(
            format!("--seconds {s}: must be a positive time"),
            "e.g. --seconds 1.5"
        ));
    }
    let origin = a.file.display().to_string();
    let bytes =
        std::fs::read(&a.file).map_err(|e| Error::input(format!("{origin}: cannot read ({e})"), "pass a perf stat -x, output file"))?;
    let text = String::from_utf8_lossy(&bytes);
    let (platform, how) = if a.platform.platform.is_some() {
        super::events::choose_platform(&a.platform)?
    } else {
        // Event names of one family (symbolic names, PMU names) say where the file was measured;
        // a CPU that no platform describes reads only such a file.
        let here = super::events::platform_of_this_cpu();
        match (perf_stat::infer_platform(&text, &origin, here.as_ref()), here) {
            (Some((p, known, of)), here) => {
                let this = here.map_or_else(|| "no platform".to_string(), |h| h.key);
                eprintln!(
                    "note: no --platform: {origin} names {known} of its {of} events as {} ({}) does, not as this machine ({this}) does: \
                     read as {}; pass --platform to choose another generation",
                    p.name, p.key, p.key
                );
                let how = format!("inferred from the event names ({known} of {of} known to {})", p.key);
                (p, how)
            }
            (None, Some(here)) => {
                eprintln!(
                    "warning: no --platform: assuming {origin} was measured on a machine like this one ({}); pass --platform otherwise",
                    here.key
                );
                (here, "this machine (cpuid model)".to_string())
            }
            (None, None) => super::events::choose_platform(&a.platform)?,
        }
    };
    let name = a.name.clone().unwrap_or_else(|| {
        a.file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| origin.clone())
    });
    let opts = ImportOptions {
        seconds: a.seconds,
        name,
        platform_source: how,
    };
    let (report, warnings) = perf_stat::import(&text, &origin, &platform, &opts)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let json = report.to_json();
    if let Some((file, _)) = out {
        file.write(format!("{json}\n").as_bytes())?;
    }
    if a.output.json {
        println!("{json}");
        return Ok(0);
    }
    print!("{}", perf_stat_table(&report.points[0], &platform.name, &platform.key));
    Ok(0)
}
