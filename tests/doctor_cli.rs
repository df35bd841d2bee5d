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

/// A pseudo-random index below `n`, different per run (printed), so each run injects its
/// fault somewhere else.
fn pick(n: usize) -> usize {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let i = (t.subsec_nanos() as usize / 7 + std::process::id() as usize) % n;
    eprintln!("picked {i} of {n}");
    i
}

/// `doctor --simulated-pmu --json` with `faults` injected.
fn simulated(platform: &str, faults: &str) -> Value {
    let out = roofline()
        .env("ROOFLINE_SIMULATED_PMU", faults)
        .args(["doctor", "--json", "--simulated-pmu", "--platform", platform])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{faults}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("doctor --json prints one JSON document")
}

fn cause(v: &Value, name: &str) -> String {
    capability(v, name)["cause"].as_str().unwrap().to_string()
}

/// Doctor through the simulated PMU, each injected fault coming out as its verdict
/// with the errno named and the fix; the simulated PMU said in every verdict it answers, and
/// never what `auto` uses.
#[test]
fn simulated_pmu_faults_come_out_as_doctor_verdicts() {
    let (platform, memory) = [("skx", "uncore_imc"), ("zen4", "amd_umc"), ("zen3", "amd_df")][pick(3)];
    let uncore = format!("perf.uncore.{memory}");
    let live_auto = doctor_json(&[])["auto_backend"].clone();

    // No fault: a machine whose PMU has everything, said to be simulated.
    let v = simulated(platform, "");
    assert!(v["simulated_pmu"].as_str().unwrap().starts_with("SIMULATED PMU"), "{v}");
    for name in ["perf.core", uncore.as_str(), "perf.rdpmc", "perf.nmi_watchdog"] {
        assert_eq!(verdict(&v, name), "available", "{}", capability(&v, name));
        assert!(cause(&v, name).starts_with("simulated PMU: "), "{}", capability(&v, name));
    }
    assert!(
        !cause(&v, "perf.software").contains("simulated"),
        "software events are this machine's"
    );
    assert_eq!(v["auto_backend"], live_auto, "auto never picks the simulated PMU");
    let events = v["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e["outcome"] == "opened"), "{events:?}");
    // The DRAM events counted the streamed bytes (half read, half written, 64-byte lines).
    let dram: Vec<&Value> = events.iter().filter(|e| e.get("traffic_count").is_some()).collect();
    assert!(!dram.is_empty(), "{events:?}");
    assert!(dram.iter().all(|e| e["traffic_count"].as_u64().unwrap() > 0), "{dram:?}");
    // Without the flag, no trace of it.
    assert!(doctor_json(&["--platform", platform]).get("simulated_pmu").is_none());

    // A core event refused with ENOENT or EINVAL: named with its errno, core limited.
    let core: Vec<&str> = events
        .iter()
        .filter(|e| e["pmu"] == "cpu")
        .map(|e| e["event"].as_str().unwrap())
        // An event named `cycles` is also the event every core verdict opens first (below).
        .filter(|e| !e.eq_ignore_ascii_case("cycles"))
        .collect();
    let victim = core[pick(core.len())];
    let errno = ["enoent", "einval"][pick(2)];
    let v = simulated(platform, &format!("{victim}={errno}"));
    let c = capability(&v, "perf.core");
    assert_eq!(c["verdict"], "limited", "{c}");
    let named = format!("{victim} ({})", errno.to_uppercase());
    assert!(c["cause"].as_str().unwrap().contains(&named), "{named}: {c}");
    assert!(c["fix"].as_str().unwrap().contains("--platform"), "{c}");
    let t = v["events"].as_array().unwrap().iter().find(|e| e["event"] == victim).unwrap();
    assert_eq!(
        (t["outcome"].as_str(), t["errno"].as_str()),
        (Some("failed"), Some(errno.to_uppercase().as_str()))
    );

    // The cycles event refused: no core counting at all, the errno named.
    let v = simulated(platform, "cycles=einval");
    let c = capability(&v, "perf.core");
    assert_eq!(c["verdict"], "unavailable", "{c}");
    assert!(
        c["cause"].as_str().unwrap().contains("cycles: the kernel refused it (EINVAL"),
        "{c}"
    );
    assert!(c["fix"].as_str().unwrap().contains("registered PMU cpu"), "{c}");

    // The uncore PMU refusing its events: unavailable, the errno named.
    let v = simulated(platform, "uncore=enoent");
    let u = capability(&v, &uncore);
    assert_eq!(u["verdict"], "unavailable", "{u}");
    assert!(u["cause"].as_str().unwrap().contains("(ENOENT)"), "{u}");
    assert_eq!(verdict(&v, "perf.core"), "available");

    // An uncore PMU that opens and reads zero (a cloud VM's): unavailable, and said why.
    let v = simulated(platform, "dram=zero");
    let u = capability(&v, &uncore);
    assert_eq!(u["verdict"], "unavailable", "{u}");
    assert!(u["cause"].as_str().unwrap().contains("read 0 while"), "{u}");
    assert!(u["fix"].as_str().unwrap().contains("bare metal"), "{u}");
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e.get("traffic_count").is_some())
            .all(|e| e["traffic_count"] == 0)
    );

    // The NMI watchdog holding a counter: limited, with the sysctl that frees it.
    let v = simulated(platform, "watchdog");
    let w = capability(&v, "perf.nmi_watchdog");
    assert_eq!(w["verdict"], "limited", "{w}");
    assert!(w["fix"].as_str().unwrap().contains("kernel.nmi_watchdog=0"), "{w}");

    // The table says it first; a bad fault spec is bad input.
    let out = roofline()
        .env("ROOFLINE_SIMULATED_PMU", "watchdog")
        .args(["doctor", "--simulated-pmu", "--platform", platform])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("SIMULATED PMU"));
    let out = roofline()
        .env("ROOFLINE_SIMULATED_PMU", "dram=sometimes")
        .args(["doctor", "--simulated-pmu", "--platform", platform])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ROOFLINE_SIMULATED_PMU") && err.contains("hint"), "{err}");
}
