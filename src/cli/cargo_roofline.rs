//! `cargo roofline --bin NAME | --example NAME | --bench NAME [-o FILE] [--backend B] [-- ARGS]`:
//! build a target of the current crate in release with line tables and function names, run `roofline measure` on
//! it, and write the report (HTML by default), as cargo-flamegraph does for flame graphs.
//!
//! The target is checked against `cargo metadata` before anything builds; the executable is
//! the `compiler-artifact` message of `cargo build --message-format=json`; the measuring is
//! `roofline measure`'s own code, its JSON kept under `<target dir>/roofline/NAME.json`.

use anyhow::Context;
use clap::Parser;
use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::counters::BackendKind;
use crate::error::Error;
use crate::report::{self, PlotKind, View};
use crate::util::OutputFile;

#[derive(Debug, Parser)]
#[command(
    name = "cargo-roofline",
    bin_name = "cargo roofline",
    version = crate::cli::version(),
    about = "Build a target in release (with line tables and function names), measure it with roofline, write the report.",
    after_help = super::examples::CARGO_ROOFLINE
)]
pub struct Args {
    /// The binary target to measure (the package's only binary when no target is named).
    #[arg(long, value_name = "NAME", group = "target")]
    pub bin: Option<String>,
    /// An example target.
    #[arg(long, value_name = "NAME", group = "target")]
    pub example: Option<String>,
    /// A bench target (run with `--bench`, as `cargo bench` runs it).
    #[arg(long, value_name = "NAME", group = "target")]
    pub bench: Option<String>,
    /// Package of the workspace that holds the target.
    #[arg(short = 'p', long, value_name = "SPEC")]
    pub package: Option<String>,
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Features to build with (passed to cargo).
    #[arg(short = 'F', long, value_name = "FEATURES")]
    pub features: Option<String>,
    /// The report; its format follows the extension (.html, .svg, .png, .json). Default:
    /// roofline-NAME.html here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// perf: hardware counters; trace: ptrace + decoding; auto: perf where a usable core PMU
    /// exists, else trace.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Arguments for the program.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

pub const OUTPUT_EXTENSIONS: &[&str] = &["html", "svg", "png", "json"];

/// Which kind of target, as cargo names it in `target.kind` and on its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bin,
    Example,
    Bench,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Bin => "bin",
            Kind::Example => "example",
            Kind::Bench => "bench",
        }
    }
}

/// `cargo-roofline`'s entry: cargo runs it as `cargo-roofline roofline ARGS…`.
pub fn main() -> i32 {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "roofline") {
        argv.remove(1);
    }
    let args = Args::parse_from(argv);
    match run(args) {
        Ok(code) => code,
        Err(e) => super::report_error(&e),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let meta = metadata(&cargo, &args)?;
    let (kind, name) = pick_target(&args, &meta)?;
    let (out, ext) = OutputFile::check(
        &args
            .output
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("roofline-{name}.html"))),
        OUTPUT_EXTENSIONS,
    )?;
    let exe = build(&cargo, &args, kind, &name)?;
    eprintln!("cargo-roofline: measuring {}", exe.display());

    // The measure command's JSON: the report itself for -o x.json, else kept beside the
    // build for the rendering below.
    let json_path = if ext == "json" {
        out.path.clone()
    } else {
        let dir = meta["target_directory"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("target"))
            .join("roofline");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        dir.join(format!("{name}.json"))
    };
    // `auto` resolved here (said once on stderr), so the trace backend's attribution can be
    // asked for below.
    let (chosen, why) = crate::counters::choose(
        args.backend,
        crate::counters::Target::Command { software_only: false },
        Path::new(crate::counters::perf::SYSFS_PMUS),
    )?;
    if args.backend == BackendKind::Auto {
        eprintln!("roofline: backend auto → {} ({why})", chosen.name());
    }
    let backend = chosen.name();
    let mut measure_argv: Vec<OsString> = ["roofline", "measure", "--backend", backend].map(OsString::from).into();
    // Where the trace backend runs (chosen, or `auto` without a PMU), the report says which
    // function and line of the program did the work: the build has line tables for it.
    if chosen == BackendKind::Trace {
        measure_argv.push("--by-line".into());
    }
    measure_argv.push("-o".into());
    measure_argv.push(json_path.clone().into());
    measure_argv.push("--".into());
    measure_argv.push(exe.into_os_string());
    if kind == Kind::Bench {
        measure_argv.push("--bench".into());
    }
    measure_argv.extend(args.args.iter().map(OsString::from));
    let cli = super::Cli::try_parse_from(measure_argv).context("building the measure command line")?;
    let Some(super::Command::Measure(measure_args)) = cli.command else {
        unreachable!("the argv names the measure subcommand")
    };
    let code = super::measure::run(measure_args)?;
    if code != 0 || ext == "json" {
        if code == 0 {
            eprintln!("cargo-roofline: wrote {}", out.path.display());
        }
        return Ok(code);
    }
    let measured = report::read_report(&json_path)?;
    let view = View::new(vec![(name.clone(), measured)], None, PlotKind::All);
    report::write_view(&view, &out.path)?;
    eprintln!("cargo-roofline: wrote {} (JSON: {})", out.path.display(), json_path.display());
    Ok(0)
}

/// `cargo metadata --no-deps` of the manifest: its packages and target directory.
fn metadata(cargo: &OsString, args: &Args) -> anyhow::Result<serde_json::Value> {
    let mut c = Command::new(cargo);
    c.args(["metadata", "--format-version", "1", "--no-deps"]);
    if let Some(m) = &args.manifest_path {
        c.arg("--manifest-path").arg(m);
    }
    let out = c
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::unavailable(format!("cannot run cargo ({e})"), "run `cargo roofline` where cargo is installed"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(Error::input(
            format!(
                "cargo metadata failed: {}",
                err.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim()
            ),
            "run it inside a cargo package, or pass --manifest-path PATH/Cargo.toml",
        ));
    }
    serde_json::from_slice(&out.stdout).context("parsing cargo metadata")
}

/// The target asked for, checked against the packages' targets (a missing one is bad input,
/// said with the targets that exist); none asked: the only binary.
fn pick_target(args: &Args, meta: &serde_json::Value) -> anyhow::Result<(Kind, String)> {
    let asked = [(Kind::Bin, &args.bin), (Kind::Example, &args.example), (Kind::Bench, &args.bench)]
        .into_iter()
        .find_map(|(k, n)| n.clone().map(|n| (k, n)));
    let packages: Vec<&serde_json::Value> = meta["packages"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter(|p| args.package.as_deref().is_none_or(|want| p["name"] == want))
                .collect()
        })
        .unwrap_or_default();
    if let Some(want) = &args.package
        && packages.is_empty()
    {
        anyhow::bail!(Error::input(
            format!("-p {want}: no such package in this workspace"),
            "check the package name in Cargo.toml",
        ));
    }
    let targets_of = |kind: Kind| -> Vec<String> {
        let mut v: Vec<String> = packages
            .iter()
            .flat_map(|p| p["targets"].as_array().into_iter().flatten())
            .filter(|t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == kind.name())))
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    match asked {
        Some((kind, name)) => {
            let have = targets_of(kind);
            if have.contains(&name) {
                Ok((kind, name))
            } else {
                anyhow::bail!(Error::input(
                    format!("no {} target named `{name}`", kind.name()),
                    format!("{} targets here: {}", kind.name(), list(&have)),
                ))
            }
        }
        None => match targets_of(Kind::Bin).as_slice() {
            [one] => Ok((Kind::Bin, one.clone())),
            bins => anyhow::bail!(Error::input(
                "no target named: pass --bin NAME, --example NAME or --bench NAME",
                format!("binaries here: {}; examples: {}", list(bins), list(&targets_of(Kind::Example))),
            )),
        },
    }
}

/// `cargo build --release` of the target with line tables (what the trace backend's
/// per-function and per-line views read); the executable from its compiler-artifact message.
fn build(cargo: &OsString, args: &Args, kind: Kind, name: &str) -> anyhow::Result<PathBuf> {
    let mut c = Command::new(cargo);
    c.args(["build", "--release", "--message-format=json-render-diagnostics"]);
    c.arg(format!("--{}", kind.name())).arg(name);
    if let Some(p) = &args.package {
        c.args(["--package", p]);
    }
    if let Some(m) = &args.manifest_path {
        c.arg("--manifest-path").arg(m);
    }
    if let Some(f) = &args.features {
        c.args(["--features", f]);
    }
    // Benches build with the bench profile, which inherits release's but may set its own.
    // `limited` (debug = 1) rather than `line-tables-only`: the same line tables and inlined
    // frames, plus the functions' full paths, so an inlined closure reads
    // `app::daxpy::{{closure}}` and not a bare `{closure#0}` (trace/sources.rs).
    c.env("CARGO_PROFILE_RELEASE_DEBUG", "limited")
        .env("CARGO_PROFILE_BENCH_DEBUG", "limited");
    eprintln!(
        "cargo-roofline: cargo build --release --{} {name} (debug info: lines and function names)",
        kind.name()
    );
    let mut child = c
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::unavailable(format!("cannot run cargo ({e})"), "check the cargo installation"))?;
    let mut exe = None;
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.context("reading cargo's messages")?;
            if let Some(path) = artifact_executable(&line, kind, name) {
                exe = Some(path);
            }
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        anyhow::bail!(Error::input(
            format!("cargo build of {} `{name}` failed ({status})", kind.name()),
            "fix the errors above; `cargo build --release` shows the same",
        ));
    }
    exe.ok_or_else(|| {
        anyhow::anyhow!(Error::unavailable(
            format!("cargo built {} `{name}` but reported no executable for it", kind.name()),
            "run `cargo build --release --message-format=json` and report what it prints",
        ))
    })
}

/// The executable of a `compiler-artifact` message for this target, if the line is one.
fn artifact_executable(line: &str, kind: Kind, name: &str) -> Option<PathBuf> {
    let msg: serde_json::Value = serde_json::from_str(line).ok()?;
    if msg["reason"] != "compiler-artifact" || msg["target"]["name"] != name {
        return None;
    }
    if !msg["target"]["kind"].as_array()?.iter().any(|k| k == kind.name()) {
        return None;
    }
    msg["executable"].as_str().map(|p| Path::new(p).to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_comes_from_the_matching_artifact_message() {
        let msg = |name: &str, kind: &str, exe: Option<&str>| {
            serde_json::json!({
                "reason": "compiler-artifact",
                "target": {"name": name, "kind": [kind]},
                "executable": exe,
            })
            .to_string()
        };
        let line = msg("daxpy", "bin", Some("/t/release/daxpy"));
        assert_eq!(
            artifact_executable(&line, Kind::Bin, "daxpy"),
            Some(PathBuf::from("/t/release/daxpy"))
        );
        // Another target, another kind of the same name, a library (no executable), noise.
        assert_eq!(artifact_executable(&line, Kind::Bin, "dot"), None);
        assert_eq!(artifact_executable(&line, Kind::Example, "daxpy"), None);
        assert_eq!(artifact_executable(&msg("daxpy", "lib", None), Kind::Bin, "daxpy"), None);
        assert_eq!(artifact_executable("Compiling daxpy v0.1.0", Kind::Bin, "daxpy"), None);
        let done = serde_json::json!({"reason": "build-finished", "success": true}).to_string();
        assert_eq!(artifact_executable(&done, Kind::Bin, "daxpy"), None);
    }

    #[test]
    fn targets_are_checked_against_the_metadata() {
        let meta = serde_json::json!({"packages": [
            {"name": "app", "targets": [
                {"name": "app", "kind": ["bin"]},
                {"name": "demo", "kind": ["example"]},
                {"name": "speed", "kind": ["bench"]},
            ]},
            {"name": "tool", "targets": [{"name": "tool", "kind": ["bin"]}]},
        ]});
        let args = |extra: &[&str]| Args::parse_from([&["cargo-roofline"], extra].concat());
        assert_eq!(
            pick_target(&args(&["--example", "demo"]), &meta).unwrap(),
            (Kind::Example, "demo".into())
        );
        assert_eq!(
            pick_target(&args(&["--bench", "speed"]), &meta).unwrap(),
            (Kind::Bench, "speed".into())
        );
        let e = pick_target(&args(&["--bin", "nope"]), &meta).unwrap_err().to_string();
        assert!(
            e.contains("no bin target named `nope`") && e.contains("bin targets here: app, tool"),
            "{e}"
        );
        // Two binaries and none named: ask; one package chosen: its only binary.
        let e = pick_target(&args(&[]), &meta).unwrap_err().to_string();
        assert!(e.contains("--bin NAME") && e.contains("examples: demo"), "{e}");
        assert_eq!(pick_target(&args(&["-p", "tool"]), &meta).unwrap(), (Kind::Bin, "tool".into()));
        assert!(pick_target(&args(&["-p", "ghost"]), &meta).is_err());
        assert!(Args::try_parse_from(["cargo-roofline", "--bin", "a", "--example", "b"]).is_err());
    }
}
