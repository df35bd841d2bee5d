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
    let report = roofline::Report::from_json(&String::from_utf8_lossy(&out.stdout), "stdout").unwrap();
    let written = roofline::Report::from_json(&std::fs::read_to_string(&file).unwrap(), "r.json").unwrap();
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
        &["run", "spmv", "--size", "10", "--backend", "perf"],
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

/// A size in [lo, hi) that changes from run to run (printed, to replay a failure).
fn random_size(lo: usize, hi: usize, salt: u64) -> usize {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x = t ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    let n = lo + (x % (hi - lo) as u64) as usize;
    eprintln!("size {n} (salt {salt})");
    n
}

#[test]
fn trace_backend_counts_w_and_core_q_and_times_natively() {
    // stencil2d scalar on an n×n grid: 4 flops per interior point, (n-2)² of them; core Q is
    // 40 B per point + 8 (analytic), the trace adds only the call path's bytes (< 1 KiB).
    let n = random_size(12, 160, 1);
    let out = roofline()
        .args([
            "run",
            "stencil2d",
            "--backend",
            "trace",
            "--variant",
            "scalar",
            "--repeat",
            "2",
            "--min-time",
            "0",
            "--json",
            "--size",
        ])
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["points"][0];
    let interior = ((n - 2) * (n - 2)) as f64;
    assert_eq!(p["flops"]["total"].as_f64(), Some(4.0 * interior));
    assert_eq!(p["flops"]["by_class"]["scalar_double"].as_f64(), Some(4.0 * interior));
    assert_eq!(p["flops"]["by_class"].as_object().unwrap().len(), 1);
    let core = p["bytes"]["core"].as_f64().unwrap();
    let analytic_core = 40.0 * interior + 8.0;
    assert!(
        core >= analytic_core && core <= analytic_core + 1024.0,
        "core {core} vs {analytic_core}"
    );
    assert_eq!(p["provenance"]["flops"], "trace");
    assert_eq!(p["provenance"]["bytes"]["core"], "trace");
    assert_eq!(p["provenance"]["bytes"]["dram"], "analytic");
    assert_eq!(p["provenance"]["seconds"], "native");
    assert!(p["seconds_samples"].as_array().unwrap().len() >= 2);
    assert!(p["seconds"].as_f64().unwrap() > 0.0);

    // triad, widest variant, one and two threads: each thread's instance is traced; W per
    // class is the kernel's analytic W times the threads.
    let n = random_size(1000, 40_000, 2);
    let out = roofline()
        .args([
            "run",
            "triad",
            "--backend",
            "trace",
            "--threads",
            "1,2",
            "--repeat",
            "1",
            "--min-time",
            "0",
            "--json",
            "--size",
        ])
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let kernel = roofline::kernels::api::find("triad").unwrap();
    for p in points {
        let threads = p["threads"].as_u64().unwrap();
        let variant = Variant::from_name(p["extra"]["variant"].as_str().unwrap()).unwrap();
        let c = kernel.counts(n, variant);
        assert!(c.flops_total() > 0);
        for (class, f) in &c.flops {
            assert_eq!(
                p["flops"]["by_class"][class.key()].as_f64(),
                Some((f * threads) as f64),
                "{class:?} at {threads} thread(s)"
            );
        }
        assert_eq!(p["flops"]["total"].as_f64(), Some((c.flops_total() * threads) as f64));
        let core = p["bytes"]["core"].as_f64().unwrap();
        let analytic = (c.core_bytes() * threads) as f64;
        assert!(
            core >= analytic && core <= analytic + 1024.0 * threads as f64,
            "core {core} vs {analytic}"
        );
    }
}

/// `--backend perf` counts on every team thread around exactly the timed calls and divides by
/// the calls: with software events (any machine), task-clock per call is the threads' CPU time
/// per call — between the fastest and slowest sample times the team size (plus the barrier
/// overhead amortized over each batch) — and W and Q stay analytic, saying so.
#[test]
fn perf_backend_counts_per_timed_call_on_every_thread() {
    let n = random_size(20_000, 60_000, 7);
    let out = roofline()
        .args([
            "run",
            "triad",
            "--backend",
            "perf",
            "--events",
            "software",
            "--threads",
            "1,2",
            "--repeat",
            "5",
        ])
        .args(["--min-time", "0.05", "--json", "--size"])
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = roofline::kernels::api::find("triad").unwrap();
    for p in v["points"].as_array().unwrap() {
        let threads = p["threads"].as_f64().unwrap();
        let samples: Vec<f64> = p["seconds_samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        let (lo, hi) = samples.iter().fold((f64::MAX, 0f64), |(a, b), s| (a.min(*s), b.max(*s)));
        let task = p["extra"]["task_clock_seconds"].as_f64().expect("task-clock counted");
        assert!(
            task >= 0.8 * threads * lo && task <= 1.5 * threads * hi,
            "{threads} threads: task-clock {task:e} s per call vs samples {lo:e}..{hi:e}"
        );
        assert_eq!(p["provenance"]["flops"], "analytic");
        assert_eq!(p["provenance"]["bytes"]["core"], "analytic");
        let variant = Variant::from_name(p["extra"]["variant"].as_str().unwrap()).unwrap();
        assert_eq!(
            p["flops"]["total"].as_f64().unwrap(),
            threads * k.counts(n, variant).flops_total() as f64
        );
    }
}

/// With the platform's events: on a machine without a core PMU (this CI), one line naming the
/// cause and exit 2 before anything runs; where a PMU exists, hardware W per call matches the
/// kernel's analytic W (FP_ARITH / AMD FLOPs events count the same instructions).
#[test]
fn perf_backend_platform_events_need_a_pmu() {
    let n = random_size(20_000, 60_000, 8);
    let out = roofline()
        .args([
            "run",
            "triad",
            "--backend",
            "perf",
            "--repeat",
            "3",
            "--min-time",
            "0.02",
            "--json",
            "--size",
        ])
        .arg(n.to_string())
        .output()
        .unwrap();
    let pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists()
        || std::path::Path::new("/sys/bus/event_source/devices/cpu_core").exists();
    let err = String::from_utf8_lossy(&out.stderr);
    if !pmu {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(out.stdout.is_empty());
        assert!(err.lines().next().unwrap().contains("PMU"), "{err}");
        return;
    }
    if out.status.code() == Some(2) {
        eprintln!("skip: a PMU exists but perf refused: {err}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["points"][0];
    assert_eq!(p["provenance"]["flops"], "perf");
    let w = p["flops"]["total"].as_f64().unwrap();
    let analytic = p["extra"]["analytic_flops"].as_f64().unwrap();
    assert!((w / analytic - 1.0).abs() < 0.02, "perf W {w} vs analytic {analytic}");
}
