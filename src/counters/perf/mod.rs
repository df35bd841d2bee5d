//! The perf_event backend: event descriptions → `perf_event_attr` → fd groups the kernel can
//! schedule → `read_format` parsing → multiplex scaling → W, Q and T.
//!
//! perf-event2 opens, enables and reads the counters; this module decides *what* to open
//! (raw configs, dynamic PMU types, groups that respect counter constraints, uncore instances
//! on the CPU named by their `cpumask`) and turns counts into a [`Measurement`](super::Measurement).
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
//!
//! One room per concern, each re-exported here:
//! - `sysfs`: the PMUs the kernel lists (types, instances and their CPUs, formats, aliases);
//! - `access`: what `perf_event_paranoid` and the capabilities allow, and why an open failed;
//! - `platform`: a platform table's events as counters here, the counters one CPU has, the
//!   NMI watchdog's claim on one, the software events;
//! - `plan`: groups the kernel can schedule at once;
//! - `group`: opening, enabling and reading groups (`read()` or rdpmc), scaling;
//! - `formulas`: W, Q and T from the counts;
//! - `run`: a command under the counters, the idle baseline, exit statuses;
//! - `stat_import`: `perf stat -x,` output measured elsewhere.

use std::path::Path;

use perf_event::events::{Raw, Software};
use perf_event::{Builder, ReadFormat};

use crate::machine::EventSpec;

mod access;
mod formulas;
mod group;
mod plan;
mod platform;
#[cfg(feature = "trace")]
mod run;
#[cfg(feature = "analysis")]
pub mod stat_import;
#[cfg(feature = "cli")]
mod stat_plan;
mod sysfs;
#[cfg(test)]
mod tests;

pub use access::{can_open, check_paranoid, has_cap_perfmon, kernel_counting_allowed, open_error, paranoid};
#[cfg(feature = "trace")]
pub use formulas::multiplex_warnings;
pub use formulas::to_measurement;
#[cfg(any(test, feature = "analysis"))]
pub use group::parse_group_read;
pub use group::{CounterSet, CounterSource, EventCount, RawCount, Scaled, Target, scale};
pub use plan::{FIXED_COUNTER_BASE, plan_groups};
pub use platform::{
    ECORE_CYCLES, core_counters, core_counters_for, counters_for_platform, generic_hw_event, identify_platform, nmi_watchdog_on,
    raw_config, resolve_platform_events, software_events,
};
#[cfg(feature = "trace")]
pub use run::{idle_baseline, run_command};
#[cfg(feature = "cli")]
pub use stat_plan::PerfStatPlan;
pub use sysfs::{SYSFS_PMUS, core_pmu, parse_cpu_list, pmu_instances, pmu_type, split_perf_name, sysfs_alias_config};

/// Every group we open reads as one record (`PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED
/// | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID`): a `read()` of the leader returns `nr`,
/// the group's time enabled and time running once (the kernel schedules a group onto the
/// counters all or nothing), then `(value, id)` per member, leader first.
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
    Uncore {
        /// The CPUs to open it on.
        cpus: Vec<usize>,
    },
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
    /// `perf_event_attr.config`: the event's encoding for its PMU.
    pub config: u64,
    /// `perf_event_attr.config1` (extra event bits: offcore response, load latency).
    pub config1: u64,
    /// How the event is opened.
    pub scope: Scope,
    /// General-purpose counters it may use (`None`: any).
    pub counters: Option<Vec<u32>>,
    /// Takes a pair of adjacent counters (AMD merged events).
    pub paired: bool,
    /// `flops`, `bytes.l2`, …, `cycles`, `seconds.task`, `software`.
    pub quantity: String,
    /// The flop class (`packed256_double`, …) for `flops` events.
    pub class: Option<String>,
    /// What one count is worth in the quantity's unit (flops per instruction, bytes per line).
    pub weight: f64,
    /// Known to miscount on this platform: counted, flagged in the notes.
    pub unreliable: bool,
    /// Why it is unreliable, or what it misses.
    pub caveat: Option<String>,
    /// See `EventSpec::part_of`.
    pub part_of: Option<String>,
}

impl CounterSpec {
    /// Event `e` of a platform table as a counter named `name` on PMU directory `pmu`. How the
    /// kernel opens it is the caller's: `type_` is the PMU that `perf_event_attr.type` names
    /// (`PERF_TYPE_HARDWARE` for a generic event whose encoding and counter the kernel picks,
    /// `PERF_TYPE_RAW` or the core PMU's own number for a raw `config`, a dynamic PMU's number
    /// from its sysfs `type` file), `config` is `[config, config1]` in that PMU's format, and
    /// `scope` says per task or per CPU. What the count means is the table's: quantity, class,
    /// weight, the counters it may use, pairing and caveats.
    pub fn for_event(e: &EventSpec, name: String, pmu: &str, type_: u32, config: [u64; 2], scope: Scope) -> CounterSpec {
        CounterSpec {
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
        }
    }

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
