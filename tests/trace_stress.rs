//! The tracer under stress (issue #36): programs whose threads sleep in system calls, whose
//! pools start and end around regions, traced many times with random sizes and thread counts,
//! half of the runs on an otherwise idle machine and half with a CPU hog beside. A traced run
//! fails the harness when the program's exit status or output differs from its native run, or
//! when a region's W differs from the program's formula (in the long run, also from the
//! reference mode's count). A failure prints the seed; `ROOFLINE_STRESS_SEED=S` replays it.
//!
//! `short` is CI's (this file holds one test that CI runs, and cargo runs test binaries one
//! after another, so nothing else of the suite runs beside it: "idle" means idle).
//! `scripts/trace-stress.sh` runs `long` (ignored here) with `ROOFLINE_STRESS_RUNS` runs a case.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command as Native;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

mod support;

/// xorshift64*: the harness's draws, replayable from the seed.
struct Draw(u64);

impl Draw {
    fn new(seed: u64) -> Self {
        Draw(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in [lo, hi).
    fn pick(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

fn seed() -> u64 {
    let s = std::env::var("ROOFLINE_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| support::random(1, u64::MAX, 36));
    eprintln!("trace stress seed {s} (replay with ROOFLINE_STRESS_SEED={s})");
    s
}

/// Threads spinning on every CPU while alive: the loaded half of the runs.
struct Hog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn start() -> Hog {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
                    }
                })
            })
            .collect();
        Hog { stop, threads }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One traced program: its command line, environment, and the exact W of each named region
/// (`""`: the whole run) from the program's own formula.
struct Run {
    what: String,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    regions: Vec<(String, u64)>,
}

fn flops(doc: &Value, region: &str) -> Option<u64> {
    let points = doc["points"].as_array()?;
    let p = if region.is_empty() {
        points.first()?
    } else {
        points.iter().find(|p| p["name"] == region)?
    };
    Some(p["flops"]["total"].as_f64()? as u64)
}

/// Native run, then the traced run (`mode`: flops, memory or reference): Ok(report) or why not.
fn trace_once(dir: &Path, run: &Run, mode: &str) -> Result<Value, String> {
    // Run natively as `roofline measure` runs it (region times written back, so a
    // `Session::new(Backend::Auto)` keeps time where no PMU counts).
    let times = dir.join("native-times");
    std::fs::create_dir_all(&times).map_err(|e| e.to_string())?;
    let native = Native::new(&run.argv[0])
        .args(&run.argv[1..])
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .env("ROOFLINE_REGION_TIMES", &times)
        .output()
        .map_err(|e| format!("{}: {e}", run.argv[0]))?;
    if !native.status.success() {
        return Err(format!("the native run failed: {:?}", native.status));
    }
    let out = dir.join("stress.json");
    let _ = std::fs::remove_file(&out);
    let traced = Command::cargo_bin("roofline")
        .unwrap()
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .args(["measure", "--backend", "trace", "--trace", mode, "-o"])
        .arg(&out)
        .arg("--")
        .args(&run.argv)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&traced.stderr);
    if !traced.status.success() {
        return Err(format!("traced run exited {:?}: {}", traced.status, stderr.trim_end()));
    }
    // The program's result, unchanged under trace (its checksum line is deterministic; the
    // programs' timing lines are not).
    let stdout = String::from_utf8_lossy(&traced.stdout);
    for line in String::from_utf8_lossy(&native.stdout).lines().filter(|l| l.contains("checksum")) {
        if !stdout.lines().any(|l| l == line) {
            return Err(format!("native output line {line:?} missing from the traced run's: {stdout}"));
        }
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).map_err(|e| format!("no report: {e}"))?).map_err(|e| e.to_string())?;
    let trace = doc["points"][0]["extra"]["trace"].clone();
    // (`mispredicts`: a run-ahead path left or ended with registers other than the
    // emulator's; 1 run in 14 of the rayon examples had one until the rseq area was read as
    // unknown, docs/trace.md "Memory the kernel rewrites".)
    for key in ["restart_hazards", "scratch_overwrites", "mispredicts"] {
        if trace[key].as_u64().unwrap_or(0) != 0 {
            return Err(format!("extra.trace.{key} = {} (must be 0): {trace}", trace[key]));
        }
    }
    if trace["gaps"].as_array().is_some_and(|g| !g.is_empty()) {
        return Err(format!("uncounted stretches: {}", trace["gaps"]));
    }
    for (region, want) in &run.regions {
        match flops(&doc, region) {
            Some(got) if got == *want => {}
            got => return Err(format!("region '{region}': W {got:?}, the program's formula says {want}")),
        }
    }
    Ok(doc)
}

/// `runs` runs of each case that `make` draws, even ones idle and odd ones with the hog;
/// every `reference_every`-th run also compares each region's W with the reference mode's.
/// Panics with every failure and the seed.
/// A named case: what draws its next run.
type Case<'a> = (&'a str, &'a dyn Fn(&mut Draw) -> Option<Run>);

fn stress(cases: &[Case], runs: u64, reference_every: u64) {
    let seed = seed();
    let mut draw = Draw::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut done = 0;
    for (name, make) in cases {
        for i in 0..runs {
            let Some(run) = make(&mut draw) else { break };
            let hog = (i % 2 == 1).then(Hog::start);
            let result = trace_once(dir.path(), &run, "flops");
            drop(hog);
            done += 1;
            let result = result.and_then(|doc| {
                if reference_every == 0 || i % reference_every != 0 {
                    return Ok(());
                }
                let reference = trace_once(dir.path(), &run, "reference")?;
                for (region, _) in &run.regions {
                    let (a, b) = (flops(&doc, region), flops(&reference, region));
                    if a != b {
                        return Err(format!("region '{region}': W {a:?}, reference mode {b:?}"));
                    }
                }
                Ok(())
            });
            if let Err(why) = result {
                let load = if i % 2 == 1 { "with a CPU hog" } else { "idle" };
                failures.push(format!("{name} run {i} ({load}) {}: {why}", run.what));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {done} traced runs failed (seed {seed}; replay with ROOFLINE_STRESS_SEED={seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{done} traced runs, all exact (seed {seed})");
}

fn rayon_example(name: &'static str) -> impl Fn(&mut Draw) -> Option<Run> {
    move |d: &mut Draw| {
        let exe = support::example(name)?;
        // Small: the whole run is counted, and the inputs' sin/cos before the regions end a
        // run-ahead path per call (an FP compare the emulator does not decide), ~60 µs each.
        let (n, calls) = (d.pick(1_000, 5_000), d.pick(2, 5));
        Some(Run {
            what: format!("n {n} calls {calls}"),
            argv: vec![exe.display().to_string(), n.to_string(), calls.to_string()],
            env: vec![("RAYON_NUM_THREADS".into(), "2".into())],
            // A multiply and an add per element and call, whichever thread ran them.
            regions: vec![("daxpy".into(), 2 * n * calls), ("dot".into(), 2 * n * calls)],
        })
    }
}

fn stress_pools(d: &mut Draw) -> Option<Run> {
    let exe = support::example("stress_pools")?;
    let mode = ["global", "inside", "join", "blocked"][d.pick(0, 4) as usize];
    let (n, calls, threads) = (d.pick(1_000, 6_000), d.pick(2, 5), d.pick(2, 4));
    Some(Run {
        what: format!("{mode} n {n} calls {calls} threads {threads}"),
        argv: vec![exe.display().to_string(), mode.into(), n.to_string(), calls.to_string()],
        env: vec![("RAYON_NUM_THREADS".into(), threads.to_string())],
        regions: vec![("work".into(), 2 * n * calls)],
    })
}

/// A C (or, by its `.cpp` name, C++) fixture built once into a directory that lives as long as
/// the test.
fn build_c(source: &str, exe: &str, flags: &[&str]) -> Option<PathBuf> {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    let out = dir.path().join(exe);
    if out.exists() {
        return Some(out);
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace").join(source);
    let compiler = if source.ends_with(".cpp") { "c++" } else { "cc" };
    let ok = Native::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping {source}: {compiler} could not build it");
        return None;
    }
    Some(out)
}

fn blocked_syscalls(d: &mut Draw) -> Option<Run> {
    let exe = build_c(
        "blocked_syscalls.c",
        "blocked_syscalls",
        &["-O2", "-g", "-ffp-contract=off", "-pthread"],
    )?;
    let (n, rounds) = (d.pick(500, 3_000), d.pick(5, 30));
    Some(Run {
        what: format!("n {n} rounds {rounds}"),
        argv: vec![exe.display().to_string(), n.to_string(), rounds.to_string()],
        env: vec![],
        // work(): a multiply and two adds per iteration; `total +=` inside the region: one more.
        regions: vec![("work".into(), 3 * n * rounds + rounds)],
    })
}

fn omp_triad(d: &mut Draw) -> Option<Run> {
    let exe = build_c("omp_triad.c", "omp_triad", &["-O2", "-fopenmp", "-Wl,-z,now"])?;
    let (n, reps, threads) = (d.pick(5_000, 40_000), d.pick(1, 4), d.pick(2, 5));
    let policy = ["passive", "active"][d.pick(0, 2) as usize];
    Some(Run {
        what: format!("n {n} reps {reps} threads {threads} {policy}"),
        argv: vec![exe.display().to_string(), n.to_string(), reps.to_string()],
        env: vec![
            ("OMP_NUM_THREADS".into(), threads.to_string()),
            ("OMP_WAIT_POLICY".into(), policy.into()),
        ],
        regions: vec![(String::new(), 2 * n * reps)],
    })
}

/// Eigen's OpenMP GEMM (`libeigen3-dev`): a team Eigen sizes from the product (up to
/// OMP_NUM_THREADS), the B panel packed by every thread into one shared buffer.
fn eigen_gemm(d: &mut Draw) -> Option<Run> {
    if !Path::new("/usr/include/eigen3/Eigen/Dense").exists() {
        eprintln!("skipping eigen_gemm: no /usr/include/eigen3 (libeigen3-dev)");
        return None;
    }
    let exe = build_c(
        "eigen_gemm.cpp",
        "eigen_gemm",
        &["-O2", "-march=native", "-fopenmp", "-DNDEBUG", "-I/usr/include/eigen3"],
    )?;
    // n: a multiple of 24 up to 120, where the fixture's formula holds (its header says why).
    let (n, reps, threads) = (24 * d.pick(1, 6), d.pick(1, 4), d.pick(1, 17));
    Some(Run {
        what: format!("n {n} reps {reps} threads {threads}"),
        argv: vec![exe.display().to_string(), n.to_string(), reps.to_string()],
        env: vec![("OMP_NUM_THREADS".into(), threads.to_string())],
        regions: vec![(String::new(), reps * (2 * n * n * n + 2 * n * n + 3))],
    })
}

#[test]
fn short() {
    // The README's examples 20 times each (10 idle, 10 loaded), the other patterns 10 times.
    let runs = std::env::var("ROOFLINE_STRESS_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    stress(
        &[
            ("rayon_regions", &rayon_example("rayon_regions")),
            ("marker_regions", &rayon_example("marker_regions")),
        ],
        runs,
        0,
    );
    stress(
        &[
            ("stress_pools", &stress_pools),
            ("blocked_syscalls", &blocked_syscalls),
            ("eigen_gemm", &eigen_gemm),
        ],
        runs.div_ceil(2),
        0,
    );
}

#[test]
#[ignore = "long: scripts/trace-stress.sh"]
fn long() {
    let runs = std::env::var("ROOFLINE_STRESS_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100);
    stress(
        &[
            ("rayon_regions", &rayon_example("rayon_regions")),
            ("marker_regions", &rayon_example("marker_regions")),
            ("stress_pools", &stress_pools),
            ("blocked_syscalls", &blocked_syscalls),
            ("omp_triad", &omp_triad),
            ("eigen_gemm", &eigen_gemm),
        ],
        runs,
        10,
    );
}
