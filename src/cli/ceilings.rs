//! `roofline ceilings`: empirical roofs, cached per machine.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg, ThreadsArg};
use crate::ceilings::{self, Options};
use crate::report::tables::ceilings::table;
use crate::report::tables::or_dash;
use crate::schema::ceilings::Host;

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub threads: ThreadsArg,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// A short run (≈10 s on 2 CPUs): FMA peaks per ISA, bandwidth per level, short samples.
    #[arg(long)]
    pub quick: bool,
    /// Also sweep bandwidth against working-set size (×1.25) and detect the cache levels.
    #[arg(long)]
    pub sweep: bool,
    /// Re-measure even when a cache for this machine exists.
    #[arg(long)]
    pub refresh: bool,
    /// Also the energy roofs: pJ per flop (peak loops), pJ per byte (a streaming load per
    /// level), the constant power (idle), each over three repetitions; cached beside the time
    /// roofs.
    #[command(flatten)]
    pub energy: super::common::EnergyArg,
    #[command(flatten)]
    pub output: OutputArgs,
    /// One figure only, printed as a number (for scripts/compare-peers.sh):
    /// `peak` (double AVX-512 FMA, else the widest FMA; prints GFLOP/s, GHz, theoretical
    /// GFLOP/s), a low-precision unit's key such as `bf16.amx` (its quick ceiling: GFLOP/s,
    /// best sample, spread, GHz, % of the platform's rate, measurements made, the kept one's
    /// CPU where it hopped) or `KERNEL:BYTES` (a streaming
    /// kernel at that working set; prints core GB/s).
    #[arg(long, hide = true, value_name = "FIGURE")]
    pub figure: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(spec) = &args.platform.platform {
        crate::machine::set_platform(spec)?;
    }
    let threads = args.threads.parse()?;
    let out = args.output.check(&["json"])?;
    if let Some(f) = &args.figure {
        return figure(f, threads.first().copied().unwrap_or(1));
    }
    let opts = Options {
        quick: args.quick,
        threads,
        sweep: args.sweep,
        progress: true,
    };
    // The idle power first, with nothing of ours running.
    let energy = args.energy.start()?;
    let mut c = ceilings::load_or_measure_with(&opts, args.refresh)?;
    if let Some(e) = &energy {
        ceilings::energy_roofs(&mut c, e, &opts, args.refresh)?;
    }
    if let Some((file, _)) = out {
        file.write(c.to_json().as_bytes())?;
    }
    if args.output.json {
        println!("{}", c.to_json());
    } else {
        print!("{}", table(&c, &opts));
        if energy.is_some() {
            print!("{}", crate::report::tables::energy::energy_roofs_table(&c.energy));
        }
    }
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    Ok(0)
}

/// `--figure`: one measurement with the full budget, for side-by-side comparisons.
fn figure(spec: &str, threads: usize) -> anyhow::Result<i32> {
    use crate::ceilings::{bandwidth, compute, measure::Budget};
    use crate::kernels::peak::{PeakMode, PeakSpec};
    use crate::kernels::stream::Op;
    let budget = Budget::full();
    if spec == "peak" {
        let Some(s) = PeakSpec::all()
            .into_iter()
            .filter(|s| s.supported() && s.mode == PeakMode::Fma && s.precision == crate::kernels::Precision::F64)
            .max_by_key(|s| s.isa)
        else {
            anyhow::bail!(crate::Error::unavailable("no FMA on this CPU", "compare mul+add instead"));
        };
        let platform = Host::detect().platform();
        let c = compute::measure_peak(s, threads, budget, platform.as_ref());
        println!(
            "{:.3} {} {} {}",
            c.gflops,
            or_dash(c.ghz, 3),
            or_dash(c.theoretical_gflops, 3),
            or_dash(c.percent_of_theoretical, 2)
        );
        return Ok(0);
    }
    if let Some(u) = crate::kernels::lowp::Unit::ALL.into_iter().find(|u| u.key() == spec) {
        // The main job's figure: the quick budget, as `roofline` measures it.
        let platform = Host::detect().platform();
        let Some(c) = compute::measure_mixed(u, threads, Budget::quick(), platform.as_ref()) else {
            anyhow::bail!(crate::Error::unavailable(
                format!("{spec}: {}", u.why_unavailable()),
                "choose another unit"
            ));
        };
        println!(
            "{:.3} {:.3} {:.4} {} {} {} {} {}",
            c.gflops,
            c.gflops_best,
            c.spread,
            or_dash(c.ghz, 3),
            or_dash(c.percent_of_theoretical, 2),
            1 + c.set_aside.len(),
            c.cpu.map_or("-".to_string(), |cpu| cpu.to_string()),
            c.unequal_threads.as_ref().map_or("-".to_string(), |u| format!(
                "{}@{:.2}/worth{:.1}",
                u.slow, u.slow_share, u.fastest_threads_worth
            ))
        );
        return Ok(0);
    }
    let bad = || {
        crate::Error::input(
            format!("--figure {spec}: not peak, a unit (bf16.amx) or KERNEL:BYTES"),
            "e.g. --figure load:16KiB",
        )
    };
    let (k, b) = spec.split_once(':').ok_or_else(bad)?;
    let op = Op::ALL.into_iter().find(|o| o.name() == k).ok_or_else(bad)?;
    let bytes = crate::util::parse_bytes(b)?;
    let r = bandwidth::measure(op, bandwidth::widest_variant(), "-", bytes / threads as u64, threads, budget, 1)
        .map_err(|e| crate::Error::input(e, "choose a smaller size"))?;
    println!("{:.3}", r.gbs);
    Ok(0)
}
