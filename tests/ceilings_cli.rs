//! `roofline ceilings` and `roofline sweep` from the command line: bad input is refused in
//! one line with exit 2 before anything is measured; a short real sweep has the documented shape.

use assert_cmd::Command;

fn roofline() -> Command {
    let mut c = Command::cargo_bin("roofline").unwrap();
    // Never touch the user's cache from tests.
    c.env(
        "XDG_CACHE_HOME",
        std::env::temp_dir().join(format!("roofline-test-cache-{}", std::process::id())),
    );
    c
}

fn refused(args: &[&str], needle: &str) {
    let t0 = std::time::Instant::now();
    let out = roofline().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(
        err.lines().next().is_some_and(|l| !l.is_empty()),
        "{args:?}: a one-line cause first"
    );
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    // Refused before measuring (a quick measurement takes seconds).
    assert!(t0.elapsed().as_secs() < 5, "{args:?} took {:?}", t0.elapsed());
}

#[test]
fn ceilings_bad_threads_and_output() {
    let too_many = (roofline::__private::available_cpus() + 1).to_string();
    refused(&["ceilings", "--threads", &too_many], "CPUs");
    refused(&["ceilings", "--threads", "two"], "not a number");
    refused(&["ceilings", "--quick", "-o", "/nonexistent-dir/c.json"], "does not exist");
    refused(&["ceilings", "--quick", "-o", "c.svg"], "extension");
}

/// `--figure UNIT` (scripts): a unit this CPU has prints its quick ceiling as eight fields
/// (GFLOP/s, best, spread, GHz, % of the platform's rate or '-', measurements made, the kept
/// one's CPU or '-', the team's slow threads as count@share/worthN or '-'); one it lacks is refused in one line; an unknown figure is refused naming
/// the forms.
#[test]
fn figure_of_a_low_precision_unit() {
    refused(&["ceilings", "--figure", "bf16.nothing"], "not peak, a unit");
    let has = |flag: &str| std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.split_whitespace().any(|w| w == flag));
    if !has("avx_vnni") || !has("avx2") {
        eprintln!("skipping the measured figure: no AVX-VNNI");
        return;
    }
    let out = roofline()
        .args(["ceilings", "--figure", "int8.avx2", "--threads", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    let f: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(f.len(), 8, "{text}");
    let num = |i: usize| f[i].parse::<f64>().unwrap_or(f64::NAN);
    assert!(num(0) > 0.0 && num(1) >= num(0) * (1.0 - 1e-9), "best below the median: {text}");
    assert!(num(2) >= 0.0 && num(3) > 0.0, "{text}");
    assert!(f[4] == "-" || num(4) > 0.0, "{text}");
    // VNNI is measured once: one measurement, no CPU named; one thread has no slow threads.
    assert_eq!((f[5], f[6], f[7]), ("1", "-", "-"), "{text}");
}

#[test]
fn sweep_bad_input() {
    refused(&["sweep", "no_such_kernel"], "unknown kernel");
    refused(&["sweep", "triad", "--variant", "avx9"], "unknown variant");
    refused(&["sweep", "triad", "--from", "1MiB", "--to", "4KiB"], "larger than");
    refused(&["sweep", "triad", "--factor", "1.0"], "--factor");
    refused(&["sweep", "triad", "--to", "64TiB"], "available memory");
    refused(&["sweep", "store_nt", "--variant", "scalar"], "no scalar variant");
    refused(&["sweep", "triad", "--threads", "1,2"], "one thread count");
}

#[test]
fn a_short_sweep_has_levels_a_fit_and_growing_sizes() {
    let out = roofline()
        .args([
            "sweep",
            "load",
            "--from",
            "4KiB",
            "--to",
            "128KiB",
            "--factor",
            "2",
            "--no-ceilings",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "roofline.sweep/1");
    let pts = v["sweep"]["points"].as_array().unwrap();
    assert_eq!(pts.len(), 6, "4, 8, …, 128 KiB");
    let ws: Vec<u64> = pts.iter().map(|p| p["working_set_bytes"].as_u64().unwrap()).collect();
    assert!(ws.windows(2).all(|w| w[1] > w[0]));
    for p in pts {
        assert!(p["gbs"].as_f64().unwrap() > 0.0);
        assert_eq!(p["gflops"].as_f64().unwrap(), 0.0, "load has no flops");
        let level = p["cpuid_level"].as_str().unwrap();
        assert!(["L1", "L2", "L3", "DRAM"].contains(&level));
    }
    assert_eq!(pts[0]["cpuid_level"], "L1", "4 KiB fits any L1d");
    assert!(v["sweep"]["fit"]["b"].as_f64().is_some());
}
