//! `roofline events`: the `perf stat -x, …` line that collects the counters the perf backend
//! uses, for a target machine where perf runs but this tool does not. Its output file is read
//! back by `roofline import perf-stat`.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg};
use crate::counters::events as ev;
use crate::counters::perf::PerfStatPlan;
use crate::error::Error;
use crate::machine::Platform;
use crate::report::tables::events::events_table;
use crate::schema::documents::{Document, EVENTS_SCHEMA, EventEntry, EventsDocument};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub platform: PlatformArg,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The target runs with SMT off (more counters per thread on Intel before Ice Lake).
    #[arg(long)]
    pub no_smt: bool,
    /// Also collect opt-in events: single precision, FP16, AMD Zen 1–4's FMA (MAC) flops.
    #[arg(long)]
    pub optional: bool,
    /// Leave out uncore (memory-controller) events: no `-a`, counts follow the command only.
    #[arg(long)]
    pub no_uncore: bool,
    /// The command to measure, after `--` (a placeholder otherwise).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The platform of this CPU, identified as `roofline machine` does (flags checked).
pub fn platform_of_this_cpu() -> Option<Platform> {
    crate::machine::this_platform()
}

/// `--platform`, else this CPU's platform; the second value says which.
pub fn choose_platform(arg: &PlatformArg) -> Result<(Platform, String), Error> {
    if let Some(spec) = &arg.platform {
        return Ok((Platform::load(spec)?, "platform option".into()));
    }
    platform_of_this_cpu()
        .map(|p| (p, "this machine (cpuid model)".into()))
        .ok_or_else(|| {
            Error::input(
                "this CPU matches no platform in platforms/",
                "name the target with --platform (e.g. skx, icx, spr, gnr, zen3, zen4)",
            )
        })
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let out = args.output.check(&["json", "txt", "sh"])?;
    let (platform, how) = choose_platform(&args.platform)?;
    let plan = PerfStatPlan::new(&platform, !args.no_smt, args.optional, !args.no_uncore);
    let line = plan.command_line(&args.command);
    let selected = ev::selected(&platform, args.optional, !args.no_uncore);
    let doc = EventsDocument {
        schema: EVENTS_SCHEMA.into(),
        platform: platform.key.clone(),
        platform_name: platform.name.clone(),
        platform_from: how.clone(),
        smt: !args.no_smt,
        gp_counters: plan.gp_counters,
        perf_command: line.clone(),
        event_args: plan.event_args.clone(),
        system_wide: plan.system_wide,
        events: selected
            .iter()
            .map(|e| EventEntry {
                name: e.name.clone(),
                perf: ev::perf_event_syntax(e),
                pmu: e.pmu.clone(),
                quantity: e.quantity.clone(),
                class: e.class.clone(),
                weight: e.weight,
                counters: e.counters.clone(),
                paired: e.paired,
                unreliable: e.unreliable,
                optional: e.optional,
                caveat: e.caveat.clone(),
            })
            .collect(),
        notes: plan.notes.clone(),
    };
    if let Some((file, ext)) = out {
        let data = match ext.as_str() {
            "json" => doc.to_json() + "\n",
            _ => format!(
                "#!/bin/sh\n# {} ({}): counters for `roofline import perf-stat perf-stat.csv`\n{line}\n",
                platform.name, platform.key
            ),
        };
        file.write(data.as_bytes())?;
    }
    if args.output.json {
        println!("{}", doc.to_json());
        return Ok(0);
    }
    print!("{}", events_table(&doc));
    for n in &plan.notes {
        eprintln!("note: {n}");
    }
    Ok(0)
}
