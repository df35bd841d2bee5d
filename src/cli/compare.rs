//! `roofline compare CPU.json GPU.json [-o compare.svg|html]` (issue 9): the same kernels on
//! two machines — time, GFLOP/s, the fraction of each machine's own roof, and the speedup —
//! and both reports' points on one chart.

use clap::Args as ClapArgs;
use std::path::PathBuf;

use super::common::OutputArgs;
use crate::report::{self, PlotKind, Point, View};

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The CPU report (e.g. from `roofline` or `roofline run`).
    pub cpu: PathBuf,
    /// The GPU report (from `roofline gpu run|measure|import`).
    pub gpu: PathBuf,
    /// Roofline view of the chart.
    #[arg(long, value_enum, default_value = "dram")]
    pub kind: PlotKind,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The kernel a point measures: `extra.kernel` when set, else its name up to `@`.
fn kernel_of(p: &Point) -> String {
    p.extra
        .get("kernel")
        .and_then(|k| k.as_str())
        .map(report_kernel_name)
        .unwrap_or_else(|| p.name.split('@').next().unwrap_or(&p.name).to_string())
}

/// ncu kernel names carry parameters; CPU names carry the working set after `@`.
fn report_kernel_name(k: &str) -> String {
    crate::gpu::ncu::short_name(k)
}

/// Rows of (kernel, cpu point, gpu point) for kernels present in both reports.
pub fn pairs<'a>(cpu: &'a [Point], gpu: &'a [Point]) -> Vec<(String, &'a Point, &'a Point)> {
    let mut out = Vec::new();
    for g in gpu {
        let k = kernel_of(g);
        // The CPU's DRAM-sized point when there are several sizes of the kernel.
        let mut c: Vec<&Point> = cpu.iter().filter(|c| kernel_of(c) == k).collect();
        c.sort_by_key(|c| !c.name.ends_with("@dram"));
        if let Some(c) = c.first() {
            out.push((k, *c, g));
        }
    }
    out
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let out = args.output.check(&["svg", "png", "html", "json"])?;
    let cpu = report::read_report(&args.cpu)?;
    let gpu = report::read_report(&args.gpu)?;
    let rows = pairs(&cpu.points, &gpu.points);
    if rows.is_empty() {
        anyhow::bail!(crate::Error::input(
            "no kernel appears in both reports",
            "compare reports of the same kernels (e.g. `roofline run triad` and `roofline gpu run triad`)"
        ));
    }
    let view = View::new(vec![("cpu".into(), cpu.clone()), ("gpu".into(), gpu.clone())], None, args.kind);
    let frac = |p: &Point| {
        view.reports
            .iter()
            .flat_map(|r| r.report.points.iter())
            .find(|q| q.name == p.name && q.seconds == p.seconds)
            .and_then(|q| q.roof_fraction)
    };
    let mut table =
        String::from("kernel            CPU ms     GPU ms   CPU GFLOP/s   GPU GFLOP/s  CPU roof%  GPU roof%  GPU/CPU speedup\n");
    let mut doc = Vec::new();
    for (k, c, g) in &rows {
        let speedup = if g.seconds > 0.0 { c.seconds / g.seconds } else { f64::NAN };
        // Per unit of work, when the two ran different sizes.
        let per_work = match (c.gflops, g.gflops) {
            (Some(cg), Some(gg)) if cg > 0.0 => gg / cg,
            _ => f64::NAN,
        };
        let pct = |x: Option<f64>| x.map(|v| format!("{:.1}", v * 100.0)).unwrap_or_else(|| "-".into());
        table += &format!(
            "{:<16} {:>8.3} {:>10.3} {:>13.1} {:>13.1} {:>10} {:>10} {:>9.1}x (rate {:.1}x)\n",
            k,
            c.seconds * 1e3,
            g.seconds * 1e3,
            c.gflops.unwrap_or(0.0),
            g.gflops.unwrap_or(0.0),
            pct(frac(c)),
            pct(frac(g)),
            speedup,
            per_work
        );
        doc.push(
            serde_json::json!({"kernel": k, "cpu": c.name, "gpu": g.name, "cpu_seconds": c.seconds, "gpu_seconds": g.seconds,
            "cpu_gflops": c.gflops, "gpu_gflops": g.gflops, "cpu_roof_fraction": frac(c), "gpu_roof_fraction": frac(g),
            "speedup_time": speedup, "speedup_rate": per_work}),
        );
    }
    let json = serde_json::json!({"schema": "roofline.compare/1", "rows": doc});
    if let Some((file, ext)) = out {
        let data = if ext == "json" {
            serde_json::to_vec_pretty(&json)?
        } else {
            report::exporter_for(&ext).expect("checked extension").export(&view)?
        };
        file.write(&data)?;
        eprintln!("roofline: wrote {}", file.path.display());
    }
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{table}");
    }
    Ok(0)
}
