//! `roofline gate` end to end on the fixture reports in tests/fixtures/gate/.

use assert_cmd::Command;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gate")
        .join(name)
        .display()
        .to_string()
}

fn gate(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("roofline").unwrap().arg("gate").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unchanged_work_and_speed_pass() {
    let (code, out, _) = gate(&["--baseline", &fixture("baseline.json"), "--current", &fixture("current-same.json")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.lines().last().unwrap().starts_with("roofline gate: PASS"));
    // every point's time was judged statistically (12 repetitions each)
    assert_eq!(
        out.lines()
            .filter(|l| l.contains(" seconds ") && l.contains("Mann-Whitney"))
            .count(),
        3,
        "{out}"
    );
}

#[test]
fn regressions_fail_with_exit_1_and_name_what_changed() {
    let (code, out, _) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-regressed.json"),
        "--rules",
        &fixture("rules.toml"),
    ]);
    assert_eq!(code, 1, "{out}");
    let failing: Vec<(&str, &str)> = out
        .lines()
        .filter(|l| l.contains("FAIL") && !l.starts_with("roofline gate"))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap(), w.next().unwrap())
        })
        .collect();
    for expected in [
        ("triad_avx2", "flops.total"),
        ("triad_avx2", "flops.by_class.packed256_double"),
        ("dgemm_avx512", "seconds"),
        ("dgemm_avx512", "gflops"),
        ("dgemm_avx512", "roof_fraction"),
        ("dot_scalar", "bytes.dram"),
        ("dot_scalar", "ai.dram"),
    ] {
        assert!(failing.contains(&expected), "{expected:?} missing from {failing:?}");
    }
    assert_eq!(failing.len(), 7, "{out}");
}

#[test]
fn one_repetition_gets_thresholds_and_says_so() {
    let (code, out, _) = gate(&[
        "--baseline",
        &fixture("baseline-single.json"),
        "--current",
        &fixture("current-same.json"),
    ]);
    assert_eq!(code, 0, "{out}");
    let seconds: Vec<&str> = out.lines().filter(|l| l.contains(" seconds ")).collect();
    assert_eq!(seconds.len(), 3);
    assert!(
        seconds
            .iter()
            .all(|l| l.contains("too few for a statistical test") && !l.contains("Mann-Whitney")),
        "{out}"
    );
}

#[test]
fn new_and_vanished_points() {
    let (code, out, _) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-new-vanished.json"),
        "--json",
    ]);
    assert_eq!(code, 1, "a vanished point fails by default");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["vanished_points"], serde_json::json!(["dot_scalar"]));
    assert_eq!(v["summary"]["new_points"], serde_json::json!(["spmv_csr"]));
    assert_eq!(v["passed"], false);
}

#[test]
fn formats_and_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("gate.xml");
    let (code, out, _) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-regressed.json"),
        "--format",
        "github",
        "-o",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert_eq!(out.lines().filter(|l| l.starts_with("::error ")).count(), 5, "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml") && xml.contains("failures=\"5\""), "{xml}");
    let (_, md, _) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-regressed.json"),
        "--format",
        "markdown",
    ]);
    assert!(md.starts_with("### roofline gate: FAIL"));
    let (code, _, err) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-same.json"),
        "--json",
        "--format",
        "text",
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-same.json"),
        "-o",
        "/tmp/x.csv",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unsupported extension"), "{err}");
}

#[test]
fn bad_input_exits_2_with_the_file_and_the_problem() {
    let base = fixture("baseline.json");
    let same = fixture("current-same.json");
    for (args, needle) in [
        (
            vec!["--baseline", &base, "--current", &fixture("corrupt.json")],
            "corrupt.json: not JSON",
        ),
        (
            vec!["--baseline", &base, "--current", &fixture("report-v2.json")],
            "report-v2.json: schema version '2'",
        ),
        (
            vec!["--baseline", &fixture("report-v2.json"), "--current", &same],
            "report-v2.json: schema version '2'",
        ),
        (
            vec!["--baseline", "/nonexistent/base.json", "--current", &same],
            "--baseline /nonexistent/base.json: cannot read",
        ),
        (
            vec![
                "--baseline",
                &base,
                "--current",
                &same,
                "--rules",
                &fixture("rules-unknown-metric.toml"),
            ],
            "unknown metric",
        ),
        (
            vec!["--baseline", &base, "--current", &same, "--rules", "/nonexistent/rules.toml"],
            "--rules /nonexistent/rules.toml",
        ),
        (vec!["--baseline", &base], "nothing to compare"),
        (
            vec!["--baseline", &base, "--current", &same, "--", "true"],
            "both --current and a command",
        ),
    ] {
        let (code, out, err) = gate(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: nothing on stdout");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(err.contains("hint:"), "{args:?}: {err}");
    }
}

#[test]
fn update_baseline_creates_and_replaces_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let b = base.to_str().unwrap();
    let (code, _, err) = gate(&[
        "--baseline",
        b,
        "--current",
        &fixture("current-regressed.json"),
        "--update-baseline",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no baseline yet"));
    let (code, _, _) = gate(&["--baseline", b, "--current", &fixture("current-regressed.json")]);
    assert_eq!(code, 0, "the new baseline equals the current report");
    let (code, _, err) = gate(&["--baseline", b, "--current", &fixture("current-same.json"), "--update-baseline"]);
    assert_eq!(code, 0);
    assert!(err.contains("failing checks accepted"), "{err}");
    let (code, _, _) = gate(&["--baseline", b, "--current", &fixture("current-same.json")]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp files left behind");
}

#[test]
fn ci_rules_gate_only_exact_work_and_core_traffic() {
    // The project's CI rule set: dgemm's 30 % slowdown and dot's DRAM bytes do not matter,
    // triad's changed flop count does.
    let (code, out, _) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-regressed.json"),
        "--rules",
        &fixture("ci-rules.toml"),
    ]);
    assert_eq!(code, 1);
    assert!(!out.contains(" seconds ") && !out.contains("bytes.dram"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.contains("FAIL") && l.starts_with("triad_avx2")).count(),
        2,
        "{out}"
    );
    let (code, _, _) = gate(&[
        "--baseline",
        &fixture("baseline.json"),
        "--current",
        &fixture("current-same.json"),
        "--rules",
        &fixture("ci-rules.toml"),
    ]);
    assert_eq!(code, 0);
}

#[test]
fn gate_measures_a_command_with_the_trace_backend() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json").display().to_string();
    let prog = dir.path().join("sum");
    let src = dir.path().join("sum.c");
    std::fs::write(
        &src,
        "int main(int c,char**v){volatile double s=0; for(int i=0;i<1000+c;i++) s+=i*0.5; return s<0;}",
    )
    .unwrap();
    if !std::process::Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
    {
        eprintln!("skipped: no C compiler");
        return;
    }
    let p = prog.display().to_string();
    // First run writes the baseline; the same command then passes, a different one (more work) fails.
    let (code, _, err) = gate(&["--baseline", &base, "--update-baseline", "--backend", "trace", "--", &p]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = gate(&["--baseline", &base, "--backend", "trace", "--", &p]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = gate(&["--baseline", &base, "--backend", "trace", "--", &p, "extra-arg"]);
    assert_eq!(code, 1, "more loop iterations must change the exact flop count: {out}");
}

#[test]
fn gate_measures_with_perf_through_the_measure_path() {
    let has_pmu = ["cpu", "cpu_core"]
        .iter()
        .any(|p| std::path::Path::new("/sys/bus/event_source/devices").join(p).exists());
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json").display().to_string();
    let (code, out, err) = gate(&["--baseline", &base, "--update-baseline", "--backend", "perf", "--", "true"]);
    if has_pmu {
        assert_eq!(code, 0, "{err}");
        assert!(std::path::Path::new(&base).exists());
        return;
    }
    // No PMU (CI's VM): measure's own cause and hint, exit 2, one line each, nothing written.
    assert_eq!(code, 2, "{out}{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].starts_with("roofline: no hardware core PMU"), "{err}");
    assert!(err.contains("--backend trace"), "{err}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("roofline: ")).count(), 1, "{err}");
    assert!(!std::path::Path::new(&base).exists(), "no baseline half-written");
    // A command that is not there: measure's exit 2 and message, passed on.
    let (code, _, err) = gate(&["--baseline", &base, "--backend", "perf", "--", "/nonexistent/cmd"]);
    assert_eq!(code, 2, "{err}");
}
