//! `roofline doctor` on the machine the tests run on: the verdicts this machine's settings
//! imply, read independently from /sys and /proc, and the exit codes.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn doctor_json(args: &[&str]) -> Value {
    let out = roofline().arg("doctor").arg("--json").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("doctor --json prints one JSON document")
}

fn capability<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no capability {name} in {v}"))
}

fn verdict<'a>(v: &'a Value, name: &str) -> &'a str {
    capability(v, name)["verdict"].as_str().unwrap()
}

const PMUS: &str = "/sys/bus/event_source/devices";

#[test]
fn this_machine_verdicts() {
    let v = doctor_json(&[]);
    assert_eq!(v["schema"], "roofline.doctor/1");
    // Software events open wherever perf_event_open exists and paranoid is below 3.
    let paranoid: Option<i64> = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if paranoid.is_some_and(|p| p < 3) {
        assert_eq!(verdict(&v, "perf.software"), "available", "{v}");
    }
    // This project's machines allow ptrace of children.
    assert_eq!(verdict(&v, "trace"), "available", "{}", capability(&v, "trace"));
    let has_core_pmu = Path::new(PMUS).join("cpu").exists() || Path::new(PMUS).join("cpu_core").exists();
    if !has_core_pmu {
        let core = capability(&v, "perf.core");
        assert_eq!(core["verdict"], "unavailable", "{core}");
        assert!(core["cause"].as_str().unwrap().contains("no hardware core PMU"), "{core}");
        assert!(core["fix"].as_str().unwrap().contains("--backend trace"), "{core}");
        assert_eq!(verdict(&v, "perf.rdpmc"), "unavailable");
        assert_eq!(v["auto_backend"], "trace");
        // Every core event of the platform table was tried, and the kernel, with no PMU to
        // claim hardware or raw events, answered ENOENT.
        let events = v["events"].as_array().unwrap();
        if v["platform"].is_string() {
            assert!(!events.is_empty());
        }
        for e in events.iter().filter(|e| e["pmu"] == "cpu" || e["pmu"] == "cpu_core") {
            assert_eq!(
                (e["outcome"].as_str(), e["errno"].as_str()),
                (Some("failed"), Some("ENOENT")),
                "{e}"
            );
        }
        // Uncore PMUs are absent too: none of their events opened.
        assert!(events.iter().all(|e| e["outcome"] != "opened"), "{events:?}");
    }
    if !Path::new("/proc/driver/nvidia").exists() {
        assert_eq!(verdict(&v, "gpu"), "unavailable");
    }
    let watchdog = std::fs::read_to_string("/proc/sys/kernel/nmi_watchdog").unwrap_or_default();
    if watchdog.trim() == "0" {
        assert_eq!(verdict(&v, "perf.nmi_watchdog"), "available");
    }
    // Every verdict is one of the three, every non-available one says how to get more
    // (or that nothing can be done here, for the platform-independent ones).
    for c in v["capabilities"].as_array().unwrap() {
        let verdict = c["verdict"].as_str().unwrap();
        assert!(["available", "limited", "unavailable"].contains(&verdict), "{c}");
        assert!(!c["cause"].as_str().unwrap().is_empty(), "{c}");
        if verdict != "available" {
            assert!(c["fix"].is_string(), "{c}");
        }
    }
}

#[test]
fn the_table_names_each_capability_and_a_platform_option_is_used() {
    let out = roofline().args(["doctor", "--platform", "skx"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["perf.software", "perf.core", "perf.uncore.uncore_imc", "perf.rdpmc", "trace", "gpu"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(text.contains("platform events (skx)"), "{text}");
    let v = doctor_json(&["--platform", "skx"]);
    assert_eq!(v["platform"], "skx");
    assert_eq!(v["platform_source"], "--platform");
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "FP_ARITH_INST_RETIRED.SCALAR_DOUBLE")
    );
}

#[test]
fn bad_input_exits_2_with_a_hint() {
    let out = roofline().args(["doctor", "--platform", "no-such-cpu"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no such platform") && err.contains("hint"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let out = roofline().args(["doctor", "-o"]).arg(dir.path().join("d.txt")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("d.txt").exists());
    let file = dir.path().join("d.json");
    roofline().args(["doctor", "-o"]).arg(&file).assert().success();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["schema"], "roofline.doctor/1");
}
