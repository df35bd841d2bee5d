//! `roofline machine` as a user runs it: exit codes, JSON validity, bad input.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let out = roofline().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e})"))
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cpuid")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn static_json_has_the_documented_fields() {
    let v = json_of(&["machine", "--json", "--no-measure"]);
    assert_eq!(v["schema"], "roofline.machine/1");
    for key in [
        "vendor",
        "microarchitecture",
        "identified_by",
        "sockets",
        "cores",
        "threads",
        "caches",
        "isa",
        "fp_pipes",
        "thread_scaling",
    ] {
        assert!(!v[key].is_null(), "missing {key}");
    }
    // The documented nested keys (values may be null: an ISA the CPU lacks, no clock yet).
    let f = &v["frequency_ghz"];
    assert!(f.get("nominal").is_some() && f.get("measured").is_some());
    for isa in ["scalar", "sse", "avx", "avx2", "avx512"] {
        assert!(f["by_isa"].get(isa).is_some(), "frequency_ghz.by_isa.{isa}");
        for prec in ["double", "single"] {
            assert!(v["peak_gflops"][prec].get(isa).is_some(), "peak_gflops.{prec}.{isa}");
            assert!(
                v["peak_gflops_per_core"][prec].get(isa).is_some(),
                "peak_gflops_per_core.{prec}.{isa}"
            );
        }
    }
    let has512 = v["isa"].as_array().unwrap().iter().any(|i| i == "avx512f");
    assert_eq!(
        v["peak_gflops"]["double"]["avx512"].is_null(),
        !has512,
        "null exactly where the ISA is absent"
    );
    let threads = v["threads"].as_u64().unwrap();
    let cores = v["cores"].as_u64().unwrap();
    assert!(threads >= cores && cores >= v["sockets"].as_u64().unwrap() && cores >= 1);
    for c in v["caches"].as_array().unwrap() {
        let (size, ways, sets, line) = (
            c["size_bytes"].as_u64().unwrap(),
            c["ways"].as_u64().unwrap(),
            c["sets"].as_u64().unwrap(),
            c["line_bytes"].as_u64().unwrap(),
        );
        assert!(size > 0 && size % (ways * sets * line) == 0, "{c}");
        assert!(c["shared_by_threads"].as_u64().unwrap() >= 1);
    }
    assert!(["cpuid model", "feature flags", "generic"].contains(&v["identified_by"].as_str().unwrap()));
    assert_eq!(v["measured"], false);
}

#[test]
fn measured_clocks_and_peaks_are_consistent() {
    let v = json_of(&["machine", "--json", "--frequency", "2.5"]);
    let f = &v["frequency_ghz"];
    let measured = f["measured"].as_f64().unwrap();
    assert!(measured > 0.1 && measured < 10.0, "{measured}");
    assert_eq!(f["chains"].as_object().unwrap().len(), 2, "two chains of different latency");
    assert!(f["by_isa"]["scalar"].as_f64().unwrap() > 0.0);
    // --frequency sets the peaks' clock: scalar per-core peak = (2·fma + add + mul) × 2.5 GHz.
    let p = &v["fp_pipes"]["128"];
    let has_fma = v["isa"].as_array().unwrap().iter().any(|i| i == "fma");
    let (fma, add, mul) = (p["fma"].as_f64().unwrap(), p["add"].as_f64().unwrap(), p["mul"].as_f64().unwrap());
    let per_cycle = if has_fma { 2.0 * fma + add + mul } else { fma + add + mul };
    let scalar = v["peak_gflops_per_core"]["double"]["scalar"].as_f64().unwrap();
    assert!((scalar - per_cycle * 2.5).abs() < 1e-9, "{scalar} vs {per_cycle} × 2.5");
    let cores = v["cores"].as_f64().unwrap();
    let all = v["peak_gflops"]["single"]["scalar"].as_f64().unwrap();
    assert!((all - 2.0 * scalar * cores).abs() < 1e-6);
    let scaling = v["thread_scaling"].as_array().unwrap();
    assert_eq!(scaling[0]["threads"], 1);
    assert_eq!(v["measured"], true);
    // The two chains of different latency measure one clock (generous: a shared CI VM).
    let chains: Vec<f64> = f["chains"].as_object().unwrap().values().map(|g| g.as_f64().unwrap()).collect();
    let (lo, hi) = (chains[0].min(chains[1]), chains[0].max(chains[1]));
    assert!(hi / lo < 1.25, "chains disagree: {chains:?}");
    // One thread's FMA throughput at the widest width cannot beat that width's pipes at the
    // clock measured for it, and a working measurement reaches a good part of it.
    let widest = ["512", "256", "128"].into_iter().find(|w| !v["fp_pipes"][*w].is_null()).unwrap();
    let isa = match widest {
        "512" => "avx512",
        "256" => "avx2",
        _ => "sse",
    };
    let lanes = widest.parse::<f64>().unwrap() / 64.0;
    let ghz = f["by_isa"][isa].as_f64().unwrap();
    let fma_pipes = v["fp_pipes"][widest]["fma"].as_f64().unwrap();
    if has_fma && fma_pipes > 0.0 {
        let bound = fma_pipes * lanes * 2.0 * ghz;
        let got = scaling[0]["gflops"].as_f64().unwrap();
        assert!(got <= bound * 1.1 && got >= bound * 0.25, "{got} GFLOP/s vs {bound} at {ghz} GHz");
    }
    // All-core peaks never exceed cores × per-core peaks.
    for prec in ["double", "single"] {
        for (isa, all) in v["peak_gflops"][prec].as_object().unwrap() {
            if let (Some(all), Some(one)) = (all.as_f64(), v["peak_gflops_per_core"][prec][isa].as_f64()) {
                assert!(all <= one * cores * (1.0 + 1e-9), "{prec} {isa}: {all} > {cores} × {one}");
            }
        }
    }
}

#[test]
fn table_by_default_and_json_file_with_o() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let a = roofline()
        .args(["machine", "--no-measure", "-o", out.to_str().unwrap()])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(stdout.contains("micro-arch") && stdout.contains("caches"), "{stdout}");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "roofline.machine/1");
    // Unsupported extension: exit 2, nothing written.
    let bad = dir.path().join("m.svg");
    roofline()
        .args(["machine", "--no-measure", "-o", bad.to_str().unwrap()])
        .assert()
        .code(2);
    assert!(!bad.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn bad_frequency_exits_2() {
    for f in ["0", "-1", "10.5", "nan", "abc", "inf", "-inf", "1e400"] {
        let out = roofline().args(["machine", "--no-measure", "--frequency", f]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--frequency {f}");
        assert!(!out.stderr.is_empty());
    }
    roofline()
        .args(["machine", "--no-measure", "--frequency", "3.1"])
        .assert()
        .success();
}

#[test]
fn platform_option_and_bad_platforms() {
    let v = json_of(&["machine", "--json", "--no-measure", "--platform", "skx"]);
    assert_eq!(v["identified_by"], "platform option");
    assert_eq!(v["microarchitecture"], "skx");
    let out = roofline().args(["machine", "--platform", "nosuch"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such platform"));

    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // (content, line that must be named)
        (
            "key = \"x\"\nname = \"X\"\nfp_pipes = 3\n[identify]\nvendor = \"GenuineIntel\"\nfamilies = [6]\n",
            3,
        ),
        (
            "key = \"x\"\nname = \"X\"\n\n[identify]\nvendor = \"GenuineIntel\"\nfamilies = [6]\nrequires = [\"avx9000\"]\n[fp_pipes.128]\nfma = 2\n",
            7,
        ),
        (
            "key = \"x\"\nname = \"X\"\n[identify]\nvendor = \"AuthenticAMD\"\nfamilies = [0x19]\n[fp_pipes.96]\nfma = 2\n",
            6,
        ),
        ("key = \"x\"\nname = \"X\n", 2),
        (
            "key = \"x\"\nname = \"X\"\n[identify]\nvendor = \"AuthenticAMD\"\nfamilies = [0x19]\n[fp_pipes.128]\nfma = 2\n[bytes_per_cycle]\nl1_load = 64\nl2_typo = 32\n",
            10,
        ),
    ];
    for (i, (text, line)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&p, text).unwrap();
        let out = roofline().args(["machine", "--platform", p.to_str().unwrap()]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "case {i}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("bad{i}.toml:{line}:")), "case {i}: {err}");
        assert!(out.stdout.is_empty(), "case {i}: nothing measured or printed");
    }
}

#[test]
fn recorded_dump_option() {
    let v = json_of(&["machine", "--json", "--cpuid-dump", &fixture("gnr_as_rkl_guest.txt")]);
    assert_eq!(v["microarchitecture"], "gnr");
    assert_eq!(v["identified_by"], "feature flags");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.txt");
    std::fs::write(&p, "------[ Logical CPU #0 ]------\nCPUID 00000001: 1-2-3\n").unwrap();
    let out = roofline().args(["machine", "--cpuid-dump", p.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("d.txt:2:"));
}

#[test]
fn unknown_flag_is_a_usage_error() {
    roofline().args(["machine", "--bogus"]).assert().code(2);
    let out = roofline().arg("bogus-subcommand").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus-subcommand"));
    assert!(out.stdout.is_empty());
}
