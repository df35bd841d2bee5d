//! `roofline import perf-stat` on hand-made perf-stat files (tests/fixtures/perf-stat/) and a
//! real one produced by this machine's perf, bad input, and `roofline events`. Expected W/Q/T
//! are worked out by hand from the counts in each fixture (see the comments), not copied from
//! the program.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf-stat").join(name)
}

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

/// Import a fixture with --json; returns its one point.
fn import(name: &str, platform: &str, extra: &[&str]) -> Value {
    let out = roofline()
        .args(["import", "perf-stat"])
        .arg(fixture(name))
        .args(["--platform", platform, "--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "roofline.report/1");
    assert_eq!(v["points"].as_array().unwrap().len(), 1);
    v["points"][0].clone()
}

fn close(a: &Value, b: f64) -> bool {
    let a = a.as_f64().unwrap_or(f64::NAN);
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn notes(p: &Value) -> String {
    p["provenance"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn skx_encoded_events_two_multiplexed_groups() {
    let p = import("skx_triad.csv", "skx", &[]);
    // W = 100 scalar x1 + 1e9 packed512 double x8
    assert!(close(&p["flops"]["total"], 8.0e9 + 100.0), "{}", p["flops"]);
    assert!(close(&p["flops"]["by_class"]["packed512_double"], 8.0e9));
    // Q_l2 = L1D.REPLACEMENT 1.5e9 x 64; Q_l3 = (L2_LINES_IN 1.5e9 + L2_LINES_OUT 0.5e9) x 64
    assert!(close(&p["bytes"]["l2"], 1.5e9 * 64.0));
    assert!(close(&p["bytes"]["l3"], 2.0e9 * 64.0));
    // Q_dram = CAS (1e9 reads + 0.5e9 writes) x 64
    assert!(close(&p["bytes"]["dram"], 1.5e9 * 64.0));
    assert!(close(&p["extra"]["dram_read_bytes"], 64.0e9));
    // T = duration_time 2000412345 ns
    assert!(close(&p["seconds"], 2.000412345));
    // effective clock = cycles / task-clock = 5205002233 / 2.00184 s
    assert!(close(&p["extra"]["effective_ghz"], 5205002233.0 / 2.00184 / 1e9));
    assert_eq!(p["provenance"]["flops"], "perf-stat");
    assert_eq!(p["provenance"]["bytes"]["dram"], "perf-stat");
    // the 50 % groups are flagged, not rescaled
    assert!(close(&p["extra"]["multiplexing"]["FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE"], 0.5));
    assert!(p["extra"]["multiplexing"].get("UNC_M_CAS_COUNT.RD").is_none());
    let n = notes(&p);
    assert!(
        n.contains("not rescaled") && n.contains("system-wide") && n.contains("ref-cycles was not supported"),
        "{n}"
    );
}

#[test]
fn icx_symbolic_names_and_per_instance_mib_rows() {
    let p = import("icx_symbolic.csv", "icx", &[]);
    // W = 2e8 scalar x1 + 5e8 packed256 double x4
    assert!(close(&p["flops"]["total"], 2.0e8 + 2.0e9));
    assert!(close(&p["bytes"]["l2"], 4.0e8 * 64.0));
    assert!(close(&p["bytes"]["l3"], 4.0e8 * 64.0));
    // Q_dram: perf printed MiB per iMC instance: 4 x 1000 + 4 x 500 MiB, no x64 on top
    assert!(close(&p["bytes"]["dram"], 6000.0 * 1048576.0));
    assert!(close(&p["extra"]["dram_write_bytes"], 2000.0 * 1048576.0));
    assert!(close(&p["gflops"], 2.2e9 / 1.5 / 1e9));
}

#[test]
fn spr_raw_codes_summed_over_sockets() {
    let p = import("spr_raw_per_socket.csv", "spr", &[]);
    // per socket: r01c7 1e9 (x1), r40c7 2e9 (x8); two sockets
    assert!(close(&p["flops"]["total"], 2.0 * (1e9 + 16e9)));
    assert!(close(&p["bytes"]["l2"], 2.0 * 5e8 * 64.0));
    assert!(close(&p["bytes"]["l3"], 2.0 * 3e8 * 64.0));
    assert!(close(&p["bytes"]["dram"], (2.0 * 20480.0 + 2.0 * 10240.0) * 1048576.0));
    // duration_time is printed per socket: T is the run's wall time, not the sum
    assert!(close(&p["seconds"], 3.0));
}

#[test]
fn gnr_sums_both_schedulers_and_says_what_was_not_counted() {
    let p = import("gnr_sch.csv", "gnr", &[]);
    // 256-bit 1e8 x4 + 512-bit 1.5e9 x8 + FP16 512-bit 1e6 x32
    assert!(close(&p["flops"]["total"], 4e8 + 12e9 + 32e6));
    assert!(close(&p["flops"]["by_class"]["packed512_half"], 32e6));
    // SCH0 + SCH1, reads and writes: (4e8 + 4e8 + 2e8 + 2e8) x 64
    assert!(close(&p["bytes"]["dram"], 1.2e9 * 64.0));
    assert!(close(&p["extra"]["dram_read_bytes"], 8e8 * 64.0));
    assert!(notes(&p).contains("fp_arith_inst_retired.scalar_double was not counted: W is missing its share"));
}

#[test]
fn zen3_any_precision_and_approximate_df_channels() {
    let p = import("zen3_df.csv", "zen3", &[]);
    assert!(close(&p["flops"]["by_class"]["any_precision"], 6e9));
    // 8 channels x 1.25e8 x 64 B
    assert!(close(&p["bytes"]["dram"], 8.0 * 1.25e8 * 64.0));
    assert!(close(&p["bytes"]["l2"], 1.2e9 * 64.0));
    let n = notes(&p);
    assert!(
        n.contains("NPS1") && n.contains("dram_channel_data_controller_7 counted 50.0%"),
        "{n}"
    );
}

#[test]
fn zen4_umc_channels_and_seconds_override() {
    let p = import("zen4_umc.csv", "zen4", &["--seconds", "2", "--name", "triad"]);
    assert_eq!(p["name"], "triad");
    assert!(close(&p["seconds"], 2.0));
    assert!(close(&p["flops"]["total"], 3.2e9));
    // reads 4 x 2.5e8, writes 4 x 1.25e8 CAS commands, 64 B each
    assert!(close(&p["extra"]["dram_read_bytes"], 1e9 * 64.0));
    assert!(close(&p["bytes"]["dram"], 1.5e9 * 64.0));
    assert!(close(&p["gbs"]["dram"], 1.5e9 * 64.0 / 2.0 / 1e9));
    assert!(notes(&p).contains("T from --seconds"));
}

#[test]
fn zen4_mac_flops_are_the_fma_share_not_more_work() {
    let p = import("zen4_mac.csv", "zen4", &[]);
    // W: all of event 0x03 (3.2e9), its 2e8 bfloat16 MAC flops moved into their own class.
    assert!(close(&p["flops"]["total"], 3.2e9), "{p:#}");
    assert!(close(&p["flops"]["by_class"]["any_precision"], 3.0e9));
    assert!(close(&p["flops"]["by_class"]["bf16_any_width"], 2e8));
    // The MAC umask's 2.4e9 flops are a part of it: flops.fma, no class of their own.
    assert!(close(&p["flops"]["fma"], 2.4e9), "{p:#}");
    assert_eq!(p["flops"]["by_class"].as_object().unwrap().len(), 2);
    // Without the MAC row: no share (never a zero one).
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("zen4_mac.csv")).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.contains("umask=0x08"))
        .map(|l| format!("{l}\n"))
        .collect();
    let f = dir.path().join("no_mac.csv");
    std::fs::write(&f, without).unwrap();
    let out = roofline()
        .args(["import", "perf-stat"])
        .arg(&f)
        .args(["--platform", "zen4", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["points"][0]["flops"].get("fma").is_none(), "{v:#}");
    assert!(close(&v["points"][0]["flops"]["total"], 3.2e9));
    // More MAC flops than W: not a share, said.
    let over = text.replace("2400000000,,cpu/event=0x03,umask=0x08/", "3300000000,,cpu/event=0x03,umask=0x08/");
    std::fs::write(&f, over).unwrap();
    let out = roofline()
        .args(["import", "perf-stat"])
        .arg(&f)
        .args(["--platform", "zen4", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["points"][0]["flops"].get("fma").is_none(), "{v:#}");
    assert!(notes(&v["points"][0]).contains("flops.fma not reported"), "{v:#}");
}

#[test]
fn output_file_is_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    roofline()
        .args(["import", "perf-stat"])
        .arg(fixture("zen4_umc.csv"))
        .args(["--platform", "zen4", "-o"])
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    let r = roofline::Report::from_json(&text, "r.json").unwrap();
    assert_eq!(r.points[0].provenance.seconds, Some(roofline::Source::PerfStat));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left");
}

/// Runs and expects exit 2 with a one-line cause (plus the hint line) and no output file.
fn fails(args: &[&str], needle: &str) {
    let out = roofline().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.lines().filter(|l| !l.starts_with("warning")).count() <= 2, "{err}");
}

#[test]
fn bad_input_exits_2_with_a_cause() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.csv");
    std::fs::write(&garbage, "Performance counter stats for 'true':\n\n   1.2 msec task-clock\n").unwrap();
    let g = garbage.to_str().unwrap();
    fails(&["import", "perf-stat", g, "--platform", "skx"], "no `perf stat -x,` rows");
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    fails(&["import", "perf-stat", empty.to_str().unwrap(), "--platform", "skx"], "is empty");
    fails(&["import", "perf-stat", "/nonexistent/x.csv", "--platform", "skx"], "cannot read");
    let phantom = fixture("zen3_phantom.csv");
    fails(
        &["import", "perf-stat", phantom.to_str().unwrap(), "--platform", "zen3"],
        "cannot be true",
    );
    let skx = fixture("skx_triad.csv");
    let skx = skx.to_str().unwrap();
    fails(&["import", "perf-stat", skx, "--platform", "nosuch"], "no such platform");
    fails(&["import", "perf-stat", skx, "--platform", "skx", "--seconds=0"], "positive");
    fails(
        &["import", "perf-stat", skx, "--platform", "skx", "-o", "/nonexistent/dir/r.json"],
        "does not exist",
    );
    fails(
        &[
            "import",
            "perf-stat",
            skx,
            "--platform",
            "skx",
            "-o",
            dir.path().join("r.png").to_str().unwrap(),
        ],
        "extension",
    );
    // Zen 4 counters read as Skylake-SP ones: nothing resolves.
    let z4 = fixture("zen4_umc.csv");
    fails(
        &["import", "perf-stat", z4.to_str().unwrap(), "--platform", "skx"],
        "no event in it",
    );
    // No duration_time and no --seconds.
    let not = dir.path().join("notime.csv");
    std::fs::write(&not, "100,,fp_ret_sse_avx_ops.all,10,100.00,,\n").unwrap();
    fails(
        &["import", "perf-stat", not.to_str().unwrap(), "--platform", "zen4"],
        "no wall time",
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3, "no report was written");
}

#[test]
fn random_bytes_never_panic() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut x = seed;
    let skx = roofline::Platform::load("skx").unwrap();
    let base = std::fs::read_to_string(fixture("skx_triad.csv")).unwrap();
    for _ in 0..300 {
        // Mutate a real fixture: flip, insert and delete bytes.
        let mut b = base.clone().into_bytes();
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % b.len().max(1) as u64) as usize;
            match x % 3 {
                0 => b[i] = (x >> 8) as u8,
                1 => b.insert(i, b",/<>-.9e"[(x >> 16) as usize % 8]),
                _ => {
                    b.remove(i);
                }
            }
        }
        let text = String::from_utf8_lossy(&b);
        let opts = roofline::__private::perf_stat::ImportOptions {
            seconds: None,
            name: "fuzz".into(),
            platform_source: "test".into(),
        };
        // Either a valid report or an input error; never a panic (seed printed on failure).
        if let Ok((r, _)) = roofline::__private::perf_stat::import(&text, "fuzz", &skx, &opts) {
            assert!(r.validate("fuzz").is_ok(), "seed {seed}");
        }
    }
}

#[test]
fn a_real_perf_stat_file_from_this_machine() {
    // Software events only: this machine's VM has no hardware PMU. Skips where perf is absent
    // or refuses (perf_event_paranoid, containers).
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("real.csv");
    let ok = std::process::Command::new("perf")
        .args(["stat", "-x,", "-e", "task-clock,page-faults,duration_time", "-o"])
        .arg(&f)
        .args(["--", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok || !f.exists() {
        eprintln!("SKIP: perf stat unavailable here");
        return;
    }
    let text = std::fs::read_to_string(&f).unwrap();
    let parsed = roofline::__private::perf_stat::parse(&text, "real.csv").unwrap();
    assert!(parsed.started.is_some(), "perf writes '# started on' with -o");
    let tc = parsed.rows.iter().find(|r| r.event == "task-clock").expect("task-clock row");
    assert_eq!(tc.unit, "msec");
    assert!(tc.value > 0.0 && tc.value < 10_000.0, "{tc:?}");
    let dt = parsed.rows.iter().find(|r| r.event == "duration_time").expect("duration_time row");
    assert_eq!(dt.unit, "ns");
    assert!(dt.value > 0.0 && dt.running_pct == Some(100.0), "{dt:?}");
    assert!(parsed.rows.iter().any(|r| r.event == "page-faults" && r.value >= 1.0));
    assert!(parsed.skipped_lines.is_empty(), "{parsed:?}");
    // Time and software events only: nothing to derive W or Q from, said in one line.
    fails(
        &["import", "perf-stat", f.to_str().unwrap(), "--platform", "zen4"],
        "no event in it",
    );

    // perf's own layouts for PMU-term events in a group (their commas kept), -r (a variance
    // field) and -I (a timestamp column, `<not counted>` intervals).
    let run = |args: &[&str], cmd: &[&str]| -> Option<String> {
        let out = dir.path().join("more.csv");
        let ok = std::process::Command::new("perf")
            .args(["stat", "-x,", "-o"])
            .arg(&out)
            .args(args)
            .arg("--")
            .args(cmd)
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| std::fs::read_to_string(&out).ok()).flatten()
    };
    if let Some(t) = run(
        &[
            "-e",
            "{software/config=0x2/,software/config=0x1,name=foo/}",
            "-e",
            "software/config=0x0/u",
        ],
        &["true"],
    ) {
        let p = roofline::__private::perf_stat::parse(&t, "terms.csv").unwrap();
        let events: Vec<&str> = p.rows.iter().map(|r| r.event.as_str()).collect();
        assert_eq!(events, ["software/config=0x2/", "foo", "software/config=0x0/u"], "{t}");
    }
    if let Some(t) = run(&["-r", "3", "-e", "task-clock"], &["true"]) {
        let p = roofline::__private::perf_stat::parse(&t, "repeat.csv").unwrap();
        assert_eq!(p.rows.len(), 1, "{t}");
        assert_eq!((p.rows[0].unit.as_str(), p.rows[0].running_pct), ("msec", Some(100.0)), "{t}");
    }
    if let Some(t) = run(&["-I", "20", "-e", "task-clock"], &["sleep", "0.07"]) {
        let p = roofline::__private::perf_stat::parse(&t, "interval.csv").unwrap();
        assert!(p.rows.len() >= 2, "{t}");
        assert!(p.rows.iter().all(|r| r.event == "task-clock" && r.unit == "msec"), "{t}");
        assert!(p.skipped_lines.is_empty(), "{t}");
    }
}

#[test]
fn events_prints_a_grouped_perf_line() {
    let out = roofline()
        .args(["events", "--platform", "skx", "--", "./triad", "--n", "100"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    let line = s.lines().find(|l| l.starts_with("perf stat")).unwrap();
    // two groups of at most 4 events each on counters 0-3 (SMT on)
    assert_eq!(line.matches("-e '{").count(), 2, "{line}");
    assert!(
        line.contains("uncore_imc/event=0x04,umask=0x03/") && line.contains(" -a "),
        "{line}"
    );
    assert!(line.ends_with("-- ./triad --n 100"), "{line}");
    let out = roofline()
        .args(["events", "--platform", "icx", "--json", "--no-uncore", "--optional"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "roofline.events/1");
    let cmd = v["perf_command"].as_str().unwrap();
    assert!(!cmd.contains("uncore") && !cmd.contains(" -a "), "{cmd}");
    // single precision opt-in events are in
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["class"] == "packed512_single"));
    fails(&["events", "--platform", "pentium4"], "no such platform");
    // Zen 4's FMA (MAC) event is opt-in: in the line with --optional, paired with W's event.
    let line_of = |args: &[&str]| {
        let out = roofline().args(args).output().unwrap();
        assert!(out.status.success());
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        (s.lines().find(|l| l.starts_with("perf stat")).unwrap().to_string(), s)
    };
    let (line, table) = line_of(&["events", "--platform", "zen4", "--optional", "--no-uncore"]);
    assert!(
        line.contains("cpu/event=0x03,umask=0x08/") && line.contains("cpu/event=0x03,umask=0x1f/"),
        "{line}"
    );
    let mac = table.lines().find(|l| l.starts_with("fp_ret_sse_avx_ops.mac_flops")).unwrap();
    assert!(
        mac.contains("flops.fma") && mac.contains("paired") && mac.contains("opt-in"),
        "{mac}"
    );
    let (line, _) = line_of(&["events", "--platform", "zen4", "--no-uncore"]);
    assert!(!line.contains("umask=0x08"), "{line}");
    // Zen 5 documents no MAC umask restricted to FP work; Intel's FP_ARITH cannot tell.
    for p in ["zen5", "spr"] {
        let (_, table) = line_of(&["events", "--platform", p, "--optional"]);
        assert!(!table.contains("flops.fma"), "{p}: {table}");
    }
    // -o writes the line as a script, atomically.
    let dir = tempfile::tempdir().unwrap();
    let sh = dir.path().join("collect.sh");
    roofline().args(["events", "--platform", "zen3", "-o"]).arg(&sh).assert().success();
    let script = std::fs::read_to_string(&sh).unwrap();
    let line = script.lines().find(|l| l.starts_with("perf stat")).unwrap();
    // 8 DF channel events; FP (a counter pair) and the L2 event share one group
    assert_eq!(line.matches("amd_df/event=").count(), 8, "{line}");
    assert!(
        line.contains("-e '{cpu/event=0x03,umask=0xff/,cpu/event=0x60,umask=0xe8/}'"),
        "{line}"
    );
}

#[test]
fn events_line_round_trips_through_import() {
    // Every core event the `events` line collects resolves back to its table entry when perf
    // prints it as written.
    for key in [
        "snb", "hsw", "bdx", "skx", "icx", "adl", "spr", "gnr", "zen1", "zen2", "zen3", "zen4", "zen5",
    ] {
        let p = roofline::Platform::load(key).unwrap();
        for e in roofline::__private::perf_stat::selected(&p, true, true) {
            let printed = roofline::__private::perf_stat::perf_event_syntax(e);
            match roofline::__private::perf_stat::resolve(&printed, &p) {
                roofline::__private::perf_stat::Resolved::Event(s) => assert_eq!(s.name, e.name, "{key}: {printed}"),
                other => panic!("{key}: {printed} resolved to {other:?}"),
            }
        }
    }
}

#[test]
fn symbolic_names_of_another_vendor_are_read_without_platform() {
    // No --platform: a file of one vendor's symbolic names is read as that vendor's family
    // whatever this machine is (said on stderr), with the W and DRAM Q that naming the right
    // platform gives. (On a machine of the file's own vendor, this machine's table reads it.)
    for (file, platform) in [("icx_symbolic.csv", "icx"), ("zen4_umc.csv", "zen4")] {
        let named = import(file, platform, &["--seconds", "2"]);
        let out = roofline()
            .args(["import", "perf-stat"])
            .arg(fixture(file))
            .args(["--json", "--seconds", "2"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let p = &v["points"][0];
        assert_eq!(p["flops"]["by_class"], named["flops"]["by_class"], "{file}");
        assert!(close(&p["bytes"]["dram"], named["bytes"]["dram"].as_f64().unwrap()), "{file}: {p}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--platform"), "{file}: says how to choose: {err}");
    }
}
