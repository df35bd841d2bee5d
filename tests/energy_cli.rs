//! `--energy` where RAPL cannot be read: one line naming what is missing and the fix, exit 2,
//! nothing written and no zero figures. The sysfs tree is a recorded one (`ROOFLINE_SYSFS_PMUS`),
//! so the checks hold on any machine.

use assert_cmd::Command;
use std::path::Path;

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

#[test]
fn no_power_pmu_is_exit_2_naming_it_and_nothing_written() {
    let empty = tempfile::tempdir().unwrap();
    let out = empty.path().join("r.json");
    for args in [
        vec!["run", "triad", "--size", "1000", "--energy", "-o", out.to_str().unwrap()],
        vec!["measure", "--energy", "-o", out.to_str().unwrap(), "--", "true"],
    ] {
        let a = roofline().args(&args).env("ROOFLINE_SYSFS_PMUS", empty.path()).assert().code(2);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        assert!(err.contains("no RAPL energy counters") && err.contains("hint:"), "{args:?}: {err}");
        assert!(a.get_output().stdout.is_empty(), "{args:?}");
        assert!(!out.exists(), "{args:?} wrote a report");
    }
}

#[test]
fn a_power_pmu_the_kernel_does_not_have_is_refused_not_zero() {
    // The Emerald Rapids guest's tree: this kernel has no PMU of that type (or refuses it).
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rapl/emr-psys");
    if Path::new("/sys/bus/event_source/devices/power/type").exists() {
        eprintln!("skipped: this machine has a power PMU, the recorded type may be its own");
        return;
    }
    let a = roofline()
        .args(["measure", "--energy", "--", "true"])
        .env("ROOFLINE_SYSFS_PMUS", &tree)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("energy-psys") || err.contains("perf_event_paranoid"), "{err}");
    assert!(!String::from_utf8_lossy(&a.get_output().stdout).contains("J/RUN"));
}

#[test]
fn subtract_idle_needs_energy() {
    roofline().args(["run", "triad", "--subtract-idle"]).assert().code(2);
}
