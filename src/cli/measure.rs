//! `roofline measure`: W, Q and T of a command, from hardware counters (perf) or
//! by tracing (trace), as a `roofline.report/1` document.

use anyhow::Context;
use clap::Args as ClapArgs;
use std::io::Write;

use crate::cli::common::{OutputArgs, PlatformArg};
use crate::counters::BackendKind;
use crate::counters::backend::{self, CommandOptions, CommandOutcome};
use crate::schema::Report;

pub use crate::counters::team::EventSet;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// perf: hardware counters; trace: ptrace + decoding; auto: perf when a usable core PMU exists;
    /// simulated: the simulated PMU, a test instrument (faults from ROOFLINE_SIMULATED_PMU, see
    /// docs/validate.md), never chosen by auto.
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
    /// Also count the platform's opt-in events (single precision, FP16, and the FMA flops
    /// (`flops.fma`) of AMD Zen 1–4's MAC umasks).
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
    /// Trace backend: `flops` counts W and core Q by block (fast); `memory` also feeds every
    /// address, in program order, to the cache simulator for Q per level (computed per block
    /// and per loop; single-stepped only where an address cannot be computed).
    #[arg(long, value_enum, default_value = "flops")]
    pub trace: crate::counters::trace::TraceMode,
    /// Trace backend: attribute W and Q to functions: the innermost frame of the program's
    /// own code through DWARF (inlined closures included), else the ELF symbol.
    #[arg(long = "by-function")]
    pub by_function: bool,
    /// Trace backend: attribute W and Q to source lines (`file:line`, needs line tables;
    /// JSON `extra.by_line`). Implies the per-function attribution.
    #[arg(long = "by-line")]
    pub by_line: bool,
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

impl Args {
    fn command_options(&self) -> CommandOptions {
        CommandOptions {
            repeat: self.repeat,
            idle_baseline: self.idle_baseline,
            events: self.events,
            optional_events: self.optional_events,
            uncore: !self.no_uncore,
            platform: self.platform.platform.clone(),
            trace: self.trace,
            by_function: self.by_function || self.by_line,
            cache: self.cache.clone(),
            trace_timing: true,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let out = args.output.check(&["json"])?;
    let mut json_stdout = if args.output.json { Some(stdout_for_json_only()?) } else { None };
    let measurement = match backend::measure_command(args.backend, &args.command, &args.command_options())? {
        CommandOutcome::Measured(m) => *m,
        CommandOutcome::Failed { status } => return Ok(status),
    };
    let report = backend::command_report(&args.command, measurement);
    let json = report.to_json();
    if let Some((file, _)) = out {
        file.write(json.as_bytes())?;
    }
    if let Some(f) = json_stdout.as_mut() {
        writeln!(f, "{json}").context("writing the JSON document")?;
    } else {
        let show = Show {
            functions: args.by_function,
            lines: args.by_line,
        };
        let _ = std::io::stdout()
            .write_all(measure_table(&report, show).as_bytes())
            .context("writing the table");
    }
    Ok(0)
}

/// Per point: T, W by class, Q per level with GB/s and AI, raw counts, the attribution tables
/// asked for, the effective clock and the notes.
fn measure_table(r: &Report, show: Show) -> String {
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
            s += &format!("  Q {lvl:<5} {}", crate::schema::units::fmt_bytes(*b));
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
        if let Some(rows) = p.extra.get("by_function").and_then(|r| r.as_array())
            && show.functions
        {
            s += &work_table(rows, p.flops.total, Attribution::Function);
        }
        if let Some(rows) = p.extra.get("by_line").and_then(|r| r.as_array())
            && show.lines
        {
            s += &work_table(rows, p.flops.total, Attribution::Line);
        }
        if let Some(g) = p.extra.get("effective_ghz").and_then(|g| g.as_f64()) {
            s += &format!("  effective clock {g:.3} GHz (cycles / task-clock)\n");
        }
        for n in &p.provenance.notes {
            s += &format!("  note: {n}\n");
        }
    }
    s
}

/// Rows of the per-function table printed at most; the rest are summed in one line.
const BY_FUNCTION_ROWS: usize = 25;

/// Which attribution tables the text output shows.
#[derive(Debug, Clone, Copy, Default)]
struct Show {
    functions: bool,
    lines: bool,
}

/// What the rows of a work table are.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Attribution {
    Function,
    Line,
}

/// `--by-function` / `--by-line` as text: function (or `file:line  function`), instructions,
/// flops, core bytes and the row's share of all flops, most flops first (then most
/// instructions). Counts are exact integers.
fn work_table(rows: &[serde_json::Value], total_flops: f64, what: Attribution) -> String {
    let label = |r: &serde_json::Value| -> String {
        let f = r.get("function").and_then(|f| f.as_str()).unwrap_or("?");
        match what {
            Attribution::Function => f.to_string(),
            Attribution::Line => format!("{}  {f}", r.get("line").and_then(|l| l.as_str()).unwrap_or("?")),
        }
    };
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
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 90);
    let (title, head) = match what {
        Attribution::Function => ("by function", "function"),
        Attribution::Line => ("by source line", "line  function"),
    };
    let mut s = format!(
        "  {title} (most flops first)\n    {head:<width$} {:>14} {:>14} {:>14} {:>7}\n",
        "instructions", "flops", "core bytes", "share"
    );
    for r in rows.iter().take(BY_FUNCTION_ROWS) {
        let name = label(r);
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
        let t = work_table(&rows, 100.0, Attribution::Function);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(cols(lines[2]), ["big", "(a.out)", "100", "75", "16", "75.0%"]);
        assert_eq!(cols(lines[3]), ["small", "(a.out)", "50", "25", "8", "25.0%"]);
        assert_eq!(cols(lines[4]), ["init", "(a.out)", "900", "0", "4000", "0.0%"]);
        // No flops at all: no share.
        assert!(
            work_table(&rows[..1], 0.0, Attribution::Function)
                .lines()
                .nth(2)
                .unwrap()
                .ends_with(" -")
        );
        // Lines: the row names the line, then the function.
        let lines = vec![
            serde_json::json!({"line": "src/a.rs:3", "function": "f (a)", "instructions": 4, "flops": 2, "core_bytes": 0}),
            serde_json::json!({"line": "src/a.rs:9", "function": "g (a)", "instructions": 4, "flops": 6, "core_bytes": 8}),
        ];
        let t = work_table(&lines, 8.0, Attribution::Line);
        let rows: Vec<&str> = t.lines().collect();
        assert!(rows[0].contains("by source line"), "{t}");
        assert_eq!(cols(rows[2]), ["src/a.rs:9", "g", "(a)", "4", "6", "8", "75.0%"]);
    }
}
