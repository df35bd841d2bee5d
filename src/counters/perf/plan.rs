//! Groups the kernel can schedule at once: events on distinct counters within each one's
//! constraints (general-purpose masks, AMD's paired counters, Intel's fixed counters).

use super::{CounterSpec, Scope};
use crate::machine::EventSpec;

/// What scheduling needs to know of an event: the counters it may take and whether it takes
/// a pair. Both the counters opened here ([`CounterSpec`]) and a platform table's events
/// ([`EventSpec`], grouped for a `perf stat` line) are scheduled by the same search.
pub trait CounterNeeds {
    /// The counters it may use: general-purpose indices, or fixed ones from
    /// [`FIXED_COUNTER_BASE`] up; `None`: any general-purpose one.
    fn allowed_counters(&self) -> Option<&[u32]>;
    /// Whether it takes an even general-purpose counter and the next (AMD's merged events).
    fn takes_pair(&self) -> bool;
}

impl CounterNeeds for CounterSpec {
    fn allowed_counters(&self) -> Option<&[u32]> {
        self.counters.as_deref()
    }
    fn takes_pair(&self) -> bool {
        self.paired
    }
}

impl CounterNeeds for EventSpec {
    fn allowed_counters(&self) -> Option<&[u32]> {
        self.counters.as_deref()
    }
    fn takes_pair(&self) -> bool {
        self.paired
    }
}

/// Split events into groups the kernel can schedule at once. Per-task hardware events go
/// into groups whose members can be assigned distinct general-purpose counters (respecting
/// each event's `counters` list, paired events taking two adjacent ones, at most
/// `core_counters`; fixed-counter events take their fixed counter and join the first group);
/// software events form their own group; each uncore event is its own group (its own PMU,
/// its own CPU). More than one hardware group means the kernel multiplexes them: reported,
/// never silent.
pub fn plan_groups(specs: &[CounterSpec], core_counters: u32) -> Vec<Vec<usize>> {
    let mut hw: Vec<Vec<usize>> = Vec::new();
    let mut soft: Vec<usize> = Vec::new();
    let mut uncore: Vec<Vec<usize>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        match s.scope {
            Scope::Core => {
                // A group is one PMU's (the E-cores' cycles never join the P-cores' group).
                if let Some(g) = hw.iter_mut().find(|g| {
                    if g.first().is_some_and(|&j| specs[j].pmu != s.pmu) {
                        return false;
                    }
                    let mut trial: Vec<&CounterSpec> = g.iter().map(|&j| &specs[j]).collect();
                    trial.push(s);
                    schedulable(&trial, core_counters)
                }) {
                    g.push(i);
                } else {
                    hw.push(vec![i]);
                }
            }
            Scope::Software | Scope::NoExclude => soft.push(i),
            Scope::Uncore { .. } => uncore.push(vec![i]),
        }
    }
    let mut out = hw;
    if !soft.is_empty() {
        out.push(soft);
    }
    out.extend(uncore);
    out
}

/// Counter indices from this one up are fixed-function counters (the kernel's
/// `INTEL_PMC_IDX_FIXED`; the platforms' `counters = [32]` is fixed counter 0).
pub const FIXED_COUNTER_BASE: u32 = 32;

/// Whether the events can sit on distinct counters at once: each on one of its `counters`
/// (or any general-purpose one of `0..n`), paired events on an even counter and the next.
/// Fixed counters (index ≥ [`FIXED_COUNTER_BASE`]) are slots of their own: an event bound to
/// one takes it and no general-purpose counter, so INST_RETIRED.ANY & co. join any group.
/// Groups are a handful of events on at most ~8 + 4 counters, so a backtracking search is
/// exact and cheap.
pub fn schedulable<E: CounterNeeds>(events: &[&E], n: u32) -> bool {
    fn choices(s: &impl CounterNeeds, n: u32) -> Vec<Vec<usize>> {
        let allowed: Vec<u32> = s.allowed_counters().map_or_else(|| (0..n).collect(), <[u32]>::to_vec);
        let paired = s.takes_pair();
        allowed
            .into_iter()
            .filter(|&c| {
                if c >= FIXED_COUNTER_BASE {
                    !paired
                } else {
                    c < n && (!paired || (c % 2 == 0 && c + 1 < n))
                }
            })
            .map(|c| {
                if paired {
                    vec![c as usize, c as usize + 1]
                } else {
                    vec![c as usize]
                }
            })
            .collect()
    }
    fn place<E: CounterNeeds>(i: usize, events: &[&E], n: u32, used: &mut Vec<bool>) -> bool {
        if i == events.len() {
            return true;
        }
        for slots in choices(events[i], n) {
            if let Some(&top) = slots.iter().max()
                && top >= used.len()
            {
                used.resize(top + 1, false);
            }
            if slots.iter().all(|&c| !used[c]) {
                slots.iter().for_each(|&c| used[c] = true);
                if place(i + 1, events, n, used) {
                    return true;
                }
                slots.iter().for_each(|&c| used[c] = false);
            }
        }
        false
    }
    // Quick refusal: more general-purpose counters needed than exist.
    let fixed_only = |e: &E| {
        e.allowed_counters()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|&c| c >= FIXED_COUNTER_BASE))
    };
    let need: usize = events
        .iter()
        .filter(|e| !fixed_only(e))
        .map(|e| if e.takes_pair() { 2 } else { 1 })
        .sum();
    need <= n as usize && place(0, events, n, &mut vec![false; n as usize])
}

/// Split events into groups the PMU can count at once: first fit, in the given order (so a
/// table's W events come first). An event that fits no group alone gets one anyway: the
/// kernel will refuse it and say so, which beats dropping it silently.
pub fn first_fit_groups<'a, E: CounterNeeds>(events: &[&'a E], n: u32) -> Vec<Vec<&'a E>> {
    let mut groups: Vec<Vec<&E>> = Vec::new();
    for &e in events {
        let slot = groups.iter().position(|g| {
            let mut trial = g.clone();
            trial.push(e);
            schedulable(&trial, n)
        });
        match slot {
            Some(i) => groups[i].push(e),
            None => groups.push(vec![e]),
        }
    }
    groups
}
