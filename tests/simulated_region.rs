//! The region API and the criterion support on the simulated PMU: a region closure
//! traced once in a forked child, its exact counts counted by the simulated counters through
//! perf's formulas, the region run in the process. A test binary of its own: the in-process
//! tracer waits for any child of the process, so no other test may spawn commands meanwhile.

use roofline::Platform;
use roofline::Source;
use roofline::{Backend, Session};
use roofline::{Faults, SimulatedPmu};

fn ptrace_allowed() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").map_or(true, |s| s.trim() != "3")
}

/// A number in [lo, hi), different per run (printed).
fn random(lo: u64, hi: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x = t ^ u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let v = lo + x % (hi - lo);
    eprintln!("random size {v}");
    v
}

/// The least running ratio this machine's simulated PMU gives a core event of a run without
/// faults: its G core groups take turns (1/G each) and a run of T ns is said running
/// round(T/G) ≥ 1 ns of it, so the ratio is ≥ max(1/G − 1/(2T), 1/T) ≥ 2/(3G) (1 for G = 1).
fn least_running_ratio() -> f64 {
    use roofline::__private::perf::{Scope, plan_groups};
    let pmu = SimulatedPmu::new(roofline::__private::platform(None).unwrap(), Faults::default());
    let (specs, counters, _) = pmu.counters(false, true).unwrap();
    let groups = plan_groups(&specs, counters)
        .iter()
        .filter(|g| specs[g[0]].scope == Scope::Core)
        .count();
    if groups <= 1 { 1.0 } else { 2.0 / (3.0 * groups as f64) }
}

/// A simulated PMU whose events fit the counters (Zen 3: no multiplexing, exact counts).
fn zen3_session(faults: &str) -> Session {
    let pmu = SimulatedPmu::new(Platform::load("zen3").unwrap(), Faults::parse(faults).unwrap());
    Session::simulated(pmu).unwrap()
}

#[test]
fn regions_and_criterion_work_count_on_the_simulated_pmu() {
    if !ptrace_allowed() {
        eprintln!("skipped: ptrace not permitted");
        return;
    }
    let n = random(2_000, 9_000) as usize;
    let x: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 1e-3).collect();
    let mut y: Vec<f64> = (0..n).map(|i| 2.0 - i as f64 * 1e-4).collect();
    let mut s = zen3_session("");
    let ((), m) = s
        .measure("axpy", || {
            for i in 0..n {
                let xi = std::hint::black_box(x[i]);
                y[i] += std::hint::black_box(xi * 3.0);
            }
        })
        .unwrap();
    // The region ran here too: y changed.
    assert!((y[0] - 5.0).abs() < 1e-12, "{}", y[0]);
    assert_eq!(
        m.flops.by_class.get("any_precision").copied(),
        Some(2.0 * n as f64),
        "{:?}",
        m.flops
    );
    let p = m.provenance.as_ref().unwrap();
    assert_eq!(p.flops, Some(Source::Simulated));
    assert!(p.notes[0].starts_with("SIMULATED PMU"), "{:?}", p.notes);
    // Totals accumulate over calls like perf's.
    s.region("axpy", || std::hint::black_box(&mut y)[0] += 1.0).unwrap();
    let t = s.totals("axpy").unwrap();
    assert_eq!(t.calls, 2);
    assert_eq!(t.measurement.flops.by_class["any_precision"], 2.0 * n as f64 + 1.0);
    // Injected faults reach regions too: an event off by a factor, a group multiplexed.
    let mut f = zen3_session("flops*0.5,mux=0.5");
    let ((), m) = f
        .measure("axpy", || {
            for i in 0..n {
                let xi = std::hint::black_box(x[i]);
                y[i] += std::hint::black_box(xi * 3.0);
            }
        })
        .unwrap();
    let half = m.flops.by_class["any_precision"];
    // Off by the scaling of a count (1 flop each) on a counter `ratio` of the run: the PMU
    // counts round(n × ratio), scaling divides by ratio: ≤ ½ / ratio (f64 slack on top).
    let ratio = m.extra.to_json()["multiplex_running_ratio"]["fp_ret_sse_avx_ops.all"]
        .as_f64()
        .unwrap_or_else(|| panic!("{:?}", m.extra));
    let bound = 0.5 / ratio + n as f64 * 1e-12;
    assert!((half - n as f64).abs() <= bound, "{half} for 2·{n} flops at half (bound {bound})");
    assert!(m.extra.to_json()["multiplex_running_ratio"].is_object(), "{:?}", m.extra);
    // begin/end alone cannot be traced in-process: said, not counted as zero.
    let e = s.begin("manual").unwrap_err();
    assert!(e.to_string().contains("closures"), "{e}");

    // The criterion support through the same simulated PMU.
    let mut work = || {
        for v in y.iter_mut() {
            *v = std::hint::black_box(*v * 0.5);
        }
    };
    match roofline::criterion_support::BenchWork::from_backend(Backend::Simulated, &mut work) {
        Ok(w) => {
            assert_eq!(w.source, Source::Simulated);
            // This machine's platform: where its events do not fit its counters (Skylake-SP:
            // 4 per core with SMT), the simulated PMU multiplexes as the kernel does, and the
            // count x enabled/running estimate rounds: ≤ ½ count / ratio, and flop_count rounds
            // the total (½). The Zen 3 PMU above, whose events fit, is checked exactly.
            let bound = 0.5 / least_running_ratio() + 0.5;
            assert!(
                w.flop_count().abs_diff(n as u64) as f64 <= bound,
                "{} for {n} (bound {bound}): {w:?}",
                w.flop_count()
            );
            // Faults reach the criterion measurement too (through the environment, as for
            // every command; this binary runs this one test, so no other reads it meanwhile).
            // SAFETY (of set_var): no other thread of this test binary reads the environment now.
            unsafe { std::env::set_var("ROOFLINE_SIMULATED_PMU", "flops*0.5") };
            let half = roofline::criterion_support::BenchWork::from_backend(Backend::Simulated, &mut work);
            unsafe { std::env::set_var("ROOFLINE_SIMULATED_PMU", "flops=einval") };
            let refused = roofline::criterion_support::BenchWork::from_backend(Backend::Simulated, &mut work);
            unsafe { std::env::remove_var("ROOFLINE_SIMULATED_PMU") };
            let half = half.unwrap().flop_count() as f64;
            assert!(
                (half - n as f64 / 2.0).abs() <= bound,
                "{half} for {n} flops at half (bound {bound})"
            );
            let e = refused.unwrap_err().to_string();
            assert!(e.contains("EINVAL"), "{e}");
        }
        Err(e) if e.to_string().contains("unknown microarchitecture") => eprintln!("criterion part skipped: {e}"),
        Err(e) => panic!("{e}"),
    }
}
