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

pub use crate::cpus::allowed_cpus;

/// The `q` quantile (0 to 1) of `v`, linear between neighbours; `v` must not be empty (the
/// interleaved timing examples' medians, minima and maxima).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let x = q * (s.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (x - lo as f64)
}

/// Seconds for the interleaved timing examples: wall-clock time, or with
/// `ROOFLINE_THREAD_CPU_TIME=1` the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), which
/// leaves out the time the thread was descheduled (a build machine shared by other jobs; a
/// hypervisor's steal time still counts). Only differences of two readings mean anything.
pub fn example_seconds() -> f64 {
    static WALL: std::sync::OnceLock<(bool, Instant)> = std::sync::OnceLock::new();
    let (thread, t0) = *WALL.get_or_init(|| (std::env::var("ROOFLINE_THREAD_CPU_TIME").is_ok_and(|v| v == "1"), Instant::now()));
    if !thread {
        return t0.elapsed().as_secs_f64();
    }
    let mut ts = nix::libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let ok = unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    if ok {
        ts.tv_sec as f64 + 1e-9 * ts.tv_nsec as f64
    } else {
        t0.elapsed().as_secs_f64()
    }
}

/// A sample lasts at least this long: short calls are timed in batches.
pub const SAMPLE_TARGET_SECONDS: f64 = 20e-6;

/// Calls per timed sample of at least `target` seconds for a call of `one_call` seconds.
pub fn calls_per_sample(one_call: f64, target: f64) -> usize {
    if one_call.is_nan() || one_call <= 0.0 || target.is_nan() {
        return 1;
    }
    ((target / one_call).ceil() as usize).clamp(1, 1 << 16)
}

/// The length a sample aims at: [`SAMPLE_TARGET_SECONDS`], or longer where `max_samples` of
/// that length could not add up to `min_total` (an L1-sized call of ~100 ns would otherwise
/// stop after 1000 × 20 µs = 20 ms, a tenth of the default --min-time).
pub fn sample_target(repeat: &Repeat) -> f64 {
    SAMPLE_TARGET_SECONDS.max(repeat.min_total.as_secs_f64() / repeat.max_samples.max(1) as f64)
}

/// Untimed warm-up before the first sample: a quarter of `min_total`, at most 50 ms. A core
/// that was idle (or a vCPU the host just scheduled) runs below its working clock for a few
/// milliseconds; likwid-bench and hyperfine leave the same time before their figures.
pub fn warmup_seconds(repeat: &Repeat) -> f64 {
    (repeat.min_total.as_secs_f64() / 4.0).min(0.05)
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
    time_team_per_thread(instances, repeat, on_sample, hooks).samples
}

/// One team thread's own time: where it ran and how long its calls took, barriers excluded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadTime {
    /// The team thread's index.
    pub thread: usize,
    /// The CPU it was pinned to.
    pub cpu: usize,
    /// Its timed seconds per call, without the waits for the others at each repetition's end.
    pub seconds_per_call: f64,
}

/// A team's timing: each repetition's wall time per call (ended by the slowest thread), and
/// each thread's own time per call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TeamTiming {
    pub samples: Vec<f64>,
    pub threads: Vec<ThreadTime>,
}

/// [`time_team_hooked`] that also gives each thread's own time per call ([`TeamTiming`]): a
/// repetition ends when its slowest thread ends, and how much the others waited says whether
/// the team was held back by one of its CPUs.
pub fn time_team_per_thread(
    instances: Vec<Box<dyn Instance>>,
    repeat: Repeat,
    on_sample: &(dyn Fn(usize, f64) + Sync),
    hooks: Option<&dyn TeamHooks>,
) -> TeamTiming {
    let n = instances.len().max(1);
    let own_times = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let cpus = allowed_cpus();
    let barrier = Arc::new(Barrier::new(n));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    std::thread::scope(|s| {
        for (i, mut inst) in instances.into_iter().enumerate() {
            let barrier = barrier.clone();
            let samples = samples.clone();
            let own_times = own_times.clone();
            let stop = stop.clone();
            let calls = calls.clone();
            let cpu = cpus.get(i % cpus.len().max(1)).copied().unwrap_or(i);
            s.spawn(move || {
                pin_to_cpu(cpu);
                for _ in 0..repeat.warmup {
                    inst.run();
                }
                let (warm, warm_for) = (Instant::now(), warmup_seconds(&repeat));
                let mut warm_calls = 0u32;
                while warm.elapsed().as_secs_f64() < warm_for {
                    inst.run();
                    warm_calls += 1;
                }
                let warm_call = warm.elapsed().as_secs_f64() / warm_calls.max(1) as f64;
                // Calls per sample: one call of an L1-sized kernel lasts ~100 ns, as long as
                // the clock reads and barriers around it; time batches of at least
                // sample_target() and record the time per call. The warm-up's mean call
                // (many calls, no barrier inside) is the better estimate where it ran.
                barrier.wait();
                let t0 = Instant::now();
                inst.run();
                barrier.wait();
                if i == 0 {
                    let one = t0.elapsed().as_secs_f64();
                    let one = if warm_calls >= 2 { warm_call.min(one) } else { one };
                    calls.store(calls_per_sample(one, sample_target(&repeat)), std::sync::atomic::Ordering::SeqCst);
                }
                barrier.wait();
                let mut k = calls.load(std::sync::atomic::Ordering::SeqCst);
                let target = sample_target(&repeat);
                let mut total = 0.0;
                let mut count = 0;
                let mut made = 0u64;
                let mut own = 0.0;
                if let Some(h) = hooks {
                    h.begin(i);
                }
                loop {
                    barrier.wait();
                    let t0 = Instant::now();
                    for _ in 0..k {
                        inst.run();
                    }
                    own += t0.elapsed().as_secs_f64();
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
                        // A calibration made while the vCPU was descheduled or the clock
                        // still low overestimates the call: samples then fall far short of
                        // their target and max_samples ends the run before min_total.
                        // Batch again from the measured call.
                        if batch < target / 2.0 {
                            calls.store(calls_per_sample(dt, target), std::sync::atomic::Ordering::SeqCst);
                        }
                        on_sample(count, dt);
                    }
                    barrier.wait();
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    k = calls.load(std::sync::atomic::Ordering::SeqCst);
                }
                if let Some(h) = hooks {
                    h.end(i, made);
                }
                if let Ok(mut v) = own_times.lock() {
                    v.push(ThreadTime {
                        thread: i,
                        cpu,
                        seconds_per_call: own / made.max(1) as f64,
                    });
                }
            });
        }
    });
    let mut threads = Arc::try_unwrap(own_times)
        .map(|m| m.into_inner().unwrap_or_default())
        .unwrap_or_default();
    threads.sort_by_key(|t| t.thread);
    TeamTiming {
        samples: Arc::try_unwrap(samples).map(|m| m.into_inner().unwrap()).unwrap_or_default(),
        threads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_lengthen_so_min_total_is_reachable() {
        let mut r = Repeat::default();
        // 1000 samples of 20 µs cannot add up to 200 ms: each must last 200 µs.
        assert!((sample_target(&r) - 200e-6).abs() < 1e-12);
        r.min_total = Duration::from_millis(1);
        assert_eq!(sample_target(&r), SAMPLE_TARGET_SECONDS);
        r.max_samples = 0;
        assert!(sample_target(&r) >= SAMPLE_TARGET_SECONDS);
        assert!((2000..=2001).contains(&calls_per_sample(1e-7, 200e-6)));
        assert!(warmup_seconds(&Repeat::default()) <= 0.05 && warmup_seconds(&Repeat::default()) > 0.0);
        r.min_total = Duration::ZERO;
        assert_eq!(warmup_seconds(&r), 0.0);
    }

    /// Each team thread's own time leaves out its waits for the others: a thread that sleeps
    /// 2 ms a call beside one that does nothing has the long own time, the idle one a short
    /// one, and no thread's own time per call exceeds the team's mean time per call.
    #[test]
    fn each_thread_times_itself_without_the_waits() {
        struct Sleeper(Duration);
        impl Instance for Sleeper {
            fn run(&mut self) {
                std::thread::sleep(self.0);
            }
            fn verify(&mut self) -> Result<(), String> {
                Ok(())
            }
            fn counts(&self) -> crate::Counts {
                crate::Counts::default()
            }
        }
        // The sleeper first: thread 0's call sets the calls per repetition.
        let team: Vec<Box<dyn Instance>> = vec![Box::new(Sleeper(Duration::from_millis(2))), Box::new(Sleeper(Duration::ZERO))];
        let repeat = Repeat {
            min_total: Duration::from_millis(30),
            min_samples: 5,
            max_samples: 50,
            warmup: 1,
        };
        let t = time_team_per_thread(team, repeat, &|_, _| {}, None);
        assert_eq!(t.threads.iter().map(|x| x.thread).collect::<Vec<_>>(), vec![0, 1]);
        let cpus = allowed_cpus();
        for x in &t.threads {
            assert_eq!(x.cpu, cpus[x.thread % cpus.len()]);
        }
        let mean = t.samples.iter().sum::<f64>() / t.samples.len() as f64;
        assert!(t.threads.iter().all(|x| x.seconds_per_call <= mean * (1.0 + 1e-9)), "{t:?}");
        assert!(t.threads[0].seconds_per_call >= 2e-3, "{t:?}");
        assert!(t.threads[1].seconds_per_call < 0.5 * t.threads[0].seconds_per_call, "{t:?}");
    }

    /// A short kernel is timed for --min-time: before, 100 samples of 20 µs ended after 2 ms
    /// of the 60 ms asked.
    #[test]
    fn short_kernels_are_timed_for_min_total() {
        let k = crate::api::find("load").unwrap();
        let inst = vec![k.instance(512, crate::Variant::Scalar, 3).unwrap()];
        let repeat = Repeat {
            min_total: Duration::from_millis(60),
            min_samples: 5,
            max_samples: 100,
            warmup: 1,
        };
        let t = Instant::now();
        let samples = time_team(inst, repeat);
        let took = t.elapsed().as_secs_f64();
        assert!((5..=100).contains(&samples.len()), "{} samples", samples.len());
        // The 100 × 20 µs cap gave 2 ms; half of the 60 ms is the least a calibration that
        // corrects itself leaves.
        assert!(took >= 0.03, "timed for {took} s, asked for 60 ms");
    }

    /// A call that was slow while the runner calibrated (a descheduled vCPU, a cold clock)
    /// and fast afterwards still gets min_total of timed calls: the batch is sized again from
    /// the samples. CI's loaded VM ended such a run after 24 ms of the 60 ms asked.
    #[test]
    fn a_pessimistic_calibration_is_corrected() {
        struct SlowThenFast {
            created: Instant,
            first_fast: Arc<Mutex<Option<Instant>>>,
        }
        impl Instance for SlowThenFast {
            fn run(&mut self) {
                if self.created.elapsed() < Duration::from_millis(25) {
                    std::thread::sleep(Duration::from_millis(2));
                } else {
                    self.first_fast.lock().unwrap().get_or_insert_with(Instant::now);
                    std::hint::black_box((0..black_box_n()).fold(0u64, |a, b| a ^ b.wrapping_mul(0x9e37)));
                }
            }
            fn verify(&mut self) -> Result<(), String> {
                Ok(())
            }
            fn counts(&self) -> crate::Counts {
                crate::Counts::default()
            }
        }
        fn black_box_n() -> u64 {
            std::hint::black_box(1000)
        }
        let first_fast = Arc::new(Mutex::new(None));
        let inst: Vec<Box<dyn Instance>> = vec![Box::new(SlowThenFast {
            created: Instant::now(),
            first_fast: first_fast.clone(),
        })];
        let repeat = Repeat {
            min_total: Duration::from_millis(60),
            min_samples: 5,
            max_samples: 100,
            warmup: 1,
        };
        let samples = time_team(inst, repeat);
        let end = Instant::now();
        let fast_for = first_fast.lock().unwrap().map(|t| (end - t).as_secs_f64()).unwrap_or(0.0);
        assert!((5..=100).contains(&samples.len()), "{} samples", samples.len());
        // Calibrated at ~2 ms a call, a 600 µs sample is one call: 100 fast calls of ~1 µs
        // would end the run after 0.1 ms of them.
        assert!(fast_for >= 0.03, "fast calls timed for {fast_for} s, asked for 60 ms");
    }

    #[test]
    fn short_calls_are_batched_long_calls_are_not() {
        assert_eq!(calls_per_sample(1e-3, SAMPLE_TARGET_SECONDS), 1);
        assert_eq!(calls_per_sample(SAMPLE_TARGET_SECONDS, SAMPLE_TARGET_SECONDS), 1);
        assert!((200..=201).contains(&calls_per_sample(1e-7, SAMPLE_TARGET_SECONDS)));
        assert_eq!(calls_per_sample(0.0, SAMPLE_TARGET_SECONDS), 1);
        assert_eq!(calls_per_sample(f64::NAN, SAMPLE_TARGET_SECONDS), 1);
        assert_eq!(calls_per_sample(1e-12, SAMPLE_TARGET_SECONDS), 1 << 16);
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
