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
    recorded_meter(Recording::parse(&text, "simulated").unwrap(), 0).unwrap()
}

#[test]
fn a_recording_parses_and_refuses_bad_lines() {
    let r = Recording::parse("# idle\n0.0 1000\n0.5 1050 # 100 W\n\n1.0 1100\n", "rec").unwrap();
    assert_eq!(r.readings().len(), 3);
    assert_eq!(r.readings()[1].counts, [1050]);
    let m = recorded_meter(r.clone(), 3).unwrap();
    assert_eq!(m.domains()[0].name, "gpu3");
    // 100 mJ over a second: 0.1 J.
    assert!((m.joules(&r.readings()[0], &r.readings()[2])[0] - 0.1).abs() < 1e-12);
    for bad in ["0.0", "x 1", "0.0 -1", "1.0 5\n0.5 6", "0.0 1\n0.5 1 2"] {
        let e = Recording::parse(bad, "rec").unwrap_err();
        assert_eq!(e.exit_code(), 2, "{bad:?}");
        assert!(e.to_string().contains("rec:"), "{bad:?}: {e}");
    }
    // Two counts a reading are two domains: not one GPU's counter.
    let two = Recording::parse("0.0 1 2", "rec").unwrap();
    let e = recorded_meter(two, 0).err().unwrap();
    assert!(e.exit_code() == 2 && e.to_string().contains("2 counts a reading"), "{e}");
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
        longest_read_gap_seconds: 0.0,
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
    let m = recorded_meter(rec, 0).unwrap();
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

/// Whether the counter (updates every `g` seconds from `phase` on) shows a change at each of
/// the instants `at` (the first reading after an update).
fn changes_at(at: &[f64], g: f64, phase: f64) -> Vec<bool> {
    let update = |t: f64| if t < phase { -1.0 } else { ((t - phase) / g).floor() };
    (0..at.len()).map(|k| k > 0 && update(at[k]) > update(at[k - 1])).collect()
}

#[test]
fn a_whole_command_is_its_energy_within_the_derived_bound() {
    // The board idles, the command runs in pieces of random power, the board idles again; the
    // counter is read every few ms all along, replayed through the recording mechanism as
    // `gpu measure --energy` reads it live: the idle window, then a wait for an update before
    // the start, the run, a wait for the first update after the end. Some draws start at
    // once or stop early, without an update seen on that side.
    let mut d = Draws(0x2545_f491_4f6c_dd1d);
    for draw in 0..120 {
        let g = d.between(0.02, 0.15);
        let phase = d.between(0.0, g);
        let (gap_lo, gap_hi) = (d.between(5e-4, 2e-3), d.between(2e-3, 6e-3));
        let idle_watts = d.between(60.0, 140.0);
        let idle_seconds = 2.0;
        let run_seconds = d.between(0.01, 3.0);
        let subtract_idle = d.next() < 0.3;
        let (wait_before, wait_after) = (d.next() < 0.85, d.next() < 0.85);
        let mut at = vec![0.0];
        while *at.last().unwrap() < idle_seconds + 1.0 + run_seconds + 1.0 {
            let next = at.last().unwrap() + d.between(gap_lo, gap_hi);
            at.push(next);
        }
        let changes = changes_at(&at, g, phase);
        // The idle window reads until a reading is `idle_seconds` past its first.
        let first = at.iter().position(|t| *t >= idle_seconds).unwrap() + 1;
        let start = if wait_before {
            (first + 1..at.len()).find(|&k| changes[k]).unwrap() + 1
        } else {
            first
        };
        let stop = (start..at.len()).find(|&k| at[k] >= at[start] + run_seconds).unwrap();
        let last = if wait_after {
            (stop + 1..at.len()).find(|&k| changes[k]).unwrap()
        } else {
            stop
        };
        let (t_start, t_stop) = (at[start], at[stop]);
        let pieces = 1 + (d.next() * 3.0) as usize;
        let mut phases = vec![(t_start, idle_watts)];
        for _ in 0..pieces {
            phases.push(((t_stop - t_start) / pieces as f64, d.between(idle_watts, 700.0)));
        }
        let truth: f64 =
            phases[1..].iter().map(|(s, w)| s * w).sum::<f64>() - if subtract_idle { idle_watts * (t_stop - t_start) } else { 0.0 };
        phases.push((10.0, idle_watts));
        let readings = counter_readings(&phases, g, phase, &at[..=last]);
        let options = EnergyOptions {
            subtract_idle,
            idle_seconds,
        };
        let energy = crate::counters::energy::Energy::with_meter(recorded(readings), options).unwrap();
        let window: Vec<Reading> = (first..=last).map(|_| energy.read().unwrap()).collect();
        assert_eq!(
            window[0].seconds, at[first],
            "draw {draw}: the idle window took the readings before"
        );
        let run = energy.whole_run(&window, t_start, t_stop).unwrap();
        let got = run.energy.total_joules;
        let bound = run.uncertainty_joules;
        assert!(
            (got - truth).abs() <= bound + 1e-9 * truth.abs(),
            "draw {draw}: {got} J vs {truth} J (±{bound}; g {g}, run {run_seconds} s, waits {wait_before}/{wait_after})"
        );
        assert_eq!(run.energy.total_domain, "gpu0");
        assert_eq!(run.energy.domains["gpu0"].joules_samples, [got]);
        assert_eq!(run.energy.idle_subtracted, subtract_idle);
        let said = |what: &str| run.energy.notes.iter().any(|n| n.contains(what));
        assert_eq!(
            said("no counter update was seen before"),
            !wait_before,
            "draw {draw}: {:?}",
            run.energy.notes
        );
        assert_eq!(
            said("no counter update was seen after"),
            !wait_after,
            "draw {draw}: {:?}",
            run.energy.notes
        );
        if wait_before && wait_after && !subtract_idle {
            // With an update seen on both sides the bound is a read gap at idle power and the
            // idle power's error over an update interval or so: well under the energy of one
            // idle update interval, which a reading just before and after would miss at
            // each end.
            assert!(bound < idle_watts * g, "draw {draw}: ±{bound} J against {} J", idle_watts * g);
        }
    }
}

#[test]
fn several_boards_are_each_reckoned_on_their_own_counter_and_summed() {
    // Two to four boards, each with its own counter (granularity, phase, read instants and
    // clock), idle then a command of random power: each board's joules within its own bound,
    // the total their sum within the summed bounds, every board named and the hidden ones
    // said.
    let mut d = Draws(0x9e37_79b9_7f4a_7c15);
    for draw in 0..40 {
        let boards = 2 + (d.next() * 3.0) as usize;
        let run_seconds = d.between(0.2, 2.0);
        let idle_seconds = 1.0;
        let mut wholes = Vec::new();
        let mut truths = Vec::new();
        for b in 0..boards {
            let g = d.between(0.02, 0.15);
            let phase = d.between(0.0, g);
            let idle_watts = d.between(60.0, 140.0);
            let mut at = vec![0.0];
            while *at.last().unwrap() < idle_seconds + 1.0 + run_seconds + 1.0 {
                let next = at.last().unwrap() + d.between(5e-4, 4e-3);
                at.push(next);
            }
            let changes = changes_at(&at, g, phase);
            let first = at.iter().position(|t| *t >= idle_seconds).unwrap() + 1;
            let start = (first + 1..at.len()).find(|&k| changes[k]).unwrap() + 1;
            let stop = (start..at.len()).find(|&k| at[k] >= at[start] + run_seconds).unwrap();
            let last = (stop + 1..at.len()).find(|&k| changes[k]).unwrap();
            let (t_start, t_stop) = (at[start], at[stop]);
            let watts = d.between(idle_watts, 700.0);
            truths.push(watts * (t_stop - t_start));
            let phases = [(t_start, idle_watts), (t_stop - t_start, watts), (10.0, idle_watts)];
            let readings = counter_readings(&phases, g, phase, &at[..=last]);
            let text: String = readings.iter().map(|r| format!("{} {}\n", r.seconds, r.counts[0])).collect();
            let meter = recorded_meter(Recording::parse(&text, "simulated").unwrap(), b).unwrap();
            let options = EnergyOptions {
                subtract_idle: false,
                idle_seconds,
            };
            let energy = crate::counters::energy::Energy::with_meter(meter, options).unwrap();
            let window: Vec<Reading> = (first..=last).map(|_| energy.read().unwrap()).collect();
            let run = energy.whole_run(&window, t_start, t_stop).unwrap();
            let name = format!("gpu{b}");
            assert!(
                (run.energy.total_joules - truths[b]).abs() <= run.uncertainty_joules + 1e-9 * truths[b],
                "draw {draw} {name}: {} J vs {} J (±{})",
                run.energy.total_joules,
                truths[b],
                run.uncertainty_joules
            );
            wholes.push(run);
        }
        let bound: f64 = wholes.iter().map(|w| w.uncertainty_joules).sum();
        let each: Vec<f64> = wholes.iter().map(|w| w.energy.total_joules).collect();
        let all = crate::counters::energy::combine_boards(wholes);
        let names: Vec<String> = (0..boards).map(|b| format!("gpu{b}")).collect();
        assert_eq!(all.energy.total_domain, names.join("+"));
        assert_eq!(all.energy.domains.keys().cloned().collect::<Vec<_>>(), names);
        assert_eq!(all.energy.idle.len(), boards);
        assert!((all.uncertainty_joules - bound).abs() <= 1e-9 * bound);
        let truth: f64 = truths.iter().sum();
        assert!(
            (all.energy.total_joules - truth).abs() <= bound + 1e-9 * truth,
            "draw {draw}: {} J vs {truth} J (±{bound})",
            all.energy.total_joules
        );
        for (b, n) in names.iter().enumerate() {
            assert_eq!(all.energy.domains[n].joules, each[b]);
        }
        let hidden = vec!["00000000:9A:00.0 (NVIDIA H200)".to_string()];
        let c = crate::gpu::energy::command_energy(all, run_seconds, &names, &hidden);
        assert!(c.measured.contains(&format!("{boards} GPU boards summed: gpu0 ")), "{}", c.measured);
        assert!(c.measured.contains(&format!("on {}", names.join("+"))), "{}", c.measured);
        assert!(c.measured.contains("not counted: 00000000:9A:00.0 (NVIDIA H200)"), "{}", c.measured);
    }
}

#[test]
fn one_board_says_it_is_the_board_and_nothing_left_out() {
    let readings: Vec<Reading> = (0..400)
        .map(|k| Reading {
            seconds: k as f64 * 0.005,
            counts: vec![(k / 20) as u64 * 2_000],
        })
        .collect();
    let text: String = readings.iter().map(|r| format!("{} {}\n", r.seconds, r.counts[0])).collect();
    let meter = recorded_meter(Recording::parse(&text, "simulated").unwrap(), 1).unwrap();
    let energy = crate::counters::energy::Energy::with_meter(
        meter,
        EnergyOptions {
            subtract_idle: false,
            idle_seconds: 0.5,
        },
    )
    .unwrap();
    let window: Vec<Reading> = (0..200).map(|_| energy.read().unwrap()).collect();
    let run = energy.whole_run(&window, window[50].seconds, window[150].seconds).unwrap();
    let all = crate::counters::energy::combine_boards(vec![run]);
    assert_eq!(all.energy.total_domain, "gpu1");
    let c = crate::gpu::energy::command_energy(all, 0.5, &["gpu1".into()], &[]);
    assert!(
        c.measured.contains("on gpu1 (the GPU board)") && !c.measured.contains("not counted"),
        "{}",
        c.measured
    );
}

#[test]
fn pci_addresses_of_nvml_and_cuda_match_whatever_their_case_and_domain_width() {
    assert!(same_bus_id("00000000:9A:00.0", "00000000:9a:00.0"));
    assert!(same_bus_id("0000:1b:00.0", "00000000:1B:00.0"));
    assert!(!same_bus_id("00000000:1B:00.0", "00000000:1C:00.0"));
}
