//! GPU energy (`gpu run --energy`, `gpu ceilings --energy`): the board's NVML counter read
//! around kernels repeated long enough for it to resolve them.
//!
//! The counter changes at a coarse interval (measured while idle, the granularity): one launch
//! of a few milliseconds is below it. So a kernel is launched back to back in batches, the
//! stream synchronized and the counter read after each batch, for a warm-up stretch (clocks
//! and power settle) and then [`STRETCHES`] stretches of at least ten counter updates each.
//! Each stretch gives one sample (its power, above the idle power measured first, over its
//! rate of work), so the figures come with their spread over repetitions.
//!
//! `gpu measure --energy` reads it around one whole run of the command instead
//! ([`measure_command`]): under Nsight Compute no joules belong to one kernel.

use std::os::fd::AsFd;
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys::CUdevice_attribute as Attr};

use super::kernels::{KArg, Suite, cuda_err};
use crate::counters::energy::{Energy, EnergyOptions, Window};
use crate::error::{Error, Result};
use crate::schema::energy::{CommandEnergy, EnergyRoofs};

/// Stretches (samples) each GPU energy figure is measured over.
pub const STRETCHES: usize = 5;

/// The shortest stretch on a GPU, seconds: the board's power follows a change of load within
/// tens of milliseconds, and the counter integrates the power sensor's samples.
const GPU_MIN_STRETCH_SECONDS: f64 = 0.1;

/// The GPU's PCI address as NVML names devices (`00000000:65:00.0`).
pub fn pci_bus_id(ctx: &Arc<CudaContext>) -> Result<String> {
    let get = |a: Attr, what: &str| {
        ctx.attribute(a).map_err(|e| {
            Error::unavailable(
                format!("the CUDA driver gave no PCI {what} for this GPU ({e}): its NVML counter cannot be found"),
                "leave out --energy",
            )
        })
    };
    let domain = get(Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "domain")?;
    let bus = get(Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "bus")?;
    let device = get(Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "device")?;
    Ok(format!("{domain:08x}:{bus:02x}:{device:02x}.0"))
}

/// A recording of NVML readings (`seconds millijoules` per line) to replay instead of the
/// GPU's counter, as `ROOFLINE_SYSFS_PMUS` replaces the RAPL tree.
pub const RECORDING_ENV: &str = "ROOFLINE_NVML_RECORDING";

/// The GPU's energy meter, open and its idle power measured (the context already open, so the
/// idle is that of a GPU ready to run, not asleep).
pub fn start(ctx: &Arc<CudaContext>, options: EnergyOptions) -> Result<Energy> {
    use crate::counters::energy::nvml;
    let meter = match std::env::var_os(RECORDING_ENV) {
        Some(path) => {
            let origin = std::path::PathBuf::from(&path).display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| {
                Error::input(
                    format!("{RECORDING_ENV}={origin}: cannot read ({e})"),
                    "point it at a recording of NVML readings",
                )
            })?;
            nvml::recorded_meter(nvml::Recording::parse(&text, &origin)?, ctx.ordinal())?
        }
        None => nvml::open_gpu(&pci_bus_id(ctx)?, ctx.ordinal())?,
    };
    Energy::with_meter(meter, options)
}

/// The stretch length used on a GPU: the meter's (ten counter updates) and at least
/// [`GPU_MIN_STRETCH_SECONDS`].
pub fn stretch_seconds(energy: &Energy) -> f64 {
    energy.stretch_seconds().max(GPU_MIN_STRETCH_SECONDS)
}

/// A window of steady repeated launches.
pub struct Repeated {
    /// The counter read all along: before the warm-up, then every [`POLL_SECONDS`] while the
    /// GPU works, until after the tail.
    pub window: Window,
    /// Seconds (of the readings) when the warm-up was seen finished and when the last timed
    /// batch was: the steady part in between.
    pub from: f64,
    pub to: f64,
    /// Work per second in the steady part.
    pub rate: f64,
    /// Launches in the steady part.
    pub timed_launches: usize,
}

/// Seconds slept between readings while the GPU works (an NVML read itself takes about
/// 2.5 ms on the H200).
const POLL_SECONDS: f64 = 5e-4;

/// Launch `launch` back to back (`units_per_launch` of work each, about `seconds_per_launch`
/// each) in batches kept two deep on the stream, so the GPU never waits for the host, while the
/// counter is read all along: a warm-up stretch, then batches until [`STRETCHES`] stretches
/// of [`stretch_seconds`] passed, then what is queued drains (the tail).
pub fn repeat(
    energy: &Energy,
    suite: &Suite,
    seconds_per_launch: f64,
    units_per_launch: f64,
    launch: &mut dyn FnMut() -> Result<()>,
) -> Result<Repeated> {
    let stretch = stretch_seconds(energy);
    let per_launch = seconds_per_launch.max(1e-6);
    let batch = ((stretch / 8.0) / per_launch).ceil().max(1.0) as usize;
    let warm = (stretch / per_launch).ceil().max(1.0) as usize;
    let window = energy.window()?;
    let mut enqueue = |count: usize| -> Result<cudarc::driver::CudaEvent> {
        for _ in 0..count {
            launch()?;
        }
        let ev = suite.ctx.new_event(None).map_err(cuda_err("event"))?;
        ev.record(&suite.stream).map_err(cuda_err("event record"))?;
        Ok(ev)
    };
    // (event, launches done when it completes)
    let mut queue = std::collections::VecDeque::new();
    queue.push_back((enqueue(warm)?, 0usize));
    queue.push_back((enqueue(batch)?, batch));
    let (mut from, mut done_from) = (None, 0usize);
    let mut done = batch;
    let last_seconds = |w: &Window| w.readings().last().map_or(0.0, |r| r.seconds);
    loop {
        let (ev, done_then) = queue.pop_front().expect("two batches queued");
        while !ev.try_is_complete().map_err(cuda_err("kernel"))? {
            energy.mark(&window)?;
            std::thread::sleep(std::time::Duration::from_secs_f64(POLL_SECONDS));
        }
        energy.mark(&window)?;
        let now = last_seconds(&window);
        match from {
            None => (from, done_from) = (Some(now), done_then),
            // Stretches are cut at counter changes, each running on to the first change past
            // its length: one stretch more than asked leaves room for the whole ones.
            Some(f) if now - f >= stretch * (STRETCHES as f64 + 1.0) => {
                suite.stream.synchronize().map_err(cuda_err("kernel"))?;
                energy.mark(&window)?;
                let timed_launches = done_then - done_from;
                return Ok(Repeated {
                    window,
                    from: f,
                    to: now,
                    rate: timed_launches as f64 * units_per_launch / (now - f).max(f64::MIN_POSITIVE),
                    timed_launches,
                });
            }
            Some(_) => {}
        }
        done += batch;
        queue.push_back((enqueue(batch)?, done));
    }
}

/// Launch `f` once on the suite's stream with `args`, not waiting for it.
pub fn launcher<'a>(
    suite: &'a Suite,
    f: cudarc::driver::CudaFunction,
    cfg: cudarc::driver::LaunchConfig,
    args: Vec<KArg>,
) -> impl FnMut() -> Result<()> + 'a {
    move || super::kernels::launch_once(suite, &f, cfg, &args)
}

/// One figure: `launch` repeated under the counter, picojoules per unit of work (its power
/// above the idle power over its rate), one sample per stretch.
fn per_unit(
    energy: &Energy,
    suite: &Suite,
    seconds_per_launch: f64,
    units_per_launch: f64,
    launch: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    let r = repeat(energy, suite, seconds_per_launch, units_per_launch, launch)?;
    energy.per_unit(&r.window, r.from, r.to, r.rate, stretch_seconds(energy))
}

/// Seconds of one launch, after one untimed launch.
fn seconds_of(suite: &Suite, launch: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    launch()?;
    suite.stream.synchronize().map_err(cuda_err("kernel"))?;
    let t = std::time::Instant::now();
    launch()?;
    suite.stream.synchronize().map_err(cuda_err("kernel"))?;
    Ok(t.elapsed().as_secs_f64())
}

/// The GPU's energy roofs: pJ per flop of our FMA loops (FP64, FP32, FP16), of the bf16
/// tensor loop (WMMA) and of the cuBLASLt GEMMs measured before (`gemms`: FP64 DMMA, bf16, …),
/// pJ per HBM byte of a streaming load, and the constant power (the idle power measured
/// first). `progress` gets one line per figure.
pub fn measure_roofs(
    suite: &Suite,
    energy: &Energy,
    sms: u32,
    gemms: &[super::blas::GemmRate],
    progress: &dyn Fn(&str),
) -> Result<EnergyRoofs> {
    let idle = energy.idle_watts()?;
    let (domain, idle_power) = idle
        .iter()
        .next()
        .ok_or_else(|| Error::unavailable("the GPU meter has no domain", "leave out --energy"))?;
    let mut roofs = EnergyRoofs {
        domain: domain.clone(),
        constant_watts: idle_power.watts,
        ..Default::default()
    };
    if let Some(s) = idle_power.spread {
        roofs.spread.insert("constant".into(), s);
    }
    let blocks = sms.max(1) * 8;
    let threads = blocks as usize * 1024;
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    let out_f64 = suite.stream.alloc_zeros::<f64>(threads).map_err(cuda_err("alloc"))?;
    let out_f32 = suite
        .stream
        .alloc_zeros::<f32>(threads * 256 / 32 + threads)
        .map_err(cuda_err("alloc"))?;
    let out_h = suite.stream.alloc_zeros::<u32>(threads).map_err(cuda_err("alloc"))?;
    let iters: i32 = 4000;
    let fma = 2.0 * 8.0 * iters as f64 * threads as f64;
    let loops: [(&str, &str, KArg, f64); 4] = [
        ("double.fma", "dfma_peak", suite.ptr(&out_f64), fma),
        ("single.fma", "ffma_peak", suite.ptr(&out_f32), fma),
        ("half.fma", "hfma2_peak", suite.ptr(&out_h), 2.0 * fma),
        (
            "bf16.tensor_wmma",
            "bf16_mma_peak",
            suite.ptr(&out_f32),
            2.0 * 4096.0 * 4.0 * iters as f64 * (threads / 32) as f64,
        ),
    ];
    for (key, kernel, out, flops) in loops {
        progress(&format!("energy: {key} ({kernel})"));
        let mut launch = launcher(suite, suite.function(kernel)?, cfg, vec![out, KArg::I32(iters)]);
        let secs = seconds_of(suite, &mut launch)?;
        let xs = per_unit(energy, suite, secs, flops, &mut launch)?;
        roofs.keep_flop(key, &xs);
    }
    if let Ok(blas) = super::blas::Blas::new(suite) {
        for g in gemms {
            let key = format!("{}.tensor_cublaslt", gemm_precision(g.ty));
            progress(&format!("energy: {key} ({})", g.describe()));
            let flops = 2.0 * (g.n as f64).powi(3);
            let xs = blas.with_gemm(g, |launch| {
                let mut launch = || launch();
                let secs = seconds_of(suite, &mut launch)?;
                per_unit(energy, suite, secs, flops, &mut launch)
            })?;
            roofs.keep_flop(&key, &xs);
        }
    }
    // HBM: a streaming load over 512 MiB (ten times an H100's or H200's L2).
    progress("energy: dram (load_f64, 512 MiB)");
    let n: usize = 1 << 26;
    let a = suite.stream.alloc_zeros::<f64>(n).map_err(cuda_err("alloc"))?;
    let sink = suite.stream.alloc_zeros::<f64>(1).map_err(cuda_err("alloc"))?;
    let load_cfg = cudarc::driver::LaunchConfig {
        grid_dim: (sms.max(1) * 16, 1, 1),
        block_dim: (512, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = launcher(
        suite,
        suite.function("load_f64")?,
        load_cfg,
        vec![suite.ptr(&a), suite.ptr(&sink), KArg::U64((n / 2) as u64)],
    );
    let secs = seconds_of(suite, &mut launch)?;
    let xs = per_unit(energy, suite, secs, 8.0 * n as f64, &mut launch)?;
    roofs.keep_byte("dram", &xs);
    roofs.notes.push(format!(
        "{}; the constant power is the board's idle power measured first (context open); each figure is the power above it over the kernel's rate, the kernel launched back to back for {} stretches of {} ms (timed between counter changes, the counter read every few ms) after a warm-up one (median, spread over the stretches); counter updates every {}",
        energy.description()?,
        STRETCHES,
        crate::schema::units::sig3(stretch_seconds(energy) * 1e3),
        energy
            .granularity_seconds()
            .map_or("? (fewer than three changes while idle)".to_string(), |g| format!("{} ms", crate::schema::units::sig3(g * 1e3)))
    ));
    Ok(roofs)
}

/// The precision part of a cuBLASLt GEMM's energy key.
fn gemm_precision(ty: super::blas::GemmType) -> &'static str {
    match ty {
        super::blas::GemmType::Bf16 => "bf16",
        super::blas::GemmType::Fp16 => "half",
        super::blas::GemmType::Tf32 => "tf32",
        super::blas::GemmType::Fp8 => "fp8",
        super::blas::GemmType::Fp64 => "double",
    }
}

/// Seconds slept between readings while a command runs (an NVML read itself takes about
/// 2.5 ms on the H200).
const COMMAND_POLL_SECONDS: f64 = 5e-4;

/// The boards `gpu measure --energy` reads: every GPU the CUDA driver lists here (the command
/// inherits `CUDA_VISIBLE_DEVICES`, so these are the boards it could use), each with its
/// context open (kept by the caller while the command runs, so each idle power is that of a
/// board ready to run) and its meter started, the idle windows measured side by side; and the
/// NVML boards left out (hidden from CUDA), by PCI address. With
/// [`RECORDING_ENV`] set, the one board `ordinal` replays it.
pub struct Boards {
    /// Held open while the command runs, not read.
    #[allow(dead_code)]
    pub contexts: Vec<Arc<CudaContext>>,
    pub meters: Vec<Energy>,
    /// `gpu<ordinal>` of each counted board.
    pub counted: Vec<String>,
    /// NVML boards not counted: `PCI address (name)`.
    pub left_out: Vec<String>,
}

/// Open every board CUDA lists and start its meter: see [`Boards`].
pub fn start_boards(ordinal: usize, options: EnergyOptions) -> Result<Boards> {
    use crate::counters::energy::nvml;
    if std::env::var_os(RECORDING_ENV).is_some() {
        let ctx = super::device::open(ordinal)?;
        let meter = start(&ctx, options)?;
        return Ok(Boards {
            contexts: vec![ctx],
            meters: vec![meter],
            counted: vec![nvml::gpu_domain_name(ordinal)],
            left_out: Vec::new(),
        });
    }
    let count = CudaContext::device_count().map_err(cuda_err("counting the GPUs"))?.max(0) as usize;
    let contexts: Vec<Arc<CudaContext>> = (0..count).map(super::device::open).collect::<Result<_>>()?;
    let ids: Vec<String> = contexts.iter().map(pci_bus_id).collect::<Result<_>>()?;
    let meters: Vec<Energy> = std::thread::scope(|scope| {
        let started: Vec<_> = contexts
            .iter()
            .zip(&ids)
            .map(|(ctx, id)| scope.spawn(move || Energy::with_meter(nvml::open_gpu(id, ctx.ordinal())?, options)))
            .collect();
        started
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::unavailable("a GPU meter's thread panicked", "run again")))
            })
            .collect::<Result<Vec<Energy>>>()
    })?;
    let left_out = nvml::boards()?
        .into_iter()
        .filter(|(id, _)| !ids.iter().any(|c| nvml::same_bus_id(c, id)))
        .map(|(id, name)| format!("{id} ({name})"))
        .collect();
    Ok(Boards {
        counted: contexts.iter().map(|c| nvml::gpu_domain_name(c.ordinal())).collect(),
        contexts,
        meters,
        left_out,
    })
}

/// `gpu measure --energy`: one run of the whole command `argv` of its own, without Nsight
/// Compute (which replays each kernel many times with its clocks locked, so no joules belong
/// to one launch), every board's counter read all along on a thread of its own. The command
/// starts right after an update of each counter is seen and the readings go on until the
/// first update of each after it exits, so the windows' ends outside the run are a read gap
/// before and at most an update interval after (taken off at the idle power: see
/// [`crate::counters::energy::whole_run_of`]). Each board is reckoned on its own counter and
/// clock, and the boards summed. The command's stdout goes to stderr: the report owns stdout.
/// `Ok(Err(status))` when the command failed (said on stderr, nothing written).
pub fn measure_command(boards: &Boards, argv: &[String]) -> Result<std::result::Result<CommandEnergy, i32>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let cmd = crate::counters::command::CommandSpec::resolve(argv)?;
    let meters = &boards.meters;
    // How long to wait for an update on either side of the run: three update intervals.
    let patience = meters
        .iter()
        .map(|e| (3.0 * e.granularity_seconds().unwrap_or(1.0)).max(0.3))
        .fold(0.3, f64::max);
    let windows: Vec<Window> = meters.iter().map(|e| e.window()).collect::<Result<_>>()?;
    let stop = AtomicBool::new(false);
    let (run, polled) = std::thread::scope(|scope| {
        let poller = scope.spawn(|| -> Result<()> {
            while !stop.load(Ordering::Relaxed) {
                for (e, w) in meters.iter().zip(&windows) {
                    e.mark(w)?;
                }
                std::thread::sleep(std::time::Duration::from_secs_f64(COMMAND_POLL_SECONDS));
            }
            Ok(())
        });
        let run = run_between_updates(meters, &windows, &cmd, patience);
        stop.store(true, Ordering::Relaxed);
        (run, poller.join())
    });
    polled.map_err(|_| Error::unavailable("the energy counter's reading thread panicked", "run again"))??;
    let spans = match run? {
        Ok(spans) => spans,
        Err(status) => return Ok(Err(status)),
    };
    let mut wholes = Vec::with_capacity(meters.len());
    for ((e, w), (start, end)) in meters.iter().zip(&windows).zip(&spans) {
        wholes.push(e.whole_run(&w.readings(), *start, *end)?);
    }
    // The run's length on the first board's clock (every board's differs by the reads
    // between them).
    let seconds = spans.first().map_or(0.0, |(a, b)| b - a);
    Ok(Ok(command_energy(
        crate::counters::energy::combine_boards(wholes),
        seconds,
        &boards.counted,
        &boards.left_out,
    )))
}

/// The command run between readings of every board, after an update of each counter is seen
/// and until one of each is seen after it exits (each wait at most `patience` seconds): the
/// run's start and end on each board's clock, or the command's status when it failed.
#[allow(clippy::type_complexity)]
fn run_between_updates(
    meters: &[Energy],
    windows: &[Window],
    cmd: &crate::counters::command::CommandSpec,
    patience: f64,
) -> Result<std::result::Result<Vec<(f64, f64)>, i32>> {
    for w in windows {
        if let Some(first) = w.readings().first() {
            wait_for_update(w, first, patience);
        }
    }
    let stdout = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::io("duplicating stderr for the command's stdout", e))?;
    let mut command = cmd.command();
    command.stdout(stdout);
    let before: Vec<_> = meters.iter().zip(windows).map(|(e, w)| e.mark(w)).collect::<Result<_>>()?;
    let status = cmd.run_to_end(&mut command)?;
    let after: Vec<_> = meters.iter().zip(windows).map(|(e, w)| e.mark(w)).collect::<Result<_>>()?;
    let (code, signal) = crate::counters::command::exit_code(&status);
    if signal.is_some() || code != 0 {
        eprintln!(
            "roofline: {} {} in its energy run; no report written",
            cmd.argv[0],
            signal.map_or(format!("exited with status {code}"), |s| format!("was killed by signal {s}"))
        );
        return Ok(Err(code));
    }
    for (w, a) in windows.iter().zip(&after) {
        wait_for_update(w, a, patience);
    }
    Ok(Ok(before.iter().zip(&after).map(|(b, a)| (b.seconds, a.seconds)).collect()))
}

/// Wait (at most `patience` seconds) until a reading after `since` shows the first domain's
/// count changed.
fn wait_for_update(window: &Window, since: &crate::counters::energy::Reading, patience: f64) {
    let t0 = std::time::Instant::now();
    while !window.changed_since(since) && t0.elapsed().as_secs_f64() < patience {
        std::thread::sleep(std::time::Duration::from_secs_f64(COMMAND_POLL_SECONDS));
    }
}

/// The report's `command_energy`: the run's figures and the one line that says what they are,
/// naming the boards counted and those left out.
pub fn command_energy(whole: crate::counters::energy::WholeRun, seconds: f64, counted: &[String], left_out: &[String]) -> CommandEnergy {
    use crate::schema::units::sig3;
    let e = &whole.energy;
    let sum = |f: &dyn Fn(&str) -> Option<f64>| counted.iter().filter_map(|b| f(b)).sum::<f64>();
    let watts = sum(&|b| e.domains.get(b).map(|d| d.watts));
    let idle_watts = sum(&|b| e.idle.get(b).map(|i| i.watts));
    let idle_seconds = e.idle.values().map(|i| i.seconds).fold(0.0, f64::max);
    let boards = if counted.len() > 1 {
        let each: Vec<String> = counted
            .iter()
            .map(|b| format!("{b} {} J", sig3(e.domains.get(b).map_or(0.0, |d| d.joules))))
            .collect();
        format!("{} GPU boards summed: {}", counted.len(), each.join(", "))
    } else {
        "the GPU board".to_string()
    };
    let left = if left_out.is_empty() {
        String::new()
    } else {
        format!(
            "; not counted: {} (hidden from CUDA here, so from the command too)",
            left_out.join(", ")
        )
    };
    let measured = format!(
        "the whole command, one run of its own without Nsight Compute (ncu replays each kernel, so no joules belong to one kernel): {} J on {} ({boards}) over {} s, {} W mean; idle {} W measured for {} s before (a CUDA context open, nothing running), {}; ± {} J{left}",
        sig3(e.total_joules),
        e.total_domain,
        sig3(seconds),
        sig3(watts),
        sig3(idle_watts),
        sig3(idle_seconds),
        if e.idle_subtracted { "subtracted" } else { "not subtracted" },
        sig3(whole.uncertainty_joules)
    );
    CommandEnergy {
        measured,
        seconds,
        energy: whole.energy,
        uncertainty_joules: whole.uncertainty_joules,
    }
}
