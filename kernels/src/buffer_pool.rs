//! Large arrays kept for reuse after their kernel is done with them.
//!
//! The kernel's first touch of a fresh mapping costs a page fault and the kernel's zeroing
//! of every page; a ceilings run makes the arrays of six bandwidth kernels at each level and
//! thread count, gigabytes at DRAM sizes. On the 2-vCPU Granite Rapids guest the kernel's
//! `clear_page` took 31 % of `ceilings --quick --threads 1,2` (DRAM working sets of 1.9 GiB
//! per thread: four times its 480 MiB L3). A pooled array is refilled in place: its pages
//! are already mapped (and stay on huge pages where they were given them).

use std::sync::Mutex;

/// Arrays below this many bytes are freed as usual: their faults cost little.
pub const POOLED_FROM_BYTES: usize = 16 << 20;

/// Freed arrays of one element type, kept up to a byte budget.
#[derive(Debug)]
pub struct BufferPool<T> {
    kept: Mutex<Vec<Vec<T>>>,
}

impl<T> Default for BufferPool<T> {
    fn default() -> Self {
        BufferPool::new()
    }
}

impl<T> BufferPool<T> {
    /// An empty pool (`const`: one per element type lives in a `static`).
    pub const fn new() -> BufferPool<T> {
        BufferPool {
            kept: Mutex::new(Vec::new()),
        }
    }

    /// The smallest kept array with room for `len` elements, emptied (its capacity and
    /// mapping kept), or `None`; always `None` for fewer than [`POOLED_FROM_BYTES`] (a small
    /// array on a large kept one would leave the next large array to fault in anew).
    pub fn take(&self, len: usize) -> Option<Vec<T>> {
        if len.saturating_mul(size_of::<T>()) < POOLED_FROM_BYTES {
            return None;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let best = (0..kept.len())
            .filter(|&i| kept[i].capacity() >= len)
            .min_by_key(|&i| kept[i].capacity())?;
        let mut v = kept.swap_remove(best);
        v.clear();
        Some(v)
    }

    /// Keep `v` for a later [`take`](Self::take) when it holds at least
    /// [`POOLED_FROM_BYTES`] and the pool stays within `budget_bytes` (the smallest arrays
    /// are dropped first to make room; `v` itself when it alone exceeds the budget).
    pub fn give(&self, v: Vec<T>, budget_bytes: usize) {
        let bytes = |v: &Vec<T>| v.capacity() * size_of::<T>();
        if bytes(&v) < POOLED_FROM_BYTES || bytes(&v) > budget_bytes {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push(v);
        kept.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        while kept.iter().map(bytes).sum::<usize>() > budget_bytes {
            kept.pop();
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().map(|v| v.capacity() * size_of::<T>()).sum()
    }

    /// Free every kept array.
    pub fn release(&self) {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, fresh_seed};

    const MIB: usize = 1 << 20;

    /// Random arrays given and taken: a take gets the smallest kept array with room (the
    /// same allocation, emptied), none when none has room or the request is small; small
    /// arrays and arrays over the budget are not kept; the pool never holds more than its budget, dropping its smallest
    /// arrays first.
    #[test]
    fn a_take_gets_the_smallest_kept_array_with_room_within_the_budget() {
        let mut rng = Rng::new(fresh_seed());
        for _ in 0..50 {
            let pool = BufferPool::<u8>::new();
            let budget = (64 + rng.below(64)) * MIB;
            let mut model: Vec<(usize, usize)> = Vec::new(); // (capacity, address)
            for _ in 0..8 {
                let cap = (1 + rng.below(80)) * MIB;
                let v: Vec<u8> = Vec::with_capacity(cap);
                let (cap, at) = (v.capacity(), v.as_ptr() as usize);
                pool.give(v, budget);
                if cap >= POOLED_FROM_BYTES && cap <= budget {
                    model.push((cap, at));
                    model.sort_by_key(|m| std::cmp::Reverse(m.0));
                    while model.iter().map(|m| m.0).sum::<usize>() > budget {
                        model.pop();
                    }
                }
                assert_eq!(pool.bytes(), model.iter().map(|m| m.0).sum::<usize>());
                assert!(pool.bytes() <= budget);
                let want = (1 + rng.below(100)) * MIB;
                let fit = model
                    .iter()
                    .filter(|m| m.0 >= want && want >= POOLED_FROM_BYTES)
                    .min_by_key(|m| m.0)
                    .copied();
                match (pool.take(want), fit) {
                    (Some(v), Some((cap, at))) => {
                        assert_eq!((v.capacity(), v.as_ptr() as usize, v.len()), (cap, at, 0));
                        model.retain(|m| m.1 != at);
                    }
                    (None, None) => {}
                    (got, fit) => panic!("took {:?}, expected {fit:?}", got.map(|v| v.capacity())),
                }
            }
            pool.release();
            assert_eq!(pool.bytes(), 0);
        }
    }
}
