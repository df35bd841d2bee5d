//! The GPU counter's arithmetic on recorded and simulated NVML readings: millijoule deltas,
//! the idle power and the counter's granularity, idle subtraction, picojoules per unit.

use super::*;
use crate::counters::energy::{EnergyOptions, Idle, change_stretches, per_unit_samples, steady_energy_of};

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
            let updated = if t < phase {
                0.0
            } else {
                phase + ((t - phase) / granularity).floor() * granularity
            };
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
        assert!(
            (gran - g).abs() <= poll + 1e-9,
            "draw {draw}: granularity {gran} vs {g} (poll {poll})"
        );
    }
}

/// A window of steady work: idle until `t0`, then `watts` for `seconds`, the counter read
/// every `poll` seconds (give or take a tenth) all along.
fn steady_window(d: &mut Draws, idle_watts: f64, watts: f64, g: f64, poll: f64, seconds: f64) -> (Vec<Reading>, f64) {
    let t0 = 1.0;
    let mut at = vec![0.0];
    while *at.last().unwrap() < t0 + seconds {
        let next = at.last().unwrap() + poll * d.between(0.9, 1.1);
        at.push(next);
    }
    let phase = d.between(0.0, g);
    (counter_readings(&[(t0, idle_watts), (seconds * 2.0, watts)], g, phase, &at), t0)
}

fn idle_of(watts: f64, g: f64) -> Idle {
    Idle {
        power: vec![crate::schema::energy::IdlePower {
            watts,
            spread: None,
            seconds: 2.0,
        }],
        granularity_seconds: Some(g),
    }
}

#[test]
fn picojoules_per_unit_are_the_power_above_idle_over_the_rate_within_derived_bounds() {
    let mut d = Draws(42);
    for draw in 0..200 {
        let idle_watts = d.between(60.0, 140.0);
        let watts = idle_watts + d.between(50.0, 600.0);
        let rate = d.between(1e12, 1e15); // flops or bytes per second
        let g = d.between(0.005, 0.12);
        let poll = d.between(5e-4, 4e-3);
        let stretch = (10.0 * g).max(0.1);
        let (readings, t0) = steady_window(&mut d, idle_watts, watts, g, poll, stretch * 6.5);
        // The steady part starts after a warm-up stretch.
        let (from, to) = (t0 + stretch, t0 + stretch * 6.5);
        let m = recorded(vec![]);
        let idle = idle_of(idle_watts, g);
        let xs = per_unit_samples(&m, &readings, from, to, rate, stretch, &idle);
        assert!(xs.len() >= 4, "draw {draw}: {} samples", xs.len());
        let truth = (watts - idle_watts) / rate * 1e12;
        // A stretch between two changes holds the energy between two updates exactly (floored
        // to a millijoule) and is timed from the first reading showing each: off by under a
        // poll at each end. So the power is off by at most (W·poll + 1 mJ) / stretch.
        let tol = (watts * poll * 1.1 + 1e-3) / stretch / rate * 1e12;
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
        let e = steady_energy_of(&m, &readings, from, to, stretch, &idle, opts, per_run, rate * per_run);
        let dom = &e.domains["gpu0"];
        let want = (watts - idle_watts) * per_run;
        let jtol = (watts * poll * 1.1 + 1e-3) / stretch * per_run;
        assert!(
            (dom.joules - want).abs() <= jtol,
            "draw {draw}: {} J vs {want} (±{jtol})",
            dom.joules
        );
        assert!((dom.watts - watts).abs() <= (watts * poll * 1.1 + 1e-3) / stretch, "draw {draw}");
        assert_eq!(e.total_domain, "gpu0");
        let gfj = e.gflop_per_joule.unwrap();
        let want_gfj = rate * per_run / 1e9 / dom.joules;
        assert!((gfj - want_gfj).abs() <= 1e-9 * want_gfj, "draw {draw}");
        assert!(e.idle_subtracted);
        // Not subtracted: the whole power × the run's time.
        let whole = steady_energy_of(&m, &readings, from, to, stretch, &idle, EnergyOptions::default(), per_run, 0.0);
        let want = watts * per_run;
        assert!((whole.domains["gpu0"].joules - want).abs() <= jtol, "draw {draw}");
        assert_eq!(whole.gflop_per_joule, None);
    }
}

#[test]
fn changes_seen_at_coarse_reads_are_off_by_a_read_gap_not_an_update() {
    // 100 ms updates read every 125 ms (a read after each batch only): a 1 s stretch timed
    // from the changes is off by a read gap (12 %), not bounded by the update interval alone;
    // so the GPU's counter is read every few milliseconds while the kernels run.
    let mut d = Draws(3);
    let (readings, t0) = steady_window(&mut d, 100.0, 600.0, 0.1, 0.125, 8.0);
    let m = recorded(vec![]);
    let stretches = change_stretches(&m, &readings, t0 + 1.0, t0 + 8.0, 1.0);
    assert!(stretches.len() >= 5, "{stretches:?}");
    for (dt, j) in &stretches {
        assert!((j[0] / dt - 600.0).abs() <= (600.0 * 0.125 * 1.1 + 1e-3) / dt, "{} W", j[0] / dt);
    }
}

#[test]
fn no_figure_without_a_whole_stretch_or_a_rate() {
    let mut d = Draws(7);
    let (readings, t0) = steady_window(&mut d, 80.0, 300.0, 0.05, 0.003, 0.3);
    let m = recorded(vec![]);
    let idle = idle_of(80.0, 0.05);
    assert!(per_unit_samples(&m, &readings, t0, t0 + 0.3, 1e12, 0.5, &idle).is_empty());
    assert!(per_unit_samples(&m, &readings, t0, t0 + 0.3, 0.0, 0.01, &idle).is_empty());
    let e = steady_energy_of(&m, &readings, t0, t0 + 0.3, 0.5, &idle, EnergyOptions::default(), 1e-3, 1e9);
    assert!(e.notes.iter().any(|n| n.contains("no joules measured")), "{:?}", e.notes);
    assert_eq!(e.gflop_per_joule, None);
}

/// `roofline gpu run dgemm --size 8192 --energy` on an H200 (2026-11-29, the readings written
/// through ROOFLINE_NVML_RECORD_TO): 2 s of idle read every ~3 ms, then cuBLAS's timing, then
/// the DGEMM repeated, read every ~3 ms all along.
const H200_DGEMM: &str = include_str!("../../../tests/fixtures/nvml/h200-dgemm.txt");

#[test]
fn the_h200_recording_idle_power_granularity_and_load_within_the_board_s_limits() {
    let rec = Recording::parse(H200_DGEMM, "h200-dgemm.txt").unwrap();
    let readings = rec.readings().to_vec();
    let idle_part: Vec<Reading> = readings.iter().filter(|r| r.seconds <= 2.0).cloned().collect();
    let m = rec.into_meter(0);
    let idle = m.idle_from(&idle_part, 5);
    // The counter changed every 100 ms (the median gap between changes, to a read's 3 ms).
    let g = idle.granularity_seconds.unwrap();
    assert!((g - 0.1).abs() < 0.004, "{g}");
    // nvidia-smi read 82.6 W before the context opened; with it open the board idles higher,
    // and far under its 700 W limit.
    let w = idle.power[0].watts;
    assert!(w > 82.0 && w < 200.0, "{w}");
    // The DGEMM's steady part (the last 6 s): each 1 s stretch between changes under the
    // 700 W power limit, allowing the largest read gap over the stretch, and well above idle.
    let end = readings.last().unwrap().seconds;
    let stretches = change_stretches(&m, &readings, end - 6.0, end, 1.0);
    assert!(stretches.len() >= 4, "{stretches:?}");
    let gaps: Vec<f64> = readings
        .windows(2)
        .filter(|p| p[0].seconds >= end - 6.0)
        .map(|p| p[1].seconds - p[0].seconds)
        .collect();
    let gap = gaps.iter().copied().fold(0.0, f64::max);
    for (dt, j) in &stretches {
        let p = j[0] / dt;
        assert!(
            p <= 700.0 * (1.0 + gap / dt) + 1e-3 / dt && p > 3.0 * w,
            "{p} W over {dt} s (gap {gap})"
        );
    }
}
