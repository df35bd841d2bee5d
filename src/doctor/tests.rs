use super::*;

/// Which events a fake kernel refuses, and with what.
type Refusal = Box<dyn Fn(&CounterSpec) -> Option<Errno>>;

/// A probe whose answers the test chooses.
struct Fake {
    refuse: Refusal,
    trace: Result<(), String>,
}

impl Probe for Fake {
    fn open(&self, spec: &CounterSpec) -> Result<(), Errno> {
        (self.refuse)(spec).map_or(Ok(()), Err)
    }
    fn trace(&self) -> Result<(), String> {
        self.trace.clone()
    }
    /// A memory PMU that counts: one event per 64-byte line, split read/write.
    fn count_dram_traffic(&self, spec: &CounterSpec, bytes: usize) -> Result<u64, Errno> {
        self.open(spec)?;
        Ok((bytes / 128) as u64)
    }
}

fn opens_all() -> Fake {
    Fake {
        refuse: Box::new(|_| None),
        trace: Ok(()),
    }
}

/// A root laid out like `/` with these files.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn pmu(name: &str, type_: u32) -> (String, String) {
    (format!("{PMUS}/{name}/type"), format!("{type_}\n"))
}

/// A Skylake-SP server with two iMC instances; `extra` files added or replacing.
fn server(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files: Vec<(String, String)> = vec![
        pmu("cpu", 4),
        pmu("software", 1),
        pmu("uncore_imc_0", 13),
        pmu("uncore_imc_1", 14),
        (format!("{PMUS}/uncore_imc_0/cpumask"), "0\n".into()),
        (format!("{PMUS}/uncore_imc_1/cpumask"), "0\n".into()),
        (format!("{PMUS}/cpu/rdpmc"), "1\n".into()),
        ("proc/sys/kernel/perf_event_paranoid".into(), "0\n".into()),
        ("proc/sys/kernel/nmi_watchdog".into(), "0\n".into()),
        ("proc/sys/kernel/yama/ptrace_scope".into(), "1\n".into()),
        (
            "proc/self/status".into(),
            "Name:\troofline\nCapEff:\t0000000000000000\nSeccomp:\t0\n".into(),
        ),
    ];
    for (k, v) in extra {
        files.retain(|(f, _)| f != k);
        files.push((k.to_string(), v.to_string()));
    }
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    tree(&refs)
}

fn diagnose_with(root: &Path, platform: Option<&str>, probe: &dyn Probe) -> Diagnosis {
    diagnose(&Inputs {
        root: root.to_path_buf(),
        path: vec![],
        platform: platform.map(|k| Platform::load(k).unwrap()),
        platform_from_option: false,
        hypervisor: None,
        probe,
        simulated: None,
    })
}

fn verdict(d: &Diagnosis, name: &str) -> Verdict {
    d.get(name).unwrap_or_else(|| panic!("no {name} in {:?}", d.capabilities)).verdict
}

/// A pseudo-random index below `n`, so each run injects its fault somewhere else.
fn pick(n: usize) -> usize {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    (t.subsec_nanos() as usize / 7) % n
}

#[test]
fn a_server_with_a_pmu_and_imc_has_everything() {
    let root = server(&[]);
    let d = diagnose_with(root.path(), Some("skx"), &opens_all());
    for name in [
        "platform",
        "perf.software",
        "perf.core",
        "perf.uncore.uncore_imc",
        "perf.rdpmc",
        "perf.nmi_watchdog",
        "trace",
    ] {
        assert_eq!(verdict(&d, name), Verdict::Available, "{name}: {:?}", d.get(name));
    }
    assert_eq!(verdict(&d, "gpu"), Verdict::Unavailable);
    assert_eq!(d.auto_backend, "perf");
    let skx = Platform::load("skx").unwrap();
    assert_eq!(d.events.len(), skx.events.len());
    assert!(d.events.iter().all(|t| t.outcome == Outcome::Opened), "{:?}", d.events);
    // Uncore events are tried on their first instance, with the instance's type.
    let imc: Vec<&EventTrial> = d.events.iter().filter(|t| t.pmu.starts_with("uncore_imc")).collect();
    assert_eq!(imc.len(), skx.events.iter().filter(|e| e.pmu == "uncore_imc").count());
    assert!(imc.iter().all(|t| t.pmu == "uncore_imc_0" && t.type_ == Some(13)), "{imc:?}");
    // The generic cycles event keeps PERF_TYPE_HARDWARE, as measure opens it.
    let cycles = d.events.iter().find(|t| t.event == "CPU_CLK_UNHALTED.THREAD").unwrap();
    assert_eq!((cycles.type_, cycles.config.as_deref()), (Some(0), Some("0x0")));
    // The JSON round-trips with the documented names.
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["schema"], DOCTOR_SCHEMA);
    assert_eq!(v["events"][0]["outcome"], "opened");
    assert!(v["events"][0].get("type").is_some());
    assert_eq!(serde_json::from_value::<Diagnosis>(v).unwrap(), d);
}

#[test]
fn an_injected_errno_is_named_and_limits_the_core_verdict() {
    let skx = Platform::load("skx").unwrap();
    let core: Vec<&str> = skx.events.iter().filter(|e| e.pmu == "cpu").map(|e| e.name.as_str()).collect();
    let victim = core[pick(core.len())].to_string();
    let errno = [Errno::ENOENT, Errno::EINVAL, Errno::EOPNOTSUPP][pick(3)];
    let root = server(&[]);
    // The kernel refuses an encoding, whatever the event is called: refuse the victim's.
    let all = diagnose_with(root.path(), Some("skx"), &opens_all());
    let t = all.events.iter().find(|t| t.event == victim).unwrap();
    let attr = (t.type_.unwrap(), t.config.clone().unwrap());
    let probe = Fake {
        refuse: Box::new(move |s| (s.type_ == attr.0 && format!("{:#x}", s.config) == attr.1).then_some(errno)),
        trace: Ok(()),
    };
    let d = diagnose_with(root.path(), Some("skx"), &probe);
    let t = d.events.iter().find(|t| t.event == victim).unwrap();
    assert_eq!(t.outcome, Outcome::Failed);
    assert_eq!(t.errno.as_deref(), Some(format!("{errno:?}").as_str()));
    assert_eq!(t.message.as_deref(), Some(errno.desc()));
    let c = d.get("perf.core").unwrap();
    if victim == "CPU_CLK_UNHALTED.THREAD" {
        // The cycles event itself: opened once more as the generic event, refused again.
        assert_eq!(c.verdict, Verdict::Unavailable, "{c:?}");
    } else {
        assert_eq!(c.verdict, Verdict::Limited, "{c:?}");
        assert!(c.cause.contains(&format!("{victim} ({errno:?})")), "{c:?}");
        assert!(c.fix.as_deref().unwrap().contains("--platform"), "{c:?}");
    }
    let opened = d.events.iter().filter(|t| t.outcome == Outcome::Opened).count();
    assert_eq!(opened, skx.events.len() - 1);
}

#[test]
fn paranoid_3_refuses_everything_and_says_which_sysctl() {
    let root = server(&[("proc/sys/kernel/perf_event_paranoid", "3\n")]);
    let probe = Fake {
        refuse: Box::new(|_| Some(Errno::EACCES)),
        trace: Ok(()),
    };
    let d = diagnose_with(root.path(), Some("skx"), &probe);
    for name in ["perf.software", "perf.core", "perf.uncore.uncore_imc"] {
        let c = d.get(name).unwrap();
        assert_eq!(c.verdict, Verdict::Unavailable, "{c:?}");
        assert!(c.cause.contains("perf_event_paranoid is 3"), "{c:?}");
        assert!(c.fix.as_deref().unwrap().contains("sysctl kernel.perf_event_paranoid="), "{c:?}");
    }
    assert!(d.events.iter().all(|t| t.errno.as_deref() == Some("EACCES")));
    assert_eq!(d.auto_backend, "trace");
    // CAP_PERFMON (bit 38) lifts the paranoid level: the same refusal is then not blamed on it.
    let root = server(&[
        ("proc/sys/kernel/perf_event_paranoid", "3\n"),
        ("proc/self/status", "CapEff:\t0000004000000000\nSeccomp:\t0\n"),
    ]);
    let d = diagnose_with(root.path(), Some("skx"), &probe);
    let c = d.get("perf.software").unwrap();
    assert!(!c.cause.contains("perf_event_paranoid is 3"), "{c:?}");
    assert!(c.cause.contains("CAP_PERFMON held"), "{c:?}");
}

#[test]
fn paranoid_1_keeps_core_events_but_not_system_wide_uncore() {
    let root = server(&[("proc/sys/kernel/perf_event_paranoid", "1\n")]);
    let probe = Fake {
        refuse: Box::new(|s| matches!(s.scope, Scope::Uncore { .. }).then_some(Errno::EACCES)),
        trace: Ok(()),
    };
    let d = diagnose_with(root.path(), Some("skx"), &probe);
    assert_eq!(verdict(&d, "perf.core"), Verdict::Available);
    let u = d.get("perf.uncore.uncore_imc").unwrap();
    assert_eq!(u.verdict, Verdict::Unavailable, "{u:?}");
    assert!(u.cause.contains("perf_event_paranoid is 1: system-wide events need 0"), "{u:?}");
}

#[test]
fn a_vm_without_pmu_points_at_the_vpmu_and_trace() {
    let root = tree(&[
        (&format!("{PMUS}/software/type"), "1\n"),
        (&format!("{PMUS}/msr/type"), "9\n"),
        ("proc/sys/kernel/perf_event_paranoid", "2\n"),
    ]);
    let probe = Fake {
        // What a kernel without a core PMU answers for hardware and raw events.
        refuse: Box::new(|s| (s.type_ == PERF_TYPE_HARDWARE || s.type_ == PERF_TYPE_RAW).then_some(Errno::ENOENT)),
        trace: Ok(()),
    };
    let d = diagnose(&Inputs {
        root: root.path().to_path_buf(),
        path: vec![],
        platform: Some(Platform::load("zen4").unwrap()),
        platform_from_option: true,
        hypervisor: Some("KVM".into()),
        probe: &probe,
        simulated: None,
    });
    assert_eq!(verdict(&d, "perf.software"), Verdict::Available);
    let c = d.get("perf.core").unwrap();
    assert_eq!(c.verdict, Verdict::Unavailable);
    assert!(c.cause.contains("[msr, software]"), "{c:?}");
    assert!(c.fix.as_deref().unwrap().contains("pmu=on"), "{c:?}");
    assert!(c.fix.as_deref().unwrap().contains("--backend trace"), "{c:?}");
    let u = d.get("perf.uncore.amd_umc").unwrap();
    assert_eq!(u.verdict, Verdict::Unavailable);
    assert!(u.fix.as_deref().unwrap().contains("bare metal"), "{u:?}");
    assert_eq!(verdict(&d, "perf.rdpmc"), Verdict::Unavailable);
    assert_eq!(d.platform_source.as_deref(), Some("--platform"));
    assert_eq!(d.auto_backend, "trace");
    for t in &d.events {
        if t.pmu == "cpu" {
            assert_eq!((t.outcome, t.errno.as_deref()), (Outcome::Failed, Some("ENOENT")), "{t:?}");
        } else {
            assert_eq!(t.outcome, Outcome::NotTried, "{t:?}");
            assert!(t.message.as_deref().unwrap().contains("amd_umc not present"), "{t:?}");
        }
    }
}

#[test]
fn watchdog_and_rdpmc_settings_limit_with_their_fix() {
    let root = server(&[("proc/sys/kernel/nmi_watchdog", "1\n"), (&format!("{PMUS}/cpu/rdpmc"), "0\n")]);
    let d = diagnose_with(root.path(), Some("skx"), &opens_all());
    let w = d.get("perf.nmi_watchdog").unwrap();
    assert_eq!(w.verdict, Verdict::Limited);
    assert!(w.cause.contains("fixed cycles counter"), "{w:?}");
    assert!(w.fix.as_deref().unwrap().contains("kernel.nmi_watchdog=0"), "{w:?}");
    let r = d.get("perf.rdpmc").unwrap();
    assert_eq!(r.verdict, Verdict::Limited);
    assert!(r.fix.as_deref().unwrap().contains("/rdpmc"), "{r:?}");
    // AMD: the watchdog takes a general-purpose counter.
    let d = diagnose_with(root.path(), Some("zen4"), &opens_all());
    assert!(d.get("perf.nmi_watchdog").unwrap().cause.contains("general-purpose counter"));
}

#[test]
fn ptrace_refusals_are_explained_by_their_cause() {
    let refused = || Fake {
        refuse: Box::new(|_| None),
        trace: Err("ptrace is not permitted here (Operation not permitted)".into()),
    };
    // (files, expected cause, expected fix)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: [Case; 4] = [
        (&[("proc/sys/kernel/yama/ptrace_scope", "3\n")], "ptrace_scope is 3", "reboot"),
        (
            &[("proc/sys/kernel/yama/ptrace_scope", "2\n")],
            "ptrace_scope is 2",
            "cap_sys_ptrace",
        ),
        (
            &[("proc/self/status", "CapEff:\t00000000a80425fb\nSeccomp:\t2\n"), (".dockerenv", "")],
            "seccomp filter refuses ptrace (the container",
            "--cap-add SYS_PTRACE",
        ),
        (
            &[("proc/self/status", "CapEff:\t00000000a80425fb\nSeccomp:\t0\n"), (".dockerenv", "")],
            "container without CAP_SYS_PTRACE",
            "--cap-add SYS_PTRACE",
        ),
    ];
    for (files, cause, fix) in cases {
        let root = server(files);
        let d = diagnose_with(root.path(), Some("skx"), &refused());
        let t = d.get("trace").unwrap();
        assert_eq!(t.verdict, Verdict::Unavailable, "{t:?}");
        assert!(t.cause.contains(cause), "{cause}: {t:?}");
        assert!(t.fix.as_deref().unwrap().contains(fix), "{fix}: {t:?}");
    }
    // Scope 2 with CAP_SYS_PTRACE (bit 19) traces fine.
    let root = server(&[
        ("proc/sys/kernel/yama/ptrace_scope", "2\n"),
        ("proc/self/status", "CapEff:\t0000000000080000\nSeccomp:\t0\n"),
    ]);
    let d = diagnose_with(root.path(), Some("skx"), &opens_all());
    let t = d.get("trace").unwrap();
    assert_eq!(t.verdict, Verdict::Available);
    assert!(
        t.cause.contains("ptrace_scope 2") && t.cause.contains("CAP_SYS_PTRACE held"),
        "{t:?}"
    );
}

#[test]
fn gpu_driver_ncu_and_counter_permission() {
    let params = "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n";
    let root = server(&[
        ("proc/driver/nvidia/gpus/0000:01:00.0/information", "Model: H100\n"),
        ("proc/driver/nvidia/params", params),
        ("opt/cuda/bin/ncu", "#!/bin/sh\n"),
    ]);
    let probe = opens_all();
    let inputs = |path: Vec<PathBuf>| Inputs {
        root: root.path().to_path_buf(),
        path,
        platform: None,
        platform_from_option: false,
        hypervisor: None,
        probe: &probe,
        simulated: None,
    };
    let g = diagnose(&inputs(vec![])).get("gpu").unwrap().clone();
    assert_eq!(g.verdict, Verdict::Limited);
    assert!(
        g.cause.contains("1 GPU(s)") && g.cause.contains("ncu") && g.cause.contains("ERR_NVGPUCTRPERM"),
        "{g:?}"
    );
    assert!(g.fix.as_deref().unwrap().contains("NVreg_RestrictProfilingToAdminUsers=0"), "{g:?}");
    let d = diagnose(&inputs(vec![root.path().join("opt/cuda/bin")]));
    let g = d.get("gpu").unwrap();
    assert_eq!(g.verdict, Verdict::Limited);
    assert!(!g.cause.contains("not on PATH"), "{g:?}");
    // Counters open to all users: nothing missing.
    std::fs::write(root.path().join("proc/driver/nvidia/params"), params.replace("Only: 1", "Only: 0")).unwrap();
    let d = diagnose(&inputs(vec![root.path().join("opt/cuda/bin")]));
    assert_eq!(verdict(&d, "gpu"), Verdict::Available);
    // No platform table: the platform and core verdicts say so and point at --platform.
    assert_eq!(verdict(&d, "platform"), Verdict::Limited);
    let c = d.get("perf.core").unwrap();
    assert_eq!(c.verdict, Verdict::Limited);
    assert!(c.fix.as_deref().unwrap().contains("--platform"));
    assert!(d.events.is_empty());
}

/// The simulated machine of every platform table resolves every event as a machine with
/// that PMU would (aliases included), and an uncore whose DRAM events read 0 is unavailable.
#[test]
fn every_platform_simulated_opens_its_events_and_a_zero_uncore_is_unavailable() {
    use crate::counters::simulated::Faults;
    for platform in Platform::embedded() {
        let root = tempfile::tempdir().unwrap();
        let pmu = SimulatedPmu::new(platform.clone(), Faults::default());
        let probe = SimulatedProbe { pmu: pmu.clone() };
        let d = diagnose(&Inputs::simulated(&pmu, true, root.path(), &probe).unwrap());
        let key = &platform.key;
        assert_eq!(d.events.len(), platform.events.len(), "{key}");
        let not_opened: Vec<&EventTrial> = d.events.iter().filter(|t| t.outcome != Outcome::Opened).collect();
        assert!(not_opened.is_empty(), "{key}: {not_opened:?}");
        assert!(d.simulated_pmu.as_deref().unwrap().contains(key.as_str()), "{key}");
        for c in d.capabilities.iter().filter(|c| c.name.starts_with("perf.uncore.")) {
            assert_eq!(c.verdict, Verdict::Available, "{key}: {c:?}");
        }
        let has_dram = platform
            .events
            .iter()
            .any(|e| !crate::counters::events::is_core_pmu(&e.pmu) && e.quantity.starts_with("bytes.dram"));
        if has_dram {
            let root = tempfile::tempdir().unwrap();
            let pmu = SimulatedPmu::new(platform.clone(), Faults::parse("dram=zero").unwrap());
            let probe = SimulatedProbe { pmu: pmu.clone() };
            let d = diagnose(&Inputs::simulated(&pmu, true, root.path(), &probe).unwrap());
            let zero: Vec<&Capability> = d
                .capabilities
                .iter()
                .filter(|c| c.name.starts_with("perf.uncore.") && c.cause.contains("read 0"))
                .collect();
            assert!(!zero.is_empty(), "{key}: {:?}", d.capabilities);
            assert!(zero.iter().all(|c| c.verdict == Verdict::Unavailable), "{key}: {zero:?}");
        }
    }
}

#[test]
fn pmu_families_drop_the_instance_number() {
    assert_eq!(family_of("uncore_imc_3"), "uncore_imc");
    assert_eq!(family_of("amd_df"), "amd_df");
    assert_eq!(family_of("uncore_imc_free_running_0"), "uncore_imc_free_running");
    assert_eq!(family_of("amd_umc_11"), "amd_umc");
}
