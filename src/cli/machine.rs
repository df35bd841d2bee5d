//! `roofline machine`: the machine model (CPU, topology, caches, measured clocks, peaks).

use clap::Args as ClapArgs;
use std::path::PathBuf;

use super::common::{OutputArgs, PlatformArg};
use crate::machine::{self, DetectOptions, dump::CpuidDump};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Use this clock (GHz) for the theoretical peaks instead of the measured one.
    #[arg(long, value_name = "GHZ", allow_negative_numbers = true)]
    pub frequency: Option<f64>,
    /// Do not measure clocks (CPUID, topology and caches only; peaks at the nominal clock).
    #[arg(long)]
    pub no_measure: bool,
    /// Model a recorded CPU from an AIDA64 CPUID dump instead of this one (implies --no-measure).
    #[arg(long, value_name = "FILE")]
    pub cpuid_dump: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    machine::detect::check_frequency(args.frequency)?;
    let output = args.out.check(&["json"])?;
    let opts = DetectOptions {
        platform: args.platform.platform.clone(),
        frequency_ghz: args.frequency,
        run_secs: None,
        progress: true,
    };
    if let Some(spec) = &opts.platform {
        // A bad platform file fails before anything is measured.
        machine::Platform::load(spec)?;
    }
    let model = match &args.cpuid_dump {
        Some(path) => machine::from_dump(&CpuidDump::load(path)?, &opts)?,
        None if args.no_measure => machine::detect_static(&opts)?,
        None => machine::detect(&opts)?,
    };
    for w in &model.warnings {
        eprintln!("warning: {w}");
    }
    let json = serde_json::to_string_pretty(&model)?;
    if let Some((file, _)) = output {
        file.write(format!("{json}\n").as_bytes())?;
    }
    if args.out.json {
        println!("{json}");
    } else {
        print!("{}", crate::report::tables::machine::render(&model));
    }
    Ok(0)
}
