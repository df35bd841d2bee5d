//! Cross-checks every counter event of `platforms/*.toml` against the vendors' own tables in
//! `../shared/perfmon/` (Intel perfmon JSON through its `mapfile.csv`; the Linux kernel's AMD
//! tables, which carry no counter masks): event code, umask, cmask, inv, edge, the counters it
//! may run on (Intel), the AMD UMC read/write mask, and the PMU kind.
//!
//! Skips with a message when the tables are absent (`ROOFLINE_SHARED` overrides the path).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roofline::EventSpec;
use roofline::Platform;
use serde_json::Value;

fn shared_dir() -> Option<PathBuf> {
    let p = std::env::var_os("ROOFLINE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    p.join("perfmon").is_dir().then_some(p.join("perfmon"))
}

fn hex(v: &Value) -> Option<u64> {
    let s = v.as_str()?;
    // Intel writes "0xB7, 0xBB" for the two offcore MSRs; the first is the event code.
    let s = s.split(',').next()?.trim();
    let s = s.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(s, 16).ok()
}

fn num(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::String(s)) if s.starts_with("0x") || s.starts_with("0X") => hex(&Value::String(s.clone())).unwrap_or(u64::MAX),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(u64::MAX),
        Some(Value::Number(n)) => n.as_u64().unwrap_or(u64::MAX),
        _ => 0,
    }
}

/// Intel "Counter" field → counter indices; fixed counters use the kernel's index 32 + n.
fn intel_counters(s: &str) -> Vec<u32> {
    if let Some(n) = s.trim().strip_prefix("Fixed counter ") {
        return vec![32 + n.trim().parse::<u32>().unwrap_or(99)];
    }
    s.split(',').filter_map(|c| c.trim().parse().ok()).collect()
}

struct IntelFile {
    uncore: bool,
    /// `Atom` or `Core` for hybrid parts.
    role: String,
    events: Vec<Value>,
}

fn load_events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match v {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("Events") {
            Some(Value::Array(a)) => a,
            _ => vec![],
        },
        _ => vec![],
    }
}

/// The perfmon files of every model a platform lists, through mapfile.csv.
fn intel_files(perfmon: &Path, p: &Platform) -> Vec<IntelFile> {
    let map = std::fs::read_to_string(perfmon.join("intel/mapfile.csv")).expect("intel/mapfile.csv");
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for model in &p.identify.models {
        let code = format!("GenuineIntel-{:X}-{:02X}", p.identify.families.first().copied().unwrap_or(6), model);
        for line in map.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() < 4 {
                continue;
            }
            let fm = f[0].to_ascii_uppercase();
            if !(fm == code.to_ascii_uppercase() || fm.starts_with(&format!("{}-", code.to_ascii_uppercase()))) {
                continue;
            }
            let kind = f[3];
            if !matches!(kind, "core" | "hybridcore" | "uncore") {
                continue;
            }
            // mapfile paths look like /SKX/events/skylakex_core.json; the copy drops events/.
            let parts: Vec<&str> = f[2].trim_start_matches('/').split('/').collect();
            let (Some(dir), Some(file)) = (parts.first(), parts.last()) else {
                continue;
            };
            let path = perfmon.join("intel").join(dir).join(file);
            if !path.exists() || !seen.insert(path.clone()) {
                continue;
            }
            out.push(IntelFile {
                uncore: kind == "uncore",
                role: f.get(6).copied().unwrap_or("").trim().to_string(),
                events: load_events(&path),
            });
        }
    }
    out
}

fn check_intel(files: &[IntelFile], e: &EventSpec) -> Result<(), String> {
    let uncore = !(e.pmu == "cpu" || e.pmu == "cpu_core" || e.pmu == "cpu_atom");
    let mut found = 0;
    for f in files {
        if f.uncore != uncore {
            continue;
        }
        if e.pmu == "cpu_core" && f.role == "Atom" {
            continue;
        }
        for pe in &f.events {
            if pe.get("EventName").and_then(Value::as_str) != Some(e.name.as_str()) {
                continue;
            }
            found += 1;
            let code = pe.get("EventCode").and_then(hex).unwrap_or(u64::MAX);
            let umask = pe.get("UMask").and_then(hex).unwrap_or(0);
            let cmask = num(pe.get("CounterMask"));
            let inv = num(pe.get("Invert"));
            let edge = num(pe.get("EdgeDetect"));
            let mism = |what: &str, ours: String, theirs: String| Err(format!("{}: {what} {ours} but perfmon says {theirs}", e.name));
            if code != e.event {
                return mism("event", format!("{:#x}", e.event), format!("{code:#x}"));
            }
            if umask != e.umask {
                return mism("umask", format!("{:#x}", e.umask), format!("{umask:#x}"));
            }
            if cmask != e.cmask {
                return mism("cmask", e.cmask.to_string(), cmask.to_string());
            }
            if inv != e.inv as u64 {
                return mism("inv", e.inv.to_string(), inv.to_string());
            }
            if edge != e.edge as u64 {
                return mism("edge", e.edge.to_string(), edge.to_string());
            }
            let theirs = intel_counters(pe.get("Counter").and_then(Value::as_str).unwrap_or(""));
            match &e.counters {
                Some(c) if *c == theirs => {}
                other => return mism("counters", format!("{other:?}"), format!("{theirs:?}")),
            }
            if uncore {
                let unit = pe.get("Unit").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
                if unit == "imc" && !e.pmu.starts_with("uncore_imc") {
                    return mism("pmu", e.pmu.clone(), "an iMC unit".into());
                }
            }
        }
    }
    if found == 0 {
        return Err(format!("{} ({}): not in this platform's perfmon tables", e.name, e.pmu));
    }
    Ok(())
}

fn check_amd(tables: &[Value], e: &EventSpec) -> Result<(), String> {
    if e.counters.is_some() {
        return Err(format!("{}: AMD tables carry no counter masks; do not invent one", e.name));
    }
    let code_of = |pe: &Value| pe.get("EventCode").and_then(hex);
    let named: Vec<&Value> = tables
        .iter()
        .filter(|pe| pe.get("EventName").and_then(Value::as_str) == Some(e.name.as_str()))
        .collect();
    let pmu_of = |pe: &Value| match pe.get("Unit").and_then(Value::as_str) {
        Some("DFPMC") => "amd_df",
        Some("UMCPMC") => "amd_umc",
        Some("L3PMC") => "amd_l3",
        _ => "cpu",
    };
    if let Some(pe) = named.first() {
        let code = code_of(pe).unwrap_or(u64::MAX);
        let umask = pe.get("UMask").and_then(hex).unwrap_or(0);
        let rdwr = pe.get("RdWrMask").and_then(hex).unwrap_or(0);
        if code != e.event || umask != e.umask || rdwr != e.rdwrmask {
            return Err(format!(
                "{}: ours event {:#x} umask {:#x} rdwrmask {:#x}, the kernel's {code:#x} {umask:#x} {rdwr:#x}",
                e.name, e.event, e.umask, e.rdwrmask
            ));
        }
        if pmu_of(pe) != e.pmu {
            return Err(format!("{}: pmu {} but the kernel's unit is {}", e.name, e.pmu, pmu_of(pe)));
        }
        return Ok(());
    }
    // Not named in the kernel's table: the umask must be the union of umask bits the table
    // lists for the same event code (e.g. Zen 1's dp_* umasks OR-ed into one event).
    let listed: Vec<u64> = tables
        .iter()
        .filter(|pe| code_of(pe) == Some(e.event) && pmu_of(pe) == e.pmu)
        .filter_map(|pe| pe.get("UMask").and_then(hex))
        .collect();
    if listed.is_empty() {
        return Err(format!("{}: event {:#x} not in the kernel's tables", e.name, e.event));
    }
    let union = listed.iter().filter(|u| *u & !e.umask == 0).fold(0, |a, u| a | u);
    if union != e.umask || e.umask == 0 {
        return Err(format!(
            "{}: umask {:#x} is not a union of the umasks {listed:x?} the kernel lists for event {:#x}",
            e.name, e.umask, e.event
        ));
    }
    Ok(())
}

fn amd_tables(perfmon: &Path, dir: &str) -> Vec<Value> {
    let d = perfmon.join("amd").join(dir);
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&d) else { return out };
    let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    for p in paths.into_iter().filter(|p| p.extension().is_some_and(|x| x == "json")) {
        out.extend(load_events(&p));
    }
    out
}

/// Checks one platform; returns (checked, unchecked) counts or every mismatch found.
fn check_platform(perfmon: &Path, p: &Platform) -> Result<(usize, usize), Vec<String>> {
    let mut errors = Vec::new();
    let (mut checked, mut unchecked) = (0, 0);
    let intel = p.identify.vendor == "GenuineIntel";
    let files = if intel { intel_files(perfmon, p) } else { vec![] };
    let amd_dir = format!("amd{}", p.key);
    let amd = if intel { vec![] } else { amd_tables(perfmon, &amd_dir) };
    // The kernel has no Zen 2 data-fabric table; Zen 2 and Zen 3 share the DF DRAM-channel
    // encodings (LIKWID's zen2 and zen3 MEM groups use the same ones), so check against Zen 3's.
    let zen3 = if p.key == "zen2" { amd_tables(perfmon, "amdzen3") } else { vec![] };
    if intel && files.is_empty() {
        errors.push(format!("{}: no perfmon files for models {:x?}", p.key, p.identify.models));
    }
    for e in &p.events {
        if let Some(why) = &e.unchecked {
            if why.trim().len() < 10 {
                errors.push(format!("{}/{}: unchecked needs a real reason", p.key, e.name));
            }
            unchecked += 1;
            continue;
        }
        let r = if intel {
            check_intel(&files, e)
        } else if p.key == "zen2" && e.pmu == "amd_df" {
            check_amd(&zen3, e)
        } else {
            check_amd(&amd, e)
        };
        match r {
            Ok(()) => checked += 1,
            Err(m) => errors.push(format!("{}: {m}", p.key)),
        }
    }
    if errors.is_empty() { Ok((checked, unchecked)) } else { Err(errors) }
}

#[test]
fn every_platform_event_matches_the_vendor_tables() {
    let Some(perfmon) = shared_dir() else {
        eprintln!("SKIP platforms_perfmon: ../shared/perfmon is absent (set ROOFLINE_SHARED to its parent)");
        return;
    };
    let mut errors = Vec::new();
    let mut per_platform = BTreeMap::new();
    for p in Platform::embedded() {
        match check_platform(&perfmon, &p) {
            Ok(c) => {
                per_platform.insert(p.key.clone(), c);
            }
            Err(e) => errors.extend(e),
        }
    }
    assert!(errors.is_empty(), "{} mismatches:\n{}", errors.len(), errors.join("\n"));
    let total: usize = per_platform.values().map(|c| c.0).sum();
    eprintln!("checked {total} events: {per_platform:?}");
    assert_eq!(per_platform.len(), 19, "every platform file was checked");
    for (k, (checked, _)) in &per_platform {
        // Every platform has at least its FP events confirmed (Zen 1: dp and sp).
        assert!(*checked >= 2, "{k}: only {checked} events confirmed");
    }
    assert!(total >= 200, "only {total} events were confirmed");
}

#[test]
fn the_checker_catches_a_wrong_encoding() {
    let Some(perfmon) = shared_dir() else {
        eprintln!("SKIP platforms_perfmon: ../shared/perfmon is absent");
        return;
    };
    let mut skx = Platform::load("skx").unwrap();
    assert!(check_platform(&perfmon, &skx).is_ok());
    let fp = skx
        .events
        .iter_mut()
        .find(|e| e.name == "FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE")
        .unwrap();
    fp.counters = Some((0..8).collect());
    let errs = check_platform(&perfmon, &skx).unwrap_err();
    assert!(errs.iter().any(|m| m.contains("counters")), "{errs:?}");

    let mut zen4 = Platform::load("zen4").unwrap();
    assert!(check_platform(&perfmon, &zen4).is_ok());
    zen4.events.iter_mut().find(|e| e.name == "umc_cas_cmd.rd").unwrap().rdwrmask = 2;
    assert!(check_platform(&perfmon, &zen4).is_err());
    // The FMA (MAC) event is checked like any other: the bfloat16 MAC umask in its place fails.
    let mut zen4 = Platform::load("zen4").unwrap();
    let mac = zen4.events.iter_mut().find(|e| e.name == "fp_ret_sse_avx_ops.mac_flops").unwrap();
    assert_eq!((mac.quantity.as_str(), mac.umask), ("flops.fma", 0x08));
    mac.umask = 0x10;
    let errs = check_platform(&perfmon, &zen4).unwrap_err();
    assert!(errs.iter().any(|m| m.contains("mac_flops")), "{errs:?}");

    let mut zen1 = Platform::load("zen1").unwrap();
    zen1.events
        .iter_mut()
        .find(|e| e.name == "fp_ret_sse_avx_ops.dp_flops")
        .unwrap()
        .umask = 0x1f0;
    assert!(check_platform(&perfmon, &zen1).is_err());
}

/// Perfmon's counter list for an event of the platform (core files; P-core files on hybrids).
fn perfmon_counters(files: &[IntelFile], e: &EventSpec) -> Option<Vec<u32>> {
    files
        .iter()
        .filter(|f| !f.uncore)
        .filter(|f| e.pmu != "cpu_core" || f.role != "Atom")
        .flat_map(|f| f.events.iter())
        .find(|pe| pe.get("EventName").and_then(Value::as_str) == Some(e.name.as_str()))
        .map(|pe| intel_counters(pe.get("Counter").and_then(Value::as_str).unwrap_or("")))
}

/// Whether every event gets a distinct counter from its list (Kuhn's augmenting paths).
fn assignable(masks: &[Vec<u32>]) -> bool {
    fn augment(e: usize, masks: &[Vec<u32>], seen: &mut Vec<u32>, owner: &mut BTreeMap<u32, usize>) -> bool {
        for &c in &masks[e] {
            if seen.contains(&c) {
                continue;
            }
            seen.push(c);
            let free = match owner.get(&c).copied() {
                None => true,
                Some(o) => augment(o, masks, seen, owner),
            };
            if free {
                owner.insert(c, e);
                return true;
            }
        }
        false
    }
    let mut owner = BTreeMap::new();
    (0..masks.len()).all(|e| augment(e, masks, &mut Vec::new(), &mut owner))
}

#[test]
fn planned_groups_fit_the_vendors_counter_masks() {
    use roofline::__private::perf;
    let Some(perfmon) = shared_dir() else {
        eprintln!("SKIP platforms_perfmon: ../shared/perfmon is absent");
        return;
    };
    let mut groups_of = BTreeMap::new();
    for p in Platform::embedded().into_iter().filter(|p| p.identify.vendor == "GenuineIntel") {
        let files = intel_files(&perfmon, &p);
        let sysfs = tempfile::tempdir().unwrap();
        let core = if p.events.iter().any(|e| e.pmu == "cpu_core") {
            "cpu_core"
        } else {
            "cpu"
        };
        std::fs::create_dir(sysfs.path().join(core)).unwrap();
        std::fs::write(sysfs.path().join(core).join("type"), "4\n").unwrap();
        for smt in [true, false] {
            let n = perf::core_counters_for(&p, smt, false);
            let (specs, _) = perf::counters_for_platform(&p, sysfs.path(), true, false, false).unwrap();
            let plan = perf::plan_groups(&specs, n);
            let mut hw = 0;
            for g in plan.iter().filter(|g| specs[g[0]].scope == perf::Scope::Core) {
                hw += 1;
                let masks: Vec<Vec<u32>> = g
                    .iter()
                    .map(|&i| {
                        // The vendor's list where perfmon has the event, else (generic
                        // cycles) any general-purpose counter; fixed ones always exist.
                        let e = p.events.iter().find(|e| e.name == specs[i].name);
                        let list = e.and_then(|e| perfmon_counters(&files, e)).unwrap_or_else(|| (0..n).collect());
                        list.into_iter().filter(|&c| c < n || c >= 32).collect()
                    })
                    .collect();
                let names: Vec<&str> = g.iter().map(|&i| specs[i].name.as_str()).collect();
                assert!(
                    assignable(&masks),
                    "{} (smt {smt}, {n} counters): {names:?} cannot all be placed",
                    p.key
                );
            }
            groups_of.insert((p.key.clone(), smt), hw);
        }
    }
    eprintln!("hardware groups (optional events included): {groups_of:?}");
    // Skylake-SP with SMT: 4 counters for 11 events restricted to 0-3 (3 fixed aside).
    assert_eq!(groups_of[&("skx".to_string(), true)], 3);
}
