//! The RAPL domains the kernel offers through perf's dynamic `power` PMU:
//! `<pmus>/power/type` (its `perf_event_attr.type`), `cpumask` (the CPU its system-wide
//! events open on), `format/event` and `events/energy-<domain>` (the encoding), and beside
//! each event its `.scale` (joules per count) and `.unit` (`Joules`).
//!
//! The kernel converts every domain's own hardware unit (Sapphire Rapids' DRAM unit, the
//! platform domain's) into counts of the event's scale, so each domain is converted with its
//! own `.scale`, never one unit for all.

use std::path::{Path, PathBuf};

use perf_event::events::{Dynamic, DynamicBuilder};

use crate::error::{Error, Result};

/// The PMU directory name RAPL is listed under.
const POWER_PMU: &str = "power";

/// One energy domain: a `power/energy-<name>/` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    /// `pkg`, `cores`, `ram`, `gpu`, `psys`.
    pub name: String,
    /// `perf_event_attr.config` of its event.
    pub config: u64,
    /// Joules per count (the event's `.scale`).
    pub joules_per_count: f64,
}

/// The `power` PMU of this kernel: its type, the CPU to open on, its domains.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerPmu {
    /// The PMU's directory.
    pub dir: PathBuf,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// The CPU its events open on (the first of `cpumask`; one per package).
    pub cpus: Vec<usize>,
    /// Every domain listed, in the order `pkg`, `cores`, `ram`, `gpu`, `psys`, then others.
    pub domains: Vec<Domain>,
}

impl PowerPmu {
    /// One line for the provenance: which PMU, CPU and domains.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.domains.iter().map(|d| d.name.as_str()).collect();
        format!(
            "perf power PMU (type {}, CPU {}): {}",
            self.type_,
            self.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","),
            names.join(", ")
        )
    }
}

const ORDER: &[&str] = &["pkg", "cores", "ram", "gpu", "psys"];

fn missing(root: &Path) -> Error {
    Error::unavailable(
        format!(
            "no RAPL energy counters: {} has no `{POWER_PMU}` PMU (this CPU, kernel or VM exposes none)",
            root.display()
        ),
        "run on a host whose kernel lists /sys/bus/event_source/devices/power (Intel RAPL, AMD Zen; `perf list power`), or leave out --energy",
    )
}

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::unavailable(
        format!("{}: {why}", path.display()),
        "this kernel's power PMU is unusual; report this with `ls -R /sys/bus/event_source/devices/power`",
    )
}

/// The `power` PMU under `pmus` (`/sys/bus/event_source/devices`, or a recorded tree), with
/// every `energy-*` event that has a scale in joules. One line naming what is missing when
/// there is no such PMU or no domain.
pub fn discover(pmus: &Path) -> Result<PowerPmu> {
    // perf-event2 reads a relative PMU path under the kernel's sysfs: make it absolute.
    let dir = std::path::absolute(pmus.join(POWER_PMU)).unwrap_or_else(|_| pmus.join(POWER_PMU));
    if !dir.join("type").is_file() {
        return Err(missing(pmus));
    }
    let builder = DynamicBuilder::new(&dir).map_err(|e| bad(&dir, format!("format unreadable ({e})")))?;
    let type_ = crate::counters::perf::pmu_type(pmus, POWER_PMU)?;
    let cpus = match std::fs::read_to_string(dir.join("cpumask")) {
        Ok(text) => crate::counters::perf::parse_cpu_list(&text).ok_or_else(|| bad(&dir.join("cpumask"), "not a CPU list"))?,
        Err(_) => vec![0],
    };
    let events = dir.join("events");
    let mut names: Vec<String> = std::fs::read_dir(&events)
        .map_err(|e| bad(&events, e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix("energy-").filter(|d| !d.contains('.')).map(str::to_string))
        .collect();
    crate::util::sort_by(&mut names, |a, b| {
        let rank = |n: &str| ORDER.iter().position(|o| *o == n).unwrap_or(ORDER.len());
        (rank(a), a).cmp(&(rank(b), b))
    });
    let mut domains = Vec::new();
    for name in names {
        let event = format!("energy-{name}");
        let mut b = builder.clone();
        b.event(&event).map_err(|e| bad(&events.join(&event), e))?;
        let config = b.build().map_err(|e| bad(&events.join(&event), e))?;
        let scale = b.scale().map_err(|e| bad(&events.join(&event), e))?;
        let unit = b.unit().map_err(|e| bad(&events.join(&event), e))?;
        let Some(scale) = scale.filter(|s| s.is_finite() && *s > 0.0) else {
            return Err(bad(&events.join(format!("{event}.scale")), "missing or not a positive number"));
        };
        if let Some(u) = unit.as_deref().filter(|u| !u.eq_ignore_ascii_case("joules")) {
            return Err(bad(&events.join(format!("{event}.unit")), format!("unit {u:?}, not Joules")));
        }
        domains.push(Domain {
            name,
            config: config_of(config),
            joules_per_count: scale,
        });
    }
    if domains.is_empty() {
        return Err(bad(&events, "no energy-* event"));
    }
    Ok(PowerPmu { dir, type_, cpus, domains })
}

/// The `config` an event attribute carries.
fn config_of(event: Dynamic) -> u64 {
    perf_event::Builder::new(event).attrs().config
}
