//! `--energy` where RAPL (or, for the GPU commands, the NVIDIA driver) cannot be read: one line
//! naming what is missing and the fix, exit 2, nothing written and no zero figures. The sysfs
//! tree is a recorded one (`ROOFLINE_SYSFS_PMUS`), so the checks hold on any machine. Then the
//! views of a recorded report with energy (the H200's): the energy roofline drawn, the CSV's and
//! the JSON view's energy fields.

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

/// Whether this machine has an NVIDIA driver (then the GPU commands would run kernels).
fn nvidia_driver() -> bool {
    Path::new("/dev/nvidiactl").exists() || Path::new("/proc/driver/nvidia").exists()
}

#[test]
fn gpu_energy_without_a_gpu_is_exit_2_in_one_line_never_a_zero() {
    if nvidia_driver() {
        eprintln!("skipped: this machine has an NVIDIA driver: the GPU commands would measure");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.json");
    for args in [
        vec!["gpu", "run", "triad", "--energy", "-o", out.to_str().unwrap()],
        vec!["gpu", "ceilings", "--quick", "--energy", "-o", out.to_str().unwrap()],
        // The whole command's energy: refused before ncu or the command runs.
        vec!["gpu", "measure", "--energy", "-o", out.to_str().unwrap(), "--", "true"],
    ] {
        let a = roofline().args(&args).assert().code(2);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}: cause and hint: {err}");
        assert!(
            lines[0].contains("NVIDIA") && lines[1].trim_start().starts_with("hint:"),
            "{args:?}: {err}"
        );
        assert!(a.get_output().stdout.is_empty(), "{args:?}");
        assert!(!out.exists(), "{args:?} wrote a report");
    }
    // --subtract-idle means nothing without --energy.
    roofline().args(["gpu", "run", "triad", "--subtract-idle"]).assert().code(2);
    roofline()
        .args(["gpu", "measure", "--subtract-idle", "--", "true"])
        .assert()
        .code(2);
}

/// The recorded H200 report (`gpu run dgemm|triad --energy`, the board's NVML counter).
fn h200() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/gpu_energy_h200.json")
}

#[test]
fn the_views_of_a_report_with_energy_carry_it() {
    let dir = tempfile::tempdir().unwrap();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(h200()).unwrap()).unwrap();
    let joules = |name: &str| {
        report["points"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["extra"]["energy"]["total_joules"]
            .as_f64()
            .unwrap()
    };
    for ext in ["svg", "html", "csv", "json"] {
        let out = dir.path().join(format!("r.{ext}"));
        roofline()
            .args(["report", "show", h200().to_str().unwrap(), "-o", out.to_str().unwrap()])
            .assert()
            .success();
        let text = std::fs::read_to_string(&out).unwrap();
        match ext {
            "svg" | "html" => {
                assert!(text.contains("class=\"energy-roofline\""), "{ext}");
                for name in ["dgemm", "triad"] {
                    let circle = text
                        .lines()
                        .find(|l| l.contains("class=\"point\"") && l.contains(&format!("data-name=\"{name}\"")));
                    assert!(circle.is_some(), "{ext}: no point {name}");
                }
            }
            "csv" => {
                let mut lines = text.lines();
                let header: Vec<&str> = lines.next().unwrap().split(',').collect();
                let col = |name: &str| {
                    header
                        .iter()
                        .position(|h| *h == name)
                        .unwrap_or_else(|| panic!("no {name} in {header:?}"))
                };
                for row in lines {
                    let cells: Vec<&str> = row.split(',').collect();
                    let name = cells[col("name")];
                    let j: f64 = cells[col("joules")].parse().unwrap();
                    assert_eq!(j, joules(name), "{name}");
                    assert_eq!(cells[col("energy_domain")], "gpu0");
                    let bound = cells[col("energy_bound")];
                    assert_eq!(bound, if name == "dgemm" { "flops" } else { "dram" }, "{name}");
                }
            }
            _ => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                for p in v["points"].as_array().unwrap() {
                    let place = &p["extra"]["energy"]["roofline"];
                    let flops = p["flops"]["total"].as_f64().unwrap();
                    let q = p["bytes"]["dram"].as_f64().unwrap();
                    assert_eq!(place["ai"].as_f64().unwrap(), flops / q, "{p}");
                    let gfj = p["extra"]["energy"]["gflop_per_joule"].as_f64().unwrap();
                    let of = place["fraction"].as_f64().unwrap() * place["attainable_gflop_per_joule"].as_f64().unwrap();
                    assert!((of - gfj).abs() <= 1e-12 * gfj, "{p}");
                }
            }
        }
    }
}

#[test]
fn compare_puts_energy_per_flop_beside_the_speedup_when_both_sides_have_it() {
    // The recorded CPU report with 0.5 J per triad run of its platform domain, against the
    // H200's recorded triad: the ratio is the GPU's GFLOP/J over the CPU's.
    let dir = tempfile::tempdir().unwrap();
    let cpu_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/several.json");
    let mut cpu: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(cpu_path).unwrap()).unwrap();
    let triad = cpu["points"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "triad")
        .unwrap();
    let flops = triad["flops"]["total"].as_f64().unwrap();
    let cpu_gfj = flops / 1e9 / 0.5;
    triad["extra"]["energy"] = serde_json::json!({
        "domains": {"psys": {"joules": 0.5, "joules_samples": [0.5], "watts": 100.0}},
        "total_domain": "psys", "total_joules": 0.5, "gflop_per_joule": cpu_gfj,
        "idle_subtracted": false, "source": "recorded"
    });
    let cpu_file = dir.path().join("cpu.json");
    std::fs::write(&cpu_file, cpu.to_string()).unwrap();
    let a = roofline()
        .args(["compare", cpu_file.to_str().unwrap(), h200().to_str().unwrap(), "--json"])
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    let row = doc["rows"].as_array().unwrap().iter().find(|r| r["kernel"] == "triad").unwrap();
    let gpu: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(h200()).unwrap()).unwrap();
    let gpu_gfj = gpu["points"].as_array().unwrap().iter().find(|p| p["name"] == "triad").unwrap()["extra"]["energy"]["gflop_per_joule"]
        .as_f64()
        .unwrap();
    assert_eq!(row["energy"]["ratio"].as_f64().unwrap(), gpu_gfj / cpu_gfj, "{row}");
    assert_eq!(row["energy"]["gpu_domain"], "gpu0");
    // dgemm has energy on the GPU side only: no energy line.
    let dgemm = doc["rows"].as_array().unwrap().iter().find(|r| r["kernel"] == "dgemm").unwrap();
    assert!(dgemm.get("energy").is_none(), "{dgemm}");
    let t = roofline()
        .args(["compare", cpu_file.to_str().unwrap(), h200().to_str().unwrap()])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&t.get_output().stdout).into_owned();
    assert_eq!(text.matches("  energy: CPU").count(), 1, "{text}");
}

#[test]
fn a_rapl_counter_that_never_moves_is_refused_by_every_command_naming_its_domain() {
    // What the Emerald Rapids guest of the GPU hosts gives: `energy-psys` listed, opened and
    // read, its count the same in every reading. Replayed (ROOFLINE_RAPL_RECORDING) over its
    // recorded tree, so every machine runs the commands against that counter.
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rapl/emr-psys");
    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat.txt");
    let count = 0x1234_5678_9abc_u64;
    let text: String = (0..=1500).map(|k| format!("{:.3} {count}\n", k as f64 * 1e-3)).collect();
    std::fs::write(&flat, text).unwrap();
    let out = dir.path().join("r.json");
    let job = dir.path().join("job");
    for args in [
        vec!["run", "triad", "--size", "1000", "--energy", "-o", out.to_str().unwrap()],
        vec!["measure", "--energy", "-o", out.to_str().unwrap(), "--", "true"],
        vec!["ceilings", "--quick", "--energy", "-o", out.to_str().unwrap()],
        vec!["profile", "--energy", "--kernels", "triad", "-o", job.to_str().unwrap()],
    ] {
        let a = roofline()
            .args(&args)
            .env("ROOFLINE_SYSFS_PMUS", &tree)
            .env("ROOFLINE_RAPL_RECORDING", &flat)
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 2, "{args:?}: cause and hint: {err}");
        assert!(
            lines[0].contains("power/energy-psys/ did not change over the 1.00 s idle window") && lines[0].contains("count nothing"),
            "{args:?}: {err}"
        );
        assert!(lines[1].trim_start().starts_with("hint:"), "{args:?}: {err}");
        assert!(a.get_output().stdout.is_empty(), "{args:?}");
        assert!(!out.exists() && !job.exists(), "{args:?} wrote a report");
    }
}

/// `gpu measure --energy -k elementwise -- python3 mm.py` on an H200 (2026-11-29): ncu's four
/// elementwise kernels, and the board's joules over one run of the whole command.
fn h200_measure() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/gpu_measure_energy_h200.json")
}

#[test]
fn a_whole_command_s_energy_is_said_in_every_view_as_what_it_is() {
    // `gpu measure --energy` writes no joules per kernel: `command_energy` says what it
    // measured instead, and the table, the page and the JSON view carry that line.
    let dir = tempfile::tempdir().unwrap();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(h200_measure()).unwrap()).unwrap();
    let c = &report["command_energy"];
    let measured = c["measured"].as_str().unwrap();
    assert!(
        measured.starts_with("the whole command, one run of its own without Nsight Compute"),
        "{measured}"
    );
    // The one run is the figure: one sample, no spread, the mean power its joules over its time.
    let e = &c["energy"];
    let gpu0 = &e["domains"]["gpu0"];
    assert_eq!(gpu0["joules_samples"].as_array().unwrap().len(), 1);
    assert!(gpu0.get("spread").is_none());
    let (joules, seconds) = (e["total_joules"].as_f64().unwrap(), c["seconds"].as_f64().unwrap());
    assert!((gpu0["watts"].as_f64().unwrap() * seconds - joules).abs() < 1e-9 * joules);
    assert!(c["uncertainty_joules"].as_f64().unwrap() < 1e-3 * joules);
    assert!(
        report["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["extra"].get("energy").is_none())
    );
    let file = h200_measure();
    let a = roofline().args(["report", "show", file.to_str().unwrap()]).assert().success();
    let table = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(table.contains(&format!("energy: {measured}")), "{table}");
    assert!(table.contains(e["source"].as_str().unwrap()), "{table}");
    // No point carries joules: the per-point energy table is absent.
    assert!(!table.contains("J/RUN"), "{table}");
    let html = dir.path().join("r.html");
    roofline()
        .args(["report", "show", file.to_str().unwrap(), "-o", html.to_str().unwrap()])
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("class=\"command-energy\"") && page.contains("no joules belong to one kernel"),
        "no command energy on the page"
    );
    let json = dir.path().join("r.json");
    roofline()
        .args(["report", "show", file.to_str().unwrap(), "-o", json.to_str().unwrap()])
        .assert()
        .success();
    let back: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(back["command_energy"], report["command_energy"]);
}

/// A live recording (`# live`: replayed against the clock) of a counter of constant power per
/// domain over `seconds`, updating every millisecond, on the tree's domains in order.
fn live_recording(path: &Path, watts: &[f64], seconds: f64) {
    use std::fmt::Write;
    let scale = 1.0 / 4_294_967_296.0;
    let mut text = String::from("# live\n");
    let steps = (seconds * 1e3) as usize;
    for k in 0..=steps {
        let t = k as f64 * 1e-3;
        let _ = write!(text, "{t:.3}");
        for w in watts {
            let _ = write!(text, " {}", (w * t / scale) as u64 + (1 << 40));
        }
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn marker_regions_get_their_joules_nested_repeated_and_short_ones_said_coarse() {
    // tests/c/energy_regions.c (LIKWID markers, linked against the staticlib) under `measure
    // --backend trace --energy --repeat 2`, its counters a live recording of constant power
    // per domain over the Skylake-SP tree (pkg, cores, ram): each region's power must be the
    // domain's, its joules per run that power × its time in the run, within the bound of a
    // counter update (1 ms) and a read gap (taken as at most 5 ms on a loaded machine) at each
    // end of each call.
    if std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.trim() == "3") {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("energy_regions");
    let lib = std::env::current_exe().unwrap().parent().unwrap().join("libroofline.a");
    assert!(lib.is_file(), "cargo builds the staticlib beside the tests: {lib:?}");
    let st = std::process::Command::new("cc")
        .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("tests/c/energy_regions.c"))
        .arg(&lib)
        .args(["-Wl,--gc-sections", "-lpthread", "-ldl", "-lm"])
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(st.success());
    let watts = [37.5, 21.0, 8.25]; // pkg, cores, ram: the meter's order
    let rec = dir.path().join("live.txt");
    live_recording(&rec, &watts, 90.0);
    let out = dir.path().join("r.json");
    let inner_us = 60_000u64;
    roofline()
        .args([
            "measure",
            "--backend",
            "trace",
            "--energy",
            "--idle-seconds",
            "0.3",
            "--repeat",
            "2",
            "-o",
        ])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(inner_us.to_string())
        .env("ROOFLINE_SYSFS_PMUS", root.join("tests/fixtures/rapl/intel-skx"))
        .env("ROOFLINE_RAPL_RECORDING", &rec)
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let point = |name: &str| {
        points
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no point {name}"))
    };
    let names = ["pkg", "cores", "ram"];
    // (region, calls a run, seconds in it a run at least)
    let inner_s = inner_us as f64 * 1e-6;
    for (region, calls, at_least) in [
        ("outer", 2.0, 2.0 * (3.0 + 1.0 / 3.0) * inner_s),
        ("inner", 6.0, 6.0 * inner_s),
        ("blip", 5.0, 5e-4),
    ] {
        let e = &point(region)["extra"]["energy"];
        assert!(e.is_object(), "{region}: no energy in {}", point(region));
        for (d, want) in names.iter().zip(watts) {
            let dom = &e["domains"][d];
            let samples = dom["joules_samples"].as_array().unwrap();
            assert_eq!(samples.len(), 2, "{region} {d}: one sample per energy run");
            let w = dom["watts"].as_f64().unwrap();
            let seconds = dom["joules"].as_f64().unwrap() / w;
            assert!(
                seconds >= at_least * 0.999,
                "{region}: {seconds} s in the region a run, at least {at_least}"
            );
            let tol = want * 2.0 * calls * (1e-3 + 5e-3) / seconds;
            assert!((w - want).abs() <= tol, "{region} {d}: {w} W against {want} W (± {tol})");
        }
        let coarse = e["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("coarse"));
        assert_eq!(coarse, region == "blip", "{region}: {}", e["notes"]);
        assert_eq!(e["total_domain"], "pkg+ram");
    }
    // The whole command has its joules too, and the table, the page and the JSON view carry
    // the regions'.
    assert!(points[0]["extra"]["energy"]["domains"]["pkg"]["joules"].as_f64().unwrap() > 0.0);
    let table = roofline().args(["report", "show"]).arg(&out).assert().success();
    let table = String::from_utf8_lossy(&table.get_output().stdout).into_owned();
    for region in ["outer", "inner", "blip"] {
        assert!(
            table.lines().any(|l| l.starts_with(region) && l.contains("pkg")),
            "{region} in:\n{table}"
        );
    }
    assert!(table.contains("region 'blip': a call lasts"), "{table}");
    let page = dir.path().join("r.html");
    roofline().args(["plot"]).arg(&out).arg("-o").arg(&page).assert().success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("Energy per point") && html.contains("<td>inner</td><td>pkg</td>"),
        "no region joules on the page"
    );
    let json = dir.path().join("v.json");
    roofline()
        .args(["report", "show"])
        .arg(&out)
        .arg("-o")
        .arg(&json)
        .assert()
        .success();
    let view: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let text = view.to_string();
    assert!(
        text.contains("\"inner\"") && text.contains("joules_samples"),
        "JSON view: {text:.400}"
    );
}
