//! Exact mixed-precision W from the trace backend on C programs with known work
//! (tests/fixtures/trace/mixprec_simd.c, amx_shapes.c): AVX-512 BF16 / FP16 (real, complex,
//! masked) / VNNI / AVX-VNNI and AMX with non-default tile configurations. The programs run
//! each family only where the CPU has it and print what they ran with its work computed from
//! their loop counts and masks (`docs/mixed-precision.md`); a family the CPU lacks must then
//! count nothing. Sizes are random per run (the seed is printed). Skips when `cc` is missing.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn compile(dir: &Path, src: &str, flags: &[&str]) -> Option<PathBuf> {
    let exe = dir.join(src.trim_end_matches(".c"));
    // ROOFLINE_TEST_FIXTURES: where the sources are when this test executable runs on another
    // machine (`scripts/mixprec/mixprec.sh run trace`).
    let dir_of_sources = std::env::var_os("ROOFLINE_TEST_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace"));
    let src_path = dir_of_sources.join(src);
    let st = std::process::Command::new("cc")
        .arg("-O2")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(src_path)
        .output()
        .ok()?;
    if !st.status.success() {
        eprintln!(
            "skipping: cc {src} failed (a compiler without these intrinsics?): {}",
            String::from_utf8_lossy(&st.stderr)
        );
        return None;
    }
    Some(exe)
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {s}");
    s | 1
}

fn pick(seed: &mut u64, lo: u64, hi: u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    lo + *seed % (hi - lo)
}

/// A program's own account of its work: per class (`EXPECT class n`), totals (`EXPECT_KEY n`),
/// and the families it ran (`RAN family`).
type Account = (BTreeMap<String, f64>, BTreeMap<String, f64>, Vec<String>);

fn expectations(exe: &Path, arg: &str) -> Option<Account> {
    let out = std::process::Command::new(exe).arg(arg).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.code() == Some(3) {
        eprintln!("skipping: {}", text.trim());
        return None;
    }
    assert!(out.status.success(), "{} failed: {text}", exe.display());
    let (mut classes, mut totals, mut ran) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["EXPECT", class, n] => {
                classes.insert(class.to_string(), n.parse::<f64>().unwrap());
            }
            ["RAN", family] => ran.push(family.to_string()),
            ["CHECK", verdict, ..] => assert_eq!(*verdict, "ok", "{text}"),
            [key, n] if key.starts_with("EXPECT_") => {
                totals.insert(key.to_string(), n.parse::<f64>().unwrap());
            }
            _ => {}
        }
    }
    Some((classes, totals, ran))
}

fn traced(exe: &Path, arg: &str, env: &[(&str, &str)]) -> Value {
    let out = Command::cargo_bin("roofline")
        .unwrap()
        .args(["measure", "--backend", "trace", "--json", "--"])
        .arg(exe)
        .arg(arg)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    d["points"][0].clone()
}

const MIXED: [&str; 10] = [
    "packed512_bf16",
    "packed256_bf16",
    "packed512_int8",
    "packed256_int8",
    "packed512_int16",
    "packed512_half",
    "scalar_half",
    "tile_bf16",
    "tile_fp16",
    "tile_int8",
];

#[test]
fn simd_dot_products_and_fp16_are_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile(dir.path(), "mixprec_simd.c", &[]) else {
        return;
    };
    let mut s = seed();
    let n = pick(&mut s, 200, 4000).to_string();
    let Some((classes, totals, ran)) = expectations(&exe, &n) else {
        return;
    };
    eprintln!("families this CPU ran: {ran:?}");
    // Without the code cache, and with it (short paths, so that the loops, masked ones
    // included, run as translations counting their active lanes).
    for env in [&[][..], &[("ROOFLINE_TRACE_CACHE", "2"), ("ROOFLINE_TRACE_PATH_INSNS", "16")][..]] {
        let p = traced(&exe, &n, env);
        assert_counts(&p["flops"], &classes, &totals);
        if !env.is_empty() {
            let c = &p["extra"]["trace"]["cache"];
            assert!(c["blocks"].as_u64().unwrap() > 0, "no translation ran: {c}");
        }
    }
}

fn assert_counts(f: &Value, classes: &BTreeMap<String, f64>, totals: &BTreeMap<String, f64>) {
    let by_class = f["by_class"].as_object().unwrap();
    let got = |k: &str| by_class.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    for k in MIXED {
        assert_eq!(got(k), classes.get(k).copied().unwrap_or(0.0), "{k}: {f}");
    }
    // Integer dot products are operations, kept out of flops.total.
    let int_ops = totals["EXPECT_INT_OPS"];
    assert_eq!(f["int_ops"].as_f64(), (int_ops > 0.0).then_some(int_ops), "{f}");
    assert_eq!(
        f["int_ops_effective"].as_f64(),
        (int_ops > 0.0).then_some(totals["EXPECT_INT_OPS_EFFECTIVE"]),
        "{f}"
    );
    let float_expected: f64 = classes.iter().filter(|(k, _)| !k.contains("int")).map(|(_, v)| v).sum();
    let other = f["total"].as_f64().unwrap() - float_expected;
    // Masked lanes left out of effective exactly; whatever else the program and libc ran is unmasked.
    assert_eq!(f["effective"].as_f64(), Some(totals["EXPECT_EFFECTIVE"] + other), "{f}");
}

#[test]
fn amx_work_follows_the_tile_configuration_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile(dir.path(), "amx_shapes.c", &["-mamx-tile", "-mamx-bf16", "-mamx-int8"]) else {
        return;
    };
    // The program asks the kernel for AMX (arch_prctl) first; without AMX it says SKIP.
    let mut s = seed();
    let reps = pick(&mut s, 5, 300).to_string();
    let Some((classes, _, _)) = expectations(&exe, &reps) else { return };
    let f = traced(&exe, &reps, &[])["flops"].clone();
    for k in ["tile_bf16", "tile_int8"] {
        assert_eq!(f["by_class"][k].as_f64(), classes.get(k).copied(), "{k}: {f}");
    }
    assert_eq!(f["int_ops"].as_f64(), classes.get("tile_int8").copied());
}

/// Tile loads and stores whose rows first touch their pages (one page per row): TILELOADD and
/// TILESTORED restart at the faulting row, and the single-step that counts them traps back at
/// the same instruction. The bytes of the function holding them must still be rows × colsb
/// per instruction, once (they were more, partial rows counted again, before restarts were
/// recognized).
#[test]
fn amx_tile_bytes_are_counted_once_when_rows_fault() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile(dir.path(), "amx_first_touch.c", &["-mamx-tile"]) else {
        return;
    };
    let mut s = seed();
    let (rounds, rows, colsb) = (pick(&mut s, 3, 40), pick(&mut s, 2, 17), 4 * pick(&mut s, 1, 17));
    let args = [rounds.to_string(), rows.to_string(), colsb.to_string()];
    let out = std::process::Command::new(&exe).args(&args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.code() == Some(3) {
        eprintln!("skipping: {}", text.trim());
        return;
    }
    assert!(out.status.success(), "{text}");
    let want: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("EXPECT_TILE_BYTES "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert_eq!(want, (4 * rounds * rows * colsb) as f64);
    let out = Command::cargo_bin("roofline")
        .unwrap()
        .args(["measure", "--backend", "trace", "--by-function", "--json", "--"])
        .arg(&exe)
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &d["points"][0];
    let rows_of = p["extra"]["by_function"].as_array().unwrap();
    let tiles = rows_of
        .iter()
        .find(|r| r["function"].as_str().is_some_and(|f| f.starts_with("tile_rounds")))
        .unwrap_or_else(|| panic!("no tile_rounds row: {rows_of:?}"));
    assert_eq!(
        tiles["core_bytes"].as_f64(),
        Some(want),
        "rounds {rounds}, {rows} rows × {colsb} B: {tiles}"
    );
    // The faults did happen inside the tile instructions and were recognized as restarts.
    let restarts = p["extra"]["trace"]["tile_restarts"].as_u64().unwrap();
    eprintln!("tile restarts: {restarts}");
}
