//! Regions under `roofline measure --backend trace`: one point per region
//! name beside the whole run's (which counts the whole run, regions or not), W and Q of
//! everything every thread ran while the region was open, T from the native runs. Sizes are random per run (printed); expected counts are
//! worked out from the programs' loops, never copied from an output.

use assert_cmd::Command;
use serde_json::Value;
mod support;

use std::path::Path;
use support::{example, random};

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

/// `roofline measure --backend trace ARGS -o m.json -- CMD`: the report.
fn measure(dir: &Path, args: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Value {
    let out = dir.join("m.json");
    let a = roofline()
        .envs(env.iter().copied())
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

#[test]
fn rayon_example_gives_each_region_its_exact_work_from_every_pool_thread() {
    rayon_regions_exact("rayon_regions");
}

/// The same program marked with the dependency-free roofline-marker crate: the same points.
#[test]
fn the_marker_crate_gives_each_region_its_exact_work_from_every_pool_thread() {
    rayon_regions_exact("marker_regions");
}

/// The rayon program stripped as a release build often is (`strip`, Cargo's `strip = true`):
/// no symbol table, and the same points, found by the markers' own sections.
#[test]
fn a_stripped_program_gives_each_region_its_exact_work() {
    let Some(exe) = example("rayon_regions") else { return };
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("rayon_stripped");
    if !binutil("strip", &[exe.to_str().unwrap(), "-o", stripped.to_str().unwrap()]) {
        return;
    }
    let symbols = std::process::Command::new("nm").arg(&stripped).output();
    if let Ok(o) = symbols {
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("roofline_region_begin"),
            "strip left the symbol table"
        );
    }
    rayon_regions_exact_at(&stripped);
}

/// A program whose markers the tracer cannot find (stripped, and the marker sections renamed):
/// the command still succeeds, the native runs still keep time, and the report says which
/// regions ran without a W.
#[test]
fn regions_the_tracer_missed_are_named_and_the_run_still_succeeds() {
    let Some(exe) = example("rayon_regions") else { return };
    let dir = tempfile::tempdir().unwrap();
    let hidden = dir.path().join("rayon_hidden");
    let (e, h) = (exe.to_str().unwrap(), hidden.to_str().unwrap());
    if !binutil(
        "objcopy",
        &[
            "--strip-all",
            "--rename-section",
            "roofline.region_begin=other.begin",
            "--rename-section",
            "roofline.region_end=other.end",
            e,
            h,
        ],
    ) {
        return;
    }
    let n = random(1_000, 9_000, 3);
    let doc = measure(dir.path(), &[], &[h, &n.to_string(), "2"], &[("RAYON_NUM_THREADS", "2")]);
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{doc:#}");
    let notes = points[0]["provenance"]["notes"].to_string();
    assert!(
        notes.contains("'daxpy', 'dot' ran in the native runs but the tracer saw no marker"),
        "{notes}"
    );
}

/// Run a binutils tool; false (said) where it is not installed.
fn binutil(tool: &str, args: &[&str]) -> bool {
    match std::process::Command::new(tool).args(args).status() {
        Ok(s) => {
            assert!(s.success(), "{tool} {args:?}: {s}");
            true
        }
        Err(e) => {
            eprintln!("skipping: {tool}: {e}");
            false
        }
    }
}

/// Example `name` (the rayon program with regions `daxpy` and `dot`) under the trace backend.
fn rayon_regions_exact(name: &str) {
    let Some(exe) = example(name) else { return };
    rayon_regions_exact_at(&exe);
}

/// The rayon program with regions `daxpy` and `dot` at `exe` under the trace backend.
fn rayon_regions_exact_at(exe: &Path) {
    let name = exe.file_name().unwrap().to_str().unwrap();
    let n = random(20_000, 90_000, 1);
    let calls = random(2, 5, 2);
    let dir = tempfile::tempdir().unwrap();
    let doc = measure(
        dir.path(),
        &["--repeat", "2"],
        &[exe.to_str().unwrap(), &n.to_string(), &calls.to_string()],
        &[("RAYON_NUM_THREADS", "2")],
    );
    assert_eq!(doc["points"].as_array().unwrap().len(), 3, "{doc:#}");
    let (daxpy, dot) = (point(&doc, "daxpy"), point(&doc, "dot"));
    // A multiply and an add per element and call, whichever thread ran them.
    assert_eq!(w(daxpy), 2 * n * calls, "{daxpy:#}");
    assert_eq!(w(dot), 2 * n * calls, "{dot:#}");
    // The whole run counts both regions and what ran outside them: x and y made first, a
    // multiply per element each before libm's sin and cos (whose flops depend on the value),
    // 16 B stored per element.
    let whole = point(&doc, name);
    assert!(w(whole) >= w(daxpy) + w(dot) + 2 * n, "{whole:#}");
    assert!(bytes(whole, "core") >= bytes(daxpy, "core") + bytes(dot, "core") + (16 * n) as f64);
    for p in [daxpy, dot] {
        assert_eq!(p["extra"]["calls"].as_u64(), Some(calls));
        // Every element of x and y is read (y written too) in every call.
        assert!(bytes(p, "core") >= (16 * n * calls) as f64, "{p:#}");
        // T from the two native runs: one sample each, and within the whole run's time.
        let samples = p["seconds_samples"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "{p:#}");
        assert!(samples.iter().all(|s| s.as_f64().unwrap() > 0.0));
        assert!(p["seconds"].as_f64().unwrap() < whole["seconds"].as_f64().unwrap());
        assert_eq!(p["provenance"]["seconds"], "native");
        assert!(p["threads"].as_u64().unwrap() >= 1);
    }
}

/// Markers as the library defines them: each region is a window of the counted whole run.
const MARKERS: &str = r#"
__attribute__((noinline, used)) void roofline_region_begin(const char *name) { __asm__ volatile("" ::"r"(name)); }
__attribute__((noinline, used)) void roofline_region_end(const char *name) { __asm__ volatile("" ::"r"(name)); }
"#;

/// Nested regions, a region every OpenMP thread marks itself, one left open at exit, in
/// memory mode: W per region exact, Q per level ordered by nesting.
const NESTED: &str = r#"
#include <stdlib.h>
#include <omp.h>
__attribute__((noinline)) void triad(long n, double *a, const double *b, const double *c) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
}
int main(int argc, char **argv) {
    long n = atol(argv[1]), reps = atol(argv[2]);
    double *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8);
    for (long i = 0; i < n; i++) { a[i] = 0; b[i] = i * 0.5; c[i] = 1.0 / (i + 1); }
    roofline_region_begin("outer");
    for (long r = 0; r < reps; r++) {
        roofline_region_begin("inner");
        triad(n, a, b, c);
        roofline_region_end("inner");
        volatile double s = 0;
        for (long i = 0; i < n; i += 64) s = s + a[i];   /* outer only: n/64 adds */
    }
    roofline_region_end("outer");
    #pragma omp parallel
    {
        roofline_region_begin("share");
        #pragma omp for schedule(static)
        for (long i = 0; i < n; i++) b[i] = b[i] * 0.5;
        roofline_region_end("share");
    }
    roofline_region_begin("left-open");
    volatile double t = 0;
    for (long i = 0; i < n; i += 8) t = t + c[i];
    return 0;
}
"#;

#[test]
fn nested_shared_and_unclosed_regions_in_memory_mode() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("nested.c");
    std::fs::write(&src, format!("{MARKERS}\n{NESTED}")).unwrap();
    let exe = dir.path().join("nested");
    let ok = std::process::Command::new("cc")
        .args(["-O2", "-fopenmp", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: cc -fopenmp failed");
        return;
    }
    let n = random(6_000, 12_000, 3) & !63;
    let reps = random(2, 4, 4);
    let doc = measure(
        dir.path(),
        &["--trace", "memory", "--cache", "L1=4KiB:4,L2=16KiB:4,L3=64KiB:8", "--repeat", "1"],
        &[exe.to_str().unwrap(), &n.to_string(), &reps.to_string()],
        &[("OMP_NUM_THREADS", "2")],
    );
    let (outer, inner, share, open) = (
        point(&doc, "outer"),
        point(&doc, "inner"),
        point(&doc, "share"),
        point(&doc, "left-open"),
    );
    // triad: a multiply and an add per element; the strided sum: one add per 64 elements.
    assert_eq!(w(inner), 2 * n * reps, "{inner:#}");
    assert_eq!(w(outer), 2 * n * reps + (n / 64) * reps, "{outer:#}");
    // Marked by each thread of the team: one window, each element once.
    assert_eq!(w(share), n, "{share:#}");
    assert_eq!(w(open), n / 8, "{open:#}");
    assert!(open["provenance"]["notes"].to_string().contains("still open"), "{open:#}");
    assert_eq!(inner["extra"]["calls"].as_u64(), Some(reps));
    assert!(share["extra"]["calls"].as_u64().unwrap() >= 1);
    // The whole run: the regions (inner is inside outer) and the initialisation outside them,
    // a multiply (b) and a division (c) per element; nothing else computes.
    let whole = &doc["points"][0];
    assert_eq!(w(whole), w(outer) + w(share) + w(open) + 2 * n);
    for level in ["core", "l2", "l3", "dram"] {
        assert!(bytes(whole, level) >= bytes(outer, level), "{level}: whole {whole:#}");
    }
    // Nesting is inclusive at every level: the 24·n bytes per triad call pass through.
    for level in ["l2", "l3", "dram"] {
        assert!(
            bytes(inner, level) <= bytes(outer, level),
            "{level}: inner {inner:#} outer {outer:#}"
        );
    }
    // Three arrays of n doubles per call, 64 KiB of L3: every call streams from DRAM.
    assert!(bytes(inner, "dram") >= (16 * n * reps) as f64, "{inner:#}");
    assert!(bytes(inner, "core") >= (24 * n * reps) as f64);
}
