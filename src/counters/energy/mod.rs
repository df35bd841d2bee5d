//! Energy beside time: RAPL read through perf's dynamic `power` PMU (and a GPU's NVML
//! counter), turned into joules per run and domain ([`PointEnergy`]).
//!
//! - `domains`: which domains the kernel lists (`pkg`, `cores`, `ram`, `gpu`, `psys`), their
//!   encodings and scales, from a sysfs tree that tests replace with a recorded one;
//! - `meter`: readings, wrap-around, the idle power and the counters' granularity;
//! - `nvml`: the GPU board's own counter (NVML, millijoules), and recordings of it.
//!
//! A domain counts everything its part of the machine did, not only the measured work: the
//! idle power is measured before the runs (and subtracted when asked), runs are repeated and
//! their spread kept, and a run whose power above idle is within the idle power's own noise
//! says that it cannot be told apart from its neighbours.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

mod domains;
mod meter;
#[cfg(feature = "gpu")]
pub mod nvml;
mod recording;
mod regions;
#[cfg(test)]
mod regions_tests;
#[cfg(test)]
mod tests;
mod whole;

pub use domains::Domain;
#[cfg(test)]
use domains::discover;
pub use meter::{Idle, Meter, Reading, Source};
#[cfg(test)]
use meter::{counts_between, refuse_without_permission};
pub use recording::Recording;
pub use regions::{RegionRun, RegionSegments, RunSegments, region_energy_of, region_run_of};
pub use whole::{WholeRun, combine_boards, whole_run_of};

use crate::error::Result;
use crate::schema::energy::{DomainEnergy, IdlePower, PointEnergy};
use crate::schema::stats;

/// What `--energy` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnergyOptions {
    /// Take the idle power × the run's time off each domain's joules.
    pub subtract_idle: bool,
    /// Length of the idle window measured before the runs, seconds.
    pub idle_seconds: f64,
}

impl Default for EnergyOptions {
    fn default() -> EnergyOptions {
        EnergyOptions {
            subtract_idle: false,
            idle_seconds: 1.0,
        }
    }
}

/// Shortest stretch of repetitions one energy sample is taken over, seconds (at least ten
/// counter updates where the granularity is known).
const MIN_STRETCH_SECONDS: f64 = 0.02;

/// Seconds between reads while idle: a fraction of RAPL's ~1 ms update, asleep in between.
const IDLE_POLL_SECONDS: f64 = 2e-4;

/// An open meter with its idle power measured: what the commands read around their runs.
pub struct Energy {
    meter: Mutex<Meter>,
    idle: Idle,
    options: EnergyOptions,
}

/// The readings taken around one point's runs.
#[derive(Debug, Default)]
pub struct Window {
    marks: Mutex<Vec<Reading>>,
}

impl Window {
    /// The readings so far, in order.
    pub fn readings(&self) -> Vec<Reading> {
        self.marks.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Whether a reading taken after `since` shows the first domain's count changed (read from
    /// the end, without copying a long window).
    pub fn changed_since(&self, since: &Reading) -> bool {
        self.marks.lock().is_ok_and(|m| {
            m.iter()
                .rev()
                .take_while(|r| r.seconds > since.seconds)
                .any(|r| r.counts.first() != since.counts.first())
        })
    }
}

impl Energy {
    /// Open the `power` PMU under `pmus` and measure the idle power (one line and exit 2 where
    /// there is none or the kernel refuses). With [`RAPL_RECORDING_ENV`] set, its recording
    /// is replayed in place of the perf counters, the domains those of the tree under `pmus`.
    pub fn start(pmus: &Path, options: EnergyOptions) -> Result<Energy> {
        let meter = match std::env::var_os(RAPL_RECORDING_ENV) {
            Some(path) => recorded_rapl(pmus, Path::new(&path))?,
            None => Meter::open(pmus)?,
        };
        Energy::with_meter(meter, options)
    }

    /// [`Energy::start`] over a meter already open (a recorded one in tests).
    pub fn with_meter(mut meter: Meter, options: EnergyOptions) -> Result<Energy> {
        let idle = meter.idle(options.idle_seconds, IDLE_POLL_SECONDS, 5)?;
        refuse_dead_counters(&meter, &idle)?;
        Ok(Energy {
            meter: Mutex::new(meter),
            idle,
            options,
        })
    }

    /// A new window, with its first reading taken.
    pub fn window(&self) -> Result<Window> {
        let w = Window::default();
        self.mark(&w)?;
        Ok(w)
    }

    /// One more reading in `w` (after each timed repetition, and at the end), returned too.
    /// It is added while the meter is held, so readings from several threads stay in order.
    pub fn mark(&self, w: &Window) -> Result<Reading> {
        let mut meter = self.meter.lock().map_err(|_| poisoned())?;
        let r = meter.read()?;
        if let Ok(mut m) = w.marks.lock() {
            m.push(r.clone());
        }
        Ok(r)
    }

    /// Read once (before or after a command's run).
    pub fn read(&self) -> Result<Reading> {
        self.meter.lock().map_err(|_| poisoned())?.read()
    }

    fn with_meter_ref<T>(&self, f: impl FnOnce(&Meter) -> T) -> Result<T> {
        Ok(f(&*self.meter.lock().map_err(|_| poisoned())?))
    }

    /// Mean power per domain from a window's first reading to its last, watts.
    pub fn window_watts(&self, w: &Window) -> Result<BTreeMap<String, f64>> {
        let marks = w.readings();
        self.with_meter_ref(|m| match (marks.first(), marks.last()) {
            (Some(a), Some(b)) if b.seconds > a.seconds => m
                .domains()
                .iter()
                .zip(m.joules(a, b))
                .map(|(d, j)| (d.name.clone(), j / (b.seconds - a.seconds)))
                .collect(),
            _ => BTreeMap::new(),
        })
    }

    /// The idle power per domain, by name.
    pub fn idle_watts(&self) -> Result<BTreeMap<String, IdlePower>> {
        self.with_meter_ref(|m| {
            m.domains()
                .iter()
                .zip(&self.idle.power)
                .map(|(d, p)| (d.name.clone(), p.clone()))
                .collect()
        })
    }

    /// The shortest stretch of repetitions one sample is taken over, seconds: ten counter
    /// updates where the granularity is known, at least [`MIN_STRETCH_SECONDS`].
    pub fn stretch_seconds(&self) -> f64 {
        min_stretch(self.idle.granularity_seconds)
    }

    /// The counters' granularity measured while idle (median seconds between changes).
    pub fn granularity_seconds(&self) -> Option<f64> {
        self.idle.granularity_seconds
    }

    /// Per-unit energy samples of steady work in a window: see [`per_unit_samples`].
    pub fn per_unit(&self, w: &Window, from: f64, to: f64, rate: f64, stretch: f64) -> Result<Vec<f64>> {
        let marks = w.readings();
        self.with_meter_ref(|m| per_unit_samples(m, &marks, from, to, rate, stretch, &self.idle))
    }

    /// A kernel's energy from steady repetitions in a window: see [`steady_energy_of`].
    pub fn steady_energy(&self, w: &Window, from: f64, to: f64, stretch: f64, seconds_per_run: f64, flops: f64) -> Result<PointEnergy> {
        let marks = w.readings();
        self.with_meter_ref(|m| steady_energy_of(m, &marks, from, to, stretch, &self.idle, self.options, seconds_per_run, flops))
    }

    /// Which PMU and domains (for the provenance).
    pub fn description(&self) -> Result<String> {
        self.with_meter_ref(|m| m.description().to_string())
    }

    /// A suite kernel's energy from its window (a reading before, one after each timed
    /// repetition, one at the end): the timed repetitions cut into stretches of at least
    /// [`MIN_STRETCH_SECONDS`], each stretch's power × `seconds_per_run` a sample.
    pub fn kernel_energy(&self, w: &Window, seconds_per_run: f64, flops: f64) -> Result<PointEnergy> {
        let marks = w.readings();
        self.with_meter_ref(|m| kernel_energy_of(m, &marks, &self.idle, self.options, seconds_per_run, flops))
    }

    /// The energy of one whole run from readings taken all along (before, during and after
    /// it), the run from `start` to `end` (seconds of the readings): see [`whole_run_of`].
    pub fn whole_run(&self, readings: &[Reading], start: f64, end: f64) -> Result<WholeRun> {
        self.with_meter_ref(|m| whole_run_of(m, readings, start, end, &self.idle, self.options))
    }

    /// The monotonic clock (`roofline_marker::monotonic_ns`, the clock programs log their
    /// regions against) at the meter's second 0, nanoseconds: one reading between two reads
    /// of the clock.
    pub fn clock_zero_ns(&self) -> Result<i128> {
        let a = roofline_marker::monotonic_ns();
        let r = self.read()?;
        let b = roofline_marker::monotonic_ns();
        Ok((a as i128 + b as i128) / 2 - (r.seconds * 1e9).round() as i128)
    }

    /// Seconds between readings taken all along a run (a fraction of RAPL's update).
    pub fn poll_seconds(&self) -> f64 {
        IDLE_POLL_SECONDS
    }

    /// One region's joules in one run from the readings taken all along it: see
    /// [`region_run_of`].
    pub fn region_run(&self, readings: &[Reading], zero_ns: i128, segs: &RegionSegments) -> Result<RegionRun> {
        self.with_meter_ref(|m| region_run_of(m, readings, zero_ns, segs))
    }

    /// A region's energy over its runs: see [`region_energy_of`].
    pub fn region_energy(&self, name: &str, runs: &[RegionRun], flops: f64) -> Result<PointEnergy> {
        self.with_meter_ref(|m| region_energy_of(m, name, runs, &self.idle, self.options, flops))
    }

    /// A command's energy from a reading before and after each of its runs.
    pub fn runs_energy(&self, runs: &[(Reading, Reading)], flops: f64) -> Result<PointEnergy> {
        self.with_meter_ref(|m| runs_energy_of(m, runs, &self.idle, self.options, flops))
    }
}

/// A recording of RAPL readings (`seconds count…` a line, one count per domain of the sysfs
/// tree, in its order) replayed in place of the perf counters, as the tests replay a flat
/// counter where no machine of theirs has one.
pub const RAPL_RECORDING_ENV: &str = "ROOFLINE_RAPL_RECORDING";

/// The `power` PMU's domains under `pmus` read from the recording at `path`.
fn recorded_rapl(pmus: &Path, path: &Path) -> Result<Meter> {
    let origin = path.display().to_string();
    let pmu = domains::discover(pmus)?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        crate::error::Error::input(
            format!("{RAPL_RECORDING_ENV}={origin}: cannot read ({e})"),
            "point it at a recording of RAPL readings",
        )
    })?;
    let description = format!("{} (replayed from {origin})", pmu.describe());
    Recording::parse(&text, &origin)?.into_meter(pmu.domains, description)
}

/// A machine whose counters did not move over the whole idle window counts nothing (a guest
/// whose hypervisor lists the RAPL events without feeding them): refused, never written as
/// zero joules.
fn refuse_dead_counters(m: &Meter, idle: &Idle) -> Result<()> {
    if idle.power.is_empty() || idle.power.iter().any(|p| p.watts > 0.0) {
        return Ok(());
    }
    let names: Vec<String> = m.domains().iter().map(|d| format!("power/energy-{}/", d.name)).collect();
    if m.description().starts_with("NVML") {
        return Err(crate::error::Error::unavailable(
            format!(
                "{} did not change over the {} s idle window: the GPU's energy counter counts nothing here",
                m.description(),
                crate::schema::units::sig3(idle.power[0].seconds)
            ),
            "check `nvidia-smi -q -d POWER` (a vGPU or a MIG slice may report no power), or leave out --energy",
        ));
    }
    Err(crate::error::Error::unavailable(
        format!(
            "{} did not change over the {} s idle window: this machine's RAPL counters count nothing (a VM whose hypervisor lists the events without feeding them?)",
            names.join(", "),
            crate::schema::units::sig3(idle.power[0].seconds)
        ),
        "measure energy on bare metal or a VM with RAPL passed through (`perf stat -a -e power/energy-pkg/ sleep 1` shows non-zero joules there), or leave out --energy",
    ))
}

fn poisoned() -> crate::error::Error {
    crate::error::Error::unavailable("the energy meter's lock was poisoned by a panic", "run again")
}

/// Shortest stretch for a meter whose counters change every `granularity` seconds.
fn min_stretch(granularity: Option<f64>) -> f64 {
    granularity.map_or(MIN_STRETCH_SECONDS, |g| (10.0 * g).max(MIN_STRETCH_SECONDS))
}

/// Indices of `marks` where stretches of at least `min` seconds begin and end (the tail
/// shorter than `min` joins the last stretch).
fn stretch_cuts(marks: &[Reading], min: f64) -> Vec<usize> {
    let mut cuts = vec![0usize];
    for (i, r) in marks.iter().enumerate().skip(1) {
        if r.seconds - marks[*cuts.last().unwrap_or(&0)].seconds >= min {
            cuts.push(i);
        }
    }
    let last = marks.len().saturating_sub(1);
    if cuts.len() >= 2 && *cuts.last().unwrap_or(&0) < last {
        *cuts.last_mut().expect("two cuts") = last;
    }
    cuts
}

/// [`Energy::kernel_energy`] on any meter.
pub fn kernel_energy_of(m: &Meter, marks: &[Reading], idle: &Idle, opts: EnergyOptions, seconds_per_run: f64, flops: f64) -> PointEnergy {
    let min = min_stretch(idle.granularity_seconds);
    let mut notes = Vec::new();
    // The timed repetitions' marks (after each repetition): the first and last readings of
    // the window hold the warm-up and the tail.
    let timed = if marks.len() >= 4 { &marks[1..marks.len() - 1] } else { &[][..] };
    let used = if timed.len() >= 2 && timed[timed.len() - 1].seconds - timed[0].seconds >= min {
        timed
    } else {
        notes.push(format!(
            "the timed repetitions lasted under {} ms: the joules are the whole window's (warm-up and calibration included) at the median run's time",
            crate::schema::units::sig3(min * 1e3)
        ));
        marks
    };
    let cuts = stretch_cuts(used, min);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); m.domains().len()];
    for c in cuts.windows(2) {
        let (a, b) = (&used[c[0]], &used[c[1]]);
        let dt = (b.seconds - a.seconds).max(f64::MIN_POSITIVE);
        for (d, j) in m.joules(a, b).into_iter().enumerate() {
            samples[d].push(net(j / dt, idle.power.get(d), opts) * seconds_per_run);
        }
    }
    let (first, last) = (used.first(), used.last());
    let span = match (first, last) {
        (Some(a), Some(b)) => (b.seconds - a.seconds).max(f64::MIN_POSITIVE),
        _ => f64::MIN_POSITIVE,
    };
    let total = match (first, last) {
        (Some(a), Some(b)) => m.joules(a, b),
        _ => vec![0.0; m.domains().len()],
    };
    let watts: Vec<f64> = total.iter().map(|j| j / span).collect();
    let source = format!(
        "{}; joules per run = each stretch's power (≥ {} ms of timed repetitions) × the median run's {} s",
        m.description(),
        crate::schema::units::sig3(min * 1e3),
        crate::schema::units::sig3(seconds_per_run)
    );
    assemble(m, samples, watts, idle, opts, flops, source, notes)
}

/// Stretches of steady work cut at the first domain's counter changes: a coarse counter
/// (NVML's changes every 100 ms) holds the energy up to its last update, so a stretch timed
/// from read instants is off by up to an update interval at each end; timed from the first
/// reading that shows each change it is off by the gap between readings alone. Only changes
/// from `from` to `to` (seconds of the readings) count; each stretch spans at least `stretch`
/// seconds. Returns (seconds, joules) of each, per domain joules in the meter's order.
pub fn change_stretches(m: &Meter, readings: &[Reading], from: f64, to: f64, stretch: f64) -> Vec<(f64, Vec<f64>)> {
    let changes: Vec<&Reading> = readings
        .windows(2)
        .filter(|w| w[1].counts.first() != w[0].counts.first() && w[1].seconds >= from && w[1].seconds <= to)
        .map(|w| &w[1])
        .collect();
    let mut out = Vec::new();
    let mut start = 0usize;
    for (k, c) in changes.iter().enumerate().skip(1) {
        if c.seconds - changes[start].seconds >= stretch {
            out.push((c.seconds - changes[start].seconds, m.joules(changes[start], c)));
            start = k;
        }
    }
    out
}

/// Picojoules per unit of work of steady work at `rate` units per second from `from` to `to`:
/// each stretch's power ([`change_stretches`]) above the first domain's idle power, over the
/// rate; one sample per stretch, none where no stretch fits.
pub fn per_unit_samples(m: &Meter, readings: &[Reading], from: f64, to: f64, rate: f64, stretch: f64, idle: &Idle) -> Vec<f64> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Vec::new();
    }
    let idle_watts = idle.power.first().map_or(0.0, |p| p.watts);
    change_stretches(m, readings, from, to, stretch)
        .into_iter()
        .filter_map(|(dt, j)| Some((j.first()? / dt - idle_watts) / rate * 1e12))
        .collect()
}

/// A kernel's energy from steady repetitions between `from` and `to`: each stretch's power
/// ([`change_stretches`]) × the median run's `seconds_per_run` one sample, the idle power
/// taken off when asked.
#[allow(clippy::too_many_arguments)]
pub fn steady_energy_of(
    m: &Meter,
    readings: &[Reading],
    from: f64,
    to: f64,
    stretch: f64,
    idle: &Idle,
    opts: EnergyOptions,
    seconds_per_run: f64,
    flops: f64,
) -> PointEnergy {
    let stretches = change_stretches(m, readings, from, to, stretch);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); m.domains().len()];
    let (mut span, mut total) = (0.0, vec![0.0; m.domains().len()]);
    for (dt, joules) in &stretches {
        span += dt;
        for (d, j) in joules.iter().enumerate() {
            total[d] += j;
            samples[d].push(net(j / dt, idle.power.get(d), opts) * seconds_per_run);
        }
    }
    let watts: Vec<f64> = total.iter().map(|j| j / span.max(f64::MIN_POSITIVE)).collect();
    let mut notes = Vec::new();
    if stretches.is_empty() {
        notes.push(format!(
            "no stretch of {} ms between counter changes fitted in the repetitions: no joules measured",
            crate::schema::units::sig3(stretch * 1e3)
        ));
    }
    let source = format!(
        "{}; joules per run = the power over each stretch of ≥ {} ms between counter changes × the median run's {} s",
        m.description(),
        crate::schema::units::sig3(stretch * 1e3),
        crate::schema::units::sig3(seconds_per_run)
    );
    assemble(m, samples, watts, idle, opts, flops, source, notes)
}

/// [`Energy::runs_energy`] on any meter.
pub fn runs_energy_of(m: &Meter, runs: &[(Reading, Reading)], idle: &Idle, opts: EnergyOptions, flops: f64) -> PointEnergy {
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); m.domains().len()];
    let mut joules = vec![0.0; m.domains().len()];
    let mut seconds = 0.0;
    let mut notes = Vec::new();
    for (a, b) in runs {
        let dt = (b.seconds - a.seconds).max(f64::MIN_POSITIVE);
        seconds += dt;
        for (d, j) in m.joules(a, b).into_iter().enumerate() {
            joules[d] += j;
            samples[d].push(net(j / dt, idle.power.get(d), opts) * dt);
        }
    }
    if let Some(g) = idle.granularity_seconds {
        let per_run = seconds / runs.len().max(1) as f64;
        if per_run < 10.0 * g {
            notes.push(format!(
                "a run lasts {} ms, under ten counter updates ({} ms each): each run's joules are coarse",
                crate::schema::units::sig3(per_run * 1e3),
                crate::schema::units::sig3(g * 1e3)
            ));
        }
    }
    let watts: Vec<f64> = joules.iter().map(|j| j / seconds.max(f64::MIN_POSITIVE)).collect();
    let source = format!("{}; one reading before and after each run", m.description());
    assemble(m, samples, watts, idle, opts, flops, source, notes)
}

/// Power `watts` with the domain's idle power taken off when asked.
fn net(watts: f64, idle: Option<&IdlePower>, opts: EnergyOptions) -> f64 {
    match idle {
        Some(i) if opts.subtract_idle => watts - i.watts,
        _ => watts,
    }
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    m: &Meter,
    samples: Vec<Vec<f64>>,
    watts: Vec<f64>,
    idle: &Idle,
    opts: EnergyOptions,
    flops: f64,
    source: String,
    mut notes: Vec<String>,
) -> PointEnergy {
    let mut domains = BTreeMap::new();
    let mut idle_map = BTreeMap::new();
    for (d, dom) in m.domains().iter().enumerate() {
        let s = &samples[d];
        domains.insert(
            dom.name.clone(),
            DomainEnergy {
                joules: stats::median(s).unwrap_or(0.0),
                joules_samples: s.clone(),
                watts: watts.get(d).copied().unwrap_or(0.0),
                spread: if s.len() >= 2 { stats::spread(s) } else { None },
            },
        );
        if let Some(i) = idle.power.get(d) {
            idle_map.insert(dom.name.clone(), i.clone());
            notes.extend(neighbour_note(&dom.name, watts.get(d).copied().unwrap_or(0.0), i));
        }
    }
    notes.extend(scope_note(m.domains()));
    let (total_domain, total_joules) = PointEnergy::pick_total(&domains).unwrap_or_default();
    PointEnergy {
        gflop_per_joule: (flops > 0.0 && total_joules > 0.0).then(|| flops / 1e9 / total_joules),
        domains,
        total_domain,
        total_joules,
        idle_subtracted: opts.subtract_idle,
        idle: idle_map,
        granularity_seconds: idle.granularity_seconds,
        source,
        notes,
        roofline: None,
    }
}

/// Said when the run's power above idle is within the idle power's own noise (or below it).
fn neighbour_note(domain: &str, run_watts: f64, idle: &IdlePower) -> Option<String> {
    let above = run_watts - idle.watts;
    let noise = idle.spread.unwrap_or(0.0) * idle.watts;
    (above <= noise).then(|| {
        format!(
            "{domain}: the run drew {} W against {} W idle (spread {}): the figure cannot separate the work from its neighbours",
            crate::schema::units::sig3(run_watts),
            crate::schema::units::sig3(idle.watts),
            idle.spread.map_or("unknown".into(), |s| format!("{:.1}%", s * 100.0))
        )
    })
}

/// What the broad domains count beyond the measured work.
fn scope_note(domains: &[Domain]) -> Option<String> {
    let broad: Vec<&str> = domains
        .iter()
        .map(|d| d.name.as_str())
        .filter(|n| matches!(*n, "psys" | "pkg"))
        .collect();
    (!broad.is_empty()).then(|| {
        format!(
            "{} count every core of the socket or platform: other processes (and, on a shared guest, other tenants) count too",
            broad.join(" and ")
        )
    })
}
