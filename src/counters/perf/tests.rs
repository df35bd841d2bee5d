use std::collections::BTreeMap;
use std::path::Path;

use super::access::{has_cap_perfmon, paranoid_decision};
use super::plan::schedulable;
use super::sysfs::parse_format;
use super::*;
use crate::machine::{EventSpec, Platform};

fn ev(event: u64, umask: u64) -> EventSpec {
    EventSpec {
        name: "X".into(),
        pmu: "cpu".into(),
        event,
        umask,
        cmask: 0,
        inv: false,
        edge: false,
        config1: 0,
        counters: None,
        quantity: "flops".into(),
        class: None,
        weight: 1.0,
        paired: false,
        unreliable: false,
        caveat: None,
        optional: false,
        rdwrmask: 0,
        perf_name: None,
        aliases: Vec::new(),
        unchecked: None,
        part_of: None,
    }
}

#[test]
fn raw_config_places_every_field() {
    // FP_ARITH_INST_RETIRED.SCALAR_DOUBLE = r01c7 in perf's notation.
    assert_eq!(raw_config(&ev(0xc7, 0x01)), 0x01c7);
    let mut e = ev(0xa3, 0x14);
    e.cmask = 0x14;
    e.inv = true;
    e.edge = true;
    assert_eq!(raw_config(&e), 0x14 << 24 | 1 << 23 | 1 << 18 | 0x14 << 8 | 0xa3);
    // AMD extended event select: event 0x1AB → bits 0–7 = 0xAB, bits 32–35 = 0x1.
    assert_eq!(raw_config(&ev(0x1ab, 0x02)), 0x1 << 32 | 0x02 << 8 | 0xab);
}

#[test]
fn cpu_lists_parse_and_reject_garbage() {
    assert_eq!(parse_cpu_list("0,64\n"), Some(vec![0, 64]));
    assert_eq!(parse_cpu_list("0-2,8"), Some(vec![0, 1, 2, 8]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("x"), None);
}

fn hw(name: &str, counters: Option<Vec<u32>>, paired: bool) -> CounterSpec {
    let mut s = CounterSpec::cycles();
    s.name = name.into();
    s.counters = counters;
    s.paired = paired;
    s
}

#[test]
fn groups_respect_counter_constraints() {
    // Skylake with SMT: 4 counters; FP_ARITH ×4 and L1D.REPLACEMENT all need 0–3,
    // so five such events take two groups.
    let low = Some(vec![0, 1, 2, 3]);
    let specs: Vec<CounterSpec> = (0..5).map(|i| hw(&format!("e{i}"), low.clone(), false)).collect();
    let plan = plan_groups(&specs, 4);
    assert_eq!(plan, vec![vec![0, 1, 2, 3], vec![4]]);
    // With 8 counters but the same 0–3 constraint it still takes two.
    assert_eq!(plan_groups(&specs, 8).len(), 2);
    // Unconstrained events fill all 8.
    let free: Vec<CounterSpec> = (0..8).map(|i| hw(&format!("f{i}"), None, false)).collect();
    assert_eq!(plan_groups(&free, 8).len(), 1);
}

#[test]
fn matching_moves_events_to_make_room() {
    // a may use 0 or 1, b only 0: a must move to 1.
    let a = hw("a", Some(vec![0, 1]), false);
    let b = hw("b", Some(vec![0]), false);
    assert!(schedulable(&[&a, &b], 4));
    let c = hw("c", Some(vec![0]), false);
    assert!(!schedulable(&[&b, &c], 4));
    // A pair takes two adjacent counters: two pairs fit in 4, three do not.
    let p = hw("p", None, true);
    assert!(schedulable(&[&p, &p], 4));
    assert!(!schedulable(&[&p, &p, &p], 4));
    assert!(!schedulable(&[&p, &p, &a], 4));
}

#[test]
fn software_and_uncore_get_their_own_groups() {
    let mut specs = vec![hw("fp", None, false)];
    specs.extend(software_events(Path::new("/nonexistent"), false));
    let mut u = hw("imc", None, false);
    u.scope = Scope::Uncore { cpus: vec![0, 64] };
    specs.push(u.clone());
    specs.push(u);
    let plan = plan_groups(&specs, 4);
    assert_eq!(plan, vec![vec![0], vec![1, 2, 3], vec![4], vec![5]]);
}

fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

#[test]
fn group_read_parses_and_scales() {
    // nr=3, enabled=1000, running=250, then (value, id) ×3
    let buf = words(&[3, 1000, 250, 10, 7, 20, 8, 30, 9]);
    let g = parse_group_read(&buf).unwrap();
    assert_eq!(g.time_enabled, 1000);
    assert_eq!(g.time_running, 250);
    assert_eq!(g.values, vec![(7, 10), (8, 20), (9, 30)]);
    let s = scale(g.values[1].1, g.time_enabled, g.time_running).unwrap();
    assert_eq!(s.value, 80.0);
    assert_eq!(s.running_ratio, 0.25);
    // Not multiplexed: unscaled, ratio 1.
    let s = scale(42, 500, 500).unwrap();
    assert_eq!((s.value, s.running_ratio), (42.0, 1.0));
    // Never scheduled: not counted.
    assert_eq!(scale(0, 500, 0), None);
    // running > enabled (clock rounding) never scales down
    assert_eq!(scale(50, 9, 10).unwrap().value, 50.0);
}

#[test]
fn scaling_back_by_the_running_ratio_gives_the_raw_count() {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let seed = x;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..1000 {
        let run = next() % 1_000_000 + 1;
        let en = run + next() % 1_000_000;
        let c = next() % 1_000_000_000;
        let s = scale(c, en, run).unwrap();
        let back = s.value * s.running_ratio;
        // fl(fl(c · en / run) · fl(run / en)) with c exact in f64: a few roundings of ≤ u each.
        assert!(
            (back - c as f64).abs() <= 4.0 * f64::EPSILON * c as f64,
            "seed {seed} c {c} en {en} run {run}"
        );
    }
}

#[test]
fn multiplex_scaling_uses_enabled_over_running() {
    let s = scale(1000, 4_000_000, 1_000_000).unwrap();
    assert_eq!((s.value, s.running_ratio), (4000.0, 0.25));
    // Running longer than enabled (clock rounding) never scales down.
    assert_eq!(scale(50, 9, 10).unwrap().value, 50.0);
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..1000 {
        let run = next() % 1_000_000 + 1;
        let en = run + next() % 1_000_000;
        let c = next() % 1_000_000_000;
        let s = scale(c, en, run).unwrap();
        let back = s.value * s.running_ratio;
        // c·en < 2⁵³ is exact in f64; the division, the ratio and the product round once
        // each (≤ u = ε/2): (1 + u)³ − 1 < 2ε.
        assert!((back - c as f64).abs() <= 2.0 * f64::EPSILON * c as f64, "c {c} en {en} run {run}");
    }
}

#[test]
fn truncated_group_read_is_an_error_not_a_panic() {
    let buf = words(&[3, 1000, 250, 10, 7]);
    assert!(parse_group_read(&buf).is_err());
    assert!(parse_group_read(&[]).is_err());
    assert!(parse_group_read(&words(&[u64::MAX, 1, 1])).is_err());
}

#[test]
fn no_core_pmu_names_trace() {
    let dir = tempfile::tempdir().unwrap();
    for pmu in ["software", "msr"] {
        std::fs::create_dir(dir.path().join(pmu)).unwrap();
        std::fs::write(dir.path().join(pmu).join("type"), "1\n").unwrap();
    }
    let e = core_pmu(dir.path()).unwrap_err().to_string();
    assert!(e.contains("no hardware core PMU") && e.contains("msr, software"), "{e}");
    assert!(e.contains("--backend trace"), "{e}");
    std::fs::create_dir(dir.path().join("cpu")).unwrap();
    std::fs::write(dir.path().join("cpu").join("type"), "4\n").unwrap();
    assert_eq!(core_pmu(dir.path()).unwrap(), "cpu");
    assert_eq!(pmu_type(dir.path(), "cpu").unwrap(), 4);
}

#[test]
fn uncore_instances_are_found_by_prefix() {
    let dir = tempfile::tempdir().unwrap();
    for d in [
        "uncore_imc_0",
        "uncore_imc_10",
        "uncore_imc_1",
        "uncore_imc_free_running_0",
        "uncore_imcx",
    ] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    assert_eq!(
        pmu_instances(dir.path(), "uncore_imc"),
        vec!["uncore_imc_0", "uncore_imc_1", "uncore_imc_10"]
    );
}

#[cfg(feature = "analysis")]
#[test]
fn platform_events_resolve_against_sysfs() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |name: &str, ty: &str, mask: Option<&str>| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("type"), ty).unwrap();
        if let Some(m) = mask {
            std::fs::write(d.join("cpumask"), m).unwrap();
        }
    };
    mk("cpu", "4\n", None);
    mk("uncore_imc_0", "13\n", Some("0,64\n"));
    mk("uncore_imc_1", "14\n", Some("0,64\n"));
    let toml = r#"
key = "t"
name = "Test"
[identify]
vendor = "GenuineIntel"
families = [6]
[fp_pipes.128]
fma = 2
[[events]]
name = "FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE"
event = 0xc7
umask = 0x40
counters = [0, 1, 2, 3]
quantity = "flops"
class = "packed512_double"
weight = 8
[[events]]
name = "FP_ARITH_INST_RETIRED.512B_PACKED_SINGLE"
event = 0xc7
umask = 0x80
quantity = "flops"
class = "packed512_single"
weight = 16
optional = true
[[events]]
name = "CAS_COUNT.RD"
pmu = "uncore_imc"
event = 0x04
umask = 0x03
quantity = "bytes.dram_read"
weight = 64
[[events]]
name = "UMC_CAS"
pmu = "amd_umc"
event = 0x0a
quantity = "bytes.dram"
weight = 64
"#;
    let plat = Platform::parse(toml, "t.toml").unwrap();
    let (specs, notes) = resolve_platform_events(&plat, dir.path(), false, true).unwrap();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE",
            "uncore_imc_0/CAS_COUNT.RD",
            "uncore_imc_1/CAS_COUNT.RD"
        ]
    );
    assert_eq!((specs[0].type_, specs[0].config, specs[0].scope.clone()), (4, 0x40c7, Scope::Core));
    assert_eq!(specs[0].counters, Some(vec![0, 1, 2, 3]));
    assert_eq!(specs[2].type_, 14);
    assert_eq!(specs[2].scope, Scope::Uncore { cpus: vec![0, 64] });
    assert!(notes.iter().any(|n| n.contains("amd_umc not present")), "{notes:?}");
    // Optional events on request; uncore left out on request.
    let (specs, _) = resolve_platform_events(&plat, dir.path(), true, false).unwrap();
    assert_eq!(specs.len(), 2);
    assert!(specs.iter().all(|s| s.scope == Scope::Core));
    // One hardware group, one group per uncore instance.
    let (specs, _) = resolve_platform_events(&plat, dir.path(), false, true).unwrap();
    assert_eq!(plan_groups(&specs, 4), vec![vec![0], vec![1], vec![2]]);
}

#[test]
fn paranoid_decision_honours_capabilities() {
    // (level, CAP_PERFMON or CAP_SYS_ADMIN, needs uncore) → allowed
    let cases = [
        (None, false, true, true),
        (Some(-1), false, true, true),
        (Some(0), false, true, true),
        (Some(1), false, false, true),
        (Some(1), false, true, false),
        (Some(1), true, true, true),
        (Some(2), false, false, true),
        (Some(2), false, true, false),
        (Some(2), true, true, true),
        (Some(3), false, false, false),
        (Some(3), false, true, false),
        (Some(3), true, false, true),
        (Some(3), true, true, true),
        (Some(4), false, false, false),
        (Some(4), true, true, true),
    ];
    for (level, cap, uncore, ok) in cases {
        assert_eq!(
            paranoid_decision(level, cap, uncore).is_ok(),
            ok,
            "level {level:?}, cap {cap}, uncore {uncore}"
        );
    }
    let e = paranoid_decision(Some(3), false, false).unwrap_err();
    assert!(
        e.to_string().contains("perf_event_paranoid is 3") && e.to_string().contains("CAP_PERFMON"),
        "{e}"
    );
    assert_eq!(e.exit_code(), 2);
    let e = paranoid_decision(Some(2), false, true).unwrap_err().to_string();
    assert!(e.contains("need level 0") && e.contains("--no-uncore"), "{e}");
    // check_paranoid decides with this process's own capabilities.
    assert_eq!(check_paranoid(Some(3), false).is_ok(), has_cap_perfmon());
}

#[cfg(feature = "analysis")]
#[test]
fn measurement_sums_weighted_counts_and_reports_multiplexing() {
    let mut fp = hw("FP.512D", None, false);
    fp.quantity = "flops".into();
    fp.class = Some("packed512_double".into());
    fp.weight = 8.0;
    let mut rd = hw("CAS.RD", None, false);
    rd.quantity = "bytes.dram_read".into();
    rd.weight = 64.0;
    let mut wr = rd.clone();
    wr.name = "CAS.WR".into();
    wr.quantity = "bytes.dram_write".into();
    let specs = vec![fp, rd, wr];
    let counts = vec![
        EventCount {
            name: "FP.512D".into(),
            scaled: scale(100, 1000, 500),
        },
        EventCount {
            name: "CAS.RD".into(),
            scaled: scale(10, 1, 1),
        },
        EventCount {
            name: "CAS.WR".into(),
            scaled: None,
        },
    ];
    let m = to_measurement(&specs, &counts, vec![1.0]);
    assert_eq!(m.flops.total, 1600.0);
    assert_eq!(m.flops.by_class["packed512_double"], 1600.0);
    assert_eq!(m.bytes["dram"], 640.0);
    assert_eq!(m.extra.multiplex_running_ratio.as_ref().unwrap()["FP.512D"], 0.5);
    assert_eq!(m.extra.not_counted.as_ref().unwrap()[0], "CAS.WR");
    assert!(m.provenance.unwrap().notes.iter().any(|n| n.contains("bytes.core is not counted")));
    let w = multiplex_warnings(&counts);
    assert_eq!(w.len(), 2);
    assert!(w[0].contains("50.0%"), "{w:?}");
}

/// A fake `/sys/bus/event_source/devices`: `(dir, type)` PMUs, then `(path, text)` files.
fn sysfs(pmus: &[(&str, u32)], files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, ty) in pmus {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("type"), format!("{ty}\n")).unwrap();
    }
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn amd_umc_read_write_filter_is_in_config_bits_8_9() {
    for key in ["zen4", "zen5"] {
        let p = Platform::load(key).unwrap();
        let get = |n: &str| p.events.iter().find(|e| e.name == n).unwrap();
        assert_eq!(raw_config(get("umc_cas_cmd.rd")), 0x10a, "{key}");
        assert_eq!(raw_config(get("umc_cas_cmd.wr")), 0x20a, "{key}");
        // Through sysfs: one spec per amd_umc instance, each with its own filter.
        let dir = sysfs(&[("cpu", 4), ("amd_umc_0", 17), ("amd_umc_1", 18)], &[("amd_umc_0/cpumask", "0\n")]);
        let (specs, _) = resolve_platform_events(&p, dir.path(), false, true).unwrap();
        let umc: Vec<(String, u32, u64)> = specs
            .iter()
            .filter(|s| s.pmu.starts_with("amd_umc"))
            .map(|s| (s.name.clone(), s.type_, s.config))
            .collect();
        assert_eq!(
            umc,
            [
                ("amd_umc_0/umc_cas_cmd.rd".to_string(), 17, 0x10a),
                ("amd_umc_1/umc_cas_cmd.rd".to_string(), 18, 0x10a),
                ("amd_umc_0/umc_cas_cmd.wr".to_string(), 17, 0x20a),
                ("amd_umc_1/umc_cas_cmd.wr".to_string(), 18, 0x20a),
            ],
            "{key}"
        );
    }
}

#[test]
fn sysfs_aliases_are_encoded_through_the_pmu_format() {
    let dir = sysfs(
        &[("uncore_imc", 13), ("cpu", 4)],
        &[
            ("uncore_imc/format/event", "config:0-7\n"),
            ("uncore_imc/format/umask", "config:8-15\n"),
            ("uncore_imc/events/data_reads", "event=0xff,umask=0x01\n"),
            ("uncore_imc/events/data_writes", "event=0xff,umask=0x02\n"),
            ("uncore_imc/events/needs_arg", "event=0x01,umask=?\n"),
            ("uncore_imc/events/too_wide", "event=0x1ff\n"),
            ("uncore_imc/events/no_format", "event=0x1,chmask=0x3\n"),
            ("cpu/format/event", "config:0-7,32-35\n"),
            ("cpu/format/umask", "config:8-15\n"),
            ("cpu/format/edge", "config:18\n"),
            ("cpu/format/ldlat", "config1:0-15\n"),
            ("cpu/events/split", "event=0x1ab,umask=0x3,edge\n"),
            ("cpu/events/loads", "event=0xcd,umask=0x1,ldlat=3\n"),
            ("cpu/events/direct", "config=0x4300c0\n"),
        ],
    );
    let imc = dir.path().join("uncore_imc");
    let cpu = dir.path().join("cpu");
    assert_eq!(sysfs_alias_config(&imc, "data_reads").unwrap(), [0x01ff, 0, 0]);
    assert_eq!(sysfs_alias_config(&imc, "data_writes").unwrap(), [0x02ff, 0, 0]);
    // AMD's split event select: bits 8–11 of the value go to config bits 32–35.
    assert_eq!(sysfs_alias_config(&cpu, "split").unwrap(), [1 << 32 | 1 << 18 | 0x03ab, 0, 0]);
    assert_eq!(sysfs_alias_config(&cpu, "loads").unwrap(), [0x01cd, 3, 0]);
    assert_eq!(sysfs_alias_config(&cpu, "direct").unwrap(), [0x4300c0, 0, 0]);
    for bad in ["needs_arg", "too_wide", "no_format", "absent"] {
        assert!(sysfs_alias_config(&imc, bad).is_err(), "{bad}");
    }
    assert_eq!(parse_format("config:0-7,32-35"), Some((0, vec![(0, 7), (32, 35)])));
    assert_eq!(parse_format("config1:21"), Some((1, vec![(21, 21)])));
    assert_eq!(parse_format("config:7-0"), None);
    assert_eq!(parse_format("period:0-7"), None);
    assert_eq!(split_perf_name("uncore_imc/data_reads/"), Some((Some("uncore_imc"), "data_reads")));
    assert_eq!(split_perf_name("ref-cycles"), Some((None, "ref-cycles")));
    assert_eq!(split_perf_name("cpu/event=0x3c/"), None);
    assert_eq!(split_perf_name("cycles:u"), None);
}

#[test]
fn named_events_open_as_perf_opens_them() {
    // Client iMC: the kernel's aliases, never raw_config's 0. data_writes is missing
    // here: a note, not a zero count.
    let hsw = Platform::load("hsw").unwrap();
    let dir = sysfs(
        &[("cpu", 4), ("uncore_imc", 13)],
        &[
            ("uncore_imc/format/event", "config:0-7\n"),
            ("uncore_imc/format/umask", "config:8-15\n"),
            ("uncore_imc/events/data_reads", "event=0xff,umask=0x01\n"),
        ],
    );
    let (specs, notes) = resolve_platform_events(&hsw, dir.path(), false, true).unwrap();
    let rd = specs.iter().find(|s| s.name == "uncore_imc/UNC_IMC.DATA_READS").unwrap();
    assert_eq!((rd.type_, rd.config, rd.config1), (13, 0x01ff, 0));
    assert!(!specs.iter().any(|s| s.name.contains("DATA_WRITES")));
    assert!(
        notes
            .iter()
            .any(|n| n.contains("UNC_IMC.DATA_WRITES: no usable event alias uncore_imc/data_writes/")),
        "{notes:?}"
    );
    // Fixed-counter events as the generic hardware events, on every Intel generation.
    for key in ["hsw", "skx", "icx", "spr"] {
        let p = Platform::load(key).unwrap();
        let (specs, _) = resolve_platform_events(&p, dir.path(), false, false).unwrap();
        let get = |n: &str| specs.iter().find(|s| s.name == n).map(|s| (s.type_, s.config, s.counters.clone()));
        assert_eq!(get("INST_RETIRED.ANY"), Some((PERF_TYPE_HARDWARE, 1, Some(vec![32]))), "{key}");
        assert_eq!(
            get("CPU_CLK_UNHALTED.THREAD"),
            Some((PERF_TYPE_HARDWARE, 0, Some(vec![33]))),
            "{key}"
        );
        assert_eq!(
            get("CPU_CLK_UNHALTED.REF_TSC"),
            Some((PERF_TYPE_HARDWARE, 9, Some(vec![34]))),
            "{key}"
        );
        let l1 = specs.iter().find(|s| s.name == "L1D.REPLACEMENT").unwrap();
        assert_eq!((l1.type_, l1.config), (4, 0x0151), "{key}");
    }
    // Hybrid: the P-core PMU's type in bits 32–63 (PERF_PMU_TYPE_SHIFT).
    let adl = Platform::load("adl").unwrap();
    let dir = sysfs(&[("cpu_core", 8), ("cpu_atom", 10)], &[]);
    let (specs, _) = resolve_platform_events(&adl, dir.path(), false, false).unwrap();
    let cyc = specs.iter().find(|s| s.name == "CPU_CLK_UNHALTED.THREAD").unwrap();
    assert_eq!((cyc.type_, cyc.config, cyc.pmu.as_str()), (PERF_TYPE_HARDWARE, 8 << 32, "cpu_core"));
    let refc = specs.iter().find(|s| s.name == "CPU_CLK_UNHALTED.REF_TSC").unwrap();
    assert_eq!(refc.config, 8 << 32 | 9);
    // E-core cycles on the atom PMU (its type in bits 32-63), in a group of their own.
    let e = specs.iter().find(|s| s.quantity == ECORE_CYCLES).expect("E-core cycles");
    assert_eq!((e.type_, e.config, e.pmu.as_str()), (PERF_TYPE_HARDWARE, 10 << 32, "cpu_atom"));
    let plan = plan_groups(&specs, 8);
    let ei = specs.iter().position(|s| s.quantity == ECORE_CYCLES).unwrap();
    for g in &plan {
        let pmus: std::collections::BTreeSet<&str> = g.iter().map(|&i| specs[i].pmu.as_str()).collect();
        assert_eq!(pmus.len(), 1, "a group mixes PMUs: {pmus:?}");
    }
    assert!(plan.iter().any(|g| g == &vec![ei]));
    // AMD: cycles and instructions are generic too (the kernel's own encoding).
    let zen4 = Platform::load("zen4").unwrap();
    let dir = sysfs(&[("cpu", 4)], &[]);
    let (specs, _) = resolve_platform_events(&zen4, dir.path(), false, false).unwrap();
    assert_eq!((specs[0].name.as_str(), specs[0].type_, specs[0].config), ("cycles", 0, 0));
    assert_eq!((specs[1].name.as_str(), specs[1].type_, specs[1].config), ("instructions", 0, 1));
    assert_eq!((specs[2].type_, specs[2].config), (4, 0x1f03));
}

/// Kuhn's augmenting paths: whether every event gets its own counter among those it may
/// use (its mask within `0..n`, or its fixed counters), independently of `schedulable`.
fn perfect_matching(masks: &[Vec<u32>]) -> bool {
    fn augment(e: usize, masks: &[Vec<u32>], seen: &mut BTreeMap<u32, bool>, owner: &mut BTreeMap<u32, usize>) -> bool {
        for &c in &masks[e] {
            if seen.insert(c, true).is_some() {
                continue;
            }
            let free = match owner.get(&c) {
                None => true,
                Some(&o) => augment(o, masks, seen, owner),
            };
            if free {
                owner.insert(c, e);
                return true;
            }
        }
        false
    }
    let mut owner = BTreeMap::new();
    (0..masks.len()).all(|e| augment(e, masks, &mut BTreeMap::new(), &mut owner))
}

/// Hardware groups of `key`'s default events, each checked for a counter assignment.
fn planned(key: &str, smt: bool, watchdog: bool) -> Vec<Vec<String>> {
    let p = Platform::load(key).unwrap();
    let dir = sysfs(&[("cpu", 4)], &[]);
    let (specs, _) = counters_for_platform(&p, dir.path(), false, false, watchdog).unwrap();
    let n = core_counters_for(&p, smt, watchdog);
    let plan = plan_groups(&specs, n);
    let hw: Vec<&Vec<usize>> = plan.iter().filter(|g| specs[g[0]].scope == Scope::Core).collect();
    for g in &hw {
        assert!(g.iter().all(|&i| !specs[i].paired), "the checker handles unpaired events");
        let masks: Vec<Vec<u32>> = g
            .iter()
            .map(|&i| match &specs[i].counters {
                Some(c) => c.iter().copied().filter(|&c| c < n || c >= 32).collect(),
                None => (0..n).collect(),
            })
            .collect();
        let names: Vec<&str> = g.iter().map(|&i| specs[i].name.as_str()).collect();
        assert!(perfect_matching(&masks), "{key}: group {names:?} cannot be placed on {n} counters");
    }
    // Every hardware event is planned exactly once.
    let mut all: Vec<usize> = hw.iter().flat_map(|g| g.iter().copied()).collect();
    all.sort();
    let core: Vec<usize> = (0..specs.len()).filter(|&i| specs[i].scope == Scope::Core).collect();
    assert_eq!(all, core, "{key}");
    hw.iter().map(|g| g.iter().map(|&i| specs[i].name.clone()).collect()).collect()
}

#[test]
fn fixed_counters_take_no_general_purpose_counter() {
    // Skylake-SP, SMT on: 4 GP counters; FP_ARITH ×4, L1D.REPLACEMENT, L2_LINES_IN,
    // L2_LINES_OUT all need 0–3 → two groups, the fixed ones joining the first.
    let skx = planned("skx", true, false);
    assert_eq!(skx.len(), 2, "{skx:?}");
    for f in ["INST_RETIRED.ANY", "CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.REF_TSC"] {
        assert!(skx[0].iter().any(|n| n == f), "{f} not in the first group: {skx:?}");
    }
    assert_eq!(skx[0].len(), 7);
    assert_eq!(skx[1].len(), 3);
    // Ice Lake-SP and Sapphire Rapids: 8 GP counters hold everything at once.
    assert_eq!(planned("icx", true, false).len(), 1);
    assert_eq!(planned("spr", true, false).len(), 1);
    // The NMI watchdog holds fixed counter 1: cycles is planned on a GP counter and the
    // groups still fit (checked inside `planned`).
    let wd = planned("skx", true, true);
    assert_eq!(wd.len(), 2, "{wd:?}");
    // AMD: the watchdog takes one of the 6 GP counters; Zen 5's two paired FP events
    // and cycles + instructions no longer fit one group.
    let zen5 = Platform::load("zen5").unwrap();
    assert_eq!(
        (core_counters_for(&zen5, true, false), core_counters_for(&zen5, true, true)),
        (6, 5)
    );
    let dir = sysfs(&[("cpu", 4)], &[]);
    let (specs, _) = counters_for_platform(&zen5, dir.path(), false, false, true).unwrap();
    let hw_groups = |n| plan_groups(&specs, n).iter().filter(|g| specs[g[0]].scope == Scope::Core).count();
    assert_eq!((hw_groups(6), hw_groups(5)), (1, 2));
    let skxp = Platform::load("skx").unwrap();
    assert_eq!(core_counters_for(&skxp, true, true), 4, "Intel's watchdog uses a fixed counter");
    // A fixed counter is still one slot: two events on it cannot share a group.
    let mut a = hw("inst", Some(vec![32]), false);
    let b = a.clone();
    assert!(!schedulable(&[&a, &b], 4));
    a.counters = Some(vec![33]);
    let four: Vec<CounterSpec> = (0..4).map(|i| hw(&format!("g{i}"), Some(vec![0, 1, 2, 3]), false)).collect();
    let mut group: Vec<&CounterSpec> = four.iter().collect();
    group.extend([&a, &b]);
    assert!(schedulable(&group, 4));
}

#[test]
fn the_watchdog_moves_only_the_fixed_cycles_event() {
    let skx = Platform::load("skx").unwrap();
    let dir = sysfs(&[("cpu", 4)], &[]);
    let (specs, notes) = counters_for_platform(&skx, dir.path(), false, false, true).unwrap();
    let c = |n: &str| specs.iter().find(|s| s.name == n).unwrap().counters.clone();
    assert_eq!(c("CPU_CLK_UNHALTED.THREAD"), None);
    assert_eq!(c("INST_RETIRED.ANY"), Some(vec![32]));
    assert_eq!(c("CPU_CLK_UNHALTED.REF_TSC"), Some(vec![34]));
    assert!(notes.iter().any(|n| n.contains("NMI watchdog")), "{notes:?}");
    let (specs, notes) = counters_for_platform(&skx, dir.path(), false, false, false).unwrap();
    assert_eq!(
        specs.iter().find(|s| s.name == "CPU_CLK_UNHALTED.THREAD").unwrap().counters,
        Some(vec![33])
    );
    assert!(!notes.iter().any(|n| n.contains("NMI watchdog")));
    // Zen 1 has no DRAM event: said, not silently missing.
    let zen1 = Platform::load("zen1").unwrap();
    let (_, notes) = counters_for_platform(&zen1, dir.path(), false, true, false).unwrap();
    assert!(notes.iter().any(|n| n.contains("Q_dram unavailable")), "{notes:?}");
    let (_, notes) = counters_for_platform(&skx, dir.path(), false, true, false).unwrap();
    assert!(!notes.iter().any(|n| n.contains("Q_dram unavailable")), "{notes:?}");
}

/// Zen 4's groups: with the MAC event the measurement has `flops.fma`, a part of W (never
/// added to it); without it (the default, opt-in event left out, or not counted) none.
#[cfg(feature = "trace")]
#[test]
fn a_group_with_the_mac_event_gives_flops_fma() {
    let zen4 = crate::machine::Platform::load("zen4").unwrap();
    let dir = tempfile::tempdir().unwrap();
    crate::counters::simulated::SimulatedPmu::new(zen4.clone(), Default::default())
        .write_sysfs(dir.path())
        .unwrap();
    let (all, _) = resolve_platform_events(&zen4, dir.path(), true, false).unwrap();
    let (default, _) = resolve_platform_events(&zen4, dir.path(), false, false).unwrap();
    let mac = all.iter().position(|s| s.quantity == "flops.fma").expect("zen4 has the MAC event");
    assert_eq!(all[mac].config, 0x08 << 8 | 0x03);
    assert!(all[mac].paired);
    assert!(!default.iter().any(|s| s.quantity == "flops.fma"), "opt-in: not counted by default");
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let w = (t % 1_000_000_000 + 1000) as f64;
    let fma = (t / 7 % (w as u64)) as f64;
    let count = |name: &str, v: Option<f64>| EventCount {
        name: name.into(),
        scaled: v.map(|v| Scaled {
            raw: v as u64,
            value: v,
            running_ratio: 1.0,
        }),
    };
    let value = |s: &CounterSpec| match s.quantity.as_str() {
        "flops.fma" => Some(fma),
        "flops" if s.class.as_deref() == Some("any_precision") => Some(w),
        "flops" => Some(0.0),
        _ => Some(1e6),
    };
    let counts: Vec<EventCount> = all.iter().map(|s| count(&s.name, value(s))).collect();
    let m = to_measurement(&all, &counts, vec![1.0]);
    assert_eq!((m.flops.total, m.flops.fma), (w, Some(fma)), "t={t}");
    let counts: Vec<EventCount> = default.iter().map(|s| count(&s.name, value(s))).collect();
    let m = to_measurement(&default, &counts, vec![1.0]);
    assert_eq!((m.flops.total, m.flops.fma), (w, None));
    // Opened but never on a counter: not counted, no share (never a zero one).
    let counts: Vec<EventCount> = all
        .iter()
        .map(|s| count(&s.name, if s.quantity == "flops.fma" { None } else { value(s) }))
        .collect();
    let m = to_measurement(&all, &counts, vec![1.0]);
    assert_eq!(m.flops.fma, None);
    assert!(m.extra.not_counted.unwrap().iter().any(|e| e.contains("mac_flops")));
}

/// On hybrid parts the report says whether W is partial, from the E-cores' cycles.
#[test]
fn ecore_cycles_decide_whether_w_is_partial() {
    let mk = |name: &str, quantity: &str| {
        let mut s = CounterSpec::software("task-clock").unwrap();
        s.name = name.into();
        s.quantity = quantity.into();
        s
    };
    let specs = vec![mk("cycles", "cycles"), mk("cpu_atom/cycles", ECORE_CYCLES)];
    let count = |v: f64| EventCount {
        name: String::new(),
        scaled: Some(Scaled {
            raw: v as u64,
            value: v,
            running_ratio: 1.0,
        }),
    };
    let m = to_measurement(&specs, &[count(3e9), count(1e9)], vec![1.0]);
    let notes = m.provenance.unwrap().notes;
    assert!(notes.iter().any(|n| n.starts_with("W partial: 25.0 %")), "{notes:?}");
    assert_eq!(m.extra.other["ecore_cycles"], serde_json::json!(1e9));
    let m = to_measurement(&specs, &[count(3e9), count(0.0)], vec![1.0]);
    let notes = m.provenance.unwrap().notes;
    assert!(notes.iter().any(|n| n == "no cycle ran on an E-core: W is complete"), "{notes:?}");
    assert!(!notes.iter().any(|n| n.starts_with("W partial")));
}
