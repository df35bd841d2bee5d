//! The code cache's state in one address space (`Space::cache`): its areas in the tracee,
//! its lookup table, its translations and their counters, its exit stubs. What the tracer does
//! with them is `cache.rs`'s.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::counters::trace::cache_code::{AREA_SIZE, ExitKind, STUB_LEN};
use crate::counters::trace::emu::FastMap;
use crate::counters::trace::sys::Memory;

use crate::counters::trace::tally::Tally;

use super::block::Block;

/// One cache area: header (the table's address), then code.
#[derive(Debug, Clone, Copy)]
pub(super) struct Area {
    pub(super) base: u64,
    pub(super) code_used: u64,
    /// Bytes after the header read back blank, before any was written: a slot is written
    /// only inside them (`Tracer::blank_to`).
    pub(super) checked: u64,
}

/// A translation's block, and its counters' indexes in every thread's counter area: the
/// block's executions at `counter`, then one counter of active lanes per lane-counted masked
/// instruction (`cache_code::lane_counted`), then one of iterations per `rep movs`/`rep stos`
/// (`cache_code::rep_counted`).
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) block: Rc<Block>,
    pub(super) counter: usize,
    pub(super) masked: Rc<[MaskedCount]>,
    pub(super) reps: Rc<[RepCount]>,
}

/// A `rep movs`/`rep stos` of a translated block: its bytes are `per_iteration` times the sum
/// of its iteration counter (at `counter`); the instruction itself counts with its block.
#[derive(Debug, Clone)]
pub(super) struct RepCount {
    /// The instruction's index in the block.
    pub(super) idx: usize,
    pub(super) counter: usize,
    pub(super) per_iteration: Tally,
}

/// A masked instruction of a translated block: its tally is `base` per execution plus
/// `per_lane` per active lane its lane counter (at `lane_counter`) summed.
#[derive(Debug, Clone)]
pub(super) struct MaskedCount {
    /// The instruction's index in the block.
    pub(super) idx: usize,
    pub(super) base: Tally,
    pub(super) lanes: Option<(usize, Tally)>,
}

/// One thread's counter area (its `gs` base) and the counters' values when last read.
#[derive(Debug, Clone)]
pub(super) struct ThreadCounters {
    pub(super) base: u64,
    pub(super) last: Vec<u64>,
}

/// The code cache of one address space.
#[derive(Debug, Clone, Default)]
pub(super) struct CodeCache {
    pub(super) areas: Vec<Area>,
    /// The lookup table's address in the tracee.
    pub(super) table: Option<u64>,
    /// Table entries written (entry index, bucket × ways + way → original address).
    pub(super) slots: FastMap<u64>,
    /// Per original block start: its translation's address, or None where it cannot be made.
    pub(super) trans: FastMap<Option<u64>>,
    pub(super) entries: Vec<Entry>,
    /// Counters in use in every thread's counter area (the entries' and their lane counters).
    pub(super) counters_used: usize,
    /// Counter areas by thread id (threads that have entered a translation).
    pub(super) counters: BTreeMap<i32, ThreadCounters>,
    /// Exit stubs by address: where each leads, and whether it is linked.
    pub(super) stubs: BTreeMap<u64, (ExitKind, bool)>,
    /// Unlinked direct-exit stubs by the original address they lead to: linked when that
    /// address gets its translation, before any thread takes them.
    pub(super) waiting: FastMap<Vec<u64>>,
    /// A thread was sent into a translation since the counters were last read.
    pub(super) used: bool,
    /// An area or the table could not be mapped: no more translations in this space.
    pub(super) failed: bool,
    /// Writes into the areas and the table not made yet, in order: made in one go before
    /// any thread of the space runs again (`Tracer::flush_all`).
    pub(super) pending: Vec<(u64, Vec<u8>)>,
}

impl CodeCache {
    pub(super) fn holds(&self, addr: u64) -> bool {
        self.areas.iter().any(|a| addr >= a.base && addr < a.base + AREA_SIZE)
    }

    /// The exit stub holding `addr`: (stub address, where it leads).
    pub(super) fn stub_at(&self, addr: u64) -> Option<(u64, ExitKind)> {
        let (s, (k, _)) = self.stubs.range(..=addr).next_back()?;
        (addr < s + STUB_LEN).then_some((*s, *k))
    }

    /// Whether a thread at `n` (a block start counted `hits` times) should run a translation.
    pub(super) fn wanted(&self, n: u64, hits: u32, hot: u32) -> bool {
        match self.trans.get(&n) {
            Some(t) => t.is_some(),
            None => hits >= hot && !self.failed,
        }
    }

    /// Translations of code in `[lo, hi)` are forgotten with the code (`Space::forget_code`):
    /// no thread goes into them from a trap or the table any more. Their bytes stay.
    /// Their table entries are cleared (a thread looking one up then misses).
    pub(super) fn forget(&mut self, lo: u64, hi: u64) {
        self.trans.retain(|a, _| *a < lo || *a >= hi);
        let gone: Vec<u64> = self.slots.iter().filter(|(_, a)| **a >= lo && **a < hi).map(|(s, _)| *s).collect();
        let Some(table) = self.table else { return };
        for s in gone {
            self.pending.push((table + s * 8, 0u64.to_le_bytes().to_vec()));
            self.slots.remove(&s);
        }
    }

    /// Make the pending writes (before a thread of the space runs). False where one failed.
    pub(super) fn write_pending(&mut self, mem: &Memory) -> bool {
        let w = std::mem::take(&mut self.pending);
        w.is_empty() || mem.write_many(&w)
    }
}
