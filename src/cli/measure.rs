//! `roofline measure` (issue 5): W, Q and T of a command, from hardware counters (perf) or
//! by tracing (trace), as a `roofline.report/1` document.

use anyhow::Context;
use clap::Args as ClapArgs;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::cli::common::{OutputArgs, PlatformArg};
use crate::counters::perf::{self, CommandSpec, CounterSpec, EventCount, SYSFS_PMUS, Scope};
use crate::counters::{BackendKind, Measurement, events};
use crate::error::Error;
use crate::machine::Platform;
use crate::report::{Environment, Report};

pub use crate::counters::team::EventSet;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// perf: hardware counters; trace: ptrace + decoding; auto: perf when a usable core PMU exists.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Run the command this many times; T is the median, every run is kept. With the trace
    /// backend the command is traced once (W, Q) and then run natively this many times (T).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Also count the system-wide (uncore) events for as long as the command ran, with no
    /// command, and subtract that background from the memory traffic.
    #[arg(long)]
    pub idle_baseline: bool,
    /// Which events the perf backend counts.
    #[arg(long, value_enum, default_value = "platform")]
    pub events: EventSet,
    /// Also count the platform's opt-in events (single precision, FP16).
    #[arg(long)]
    pub optional_events: bool,
    /// Leave out system-wide uncore (memory) events: no DRAM traffic, no paranoid 0 needed.
    #[arg(long)]
    pub no_uncore: bool,
    #[command(flatten)]
    pub platform: PlatformArg,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The command and its arguments (run directly, never through a shell).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Trace backend: `flops` counts W and core Q by block (fast); `memory` single-steps and
    /// feeds every address to the cache simulator for Q per level.
    #[arg(long, value_enum, default_value = "flops")]
    pub trace: crate::counters::trace::TraceMode,
    /// Trace backend: attribute W and Q to functions (ELF symbols).
    #[arg(long = "by-function")]
    pub by_function: bool,
    /// Trace memory mode (needs `--trace memory`): the simulated hierarchy, e.g.
    /// `L1=48KiB:12,L2=2MiB:16,L3=8MiB:16:inclusive` (default: this machine's caches).
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
}

/// With `--json` the document owns stdout: the measured command's stdout (traced runs, native
/// runs, perf runs: every child inherits it) goes to stderr instead, as hyperfine does with its
/// export options. Returns the real stdout, to print the document on.
fn stdout_for_json_only() -> anyhow::Result<std::fs::File> {
    let saved = nix::unistd::dup(std::io::stdout()).context("dup(stdout)")?;
    nix::unistd::dup2_stdout(std::io::stderr()).context("dup2(stderr, stdout)")?;
    Ok(std::fs::File::from(saved))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let out = args.output.check(&["json"])?;
    let mut json_stdout = if args.output.json { Some(stdout_for_json_only()?) } else { None };
    // Missing, not executable, a directory: said with the path before anything starts.
    crate::counters::trace::sys::resolve_command(&args.command[0])?;
    let pmus = Path::new(SYSFS_PMUS);
    check_trace_options(&args, args.backend)?;
    let backend = choose_backend(args.backend, args.events, pmus);
    check_trace_options(&args, backend)?;
    let (measurement, code) = match backend {
        BackendKind::Trace => trace_command(&args)?,
        BackendKind::Perf => perf_command(&args, pmus)?,
        BackendKind::Analytic => anyhow::bail!(Error::input(
            "`--backend analytic` counts suite kernels, not commands",
            "use `roofline run KERNEL --backend analytic`, or `--backend perf|trace` here",
        )),
        BackendKind::Auto => unreachable!("resolved by choose_backend"),
    };
    let Some(measurement) = measurement else { return Ok(code) };

    let name = Path::new(&args.command[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| args.command[0].clone());
    let mut env = environment();
    env.measured_ghz = measurement.extra.get("effective_ghz").and_then(|g| g.as_f64());
    let mut report = Report::new(machine_summary(), env);
    let mut point = measurement.into_point(name);
    if point.provenance.flops.is_none() {
        point.gflops = None; // W was not counted: no rate either.
    }
    report.points.push(point);
    let json = report.to_json();
    if let Some((file, _)) = out {
        file.write(json.as_bytes())?;
    }
    if let Some(f) = json_stdout.as_mut() {
        writeln!(f, "{json}").context("writing the JSON document")?;
    } else {
        print_table(&report);
    }
    Ok(code)
}

/// `auto`: perf when a usable core PMU exists (or only software events are asked for),
/// else trace; says which and why on stderr.
fn choose_backend(asked: BackendKind, events: EventSet, pmus: &Path) -> BackendKind {
    if asked != BackendKind::Auto {
        return asked;
    }
    if events == EventSet::Software {
        eprintln!("roofline: backend auto → perf (software events need no hardware PMU)");
        return BackendKind::Perf;
    }
    let paranoid = perf::paranoid();
    match perf::core_pmu(pmus).and_then(|pmu| perf::check_paranoid(paranoid, false).map(|_| pmu)) {
        Ok(pmu) => {
            let lvl = paranoid.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into());
            eprintln!("roofline: backend auto → perf (core PMU `{pmu}` present, perf_event_paranoid {lvl})");
            BackendKind::Perf
        }
        Err(e) => {
            let why = e.to_string();
            eprintln!("roofline: backend auto → trace ({})", why.lines().next().unwrap_or(""));
            BackendKind::Trace
        }
    }
}

/// `--cache` only means something to the cache simulator: `--backend trace --trace memory`
/// (it does not switch memory mode on by itself, which single-steps and is far slower).
/// Called with the backend asked for and again with the one `auto` chose.
fn check_trace_options(args: &Args, backend: BackendKind) -> crate::Result<()> {
    use crate::counters::trace::TraceMode;
    if let Some(spec) = &args.cache {
        if backend == BackendKind::Perf || backend == BackendKind::Analytic {
            return Err(Error::input(
                format!(
                    "--cache {spec}: the cache simulator belongs to the trace backend, not --backend {}",
                    if backend == BackendKind::Perf { "perf" } else { "analytic" }
                ),
                "use `--backend trace --trace memory --cache SPEC`",
            ));
        }
        if args.trace == TraceMode::Flops {
            return Err(Error::input(
                format!("--cache {spec} needs --trace memory (flops mode simulates no cache)"),
                "add `--trace memory` (it single-steps the command: much slower), or drop --cache",
            ));
        }
    }
    Ok(())
}

/// `--backend trace`: W and core Q by tracing the command once; with `--trace memory`, Q per
/// level from the cache simulator. T from `--repeat` native runs of the command afterwards
/// (argv, no shell, stdin/stdout/stderr inherited as in the perf path). The command's own
/// failure is passed through as its status.
fn trace_command(args: &Args) -> anyhow::Result<(Option<Measurement>, i32)> {
    use crate::counters::{cachesim, trace};
    let mut m = if args.trace == trace::TraceMode::Memory || (args.trace == trace::TraceMode::Reference && args.cache.is_some()) {
        let sim = match &args.cache {
            Some(spec) => cachesim::parse_cache_hierarchy(spec)?,
            None => cachesim::CacheHierarchy::from_machine(&crate::machine::detect_static(&Default::default())?)?,
        };
        // The levels' bytes and the simulator's note are in `m` already (trace_command).
        trace::measure_command_with_sink(
            &args.command,
            args.by_function,
            Box::new(sim),
            args.trace == trace::TraceMode::Reference,
        )?
        .0
    } else {
        let opts = trace::TraceOptions {
            mode: args.trace,
            by_function: args.by_function,
            sink: None,
        };
        trace::measure_command(&args.command, &opts)?
    };
    let mut samples = Vec::with_capacity(args.repeat as usize);
    for rep in 0..args.repeat {
        match native_run(&args.command)? {
            Ok(secs) => samples.push(secs),
            Err((code, what)) => {
                eprintln!(
                    "roofline: {} {what} in its native run {} of {} (after the trace); no report written",
                    args.command[0],
                    rep + 1,
                    args.repeat
                );
                return Ok((None, code));
            }
        }
    }
    m.seconds_samples = samples;
    m.extra.insert("repeats".into(), serde_json::json!(args.repeat));
    if let Some(p) = m.provenance.as_mut() {
        p.seconds = Some(crate::report::Source::Native);
        p.notes.push(format!(
            "W and Q from one traced run; T from {} native run(s) after it",
            args.repeat
        ));
    }
    Ok((Some(m), 0))
}

/// One native run of `argv` (no shell, stdio inherited), timed from spawn to exit:
/// `Ok(Ok(seconds))`, or `Ok(Err((exit code to pass on, what happened)))` when it failed.
fn native_run(argv: &[String]) -> anyhow::Result<Result<f64, (i32, String)>> {
    let program = crate::counters::trace::sys::resolve_command(&argv[0])?;
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&argv[1..]);
    let t0 = std::time::Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        Error::input(
            format!("cannot run {}: {e}", program.display()),
            "check the command and its permissions",
        )
    })?;
    let status = child.wait().map_err(|e| Error::io("waiting for the command", e))?;
    let secs = t0.elapsed().as_secs_f64();
    let (code, signal) = perf::exit_code(&status);
    Ok(match signal {
        Some(sig) => {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("signal {sig}"));
            Err((code, format!("was killed by {name}")))
        }
        None if code != 0 => Err((code, format!("exited with status {code}"))),
        None => Ok(secs),
    })
}

/// The identified platform (or `--platform`).
fn platform(arg: &PlatformArg) -> anyhow::Result<Platform> {
    if let Some(spec) = &arg.platform {
        return Ok(Platform::load(spec)?);
    }
    perf::identify_platform().ok_or_else(|| {
        Error::input(
            "unknown microarchitecture: no platform file matches this CPU's vendor, family and model",
            "pass `--platform NAME|FILE` (see `platforms/`), or use `--backend trace`",
        )
        .into()
    })
}

fn perf_command(args: &Args, pmus: &Path) -> anyhow::Result<(Option<Measurement>, i32)> {
    let (specs, counters, notes) = crate::counters::team::select_events(
        args.events,
        pmus,
        args.platform.platform.as_deref(),
        args.optional_events,
        !args.no_uncore,
    )?;
    let plat = match args.events {
        EventSet::Software => None,
        EventSet::Platform => Some(platform(&args.platform.clone())?),
    };
    let plan = perf::plan_groups(&specs, counters);
    let hw_groups = plan.iter().filter(|g| specs[g[0]].scope == Scope::Core).count();
    if hw_groups > 1 {
        eprintln!(
            "roofline: {hw_groups} hardware event groups do not fit the counters at once: the kernel multiplexes them (ratios below)"
        );
    }
    for n in &notes {
        eprintln!("roofline: {n}");
    }
    let cmd = CommandSpec {
        argv: args.command.clone(),
        env: Vec::new(),
    };
    let mut runs: Vec<(f64, Vec<EventCount>)> = Vec::new();
    for rep in 0..args.repeat {
        let run = perf::run_command(&specs, &plan, &cmd)?;
        let (code, signal) = perf::exit_code(&run.status);
        if let Some(sig) = signal {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("signal {sig}"));
            eprintln!(
                "roofline: {} was killed by {name} (run {} of {}); no report written",
                args.command[0],
                rep + 1,
                args.repeat
            );
            return Ok((None, code));
        }
        if code != 0 {
            eprintln!(
                "roofline: {} exited with status {code} (run {} of {}); no report written",
                args.command[0],
                rep + 1,
                args.repeat
            );
            return Ok((None, code));
        }
        for w in perf::multiplex_warnings(&run.counts) {
            eprintln!("roofline: {w}");
        }
        runs.push((run.wall_seconds, run.counts));
    }
    let samples: Vec<f64> = runs.iter().map(|r| r.0).collect();
    // W and Q from the run with the median time (counts of every run are kept in `extra`).
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| runs[a].0.total_cmp(&runs[b].0));
    let median_run = order[order.len() / 2];
    let mut m = perf::to_measurement(&specs, &runs[median_run].1, samples.clone());
    m.extra.insert("repeats".into(), serde_json::json!(args.repeat));
    if runs.len() > 1 {
        let per_run: Vec<serde_json::Value> = runs
            .iter()
            .map(|(wall, counts)| {
                let c: serde_json::Map<String, serde_json::Value> = counts
                    .iter()
                    .map(|c| (c.name.clone(), serde_json::json!(c.scaled.map(|s| s.value))))
                    .collect();
                serde_json::json!({ "seconds": wall, "counts": c })
            })
            .collect();
        m.extra.insert("runs".into(), serde_json::Value::Array(per_run));
    }
    m.extra.insert(
        "hardware_groups".into(),
        serde_json::json!(
            plan.iter()
                .filter(|g| specs[g[0]].scope == Scope::Core)
                .map(|g| g.iter().map(|&i| specs[i].name.clone()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        ),
    );
    if let Some(prov) = m.provenance.as_mut() {
        prov.notes.extend(notes);
    }
    // On the counts as read, before a background is subtracted (which could hide a phantom).
    check_plausible(&m, samples[median_run], plat.as_ref().map(|p| p.key.as_str()))?;
    if args.idle_baseline {
        idle_baseline(&specs, &mut m, samples[median_run])?;
    }
    Ok((Some(m), 0))
}

fn idle_baseline(specs: &[CounterSpec], m: &mut Measurement, seconds: f64) -> anyhow::Result<()> {
    if !specs.iter().any(|s| matches!(s.scope, Scope::Uncore { .. })) {
        eprintln!("roofline: --idle-baseline: no system-wide events are counted, nothing to baseline");
        return Ok(());
    }
    eprintln!("roofline: measuring the idle background for {seconds:.2} s (--idle-baseline)");
    let idle = perf::idle_baseline(specs, Duration::from_secs_f64(seconds))?;
    let base = perf::to_measurement(specs, &idle, vec![seconds]);
    let mut subtracted = serde_json::Map::new();
    for (lvl, b) in &base.bytes {
        if let Some(v) = m.bytes.get_mut(lvl) {
            *v = (*v - b).max(0.0);
            subtracted.insert(lvl.clone(), serde_json::json!(b));
        }
    }
    m.extra.insert("idle_baseline_bytes".into(), serde_json::Value::Object(subtracted));
    if let Some(prov) = m.provenance.as_mut() {
        prov.notes
            .push("system-wide bytes have the idle background (same duration, no command) subtracted".into());
    }
    Ok(())
}

/// Reject counts that cannot be true, like LIKWID's phantom-channel 1.88e19 bytes: more
/// DRAM bytes than `seconds` × 10× the platform's peak bandwidth (the check `import` makes;
/// an unknown platform gets the most generous ceiling).
fn check_plausible(m: &Measurement, seconds: f64, platform_key: Option<&str>) -> anyhow::Result<()> {
    let Some(&b) = m.bytes.get("dram") else { return Ok(()) };
    events::check_dram_plausible(b, seconds, platform_key.unwrap_or("unknown")).map_err(|e| match e {
        Error::Input { cause, .. } => Error::unavailable(
            cause,
            "an uncore event is miscounting (a phantom memory channel?) or --platform is wrong: check the memory events with `perf stat -a`",
        ),
        other => other,
    })?;
    Ok(())
}

fn machine_summary() -> serde_json::Value {
    let cpuid = raw_cpuid::CpuId::new();
    serde_json::json!({
        "vendor": cpuid.get_vendor_info().map(|v| v.as_str().to_string()),
        "brand": cpuid.get_processor_brand_string().map(|b| b.as_str().trim().to_string()),
        "microarchitecture": perf::identify_platform().map(|p| p.key),
    })
}

fn environment() -> Environment {
    let cpuid = raw_cpuid::CpuId::new();
    Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        // roofline's own argv, which holds the measured command after `--`.
        command_line: std::env::args().collect(),
        hypervisor: cpuid.get_hypervisor_info().map(|h| format!("{:?}", h.identify())),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string()),
        ..Environment::default()
    }
}

fn print_table(r: &Report) {
    let mut s = String::new();
    for p in &r.points {
        s += &format!("{}: T {:.6} s (median of {})\n", p.name, p.seconds, p.seconds_samples.len());
        if p.provenance.flops.is_some() {
            s += &format!("  W {:.4e} flop", p.flops.total);
            if let Some(g) = p.gflops {
                s += &format!("  ({g:.3} GFLOP/s)");
            }
            s += "\n";
            for (c, v) in &p.flops.by_class {
                s += &format!("    {c:<20} {v:.4e}\n");
            }
        } else {
            s += "  W not counted\n";
        }
        for (lvl, b) in &p.bytes {
            s += &format!("  Q {lvl:<5} {}", crate::util::fmt_bytes(*b));
            if let Some(g) = p.gbs.get(lvl) {
                s += &format!("  ({g:.3} GB/s, AI {:.3})", p.ai.get(lvl).copied().unwrap_or(0.0));
            }
            s += "\n";
        }
        if let Some(counts) = p.extra.get("counts").and_then(|c| c.as_object()) {
            for (k, v) in counts {
                s += &format!("  {k:<24} {}\n", v.as_f64().map(|x| format!("{x:.0}")).unwrap_or_default());
            }
        }
        if let Some(rows) = p.extra.get("by_function").and_then(|r| r.as_array()) {
            s += &by_function_table(rows, p.flops.total);
        }
        if let Some(g) = p.extra.get("effective_ghz").and_then(|g| g.as_f64()) {
            s += &format!("  effective clock {g:.3} GHz (cycles / task-clock)\n");
        }
        for n in &p.provenance.notes {
            s += &format!("  note: {n}\n");
        }
    }
    let _ = std::io::stdout().write_all(s.as_bytes()).context("writing the table");
}

/// Rows of the per-function table printed at most; the rest are summed in one line.
const BY_FUNCTION_ROWS: usize = 25;

/// `--by-function` as text: function, instructions, flops, core bytes and the function's share
/// of all flops, most flops first (then most instructions). Counts are exact integers.
fn by_function_table(rows: &[serde_json::Value], total_flops: f64) -> String {
    fn num(r: &serde_json::Value, k: &str) -> u64 {
        r.get(k).and_then(|v| v.as_u64()).unwrap_or(0)
    }
    let mut rows: Vec<&serde_json::Value> = rows.iter().collect();
    rows.sort_by(|a, b| {
        num(b, "flops")
            .cmp(&num(a, "flops"))
            .then(num(b, "instructions").cmp(&num(a, "instructions")))
    });
    let share = |f: u64| {
        if total_flops > 0.0 {
            format!("{:.1}%", 100.0 * f as f64 / total_flops)
        } else {
            "-".to_string()
        }
    };
    let width = rows
        .iter()
        .take(BY_FUNCTION_ROWS)
        .map(|r| r.get("function").and_then(|f| f.as_str()).unwrap_or("?").chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 60);
    let mut s = format!(
        "  by function (most flops first)\n    {:<width$} {:>14} {:>14} {:>14} {:>7}\n",
        "function", "instructions", "flops", "core bytes", "share"
    );
    for r in rows.iter().take(BY_FUNCTION_ROWS) {
        let name = r.get("function").and_then(|f| f.as_str()).unwrap_or("?");
        let f = num(r, "flops");
        s += &format!(
            "    {name:<width$} {:>14} {:>14} {:>14} {:>7}\n",
            num(r, "instructions"),
            f,
            num(r, "core_bytes"),
            share(f)
        );
    }
    if rows.len() > BY_FUNCTION_ROWS {
        let rest = &rows[BY_FUNCTION_ROWS..];
        let sum = |k: &str| rest.iter().map(|r| num(r, k)).sum::<u64>();
        let f = sum("flops");
        s += &format!(
            "    {:<width$} {:>14} {:>14} {:>14} {:>7}\n",
            format!("({} more, see --json)", rest.len()),
            sum("instructions"),
            f,
            sum("core_bytes"),
            share(f)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_function_table_sorts_by_flops_and_gives_shares() {
        let rows = vec![
            serde_json::json!({"function": "init (a.out)", "instructions": 900, "flops": 0, "core_bytes": 4000}),
            serde_json::json!({"function": "small (a.out)", "instructions": 50, "flops": 25, "core_bytes": 8}),
            serde_json::json!({"function": "big (a.out)", "instructions": 100, "flops": 75, "core_bytes": 16}),
        ];
        let t = by_function_table(&rows, 100.0);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(cols(lines[2]), ["big", "(a.out)", "100", "75", "16", "75.0%"]);
        assert_eq!(cols(lines[3]), ["small", "(a.out)", "50", "25", "8", "25.0%"]);
        assert_eq!(cols(lines[4]), ["init", "(a.out)", "900", "0", "4000", "0.0%"]);
        // No flops at all: no share.
        assert!(by_function_table(&rows[..1], 0.0).lines().nth(2).unwrap().ends_with(" -"));
    }

    #[test]
    fn cache_needs_trace_memory_and_the_trace_backend() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: Args,
        }
        let parse = |v: &[&str]| Cli::try_parse_from(v).unwrap().a;
        let flops = parse(&["x", "--backend", "trace", "--cache", "L1=32KiB:8", "--", "true"]);
        let e = check_trace_options(&flops, BackendKind::Trace).unwrap_err();
        assert!(e.to_string().contains("needs --trace memory"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let perf = parse(&["x", "--backend", "perf", "--trace", "memory", "--cache", "L1=32KiB:8", "--", "true"]);
        assert!(check_trace_options(&perf, BackendKind::Perf).is_err());
        let ok = parse(&[
            "x",
            "--backend",
            "trace",
            "--trace",
            "memory",
            "--cache",
            "L1=32KiB:8",
            "--",
            "true",
        ]);
        assert!(check_trace_options(&ok, BackendKind::Trace).is_ok());
        assert!(check_trace_options(&parse(&["x", "--", "true"]), BackendKind::Perf).is_ok());
    }

    fn with_dram(bytes: f64) -> Measurement {
        let mut m = Measurement::default();
        m.bytes.insert("dram".into(), bytes);
        m
    }

    #[test]
    fn dram_plausibility_is_the_platforms_not_a_flat_10_tb_s() {
        // A client Haswell moves ~60 GB/s: 1 TB in one second is impossible there (the
        // flat 10 TB/s check let it through) but fine for a Sapphire Rapids system.
        let e = check_plausible(&with_dram(1e12), 1.0, Some("hsw")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cannot be true") && msg.contains("phantom memory channel"), "{msg}");
        assert_eq!(e.downcast_ref::<Error>().map(Error::exit_code), Some(2));
        assert!(check_plausible(&with_dram(5e10), 1.0, Some("hsw")).is_ok());
        // 50 TB/s: over the flat limit, under 10x eight SPR sockets with HBM.
        assert!(check_plausible(&with_dram(5e13), 1.0, Some("spr")).is_ok());
        // LIKWID's phantom channel is refused everywhere, unknown platforms included.
        assert!(check_plausible(&with_dram(1.88e19), 10.0, None).is_err());
        assert!(check_plausible(&Measurement::default(), 1.0, Some("hsw")).is_ok());
    }

    #[test]
    fn zen1_says_q_dram_is_unavailable() {
        // The notes perf_command prints and keeps: Zen 1 says Q_dram is unavailable.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("cpu")).unwrap();
        std::fs::write(dir.path().join("cpu/type"), "4\n").unwrap();
        let zen1 = Platform::load("zen1").unwrap();
        let (specs, notes) = perf::counters_for_platform(&zen1, dir.path(), false, true, false).unwrap();
        assert!(notes.iter().any(|n| n.starts_with("Q_dram unavailable")), "{notes:?}");
        assert!(specs.iter().any(|s| s.quantity == "cycles") && specs.iter().any(|s| s.name == "task-clock"));
    }
}
