//! A platform table's events as counters on this machine: the `perf_event_attr` encoding of
//! each event (raw, generic hardware event or sysfs alias), uncore events per PMU instance, the
//! counters one logical CPU has, the NMI watchdog's claim on one, and the software events.

use std::path::Path;

use super::{
    CounterSpec, FIXED_COUNTER_BASE, PERF_TYPE_HARDWARE, Scope, can_open, core_pmu, parse_cpu_list, pmu_instances, pmu_type,
    split_perf_name, sysfs_alias_config,
};
use crate::error::{Error, Result};
use crate::machine::{EventSpec, Platform};

/// `perf_event_attr.config` of a programmable event: the layout of IA32_PERFEVTSELx and
/// AMD's PERF_CTLx (AMD's event select bits 8–11 live at bits 32–35, "extended event"), and
/// for `amd_umc` the read/write filter at bits 8–9 (its sysfs format `rdwrmask: config:8-9`;
/// UMC events have no umask).
pub fn raw_config(e: &EventSpec) -> u64 {
    (e.event & 0xff)
        | (((e.event >> 8) & 0xf) << 32)
        | ((e.umask & 0xff) << 8)
        | ((e.rdwrmask & 0x3) << 8)
        | (u64::from(e.edge) << 18)
        | (u64::from(e.inv) << 23)
        | ((e.cmask & 0xff) << 24)
}

/// perf's generic hardware event names (`perf list hw`) → `PERF_COUNT_HW_*`.
pub fn generic_hw_event(name: &str) -> Option<u64> {
    Some(match name {
        "cpu-cycles" | "cycles" => 0,
        "instructions" => 1,
        "cache-references" => 2,
        "cache-misses" => 3,
        "branch-instructions" | "branches" => 4,
        "branch-misses" => 5,
        "bus-cycles" => 6,
        "stalled-cycles-frontend" | "idle-cycles-frontend" => 7,
        "stalled-cycles-backend" | "idle-cycles-backend" => 8,
        "ref-cycles" => 9,
        _ => return None,
    })
}

/// Quantity of the hybrid parts' E-core cycles (`cpu_atom/cycles`): no W is counted there.
pub const ECORE_CYCLES: &str = "cycles.ecore";

/// Turn a platform's events into counters for this machine: core events on the core PMU,
/// uncore events once per instance, on the CPUs of its `cpumask`. Missing optional PMUs are
/// skipped with a note; `optional` events only when `with_optional`.
pub fn resolve_platform_events(
    platform: &Platform,
    pmus: &Path,
    with_optional: bool,
    with_uncore: bool,
) -> Result<(Vec<CounterSpec>, Vec<String>)> {
    let core = core_pmu(pmus)?;
    let core_type = pmu_type(pmus, &core)?;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for e in platform.events.iter().filter(|e| with_optional || !e.optional) {
        let spec = |name: String, pmu: &str, type_: u32, config: [u64; 2], scope: Scope| {
            CounterSpec::for_event(e, name, pmu, type_, config, scope)
        };
        // An event perf knows by name is opened as perf opens it: a generic hardware event
        // (the kernel picks this core's encoding and counter, e.g. Intel's fixed counters),
        // or the PMU's own sysfs alias (the client iMC's free-running counters).
        let alias = e.perf_name.as_deref().and_then(split_perf_name).map(|(_, term)| term);
        if e.pmu == "cpu" || e.pmu == "cpu_core" {
            match alias.map(|a| (a, generic_hw_event(a))) {
                Some((_, Some(id))) => {
                    // Hybrid parts take the PMU's type in config bits 32–63 (PERF_PMU_TYPE_SHIFT).
                    let ext = if core == "cpu" { 0 } else { u64::from(core_type) << 32 };
                    out.push(spec(e.name.clone(), &core, PERF_TYPE_HARDWARE, [id | ext, 0], Scope::Core));
                }
                Some((a, None)) => match alias_config(pmus, &core, a, e, &mut notes) {
                    Some(c) => out.push(spec(e.name.clone(), &core, core_type, c, Scope::Core)),
                    None => continue,
                },
                None => out.push(spec(e.name.clone(), &core, core_type, [raw_config(e), e.config1], Scope::Core)),
            }
            continue;
        }
        if !with_uncore {
            continue;
        }
        let instances = pmu_instances(pmus, &e.pmu);
        if instances.is_empty() {
            notes.push(format!(
                "{}: PMU {} not present on this machine; {} not counted",
                e.name, e.pmu, e.quantity
            ));
            continue;
        }
        for inst in instances {
            let type_ = pmu_type(pmus, &inst)?;
            let config = match alias {
                Some(a) => match alias_config(pmus, &inst, a, e, &mut notes) {
                    Some(c) => c,
                    None => continue,
                },
                None => [raw_config(e), e.config1],
            };
            let mask = std::fs::read_to_string(pmus.join(&inst).join("cpumask")).unwrap_or_else(|_| "0".into());
            let cpus = parse_cpu_list(&mask).filter(|c| !c.is_empty()).unwrap_or_else(|| vec![0]);
            out.push(spec(format!("{inst}/{}", e.name), &inst, type_, config, Scope::Uncore { cpus }));
        }
    }
    if core == "cpu_core" {
        // E-cores have no FP_ARITH event: count their cycles, so the report can say whether
        // (and how much of) the work ran where W is not counted, instead of always warning.
        match pmu_type(pmus, "cpu_atom") {
            Ok(atom) => {
                out.push(CounterSpec {
                    name: "cpu_atom/cycles".into(),
                    pmu: "cpu_atom".into(),
                    type_: PERF_TYPE_HARDWARE,
                    config: u64::from(atom) << 32,
                    config1: 0,
                    scope: Scope::Core,
                    counters: None,
                    paired: false,
                    quantity: ECORE_CYCLES.into(),
                    class: None,
                    weight: 1.0,
                    unreliable: false,
                    caveat: None,
                    part_of: None,
                });
                notes.push(
                    "hybrid CPU: core events count on the P-cores (cpu_core) only; E-core cycles are counted to tell whether W is partial".into(),
                );
            }
            Err(_) => notes.push(
                "hybrid CPU: core events count on the P-cores (cpu_core) only; W is partial for any part of the command that ran on E-cores, which have no FP_ARITH event (pin with taskset, or use --backend trace)".into(),
            ),
        }
    }
    if !out.iter().any(|c| c.quantity == "flops") {
        notes.push(format!(
            "platform {} has no FP operation event: W is not counted (use --backend trace for W)",
            platform.key
        ));
    }
    if out.iter().all(|c| c.scope != Scope::Core) {
        return Err(Error::unavailable(
            format!("platform {} lists no core events for the perf backend", platform.key),
            "pass `--platform` with a file that has [[events]], or use `--backend trace`",
        ));
    }
    Ok((out, notes))
}

/// Everything a perf measurement of `platform` counts here: its events resolved against
/// `pmus` (`resolve_platform_events`), cycles when the table has none, the software
/// events, and the NMI watchdog's claim on the fixed cycles counter when `watchdog`. The
/// notes say what will not be counted and why (missing PMUs, what the platform cannot
/// count, e.g. Zen 1's "Q_dram unavailable").
pub fn counters_for_platform(
    platform: &Platform,
    pmus: &Path,
    with_optional: bool,
    with_uncore: bool,
    watchdog: bool,
) -> Result<(Vec<CounterSpec>, Vec<String>)> {
    let (mut specs, mut notes) = resolve_platform_events(platform, pmus, with_optional, with_uncore)?;
    notes.extend(crate::counters::events::platform_notes(platform));
    if !specs.iter().any(|s| s.quantity == "cycles") {
        specs.push(CounterSpec::cycles());
    }
    notes.extend(yield_fixed_cycles_to_watchdog(&mut specs, watchdog));
    specs.extend(software_events(pmus, false));
    Ok((specs, notes))
}

/// `[config, config1]` of event `e` through the sysfs alias `alias` of PMU `pmu`; `None`
/// (with a note) when this kernel lacks the alias or it needs more than config and config1.
fn alias_config(pmus: &Path, pmu: &str, alias: &str, e: &EventSpec, notes: &mut Vec<String>) -> Option<[u64; 2]> {
    match sysfs_alias_config(&pmus.join(pmu), alias) {
        Ok([c, c1, 0]) => Some([c, c1]),
        Ok(_) => {
            notes.push(format!(
                "{}: {pmu}/{alias}/ needs config2, which roofline does not set; {} not counted",
                e.name, e.quantity
            ));
            None
        }
        Err(err) => {
            let why = err.to_string();
            notes.push(format!(
                "{}: no usable event alias {pmu}/{alias}/ on this kernel ({}); {} not counted",
                e.name,
                why.lines().next().unwrap_or_default(),
                e.quantity
            ));
            None
        }
    }
}

/// This CPU's platform table, for the perf path (events, counters): the one identification
/// every command uses ([`crate::machine::this_platform`]: `--platform` first, then the CPUID
/// model confirmed by the feature flags, else flags and cache sizes). Until 2026-11-26 this
/// matched the raw family/model alone, so the region API's sessions ignored `--platform`,
/// trusted a hypervisor's wrong model (a Granite Rapids guest reporting Rocket Lake's would
/// have been given Tiger Lake's events) and once misread Intel's extended model.
pub fn identify_platform() -> Option<Platform> {
    crate::machine::this_platform()
}

/// General-purpose counters available to one logical CPU on this platform (SMT halves
/// them on Intel, the NMI watchdog holds one on AMD); 4 when the platform does not say.
pub fn core_counters(p: &Platform) -> u32 {
    let smt = std::fs::read_to_string("/sys/devices/system/cpu/smt/active")
        .map(|s| s.trim() == "1")
        .unwrap_or(true);
    core_counters_for(p, smt, nmi_watchdog_on())
}

/// `core_counters` for a given SMT and NMI-watchdog state.
pub fn core_counters_for(p: &Platform, smt: bool, watchdog: bool) -> u32 {
    let n = if smt {
        p.core_counters
    } else {
        p.core_counters_smt_off.or(p.core_counters)
    }
    .unwrap_or(4);
    // AMD has no fixed counters: the watchdog's pinned cycles event takes a general one.
    let amd = p.identify.vendor == "AuthenticAMD";
    n - u32::from(amd && watchdog && n > 1)
}

const NMI_WATCHDOG: &str = "/proc/sys/kernel/nmi_watchdog";

/// Whether the kernel's hard-lockup detector is on: a pinned cycles event on every CPU
/// (Intel's fixed counter 1, or a general-purpose counter on AMD).
pub fn nmi_watchdog_on() -> bool {
    std::fs::read_to_string(NMI_WATCHDOG).is_ok_and(|s| s.trim() != "0")
}

/// With the NMI watchdog on, Intel's fixed cycles counter (index 33) is taken: the kernel
/// puts our generic `cycles` on a general-purpose counter instead, so plan it as one (a
/// group planned on the fixed counter would never be scheduled). Returns a note when so.
pub fn yield_fixed_cycles_to_watchdog(specs: &mut [CounterSpec], watchdog: bool) -> Option<String> {
    if !watchdog {
        return None;
    }
    let mut moved = Vec::new();
    for s in specs.iter_mut() {
        let cycles = s.type_ == PERF_TYPE_HARDWARE && s.config & 0xffff_ffff == 0;
        if cycles && s.counters.as_deref() == Some(&[FIXED_COUNTER_BASE + 1]) {
            s.counters = None;
            moved.push(s.name.clone());
        }
    }
    (!moved.is_empty()).then(|| {
        format!(
            "the NMI watchdog holds the fixed cycles counter: {} takes a general-purpose counter (`sudo sysctl kernel.nmi_watchdog=0` frees it)",
            moved.join(", ")
        )
    })
}

/// The software events every perf measurement adds (and the whole list with `--events
/// software`). `msr/tsc` is added when `with_msr` and the kernel lets this user open it
/// (it needs kernel-level counting, refused at perf_event_paranoid 2).
pub fn software_events(pmus: &Path, with_msr: bool) -> Vec<CounterSpec> {
    let mut v: Vec<CounterSpec> = ["task-clock", "page-faults", "context-switches"]
        .iter()
        .filter_map(|n| CounterSpec::software(n))
        .collect();
    if with_msr
        && let Some(t) = CounterSpec::msr_tsc(pmus)
        && can_open(&t)
    {
        v.push(t);
    }
    v
}
