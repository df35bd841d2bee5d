//! `cargo roofline` on a crate generated in a temporary directory: it builds the target in
//! release, measures it through `roofline measure` and writes the report; W matches what
//! `roofline measure --backend trace` gives for the same binary, and equals the 2·n flops of
//! the fixture's dot product.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

const MAIN_RS: &str = r#"
fn main() {
    let a: Vec<u64> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let (n, seed) = (a[0] as usize, a[1]);
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 11) as f64
    };
    let x: Vec<f64> = (0..n).map(|_| next()).collect();
    let y: Vec<f64> = (0..n).map(|_| next()).collect();
    // A sequential sum: no reassociation, so one mulsd and one addsd per element.
    let mut d = 0.0f64;
    for i in 0..n {
        d += x[i] * y[i];
    }
    println!("{}", d.to_bits());
}
"#;

/// A one-binary crate `dotfx` (its own workspace, no dependencies) in `dir`.
fn fixture(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"dotfx\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN_RS).unwrap();
}

fn cargo_roofline(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("cargo-roofline").unwrap();
    c.arg("roofline").current_dir(dir).env("CARGO_TARGET_DIR", dir.join("target"));
    c
}

fn total_w(report: &Value) -> f64 {
    report["points"][0]["flops"]["total"]
        .as_f64()
        .unwrap_or_else(|| panic!("no W in {report}"))
}

/// A pseudo-random size, so that every run checks another n.
fn random_n() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    5_000 + u64::from(t.subsec_nanos()) % 20_000
}

#[test]
fn builds_measures_and_writes_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fixture(dir);
    let (n, seed) = (random_n(), u64::from(std::process::id()));
    let (n_arg, seed_arg) = (n.to_string(), seed.to_string());
    let out = cargo_roofline(dir)
        .args(["--bin", "dotfx", "--backend", "trace", "-o", "dot.html", "--", &n_arg, &seed_arg])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let html = std::fs::read_to_string(dir.join("dot.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("dotfx"), "not a roofline page");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("target/roofline/dotfx.json")).unwrap()).unwrap();
    let w = total_w(&kept);
    assert!(w > 0.0);

    // The same binary through `roofline measure --backend trace`.
    let exe = dir.join("target/release/dotfx");
    let measured = Command::cargo_bin("roofline")
        .unwrap()
        .args(["measure", "--backend", "trace", "--json", "--"])
        .arg(&exe)
        .args([&n_arg, &seed_arg])
        .output()
        .unwrap();
    assert!(measured.status.success(), "{}", String::from_utf8_lossy(&measured.stderr));
    let measured: Value = serde_json::from_slice(&measured.stdout).unwrap();
    assert_eq!(w, total_w(&measured));
    assert_eq!(w, 2.0 * n as f64, "one multiply and one add per element");

    // The trace backend attributes the work: every flop on the loop's line of main.rs, in
    // the kept JSON and in the page.
    let loop_line = MAIN_RS.lines().position(|l| l.contains("d += x[i] * y[i];")).unwrap() + 1;
    let want = format!("src/main.rs:{loop_line}");
    let rows = kept["points"][0]["extra"]["by_line"].as_array().expect("by_line under trace");
    let at: f64 = rows
        .iter()
        .filter(|r| r["line"].as_str().unwrap().ends_with(&want))
        .map(|r| r["flops"].as_f64().unwrap())
        .sum();
    assert_eq!(at, w, "{want} in {rows:#?}");
    assert!(
        html.contains("Where the work is") && html.contains(&want),
        "no attribution table in the page"
    );
    assert!(html.contains("dotfx::main"), "the function is named, demangled");

    // Built with line tables: the executable carries DWARF line info.
    let elf = std::fs::read(&exe).unwrap();
    assert!(elf.windows(11).any(|w| w == b".debug_line"), "no .debug_line section");
}

#[test]
fn default_output_and_json_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fixture(dir);
    let n = random_n().to_string();
    // No target named: the package's only binary; no -o: roofline-NAME.html here.
    cargo_roofline(dir).args(["--", &n, "3"]).assert().success();
    assert!(dir.join("roofline-dotfx.html").is_file());
    cargo_roofline(dir)
        .args(["--bin", "dotfx", "-o", "r.json", "--", &n, "5"])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(r["schema"], "roofline.report/1");
    assert!(total_w(&r) > 0.0);
}

#[test]
fn bad_targets_exit_2_with_a_hint_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fixture(dir);
    for (args, says) in [
        (vec!["--bin", "nope"], "no bin target named `nope`"),
        (vec!["--example", "nope"], "no example target named `nope`"),
        (vec!["--bin", "dotfx", "-o", "r.txt"], "unsupported extension"),
    ] {
        let out = cargo_roofline(dir).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says) && err.contains("hint:"), "{args:?}: {err}");
        if args[1] == "nope" {
            assert!(err.contains("targets here: dotfx") || err.contains("targets here: none"), "{err}");
        }
    }
    assert!(!dir.join("target").exists(), "nothing may be built for bad input");
    assert!(!dir.join("roofline-nope.html").exists());
    // Outside any crate: cargo metadata's complaint, exit 2.
    let empty = tempfile::tempdir().unwrap();
    let out = cargo_roofline(empty.path()).args(["--bin", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A dot product of `n` elements (the first argument that is a number; 10 000 without one, so
/// a bench run with `--bench` works): 2·n flops, one multiply and one add per element (the
/// inputs are integers converted, which is no flop).
const DOT_RS: &str = r#"
fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let x: Vec<f64> = (0..n).map(|i| (i % 97) as f64).collect();
    let y: Vec<f64> = (0..n).map(|i| (i % 89) as f64).collect();
    let mut d = 0.0f64;
    for i in 0..n {
        d += x[i] * y[i];
    }
    println!("{d}");
}
"#;

/// The crate `cargo roofline --help`'s examples name: `my-app` with a binary, an example `dot`
/// and a bench `dot` (its own workspace, no dependencies).
fn my_app(dir: &Path) {
    for sub in ["src", "examples", "benches"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"my-app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [[bench]]\nname = \"dot\"\nharness = false\n\n[workspace]\n",
    )
    .unwrap();
    for file in ["src/main.rs", "examples/dot.rs", "benches/dot.rs"] {
        std::fs::write(dir.join(file), DOT_RS).unwrap();
    }
}

/// The `Examples:` lines of `cargo roofline --help`, without their comments.
fn help_examples() -> Vec<String> {
    let help = Command::cargo_bin("cargo-roofline")
        .unwrap()
        .args(["roofline", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    String::from_utf8(help.stdout)
        .unwrap()
        .lines()
        .skip_while(|l| l.trim() != "Examples:")
        .filter(|l| l.starts_with("  cargo roofline"))
        .map(|l| l.split("  #").next().unwrap().trim().to_string())
        .collect()
}

#[test]
fn every_help_example_runs() {
    let examples = help_examples();
    assert!(examples.len() >= 3, "cargo roofline --help: {examples:?}");
    for target in ["--bin", "--example", "--bench"] {
        assert!(
            examples.iter().any(|e| e.contains(target)),
            "no example with {target}: {examples:?}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    my_app(dir);
    for line in &examples {
        let args: Vec<&str> = line.split_whitespace().skip(2).collect();
        let out = cargo_roofline(dir).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "`{line}`: {}", String::from_utf8_lossy(&out.stderr));
        let file = args
            .iter()
            .position(|a| *a == "-o")
            .map(|i| args[i + 1].to_string())
            .unwrap_or_else(|| "roofline-my-app.html".to_string());
        let text = std::fs::read_to_string(dir.join(&file)).unwrap_or_else(|e| panic!("`{line}`: {file}: {e}"));
        match file.rsplit('.').next().unwrap() {
            "json" => {
                let r: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(r["schema"], "roofline.report/1", "`{line}`");
                // The element count after `--` reached the program: 2·n flops where the
                // tracer counted them (perf on a PMU machine counts more than the loop).
                let n: f64 = args
                    .iter()
                    .skip_while(|a| **a != "--")
                    .nth(1)
                    .map_or(10_000.0, |a| a.parse().unwrap());
                if r["points"][0]["provenance"]["flops"] == "trace" {
                    assert_eq!(total_w(&r), 2.0 * n, "`{line}`");
                } else {
                    assert!(total_w(&r) >= 2.0 * n, "`{line}`");
                }
            }
            "html" => {
                // The page names the target it measured.
                let target = args
                    .iter()
                    .position(|a| ["--bin", "--example", "--bench"].contains(a))
                    .map_or("my-app", |i| args[i + 1]);
                assert!(
                    text.contains("<svg") && text.contains(target),
                    "`{line}`: not a roofline page of {target}"
                );
            }
            "svg" => assert!(text.contains("<svg"), "`{line}`: not an SVG"),
            other => panic!("`{line}`: an example writes .{other}, which this test does not check"),
        }
    }
}
