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

/// Per-thread calls around a team's timed repetitions (hardware counters opened, enabled and
/// read on the thread that runs the calls). Warm-up and calibration calls are outside.
pub trait TeamHooks: Sync {
    /// On team thread `i` (pinned), right before its first timed repetition.
    fn begin(&self, i: usize);
    /// On team thread `i`, right after its last timed repetition; `calls`: the timed calls
    /// it made (repetitions × calls per repetition).
    fn end(&self, i: usize, calls: u64);
}

/// [`time_team`], calling `on_sample(count, seconds)` after each timed repetition (from the
/// first thread, outside the timed region): progress bars, early feedback.
pub fn time_team_observed(instances: Vec<Box<dyn Instance>>, repeat: Repeat, on_sample: &(dyn Fn(usize, f64) + Sync)) -> Vec<f64> {
    time_team_hooked(instances, repeat, on_sample, None)
}

/// [`time_team_observed`] with [`TeamHooks`] around each thread's timed repetitions.
pub fn time_team_hooked(
    instances: Vec<Box<dyn Instance>>,
    repeat: Repeat,
    on_sample: &(dyn Fn(usize, f64) + Sync),
    hooks: Option<&dyn TeamHooks>,
) -> Vec<f64> {
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
                let mut made = 0u64;
                if let Some(h) = hooks {
                    h.begin(i);
                }
                loop {
                    barrier.wait();
                    let t0 = Instant::now();
                    for _ in 0..k {
                        inst.run();
                    }
                    barrier.wait();
                    let batch = t0.elapsed().as_secs_f64();
                    made += k as u64;
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
                if let Some(h) = hooks {
                    h.end(i, made);
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

    /// Hooks run once per thread, around exactly the timed calls (counted by the instance).
    #[test]
    fn hooks_bracket_exactly_the_timed_calls() {
        use std::sync::Mutex;
        struct Counting(Arc<AtomicUsize>);
        impl Instance for Counting {
            fn run(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
                std::hint::black_box((0..200).sum::<u64>());
            }
            fn verify(&mut self) -> Result<(), String> {
                Ok(())
            }
            fn counts(&self) -> crate::Counts {
                crate::Counts::default()
            }
        }
        struct Hooks {
            runs: Vec<Arc<AtomicUsize>>,
            at_begin: Mutex<Vec<(usize, usize)>>,
            at_end: Mutex<Vec<(usize, usize, u64)>>,
        }
        impl TeamHooks for Hooks {
            fn begin(&self, i: usize) {
                self.at_begin.lock().unwrap().push((i, self.runs[i].load(Ordering::SeqCst)));
            }
            fn end(&self, i: usize, calls: u64) {
                self.at_end.lock().unwrap().push((i, self.runs[i].load(Ordering::SeqCst), calls));
            }
        }
        let threads = 2;
        let runs: Vec<Arc<AtomicUsize>> = (0..threads).map(|_| Arc::new(AtomicUsize::new(0))).collect();
        let inst: Vec<Box<dyn Instance>> = runs.iter().map(|r| Box::new(Counting(r.clone())) as Box<dyn Instance>).collect();
        let hooks = Hooks {
            runs: runs.clone(),
            at_begin: Mutex::new(vec![]),
            at_end: Mutex::new(vec![]),
        };
        let repeat = Repeat {
            min_total: Duration::from_millis(0),
            min_samples: 3,
            max_samples: 3,
            warmup: 2,
        };
        let samples = time_team_hooked(inst, repeat, &|_, _| {}, Some(&hooks));
        assert_eq!(samples.len(), 3);
        let begin = hooks.at_begin.into_inner().unwrap();
        let end = hooks.at_end.into_inner().unwrap();
        assert_eq!((begin.len(), end.len()), (threads, threads));
        for (i, before, after, calls) in end.iter().map(|&(i, after, calls)| {
            let before = begin.iter().find(|b| b.0 == i).unwrap().1;
            (i, before, after, calls)
        }) {
            // warm-up (2) and the calibration call (1) come before the hook
            assert_eq!(before, 3, "thread {i}");
            assert_eq!((after - before) as u64, calls, "thread {i}");
            assert!(calls >= 3, "thread {i}: {calls}");
        }
    }
}
