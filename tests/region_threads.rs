//! A region counts the whole process by default (issue 25 item 1): the work of threads that
//! existed before the session and of threads started inside the region. Software events
//! (task-clock) need no PMU, so this runs on any Linux machine; the same path opens the
//! hardware events on a machine with a PMU.

use roofline::region::{Session, software_events};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Task-clock (ns) of region `name` and its wall time (s).
fn task_clock(s: &Session, name: &str) -> (f64, f64) {
    let t = s.totals(name).unwrap();
    let i = s
        .events()
        .iter()
        .position(|e| e.contains("task-clock"))
        .expect("task-clock counted");
    (t.counts[i].expect("task-clock scheduled"), t.seconds)
}

fn spinners(n: usize, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect()
}

/// Busy-wait on this thread for `d` (its own task-clock grows too).
fn spin_for(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn a_region_counts_a_pool_started_before_the_session_and_threads_started_inside() {
    if software_events().is_empty() {
        eprintln!("skipping: no software perf events here");
        return;
    }
    // Two busy threads before the session (a pool), the main thread sleeping in the region:
    // the region's CPU time is the pool's.
    let stop = Arc::new(AtomicBool::new(false));
    let pool = spinners(2, &stop);
    std::thread::sleep(Duration::from_millis(20));
    let mut whole = Session::software().unwrap();
    let mut own = Session::software_this_thread().unwrap();
    whole.begin("pool").unwrap();
    own.begin("pool").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    own.stop("pool").unwrap();
    let m = whole.end("pool").unwrap();
    stop.store(true, Ordering::Relaxed);
    pool.into_iter().for_each(|t| t.join().unwrap());
    let (cpu_ns, wall) = task_clock(&whole, "pool");
    // 2 vCPUs may be shared with other tests: ≥ 1.6 CPUs' worth of 2 (the bound).
    assert!(cpu_ns >= 1.6 * wall * 1e9, "task-clock {cpu_ns} ns in {wall} s");
    assert!(m.threads >= 3, "threads {}", m.threads);
    // The per-thread session saw only the sleeping main thread.
    let (own_ns, own_wall) = task_clock(&own, "pool");
    assert!(own_ns < 0.2 * own_wall * 1e9, "this thread only: {own_ns} ns in {own_wall} s");

    // Threads started inside a region (inherit): the main thread spins too.
    let stop = Arc::new(AtomicBool::new(false));
    whole.begin("spawned").unwrap();
    let inside = spinners(1, &stop);
    spin_for(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    inside.into_iter().for_each(|t| t.join().unwrap());
    whole.stop("spawned").unwrap();
    let (cpu_ns, wall) = task_clock(&whole, "spawned");
    assert!(
        cpu_ns >= 1.6 * wall * 1e9 * 0.9,
        "task-clock {cpu_ns} ns in {wall} s with a thread started inside"
    );
}
