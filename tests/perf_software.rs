//! The perf backend's whole path (event → perf_event_attr → fd groups → read_format parsing →
//! scaling → report) with kernel software events, which every Linux box has: grouping,
//! enable_on_exec, inherit across threads and child processes, per-thread region counters,
//! exit-status pass-through and signal deaths. Hardware-PMU assertions adapt to the machine.

use assert_cmd::Command;
use roofline::counters::command::CommandSpec;
use roofline::counters::perf::{self, CounterSet, Target};
use roofline::report::Report;
use roofline::{Backend, Session};
use std::path::Path;

const PAGE: usize = 4096;

/// Write one byte in each of `pages` fresh pages. 1.2 MiB at most: too small for a
/// transparent huge page, so every page faults once. The buffer is leaked: freeing it
/// would raise glibc's mmap threshold and the next buffer would reuse touched heap pages.
fn touch_pages(pages: usize) -> u64 {
    let v: &mut [u8] = vec![0u8; pages * PAGE].leak();
    for i in 0..pages {
        v[i * PAGE] = (i % 251) as u8 + 1;
    }
    std::hint::black_box(&*v).iter().step_by(PAGE).map(|&b| u64::from(b)).sum()
}

const TOUCH_ENV: &str = "ROOFLINE_TEST_TOUCH";
const LEAF_ENV: &str = "ROOFLINE_TEST_TOUCH_LEAF";

/// Not a test: the program the tests measure (this test binary, re-executed). With
/// `ROOFLINE_TEST_TOUCH=N` it touches N pages in a new thread and N more in a child process.
#[test]
#[ignore = "helper process for the other tests"]
fn helper_touch_pages() {
    if let Ok(n) = std::env::var(LEAF_ENV) {
        touch_pages(n.parse().unwrap());
        return;
    }
    let Ok(n) = std::env::var(TOUCH_ENV) else { return };
    let n: usize = n.parse().unwrap();
    std::thread::spawn(move || touch_pages(n)).join().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(helper_args())
        .env_remove(TOUCH_ENV)
        .env(LEAF_ENV, n.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

fn helper_args() -> Vec<String> {
    ["--ignored", "--exact", "helper_touch_pages", "--test-threads=1", "-q"]
        .map(String::from)
        .to_vec()
}

fn helper_argv() -> Vec<String> {
    let mut v = vec![std::env::current_exe().unwrap().to_string_lossy().into_owned()];
    v.extend(helper_args());
    v
}

fn pmus() -> &'static Path {
    Path::new(perf::SYSFS_PMUS)
}

fn has_core_pmu() -> bool {
    perf::core_pmu(pmus()).is_ok()
}

fn count(counts: &[perf::EventCount], name: &str) -> f64 {
    counts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.scaled)
        .map(|s| s.value)
        .unwrap()
}

#[test]
fn command_counters_start_at_exec_and_follow_threads_and_children() {
    let specs = perf::software_events(pmus(), true);
    let plan = perf::plan_groups(&specs, 4);
    assert_eq!(plan.len(), 1, "software events form one group");

    // Disabled until exec: this thread's own page faults are not counted.
    let mut set = CounterSet::open(specs.clone(), &plan, Target::InheritOnExec).unwrap();
    touch_pages(200);
    let before = set.scaled().unwrap();
    assert_eq!(count(&before, "page-faults"), 0.0);
    assert_eq!(count(&before, "task-clock"), 0.0);
    drop(set);

    // The helper touches N pages in a thread and N in a grandchild process.
    let n = 300;
    let cmd = CommandSpec {
        program: std::env::current_exe().unwrap(),
        argv: helper_argv(),
        env: vec![(TOUCH_ENV.to_string(), n.to_string())],
    };
    let run = perf::run_command(&specs, &plan, &cmd).unwrap();
    assert!(run.status.success());
    let faults = count(&run.counts, "page-faults");
    assert!(
        faults >= (2 * n) as f64,
        "page-faults {faults} < {} touched by a thread and a child",
        2 * n
    );
    let task = count(&run.counts, "task-clock");
    assert!(
        task > 0.0 && task * 1e-9 < run.wall_seconds * 4.0,
        "task-clock {task} ns vs wall {}",
        run.wall_seconds
    );
    // msr/tsc, where this user may open it: the TSC ticks at ≥ 100 MHz while the command runs.
    if specs.iter().any(|s| s.name == "msr/tsc") {
        let tsc = count(&run.counts, "msr/tsc");
        assert!(tsc > 1e8 * task * 1e-9, "msr/tsc {tsc} over {task} ns of task-clock");
    }
    // One group: every member saw the same enabled time, and nothing was multiplexed.
    assert!(run.counts.iter().all(|c| c.scaled.unwrap().running_ratio == 1.0));
}

#[test]
fn session_counts_software_events_per_region_and_per_thread() {
    let mut s = Session::software().unwrap();
    assert_eq!(s.events(), vec!["task-clock", "page-faults", "context-switches"]);
    let n = 280;
    let (sum, m) = s.measure("touch", || touch_pages(n)).unwrap();
    // The closure's value comes back through the region.
    assert_eq!(sum, (0..n as u64).map(|i| i % 251 + 1).sum::<u64>());
    let faults = m.extra["counts"]["page-faults"].as_f64().unwrap();
    assert!(faults >= n as f64, "region page-faults {faults} < {n}");
    assert!(m.seconds_samples[0] > 0.0);

    // A thread started inside the region is the region's (whole-process counting)...
    let (_, m2) = s
        .measure("other-thread", || std::thread::spawn(move || touch_pages(4 * n)).join().unwrap())
        .unwrap();
    let f2 = m2.extra["counts"]["page-faults"].as_f64().unwrap();
    assert!(f2 >= (4 * n) as f64, "page-faults {f2} miss the other thread's {}", 4 * n);
    // ... but not a per-thread session's.
    let mut own = Session::software_this_thread().unwrap();
    let (_, m3) = own
        .measure("other-thread", || std::thread::spawn(move || touch_pages(4 * n)).join().unwrap())
        .unwrap();
    let f3 = m3.extra["counts"]["page-faults"].as_f64().unwrap();
    assert!(f3 < (2 * n) as f64, "page-faults {f3} include the other thread's {}", 4 * n);

    s.region("touch", || touch_pages(n)).unwrap();
    let t = s.totals("touch").unwrap();
    assert_eq!(t.calls, 2);
    assert!(t.counts[1].unwrap() >= (2 * n) as f64);
    assert_eq!(t.measurement.seconds_samples.len(), 2);
    assert!(!s.uses_rdpmc(), "software events are read with read()");
    let report = s.report();
    assert_eq!(report.points.len(), 2);
    Report::from_json(&report.to_json(), "session").unwrap();
}

#[test]
fn perf_session_without_pmu_fails_cleanly() {
    match Session::new(Backend::Perf) {
        Err(e) => {
            let msg = e.to_string();
            assert!(!has_core_pmu(), "a PMU exists but the perf session failed: {msg}");
            assert!(msg.contains("no hardware core PMU") && msg.contains("--backend trace"), "{msg}");
            assert_eq!(e.exit_code(), 2);
        }
        Ok(s) => {
            assert!(has_core_pmu());
            assert!(s.events().iter().any(|e| e == "cycles"));
        }
    }
}

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

#[test]
fn measure_reports_software_counts_over_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let n = 260;
    roofline()
        .args(["measure", "--events", "software", "--repeat", "3", "-o"])
        .arg(&out)
        .arg("--")
        .args(helper_argv())
        .env(TOUCH_ENV, n.to_string())
        .assert()
        .success();
    let r = Report::from_json(&std::fs::read_to_string(&out).unwrap(), "r.json").unwrap();
    let p = &r.points[0];
    assert_eq!(p.seconds_samples.len(), 3);
    let runs = p.extra["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r["counts"]["page-faults"].as_f64().unwrap() >= (2 * n) as f64));
    assert!(p.extra["counts"]["page-faults"].as_f64().unwrap() >= (2 * n) as f64);
    assert!(p.extra["task_clock_seconds"].as_f64().unwrap() > 0.0);
    assert!(p.provenance.notes.iter().any(|n| n.contains("bytes.core is not counted")));
    assert_eq!(p.gflops, None, "no W counted, so no GFLOP/s");
}

#[test]
fn measure_passes_the_command_status_through_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    roofline()
        .args(["measure", "--events", "software", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "exit 7"])
        .assert()
        .code(7);
    assert!(!out.exists());
}

#[test]
fn measure_signal_death_exits_128_plus_signal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let a = roofline()
        .args(["measure", "--events", "software", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .assert()
        .code(128 + 15);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("killed by SIGTERM"), "{err}");
    assert!(!out.exists());
}

#[test]
fn measure_missing_command_is_an_input_error() {
    let a = roofline().args(["measure", "--", "no-such-command-3141"]).assert().code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("command not found: no-such-command-3141"), "{err}");
}

#[test]
fn measure_perf_without_pmu_names_the_trace_backend() {
    let a = roofline().args(["measure", "--backend", "perf", "--", "true"]).assert();
    let out = a.get_output();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if has_core_pmu() {
        assert!(!err.contains("no hardware core PMU"), "{err}");
        return;
    }
    assert_eq!(out.status.code(), Some(2));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "cause and hint: {err}");
    assert!(lines[0].contains("no hardware core PMU"), "{err}");
    assert!(lines[1].contains("--backend trace"), "{err}");

    // auto says which backend it chose and why.
    let a = roofline().args(["measure", "--", "true"]).assert();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("backend auto → trace (no hardware core PMU"), "{err}");
}

#[test]
fn idle_baseline_without_system_wide_events_says_so() {
    let a = roofline()
        .args(["measure", "--events", "software", "--idle-baseline", "--json", "--", "true"])
        .assert()
        .success();
    let out = a.get_output();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("no system-wide events are counted, nothing to baseline"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "roofline.report/1");
    assert!(v["points"][0]["extra"].get("idle_baseline_bytes").is_none());
}

const REGIONS_ENV: &str = "ROOFLINE_TEST_REGIONS";

/// Not a test: a program with regions (re-executed by the test below). With
/// `ROOFLINE_TEST_REGIONS=N,K` a `Session::software()` counts K calls of region `touch`
/// (N fresh pages each, one of every other call's pages touched by a second thread), one call
/// of `spin`, and `timed` is marked by roofline-marker (no counters).
#[test]
#[ignore = "helper process for the other tests"]
fn helper_regions() {
    let Ok(spec) = std::env::var(REGIONS_ENV) else { return };
    let (n, k) = spec.split_once(',').unwrap();
    let (n, k): (usize, usize) = (n.parse().unwrap(), k.parse().unwrap());
    let mut s = Session::software().unwrap();
    for i in 0..k {
        s.region("touch", || {
            if i % 2 == 0 {
                std::thread::spawn(move || touch_pages(n)).join().unwrap()
            } else {
                touch_pages(n)
            }
        })
        .unwrap();
    }
    let spun: u64 = s.region("spin", || (0..2_000_000u64).map(std::hint::black_box).sum()).unwrap();
    assert!(spun > 0);
    let mut markers = roofline_marker::Markers::new();
    markers.region("timed", || touch_pages(3)).unwrap();
}

/// `measure --backend perf` of a program whose own session counts its regions: one point per
/// counted region beside the whole run (the counters outside count the whole run only), T
/// from every run; a region only timed by the marker crate is named in a note.
#[test]
fn measure_perf_gives_the_regions_the_program_counted() {
    let n = 150 + (std::process::id() as usize % 100);
    let k = 2 + (std::process::id() as usize / 7 % 3);
    let exe = std::env::current_exe().unwrap();
    let a = roofline()
        .env(REGIONS_ENV, format!("{n},{k}"))
        .args(["measure", "--events", "software", "--repeat", "2", "--json", "--"])
        .arg(&exe)
        .args(["--ignored", "--exact", "helper_regions", "--test-threads=1", "-q"])
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    let points = doc["points"].as_array().unwrap();
    let point = |name: &str| {
        points
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {doc:#}"))
    };
    let (touch, spin) = (point("touch"), point("spin"));
    assert_eq!(points.len(), 3, "the whole run, touch and spin: {doc:#}");
    let whole = points.iter().find(|p| p["name"] != "touch" && p["name"] != "spin").unwrap();
    let faults = |p: &serde_json::Value| p["extra"]["counts"]["page-faults"].as_f64().unwrap_or_else(|| panic!("{p:#}"));
    assert_eq!(touch["extra"]["calls"].as_u64(), Some(k as u64));
    // Every fresh page faults once, whichever thread touched it; the whole run has them all.
    assert!(faults(touch) >= (n * k) as f64, "{} < {}", faults(touch), n * k);
    assert!(faults(touch) <= faults(whole), "{} > {}", faults(touch), faults(whole));
    assert!(faults(spin) < (n / 2) as f64, "spin touched no pages: {}", faults(spin));
    for p in [touch, spin] {
        let samples = p["seconds_samples"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "{p:#}");
        assert!(samples.iter().all(|s| s.as_f64().unwrap() > 0.0));
        assert!(p["seconds"].as_f64().unwrap() < whole["seconds"].as_f64().unwrap());
        let notes = p["provenance"]["notes"].to_string();
        assert!(notes.contains("counted in the program by its roofline::Session"), "{notes}");
    }
    let notes = whole["provenance"]["notes"].to_string();
    assert!(notes.contains("region(s) 'timed': marked, but no counts came back"), "{notes}");
}
