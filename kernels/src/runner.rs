//! Run instances on a team of pinned threads and time them: the one timing loop shared by
//! `roofline run`, `sweep`, `ceilings` and the profile job.

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::api::Instance;

/// How long and how often to repeat.
#[derive(Debug, Clone, Copy)]
pub struct Repeat {
    /// Keep repeating until the samples add up to at least this long…
    pub min_total: Duration,
    /// …and at least this many samples…
    pub min_samples: usize,
    /// …but never more than this many.
    pub max_samples: usize,
    /// Untimed warm-up runs.
    pub warmup: usize,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat {
            min_total: Duration::from_millis(200),
            min_samples: 5,
            max_samples: 1000,
            warmup: 1,
        }
    }
}

/// Pin the calling thread to one CPU (best effort: a container may forbid it).
pub fn pin_to_cpu(cpu: usize) -> bool {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_err() {
        return false;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).is_ok()
}

/// CPUs this process may run on, in order (the pinning targets).
pub fn allowed_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect(),
    }
}

/// A sample lasts at least this long: short calls are timed in batches.
pub const SAMPLE_TARGET_SECONDS: f64 = 20e-6;

/// Calls per timed sample for a call that took `one_call` seconds.
pub fn calls_per_sample(one_call: f64) -> usize {
    if one_call.is_nan() || one_call <= 0.0 {
        return 1;
    }
    ((SAMPLE_TARGET_SECONDS / one_call).ceil() as usize).clamp(1, 1 << 16)
}

/// Wall-clock seconds per call of each repetition of all instances running at once, one
/// pinned thread per instance; a repetition ends when the slowest thread ends. Calls shorter
/// than [`SAMPLE_TARGET_SECONDS`] are repeated within a repetition and the time divided.
pub fn time_team(instances: Vec<Box<dyn Instance>>, repeat: Repeat) -> Vec<f64> {
    time_team_observed(instances, repeat, &|_, _| {})
}

/// [`time_team`], calling `on_sample(count, seconds)` after each timed repetition (from the
/// first thread, outside the timed region): progress bars, early feedback.
pub fn time_team_observed(instances: Vec<Box<dyn Instance>>, repeat: Repeat, on_sample: &(dyn Fn(usize, f64) + Sync)) -> Vec<f64> {
    let n = instances.len().max(1);
    let cpus = allowed_cpus();
    let barrier = Arc::new(Barrier::new(n));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    std::thread::scope(|s| {
        for (i, mut inst) in instances.into_iter().enumerate() {
            let barrier = barrier.clone();
            let samples = samples.clone();
            let stop = stop.clone();
            let calls = calls.clone();
            let cpu = cpus.get(i % cpus.len().max(1)).copied().unwrap_or(i);
            s.spawn(move || {
                pin_to_cpu(cpu);
                for _ in 0..repeat.warmup {
                    inst.run();
                }
                // Calls per sample: one call of an L1-sized kernel lasts ~100 ns, as long as
                // the clock reads and barriers around it; time batches of at least
                // SAMPLE_TARGET and record the time per call.
                barrier.wait();
                let t0 = Instant::now();
                inst.run();
                barrier.wait();
                if i == 0 {
                    calls.store(calls_per_sample(t0.elapsed().as_secs_f64()), std::sync::atomic::Ordering::SeqCst);
                }
                barrier.wait();
                let k = calls.load(std::sync::atomic::Ordering::SeqCst);
                let mut total = 0.0;
                let mut count = 0;
                loop {
                    barrier.wait();
                    let t0 = Instant::now();
                    for _ in 0..k {
                        inst.run();
                    }
                    barrier.wait();
                    let batch = t0.elapsed().as_secs_f64();
                    let dt = batch / k as f64;
                    if i == 0 {
                        samples.lock().unwrap().push(dt);
                        total += batch;
                        count += 1;
                        let done = count >= repeat.max_samples || (count >= repeat.min_samples && total >= repeat.min_total.as_secs_f64());
                        stop.store(done, std::sync::atomic::Ordering::SeqCst);
                        on_sample(count, dt);
                    }
                    barrier.wait();
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                }
            });
        }
    });
    Arc::try_unwrap(samples).map(|m| m.into_inner().unwrap()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_calls_are_batched_long_calls_are_not() {
        assert_eq!(calls_per_sample(1e-3), 1);
        assert_eq!(calls_per_sample(SAMPLE_TARGET_SECONDS), 1);
        assert!((200..=201).contains(&calls_per_sample(1e-7)));
        assert_eq!(calls_per_sample(0.0), 1);
        assert_eq!(calls_per_sample(f64::NAN), 1);
        assert_eq!(calls_per_sample(1e-12), 1 << 16);
    }
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn observer_sees_every_sample_in_order() {
        let k = crate::api::find("cos_chain_fused").unwrap();
        let inst = vec![k.instance(1000, crate::Variant::Scalar, 1).unwrap()];
        let seen = AtomicUsize::new(0);
        let repeat = Repeat {
            min_total: Duration::from_millis(0),
            min_samples: 4,
            max_samples: 4,
            warmup: 0,
        };
        let samples = time_team_observed(inst, repeat, &|count, secs| {
            assert_eq!(count, seen.fetch_add(1, Ordering::SeqCst) + 1);
            assert!(secs > 0.0);
        });
        assert_eq!(samples.len(), 4);
        assert_eq!(seen.load(Ordering::SeqCst), 4);
    }
}
