//! Per-name regions under the tracer: what was counted while a region of each name was open.
//!
//! The program marks regions with [`crate::region::roofline_region_begin`] /
//! [`crate::region::roofline_region_end`] (the Rust `Session`, the C marker API); the tracer
//! breakpoints both and reads the name from the first argument register. A region is a
//! window of the whole process, as a rayon or OpenMP author means "this loop": everything any
//! thread of the traced program runs while a region of that name is open counts for it.
//!
//! - **Nesting** is inclusive (an inner region's work also counts for the outer one), as in
//!   LIKWID's marker API.
//! - **The same name open more than once at a time** (recursion, or each thread of a pool
//!   marking its share, as the C API's per-thread sessions allow) is one window: from the
//!   first begin to the last end, counted once. `calls` counts every begin.
//! - **Traffic per level** (memory mode) is what the cache simulator moved between the
//!   levels inside the window, as a hardware counter would count it: a dirty line the region
//!   left in a cache is written back (and counted) when it is evicted, possibly after the
//!   region ended. The whole-run figure counts those at exit.
//! - A region still open when the program ended is closed there, and said so.

use std::collections::{BTreeMap, BTreeSet};

use super::tally::Tally;

/// The counters at one instant, to take differences of.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub total: Tally,
    /// Bytes per memory level moved so far (the cache simulator's, memory mode).
    pub levels: Vec<(String, f64)>,
    /// Instructions counted per traced thread so far (thread id, instructions).
    pub threads: Vec<(i32, u64)>,
}

/// One region name's totals over the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TracedRegion {
    pub name: String,
    /// Begin markers met.
    pub calls: u64,
    pub tally: Tally,
    /// Bytes per memory level inside the region (memory mode; empty otherwise).
    pub levels: Vec<(String, f64)>,
    /// Threads that ran counted instructions inside it.
    pub threads: usize,
    /// Still open when the program ended (closed there).
    pub open_at_exit: bool,
}

#[derive(Debug, Default)]
struct Acc {
    calls: u64,
    /// Instances open now.
    open: u32,
    /// The counters when the current window opened.
    since: Option<Snapshot>,
    tally: Tally,
    levels: BTreeMap<String, f64>,
    threads: BTreeSet<i32>,
}

impl Acc {
    fn close(&mut self, now: &Snapshot) {
        let Some(start) = self.since.take() else { return };
        self.tally.add_scaled(&now.total.since(&start.total), 1);
        for (level, bytes) in &now.levels {
            let before = start.levels.iter().find(|(l, _)| l == level).map_or(0.0, |(_, b)| *b);
            *self.levels.entry(level.clone()).or_default() += (bytes - before).max(0.0);
        }
        for (tid, n) in &now.threads {
            let before = start.threads.iter().find(|(t, _)| t == tid).map_or(0, |(_, b)| *b);
            if *n > before {
                self.threads.insert(*tid);
            }
        }
    }
}

/// Every region name met, in first-begin order.
#[derive(Debug, Default)]
pub struct Regions {
    order: Vec<String>,
    by_name: BTreeMap<String, Acc>,
}

impl Regions {
    /// Whether a begin of `name` would open a window (none of that name is open): the
    /// caller takes a snapshot only then.
    pub fn opens(&self, name: &str) -> bool {
        self.by_name.get(name).is_none_or(|a| a.open == 0)
    }

    /// Whether an end of `name` would close its window.
    pub fn closes(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|a| a.open == 1)
    }

    /// A begin marker of `name`; `now` is needed when [`Regions::opens`] said so.
    pub fn begin(&mut self, name: &str, now: Option<Snapshot>) {
        if !self.by_name.contains_key(name) {
            self.order.push(name.to_string());
        }
        let a = self.by_name.entry(name.to_string()).or_default();
        a.calls += 1;
        if a.open == 0 {
            a.since = now;
        }
        a.open += 1;
    }

    /// An end marker of `name`; `now` is needed when [`Regions::closes`] said so. An end
    /// without a begin changes nothing (the session refuses it before the marker runs).
    pub fn end(&mut self, name: &str, now: Option<&Snapshot>) {
        let Some(a) = self.by_name.get_mut(name) else { return };
        if a.open == 0 {
            return;
        }
        a.open -= 1;
        if a.open == 0
            && let Some(now) = now
        {
            a.close(now);
        }
    }

    /// The totals, regions still open closed at `now`.
    pub fn finish(mut self, now: &Snapshot) -> Vec<TracedRegion> {
        let mut out = Vec::new();
        for name in &self.order {
            let Some(mut a) = self.by_name.remove(name) else { continue };
            let open_at_exit = a.open > 0;
            if open_at_exit {
                a.close(now);
            }
            out.push(TracedRegion {
                name: name.clone(),
                calls: a.calls,
                tally: a.tally,
                levels: a.levels.into_iter().collect(),
                threads: a.threads.len(),
                open_at_exit,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(instructions: u64, flops: u64, dram: f64, threads: &[(i32, u64)]) -> Snapshot {
        let mut total = Tally {
            instructions,
            ..Tally::default()
        };
        total.flops[0] = flops;
        Snapshot {
            total,
            levels: vec![("dram".into(), dram)],
            threads: threads.to_vec(),
        }
    }

    #[test]
    fn nested_regions_are_inclusive_and_one_name_open_twice_is_one_window() {
        let mut r = Regions::default();
        // outer [10 .. 100], inner [20 .. 50] and [60 .. 70]; "pool" opened by two threads,
        // overlapping: [30 .. 80] counted once.
        r.begin("outer", Some(snap(10, 1, 0.0, &[(1, 10)])));
        r.begin("inner", Some(snap(20, 2, 64.0, &[(1, 20)])));
        assert!(r.opens("pool"));
        r.begin("pool", Some(snap(30, 3, 64.0, &[(1, 30), (2, 0)])));
        assert!(!r.opens("pool"));
        r.begin("pool", None);
        r.end("inner", Some(&snap(50, 5, 128.0, &[(1, 40), (2, 10)])));
        r.begin("inner", Some(snap(60, 6, 128.0, &[(1, 45), (2, 15)])));
        assert!(!r.closes("pool"));
        r.end("pool", None);
        r.end("inner", Some(&snap(70, 7, 192.0, &[(1, 45), (2, 25)])));
        assert!(r.closes("pool"));
        r.end("pool", Some(&snap(80, 8, 192.0, &[(1, 50), (2, 30)])));
        r.end("nothing", None);
        r.end("outer", Some(&snap(100, 10, 256.0, &[(1, 60), (2, 30)])));
        let out = r.finish(&snap(200, 20, 512.0, &[]));
        let by = |n: &str| out.iter().find(|x| x.name == n).unwrap().clone();
        assert_eq!(out.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["outer", "inner", "pool"]);
        assert_eq!((by("outer").tally.instructions, by("outer").tally.flops[0]), (90, 9));
        assert_eq!((by("inner").calls, by("inner").tally.instructions), (2, 40));
        assert_eq!(by("inner").levels, vec![("dram".to_string(), 128.0)]);
        assert_eq!((by("pool").calls, by("pool").tally.instructions), (2, 50));
        // Thread 2 ran nothing inside the first inner call but did in the second.
        assert_eq!(by("inner").threads, 2);
        assert_eq!(by("outer").threads, 2);
        assert!(out.iter().all(|x| !x.open_at_exit));
    }

    #[test]
    fn a_region_open_at_exit_is_closed_there_and_said() {
        let mut r = Regions::default();
        r.begin("left-open", Some(snap(5, 0, 0.0, &[(7, 5)])));
        assert!(r.by_name.values().any(|a| a.open > 0), "the region is open");
        let out = r.finish(&snap(25, 4, 0.0, &[(7, 25)]));
        assert_eq!(out[0].tally.instructions, 20);
        assert_eq!(out[0].tally.flops[0], 4);
        assert!(out[0].open_at_exit);
        assert_eq!(out[0].threads, 1);
    }
}
