//! `roofline gpu` on the CLI: import works anywhere; driver-dependent commands skip cleanly
//! (exit 2, one line) where no NVIDIA driver is present.

use assert_cmd::Command;

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/ncu/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn import_writes_a_valid_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gpu.json");
    let o = roofline()
        .args(["gpu", "import", &fixture("dgemm_hier.csv"), "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let r = roofline::report::Report::from_json(&text, "gpu.json").unwrap();
    assert_eq!(r.points.len(), 1);
    assert_eq!(r.points[0].name, "dgemm");
    assert!(r.points[0].gflops.unwrap() > 1000.0);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("dgemm"));
}

#[test]
fn import_json_on_stdout_and_kernel_filter() {
    let o = roofline()
        .args(["gpu", "import", &fixture("cos_unfused_mixed.csv"), "--json", "-k", "cos"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "roofline.report/1");
    let o = roofline()
        .args(["gpu", "import", &fixture("cos_unfused_mixed.csv"), "-k", "nomatch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_inputs_exit_2() {
    for args in [vec!["gpu", "import", "/no/such/file.csv"], vec!["gpu", "import", "Cargo.toml"]] {
        let o = roofline().args(&args).current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!o.stderr.is_empty());
    }
    let o = roofline().args(["gpu", "import", &fixture("nomatch.txt")]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = roofline().args(["gpu", "run", "no_such_kernel"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn driver_commands_skip_cleanly_without_a_gpu() {
    if roofline::gpu::device::driver_present() {
        eprintln!("skipped: an NVIDIA driver is present (run the GPU tests per README)");
        return;
    }
    for args in [
        vec!["gpu", "machine"],
        vec!["gpu", "ceilings", "--quick"],
        vec!["gpu", "run", "triad"],
    ] {
        let o = roofline().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no NVIDIA driver"), "{err}");
    }
}

#[test]
fn compare_pairs_cpu_and_gpu_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = dir.path().join("gpu.json");
    let o = roofline()
        .args(["gpu", "import", &fixture("dgemm_hier.csv"), "-o"])
        .arg(&gpu)
        .output()
        .unwrap();
    assert!(o.status.success());
    let cpu = format!("{}/tests/fixtures/reports/several.json", env!("CARGO_MANIFEST_DIR"));
    let svg = dir.path().join("cmp.svg");
    let o = roofline()
        .args(["compare", &cpu])
        .arg(&gpu)
        .args(["--json", "-o"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &v["rows"][0];
    assert_eq!(row["kernel"], "dgemm");
    let (c, g) = (row["cpu_seconds"].as_f64().unwrap(), row["gpu_seconds"].as_f64().unwrap());
    assert!((row["speedup_time"].as_f64().unwrap() - c / g).abs() < 1e-9 * (c / g));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    // No common kernel: exit 2.
    let other = format!("{}/tests/fixtures/reports/rank0.json", env!("CARGO_MANIFEST_DIR"));
    let o = roofline().args(["compare", &other]).arg(&gpu).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}
