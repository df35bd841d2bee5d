//! Identification, caches and topology on recorded CPUID dumps (`../shared/cpuid`, AIDA64
//! format; skipped with a message when absent) and on this repo's own small fixtures.

use std::path::{Path, PathBuf};

use roofline::__private::machine::CpuidDump;
use roofline::__private::machine::from_dump;
use roofline::IdentifiedBy;
use roofline::{DetectOptions, MachineModel, Platform};

/// `$ROOFLINE_SHARED/cpuid`, else `../shared/cpuid` beside the repository.
fn shared_cpuid() -> Option<PathBuf> {
    let base = std::env::var_os("ROOFLINE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let dir = base.join("cpuid");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {} is absent (set ROOFLINE_SHARED to the shared folder)", dir.display());
        None
    }
}

/// Recorded dumps: (short name from the file name, path).
fn dumps(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().split('_').next().unwrap().to_string(), p))
        .collect();
    v.sort();
    v
}

/// Which platform file each recorded CPU belongs to (from the dumps' README: the CPU names).
fn expected_platform(short: &str) -> &'static str {
    match short {
        "snb" => "snb",
        "ivb" => "ivb",
        "hsw" => "hsx", // Xeon E5-2699 v3
        "bdw" => "bdx", // Xeon E5-2620 v4
        "skl" => "skl",
        "skx" | "clx" => "skx",
        "icl" => "icl",
        "icx" => "icx",
        "rkl" | "tgl" => "tgl",
        "adl" => "adl",
        "spr" | "emr" => "spr",
        "gnr" => "gnr",
        "zen1" => "zen1",
        "zen2" => "zen2",
        "zen3" => "zen3",
        "zen4" => "zen4",
        "zen5" => "zen5",
        other => panic!("unexpected dump {other}"),
    }
}

fn model(path: &Path) -> MachineModel {
    from_dump(&CpuidDump::load(path).unwrap(), &DetectOptions::default()).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cpuid").join(name)
}

#[test]
fn every_recorded_cpu_is_identified_by_its_model() {
    let Some(dir) = shared_cpuid() else { return };
    let all = dumps(&dir);
    assert!(all.len() >= 20, "expected the 20 recorded CPUs, found {}", all.len());
    for (short, path) in all {
        let m = model(&path);
        assert_eq!(m.microarchitecture, expected_platform(&short), "{short}: {:?}", m.warnings);
        assert_eq!(m.identified_by, IdentifiedBy::CpuidModel, "{short}");
    }
}

#[test]
fn every_recorded_cpu_is_identified_by_flags_when_the_model_is_masked() {
    let Some(dir) = shared_cpuid() else { return };
    for (short, path) in dumps(&dir) {
        let mut d = CpuidDump::load(&path).unwrap();
        for c in &mut d.cpus {
            c.mask_model(0xFE); // in no platform file
        }
        let m = from_dump(&d, &DetectOptions::default()).unwrap();
        let want = expected_platform(&short);
        assert_eq!(m.identified_by, IdentifiedBy::FeatureFlags, "{short}");
        assert!(
            m.microarchitecture == want || m.candidates.iter().any(|c| c == want),
            "{short}: got {} (candidates {:?}), want {want}",
            m.microarchitecture,
            m.candidates
        );
        if m.microarchitecture != want {
            // Only Rocket Lake may stay ambiguous: same flags and L2 as Ice Lake client.
            assert_eq!(short, "rkl", "{short} ambiguous: {:?}", m.warnings);
        }
    }
}

#[test]
fn granite_rapids_reported_as_rocket_lake_is_identified_by_flags() {
    let Some(dir) = shared_cpuid() else { return };
    let (_, path) = dumps(&dir).into_iter().find(|(s, _)| s == "gnr").expect("gnr dump");
    let mut d = CpuidDump::load(&path).unwrap();
    for c in &mut d.cpus {
        c.mask_model(0xA7);
    }
    let m = from_dump(&d, &DetectOptions::default()).unwrap();
    assert_eq!(m.model, 0xA7);
    assert_eq!(m.microarchitecture, "gnr");
    assert_eq!(m.identified_by, IdentifiedBy::FeatureFlags);
    assert!(m.candidates.is_empty(), "{:?}", m.candidates);
    assert!(
        m.warnings.iter().any(|w| w.contains("Rocket Lake") && w.contains("amx_tile")),
        "{:?}",
        m.warnings
    );
    // The same dump unmasked is GNR by model, and SPR's model on GNR's flags is rejected too.
    for c in &mut d.cpus {
        c.mask_model(0x8F);
    }
    let m = from_dump(&d, &DetectOptions::default()).unwrap();
    assert_eq!((m.microarchitecture.as_str(), m.identified_by), ("gnr", IdentifiedBy::FeatureFlags));
}

/// `L2 Unified Cache:     2 MB, 16-way Associative, 64-byte Line` → (level, bytes, ways, line).
fn aida_cache_summary(text: &str) -> Vec<(u32, u64, u32, u32)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if !(l.starts_with("L1    Data Cache:") || l.starts_with("L2 Unified Cache:") || l.starts_with("L3 Unified Cache:")) {
            continue;
        }
        let level: u32 = l[1..2].parse().unwrap();
        let rest = l.split_once(':').unwrap().1;
        let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
        let (n, unit) = parts[0].split_once(' ').unwrap();
        let size = n.parse::<u64>().unwrap() * if unit == "MB" { 1 << 20 } else { 1 << 10 };
        let ways = parts[1].split('-').next().unwrap().parse().unwrap();
        let line_b = parts[2].split('-').next().unwrap().parse().unwrap();
        if !out.iter().any(|c: &(u32, u64, u32, u32)| c.0 == level) {
            out.push((level, size, ways, line_b));
        }
    }
    out
}

#[test]
fn caches_from_cpuid_match_the_dumps_own_summary() {
    let Some(dir) = shared_cpuid() else { return };
    for (short, path) in dumps(&dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let want = aida_cache_summary(&text);
        assert_eq!(want.len(), 3, "{short}: summary lines");
        let m = model(&path);
        for (level, size, ways, line) in want {
            let c = m
                .caches
                .iter()
                .find(|c| c.level == level)
                .unwrap_or_else(|| panic!("{short}: no L{level}"));
            assert_eq!((c.size_bytes, c.ways, c.line_bytes), (size, ways, line), "{short} L{level}");
            assert_eq!(
                c.size_bytes,
                c.ways as u64 * c.sets as u64 * c.line_bytes as u64,
                "{short} L{level} sets"
            );
            assert_eq!(c.shared_by_source, "apic ids");
        }
    }
}

#[test]
fn topology_of_recorded_cpus() {
    let Some(dir) = shared_cpuid() else { return };
    // (sockets, cores, threads, smt) from the README and the CPUs' specifications.
    let cases = [
        ("skx", (2, 48, 96, true)),     // 2 × Platinum 8160 (24 cores)
        ("zen3", (2, 128, 128, false)), // 2 × EPYC 7763, SMT off
        ("zen4", (1, 16, 32, true)),    // EPYC 9124
        ("zen5", (1, 64, 64, false)),   // 64 of the 9655's cores, SMT off
        ("emr", (1, 56, 56, false)),    // SMT off
        ("adl", (1, 16, 24, true)),     // i9-12900K: 8 P-cores (SMT) + 8 E-cores
        ("snb", (1, 6, 12, true)),      // i7-3930K
    ];
    let all = dumps(&dir);
    for (short, want) in cases {
        let (_, path) = all.iter().find(|(s, _)| s == short).unwrap();
        let m = model(path);
        assert_eq!((m.sockets, m.cores, m.threads, m.smt), want, "{short}");
    }
    // Threads sharing one cache instance, from the recorded APIC IDs (CPUID's field is only
    // the addressable maximum, e.g. 128 for the L3 of a 48-thread GNR), and the instance
    // counts, against the parts' specifications: (L2 threads, L3 threads, L3 instances).
    let sharing = [
        ("skx", (2, 48, 2)),  // 24 cores × SMT per socket, one L3 per socket
        ("gnr", (2, 48, 1)),  // 24 cores × SMT, one package
        ("zen1", (2, 8, 8)),  // CCX of 4 cores × SMT, 8 CCX on the 32-core part
        ("zen2", (2, 6, 8)),  // 24-core Rome: 8 CCX of 3 cores × SMT
        ("zen3", (1, 8, 16)), // 2 × 7763, SMT off: CCD of 8 cores, 8 CCDs each
        ("zen4", (2, 8, 4)),  // 9124: 4 CCDs of 4 cores × SMT
        ("adl", (2, 24, 1)),  // first CPU a P-core (L2 per core, 2 threads); one L3
    ];
    for (short, (l2, l3, l3_instances)) in sharing {
        let (_, path) = all.iter().find(|(s, _)| s == short).unwrap();
        let m = model(path);
        let c = |level: u32| m.caches.iter().find(|c| c.level == level).unwrap().clone();
        assert_eq!(
            (c(2).shared_by_threads, c(3).shared_by_threads, c(3).instances),
            (l2, l3, Some(l3_instances)),
            "{short}"
        );
    }
    // ADL's L2 instances: 8 P-cores and 2 clusters of 4 E-cores.
    let (_, adl) = all.iter().find(|(s, _)| s == "adl").unwrap();
    assert_eq!(model(adl).caches.iter().find(|c| c.level == 2).unwrap().instances, Some(10));
    let m = model(adl);
    let kinds: Vec<(&str, usize)> = m.core_types.iter().map(|c| (c.kind.as_str(), c.cpus.len())).collect();
    assert_eq!(kinds, vec![("E", 8), ("P", 16)]);
    // A partial dump (EMR lists 56 of 112 logical CPUs) says so.
    let (_, emr) = all.iter().find(|(s, _)| s == "emr").unwrap();
    assert!(model(emr).warnings.iter().any(|w| w.contains("112 logical CPUs per package")));
}

#[test]
fn own_fixtures_identify_client_haswell_and_broadwell() {
    for (file, key, l3) in [("hsw_client.txt", "hsw", 8u64 << 20), ("bdw_client.txt", "bdw", 6 << 20)] {
        let m = model(&fixture(file));
        assert_eq!(
            (m.microarchitecture.as_str(), m.identified_by),
            (key, IdentifiedBy::CpuidModel),
            "{file}"
        );
        assert_eq!((m.sockets, m.cores, m.threads, m.smt), (1, 4, 8, true), "{file}");
        assert_eq!(m.caches.iter().find(|c| c.level == 3).unwrap().size_bytes, l3);
        // Masked model: flags and the L3 size still pick the client part.
        let mut d = CpuidDump::load(&fixture(file)).unwrap();
        d.cpus.iter_mut().for_each(|c| c.mask_model(0xFE));
        let m = from_dump(&d, &DetectOptions::default()).unwrap();
        assert_eq!(
            (m.microarchitecture.as_str(), m.identified_by),
            (key, IdentifiedBy::FeatureFlags),
            "{file}"
        );
        // Nominal clock from the brand string; Haswell has no leaf 0x16.
        assert_eq!(m.frequency_ghz.nominal_source.as_deref(), Some("brand string"));
    }
}

#[test]
fn own_fixture_granite_rapids_guest_reporting_rocket_lake() {
    let m = model(&fixture("gnr_as_rkl_guest.txt"));
    assert_eq!(m.model, 0xA7);
    assert_eq!((m.microarchitecture.as_str(), m.identified_by), ("gnr", IdentifiedBy::FeatureFlags));
    assert!(m.isa.iter().any(|i| i == "avx10.1") && m.isa.iter().any(|i| i == "amx_fp16"));
    // Two 512-bit FMA pipes: 8 lanes × 2 pipes × 2 flops per core per cycle, no clock known → null.
    assert_eq!(m.fp_pipes["512"].fma, 2);
    assert_eq!(m.peak_gflops.double.avx512, None);
}

#[test]
fn every_platform_file_is_identified_from_recorded_cpuid_values() {
    let mut seen: std::collections::BTreeSet<String> = ["hsw_client.txt", "bdw_client.txt", "gnr_as_rkl_guest.txt"]
        .iter()
        .map(|f| model(&fixture(f)).microarchitecture)
        .collect();
    let Some(dir) = shared_cpuid() else { return };
    for (_, path) in dumps(&dir) {
        seen.insert(model(&path).microarchitecture);
    }
    for p in Platform::embedded() {
        assert!(seen.contains(&p.key), "no recorded CPU identifies as {}", p.key);
    }
}

#[test]
fn peaks_follow_the_platform_table_at_the_given_clock() {
    let Some(dir) = shared_cpuid() else { return };
    let opts = DetectOptions {
        frequency_ghz: Some(2.0),
        ..Default::default()
    };
    for (short, path) in dumps(&dir) {
        let m = from_dump(&CpuidDump::load(&path).unwrap(), &opts).unwrap();
        let per_core_512 = m.peak_gflops_per_core.double.avx512;
        match expected_platform(&short) {
            // Two 512-bit FMA units: 8 lanes × 2 × 2 flops × 2 GHz.
            "skx" | "icx" | "spr" | "gnr" => assert_eq!(per_core_512, Some(64.0), "{short}"),
            // Zen 4: one (double-pumped) 512-bit FMA + one add: 8 × (2 + 1) × 2 GHz.
            "zen4" => assert_eq!(per_core_512, Some(48.0), "{short}"),
            "snb" | "ivb" | "hsx" | "bdx" | "skl" | "adl" | "zen1" | "zen2" | "zen3" => assert_eq!(per_core_512, None, "{short}"),
            _ => {}
        }
        if short == "adl" {
            // i9-12900K: 8 Golden Cove P-cores, 256-bit: 4 lanes × (2·2 FMA + 1 add) = 20
            // flop/cycle; 8 Gracemont E-cores: one 256-bit FMA = 8 flop/cycle. At 2 GHz:
            // (8·20 + 8·8) × 2 = 448, not 16 × 40 = 640 as if every core were a P-core.
            assert_eq!(m.peak_gflops_per_core.double.avx2, Some(40.0));
            assert_eq!(m.peak_gflops.double.avx2, Some(448.0));
            // scalar: P 2·2+1 = 5, E 2·2 = 4 flop/cycle → (8·5 + 8·4) × 2 = 144.
            assert_eq!(m.peak_gflops.double.scalar, Some(144.0));
        } else {
            assert_eq!(
                m.peak_gflops.double.avx2,
                m.peak_gflops_per_core.double.avx2.map(|p| p * m.cores as f64),
                "{short}"
            );
        }
        assert_eq!(m.peak_gflops.single.scalar, m.peak_gflops.double.scalar.map(|p| 2.0 * p), "{short}");
    }
}

/// Every mixed-precision unit a recorded CPU has (its CPUID flag: AVX-512 BF16, AVX-512 VNNI,
/// AVX-VNNI, AVX-512 FP16, AMX) is either rated by its platform table or named in the table's
/// `[mixed_unrated]` with why — a table that gains a CPU with such a unit and does neither
/// fails here — and the dump's machine model carries the rate (peaks at a given clock, per
/// core and all cores) or the reason, never a unit the CPU lacks.
#[test]
fn every_recorded_mixed_precision_unit_is_rated_or_says_why_not() {
    use roofline::__private::machine::CpuidFacts;
    use roofline::__private::machine::MIXED_UNITS;
    let Some(dir) = shared_cpuid() else { return };
    let ghz = 1.5 + f64::from(std::process::id() % 200) / 100.0;
    let opts = DetectOptions {
        frequency_ghz: Some(ghz),
        ..Default::default()
    };
    let mut rated = Vec::new();
    let mut unrated = Vec::new();
    for (short, path) in dumps(&dir) {
        let d = CpuidDump::load(&path).unwrap();
        let facts = CpuidFacts::read(&d.cpus[0]);
        let m = from_dump(&d, &opts).unwrap();
        let table = Platform::load(&m.microarchitecture).unwrap();
        for (unit, flag) in MIXED_UNITS {
            if !facts.has(flag) {
                assert!(!m.mixed_ops_per_cycle.contains_key(unit), "{short}: {unit} without {flag}");
                assert!(!m.mixed_unrated.contains_key(unit), "{short}: {unit} without {flag}");
                continue;
            }
            match (table.mixed_ops_per_cycle.get(unit), table.mixed_unrated.get(unit)) {
                (Some(&ops), None) => {
                    assert_eq!(m.mixed_ops_per_cycle.get(unit), Some(&ops), "{short}: {unit}");
                    let per_core = m.peak_mixed_per_core[unit];
                    assert!((per_core - ops * ghz).abs() < 1e-6 * per_core, "{short}: {unit} {per_core}");
                    let all = m.peak_mixed[unit];
                    assert!((all - per_core * f64::from(m.cores)).abs() < 1e-6 * all, "{short}: {unit} {all}");
                    rated.push(format!("{short}:{unit}"));
                }
                (None, Some(why)) => {
                    assert_eq!(m.mixed_unrated.get(unit), Some(why), "{short}: {unit}");
                    assert!(!m.peak_mixed.contains_key(unit), "{short}: {unit} unrated but has a peak");
                    unrated.push(format!("{short}:{unit}"));
                }
                _ => panic!(
                    "{short}: the CPU has {flag}, but platforms/{}.toml neither rates {unit} in [mixed_ops_per_cycle] nor says why not in [mixed_unrated]",
                    m.microarchitecture
                ),
            }
        }
    }
    // The recorded Zen 4 (EPYC 9124) and Zen 5 (EPYC 9655) have AVX-512 BF16 and VNNI, rated.
    for unit in ["zen4:bf16.avx512", "zen4:int8.avx512", "zen5:bf16.avx512", "zen5:int8.avx2"] {
        assert!(rated.iter().any(|r| r == unit), "{unit} not rated: {rated:?}");
    }
    assert!(!unrated.is_empty(), "Granite Rapids' AMX-FP16 at least is unrated: {unrated:?}");
}
