//! The perf_event backend: event descriptions → `perf_event_attr` → fd groups the kernel can
//! schedule → `read_format` parsing → multiplex scaling → W, Q and T.
//!
//! perf-event2 opens, enables and reads the counters; this module decides *what* to open
//! (raw configs, dynamic PMU types, groups that respect counter constraints, uncore instances
//! on the CPU named by their `cpumask`) and turns counts into a [`Measurement`].
//!
//! Two ways of counting share every step:
//! - command mode ([`run_command`]): counters opened on this thread, disabled, with
//!   `inherit` + `enable_on_exec`, so they start at the child's exec and follow its threads
//!   and children; uncore events system-wide, enabled just before the spawn;
//! - region mode ([`CounterSet::open`] with [`Target::ThisThread`]): per-thread groups without
//!   inherit, read around each region (rdpmc where the kernel allows, else `read()`).
//!
//! Software events (task-clock, page-faults, context-switches, msr/tsc) go through the same
//! code, which is how the path is tested on machines without a hardware PMU.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
#[cfg(feature = "trace")]
use std::path::PathBuf;
#[cfg(feature = "trace")]
use std::process::{Command, ExitStatus};
#[cfg(feature = "trace")]
use std::time::{Duration, Instant};

use perf_event::events::{Raw, Software};
use perf_event::{Builder, Counter, ReadFormat};

#[cfg(feature = "analysis")]
pub mod stat_import;

use super::Measurement;
use crate::error::{Error, Result};
use crate::machine::{EventSpec, Platform};
use crate::report::{Bytes, Flops, Provenance, Source};

/// Where the kernel lists PMUs.
pub const SYSFS_PMUS: &str = "/sys/bus/event_source/devices";
const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";

/// Every group we open reads as one record: times once, then (value, id) per member.
pub fn group_read_format() -> ReadFormat {
    ReadFormat::GROUP | ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING | ReadFormat::ID
}

/// How an event is opened.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// A core PMU event, per task (counts the observed threads only).
    Core,
    /// A kernel software event (`PERF_TYPE_SOFTWARE`), per task.
    Software,
    /// A PMU that refuses exclude_* bits (msr), per task.
    NoExclude,
    /// An uncore event: system-wide, one fd per CPU listed (one per socket, from `cpumask`).
    Uncore { cpus: Vec<usize> },
}

/// One counter to open: the `perf_event_attr` fields plus what its count means.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSpec {
    /// Display name (`FP_ARITH_INST_RETIRED.SCALAR_DOUBLE`, `page-faults`, `uncore_imc_0/CAS_COUNT.RD`).
    pub name: String,
    /// PMU directory name (`cpu`, `software`, `uncore_imc_0`, `msr`).
    pub pmu: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub scope: Scope,
    /// General-purpose counters it may use (`None`: any).
    pub counters: Option<Vec<u32>>,
    /// Takes a pair of adjacent counters (AMD merged events).
    pub paired: bool,
    /// `flops`, `bytes.l2`, …, `cycles`, `seconds.task`, `software`.
    pub quantity: String,
    pub class: Option<String>,
    pub weight: f64,
    pub unreliable: bool,
    pub caveat: Option<String>,
    /// See `EventSpec::part_of`.
    pub part_of: Option<String>,
}

impl CounterSpec {
    /// A kernel software event by its `perf stat` name.
    pub fn software(name: &str) -> Option<CounterSpec> {
        let (id, quantity) = match name {
            "task-clock" => (Software::TASK_CLOCK, "seconds.task"),
            "page-faults" => (Software::PAGE_FAULTS, "software"),
            "context-switches" => (Software::CONTEXT_SWITCHES, "software"),
            "cpu-migrations" => (Software::CPU_MIGRATIONS, "software"),
            "minor-faults" => (Software::PAGE_FAULTS_MIN, "software"),
            "major-faults" => (Software::PAGE_FAULTS_MAJ, "software"),
            _ => return None,
        };
        Some(CounterSpec {
            name: name.to_string(),
            pmu: "software".into(),
            type_: PERF_TYPE_SOFTWARE,
            config: u64::from(id),
            config1: 0,
            scope: Scope::Software,
            counters: None,
            paired: false,
            quantity: quantity.into(),
            class: None,
            weight: if quantity == "seconds.task" { 1e-9 } else { 1.0 },
            unreliable: false,
            caveat: None,
            part_of: None,
        })
    }

    /// The TSC through the dynamic `msr` PMU, when the kernel has one.
    pub fn msr_tsc(pmus: &Path) -> Option<CounterSpec> {
        let type_ = pmu_type(pmus, "msr").ok()?;
        Some(CounterSpec {
            name: "msr/tsc".into(),
            pmu: "msr".into(),
            type_,
            config: 0, // MSR_TSC in arch/x86/events/msr.c
            config1: 0,
            scope: Scope::NoExclude,
            counters: None,
            paired: false,
            quantity: "software".into(),
            class: None,
            weight: 1.0,
            unreliable: false,
            caveat: None,
            part_of: None,
        })
    }

    /// Core cycles through the generic hardware event (fixed counter on Intel).
    pub fn cycles() -> CounterSpec {
        CounterSpec {
            name: "cycles".into(),
            pmu: "cpu".into(),
            type_: PERF_TYPE_HARDWARE,
            config: 0, // PERF_COUNT_HW_CPU_CYCLES
            config1: 0,
            scope: Scope::Core,
            counters: None,
            paired: false,
            quantity: "cycles".into(),
            class: None,
            weight: 1.0,
            unreliable: false,
            caveat: None,
            part_of: None,
        }
    }

    fn is_hardware_counter(&self) -> bool {
        matches!(self.scope, Scope::Core)
    }

    /// The builder for this event, with the settings every mode shares.
    pub(crate) fn builder(&self) -> Builder<'static> {
        let mut b = Builder::new(Raw::new(self.config).config1(self.config1));
        // Raw sets PERF_TYPE_RAW; dynamic PMUs (cpu_core, amd_umc, msr, uncore_*) and
        // software/hardware events need their own type.
        b.attrs_mut().type_ = self.type_;
        b.read_format(group_read_format());
        match self.scope {
            // exclude_kernel lets paranoid level 2 count user-space work.
            Scope::Core => {
                b.exclude_kernel(true).exclude_hv(true);
            }
            // Context switches and most page-fault handling happen in the kernel: count
            // them there when this user may (paranoid ≤ 1 or CAP_PERFMON).
            Scope::Software => {
                b.exclude_kernel(!kernel_counting_allowed()).exclude_hv(true);
            }
            // These PMUs reject the exclude_* bits (PERF_PMU_CAP_NO_EXCLUDE).
            Scope::NoExclude | Scope::Uncore { .. } => {
                b.exclude_kernel(false).exclude_hv(false);
            }
        }
        b
    }
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;

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

/// A `perf_name` split into its PMU and event term: `cpu_core/cycles/` → (`cpu_core`,
/// `cycles`), `instructions` → (none, `instructions`), `uncore_imc/data_reads/` →
/// (`uncore_imc`, `data_reads`). `None` for anything with modifiers or terms.
pub fn split_perf_name(name: &str) -> Option<(Option<&str>, &str)> {
    let plain = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    match name.strip_suffix('/').and_then(|n| n.split_once('/')) {
        Some((pmu, term)) if plain(pmu) && plain(term) => Some((Some(pmu), term)),
        Some(_) => None,
        None if plain(name) => Some((None, name)),
        None => None,
    }
}

/// Which `perf_event_attr` field a sysfs format names, and the bit ranges (low, high) that
/// hold a term's value, lowest bits first: `config:0-7,32-35` → (0, [(0, 7), (32, 35)]).
pub fn parse_format(text: &str) -> Option<(usize, Vec<(u32, u32)>)> {
    let (field, bits) = text.trim().split_once(':')?;
    let field = match field {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        _ => return None,
    };
    let mut ranges = Vec::new();
    for r in bits.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let b = r.trim().parse().ok()?;
                (b, b)
            }
        };
        if hi < lo || hi > 63 {
            return None;
        }
        ranges.push((lo, hi));
    }
    Some((field, ranges))
}

/// Scatter `value` over `ranges` (lowest bits into the first range), as perf does with a
/// format term. `None` when the value does not fit.
fn place_bits(value: u64, ranges: &[(u32, u32)]) -> Option<u64> {
    let (mut out, mut v) = (0u64, value);
    for &(lo, hi) in ranges {
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        out |= (v & mask) << lo;
        v = if width == 64 { 0 } else { v >> width };
    }
    (v == 0).then_some(out)
}

/// Encode a PMU's sysfs event alias the way perf does: `<pmu_dir>/events/<alias>` holds terms
/// (`event=0xff,umask=0x20`), each placed by `<pmu_dir>/format/<term>` (`config:0-7`).
/// Returns `[config, config1, config2]`.
pub fn sysfs_alias_config(pmu_dir: &Path, alias: &str) -> Result<[u64; 3]> {
    let file = pmu_dir.join("events").join(alias);
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
    let bad = |why: String| {
        Error::unavailable(
            format!("{}: {why} (in {:?})", file.display(), text.trim()),
            "this kernel's event alias is not a fixed encoding; report this with `perf list -v`",
        )
    };
    let mut config = [0u64; 3];
    for term in text.trim().split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = value.trim();
        let parsed = match value.strip_prefix("0x").or_else(|| value.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => value.parse().ok(),
        };
        let Some(value) = parsed else {
            return Err(bad(format!("term {name} has no fixed value ({value})")));
        };
        // perf's built-in terms set the fields directly.
        if let Some(i) = ["config", "config1", "config2"].iter().position(|f| *f == name) {
            config[i] |= value;
            continue;
        }
        let fmt_file = pmu_dir.join("format").join(name);
        let fmt = std::fs::read_to_string(&fmt_file).map_err(|e| Error::io(format!("reading {}", fmt_file.display()), e))?;
        let (field, ranges) = parse_format(&fmt).ok_or_else(|| bad(format!("format {name} is {:?}", fmt.trim())))?;
        let bits = place_bits(value, &ranges).ok_or_else(|| bad(format!("{name}={value:#x} does not fit {}", fmt.trim())))?;
        config[field] |= bits;
    }
    Ok(config)
}

/// `/sys/bus/event_source/devices/<pmu>/type`.
pub fn pmu_type(pmus: &Path, pmu: &str) -> Result<u32> {
    let path = pmus.join(pmu).join("type");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    text.trim().parse().map_err(|_| {
        Error::unavailable(
            format!("{}: not a PMU type number ({:?})", path.display(), text.trim()),
            "the kernel's perf sysfs is unusual; report this",
        )
    })
}

/// Parse a sysfs CPU list (`0`, `0,64`, `0-3,8`).
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            if b < a || b - a > 1 << 16 {
                return None;
            }
            out.extend(a..=b);
        } else {
            out.push(part.trim().parse().ok()?);
        }
    }
    Some(out)
}

/// PMU instances for a PMU name: `uncore_imc` → `uncore_imc_0`, `uncore_imc_1`, …;
/// an exact directory name matches itself.
pub fn pmu_instances(pmus: &Path, pmu: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(pmus) else { return vec![] };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|n| {
            n == pmu
                || n.strip_prefix(pmu)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .is_some_and(|s| s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty())
        })
        .collect();
    crate::util::sort_by(&mut names, |a, b| (a.len(), a).cmp(&(b.len(), b)));
    names
}

/// Quantity of the hybrid parts' E-core cycles (`cpu_atom/cycles`): no W is counted there.
pub const ECORE_CYCLES: &str = "cycles.ecore";

/// The core PMU: `cpu` (Intel, AMD) or `cpu_core` (hybrid parts' P-cores).
/// A VM without PMU passthrough has neither; say so and point at the trace backend.
pub fn core_pmu(pmus: &Path) -> Result<String> {
    for name in ["cpu", "cpu_core"] {
        if pmus.join(name).join("type").is_file() {
            return Ok(name.to_string());
        }
    }
    let mut present: Vec<String> = std::fs::read_dir(pmus)
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    crate::util::sort_by(&mut present, Ord::cmp);
    Err(Error::unavailable(
        format!(
            "no hardware core PMU: {} has only [{}] (a VM without PMU passthrough?)",
            pmus.display(),
            present.join(", ")
        ),
        "use `--backend trace` (exact W and core-side Q by tracing), or run on bare metal / a VM with the vPMU enabled",
    ))
}

/// `/proc/sys/kernel/perf_event_paranoid`, when readable.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string(PARANOID).ok()?.trim().parse().ok()
}

/// Refuse early when the paranoid level forbids what is asked, for this process (its
/// CAP_PERFMON / CAP_SYS_ADMIN included).
pub fn check_paranoid(level: Option<i32>, need_system_wide: bool) -> Result<()> {
    paranoid_decision(level, has_cap_perfmon(), need_system_wide)
}

/// The decision behind [`check_paranoid`]: at level ≥ 3 (Debian/Ubuntu's patch) the kernel
/// refuses every perf event to processes without CAP_PERFMON (or CAP_SYS_ADMIN, e.g. root);
/// at ≥ 1 it refuses system-wide (uncore) events to them. A capable process passes both.
pub fn paranoid_decision(level: Option<i32>, has_cap: bool, need_system_wide: bool) -> Result<()> {
    let Some(level) = level else { return Ok(()) };
    if has_cap {
        return Ok(());
    }
    if level >= 3 {
        return Err(Error::unavailable(
            format!("perf_event_paranoid is {level}: the kernel refuses all perf events to processes without CAP_PERFMON"),
            "run `sudo sysctl kernel.perf_event_paranoid=2` (or 1), or grant CAP_PERFMON to the roofline binary (`sudo setcap cap_perfmon+ep $(which roofline)`)",
        ));
    }
    if need_system_wide && level >= 1 {
        return Err(Error::unavailable(
            format!("perf_event_paranoid is {level}: system-wide uncore events (memory traffic) need level 0 or lower"),
            "run `sudo sysctl kernel.perf_event_paranoid=0`, grant CAP_PERFMON (`sudo setcap cap_perfmon+ep $(which roofline)`), or pass `--no-uncore`",
        ));
    }
    Ok(())
}

/// Whether this user may count kernel-mode events of its own tasks.
pub fn kernel_counting_allowed() -> bool {
    paranoid().is_some_and(|l| l <= 1) || has_cap_perfmon()
}

/// Whether the effective capability set holds CAP_PERFMON (38) or CAP_SYS_ADMIN (21).
fn has_cap_perfmon() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 38 | 1 << 21) != 0)
}

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
        let spec = |name: String, pmu: &str, type_: u32, config: [u64; 2], scope: Scope| CounterSpec {
            name,
            pmu: pmu.to_string(),
            type_,
            config: config[0],
            config1: config[1],
            scope,
            counters: e.counters.clone(),
            paired: e.paired,
            quantity: e.quantity.clone(),
            class: e.class.clone(),
            weight: e.weight,
            unreliable: e.unreliable,
            caveat: e.caveat.clone(),
            part_of: e.part_of.clone(),
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
/// `pmus` ([`resolve_platform_events`]), cycles when the table has none, the software
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
    notes.extend(super::events::platform_notes(platform));
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

/// [`core_counters`] for a given SMT and NMI-watchdog state.
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

/// Whether the kernel accepts this event for the calling thread (opened and closed at once).
pub fn can_open(spec: &CounterSpec) -> bool {
    spec.builder().observe_self().any_cpu().build().is_ok()
}

/// Split events into groups the kernel can schedule at once. Per-task hardware events go
/// into groups whose members can be assigned distinct general-purpose counters (respecting
/// each event's `counters` list, paired events taking two adjacent ones, at most
/// `core_counters`; fixed-counter events take their fixed counter and join the first group);
/// software events form their own group; each uncore event is its own group (its own PMU,
/// its own CPU). More than one hardware group means the kernel multiplexes them: reported,
/// never silent.
pub fn plan_groups(specs: &[CounterSpec], core_counters: u32) -> Vec<Vec<usize>> {
    let mut hw: Vec<Vec<usize>> = Vec::new();
    let mut soft: Vec<usize> = Vec::new();
    let mut uncore: Vec<Vec<usize>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        match s.scope {
            Scope::Core => {
                // A group is one PMU's (the E-cores' cycles never join the P-cores' group).
                if let Some(g) = hw.iter_mut().find(|g| {
                    if g.first().is_some_and(|&j| specs[j].pmu != s.pmu) {
                        return false;
                    }
                    let mut trial: Vec<&CounterSpec> = g.iter().map(|&j| &specs[j]).collect();
                    trial.push(s);
                    schedulable(&trial, core_counters)
                }) {
                    g.push(i);
                } else {
                    hw.push(vec![i]);
                }
            }
            Scope::Software | Scope::NoExclude => soft.push(i),
            Scope::Uncore { .. } => uncore.push(vec![i]),
        }
    }
    let mut out = hw;
    if !soft.is_empty() {
        out.push(soft);
    }
    out.extend(uncore);
    out
}

/// Counter indices from this one up are fixed-function counters (the kernel's
/// `INTEL_PMC_IDX_FIXED`; the platforms' `counters = [32]` is fixed counter 0).
pub const FIXED_COUNTER_BASE: u32 = 32;

/// Whether the events can sit on distinct counters at once: each on one of its `counters`
/// (or any general-purpose one of `0..n`), paired events on an even counter and the next.
/// Fixed counters (index ≥ [`FIXED_COUNTER_BASE`]) are slots of their own: an event bound to
/// one takes it and no general-purpose counter, so INST_RETIRED.ANY & co. join any group.
/// Groups are a handful of events on at most ~8 + 4 counters, so a backtracking search is
/// exact and cheap.
pub fn schedulable(events: &[&CounterSpec], n: u32) -> bool {
    fn choices(s: &CounterSpec, n: u32) -> Vec<Vec<usize>> {
        let allowed: Vec<u32> = s.counters.clone().unwrap_or_else(|| (0..n).collect());
        allowed
            .into_iter()
            .filter(|&c| {
                if c >= FIXED_COUNTER_BASE {
                    !s.paired
                } else {
                    c < n && (!s.paired || (c % 2 == 0 && c + 1 < n))
                }
            })
            .map(|c| {
                if s.paired {
                    vec![c as usize, c as usize + 1]
                } else {
                    vec![c as usize]
                }
            })
            .collect()
    }
    fn place(i: usize, events: &[&CounterSpec], n: u32, used: &mut Vec<bool>) -> bool {
        if i == events.len() {
            return true;
        }
        for slots in choices(events[i], n) {
            if let Some(&top) = slots.iter().max()
                && top >= used.len()
            {
                used.resize(top + 1, false);
            }
            if slots.iter().all(|&c| !used[c]) {
                slots.iter().for_each(|&c| used[c] = true);
                if place(i + 1, events, n, used) {
                    return true;
                }
                slots.iter().for_each(|&c| used[c] = false);
            }
        }
        false
    }
    // Quick refusal: more general-purpose counters needed than exist.
    let fixed_only = |e: &CounterSpec| {
        e.counters
            .as_ref()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|&c| c >= FIXED_COUNTER_BASE))
    };
    let need: usize = events.iter().filter(|e| !fixed_only(e)).map(|e| if e.paired { 2 } else { 1 }).sum();
    need <= n as usize && place(0, events, n, &mut vec![false; n as usize])
}

/// One group's reading, as [`parse_group_read`] gives it: the times shared by the group, then
/// `(id, value)` per member in the order the kernel wrote them.
#[cfg(any(test, feature = "analysis"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupReading {
    pub time_enabled: u64,
    pub time_running: u64,
    pub values: Vec<(u64, u64)>,
}

/// Parse the bytes of a `read()` of a group leader opened with [`group_read_format`]
/// (`nr, time_enabled, time_running, (value, id) × nr`, native endian) with the parser
/// perf-event2 uses on live counters. Any bytes give a reading or an error, never a panic;
/// trailing bytes past the `nr` entries are ignored.
///
/// Live counters are read through [`CounterSet`], which does not need this; it is what the
/// unit tests and the `perf_group_read` fuzz target (`fuzz/`) check the layout with, so the
/// light build (no `analysis`) leaves it out.
#[cfg(any(test, feature = "analysis"))]
pub fn parse_group_read(bytes: &[u8]) -> Result<GroupReading> {
    use perf_event::data::ReadGroup;
    use perf_event::data::endian::Native;
    use perf_event::data::parse::{ParseConfig, Parser};

    let mut b = Builder::new(Software::DUMMY);
    b.read_format(group_read_format());
    let config: ParseConfig<Native> = ParseConfig::from(*b.attrs());
    let mut parser = Parser::new(bytes, config);
    let group: ReadGroup = parser.parse().map_err(|e| {
        Error::unavailable(
            format!("malformed perf group read ({} bytes): {e}", bytes.len()),
            "the kernel returned an unexpected read_format layout; report this",
        )
    })?;
    Ok(GroupReading {
        time_enabled: group.time_enabled().unwrap_or(0),
        time_running: group.time_running().unwrap_or(0),
        values: group.entries().map(|e| (e.id().unwrap_or(0), e.value())).collect(),
    })
}

/// A count scaled for multiplexing: `raw × enabled / running`, and `running / enabled`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaled {
    pub raw: u64,
    pub value: f64,
    /// Fraction of the enabled time the event was on a counter (1.0: not multiplexed).
    pub running_ratio: f64,
}

/// `None` when the event never ran (time_running 0 while enabled): not counted.
pub fn scale(raw: u64, time_enabled: u64, time_running: u64) -> Option<Scaled> {
    if time_enabled == 0 {
        // Never enabled (e.g. the command did not exec): a true zero.
        return Some(Scaled {
            raw,
            value: raw as f64,
            running_ratio: 1.0,
        });
    }
    if time_running == 0 {
        return None;
    }
    let ratio = (time_running as f64 / time_enabled as f64).min(1.0);
    Some(Scaled {
        raw,
        value: if time_running >= time_enabled {
            raw as f64
        } else {
            raw as f64 * time_enabled as f64 / time_running as f64
        },
        running_ratio: ratio,
    })
}

/// The final count of one event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventCount {
    pub name: String,
    /// `None`: never scheduled (multiplexed out the whole time).
    pub scaled: Option<Scaled>,
}

/// What the counters observe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// This thread and every thread/process it creates afterwards, enabled at exec
    /// (`inherit` + `enable_on_exec`; command mode).
    InheritOnExec,
    /// Only the calling thread (region mode: no inherit, so rdpmc can read it).
    ThisThread,
    /// The whole process from now on (region mode, the default): the calling thread with
    /// `inherit` (threads it creates later are counted, and `read()` includes live ones,
    /// Linux ≥ 4.13 for groups), and every other thread that exists now, each with a group
    /// of its own (also inherited: a pool started before the session is covered, and what
    /// its threads start). Read with `read()` only: inherited counters cannot be mapped.
    Process,
}

/// One event group of `members` for a task (`tid`, None: the calling thread) or a CPU, as
/// `target` asks; on failure, the member that failed and the kernel's error.
fn open_task_group(
    specs: &[CounterSpec],
    members: &[usize],
    cpu: Option<usize>,
    tid: Option<i32>,
    target: Target,
) -> std::result::Result<Vec<Counter>, (usize, std::io::Error)> {
    let mut counters: Vec<Counter> = Vec::with_capacity(members.len());
    for &i in members {
        let mut b = specs[i].builder();
        match cpu {
            Some(c) => {
                b.any_pid().one_cpu(c);
            }
            None => {
                match tid {
                    Some(t) => b.observe_pid(t),
                    None => b.observe_self(),
                };
                b.any_cpu();
                match target {
                    Target::InheritOnExec => {
                        b.inherit(true).enable_on_exec(true);
                    }
                    Target::Process => {
                        b.inherit(true);
                    }
                    Target::ThisThread => {}
                }
            }
        }
        let built = match counters.first_mut() {
            None => b.build(),
            // Members are created enabled: they count whenever their leader does, so enabling
            // (or exec-enabling) the leader starts the group.
            Some(leader) => b.enabled(true).enable_on_exec(false).build_with_group(leader),
        };
        counters.push(built.map_err(|e| (i, e))?);
    }
    Ok(counters)
}

/// Whether thread `tid` of this process has exited or is exiting: its `/proc/self/task/TID/stat`
/// is gone, says zombie or dead, or its flags hold `PF_EXITING` (0x4, kernel `sched.h`).
fn thread_gone_or_exiting(tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return true;
    };
    // After the command's closing parenthesis: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    let Some((_, rest)) = stat.rsplit_once(')') else { return false };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first().copied().unwrap_or("");
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || flags & 0x4 != 0
}

/// The other threads of this process now (from `/proc/self/task`), without the caller.
pub fn other_threads() -> Vec<i32> {
    let me = nix::unistd::gettid().as_raw();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|t| *t != me)
        .collect()
}

/// A group member: a plain fd, or an fd whose control page is mapped for rdpmc.
enum Member {
    Plain(Counter),
    Mapped(perf_event::Sampler),
}

impl Member {
    fn counter(&mut self) -> &mut Counter {
        match self {
            Member::Plain(c) => c,
            Member::Mapped(s) => s,
        }
    }
}

struct OpenGroup {
    /// Members in order (leader first), and the index of each one's spec.
    members: Vec<Member>,
    specs: Vec<usize>,
    /// The CPU of a system-wide (uncore) group; `None` for per-task groups.
    cpu: Option<usize>,
}

/// Open counter groups, enabled and disabled together, read into [`EventCount`]s.
pub struct CounterSet {
    pub specs: Vec<CounterSpec>,
    groups: Vec<OpenGroup>,
}

/// Map an open/enable error to its cause and hint.
pub fn open_error(spec: &CounterSpec, e: &io::Error) -> Error {
    let level = paranoid();
    let lvl = level.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into());
    use nix::errno::Errno;
    match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::EACCES) | Some(Errno::EPERM) => Error::unavailable(
            format!(
                "perf_event_open refused {} ({e}); perf_event_paranoid is {lvl}{}",
                spec.name,
                if matches!(spec.scope, Scope::Uncore { .. }) {
                    " and system-wide uncore events need 0 or CAP_PERFMON"
                } else {
                    ""
                }
            ),
            "lower it with `sudo sysctl kernel.perf_event_paranoid=1` (0 for uncore), or grant CAP_PERFMON (`sudo setcap cap_perfmon+ep $(which roofline)`)",
        ),
        Some(errno @ (Errno::ENOENT | Errno::EINVAL | Errno::EOPNOTSUPP)) => Error::unavailable(
            format!(
                "the kernel rejected event {} (pmu {}, type {}, config {:#x}, config1 {:#x}): {errno:?}, {e}",
                spec.name, spec.pmu, spec.type_, spec.config, spec.config1
            ),
            "this CPU or kernel does not support it: check `--platform` matches the CPU, or mark the event optional in the platform file",
        ),
        Some(Errno::EMFILE) => Error::unavailable(
            format!("too many open files while opening {} ({e})", spec.name),
            "raise the limit with `ulimit -n 4096`",
        ),
        _ => Error::unavailable(
            format!("perf_event_open failed for {}: {e}", spec.name),
            "check `perf stat -e` with the same event on this machine",
        ),
    }
}

impl CounterSet {
    /// Open every group of `plan`. Groups are opened disabled; per-task groups with
    /// `InheritOnExec` start at exec by themselves, the rest start with [`enable`](Self::enable).
    pub fn open(specs: Vec<CounterSpec>, plan: &[Vec<usize>], target: Target) -> Result<CounterSet> {
        if target == Target::ThisThread {
            // Mapping pages for rdpmc can fail (perf_event_mlock_kb exhausted by many
            // threads): then count with read() only.
            match Self::open_with(specs.clone(), plan, target, true) {
                Err(OpenError::Map) => {}
                Err(OpenError::Open(e)) => return Err(e),
                Ok(set) => return Ok(set),
            }
        }
        match Self::open_with(specs, plan, target, false) {
            Ok(set) => Ok(set),
            Err(OpenError::Open(e)) => Err(e),
            Err(OpenError::Map) => unreachable!("no mapping requested"),
        }
    }

    fn open_with(specs: Vec<CounterSpec>, plan: &[Vec<usize>], target: Target, map: bool) -> Result<CounterSet, OpenError> {
        let mut groups = Vec::new();
        for members in plan {
            let Some(&first) = members.first() else { continue };
            let cpus: Vec<Option<usize>> = match &specs[first].scope {
                Scope::Uncore { cpus } => cpus.iter().map(|&c| Some(c)).collect(),
                _ => vec![None],
            };
            // Per-task groups: this thread, and with `Process` every other thread too.
            let mut tasks: Vec<(Option<usize>, Option<i32>)> = cpus.iter().map(|c| (*c, None)).collect();
            if target == Target::Process && cpus == [None] {
                tasks.extend(other_threads().into_iter().map(|t| (None, Some(t))));
            }
            for (cpu, tid) in tasks {
                // Another thread's group is tried again when a member fails while the thread
                // lives on: its counting context can be swapped or torn down under the open
                // (threads starting and exiting beside it; 1 lib test run in 30 failed on it).
                let mut attempts = 0;
                let counters: Vec<Counter> = loop {
                    attempts += 1;
                    match open_task_group(&specs, members, cpu, tid, target) {
                        Ok(c) => break c,
                        // A thread that exited since the task list was read (ESRCH once gone;
                        // ENODEV or EINVAL while its context is torn down): nothing of it is
                        // left to count.
                        Err(_) if tid.is_some_and(thread_gone_or_exiting) => break Vec::new(),
                        Err(_) if tid.is_some() && attempts < 4 => continue,
                        Err((spec, e)) => return Err(OpenError::Open(open_error(&specs[spec], &e))),
                    }
                };
                if counters.is_empty() {
                    continue; // the thread is gone
                }
                let members: Vec<Member> = counters
                    .into_iter()
                    .zip(members)
                    .map(|(c, &i)| {
                        // Only hardware counters of this thread can be read with rdpmc;
                        // inherited counters cannot be mmapped at all.
                        if map && cpu.is_none() && specs[i].is_hardware_counter() {
                            c.sampled(0).map(Member::Mapped).map_err(|_| OpenError::Map)
                        } else {
                            Ok(Member::Plain(c))
                        }
                    })
                    .collect::<Result<_, _>>()?;
                groups.push(OpenGroup {
                    members,
                    specs: members_of(plan, first),
                    cpu,
                });
            }
        }
        Ok(CounterSet { specs, groups })
    }

    /// Enable the groups that exec does not start (system-wide ones), or all of them.
    pub fn enable(&mut self, only_system_wide: bool) -> Result<()> {
        for g in &mut self.groups {
            if only_system_wide && g.cpu.is_none() {
                continue;
            }
            let spec = &self.specs[g.specs[0]];
            g.members[0].counter().enable_group().map_err(|e| open_error(spec, &e))?;
        }
        Ok(())
    }

    pub fn disable(&mut self) -> Result<()> {
        for g in &mut self.groups {
            let spec = &self.specs[g.specs[0]];
            g.members[0].counter().disable_group().map_err(|e| open_error(spec, &e))?;
        }
        Ok(())
    }

    /// Whether hardware counters have their pages mapped for user-space (rdpmc) reads.
    pub fn user_reads_mapped(&self) -> bool {
        self.groups
            .iter()
            .flat_map(|g| g.members.iter())
            .any(|m| matches!(m, Member::Mapped(_)))
    }

    /// Read every counter: per-spec raw readings, summed over the CPUs of uncore events.
    pub fn read_raw(&mut self) -> Result<Vec<RawCount>> {
        let mut out = Vec::new();
        self.read_raw_into(&mut out)?;
        Ok(out)
    }

    /// [`read_raw`](Self::read_raw) into `out` (resized to the specs; no allocation once it
    /// has that size: the region API reads twice per region). A group whose members are
    /// all mapped and currently on a counter is read with rdpmc (no system call); any other
    /// group with one `read()`.
    pub fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()> {
        out.clear();
        out.resize(self.specs.len(), RawCount::default());
        for g in &mut self.groups {
            if read_group_user(&g.members, &g.specs, out) {
                continue;
            }
            let leader_name = &self.specs[g.specs[0]].name;
            let data = g.members[0].counter().read_group().map_err(|e| {
                Error::unavailable(
                    format!("reading the perf group led by {leader_name}: {e}"),
                    "the kernel could not schedule the group; try fewer events",
                )
            })?;
            let te = data.time_enabled().map(|d| d.as_nanos() as u64).unwrap_or(0);
            let tr = data.time_running().map(|d| d.as_nanos() as u64).unwrap_or(0);
            for (m, &si) in g.members.iter_mut().zip(&g.specs) {
                let value = data.get(m.counter()).map(|e| e.value()).unwrap_or(0);
                out[si].add(&RawCount {
                    value,
                    time_enabled: te,
                    time_running: tr,
                });
            }
        }
        Ok(())
    }

    /// Final scaled counts.
    pub fn scaled(&mut self) -> Result<Vec<EventCount>> {
        let raw = self.read_raw()?;
        Ok(self
            .specs
            .iter()
            .zip(raw)
            .map(|(s, r)| EventCount {
                name: s.name.clone(),
                scaled: scale(r.value, r.time_enabled, r.time_running),
            })
            .collect())
    }
}

/// What a measurement reads its counters through: the perf_event groups ([`CounterSet`]), or
/// the simulated PMU (`counters::simulated`), which stands in for them in tests. Readings are
/// raw (value, time enabled, time running) per spec; scaling and the event formulas
/// ([`scale`], [`to_measurement`]) are the callers', the same for both.
pub trait CounterSource {
    fn specs(&self) -> &[CounterSpec];
    /// Start counting (`only_system_wide`: the groups exec does not start).
    fn enable(&mut self, only_system_wide: bool) -> Result<()>;
    fn disable(&mut self) -> Result<()>;
    /// Raw readings per spec into `out` (resized to the specs).
    fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()>;
    /// Whether reads go through rdpmc (no system call).
    fn user_reads_mapped(&self) -> bool {
        false
    }
    /// Final scaled counts.
    fn scaled(&mut self) -> Result<Vec<EventCount>> {
        let mut raw = Vec::new();
        self.read_raw_into(&mut raw)?;
        Ok(self
            .specs()
            .iter()
            .zip(raw)
            .map(|(s, r)| EventCount {
                name: s.name.clone(),
                scaled: scale(r.value, r.time_enabled, r.time_running),
            })
            .collect())
    }
}

impl CounterSource for CounterSet {
    fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }
    fn enable(&mut self, only_system_wide: bool) -> Result<()> {
        CounterSet::enable(self, only_system_wide)
    }
    fn disable(&mut self) -> Result<()> {
        CounterSet::disable(self)
    }
    fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()> {
        CounterSet::read_raw_into(self, out)
    }
    fn user_reads_mapped(&self) -> bool {
        CounterSet::user_reads_mapped(self)
    }
    fn scaled(&mut self) -> Result<Vec<EventCount>> {
        CounterSet::scaled(self)
    }
}

fn members_of(plan: &[Vec<usize>], first: usize) -> Vec<usize> {
    plan.iter().find(|g| g.first() == Some(&first)).cloned().unwrap_or_default()
}

enum OpenError {
    Open(Error),
    Map,
}

/// All members' counts through rdpmc, when every member is mapped and on a counter now.
/// Read a group with rdpmc into `out` (added to each member's spec) when every member is
/// mapped and on a counter; otherwise leave `out` as it was and return false.
fn read_group_user(members: &[Member], specs: &[usize], out: &mut [RawCount]) -> bool {
    // All or nothing, without allocating: the readings wait on the stack (a group holds at
    // most the core's counters, far fewer than this; a larger one takes the read() path).
    let mut got = [RawCount::default(); 32];
    if members.len() > got.len() {
        return false;
    }
    for (m, g) in members.iter().zip(got.iter_mut()) {
        let Member::Mapped(s) = m else { return false };
        let d = s.read_user();
        let Some(value) = d.count() else { return false };
        *g = RawCount {
            value,
            time_enabled: d.time_enabled().as_nanos() as u64,
            time_running: d.time_running().as_nanos() as u64,
        };
    }
    for (g, &si) in got.iter().zip(specs) {
        out[si].add(g);
    }
    true
}

/// Sum of readings of one spec over its fds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawCount {
    pub value: u64,
    pub time_enabled: u64,
    pub time_running: u64,
}

impl RawCount {
    fn add(&mut self, r: &RawCount) {
        self.value += r.value;
        self.time_enabled += r.time_enabled;
        self.time_running += r.time_running;
    }

    /// `self - earlier`, for region deltas (saturating: a counter never runs backwards).
    pub fn since(&self, earlier: &RawCount) -> RawCount {
        RawCount {
            value: self.value.saturating_sub(earlier.value),
            time_enabled: self.time_enabled.saturating_sub(earlier.time_enabled),
            time_running: self.time_running.saturating_sub(earlier.time_running),
        }
    }
}

/// W, Q and T from counts. (The event → W/Q formulas belong to `counters::events`, written
/// alongside; until it lands this private version sums `count × weight` per quantity.)
pub fn to_measurement(specs: &[CounterSpec], counts: &[EventCount], seconds_samples: Vec<f64>) -> Measurement {
    let mut flops = Flops::default();
    let mut bytes = Bytes::new();
    let mut extra = BTreeMap::new();
    let mut multiplex = serde_json::Map::new();
    let mut not_counted = Vec::new();
    let mut l1_fill = None;
    let mut have_flops = false;
    // The MAC events' flops (`flops.fma`: a part of W) and the most scaling may add to counts.
    let mut fma: Option<f64> = None;
    let mut slack = 0.0;
    let mut parts: Vec<(String, f64)> = Vec::new();
    let mut levels: BTreeMap<String, Source> = BTreeMap::new();
    let mut counts_json = serde_json::Map::new();
    let mut notes =
        vec!["bytes.core is not counted by hardware: use `--backend trace` or analytic counts for core-side traffic".to_string()];
    for (s, c) in specs.iter().zip(counts) {
        let Some(sc) = c.scaled else {
            not_counted.push(serde_json::Value::from(s.name.clone()));
            continue;
        };
        counts_json.insert(s.name.clone(), serde_json::json!(sc.value));
        if sc.running_ratio < 1.0 {
            multiplex.insert(s.name.clone(), serde_json::json!(sc.running_ratio));
        }
        let v = sc.value * s.weight;
        if s.quantity.starts_with("flops") {
            slack += 0.5 * s.weight / sc.running_ratio.max(1e-9);
        }
        match s.quantity.as_str() {
            "flops.fma" => *fma.get_or_insert(0.0) += v,
            "flops" => {
                have_flops = true;
                let class = s.class.clone().unwrap_or_else(|| "unknown".into());
                if crate::kernels::FlopClass::key_is_integer(&class) {
                    *flops.int_ops.get_or_insert(0.0) += v;
                } else {
                    flops.total += v;
                }
                if let Some(parent) = &s.part_of {
                    parts.push((parent.clone(), v));
                }
                *flops.by_class.entry(class).or_insert(0.0) += v;
            }
            "bytes.l1_fill" => *l1_fill.get_or_insert(0.0) += v,
            q if q.starts_with("bytes.") => {
                let lvl = match &q[6..] {
                    "dram_read" | "dram_write" => "dram",
                    other => other,
                };
                *bytes.entry(lvl.to_string()).or_insert(0.0) += v;
                levels.insert(lvl.to_string(), Source::Perf);
            }
            _ => {}
        }
        if s.unreliable
            && let Some(cv) = &s.caveat
        {
            notes.push(format!("{}: {cv}", s.name));
        }
    }
    if have_flops {
        let classes: Vec<&str> = specs
            .iter()
            .filter(|s| s.quantity == "flops")
            .filter_map(|s| s.class.as_deref())
            .collect();
        let facts = crate::machine::cpuid::CpuidFacts::read(&crate::machine::cpuid::LiveCpuid);
        let missing = crate::counters::events::not_countable(&|f| facts.has(f), &classes);
        if !missing.is_empty() {
            extra.insert(
                "not_countable".into(),
                serde_json::json!(missing.iter().map(|(f, _)| *f).collect::<Vec<_>>()),
            );
            notes.extend(missing.into_iter().map(|(_, n)| n));
        }
    }
    if !parts.is_empty() {
        let mut by_class = std::mem::take(&mut flops.by_class);
        crate::counters::events::move_parts(&mut by_class, &parts);
        flops = Flops::of_classes(by_class);
    }
    // The FMA share where MAC events counted beside the W they are a part of.
    if let Some(f) = fma {
        extra.insert("fma_flops_counted".into(), serde_json::json!(f));
        if have_flops {
            match crate::counters::events::fma_share_of(f, flops.total, slack) {
                Ok(f) => flops.fma = Some(f),
                Err(why) => notes.push(why),
            }
        }
    }
    // L1 fills are the lines L2 delivers to L1: Q at the L2 level when nothing better counts it.
    if let Some(f) = l1_fill {
        extra.insert("bytes_l1_fill".into(), serde_json::json!(f));
        if !bytes.contains_key("l2") {
            bytes.insert("l2".into(), f);
            levels.insert("l2".into(), Source::Perf);
        }
    }
    if specs.iter().any(|s| matches!(s.scope, Scope::Uncore { .. })) {
        notes.push("uncore (memory) counts are system-wide: other processes' traffic is included (see --idle-baseline)".into());
    }
    let task_s: Option<f64> = specs
        .iter()
        .zip(counts)
        .find(|(s, _)| s.quantity == "seconds.task")
        .and_then(|(_, c)| c.scaled.map(|x| x.value * 1e-9));
    let cycles: Option<f64> = specs
        .iter()
        .zip(counts)
        .find(|(s, _)| s.quantity == "cycles")
        .and_then(|(_, c)| c.scaled.map(|x| x.value));
    if let Some(t) = task_s {
        extra.insert("task_clock_seconds".into(), serde_json::json!(t));
    }
    let ecore: Option<f64> = specs
        .iter()
        .zip(counts)
        .find(|(s, _)| s.quantity == ECORE_CYCLES)
        .and_then(|(_, c)| c.scaled.map(|x| x.value));
    if let Some(e) = ecore {
        extra.insert("ecore_cycles".into(), serde_json::json!(e));
        let p = cycles.unwrap_or(0.0);
        if e > 0.0 {
            let share = if p + e > 0.0 { 100.0 * e / (p + e) } else { 100.0 };
            notes.push(format!(
                "W partial: {share:.1} % of the cycles ran on E-cores, which count no FP operations (pin with taskset -c to P-cores, or use --backend trace)"
            ));
        } else {
            notes.push("no cycle ran on an E-core: W is complete".into());
        }
    }
    if let Some(c) = cycles {
        extra.insert("cycles".into(), serde_json::json!(c));
        if let Some(t) = task_s.filter(|t| *t > 0.0) {
            // cycles / task-clock, not / wall time: inherited cycles add up over threads.
            extra.insert("effective_ghz".into(), serde_json::json!(c / t / 1e9));
        }
    }
    extra.insert("counts".into(), serde_json::Value::Object(counts_json));
    if !multiplex.is_empty() {
        extra.insert("multiplex_running_ratio".into(), serde_json::Value::Object(multiplex));
    }
    if !not_counted.is_empty() {
        extra.insert("not_counted".into(), serde_json::Value::Array(not_counted));
    }
    Measurement {
        flops,
        bytes,
        provenance: Some(Provenance {
            flops: have_flops.then_some(Source::Perf),
            bytes: levels,
            seconds: Some(Source::Native),
            notes,
            untrusted: Vec::new(),
        }),
        seconds_samples,
        threads: 1,
        extra,
        regions: Vec::new(),
    }
}

/// Multiplexing, printed: one stderr line per event that did not run all the time.
#[cfg(feature = "trace")]
pub fn multiplex_warnings(counts: &[EventCount]) -> Vec<String> {
    counts
        .iter()
        .filter_map(|c| match c.scaled {
            None => Some(format!("{}: never scheduled on a counter (not counted)", c.name)),
            Some(s) if s.running_ratio < 1.0 => Some(format!(
                "{}: multiplexed, counted {:.1}% of the time, scaled ×{:.2}",
                c.name,
                s.running_ratio * 100.0,
                1.0 / s.running_ratio
            )),
            _ => None,
        })
        .collect()
}

/// A command line to run under counters.
#[cfg(feature = "trace")]
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    /// Variables added to the command's environment.
    pub env: Vec<(String, String)>,
}

/// The outcome of one counted run.
#[cfg(feature = "trace")]
#[derive(Debug)]
pub struct CommandRun {
    pub counts: Vec<EventCount>,
    pub wall_seconds: f64,
    pub status: ExitStatus,
}

/// Find CMD like execvp would: a path with a slash as is, else the first executable in PATH.
#[cfg(feature = "trace")]
pub fn resolve_program(cmd: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let not_found = || {
        Error::input(
            format!("command not found: {cmd}"),
            "give the program's path or make sure it is in PATH (commands run without a shell)",
        )
    };
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if cmd.is_empty() {
        return Err(not_found());
    }
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return if executable(&p) { Ok(p) } else { Err(not_found()) };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| executable(p))
        .ok_or_else(not_found)
}

/// Run CMD (argv, never a shell) once under the counters: per-task groups opened on this
/// thread with inherit + enable_on_exec (so they start at the child's exec and follow its
/// threads and children), system-wide groups enabled just before the spawn.
///
/// Must be called from a thread that starts no other children meanwhile (they would be
/// counted too): the CLI's main thread.
#[cfg(feature = "trace")]
pub fn run_command(specs: &[CounterSpec], plan: &[Vec<usize>], cmd: &CommandSpec) -> Result<CommandRun> {
    let program = resolve_program(cmd.argv.first().map(String::as_str).unwrap_or(""))?;
    let mut set = CounterSet::open(specs.to_vec(), plan, Target::InheritOnExec)?;
    let mut command = Command::new(&program);
    command.args(&cmd.argv[1..]).envs(cmd.env.iter().map(|(k, v)| (k, v)));
    set.enable(true)?;
    let t0 = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        Error::input(
            format!("cannot run {}: {e}", program.display()),
            "check the command and its permissions",
        )
    })?;
    let status = child.wait().map_err(|e| Error::io("waiting for the command", e))?;
    let wall = t0.elapsed();
    set.disable()?;
    let counts = set.scaled()?;
    Ok(CommandRun {
        counts,
        wall_seconds: wall.as_secs_f64(),
        status,
    })
}

/// Count system-wide groups only, for `duration`, with no command: the background traffic.
#[cfg(feature = "trace")]
pub fn idle_baseline(specs: &[CounterSpec], duration: Duration) -> Result<Vec<EventCount>> {
    let idx: Vec<usize> = (0..specs.len())
        .filter(|&i| matches!(specs[i].scope, Scope::Uncore { .. }))
        .collect();
    let sub: Vec<CounterSpec> = idx.iter().map(|&i| specs[i].clone()).collect();
    let plan: Vec<Vec<usize>> = (0..sub.len()).map(|i| vec![i]).collect();
    let mut set = CounterSet::open(sub, &plan, Target::ThisThread)?;
    set.enable(true)?;
    std::thread::sleep(duration);
    set.disable()?;
    let mut counts = set.scaled()?;
    // Back to the full spec list: per-task events read zero in an idle baseline.
    let mut full: Vec<EventCount> = specs
        .iter()
        .map(|s| EventCount {
            name: s.name.clone(),
            scaled: Some(Scaled {
                raw: 0,
                value: 0.0,
                running_ratio: 1.0,
            }),
        })
        .collect();
    for (k, &i) in idx.iter().enumerate().rev() {
        full[i] = counts.remove(k);
    }
    Ok(full)
}

/// The exit code to pass through for a finished command: its status, or 128 + signal.
#[cfg(feature = "trace")]
pub fn exit_code(status: &ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(sig)) => (128 + sig, Some(sig)),
        _ => (1, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(m.extra["multiplex_running_ratio"]["FP.512D"], 0.5);
        assert_eq!(m.extra["not_counted"][0], "CAS.WR");
        assert!(m.provenance.unwrap().notes.iter().any(|n| n.contains("bytes.core is not counted")));
        let w = multiplex_warnings(&counts);
        assert_eq!(w.len(), 2);
        assert!(w[0].contains("50.0%"), "{w:?}");
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn programs_resolve_like_execvp() {
        assert!(resolve_program("sh").is_ok());
        let e = resolve_program("surely-not-a-command-xyz").unwrap_err().to_string();
        assert!(e.contains("command not found: surely-not-a-command-xyz"), "{e}");
        assert!(resolve_program("/etc/passwd").is_err());
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
        assert!(m.extra["not_counted"].to_string().contains("mac_flops"));
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
        assert_eq!(m.extra["ecore_cycles"], serde_json::json!(1e9));
        let m = to_measurement(&specs, &[count(3e9), count(0.0)], vec![1.0]);
        let notes = m.provenance.unwrap().notes;
        assert!(notes.iter().any(|n| n == "no cycle ran on an E-core: W is complete"), "{notes:?}");
        assert!(!notes.iter().any(|n| n.starts_with("W partial")));
    }
}
