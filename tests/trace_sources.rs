//! `--by-function` / `--by-line` under the trace backend: work attributed to the innermost
//! frame of the program's own code through DWARF (a rayon closure inlined into rayon's
//! `bridge_producer_consumer::helper` lands on the closure and its line), names demangled, and
//! a program without debug info attributed to its symbols with a note saying so. Expected
//! lines are found in the sources, sizes are random per run (printed).

use assert_cmd::Command;
use serde_json::Value;
mod support;

use std::path::{Path, PathBuf};
use support::{example, random};

/// `roofline measure --backend trace --by-line --json -- CMD`: the report and the text output
/// of a second, text-mode run is not needed: JSON carries both tables.
fn measure(dir: &Path, cmd: &[&str], env: &[(&str, &str)]) -> Value {
    let out = dir.join("m.json");
    let a = Command::cargo_bin("roofline")
        .unwrap()
        .envs(env.iter().copied())
        .args(["measure", "--backend", "trace", "--by-line", "--repeat", "1", "-o"])
        .arg(&out)
        .arg("--")
        .args(cmd)
        .timeout(std::time::Duration::from_secs(300))
        .assert();
    let o = a.get_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

/// The 1-based number of the only line of `file` containing `text`.
fn line_of(file: &Path, text: &str) -> usize {
    let src = std::fs::read_to_string(file).unwrap();
    let hits: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(text))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "{text:?} in {}", file.display());
    hits[0]
}

fn rows<'a>(whole: &'a Value, key: &str) -> &'a Vec<Value> {
    whole["extra"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no extra.{key}: {whole:#}"))
}

fn flops(r: &Value) -> u64 {
    r["flops"].as_u64().unwrap()
}

/// Mangled-name shapes: Itanium/Rust legacy, Rust v0, legacy escapes, legacy hashes.
fn looks_mangled(name: &str) -> bool {
    let first = name.split_whitespace().next().unwrap_or("");
    first.starts_with("_ZN")
        || first.starts_with("_R")
        || first.contains("$LT$")
        || first.contains("$u7b$")
        || first
            .split("::")
            .any(|c| c.len() == 17 && c.starts_with('h') && c[1..].bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn rayon_closures_get_their_own_work_and_line() {
    let Some(exe) = example("rayon_regions") else { return };
    let n = random(20_000, 70_000, 11);
    let calls = random(1, 4, 12);
    let dir = tempfile::tempdir().unwrap();
    let doc = measure(
        dir.path(),
        &[exe.to_str().unwrap(), &n.to_string(), &calls.to_string()],
        &[("RAYON_NUM_THREADS", "2")],
    );
    let whole = &doc["points"][0];
    let functions = rows(whole, "by_function");
    let lines = rows(whole, "by_line");
    for r in functions.iter().chain(lines) {
        let f = r["function"].as_str().unwrap();
        assert!(!looks_mangled(f), "mangled: {f}");
    }
    // Every flop is somewhere, once.
    let total = whole["flops"]["total"].as_f64().unwrap() as u64;
    assert_eq!(functions.iter().map(flops).sum::<u64>(), total);
    // The whole run counts x and y made with libm's sin and cos too, outside the regions: a
    // system library, usually without line tables. Every other flop is on a line.
    let in_libm: u64 = functions
        .iter()
        .filter(|r| r["function"].as_str().unwrap().contains("libm.so"))
        .map(flops)
        .sum();
    assert!(in_libm > 0, "sin and cos of 2·n values: {functions:#?}");
    let on_lines = lines.iter().map(flops).sum::<u64>();
    assert!(
        on_lines + in_libm >= total && on_lines <= total,
        "all flops outside libm are in code with line tables: {on_lines} on lines, {in_libm} in libm, {total} in all"
    );
    // The daxpy closure (`*y += a * x`, inlined into rayon's helper): its own row, 2·n per call.
    let daxpy: Vec<&Value> = functions
        .iter()
        .filter(|r| r["function"].as_str().unwrap().starts_with("rayon_regions::daxpy::"))
        .collect();
    assert_eq!(daxpy.len(), 1, "{functions:#?}");
    assert_eq!(flops(daxpy[0]), 2 * n * calls);
    assert!(daxpy[0]["function"].as_str().unwrap().contains("closure"), "{:#}", daxpy[0]);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rayon_regions.rs");
    let want = format!("rayon_regions.rs:{}", line_of(&src, "*y += a * x"));
    let at_line: u64 = lines
        .iter()
        .filter(|r| r["line"].as_str().unwrap().ends_with(&want))
        .map(flops)
        .sum();
    assert_eq!(at_line, 2 * n * calls, "{want} in {lines:#?}");
    // The dot's fold closure: the other 2·n per call, on its own line.
    let want = format!("rayon_regions.rs:{}", line_of(&src, "fold(0.0, |s, (a, b)| s + a * b)"));
    let at_line: u64 = lines
        .iter()
        .filter(|r| r["line"].as_str().unwrap().ends_with(&want))
        .map(flops)
        .sum();
    assert_eq!(at_line, 2 * n * calls, "{want} in {lines:#?}");
    // No flop is left on rayon's own functions.
    let in_rayon: u64 = functions
        .iter()
        .filter(|r| r["function"].as_str().unwrap().starts_with("rayon::") || r["function"].as_str().unwrap().starts_with("rayon_core::"))
        .map(flops)
        .sum();
    assert_eq!(in_rayon, 0);
}

const SAXPY: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) static void scale(long n, float *y, float a) {
    for (long i = 0; i < n; i++) y[i] = y[i] * a;
}
static inline void axpy(long n, float a, const float *x, float *y) {
    for (long i = 0; i < n; i++) y[i] = a * x[i] + y[i];   /* the axpy line */
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (long i = 0; i < n; i++) { x[i] = i * 0.5f; y[i] = 1.0f / (i + 1); }
    axpy(n, 3.0f, x, y);
    scale(n, y, 0.25f);
    return (int)y[n / 2] == 12345;
}
"#;

fn cc(dir: &Path, flags: &[&str], out: &str) -> Option<PathBuf> {
    let src = dir.join("saxpy.c");
    std::fs::write(&src, SAXPY).unwrap();
    let exe = dir.join(out);
    let ok = std::process::Command::new("cc")
        .args(["-O1", "-fno-tree-vectorize"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(exe)
    } else {
        eprintln!("skipping: cc failed");
        None
    }
}

/// C with `-g`: the inlined `axpy` is its own function and line although it has no symbol;
/// without `-g`: the work stays on the symbols, and a note names the module without lines.
#[test]
fn c_inlined_function_with_and_without_debug_info() {
    let dir = tempfile::tempdir().unwrap();
    let n = random(5_000, 40_000, 13);
    let Some(with) = cc(dir.path(), &["-g"], "with") else { return };
    let doc = measure(dir.path(), &[with.to_str().unwrap(), &n.to_string()], &[]);
    let whole = &doc["points"][0];
    let functions = rows(whole, "by_function");
    let named = |p: &str| -> u64 {
        functions
            .iter()
            .filter(|r| r["function"].as_str().unwrap().starts_with(&format!("{p} (")))
            .map(flops)
            .sum()
    };
    // axpy: a multiply and an add per element (scalar, -fno-tree-vectorize); scale: one multiply.
    assert_eq!(named("axpy"), 2 * n, "{functions:#?}");
    assert_eq!(named("scale"), n);
    // main's own loop: a multiply (x) and a divide (y) per element.
    assert_eq!(named("main"), 2 * n);
    let line = line_of(&dir.path().join("saxpy.c"), "the axpy line");
    let at: u64 = rows(whole, "by_line")
        .iter()
        .filter(|r| r["line"].as_str().unwrap().ends_with(&format!("saxpy.c:{line}")))
        .map(flops)
        .sum();
    assert_eq!(at, 2 * n);
    assert!(!without_lines(whole).contains(&"with".to_string()), "{whole:#}");

    let Some(without) = cc(dir.path(), &["-g0"], "without") else {
        return;
    };
    let doc = measure(dir.path(), &[without.to_str().unwrap(), &n.to_string()], &[]);
    let whole = &doc["points"][0];
    let functions = rows(whole, "by_function");
    // axpy is inlined into main: its flops are main's now, beside main's own.
    let main: u64 = functions
        .iter()
        .filter(|r| r["function"].as_str().unwrap().starts_with("main ("))
        .map(flops)
        .sum();
    assert_eq!(main, 4 * n, "{functions:#?}");
    assert!(
        rows(whole, "by_line")
            .iter()
            .all(|r| !r["line"].as_str().unwrap().contains("saxpy.c"))
    );
    assert!(without_lines(whole).contains(&"without".to_string()), "{whole:#}");
}

/// The modules the report's note says have no debug info.
fn without_lines(whole: &Value) -> Vec<String> {
    let notes = whole["provenance"]["notes"].as_array().unwrap();
    notes
        .iter()
        .filter_map(|n| n.as_str()?.strip_prefix("by function: no debug info in "))
        .flat_map(|rest| rest.split(';').next().unwrap_or("").split(", ").map(str::to_string))
        .collect()
}

/// `fixture` copied to where a dependency's sources lie (`DIR/.cargo/registry/src/INDEX/
/// fmadep-0.1.0/src/NAME`), so that no frame at its instructions is the program's own: the
/// case of `matrixmultiply`'s dgemm kernel, whose intrinsics used to take its flops.
fn as_dependency(dir: &Path, fixture: &Path, name: &str) -> PathBuf {
    let src = dir.join(".cargo/registry/src/index.crates.io-0000000000000000/fmadep-0.1.0/src");
    std::fs::create_dir_all(&src).unwrap();
    let to = src.join(name);
    std::fs::copy(fixture, &to).unwrap();
    to
}

fn fma_fixture(ext: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/trace/fma_intrinsics.{ext}"))
}

/// Traces `exe N REPS`: the flops on the fixture's `_mm256_fmadd_pd` line (2 per element and
/// repetition, all of them), none on the intrinsic's own file, and the row's inline chain
/// keeps the intrinsic's frame innermost (`intrinsic_frame` where the compiler gives it one).
fn fma_lands_on_its_line(dir: &Path, exe: &Path, source: &Path, shown: &str, intrinsic_frame: bool) {
    let n = random(1_000, 20_000, 31) / 4 * 4;
    let reps = random(1, 4, 32);
    let doc = measure(dir, &[exe.to_str().unwrap(), &n.to_string(), &reps.to_string()], &[]);
    let whole = &doc["points"][0];
    let lines = rows(whole, "by_line");
    let want = format!("{shown}:{}", line_of(source, "the fma line"));
    let at: Vec<&Value> = lines.iter().filter(|r| r["line"].as_str().unwrap().ends_with(&want)).collect();
    assert_eq!(at.iter().map(|r| flops(r)).sum::<u64>(), 2 * n * reps, "{want} in {lines:#?}");
    for r in lines {
        let line = r["line"].as_str().unwrap();
        if line.contains("core_arch") || line.contains("intrin.h") {
            assert_eq!(flops(r), 0, "{r:#}");
        }
    }
    // The chain: the chosen line is in it, the intrinsic innermost where it has a frame.
    let chains = at[0]["chains"].as_array().unwrap();
    let frames = chains[0]["frames"].as_array().unwrap();
    assert!(
        frames.iter().any(|f| f["line"].as_str().is_some_and(|l| l.ends_with(&want))),
        "{frames:#?}"
    );
    let innermost = &frames[0];
    if intrinsic_frame || frames.len() > 1 {
        assert!(innermost["function"].as_str().unwrap().contains("_mm256_fmadd_pd"), "{frames:#?}");
        let file = innermost["line"].as_str().unwrap();
        assert!(file.contains("core_arch") || file.contains("intrin.h"), "{frames:#?}");
    }
}

/// Rust `core::arch::x86_64` intrinsics under `#[target_feature(enable = "avx2,fma")]`: the
/// flops land on the fixture's `_mm256_fmadd_pd` line, not on stdarch's `fma.rs`, both where
/// the fixture is the program's own code and where it lies among dependencies.
#[test]
fn rust_intrinsics_land_on_the_calling_line() {
    if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
        eprintln!("skipping: no AVX2/FMA here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let own = fma_fixture("rs");
    let dep = as_dependency(dir.path(), &own, "main.rs");
    for (source, shown, exe) in [(&own, "fma_intrinsics.rs", "own_rs"), (&dep, "fmadep-0.1.0/src/main.rs", "dep_rs")] {
        let exe = dir.path().join(exe);
        let built = std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .args(["--edition", "2021", "-C", "opt-level=3", "-g", "-o"])
            .arg(&exe)
            .arg(source)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            eprintln!("skipping: rustc failed");
            return;
        }
        fma_lands_on_its_line(dir.path(), &exe, source, shown, true);
    }
}

/// C `<immintrin.h>` `_mm256_fmadd_pd` (`cc -O2 -g -mfma -mavx2`): the flops land on the .c
/// file's line, not in the compiler's `fmaintrin.h`, both where the file is the program's own
/// and where it lies among dependencies (a `-sys` crate's C).
#[test]
fn c_intrinsics_land_on_the_calling_line() {
    if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
        eprintln!("skipping: no AVX2/FMA here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let own = fma_fixture("c");
    let dep = as_dependency(dir.path(), &own, "fma.c");
    for (source, shown, exe) in [(&own, "fma_intrinsics.c", "own_c"), (&dep, "fmadep-0.1.0/src/fma.c", "dep_c")] {
        let exe = dir.path().join(exe);
        let built = std::process::Command::new("cc")
            .args(["-O2", "-g", "-mfma", "-mavx2", "-o"])
            .arg(&exe)
            .arg(source)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            eprintln!("skipping: cc failed (or there is none)");
            return;
        }
        // clang's intrinsics are `__nodebug__`: no frame of their own there.
        fma_lands_on_its_line(dir.path(), &exe, source, shown, false);
    }
}
