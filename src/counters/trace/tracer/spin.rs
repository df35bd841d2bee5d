//! How the tracer waits for its tracees' next stop: polled for a short while, or slept for.
//!
//! A tracee resumed from a stop mostly stops again within microseconds. A tracer that sleeps
//! meanwhile is woken on another CPU (the scheduler puts a waking task on an idle CPU), so
//! every stop crosses CPUs twice; on a virtual machine each crossing is an interrupt between
//! virtual CPUs, and together they can be most of a stop's cost (numpy's start-up under trace
//! on an idle 2-vCPU guest: 13.0 s sleeping, 9.2 s polling for 200 µs). Polling only pays
//! while a CPU is free for the tracee: beside a CPU hog the poll holds the CPU the tracee
//! would share with the tracer, and the same run took 5.7 s sleeping, 17 s polling, although
//! nearly every poll saw its stop. So neither way is right everywhere, and whether a poll sees
//! its stop does not tell which is faster: the tracer measures both. It alternates short
//! trials of each (the mean time from one stop to the next: a median would hide the slices
//! in which the hog holds the tracee's CPU, which are the whole difference), then keeps the
//! faster way for a while, and tries both again.

use std::time::{Duration, Instant};

/// Stops per trial of one way.
const TRIAL: usize = 64;
/// Stops the faster way is kept for after a pair of trials.
const KEEP: u32 = 4096;

/// The waiting decision: how long the next wait polls before it sleeps.
#[derive(Debug, Clone)]
pub(super) struct Spin {
    window: Duration,
    phase: Phase,
    /// Times from one stop to the next in the trial under way.
    cycles: Vec<Duration>,
    /// The mean cycle of the polling trial, once it is done.
    polling: Option<Duration>,
    last: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    TryPolling,
    TrySleeping,
    /// The faster way (true: polling), for the waits left.
    Keep(bool, u32),
}

impl Spin {
    /// Polling for `window` per wait when that is faster (zero: never).
    pub fn new(window: Duration) -> Spin {
        Spin {
            window,
            phase: Phase::TryPolling,
            cycles: Vec::with_capacity(TRIAL),
            polling: None,
            last: None,
        }
    }

    /// How long the next wait polls before it sleeps (zero: it sleeps at once).
    pub fn next_window(&self) -> Duration {
        match self.phase {
            _ if self.window.is_zero() => Duration::ZERO,
            Phase::TryPolling | Phase::Keep(true, _) => self.window,
            Phase::TrySleeping | Phase::Keep(false, _) => Duration::ZERO,
        }
    }

    /// A stop arrived at `now` (its wait returned).
    pub fn stopped(&mut self, now: Instant) {
        let Some(last) = self.last.replace(now) else { return };
        match &mut self.phase {
            Phase::Keep(_, 0) => {
                self.phase = Phase::TryPolling;
                self.cycles.clear();
            }
            Phase::Keep(_, left) => *left -= 1,
            Phase::TryPolling | Phase::TrySleeping => {
                self.cycles.push(now.duration_since(last));
                if self.cycles.len() < TRIAL {
                    return;
                }
                let mean = self.cycles.iter().sum::<Duration>() / TRIAL as u32;
                self.cycles.clear();
                self.phase = match (self.phase, self.polling) {
                    (Phase::TryPolling, _) => {
                        self.polling = Some(mean);
                        Phase::TrySleeping
                    }
                    (_, Some(polling)) => Phase::Keep(polling < mean, KEEP),
                    _ => Phase::TryPolling,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::xorshift;

    /// Stops whose cycle depends on the way waited (random medians per way, random spread):
    /// after one trial of each, the faster way is kept for KEEP stops, then both are tried
    /// again.
    #[test]
    fn the_faster_way_is_kept_after_a_trial_of_each_and_both_are_tried_again() {
        let mut next = xorshift(0x5eed_0f5b_1a7e_0001);
        for _ in 0..40 {
            let window = Duration::from_micros(1 + next() % 1000);
            let mut s = Spin::new(window);
            // Per way a base cycle of 10..1000 µs; every cycle within +-10 % of it (the two
            // bases differ by more than that, so the faster way is never in doubt).
            let poll_base = 10 + next() % 990;
            let sleep_base = if next().is_multiple_of(2) {
                poll_base * 3 / 2 + 1
            } else {
                poll_base * 2 / 3
            };
            let mut now = Instant::now();
            s.stopped(now);
            let cycle = |polling: bool, next: &mut dyn FnMut() -> u64| {
                let base = if polling { poll_base } else { sleep_base };
                Duration::from_micros(base * 9 / 10 + next() % (base / 5 + 1))
            };
            for round in 0..2 {
                for _ in 0..TRIAL {
                    assert_eq!(s.next_window(), window, "round {round}: polling trial");
                    now += cycle(true, &mut next);
                    s.stopped(now);
                }
                for _ in 0..TRIAL {
                    assert!(s.next_window().is_zero(), "round {round}: sleeping trial");
                    now += cycle(false, &mut next);
                    s.stopped(now);
                }
                let polls = poll_base < sleep_base;
                for _ in 0..=KEEP {
                    assert_eq!(
                        s.next_window().is_zero(),
                        !polls,
                        "round {round}: polling {poll_base} µs, sleeping {sleep_base} µs"
                    );
                    now += cycle(polls, &mut next);
                    s.stopped(now);
                }
            }
        }
    }

    #[test]
    fn a_zero_window_never_polls() {
        let mut s = Spin::new(Duration::ZERO);
        let mut now = Instant::now();
        for _ in 0..3 * TRIAL {
            assert!(s.next_window().is_zero());
            now += Duration::from_micros(5);
            s.stopped(now);
        }
    }
}
