//! `roofline ceilings`: empirical roofs, cached per machine.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg, ThreadsArg};
use crate::ceilings::{self, Options};
use crate::schema::ceilings::{Ceilings, Host};

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
    #[command(flatten)]
    pub output: OutputArgs,
    /// One figure only, printed as a number (for scripts/compare-peers.sh):
    /// `peak` (double AVX-512 FMA, else the widest FMA; prints GFLOP/s, GHz, theoretical
    /// GFLOP/s) or `KERNEL:BYTES` (a streaming kernel at that working set; prints core GB/s).
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
    let c = ceilings::load_or_measure_with(&opts, args.refresh)?;
    if let Some((file, _)) = out {
        file.write(c.to_json().as_bytes())?;
    }
    if args.output.json {
        println!("{}", c.to_json());
    } else {
        print!("{}", table(&c, &opts));
    }
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    Ok(0)
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "-".to_string())
}

/// The human-readable table (only the thread counts asked for).
pub fn table(c: &Ceilings, opts: &Options) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &c.machine;
    let _ = writeln!(
        s,
        "{} ({}), {} CPUs{}{}",
        m.brand,
        m.microarchitecture.as_deref().unwrap_or("unknown microarchitecture"),
        m.logical_cpus,
        m.hypervisor.as_ref().map(|h| format!(", hypervisor {h}")).unwrap_or_default(),
        if c.quick { ", quick" } else { "" }
    );
    let caches: Vec<String> = m
        .caches
        .iter()
        .map(|x| {
            format!(
                "L{} {} /{}",
                x.level,
                crate::schema::units::fmt_bytes(x.size_bytes as f64),
                x.shared_by_threads
            )
        })
        .collect();
    let _ = writeln!(s, "caches: {}", caches.join(", "));
    let want = |t: u32| opts.threads.iter().any(|x| *x as u32 == t);
    let _ = writeln!(
        s,
        "\ncompute (GFLOP/s median, GOP/s for int8/int16; flop/cycle per thread at the clock measured at that ISA; isa amx = tiles)"
    );
    let _ = writeln!(
        s,
        "{:<7} {:<7} {:<8} {:>3} {:>10} {:>6} {:>10} {:>8} {:>7}",
        "prec", "isa", "mode", "thr", "GFLOP/s", "GHz", "flop/cyc", "% peak", "spread"
    );
    for x in c.compute.iter().filter(|x| want(x.threads)) {
        let _ = writeln!(
            s,
            "{:<7} {:<7} {:<8} {:>3} {:>10.1} {:>6} {:>10} {:>8} {:>6.1}%",
            x.precision,
            x.isa,
            x.mode,
            x.threads,
            x.gflops,
            opt(x.ghz, 2),
            opt(x.flop_per_cycle, 2),
            opt(x.percent_of_theoretical, 1),
            100.0 * x.spread
        );
    }
    let _ = writeln!(
        s,
        "\nbandwidth (GB/s = 1e9 B/s; `core` = load+store instructions, `+WA` adds write-allocate reads)"
    );
    let _ = writeln!(
        s,
        "{:<5} {:<9} {:<7} {:>3} {:>11} {:>10} {:>10} {:>7}",
        "level", "kernel", "isa", "thr", "working set", "core", "+WA", "spread"
    );
    for x in c.bandwidth.iter().filter(|x| want(x.threads)) {
        let _ = writeln!(
            s,
            "{:<5} {:<9} {:<7} {:>3} {:>11} {:>10.1} {:>10.1} {:>6.1}%",
            x.level,
            x.kernel,
            x.isa,
            x.threads,
            crate::schema::units::fmt_bytes(x.working_set_bytes as f64),
            x.gbs,
            x.gbs_write_allocate,
            100.0 * x.spread
        );
    }
    if let Some(sw) = &c.sweep {
        let _ = writeln!(
            s,
            "\nsweep: {} ({}) ×{} threads, {} sizes",
            sw.kernel,
            sw.variant,
            sw.threads,
            sw.points.len()
        );
        for p in &sw.plateaus {
            let _ = writeln!(
                s,
                "  plateau {}: {} … {}: {:.1} GB/s ({} points)",
                p.index,
                crate::schema::units::fmt_bytes(p.from_bytes as f64),
                crate::schema::units::fmt_bytes(p.to_bytes as f64),
                p.value,
                p.points
            );
        }
        for b in &sw.boundaries {
            let _ = writeln!(
                s,
                "  {} ends near {} (between {} and {}); CPUID: {} (×{})",
                b.level,
                crate::schema::units::fmt_bytes(b.detected.estimate_bytes as f64),
                crate::schema::units::fmt_bytes(b.detected.last_inside_bytes as f64),
                crate::schema::units::fmt_bytes(b.detected.first_outside_bytes as f64),
                b.cpuid_bytes
                    .map(|x| crate::schema::units::fmt_bytes(x as f64))
                    .unwrap_or_else(|| "-".into()),
                opt(b.ratio, 2)
            );
        }
    }
    for n in &c.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
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
            opt(c.ghz, 3),
            opt(c.theoretical_gflops, 3),
            opt(c.percent_of_theoretical, 2)
        );
        return Ok(0);
    }
    let bad = || crate::Error::input(format!("--figure {spec}: not peak or KERNEL:BYTES"), "e.g. --figure load:16KiB");
    let (k, b) = spec.split_once(':').ok_or_else(bad)?;
    let op = Op::ALL.into_iter().find(|o| o.name() == k).ok_or_else(bad)?;
    let bytes = crate::util::parse_bytes(b)?;
    let r = bandwidth::measure(op, bandwidth::widest_variant(), "-", bytes / threads as u64, threads, budget, 1)
        .map_err(|e| crate::Error::input(e, "choose a smaller size"))?;
    println!("{:.3}", r.gbs);
    Ok(0)
}
