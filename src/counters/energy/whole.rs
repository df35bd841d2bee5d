//! The energy of one whole run of a command from a counter read all along: before it started,
//! while it ran and until the counter's first update after it ended.
//!
//! A counter that updates at a coarse interval (NVML's every 100 ms on the H200) holds the
//! energy up to its last update, so a reading just before and just after the run would each be
//! off by up to an update's worth. Instead the window runs from the update last seen before the
//! start to the first one seen after the end: its joules are exact to the counter's unit, and
//! the slices outside the run (the GPU idle before, the tail after) are taken off at the idle
//! power measured first. Each update instant is known to the gap between the two readings
//! around it; that gap, the idle power's own error and the counter's unit make the figure's
//! uncertainty.

use std::collections::BTreeMap;

use super::meter::{Idle, Meter, Reading};
use super::{EnergyOptions, assemble};
use crate::schema::energy::{PointEnergy, total_of};
use crate::schema::units::sig3;

/// One run's energy and the bound on its error.
#[derive(Debug, Clone, PartialEq)]
pub struct WholeRun {
    /// Joules of the run per domain (one sample each), the idle power, how they were read.
    pub energy: PointEnergy,
    /// Half-width of the bound on `energy.total_joules`' error, joules.
    pub uncertainty_joules: f64,
}

/// An update of the first domain's counter: the index of the first reading that shows it, its
/// instant (midway between that reading and the one before) and half the gap between them.
#[derive(Debug, Clone, Copy)]
struct Update {
    index: usize,
    at: f64,
    half_gap: f64,
}

fn updates(readings: &[Reading]) -> Vec<Update> {
    readings
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1].counts.first() != w[0].counts.first())
        .map(|(i, w)| Update {
            index: i + 1,
            at: 0.5 * (w[0].seconds + w[1].seconds),
            half_gap: 0.5 * (w[1].seconds - w[0].seconds),
        })
        .collect()
}

/// The joules of a run from `start` to `end` (seconds of `readings`, which were taken all
/// along, in order): the counter's joules from its last update before `start` to its first
/// update after `end`, less the idle power × the time outside the run; the idle power × the
/// run's time taken off as well with `subtract_idle`. Without an update seen before the start
/// (or after the end) the first (or last) reading stands in, said in a note, and the
/// uncertainty grows by an update interval's energy.
pub fn whole_run_of(m: &Meter, readings: &[Reading], start: f64, end: f64, idle: &Idle, opts: EnergyOptions) -> WholeRun {
    let n = m.domains().len();
    let seconds = (end - start).max(f64::MIN_POSITIVE);
    let span = match (readings.first(), readings.last()) {
        (Some(a), Some(b)) => (b.seconds - a.seconds).max(0.0),
        _ => 0.0,
    };
    // The longest the counter goes without an update: the granularity seen while idle plus
    // the idle window's longest read gap (each change is seen up to a gap late); without a
    // granularity, the whole window.
    let interval = idle.granularity_seconds.map_or(span, |g| g + idle.longest_read_gap_seconds);
    let ups = updates(readings);
    let mut notes = Vec::new();
    let before = ups.iter().rev().find(|u| readings[u.index].seconds <= start).copied();
    let after = ups.iter().find(|u| readings[u.index - 1].seconds >= end).copied();
    // (reading index, update instant, its half-width, extra seconds of unknown energy)
    let (ia, at_a, h_a, lost_a) = match before {
        Some(u) => (u.index, u.at, u.half_gap, 0.0),
        None => {
            notes.push(format!(
                "no counter update was seen before the command started: the window begins at the first reading, its energy known to an update interval ({} ms)",
                sig3(interval * 1e3)
            ));
            (
                0,
                readings.first().map_or(start, |r| r.seconds) - 0.5 * interval,
                0.5 * interval,
                0.0,
            )
        }
    };
    let (ib, at_b, h_b, lost_b) = match after {
        Some(u) => (u.index, u.at, u.half_gap, 0.0),
        None => {
            notes.push(format!(
                "no counter update was seen after the command ended: the window ends at the last reading, up to an update interval ({} ms) of the run's energy may be missing",
                sig3(interval * 1e3)
            ));
            (
                readings.len().saturating_sub(1),
                readings.last().map_or(end, |r| r.seconds),
                interval,
                interval,
            )
        }
    };
    let window = match (readings.get(ia), readings.get(ib)) {
        (Some(a), Some(b)) if ib >= ia => m.joules(a, b),
        _ => vec![0.0; n],
    };
    let outside = (start - at_a) + (at_b - end);
    let mut samples = Vec::with_capacity(n);
    let mut watts = Vec::with_capacity(n);
    let mut bounds = BTreeMap::new();
    for (d, dom) in m.domains().iter().enumerate() {
        let idle_watts = idle.power.get(d).map_or(0.0, |p| p.watts);
        // The idle window's own ends lag their readings by up to an update interval each, so
        // its joules span its length ± an interval: |P − P̂|·(S − interval) ≤ P̂·interval + units.
        let idle_error = idle.power.get(d).map_or(0.0, |p| {
            if p.seconds > 2.0 * interval {
                (p.watts * interval + 2.0 * dom.joules_per_count) / (p.seconds - interval)
            } else {
                p.watts
            }
        });
        let run = window.get(d).copied().unwrap_or(0.0) - idle_watts * outside;
        let run_watts = run / seconds;
        let idle_taken = outside + if opts.subtract_idle { seconds } else { 0.0 };
        let joules = if opts.subtract_idle { run - idle_watts * seconds } else { run };
        samples.push(vec![joules]);
        watts.push(run_watts);
        bounds.insert(
            dom.name.clone(),
            (idle_watts + idle_error) * (h_a + h_b)
                + idle_error * idle_taken.abs()
                + run_watts.abs() * (lost_a + lost_b)
                + 2.0 * dom.joules_per_count,
        );
    }
    if let Some(g) = idle.granularity_seconds
        && seconds < 10.0 * g
    {
        notes.push(format!(
            "the command ran {} ms, under ten counter updates ({} ms each): its joules are mostly the window's idle slices and their uncertainty",
            sig3(seconds * 1e3),
            sig3(g * 1e3)
        ));
    }
    let source = format!(
        "{}; one run of the whole command, the counter read all along: its joules from the update last seen before the start to the first one after the end, less the idle power × the {} ms outside the run",
        m.description(),
        sig3(outside * 1e3)
    );
    let energy = assemble(m, samples, watts, idle, opts, 0.0, source, notes);
    let uncertainty_joules = total_of(&bounds).map_or(0.0, |(_, b)| b);
    WholeRun {
        energy,
        uncertainty_joules,
    }
}

/// Several boards' runs of one command (each from its own counter, `gpu measure --energy` on
/// a host with several GPUs) as one: every board's domain, idle power and notes, the total
/// their sum (`gpu0+gpu1`, see [`total_of`]), the uncertainty the sum of theirs. The source
/// names each board's counter.
pub fn combine_boards(runs: Vec<WholeRun>) -> WholeRun {
    let mut runs = runs.into_iter();
    let Some(first) = runs.next() else {
        return WholeRun {
            energy: PointEnergy::default(),
            uncertainty_joules: 0.0,
        };
    };
    let mut out = first;
    for r in runs {
        let e = r.energy;
        out.energy.domains.extend(e.domains);
        out.energy.idle.extend(e.idle);
        for n in e.notes {
            if !out.energy.notes.contains(&n) {
                out.energy.notes.push(n);
            }
        }
        out.energy.source = format!("{}; {}", out.energy.source, e.source);
        out.energy.granularity_seconds = match (out.energy.granularity_seconds, e.granularity_seconds) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        out.uncertainty_joules += r.uncertainty_joules;
    }
    let (domain, joules) = PointEnergy::pick_total(&out.energy.domains).unwrap_or_default();
    out.energy.total_domain = domain;
    out.energy.total_joules = joules;
    out
}
