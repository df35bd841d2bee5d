//! The energy layer on recorded sysfs trees (`tests/fixtures/rapl/`) and recorded readings.

use std::path::PathBuf;

use super::*;
use crate::schema::energy::PointEnergy;

/// 2⁻³² J: the scale every `power/energy-*` event of Linux's RAPL PMU has.
const PERF_SCALE: f64 = 1.0 / 4_294_967_296.0;

fn tree(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rapl").join(name)
}

/// Readings replayed in order; `wait` only moves on.
struct Recorded {
    readings: Vec<Reading>,
    next: usize,
    bits: u32,
}

impl Source for Recorded {
    fn read(&mut self) -> crate::error::Result<Reading> {
        let r = self.readings.get(self.next).cloned();
        self.next += 1;
        r.ok_or_else(|| crate::error::Error::unavailable("recording exhausted", "record more"))
    }
    fn counter_bits(&self) -> u32 {
        self.bits
    }
    fn wait(&mut self, _seconds: f64) {}
}

fn reading(seconds: f64, counts: &[u64]) -> Reading {
    Reading {
        seconds,
        counts: counts.to_vec(),
    }
}

fn meter(tree_name: &str, readings: Vec<Reading>, bits: u32) -> Meter {
    let pmu = discover(&tree(tree_name)).unwrap();
    Meter::from_source(pmu.domains.clone(), Box::new(Recorded { readings, next: 0, bits }), pmu.describe())
}

#[test]
fn emerald_rapids_guest_has_psys_only() {
    let pmu = discover(&tree("emr-psys")).unwrap();
    assert_eq!(pmu.domains.len(), 1);
    assert_eq!(pmu.domains[0].name, "psys");
    assert_eq!(pmu.domains[0].config, 0x05);
    assert_eq!(pmu.domains[0].joules_per_count, PERF_SCALE);
    assert_eq!((pmu.type_, pmu.cpus.as_slice()), (9, &[0][..]));
    assert!(pmu.describe().contains("psys"), "{}", pmu.describe());
}

#[test]
fn amd_tree_has_no_dram_domain() {
    let pmu = discover(&tree("amd-zen3")).unwrap();
    let names: Vec<&str> = pmu.domains.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["pkg", "cores"]);
    assert_eq!(pmu.type_, 11);
}

#[test]
fn domains_come_in_a_fixed_order_with_their_configs() {
    let pmu = discover(&tree("intel-spr")).unwrap();
    let got: Vec<(&str, u64)> = pmu.domains.iter().map(|d| (d.name.as_str(), d.config)).collect();
    assert_eq!(got, [("pkg", 2), ("ram", 3), ("psys", 5)]);
    assert_eq!(pmu.cpus, [0, 56]);
}

#[test]
fn no_power_pmu_is_refused_with_the_missing_thing() {
    let e = discover(&tree("amd-zen3").join("power")).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let text = e.to_string();
    assert!(text.contains("no RAPL energy counters") && text.contains("power"), "{text}");
}

#[test]
fn an_event_without_a_scale_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let power = dir.path().join("power");
    std::fs::create_dir_all(power.join("events")).unwrap();
    std::fs::create_dir_all(power.join("format")).unwrap();
    std::fs::write(power.join("type"), "9\n").unwrap();
    std::fs::write(power.join("format/event"), "config:0-7\n").unwrap();
    std::fs::write(power.join("events/energy-pkg"), "event=0x02\n").unwrap();
    let e = discover(dir.path()).unwrap_err().to_string();
    assert!(e.contains("energy-pkg.scale"), "{e}");
    std::fs::write(power.join("events/energy-pkg.scale"), "2.3283064365386962890625e-10\n").unwrap();
    std::fs::write(power.join("events/energy-pkg.unit"), "Watts\n").unwrap();
    let e = discover(dir.path()).unwrap_err().to_string();
    assert!(e.contains("not Joules"), "{e}");
}

#[test]
fn each_domain_converts_with_its_own_scale() {
    // A DRAM domain whose kernel-side unit differs shows it in its own `.scale`: the meter
    // must not use the package's for it.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("power");
    std::fs::create_dir_all(copy.join("events")).unwrap();
    std::fs::create_dir_all(copy.join("format")).unwrap();
    let src = tree("intel-spr").join("power");
    for f in ["type", "cpumask", "format/event"] {
        std::fs::copy(src.join(f), copy.join(f)).unwrap();
    }
    for d in ["pkg", "ram"] {
        for ext in ["", ".scale", ".unit"] {
            let f = format!("events/energy-{d}{ext}");
            std::fs::copy(src.join(&f), copy.join(&f)).unwrap();
        }
    }
    std::fs::write(copy.join("events/energy-ram.scale"), "1.52587890625e-05\n").unwrap();
    let pmu = discover(dir.path()).unwrap();
    let m = Meter::from_source(
        pmu.domains.clone(),
        Box::new(Recorded {
            readings: vec![],
            next: 0,
            bits: 64,
        }),
        String::new(),
    );
    let j = m.joules(&reading(0.0, &[0, 0]), &reading(1.0, &[1 << 32, 65536]));
    assert_eq!(j, [1.0, 1.0]);
}

#[test]
fn wrap_around_of_a_32_bit_counter_is_the_distance_through_the_top() {
    assert_eq!(counts_between(u32::MAX as u64 - 9, 5, 32), 15);
    assert_eq!(counts_between(100, 250, 32), 150);
    assert_eq!(counts_between(u64::MAX - 1, 3, 64), 5);
    // A recorded 32-bit (MSR-style) counter in the SKX tree's units: 2⁻³² J per count, so
    // the counter wraps at 1 J; 0.75 J before the top and 0.5 J after it make 0.75 J.
    let m = meter("intel-skx", vec![], 32);
    let before = reading(0.0, &[3 << 30, 0, 0]);
    let after = reading(1.0, &[1 << 31, 1 << 31, 1 << 30]);
    assert_eq!(m.joules(&before, &after), [0.75, 0.5, 0.25]);
}

#[test]
fn idle_power_granularity_and_spread_from_a_recording() {
    // psys at 40 W, its count updating every millisecond, read every 0.25 ms for 100 ms.
    let counts_per_ms = (40.0 * 1e-3 / PERF_SCALE) as u64;
    let readings: Vec<Reading> = (0..=400)
        .map(|k| {
            let t = k as f64 * 0.25e-3;
            reading(t, &[(k / 4) as u64 * counts_per_ms])
        })
        .collect();
    let mut m = meter("emr-psys", readings, 64);
    let idle = m.idle(0.1, 2e-4, 5).unwrap();
    let w = idle.power[0].watts;
    assert!((w - 40.0).abs() < 40.0 * 1e-6, "{w}");
    let g = idle.granularity_seconds.unwrap();
    assert!((g - 1e-3).abs() < 1e-9, "{g}");
    assert!(idle.power[0].spread.unwrap() < 1e-6);
}

/// A kernel window: 50 W idle, 90 W while `n` repetitions of 5 ms ran after 10 ms of warm-up.
fn kernel_window(n: usize) -> (Meter, Vec<Reading>, Idle) {
    let j = |joules: f64| (joules / PERF_SCALE).round() as u64;
    let mut marks = vec![reading(0.0, &[0])];
    let warm = 0.010 * 90.0;
    for k in 1..=n {
        marks.push(reading(0.010 + 0.005 * k as f64, &[j(warm + 90.0 * 0.005 * k as f64)]));
    }
    let end = 0.010 + 0.005 * n as f64 + 0.001;
    marks.push(reading(end, &[j(warm + 90.0 * 0.005 * n as f64 + 0.09)]));
    let idle = Idle {
        power: vec![crate::schema::energy::IdlePower {
            watts: 50.0,
            spread: Some(0.02),
            seconds: 1.0,
        }],
        granularity_seconds: Some(1e-3),
        longest_read_gap_seconds: 0.0,
    };
    (meter("emr-psys", vec![], 64), marks, idle)
}

#[test]
fn kernel_energy_from_stretches_of_timed_repetitions() {
    let (m, marks, idle) = kernel_window(40);
    let opts = EnergyOptions::default();
    let e = kernel_energy_of(&m, &marks, &idle, opts, 0.005, 1e9);
    let psys = &e.domains["psys"];
    // 90 W × 5 ms per run, each stretch ≥ 20 ms.
    assert!((psys.joules - 0.45).abs() < 1e-6, "{}", psys.joules);
    assert!(psys.joules_samples.len() >= 5, "{:?}", psys.joules_samples);
    assert!((psys.watts - 90.0).abs() < 1e-3);
    assert_eq!(e.total_domain, "psys");
    assert!((e.gflop_per_joule.unwrap() - 1.0 / 0.45).abs() < 1e-4);
    assert!(!e.idle_subtracted);
    assert_eq!(e.granularity_seconds, Some(1e-3));
    assert!(e.notes.iter().any(|n| n.contains("other tenants")), "{:?}", e.notes);
    // Idle subtracted: (90 − 50) W × 5 ms.
    let sub = EnergyOptions {
        subtract_idle: true,
        ..opts
    };
    let e = kernel_energy_of(&m, &marks, &idle, sub, 0.005, 1e9);
    assert!((e.domains["psys"].joules - 0.2).abs() < 1e-6);
    assert!(e.idle_subtracted);
}

#[test]
fn a_short_window_is_taken_whole_and_said() {
    let (m, marks, idle) = kernel_window(2);
    let e = kernel_energy_of(&m, &marks, &idle, EnergyOptions::default(), 0.005, 0.0);
    assert!(e.notes.iter().any(|n| n.contains("warm-up")), "{:?}", e.notes);
    assert_eq!(e.gflop_per_joule, None);
    assert_eq!(e.domains["psys"].joules_samples.len(), 1);
}

#[test]
fn command_runs_each_between_two_readings_with_spread() {
    let m = meter("intel-spr", vec![], 64);
    let j = |joules: f64| (joules / PERF_SCALE).round() as u64;
    let runs: Vec<(Reading, Reading)> = [10.0, 11.0, 12.0]
        .iter()
        .enumerate()
        .map(|(i, pkg)| {
            let t = i as f64;
            (reading(t, &[0, 0, 0]), reading(t + 0.5, &[j(*pkg), j(2.0), j(pkg + 4.0)]))
        })
        .collect();
    let idle = Idle {
        power: vec![],
        granularity_seconds: Some(1e-3),
        longest_read_gap_seconds: 0.0,
    };
    let e = runs_energy_of(&m, &runs, &idle, EnergyOptions::default(), 0.0);
    assert!((e.domains["pkg"].joules - 11.0).abs() < 1e-6);
    assert!((e.domains["pkg"].spread.unwrap() - 1.0 / 11.0).abs() < 1e-6);
    // psys holds the others: it is the total where it exists.
    assert_eq!(e.total_domain, "psys");
    assert!((e.total_joules - 15.0).abs() < 1e-6);
    assert!((e.domains["ram"].watts - 4.0).abs() < 1e-6);
}

#[test]
fn the_total_is_psys_else_pkg_and_ram() {
    use crate::schema::energy::DomainEnergy;
    let d = |j: f64| DomainEnergy {
        joules: j,
        ..Default::default()
    };
    let mut map = std::collections::BTreeMap::new();
    map.insert("pkg".to_string(), d(3.0));
    map.insert("cores".to_string(), d(2.0));
    assert_eq!(PointEnergy::pick_total(&map), Some(("pkg".into(), 3.0)));
    map.insert("ram".to_string(), d(1.0));
    assert_eq!(PointEnergy::pick_total(&map), Some(("pkg+ram".into(), 4.0)));
}

#[test]
fn power_within_the_idle_noise_is_said() {
    let (m, marks, mut idle) = kernel_window(40);
    idle.power[0].watts = 89.0;
    let e = kernel_energy_of(&m, &marks, &idle, EnergyOptions::default(), 0.005, 1e9);
    assert!(e.notes.iter().any(|n| n.contains("cannot separate")), "{:?}", e.notes);
}

#[test]
fn without_permission_the_paranoid_level_and_the_fix_are_said() {
    let e = refuse_without_permission(Some(2), false).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let text = e.to_string();
    assert!(text.contains("perf_event_paranoid is 2") && text.contains("CAP_PERFMON"), "{text}");
    assert!(refuse_without_permission(Some(2), true).is_ok());
    assert!(refuse_without_permission(Some(0), false).is_ok());
    assert!(refuse_without_permission(None, false).is_ok());
}

#[test]
fn counters_that_never_move_are_refused_not_zero() {
    // What the Emerald Rapids guest gave: psys opened, and read the same over every window.
    let readings: Vec<Reading> = (0..=20).map(|k| reading(k as f64 * 0.025, &[0])).collect();
    let half = EnergyOptions {
        idle_seconds: 0.5,
        ..EnergyOptions::default()
    };
    let e = Energy::with_meter(meter("emr-psys", readings, 64), half).err().unwrap();
    assert_eq!(e.exit_code(), 2);
    let text = e.to_string();
    assert!(
        text.contains("power/energy-psys/ did not change") && text.contains("count nothing"),
        "{text}"
    );
    // One moving count is enough.
    let readings: Vec<Reading> = (0..=20).map(|k| reading(k as f64 * 0.025, &[k * 1000])).collect();
    let e = Energy::with_meter(meter("emr-psys", readings, 64), half).unwrap();
    let w = e.window().err().unwrap();
    assert!(w.to_string().contains("exhausted"));
}

#[test]
fn a_window_says_whether_the_count_changed_after_a_reading() {
    // The idle window takes the first 21 readings (0.5 s); then the count holds at 5000 for
    // three readings and moves at the fourth.
    let mut readings: Vec<Reading> = (0..=20).map(|k| reading(k as f64 * 0.025, &[k * 250])).collect();
    for (k, c) in [5000u64, 5000, 5000, 5001].into_iter().enumerate() {
        readings.push(reading(0.6 + k as f64 * 0.025, &[c]));
    }
    let half = EnergyOptions {
        idle_seconds: 0.5,
        ..EnergyOptions::default()
    };
    let e = Energy::with_meter(meter("emr-psys", readings, 64), half).unwrap();
    let w = e.window().unwrap();
    let first = w.readings()[0].clone();
    assert!(!w.changed_since(&first));
    let second = e.mark(&w).unwrap();
    assert!(!w.changed_since(&first) && !w.changed_since(&second));
    e.mark(&w).unwrap();
    let moved = e.mark(&w).unwrap();
    assert_eq!(moved.counts, [5001]);
    assert!(w.changed_since(&first) && w.changed_since(&second));
    // Nothing after the last reading.
    assert!(!w.changed_since(&moved));
}
