//! `roofline doctor`: what this machine can measure, why not more, and how to get more.
//!
//! Each capability (perf software, core and uncore events, rdpmc, the NMI watchdog's counter,
//! ptrace, the GPU) gets a verdict — available, limited or unavailable — with the cause
//! found and the fix (a sysctl, a capability, the hypervisor's vPMU, `--platform`). Every
//! event of this machine's platform table is tried once with `perf_event_open`, its errno
//! named when the kernel refuses it. `roofline.doctor/1` is the JSON form
//! (`docs/doctor.md`).
//!
//! Everything the diagnosis reads comes through [`Inputs`]: a root directory laid out like
//! `/` (sysfs PMUs, `/proc/sys/kernel`, `/proc/self/status`, `/proc/driver/nvidia`) and a
//! [`Probe`] that opens events and starts a traced child, so tests feed fake trees and fake
//! errnos and check the verdicts.
//!
//! `--simulated-pmu` diagnoses the simulated PMU (a test instrument, never chosen by `auto`)
//! instead of the hardware one: its PMUs laid out in a sysfs tree of their own, its injected
//! faults (`ROOFLINE_SIMULATED_PMU`) as the kernel's answers, this machine's kernel settings,
//! software events and ptrace as they are. Every capability it answers says "simulated PMU".

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use crate::counters::perf::{self, CounterSpec, Scope};
use crate::counters::simulated::SimulatedPmu;
use crate::machine::{EventSpec, Platform};

pub const DOCTOR_SCHEMA: &str = "roofline.doctor/1";

/// Where sysfs lists PMUs, relative to the root.
const PMUS: &str = "sys/bus/event_source/devices";
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_RAW: u32 = 4;
/// Capability bits of `CapEff` (linux/capability.h).
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
/// Prefixes of the PMUs that count memory traffic: Intel's integrated memory controller,
/// AMD's unified memory controller (Zen 4 on) and data fabric (Zen 1–3, and Zen 4's DF).
const MEMORY_PMUS: [&str; 3] = ["uncore_imc", "amd_umc", "amd_df"];
/// Bytes written and read back while a DRAM event counts: larger than the last-level cache
/// of the machines the platform tables describe, so a working memory PMU cannot read zero.
pub const TRAFFIC_BYTES: usize = 128 << 20;
const PERF_TYPE_SOFTWARE: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Available,
    Limited,
    Unavailable,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Available => "available",
            Verdict::Limited => "limited",
            Verdict::Unavailable => "unavailable",
        })
    }
}

/// One capability and what was found about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    /// `platform`, `perf.software`, `perf.core`, `perf.uncore.<pmu>`, `perf.rdpmc`,
    /// `perf.nmi_watchdog`, `trace`, `gpu`.
    pub name: String,
    pub verdict: Verdict,
    /// What was found, one line.
    pub cause: String,
    /// How to get more; `None` when nothing is missing.
    pub fix: Option<String>,
}

/// What happened when one platform event was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Opened,
    Failed,
    NotTried,
}

/// One platform event tried once (on one PMU instance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventTrial {
    /// The platform table's name.
    pub event: String,
    /// The PMU instance opened (`cpu`, `amd_umc_0`), or the table's PMU when none exists.
    pub pmu: String,
    pub quantity: String,
    pub optional: bool,
    /// `perf_event_attr.type` and `config` as opened (absent when not tried).
    #[serde(rename = "type")]
    pub type_: Option<u32>,
    pub config: Option<String>,
    pub outcome: Outcome,
    /// `ENOENT`, `EINVAL`, `EACCES`, `EOPNOTSUPP`, … when the kernel refused it.
    pub errno: Option<String>,
    /// The errno's text, or why the event was not tried.
    pub message: Option<String>,
    /// DRAM events that opened: the raw count read while [`TRAFFIC_BYTES`] were written and
    /// read back (0: the PMU opens but does not count). Absent for other events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_count: Option<u64>,
}

/// `roofline.doctor/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub schema: String,
    /// Platform key (`zen3`), or `None` when no table describes this CPU.
    pub platform: Option<String>,
    /// How the platform was chosen: `cpuid` or `--platform`.
    pub platform_source: Option<String>,
    /// CPUID's hypervisor, named (`KVM`, `HyperV`), when in a VM.
    pub hypervisor: Option<String>,
    pub capabilities: Vec<Capability>,
    pub events: Vec<EventTrial>,
    /// What `measure --backend auto` uses here: `perf`, `trace`, or `none`.
    pub auto_backend: String,
    /// `doctor --simulated-pmu`: the simulated PMU's note (platform, injected faults); the
    /// `perf.*` verdicts other than `perf.software` are the simulated PMU's. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated_pmu: Option<String>,
}

impl Diagnosis {
    /// The capability named `name` (the unit tests' look-up).
    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.name == name)
    }
}

/// The machine's answers to the two things only trying can tell.
pub trait Probe {
    /// Open `spec` once (per task, or on its first CPU for uncore events) and close it.
    fn open(&self, spec: &CounterSpec) -> Result<(), Errno>;
    /// Start a child under ptrace as the trace backend does; `Err`: why it was refused.
    fn trace(&self) -> Result<(), String>;
    /// The raw count of the (uncore) DRAM event `spec` while `bytes` bytes of fresh memory
    /// are written and read back.
    fn count_dram_traffic(&self, spec: &CounterSpec, bytes: usize) -> Result<u64, Errno>;
}

fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32))
}

/// `spec` as the live probe opens it: uncore events system-wide on their first CPU, others
/// on this task.
fn live_builder(spec: &CounterSpec) -> perf_event::Builder<'static> {
    let mut b = spec.builder();
    match &spec.scope {
        Scope::Uncore { cpus } => {
            b.any_pid().one_cpu(cpus.first().copied().unwrap_or(0));
        }
        _ => {
            b.observe_self().any_cpu();
        }
    }
    b
}

/// Write `bytes` of fresh memory and read it back (the kernel zeroes the pages first): DRAM
/// traffic on any machine whose last-level cache is smaller.
fn stream_memory(bytes: usize) -> u64 {
    let mut buf = vec![0u8; bytes];
    buf.fill(0x5a);
    let sum = std::hint::black_box(&buf).iter().step_by(64).map(|&b| u64::from(b)).sum();
    std::hint::black_box(sum)
}

/// The live machine: perf-event2 opens the events, the trace backend's own spawn traces.
pub struct LiveProbe;

impl Probe for LiveProbe {
    fn open(&self, spec: &CounterSpec) -> Result<(), Errno> {
        live_builder(spec).build().map(drop).map_err(|e| errno_of(&e))
    }

    fn trace(&self) -> Result<(), String> {
        live_trace_probe()
    }

    fn count_dram_traffic(&self, spec: &CounterSpec, bytes: usize) -> Result<u64, Errno> {
        let mut counter = live_builder(spec).build().map_err(|e| errno_of(&e))?;
        counter.enable().map_err(|e| errno_of(&e))?;
        stream_memory(bytes);
        counter.disable().map_err(|e| errno_of(&e))?;
        counter.read().map_err(|e| errno_of(&e))
    }
}

/// The simulated PMU as the kernel would answer for it (`doctor --simulated-pmu`): its
/// events open unless a fault refuses them with its errno, its DRAM events count the
/// streamed bytes through its faults; software events and ptrace are this machine's.
pub struct SimulatedProbe {
    pub pmu: SimulatedPmu,
}

impl Probe for SimulatedProbe {
    fn open(&self, spec: &CounterSpec) -> Result<(), Errno> {
        if spec.type_ == PERF_TYPE_SOFTWARE {
            return LiveProbe.open(spec);
        }
        self.pmu.open_errno(spec).map_or(Ok(()), |e| Err(Errno::from_raw(e)))
    }

    fn trace(&self) -> Result<(), String> {
        live_trace_probe()
    }

    fn count_dram_traffic(&self, spec: &CounterSpec, bytes: usize) -> Result<u64, Errno> {
        self.open(spec)?;
        // The simulated machine moves the bytes in no time of its own: a nominal 10 ms.
        self.pmu.count_dram_traffic(spec, bytes as f64, 0.01).map_err(|_| Errno::EIO)
    }
}

/// Start this very binary under PTRACE_TRACEME (it stops at exec, before running), read its
/// registers, and kill it.
#[cfg(target_arch = "x86_64")]
fn live_trace_probe() -> Result<(), String> {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program ({e})"))?;
    let argv = [exe.to_string_lossy().into_owned(), "--version".to_string()];
    let cmd = crate::counters::command::CommandSpec::resolve(&argv).map_err(|e| first_line(&e.to_string()))?;
    let child = crate::counters::trace::sys::spawn_traced(&cmd).map_err(|e| first_line(&e.to_string()))?;
    let result = match waitpid(child, Some(WaitPidFlag::__WALL)) {
        Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => nix::sys::ptrace::getregs(child)
            .map(drop)
            .map_err(|e| format!("PTRACE_GETREGS refused ({e:?}: {})", e.desc())),
        Ok(other) => Err(format!("the traced child did not stop at its exec ({other:?})")),
        Err(e) => Err(format!("waitpid: {e:?}")),
    };
    let _ = kill(child, Signal::SIGKILL);
    let _ = waitpid(child, Some(WaitPidFlag::__WALL));
    result
}

#[cfg(not(target_arch = "x86_64"))]
fn live_trace_probe() -> Result<(), String> {
    Err("the trace backend decodes x86-64 only".into())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// Everything the diagnosis reads.
pub struct Inputs<'a> {
    /// `/` on the live machine; in tests a directory laid out like it.
    pub root: PathBuf,
    /// Folders searched for `ncu` (PATH).
    pub path: Vec<PathBuf>,
    pub platform: Option<Platform>,
    /// Whether `platform` came from `--platform` rather than CPUID.
    pub platform_from_option: bool,
    pub hypervisor: Option<String>,
    pub probe: &'a dyn Probe,
    /// The simulated PMU stands in for the hardware one (`doctor --simulated-pmu`).
    pub simulated: Option<SimulatedMachine>,
}

/// What a diagnosis of the simulated PMU keeps of the real machine and says.
pub struct SimulatedMachine {
    /// The simulated PMU's note (platform, faults), shown first.
    pub note: String,
    /// Whether the real machine has a core PMU: `auto` never picks the simulated one.
    pub real_core_pmu: bool,
}

impl<'a> Inputs<'a> {
    /// This machine: `/`, `$PATH`, its platform (or `--platform`), CPUID's hypervisor.
    pub fn live(platform_option: Option<Platform>, probe: &'a dyn Probe) -> Inputs<'a> {
        let from_option = platform_option.is_some();
        let platform = platform_option.or_else(crate::machine::this_platform);
        let facts = crate::machine::cpuid::CpuidFacts::read(&crate::machine::cpuid::LiveCpuid);
        Inputs {
            root: PathBuf::from("/"),
            path: std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
            platform,
            platform_from_option: from_option,
            hypervisor: facts.hypervisor,
            probe,
            simulated: None,
        }
    }

    /// The simulated PMU `pmu` in a machine laid out under `root` (an empty directory the
    /// caller removes afterwards): its PMUs in sysfs ([`SimulatedPmu::write_sysfs`]), the NMI
    /// watchdog on when a `watchdog` fault is injected, and this machine's perf and ptrace
    /// settings (`perf_event_paranoid`, Yama, `/proc/self/status`, container marks) copied.
    pub fn simulated(pmu: &SimulatedPmu, platform_from_option: bool, root: &Path, probe: &'a dyn Probe) -> std::io::Result<Inputs<'a>> {
        pmu.write_sysfs(&root.join(PMUS))?;
        let copy = |rel: &str, text: &str| -> std::io::Result<()> {
            let to = root.join(rel);
            std::fs::create_dir_all(to.parent().unwrap_or(root))?;
            std::fs::write(to, text)
        };
        for rel in [
            "proc/sys/kernel/perf_event_paranoid",
            "proc/sys/kernel/yama/ptrace_scope",
            "proc/self/status",
            ".dockerenv",
            "run/.containerenv",
        ] {
            // procfs files report size 0: read them, not copy them.
            if let Ok(text) = std::fs::read_to_string(Path::new("/").join(rel)) {
                copy(rel, &text)?;
            }
        }
        copy(
            "proc/sys/kernel/nmi_watchdog",
            if pmu.watchdog_holds_a_counter() { "1\n" } else { "0\n" },
        )?;
        Ok(Inputs {
            root: root.to_path_buf(),
            path: std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
            platform: Some(pmu.platform.clone()),
            platform_from_option,
            hypervisor: None,
            probe,
            simulated: Some(SimulatedMachine {
                note: pmu.note(),
                real_core_pmu: perf::core_pmu(&Path::new("/").join(PMUS)).is_ok(),
            }),
        })
    }

    fn pmus(&self) -> PathBuf {
        self.root.join(PMUS)
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok().map(|s| s.trim().to_string())
    }

    fn read_int(&self, rel: &str) -> Option<i64> {
        self.read(rel)?.parse().ok()
    }

    /// A field of `/proc/self/status` (`Seccomp`, `CapEff`).
    fn status_field(&self, field: &str) -> Option<String> {
        let status = self.read("proc/self/status")?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_string()))
    }

    fn has_cap(&self, bit: u32) -> bool {
        self.status_field("CapEff")
            .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
            .is_some_and(|caps| caps >> bit & 1 == 1)
    }

    fn in_container(&self) -> bool {
        self.root.join(".dockerenv").exists() || self.root.join("run/.containerenv").exists()
    }
}

/// Examine the machine through `inputs`.
pub fn diagnose(inputs: &Inputs) -> Diagnosis {
    let pmus = inputs.pmus();
    let core = core_pmu(&pmus);
    let paranoid = inputs.read_int("proc/sys/kernel/perf_event_paranoid");
    let perfmon = inputs.has_cap(CAP_PERFMON) || inputs.has_cap(CAP_SYS_ADMIN);
    let events = inputs
        .platform
        .as_ref()
        .map(|p| try_platform_events(p, &pmus, core.is_some(), inputs.probe))
        .unwrap_or_default();
    let env = Env {
        inputs,
        core: core.as_deref(),
        paranoid,
        perfmon,
        events: &events,
    };
    let mut caps = vec![env.platform(), env.software(), env.core_events()];
    caps.extend(env.uncore());
    caps.push(env.rdpmc());
    caps.push(env.watchdog());
    caps.push(env.trace());
    caps.push(env.gpu());
    if inputs.simulated.is_some() {
        for c in caps.iter_mut().filter(|c| c.name.starts_with("perf.") && c.name != "perf.software") {
            c.cause = format!("simulated PMU: {}", c.cause);
        }
    }
    let usable = |n: &str| caps.iter().any(|c| c.name == n && c.verdict != Verdict::Unavailable);
    // `auto` never picks the simulated PMU: it sees the real machine's.
    let perf_usable = match &inputs.simulated {
        Some(sim) => sim.real_core_pmu,
        None => usable("perf.core"),
    };
    let auto_backend = if perf_usable {
        "perf"
    } else if usable("trace") {
        "trace"
    } else {
        "none"
    };
    Diagnosis {
        schema: DOCTOR_SCHEMA.into(),
        platform: inputs.platform.as_ref().map(|p| p.key.clone()),
        platform_source: inputs
            .platform
            .as_ref()
            .map(|_| if inputs.platform_from_option { "--platform" } else { "cpuid" }.to_string()),
        hypervisor: inputs.hypervisor.clone(),
        capabilities: caps,
        events,
        auto_backend: auto_backend.into(),
        simulated_pmu: inputs.simulated.as_ref().map(|s| s.note.clone()),
    }
}

/// `cpu` or `cpu_core` when the kernel registered a hardware core PMU.
fn core_pmu(pmus: &Path) -> Option<String> {
    perf::core_pmu(pmus).ok()
}

/// Every event of `platform` resolved as the perf backend resolves it and opened once per
/// event (uncore: on its first instance); events that cannot be opened say why.
fn try_platform_events(platform: &Platform, pmus: &Path, have_core: bool, probe: &dyn Probe) -> Vec<EventTrial> {
    // With a core PMU, the perf backend's own resolution: what `measure` would open.
    let resolved = have_core
        .then(|| perf::resolve_platform_events(platform, pmus, true, true).ok())
        .flatten();
    let mut out = Vec::new();
    for e in &platform.events {
        let (specs, why_not) = match &resolved {
            Some((specs, notes)) => {
                let mine: Vec<CounterSpec> = specs
                    .iter()
                    .filter(|s| s.name == e.name || s.name.strip_suffix(e.name.as_str()).is_some_and(|p| p.ends_with('/')))
                    .cloned()
                    .collect();
                let why = notes
                    .iter()
                    .find(|n| n.starts_with(&format!("{}: ", e.name)))
                    .map(|n| n[e.name.len() + 2..].to_string());
                (mine, why)
            }
            None => without_core_pmu(e, pmus),
        };
        // Tried once: the first instance stands for its siblings.
        match specs.first() {
            Some(spec) => {
                let result = probe.open(spec);
                let counts_dram = matches!(spec.scope, Scope::Uncore { .. }) && spec.quantity.starts_with("bytes.dram");
                let traffic_count = (result.is_ok() && counts_dram)
                    .then(|| probe.count_dram_traffic(spec, TRAFFIC_BYTES).ok())
                    .flatten();
                out.push(EventTrial {
                    event: e.name.clone(),
                    pmu: spec.pmu.clone(),
                    quantity: e.quantity.clone(),
                    optional: e.optional,
                    type_: Some(spec.type_),
                    config: Some(format!("{:#x}", spec.config)),
                    outcome: if result.is_ok() { Outcome::Opened } else { Outcome::Failed },
                    errno: result.err().map(|e| format!("{e:?}")),
                    message: result.err().map(|e| e.desc().to_string()),
                    traffic_count,
                });
            }
            None => out.push(EventTrial {
                event: e.name.clone(),
                pmu: e.pmu.clone(),
                quantity: e.quantity.clone(),
                optional: e.optional,
                type_: None,
                config: None,
                outcome: Outcome::NotTried,
                errno: None,
                message: Some(why_not.unwrap_or_else(|| "not resolved for this machine".into())),
                traffic_count: None,
            }),
        }
    }
    out
}

/// An event as the kernel would see it on a machine without a core PMU: core events as
/// `perf stat -e rXXXX` (or the generic event) opens them, which such a kernel refuses with
/// its own errno; uncore events on their PMU when it exists.
fn without_core_pmu(e: &EventSpec, pmus: &Path) -> (Vec<CounterSpec>, Option<String>) {
    let alias = e.perf_name.as_deref().and_then(perf::split_perf_name).map(|(_, t)| t);
    let spec = |pmu: &str, type_: u32, config: [u64; 2], scope: Scope| CounterSpec::for_event(e, e.name.clone(), pmu, type_, config, scope);
    if e.pmu == "cpu" || e.pmu == "cpu_core" {
        let s = match alias.and_then(perf::generic_hw_event) {
            Some(id) => spec(&e.pmu, PERF_TYPE_HARDWARE, [id, 0], Scope::Core),
            None => spec(&e.pmu, PERF_TYPE_RAW, [perf::raw_config(e), e.config1], Scope::Core),
        };
        return (vec![s], None);
    }
    let Some(inst) = perf::pmu_instances(pmus, &e.pmu).into_iter().next() else {
        return (vec![], Some(format!("PMU {} not present on this machine", e.pmu)));
    };
    let type_ = match perf::pmu_type(pmus, &inst) {
        Ok(t) => t,
        Err(err) => return (vec![], Some(first_line(&err.to_string()))),
    };
    let config = match alias {
        Some(a) => match perf::sysfs_alias_config(&pmus.join(&inst), a) {
            Ok([c, c1, _]) => [c, c1],
            Err(err) => return (vec![], Some(first_line(&err.to_string()))),
        },
        None => [perf::raw_config(e), e.config1],
    };
    let mask = std::fs::read_to_string(pmus.join(&inst).join("cpumask")).unwrap_or_default();
    let cpus = perf::parse_cpu_list(&mask).filter(|c| !c.is_empty()).unwrap_or_else(|| vec![0]);
    (vec![spec(&inst, type_, config, Scope::Uncore { cpus })], None)
}

/// What the verdicts share.
struct Env<'a, 'b> {
    inputs: &'a Inputs<'b>,
    core: Option<&'a str>,
    paranoid: Option<i64>,
    /// CAP_PERFMON or CAP_SYS_ADMIN in the effective set.
    perfmon: bool,
    events: &'a [EventTrial],
}

const PARANOID_FIX: &str = "`sudo sysctl kernel.perf_event_paranoid=1` (0 for uncore; persist it in /etc/sysctl.d/), or grant CAP_PERFMON: `sudo setcap cap_perfmon+ep $(which roofline)`";

fn cap(name: &str, verdict: Verdict, cause: impl Into<String>, fix: Option<String>) -> Capability {
    Capability {
        name: name.into(),
        verdict,
        cause: cause.into(),
        fix,
    }
}

fn errno_text(e: &Errno) -> String {
    format!("{e:?}: {}", e.desc())
}

impl Env<'_, '_> {
    fn paranoid_text(&self) -> String {
        match self.paranoid {
            Some(l) => format!("perf_event_paranoid {l}{}", if self.perfmon { ", CAP_PERFMON held" } else { "" }),
            None => "perf_event_paranoid unreadable".into(),
        }
    }

    /// Why the kernel refused an event, from its errno and the settings.
    fn refusal(&self, e: &Errno, system_wide: bool) -> (String, Option<String>) {
        match e {
            Errno::EACCES | Errno::EPERM => {
                let need = if system_wide { 0 } else { 2 };
                let why = match self.paranoid {
                    Some(l) if l >= 3 && !self.perfmon => {
                        format!("perf_event_paranoid is {l}: this kernel refuses every perf event to processes without CAP_PERFMON")
                    }
                    Some(l) if l > need && !self.perfmon => {
                        format!("perf_event_paranoid is {l}: system-wide events need {need} or CAP_PERFMON")
                    }
                    _ => format!("refused ({}), {}", errno_text(e), self.paranoid_text()),
                };
                (why, Some(PARANOID_FIX.into()))
            }
            _ => (format!("the kernel refused it ({})", errno_text(e)), None),
        }
    }

    fn platform(&self) -> Capability {
        match &self.inputs.platform {
            Some(p) => cap(
                "platform",
                Verdict::Available,
                format!(
                    "{} ({}), {}: {} events in its table",
                    p.key,
                    p.name,
                    if self.inputs.platform_from_option {
                        "from --platform"
                    } else {
                        "identified by CPUID"
                    },
                    p.events.len()
                ),
                None,
            ),
            None => cap(
                "platform",
                Verdict::Limited,
                "no platform table describes this CPU: a generic model, no FP or cache event known",
                Some(
                    "pass `--platform NAME` (the closest microarchitecture in platforms/) or `--platform FILE.toml` with its [[events]]"
                        .into(),
                ),
            ),
        }
    }

    fn software(&self) -> Capability {
        let Some(spec) = CounterSpec::software("task-clock") else {
            return cap("perf.software", Verdict::Unavailable, "task-clock unknown", None);
        };
        match self.inputs.probe.open(&spec) {
            Ok(()) => cap(
                "perf.software",
                Verdict::Available,
                format!("task-clock opens ({})", self.paranoid_text()),
                None,
            ),
            Err(e) => {
                let (cause, fix) = self.refusal(&e, false);
                cap("perf.software", Verdict::Unavailable, format!("task-clock: {cause}"), fix)
            }
        }
    }

    /// The fix for a machine without a core PMU: where the VM's vPMU is switched on.
    fn vpmu_fix(&self) -> String {
        let vm = match self.inputs.hypervisor.as_deref() {
            Some(h) if h.contains("KVM") => {
                "this is a KVM guest: start it with the vPMU on (QEMU `-cpu host,pmu=on`, libvirt `<pmu state='on'/>`; on a cloud, a bare-metal or PMU-exposing instance type)"
            }
            Some(h) if h.contains("VMware") => {
                "this is a VMware guest: enable \"Virtualize CPU performance counters\" (vhv/vpmc.enable = TRUE) in the VM's CPU settings"
            }
            Some(h) if h.contains("Microsoft") || h.contains("HyperV") => {
                "this is a Hyper-V guest: `Set-VMProcessor -Perfmon @(\"ipebs\",\"pmu\")` on the host (Windows Server 2022 / Azure: only some VM sizes)"
            }
            Some(h) if h.contains("Xen") => "this is a Xen guest: boot the domain with `vpmu=on` (Xen command line) ",
            Some(_) => "this is a virtual machine: enable the hypervisor's virtual PMU (vPMU)",
            None => {
                "the kernel registered no core PMU: check `dmesg | grep -i perf` (a kernel without CONFIG_PERF_EVENTS hardware support, or a VM the CPUID does not reveal)"
            }
        };
        format!("{vm}; meanwhile `--backend trace` measures W exactly and Q through the cache simulator")
    }

    fn trials_on(&self, pred: impl Fn(&EventTrial) -> bool) -> Vec<&EventTrial> {
        self.events.iter().filter(|t| pred(t)).collect()
    }

    fn core_events(&self) -> Capability {
        let Some(core) = self.core else {
            let present: Vec<String> = std::fs::read_dir(self.inputs.pmus())
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default();
            return cap(
                "perf.core",
                Verdict::Unavailable,
                format!(
                    "no hardware core PMU: {} has only [{}]{}",
                    self.inputs.pmus().display(),
                    present.join(", "),
                    self.inputs
                        .hypervisor
                        .as_deref()
                        .map(|h| format!(" (hypervisor {h})"))
                        .unwrap_or_default()
                ),
                Some(self.vpmu_fix()),
            );
        };
        if let Err(e) = self.inputs.probe.open(&CounterSpec::cycles()) {
            let (cause, fix) = self.refusal(&e, false);
            let fix = fix.or_else(|| {
                Some(match self.inputs.hypervisor {
                    Some(_) => self.vpmu_fix(),
                    // The PMU is registered: not a missing vPMU, a driver that does not know this CPU.
                    None => format!(
                        "the kernel registered PMU {core} but refuses the generic cycles event: check `dmesg | grep -i perf` (a PMU driver older than this CPU, or a VM the CPUID does not reveal); meanwhile `--backend trace` measures W exactly and Q through the cache simulator"
                    ),
                })
            });
            return cap(
                "perf.core",
                Verdict::Unavailable,
                format!("PMU {core} present, but cycles: {cause}"),
                fix,
            );
        }
        let scope = match self.paranoid {
            Some(2..) if !self.perfmon => "user-space counts only",
            _ => "user and kernel counts",
        };
        if self.inputs.platform.is_none() {
            return cap(
                "perf.core",
                Verdict::Limited,
                format!("PMU {core}: cycles opens ({scope}), but no platform table names this CPU's FP and cache events"),
                Some("pass `--platform NAME|FILE` (see `roofline machine`)".into()),
            );
        }
        let core_trials = self.trials_on(|t| t.pmu == "cpu" || t.pmu == "cpu_core" || t.pmu == "cpu_atom");
        let failed: Vec<&&EventTrial> = core_trials.iter().filter(|t| t.outcome != Outcome::Opened).collect();
        if failed.is_empty() {
            return cap(
                "perf.core",
                Verdict::Available,
                format!(
                    "PMU {core}: all {} core events of the platform table open ({scope})",
                    core_trials.len()
                ),
                None,
            );
        }
        let names: Vec<String> = failed
            .iter()
            .map(|t| format!("{} ({})", t.event, t.errno.as_deref().unwrap_or("not tried")))
            .collect();
        let any_refused = failed.iter().any(|t| matches!(t.errno.as_deref(), Some("EACCES" | "EPERM")));
        let fix = if any_refused {
            PARANOID_FIX.to_string()
        } else {
            "check that the platform matches this CPU (`roofline machine`), or pass `--platform NAME|FILE`; a vPMU may expose only architectural events".to_string()
        };
        cap(
            "perf.core",
            if failed.len() == core_trials.len() {
                Verdict::Unavailable
            } else {
                Verdict::Limited
            },
            format!(
                "PMU {core}: cycles opens, but {} of {} platform core events fail: {}",
                failed.len(),
                core_trials.len(),
                names.join(", ")
            ),
            Some(fix),
        )
    }

    /// One capability per memory PMU family present or named by the platform table.
    fn uncore(&self) -> Vec<Capability> {
        let pmus = self.inputs.pmus();
        let mut families: BTreeSet<String> = std::fs::read_dir(&pmus)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .map(|n| family_of(&n).to_string())
                    .filter(|f| MEMORY_PMUS.iter().any(|m| f.starts_with(m)))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(p) = &self.inputs.platform {
            families.extend(
                p.events
                    .iter()
                    .filter(|e| !["cpu", "cpu_core", "cpu_atom"].contains(&e.pmu.as_str()))
                    .map(|e| e.pmu.clone()),
            );
        }
        if families.is_empty() {
            return vec![cap(
                "perf.uncore",
                Verdict::Unavailable,
                "no uncore memory PMU (uncore_imc, amd_umc, amd_df) in sysfs, and the platform table names none: Q_dram is not counted by perf",
                Some(format!(
                    "uncore PMUs are not virtualised: run on bare metal for DRAM traffic; {}",
                    "`--backend trace` gives DRAM Q through the cache simulator"
                )),
            )];
        }
        let system_wide_ok = self.perfmon || self.paranoid.is_none_or(|l| l <= 0);
        families
            .into_iter()
            .map(|fam| {
                let name = format!("perf.uncore.{fam}");
                let instances = perf::pmu_instances(&pmus, &fam);
                let table = self.inputs.platform.as_ref().map(|p| p.key.as_str()).unwrap_or("generic");
                if instances.is_empty() {
                    let why = if self.core.is_none() || self.inputs.hypervisor.is_some() {
                        "uncore PMUs are not virtualised: run on bare metal"
                    } else if fam == "amd_umc" {
                        "the amd_umc PMU needs Linux 6.6 or later"
                    } else {
                        "load the kernel's uncore driver (intel_uncore / amd_uncore), or check the platform with `roofline machine`"
                    };
                    return cap(
                        &name,
                        Verdict::Unavailable,
                        format!("PMU {fam} not present, but platform {table} counts DRAM traffic on it"),
                        Some(format!("{why}; `--backend trace` gives DRAM Q through the cache simulator")),
                    );
                }
                let trials = self.trials_on(|t| family_of(&t.pmu) == fam);
                if trials.is_empty() {
                    return if system_wide_ok {
                        cap(
                            &name,
                            Verdict::Available,
                            format!("{} instance(s); platform {table} counts no event on it", instances.len()),
                            None,
                        )
                    } else {
                        cap(
                            &name,
                            Verdict::Unavailable,
                            format!(
                                "{} instance(s), but system-wide events need perf_event_paranoid 0 or CAP_PERFMON ({})",
                                instances.len(),
                                self.paranoid_text()
                            ),
                            Some(PARANOID_FIX.into()),
                        )
                    };
                }
                let failed: Vec<&&EventTrial> = trials.iter().filter(|t| t.outcome != Outcome::Opened).collect();
                let read: Vec<&&EventTrial> = trials.iter().filter(|t| t.traffic_count.is_some()).collect();
                if failed.is_empty() && !read.is_empty() && read.iter().all(|t| t.traffic_count == Some(0)) {
                    // Opens, counts nothing: the cloud VM's uncore that reads zero.
                    return cap(
                        &name,
                        Verdict::Unavailable,
                        format!(
                            "{} instance(s); all {} events of platform {table} open, but its DRAM events ({}) read 0 while {} MiB were written and read back",
                            instances.len(),
                            trials.len(),
                            read.iter().map(|t| t.event.as_str()).collect::<Vec<_>>().join(", "),
                            TRAFFIC_BYTES >> 20
                        ),
                        Some(format!(
                            "a PMU exposed without counting (uncore PMUs are not virtualised: run on bare metal), or events this CPU does not count (check `--platform`); {}",
                            "`--backend trace` gives DRAM Q through the cache simulator"
                        )),
                    );
                }
                if failed.is_empty() {
                    return cap(
                        &name,
                        Verdict::Available,
                        format!("{} instance(s); all {} events of platform {table} open", instances.len(), trials.len()),
                        None,
                    );
                }
                let refused = failed.iter().find_map(|t| match t.errno.as_deref() {
                    Some("EACCES") => Some(Errno::EACCES),
                    Some("EPERM") => Some(Errno::EPERM),
                    _ => None,
                });
                let (cause, fix) = match refused {
                    Some(e) => self.refusal(&e, true),
                    None => {
                        let names: Vec<String> = failed
                            .iter()
                            .map(|t| format!("{} ({})", t.event, t.errno.as_deref().or(t.message.as_deref()).unwrap_or("?")))
                            .collect();
                        (
                            format!("{} of {} events fail: {}", failed.len(), trials.len(), names.join(", ")),
                            Some("check the platform against this CPU (`roofline machine`, `--platform`); the kernel's uncore driver may name these events differently".into()),
                        )
                    }
                };
                cap(
                    &name,
                    if failed.len() == trials.len() { Verdict::Unavailable } else { Verdict::Limited },
                    format!("{} instance(s): {cause}", instances.len()),
                    fix,
                )
            })
            .collect()
    }

    fn rdpmc(&self) -> Capability {
        let Some(core) = self.core else {
            return cap(
                "perf.rdpmc",
                Verdict::Unavailable,
                "no core PMU: no counter to read",
                Some("see perf.core".into()),
            );
        };
        let file = format!("{PMUS}/{core}/rdpmc");
        match self.inputs.read_int(&file) {
            Some(0) => cap(
                "perf.rdpmc",
                Verdict::Limited,
                format!("/{file} is 0: region reads take a read() system call each"),
                Some(format!("`echo 1 | sudo tee /{file}`")),
            ),
            Some(1) => cap(
                "perf.rdpmc",
                Verdict::Available,
                "rdpmc allowed for counters this process opened (rdpmc 1)",
                None,
            ),
            Some(v) => cap("perf.rdpmc", Verdict::Available, format!("rdpmc allowed (rdpmc {v})"), None),
            None => cap(
                "perf.rdpmc",
                Verdict::Limited,
                format!("/{file} absent: region reads fall back to read() where the kernel refuses the mapping"),
                None,
            ),
        }
    }

    fn watchdog(&self) -> Capability {
        let amd = self.inputs.platform.as_ref().is_some_and(|p| p.identify.vendor == "AuthenticAMD");
        match self.inputs.read_int("proc/sys/kernel/nmi_watchdog") {
            Some(0) => cap(
                "perf.nmi_watchdog",
                Verdict::Available,
                "NMI watchdog off: every core counter is free",
                None,
            ),
            Some(_) if self.core.is_none() => cap(
                "perf.nmi_watchdog",
                Verdict::Available,
                "NMI watchdog on, but there is no core PMU whose counter it could hold",
                None,
            ),
            Some(_) => cap(
                "perf.nmi_watchdog",
                Verdict::Limited,
                format!(
                    "NMI watchdog on: it holds {} on every CPU, so groups have one counter less",
                    if amd {
                        "a general-purpose counter"
                    } else {
                        "the fixed cycles counter (Intel; cycles moves to a general-purpose one)"
                    }
                ),
                Some("`sudo sysctl kernel.nmi_watchdog=0` (persist with `nmi_watchdog=0` on the kernel command line)".into()),
            ),
            None => cap(
                "perf.nmi_watchdog",
                Verdict::Available,
                "no NMI watchdog (/proc/sys/kernel/nmi_watchdog absent)",
                None,
            ),
        }
    }

    fn trace(&self) -> Capability {
        let scope = self.inputs.read_int("proc/sys/kernel/yama/ptrace_scope");
        let seccomp = self.inputs.status_field("Seccomp").and_then(|s| s.parse::<u32>().ok());
        let ptrace_cap = self.inputs.has_cap(CAP_SYS_PTRACE);
        let facts = format!(
            "Yama ptrace_scope {}, seccomp {}, CAP_SYS_PTRACE {}",
            scope.map(|s| s.to_string()).unwrap_or_else(|| "absent".into()),
            match seccomp {
                Some(0) | None => "off",
                Some(1) => "strict",
                Some(_) => "filter",
            },
            if ptrace_cap { "held" } else { "not held" }
        );
        match self.inputs.probe.trace() {
            Ok(()) => cap("trace", Verdict::Available, format!("a traced child starts ({facts})"), None),
            Err(msg) => {
                let (why, fix) = match scope {
                    Some(3) => (
                        "Yama ptrace_scope is 3: ptrace is disabled until reboot".to_string(),
                        "set `kernel.yama.ptrace_scope = 1` in /etc/sysctl.d/ and reboot (3 cannot be lowered at run time); or use `--backend perf`".to_string(),
                    ),
                    Some(2) if !ptrace_cap => (
                        "Yama ptrace_scope is 2: only processes with CAP_SYS_PTRACE may trace".to_string(),
                        "`sudo sysctl kernel.yama.ptrace_scope=1`, or `sudo setcap cap_sys_ptrace+ep $(which roofline)`".to_string(),
                    ),
                    _ if seccomp.is_some_and(|s| s >= 1) => (
                        format!(
                            "a seccomp filter refuses ptrace{}",
                            if self.inputs.in_container() { " (the container runtime's profile)" } else { "" }
                        ),
                        "run the container with `--cap-add SYS_PTRACE` (Docker's default profile then allows ptrace) or `--security-opt seccomp=unconfined`".to_string(),
                    ),
                    _ if self.inputs.in_container() && !ptrace_cap => (
                        "a container without CAP_SYS_PTRACE".to_string(),
                        "run the container with `--cap-add SYS_PTRACE`".to_string(),
                    ),
                    _ => (
                        "ptrace refused".to_string(),
                        "check the security modules (AppArmor, SELinux: `deny_ptrace`) of this system; or use `--backend perf`".to_string(),
                    ),
                };
                cap("trace", Verdict::Unavailable, format!("{why}: {msg} ({facts})"), Some(fix))
            }
        }
    }

    fn gpu(&self) -> Capability {
        let driver = self.inputs.root.join("proc/driver/nvidia");
        if !driver.is_dir() {
            return cap(
                "gpu",
                Verdict::Unavailable,
                "no NVIDIA driver (/proc/driver/nvidia absent)",
                Some("GPU reports need an NVIDIA GPU and its driver; CPU measurements do not".into()),
            );
        }
        let gpus = std::fs::read_dir(driver.join("gpus")).map(|d| d.count()).unwrap_or(0);
        let ncu = self.inputs.path.iter().map(|d| d.join("ncu")).find(|f| f.is_file());
        let admin_only = self
            .inputs
            .read("proc/driver/nvidia/params")
            .and_then(|p| {
                p.lines()
                    .find_map(|l| l.strip_prefix("RmProfilingAdminOnly:").map(|v| v.trim() == "1"))
            })
            .unwrap_or(false);
        let admin = self.inputs.has_cap(CAP_SYS_ADMIN);
        let mut limits = Vec::new();
        let mut fixes = Vec::new();
        if ncu.is_none() {
            limits.push("ncu (Nsight Compute) is not on PATH: `roofline gpu measure` cannot count".to_string());
            fixes.push("install Nsight Compute or add its folder (e.g. /usr/local/cuda/bin) to PATH".to_string());
        }
        if admin_only && !admin {
            limits.push("GPU counters are admin-only (RmProfilingAdminOnly: 1): ncu fails with ERR_NVGPUCTRPERM".to_string());
            fixes.push(
                "run as root, or add `options nvidia NVreg_RestrictProfilingToAdminUsers=0` to /etc/modprobe.d/ and reload the driver"
                    .to_string(),
            );
        }
        let head = format!("NVIDIA driver, {gpus} GPU(s)");
        if limits.is_empty() {
            let ncu = ncu.map(|p| p.display().to_string()).unwrap_or_default();
            return cap("gpu", Verdict::Available, format!("{head}; ncu at {ncu}; counters readable"), None);
        }
        cap(
            "gpu",
            Verdict::Limited,
            format!("{head}; {}", limits.join("; ")),
            Some(fixes.join("; ")),
        )
    }
}

/// `uncore_imc_3` → `uncore_imc`, `amd_df` → `amd_df`: the PMU without its instance number.
fn family_of(pmu: &str) -> &str {
    match pmu.rsplit_once('_') {
        Some((head, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => head,
        _ => pmu,
    }
}

/// The capabilities and event trials as a table for a terminal.
pub fn render(d: &Diagnosis) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if let Some(note) = &d.simulated_pmu {
        let _ = writeln!(s, "{note}");
    }
    let _ = writeln!(
        s,
        "platform: {}{}",
        d.platform.as_deref().unwrap_or("none (generic)"),
        d.hypervisor.as_deref().map(|h| format!("; hypervisor {h}")).unwrap_or_default()
    );
    let width = d.capabilities.iter().map(|c| c.name.len()).max().unwrap_or(8);
    for c in &d.capabilities {
        let _ = writeln!(s, "{:width$}  {:11}  {}", c.name, c.verdict.to_string(), c.cause);
        if let Some(f) = &c.fix {
            let _ = writeln!(s, "{:width$}  {:11}  fix: {f}", "", "");
        }
    }
    if !d.events.is_empty() {
        let opened = d.events.iter().filter(|t| t.outcome == Outcome::Opened).count();
        let _ = writeln!(
            s,
            "\nplatform events ({}): {opened} of {} open",
            d.platform.as_deref().unwrap_or("?"),
            d.events.len()
        );
        let ew = d.events.iter().map(|t| t.event.len()).max().unwrap_or(8);
        let pw = d.events.iter().map(|t| t.pmu.len()).max().unwrap_or(4);
        for t in &d.events {
            let result = match t.outcome {
                Outcome::Opened => match t.traffic_count {
                    Some(n) => format!("opened; counted {n} over {} MiB of traffic", TRAFFIC_BYTES >> 20),
                    None => "opened".to_string(),
                },
                Outcome::Failed => format!(
                    "{} ({})",
                    t.errno.as_deref().unwrap_or("failed"),
                    t.message.as_deref().unwrap_or_default()
                ),
                Outcome::NotTried => format!("not tried: {}", t.message.as_deref().unwrap_or_default()),
            };
            let _ = writeln!(s, "  {:ew$}  {:pw$}  {result}", t.event, t.pmu);
        }
    }
    let _ = writeln!(s, "\n`measure --backend auto` uses here: {}", d.auto_backend);
    s
}

#[cfg(test)]
mod tests;
