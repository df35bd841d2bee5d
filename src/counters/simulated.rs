//! The simulated PMU: a test instrument that stands in for the perf_event groups on
//! machines without a hardware PMU (CI's VMs), so the perf path — event tables, groups,
//! multiplex scaling, the event → W/Q formulas of [`perf::to_measurement`], validation — runs
//! end to end there, and so that the ways real counters lie can be injected and must come out
//! as the right verdict and message.
//!
//! Its counts are not invented: the core FP events count the trace backend's exact per-class
//! flops of the same run (each event the classes its `class` covers, divided by its weight),
//! the FMA (MAC) events its FMA flops where they are known for the event's class (the traced
//! work is all in that class, or none of it is; else the event is not counted),
//! `instructions` the traced instructions, the L2/L3/DRAM events the cache simulator's bytes
//! of the same trace (memory mode), each ÷ its weight. Where several events share one quantity
//! (read and write CAS counts, several channels) the exact total is split among them. Events
//! with no exact source (cycles, reference cycles) are left out and said.
//!
//! Faults (`ROOFLINE_SIMULATED_PMU`, comma-separated; SEL is an event name, a flop class key
//! such as `packed256_double`, a level `l2`/`l3`/`dram`, `flops`, `fma` (the MAC events), or
//! `uncore`):
//! - `SEL*F`: the event counts F times the truth (LIKWID's 50 %-off Zen 5 group: `flops*0.5`);
//! - `SEL=enoent`, `SEL=einval`: perf_event_open fails with that errno;
//! - `SEL=zero`: the event opens and reads zero (a VM's uncore PMU);
//! - `mux=R`: every core group is on a counter R of the time (time_running < time_enabled);
//! - `watchdog`: the NMI watchdog holds a general-purpose counter (fewer counters, so the
//!   groups multiplex).
//!
//! It is selected explicitly (`--backend simulated`, `Backend::Simulated`), never by `auto`,
//! and every measurement it makes says "simulated" in its provenance and notes.

use std::collections::BTreeMap;
use std::io;

use crate::counters::Measurement;
use crate::counters::cachesim::CacheHierarchy;
use crate::counters::command::CommandSpec;
use crate::counters::perf::{self, CounterSource, CounterSpec, EventCount, RawCount, Scope};
use crate::counters::trace::{self, AccessKind, AccessSink, TraceMode};
use crate::error::{Error, Result};
use crate::machine::Platform;
use crate::schema::Source;

/// The environment variable holding the fault spec.
pub const FAULTS_ENV: &str = "ROOFLINE_SIMULATED_PMU";

/// `perf_event_attr.type` the simulated PMU gives its core events (no real PMU has it).
const SIMULATED_CORE_TYPE: u32 = 0x5100;
/// … and its uncore events.
const SIMULATED_UNCORE_TYPE: u32 = 0x5101;

/// Which events a fault hits.
#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// An event by name (case-insensitive; an uncore event also by `pmu/name`).
    Event(String),
    /// FP events of one class (`packed256_double`, `any_precision`, …).
    Class(String),
    /// Byte events of a level: `l2`, `l3`, `dram`.
    Level(String),
    /// Every FP event (of W: `flops`).
    Flops,
    /// Every FMA event (`flops.fma`, AMD's MAC umasks).
    Fma,
    /// Every uncore (system-wide) event.
    Uncore,
}

impl Selector {
    fn parse(s: &str) -> Selector {
        let l = s.trim().to_ascii_lowercase();
        match l.as_str() {
            "flops" => Selector::Flops,
            "fma" => Selector::Fma,
            "uncore" => Selector::Uncore,
            "l2" | "l3" | "dram" => Selector::Level(l),
            _ if crate::kernels::FlopClass::from_key(&l).is_some() => Selector::Class(l),
            _ => Selector::Event(s.trim().to_string()),
        }
    }

    pub fn matches(&self, spec: &CounterSpec) -> bool {
        match self {
            Selector::Event(name) => {
                spec.name.eq_ignore_ascii_case(name) || spec.name.rsplit('/').next().is_some_and(|n| n.eq_ignore_ascii_case(name))
            }
            Selector::Class(c) => spec.quantity == "flops" && spec.class.as_deref() == Some(c.as_str()),
            Selector::Level(l) => spec
                .quantity
                .strip_prefix("bytes.")
                .is_some_and(|q| q == l || q.starts_with(&format!("{l}_"))),
            Selector::Flops => spec.quantity == "flops",
            Selector::Fma => spec.quantity == "flops.fma",
            Selector::Uncore => matches!(spec.scope, Scope::Uncore { .. }),
        }
    }
}

/// One injected fault.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The event counts `factor` × the truth.
    Factor(Selector, f64),
    /// perf_event_open fails with this errno (ENOENT, EINVAL).
    OpenError(Selector, i32),
    /// The event opens and reads zero.
    Zero(Selector),
    /// Core groups are on a counter this fraction of the time.
    Multiplex(f64),
    /// The NMI watchdog holds one general-purpose counter.
    Watchdog,
}

/// The faults of one simulated PMU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults(pub Vec<Fault>);

fn bad_spec(part: &str, why: &str) -> Error {
    Error::input(
        format!("{FAULTS_ENV}: '{part}': {why}"),
        "faults are comma-separated: EVENT*FACTOR, EVENT=enoent|einval|zero, mux=0.5, watchdog (EVENT: a name, a flop class, l2|l3|dram, flops, fma or uncore)",
    )
}

impl Faults {
    /// Parse a fault spec (see the module documentation); empty: no fault.
    pub fn parse(spec: &str) -> Result<Faults> {
        let mut out = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let lower = part.to_ascii_lowercase();
            if lower == "watchdog" {
                out.push(Fault::Watchdog);
            } else if lower == "mux" {
                out.push(Fault::Multiplex(0.5));
            } else if let Some(r) = lower.strip_prefix("mux=") {
                let r: f64 = r.parse().map_err(|_| bad_spec(part, "not a fraction"))?;
                if !(r > 0.0 && r <= 1.0) {
                    return Err(bad_spec(part, "the running fraction must be in (0, 1]"));
                }
                out.push(Fault::Multiplex(r));
            } else if let Some((sel, f)) = part.split_once('*') {
                let f: f64 = f.trim().parse().map_err(|_| bad_spec(part, "not a factor"))?;
                if !(f.is_finite() && f >= 0.0) {
                    return Err(bad_spec(part, "the factor must be finite and not negative"));
                }
                out.push(Fault::Factor(Selector::parse(sel), f));
            } else if let Some((sel, what)) = part.split_once('=') {
                let sel = Selector::parse(sel);
                out.push(match what.trim().to_ascii_lowercase().as_str() {
                    "enoent" => Fault::OpenError(sel, nix::libc::ENOENT),
                    "einval" => Fault::OpenError(sel, nix::libc::EINVAL),
                    "zero" => Fault::Zero(sel),
                    _ => return Err(bad_spec(part, "one of enoent, einval, zero")),
                });
            } else {
                return Err(bad_spec(part, "not a fault"));
            }
        }
        Ok(Faults(out))
    }

    /// The faults of `ROOFLINE_SIMULATED_PMU` (none when unset).
    pub fn from_env() -> Result<Faults> {
        match std::env::var(FAULTS_ENV) {
            Ok(s) => Faults::parse(&s),
            Err(_) => Ok(Faults::default()),
        }
    }

    /// The spec as given back (for notes).
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        let sel = |s: &Selector| match s {
            Selector::Event(n) => n.clone(),
            Selector::Class(c) | Selector::Level(c) => c.clone(),
            Selector::Flops => "flops".into(),
            Selector::Fma => "fma".into(),
            Selector::Uncore => "uncore".into(),
        };
        self.0
            .iter()
            .map(|f| match f {
                Fault::Factor(s, x) => format!("{}*{x}", sel(s)),
                Fault::OpenError(s, e) => format!("{}={:?}", sel(s), nix::errno::Errno::from_raw(*e)).to_lowercase(),
                Fault::Zero(s) => format!("{}=zero", sel(s)),
                Fault::Multiplex(r) => format!("mux={r}"),
                Fault::Watchdog => "watchdog".into(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    fn open_error(&self, spec: &CounterSpec) -> Option<i32> {
        self.0.iter().find_map(|f| match f {
            Fault::OpenError(s, e) if s.matches(spec) => Some(*e),
            _ => None,
        })
    }

    fn watchdog(&self) -> bool {
        self.0.contains(&Fault::Watchdog)
    }

    fn multiplex(&self) -> Option<f64> {
        self.0.iter().find_map(|f| match f {
            Fault::Multiplex(r) => Some(*r),
            _ => None,
        })
    }

    /// What `spec` reads for a true count `truth`.
    fn apply(&self, spec: &CounterSpec, truth: f64) -> f64 {
        let mut v = truth;
        for f in &self.0 {
            match f {
                Fault::Factor(s, x) if s.matches(spec) => v *= x,
                Fault::Zero(s) if s.matches(spec) => v = 0.0,
                _ => {}
            }
        }
        v
    }
}

pub use crate::counters::events::class_covers;

/// The exact quantities of a run the simulated counters count: W by traced class, bytes per
/// level from the cache simulator, instructions, and the run's seconds (time enabled).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Truth {
    pub flops_by_class: BTreeMap<String, f64>,
    /// The part of those flops done by fused multiply-adds (the trace's `flops.fma`), where
    /// known.
    pub fma_flops: Option<f64>,
    /// `l2`, `l3`, `dram` (the cache simulator's levels below L1).
    pub bytes: BTreeMap<String, f64>,
    /// DRAM bytes read (lines filled from memory) and written (write-backs, non-temporal
    /// stores), where the simulator told them apart.
    pub dram_read: Option<f64>,
    pub dram_write: Option<f64>,
    pub instructions: Option<f64>,
    pub seconds: f64,
}

impl Truth {
    /// From a trace measurement (memory mode adds the levels) and the simulator's DRAM split.
    pub fn from_trace(m: &Measurement, dram_split: Option<(f64, f64)>, seconds: f64) -> Truth {
        Truth {
            flops_by_class: m.flops.by_class.clone(),
            fma_flops: m.flops.fma,
            bytes: m
                .bytes
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "core" | "stack" | "l1"))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            dram_read: dram_split.map(|s| s.0),
            dram_write: dram_split.map(|s| s.1),
            instructions: m.extra.instructions.as_ref().and_then(|i| i.as_f64()),
            seconds,
        }
    }

    /// Add another run's (another thread's) truth; seconds are kept, not summed.
    pub fn add(&mut self, o: &Truth) {
        // A run without flops has no FMA flops; unknown in a run with flops: unknown in the sum.
        let known = |t: &Truth| t.fma_flops.or_else(|| t.flops_by_class.values().all(|v| *v == 0.0).then_some(0.0));
        self.fma_flops = match (self.fma_flops, o.fma_flops) {
            (None, None) => None,
            _ => known(self).zip(known(o)).map(|(a, b)| a + b),
        };
        for (k, v) in &o.flops_by_class {
            *self.flops_by_class.entry(k.clone()).or_insert(0.0) += v;
        }
        for (k, v) in &o.bytes {
            *self.bytes.entry(k.clone()).or_insert(0.0) += v;
        }
        let sum = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.dram_read = sum(self.dram_read, o.dram_read);
        self.dram_write = sum(self.dram_write, o.dram_write);
        self.instructions = sum(self.instructions, o.instructions);
        self.seconds = self.seconds.max(o.seconds);
    }

    /// The true value of one quantity for `spec` (before splitting among events and faults);
    /// `None`: the simulator has no exact source for it.
    fn quantity(&self, spec: &CounterSpec) -> Option<f64> {
        match spec.quantity.as_str() {
            "flops" => {
                let class = spec.class.as_deref().unwrap_or("any_precision");
                let f: f64 = self
                    .flops_by_class
                    .iter()
                    .filter(|(c, _)| class_covers(class, c))
                    .map(|(_, v)| v)
                    .sum();
                Some(f / spec.weight.max(f64::MIN_POSITIVE))
            }
            // The FMA flops within the event's class. The trace counts FMA flops in total, not
            // by class: exact where all of the traced FP work is in that class (all of them)
            // or none of it is (none); otherwise unknown, and the event is not counted.
            "flops.fma" => {
                let class = spec.class.as_deref().unwrap_or("any_precision");
                let fp = self
                    .flops_by_class
                    .iter()
                    .filter(|(c, v)| **v > 0.0 && !crate::kernels::FlopClass::key_is_integer(c));
                let (mut inside, mut outside) = (false, false);
                for (c, _) in fp {
                    if class_covers(class, c) {
                        inside = true;
                    } else {
                        outside = true;
                    }
                }
                match (inside, outside) {
                    (false, _) => Some(0.0),
                    (true, false) => self.fma_flops.map(|f| f / spec.weight.max(f64::MIN_POSITIVE)),
                    (true, true) => None,
                }
            }
            "instructions" => self.instructions,
            "bytes.dram_read" => self.dram_read.map(|b| b / spec.weight),
            "bytes.dram_write" => self.dram_write.map(|b| b / spec.weight),
            q => q
                .strip_prefix("bytes.")
                .map(|l| self.bytes.get(l).copied().unwrap_or(0.0) / spec.weight),
        }
    }
}

/// Whether the simulator can give `spec` an exact count.
fn simulable(spec: &CounterSpec) -> bool {
    matches!(spec.quantity.as_str(), "flops" | "flops.fma" | "instructions") || spec.quantity.starts_with("bytes.")
}

/// The simulated PMU of one platform, with its faults.
#[derive(Debug, Clone)]
pub struct SimulatedPmu {
    /// The platform whose events it offers.
    pub platform: Platform,
    /// What it gets wrong on purpose.
    pub faults: Faults,
}

/// The counters a simulated PMU offers: the specs, the general-purpose counters per core, and
/// the notes (what is left out, the faults).
pub type Selection = (Vec<CounterSpec>, u32, Vec<String>);

impl SimulatedPmu {
    /// A simulated PMU of `platform` with `faults`.
    pub fn new(platform: Platform, faults: Faults) -> SimulatedPmu {
        SimulatedPmu { platform, faults }
    }

    /// The identified platform (or `platform`, a `--platform` NAME|FILE) with the faults of
    /// `ROOFLINE_SIMULATED_PMU`.
    pub fn from_env(platform: Option<&str>) -> Result<SimulatedPmu> {
        let platform = crate::counters::platform(platform)?;
        Ok(SimulatedPmu::new(platform, Faults::from_env()?))
    }

    /// The note every simulated measurement carries.
    pub fn note(&self) -> String {
        format!(
            "SIMULATED PMU (a test instrument, not hardware counters): platform {} events counting a trace of the same run (W exact per class, L2/L3/DRAM bytes from the cache simulator); injected faults: {}",
            self.platform.key,
            self.faults.describe()
        )
    }

    /// The platform's events as this PMU offers them, like [`perf::counters_for_platform`]
    /// does on a real machine: core events on a core PMU, each uncore event once (one
    /// simulated instance on CPU 0). Events with no exact source are left out with a note.
    pub fn counters(&self, with_optional: bool, with_uncore: bool) -> Result<Selection> {
        let mut specs = Vec::new();
        let mut notes = vec![self.note()];
        let mut left_out = Vec::new();
        for e in self.platform.events.iter().filter(|e| with_optional || !e.optional) {
            let core = crate::counters::events::is_core_pmu(&e.pmu);
            if !core && !with_uncore {
                continue;
            }
            let spec = CounterSpec::for_event(
                e,
                if core { e.name.clone() } else { format!("{}/{}", e.pmu, e.name) },
                &e.pmu,
                if core { SIMULATED_CORE_TYPE } else { SIMULATED_UNCORE_TYPE },
                [perf::raw_config(e), e.config1],
                if core { Scope::Core } else { Scope::Uncore { cpus: vec![0] } },
            );
            if simulable(&spec) {
                specs.push(spec);
            } else {
                left_out.push(spec.name);
            }
        }
        if !left_out.is_empty() {
            notes.push(format!(
                "simulated PMU: {} left out (no exact source: the trace counts no time)",
                left_out.join(", ")
            ));
        }
        notes.extend(crate::counters::events::platform_notes(&self.platform));
        if !specs.iter().any(|s| s.quantity == "flops") {
            notes.push(format!(
                "platform {} has no FP operation event: W is not counted (use --backend trace for W)",
                self.platform.key
            ));
        }
        if specs.iter().all(|s| s.scope != Scope::Core) {
            return Err(Error::unavailable(
                format!("platform {} lists no core events for the perf backend", self.platform.key),
                "pass `--platform` with a file that has [[events]], or use `--backend trace`",
            ));
        }
        let mut counters = perf::core_counters_for(&self.platform, true, false);
        if self.faults.watchdog() {
            // On AMD the watchdog's cycles event takes a general-purpose counter; on Intel it
            // takes the fixed cycles counter, and a counted `cycles` then takes a general one.
            counters = counters.saturating_sub(1).max(1);
            notes.push(format!(
                "simulated fault: the NMI watchdog holds a counter: {counters} general-purpose counter(s) left (`sudo sysctl kernel.nmi_watchdog=0` frees it)"
            ));
        }
        Ok((specs, counters, notes))
    }

    /// The errno an open of `spec` fails with (an injected `SEL=enoent|einval`), if any.
    pub fn open_errno(&self, spec: &CounterSpec) -> Option<i32> {
        self.faults.open_error(spec)
    }

    /// Whether a `watchdog` fault is injected (the NMI watchdog holds a counter).
    pub fn watchdog_holds_a_counter(&self) -> bool {
        self.faults.watchdog()
    }

    /// The raw count `spec` (opened alone) reads over a run that moves `bytes` bytes between
    /// the caches and DRAM, half read and half written, in `seconds`: what `roofline doctor`
    /// reads to tell a working uncore PMU from one that reads zero. The faults apply.
    pub fn count_dram_traffic(&self, spec: &CounterSpec, bytes: f64, seconds: f64) -> Result<u64> {
        let mut set = self.open(vec![spec.clone()], &[vec![0]])?;
        let mut truth = Truth {
            seconds,
            dram_read: Some(bytes / 2.0),
            dram_write: Some(bytes / 2.0),
            ..Truth::default()
        };
        truth.bytes.insert("dram".into(), bytes);
        let counts = set.counts_of(&truth)?;
        Ok(counts.first().and_then(|c| c.scaled).map(|s| s.raw).unwrap_or(0))
    }

    /// Lay this PMU out under `pmus` as the kernel lists PMUs in
    /// `/sys/bus/event_source/devices`: the core PMU (`cpu`, or `cpu_core` where the table
    /// names it; user-space rdpmc allowed), `software`, and one instance (`<pmu>_0`, on CPU 0)
    /// of each uncore PMU the table names, with the sysfs aliases of the events it opens by
    /// perf name. The types are the simulated PMU's own (no real PMU has them), so
    /// `perf::resolve_platform_events` resolves the events as on a machine with this PMU.
    pub fn write_sysfs(&self, pmus: &std::path::Path) -> std::io::Result<()> {
        use std::fs;
        let core = if self.platform.events.iter().any(|e| e.pmu == "cpu_core") {
            "cpu_core"
        } else {
            "cpu"
        };
        let write = |rel: &str, text: String| -> std::io::Result<()> {
            let p = pmus.join(rel);
            if let Some(dir) = p.parent() {
                fs::create_dir_all(dir)?;
            }
            fs::write(p, text)
        };
        write(&format!("{core}/type"), format!("{SIMULATED_CORE_TYPE}\n"))?;
        write(&format!("{core}/rdpmc"), "1\n".into())?;
        write("software/type", "1\n".into())?;
        for e in &self.platform.events {
            let instance = if crate::counters::events::is_core_pmu(&e.pmu) {
                if e.pmu != core {
                    continue;
                }
                core.to_string()
            } else {
                let inst = format!("{}_0", e.pmu);
                write(&format!("{inst}/type"), format!("{SIMULATED_UNCORE_TYPE}\n"))?;
                write(&format!("{inst}/cpumask"), "0\n".into())?;
                inst
            };
            // Core events perf knows generically (cycles, instructions) open without an alias.
            if let Some((_, alias)) = e.perf_name.as_deref().and_then(perf::split_perf_name)
                && !(instance == core && perf::generic_hw_event(alias).is_some())
            {
                write(
                    &format!("{instance}/events/{alias}"),
                    format!("config={:#x},config1={:#x}\n", perf::raw_config(e), e.config1),
                )?;
            }
        }
        Ok(())
    }

    /// Open `specs` grouped by `plan`, as [`perf::CounterSet::open`] does: an injected open
    /// fault fails here with the errno's own message.
    pub fn open(&self, specs: Vec<CounterSpec>, plan: &[Vec<usize>]) -> Result<SimulatedCounterSet> {
        for s in &specs {
            if let Some(errno) = self.faults.open_error(s) {
                return Err(perf::open_error(s, &io::Error::from_raw_os_error(errno)));
            }
        }
        // Round-robin multiplexing: with G core groups each is on the counters 1/G of the
        // time (an injected `mux=R` multiplies that); uncore groups have their own counters.
        let core_groups = plan
            .iter()
            .filter(|g| g.first().is_some_and(|&i| specs[i].scope == Scope::Core))
            .count()
            .max(1);
        let mut running = vec![1.0; specs.len()];
        for g in plan {
            for &i in g {
                if specs[i].scope == Scope::Core {
                    running[i] = self.faults.multiplex().unwrap_or(1.0) / core_groups as f64;
                }
            }
        }
        let n = specs.len();
        Ok(SimulatedCounterSet {
            specs,
            running,
            faults: self.faults.clone(),
            acc: vec![RawCount::default(); n],
            enabled: false,
        })
    }

    /// Open each spec alone (validation: one failing event must not hide the others): the
    /// specs that opened, and each one that failed with its error.
    pub fn open_each(&self, specs: &[CounterSpec]) -> (Vec<CounterSpec>, Vec<(String, Error)>) {
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        for s in specs {
            match self.faults.open_error(s) {
                Some(errno) => failed.push((s.name.clone(), perf::open_error(s, &io::Error::from_raw_os_error(errno)))),
                None => ok.push(s.clone()),
            }
        }
        (ok, failed)
    }
}

/// Open simulated counters: readings accumulate what [`count`](Self::count) is given while
/// enabled, as the kernel's counters accumulate what the observed threads do.
#[derive(Debug, Clone)]
pub struct SimulatedCounterSet {
    specs: Vec<CounterSpec>,
    /// Fraction of the enabled time each spec is on a counter.
    running: Vec<f64>,
    faults: Faults,
    acc: Vec<RawCount>,
    enabled: bool,
}

impl SimulatedCounterSet {
    /// Count one run of known truth (only while enabled): each spec gets its quantity, split
    /// evenly among the specs of that quantity, with the faults applied, counted the fraction
    /// of the time its group is on a counter (the raw count the kernel would report).
    pub fn count(&mut self, truth: &Truth) {
        if !self.enabled {
            return;
        }
        let enabled_ns = (truth.seconds * 1e9).round().max(1.0) as u64;
        for (i, s) in self.specs.iter().enumerate() {
            let Some(total) = truth.quantity(s) else {
                // No exact count for this run: enabled, never on a counter — read back as
                // not counted, never as a zero.
                self.acc[i].time_enabled += enabled_ns;
                continue;
            };
            let sharing = self
                .specs
                .iter()
                .filter(|o| o.quantity == s.quantity && o.class == s.class && o.weight == s.weight)
                .count()
                .max(1);
            let value = self.faults.apply(s, total / sharing as f64);
            let running_ns = ((enabled_ns as f64) * self.running[i]).round().clamp(1.0, enabled_ns as f64) as u64;
            // The group counts the events of the time it is said to run (whole nanoseconds),
            // as a counter of evenly spread events does: count × enabled/running is then off
            // by the rounding of the count alone (≤ ½ × enabled/running events), however short
            // the run. Counting `value × running[i]` instead added the rounding of running_ns,
            // an error of value/(2 × running_ns) that grew with the count.
            let on = running_ns as f64 / enabled_ns as f64;
            self.acc[i].value += (value * on).round() as u64;
            self.acc[i].time_enabled += enabled_ns;
            self.acc[i].time_running += running_ns;
        }
    }

    /// The counts of one run of `truth` from a fresh start (command mode: one set per run).
    pub fn counts_of(&mut self, truth: &Truth) -> Result<Vec<EventCount>> {
        self.acc.iter_mut().for_each(|a| *a = RawCount::default());
        self.enabled = true;
        self.count(truth);
        self.enabled = false;
        CounterSource::scaled(self)
    }
}

impl CounterSource for SimulatedCounterSet {
    fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }
    fn enable(&mut self, _only_system_wide: bool) -> Result<()> {
        self.enabled = true;
        Ok(())
    }
    fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()> {
        out.clear();
        out.extend_from_slice(&self.acc);
        Ok(())
    }
}

/// Mark a measurement as the simulated PMU's: `perf` sources become `simulated`, and the
/// note says so (the perf-only notes that do not hold for a simulation are dropped).
pub fn mark_simulated(m: &mut Measurement, pmu: &SimulatedPmu) {
    let prov = m.provenance.get_or_insert_with(Default::default);
    if prov.flops == Some(Source::Perf) {
        prov.flops = Some(Source::Simulated);
    }
    for s in prov.bytes.values_mut() {
        if *s == Source::Perf {
            *s = Source::Simulated;
        }
    }
    prov.notes.retain(|n| !n.starts_with("perf counts are per timed call"));
    // First, where nobody can miss it.
    let note = pmu.note();
    prov.notes.retain(|n| *n != note);
    prov.notes.insert(0, note);
    m.extra.insert(
        "simulated_pmu",
        serde_json::json!({
            "platform": pmu.platform.key,
            "faults": pmu.faults.describe(),
        }),
    );
}

/// A cache hierarchy the tracer feeds and the caller reads afterwards (the DRAM read/write
/// split the simulated PMU's CAS events need).
#[derive(Clone)]
struct SharedHierarchy(std::rc::Rc<std::cell::RefCell<CacheHierarchy>>);

impl AccessSink for SharedHierarchy {
    fn access(&mut self, addr: u64, size: u32, kind: AccessKind) {
        AccessSink::access(&mut *self.0.borrow_mut(), addr, size, kind);
    }
    fn access_by(&mut self, thread: usize, addr: u64, size: u32, kind: AccessKind) {
        AccessSink::access_by(&mut *self.0.borrow_mut(), thread, addr, size, kind);
    }
    fn bytes_per_level(&mut self) -> Vec<(String, f64)> {
        AccessSink::bytes_per_level(&mut *self.0.borrow_mut())
    }
    // The regions' traffic: without it every region's levels read zero.
    fn bytes_so_far(&self) -> Vec<(String, f64)> {
        AccessSink::bytes_so_far(&*self.0.borrow())
    }
    fn note(&self) -> Option<String> {
        AccessSink::note(&*self.0.borrow())
    }
}

/// DRAM bytes read (lines the last level filled) and written (the rest: write-backs and
/// non-temporal stores) at the end of a run.
fn dram_split(h: &CacheHierarchy) -> Option<(f64, f64)> {
    let t = h.traffic_at_exit();
    let dram = *t.bytes.get("dram")? as f64;
    let (_, last) = t.levels.last()?;
    let read = (last.fills * u64::from(t.line_bytes)) as f64;
    Some((read.min(dram), (dram - read).max(0.0)))
}

/// The truth of one command: traced once in memory mode through `hierarchy`.
pub(crate) fn trace_command_truth(cmd: &CommandSpec, hierarchy: CacheHierarchy) -> Result<Measurement> {
    let shared = SharedHierarchy(std::rc::Rc::new(std::cell::RefCell::new(hierarchy)));
    let mut opts = trace::TraceOptions {
        mode: TraceMode::Memory,
        by_function: false,
        sink: Some(Box::new(shared.clone())),
    };
    let m = trace::measure_command(cmd, &mut opts)?;
    let split = dram_split(&shared.0.borrow());
    let mut m = m;
    m.extra.simulated_dram_split = split;
    Ok(m)
}

/// The truth of one call of `work`, traced in a forked child in memory mode through a fresh
/// copy of `hierarchy` (cold caches), with `seconds` as its time.
pub fn trace_work_truth(work: &mut dyn FnMut(), hierarchy: &CacheHierarchy, seconds: f64) -> Result<Truth> {
    let mut h = hierarchy.clone();
    let r = trace::trace_forked_with_sink(work, TraceMode::Memory, false, Some(&mut h))?;
    let m = trace::to_measurement(&r, false);
    Ok(Truth::from_trace(&m, dram_split(&h), seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skx() -> SimulatedPmu {
        SimulatedPmu::new(Platform::load("skx").unwrap(), Faults::default())
    }

    fn truth() -> Truth {
        let mut t = Truth {
            seconds: 0.25,
            instructions: Some(1.0e6),
            ..Truth::default()
        };
        t.flops_by_class.insert("packed256_double".into(), 4.0 * 12_345.0);
        t.flops_by_class.insert("scalar_double".into(), 777.0);
        t.bytes.insert("dram".into(), 64.0 * 1000.0);
        t.dram_read = Some(64.0 * 600.0);
        t.dram_write = Some(64.0 * 400.0);
        t
    }

    fn value(counts: &[EventCount], name: &str) -> Option<f64> {
        counts.iter().find(|c| c.name == name).and_then(|c| c.scaled).map(|s| s.value)
    }

    #[test]
    fn fault_specs_parse_and_bad_ones_are_input_errors() {
        let f = Faults::parse("packed256_double*0.5, dram=zero,FP_ARITH_INST_RETIRED.SCALAR_DOUBLE=enoent,mux=0.25,watchdog").unwrap();
        assert_eq!(f.0.len(), 5);
        assert_eq!(f.0[0], Fault::Factor(Selector::Class("packed256_double".into()), 0.5));
        assert_eq!(f.0[1], Fault::Zero(Selector::Level("dram".into())));
        assert_eq!(f.0[3], Fault::Multiplex(0.25));
        assert!(f.describe().contains("enoent"), "{}", f.describe());
        for bad in ["flops*x", "mux=0", "mux=2", "dram=maybe", "nonsense", "flops*-1"] {
            let e = Faults::parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains(FAULTS_ENV) && e.to_string().contains("hint:"), "{e}");
        }
        assert_eq!(Faults::parse("").unwrap(), Faults::default());
    }

    /// The MAC events count the traced FMA flops where the class split is known (Zen 2–4's
    /// one event covers all FP work; Zen 1's per precision only where the work is of one), and
    /// nothing is invented where it is not.
    #[test]
    fn mac_events_count_the_traced_fma_flops_where_known() {
        let seed = crate::kernels::rng::fresh_seed();
        let mut rng = crate::kernels::rng::Rng::new(seed);
        let dp = 4.0 * (1 + rng.below(100_000)) as f64;
        let fma = 2.0 * rng.below(dp as usize / 2) as f64;
        let mut t = truth();
        t.flops_by_class.clear();
        t.flops_by_class.insert("packed256_double".into(), dp);
        t.fma_flops = Some(fma);
        let zen = |key: &str| SimulatedPmu::new(Platform::load(key).unwrap(), Faults::default());
        let count = |pmu: &SimulatedPmu, t: &Truth, optional: bool| {
            let (specs, counters, _) = pmu.counters(optional, false).unwrap();
            let plan = perf::plan_groups(&specs, counters);
            let counts = pmu.open(specs.clone(), &plan).unwrap().counts_of(t).unwrap();
            (perf::to_measurement(&specs, &counts, vec![t.seconds]), counts)
        };
        // Zen 4, opt-in events: the share; the default events: none.
        let (m, _) = count(&zen("zen4"), &t, true);
        assert_eq!(m.flops.fma, Some(fma), "seed {seed}: {m:?}");
        let (m, _) = count(&zen("zen4"), &t, false);
        assert_eq!(m.flops.fma, None);
        // Zen 1: all the work is double, so the dp MAC event reads it all and the sp one 0.
        let (m, counts) = count(&zen("zen1"), &t, true);
        assert_eq!(m.flops.fma, Some(fma), "seed {seed}");
        assert_eq!(value(&counts, "fp_ret_sse_avx_ops.sp_mult_add_flops"), Some(0.0));
        // Double and single work: the trace does not split FMA flops by precision, so neither
        // Zen 1 MAC event has an exact count: not counted, no share.
        t.flops_by_class.insert("scalar_single".into(), 10.0);
        let (m, counts) = count(&zen("zen1"), &t, true);
        assert_eq!(m.flops.fma, None, "{counts:?}");
        assert_eq!(value(&counts, "fp_ret_sse_avx_ops.dp_mult_add_flops"), None);
        // …while Zen 4's covers both.
        assert_eq!(count(&zen("zen4"), &t, true).0.flops.fma, Some(fma));
        // Unknown FMA flops (a truth not from a trace): not counted.
        t.fma_flops = None;
        assert_eq!(count(&zen("zen4"), &t, true).0.flops.fma, None);
        // A faulty MAC counter is read as it counts (never corrected): `fma*0.5`.
        t.fma_flops = Some(fma);
        let mut half = zen("zen4");
        half.faults = Faults::parse("fma*0.5").unwrap();
        let (m, _) = count(&half, &t, true);
        // Zen 4's opt-in events need two groups of its 6 counters: each on a counter half the
        // time, so a scaled count is off by its rounding, ≤ ½ count / ½.
        let ratio = m
            .extra
            .multiplex_running_ratio
            .as_ref()
            .and_then(|r| r.get("fp_ret_sse_avx_ops.mac_flops").copied())
            .unwrap_or(1.0);
        let bound = 0.5 / ratio;
        assert!(
            (m.flops.fma.unwrap() - fma / 2.0).abs() <= bound,
            "seed {seed}: {:?} vs {} ± {bound}",
            m.flops.fma,
            fma / 2.0
        );
        // Threads' truths add up; a run without flops has none.
        let mut sum = Truth::default();
        sum.add(&t);
        sum.add(&t);
        assert_eq!(sum.fma_flops, Some(2.0 * fma));
        let mut unknown = t.clone();
        unknown.fma_flops = None;
        sum.add(&unknown);
        assert_eq!(sum.fma_flops, None);
    }

    #[test]
    fn classes_cover_the_traced_ones() {
        assert!(class_covers("any_precision", "packed512_single"));
        assert!(class_covers("double_any_width", "scalar_double") && !class_covers("double_any_width", "scalar_single"));
        assert!(class_covers("packed_any_precision", "packed128_half") && !class_covers("packed_any_precision", "scalar_half"));
        assert!(class_covers("packed256_double", "packed256_double") && !class_covers("packed256_double", "packed512_double"));
    }

    #[test]
    fn counts_go_through_the_perf_formulas_to_the_truth() {
        let pmu = skx();
        let (specs, counters, notes) = pmu.counters(false, true).unwrap();
        assert!(notes[0].contains("SIMULATED"), "{notes:?}");
        assert!(!specs.iter().any(|s| s.quantity == "cycles"), "no exact source for cycles");
        let plan = perf::plan_groups(&specs, counters);
        let mut set = pmu.open(specs.clone(), &plan).unwrap();
        let counts = set.counts_of(&truth()).unwrap();
        let m = perf::to_measurement(&specs, &counts, vec![0.25]);
        // W by class: the truth, through count × weight (multiplexed or not, the estimate is exact here).
        let by = &m.flops.by_class;
        assert!((by["packed256_double"] - 4.0 * 12_345.0).abs() < 4.0 * 2.0, "{by:?}");
        assert!((by["scalar_double"] - 777.0).abs() <= 2.0, "{by:?}");
        // DRAM: read + write CAS counts summed over the simulated iMC.
        assert!((m.bytes["dram"] - 64_000.0).abs() <= 64.0 * 2.0, "{:?}", m.bytes);
    }

    #[test]
    fn injected_faults_change_the_raw_counts() {
        let mut pmu = skx();
        pmu.faults = Faults::parse("packed256_double*0.5,dram=zero,mux=0.5").unwrap();
        let (specs, counters, _) = pmu.counters(false, true).unwrap();
        let plan = perf::plan_groups(&specs, counters);
        let mut set = pmu.open(specs.clone(), &plan).unwrap();
        let counts = set.counts_of(&truth()).unwrap();
        let v = value(&counts, "FP_ARITH_INST_RETIRED.256B_PACKED_DOUBLE").unwrap();
        assert!((v - 12_345.0 / 2.0).abs() <= 4.0, "{v}");
        let dram: f64 = counts
            .iter()
            .filter(|c| c.name.contains("CAS_COUNT"))
            .filter_map(|c| c.scaled)
            .map(|s| s.value)
            .sum();
        assert_eq!(dram, 0.0);
        // mux: time_running < time_enabled, and the scale says so.
        let c = counts.iter().find(|c| c.name == "FP_ARITH_INST_RETIRED.SCALAR_DOUBLE").unwrap();
        assert!(c.scaled.unwrap().running_ratio < 0.51, "{c:?}");
        assert!(perf::multiplex_warnings(&counts).iter().any(|w| w.contains("multiplexed")));
    }

    /// Random counts, run lengths (down to 1 ns) and running fractions: the scaled count of one
    /// run is off its truth by the rounding of the raw count alone, ≤ ½ × enabled/running.
    #[test]
    fn multiplexed_counts_are_off_by_the_count_rounding_only() {
        let seed = crate::kernels::rng::fresh_seed();
        let mut rng = crate::kernels::rng::Rng::new(seed);
        let pmu = skx();
        let (specs, _, _) = pmu.counters(false, false).unwrap();
        let spec = specs.iter().find(|s| s.class.as_deref() == Some("scalar_double")).unwrap().clone();
        for _ in 0..20_000 {
            let events = (rng.next_u64() % 50_000_000) as f64;
            // Run lengths from 1 ns to 0.1 s, log-uniform: short runs are where time rounds most.
            let seconds = 10f64.powf(rng.range(-9.0, -1.0));
            let r = rng.range(0.01, 1.0);
            let mut set = SimulatedCounterSet {
                specs: vec![spec.clone()],
                running: vec![r],
                faults: Faults::default(),
                acc: vec![RawCount::default()],
                enabled: false,
            };
            let mut t = Truth {
                seconds,
                ..Truth::default()
            };
            t.flops_by_class.insert("scalar_double".into(), events);
            let c = set.counts_of(&t).unwrap()[0].scaled.unwrap();
            let bound = 0.5 / c.running_ratio * (1.0 + 1e-12) + events * 1e-12;
            assert!(
                (c.value - events).abs() <= bound,
                "seed {seed}: {events} events in {seconds} s at {r}: {c:?}, bound {bound}"
            );
        }
    }

    #[test]
    fn open_faults_fail_with_the_errno_named() {
        let mut pmu = skx();
        pmu.faults = Faults::parse("FP_ARITH_INST_RETIRED.SCALAR_DOUBLE=einval,uncore=enoent").unwrap();
        let (specs, counters, _) = pmu.counters(false, true).unwrap();
        let plan = perf::plan_groups(&specs, counters);
        let e = pmu.open(specs.clone(), &plan).unwrap_err().to_string();
        assert!(e.contains("EINVAL") && e.contains("SCALAR_DOUBLE"), "{e}");
        let (ok, failed) = pmu.open_each(&specs);
        assert!(
            failed
                .iter()
                .any(|(n, e)| n.contains("CAS_COUNT") && e.to_string().contains("ENOENT")),
            "{failed:?}"
        );
        assert_eq!(ok.len() + failed.len(), specs.len());
    }

    #[test]
    fn the_watchdog_leaves_fewer_counters() {
        let mut pmu = SimulatedPmu::new(Platform::load("zen3").unwrap(), Faults::default());
        let (_, free, _) = pmu.counters(false, false).unwrap();
        pmu.faults = Faults::parse("watchdog").unwrap();
        let (_, held, notes) = pmu.counters(false, false).unwrap();
        assert_eq!(held + 1, free);
        assert!(notes.iter().any(|n| n.contains("NMI watchdog")), "{notes:?}");
    }
}
