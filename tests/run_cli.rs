//! `roofline kernels` and `roofline run` from the outside: output shapes, reports, refusals.

use assert_cmd::Command;
use roofline::kernels::{Variant, check};

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn one_line_error(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.starts_with("roofline: "), "{err}");
    assert!(out.stdout.is_empty(), "stdout must stay empty on errors");
    err
}

#[test]
fn kernels_json_lists_runnable_variants_and_formulas() {
    let out = roofline().args(["kernels", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ks = v["kernels"].as_array().unwrap();
    let dgemm = ks.iter().find(|k| k["name"] == "dgemm").expect("dgemm listed");
    for var in dgemm["variants"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap();
        assert_eq!(
            var["runnable"].as_bool().unwrap(),
            check::runnable(Variant::from_name(name).unwrap())
        );
        assert!(var["formula"].as_str().unwrap().contains("W ="));
    }
    assert_eq!(dgemm["variants"][0]["name"], "scalar");
    for name in [
        "stencil2d",
        "spmv",
        "sgemm",
        "normalize_naive",
        "normalize_fused",
        "cos_chain_unfused",
        "cos_chain_fused",
    ] {
        assert!(ks.iter().any(|k| k["name"] == name), "{name}");
    }
    let table = roofline().arg("kernels").output().unwrap();
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("normalize_fused"));
}

#[test]
fn run_json_is_a_report_with_analytic_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let out = roofline()
        .args([
            "run",
            "stencil2d",
            "--size",
            "37",
            "--variant",
            "scalar",
            "--threads",
            "1",
            "--repeat",
            "3",
            "--min-time",
            "0",
            "--json",
            "-o",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = roofline::report::Report::from_json(&String::from_utf8_lossy(&out.stdout), "stdout").unwrap();
    let written = roofline::report::Report::from_json(&std::fs::read_to_string(&file).unwrap(), "r.json").unwrap();
    assert_eq!(written.points.len(), 1);
    let p = &report.points[0];
    assert_eq!(p.name, "stencil2d/scalar/n=37");
    assert_eq!(p.threads, 1);
    assert!(p.seconds_samples.len() >= 3);
    assert!(p.seconds > 0.0);
    assert_eq!(p.flops.total, 4.0 * 35.0 * 35.0);
    assert_eq!(p.flops.by_class["scalar_double"], 4.0 * 35.0 * 35.0);
    assert_eq!(p.bytes["core"], 40.0 * 35.0 * 35.0 + 8.0);
    assert_eq!(serde_json::to_value(p.provenance.flops).unwrap(), "analytic");
    assert_eq!(serde_json::to_value(p.provenance.seconds).unwrap(), "native");
    assert_eq!(report.environment.tool_version, env!("CARGO_PKG_VERSION"));
    assert!(report.environment.command_line.iter().any(|a| a == "stencil2d"));
}

#[test]
fn bytes_pick_the_size_and_default_variant_is_the_widest() {
    let out = roofline()
        .args([
            "run",
            "cos_chain_fused",
            "--bytes",
            "64KiB",
            "--repeat",
            "2",
            "--min-time",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["points"][0];
    assert_eq!(p["extra"]["size"], 4096);
    let widest = [Variant::Avx512, Variant::Avx2, Variant::Sse, Variant::Scalar]
        .into_iter()
        .find(|v| check::runnable(*v))
        .unwrap();
    assert_eq!(p["extra"]["variant"], widest.name());
}

#[test]
fn every_thread_count_of_the_list_gets_a_point() {
    let out = roofline()
        .args([
            "run",
            "spmv",
            "--size",
            "50",
            "--threads",
            "all",
            "--repeat",
            "2",
            "--min-time",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as u64;
    assert_eq!(v["points"].as_array().unwrap().len(), 1);
    assert_eq!(v["points"][0]["threads"], all);
    // W scales with the instances: one per thread.
    let one = roofline::kernels::api::find("spmv").unwrap().counts(
        50,
        Variant::from_name(v["points"][0]["extra"]["variant"].as_str().unwrap()).unwrap(),
    );
    assert_eq!(v["points"][0]["flops"]["total"].as_f64().unwrap(), (one.flops_total() * all) as f64);
}

#[test]
fn bad_input_is_one_cause_and_exit_2() {
    let cases: &[&[&str]] = &[
        &["run", "no_such_kernel", "--size", "10"],
        &["run", "spmv", "--variant", "avx9", "--size", "10"],
        &["run", "spmv", "--size", "0"],
        &["run", "dgemm", "--size", "100000000"],
        &["run", "spmv", "--bytes", "lots"],
        &["run", "spmv", "--size", "10", "--repeat", "0"],
        &["run", "spmv", "--size", "10", "--backend", "trace"],
        &["run", "spmv", "--size", "10", "--threads", "0"],
    ];
    for args in cases {
        let out = roofline().args(*args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let err = one_line_error(&out);
        assert!(err.lines().count() <= 2, "{args:?}: cause + hint only: {err}");
    }
    // clap's own usage errors also exit 2
    let out = roofline()
        .args(["run", "spmv", "--size", "10", "--bytes", "1MiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_variant_this_cpu_lacks_is_refused_without_sigill() {
    let Some(missing) = Variant::ALL.into_iter().find(|v| !check::runnable(*v)) else {
        return; // this CPU runs every variant: nothing to refuse here
    };
    let out = roofline()
        .args(["run", "dgemm", "--size", "8", "--variant", missing.name()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line_error(&out).contains("cannot run"));
}

#[test]
fn bad_output_path_is_refused_before_measuring() {
    let out = roofline()
        .args(["run", "spmv", "--size", "10", "-o", "/nonexistent-dir/r.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = roofline().args(["run", "spmv", "--size", "10", "-o", "r.txt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn platform_option_is_taken_by_every_measuring_command() {
    // A name that is no platform: one line, exit 2, nothing on stdout, before any measuring.
    for cmd in [
        &["run", "triad"][..],
        &["sweep", "triad"],
        &["ceilings", "--quick"],
        &["validate"],
        &["profile"],
    ] {
        let out = roofline().args(cmd).args(["--platform", "nosuch"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert!(one_line_error(&out).contains("no such platform"), "{cmd:?}");
        assert!(out.stdout.is_empty(), "{cmd:?}");
    }
    // A named platform is the machine model the report carries, whatever this CPU is.
    for key in ["skx", "zen4"] {
        let out = roofline()
            .args(["run", "dot", "--size", "1000", "--repeat", "1", "--json", "--platform", key])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["machine"]["microarchitecture"], key);
        assert_eq!(v["machine"]["identified_by"], "platform option");
    }
}
