//! The order in which the threads' address streams reach the simulated hierarchy (memory mode).
//!
//! Each thread's accesses are exact and in its program order; what tracing cannot observe
//! without stepping every instruction is how the threads' streams interleave at the levels
//! they share. Memory mode defines it: the accesses of each thread wait in its own queue, and
//! while two or more threads have accesses waiting they are fed round-robin, `CHUNK` accesses
//! of each in turn (thread id order), as if the threads ran in lockstep. A thread that cannot
//! add accesses soon is *idle*: it sleeps in a system call (a `futex` wait of a barrier, a
//! `read`), or it runs outside counting. A thread whose queue is the only one with accesses is
//! fed in program order as soon as every other thread is idle (a serial section: the workers
//! wait in the kernel), or once `MAX_PENDING` accesses wait (a thread that is busy but
//! uncounted for a long time). Everything waiting is fed when a thread is created (what ran
//! before the `clone` precedes the new thread), when one ends, and at the end. A thread is
//! known from its creation on, so the creator's next accesses wait for the new thread's first
//! ones: both start in lockstep at the `clone`, as both run on when every instruction is
//! stepped. A single thread's stream therefore reaches the simulator exactly as
//! single-stepping gives it.
//!
//! A thread in a system call (from the trap before it until its next accesses) is idle only
//! while it *sleeps* there, which the tracer reads from the kernel (`asleep`) when the others'
//! accesses would wait for it: a call that returns at once (a `futex` wake, `getpid`) holds
//! the others back like any instruction, whatever the threads' native timing. Once seen
//! asleep it stays idle until another thread's system call has returned (only a system call
//! wakes a sleeper: a `futex` wake, a signal); then it is looked at again, so a thread woken
//! by a barrier's last arrival is waited for from the waker's next accesses on. These are the
//! rules of the single-stepped reference (`lockstep.rs`), where a woken thread takes its turn
//! right after the call that woke it: the interleaving no longer depends on which thread the
//! tracer happens to see first.
//! docs/trace.md ("Threads and shared levels") has the measured effect of this choice.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{AccessKind, AccessSink};

/// One memory access of an instruction, for the access sink.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Access {
    pub addr: u64,
    pub size: u32,
    pub kind: AccessKind,
}

/// Accesses of each thread fed in turn while several threads have some waiting.
pub(super) const CHUNK: usize = 16;
/// Accesses one thread may have waiting alone before they are fed.
const MAX_PENDING: usize = 1 << 20;

/// Whether thread `tid` sleeps in the kernel now (the tracer reads it from /proc).
pub(super) type Asleep<'a> = &'a mut dyn FnMut(usize) -> bool;

#[derive(Default)]
pub(super) struct Interleave {
    /// Every known thread's queue (empty for one whose accesses were all fed).
    queues: BTreeMap<usize, VecDeque<Access>>,
    /// Threads that will not add accesses soon (outside counting).
    idle: BTreeSet<usize>,
    /// Threads in a system call, and whether they were seen asleep in it since the last
    /// system call of another thread returned.
    in_call: BTreeMap<usize, bool>,
    waiting: usize,
}

impl Interleave {
    /// A new thread: what every thread has waiting ran before it existed and is fed now; the
    /// others' next accesses wait for its first.
    pub fn join(&mut self, tid: usize, sink: &mut dyn AccessSink, asleep: Asleep) {
        self.finish(sink, asleep);
        self.queues.entry(tid).or_default();
        self.idle.remove(&tid);
        self.in_call.remove(&tid);
    }

    /// Thread `tid` ended (its id may be reused): what waits is fed, and it is forgotten.
    pub fn leave(&mut self, tid: usize, sink: &mut dyn AccessSink, asleep: Asleep) {
        self.finish(sink, asleep);
        self.queues.remove(&tid);
        self.idle.remove(&tid);
        self.in_call.remove(&tid);
        self.merge(sink, asleep);
    }

    /// Thread `tid` will add no accesses for a while (it runs outside counting): the others
    /// need not wait for it.
    pub fn idle(&mut self, tid: usize, sink: &mut dyn AccessSink, asleep: Asleep) {
        self.queues.entry(tid).or_default();
        if self.idle.insert(tid) {
            self.merge(sink, asleep);
        }
    }

    /// Thread `tid` is about to enter a system call: idle while it sleeps there.
    pub fn call(&mut self, tid: usize, sink: &mut dyn AccessSink, asleep: Asleep) {
        self.queues.entry(tid).or_default();
        self.in_call.insert(tid, false);
        self.merge(sink, asleep);
    }

    /// Thread `tid`'s next accesses, in its program order.
    pub fn push(&mut self, tid: usize, accesses: &[Access], sink: &mut dyn AccessSink, asleep: Asleep) {
        self.idle.remove(&tid);
        if self.in_call.remove(&tid).is_some() {
            // Its call returned, and may have woken a sleeper: look at them again.
            self.in_call.values_mut().for_each(|seen| *seen = false);
        }
        self.queues.entry(tid).or_default().extend(accesses.iter().copied());
        self.waiting += accesses.len();
        self.merge(sink, asleep);
    }

    /// Whether the others need not wait for thread `t`'s next accesses.
    fn idle_now(&mut self, t: usize, asleep: Asleep) -> bool {
        if self.idle.contains(&t) {
            return true;
        }
        match self.in_call.get_mut(&t) {
            Some(seen) => {
                if !*seen {
                    *seen = asleep(t);
                }
                *seen
            }
            None => false,
        }
    }

    fn merge(&mut self, sink: &mut dyn AccessSink, asleep: Asleep) {
        loop {
            let live: Vec<usize> = self.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k).collect();
            if live.len() < 2 {
                if let [alone] = live[..] {
                    let others: Vec<usize> = self.queues.keys().copied().filter(|t| *t != alone).collect();
                    let others_idle = others.into_iter().all(|t| self.idle_now(t, asleep));
                    if others_idle || self.waiting > MAX_PENDING {
                        self.drain(alone, usize::MAX, sink);
                    }
                }
                return;
            }
            for tid in live {
                self.drain(tid, CHUNK, sink);
            }
        }
    }

    fn drain(&mut self, tid: usize, n: usize, sink: &mut dyn AccessSink) {
        let Some(q) = self.queues.get_mut(&tid) else { return };
        let n = n.min(q.len());
        for a in q.drain(..n) {
            sink.access_by(tid, a.addr, a.size, a.kind);
        }
        self.waiting -= n;
    }

    /// Feed everything waiting (a thread ended, or the trace did): round-robin while several
    /// threads have accesses waiting, then the rest in order.
    pub fn finish(&mut self, sink: &mut dyn AccessSink, asleep: Asleep) {
        self.merge(sink, asleep);
        let ids: Vec<usize> = self.queues.keys().copied().collect();
        for tid in ids {
            self.drain(tid, usize::MAX, sink);
        }
    }

    /// Nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.waiting == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Log(Vec<(usize, u64)>);
    impl AccessSink for Log {
        fn access(&mut self, _: u64, _: u32, _: AccessKind) {}
        fn access_by(&mut self, t: usize, addr: u64, _: u32, _: AccessKind) {
            self.0.push((t, addr));
        }
    }

    use crate::util::xorshift;

    fn acc(addrs: std::ops::Range<u64>) -> Vec<Access> {
        addrs
            .map(|a| Access {
                addr: a,
                size: 8,
                kind: AccessKind::Load,
            })
            .collect()
    }

    #[test]
    fn one_thread_keeps_program_order_and_two_alternate_in_chunks() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        // One thread, pushed in random pieces: its order, every access, once.
        let mut log = Log::default();
        let mut il = Interleave::default();
        let total = 1000 + next() % 5000;
        let mut at = 0;
        while at < total {
            let n = (1 + next() % 300).min(total - at);
            il.push(0, &acc(at..at + n), &mut log, &mut |_| false);
            at += n;
        }
        il.finish(&mut log, &mut |_| false);
        assert_eq!(log.0, (0..total).map(|a| (0, a)).collect::<Vec<_>>());
        // Two threads with work waiting: chunks alternate, each thread's order kept.
        let mut log = Log::default();
        let mut il = Interleave::default();
        let (a, b) = (100 + next() % 900, 100 + next() % 900);
        il.join(0, &mut log, &mut |_| false);
        il.join(1, &mut log, &mut |_| false);
        il.push(0, &acc(0..a), &mut log, &mut |_| false);
        assert!(log.0.is_empty(), "thread 0 waits for thread 1's first accesses");
        il.push(1, &acc(10_000..10_000 + b), &mut log, &mut |_| false);
        il.finish(&mut log, &mut |_| false);
        assert_eq!(log.0.len() as u64, a + b);
        let common = a.min(b) as usize;
        for k in 0..(common / CHUNK) {
            let block = &log.0[2 * k * CHUNK..2 * (k + 1) * CHUNK];
            assert!(
                block[..CHUNK].iter().all(|x| x.0 == 0) && block[CHUNK..].iter().all(|x| x.0 == 1),
                "chunk {k}"
            );
        }
        for t in [0, 1] {
            let mine: Vec<u64> = log.0.iter().filter(|x| x.0 == t).map(|x| x.1).collect();
            assert!(mine.windows(2).all(|w| w[1] == w[0] + 1), "thread {t} out of order");
        }
    }

    #[test]
    fn idle_threads_hold_nobody_back_and_a_new_thread_starts_in_lockstep() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut log = Log::default();
        let mut il = Interleave::default();
        il.join(0, &mut log, &mut |_| false);
        il.join(1, &mut log, &mut |_| false);
        // Thread 1 enters a system call: thread 0 is fed as it comes, in its order.
        il.idle(1, &mut log, &mut |_| false);
        let a = 1 + next() % 500;
        il.push(0, &acc(0..a), &mut log, &mut |_| false);
        assert_eq!(log.0, (0..a).map(|x| (0, x)).collect::<Vec<_>>());
        // Thread 1 runs again: its accesses wait for thread 0's next ones.
        let b = CHUNK as u64 * (2 + next() % 20);
        il.push(1, &acc(10_000..10_000 + b), &mut log, &mut |_| false);
        assert_eq!(log.0.len() as u64, a, "thread 1's accesses wait for thread 0's next");
        let c = 1 + next() % 500;
        il.push(0, &acc(a..a + c), &mut log, &mut |_| false);
        // Both have accesses waiting: fed in turn until one runs out.
        let fed = log.0.len() as u64 - a;
        assert!(fed >= 2 * c.min(b) && fed < b + c + u64::from(b == c), "{fed} of {b} + {c}");
        assert_eq!(log.0[a as usize].0, 0, "thread id order");
        assert_eq!(log.0[a as usize + CHUNK.min(c as usize)].0, 1);
        // A new thread: everything waiting ran before its `clone` and is fed first.
        il.join(2, &mut log, &mut |_| false);
        assert_eq!(log.0.len() as u64, a + b + c);
        il.push(0, &acc(50_000..50_010), &mut log, &mut |_| false);
        assert_eq!(log.0.len() as u64, a + b + c, "thread 0 waits for the new thread's first accesses");
        // Thread 2 ends before doing anything and thread 1 is idle: thread 0 goes on alone.
        il.idle(1, &mut log, &mut |_| false);
        il.leave(2, &mut log, &mut |_| false);
        assert_eq!(log.0.len() as u64, a + b + c + 10);
        for t in [0, 1] {
            let mine: Vec<u64> = log.0.iter().filter(|x| x.0 == t).map(|x| x.1).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "thread {t} out of order");
        }
    }

    #[test]
    fn a_thread_in_a_system_call_holds_the_others_back_only_while_it_is_awake() {
        let mut next = xorshift(0x6a09_e667_f3bc_c908u64);
        let mut log = Log::default();
        let mut il = Interleave::default();
        // What the kernel says of thread 1, and how often it was asked.
        let sleeps = std::cell::Cell::new(false);
        let looks = std::cell::Cell::new(0u32);
        let mut kernel = |t: usize| {
            assert_eq!(t, 1, "only the thread in a call is looked at");
            looks.set(looks.get() + 1);
            sleeps.get()
        };
        il.join(0, &mut log, &mut kernel);
        il.join(1, &mut log, &mut kernel);
        il.call(1, &mut log, &mut kernel);
        // Thread 1's call has not returned and it does not sleep (a `futex` wake, `getpid`):
        // thread 0's accesses wait for thread 1's next, as for any instruction.
        let a = 1 + next() % 500;
        il.push(0, &acc(0..a), &mut log, &mut kernel);
        assert!(log.0.is_empty(), "thread 1 is awake in its call");
        // It sleeps now (a `futex` wait): idle, thread 0's accesses go in their order.
        sleeps.set(true);
        let b = 1 + next() % 500;
        il.push(0, &acc(a..a + b), &mut log, &mut kernel);
        assert_eq!(log.0, (0..a + b).map(|x| (0, x)).collect::<Vec<_>>());
        // Seen asleep once: not asked again while no other call returns.
        let asked = looks.get();
        il.push(0, &acc(a + b..a + b + 10), &mut log, &mut kernel);
        assert_eq!(looks.get(), asked);
        assert_eq!(log.0.len() as u64, a + b + 10);
        // Thread 0 makes a call (a `futex` wake of thread 1) and goes on: thread 1 is looked at
        // again, awake, and thread 0's next accesses wait for its first.
        il.call(0, &mut log, &mut kernel);
        sleeps.set(false);
        let c = CHUNK as u64 * (1 + next() % 8);
        il.push(0, &acc(1000..1000 + c), &mut log, &mut kernel);
        assert!(looks.get() > asked);
        assert_eq!(log.0.len() as u64, a + b + 10, "thread 0 waits for the woken thread");
        il.push(1, &acc(50_000..50_000 + c), &mut log, &mut kernel);
        il.finish(&mut log, &mut kernel);
        let tail = &log.0[(a + b + 10) as usize..];
        assert_eq!(tail.len() as u64, 2 * c);
        assert!(
            tail[..CHUNK].iter().all(|x| x.0 == 0) && tail[CHUNK..2 * CHUNK].iter().all(|x| x.0 == 1),
            "in turn, from the start: {tail:?}"
        );
    }
}
