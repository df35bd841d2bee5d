//! The `likwid-perfctr -m` OpenMP pattern under `roofline measure --backend trace`
//! (tests/c/likwid_triad.c, built against include/likwid-marker.h): every thread of the team
//! starts and stops the region itself, around its share of a work-shared triad.
//!
//! - The native runs' begins are every thread's, as the tracer's are: no warning that the
//!   region "began N times in a native run but M in the traced one"; a real difference (the
//!   program begins once more when traced) still gets it.
//! - The whole run's point counts the whole run, as perf does: the initialisation outside every
//!   region too. Its W and core bytes are those of the same program built with the markers
//!   compiled out (no LIKWID_PERFMON), give or take the marker library's own work; a region
//!   is a window of it, so the whole run has at least the region's bytes at every level.
//!
//! Sizes are random per run (printed). Skips, said, without `cc -fopenmp`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
mod support;
use support::random;

/// Where cargo put this build's libroofline.so: beside this test binary (`deps/`).
fn lib_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

/// tests/c/likwid_triad.c built with `cc -fopenmp -O2 -g`, the markers on (linked against
/// libroofline.so) or compiled out; None, said, where that cannot be built.
fn build(dir: &Path, markers: bool) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join(if markers { "triad_marked" } else { "triad_plain" });
    let lib = lib_dir();
    let mut c = std::process::Command::new("cc");
    c.args(["-fopenmp", "-O2", "-g", "-o"])
        .arg(&exe)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("tests/c/likwid_triad.c"));
    if markers {
        if !lib.join("libroofline.so").is_file() {
            eprintln!("skipping: no libroofline.so in {}", lib.display());
            return None;
        }
        c.arg("-DLIKWID_PERFMON")
            .arg(format!("-L{}", lib.display()))
            .arg("-lroofline")
            .arg(format!("-Wl,-rpath,{}", lib.display()));
    }
    match c.output() {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => {
            eprintln!("skipping: cc -fopenmp failed: {}", String::from_utf8_lossy(&o.stderr));
            None
        }
        Err(e) => {
            eprintln!("skipping: no cc ({e})");
            None
        }
    }
}

const THREADS: u64 = 2;

/// `roofline measure --backend trace ARGS -o m.json -- CMD`: the report. Two OpenMP threads
/// that wait passively (a spinning thread's loads would make core bytes depend on timing).
fn measure(dir: &Path, args: &[&str], cmd: &[&str]) -> Value {
    let out = dir.join("m.json");
    let a = Command::cargo_bin("roofline")
        .unwrap()
        // cargo's LD_LIBRARY_PATH lists target/<profile>/ first, where an older uplifted
        // libroofline.so may lie: the program loads the one its rpath names.
        .env_remove("LD_LIBRARY_PATH")
        .env("OMP_NUM_THREADS", THREADS.to_string())
        .env("OMP_WAIT_POLICY", "PASSIVE")
        .env_remove("ROOFLINE_BACKEND")
        .args(["measure", "--backend", "trace"])
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(cmd)
        .timeout(std::time::Duration::from_secs(300))
        .assert();
    let o = a.get_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

fn point<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no point {name} in {doc:#}"))
}

fn w(p: &Value) -> u64 {
    p["flops"]["total"].as_f64().unwrap() as u64
}

fn bytes(p: &Value, level: &str) -> f64 {
    p["bytes"][level].as_f64().unwrap_or_else(|| panic!("no {level} bytes in {p:#}"))
}

fn notes(p: &Value) -> String {
    p["provenance"]["notes"].to_string()
}

/// The marker library's own arithmetic is its time keeping (a duration turned into seconds,
/// sums per thread and per region): a few flops per START/STOP, at most this many.
const LIB_FLOPS_PER_CALL: u64 = 16;

/// The marker library's own loads and stores over a run (init's checks, a session per thread,
/// the per-call bookkeeping, CLOSE's lines on stderr): tens of KiB whatever N, bounded here by
/// 1 MiB, against the 24·N bytes (≥ 14 MB here) the initialisation stores outside every region.
const LIB_CORE_BYTES: f64 = (1 << 20) as f64;

#[test]
fn likwid_openmp_triad_counts_the_whole_run_without_a_false_begin_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (Some(marked), Some(plain)) = (build(dir.path(), true), build(dir.path(), false)) else {
        return;
    };
    let n = random(600_000, 1_200_000, 1);
    let reps = random(2, 4, 2);
    let calls = THREADS * reps;
    let (n_arg, reps_arg) = (n.to_string(), reps.to_string());

    let on = measure(dir.path(), &["--repeat", "2"], &[marked.to_str().unwrap(), &n_arg, &reps_arg]);
    let whole = point(&on, "triad_marked");
    let triad = point(&on, "triad");
    // Every thread's begins on both sides: the traced run's and each native run's.
    assert_eq!(triad["extra"]["calls"].as_u64(), Some(calls), "{triad:#}");
    for p in on["points"].as_array().unwrap() {
        assert!(!notes(p).contains("began"), "a false begin warning: {p:#}");
        assert!(!notes(p).contains("no wall time"), "{p:#}");
    }
    assert_eq!(triad["seconds_samples"].as_array().unwrap().len(), 2, "{triad:#}");
    assert_eq!(triad["provenance"]["seconds"], "native");
    // The region: 2 flops per element and repetition (plus the library's time keeping inside
    // the window); a, b and c each touched once per element and repetition.
    let wr = w(triad);
    assert!(
        wr >= 2 * n * reps && wr <= 2 * n * reps + LIB_FLOPS_PER_CALL * calls,
        "region W {wr} for n {n}, reps {reps}"
    );
    assert!(bytes(triad, "core") >= (24 * n * reps) as f64, "{triad:#}");
    // The whole run: the region and everything outside it, the initialisation's 24·n bytes
    // of stores and n divisions included.
    assert!(w(whole) >= wr + n, "whole {whole:#} region {triad:#}");
    for level in triad["bytes"].as_object().unwrap().keys() {
        assert!(
            bytes(whole, level) >= bytes(triad, level),
            "{level}: whole {whole:#} region {triad:#}"
        );
    }
    assert!(bytes(whole, "core") >= bytes(triad, "core") + (24 * n) as f64, "{whole:#}");

    // The same program with the markers compiled out: its whole run is the whole run with them,
    // but for the library's own work.
    let off = measure(dir.path(), &["--repeat", "1"], &[plain.to_str().unwrap(), &n_arg, &reps_arg]);
    assert_eq!(off["points"].as_array().unwrap().len(), 1, "no regions without markers");
    let plain_whole = &off["points"][0];
    assert_eq!(w(plain_whole), n + 2 * n * reps, "n divisions, then 2 flops per element and rep");
    let dw = w(whole) as i64 - w(plain_whole) as i64;
    assert!(
        (0..=(LIB_FLOPS_PER_CALL * calls) as i64).contains(&dw),
        "whole-run W with markers {} vs without {}",
        w(whole),
        w(plain_whole)
    );
    let dq = bytes(whole, "core") - bytes(plain_whole, "core");
    assert!(
        (0.0..=LIB_CORE_BYTES).contains(&dq),
        "whole-run core bytes with markers {} vs without {}",
        bytes(whole, "core"),
        bytes(plain_whole, "core")
    );
}

#[test]
fn memory_mode_whole_run_has_at_least_the_region_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let Some(marked) = build(dir.path(), true) else { return };
    // 24·n bytes per pass against a 256 KiB last level: every pass streams from DRAM.
    let n = random(100_000, 200_000, 3);
    let reps = random(1, 3, 4);
    let doc = measure(
        dir.path(),
        &["--trace", "memory", "--cache", "L1=8KiB:4,L2=32KiB:8,L3=256KiB:8", "--repeat", "1"],
        &[marked.to_str().unwrap(), &n.to_string(), &reps.to_string()],
    );
    let whole = point(&doc, "triad_marked");
    let triad = point(&doc, "triad");
    assert_eq!(triad["extra"]["calls"].as_u64(), Some(THREADS * reps));
    assert!(!notes(triad).contains("began"), "{triad:#}");
    let levels: Vec<&String> = triad["bytes"].as_object().unwrap().keys().collect();
    for level in ["core", "l2", "l3", "dram"] {
        assert!(levels.iter().any(|l| *l == level), "no {level} in {triad:#}");
    }
    for level in levels {
        assert!(
            bytes(whole, level) >= bytes(triad, level),
            "{level}: whole {whole:#} region {triad:#}"
        );
    }
    // The initialisation's 24·n bytes of stores reach DRAM (read for ownership, written back
    // by the end at the latest) outside the region; at most one last level of its dirty lines
    // is written back inside the region's window.
    assert!(
        bytes(whole, "dram") >= bytes(triad, "dram") + (24 * n) as f64,
        "whole {whole:#} region {triad:#}"
    );
    assert!(bytes(triad, "dram") >= (24 * n * reps) as f64, "{triad:#}");
}

#[test]
fn a_real_begin_mismatch_still_warns() {
    let dir = tempfile::tempdir().unwrap();
    let Some(marked) = build(dir.path(), true) else { return };
    let n = random(10_000, 50_000, 5);
    let reps = random(1, 4, 6);
    // EXTRA=1: traced, the main thread begins the region once more than natively.
    let doc = measure(
        dir.path(),
        &["--repeat", "1"],
        &[marked.to_str().unwrap(), &n.to_string(), &reps.to_string(), "1"],
    );
    let triad = point(&doc, "triad");
    let native = THREADS * reps;
    assert_eq!(triad["extra"]["calls"].as_u64(), Some(native + 1), "{triad:#}");
    let want = format!(
        "region 'triad' began {native} time(s) in a native run but {} in the traced one",
        native + 1
    );
    assert!(notes(triad).contains(&want), "{want}: {triad:#}");
}
