//! The C header compiled and used by a C program (tests/c/markers.c) through the LIKWID
//! compatibility macros, linked against the cdylib and against the staticlib.

use roofline::Report;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put this build's libroofline.so / .a: beside this test binary (`deps/`).
fn lib_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

fn compile(out: &Path, link: &[String]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("cc")
        .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(out)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("tests/c/markers.c"))
        .args(link)
        .args(["-lpthread", "-ldl", "-lm"])
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(st.success(), "cc failed for {link:?}");
}

struct Line {
    count: i64,
    time: f64,
    nevents: i64,
    faults: f64,
}

fn parse(stdout: &str, region: &str) -> Line {
    let l = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{region} ")))
        .unwrap_or_else(|| panic!("no {region} line in {stdout}"));
    let get = |k: &str| -> f64 {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {l}"))
            .parse()
            .unwrap()
    };
    Line {
        count: get("count") as i64,
        time: get("time"),
        nevents: get("nevents") as i64,
        faults: get("faults"),
    }
}

fn run_and_check(exe: &Path, dir: &Path) {
    let pages = 150 + (std::process::id() % 50) as usize;
    let report = dir.join(format!("{}.json", exe.file_name().unwrap().to_string_lossy()));
    let out = Command::new(exe)
        .arg(pages.to_string())
        // cargo's LD_LIBRARY_PATH lists target/<profile>/ first, where an older uplifted
        // libroofline.so may lie: load the one the rpath names.
        .env_remove("LD_LIBRARY_PATH")
        .env("ROOFLINE_BACKEND", "software")
        .env("ROOFLINE_OUTPUT", &report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{exe:?} failed ({:?}):\n{stdout}\n{stderr}", out.status);

    let touch = parse(&stdout, "touch");
    assert_eq!(touch.count, 2, "two threads ran the region once each");
    assert_eq!(touch.nevents, 3, "task-clock, page-faults, context-switches");
    assert!(
        touch.faults >= (2 * pages) as f64,
        "{exe:?}: faults {} < 2 × {pages} pages\n{stdout}\n{stderr}",
        touch.faults
    );
    assert!(touch.time > 0.0);
    let idle = parse(&stdout, "idle");
    assert_eq!(idle.count, 3);
    assert!(idle.faults < pages as f64, "idle region counted {} faults", idle.faults);

    // CLOSE printed the regions and wrote the report.
    assert!(stderr.contains("roofline region touch: 2 calls on 2 threads"), "{stderr}");
    let r = Report::from_json(&std::fs::read_to_string(&report).unwrap(), "markers").unwrap();
    let names: Vec<&str> = r.points.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["idle", "touch"]);
    assert_eq!(r.points[1].threads, 2);
    assert_eq!(r.points[1].extra.to_json()["calls"], 2);
}

#[test]
fn c_program_uses_the_header_with_the_shared_library() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("markers_shared");
    let lib = lib_dir();
    assert!(
        lib.join("libroofline.so").is_file(),
        "cargo builds the cdylib beside the tests: {lib:?}"
    );
    compile(
        &exe,
        &[
            format!("-L{}", lib.display()),
            "-lroofline".into(),
            format!("-Wl,-rpath,{}", lib.display()),
        ],
    );
    run_and_check(&exe, dir.path());

    // Without a hardware PMU, the perf backend refuses at init with one line, and says
    // what the regions fall back to.
    if roofline::__private::perf::core_pmu(std::path::Path::new(roofline::__private::perf::SYSFS_PMUS)).is_err() {
        let out = Command::new(&exe)
            .arg("10")
            .env_remove("LD_LIBRARY_PATH")
            .env("ROOFLINE_BACKEND", "perf")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(6), "markers.c exits 6 when init fails: {stderr}");
        assert!(
            stderr.contains("no hardware core PMU") && stderr.contains("regions keep wall time only"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 2, "one warning line and the program's own: {stderr}");
    }
}

#[test]
fn c_program_uses_the_header_with_the_static_library() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("markers_static");
    let a = lib_dir().join("libroofline.a");
    assert!(a.is_file(), "cargo builds the staticlib beside the tests: {a:?}");
    compile(&exe, &[a.display().to_string(), "-Wl,--gc-sections".into()]);
    run_and_check(&exe, dir.path());
}

/// Build tests/c/likwid.c, which includes only <likwid-marker.h>, as C or C++ (`lang`), with
/// `defines` and `link`.
fn compile_likwid(out: &Path, lang: &str, defines: &[&str], link: &[String]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (compiler, std) = if lang == "c++" { ("c++", "-std=c++17") } else { ("cc", "-std=c11") };
    let st = Command::new(compiler)
        .args(["-x", lang, std, "-O1", "-Wall", "-Wextra", "-Werror"])
        .args(defines)
        .arg("-o")
        .arg(out)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("tests/c/likwid.c"))
        .args(["-x", "none"])
        .args(link)
        .status()
        .unwrap_or_else(|e| panic!("a compiler ({compiler}) is needed for this test: {e}"));
    assert!(st.success(), "{compiler} failed for {defines:?} {link:?}");
}

fn run_likwid(exe: &Path, report: &Path, pages: usize) -> (String, String) {
    let out = Command::new(exe)
        .arg(pages.to_string())
        .env_remove("LD_LIBRARY_PATH")
        .env("ROOFLINE_BACKEND", "software")
        .env("ROOFLINE_OUTPUT", report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{exe:?} failed ({:?}):\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

#[test]
fn likwid_marker_header_counts_with_likwid_perfmon_and_is_empty_without() {
    let dir = tempfile::tempdir().unwrap();
    let lib = lib_dir();
    let shared = [
        format!("-L{}", lib.display()),
        "-lroofline".into(),
        format!("-Wl,-rpath,{}", lib.display()),
    ];
    let pages = 120 + (std::process::id() % 40) as usize;
    for lang in ["c", "c++"] {
        // With LIKWID_PERFMON: the macros count through the roofline C ABI.
        let exe = dir.path().join(format!("likwid_on_{lang}"));
        compile_likwid(&exe, lang, &["-DLIKWID_PERFMON"], &shared);
        let report = dir.path().join(format!("on_{lang}.json"));
        let (stdout, stderr) = run_likwid(&exe, &report, pages);
        assert!(stdout.contains("touch count=3 nevents=3 "), "{lang}: {stdout}");
        assert!(stderr.contains("roofline region touch: 3 calls on 1 threads"), "{lang}: {stderr}");
        let r = Report::from_json(&std::fs::read_to_string(&report).unwrap(), "likwid").unwrap();
        let names: Vec<&str> = r.points.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["touch"], "{lang}: LIKWID_MARKER_RESET dropped 'scratch'");
        assert_eq!(r.points[0].extra.to_json()["calls"], 3);
        let faults = r.points[0].extra.to_json()["counts"]["page-faults"].as_f64().unwrap();
        assert!(faults >= (3 * pages) as f64, "{lang}: page-faults {faults} < 3 × {pages}");

        // Without: every macro is empty, so the program links with no roofline library and
        // writes nothing.
        let exe = dir.path().join(format!("likwid_off_{lang}"));
        compile_likwid(&exe, lang, &[], &[]);
        let report = dir.path().join(format!("off_{lang}.json"));
        let (stdout, stderr) = run_likwid(&exe, &report, pages);
        assert_eq!(stdout, "markers off\n", "{lang}");
        assert!(!stderr.contains("roofline"), "{lang}: {stderr}");
        assert!(!report.exists(), "{lang}: no marker ran, so no report");
    }
}

/// The C ABI on the simulated PMU (`ROOFLINE_BACKEND=simulated`): a region given as
/// a function counts its exact work through the simulated counters, injected faults change
/// the counts or refuse the session with their errno, start/stop are refused there, and the
/// output names the simulated PMU.
#[test]
fn c_regions_count_on_the_simulated_pmu_with_its_faults() {
    if std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.trim() == "3") {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("simulated");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    // -O1 without -march: scalar SSE2, one mulsd and one addsd per element, no contraction.
    let st = Command::new("cc")
        .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("tests/c/simulated.c"))
        .arg(format!("-L{}", lib.display()))
        .arg("-lroofline")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(st.success());
    let n = 1_000 + (std::process::id() % 7_000) as u64;
    let run = |faults: &str| {
        let report = dir.path().join(format!("sim{}.json", faults.len()));
        let out = Command::new(&exe)
            .arg(n.to_string())
            .env_remove("LD_LIBRARY_PATH")
            .env("ROOFLINE_BACKEND", "simulated")
            .env("ROOFLINE_PLATFORM", "zen3")
            .env("ROOFLINE_SIMULATED_PMU", faults)
            .env("ROOFLINE_OUTPUT", &report)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stdout, stderr, report)
    };
    let flops = |stdout: &str| -> f64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("event fp_ret_sse_avx_ops.all "))
            .unwrap_or_else(|| panic!("no flops event in {stdout}"))
            .parse()
            .unwrap()
    };

    let (code, stdout, stderr, report) = run("");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("axpy count=1 "), "{stdout}");
    assert_eq!(flops(&stdout), 2.0 * n as f64, "2 flops per element of {n}:\n{stdout}");
    assert!(
        stderr.contains("roofline region axpy: 1 calls") && stderr.contains("SIMULATED PMU"),
        "{stderr}"
    );
    assert!(
        stderr.contains("roofline_marker_region"),
        "start/stop refused with the way out: {stderr}"
    );
    let r = Report::from_json(&std::fs::read_to_string(&report).unwrap(), "simulated").unwrap();
    assert!(
        r.points[0].provenance.notes.iter().any(|n| n.starts_with("SIMULATED PMU")),
        "{:?}",
        r.points[0].provenance.notes
    );

    // An event off by a factor comes out off by that factor.
    let (code, stdout, stderr, _) = run("flops*0.5");
    assert_eq!(code, Some(0), "{stderr}");
    assert!((flops(&stdout) - n as f64).abs() <= 1.0, "half of 2·{n}:\n{stdout}");

    // An event the kernel refuses: init fails with the errno named (simulated.c exits 6).
    let (code, _, stderr, _) = run("flops=einval");
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains("EINVAL") && stderr.contains("fp_ret_sse_avx_ops.all"), "{stderr}");
}
