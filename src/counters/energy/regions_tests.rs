//! Joules per region against exact arithmetic: a random power profile per domain, a RAPL
//! counter that updates at jittered instants, readings every ~0.2 ms replayed as a recording
//! over a recorded sysfs tree, and random regions (nested, repeated, short and long calls)
//! folded as the marker crate folds them. Each region's joules must match the integral of the
//! power over its calls within a bound derived, for every draw, from the counter's update
//! interval and the read gap.

use std::path::PathBuf;

use roofline_marker::energy::Segments;

use super::domains::discover;
use super::regions::{RegionSegments, region_energy_of, region_run_of};
use super::{EnergyOptions, Meter, Reading, Recording};

const SCALE: f64 = 1.0 / 4_294_967_296.0;

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7);
    eprintln!("seed {s}");
    s
}

/// Piecewise-constant power per domain: (start, end, watts per domain), contiguous from 0.
struct Profile {
    phases: Vec<(f64, f64, Vec<f64>)>,
}

impl Profile {
    /// Joules of domain `d` from 0 to `t`.
    fn cumulative(&self, t: f64, d: usize) -> f64 {
        self.phases.iter().map(|(a, b, w)| (t.min(*b) - a).max(0.0) * w[d]).sum()
    }
    /// The highest power of domain `d` from `a` to `b`.
    fn max_in(&self, a: f64, b: f64, d: usize) -> f64 {
        self.phases
            .iter()
            .filter(|(s, e, _)| *e >= a && *s <= b)
            .map(|(_, _, w)| w[d])
            .fold(0.0, f64::max)
    }
}

fn uniform(next: &mut impl FnMut() -> u64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * ((next() >> 11) as f64 / (1u64 << 53) as f64)
}

struct Setup {
    meter: Meter,
    readings: Vec<Reading>,
    profile: Profile,
    /// The longest time between two counter updates, and between two readings.
    max_update: f64,
    max_gap: f64,
    idle_end: usize,
}

/// `seconds` of a random profile (100 ms idle first) on the tree `tree`, counted by a counter
/// updating every ~`update` s (jittered), read every ~0.2 ms; the counts start near the top of
/// 64 bits, so they wrap.
fn setup(next: &mut impl FnMut() -> u64, tree: &str, seconds: f64, update: f64) -> Setup {
    setup_in(next, tree, seconds, update, (2.0, 8.0))
}

/// [`setup`] with the phases' power `range` times the idle power.
fn setup_in(next: &mut impl FnMut() -> u64, tree: &str, seconds: f64, update: f64, range: (f64, f64)) -> Setup {
    let pmu = discover(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rapl").join(tree)).unwrap();
    let n = pmu.domains.len();
    let idle: Vec<f64> = (0..n).map(|_| uniform(next, 5.0, 40.0)).collect();
    let mut phases = vec![(0.0, 0.1, idle.clone())];
    let mut t = 0.1;
    while t < seconds {
        let len = uniform(next, 0.0005, 0.03);
        let watts: Vec<f64> = idle.iter().map(|i| i * uniform(next, range.0, range.1)).collect();
        phases.push((t, t + len, watts));
        t += len;
    }
    let profile = Profile { phases };
    // Update instants: every `update` with up to a fifth of it of jitter.
    let mut updates = Vec::new();
    let mut k = 1.0;
    while k * update < seconds {
        updates.push(k * update + uniform(next, 0.0, update / 5.0));
        k += 1.0;
    }
    let max_update = updates.windows(2).map(|w| w[1] - w[0]).fold(update, f64::max);
    let start: Vec<u64> = (0..n).map(|_| u64::MAX - next() % (1 << 36)).collect();
    let count_at = |u: f64, d: usize| start[d].wrapping_add((profile.cumulative(u, d) / SCALE) as u64);
    let mut text = String::new();
    let (mut r, mut seen, mut max_gap) = (0.0f64, 0usize, 0.0f64);
    let mut idle_end = 0;
    let mut lines = 0;
    while r < seconds {
        while seen < updates.len() && updates[seen] <= r {
            seen += 1;
        }
        let counts: Vec<String> = (0..n)
            .map(|d| {
                if seen == 0 {
                    start[d].to_string()
                } else {
                    count_at(updates[seen - 1], d).to_string()
                }
            })
            .collect();
        text += &format!("{r:.9} {}\n", counts.join(" "));
        lines += 1;
        if r < 0.1 {
            idle_end = lines;
        }
        let gap = uniform(next, 0.00015, 0.00025);
        max_gap = max_gap.max(gap);
        r += gap;
    }
    let mut meter = Recording::parse(&text, "test")
        .unwrap()
        .into_meter(pmu.domains.clone(), pmu.describe())
        .unwrap();
    let readings: Vec<Reading> = (0..lines).map(|_| meter.read().unwrap()).collect();
    Setup {
        meter,
        readings,
        profile,
        max_update,
        max_gap,
        idle_end,
    }
}

/// A region's calls (seconds), folded into segments as the marker crate folds them.
fn segments_of(calls: &[(f64, f64)], zero_ns: i128) -> RegionSegments {
    let ns = |t: f64| (zero_ns + (t * 1e9).round() as i128) as u64;
    let mut s = Segments::default();
    for (a, b) in calls {
        s.add(ns(*a), ns(*b));
    }
    RegionSegments {
        thread: 1,
        calls: s.calls,
        dropped_calls: s.dropped_calls,
        dropped_ns: s.dropped_ns,
        segments: s.list.iter().map(|g| [g.start_ns, g.end_ns, g.busy_ns]).collect(),
    }
}

/// Random calls from `from` to `to`: `count` of them, each `lo`–`hi` seconds long, apart.
fn calls(next: &mut impl FnMut() -> u64, from: f64, to: f64, count: usize, lo: f64, hi: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let slot = (to - from) / count as f64;
    for i in 0..count {
        let len = uniform(next, lo, hi.min(slot * 0.9));
        let a = from + i as f64 * slot + uniform(next, 0.0, slot - len);
        out.push((a, a + len));
    }
    out
}

#[test]
fn region_joules_match_the_integral_of_the_power_over_their_calls() {
    let mut next = xorshift(seed());
    for round in 0..12 {
        let tree = ["intel-skx", "intel-spr", "amd-zen3", "emr-psys"][round % 4];
        let update = uniform(&mut next, 0.0008, 0.0012);
        let s = setup(&mut next, tree, 1.2, update);
        let zero_ns = 1_000_000_000_000i128 + (next() % 1_000_000_000) as i128;
        // Long calls, an outer region with nested inner calls, short repeated calls, and
        // back-to-back short calls that fold into segments.
        let (n_long, n_outer, n_short) = (1 + (next() % 6) as usize, 1 + (next() % 4) as usize, 20 + (next() % 200) as usize);
        let long = calls(&mut next, 0.15, 1.1, n_long, 0.02, 0.1);
        let outer = calls(&mut next, 0.15, 1.1, n_outer, 0.05, 0.2);
        let inner: Vec<(f64, f64)> = outer
            .iter()
            .flat_map(|&(a, b)| {
                let k = 1 + (next() % 5) as usize;
                calls(&mut next, a, b, k, 0.0001, 0.01)
            })
            .collect();
        let short = calls(&mut next, 0.15, 1.1, n_short, 0.00002, 0.0008);
        let mut back_to_back = Vec::new();
        let mut t = uniform(&mut next, 0.2, 0.9);
        for _ in 0..(50 + next() % 500) {
            let len = uniform(&mut next, 0.000001, 0.00005);
            back_to_back.push((t, t + len));
            t += len + uniform(&mut next, 0.0, 0.00002);
        }
        let idle = s.meter.idle_from(&s.readings[..s.idle_end], 5);
        let granularity = idle.granularity_seconds.expect("updates while idle");
        for (name, region) in [
            ("long", &long),
            ("outer", &outer),
            ("inner", &inner),
            ("short", &short),
            ("back_to_back", &back_to_back),
        ] {
            let segs = segments_of(region, zero_ns);
            let run = region_run_of(&s.meter, &s.readings, zero_ns, &segs);
            let reach = s.max_update + s.max_gap;
            for (d, dom) in s.meter.domains().iter().enumerate() {
                let truth: f64 = region
                    .iter()
                    .map(|(a, b)| s.profile.cumulative(*b, d) - s.profile.cumulative(*a, d))
                    .sum();
                // The cumulative energy at an instant t is off by at most the power there ×
                // the read gap where the power is constant around t (over two update
                // intervals and gaps each side), else by the highest power there × (update
                // interval + read gap). Per segment: its ends' bounds scaled by its busy
                // share, the idle time inside a folded segment at the highest power over it,
                // the counter's unit and the nanosecond rounding beside.
                let end_bound = |t: f64| {
                    let (lo, hi) = (t - 2.0 * reach, t + 2.0 * reach);
                    let phases = s.profile.phases.iter().filter(|(a, b, _)| *b > lo && *a < hi).count();
                    s.profile.max_in(lo, hi, d) * if phases == 1 { s.max_gap } else { reach }
                };
                let tol: f64 = segs
                    .segments
                    .iter()
                    .map(|g| {
                        let (a, b) = ((g[0] as i128 - zero_ns) as f64 * 1e-9, (g[1] as i128 - zero_ns) as f64 * 1e-9);
                        let busy = g[2] as f64 * 1e-9;
                        let p = s.profile.max_in(a - 2.0 * reach, b + 2.0 * reach, d);
                        let ends = if b > a {
                            busy / (b - a) * (end_bound(a) + end_bound(b))
                        } else {
                            busy * p
                        };
                        ends + p * ((b - a) - busy).max(0.0) + p * 4e-9 + 4.0 * SCALE
                    })
                    .sum();
                let got = run.joules[d];
                assert!(
                    (got - truth).abs() <= tol,
                    "round {round} {tree} {name} {}: {got} J against {truth} J, tolerance {tol} J",
                    dom.name
                );
                if name == "long" {
                    // The bound is not vacuous: a call of 20+ ms at 2–8× the idle power is
                    // held to under 0.7 of its joules by construction (≤ 2 × 8 × 1.7 ms of
                    // idle power at the ends against ≥ 20 ms × 2).
                    assert!(tol < 0.7 * truth, "{name}: {tol} of {truth}");
                }
            }
            let busy: f64 = region.iter().map(|(a, b)| b - a).sum();
            assert!(
                (run.seconds - busy).abs() <= 1e-9 * region.len() as f64 + 1e-12,
                "{} {busy}",
                run.seconds
            );
            assert_eq!(run.calls, region.len() as u64);
            // Two runs of it: two samples; coarse said exactly when a call is under ten
            // updates.
            let e = region_energy_of(&s.meter, name, &[run.clone(), run.clone()], &idle, EnergyOptions::default(), 1e9);
            let coarse = e.notes.iter().any(|n| n.contains("coarse"));
            assert_eq!(
                coarse,
                run.seconds / (run.calls as f64) < 10.0 * granularity,
                "{name}: {:?}",
                e.notes
            );
            assert!(e.domains.values().all(|d| d.joules_samples.len() == 2));
            assert!(e.gflop_per_joule.is_some_and(|g| (g - 1.0 / e.total_joules).abs() <= 1e-9 * g));
        }
    }
}

#[test]
fn idle_subtracted_takes_the_idle_power_times_the_region_s_time_off() {
    let mut next = xorshift(seed());
    let s = setup(&mut next, "intel-skx", 0.6, 0.001);
    let zero_ns = 5_000_000_000i128;
    let region = calls(&mut next, 0.15, 0.55, 3, 0.02, 0.1);
    let segs = segments_of(&region, zero_ns);
    let run = region_run_of(&s.meter, &s.readings, zero_ns, &segs);
    let idle = s.meter.idle_from(&s.readings[..s.idle_end], 5);
    let opts = EnergyOptions {
        subtract_idle: true,
        ..EnergyOptions::default()
    };
    let e = region_energy_of(&s.meter, "r", std::slice::from_ref(&run), &idle, opts, 0.0);
    assert!(e.idle_subtracted);
    for (d, dom) in s.meter.domains().iter().enumerate() {
        let want = run.joules[d] - idle.power[d].watts * run.seconds;
        let got = e.domains[&dom.name].joules;
        assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "{got} {want}");
        // Power is the gross power over the region's time.
        assert!((e.domains[&dom.name].watts - run.joules[d] / run.seconds).abs() <= 1e-9 * e.domains[&dom.name].watts);
    }
}

#[test]
fn calls_past_the_log_s_limit_count_at_the_placed_calls_power() {
    let mut next = xorshift(seed());
    let s = setup(&mut next, "emr-psys", 0.4, 0.001);
    let zero_ns = 0i128;
    let region = calls(&mut next, 0.15, 0.35, 4, 0.01, 0.04);
    let mut segs = segments_of(&region, zero_ns);
    let placed = region_run_of(&s.meter, &s.readings, zero_ns, &segs);
    let extra = 1 + next() % 1_000_000_000;
    segs.dropped_calls = 7;
    segs.dropped_ns = extra;
    let run = region_run_of(&s.meter, &s.readings, zero_ns, &segs);
    let busy: u64 = segs.segments.iter().map(|g| g[2]).sum();
    let want = placed.joules[0] * (busy + extra) as f64 / busy as f64;
    assert!((run.joules[0] - want).abs() <= 1e-12 * want);
    assert_eq!(run.calls, region.len() as u64 + 7);
    let idle = s.meter.idle_from(&s.readings[..s.idle_end], 5);
    let e = region_energy_of(&s.meter, "r", &[run], &idle, EnergyOptions::default(), 0.0);
    assert!(
        e.notes.iter().any(|n| n.contains("7 call(s) past the log's limit")),
        "{:?}",
        e.notes
    );
}

#[test]
fn a_region_drawing_no_more_than_idle_is_said_to_be_inseparable_from_its_neighbours() {
    // Phases at 0.3–0.6× the idle power: every region's power is below idle, so each domain
    // says it; at 3–8× none does (the idle slices' spread is far below 2×).
    let mut next = xorshift(seed());
    for (range, said) in [((0.3, 0.6), true), ((3.0, 8.0), false)] {
        let s = setup_in(&mut next, "intel-spr", 0.5, 0.001, range);
        let zero_ns = 77_000_000i128;
        let region = calls(&mut next, 0.15, 0.45, 2, 0.05, 0.1);
        let run = region_run_of(&s.meter, &s.readings, zero_ns, &segments_of(&region, zero_ns));
        let idle = s.meter.idle_from(&s.readings[..s.idle_end], 5);
        let e = region_energy_of(&s.meter, "quiet", &[run], &idle, EnergyOptions::default(), 0.0);
        for d in s.meter.domains() {
            let note = format!("{}: region 'quiet' drew", d.name);
            assert_eq!(
                e.notes.iter().any(|n| n.starts_with(&note)),
                said,
                "{range:?} {}: {:?}",
                d.name,
                e.notes
            );
        }
    }
}
