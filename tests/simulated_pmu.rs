//! The simulated PMU from the outside: `validate --backend simulated` with injected
//! faults gives each verdict (exact, within tolerance, off by X %, not counted) with the right
//! message, the trust table it saves marks later measurements, and `measure` and `run` run the
//! perf path end to end on it (the region API and criterion: `tests/simulated_region.rs`, a
//! binary of its own because its in-process tracer waits for any child of the process). `validate --backend perf`
//! on a machine without a PMU exits 2 naming `roofline doctor` and `--backend trace`.
//!
//! Sizes are random per run; expected counts are the analytic or traced ones, never outputs
//! copied from the program.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn roofline(cache_home: &Path) -> Command {
    let mut c = Command::cargo_bin("roofline").unwrap();
    // Every trust table these tests write lands in a temporary cache directory.
    c.env("XDG_CACHE_HOME", cache_home).env_remove("ROOFLINE_SIMULATED_PMU");
    c
}

fn ptrace_allowed() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").map_or(true, |s| s.trim() != "3")
}

/// A number in [lo, hi), different per run (printed).
fn random(lo: u64, hi: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x = t ^ u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let v = lo + x % (hi - lo);
    eprintln!("random size {v}");
    v
}

/// The most a simulated count read back through perf's scaling can be off its truth, in flops,
/// for an event of `weight` flops per count on a counter `ratio` (running/enabled) of the
/// run: the PMU counts round(truth × ratio) and scaling divides by ratio
/// (`SimulatedCounterSet::count`, `perf::scale`), so ≤ ½ count / ratio; f64 slack on top.
fn scaling_bound(truth_flops: f64, weight: f64, ratio: f64) -> f64 {
    assert!(ratio > 0.0 && ratio <= 1.0, "running ratio {ratio}");
    weight * 0.5 / ratio + truth_flops * 1e-12
}

/// The running ratio of the least-running event of a point (1 where none was multiplexed).
fn least_running_ratio(point: &Value) -> f64 {
    point["extra"]["multiplex_running_ratio"]
        .as_object()
        .map_or(1.0, |m| m.values().filter_map(Value::as_f64).fold(1.0, f64::min))
}

/// Flops per count of the FP event of a class: its lanes (scalar 1, packed256_double 4, …).
fn lanes(class: &str) -> f64 {
    let Some(rest) = class.strip_prefix("packed") else { return 1.0 };
    let (bits, precision) = rest.split_once('_').unwrap_or_else(|| panic!("class {class}"));
    let lane = match precision {
        "double" => 64.0,
        "single" => 32.0,
        "half" | "bf16" => 16.0,
        _ => panic!("class {class}"),
    };
    bits.parse::<f64>().unwrap_or_else(|_| panic!("class {class}")) / lane
}

fn validate(cache_home: &Path, faults: &str) -> (i32, Value, String) {
    let out = roofline(cache_home)
        .env("ROOFLINE_SIMULATED_PMU", faults)
        .args([
            "validate",
            "--backend",
            "simulated",
            "--platform",
            "skx",
            "--kernels",
            "triad,triad_f32",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    (out.status.code().unwrap_or(-1), doc, err)
}

fn row<'a>(doc: &'a Value, class: &str) -> &'a Value {
    doc["validation"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["class"] == class)
        .unwrap_or_else(|| panic!("no row {class}: {doc:#}"))
}

fn details(r: &Value) -> String {
    r["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn injected_faults_come_out_as_their_verdicts_and_mark_later_measurements() {
    if !ptrace_allowed() {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (code, doc, err) = validate(
        home.path(),
        "packed256_double*0.5,FP_ARITH_INST_RETIRED.SCALAR_SINGLE=enoent,dram=zero",
    );
    assert_eq!(code, 1, "a failed event class is a failed check: {err}");
    assert_eq!(doc["backend"], "simulated");
    // Untouched events: exact.
    assert_eq!(row(&doc, "flops.scalar_double")["verdict"]["verdict"], "exact", "{doc:#}");
    assert_eq!(row(&doc, "flops.packed128_double")["verdict"]["verdict"], "exact");
    // Off by a factor: off by -50 %.
    let v = &row(&doc, "flops.packed256_double")["verdict"];
    assert_eq!(v["verdict"], "off", "{v}");
    assert!((v["relative_error"].as_f64().unwrap() + 0.5).abs() < 1e-3, "{v}");
    // Fails to open: not counted, the errno named.
    let single = row(&doc, "flops.scalar_single");
    assert_eq!(single["verdict"]["verdict"], "not_counted");
    assert!(details(single).contains("ENOENT"), "{single}");
    // Uncore reading zero: off by -100 %, flagged.
    let dram = row(&doc, "bytes.dram");
    assert_eq!(dram["verdict"]["verdict"], "off");
    assert_eq!(dram["verdict"]["relative_error"].as_f64(), Some(-1.0));
    assert!(details(dram).contains("read zero"), "{dram}");
    assert!(err.contains("trust table written"), "{err}");
    let trust = home.path().join("roofline/trust-simulated.json");
    assert!(trust.is_file(), "the trust table lies beside the ceilings cache");
    assert!(
        !home.path().join("roofline/trust.json").exists(),
        "a simulated table never marks real counts"
    );

    // Later measurements with the same (still faulty) PMU say which numbers are untrusted.
    let n = random(20_000, 60_000);
    let out = roofline(home.path())
        .env("ROOFLINE_SIMULATED_PMU", "packed256_double*0.5,dram=zero")
        .args([
            "run",
            "triad",
            "--backend",
            "simulated",
            "--platform",
            "skx",
            "--variant",
            "avx2",
            "--repeat",
            "2",
            "--min-time",
            "0.01",
        ])
        .args(["--size", &n.to_string(), "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("cannot run the avx2 variant") {
        eprintln!("skipped the run check: no AVX2 here");
        return;
    }
    assert!(out.status.success(), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &r["points"][0];
    let untrusted: Vec<&str> = p["provenance"]["untrusted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        untrusted.contains(&"flops.packed256_double") && untrusted.contains(&"bytes.dram"),
        "{untrusted:?}"
    );
    let notes = p["provenance"]["notes"].to_string();
    assert!(notes.contains("UNTRUSTED") && notes.contains("off by -50.0 %"), "{notes}");
    assert_eq!(p["provenance"]["flops"], "simulated");
    // The faulty event counts half the triad's 2n flops (AVX2: whole vectors, the rest scalar),
    // off by the scaling of a multiplexed count at most (4 flops a count, ½ count / ratio).
    let w256 = p["flops"]["by_class"]["packed256_double"].as_f64().unwrap();
    let whole = (n / 4 * 4) as f64;
    let ratio = p["extra"]["multiplex_running_ratio"]["FP_ARITH_INST_RETIRED.256B_PACKED_DOUBLE"]
        .as_f64()
        .unwrap_or(1.0);
    let bound = scaling_bound(whole, 4.0, ratio);
    assert!(
        (w256 - whole).abs() <= bound,
        "half of 2·{whole} expected, got {w256} (bound {bound} at running ratio {ratio})"
    );
}

#[test]
fn multiplexed_groups_are_scaled_and_said_and_small_errors_are_within_tolerance() {
    if !ptrace_allowed() {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (code, doc, _) = validate(home.path(), "mux=0.3,packed128_double*1.004,watchdog");
    assert_eq!(code, 0, "within tolerance passes: {doc:#}");
    let r = row(&doc, "flops.packed128_double");
    let v = &r["verdict"];
    assert_eq!(v["verdict"], "within_tolerance", "{v}");
    // +0.4 % injected, plus the scaling of a count on a counter round(0.3·T)/T of a run of
    // T ≥ 1 ns: that ratio is ≥ max(0.3 − 1/(2T), 1/T) ≥ 0.2, so each sample is off its
    // 1.004 × truth by ≤ ½ count / 0.2 (2 flops a count): ≤ 0.13 % at its 4096 flops.
    for s in r["samples"].as_array().unwrap() {
        let (analytic, measured) = (s["analytic"].as_f64().unwrap(), s["measured"].as_f64().unwrap());
        let bound = scaling_bound(1.004 * analytic, 2.0, 0.2) / analytic;
        let e = measured / analytic - 1.0;
        assert!((e - 0.004).abs() <= bound, "{e} vs +0.4 % ± {bound}: {s}");
    }
    let e = v["relative_error"].as_f64().unwrap();
    assert!(e > 0.0 && e <= 0.01, "{v}");
    let d = details(row(&doc, "flops.scalar_double"));
    assert!(d.contains("multiplexed") && d.contains("scaled"), "{d}");
    let notes = doc["validation"]["notes"].to_string();
    assert!(notes.contains("NMI watchdog") && notes.contains("SIMULATED"), "{notes}");
}

#[test]
fn open_failures_name_their_errno_in_measure() {
    let home = tempfile::tempdir().unwrap();
    let out = roofline(home.path())
        .env("ROOFLINE_SIMULATED_PMU", "flops=einval")
        .args(["measure", "--backend", "simulated", "--platform", "skx", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("EINVAL") && err.contains("FP_ARITH_INST_RETIRED"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    // A bad fault spec: one line of cause and a hint, exit 2.
    let out = roofline(home.path())
        .env("ROOFLINE_SIMULATED_PMU", "flops=sometimes")
        .args(["measure", "--backend", "simulated", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ROOFLINE_SIMULATED_PMU"));
}

/// `measure --backend simulated` of a program: the same W per class as `--backend trace`
/// (the simulated counts are the trace's, through the perf formulas), multiplexing said.
#[test]
fn measure_on_the_simulated_pmu_gives_the_traced_work() {
    if !ptrace_allowed() {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("fp.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n#include <stdio.h>\nint main(int c,char**v){int n=atoi(v[1]);double *a=malloc(8*n),s=0;\
         for(int i=0;i<n;i++)a[i]=i*0.25;for(int i=0;i<n;i++)s+=a[i]*a[i];printf(\"%g\\n\",s);return 0;}\n",
    )
    .unwrap();
    let exe = dir.path().join("fp");
    match std::process::Command::new("cc").args(["-O1", "-o"]).arg(&exe).arg(&src).status() {
        Ok(s) if s.success() => {}
        _ => {
            eprintln!("skipped: no C compiler");
            return;
        }
    }
    let n = random(10_000, 40_000).to_string();
    let exe = exe.to_str().unwrap();
    let run = |backend: &str, faults: &str| -> (Value, String) {
        let out = roofline(dir.path())
            .env("ROOFLINE_SIMULATED_PMU", faults)
            .args(["measure", "--backend", backend, "--platform", "skx", "--json", "--", exe, &n])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{backend}: {err}");
        (serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}")), err)
    };
    let (traced, _) = run("trace", "");
    let (sim, err) = run("simulated", "mux=0.5");
    let t = &traced["points"][0]["flops"];
    let s = &sim["points"][0]["flops"];
    let total = t["total"].as_f64().unwrap();
    assert!(total >= 2.0 * n.parse::<f64>().unwrap(), "{t}");
    // Each class off by the scaling of its multiplexed count (a class with no flops counts 0).
    let ratio = least_running_ratio(&sim["points"][0]);
    let mut total_bound = 0.0;
    for (class, v) in t["by_class"].as_object().unwrap() {
        let (sv, v) = (s["by_class"][class].as_f64().unwrap_or(0.0), v.as_f64().unwrap());
        let bound = if v > 0.0 { scaling_bound(v, lanes(class), ratio) } else { 0.0 };
        total_bound += bound;
        assert!((sv - v).abs() <= bound, "{class}: simulated {sv} vs traced {v} (bound {bound})");
    }
    let st = s["total"].as_f64().unwrap();
    assert!(
        (st - total).abs() <= total_bound,
        "simulated {s} vs traced {t} (bound {total_bound})"
    );
    let p = &sim["points"][0]["provenance"];
    assert_eq!(p["flops"], "simulated");
    assert_eq!(p["bytes"]["dram"], "simulated");
    assert!(p["notes"][0].as_str().unwrap().starts_with("SIMULATED PMU"), "{p}");
    assert!(err.contains("multiplexed, counted") && err.contains("scaled"), "{err}");
    assert!(sim["points"][0]["extra"]["multiplex_running_ratio"].is_object());
}

/// `measure --backend simulated` of a program with a region (the region API's markers): the
/// region counted by the simulated counters from its own traced truth, beside the whole run,
/// W exact (Zen 3's events fit its counters) and its DRAM traffic the cold arrays it reads;
/// the whole run timed natively after the trace.
#[test]
fn a_commands_regions_count_on_the_simulated_pmu() {
    if !ptrace_allowed() {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mpi/ranks_work.c");
    let exe = dir.path().join("ranks_work");
    match std::process::Command::new("cc")
        .args(["-DWITHOUT_MPI", "-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
    {
        Ok(s) if s.success() => {}
        _ => {
            eprintln!("skipped: no C compiler");
            return;
        }
    }
    // Rank 0 of no job: 2n flops in region `work` over arrays calloc maps afresh (≥ 128 KiB).
    let n = random(16_384, 24_000);
    let out = roofline(dir.path())
        .env_remove("SLURM_PROCID")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .args(["measure", "--backend", "simulated", "--platform", "zen3", "--json", "--"])
        .arg(&exe)
        .arg(n.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "the whole run and region work: {doc:#}");
    let (whole, work) = (&points[0], &points[1]);
    assert_eq!(work["name"], "work");
    assert_eq!(work["flops"]["total"].as_f64(), Some(2.0 * n as f64), "{work:#}");
    assert_eq!(work["flops"]["by_class"]["any_precision"].as_f64(), Some(2.0 * n as f64));
    assert_eq!(work["extra"]["calls"], 1);
    assert_eq!(work["provenance"]["flops"], "simulated");
    assert_eq!(work["provenance"]["bytes"]["dram"], "simulated");
    assert!(work["bytes"]["dram"].as_f64() > Some(0.0), "{work:#}");
    assert!(work["provenance"]["notes"][0].as_str().unwrap().starts_with("SIMULATED PMU"));
    assert!(whole["flops"]["total"].as_f64() >= Some(2.0 * n as f64), "{whole:#}");
    assert_eq!(whole["seconds_samples"].as_array().map(Vec::len), Some(1), "{whole:#}");
}

#[test]
fn validate_with_perf_without_a_pmu_names_doctor_and_trace() {
    let has_pmu = ["cpu", "cpu_core"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).join("type").exists());
    if has_pmu {
        eprintln!("skipped: this machine has a core PMU");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let out = roofline(home.path()).args(["validate", "--backend", "perf"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap();
    assert!(
        first.starts_with("roofline: ") && first.contains("roofline doctor") && first.contains("--backend trace"),
        "{err}"
    );
    assert!(!home.path().join("roofline/trust.json").exists(), "nothing written");
}

/// Zen 4's MAC event (opt-in, `flops.fma`) on the simulated PMU: `validate` judges it against
/// the kernels' analytic FMA flops (AVX2/AVX-512 triads fuse, scalar/SSE ones multiply then
/// add and must read 0), a MAC counter reading half is "off by -50 %", and `run` with
/// `--optional-events` reports the traced FMA flops as `flops.fma`, without it none.
#[test]
fn the_zen4_mac_event_gives_the_fma_share_and_is_validated() {
    if !ptrace_allowed() {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let validate_zen4 = |faults: &str| {
        let out = roofline(home.path())
            .env("ROOFLINE_SIMULATED_PMU", faults)
            .args([
                "validate",
                "--backend",
                "simulated",
                "--platform",
                "zen4",
                "--kernels",
                "triad,dot_f32",
                "--json",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
        (out.status.code().unwrap_or(-1), doc, err)
    };
    let (code, doc, err) = validate_zen4("");
    assert_eq!(code, 0, "{err}\n{doc:#}");
    let fma = row(&doc, "flops.fma");
    assert_eq!(fma["verdict"]["verdict"], "exact", "{fma:#}");
    assert_eq!(fma["events"][0], "fp_ret_sse_avx_ops.mac_flops");
    let samples = fma["samples"].as_array().unwrap();
    assert!(samples.len() >= 4, "{fma:#}");
    for s in samples {
        let (a, m) = (s["analytic"].as_f64().unwrap(), s["measured"].as_f64().unwrap());
        match s["variant"].as_str().unwrap() {
            "scalar" | "sse" => assert_eq!(a, 0.0, "{s}"),
            _ => assert!(a > 0.0, "{s}"),
        }
        assert!((m - a).abs() <= 0.5, "{s}");
    }
    // W's row is untouched by the MAC event: any_precision still exact, not doubled.
    assert_eq!(row(&doc, "flops.any_precision")["verdict"]["verdict"], "exact");

    let (code, doc, _) = validate_zen4("fma*0.5");
    assert_eq!(code, 1);
    let v = &row(&doc, "flops.fma")["verdict"];
    assert_eq!(v["verdict"], "off", "{v}");
    assert!((v["relative_error"].as_f64().unwrap() + 0.5).abs() < 1e-3, "{v}");
    assert_eq!(row(&doc, "flops.any_precision")["verdict"]["verdict"], "exact");

    // run: the traced FMA flops of triad/avx2 (2 per whole vector element), from the MAC event.
    let n = random(20_000, 60_000);
    let run = |optional: bool| {
        let mut c = roofline(home.path());
        c.args(["run", "triad", "--backend", "simulated", "--platform", "zen4", "--variant", "avx2"])
            .args(["--repeat", "2", "--min-time", "0.01", "--size", &n.to_string(), "--json"]);
        if optional {
            c.arg("--optional-events");
        }
        c.output().unwrap()
    };
    let out = run(true);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("cannot run the avx2 variant") {
        eprintln!("skipped the run check: no AVX2 here");
        return;
    }
    assert!(out.status.success(), "{err}");
    let p = serde_json::from_slice::<Value>(&out.stdout).unwrap()["points"][0].clone();
    let whole = (2 * (n / 4 * 4)) as f64;
    let ratio = least_running_ratio(&p);
    let fma = p["flops"]["fma"].as_f64().unwrap_or_else(|| panic!("{p:#}"));
    assert!((fma - whole).abs() <= scaling_bound(whole, 1.0, ratio), "n={n}: {fma} vs {whole}");
    assert!(fma <= p["flops"]["total"].as_f64().unwrap());
    assert_eq!(p["provenance"]["flops"], "simulated");
    let untrusted = p["provenance"]["untrusted"].to_string();
    assert!(untrusted.contains("flops.fma"), "the failed validation marks it: {untrusted}");
    let out = run(false);
    assert!(out.status.success());
    let p = serde_json::from_slice::<Value>(&out.stdout).unwrap()["points"][0].clone();
    assert!(p["flops"].get("fma").is_none(), "opt-in: no MAC event, no share: {p:#}");
}
