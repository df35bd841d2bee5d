//! A whole-process session opens an event group for every thread of the process. Threads that
//! start and exit meanwhile (a pool winding down) must never make it fail. Own test binary:
//! the churn of threads would disturb the other tests' sessions in a shared process.

use roofline::Session;
use roofline::software_events;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn a_process_session_opens_while_other_threads_come_and_go() {
    // (Before the fix, 1 lib test run in 30 failed on it, and this loop within 20 opens:
    // `perf_event_open failed for context-switches: No such device`, then EINVAL for a group
    // member of a thread whose context was swapped or torn down under the open.)
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let hs: Vec<_> = (0..4).map(|_| std::thread::spawn(|| std::hint::black_box(0u64))).collect();
                for h in hs {
                    let _ = h.join();
                }
            }
        })
    };
    let mut opened = 0;
    let mut failure = None;
    for _ in 0..300 {
        match Session::with_events(software_events()) {
            Ok(_) => opened += 1,
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    assert_eq!(failure, None, "after {opened} sessions opened");
}
