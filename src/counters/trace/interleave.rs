//! The order in which the threads' address streams reach the simulated hierarchy (memory mode).
//!
//! Each thread's accesses are exact and in its program order; what tracing cannot observe
//! without stepping every instruction is how the threads' streams interleave at the levels
//! they share. Memory mode defines it, as the single-stepped reference (`lockstep.rs`) runs
//! the threads: in lockstep, at one rate, so that the order is a function of what each thread
//! does and not of when the tracer happens to see it.
//!
//! **Clocks.** Each access gets a virtual time, its thread's *clock*: the number of accesses
//! the thread made before it, plus the jumps below. Accesses are fed in order of
//! `(clock / CHUNK, thread id)`: while several threads run, `CHUNK` accesses of each in turn,
//! in thread id order. An access is fed only once no other thread can still add one that
//! comes before it: every other thread has a *floor*, a lower bound on the clock of its next
//! access (its clock while it runs; none while it is idle). A new thread starts at its
//! creator's clock at the `clone` (both run on from there in lockstep).
//!
//! **Waits and wakes.** A thread that waits (a `futex` wait) rejoins, in the reference, right
//! after the call of the thread that woke it. Whether a wait sleeps natively, and which thread
//! of a barrier arrives last and wakes the others, depend on the threads' native timing under
//! the tracer; the clocks must not. So a wait is paired with a wake on the same futex word by
//! another thread, whatever happened natively:
//! - a wait that slept (returned 0) pairs with the latest such wake;
//! - a wait that found the word already changed (`EAGAIN`) pairs with the first such wake the
//!   thread has not paired with yet, which may come after it (the thread's next accesses wait);
//! - a wake pairs with the waits above, and with every thread that is running when it is made
//!   until that thread makes a system call or its clock passes the wake's by `HORIZON`.
//!
//! The waker and every thread paired with it resume at the *same* clock, the latest of the
//! waker's clock at the wake and the waiters' clocks at their waits: a barrier's threads go on
//! together from its last arrival, in virtual time, whichever thread arrived last natively.
//! Until a wake's pairs are known, the waker's and the waiters' next accesses are held.
//! A thread waiting in the kernel has the floor of the threads that could wake it (nobody
//! waits for it: a serial section runs on), never below its own clock.
//!
//! **Other calls.** A call that returns at once (`getpid`, a `futex` wake) holds the others
//! back like any instruction. A thread asleep in another call (a blocking `read`) is idle while
//! the tracer sees it asleep in the kernel (`asleep`, read when the others would wait for it);
//! it rejoins at the clock of the latest access fed. A thread running outside counting is idle
//! too and rejoins the same way. Those two rejoin points depend on timing; the futex rules
//! above cover the threads of OpenMP, pthreads barriers, mutexes and condition variables, and
//! Rust's `std` synchronisation (all `futex` on Linux).
//!
//! A single thread's stream reaches the simulator exactly as single-stepping gives it.
//! docs/trace.md ("Threads and shared levels") has the measured effect of these choices.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::{AccessKind, AccessSink};

/// One memory access of an instruction, for the access sink.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Access {
    pub addr: u64,
    pub size: u32,
    pub kind: AccessKind,
}

/// Accesses of each thread fed in turn while several threads run.
const CHUNK: u64 = 16;
/// Accesses waiting in all queues before they are fed regardless of floors (a thread that is
/// busy but adds nothing for a long time: single-stepped, or uncounted without saying so).
const MAX_PENDING: usize = 1 << 20;
/// Accesses a running thread makes after another thread's `futex` wake before it no longer
/// counts as a late arrival at that wake's barrier.
const HORIZON: u64 = 4096;
/// Accesses a thread may have held (its clock after a wait or wake unknown) before the pairing
/// is given up and it goes on at the clock it has.
const HOLD_LIMIT: usize = 1 << 20;
/// Wakes remembered per futex word (older ones can no longer pair).
const WAKES_KEPT: usize = 64;

/// What a system call is, for the interleaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    /// A `futex` wait on this word (`FUTEX_WAIT`, `FUTEX_WAIT_BITSET`).
    Wait(u64),
    /// A `futex` wake of this word (`FUTEX_WAKE`, `FUTEX_WAKE_BITSET`, `FUTEX_WAKE_OP`).
    Wake(u64),
    /// Any other call, or one whose number or arguments are not known.
    Other,
}

impl Call {
    /// From the registers at the `syscall` instruction: number (rax), rdi and rsi.
    pub fn from_regs(nr: Option<u64>, rdi: Option<u64>, rsi: Option<u64>) -> Call {
        const SYS_FUTEX: u64 = 202;
        // FUTEX_CMD_MASK: without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256).
        match (nr, rdi, rsi) {
            (Some(SYS_FUTEX), Some(word), Some(op)) => match op & 0x7f {
                0 | 9 => Call::Wait(word),
                1 | 5 | 10 => Call::Wake(word),
                _ => Call::Other,
            },
            _ => Call::Other,
        }
    }
}

/// `EAGAIN` as a system call returns it.
const EAGAIN: i64 = -11;

/// Why a thread's next accesses are held.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Hold {
    /// It made wake `seq`: it resumes where that wake's pairs resume.
    Woke(usize),
    /// Its wait paired with wake `seq`.
    Paired(usize),
    /// Its wait on this word returned `EAGAIN` before any wake it could pair with.
    Pending(u64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Running,
    /// Outside counting: nobody waits for it.
    Idle,
    /// In a system call since clock `entry` (not a wake: a waker is `Holding` at once).
    InCall {
        call: Call,
        entry: u64,
        order: u64,
        asleep: bool,
    },
    /// Its clock after a wait or wake is not known yet: what it does meanwhile is held.
    Holding {
        hold: Hold,
        entry: u64,
        order: u64,
    },
    /// Ended: what it left waiting is fed in its turn.
    Gone,
}

/// What a held thread did, replayed in order once its clock is known.
#[derive(Debug)]
enum Event {
    Accesses(Vec<Access>),
    Call(Call),
    Return(Option<i64>),
}

struct Thread {
    /// The sink's id (which private caches it has; the turn order).
    tid: usize,
    queue: VecDeque<(u64, Access)>,
    /// Clock of its next access.
    clock: u64,
    state: State,
    held: Vec<Event>,
    held_accesses: usize,
    /// Per futex word, one past the last wake it made or paired with.
    marks: HashMap<u64, usize>,
}

struct Wake {
    word: u64,
    by: usize,
    clock: u64,
    /// The latest of the waker's clock and its pairs' clocks at their waits so far.
    latest: u64,
    /// Threads that may still pair with it.
    open: BTreeSet<usize>,
    paired: Vec<usize>,
    settled: bool,
}

/// A thread's sort key in the feed: chunk, thread id, then its serial (ids are reused).
type Key = (u64, usize, usize);

#[derive(Default)]
pub(super) struct Interleave {
    /// Every thread with accesses or a state to keep, by serial (creation order).
    threads: BTreeMap<usize, Thread>,
    /// Sink id → serial of the live thread that has it.
    live: HashMap<usize, usize>,
    serials: usize,
    wakes: HashMap<usize, Wake>,
    /// Wakes whose pairs are not all known yet.
    open_wakes: BTreeSet<usize>,
    next_wake: usize,
    /// Per futex word, its recent wakes (indices into `wakes`), oldest first.
    by_word: HashMap<u64, VecDeque<usize>>,
    waiting: usize,
    /// Clock of the latest access fed.
    frontier: u64,
    /// Events seen (native order), and the latest thread end: (order, clock).
    order: u64,
    last_exit: Option<(u64, u64)>,
}

/// Whether thread `tid` sleeps in the kernel now (the tracer reads it from /proc).
pub(super) type Asleep<'a> = &'a mut dyn FnMut(usize) -> bool;

impl Interleave {
    /// A new thread `tid`, created by thread `parent` (None: not known, or the first): it
    /// starts at its creator's clock, or at the present.
    pub fn join(&mut self, tid: usize, parent: Option<usize>, sink: &mut dyn AccessSink, asleep: Asleep) {
        self.add_thread(tid, parent);
        self.merge(sink, asleep);
    }

    fn add_thread(&mut self, tid: usize, parent: Option<usize>) -> usize {
        if let Some(old) = self.live.get(&tid).copied() {
            self.end(old);
        }
        let clock = match parent.and_then(|p| self.live.get(&p)).and_then(|s| self.threads.get(s)) {
            Some(p) => p.clock,
            None if self.threads.is_empty() => 0,
            None => self.present(),
        };
        let serial = self.serials;
        self.serials += 1;
        self.threads.insert(
            serial,
            Thread {
                tid,
                queue: VecDeque::new(),
                clock,
                state: State::Running,
                held: Vec::new(),
                held_accesses: 0,
                marks: HashMap::new(),
            },
        );
        self.live.insert(tid, serial);
        serial
    }

    /// Thread `tid` ended (its id may be reused): it waits for nobody, nobody for it.
    pub fn leave(&mut self, tid: usize, sink: &mut dyn AccessSink, asleep: Asleep) {
        if let Some(s) = self.live.remove(&tid) {
            self.end(s);
        }
        self.merge(sink, asleep);
    }

    /// Thread `tid` will add no accesses for a while (it runs outside counting).
    pub fn idle(&mut self, tid: usize, sink: &mut dyn AccessSink, asleep: Asleep) {
        let s = self.serial(tid);
        if let Some(t) = self.threads.get_mut(&s)
            && matches!(t.state, State::Running | State::InCall { .. })
        {
            t.state = State::Idle;
            self.leaves_wakes(s);
        }
        self.merge(sink, asleep);
    }

    /// Thread `tid` is about to make system call `call`.
    pub fn call(&mut self, tid: usize, call: Call, sink: &mut dyn AccessSink, asleep: Asleep) {
        let s = self.serial(tid);
        self.on_call(s, call);
        self.merge(sink, asleep);
    }

    /// Thread `tid`'s system call returned `ret` (None: not known).
    pub fn returned(&mut self, tid: usize, ret: Option<i64>, sink: &mut dyn AccessSink, asleep: Asleep) {
        let s = self.serial(tid);
        self.on_return(s, ret);
        self.merge(sink, asleep);
    }

    /// Thread `tid`'s next accesses, in its program order.
    pub fn push(&mut self, tid: usize, accesses: &[Access], sink: &mut dyn AccessSink, asleep: Asleep) {
        let s = self.serial(tid);
        self.on_accesses(s, accesses);
        if self.waiting > MAX_PENDING {
            self.feed_all(sink);
        }
        self.merge(sink, asleep);
    }

    /// Feed everything waiting (the trace ended, or a window closes): pairs not yet known
    /// are given up, then every queue is fed in clock order.
    pub fn finish(&mut self, sink: &mut dyn AccessSink, asleep: Asleep) {
        loop {
            let holding: Vec<usize> = self
                .threads
                .iter()
                .filter(|(_, t)| matches!(t.state, State::Holding { .. }))
                .map(|(s, _)| *s)
                .collect();
            if holding.is_empty() {
                break;
            }
            for s in holding {
                self.give_up(s);
            }
        }
        self.merge(sink, asleep);
        self.feed_all(sink);
    }

    /// Nothing waiting or held.
    pub fn is_empty(&self) -> bool {
        self.waiting == 0 && self.threads.values().all(|t| t.held.is_empty())
    }

    /// The serial of thread `tid`, which joins now if it is not known.
    fn serial(&mut self, tid: usize) -> usize {
        match self.live.get(&tid) {
            Some(&s) => s,
            None => self.add_thread(tid, None),
        }
    }

    /// The clock of the present: where a thread that was away rejoins.
    fn present(&self) -> u64 {
        self.frontier
    }

    fn end(&mut self, s: usize) {
        let order = self.tick();
        if self.threads.get(&s).is_some_and(|t| matches!(t.state, State::Holding { .. })) {
            // Ends while its pairs are unknown: what it did meanwhile goes at its clock.
            self.give_up(s);
        }
        if let Some(t) = self.threads.get_mut(&s) {
            t.state = State::Gone;
            self.last_exit = Some((order, t.clock));
        }
        self.leaves_wakes(s);
        self.forget_if_done(s);
    }

    fn tick(&mut self) -> u64 {
        self.order += 1;
        self.order
    }

    fn on_accesses(&mut self, s: usize, accesses: &[Access]) {
        let Some(t) = self.threads.get_mut(&s) else { return };
        match t.state {
            State::Holding { .. } => {
                t.held_accesses += accesses.len();
                t.held.push(Event::Accesses(accesses.to_vec()));
                if t.held_accesses > HOLD_LIMIT {
                    self.give_up(s);
                }
                return;
            }
            State::InCall { .. } => {
                // Its call returned without the tracer saying how.
                self.on_return(s, None);
                return self.on_accesses(s, accesses);
            }
            State::Idle => {
                t.clock = t.clock.max(self.frontier);
                t.state = State::Running;
            }
            State::Running | State::Gone => {}
        }
        let t = self.threads.get_mut(&s).expect("known");
        let c0 = t.clock;
        t.queue.extend(accesses.iter().enumerate().map(|(i, a)| (c0 + i as u64, *a)));
        t.clock += accesses.len() as u64;
        self.waiting += accesses.len();
        if self.open_wakes.is_empty() {
            return;
        }
        // Past the horizon of a wake it could have arrived late at: no longer a pair of it.
        let clock = t.clock;
        let passed: Vec<usize> = self
            .open_wakes
            .iter()
            .copied()
            .filter(|w| self.wakes[w].open.contains(&s) && clock >= self.wakes[w].clock.saturating_add(HORIZON))
            .collect();
        for w in passed {
            self.wakes.get_mut(&w).expect("open").open.remove(&s);
            self.settle(w);
        }
    }

    fn on_call(&mut self, s: usize, call: Call) {
        let order = self.tick();
        let Some(t) = self.threads.get_mut(&s) else { return };
        match t.state {
            State::Holding { .. } => {
                t.held.push(Event::Call(call));
                return;
            }
            State::InCall { .. } => {
                self.on_return(s, None);
                return self.on_call(s, call);
            }
            State::Idle | State::Gone => {
                // Back from outside counting: at the present, as its next accesses would be.
                t.clock = t.clock.max(self.frontier);
                t.state = State::Running;
            }
            State::Running => {}
        }
        let clock = self.threads[&s].clock;
        // A call other than a wait on a wake's word: it is not a late arrival there.
        let open: Vec<usize> = self
            .open_wakes
            .iter()
            .copied()
            .filter(|w| self.wakes[w].open.contains(&s) && call != Call::Wait(self.wakes[w].word))
            .collect();
        for w in open {
            self.wakes.get_mut(&w).expect("open").open.remove(&s);
            self.settle(w);
        }
        match call {
            Call::Wake(word) => {
                let seq = self.next_wake;
                self.next_wake += 1;
                // Who may pair with it: threads waiting on its word (they return), threads
                // running (they may arrive late); a thread whose wait returned `EAGAIN` before
                // this wake pairs now.
                let mut open = BTreeSet::new();
                let mut pending = Vec::new();
                for (&v, th) in &self.threads {
                    if v == s {
                        continue;
                    }
                    match th.state {
                        State::Running => {
                            open.insert(v);
                        }
                        State::InCall { call: Call::Wait(w), .. } if w == word => {
                            open.insert(v);
                        }
                        State::Holding {
                            hold: Hold::Pending(w),
                            entry,
                            ..
                        } if w == word => pending.push((v, entry)),
                        _ => {}
                    }
                }
                self.wakes.insert(
                    seq,
                    Wake {
                        word,
                        by: s,
                        clock,
                        latest: clock,
                        open,
                        paired: Vec::new(),
                        settled: false,
                    },
                );
                self.open_wakes.insert(seq);
                let recent = self.by_word.entry(word).or_default();
                recent.push_back(seq);
                if recent.len() > WAKES_KEPT
                    && let Some(old) = recent.pop_front()
                    && self.wakes.get(&old).is_some_and(|w| w.settled)
                {
                    self.wakes.remove(&old);
                }
                let t = self.threads.get_mut(&s).expect("known");
                t.marks.insert(word, seq + 1);
                t.state = State::Holding {
                    hold: Hold::Woke(seq),
                    entry: clock,
                    order,
                };
                for (v, entry) in pending {
                    self.pair(v, seq, entry);
                }
                self.settle(seq);
            }
            call => {
                let t = self.threads.get_mut(&s).expect("known");
                t.state = State::InCall {
                    call,
                    entry: clock,
                    order,
                    asleep: false,
                };
            }
        }
    }

    fn on_return(&mut self, s: usize, ret: Option<i64>) {
        let Some(t) = self.threads.get_mut(&s) else { return };
        let (call, entry, order, asleep) = match t.state {
            State::Holding { .. } => {
                t.held.push(Event::Return(ret));
                return;
            }
            State::InCall {
                call,
                entry,
                order,
                asleep,
            } => (call, entry, order, asleep),
            _ => return,
        };
        // A call returned and may have woken a sleeper: look at them again.
        for th in self.threads.values_mut() {
            if let State::InCall { asleep, .. } = &mut th.state {
                *asleep = false;
            }
        }
        let t = self.threads.get_mut(&s).expect("known");
        t.state = State::Running;
        match call {
            Call::Wait(word) => {
                let mark = t.marks.get(&word).copied().unwrap_or(0);
                let others = self
                    .by_word
                    .get(&word)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|&w| w >= mark && self.wakes.get(&w).is_some_and(|x| x.by != s));
                let wake = match ret {
                    Some(0) => others.max(),
                    Some(EAGAIN) => others.min(),
                    _ => None,
                };
                // Any wake it was open for and does not pair with: it took no part.
                let open: Vec<usize> = self
                    .open_wakes
                    .iter()
                    .copied()
                    .filter(|w| self.wakes[w].open.contains(&s) && Some(*w) != wake)
                    .collect();
                for w in open {
                    self.wakes.get_mut(&w).expect("open").open.remove(&s);
                    self.settle(w);
                }
                match (wake, ret) {
                    (Some(w), _) => self.pair(s, w, entry),
                    (None, Some(EAGAIN)) => {
                        self.threads.get_mut(&s).expect("known").state = State::Holding {
                            hold: Hold::Pending(word),
                            entry,
                            order,
                        };
                    }
                    (None, _) => {
                        // Woken by a thread's exit (a join), a signal, a timeout: after the
                        // last exit if that came during the wait, else at the present.
                        let at = match self.last_exit {
                            Some((o, c)) if o > order && ret == Some(0) => c,
                            _ => self.present(),
                        };
                        let t = self.threads.get_mut(&s).expect("known");
                        t.clock = t.clock.max(at);
                    }
                }
            }
            _ => {
                if asleep {
                    // It slept in the kernel, idle: it rejoins at the present.
                    let p = self.present();
                    let t = self.threads.get_mut(&s).expect("known");
                    t.clock = t.clock.max(p);
                }
            }
        }
    }

    /// Thread `s`, which waited from clock `entry`, pairs with wake `w`.
    fn pair(&mut self, s: usize, w: usize, entry: u64) {
        let Some(wake) = self.wakes.get_mut(&w) else { return };
        let word = wake.word;
        let order = self.order;
        let t = self.threads.get_mut(&s).expect("known");
        t.marks.insert(word, w + 1);
        wake.open.remove(&s);
        if wake.settled {
            // It arrives after the others went on: it goes on from its own clock or theirs.
            let at = wake.latest;
            t.clock = t.clock.max(entry).max(at);
            t.state = State::Running;
            self.replay(s);
            return;
        }
        wake.latest = wake.latest.max(entry);
        wake.paired.push(s);
        t.state = State::Holding {
            hold: Hold::Paired(w),
            entry,
            order,
        };
        self.settle(w);
    }

    /// Thread `s` takes part in no open wake (it ended, went idle).
    fn leaves_wakes(&mut self, s: usize) {
        let open: Vec<usize> = self.open_wakes.iter().copied().collect();
        for w in open {
            if self.wakes.get_mut(&w).is_some_and(|x| x.open.remove(&s)) {
                self.settle(w);
            }
        }
    }

    /// Wake `w`'s pairs are all known: the waker and its pairs go on from the same clock.
    fn settle(&mut self, w: usize) {
        let Some(wake) = self.wakes.get_mut(&w) else { return };
        if wake.settled || !wake.open.is_empty() {
            return;
        }
        wake.settled = true;
        self.open_wakes.remove(&w);
        let at = wake.latest;
        let mut who = vec![wake.by];
        who.append(&mut wake.paired);
        if !self.by_word.get(&wake.word).is_some_and(|r| r.contains(&w)) {
            // No wait can pair with it any more.
            self.wakes.remove(&w);
        }
        for s in who {
            let Some(t) = self.threads.get_mut(&s) else { continue };
            if let State::Holding {
                hold: Hold::Woke(x) | Hold::Paired(x),
                ..
            } = t.state
                && x == w
            {
                t.clock = t.clock.max(at);
                t.state = State::Running;
                self.replay(s);
            }
        }
    }

    /// Stop waiting for thread `s`'s pairs: it goes on at the clock it has (its wait's entry,
    /// or its wake's).
    fn give_up(&mut self, s: usize) {
        let Some(t) = self.threads.get_mut(&s) else { return };
        let State::Holding { hold, entry, .. } = t.state else { return };
        match hold {
            Hold::Woke(w) | Hold::Paired(w) => {
                if let Some(x) = self.wakes.get_mut(&w) {
                    x.open.clear();
                }
                self.settle(w);
            }
            Hold::Pending(_) => {
                t.clock = t.clock.max(entry);
                t.state = State::Running;
                self.replay(s);
            }
        }
    }

    /// What thread `s` did while held, now that its clock is known.
    fn replay(&mut self, s: usize) {
        let Some(t) = self.threads.get_mut(&s) else { return };
        let events = std::mem::take(&mut t.held);
        t.held_accesses = 0;
        for e in events {
            match e {
                Event::Accesses(a) => self.on_accesses(s, &a),
                Event::Call(c) => self.on_call(s, c),
                Event::Return(r) => self.on_return(s, r),
            }
        }
        if matches!(self.threads.get(&s).map(|t| t.state), Some(State::Gone)) {
            self.forget_if_done(s);
        }
    }

    fn forget_if_done(&mut self, s: usize) {
        if self
            .threads
            .get(&s)
            .is_some_and(|t| t.state == State::Gone && t.queue.is_empty() && t.held.is_empty())
        {
            self.threads.remove(&s);
        }
    }

    fn key(&self, s: usize, clock: u64) -> Key {
        (clock / CHUNK, self.threads[&s].tid, s)
    }

    /// The lowest clock thread `s` can still add an access at (None: it holds nobody back).
    /// `running_floor`: the lowest floor of the threads that could wake a waiting one.
    fn floor(&self, s: usize, running_floor: Option<u64>) -> Option<u64> {
        let t = &self.threads[&s];
        match t.state {
            State::Running => Some(t.clock),
            State::Idle | State::Gone => None,
            State::InCall {
                call: Call::Wait(_),
                entry,
                ..
            }
            | State::Holding {
                hold: Hold::Pending(_),
                entry,
                ..
            } => Some(running_floor.map_or(entry, |f| f.max(entry))),
            State::InCall { asleep: true, .. } => None,
            State::InCall { .. } => Some(t.clock),
            State::Holding {
                hold: Hold::Woke(w) | Hold::Paired(w),
                entry,
                ..
            } => Some(self.wakes.get(&w).map_or(entry, |x| x.latest)),
        }
    }

    fn waits(t: &Thread) -> bool {
        matches!(
            t.state,
            State::InCall { call: Call::Wait(_), .. }
                | State::Holding {
                    hold: Hold::Pending(_),
                    ..
                }
        )
    }

    fn merge(&mut self, sink: &mut dyn AccessSink, asleep: Asleep) {
        loop {
            // The threads that could wake a waiting one: their lowest floor.
            let mut running_floor: Option<u64> = None;
            for (&s, t) in &self.threads {
                if !Self::waits(t)
                    && let Some(f) = self.floor(s, None)
                {
                    running_floor = Some(running_floor.map_or(f, |r| r.min(f)));
                }
            }
            // The next access in clock order (the lowest queue head), and the lowest key any
            // other thread could still feed: another's head or floor (`true`: a floor).
            let mut best: Option<(Key, usize)> = None;
            let mut bound: Option<(Key, usize, bool)> = None;
            for (&s, t) in &self.threads {
                let k = match t.queue.front() {
                    Some(&(c, _)) => {
                        let k = self.key(s, c);
                        match best {
                            Some((b, _)) if b < k => (k, s, false),
                            prev => {
                                best = Some((k, s));
                                match prev {
                                    Some((b, bs)) => (b, bs, false),
                                    None => continue,
                                }
                            }
                        }
                    }
                    None => match self.floor(s, running_floor) {
                        Some(f) => (self.key(s, f), s, true),
                        None => continue,
                    },
                };
                if bound.is_none_or(|b| k.0 < b.0) {
                    bound = Some(k);
                }
            }
            let Some((head, s)) = best else { return };
            // (A floor of `s` itself bounds nothing: its queue comes first.)
            let bound = bound.filter(|b| b.1 != s);
            if let Some((k, b, true)) = bound
                && k <= head
            {
                // Held back by thread `b`'s floor: if it is in a call, is it asleep there?
                if let State::InCall {
                    call: Call::Other,
                    asleep: false,
                    ..
                } = self.threads[&b].state
                    && asleep(self.threads[&b].tid)
                {
                    if let State::InCall { asleep, .. } = &mut self.threads.get_mut(&b).expect("known").state {
                        *asleep = true;
                    }
                    continue;
                }
                return;
            }
            let t = self.threads.get_mut(&s).expect("known");
            let tid = t.tid;
            // The first clock of `s` at or past the bound.
            let end = bound.map_or(u64::MAX, |((chunk, btid, bs), _, _)| {
                let first_after = if (tid, s) < (btid, bs) { chunk + 1 } else { chunk };
                first_after.saturating_mul(CHUNK)
            });
            let mut fed = 0;
            while let Some(&(c, a)) = t.queue.front() {
                if c >= end {
                    break;
                }
                t.queue.pop_front();
                sink.access_by(tid, a.addr, a.size, a.kind);
                self.frontier = self.frontier.max(c);
                fed += 1;
            }
            self.waiting -= fed;
            self.forget_if_done(s);
        }
    }

    /// Feed every queued access in clock order, whatever the floors (a bound on memory, and
    /// the end).
    fn feed_all(&mut self, sink: &mut dyn AccessSink) {
        loop {
            let next = self
                .threads
                .iter()
                .filter_map(|(&s, t)| t.queue.front().map(|&(c, _)| ((c / CHUNK, t.tid, s), s)))
                .min();
            let Some((k, s)) = next else { return };
            let t = self.threads.get_mut(&s).expect("known");
            while let Some(&(c, a)) = t.queue.front() {
                if (c / CHUNK, t.tid, s) != k {
                    break;
                }
                t.queue.pop_front();
                sink.access_by(t.tid, a.addr, a.size, a.kind);
                self.frontier = self.frontier.max(c);
                self.waiting -= 1;
            }
            self.forget_if_done(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::xorshift;

    #[derive(Default)]
    struct Log(Vec<(usize, u64)>);
    impl AccessSink for Log {
        fn access(&mut self, _: u64, _: u32, _: AccessKind) {}
        fn access_by(&mut self, t: usize, addr: u64, _: u32, _: AccessKind) {
            self.0.push((t, addr));
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

    fn awake(_: usize) -> bool {
        false
    }

    #[test]
    fn one_thread_keeps_program_order_and_two_alternate_in_chunks() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        // One thread, pushed in random pieces, with calls between: its order, every access, once.
        let mut log = Log::default();
        let mut il = Interleave::default();
        let total = 1000 + next() % 5000;
        let mut at = 0;
        while at < total {
            let n = (1 + next() % 300).min(total - at);
            il.push(0, &acc(at..at + n), &mut log, &mut awake);
            if next().is_multiple_of(3) {
                let word = 0x1000 + next() % 2 * 64;
                let call = [Call::Wait(word), Call::Wake(word), Call::Other][(next() % 3) as usize];
                il.call(0, call, &mut log, &mut awake);
                il.returned(0, Some([0, EAGAIN, 1][(next() % 3) as usize]), &mut log, &mut awake);
            }
            at += n;
        }
        il.finish(&mut log, &mut awake);
        assert_eq!(log.0, (0..total).map(|a| (0, a)).collect::<Vec<_>>());
        // Two threads, the second created by the first: chunks alternate from the `clone` on,
        // each thread's order kept.
        let mut log = Log::default();
        let mut il = Interleave::default();
        let (a, b) = (100 + next() % 900, 100 + next() % 900);
        il.join(0, None, &mut log, &mut awake);
        il.join(1, Some(0), &mut log, &mut awake);
        il.push(0, &acc(0..a), &mut log, &mut awake);
        assert!(log.0.len() <= CHUNK as usize, "thread 0 waits for thread 1's first accesses");
        il.push(1, &acc(10_000..10_000 + b), &mut log, &mut awake);
        il.finish(&mut log, &mut awake);
        assert_eq!(log.0.len() as u64, a + b);
        let common = a.min(b) as usize / CHUNK as usize;
        let c = CHUNK as usize;
        for k in 0..common {
            let block = &log.0[2 * k * c..2 * (k + 1) * c];
            assert!(
                block[..c].iter().all(|x| x.0 == 0) && block[c..].iter().all(|x| x.0 == 1),
                "chunk {k}"
            );
        }
        for t in [0, 1] {
            let mine: Vec<u64> = log.0.iter().filter(|x| x.0 == t).map(|x| x.1).collect();
            assert!(mine.windows(2).all(|w| w[1] == w[0] + 1), "thread {t} out of order");
        }
    }

    #[test]
    fn idle_threads_hold_nobody_back_and_a_new_thread_starts_at_its_creators_clock() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut log = Log::default();
        let mut il = Interleave::default();
        il.join(0, None, &mut log, &mut awake);
        il.join(1, Some(0), &mut log, &mut awake);
        // Thread 1 runs outside counting: thread 0 is fed as it comes, in its order.
        il.idle(1, &mut log, &mut awake);
        let a = 1 + next() % 500;
        il.push(0, &acc(0..a), &mut log, &mut awake);
        assert_eq!(log.0, (0..a).map(|x| (0, x)).collect::<Vec<_>>());
        // Thread 1 counts again: it rejoins at the present; thread 0's next accesses wait for it.
        let b = CHUNK * (2 + next() % 20);
        il.push(1, &acc(10_000..10_000 + b), &mut log, &mut awake);
        let c = 1 + next() % 500;
        il.push(0, &acc(a..a + c), &mut log, &mut awake);
        let fed = log.0.len() as u64 - a;
        assert!(
            fed >= (2 * c.min(b)).saturating_sub(2 * CHUNK) && fed <= b + c,
            "{fed} of {b} + {c}"
        );
        // A third thread created by thread 0 now starts at thread 0's clock: thread 0's next
        // accesses wait for its first.
        il.join(2, Some(0), &mut log, &mut awake);
        let before = log.0.len();
        il.push(0, &acc(50_000..50_000 + 4 * CHUNK), &mut log, &mut awake);
        let of0 = log.0[before..].iter().filter(|x| x.1 >= 50_000).count() as u64;
        assert!(of0 < 2 * CHUNK, "thread 0 ran ahead of its new thread: {of0}");
        // Thread 2 ends before doing anything and thread 1 is idle: thread 0 goes on alone.
        il.idle(1, &mut log, &mut awake);
        il.leave(2, &mut log, &mut awake);
        assert!(log.0.iter().filter(|x| x.1 >= 50_000).count() as u64 == 4 * CHUNK);
        for t in [0, 1] {
            let mine: Vec<u64> = log.0.iter().filter(|x| x.0 == t).map(|x| x.1).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "thread {t} out of order");
        }
    }

    #[test]
    fn a_thread_in_another_call_holds_the_others_back_only_while_it_is_awake() {
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
        il.join(0, None, &mut log, &mut kernel);
        il.join(1, Some(0), &mut log, &mut kernel);
        il.call(1, Call::Other, &mut log, &mut kernel);
        // Thread 1's call has not returned and it does not sleep (`getpid`): thread 0's
        // accesses past its clock wait for thread 1's next, as for any instruction.
        let a = CHUNK + next() % 500;
        il.push(0, &acc(0..a), &mut log, &mut kernel);
        assert!(log.0.len() <= CHUNK as usize, "thread 1 is awake in its call");
        // It sleeps now (a blocking `read`): idle, thread 0's accesses go in their order.
        sleeps.set(true);
        let b = 1 + next() % 500;
        il.push(0, &acc(a..a + b), &mut log, &mut kernel);
        assert_eq!(log.0, (0..a + b).map(|x| (0, x)).collect::<Vec<_>>());
        // Seen asleep once: not asked again while no other call returns.
        let asked = looks.get();
        il.push(0, &acc(a + b..a + b + 10), &mut log, &mut kernel);
        assert_eq!(looks.get(), asked);
        assert_eq!(log.0.len() as u64, a + b + 10);
        // Thread 1's call returns: it rejoins at the present, and the two go on in turn.
        sleeps.set(false);
        il.returned(1, Some(5), &mut log, &mut kernel);
        let c = CHUNK * (1 + next() % 8);
        il.push(1, &acc(50_000..50_000 + c), &mut log, &mut kernel);
        il.push(0, &acc(1000..1000 + c), &mut log, &mut kernel);
        il.finish(&mut log, &mut kernel);
        let tail = &log.0[(a + b + 10) as usize..];
        assert_eq!(tail.len() as u64, 2 * c);
        // In turn: the feed changes threads at least once per chunk of either.
        let changes = tail.windows(2).filter(|w| w[0].0 != w[1].0).count() as u64;
        assert!(changes >= c / CHUNK, "in turn: {changes} changes in {tail:?}");
    }

    /// One barrier between two threads, as it can happen natively: `arrive[t]` accesses
    /// before it, `after[t]` after it, thread `last` the last to arrive (it wakes the other),
    /// the other's wait seen in `how`: 0 it slept and was woken, 1 it returned `EAGAIN` after
    /// the wake was seen, 2 it returned `EAGAIN` before the wake was seen, 3 it entered its
    /// wait after the wake was seen (and returned `EAGAIN`). The pieces are pushed in random
    /// sizes, the two threads' pushes in a random native order that respects those.
    fn barrier(arrive: [u64; 2], after: [u64; 2], last: usize, how: u32, seed: u64) -> Vec<(usize, u64)> {
        let mut next = xorshift(seed);
        let mut log = Log::default();
        let mut il = Interleave::default();
        let word = 0x7f00_0000_1000u64;
        il.join(0, None, &mut log, &mut awake);
        il.join(1, Some(0), &mut log, &mut awake);
        let base = |t: usize| 1_000_000 * (t as u64 + 1);
        // Each thread's script: pushes (in pieces), then its barrier step, then more pushes.
        #[derive(Clone, Copy, Debug)]
        enum Step {
            Push(u64, u64),
            Wake,
            WaitEnter,
            WaitReturn(i64),
        }
        let mut script: [Vec<Step>; 2] = [Vec::new(), Vec::new()];
        for t in 0..2 {
            let mut cut = |from: u64, to: u64, out: &mut Vec<Step>| {
                let mut at = from;
                while at < to {
                    let n = (1 + next() % 200).min(to - at);
                    out.push(Step::Push(at, at + n));
                    at += n;
                }
            };
            let mut s = Vec::new();
            cut(base(t), base(t) + arrive[t], &mut s);
            if t == last {
                s.push(Step::Wake);
            } else {
                s.push(Step::WaitEnter);
                s.push(Step::WaitReturn(if how == 0 { 0 } else { EAGAIN }));
            }
            cut(base(t) + arrive[t], base(t) + arrive[t] + after[t], &mut s);
            script[t] = s;
        }
        let waiter = 1 - last;
        let pos = |t: usize, f: &dyn Fn(&Step) -> bool| script[t].iter().position(f).unwrap();
        let wake_at = pos(last, &|s| matches!(s, Step::Wake));
        let enter_at = pos(waiter, &|s| matches!(s, Step::WaitEnter));
        let mut done = [0usize, 0usize];
        loop {
            let can = |t: usize, done: &[usize; 2]| -> bool {
                if done[t] >= script[t].len() {
                    return false;
                }
                let woke = done[last] > wake_at;
                match (t == waiter, done[t]) {
                    // How the waiter's wait goes against the wake, natively.
                    (true, d) if d == enter_at => how != 3 || woke,
                    (true, d) if d == enter_at + 1 => match how {
                        0 | 1 | 3 => woke,
                        _ => true,
                    },
                    (false, d) if d == wake_at => match how {
                        0 | 1 => done[waiter] > enter_at,
                        2 => done[waiter] > enter_at + 1,
                        _ => true,
                    },
                    _ => true,
                }
            };
            let ready: Vec<usize> = (0..2).filter(|&t| can(t, &done)).collect();
            let Some(&t) = ready.get((next() % 2) as usize % ready.len().max(1)) else {
                break;
            };
            let step = script[t][done[t]];
            done[t] += 1;
            match step {
                Step::Push(a, b) => il.push(t, &acc(a..b), &mut log, &mut awake),
                Step::Wake => {
                    il.call(t, Call::Wake(word), &mut log, &mut awake);
                    il.returned(t, Some(1), &mut log, &mut awake);
                }
                Step::WaitEnter => il.call(t, Call::Wait(word), &mut log, &mut awake),
                Step::WaitReturn(r) => il.returned(t, Some(r), &mut log, &mut awake),
            }
        }
        assert_eq!(done.map(|d| d as u64), [script[0].len() as u64, script[1].len() as u64]);
        il.finish(&mut log, &mut awake);
        log.0
    }

    #[test]
    fn a_barrier_interleaves_the_same_whoever_arrives_last_and_whether_the_wait_sleeps() {
        let mut next = xorshift(0x3c6e_f372_fe94_f82bu64);
        for round in 0..40 {
            let arrive = [50 + next() % 3000, 50 + next() % 3000];
            let after = [50 + next() % 3000, 50 + next() % 3000];
            let first = barrier(arrive, after, 0, 0, next());
            assert_eq!(first.len() as u64, arrive[0] + arrive[1] + after[0] + after[1]);
            for last in 0..2 {
                for how in 0..4 {
                    let other = barrier(arrive, after, last, how, next());
                    assert!(first == other, "round {round}: thread {last} last, wait {how}: the order differs");
                }
            }
            // Both go on together from the later arrival: the first accesses after the
            // barrier of the two threads are fed within a turn of each other.
            let at = |t: usize| {
                first
                    .iter()
                    .position(|x| x.0 == t && x.1 >= 1_000_000 * (t as u64 + 1) + arrive[t])
                    .unwrap()
            };
            let (p0, p1) = (at(0), at(1));
            assert!(p0.abs_diff(p1) <= 2 * CHUNK as usize, "round {round}: {p0} vs {p1} ({arrive:?})");
        }
    }

    #[test]
    fn a_wake_nobody_waits_for_costs_the_waker_nothing_and_a_join_rejoins_at_the_exit() {
        let mut next = xorshift(0xa54f_f53a_5f1d_36f1u64);
        // Thread 1 wakes a word thread 0 never waits on, while thread 0 runs on: once thread 0
        // is past the wake's horizon, thread 1 goes on at its own clock, in turn with it.
        let mut log = Log::default();
        let mut il = Interleave::default();
        il.join(0, None, &mut log, &mut awake);
        il.join(1, Some(0), &mut log, &mut awake);
        let a = 100 + next() % 1000;
        il.push(1, &acc(1_000_000..1_000_000 + a), &mut log, &mut awake);
        il.call(1, Call::Wake(0x40), &mut log, &mut awake);
        il.returned(1, Some(0), &mut log, &mut awake);
        let b = HORIZON + a + 10 * CHUNK;
        il.push(1, &acc(1_000_000 + a..1_000_000 + a + b), &mut log, &mut awake);
        il.push(0, &acc(0..a + HORIZON + 5 * CHUNK), &mut log, &mut awake);
        // Thread 1's accesses after its wake are at clocks a.., in turn with thread 0's.
        let after = log.0.iter().position(|x| x.1 == 1_000_000 + a).expect("fed");
        let of0_before = log.0[..after].iter().filter(|x| x.0 == 0).count() as u64;
        assert!(
            of0_before.abs_diff(a) <= CHUNK,
            "{of0_before} of thread 0's before it, {a} expected"
        );
        // Thread 0 waits on a word; thread 1 ends (pthread_join: the kernel wakes the waiter):
        // thread 0 rejoins at thread 1's last clock.
        il.call(0, Call::Wait(0x80), &mut log, &mut awake);
        let clock1 = a + b;
        il.leave(1, &mut log, &mut awake);
        il.returned(0, Some(0), &mut log, &mut awake);
        il.push(0, &acc(5_000_000..5_000_010), &mut log, &mut awake);
        il.finish(&mut log, &mut awake);
        assert_eq!(il.frontier, clock1 + 9, "thread 0 rejoined at thread 1's end");
    }
}
