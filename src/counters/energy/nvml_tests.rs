//! The GPU counter's arithmetic on recorded and simulated NVML readings: millijoule deltas,
//! the idle power and the counter's granularity, idle subtraction, picojoules per unit.

use super::*;
use crate::counters::energy::{EnergyOptions, Idle, kernel_energy_of, per_unit_samples};

/// xorshift64*: draws in [0, 1) from `seed`, no dependency.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

/// A board drawing `watts(t)` (piecewise constant over `phases` of (seconds, watts)) whose
/// counter takes the energy so far, whole millijoules, at updates every `granularity` seconds
/// (from `phase` on); read at the instants `at`.
fn counter_readings(phases: &[(f64, f64)], granularity: f64, phase: f64, at: &[f64]) -> Vec<Reading> {
    let energy_until = |t: f64| {
        let (mut e, mut start) = (0.0, 0.0);
        for &(len, w) in phases {
            let end = start + len;
            e += w * (t.min(end) - start).max(0.0);
            start = end;
        }
        e
    };
    at.iter()
        .map(|&t| {
            let updated = if t < phase { 0.0 } else { phase + ((t - phase) / granularity).floor() * granularity };
            Reading {
                seconds: t,
                counts: vec![(energy_until(updated) * 1e3).floor() as u64],
            }
        })
        .collect()
}

fn recorded(readings: Vec<Reading>) -> Meter {
    let text: String = readings.iter().map(|r| format!("{} {}\n", r.seconds, r.counts[0])).collect();
    Recording::parse(&text, "simulated").unwrap().into_meter(0)
}

#[test]
fn a_recording_parses_and_refuses_bad_lines() {
    let r = Recording::parse("# idle\n0.0 1000\n0.5 1050 # 100 W\n\n1.0 1100\n", "rec").unwrap();
    assert_eq!(r.readings().len(), 3);
    assert_eq!(r.readings()[1].counts, [1050]);
    let m = r.clone().into_meter(3);
    assert_eq!(m.domains()[0].name, "gpu3");
    // 100 mJ over a second: 0.1 J.
    assert!((m.joules(&r.readings()[0], &r.readings()[2])[0] - 0.1).abs() < 1e-12);
    for bad in ["0.0", "0.0 1 2", "x 1", "0.0 -1", "1.0 5\n0.5 6"] {
        let e = Recording::parse(bad, "rec").unwrap_err();
        assert_eq!(e.exit_code(), 2, "{bad:?}");
        assert!(e.to_string().contains("rec:"), "{bad:?}: {e}");
    }
}

#[test]
fn idle_power_and_granularity_of_a_coarse_counter_within_derived_bounds() {
    let mut d = Draws(0x9e37_79b9_7f4a_7c15);
    for draw in 0..200 {
        let watts = d.between(40.0, 200.0);
        let g = d.between(0.005, 0.12);
        let poll = d.between(2e-4, 2e-3);
        let span = d.between(1.0, 3.0);
        let at: Vec<f64> = (0..).map(|k| k as f64 * poll).take_while(|t| *t <= span).collect();
        let readings = counter_readings(&[(span + 1.0, watts)], g, d.between(0.0, g), &at);
        let mut m = recorded(readings.clone());
        let idle = m.idle(span - poll, poll, 5).unwrap();
        let got = idle.power[0].watts;
        // Each end of the window sees the energy up to one update late and floored to a
        // millijoule: at most W·g + 1 mJ each, over the window's length.
        let seconds = idle.power[0].seconds;
        let tol = 2.0 * (watts * g + 1e-3) / seconds;
        assert!((got - watts).abs() <= tol, "draw {draw}: {got} W vs {watts} W (±{tol})");
        // Changes are seen at the first poll after each update: gaps of g give or take a poll.
        let gran = idle.granularity_seconds.unwrap();
        assert!((gran - g).abs() <= poll + 1e-9, "draw {draw}: granularity {gran} vs {g} (poll {poll})");
    }
}

/// The marks of a window of repeated work: idle until `t0`, then `watts` while work proceeds
/// at `rate` units per second, a mark after every batch of `batch` seconds.
struct WorkWindow {
    marks: Vec<Reading>,
    units: Vec<f64>,
}

fn work_window(d: &mut Draws, idle_watts: f64, watts: f64, rate: f64, g: f64, batch: f64, seconds: f64) -> WorkWindow {
    let phase = d.between(0.0, g);
    let t0 = 1.0;
    let mut at = vec![t0];
    while *at.last().unwrap() < t0 + seconds {
        let jitter = d.between(0.9, 1.1);
        at.push(at.last().unwrap() + batch * jitter);
    }
    let marks = counter_readings(&[(t0, idle_watts), (seconds * 2.0, watts)], g, phase, &at);
    let units = at.iter().map(|t| (t - t0) * rate).collect();
    WorkWindow { marks, units }
}

#[test]
fn picojoules_per_unit_are_the_power_above_idle_over_the_rate_within_derived_bounds() {
    let mut d = Draws(42);
    for draw in 0..200 {
        let idle_watts = d.between(60.0, 120.0);
        let watts = idle_watts + d.between(50.0, 600.0);
        let rate = d.between(1e12, 1e15); // flops or bytes per second
        let g = d.between(0.005, 0.1);
        let stretch = (10.0 * g).max(0.1);
        let batch = stretch / d.between(4.0, 10.0);
        let w = work_window(&mut d, idle_watts, watts, rate, g, batch, stretch * 6.0);
        let m = recorded(vec![]);
        let idle = Idle {
            power: vec![crate::schema::energy::IdlePower {
                watts: idle_watts,
                spread: None,
                seconds: 2.0,
            }],
            granularity_seconds: Some(g),
        };
        let xs = per_unit_samples(&m, &w.marks, &w.units, stretch, &idle);
        assert!(xs.len() >= 4, "draw {draw}: {} samples", xs.len());
        let truth = (watts - idle_watts) / rate * 1e12;
        // A stretch of dt ≥ `stretch` sees its ends' energy up to one update (W·g) and a
        // millijoule off each: a power error of 2(W·g + 1 mJ)/dt, over the rate.
        let tol = 2.0 * (watts * g + 1e-3) / stretch / rate * 1e12;
        for x in &xs {
            assert!((x - truth).abs() <= tol, "draw {draw}: {x} pJ vs {truth} (±{tol})");
        }
        // The same window as a kernel's energy: joules per run = stretch power × run time,
        // the idle power taken off when asked.
        let per_run = d.between(1e-4, 1e-2);
        let opts = EnergyOptions {
            subtract_idle: true,
            idle_seconds: 2.0,
        };
        let e = kernel_energy_of(&m, &w.marks, &idle, opts, per_run, rate * per_run);
        let dom = &e.domains["gpu0"];
        let want = (watts - idle_watts) * per_run;
        // Its stretches are the meter's own: ten counter updates, at least 20 ms.
        let jtol = 2.0 * (watts * g + 1e-3) / (10.0 * g).max(0.02) * per_run;
        assert!((dom.joules - want).abs() <= jtol, "draw {draw}: {} J vs {want} (±{jtol})", dom.joules);
        assert_eq!(e.total_domain, "gpu0");
        let gfj = e.gflop_per_joule.unwrap();
        let want_gfj = rate * per_run / 1e9 / dom.joules;
        assert!((gfj - want_gfj).abs() <= 1e-9 * want_gfj, "draw {draw}");
        assert!(e.idle_subtracted);
    }
}

#[test]
fn a_window_shorter_than_a_stretch_gives_no_figure() {
    let mut d = Draws(7);
    let w = work_window(&mut d, 80.0, 300.0, 1e14, 0.05, 0.05, 0.3);
    let idle = Idle {
        power: vec![],
        granularity_seconds: Some(0.05),
    };
    let m = recorded(vec![]);
    assert!(per_unit_samples(&m, &w.marks, &w.units, 0.5, &idle).is_empty());
    // Marks and work of different lengths: nothing, rather than a misaligned figure.
    assert!(per_unit_samples(&m, &w.marks, &w.units[1..], 0.01, &idle).is_empty());
}
