//! `roofline sweep`: a suite kernel against working-set size, cache levels marked
//! by the ceilings' plateau detector, each size classified, and T(n) = a + b·n fitted.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg, ThreadsArg};
use crate::ceilings::{self, measure::Budget, sweep};
use crate::error::Error;
use crate::kernels::Variant;
use crate::report::tables::sweep::sweep_table;
use crate::schema::ceilings::Host;
use crate::schema::documents::{Document, SweepDocument};

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Kernel name (see `roofline kernels`).
    pub kernel: String,
    /// Smallest working set (all arrays, all threads).
    #[arg(long, default_value = "4KiB")]
    pub from: String,
    /// Largest working set.
    #[arg(long, default_value = "1GiB")]
    pub to: String,
    /// Growth factor between sizes.
    #[arg(long, default_value_t = 1.25)]
    pub factor: f64,
    /// scalar, sse, avx2, avx512 (default: the widest this CPU runs).
    #[arg(long)]
    pub variant: Option<String>,
    /// Classify against cached (or quickly measured) ceilings; off: no `bound` column.
    #[arg(long)]
    pub no_ceilings: bool,
    #[command(flatten)]
    pub threads: ThreadsArg,
    #[command(flatten)]
    pub platform: PlatformArg,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Everything checked before measuring.
struct Plan {
    kernel: Box<dyn crate::kernels::Kernel>,
    variant: Variant,
    sizes: Vec<u64>,
    threads: usize,
}

fn plan(args: &Args) -> crate::Result<Plan> {
    let kernel = crate::kernels::api::find(&args.kernel).ok_or_else(|| {
        let names: Vec<&str> = crate::kernels::api::all().iter().map(|k| k.name()).collect::<Vec<_>>();
        Error::input(
            format!("unknown kernel '{}'", args.kernel),
            format!("kernels: {}", names.join(", ")),
        )
    })?;
    let variant = match &args.variant {
        Some(v) => {
            let v =
                Variant::from_name(v).ok_or_else(|| Error::input(format!("unknown variant '{v}'"), "use scalar, sse, avx2 or avx512"))?;
            if !kernel.variants().contains(&v) {
                return Err(Error::input(
                    format!("{} has no {v} variant", kernel.name()),
                    "see `roofline kernels`",
                ));
            }
            if !v.supported() {
                return Err(Error::input(
                    format!("this CPU cannot run the {v} variant"),
                    "choose a narrower --variant",
                ));
            }
            v
        }
        None => kernel
            .variants()
            .iter()
            .rev()
            .copied()
            .find(|v| v.supported())
            .unwrap_or(Variant::Scalar),
    };
    let from = crate::util::parse_bytes(&args.from)?;
    let to = crate::util::parse_bytes(&args.to)?;
    if from > to {
        return Err(Error::input(
            format!("--from {} is larger than --to {}", args.from, args.to),
            "swap them",
        ));
    }
    if !(args.factor.is_finite() && args.factor >= 1.01 && args.factor <= 16.0) {
        return Err(Error::input(
            format!("--factor {}: must be between 1.01 and 16", args.factor),
            "e.g. --factor 1.25",
        ));
    }
    if let Some(avail) = crate::kernels::stream::available_memory_bytes()
        && to > avail
    {
        return Err(Error::input(
            format!(
                "--to {}: more than the available memory ({})",
                args.to,
                crate::schema::units::fmt_bytes(avail as f64)
            ),
            "choose a smaller --to",
        ));
    }
    let threads = args.threads.parse()?;
    if threads.len() != 1 {
        return Err(Error::input("sweep runs at one thread count", "give --threads N"));
    }
    Ok(Plan {
        kernel,
        variant,
        sizes: sweep::sizes(from, to, args.factor),
        threads: threads[0],
    })
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(spec) = &args.platform.platform {
        crate::machine::set_platform(spec)?;
    }
    let plan = plan(&args)?;
    let out = args.output.check(&["json"])?;
    let host = Host::detect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    eprintln!("sweep seed {seed}");
    let bar = indicatif::ProgressBar::new(plan.sizes.len() as u64);
    let mut s = sweep::run(
        &host,
        plan.kernel.as_ref(),
        plan.variant,
        &plan.sizes,
        plan.threads,
        Budget::quick(),
        seed,
        || bar.inc(1),
    )
    .map_err(|e| Error::input(e, "choose a smaller --to or fewer threads"))?;
    bar.finish_and_clear();
    s.factor = args.factor;
    if !args.no_ceilings {
        let c = ceilings::load_or_measure(true, &[plan.threads], false)?;
        let roofs = c.roofs(plan.threads as u32);
        let prec = crate::ceilings::compute::precision_name(plan.kernel.precision());
        let isa = match plan.variant {
            Variant::Scalar => "scalar",
            Variant::Sse => "sse",
            Variant::Avx2 => "avx2",
            Variant::Avx512 => "avx512",
            Variant::Amx => "amx",
        };
        let peak = roofs
            .compute_gflops
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{prec}.{isa}.")))
            .map(|(_, v)| *v)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        sweep::classify(&mut s, peak, &|level| roofs.bandwidth_gbs.get(&level.to_ascii_lowercase()).copied());
    }
    let json = SweepDocument::new(&s).to_json();
    if let Some((f, _)) = out {
        f.write(json.as_bytes())?;
    }
    if args.output.json {
        println!("{json}");
        return Ok(0);
    }
    print!("{}", sweep_table(&s));
    Ok(0)
}
