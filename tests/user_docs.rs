//! What a user reads and pastes, run as written: every example of `roofline help <command>`,
//! every command block of README.md marked `<!-- checked -->`, and the criterion example with
//! no configuration.
//!
//! Commands run through `bash` in a scratch directory, with this build's `roofline` first on
//! PATH. Stand-ins for the user's own files sit there: `./my-app` is a real Rust program with
//! regions (`examples/regions`: one thread, so its counts repeat exactly from run to run),
//! `perf-stat.csv` a `perf stat -x,` file of a Sapphire Rapids server and `capture.csv` an
//! Nsight Compute capture of a dgemm (both from tests/fixtures/). A command whose comment says
//! it needs an NVIDIA GPU or a PMU must, where there is none, exit 2 with a cause and a hint.
//! The quick ceilings every command reads are measured once for all tests (a cache under the
//! target directory).

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn roofline_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("roofline")
}

/// A ceilings cache measured once (`roofline ceilings --quick`) and shared by every test here.
fn shared_cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("user-docs-cache");
        let o = Command::new(roofline_bin())
            .args(["ceilings", "--quick"])
            .env("XDG_CACHE_HOME", &dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "roofline ceilings --quick: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        dir
    })
}

/// A scratch directory with the stand-ins for a user's files.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let app = support::example("regions").expect("cargo test builds examples/regions");
    std::fs::copy(app, dir.path().join("my-app")).unwrap();
    let fixtures = repo().join("tests/fixtures");
    std::fs::copy(fixtures.join("perf-stat/spr_raw_per_socket.csv"), dir.path().join("perf-stat.csv")).unwrap();
    std::fs::copy(fixtures.join("ncu/dgemm_hier.csv"), dir.path().join("capture.csv")).unwrap();
    dir
}

fn has_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists()
}

fn has_pmu() -> bool {
    ["cpu", "cpu_core"]
        .iter()
        .any(|d| Path::new("/sys/bus/event_source/devices").join(d).exists())
}

/// What a documented command line needs that this machine may lack.
#[derive(Debug, PartialEq)]
enum Needs {
    Nothing,
    Gpu,
    Pmu,
}

fn needs(line: &str) -> Needs {
    let comment = line.split_once('#').map(|(_, c)| c).unwrap_or("");
    if comment.contains("needs an NVIDIA GPU") {
        Needs::Gpu
    } else if comment.contains("needs a PMU") {
        Needs::Pmu
    } else {
        Needs::Nothing
    }
}

fn bash(dir: &Path, line: &str) -> Output {
    let path = format!(
        "{}:{}",
        roofline_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .args(["-o", "pipefail", "-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env("XDG_CACHE_HOME", shared_cache())
        .env_remove("ROOFLINE_PEAK_GFLOPS")
        .env_remove("ROOFLINE_ROOF_GBS")
        .output()
        .unwrap()
}

/// Runs `lines` in order in `dir`; returns one message per line that did not do what its
/// documentation promises.
fn run_lines(origin: &str, dir: &Path, lines: &[String]) -> Vec<String> {
    let mut failures = Vec::new();
    for line in lines {
        let need = needs(line);
        let missing = match need {
            Needs::Nothing => false,
            Needs::Gpu => !has_gpu(),
            Needs::Pmu => !has_pmu(),
        };
        if need != Needs::Nothing && !missing {
            eprintln!("{origin}: not run here ({need:?} present, the run is not quick): {line}");
            continue;
        }
        let t = std::time::Instant::now();
        let o = bash(dir, line);
        let stderr = String::from_utf8_lossy(&o.stderr);
        eprintln!("{origin}: {:.1} s, exit {:?}: {line}", t.elapsed().as_secs_f64(), o.status.code());
        if missing {
            // The clear message: exit 2, the cause on a `roofline:` line, then a hint.
            let clear = o.status.code() == Some(2) && stderr.starts_with("roofline: ") && stderr.contains("hint:");
            if !clear {
                failures.push(format!(
                    "{origin}: `{line}` ({need:?} missing) gave no clear message: exit {:?}\n{stderr}",
                    o.status.code()
                ));
            }
        } else if !o.status.success() {
            failures.push(format!("{origin}: `{line}` failed: exit {:?}\n{stderr}", o.status.code()));
        }
    }
    failures
}

/// The `Examples:` lines of a help text: lines starting with `  roofline`.
fn help_examples(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Examples:")
        .filter(|l| l.starts_with("  roofline "))
        .map(|l| l.trim().to_string())
        .collect()
}

fn subcommands() -> Vec<String> {
    let o = Command::new(roofline_bin()).arg("--help").output().unwrap();
    let top = String::from_utf8(o.stdout).unwrap();
    top.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn every_help_example_runs() {
    let commands = subcommands();
    assert!(commands.len() >= 15, "{commands:?}");
    let mut failures = Vec::new();
    for c in &commands {
        let o = Command::new(roofline_bin()).args(["help", c]).output().unwrap();
        assert!(o.status.success());
        let examples = help_examples(&String::from_utf8_lossy(&o.stdout));
        assert!(examples.len() >= 2, "roofline help {c}: at least two examples, found {examples:?}");
        // Every example of a command is about that command (or makes its input first).
        assert!(
            examples.iter().any(|e| e.starts_with(&format!("roofline {c}"))),
            "roofline help {c}: {examples:?}"
        );
        let dir = scratch();
        failures.extend(run_lines(&format!("roofline help {c}"), dir.path(), &examples));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Fenced blocks that follow a `<!-- checked -->` line: their command lines (comments and
/// blank lines dropped; a `\` at the end joins the next line).
fn checked_blocks(markdown: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut lines = markdown.lines().peekable();
    while let Some(l) = lines.next() {
        if l.trim() != "<!-- checked -->" {
            continue;
        }
        let fence = lines.next().unwrap_or("");
        assert!(
            fence.starts_with("```"),
            "<!-- checked --> must precede a fenced block, found {fence:?}"
        );
        let mut cmds: Vec<String> = Vec::new();
        let mut pending = String::new();
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if let Some(head) = t.strip_suffix('\\') {
                pending.push_str(head);
                continue;
            }
            pending.push_str(t);
            cmds.push(std::mem::take(&mut pending));
        }
        blocks.push(cmds);
    }
    blocks
}

#[test]
fn readme_checked_blocks_run() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks = checked_blocks(&readme);
    assert!(
        blocks.len() >= 4,
        "README.md: expected the quickstarts' checked blocks, found {}",
        blocks.len()
    );
    let mut failures = Vec::new();
    for (i, cmds) in blocks.iter().enumerate() {
        assert!(!cmds.is_empty(), "README.md checked block {} has no command", i + 1);
        let dir = scratch();
        failures.extend(run_lines(&format!("README.md block {}", i + 1), dir.path(), cmds));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn checked_block_parsing_and_needs() {
    let md = "text\n```sh\nnot checked\n```\n<!-- checked -->\n```sh\n# a comment\nroofline a \\\n  --b\n\nroofline gpu machine   # needs an NVIDIA GPU\n```\n";
    assert_eq!(
        checked_blocks(md),
        vec![vec![
            "roofline a --b".to_string(),
            "roofline gpu machine   # needs an NVIDIA GPU".to_string()
        ]]
    );
    assert_eq!(needs("roofline gpu machine   # needs an NVIDIA GPU"), Needs::Gpu);
    assert_eq!(
        needs("roofline validate --backend perf   # this machine's counters (needs a PMU)"),
        Needs::Pmu
    );
    assert_eq!(needs("echo 'needs a PMU'"), Needs::Nothing);
}

#[test]
fn readme_test_command_is_the_one_ci_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let after = |text: &str, marker: &str| -> Option<String> {
        let mut it = text.lines().skip_while(|l| !l.contains(marker));
        it.next()?;
        it.find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
    };
    let readme_cmd = after(&readme, "# run the tests").expect("README: a `# run the tests` line before the test command");
    let ci_cmd = after(&ci, "# The README's test command").expect(".ci/run: the README's test command");
    assert_eq!(readme_cmd, ci_cmd);
    assert!(readme_cmd.starts_with("cargo test"), "{readme_cmd}");
}

/// The roof fraction of each `id: G GFLOP/s, F % of roof (level)` line.
fn fractions(stdout: &str) -> Vec<(String, f64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let (id, rest) = l.split_once(": ")?;
            let pct = rest.split(", ").nth(1)?.strip_suffix(')')?.split(" % of roof (").next()?;
            Some((id.to_string(), pct.trim().parse::<f64>().ok()? / 100.0))
        })
        .collect()
}

/// Criterion as short as it goes: the test is about the roof, not the timing.
const CRITERION_QUICK: &[&str] = &[
    "--bench",
    "--warm-up-time",
    "0.05",
    "--measurement-time",
    "0.1",
    "--sample-size",
    "10",
];

fn criterion_example(dir: &Path, cache: &Path, envs: &[(&str, &str)]) -> Command {
    let exe = support::example("criterion_roofline").expect("cargo test builds examples/criterion_roofline");
    let mut c = Command::new(exe);
    c.args(CRITERION_QUICK)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("ROOFLINE_PEAK_GFLOPS")
        .env_remove("ROOFLINE_ROOF_GBS")
        .env_remove("CRITERION_HOME")
        .env_remove("CARGO_TARGET_DIR");
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

#[test]
fn criterion_example_reports_a_roof_fraction_with_no_configuration() {
    // First use, no cache: it says it measures the ceilings (stopped there: the shared cache
    // below holds the same quick ceilings, measured once for every test).
    let empty = tempfile::tempdir().unwrap();
    let mut first = criterion_example(empty.path(), &empty.path().join("cache"), &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = BufReader::new(first.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .take(50)
        .find(|l| l.contains("measuring them once"));
    first.kill().ok();
    first.wait().unwrap();
    let said = said.expect("first use must say on stderr that it measures the ceilings");
    assert!(said.contains(&empty.path().join("cache").display().to_string()), "{said}");

    // No roof variables, this machine's cached ceilings: every benchmark gets a roof fraction.
    let dir = tempfile::tempdir().unwrap();
    let o = criterion_example(dir.path(), shared_cache(), &[]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    if !o.status.success() && stderr.contains("ptrace") {
        eprintln!("skipped: the example traces one call and ptrace is not allowed here: {stderr}");
        return;
    }
    assert!(o.status.success(), "exit {:?}\n{stdout}\n{stderr}", o.status);
    assert!(
        !stderr.contains("measuring them once"),
        "the cached ceilings must be used: {stderr}"
    );
    let found = fractions(&stdout);
    let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["example/triad", "example/dot"], "{stdout}");
    for (id, f) in &found {
        assert!(*f > 0.0 && *f <= 1.5, "{id}: roof fraction {f} outside (0, 1.5]\n{stdout}");
    }
    // The report carries the same fractions, the roofs they came from and the machine.
    let text = std::fs::read_to_string(dir.path().join("target/criterion-roofline.json")).unwrap();
    let report = roofline::Report::from_json(&text, "criterion-roofline.json").unwrap();
    for (p, (_, f)) in report.points.iter().zip(&found) {
        let rf = p.roof_fraction.expect("roof fraction in the report");
        assert!((rf - f).abs() < 1e-3, "{}: {rf} vs printed {f}", p.name);
    }
    let roofs = report.ceilings.as_ref().expect("the measured roofs in the report");
    assert!(!roofs.compute_gflops.is_empty() && roofs.compute_gflops.values().all(|g| *g > 0.0));
    assert!(report.machine.get("caches").is_some(), "machine model missing: {}", report.machine);

    // An override that does not parse: the cause naming the variable and a hint, exit 2, no
    // benchmark run.
    let bad = criterion_example(dir.path(), shared_cache(), &[("ROOFLINE_PEAK_GFLOPS", "fast")])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.len() == 2 && lines[0].contains("ROOFLINE_PEAK_GFLOPS=fast") && lines[1].contains("hint:"),
        "{stderr}"
    );
    assert!(bad.stdout.is_empty(), "{}", String::from_utf8_lossy(&bad.stdout));
}

#[test]
fn version_names_the_commit_and_the_platform_tables() {
    let o = Command::new(roofline_bin()).arg("--version").output().unwrap();
    assert!(o.status.success());
    let v = String::from_utf8(o.stdout).unwrap();
    let v = v.trim();
    assert!(v.starts_with(&format!("roofline {} (git ", env!("CARGO_PKG_VERSION"))), "{v}");
    // The SHA of this checkout's HEAD when git and .git are here, else "unknown".
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let sha = v.split("(git ").nth(1).and_then(|r| r.split(';').next()).unwrap();
    // build.rs reruns when HEAD or its branch moves, so the binary always names HEAD.
    assert_eq!(sha, head.as_deref().unwrap_or("unknown"), "{v}");
    let tables = std::fs::read_dir(repo().join("platforms"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "toml"))
        .count();
    assert!(v.contains(&format!("platform tables: {tables} tables, digest ")), "{v}");
}
