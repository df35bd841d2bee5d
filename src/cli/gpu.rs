//! `roofline gpu …`: NVIDIA GPUs — machine, ceilings, measure (ncu), import, run.

use clap::{Args as ClapArgs, Subcommand};
use std::path::PathBuf;

use super::common::OutputArgs;
use crate::error::Error;
use crate::gpu::{ceilings, device, ncu, run as gpurun};
use crate::report::tables::gpu::{ceilings_table, fusion_table, machine_table, points_table};
use crate::schema::{Environment, Report};

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
        #[command(flatten)]
        energy: GpuEnergyArg,
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
        /// GPU ordinal whose name stands in where ncu gives none. `--energy` reads every GPU
        /// the command can use (those CUDA lists here), each board and their sum, and names
        /// the boards NVML lists that CUDA hides.
        #[arg(long, default_value_t = 0)]
        device: usize,
        #[command(flatten)]
        energy: GpuEnergyArg,
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
        #[command(flatten)]
        energy: GpuEnergyArg,
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

/// `--energy` of the GPU commands: the board's own counter, not RAPL.
#[derive(Debug, Clone, ClapArgs, Default)]
pub struct GpuEnergyArg {
    /// Also read the GPU board's total-energy counter (NVML, Volta and later; millijoules),
    /// the idle power measured first. `gpu run`, `gpu ceilings`: each kernel launched back to
    /// back long enough for the counter to resolve it; `gpu measure`: one more run of the whole
    /// command without Nsight Compute, which replays each kernel so that no joules belong to
    /// one (docs/energy.md). Needs the NVIDIA driver's libnvidia-ml.
    #[arg(long)]
    pub energy: bool,
    /// With --energy: take the idle power × each run's time off its joules (said in the report).
    #[arg(long, requires = "energy")]
    pub subtract_idle: bool,
    /// With --energy: seconds of idle measured before the kernels or the command.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, requires = "energy")]
    pub idle_seconds: f64,
}

impl GpuEnergyArg {
    /// The options when `--energy` was given (one line and exit 2 for a bad duration).
    pub fn options(&self) -> crate::Result<Option<crate::counters::energy::EnergyOptions>> {
        if !self.energy {
            return Ok(None);
        }
        if !(self.idle_seconds.is_finite() && self.idle_seconds > 0.0 && self.idle_seconds <= 600.0) {
            return Err(Error::input(
                format!("--idle-seconds {}: not a duration", self.idle_seconds),
                "give seconds, e.g. 2",
            ));
        }
        Ok(Some(crate::counters::energy::EnergyOptions {
            subtract_idle: self.subtract_idle,
            idle_seconds: self.idle_seconds,
        }))
    }
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
                    crate::model::gpu::apply_ncu_peaks(&mut m, &l.metrics);
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
        GpuCommand::Ceilings {
            out,
            device: ord,
            quick,
            energy,
        } => {
            let file = out.check(&["json"])?.map(|f| f.0);
            let options = ceilings::Options {
                quick,
                ordinal: ord,
                energy: energy.options()?,
            };
            let c = ceilings::measure(&options, &|s| eprintln!("roofline: gpu ceilings: {s}"))?;
            let mut table = ceilings_table(&c);
            if let Some(e) = &c.energy {
                table += &crate::report::tables::energy::energy_roofs_table(std::slice::from_ref(e));
            }
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
            energy,
        } => {
            let k = gpurun::find(&kernel)?;
            let file = out.check(&["json"])?.map(|f| f.0);
            let (mut m, p) = gpurun::run(k, size.unwrap_or(k.default_n), repeat.max(1), ord, energy.options()?)?;
            let (roofs, said) = crate::model::gpu::report_roofs(&m);
            m.provenance.extend(said);
            let mut r = Report::new(serde_json::to_value(&m)?, environment());
            r.ceilings = roofs;
            // The energy roofline needs the board's energy roofs: those of `gpu ceilings
            // --energy` cached for this GPU.
            if energy.energy {
                r.energy_roofs.extend(crate::model::gpu::cached_energy_roofs(&m));
            }
            r.points.push(p);
            analyse(&mut r);
            let (floor, floor_said) = crate::model::gpu::launch_floor(&m.name);
            crate::model::gpu::set_regimes(&mut r.points, r.ceilings.as_ref(), floor);
            if let Some(p) = r.points.first_mut() {
                p.provenance.notes.push(floor_said);
            }
            let table = points_table(&r.points)
                + &crate::report::tables::energy::energy_table(&r.points)
                + &crate::report::tables::energy::energy_roofline_table(&r);
            emit_json(&out, &serde_json::to_value(&r)?, &table, file)?;
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
        GpuCommand::Measure {
            out,
            set,
            kernel,
            device: ord,
            energy,
            cmd,
        } => {
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
            let command_energy = match energy.options()? {
                Some(options) => match command_energy(ord, options, &cmd)? {
                    Ok(e) => Some(e),
                    Err(status) => return Ok(status),
                },
                None => None,
            };
            let cap = ncu::run(&metrics.join(","), kernel.as_deref(), &cmd)?;
            // The capture holds this GPU's peaks and attributes (ROOF_METRICS); the driver's
            // name stands in where ncu gave none.
            let name = cap.device().name.or_else(|| device::open(ord).ok().and_then(|c| c.name().ok()));
            let mut r = capture_report(&cap, None, &cmd.join(" "), name.as_deref())?;
            r.command_energy = command_energy;
            emit_report(&out, &r, ofile)?;
            Ok(0)
        }
    }
}

/// `gpu measure --energy`: the board's energy over one run of the whole command, before ncu
/// runs it (the driver and ncu checked first, so a machine without them refuses at once); the
/// CUDA context closes before ncu starts. `Ok(Err(status))` when the command failed.
fn command_energy(
    ordinal: usize,
    options: crate::counters::energy::EnergyOptions,
    cmd: &[String],
) -> crate::Result<std::result::Result<crate::schema::energy::CommandEnergy, i32>> {
    device::open(ordinal)?;
    ncu::require()?;
    crate::counters::command::CommandSpec::resolve(cmd)?;
    eprintln!("roofline: gpu measure: energy: idle power of every GPU the command can use, then one run of the whole command without ncu");
    let boards = crate::gpu::energy::start_boards(ordinal, options)?;
    eprintln!(
        "roofline: gpu measure: energy: counting {}{}",
        boards.counted.join(", "),
        if boards.left_out.is_empty() {
            String::new()
        } else {
            format!("; not counted (hidden from CUDA): {}", boards.left_out.join(", "))
        }
    );
    crate::gpu::energy::measure_command(&boards, cmd)
}

/// A capture's report: the per-kernel table with each point's instruction roofline on stdout
/// (or the JSON with `--json`), and `-o` as JSON or, for `.svg`, the instruction-roofline chart.
fn emit_report(out: &OutputArgs, r: &Report, file: Option<(crate::util::OutputFile, String)>) -> anyhow::Result<()> {
    let table = points_table(&r.points)
        + &fusion_table(&r.fusion)
        + &crate::report::instruction::text_section(&r.points)
        + &crate::report::tables::energy::command_energy_lines(r);
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
        if p.extra.regime.is_some() {
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
