//! `roofline compare CPU.json GPU.json [-o compare.svg|html]`: the same kernels on
//! two machines — time, GFLOP/s, the fraction of each machine's own roof, and the speedup —
//! and both reports' points on one chart, each machine's roofs drawn.
//!
//! Each report's points are read against their own machine's roofs: the CPU report's (its
//! ceilings or its `roofline.machine/1` model), and for the GPU report its ceilings or, where it
//! has none, the theoretical roofs of its `roofline.gpu-machine/1` block (FP64/FP32 peaks, HBM
//! bandwidth; L2/L1 where `gpu machine --ncu` measured them).
//!
//! Each pair is compared at its precision: each side's point is read against its own
//! machine's roofs of that precision (`model::point_precision`), and a row says which roofs
//! those were — for bf16 work the CPU's AMX bf16 (or AVX-512 BF16) roof against the GPU's bf16
//! tensor roof — and warns when the two sides ran different precisions.

use clap::Args as ClapArgs;
use std::path::PathBuf;

use super::common::OutputArgs;
use crate::model::{ComputeRoof, RoofSet};
use crate::report::tables::compare::compare_table;
use crate::report::{self, PlotKind, Point, View};
use crate::schema::documents::{COMPARE_SCHEMA, CompareDocument, CompareRoof, CompareRow, Document};

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The CPU report (e.g. from `roofline` or `roofline run`).
    pub cpu: PathBuf,
    /// The GPU report (from `roofline gpu run|measure|import`).
    pub gpu: PathBuf,
    /// Roofline view of the chart.
    #[arg(long, value_enum, default_value = "dram")]
    pub kind: PlotKind,
    /// Pair a CPU kernel with a GPU kernel of another name (`bf16_gemm=bf16_wmma_gemm`);
    /// repeatable. Kernels of the same name pair without it.
    #[arg(long = "pair", value_name = "CPU=GPU")]
    pub pair: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The kernel a point measures: `extra.kernel` when set, else its name up to `@`.
fn kernel_of(p: &Point) -> String {
    p.extra
        .kernel
        .as_deref()
        .map(report_kernel_name)
        .unwrap_or_else(|| p.name.split('@').next().unwrap_or(&p.name).to_string())
}

/// ncu kernel names carry parameters (or are mangled); CPU names carry the working set after `@`.
fn report_kernel_name(k: &str) -> String {
    crate::gpu::kernel_name::function_name(k)
}

/// Rows of (kernel, cpu point, gpu point) for kernels present in both reports; `aliases`
/// pairs (cpu kernel, gpu kernel) of different names.
pub fn pairs<'a>(cpu: &'a [Point], gpu: &'a [Point], aliases: &[(String, String)]) -> Vec<(String, &'a Point, &'a Point)> {
    let mut out = Vec::new();
    for g in gpu {
        let k = kernel_of(g);
        let cpu_name = aliases
            .iter()
            .find(|(_, gk)| *gk == k)
            .map(|(ck, _)| ck.clone())
            .unwrap_or_else(|| k.clone());
        // The CPU's DRAM-sized point when there are several sizes of the kernel.
        let mut c: Vec<&Point> = cpu.iter().filter(|c| kernel_of(c) == cpu_name).collect();
        c.sort_by_key(|c| !c.name.ends_with("@dram"));
        if let Some(c) = c.first() {
            let name = if cpu_name == k { k } else { format!("{cpu_name}={k}") };
            out.push((name, *c, g));
        }
    }
    out
}

/// A point is near its library's best at this fraction of the library's rate or more.
pub const NEAR_LIBRARY: f64 = 0.8;
/// Without a library figure, a compute-bound point below this fraction of its roof is said
/// not to be near what a tuned code reaches.
pub const NEAR_ROOF: f64 = 0.5;

/// Why one side of a speedup is not near its library's best, if it is not: against the
/// library's rate on the same problem where the point carries it (`extra.library_gflops`:
/// `gpu run dgemm_tiled`), else against its own compute roof when the point is
/// compute-bound. None when it is near, or when nothing tells.
pub fn not_near_best(side: &str, p: &Point) -> Option<String> {
    let g = p.gflops.filter(|g| g.is_finite() && *g > 0.0)?;
    if let Some(lib) = p.extra.library_gflops.filter(|l| *l > 0.0) {
        let what = p.extra.library.as_deref().unwrap_or("the library");
        return (g < NEAR_LIBRARY * lib).then(|| {
            format!(
                "{side} {}: {:.1} GFLOP/s is {:.2}x of {what} ({:.1} GFLOP/s) on the same problem: the speedup compares unequal efforts",
                p.name,
                g,
                g / lib,
                lib
            )
        });
    }
    let compute_bound = matches!(p.bound, Some(crate::schema::Bound::Compute { .. })) || p.extra.regime.as_deref() == Some("compute");
    let f = p.roof_fraction.filter(|f| f.is_finite())?;
    (compute_bound && f < NEAR_ROOF).then(|| {
        format!(
            "{side} {}: compute-bound at {:.0}% of its roof, with no library figure beside it: probably not near its library's best; the speedup may compare unequal efforts",
            p.name,
            f * 100.0
        )
    })
}

/// Energy per unit of work on both sides, where both points carry a GFLOP/J.
pub fn compare_energy(cpu: &Point, gpu: &Point) -> Option<crate::schema::documents::CompareEnergy> {
    let (c, g) = (cpu.extra.energy.as_ref()?, gpu.extra.energy.as_ref()?);
    let (cg, gg) = (c.gflop_per_joule?, g.gflop_per_joule?);
    (cg > 0.0 && gg > 0.0 && cg.is_finite() && gg.is_finite()).then(|| crate::schema::documents::CompareEnergy {
        cpu_gflop_per_joule: cg,
        gpu_gflop_per_joule: gg,
        cpu_domain: c.total_domain.clone(),
        gpu_domain: g.total_domain.clone(),
        ratio: gg / cg,
    })
}

/// The precision a point is compared at, and its machine's highest roof of that precision.
pub fn precision_roof<'a>(p: &Point, roofs: &'a RoofSet) -> (&'static str, Option<&'a ComputeRoof>) {
    let prec = crate::model::point_precision(p);
    (prec, roofs.peak(prec))
}

/// The roof a compared point was read against, as the document names it.
fn compare_roof(r: &ComputeRoof) -> CompareRoof {
    CompareRoof {
        key: r.key(),
        label: r.label(),
        gflops: r.gflops,
        empirical: r.empirical,
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let mut aliases = Vec::new();
    for p in &args.pair {
        let Some((c, g)) = p.split_once('=').filter(|(c, g)| !c.is_empty() && !g.is_empty()) else {
            anyhow::bail!(crate::Error::input(
                format!("--pair {p}: expected CPU_KERNEL=GPU_KERNEL"),
                "e.g. --pair bf16_gemm=bf16_wmma_gemm"
            ));
        };
        aliases.push((c.to_string(), g.to_string()));
    }
    let out = args.output.check(&["svg", "png", "html", "json"])?;
    let cpu = report::read_report(&args.cpu)?;
    let mut gpu = report::read_report(&args.gpu)?;
    if gpu.ceilings.is_none() {
        gpu.ceilings = crate::model::gpu::roofs_from_machine(&gpu.machine);
    }
    // Every point analysed against its own machine's roofs (GFLOP/s and roof fraction derived).
    let view = View::new(vec![("cpu".into(), cpu), ("gpu".into(), gpu)], None, args.kind);
    let rows = pairs(&view.reports[0].report.points, &view.reports[1].report.points, &aliases);
    if rows.is_empty() {
        anyhow::bail!(crate::Error::input(
            "no kernel appears in both reports",
            "compare reports of the same kernels (e.g. `roofline run triad` and `roofline gpu run triad`)"
        ));
    }
    let frac = |p: &Point| p.roof_fraction.filter(|f| f.is_finite());
    let mut doc = Vec::new();
    let mut roofs = Vec::new();
    for (k, c, g) in &rows {
        let finite = |x: f64| x.is_finite().then_some(x);
        let speedup = if g.seconds > 0.0 { finite(c.seconds / g.seconds) } else { None };
        // Per unit of work, when the two ran different sizes.
        let per_work = match (c.gflops, g.gflops) {
            (Some(cg), Some(gg)) if cg > 0.0 => finite(gg / cg),
            _ => None,
        };
        let caveats: Vec<String> = [("CPU", *c), ("GPU", *g)]
            .iter()
            .filter_map(|(side, p)| not_near_best(side, p))
            .collect();
        let cpu_prec = precision_roof(c, &view.reports[0].roofs);
        let gpu_prec = precision_roof(g, &view.reports[1].roofs);
        roofs.push((cpu_prec.1, gpu_prec.1));
        doc.push(CompareRow {
            kernel: k.clone(),
            cpu: c.name.clone(),
            gpu: g.name.clone(),
            cpu_seconds: c.seconds,
            gpu_seconds: g.seconds,
            cpu_gflops: c.gflops,
            gpu_gflops: g.gflops,
            cpu_roof_fraction: frac(c),
            gpu_roof_fraction: frac(g),
            speedup_time: speedup,
            speedup_rate: per_work,
            caveats,
            cpu_precision: cpu_prec.0.into(),
            gpu_precision: gpu_prec.0.into(),
            cpu_roof: cpu_prec.1.map(compare_roof),
            gpu_roof: gpu_prec.1.map(compare_roof),
            same_precision: crate::model::precision_family(cpu_prec.0) == crate::model::precision_family(gpu_prec.0),
            energy: compare_energy(c, g),
        });
    }
    let table = compare_table(&doc, &roofs);
    let json = CompareDocument {
        schema: COMPARE_SCHEMA.into(),
        rows: doc,
    }
    .to_json();
    if let Some((file, ext)) = out {
        if ext == "json" {
            file.write(json.as_bytes())?;
        } else {
            report::write_view(&view, &file.path)?;
        }
        eprintln!("roofline: wrote {}", file.path.display());
    }
    if args.output.json {
        println!("{json}");
    } else {
        print!("{table}");
    }
    Ok(0)
}
