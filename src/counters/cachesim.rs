//! Cache simulator for the trace backend's `--trace memory`: effective addresses in, bytes
//! per memory level out.
//!
//! The model:
//! - set-associative levels (any number of sets; set = line number mod sets), LRU or tree
//!   pseudo-LRU replacement (the tree is padded to a power of two and never picks a missing way,
//!   so 12-way PLRU works);
//! - write-back, write-allocate; a store that misses fetches the line first (read for ownership);
//! - private levels (one instance per core, created when a core first accesses) and shared ones;
//! - inclusive last level (an eviction there back-invalidates every upper copy; a dirty upper copy
//!   makes the victim dirty) or non-inclusive (fills go into every level, no back-invalidation);
//! - non-temporal stores bypass the caches: they invalidate the line everywhere (a dirty copy is
//!   written back to DRAM) and their bytes count as DRAM traffic;
//! - software prefetches fill like loads (counted in the hits and misses too);
//! - multi-core coherence, simply: a store invalidates other cores' private copies and a load that
//!   misses its core's private levels cleans other cores' dirty copies; either way a dirty copy is
//!   written back to the first shared level (DRAM if none);
//! - hardware prefetchers are NOT modelled (reports must say so).
//!
//! Traffic per level is the traffic across the boundary above it, as the cache-aware roofline
//! uses it and as the hardware events count it: `bytes["l2"]` = (lines filled into L1 + lines
//! written back from L1) × line size, whether L2 hit or got the line from further down;
//! `bytes["dram"]` = (lines filled into the last level + its write-backs) × line size +
//! non-temporal store bytes.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::machine::{MachineModel, Platform};

/// What an instruction does to memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A read (fills the line on a miss).
    Load,
    /// A write (write-allocate: fills the line on a miss, marks it dirty).
    Store,
    /// Non-temporal store (`movnt*`): bypasses the caches, counts to DRAM.
    NtStore,
    /// Software prefetch: fills like a load.
    Prefetch,
}

/// Which line of a set a miss evicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replacement {
    /// Least recently used.
    #[default]
    Lru,
    /// Tree pseudo-LRU (what most L1/L2 caches implement).
    TreePlru,
}

/// Whether a level is one cache per core or one for the whole machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// One instance per core.
    Private,
    /// One instance for all cores.
    Shared,
}

/// Geometry and policy of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelConfig {
    /// `L1`, `L2`, …: lower-cased, it keys the traffic into this level.
    pub name: String,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Associativity (lines per set).
    pub ways: u32,
    /// Line size in bytes (a power of two).
    pub line_bytes: u32,
    /// Which line a miss evicts.
    pub replacement: Replacement,
    /// One per core or one shared.
    pub sharing: Sharing,
}

/// Largest simulated level: the simulator keeps 16 bytes of state per line.
pub const MAX_LEVEL_BYTES: u64 = 1 << 30;
pub const MAX_WAYS: u32 = 64;
/// Private instances are created per core id; ids at or above this are refused.
pub const MAX_CORES: usize = 4096;

impl LevelConfig {
    /// A level with 64-byte lines and LRU; L1 and L2 private, further levels shared.
    pub fn new(name: impl Into<String>, size_bytes: u64, ways: u32) -> LevelConfig {
        let name = name.into();
        let sharing = if matches!(name.to_ascii_lowercase().as_str(), "l1" | "l2") {
            Sharing::Private
        } else {
            Sharing::Shared
        };
        LevelConfig {
            name,
            size_bytes,
            ways,
            line_bytes: 64,
            replacement: Replacement::Lru,
            sharing,
        }
    }

    /// This level with replacement policy `r`.
    pub fn with_replacement(mut self, r: Replacement) -> LevelConfig {
        self.replacement = r;
        self
    }

    /// This level with sharing `s`.
    pub fn with_sharing(mut self, s: Sharing) -> LevelConfig {
        self.sharing = s;
        self
    }

    /// This level with lines of `line_bytes`.
    pub fn with_line(mut self, line_bytes: u32) -> LevelConfig {
        self.line_bytes = line_bytes;
        self
    }

    /// Sets: size over ways × line.
    pub fn sets(&self) -> u64 {
        self.size_bytes / (u64::from(self.ways) * u64::from(self.line_bytes))
    }

    /// Check the geometry; `origin` names where it came from in the error.
    pub fn validate(&self, origin: &str) -> Result<()> {
        let bad = |why: String| {
            Error::input(
                format!("{origin}: {} {why}", self.name),
                "levels are NAME=SIZE:WAYS[:LINE][:lru|plru][:private|shared], e.g. L1=48KiB:12,L2=2MiB:16,L3=8MiB:16",
            )
        };
        if self.ways == 0 || self.ways > MAX_WAYS {
            return Err(bad(format!("has {} ways (1 to {MAX_WAYS})", self.ways)));
        }
        if !self.line_bytes.is_power_of_two() || !(8..=4096).contains(&self.line_bytes) {
            return Err(bad(format!(
                "line of {} bytes is not a power of two from 8 to 4096",
                self.line_bytes
            )));
        }
        if self.size_bytes == 0 || self.size_bytes > MAX_LEVEL_BYTES {
            return Err(bad(format!("size {} is not between 1 byte and 1 GiB", self.size_bytes)));
        }
        let way_bytes = u64::from(self.ways) * u64::from(self.line_bytes);
        if !self.size_bytes.is_multiple_of(way_bytes) {
            return Err(bad(format!(
                "size {} is not a multiple of ways × line ({} × {})",
                self.size_bytes, self.ways, self.line_bytes
            )));
        }
        Ok(())
    }
}

/// Parse `--cache L1=48KiB:12,L2=2MiB:16,L3=8MiB:16`.
///
/// Each level is `NAME=SIZE:WAYS` followed by optional fields in any order: a line size
/// (`64`, `128B`; default 64), `lru` or `plru` (default lru), `private` or `shared` (default:
/// L1 and L2 private, others shared). Names must be L1, L2, … in order; all lines equal.
pub fn parse_cache_spec(spec: &str) -> Result<Vec<LevelConfig>> {
    parse_spec(spec).map(|(levels, _)| levels)
}

/// Parse `--cache` into a hierarchy: [`parse_cache_spec`], plus `inclusive` (or
/// `noninclusive`) as a field of the last level: whether the last level is inclusive of the
/// levels above it (default non-inclusive).
pub fn parse_cache_hierarchy(spec: &str) -> Result<CacheHierarchy> {
    let (levels, inclusive) = parse_spec(spec)?;
    Ok(CacheHierarchy::new(levels)?.with_inclusive_llc(inclusive))
}

fn parse_spec(spec: &str) -> Result<(Vec<LevelConfig>, bool)> {
    let hint = "use e.g. --cache L1=48KiB:12,L2=2MiB:16,L3=8MiB:16:inclusive (optional fields: line size, lru|plru, private|shared; inclusive|noninclusive on the last level)";
    let bad = |why: String| Error::input(format!("--cache '{spec}': {why}"), hint);
    let mut levels = Vec::new();
    let mut inclusive = false;
    let count = spec.split(',').count();
    for (i, part) in spec.split(',').map(str::trim).enumerate() {
        let Some((name, geometry)) = part.split_once('=') else {
            return Err(bad(format!("'{part}' is not NAME=SIZE:WAYS")));
        };
        let name = name.trim();
        let expected = format!("l{}", i + 1);
        if !name.eq_ignore_ascii_case(&expected) {
            return Err(bad(format!("level {} is named '{name}', expected L{}", i + 1, i + 1)));
        }
        let mut fields = geometry.split(':').map(str::trim);
        let size = fields.next().unwrap_or("");
        let size = crate::util::parse_bytes(size).map_err(|_| bad(format!("'{size}' is not a size")))?;
        let ways = fields.next().ok_or_else(|| bad(format!("{name} has no ways (SIZE:WAYS)")))?;
        let ways: u32 = ways.parse().map_err(|_| bad(format!("'{ways}' is not a number of ways")))?;
        let mut level = LevelConfig::new(format!("L{}", i + 1), size, ways);
        for f in fields {
            match f.to_ascii_lowercase().as_str() {
                "lru" => level.replacement = Replacement::Lru,
                "plru" => level.replacement = Replacement::TreePlru,
                "private" => level.sharing = Sharing::Private,
                "shared" => level.sharing = Sharing::Shared,
                incl @ ("inclusive" | "noninclusive" | "non-inclusive") => {
                    if i + 1 != count {
                        return Err(bad(format!(
                            "'{f}' on {name}: inclusion is a property of the last level (L{count})"
                        )));
                    }
                    inclusive = incl == "inclusive";
                }
                other => {
                    let line = crate::util::parse_bytes(other).map_err(|_| bad(format!("unknown field '{f}' in {name}")))?;
                    level.line_bytes = u32::try_from(line).map_err(|_| bad(format!("line size '{f}' is too large")))?;
                }
            }
        }
        level.validate("--cache")?;
        levels.push(level);
    }
    check_levels(&levels, "--cache")?;
    if inclusive && levels.len() < 2 {
        return Err(bad("an inclusive last level needs a level above it".to_string()));
    }
    Ok((levels, inclusive))
}

fn check_levels(levels: &[LevelConfig], origin: &str) -> Result<()> {
    if levels.is_empty() {
        return Err(Error::input(format!("{origin}: no cache levels"), "give at least L1"));
    }
    if levels.len() > 8 {
        return Err(Error::input(format!("{origin}: {} cache levels", levels.len()), "at most 8"));
    }
    let line = levels[0].line_bytes;
    for l in levels {
        l.validate(origin)?;
        if l.line_bytes != line {
            return Err(Error::input(
                format!("{origin}: {} has {}-byte lines but L1 has {line}", l.name, l.line_bytes),
                "all levels must use one line size",
            ));
        }
    }
    if let Some(i) = levels
        .windows(2)
        .position(|w| w[0].sharing == Sharing::Shared && w[1].sharing == Sharing::Private)
    {
        return Err(Error::input(
            format!("{origin}: {} is private below the shared {}", levels[i + 1].name, levels[i].name),
            "private levels come first",
        ));
    }
    Ok(())
}

/// One instance of one level: tags, dirty bits and replacement state.
#[derive(Debug, Clone)]
struct CacheArray {
    sets: u64,
    ways: usize,
    replacement: Replacement,
    /// (set, way) → line and state; a set's ways are adjacent in memory, so a lookup touches
    /// one run of host cache lines.
    slots: Vec<Slot>,
    /// Tree PLRU: one bit word per set; bit i is node i of the tree (1 = victim on the right).
    tree: Vec<u64>,
    /// Ways padded to a power of two for the tree.
    tree_leaves: usize,
}

const INVALID: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Line number held; `INVALID` when empty.
    tag: u64,
    /// Bit 0: dirty.
    meta: u64,
}

impl Slot {
    #[inline]
    fn dirty(&self) -> bool {
        self.meta & 1 != 0
    }
    #[inline]
    fn set_dirty(&mut self, d: bool) {
        self.meta = (self.meta & !1) | u64::from(d);
    }
}

impl CacheArray {
    fn new(cfg: &LevelConfig) -> CacheArray {
        let sets = cfg.sets();
        let ways = cfg.ways as usize;
        let n = (sets as usize) * ways;
        let plru = cfg.replacement == Replacement::TreePlru;
        CacheArray {
            sets,
            ways,
            replacement: cfg.replacement,
            slots: vec![Slot { tag: INVALID, meta: 0 }; n],
            tree: if plru { vec![0; sets as usize] } else { Vec::new() },
            tree_leaves: ways.next_power_of_two(),
        }
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        // Power-of-two set counts (nearly all caches) avoid a 64-bit division per lookup.
        if self.sets.is_power_of_two() {
            (line & (self.sets - 1)) as usize
        } else {
            (line % self.sets) as usize
        }
    }

    /// Slot index of `line`, without touching replacement state.
    #[inline]
    fn find(&self, line: u64) -> Option<usize> {
        let base = self.set_of(line) * self.ways;
        self.slots[base..base + self.ways]
            .iter()
            .position(|s| s.tag == line)
            .map(|w| base + w)
    }

    /// Mark a slot most recently used.
    #[inline]
    fn touch(&mut self, slot: usize) {
        match self.replacement {
            Replacement::Lru => {
                // Ways are kept most recent first (as cachegrind does): a hit, usually on one
                // of the first ways, moves its line to the front; the victim is the last way.
                let way = slot % self.ways;
                if way != 0 {
                    // (A loop over at most a set's ways: `copy_within` called `memmove`,
                    // which cost more than the move itself.)
                    let line = self.slots[slot];
                    let base = slot - way;
                    for i in (base..slot).rev() {
                        self.slots[i + 1] = self.slots[i];
                    }
                    self.slots[base] = line;
                }
            }
            Replacement::TreePlru => {
                let set = slot / self.ways;
                let way = slot % self.ways;
                // Walk from the root to the leaf, pointing every node away from `way`.
                let mut bits = self.tree[set];
                let mut node = 0usize;
                let mut lo = 0usize;
                let mut span = self.tree_leaves;
                while span > 1 {
                    span /= 2;
                    let right = way >= lo + span;
                    if right {
                        bits &= !(1u64 << node);
                        lo += span;
                        node = 2 * node + 2;
                    } else {
                        bits |= 1u64 << node;
                        node = 2 * node + 1;
                    }
                }
                self.tree[set] = bits;
            }
        }
    }

    /// The way to evict in `set`: an empty way first, else the policy's choice.
    fn victim_way(&self, set: usize) -> usize {
        let base = set * self.ways;
        if self.replacement == Replacement::Lru {
            // empty ways are always at the end, behind the least recently used line
            return self.ways - 1;
        }
        let set_slots = &self.slots[base..base + self.ways];
        if let Some(w) = set_slots.iter().position(|s| s.tag == INVALID) {
            return w;
        }
        match self.replacement {
            Replacement::Lru => self.ways - 1,
            Replacement::TreePlru => {
                let bits = self.tree[set];
                let mut node = 0usize;
                let mut lo = 0usize;
                let mut span = self.tree_leaves;
                while span > 1 {
                    span /= 2;
                    // A right subtree lying wholly beyond the real ways is never chosen.
                    let right = bits & (1u64 << node) != 0 && lo + span < self.ways;
                    if right {
                        lo += span;
                        node = 2 * node + 2;
                    } else {
                        node = 2 * node + 1;
                    }
                }
                lo
            }
        }
    }

    /// Insert `line` (not present); returns the evicted line and whether it was dirty.
    fn insert(&mut self, line: u64, dirty: bool) -> Option<(u64, bool)> {
        let set = self.set_of(line);
        let slot = set * self.ways + self.victim_way(set);
        let old = self.slots[slot];
        let evicted = (old.tag != INVALID).then_some((old.tag, old.dirty()));
        self.slots[slot] = Slot {
            tag: line,
            meta: u64::from(dirty),
        };
        self.touch(slot);
        evicted
    }

    /// Remove `line` if present; returns whether it was dirty.
    fn invalidate(&mut self, line: u64) -> Option<bool> {
        let slot = self.find(line)?;
        let d = self.slots[slot].dirty();
        self.slots[slot] = Slot { tag: INVALID, meta: 0 };
        if self.replacement == Replacement::Lru {
            // keep the empty way behind the valid ones
            let end = slot - slot % self.ways + self.ways;
            self.slots[slot..end].rotate_left(1);
        }
        Some(d)
    }
}

/// Counters of one level, summed over its instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelCounts {
    /// Demand lookups (loads, stores, prefetches from above) that found the line.
    pub hits: u64,
    pub misses: u64,
    /// Lines written into this level from above (dirty evictions, coherence write-backs).
    pub writebacks_in: u64,
    /// Lines this level wrote back to the level below (or DRAM).
    pub writebacks_out: u64,
    /// Lines filled into this level (each miss fills one).
    pub fills: u64,
}

/// Per-level figures after a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// Line size in bytes of the hierarchy.
    pub line_bytes: u32,
    /// Level name (`L1`, …) and its counters, top first.
    pub levels: Vec<(String, LevelCounts)>,
    /// Bytes across the boundary above each level below L1 (`l2`, `l3`, …) and `dram`.
    pub bytes: BTreeMap<String, u64>,
    /// Bytes of non-temporal stores (included in `bytes["dram"]`).
    pub nt_store_bytes: u64,
}

impl Traffic {
    /// The byte levels as a report's `bytes` map.
    pub fn report_bytes(&self) -> crate::schema::Bytes {
        self.bytes.iter().map(|(k, v)| (k.clone(), *v as f64)).collect()
    }

    /// The counters of the level named `name` (case-insensitive).
    pub fn level(&self, name: &str) -> Option<LevelCounts> {
        self.levels.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, c)| *c)
    }
}

#[derive(Debug, Clone)]
struct Level {
    cfg: LevelConfig,
    /// Private: indexed by core id, created on first use. Shared: one instance at index 0.
    instances: Vec<Option<CacheArray>>,
    counts: LevelCounts,
}

impl Level {
    #[inline]
    fn index(&self, core: usize) -> usize {
        if self.cfg.sharing == Sharing::Private { core } else { 0 }
    }

    /// The instance `core` uses (created at its first use: a private level of a core that
    /// never runs costs no memory).
    #[inline]
    fn array(&mut self, core: usize) -> &mut CacheArray {
        let i = self.index(core);
        if self.instances.len() <= i {
            self.grow(i);
        }
        let cfg = &self.cfg;
        self.instances[i].get_or_insert_with(|| CacheArray::new(cfg))
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        self.instances.resize_with(i + 1, || None);
    }
}

/// A cache hierarchy fed with effective addresses.
#[derive(Debug, Clone)]
pub struct CacheHierarchy {
    levels: Vec<Level>,
    inclusive: bool,
    line_shift: u32,
    /// Levels `0..first_shared` are private.
    first_shared: usize,
    /// Cores that have accessed so far (coherence work is skipped while there is one).
    cores_seen: usize,
    dram_fills: u64,
    dram_writebacks: u64,
    nt_store_bytes: u64,
}

impl CacheHierarchy {
    /// A non-inclusive hierarchy of `levels`, top (L1) first.
    pub fn new(levels: Vec<LevelConfig>) -> Result<CacheHierarchy> {
        check_levels(&levels, "cache hierarchy")?;
        let line_shift = levels[0].line_bytes.trailing_zeros();
        let first_shared = levels.iter().position(|l| l.sharing == Sharing::Shared).unwrap_or(levels.len());
        Ok(CacheHierarchy {
            levels: levels
                .into_iter()
                .map(|cfg| Level {
                    cfg,
                    instances: Vec::new(),
                    counts: LevelCounts::default(),
                })
                .collect(),
            inclusive: false,
            line_shift,
            first_shared,
            cores_seen: 0,
            dram_fills: 0,
            dram_writebacks: 0,
            nt_store_bytes: 0,
        })
    }

    /// Whether the last level is inclusive of the levels above it.
    pub fn with_inclusive_llc(mut self, inclusive: bool) -> CacheHierarchy {
        self.inclusive = inclusive;
        self
    }

    /// The data/unified caches of a machine model; a level is private when only one core's
    /// threads share it. Inclusion comes from the platform's `llc_inclusive` (non-inclusive when
    /// the platform does not say).
    pub fn from_machine(model: &MachineModel) -> Result<CacheHierarchy> {
        let mut caches: Vec<_> = model.caches.iter().filter(|c| c.kind != "instruction").collect();
        caches.sort_by_key(|c| c.level);
        let threads_per_core = (model.threads / model.cores.max(1)).max(1);
        let levels: Vec<LevelConfig> = caches
            .iter()
            .map(|c| {
                // CPUID and sysfs report the real geometry; keep the size consistent with it.
                let ways = c.ways.max(1);
                let line = c.line_bytes.max(1);
                let sets = c.size_bytes / (u64::from(ways) * u64::from(line));
                LevelConfig {
                    name: format!("L{}", c.level),
                    size_bytes: sets.max(1) * u64::from(ways) * u64::from(line),
                    ways,
                    line_bytes: line,
                    replacement: Replacement::Lru,
                    sharing: if c.shared_by_threads <= threads_per_core {
                        Sharing::Private
                    } else {
                        Sharing::Shared
                    },
                }
            })
            .collect();
        let origin = format!("machine model ({})", model.microarchitecture);
        check_levels(&levels, &origin)?;
        let inclusive = Platform::load(&model.microarchitecture)
            .ok()
            .and_then(|p| p.llc_inclusive)
            .unwrap_or(false);
        Ok(CacheHierarchy::new(levels)?.with_inclusive_llc(inclusive))
    }

    /// Line size in bytes (every level's).
    pub fn line_bytes(&self) -> u32 {
        1 << self.line_shift
    }

    /// An access by core 0.
    #[inline]
    pub fn access(&mut self, addr: u64, size: u32, kind: AccessKind) {
        self.access_on(0, addr, size, kind);
    }

    /// An access by `core` (a dense id: 0, 1, …; it selects the private instances). Accesses
    /// spanning lines touch each line once; `size == 0` does nothing.
    pub fn access_on(&mut self, core: usize, addr: u64, size: u32, kind: AccessKind) {
        if size == 0 {
            return;
        }
        let core = core.min(MAX_CORES - 1);
        if core >= self.cores_seen {
            self.cores_seen = core + 1;
        }
        let end = addr.saturating_add(u64::from(size) - 1);
        let first = addr >> self.line_shift;
        let last = end >> self.line_shift;
        for line in first..=last {
            match kind {
                AccessKind::Load | AccessKind::Prefetch => {
                    if !self.l1_mru_hit(core, line, false) {
                        self.access_line(core, line, false);
                    }
                }
                AccessKind::Store => {
                    if !self.l1_mru_hit(core, line, true) {
                        self.access_line(core, line, true);
                    }
                }
                AccessKind::NtStore => {
                    let lo = addr.max(line << self.line_shift);
                    let hi = end.min(((line + 1) << self.line_shift) - 1);
                    self.nt_store_line(core, line, hi - lo + 1);
                }
            }
        }
    }

    /// The common case of a stream, decided without the general path: `line` is the most
    /// recently used of its set in `core`'s first level (LRU), so the access hits there and
    /// changes no order. Exactly what `access_line` does for it (one hit; a store marks it
    /// dirty), taken only where `access_line` would do nothing else: no coherence action (one
    /// core, or a load with the first level private).
    #[inline]
    fn l1_mru_hit(&mut self, core: usize, line: u64, store: bool) -> bool {
        if self.cores_seen > 1 && (store || self.first_shared == 0) {
            return false;
        }
        let level = &mut self.levels[0];
        let i = level.index(core);
        let Some(Some(arr)) = level.instances.get_mut(i) else {
            return false;
        };
        if arr.replacement != Replacement::Lru {
            return false;
        }
        let mru = arr.set_of(line) * arr.ways;
        if arr.slots[mru].tag != line {
            return false;
        }
        if store {
            arr.slots[mru].set_dirty(true);
        }
        level.counts.hits += 1;
        true
    }

    fn access_line(&mut self, core: usize, line: u64, store: bool) {
        let n = self.levels.len();
        if store && self.cores_seen > 1 {
            self.invalidate_other_private(core, line);
        }
        let mut source = n;
        for k in 0..n {
            if k == self.first_shared && self.cores_seen > 1 {
                self.clean_other_private(core, line);
            }
            let arr = self.levels[k].array(core);
            if let Some(slot) = arr.find(line) {
                arr.touch(slot);
                self.levels[k].counts.hits += 1;
                source = k;
                break;
            }
            self.levels[k].counts.misses += 1;
        }
        if source == n {
            self.dram_fills += 1;
        }
        for k in (0..source).rev() {
            self.levels[k].counts.fills += 1;
            if let Some((victim, dirty)) = self.levels[k].array(core).insert(line, false) {
                self.evict(core, k, victim, dirty);
            }
        }
        if store {
            let arr = self.levels[0].array(core);
            if let Some(slot) = arr.find(line) {
                arr.slots[slot].set_dirty(true);
            }
        }
    }

    /// `victim` left level `k` of `core`'s path; write it back if dirty, back-invalidate if the
    /// last level is inclusive.
    fn evict(&mut self, core: usize, k: usize, victim: u64, mut dirty: bool) {
        let n = self.levels.len();
        if self.inclusive && k == n - 1 && n > 1 {
            for upper in 0..k {
                for inst in self.levels[upper].instances.iter_mut().flatten() {
                    if let Some(d) = inst.invalidate(victim) {
                        dirty |= d;
                    }
                }
            }
        }
        if dirty {
            self.write_back(core, k, victim);
        }
    }

    /// Level `k` writes `line` back to level `k + 1` (or DRAM).
    fn write_back(&mut self, core: usize, k: usize, line: u64) {
        self.levels[k].counts.writebacks_out += 1;
        let below = k + 1;
        if below == self.levels.len() {
            self.dram_writebacks += 1;
            return;
        }
        self.write_into(core, below, line);
    }

    /// A dirty line arrives at level `k` from above.
    fn write_into(&mut self, core: usize, k: usize, line: u64) {
        self.levels[k].counts.writebacks_in += 1;
        let arr = self.levels[k].array(core);
        if let Some(slot) = arr.find(line) {
            arr.slots[slot].set_dirty(true);
            arr.touch(slot);
        } else if let Some((victim, dirty)) = arr.insert(line, true) {
            self.evict(core, k, victim, dirty);
        }
    }

    /// Another core stores to `line`: drop other cores' private copies; dirty ones are written
    /// back to the first shared level (or DRAM).
    fn invalidate_other_private(&mut self, core: usize, line: u64) {
        for other in 0..self.cores_seen {
            if other == core {
                continue;
            }
            let mut dirty = false;
            for k in 0..self.first_shared {
                if let Some(Some(inst)) = self.levels[k].instances.get_mut(other) {
                    dirty |= inst.invalidate(line).unwrap_or(false);
                }
            }
            if dirty {
                self.coherence_write_back(other, line);
            }
        }
    }

    /// A load missed `core`'s private levels: other cores' dirty copies are written back first.
    fn clean_other_private(&mut self, core: usize, line: u64) {
        for other in 0..self.cores_seen {
            if other == core {
                continue;
            }
            let mut dirty = false;
            for k in 0..self.first_shared {
                if let Some(Some(inst)) = self.levels[k].instances.get_mut(other)
                    && let Some(slot) = inst.find(line)
                {
                    dirty |= inst.slots[slot].dirty();
                    inst.slots[slot].set_dirty(false);
                }
            }
            if dirty {
                self.coherence_write_back(other, line);
            }
        }
    }

    fn coherence_write_back(&mut self, from_core: usize, line: u64) {
        if self.first_shared == 0 {
            return;
        }
        self.write_back(from_core, self.first_shared - 1, line);
    }

    /// A non-temporal store of `bytes` into `line`: every cached copy is invalidated (a dirty one
    /// written back to DRAM), and the bytes go to DRAM.
    fn nt_store_line(&mut self, core: usize, line: u64, bytes: u64) {
        let mut dirty = false;
        for k in 0..self.levels.len() {
            let level = &mut self.levels[k];
            if level.cfg.sharing == Sharing::Private {
                for inst in level.instances.iter_mut().flatten() {
                    dirty |= inst.invalidate(line).unwrap_or(false);
                }
            } else {
                dirty |= level.array(core).invalidate(line).unwrap_or(false);
            }
        }
        if dirty {
            self.dram_writebacks += 1;
        }
        self.nt_store_bytes += bytes;
    }

    /// Bytes per level and the counters so far.
    pub fn traffic(&self) -> Traffic {
        let line = u64::from(self.line_bytes());
        let mut bytes = BTreeMap::new();
        for k in 1..self.levels.len() {
            let above = &self.levels[k - 1].counts;
            bytes.insert(
                self.levels[k].cfg.name.to_ascii_lowercase(),
                (above.fills + above.writebacks_out) * line,
            );
        }
        bytes.insert(
            "dram".to_string(),
            (self.dram_fills + self.dram_writebacks) * line + self.nt_store_bytes,
        );
        Traffic {
            line_bytes: self.line_bytes(),
            levels: self.levels.iter().map(|l| (l.cfg.name.clone(), l.counts)).collect(),
            bytes,
            nt_store_bytes: self.nt_store_bytes,
        }
    }

    /// The traffic once every dirty line is written back, as when the program ends (without
    /// this, up to a cache's worth of write-backs is missing), leaving `self` as it is.
    pub fn traffic_at_exit(&self) -> Traffic {
        let mut end = self.clone();
        end.flush();
        end.traffic()
    }

    /// Bytes per level (`l2`, `l3`, …, `dram`) at the program's end, for a report's `bytes`.
    pub fn bytes_per_level(&self) -> Vec<(String, f64)> {
        self.traffic_at_exit().bytes.into_iter().map(|(k, v)| (k, v as f64)).collect()
    }

    /// Forget all counters (cache contents stay): to count only a region after a warm-up.
    pub fn reset_counts(&mut self) {
        for l in &mut self.levels {
            l.counts = LevelCounts::default();
        }
        self.dram_fills = 0;
        self.dram_writebacks = 0;
        self.nt_store_bytes = 0;
    }

    /// Write back every dirty line (as at the end of a program), counting the traffic.
    pub fn flush(&mut self) {
        for k in 0..self.levels.len() {
            let n_inst = self.levels[k].instances.len();
            for i in 0..n_inst {
                let dirty_lines: Vec<u64> = match &mut self.levels[k].instances[i] {
                    Some(inst) => {
                        let mut v = Vec::new();
                        for slot in inst.slots.iter_mut() {
                            if slot.dirty() {
                                slot.set_dirty(false);
                                v.push(slot.tag);
                            }
                        }
                        v
                    }
                    None => continue,
                };
                for line in dirty_lines {
                    self.write_back(i, k, line);
                }
            }
        }
    }

    /// Each level's geometry and policy, top first.
    pub fn levels(&self) -> impl Iterator<Item = &LevelConfig> {
        self.levels.iter().map(|l| &l.cfg)
    }

    /// Whether the last level is inclusive (an eviction there invalidates the copies above).
    pub fn inclusive_llc(&self) -> bool {
        self.inclusive
    }

    /// The provenance note of simulated traffic, naming what was simulated: each level's size,
    /// ways, replacement policy and sharing, and the last level's inclusion.
    pub fn note(&self) -> String {
        let levels: Vec<String> = self
            .levels
            .iter()
            .map(|l| {
                let c = &l.cfg;
                format!(
                    "{} {} {}-way {} {}",
                    c.name,
                    crate::schema::units::fmt_bytes(c.size_bytes as f64),
                    c.ways,
                    match c.replacement {
                        Replacement::Lru => "LRU",
                        Replacement::TreePlru => "tree-PLRU",
                    },
                    match c.sharing {
                        Sharing::Private => "private per thread",
                        Sharing::Shared => "shared",
                    }
                )
            })
            .collect();
        format!(
            "cache traffic simulated ({}; {}-byte lines; {} last level; write-back, write-allocate); hardware prefetchers not modelled",
            levels.join(", "),
            self.line_bytes(),
            if self.inclusive { "inclusive" } else { "non-inclusive" }
        )
    }
}

#[cfg(test)]
mod tests;

/// The trace backend feeds effective addresses straight into the simulator (`--trace memory`).
#[cfg(feature = "trace")]
impl crate::counters::trace::AccessSink for CacheHierarchy {
    fn access(&mut self, addr: u64, size: u32, kind: crate::counters::trace::AccessKind) {
        crate::counters::trace::AccessSink::access_by(self, 0, addr, size, kind);
    }
    /// Each traced thread is a core of its own: its own instances of the private levels.
    fn access_by(&mut self, thread: usize, addr: u64, size: u32, kind: crate::counters::trace::AccessKind) {
        use crate::counters::trace::AccessKind as T;
        let k = match kind {
            T::Load => AccessKind::Load,
            T::Store => AccessKind::Store,
            T::NtStore => AccessKind::NtStore,
            T::Prefetch => AccessKind::Prefetch,
        };
        self.access_on(thread, addr, size, k);
    }
    fn bytes_per_level(&mut self) -> Vec<(String, f64)> {
        // (In place: a copy of a 32 MiB last level to flush costs 13–24 ms, longer than
        // tracing a small program's start-up; flushing twice changes nothing.)
        self.flush();
        self.traffic().bytes.into_iter().map(|(k, v)| (k, v as f64)).collect()
    }
    fn bytes_so_far(&self) -> Vec<(String, f64)> {
        self.traffic().bytes.into_iter().map(|(k, v)| (k, v as f64)).collect()
    }
    fn note(&self) -> Option<String> {
        Some(CacheHierarchy::note(self))
    }
}
