//! Joules per marker region (`measure --energy` on a program with regions): the counters are
//! read all along outside the program while it runs, and the program logs when each region
//! ran against the same monotonic clock (`roofline_marker::energy`: calls folded into
//! segments). Each segment's joules per domain are its in-region time × the mean power over
//! the segment, read off the counters' cumulative energy.
//!
//! The counters hold the energy up to their last update (RAPL's about every millisecond), so
//! the cumulative energy is known at the instants the readings first show each update, and
//! taken as linear between them. With updates every Δu and readings every g, the figure at
//! any instant is off by at most the power × (Δu + g): a region call much longer than an
//! update is measured to a small fraction, one shorter than a few updates is coarse (said).

use std::collections::BTreeMap;

use super::meter::{Idle, Meter, Reading};
use super::{EnergyOptions, assemble};
use crate::schema::energy::PointEnergy;
use crate::schema::units::sig3;

/// When one region ran in one run: its segments (monotonic nanoseconds), as the program
/// logged them on the thread that spent the longest in it.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct RegionSegments {
    /// The thread that logged them.
    #[serde(default)]
    pub thread: i64,
    /// Calls logged on that thread.
    pub calls: u64,
    /// Calls past the log's limit, not placed in time, and their nanoseconds.
    #[serde(default)]
    pub dropped_calls: u64,
    #[serde(default)]
    pub dropped_ns: u64,
    /// `[start, end, busy]` nanoseconds of each segment, in time order.
    pub segments: Vec<[u64; 3]>,
}

impl RegionSegments {
    /// Nanoseconds inside the region, placed in time or not.
    pub fn busy_ns(&self) -> u64 {
        self.segments.iter().map(|s| s[2]).sum::<u64>() + self.dropped_ns
    }
}

/// One region's figures in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionRun {
    /// Joules per domain, in the meter's order (the calls not placed in time included at the
    /// placed calls' mean power).
    pub joules: Vec<f64>,
    /// Seconds inside the region.
    pub seconds: f64,
    /// Calls.
    pub calls: u64,
    /// Calls not placed in time.
    pub dropped_calls: u64,
}

/// A domain's cumulative joules at the readings that first show each of its updates.
struct Curve {
    t: Vec<f64>,
    e: Vec<f64>,
}

impl Curve {
    fn of(m: &Meter, readings: &[Reading], d: usize) -> Curve {
        let mut t = Vec::new();
        let mut e = Vec::new();
        let mut last: Option<&Reading> = None;
        for w in readings.windows(2) {
            if w[1].counts.get(d) == w[0].counts.get(d) {
                continue;
            }
            match last {
                None => {
                    t.push(w[1].seconds);
                    e.push(0.0);
                }
                Some(a) => {
                    t.push(w[1].seconds);
                    e.push(e.last().copied().unwrap_or(0.0) + m.joules(a, &w[1])[d]);
                }
            }
            last = Some(&w[1]);
        }
        if t.len() < 2 {
            // Fewer than two updates seen: the window's ends stand in.
            if let (Some(a), Some(b)) = (readings.first(), readings.last()) {
                return Curve {
                    t: vec![a.seconds, b.seconds],
                    e: vec![0.0, m.joules(a, b)[d]],
                };
            }
        }
        Curve { t, e }
    }

    /// The interval (index of its start) holding `x`, the ends' intervals beyond them.
    fn interval(&self, x: f64) -> usize {
        let n = self.t.len();
        if n < 2 {
            return 0;
        }
        self.t.partition_point(|&v| v <= x).clamp(1, n - 1) - 1
    }

    /// Cumulative joules at `x`: linear between updates, extended beyond the ends at the
    /// nearest interval's power.
    fn at(&self, x: f64) -> f64 {
        if self.t.len() < 2 {
            return 0.0;
        }
        let i = self.interval(x);
        self.e[i] + self.watts_in(i) * (x - self.t[i])
    }

    fn watts_in(&self, i: usize) -> f64 {
        let dt = self.t[i + 1] - self.t[i];
        if dt > 0.0 { (self.e[i + 1] - self.e[i]) / dt } else { 0.0 }
    }

    /// Joules from `a` to `b`, or the power at `a` × `busy` for a segment of no length.
    fn share(&self, a: f64, b: f64, busy: f64) -> f64 {
        if self.t.len() < 2 {
            return 0.0;
        }
        if b > a {
            busy * (self.at(b) - self.at(a)) / (b - a)
        } else {
            busy * self.watts_in(self.interval(a))
        }
    }
}

/// One region's joules in one run: `readings` taken all along the run (seconds of the meter),
/// the monotonic clock at the meter's second 0 being `zero_ns`.
pub fn region_run_of(m: &Meter, readings: &[Reading], zero_ns: i128, segs: &RegionSegments) -> RegionRun {
    let curves: Vec<Curve> = (0..m.domains().len()).map(|d| Curve::of(m, readings, d)).collect();
    let secs = |ns: u64| (ns as i128 - zero_ns) as f64 * 1e-9;
    let mut joules = vec![0.0; curves.len()];
    let mut placed_ns = 0u64;
    for s in &segs.segments {
        placed_ns += s[2];
        for (d, c) in curves.iter().enumerate() {
            joules[d] += c.share(secs(s[0]), secs(s[1]), s[2] as f64 * 1e-9);
        }
    }
    if segs.dropped_ns > 0 && placed_ns > 0 {
        let scale = (placed_ns + segs.dropped_ns) as f64 / placed_ns as f64;
        joules.iter_mut().for_each(|j| *j *= scale);
    }
    RegionRun {
        joules,
        seconds: segs.busy_ns() as f64 * 1e-9,
        calls: segs.calls + segs.dropped_calls,
        dropped_calls: segs.dropped_calls,
    }
}

/// A region's energy over its runs: each run's joules a sample (the idle power × its time in
/// the region taken off with `subtract_idle`), the power its joules over its time, with notes
/// where a call is shorter than ten counter updates (coarse), where calls were not placed in
/// time, and (from [`assemble`]) where its power is within the idle power's noise.
pub fn region_energy_of(m: &Meter, name: &str, runs: &[RegionRun], idle: &Idle, opts: EnergyOptions, flops: f64) -> PointEnergy {
    let n = m.domains().len();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut joules = vec![0.0; n];
    let (mut seconds, mut calls, mut dropped) = (0.0, 0u64, 0u64);
    for r in runs {
        seconds += r.seconds;
        calls += r.calls;
        dropped += r.dropped_calls;
        for (d, j) in r.joules.iter().enumerate().take(n) {
            joules[d] += j;
            let off = match idle.power.get(d) {
                Some(i) if opts.subtract_idle => i.watts * r.seconds,
                _ => 0.0,
            };
            samples[d].push(j - off);
        }
    }
    let watts: Vec<f64> = joules.iter().map(|j| j / seconds.max(f64::MIN_POSITIVE)).collect();
    let mut notes = Vec::new();
    if let Some(g) = idle.granularity_seconds {
        let per_call = seconds / calls.max(1) as f64;
        if per_call < 10.0 * g {
            notes.push(format!(
                "region '{name}': a call lasts {} ms, under ten counter updates ({} ms each): its joules are interpolated between updates, coarse",
                sig3(per_call * 1e3),
                sig3(g * 1e3)
            ));
        }
    }
    if dropped > 0 {
        notes.push(format!(
            "region '{name}': {dropped} call(s) past the log's limit were not placed in time: counted at the placed calls' mean power"
        ));
    }
    let source = format!(
        "{}; the region's calls logged against the monotonic clock while the counters were read every ~0.2 ms, each call's joules read off the counters' cumulative energy (linear between updates); joules per run summed over its calls",
        m.description()
    );
    let mut e = assemble(m, samples, watts, idle, opts, flops, source, notes);
    let drew = format!(": region '{name}' drew");
    e.notes = e.notes.into_iter().map(|n| n.replacen(": the run drew", &drew, 1)).collect();
    e
}

/// Regions of one run by name: their segments.
pub type RunSegments = BTreeMap<String, RegionSegments>;
