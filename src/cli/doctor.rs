//! `roofline doctor`: what this machine can measure, and how to get more.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg};
use crate::counters::simulated::SimulatedPmu;
use crate::doctor::{self, Inputs, LiveProbe, SimulatedProbe};
use crate::machine::Platform;

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub out: OutputArgs,
    /// Diagnose against this platform table instead of the one CPUID identifies.
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Diagnose the simulated PMU instead of the hardware one (a test instrument, as
    /// `--backend simulated` of measure and validate): its core and uncore PMUs, the faults of
    /// ROOFLINE_SIMULATED_PMU as the kernel's answers; software events and ptrace stay this
    /// machine's. Every verdict it answers says "simulated PMU".
    #[arg(long)]
    pub simulated_pmu: bool,
}

/// Exit 0 whenever the machine could be inspected: what is missing is the report, not an error.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let output = args.out.check(&["json"])?;
    let diagnosis = if args.simulated_pmu {
        let pmu = SimulatedPmu::from_env(args.platform.platform.as_deref())?;
        let probe = SimulatedProbe { pmu: pmu.clone() };
        // The simulated machine's sysfs and settings, in a folder of its own for the run.
        let root = std::env::temp_dir().join(format!("roofline-simulated-machine-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let diagnosis = Inputs::simulated(&pmu, args.platform.platform.is_some(), &root, &probe)
            .map(|inputs| doctor::diagnose(&inputs))
            .map_err(|e| anyhow::anyhow!("writing the simulated machine under {}: {e}", root.display()));
        let _ = std::fs::remove_dir_all(&root);
        diagnosis?
    } else {
        let platform = args.platform.platform.as_deref().map(Platform::load).transpose()?;
        let probe = LiveProbe;
        doctor::diagnose(&Inputs::live(platform, &probe))
    };
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
