//! The order in which the threads' address streams reach the simulated hierarchy (memory mode).
//!
//! Each thread's accesses are exact and in its program order; what tracing cannot observe
//! without stepping every instruction is how the threads' streams interleave at the levels
//! they share. Memory mode defines it: the accesses of each thread wait in its own queue, and
//! while two or more threads have accesses waiting they are fed round-robin, `CHUNK` accesses
//! of each in turn (thread id order), as if the threads ran in lockstep. A thread that cannot
//! add accesses soon is *idle*: it is in a system call (a `futex` wait of a barrier, a `read`),
//! or it runs outside counting. A thread whose queue is the only one with accesses is fed in
//! program order as soon as every other thread is idle (a serial section: the workers wait in
//! the kernel), or once `MAX_PENDING` accesses wait (a thread that is busy but uncounted for a
//! long time). Everything waiting is fed when a thread is created (what ran before the `clone`
//! precedes the new thread), when one ends, and at the end. A thread is known from its
//! creation on, so the creator's next accesses wait for the new thread's first ones: both
//! start in lockstep at the `clone`, as both run on when every instruction is stepped. A single
//! thread's stream therefore reaches the simulator exactly as single-stepping gives it.
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

#[derive(Default)]
pub(super) struct Interleave {
    /// Every known thread's queue (empty for one whose accesses were all fed).
    queues: BTreeMap<usize, VecDeque<Access>>,
    /// Threads that will not add accesses soon (in a system call, or outside counting).
    idle: BTreeSet<usize>,
    waiting: usize,
}

impl Interleave {
    /// A new thread: what every thread has waiting ran before it existed and is fed now; the
    /// others' next accesses wait for its first.
    pub fn join(&mut self, tid: usize, sink: &mut dyn AccessSink) {
        self.finish(sink);
        self.queues.entry(tid).or_default();
        self.idle.remove(&tid);
    }

    /// Thread `tid` ended (its id may be reused): what waits is fed, and it is forgotten.
    pub fn leave(&mut self, tid: usize, sink: &mut dyn AccessSink) {
        self.finish(sink);
        self.queues.remove(&tid);
        self.idle.remove(&tid);
        self.merge(sink);
    }

    /// Thread `tid` will add no accesses for a while (it enters a system call, or runs outside
    /// counting): the others need not wait for it.
    pub fn idle(&mut self, tid: usize, sink: &mut dyn AccessSink) {
        self.queues.entry(tid).or_default();
        if self.idle.insert(tid) {
            self.merge(sink);
        }
    }

    /// Thread `tid`'s next accesses, in its program order.
    pub fn push(&mut self, tid: usize, accesses: &[Access], sink: &mut dyn AccessSink) {
        self.idle.remove(&tid);
        self.queues.entry(tid).or_default().extend(accesses.iter().copied());
        self.waiting += accesses.len();
        self.merge(sink);
    }

    fn merge(&mut self, sink: &mut dyn AccessSink) {
        loop {
            let live: Vec<usize> = self.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k).collect();
            if live.len() < 2 {
                if let [alone] = live[..] {
                    let others_idle = self.queues.keys().all(|t| *t == alone || self.idle.contains(t));
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
    pub fn finish(&mut self, sink: &mut dyn AccessSink) {
        self.merge(sink);
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

    /// Random numbers, another sequence in every run (the process id is mixed in).
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed ^ u64::from(std::process::id());
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

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
            il.push(0, &acc(at..at + n), &mut log);
            at += n;
        }
        il.finish(&mut log);
        assert_eq!(log.0, (0..total).map(|a| (0, a)).collect::<Vec<_>>());
        // Two threads with work waiting: chunks alternate, each thread's order kept.
        let mut log = Log::default();
        let mut il = Interleave::default();
        let (a, b) = (100 + next() % 900, 100 + next() % 900);
        il.join(0, &mut log);
        il.join(1, &mut log);
        il.push(0, &acc(0..a), &mut log);
        assert!(log.0.is_empty(), "thread 0 waits for thread 1's first accesses");
        il.push(1, &acc(10_000..10_000 + b), &mut log);
        il.finish(&mut log);
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
        il.join(0, &mut log);
        il.join(1, &mut log);
        // Thread 1 enters a system call: thread 0 is fed as it comes, in its order.
        il.idle(1, &mut log);
        let a = 1 + next() % 500;
        il.push(0, &acc(0..a), &mut log);
        assert_eq!(log.0, (0..a).map(|x| (0, x)).collect::<Vec<_>>());
        // Thread 1 runs again: its accesses wait for thread 0's next ones.
        let b = CHUNK as u64 * (2 + next() % 20);
        il.push(1, &acc(10_000..10_000 + b), &mut log);
        assert_eq!(log.0.len() as u64, a, "thread 1's accesses wait for thread 0's next");
        let c = 1 + next() % 500;
        il.push(0, &acc(a..a + c), &mut log);
        // Both have accesses waiting: fed in turn until one runs out.
        let fed = log.0.len() as u64 - a;
        assert!(fed >= 2 * c.min(b) && fed < b + c + u64::from(b == c), "{fed} of {b} + {c}");
        assert_eq!(log.0[a as usize].0, 0, "thread id order");
        assert_eq!(log.0[a as usize + CHUNK.min(c as usize)].0, 1);
        // A new thread: everything waiting ran before its `clone` and is fed first.
        il.join(2, &mut log);
        assert_eq!(log.0.len() as u64, a + b + c);
        il.push(0, &acc(50_000..50_010), &mut log);
        assert_eq!(log.0.len() as u64, a + b + c, "thread 0 waits for the new thread's first accesses");
        // Thread 2 ends before doing anything and thread 1 is idle: thread 0 goes on alone.
        il.idle(1, &mut log);
        il.leave(2, &mut log);
        assert_eq!(log.0.len() as u64, a + b + c + 10);
        for t in [0, 1] {
            let mine: Vec<u64> = log.0.iter().filter(|x| x.0 == t).map(|x| x.1).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "thread {t} out of order");
        }
    }
}
