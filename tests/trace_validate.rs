//! `roofline validate --trace memory`: W and core Q exact, and the DRAM Q of the streaming
//! kernels, traced at 4× a small simulated last level, within 2 % of their compulsory traffic
//! (write-allocate included; non-temporal stores without it). Skips (passing) where ptrace is
//! not permitted.

use assert_cmd::Command;
use serde_json::Value;

fn validate(args: &[&str]) -> Option<(i32, Value, String)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v.json");
    let o = Command::cargo_bin("roofline")
        .unwrap()
        .arg("validate")
        .args(args)
        .arg("-o")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    if err.contains("ptrace") && o.status.code() == Some(2) {
        eprintln!("skipped: ptrace not permitted here: {err}");
        return None;
    }
    let text = std::fs::read_to_string(&out).unwrap_or_else(|_| panic!("no output; stderr: {err}"));
    Some((o.status.code().unwrap_or(-1), serde_json::from_str(&text).unwrap(), err))
}

#[test]
fn memory_mode_checks_dram_of_streaming_kernels() {
    // triad (2 reads + write-allocated write), daxpy (y read once, written back), dot (reads
    // only), store_nt (non-temporal: no write-allocate) in both precisions' first kernel.
    let Some((code, v, err)) = validate(&[
        "--trace",
        "memory",
        "--cache",
        // validate's default; a last level much smaller than this leaves the harness's ~20 lines
        // (stack, the instance's fields, the arrays' partial first lines) above 2 %.
        "L1=4KiB:4,L2=32KiB:8",
        "--kernels",
        "triad,daxpy,dot,store_nt,stencil2d",
        "--seed",
        "7",
    ]) else {
        return;
    };
    assert_eq!(code, 0, "validate failed: {err}\n{v:#}");
    assert_eq!(v["tolerance"]["dram_bytes"], 0.02);
    assert!(v["cache"].as_str().unwrap().contains("L2 32.0 KiB"), "{}", v["cache"]);
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 7, "{rows:#?}");
    for r in rows {
        let name = r["kernel"].as_str().unwrap();
        let dram_a = r["dram_analytic"].as_f64().unwrap();
        let dram_m = r["dram_measured"].as_f64().expect("memory mode measures DRAM");
        assert_eq!(r["ok"], true, "{r:#}");
        // Memory mode (addresses per block, loops replayed) gave exactly the bytes per level of
        // single-stepping every instruction on a small instance.
        assert_eq!(r["memory_matches_stepping"], true, "{r:#}");
        if name != "stencil2d" {
            // 4× the 32 KiB last level, whatever the kernel's arrays.
            let ws = r["n"].as_f64().unwrap() * if name == "dot" || name == "daxpy" { 16.0 } else { 24.0 };
            assert!(ws > 3.0 * 32768.0, "{name}: n {} is not at 4x LLC", r["n"]);
            assert!((dram_m / dram_a - 1.0).abs() <= 0.02, "{name}: {dram_m} vs {dram_a}");
        }
    }
}

#[test]
fn dram_mismatch_beyond_tolerance_exits_1() {
    // One L1 line and two L2 lines: daxpy's x and y lines evict each other at every element
    // (a dirty y line is written back before the next x is read), so the simulated DRAM traffic
    // is many times the compulsory one: beyond 2 %, the row says why and validate exits 1.
    let Some((code, v, _)) = validate(&[
        "--trace",
        "memory",
        "--cache",
        "L1=64B:1,L2=128B:1:inclusive",
        "--kernels",
        "daxpy",
        "--seed",
        "7",
    ]) else {
        return;
    };
    let rows = v["rows"].as_array().unwrap();
    let bad: Vec<&Value> = rows.iter().filter(|r| r["ok"] == false).collect();
    assert!(!bad.is_empty(), "{rows:#?}");
    assert!(
        bad.iter().all(|r| r["detail"].as_str().unwrap_or("").contains("DRAM bytes")),
        "{bad:#?}"
    );
    assert_eq!(code, 1);
}

#[test]
fn cache_without_memory_mode_is_a_usage_error() {
    let o = Command::cargo_bin("roofline")
        .unwrap()
        .args(["validate", "--cache", "L1=4KiB:4", "--kernels", "triad"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cache needs --trace memory"));
}

/// A stripped `roofline` (no symbol table, as release packaging often ships it) still validates
/// dgemm exactly: the tracer finds its functions' starts in the unwind table and reads their
/// prologues, so rbp used as a general register stays core traffic (without that, the scalar
/// and SSE variants counted 0.4-1.6 % fewer core bytes). Skips where `strip` is missing.
#[test]
fn a_stripped_binary_validates_dgemm_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("roofline-stripped");
    std::fs::copy(assert_cmd::cargo::cargo_bin("roofline"), &bin).unwrap();
    match std::process::Command::new("strip").arg(&bin).status() {
        Ok(s) if s.success() => {}
        _ => {
            eprintln!("skipped: no strip here");
            return;
        }
    }
    let out = dir.path().join("v.json");
    let o = std::process::Command::new(&bin)
        .args(["validate", "--kernels", "dgemm", "--seed", "3", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    if err.contains("ptrace") && o.status.code() == Some(2) {
        eprintln!("skipped: ptrace not permitted here: {err}");
        return;
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["variant"] == "scalar"), "{rows:#?}");
    for r in rows {
        assert_eq!(r["ok"], true, "stripped: {r:#}");
    }
    assert_eq!(o.status.code(), Some(0), "{err}");
}

/// The FMA flops are validated like the classes of W: on AVX2 and AVX-512 the suite's `fma`
/// calls are FMA instructions (vector loops and scalar remainders: spmv's and normalize's
/// tails), on scalar and SSE a multiply then an add; the traced FMA flops equal the formulas'
/// exactly, and the report for the gate carries them as `flops.fma`.
#[test]
fn fma_flops_match_the_trace_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 % 1000)
        .unwrap_or(5)
        .to_string();
    // A working set that is no multiple of any vector width: every remainder loop runs.
    let Some((code, v, err)) = validate(&[
        "--kernels",
        "spmv,normalize_fused,cos_chain_unfused,daxpy_f32,stencil2d",
        "--working-set",
        "23999",
        "--seed",
        &seed,
        "--report",
        report.to_str().unwrap(),
    ]) else {
        return;
    };
    assert_eq!(code, 0, "seed {seed}: validate failed: {err}\n{v:#}");
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 10, "{rows:#?}");
    let r = |k: &str, var: &str| rows.iter().find(|r| r["kernel"] == k && r["variant"] == var).cloned();
    for row in rows {
        let (a, m) = (row["fma_analytic"].as_u64().unwrap(), row["fma_measured"].as_u64().unwrap());
        assert_eq!(a, m, "seed {seed}: {row:#}");
        let total: u64 = row["flops_measured"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert!(m <= total, "{row:#}");
        let fused = matches!(row["variant"].as_str(), Some("avx2" | "avx512"));
        match row["kernel"].as_str().unwrap() {
            // Three adds and a multiply per point.
            "stencil2d" => assert_eq!(m, 0, "{row:#}"),
            // 16 of a cosine's 36 flops are 32 FMA flops.
            "cos_chain_unfused" if fused => assert_eq!(36 * m, 32 * total, "{row:#}"),
            _ if fused => assert!(m > 0, "{row:#}"),
            _ => assert_eq!(m, 0, "multiply then add: {row:#}"),
        }
    }
    // spmv's AVX2 scalar tails fuse too (vfmadd231sd): every one of its products is an FMA.
    if let Some(row) = r("spmv", "avx2") {
        let hsum: u64 = 3 * row["n"].as_u64().unwrap(); // 2 + 1 adds per row
        let total: u64 = row["flops_measured"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(row["fma_measured"].as_u64().unwrap(), total - hsum, "{row:#}");
    }
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for p in rep["points"].as_array().unwrap() {
        let (k, var) = p["name"].as_str().unwrap().split_once('/').unwrap();
        let row = r(k, var).unwrap();
        assert_eq!(p["flops"]["fma"].as_f64().unwrap(), row["fma_measured"].as_f64().unwrap(), "{p:#}");
    }
}
