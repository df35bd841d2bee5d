//! `roofline gpu …`: NVIDIA GPUs — machine, ceilings, measure (ncu), import, run.

use clap::{Args as ClapArgs, Subcommand};
use std::path::PathBuf;

use super::common::OutputArgs;
use crate::error::Error;
use crate::gpu::{ceilings, device, ncu, run as gpurun};
use crate::schema::{Environment, Point, Report};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub command: GpuCommand,
}

#[derive(Debug, Subcommand)]
pub enum GpuCommand {
    /// Device name, SMs, clocks, memory, theoretical peaks (FP64/FP32/FP16/tensor, HBM).
    Machine {
        #[command(flatten)]
        out: OutputArgs,
        /// GPU ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Also read ncu's `*.peak_sustained` metrics (runs ncu on a tiny kernel).
        #[arg(long)]
        ncu: bool,
    },
    /// Empirical ceilings with our own NVRTC-compiled kernels.
    Ceilings {
        #[command(flatten)]
        out: OutputArgs,
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Fewer repetitions, smaller arrays.
        #[arg(long)]
        quick: bool,
    },
    /// Profile a command's kernels with Nsight Compute and report W, Q, T per kernel.
    Measure {
        #[command(flatten)]
        out: OutputArgs,
        /// Metric set: hierarchical (W/Q/T), instruction (Ding & Williams), or all.
        #[arg(long, default_value = "hierarchical", value_parser = ["hierarchical", "instruction", "all"])]
        set: String,
        /// Only kernels whose name matches this regular expression (ncu's -k regex:).
        #[arg(short = 'k', long = "kernel", value_name = "KERNEL_REGEX")]
        kernel: Option<String>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Import an `ncu --csv` capture made elsewhere.
    Import {
        #[command(flatten)]
        out: OutputArgs,
        file: PathBuf,
        /// Only kernels whose name contains this text.
        #[arg(short = 'k', long = "kernel")]
        kernel: Option<String>,
        /// The GPU the capture ran on (`H200`, `H100 PCIe`, `A100`, …; platforms/gpu/nvidia.toml),
        /// for its roofs when the capture lacks ncu's peak metrics and device attributes.
        #[arg(long, value_name = "NAME")]
        gpu: Option<String>,
    },
    /// Run a GPU kernel of the suite (analytic W/Q, CUDA-event timing).
    Run {
        #[command(flatten)]
        out: OutputArgs,
        /// triad, daxpy, dgemm, normalize_naive, normalize_fused, cos_chain_unfused, cos_chain_fused.
        kernel: String,
        /// Elements (matrix order for dgemm).
        #[arg(long)]
        size: Option<usize>,
        #[arg(long, default_value_t = 20)]
        repeat: usize,
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
    /// (internal) a tiny kernel for `gpu machine --ncu` to profile.
    #[command(hide = true, name = "__probe")]
    Probe,
    /// (internal, scripts/gpu-test.sh) judge our rate against a peer's on the median of
    /// alternations (at least 5) within their noise band: exit 0 when it holds, 1 when not.
    #[command(hide = true, name = "__peer-ratio")]
    PeerRatio {
        /// What is compared (the line printed starts with it).
        #[arg(long, default_value = "ratio")]
        name: String,
        /// Our rate in each alternation, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        ours: Vec<f64>,
        /// The peer's rate in each alternation, measured right after ours.
        #[arg(long, value_delimiter = ',', required = true)]
        peer: Vec<f64>,
        /// The bar for ours / the peer's.
        #[arg(long, default_value_t = 1.0)]
        at_least: f64,
        /// The widest band (largest − smallest ratio) still judged.
        #[arg(long, default_value_t = 0.05)]
        max_band: f64,
    },
}

fn environment() -> Environment {
    Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_sha: option_env!("ROOFLINE_GIT_SHA").map(str::to_string),
        command_line: std::env::args().collect(),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string()),
        ..Default::default()
    }
}

fn emit_json(out: &OutputArgs, doc: &serde_json::Value, table: &str, allowed_file: Option<crate::util::OutputFile>) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    if let Some(f) = allowed_file {
        f.write(text.as_bytes())?;
        eprintln!("wrote {}", f.path.display());
    }
    if out.json {
        println!("{text}");
    } else {
        print!("{table}");
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.command {
        GpuCommand::Machine {
            out,
            device: ord,
            ncu: with_ncu,
        } => {
            let file = out.check(&["json"])?.map(|f| f.0);
            let ctx = device::open(ord)?;
            let mut m = device::query(&ctx, None)?;
            if with_ncu {
                let exe = std::env::current_exe()?;
                let metrics = "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained,dram__bytes.sum.peak_sustained,lts__t_bytes.sum.peak_sustained,l1tex__t_bytes.sum.peak_sustained,sm__inst_executed.sum.peak_sustained,dram__cycles_elapsed.avg.per_second,sm__cycles_elapsed.avg.per_second";
                let cap = ncu::run(metrics, None, &[exe.display().to_string(), "gpu".into(), "__probe".into()])?;
                if let Some(l) = cap.launches.first() {
                    device::apply_ncu_peaks(&mut m, &l.metrics);
                }
            }
            let table = machine_table(&m);
            emit_json(&out, &serde_json::to_value(&m)?, &table, file)?;
            Ok(0)
        }
        GpuCommand::Probe => {
            let ctx = device::open(0)?;
            let suite = crate::gpu::kernels::Suite::compile(ctx)?;
            ceilings::measure_sm_clock(&suite, 1)?;
            Ok(0)
        }
        GpuCommand::PeerRatio {
            name,
            ours,
            peer,
            at_least,
            max_band,
        } => {
            let j = crate::gpu::peer::judge(&ours, &peer, at_least, max_band)?;
            println!("{}", j.describe(&name, at_least));
            Ok(if j.verdict == crate::gpu::peer::PeerVerdict::Holds { 0 } else { 1 })
        }
        GpuCommand::Ceilings { out, device: ord, quick } => {
            let file = out.check(&["json"])?.map(|f| f.0);
            let c = ceilings::measure(&ceilings::Options { quick, ordinal: ord }, &|s| {
                eprintln!("roofline: gpu ceilings: {s}")
            })?;
            let table = ceilings_table(&c);
            let doc = serde_json::to_value(&c)?;
            // Cached per GPU name: later `gpu run|measure|import` reports on this GPU carry them.
            if let Some(path) = crate::model::gpu::ceilings_cache_path(&c.machine.name) {
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .map_err(|e| e.to_string())
                    .and_then(|_| crate::util::write_atomic(&path, doc.to_string().as_bytes()).map_err(|e| e.to_string()));
                match written {
                    Ok(()) => eprintln!("roofline: gpu ceilings: cached in {}", path.display()),
                    Err(e) => eprintln!("roofline: warning: cannot cache the GPU ceilings in {}: {e}", path.display()),
                }
            }
            emit_json(&out, &doc, &table, file)?;
            Ok(0)
        }
        GpuCommand::Run {
            out,
            kernel,
            size,
            repeat,
            device: ord,
        } => {
            let k = gpurun::find(&kernel)?;
            let file = out.check(&["json"])?.map(|f| f.0);
            let (mut m, p) = gpurun::run(k, size.unwrap_or(k.default_n), repeat.max(1), ord)?;
            let (roofs, said) = crate::model::gpu::report_roofs(&m);
            m.provenance.extend(said);
            let mut r = Report::new(serde_json::to_value(&m)?, environment());
            r.ceilings = roofs;
            r.points.push(p);
            analyse(&mut r);
            let (floor, floor_said) = crate::model::gpu::launch_floor(&m.name);
            crate::model::gpu::set_regimes(&mut r.points, r.ceilings.as_ref(), floor);
            if let Some(p) = r.points.first_mut() {
                p.provenance.notes.push(floor_said);
            }
            emit_json(&out, &serde_json::to_value(&r)?, &points_table(&r.points), file)?;
            Ok(0)
        }
        GpuCommand::Import { out, file, kernel, gpu } => {
            let ofile = out.check(&["json", "svg"])?;
            let origin = file.display().to_string();
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Error::input(format!("{origin}: cannot read ({e})"), "pass an ncu --csv capture"))?;
            let cap = ncu::parse(&text, &origin)?;
            if let Some(g) = &gpu
                && crate::model::gpu::table::find(g).is_none()
            {
                return Err(Error::input(
                    format!("--gpu {g}: not a GPU of platforms/gpu/nvidia.toml"),
                    format!("known: {}", crate::model::gpu::table::keys().join(", ")),
                )
                .into());
            }
            let r = capture_report(&cap, kernel.as_deref(), &origin, gpu.as_deref())?;
            emit_report(&out, &r, ofile)?;
            Ok(0)
        }
        GpuCommand::Measure { out, set, kernel, cmd } => {
            let ofile = out.check(&["json", "svg"])?;
            if ofile.as_ref().is_some_and(|(_, ext)| ext == "svg") && set == "hierarchical" {
                return Err(Error::input(
                    "-o FILE.svg writes the instruction roofline, which needs the instruction metrics",
                    "add --set instruction (or --set all); for the W/Q/T roofline write -o FILE.json and run `roofline plot`",
                )
                .into());
            }
            let mut metrics: Vec<&str> = ncu::ROOF_METRICS.to_vec();
            if set != "instruction" {
                metrics.extend(ncu::HIERARCHICAL_METRICS);
            }
            if set != "hierarchical" {
                metrics.extend(ncu::INSTRUCTION_METRICS);
            }
            metrics.sort_unstable();
            metrics.dedup();
            let cap = ncu::run(&metrics.join(","), kernel.as_deref(), &cmd)?;
            // The capture holds this GPU's peaks and attributes (ROOF_METRICS); the driver's
            // name stands in where ncu gave none.
            let name = cap.device().name.or_else(|| device::open(0).ok().and_then(|c| c.name().ok()));
            let r = capture_report(&cap, None, &cmd.join(" "), name.as_deref())?;
            emit_report(&out, &r, ofile)?;
            Ok(0)
        }
    }
}

/// A capture's report: the per-kernel table with each point's instruction roofline on stdout
/// (or the JSON with `--json`), and `-o` as JSON or, for `.svg`, the instruction-roofline chart.
fn emit_report(out: &OutputArgs, r: &Report, file: Option<(crate::util::OutputFile, String)>) -> anyhow::Result<()> {
    let table = points_table(&r.points) + &fusion_table(&r.fusion) + &crate::report::instruction::text_section(&r.points);
    match file {
        Some((f, ext)) if ext == "svg" => {
            let svg = crate::report::instruction::svg(&r.points)?;
            f.write(svg.as_bytes())?;
            eprintln!("wrote {} (instruction roofline)", f.path.display());
            emit_json(out, &serde_json::to_value(r)?, &table, None)
        }
        f => emit_json(out, &serde_json::to_value(r)?, &table, f.map(|f| f.0)),
    }
}

/// A capture's report with the GPU's roofs: the machine block from the capture (peaks at the
/// captured clock; `gpu_name` for the datasheet table), its theoretical roofs, or the cached
/// `gpu ceilings` of that GPU. Missing roofs are said on stderr.
fn capture_report(cap: &ncu::Capture, filter: Option<&str>, origin: &str, gpu_name: Option<&str>) -> crate::Result<Report> {
    let mut pts = ncu::points(cap, filter, origin)?;
    let kernel_points = pts.len();
    // NVTX region points (`ncu --nvtx`) after the kernels; not with -k, which selects kernels.
    if filter.is_none() {
        let display = cap.kernels().into_iter().map(|k| (k.full_name, k.name)).collect();
        pts.extend(crate::gpu::regions::region_points(cap, &display));
    }
    let mut m = crate::model::gpu::machine_for_capture(&cap.device(), gpu_name);
    let (roofs, said) = crate::model::gpu::report_roofs(&m);
    m.provenance.extend(said);
    for w in &m.warnings {
        eprintln!("roofline: {origin}: {w}");
    }
    let mut machine = serde_json::to_value(&m).map_err(|e| Error::input(format!("machine block: {e}"), "report a bug"))?;
    machine["source"] = "ncu capture".into();
    let mut r = Report::new(machine, environment());
    r.ceilings = roofs;
    r.points = pts;
    analyse(&mut r);
    let (floor, floor_said) = crate::model::gpu::launch_floor(&m.name);
    crate::model::gpu::set_regimes(&mut r.points, r.ceilings.as_ref(), floor);
    for p in &mut r.points {
        if p.extra.contains_key("regime") {
            p.provenance.notes.push(floor_said.clone());
        }
    }
    let hbm = r.ceilings.as_ref().and_then(|c| c.bandwidth_gbs.get("dram").copied());
    r.fusion = crate::gpu::fusion::chains(cap, &r.points[..kernel_points], hbm);
    Ok(r)
}

/// Bound, roof fraction and the above-roof check of every point against the report's roofs.
fn analyse(r: &mut Report) {
    let roofs = crate::model::RoofSet::for_report(r, None);
    if !roofs.is_empty() {
        crate::model::annotate(r, &roofs);
    }
}

fn opt(v: Option<f64>, scale: f64, prec: usize) -> String {
    v.map(|x| format!("{:.*}", prec, x / scale)).unwrap_or_else(|| "-".into())
}

fn machine_table(m: &device::GpuMachine) -> String {
    let mut s = String::new();
    s += &format!("GPU {}: {} (compute capability {})\n", m.ordinal, m.name, m.compute_capability);
    s += &format!(
        "  SMs {}   SM clock max {} GHz   memory {} at {} GHz x {} bits   L2 {}\n",
        m.sms,
        opt(m.sm_clock_max_ghz, 1.0, 3),
        crate::schema::units::fmt_bytes(m.memory_bytes as f64),
        opt(m.memory_clock_ghz, 1.0, 3),
        m.memory_bus_bits.map(|b| b.to_string()).unwrap_or("-".into()),
        m.l2_bytes.map(|b| crate::schema::units::fmt_bytes(b as f64)).unwrap_or("-".into())
    );
    let p = &m.peaks;
    s += &format!(
        "  peaks (dense, at {} GHz): FP64 {} TFLOP/s  FP32 {}  FP16 {}\n",
        opt(p.at_sm_ghz, 1.0, 3),
        opt(p.fp64_gflops, 1e3, 1),
        opt(p.fp32_gflops, 1e3, 1),
        opt(p.fp16_gflops, 1e3, 1)
    );
    for (k, v) in &p.tensor_gflops {
        s += &format!("    tensor {k:<5} {:>8.1} TFLOP/s\n", v / 1e3);
    }
    s += &format!(
        "  bandwidth: HBM {} GB/s  L2 {}  L1 {}\n",
        opt(p.dram_gbs, 1.0, 0),
        opt(p.l2_gbs, 1.0, 0),
        opt(p.l1_gbs, 1.0, 0)
    );
    for w in &m.warnings {
        s += &format!("  warning: {w}\n");
    }
    s
}

fn ceilings_table(c: &ceilings::GpuCeilings) -> String {
    let mut s = format!(
        "GPU ceilings on {} (SM clock measured {} GHz)\n",
        c.machine.name,
        opt(c.sm_clock_ghz_measured, 1.0, 3)
    );
    s += "  compute        kernel           GFLOP/s    peak@clock   %\n";
    for x in &c.compute {
        s += &format!(
            "  {:<14} {:<14} {:>10.0} {:>12} {:>6}  {}\n",
            x.precision,
            x.kernel,
            x.gflops,
            opt(x.peak_at_clock_gflops, 1.0, 0),
            opt(x.pct_of_peak_at_clock, 1.0, 1),
            x.detail.as_deref().unwrap_or("")
        );
    }
    if let Some(f) = c.launch_floor_s {
        s += &format!("  launch floor   empty_kernel   {:.2} us per launch (CUDA events)\n", f * 1e6);
    }
    for n in &c.notes {
        s += &format!("  note: {n}\n");
    }
    s += "  bandwidth      kernel        working set      GB/s\n";
    for b in &c.bandwidth {
        s += &format!(
            "  {:<14} {:<12} {:>12} {:>10.0}\n",
            b.level,
            b.kernel,
            crate::schema::units::fmt_bytes(b.working_set_bytes as f64),
            b.gbs
        );
    }
    if !c.sweep.is_empty() {
        s += "  sweep (load)   working set   rotated   GB/s (rotated)   GB/s (L2-resident passes)\n";
        for p in &c.sweep {
            s += &format!(
                "  {:<14} {:>11} {:>9} {:>16.0} {:>27}\n",
                "",
                crate::schema::units::fmt_bytes(p.working_set_bytes as f64),
                format!("x{}", p.rotated_buffers),
                p.gbs,
                opt(p.gbs_l2_resident, 1.0, 0)
            );
        }
    }
    s
}

/// Fusion candidates, one line each ("N kernels move X GB in T ms; fused ≈ Y GB, ≈ t ms at
/// the HBM roof"), with the region and the kernels.
pub fn fusion_table(chains: &[crate::schema::report::FusionChain]) -> String {
    let mut s = String::new();
    if chains.is_empty() {
        return s;
    }
    s += "\nfusion candidates (consecutive memory-bound kernels, same stream and NVTX range):\n";
    for c in chains {
        s += &format!(
            "  {}{}\n    {}\n",
            if c.region.is_empty() {
                String::new()
            } else {
                format!("[{}] ", c.region)
            },
            c.summary,
            c.kernels.join(" -> ")
        );
    }
    s
}

/// The per-kernel table: W by precision, Q per level, T, rates, diagnostics; NVTX region
/// points below the kernels, each with its kernels listed.
pub fn points_table(points: &[Point]) -> String {
    let (regions, kernels): (Vec<&Point>, Vec<&Point>) = points.iter().partition(|p| crate::gpu::regions::is_region(p));
    let mut s = rows_table("kernel", &kernels);
    if !regions.is_empty() {
        s += "\nNVTX regions (each holds its sub-ranges' kernels; T is GPU time, not wall time):\n";
        s += &rows_table("region", &regions);
        for p in &regions {
            s += &format!(
                "  {} ({} instance(s)):\n",
                p.name,
                p.extra.get("instances").and_then(|v| v.as_u64()).unwrap_or(0)
            );
            for k in p.extra.get("kernels").and_then(|v| v.as_array()).into_iter().flatten() {
                s += &format!(
                    "      {:>5.1}%  {:>3} x  {}\n",
                    k.get("time_share").and_then(|v| v.as_f64()).unwrap_or(0.0) * 100.0,
                    k.get("launches").and_then(|v| v.as_u64()).unwrap_or(0),
                    k.get("name").and_then(|v| v.as_str()).unwrap_or("")
                );
            }
        }
    }
    // Points above their roof (model::annotate's note), each with both numbers.
    for p in points {
        for n in p.provenance.notes.iter().filter(|n| n.starts_with("above its roof:")) {
            s += &format!("warning: {n}\n");
        }
    }
    s
}

fn rows_table(what: &str, points: &[&Point]) -> String {
    let mut s = format!(
        "{what:<20}launches   GFLOP  (fp64/fp32/fp16/tensor)         DRAM GB    L2 GB    L1 GB       T ms   GFLOP/s  DRAM GB/s  AI_dram  notes\n",
    );
    for p in points {
        let c = |k: &str| p.flops.by_class.get(k).map(|v| format!("{:.3}", v / 1e9)).unwrap_or("-".into());
        let b = |k: &str| p.bytes.get(k).map(|v| format!("{:.3}", v / 1e9)).unwrap_or("-".into());
        let mut notes = Vec::new();
        if let Some(sh) = p.extra.get("time_share").and_then(|v| v.as_f64()) {
            notes.push(format!("{:.0}% of time", sh * 100.0));
        }
        if let Some(t) = p.extra.get("tensor_used").and_then(|v| v.as_bool()) {
            notes.push(if t {
                "tensor cores used".into()
            } else {
                "no tensor work".to_string()
            });
        }
        if let Some(co) = p.extra.get("coalescing").and_then(|v| v.as_object()) {
            for (k, v) in co {
                if let Some(x) = v.as_f64() {
                    notes.push(format!("{} {:.1}", k.replace('_', " "), x));
                }
            }
        }
        if ncu::fp16_may_be_register_moves(&p.flops.by_class) {
            notes.push("FP16 count may be HFMA2 register moves".into());
        }
        if let Some(r) = p.extra.get("regime").and_then(|v| v.as_str()) {
            notes.push(format!("{r}-bound"));
        }
        if let Some(l) = p.extra.get("library_gflops").and_then(|v| v.as_f64())
            && p.extra.contains_key("library")
            && let Some(g) = p.gflops
        {
            notes.push(format!("{:.2}x of cuBLAS", g / l));
        }
        s += &format!(
            "{:<20}{:>8} {:>7.3}  ({}/{}/{}/{}) {:>10} {:>8} {:>8} {:>10.3} {:>9} {:>10} {:>8}  {}\n",
            p.name,
            p.extra
                .get("launches")
                .and_then(|v| v.as_u64())
                .map(|v| v.to_string())
                .unwrap_or("-".into()),
            p.flops.total / 1e9,
            c("double_any_width"),
            c("single_any_width"),
            c("half_any_width"),
            c("tensor"),
            b("dram"),
            b("l2"),
            b("l1"),
            p.seconds * 1e3,
            opt(p.gflops, 1.0, 1),
            opt(p.gbs.get("dram").copied(), 1.0, 1),
            opt(p.ai.get("dram").copied(), 1.0, 2),
            notes.join("; ")
        );
    }
    s
}
