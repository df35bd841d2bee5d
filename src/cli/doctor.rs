//! `roofline doctor`: what this machine can measure, and how to get more.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg};
use crate::machine::Platform;
use crate::machine::doctor::{self, Inputs, LiveProbe};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub out: OutputArgs,
    /// Diagnose against this platform table instead of the one CPUID identifies.
    #[command(flatten)]
    pub platform: PlatformArg,
}

/// Exit 0 whenever the machine could be inspected: what is missing is the report, not an error.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let output = args.out.check(&["json"])?;
    let platform = args.platform.platform.as_deref().map(Platform::load).transpose()?;
    let probe = LiveProbe;
    let diagnosis = doctor::diagnose(&Inputs::live(platform, &probe));
    let json = serde_json::to_string_pretty(&diagnosis)?;
    if let Some((file, _)) = output {
        file.write(format!("{json}\n").as_bytes())?;
    }
    if args.out.json {
        println!("{json}");
    } else {
        print!("{}", doctor::render(&diagnosis));
    }
    Ok(0)
}
