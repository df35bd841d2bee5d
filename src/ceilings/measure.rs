//! Timing for the ceilings: instances that repeat a kernel inside one timed sample (so that
//! a sample is long against the team barrier), peak and clock-probe instances, calibration,
//! and the statistics of a figure.

use std::time::{Duration, Instant};

use roofline_kernels::peak::{PeakIsa, PeakSpec};
use roofline_kernels::runner::{Repeat, time_team};
use roofline_kernels::{Counts, Instance};

/// How long to measure each figure. Samples are short (1 ms): on a shared machine a sample
/// longer than the scheduler's time slice is almost always cut by another task, and the
/// median then measures the neighbours; short samples keep most of them undisturbed.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Target length of one sample (kernels repeat inside it).
    pub sample: Duration,
    /// Keep sampling until this much time is spent…
    pub min_total: Duration,
    /// …and at least this many samples.
    pub min_samples: usize,
}

impl Budget {
    pub fn quick() -> Budget {
        Budget {
            sample: Duration::from_millis(1),
            min_total: Duration::from_millis(25),
            min_samples: 7,
        }
    }
    pub fn full() -> Budget {
        Budget {
            sample: Duration::from_millis(1),
            min_total: Duration::from_millis(150),
            min_samples: 15,
        }
    }
}

/// `inner` run `times` times per `run()`.
pub struct Repeated {
    pub inner: Box<dyn Instance>,
    pub times: u64,
}

impl Instance for Repeated {
    fn run(&mut self) {
        for _ in 0..self.times {
            self.inner.run();
        }
    }
    fn verify(&mut self) -> Result<(), String> {
        self.inner.verify()
    }
    fn counts(&self) -> Counts {
        self.inner.counts().scaled(self.times)
    }
}

/// A peak loop as an instance.
pub struct PeakInstance {
    pub spec: PeakSpec,
    pub rounds: u64,
}

impl Instance for PeakInstance {
    fn run(&mut self) {
        std::hint::black_box(self.spec.run(self.rounds));
    }
    fn verify(&mut self) -> Result<(), String> {
        let r = self.spec.run(10);
        if r.is_finite() {
            Ok(())
        } else {
            Err(format!("peak loop {:?} gave {r}", self.spec))
        }
    }
    fn counts(&self) -> Counts {
        let mut c = Counts::default();
        let fma = self.spec.fma_flops_per_round() * self.rounds;
        c.add_flops(self.spec.class(), self.spec.flops_per_round() * self.rounds - fma);
        c.add_fma_flops(self.spec.class(), fma);
        c
    }
}

/// The clock probe as an instance (no flops counted: it measures cycles).
pub struct ClockInstance {
    pub isa: PeakIsa,
    pub rounds: u64,
}

impl Instance for ClockInstance {
    fn run(&mut self) {
        roofline_kernels::peak::clock_probe(self.isa, self.rounds);
    }
    fn verify(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn counts(&self) -> Counts {
        Counts::default()
    }
}

/// A run this long is timed once: its repetition count is 1 at any sample length the
/// ceilings use, and each extra run of a DRAM-sized kernel costs a tenth of a second.
const LONG_RUN: Duration = Duration::from_millis(10);

/// Seconds of one run of `inst` (the best of three, after a warm-up run; one, when it is long).
pub fn time_one(inst: &mut dyn Instance) -> f64 {
    inst.run();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t0 = Instant::now();
        inst.run();
        let t = t0.elapsed();
        best = best.min(t.as_secs_f64());
        if t >= LONG_RUN {
            break;
        }
    }
    best.max(1e-9)
}

/// How many repetitions of something taking `one` seconds fill `target`.
pub fn reps_for(one: f64, target: Duration) -> u64 {
    ((target.as_secs_f64() / one).ceil() as u64).clamp(1, 1 << 40)
}

/// A team of `threads` instances, `make(i)` for thread i, each repeated to fill one sample of
/// `sample`; with the repetition count. The count is timed on the team's own first instance:
/// a separate probe instance doubled the memory a DRAM-sized ceiling allocates and fills,
/// which was most of the main job's time on a machine with a large last-level cache.
pub fn repeated_team(
    threads: usize,
    sample: Duration,
    mut make: impl FnMut(usize) -> Result<Box<dyn Instance>, String>,
) -> Result<(Vec<Box<dyn Instance>>, u64), String> {
    let mut first = make(0)?;
    let times = reps_for(time_one(first.as_mut()), sample);
    let mut inner = vec![first];
    for i in 1..threads.max(1) {
        inner.push(make(i)?);
    }
    let team = inner
        .into_iter()
        .map(|inner| Box::new(Repeated { inner, times }) as Box<dyn Instance>)
        .collect();
    Ok((team, times))
}

/// Time a team (one instance per pinned thread) under `budget`.
pub fn time_instances(instances: Vec<Box<dyn Instance>>, budget: Budget) -> Vec<f64> {
    time_team(
        instances,
        Repeat {
            min_total: budget.min_total,
            min_samples: budget.min_samples,
            max_samples: 10_000,
            warmup: 1,
        },
    )
}

/// Median, best and relative spread of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    /// Interquartile spread (Q3 − Q1) / median: robust against the few samples that another
    /// task's time slice cuts (max − min would report those, and always exceed 5 % here).
    pub spread: f64,
    pub samples: usize,
}

use crate::schema::stats::quantile;

pub fn stats(samples: &[f64]) -> Stats {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let median = quantile(&v, 0.5);
    Stats {
        median,
        min: v.first().copied().unwrap_or(f64::NAN),
        spread: (quantile(&v, 0.75) - quantile(&v, 0.25)) / median,
        samples: v.len(),
    }
}

/// Spread above this is reported as a warning.
pub const SPREAD_WARNING: f64 = 0.05;

#[cfg(test)]
mod tests {
    use super::*;

    /// An instance that counts its runs (shared, so the test reads them after the team owns it).
    struct Counting(std::sync::Arc<std::sync::atomic::AtomicU64>);
    impl Instance for Counting {
        fn run(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        fn verify(&mut self) -> Result<(), String> {
            Ok(())
        }
        fn counts(&self) -> roofline_kernels::Counts {
            roofline_kernels::Counts::default()
        }
    }

    #[test]
    fn a_team_is_made_once_and_its_first_member_times_the_repetitions() {
        for threads in [1usize, 2, 5] {
            let runs: Vec<_> = (0..threads)
                .map(|_| std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)))
                .collect();
            let mut made = 0;
            let (mut team, times) = repeated_team(threads, Duration::from_millis(1), |i| {
                made += 1;
                Ok(Box::new(Counting(runs[i].clone())))
            })
            .unwrap();
            assert_eq!(made, threads, "no probe instance beside the team");
            assert_eq!(team.len(), threads);
            // The probe ran the first member: a warm-up and three timed runs (each far below LONG_RUN).
            let count = |i: usize| runs[i].load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(count(0), 4);
            assert!((1..threads).all(|i| count(i) == 0));
            assert!(times > 1, "a run of nothing is far shorter than a 1 ms sample: {times}");
            team[threads - 1].run();
            assert_eq!(count(threads - 1), if threads == 1 { 4 + times } else { times });
        }
    }

    #[test]
    fn interquartile_spread_ignores_a_few_preempted_samples() {
        let mut s: Vec<f64> = (0..20).map(|i| 1.0 + 0.001 * i as f64).collect();
        s.push(5.0); // one sample cut by another task
        let st = stats(&s);
        assert!((st.median - 1.010).abs() < 1e-9);
        assert!(st.spread < 0.05, "{st:?}");
        assert_eq!(st.min, 1.0);
        let wide = stats(&[1.0, 1.2, 1.4, 1.6, 1.8]);
        assert!((wide.spread - 0.4 / 1.4).abs() < 1e-9);
        assert!(stats(&[]).median.is_nan());
    }
}
