//! Reference mode with several threads: which single-stepped thread runs its next instruction.
//!
//! Single-stepping every thread at once interleaves them however the kernel reports their stops
//! (`waitpid` returns the first stopped thread of its list, and the thread resumed first stops
//! first), so one thread steps faster than the other and the phase between them changes from
//! run to run. The reference instead steps them in a fixed round-robin: one instruction of each
//! runnable thread in turn, in order of creation (the tracer's per-thread index), the others
//! kept stopped. The threads run at one rate, the definition memory mode uses for the order of
//! their accesses at a shared level (`interleave.rs`), and in the same order on every run.
//!
//! A thread stepped over a system call that sleeps (a `futex` wait for a thread kept stopped, a
//! `read`) is not waited for: once it has slept for `SLEEP_IDLE` it is *idle*, out of the turns,
//! until it stops again. Only another thread's system call wakes it (a `futex` wake, a signal, an
//! exit), so the tracer looks at the idle threads after each stepped system call and takes the
//! stop of any woken one before the next turn: it rejoins right after the call that woke it,
//! at the same point on every run. A system call that returns without sleeping is one
//! instruction like any other, and so is one that waits uninterruptibly (state `D`: disk I/O, a
//! lock, reclaim on a loaded machine) for up to `SLEEP_IDLE_UNINTERRUPTIBLE`: such a wait ends
//! on its own, at a time no other thread decides, so a thread idle after it would rejoin at
//! a point that changes from run to run. Threads outside counting, or in a space that is not stepped,
//! take no turns.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::sys::Sleep;

/// How long a thread stepped over a system call must sleep (state `S`) before the others go on
/// without it. A `futex` wait for a thread kept stopped sleeps forever, so the choice only
/// matters for a call that sleeps briefly on its own: one that ends sooner counts as one step.
pub(super) const SLEEP_IDLE: Duration = Duration::from_millis(1);

/// The same for a thread asleep uninterruptibly (state `D`): a wait inside the kernel (disk
/// I/O, a lock, reclaim on a loaded machine) that ends on its own, at a time the run does not
/// decide. The others wait for it, so that it rejoins at the same point on every run; only a
/// wait that long (a `vfork` parent, which waits for its child, kept stopped) lets them go on.
pub(super) const SLEEP_IDLE_UNINTERRUPTIBLE: Duration = Duration::from_millis(200);

/// A thread waiting for its turn: the step to make, and whether it runs a system call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Turn {
    pub pid: Pid,
    pub sig: Option<Signal>,
    pub syscall: bool,
}

/// The thread stepping now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Flight {
    pub turn: Turn,
    order: usize,
    /// Since when it has been seen sleeping in the kernel (a system call), without a stop.
    sleeping_since: Option<Instant>,
}

#[derive(Default)]
pub(super) struct Lockstep {
    /// Test instrument (`ROOFLINE_TRACE_FAULT=free-steps`): every thread steps at once, in
    /// the order the kernel reports them, so the tests can see what the turns change.
    pub off: bool,
    /// Threads stopped, waiting for their turn, by order of creation.
    ready: BTreeMap<usize, Turn>,
    flight: Option<Flight>,
    /// Threads asleep in a system call, by order of creation.
    idle: BTreeMap<usize, Pid>,
    /// Order of the thread stepped last (the next turn is the next thread after it).
    last: Option<usize>,
    /// Idle threads whose stop was taken right after a stepped system call woke them.
    woken: Vec<Pid>,
}

impl Lockstep {
    /// The turns (`off`: the test instrument's free steps).
    pub fn new(off: bool) -> Lockstep {
        Lockstep {
            off,
            ..Lockstep::default()
        }
    }

    /// Thread `turn.pid` (`order`: its order of creation) asks for its next step.
    pub fn queue(&mut self, order: usize, turn: Turn) {
        self.ready.insert(order, turn);
    }

    /// Whether a thread waits for its turn or steps now: the tracer schedules the steps.
    pub fn busy(&self) -> bool {
        self.flight.is_some() || !self.ready.is_empty()
    }

    pub fn flight(&self) -> Option<&Flight> {
        self.flight.as_ref()
    }

    /// The next thread in turn (the first after the last one stepped, in order of creation),
    /// now stepping; None while one steps or none is ready.
    pub fn next(&mut self) -> Option<Turn> {
        if self.flight.is_some() {
            return None;
        }
        let after = self.last.map_or(0, |l| l + 1);
        let (&order, _) = self.ready.range(after..).next().or_else(|| self.ready.iter().next())?;
        let turn = self.ready.remove(&order)?;
        self.last = Some(order);
        self.flight = Some(Flight {
            turn,
            order,
            sleeping_since: None,
        });
        Some(turn)
    }

    /// A status of `pid` arrived (a stop, an event, its end): it is neither waiting for a turn
    /// nor idle any more. Returns its flight when it was the thread stepping.
    pub fn seen(&mut self, pid: Pid) -> Option<Flight> {
        self.ready.retain(|_, t| t.pid != pid);
        self.idle.retain(|_, p| *p != pid);
        match self.flight {
            Some(f) if f.turn.pid == pid => self.flight.take(),
            _ => None,
        }
    }

    /// The stepping thread, stepped over a system call, sleeps in the kernel now as `sleep`
    /// says. True when it has slept for `SLEEP_IDLE` (`SLEEP_IDLE_UNINTERRUPTIBLE` while in
    /// state `D`): it is idle from now on, and the next thread may have its turn.
    pub fn flight_sleeps(&mut self, sleep: Sleep, now: Instant) -> bool {
        let Some(f) = self.flight.as_mut() else { return false };
        let enough = match sleep {
            Sleep::Awake => {
                f.sleeping_since = None;
                return false;
            }
            Sleep::Interruptible => SLEEP_IDLE,
            Sleep::Uninterruptible => SLEEP_IDLE_UNINTERRUPTIBLE,
        };
        let since = *f.sleeping_since.get_or_insert(now);
        if now.duration_since(since) < enough {
            return false;
        }
        let f = self.flight.take().expect("checked above");
        self.idle.insert(f.order, f.turn.pid);
        true
    }

    /// The idle threads, in order of creation.
    pub fn idle(&self) -> Vec<Pid> {
        self.idle.values().copied().collect()
    }

    /// Idle thread `pid`'s stop was taken right after the stepped system call that woke it.
    pub fn mark_woken(&mut self, pid: Pid) {
        self.woken.push(pid);
    }

    /// How a status of `pid` (before `seen`) ends an idle wait: Some(true) when a stepped
    /// call woke it (its stop was taken after the call, or came while the call was in
    /// flight), Some(false) when the thread stopped without one (its call ended on its own,
    /// at a moment no turn decided); None when it was not idle.
    pub fn idle_ends(&mut self, pid: Pid) -> Option<bool> {
        if !self.idle.values().any(|p| *p == pid) {
            return None;
        }
        let before = self.woken.len();
        self.woken.retain(|p| *p != pid);
        let in_flight = self.flight.is_some_and(|f| f.turn.syscall);
        Some(self.woken.len() < before || in_flight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(pid: i32) -> Turn {
        Turn {
            pid: Pid::from_raw(pid),
            sig: None,
            syscall: false,
        }
    }

    use crate::util::xorshift;

    #[test]
    fn threads_take_one_step_each_in_order_of_creation_whatever_order_they_stop_in() {
        let mut next = xorshift(0x51_7cc1_b727_220a);
        let threads = 2 + (next() % 5) as usize;
        // Thread k has pid 1000 - k: order of creation, not pid order.
        let pid = |k: usize| 1000 - k as i32;
        let mut ls = Lockstep::default();
        for k in 0..threads {
            ls.queue(k, turn(pid(k)));
        }
        let mut stepped = Vec::new();
        for _ in 0..threads * (3 + next() as usize % 20) {
            let t = ls.next().expect("a thread is ready");
            assert!(ls.next().is_none(), "one thread steps at a time");
            assert!(ls.busy());
            stepped.push(t.pid.as_raw());
            // Its step ends; meanwhile the others' stops arrive in any order (they are ready).
            let f = ls.seen(t.pid).expect("it was stepping");
            assert_eq!(f.turn, t);
            let k = (1000 - t.pid.as_raw()) as usize;
            ls.queue(k, t);
        }
        for (i, p) in stepped.iter().enumerate() {
            assert_eq!(*p, pid(i % threads), "turn {i} of {stepped:?}");
        }
    }

    #[test]
    fn a_thread_asleep_in_a_system_call_is_idle_and_rejoins_when_it_stops() {
        let mut ls = Lockstep::default();
        let (a, b, c) = (turn(7), turn(5), turn(9));
        ls.queue(0, Turn { syscall: true, ..a });
        ls.queue(1, b);
        ls.queue(2, c);
        let t0 = Instant::now();
        assert_eq!(ls.next().map(|t| t.pid), Some(a.pid));
        let (awake, asleep, in_kernel) = (Sleep::Awake, Sleep::Interruptible, Sleep::Uninterruptible);
        // Running (not asleep): waited for however long it takes.
        assert!(!ls.flight_sleeps(awake, t0 + SLEEP_IDLE * 10));
        // Asleep, but not yet for SLEEP_IDLE; then awake again (the timer starts over).
        assert!(!ls.flight_sleeps(asleep, t0));
        assert!(!ls.flight_sleeps(asleep, t0 + SLEEP_IDLE / 2));
        assert!(!ls.flight_sleeps(awake, t0 + SLEEP_IDLE / 2));
        assert!(!ls.flight_sleeps(asleep, t0 + SLEEP_IDLE));
        // Waiting inside the kernel (`D`, a wait that ends on its own): waited for up to
        // SLEEP_IDLE_UNINTERRUPTIBLE, however long past SLEEP_IDLE.
        let d0 = t0 + SLEEP_IDLE * 3;
        assert!(!ls.flight_sleeps(awake, d0));
        assert!(!ls.flight_sleeps(in_kernel, d0));
        assert!(!ls.flight_sleeps(in_kernel, d0 + SLEEP_IDLE * 5));
        assert!(!ls.flight_sleeps(in_kernel, d0 + SLEEP_IDLE_UNINTERRUPTIBLE / 2));
        assert!(!ls.flight_sleeps(awake, d0 + SLEEP_IDLE_UNINTERRUPTIBLE / 2));
        assert!(ls.flight.is_some());
        // Asleep for SLEEP_IDLE: idle, the others take their turns without it.
        let t0 = d0 + SLEEP_IDLE_UNINTERRUPTIBLE;
        assert!(!ls.flight_sleeps(asleep, t0));
        assert!(ls.flight_sleeps(asleep, t0 + SLEEP_IDLE * 2));
        assert_eq!(ls.idle(), vec![a.pid]);
        let mut order = Vec::new();
        for _ in 0..4 {
            let t = ls.next().unwrap();
            order.push(t.pid);
            ls.seen(t.pid);
            ls.queue(if t.pid == b.pid { 1 } else { 2 }, t);
        }
        assert_eq!(order, vec![b.pid, c.pid, b.pid, c.pid]);
        // Woken: its stop arrives, and it takes its turn again, in its place.
        assert!(ls.seen(a.pid).is_none(), "not stepping: it was idle");
        assert!(ls.idle().is_empty());
        ls.queue(0, a);
        let mut order = Vec::new();
        for _ in 0..3 {
            let t = ls.next().unwrap();
            order.push(t.pid);
            ls.seen(t.pid);
        }
        assert_eq!(order, vec![a.pid, b.pid, c.pid]);
        assert!(!ls.busy());
    }

    /// How an idle thread's stop is told: taken after a stepped call woke it (marked), or
    /// arriving while a stepped call is in flight (that call woke it), or neither (its call
    /// ended on its own); a thread that was not idle is none of these.
    #[test]
    fn an_idle_threads_stop_says_whether_a_stepped_call_woke_it() {
        let (a, b) = (turn(7), turn(5));
        for (marked, b_in_syscall, want) in [(true, false, true), (false, true, true), (false, false, false)] {
            let mut ls = Lockstep::default();
            ls.queue(0, Turn { syscall: true, ..a });
            ls.queue(
                1,
                Turn {
                    syscall: b_in_syscall,
                    ..b
                },
            );
            ls.next();
            let t0 = Instant::now();
            assert!(!ls.flight_sleeps(Sleep::Interruptible, t0));
            assert!(ls.flight_sleeps(Sleep::Interruptible, t0 + SLEEP_IDLE));
            assert_eq!(ls.idle_ends(b.pid), None, "not idle");
            assert_eq!(ls.next().map(|t| t.pid), Some(b.pid));
            if marked {
                ls.seen(b.pid);
                ls.mark_woken(a.pid);
            }
            assert_eq!(
                ls.idle_ends(a.pid),
                Some(want),
                "marked {marked}, b in a system call {b_in_syscall}"
            );
            ls.seen(a.pid);
            assert_eq!(ls.idle_ends(a.pid), None, "idle no more");
        }
    }

    #[test]
    fn a_thread_that_ends_while_waiting_for_its_turn_is_forgotten() {
        let mut ls = Lockstep::default();
        ls.queue(0, turn(1));
        ls.queue(1, turn(2));
        ls.queue(3, turn(3));
        let first = ls.next().unwrap();
        // Thread 2 is killed (exit_group of thread 1) while it waits: its exit arrives.
        assert!(ls.seen(Pid::from_raw(2)).is_none());
        assert_eq!(ls.seen(first.pid).map(|f| f.turn.pid), Some(first.pid));
        assert_eq!(ls.next().map(|t| t.pid.as_raw()), Some(3));
        ls.seen(Pid::from_raw(3));
        assert!(ls.next().is_none());
        assert!(!ls.busy());
    }
}
